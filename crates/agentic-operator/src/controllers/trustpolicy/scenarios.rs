//! Trust policies in the SkillCard controller's real pass, against the fake API server and
//! an in-memory registry that counts what it is asked: the policies come from the watch
//! caches, as in the operator, and the signatures are cosign's legacy layout made with a key
//! of the test.

use std::sync::Arc;

use agentic_api::{
    Agent, AgentRun, ClusterSkillTrustPolicy, Gateway, SkillCard, SkillCardStatus,
    SkillTrustPolicy, VerificationState,
};
use agentic_core::conditions::find_condition;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::cards_in_scope;
use crate::caches::{Caches, Guarded};
use crate::context::Context;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::fake_registry::FakeRegistry;
use crate::controllers::scenario::{
    NS, caches_with, context_reading, listed_writer, object, pass, ready, ready_message,
    secret_meta, store_of,
};
use crate::controllers::watches::kind_cache;
use crate::controllers::{agent, agentrun, skillcard};

/// The repository every scenario's skill is pushed to.
const REPOSITORY: &str = "skills/pdf";

/// Registers the watch caches of the scenario's namespace with these policies in them.
fn watch_policies(
    ctx: &Context,
    cluster: Vec<ClusterSkillTrustPolicy>,
    namespaced: Vec<SkillTrustPolicy>,
) {
    ctx.register_caches(Some(NS), policy_caches(cluster, namespaced));
}

/// Watch caches holding these policies, the other kinds' not watched.
fn policy_caches(
    cluster: Vec<ClusterSkillTrustPolicy>,
    namespaced: Vec<SkillTrustPolicy>,
) -> Caches {
    caches_with(vec![
        kind_cache(store_of(cluster)),
        kind_cache(store_of(namespaced)),
    ])
}

/// The policy fields of a manifest: these images, in `mode`, with `spec` merged in.
fn policy_spec(mode: &str, extra: Value) -> Value {
    let mut spec = json!({"images": [format!("*/{REPOSITORY}")], "mode": mode});
    for (field, value) in extra.as_object().into_iter().flatten() {
        spec[field] = value.clone();
    }
    spec
}

fn cluster_policy(name: &str, spec: Value) -> ClusterSkillTrustPolicy {
    let mut policy: ClusterSkillTrustPolicy = object(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": spec,
    }));
    policy.metadata.namespace = None;
    policy
}

fn namespaced_policy(name: &str, spec: Value) -> SkillTrustPolicy {
    object(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": spec,
    }))
}

/// `keys` of a policy: the public key of `key`, inline.
fn keys_of(key: &rcgen::KeyPair) -> Value {
    json!({"keys": [{"pem": key.public_key_pem()}]})
}

/// A registry holding the skill image `skills/pdf:1`, a key, the fake API server and an
/// operator context reading both.
struct Scene {
    registry: FakeRegistry,
    /// The digest `skills/pdf:1` names.
    digest: String,
    key: rcgen::KeyPair,
    api: FakeApi,
    ctx: Arc<Context>,
}

