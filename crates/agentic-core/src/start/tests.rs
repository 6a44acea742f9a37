use agentic_api::{
    AgentRunSpec, AgentSkill, AgentSpec, AgentStatus, FileMount, GatewayModel, GatewaySpec,
    GatewayStatus, ObjectRef, SkillCardSpec, SkillCardStatus, SkillFrontmatter,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};

use agentic_api::{SkillTrustPolicy, SkillVerification};

use super::*;
use crate::reasons::AgentRunReason;
use crate::sandbox::PINNED_SKILLS_ANNOTATION;
use crate::trust::Outcome;

const NS: &str = "team-a";
const RUN_UID: &str = "run-uid";
const IMAGE: &str =
    "ghcr.io/acme/java@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn ready() -> Vec<Condition> {
    vec![Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Ready".into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    }]
}

fn run() -> AgentRun {
    let mut run = AgentRun::new(
        "fix-1",
        AgentRunSpec {
            agent_ref: "migrator".into(),
            instructions: Some("Fix it.".into()),
            ..Default::default()
        },
    );
    run.metadata.namespace = Some(NS.into());
    run.metadata.uid = Some(RUN_UID.into());
    run
}

/// A Ready Agent listing the Gateway `llm`, with `skills` pinned in its status.
fn agent(skills: Vec<AgentSkill>) -> Agent {
    let mut agent = Agent::new(
        "migrator",
        AgentSpec {
            image: "ghcr.io/acme/harness:1.0".into(),
            gateways: vec![ObjectRef { name: "llm".into() }],
            ..Default::default()
        },
    );
    agent.metadata.generation = Some(1);
    agent.status = Some(AgentStatus {
        observed_generation: Some(1),
        conditions: ready(),
        skills,
        ..Default::default()
    });
    agent
}

fn gateway(ready_now: bool) -> Gateway {
    let mut gateway = Gateway::new(
        "llm",
        GatewaySpec {
            provider: "openai".into(),
            endpoint: Some("https://llm.example.com/v1".into()),
            credential_ref: None,
            model: GatewayModel {
                name: "gpt-5".into(),
                context_window: 200_000,
                tier: None,
            },
        },
    );
    if ready_now {
        gateway.status = Some(GatewayStatus {
            conditions: ready(),
            ..Default::default()
        });
    }
    gateway
}

fn java_skill() -> AgentSkill {
    AgentSkill {
        name: "java".into(),
        skill_card: "java-card".into(),
        image: Some(IMAGE.into()),
        ..Default::default()
    }
}

/// The Ready card `java_skill` was pinned from.
fn java_card() -> SkillCard {
    let mut card = SkillCard::new(
        "java-card",
        SkillCardSpec {
            image: Some("ghcr.io/acme/java:1".into()),
            ..Default::default()
        },
    );
    card.metadata.generation = Some(1);
    card.status = Some(SkillCardStatus {
        observed_generation: Some(1),
        conditions: ready(),
        resolved_image: Some(IMAGE.into()),
        skill: Some(SkillFrontmatter {
            name: "java".into(),
            description: "Java know-how".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    card
}

fn sandbox_of(controller_uid: &str) -> ObjectMeta {
    let pinned = serde_json::to_string(&[PinnedSkill {
        name: "java".into(),
        image: IMAGE.into(),
        ..Default::default()
    }])
    .unwrap();
    ObjectMeta {
        name: Some("fix-1".into()),
        owner_references: Some(vec![OwnerReference {
            uid: controller_uid.into(),
            controller: Some(true),
            ..Default::default()
        }]),
        annotations: Some([(PINNED_SKILLS_ANNOTATION.to_string(), pinned)].into()),
        ..Default::default()
    }
}

/// What a pass read for a run, each part replaceable.
struct Read {
    run: AgentRun,
    sandbox: Option<ObjectMeta>,
    agent: Option<Agent>,
    gateway: Option<Gateway>,
    cards: Vec<Option<SkillCard>>,
    file_sources: BTreeMap<SourceKey, SourceLookup>,
    policies: Policies,
    signatures: OutcomesByPin,
    credential_proxy: CredentialProxy,
}

impl Read {
    /// A run whose Agent, Gateway and card are all usable.
    fn startable() -> Self {
        Read {
            run: run(),
            sandbox: None,
            agent: Some(agent(vec![java_skill()])),
            gateway: Some(gateway(false)),
            cards: vec![Some(java_card())],
            file_sources: BTreeMap::new(),
            policies: Policies::default(),
            signatures: OutcomesByPin::new(),
            credential_proxy: CredentialProxy::default(),
        }
    }

    fn plan(&self) -> StartPlan<'_> {
        fn found<K>(object: Option<&K>) -> Lookup<'_, K> {
            object.map_or(Lookup::Missing, Lookup::Found)
        }
        plan_start(&StartInputs {
            run: &self.run,
            run_uid: RUN_UID,
            sandbox_kind: "Pod",
            sandbox: self.sandbox.as_ref(),
            agent: found(self.agent.as_ref()),
            gateway: found(self.gateway.as_ref()),
            cards: self.cards.iter().map(|c| found(c.as_ref())).collect(),
            file_sources: &self.file_sources,
            fetcher: None,
            credential_proxy: &self.credential_proxy,
            trace_receiver: None,
            policies: Ok(&self.policies),
            default_signatures: &self.signatures,
        })
    }

    fn blocked(&self) -> RunOutcome {
        match self.plan() {
            StartPlan::Blocked(outcome) => outcome,
            other => panic!("expected the run to be held, got {other:?}"),
        }
    }
}

#[test]
fn a_run_whose_references_are_usable_is_created_with_its_skills() {
    let read = Read::startable();
    let StartPlan::Create(inputs) = read.plan() else {
        panic!("expected a sandbox to create, got {:?}", read.plan());
    };
    let pinned = inputs.pinned_skills();
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].image, IMAGE);
    assert_eq!(inputs.sandbox_name(), crate::names::sandbox_name("fix-1"));
}