impl Scene {
    /// An Agent `coder` on the card `card` with the Gateway `llm`, passed once and Ready;
    /// then its run `fix-bug`, passed once: the status that pass left.
    async fn agent_and_run(&self, card: &str) -> agentic_api::AgentRunStatus {
        let coder: Agent = object(json!({
            "metadata": {"name": "coder", "uid": "uid-agent-coder"},
            "spec": {
                "image": "registry.test/harness:1",
                "skillCards": [{"ref": card}],
                "gateways": [{"ref": "llm"}],
            },
        }));
        self.api.put(&coder);
        // Ready, as its controller leaves it once the endpoint answered.
        let gateway: Gateway = object(json!({
            "metadata": {"name": "llm"},
            "spec": {"provider": "openai", "model": {"name": "m", "contextWindow": 128_000}},
            "status": {
                "observedGeneration": 1,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "ConnectionVerified",
                    "message": "", "observedGeneration": 1,
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }],
            },
        }));
        self.api.put(&gateway);
        pass::<Agent, _>(&self.api, &self.ctx, "coder", agent::reconcile)
            .await
            .expect("an Agent pass");
        let coder: Agent = self.api.get(NS, "coder").expect("the Agent");
        let agent_status = coder.status.expect("a status");
        assert_eq!(
            ready(&agent_status.conditions).0,
            "True",
            "{agent_status:?}"
        );
        let run: AgentRun = object(json!({
            "metadata": {"name": "fix-bug", "uid": "uid-run-fix-bug"},
            "spec": {"agentRef": "coder"},
        }));
        self.api.put(&run);
        run_pass(self).await
    }

    /// The skill pushed, and signed with the scene's key when `signed`.
    async fn new(signed: bool) -> Scene {
        let registry = FakeRegistry::start().await;
        let digest = push_skill(&registry, "a");
        let key = rcgen::KeyPair::generate().expect("a key");
        if signed {
            registry.sign(REPOSITORY, &digest, &key);
        }
        let api = FakeApi::default();
        let ctx = context_reading(&api, registry.addr());
        Scene {
            registry,
            digest,
            key,
            api,
            ctx,
        }
    }

    /// The cluster policy `signed` in `mode`, requiring the scene's key, with `extra`
    /// fields.
    fn policy(&self, mode: &str, extra: Value) -> ClusterSkillTrustPolicy {
        let mut spec = policy_spec(mode, keys_of(&self.key));
        for (field, value) in extra.as_object().into_iter().flatten() {
            spec[field] = value.clone();
        }
        cluster_policy("signed", spec)
    }

    /// [`Scene::policy`] and `namespaced` policies in the watch caches.
    fn watch(&self, mode: &str, extra: Value, namespaced: Vec<SkillTrustPolicy>) {
        watch_policies(&self.ctx, vec![self.policy(mode, extra)], namespaced);
    }

    /// The card `pdf` on `skills/pdf:1` stored, and its status after one pass.
    async fn card(&self) -> SkillCardStatus {
        self.api.put(&image_card("pdf", &self.registry));
        card_pass(&self.api, &self.ctx, "pdf").await
    }
}

/// Pushes a `pdf-tools` skill whose description names `variant` to `skills/pdf:1`; its
/// digest.
fn push_skill(registry: &FakeRegistry, variant: &str) -> String {
    let parent = tempfile::tempdir().expect("a scratch directory");
    let dir = parent.path().join("pdf-tools");
    std::fs::create_dir_all(&dir).expect("a skill directory");
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: pdf-tools\ndescription: Splits PDFs, variant {variant}.\n---\n# PDF\n"),
    )
    .expect("SKILL.md");
    let packed = agentic_oci::pack_skills(&[dir]).expect("the skill packs");
    registry.push(REPOSITORY, "1", &packed)
}

fn image_card(name: &str, registry: &FakeRegistry) -> SkillCard {
    object(json!({
        "metadata": {"name": name, "uid": format!("uid-card-{name}")},
        "spec": {"image": format!("{}/{REPOSITORY}:1", registry.addr())},
    }))
}

async fn card_pass(api: &FakeApi, ctx: &Arc<Context>, name: &str) -> SkillCardStatus {
    pass::<SkillCard, _>(api, ctx, name, skillcard::reconcile)
        .await
        .expect("a card pass");
    let card: SkillCard = api.get(NS, name).expect("the card");
    card.status.expect("a status")
}

fn verified(status: &SkillCardStatus) -> (String, String) {
    let verified = find_condition(&status.conditions, "Verified").expect("a Verified condition");
    (verified.status.clone(), verified.reason.clone())
}