#[test]
fn a_cancelled_run_ends_before_anything_else_is_looked_at() {
    let mut read = Read::startable();
    read.run.spec.cancel = Some(true);
    // Even a sandbox of someone else's does not matter any more.
    read.sandbox = Some(sandbox_of("someone-else"));
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::Cancelled);
    assert!(outcome.phase.is_finished());
}

#[test]
fn a_sandbox_the_run_controls_is_adopted_with_the_skills_it_pins() {
    let mut read = Read::startable();
    read.sandbox = Some(sandbox_of(RUN_UID));
    // What it pins stands, whatever the Agent says now.
    read.agent = None;
    let StartPlan::Adopt(pinned) = read.plan() else {
        panic!("expected adoption, got {:?}", read.plan());
    };
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].image, IMAGE);
}

#[test]
fn an_object_of_another_holding_the_sandbox_name_holds_the_run() {
    let mut read = Read::startable();
    read.sandbox = Some(sandbox_of("another-uid"));
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::ObjectNameTaken);
    assert!(outcome.message.contains("fix-1"), "{}", outcome.message);
}

#[test]
fn a_missing_agent_makes_the_run_wait_naming_the_field() {
    let mut read = Read::startable();
    read.agent = None;
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::AgentNotFound)
    );
    assert!(!outcome.phase.is_finished());
    assert!(
        outcome.message.starts_with("spec.agentRef: "),
        "{}",
        outcome.message
    );
}

#[test]
fn a_malformed_agent_makes_the_run_wait_as_not_ready() {
    let read = Read::startable();
    let outcome = match plan_start(&StartInputs {
        run: &read.run,
        run_uid: RUN_UID,
        sandbox_kind: "Pod",
        sandbox: None,
        agent: Lookup::Malformed("missing field `image`"),
        gateway: Lookup::Missing,
        cards: Vec::new(),
        file_sources: &read.file_sources,
        fetcher: None,
        credential_proxy: &CredentialProxy::default(),
        trace_receiver: None,
        policies: Ok(&read.policies),
        default_signatures: &read.signatures,
    }) {
        StartPlan::Blocked(outcome) => outcome,
        other => panic!("expected the run to be held, got {other:?}"),
    };
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::AgentNotReady)
    );
    assert!(
        outcome.message.contains("missing field"),
        "{}",
        outcome.message
    );
}

#[test]
fn a_param_the_agent_does_not_declare_fails_the_run() {
    let mut read = Read::startable();
    read.run.spec.params = vec![agentic_api::RunParam {
        name: "nope".into(),
        value: "1".into(),
    }];
    let outcome = read.blocked();
    assert!(outcome.phase.is_finished());
    assert!(
        outcome.message.starts_with("spec.params: "),
        "{}",
        outcome.message
    );
}