/// The Events the passes posted, as (type, reason).
fn events(api: &FakeApi) -> Vec<(String, String)> {
    api.writes()
        .iter()
        .filter(|w| w.path.ends_with("/events"))
        .filter_map(|w| serde_json::from_str::<Value>(&w.body).ok())
        .map(|event| {
            (
                event["type"].as_str().unwrap_or_default().to_string(),
                event["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_unsigned_image_under_an_enforce_policy_is_not_ready() {
    let scene = Scene::new(false).await;
    scene.watch("Enforce", json!({}), vec![]);
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "Unverified".into())
    );
    assert!(
        ready_message(&status.conditions).contains("ClusterSkillTrustPolicy/signed"),
        "names the policy: {}",
        ready_message(&status.conditions)
    );
    assert_eq!(verified(&status), ("False".into(), "Unsigned".into()));
    let verification = status.verification.expect("status.verification");
    assert_eq!(verification.state, VerificationState::Unverified);
    // The signatures of this digest were looked for.
    let looked = scene.registry.signature_requests(&scene.digest);
    assert!(!looked.is_empty(), "{:?}", scene.registry.requests());
}

#[tokio::test]
async fn an_unsigned_image_under_a_warn_policy_is_ready_with_a_warning_event() {
    let scene = Scene::new(false).await;
    scene.watch("Warn", json!({}), vec![]);
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "SkillValid".into())
    );
    assert_eq!(verified(&status), ("False".into(), "Unsigned".into()));
    let events = events(&scene.api);
    assert!(
        events.contains(&("Warning".into(), "Unsigned".into())),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_signed_image_is_verified_and_names_its_signer() {
    let scene = Scene::new(true).await;
    scene.watch("Enforce", json!({}), vec![]);
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "SkillValid".into())
    );
    assert_eq!(
        verified(&status),
        ("True".into(), "SignatureVerified".into())
    );
    let verification = status.verification.expect("status.verification");
    assert_eq!(verification.state, VerificationState::Verified);
    let key = agentic_trust::PublicKey::from_pem(&scene.key.public_key_pem(), "the key")
        .expect("a public key");
    assert_eq!(
        verification.signer.as_deref(),
        Some(key.fingerprint()),
        "{verification:?}"
    );
    assert_eq!(verification.policies, ["ClusterSkillTrustPolicy/signed"]);
}

#[tokio::test]
async fn a_revoked_digest_is_not_ready_even_when_signed() {
    let scene = Scene::new(true).await;
    scene.watch(
        "Enforce",
        json!({"revoked": {"digests": [scene.digest]}}),
        vec![],
    );
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "Revoked".into())
    );
    assert!(
        ready_message(&status.conditions).contains(&scene.digest),
        "{}",
        ready_message(&status.conditions)
    );
    assert_eq!(verified(&status), ("False".into(), "Revoked".into()));
}

#[tokio::test]
async fn a_namespaced_warn_policy_cannot_relax_the_clusters_enforce_policy() {
    let scene = Scene::new(false).await;
    let tenant_key = rcgen::KeyPair::generate().expect("a key");
    scene.watch(
        "Enforce",
        json!({}),
        vec![namespaced_policy(
            "relaxed",
            policy_spec("Warn", keys_of(&tenant_key)),
        )],
    );
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "Unverified".into()),
        "the cluster's Enforce holds"
    );
    let policies = status.verification.expect("status.verification").policies;
    for judged in [
        "ClusterSkillTrustPolicy/signed",
        &format!("SkillTrustPolicy/{NS}/relaxed"),
    ] {
        assert!(policies.iter().any(|p| p == judged), "{policies:?}");
    }
}

#[tokio::test]
async fn a_tag_moved_to_an_unsigned_digest_keeps_the_card_on_the_verified_one() {
    let scene = Scene::new(true).await;
    // The next tag refresh: a context whose resolutions are not fresh, as after the
    // refresh interval (or a restart), with the same policies.
    let (first, moved, later) = restarted_after_the_tag_moved(&scene).await;
    watch_policies(&later, vec![scene.policy("Enforce", json!({}))], vec![]);
    scene.api.clear_requests();
    let status = card_pass(&scene.api, &later, "pdf").await;
    keeps_verified_pin(&status, &first, &scene, &moved);
    let events = events(&scene.api);
    assert!(
        events.contains(&("Warning".into(), "NewPinRefused".into())),
        "{events:?}"
    );
}

/// Watch caches whose trust-policy watches have not listed (a restarted operator whose card
/// watch listed first, or whose trust CRDs are missing), with the writers that list them.
fn unlisted_policies() -> (
    Caches,
    Writer<Guarded<ClusterSkillTrustPolicy>>,
    Writer<Guarded<SkillTrustPolicy>>,
) {
    let cluster = Writer::<Guarded<ClusterSkillTrustPolicy>>::default();
    let namespaced = Writer::<Guarded<SkillTrustPolicy>>::default();
    let caches = caches_with(vec![
        kind_cache(cluster.as_reader()),
        kind_cache(namespaced.as_reader()),
    ]);
    (caches, cluster, namespaced)
}

/// Lists `policies` into a policy watch's writer, as its first list does.
fn list<K: kube::Resource<DynamicType = ()> + Clone>(
    writer: &mut Writer<Guarded<K>>,
    policies: Vec<K>,
) {
    writer.apply_watcher_event(&watcher::Event::Init);
    for policy in policies {
        writer.apply_watcher_event(&watcher::Event::InitApply(Guarded(Ok(policy))));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
}

/// A card verified on the scene's signed digest whose tag then moved to unsigned bytes, and
/// an operator context restarted since (nothing cached, policies not listed yet).
async fn restarted_after_the_tag_moved(scene: &Scene) -> (SkillCardStatus, String, Arc<Context>) {
    scene.watch("Enforce", json!({}), vec![]);
    let first = scene.card().await;
    assert_eq!(
        verified(&first),
        ("True".into(), "SignatureVerified".into())
    );
    let moved = push_skill(&scene.registry, "b");
    assert_ne!(moved, scene.digest);
    let restarted = context_reading(&scene.api, scene.registry.addr());
    (first, moved, restarted)
}

/// The card still Ready on the verified digest, `Verified` saying the moved one was refused.
fn keeps_verified_pin(
    status: &SkillCardStatus,
    first: &SkillCardStatus,
    scene: &Scene,
    moved: &str,
) {
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "SkillValid".into())
    );
    assert_eq!(status.resolved_image, first.resolved_image, "still pinned");
    assert!(
        status
            .resolved_image
            .as_deref()
            .is_some_and(|pin| pin.ends_with(&scene.digest)),
        "{status:?}"
    );
    assert_eq!(verified(status), ("True".into(), "NewPinRefused".into()));
    let message = &find_condition(&status.conditions, "Verified")
        .expect("Verified")
        .message;
    assert!(
        message.contains(moved) && message.contains(&scene.digest),
        "says which pin was kept and which refused: {message}"
    );
}

#[tokio::test]
async fn a_restart_while_the_tag_moved_keeps_the_verified_pin_when_the_policies_list_after_the_card()
 {
    let scene = Scene::new(true).await;
    let (first, moved, restarted) = restarted_after_the_tag_moved(&scene).await;
    let (caches, mut cluster, mut namespaced) = unlisted_policies();
    restarted.register_caches(Some(NS), caches);
    let policy = scene.policy("Enforce", json!({}));
    // The pass is polled first and waits for the policies; their list comes after.
    let (status, ()) = tokio::join!(card_pass(&scene.api, &restarted, "pdf"), async {
        list(&mut cluster, vec![policy]);
        list(&mut namespaced, Vec::new());
    });
    keeps_verified_pin(&status, &first, &scene, &moved);
}

#[tokio::test]
async fn policies_that_never_list_keep_the_verified_pin_and_admit_nothing_new() {
    let scene = Scene::new(true).await;
    let (first, moved, restarted) = restarted_after_the_tag_moved(&scene).await;
    // The trust CRDs are gone (or the operator may not list them): the watches never list.
    let (caches, _cluster, _namespaced) = unlisted_policies();
    restarted.register_caches(Some(NS), caches);
    scene.api.clear_requests();
    let status = card_pass(&scene.api, &restarted, "pdf").await;
    keeps_verified_pin(&status, &first, &scene, &moved);
    let message = &find_condition(&status.conditions, "Verified")
        .expect("Verified")
        .message;
    assert!(message.contains("cannot be known"), "{message}");
    let posted = events(&scene.api);
    assert!(
        posted.contains(&("Warning".into(), "NewPinRefused".into())),
        "{posted:?}"
    );

    // A card never admitted is not admitted now, and says why.
    scene.api.put(&image_card("fresh", &scene.registry));
    let fresh = card_pass(&scene.api, &restarted, "fresh").await;
    assert_eq!(
        ready(&fresh.conditions),
        ("False".into(), "TrustPoliciesUnavailable".into())
    );
    assert!(
        events(&scene.api).contains(&("Warning".into(), "TrustPoliciesUnavailable".into())),
        "{:?}",
        events(&scene.api)
    );
}