#[test]
fn a_gateway_the_agent_does_not_list_fails_the_run() {
    let mut read = Read::startable();
    read.run.spec.gateway = Some("other".into());
    let outcome = read.blocked();
    assert!(outcome.phase.is_finished());
    assert!(
        outcome.message.starts_with("spec.gateway: "),
        "{}",
        outcome.message
    );
}

#[test]
fn a_missing_gateway_makes_the_run_wait() {
    let mut read = Read::startable();
    read.gateway = None;
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::GatewayNotFound)
    );
    assert!(!outcome.phase.is_finished());
}

#[test]
fn a_gateway_the_run_names_itself_must_be_ready() {
    let mut read = Read::startable();
    read.agent = Some(agent(vec![java_skill()]));
    if let Some(agent) = &mut read.agent {
        agent.spec.gateways.clear();
    }
    read.run.spec.gateway = Some("llm".into());
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::GatewayNotReady)
    );
    // Ready, it is taken.
    read.gateway = Some(gateway(true));
    assert!(matches!(read.plan(), StartPlan::Create(_)));
}

#[test]
fn a_card_gone_since_the_agent_pinned_it_makes_the_run_wait() {
    let mut read = Read::startable();
    read.cards = vec![None];
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::SkillCardNotFound)
    );
    assert!(!outcome.phase.is_finished());
}

#[test]
fn a_card_moved_since_the_agent_pinned_it_makes_the_run_wait() {
    let mut read = Read::startable();
    let mut moved = java_card();
    if let Some(status) = &mut moved.status {
        status.resolved_image = Some(IMAGE.replace("0123", "4567"));
    }
    read.cards = vec![Some(moved)];
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::SkillCardNotReady)
    );
}

fn secret_mount(secret: &str, key: &str) -> FileMount {
    serde_json::from_value(serde_json::json!({
        "mountPath": "/etc/creds",
        "secretName": secret,
        "items": [{"key": key, "path": key}],
    }))
    .unwrap()
}

#[test]
fn a_missing_file_mount_source_makes_the_run_wait_and_a_missing_key_fails_it() {
    let mut read = Read::startable();
    read.run.spec.file_mounts = vec![secret_mount("creds", "token")];
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::FileMountSourceNotFound);
    assert!(!outcome.phase.is_finished());

    let key = ("Secret", "creds".to_string());
    read.file_sources.insert(
        key.clone(),
        SourceLookup::Found(["other".to_string()].into()),
    );
    let outcome = read.blocked();
    assert!(outcome.phase.is_finished(), "{outcome:?}");

    read.file_sources
        .insert(key, SourceLookup::Found(["token".to_string()].into()));
    assert!(matches!(read.plan(), StartPlan::Create(_)));
}

#[test]
fn a_git_skill_without_the_operator_image_waits_for_the_operator() {
    let mut read = Read::startable();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let url = "https://git.example/skills.git";
    let mut skill = java_skill();
    skill.image = Some(format!("{url}@{commit}"));
    read.agent = Some(agent(vec![skill]));
    let mut card = java_card();
    card.spec.image = None;
    card.spec.source = Some(url.into());
    if let Some(status) = &mut card.status {
        status.resolved_image = None;
        status.resolved_source = Some(format!("{url}@{commit}"));
    }
    read.cards = vec![Some(card)];
    let outcome = read.blocked();
    assert_eq!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::OperatorImageNotSet)
    );
    assert!(!outcome.phase.is_finished());
}

/// A SkillTrustPolicy of `namespace` revoking `revoked` (`digests`, `commits` or `keys`).
fn revoking(namespace: &str, revoked: serde_json::Value) -> SkillTrustPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "trust.agentic-operator.io/v1alpha1",
        "kind": "SkillTrustPolicy",
        "metadata": {"name": "stop", "namespace": namespace},
        "spec": {"action": "Block", "revoked": revoked},
    }))
    .unwrap()
}

/// The Agent's skill comes from a cluster-wide default card, which lives (and is judged)
/// in another namespace.
fn default_skill_read() -> Read {
    let mut read = Read::startable();
    let mut skill = java_skill();
    skill.namespace = Some("default-skills".into());
    read.agent = Some(agent(vec![skill]));
    read
}