#[tokio::test]
async fn a_policy_that_does_not_deserialize_fails_the_cards_closed() {
    let scene = Scene::new(true).await;
    let mut namespaced = Writer::<Guarded<SkillTrustPolicy>>::default();
    namespaced.apply_watcher_event(&watcher::Event::Init);
    let broken: Guarded<SkillTrustPolicy> = serde_json::from_value(json!({
        "apiVersion": "trust.agentic-operator.io/v1alpha1",
        "kind": "SkillTrustPolicy",
        "metadata": {"name": "broken", "namespace": NS},
        "spec": {"mode": 7},
    }))
    .expect("a guarded object");
    assert!(broken.0.is_err(), "the policy must not deserialize");
    namespaced.apply_watcher_event(&watcher::Event::InitApply(broken));
    namespaced.apply_watcher_event(&watcher::Event::InitDone);
    scene.ctx.register_caches(
        Some(NS),
        caches_with(vec![
            kind_cache(store_of(Vec::<ClusterSkillTrustPolicy>::new())),
            kind_cache(namespaced.as_reader()),
        ]),
    );
    let status = scene.card().await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "TrustPoliciesUnavailable".into())
    );
    assert!(
        ready_message(&status.conditions).contains("SkillTrustPolicy broken"),
        "{}",
        ready_message(&status.conditions)
    );
}

#[tokio::test]
async fn a_policys_key_secret_is_read_once_until_its_resource_version_changes() {
    let scene = Scene::new(true).await;
    let secret: k8s_openapi::api::core::v1::Secret = object(json!({
        "metadata": {"name": "signing-key"},
        "stringData": {},
        "data": {"cosign.pub": base64_of(&scene.key.public_key_pem())},
    }));
    scene.api.put(&secret);
    let policy = namespaced_policy(
        "signed",
        policy_spec(
            "Enforce",
            json!({"keys": [{"secretKeyRef": {"name": "signing-key", "key": "cosign.pub"}}]}),
        ),
    );
    let mut secrets = listed_writer(vec![secret_meta("signing-key", "1")]);
    let caches = policy_caches(Vec::new(), vec![policy]).with_secrets(secrets.as_reader());
    scene.ctx.register_caches(Some(NS), caches);
    let key_reads = || {
        scene
            .api
            .reads()
            .iter()
            .filter(|path| path.ends_with("/secrets/signing-key"))
            .count()
    };
    for card in ["one", "two", "three"] {
        scene.api.put(&image_card(card, &scene.registry));
        let status = card_pass(&scene.api, &scene.ctx, card).await;
        assert_eq!(
            verified(&status),
            ("True".into(), "SignatureVerified".into()),
            "{card}"
        );
    }
    assert_eq!(key_reads(), 1, "{:?}", scene.api.reads());

    // The Secret changes: read again, once.
    secrets.apply_watcher_event(&watcher::Event::Apply(secret_meta("signing-key", "2")));
    for card in ["one", "two"] {
        card_pass(&scene.api, &scene.ctx, card).await;
    }
    assert_eq!(key_reads(), 2, "{:?}", scene.api.reads());
}

#[tokio::test]
async fn a_policys_key_config_map_is_read_once_while_fresh_and_a_failed_read_is_not_kept() {
    let scene = Scene::new(true).await;
    let policy = namespaced_policy(
        "signed",
        policy_spec(
            "Enforce",
            json!({"keys": [{"configMapKeyRef": {"name": "signing-key", "key": "cosign.pub"}}]}),
        ),
    );
    scene
        .ctx
        .register_caches(Some(NS), policy_caches(Vec::new(), vec![policy]));
    let key_reads = || {
        scene
            .api
            .reads()
            .iter()
            .filter(|path| path.ends_with("/configmaps/signing-key"))
            .count()
    };
    // Not there yet: nothing verifies, and every pass asks again.
    for card in ["one", "two"] {
        scene.api.put(&image_card(card, &scene.registry));
        let status = card_pass(&scene.api, &scene.ctx, card).await;
        assert_eq!(
            verified(&status),
            ("Unknown".into(), "VerificationUnavailable".into()),
            "{card}"
        );
    }
    assert_eq!(key_reads(), 2, "{:?}", scene.api.reads());

    let config_map: ConfigMap = object(json!({
        "metadata": {"name": "signing-key"},
        "data": {"cosign.pub": scene.key.public_key_pem()},
    }));
    scene.api.put(&config_map);
    for card in ["one", "two", "three"] {
        scene.api.put(&image_card(card, &scene.registry));
        let status = card_pass(&scene.api, &scene.ctx, card).await;
        assert_eq!(
            verified(&status),
            ("True".into(), "SignatureVerified".into()),
            "{card}"
        );
    }
    assert_eq!(
        key_reads(),
        3,
        "read once, then kept: {:?}",
        scene.api.reads()
    );
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[test]
fn a_policy_change_requeues_the_cards_of_its_scope() {
    let card_in = |namespace: &str, name: &str| {
        let mut card: SkillCard = object(json!({"metadata": {"name": name}, "spec": {}}));
        card.metadata.namespace = Some(namespace.to_string());
        card
    };
    let cards = store_of(vec![
        card_in(NS, "pdf"),
        card_in(NS, "xlsx"),
        card_in("other", "docx"),
    ]);
    let names = |refs: Vec<ObjectRef<Guarded<SkillCard>>>| {
        let mut names: Vec<String> = refs
            .iter()
            .map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(cards_in_scope(&cards, None)),
        ["other/docx", "team/pdf", "team/xlsx"],
        "a cluster policy reaches every card"
    );
    assert_eq!(
        names(cards_in_scope(&cards, Some(NS))),
        ["team/pdf", "team/xlsx"],
        "a namespaced policy reaches its namespace's cards only"
    );
}

/// How many cards share the image in the claim below.
const CARDS: usize = 1000;

#[tokio::test]
async fn a_thousand_cards_on_one_image_cost_one_signature_read_and_a_run_costs_none() {
    let scene = Scene::new(true).await;
    scene.watch("Enforce", json!({}), vec![]);
    let Scene {
        registry,
        digest,
        api,
        ctx,
        ..
    } = &scene;
    let names: Vec<String> = (0..CARDS).map(|i| format!("pdf-{i:04}")).collect();
    for name in &names {
        api.put(&image_card(name, registry));
    }
    // Every card's first pass at once, as the controller runs them after a restart.
    let statuses: Vec<SkillCardStatus> = futures::stream::iter(&names)
        .map(|name| card_pass(api, ctx, name))
        .buffer_unordered(64)
        .collect()
        .await;
    for status in &statuses {
        assert_eq!(
            verified(status),
            ("True".into(), "SignatureVerified".into())
        );
    }
    let hex = digest.trim_start_matches("sha256:");
    let signature_reads = registry.signature_requests(digest);
    assert_eq!(
        signature_reads.len(),
        2,
        "one read of the signature tag and one of its payload for {CARDS} cards: {:?}",
        &signature_reads[..signature_reads.len().min(4)]
    );
    assert!(
        signature_reads[0] == format!("GET /v2/{REPOSITORY}/manifests/sha256-{hex}.sig"),
        "{signature_reads:?}"
    );

    // Within the tag refresh interval, a card's pass asks the registry nothing.
    let before = registry.requests().len();
    card_pass(api, ctx, &names[0]).await;
    let after = registry.requests();
    assert_eq!(after.len(), before, "{:?}", &after[before..]);

    // An Agent on the card, then a run of it: neither reads the registry.
    let run_status = Box::pin(scene.agent_and_run(&names[0])).await;
    assert!(run_status.sandbox_name.is_some(), "{run_status:?}");
    let skills: Vec<&str> = run_status.skills.iter().map(|s| s.image.as_str()).collect();
    assert!(
        skills.iter().all(|image| image.ends_with(digest.as_str())),
        "{skills:?}"
    );
    let after_run = registry.requests();
    assert_eq!(
        after_run.len(),
        before,
        "the Agent's and the run's passes read no registry: {:?}",
        &after_run[before..]
    );
}

/// The cluster policies' watch cache, whose writer a scenario changes as the watch would.
type ClusterPolicies = Writer<Guarded<ClusterSkillTrustPolicy>>;

/// The scene's card `pdf` verified, an Agent `coder` on it with a Ready Gateway, and the run
/// `fix-bug` of it started: its sandbox pod created and its skill pinned with the signer.
/// The scene's policy is in the watch cache this returns.
async fn started_run(scene: &Scene) -> ClusterPolicies {
    let ctx = &scene.ctx;
    let mut cluster = ClusterPolicies::default();
    cluster.apply_watcher_event(&watcher::Event::Init);
    cluster.apply_watcher_event(&watcher::Event::InitApply(Guarded(Ok(
        scene.policy("Enforce", json!({}))
    ))));
    cluster.apply_watcher_event(&watcher::Event::InitDone);
    let caches = caches_with(vec![
        kind_cache(cluster.as_reader()),
        kind_cache(store_of::<SkillTrustPolicy>(vec![])),
    ]);
    ctx.register_caches(Some(NS), caches);
    let card = scene.card().await;
    assert_eq!(ready(&card.conditions).0, "True", "{card:?}");
    let status = Box::pin(scene.agent_and_run("pdf")).await;
    assert_eq!(
        status.sandbox_name.as_deref(),
        Some("fix-bug"),
        "{status:?}"
    );
    cluster
}

/// The sandbox pod of `fix-bug` with its agent container in `state`, as the kubelet reports.
fn agent_container(scene: &Scene, pod_phase: &str, state: Value) {
    let mut pod: Pod = scene.api.get(NS, "fix-bug").expect("the sandbox pod");
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": pod_phase,
            "containerStatuses": [{
                "name": "agent", "image": "registry.test/harness:1", "imageID": "",
                "ready": true, "restartCount": 0, "state": state,
            }],
        }))
        .expect("a pod status"),
    );
    scene.api.put(&pod);
}