#[test]
fn a_revocation_of_the_runs_namespace_holds_a_run_mounting_a_default_skill() {
    let mut read = default_skill_read();
    let digest = IMAGE.rsplit_once('@').unwrap().1;
    let policy = revoking(NS, serde_json::json!({"digests": [digest]}));
    read.policies = Policies::new([], [&policy], NS);
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::SkillBlocked);
    assert!(!outcome.phase.is_finished());
    assert!(
        outcome.message.contains("SkillTrustPolicy/team-a/stop") && outcome.message.contains(IMAGE),
        "{}",
        outcome.message
    );

    // Another namespace's revocation does not reach this run.
    let elsewhere = revoking("team-b", serde_json::json!({"digests": [digest]}));
    read.policies = Policies::new([], [&elsewhere], NS);
    assert!(matches!(read.plan(), StartPlan::Create(_)));
}

#[test]
fn a_revoked_signer_key_holds_a_run_mounting_a_skill_it_signed_whichever_signer_it_is() {
    let mut read = default_skill_read();
    let mut card = java_card();
    if let Some(status) = &mut card.status {
        status.verification = Some(SkillVerification {
            signer: Some("SHA256:first".into()),
            signers: vec!["SHA256:first".into(), "SHA256:abc".into()],
            ..Default::default()
        });
    }
    read.cards = vec![Some(card)];
    assert!(matches!(read.plan(), StartPlan::Create(_)));
    let policy = revoking(NS, serde_json::json!({"keys": ["SHA256:abc"]}));
    read.policies = Policies::new([], [&policy], NS);
    assert_eq!(read.blocked().reason, AgentRunReason::SkillBlocked);
}

#[test]
fn a_run_with_skills_waits_while_the_trust_policies_cannot_be_known() {
    let read = Read::startable();
    let mut inputs = StartInputs {
        run: &read.run,
        run_uid: RUN_UID,
        sandbox_kind: "Pod",
        sandbox: None,
        agent: read.agent.as_ref().map_or(Lookup::Missing, Lookup::Found),
        gateway: read.gateway.as_ref().map_or(Lookup::Missing, Lookup::Found),
        cards: read
            .cards
            .iter()
            .map(|c| c.as_ref().map_or(Lookup::Missing, Lookup::Found))
            .collect(),
        file_sources: &read.file_sources,
        fetcher: None,
        credential_proxy: &CredentialProxy::default(),
        trace_receiver: None,
        policies: Err("not listed"),
        default_signatures: &read.signatures,
    };
    let StartPlan::Blocked(outcome) = plan_start(&inputs) else {
        panic!("expected the run to wait");
    };
    assert_eq!(outcome.reason, AgentRunReason::SkillBlocked);
    assert!(
        outcome.message.contains("not listed"),
        "{}",
        outcome.message
    );
    // A run that mounts no skill needs no policy.
    let agent = agent(Vec::new());
    inputs.agent = Lookup::Found(&agent);
    inputs.cards = Vec::new();
    assert!(matches!(plan_start(&inputs), StartPlan::Create(_)));
}

/// A SkillTrustPolicy of `namespace` requiring a signature of the Java image, in `mode`.
fn requiring(namespace: &str, mode: &str) -> SkillTrustPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "trust.agentic-operator.io/v1alpha1",
        "kind": "SkillTrustPolicy",
        "metadata": {"name": "signed", "namespace": namespace},
        "spec": {"images": ["ghcr.io/acme/*"], "mode": mode, "keys": [{"pem": "unused"}]},
    }))
    .unwrap()
}

#[test]
fn a_default_skill_the_runs_namespace_requires_signed_holds_the_run_until_it_verifies() {
    let mut read = default_skill_read();
    let policy = requiring(NS, "Enforce");
    read.policies = Policies::new([], [&policy], NS);
    // Unsigned under this namespace's policy (the card was judged under another's).
    read.signatures
        .insert(Pin::parse(IMAGE).expect("a pin"), vec![Outcome::Unsigned]);
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::SkillBlocked);
    assert!(
        outcome.message.contains("cluster-wide default") && outcome.message.contains(NS),
        "{}",
        outcome.message
    );
    // Signed as it requires: admitted.
    read.signatures.insert(
        Pin::parse(IMAGE).expect("a pin"),
        vec![Outcome::Verified(crate::trust::Signature {
            signer: "SHA256:key".into(),
            digest: None,
            layout: "tag".into(),
        })],
    );
    assert!(matches!(read.plan(), StartPlan::Create(_)));
    // A Warn policy lets it through unsigned.
    let warn = requiring(NS, "Warn");
    read.policies = Policies::new([], [&warn], NS);
    read.signatures
        .insert(Pin::parse(IMAGE).expect("a pin"), vec![Outcome::Unsigned]);
    assert!(matches!(read.plan(), StartPlan::Create(_)));
}