fn running_agent(scene: &Scene) {
    agent_container(
        scene,
        "Running",
        json!({"running": {"startedAt": "2026-12-01T00:00:00Z"}}),
    );
}

async fn run_pass(scene: &Scene) -> agentic_api::AgentRunStatus {
    pass::<AgentRun, _>(&scene.api, &scene.ctx, "fix-bug", agentrun::reconcile)
        .await
        .expect("a run pass");
    let run: AgentRun = scene.api.get(NS, "fix-bug").expect("the run");
    run.status.expect("a status")
}

/// The scene's policy changed to revoke `revoked` with `action`, as its watch brings it.
fn revoke(scene: &Scene, policies: &mut ClusterPolicies, revoked: Value, action: &str) {
    let changed = scene.policy("Enforce", json!({"revoked": revoked, "action": action}));
    policies.apply_watcher_event(&watcher::Event::Apply(Guarded(Ok(changed))));
}

#[tokio::test]
async fn a_cancel_revocation_of_its_digest_ends_a_running_run_and_stops_its_pod() {
    let scene = Scene::new(true).await;
    let mut policies = Box::pin(started_run(&scene)).await;
    running_agent(&scene);
    assert_eq!(ready(&run_pass(&scene).await.conditions).1, "AgentRunning");

    revoke(
        &scene,
        &mut policies,
        json!({"digests": [scene.digest]}),
        "Cancel",
    );
    let status = run_pass(&scene).await;
    assert_eq!(status.phase, Some(agentic_api::AgentRunPhase::Failed));
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SkillRevoked".into())
    );
    let message = ready_message(&status.conditions);
    for named in [
        "\"pdf-tools\"",
        scene.digest.as_str(),
        "ClusterSkillTrustPolicy/signed",
    ] {
        assert!(message.contains(named), "names {named}: {message}");
    }
    assert!(
        events(&scene.api).contains(&("Warning".into(), "SkillRevoked".into())),
        "{:?}",
        events(&scene.api)
    );
    // The pass after the status write deletes the sandbox, as for `spec.cancel`.
    run_pass(&scene).await;
    assert!(
        scene.api.get::<Pod>(NS, "fix-bug").is_none(),
        "the sandbox pod is deleted"
    );
}

#[tokio::test]
async fn a_block_revocation_lets_a_running_run_go_on() {
    let scene = Scene::new(true).await;
    let mut policies = Box::pin(started_run(&scene)).await;
    running_agent(&scene);
    run_pass(&scene).await;

    revoke(
        &scene,
        &mut policies,
        json!({"digests": [scene.digest]}),
        "Block",
    );
    scene.api.clear_requests();
    let status = run_pass(&scene).await;
    assert_eq!(status.phase, Some(agentic_api::AgentRunPhase::Running));
    assert_eq!(ready(&status.conditions).1, "AgentRunning");
    assert!(scene.api.writes().is_empty(), "{:?}", scene.api.writes());
    assert!(scene.api.get::<Pod>(NS, "fix-bug").is_some());
}

#[tokio::test]
async fn a_cancel_revocation_leaves_a_finished_run_as_it_ended() {
    let scene = Scene::new(true).await;
    let mut policies = Box::pin(started_run(&scene)).await;
    agent_container(
        &scene,
        "Succeeded",
        json!({"terminated": {
            "exitCode": 0, "reason": "Completed",
            "startedAt": "2026-12-01T00:00:00Z", "finishedAt": "2026-12-01T00:01:00Z",
        }}),
    );
    let finished = run_pass(&scene).await;
    assert_eq!(
        ready(&finished.conditions).1,
        "AgentSucceeded",
        "{finished:?}"
    );

    revoke(
        &scene,
        &mut policies,
        json!({"digests": [scene.digest]}),
        "Cancel",
    );
    scene.api.clear_requests();
    let status = run_pass(&scene).await;
    assert_eq!(status, finished);
    assert!(scene.api.writes().is_empty(), "{:?}", scene.api.writes());
    assert!(
        scene.api.get::<Pod>(NS, "fix-bug").is_some(),
        "kept for its logs"
    );
}

#[tokio::test]
async fn a_cancel_revocation_of_its_signer_key_ends_a_running_run() {
    let scene = Scene::new(true).await;
    let mut policies = Box::pin(started_run(&scene)).await;
    running_agent(&scene);
    let pinned = run_pass(&scene).await.skills;
    let signer = pinned[0]
        .verification
        .as_ref()
        .and_then(|v| v.signer.clone())
        .expect("the run recorded the skill's signer");

    revoke(&scene, &mut policies, json!({"keys": [signer]}), "Cancel");
    let status = run_pass(&scene).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SkillRevoked".into())
    );
    run_pass(&scene).await;
    assert!(scene.api.get::<Pod>(NS, "fix-bug").is_none());
}

#[test]
fn a_policy_change_wakes_the_live_runs_it_may_cancel() {
    let run_in = |namespace: &str, name: &str, status: Value| {
        let mut run: AgentRun = object(json!({
            "metadata": {"name": name}, "spec": {"agentRef": "coder"}, "status": status,
        }));
        run.metadata.namespace = Some(namespace.to_string());
        run
    };
    let running = json!({"phase": "Running", "sandboxName": "s"});
    let runs = store_of(vec![
        run_in(NS, "live", running.clone()),
        run_in("other", "live", running),
        run_in(
            NS,
            "done",
            json!({"phase": "Succeeded", "sandboxName": "s"}),
        ),
        run_in(NS, "unstarted", json!({"phase": "Pending"})),
    ]);
    let live = crate::caches::Index::new(agentrun::live);
    live.relisted(&runs.state());
    let names = |refs: Vec<ObjectRef<Guarded<AgentRun>>>| {
        let mut names: Vec<String> = refs
            .iter()
            .map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name))
            .collect();
        names.sort();
        names
    };
    let policy = |action: &str, revoked: Value| {
        cluster_policy("p", json!({"action": action, "revoked": revoked}))
            .spec
            .policy
    };
    let cancelling = policy("Cancel", json!({"digests": ["sha256:ab"]}));
    assert_eq!(
        names(agentrun::runs_a_policy_may_cancel(
            &runs,
            &live,
            &cancelling,
            None
        )),
        ["other/live", "team/live"],
        "a cluster policy wakes every live run"
    );
    assert_eq!(
        names(agentrun::runs_a_policy_may_cancel(
            &runs,
            &live,
            &cancelling,
            Some(NS)
        )),
        ["team/live"],
        "a namespaced policy wakes its namespace's"
    );
    for spares in [
        policy("Block", json!({"digests": ["sha256:ab"]})),
        policy("Cancel", json!({})),
    ] {
        assert!(
            agentrun::runs_a_policy_may_cancel(&runs, &live, &spares, None).is_empty(),
            "{spares:?} cancels nothing"
        );
    }
}