#[test]
fn a_skill_of_the_runs_own_namespace_is_left_to_its_cards_verdict() {
    let mut read = Read::startable();
    let policy = requiring(NS, "Enforce");
    read.policies = Policies::new([], [&policy], NS);
    // No signatures read for it: its Ready card passed these policies already.
    assert!(matches!(read.plan(), StartPlan::Create(_)));
}

/// The Gateway `llm` with a key in the Secret `llm-key`, of `provider`.
fn keyed_gateway(provider: &str) -> Gateway {
    let mut gateway = gateway(false);
    gateway.spec.provider = provider.into();
    gateway.spec.credential_ref = Some(agentic_api::CredentialRef {
        secret_name: "llm-key".into(),
        key: Some("api-key".into()),
    });
    gateway
}

#[test]
fn a_proxied_run_is_created_with_its_key_behind_the_proxy_in_every_mode_but_off() {
    for mode in [
        CredentialProxyMode::Required,
        CredentialProxyMode::Preferred,
    ] {
        let mut read = Read::startable();
        read.gateway = Some(keyed_gateway("openai"));
        read.credential_proxy = CredentialProxy {
            mode,
            image: Some("registry/operator:1".into()),
        };
        let StartPlan::Create(inputs) = read.plan() else {
            panic!("expected a sandbox to create, got {:?}", read.plan());
        };
        assert!(inputs.credential_isolation().proxy().is_some(), "{mode:?}");
    }
}

#[test]
fn required_refuses_a_cloud_signed_gateway_and_waits_for_a_missing_image() {
    let mut read = Read::startable();
    read.gateway = Some(keyed_gateway("aws-bedrock"));
    read.credential_proxy = CredentialProxy {
        mode: CredentialProxyMode::Required,
        image: Some("registry/operator:1".into()),
    };
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::CredentialIsolationRequired);
    assert!(outcome.phase.is_finished());
    assert_eq!(
        outcome.credential_isolation,
        Some(Box::new(CredentialIsolation::Exposed(
            Exposure::CloudSignedProvider
        )))
    );
    assert!(
        outcome.message.contains("cloud credentials"),
        "{}",
        outcome.message
    );

    // The same Gateway under `preferred` starts, its key given to the agent.
    read.credential_proxy.mode = CredentialProxyMode::Preferred;
    let StartPlan::Create(inputs) = read.plan() else {
        panic!("expected a sandbox to create, got {:?}", read.plan());
    };
    assert_eq!(
        inputs.credential_isolation(),
        &CredentialIsolation::Exposed(Exposure::CloudSignedProvider)
    );

    // Without the operator's image the run waits for a restart with it.
    read.gateway = Some(keyed_gateway("openai"));
    read.credential_proxy = CredentialProxy {
        mode: CredentialProxyMode::Required,
        image: None,
    };
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::CredentialIsolationRequired);
    assert!(!outcome.phase.is_finished());
}

#[test]
fn the_agents_credential_proxy_setting_raises_the_operators_preferred_but_never_lowers_required() {
    let operator = |mode| CredentialProxy {
        mode,
        image: Some("registry/operator:1".into()),
    };
    let with_agent_setting = |read: &mut Read, mode| {
        read.agent.as_mut().expect("an Agent").spec.credential_proxy = Some(mode);
    };

    // The Agent requires what the operator only prefers: the cloud-signed run is refused.
    let mut read = Read::startable();
    read.gateway = Some(keyed_gateway("aws-bedrock"));
    read.credential_proxy = operator(CredentialProxyMode::Preferred);
    with_agent_setting(&mut read, CredentialProxyMode::Required);
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::CredentialIsolationRequired);
    assert!(
        outcome.message.contains("spec.credentialProxy"),
        "{}",
        outcome.message
    );

    // The Agent turns off what the operator only prefers: the run starts with the key.
    read.credential_proxy = operator(CredentialProxyMode::Preferred);
    with_agent_setting(&mut read, CredentialProxyMode::Off);
    let StartPlan::Create(inputs) = read.plan() else {
        panic!("expected a sandbox to create, got {:?}", read.plan());
    };
    assert_eq!(
        inputs.credential_isolation(),
        &CredentialIsolation::Exposed(Exposure::CredentialProxyOff)
    );

    // The operator's `required` is a floor: the Agent's `off` leaves the run refused.
    read.credential_proxy = operator(CredentialProxyMode::Required);
    let outcome = read.blocked();
    assert_eq!(outcome.reason, AgentRunReason::CredentialIsolationRequired);
}
