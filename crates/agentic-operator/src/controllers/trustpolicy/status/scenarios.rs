//! The trust policies' status controllers' real passes against the fake API server, the
//! runs and policies in watch caches as the operator keeps them.

use agentic_api::{
    AffectedRun, Agent, AgentRun, AgentRunPhase, ClusterSkillTrustPolicy, SkillCard,
    SkillTrustPolicy, SkillTrustPolicyStatus,
};
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use super::{RunsSeen, reconcile_cluster, reconcile_namespaced};
use crate::caches::{Caches, Guarded};
use crate::controllers::fake_api::FakeApi;
use crate::controllers::pipeline::guarded;
use crate::controllers::scenario::{
    NS, caches_with, context, object, pass, ready, ready_message, store_of,
};
use crate::controllers::watches::kind_cache;

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// Watch caches holding these runs and policies.
fn caches(
    runs: Vec<AgentRun>,
    cluster: Vec<ClusterSkillTrustPolicy>,
    namespaced: Vec<SkillTrustPolicy>,
) -> Caches {
    caches_with(vec![
        kind_cache(store_of(runs)),
        kind_cache(store_of(cluster)),
        kind_cache(store_of(namespaced)),
    ])
}

fn policy(spec: Value) -> SkillTrustPolicy {
    object(json!({"metadata": {"name": "p", "uid": "uid-p"}, "spec": spec}))
}

fn revoking() -> Value {
    json!({"revoked": {"digests": [DIGEST]}})
}

/// A run of `namespace` in `phase` that mounted the skill `pdf` pinned to `digest`.
fn run(namespace: &str, name: &str, phase: &str, digest: &str) -> AgentRun {
    object(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "spec": {"agentRef": "coder"},
        "status": {
            "phase": phase,
            "skills": [{"name": "pdf", "image": format!("registry.example/skills/pdf@{digest}")}],
        },
    }))
}

fn affected(name: &str, phase: AgentRunPhase) -> AffectedRun {
    AffectedRun {
        namespace: NS.into(),
        name: name.into(),
        phase: Some(phase),
        skill: "pdf".into(),
        image: format!("registry.example/skills/pdf@{DIGEST}"),
        reason: "Revoked".into(),
    }
}

async fn namespaced_status(
    api: &FakeApi,
    ctx: &std::sync::Arc<crate::context::Context>,
) -> SkillTrustPolicyStatus {
    pass::<SkillTrustPolicy, _>(api, ctx, "p", reconcile_namespaced)
        .await
        .expect("a pass");
    let policy: SkillTrustPolicy = api.get(NS, "p").expect("the policy");
    policy.status.expect("a status")
}

#[tokio::test]
async fn a_revoking_policy_lists_the_live_run_before_the_finished_one_and_counts_both() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let revoker = policy(revoking());
    api.put(&revoker);
    let runs = vec![
        run(NS, "a-done", "Succeeded", DIGEST),
        run(NS, "b-live", "Running", DIGEST),
        run(NS, "c-other", "Running", &DIGEST.replace('1', "2")),
    ];
    ctx.register_caches(Some(NS), caches(runs, vec![], vec![revoker]));
    let status = namespaced_status(&api, &ctx).await;
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.affected_runs, 2);
    assert_eq!(
        status.blast_radius,
        [
            affected("b-live", AgentRunPhase::Running),
            affected("a-done", AgentRunPhase::Succeeded)
        ]
    );
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "KeysRead".into())
    );
}

#[tokio::test]
async fn more_runs_than_the_list_holds_are_all_counted() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let revoker = policy(revoking());
    api.put(&revoker);
    let total = agentic_api::MAX_BLAST_RADIUS_ENTRIES + 20;
    let runs = (0..total)
        .map(|i| run(NS, &format!("run-{i:03}"), "Running", DIGEST))
        .collect();
    ctx.register_caches(Some(NS), caches(runs, vec![], vec![revoker]));
    let status = namespaced_status(&api, &ctx).await;
    assert_eq!(status.affected_runs, i64::try_from(total).expect("small"));
    assert_eq!(
        status.blast_radius.len(),
        agentic_api::MAX_BLAST_RADIUS_ENTRIES
    );
}

#[tokio::test]
async fn a_missing_secret_key_turns_ready_false_naming_the_secret_and_the_key() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let secret: Secret = object(json!({
        "metadata": {"name": "cosign"},
        "data": {"other.pub": "cHVi"},
    }));
    api.put(&secret);
    let broken = policy(json!({
        "images": ["registry.example/skills/**"],
        "keys": [{"secretKeyRef": {"name": "cosign", "key": "cosign.pub"}}],
    }));
    api.put(&broken);
    ctx.register_caches(Some(NS), caches(vec![], vec![], vec![broken]));
    let status = namespaced_status(&api, &ctx).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "KeyUnreadable".into())
    );
    let message = ready_message(&status.conditions);
    assert!(
        message.contains("Secret team/cosign") && message.contains("cosign.pub"),
        "{message}"
    );
}

#[tokio::test]
async fn a_pass_that_finds_nothing_new_writes_nothing() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let revoker = policy(revoking());
    api.put(&revoker);
    let runs = vec![run(NS, "live", "Running", DIGEST)];
    ctx.register_caches(Some(NS), caches(runs, vec![], vec![revoker]));
    namespaced_status(&api, &ctx).await;
    assert!(!api.writes().is_empty(), "the first pass writes the status");
    api.clear_requests();
    let status = namespaced_status(&api, &ctx).await;
    assert_eq!(status.affected_runs, 1);
    let writes: Vec<String> = api.writes().into_iter().map(|w| w.path).collect();
    assert_eq!(writes, Vec::<String>::new());
}

#[tokio::test]
async fn a_cluster_policy_counts_the_runs_of_every_namespace_when_all_are_watched() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let mut cluster: ClusterSkillTrustPolicy = object(json!({
        "metadata": {"name": "c", "uid": "uid-c"},
        "spec": revoking(),
    }));
    cluster.metadata.namespace = None;
    api.put(&cluster);
    let runs = vec![
        run(NS, "here", "Running", DIGEST),
        run("elsewhere", "there", "Pending", DIGEST),
    ];
    ctx.register_caches(None, caches(runs, vec![cluster.clone()], vec![]));
    guarded(
        std::sync::Arc::new(Guarded(Ok(cluster))),
        ctx,
        reconcile_cluster,
    )
    .await
    .expect("a pass");
    let writes = api.writes();
    let status = writes
        .iter()
        .find(|w| w.path.ends_with("/clusterskilltrustpolicies/c/status"))
        .expect("the status written at the cluster object's path");
    let sent: Value = serde_json::from_str(&status.body).expect("JSON");
    assert_eq!(sent["status"]["affectedRuns"], 2, "{sent}");
    // Both live: by namespace.
    let namespaces: Vec<&Value> = (0..2)
        .map(|i| &sent["status"]["blastRadius"][i]["namespace"])
        .collect();
    assert_eq!(namespaces, [&json!("elsewhere"), &json!(NS)], "{sent}");
}

#[test]
fn only_a_change_of_what_a_run_mounted_or_of_its_phase_requeues_the_policies() {
    let seen = RunsSeen::default();
    let mut live = run(NS, "r", "Running", DIGEST);
    assert!(seen.changed(&live), "first seen with skills");
    assert!(!seen.changed(&live), "seen again unchanged");
    live.status.as_mut().expect("a status").sandbox_name = Some("r".into());
    assert!(!seen.changed(&live), "a change of anything else");
    live.status.as_mut().expect("a status").phase = Some(AgentRunPhase::Failed);
    assert!(seen.changed(&live), "a new phase");
    assert!(seen.forget(&live), "a deleted run that mounted a skill");
    let unseen = run(NS, "old", "Succeeded", DIGEST);
    assert!(
        seen.forget(&unseen),
        "a finished run no list handed on (kept apart from the run cache) that mounted a skill"
    );
    let mut bare = run(NS, "bare", "Running", DIGEST);
    bare.status.as_mut().expect("a status").skills.clear();
    assert!(!seen.changed(&bare), "a run that mounted nothing");
    assert!(!seen.forget(&bare));
}

/// A run of the Agent `coder` held before its start by a revocation: no sandbox, nothing
/// mounted, `Ready` False with reason `SkillBlocked`.
fn held_run(name: &str) -> AgentRun {
    object(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
        "spec": {"agentRef": "coder"},
        "status": {
            "phase": "Pending",
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "SkillBlocked",
                "message": "skill \"pdf\" is revoked", "lastTransitionTime": "2026-01-01T00:00:00Z",
            }],
        },
    }))
}

#[tokio::test]
async fn a_run_held_before_its_start_is_counted_from_its_agents_skills() {
    let api = FakeApi::default();
    let ctx = context(&api);
    let revoker = policy(revoking());
    api.put(&revoker);
    let image = format!("registry.example/skills/pdf@{DIGEST}");
    let agent: Agent = object(json!({
        "metadata": {"name": "coder", "namespace": NS},
        "spec": {"image": "registry.test/harness:1", "skillCards": [{"ref": "pdf"}]},
        "status": {"skills": [
            {"name": "pdf", "skillCard": "pdf", "image": image, "type": "skill"},
            {"name": "notes", "skillCard": "notes", "type": "skill"},
        ]},
    }));
    let card: SkillCard = object(json!({
        "metadata": {"name": "pdf", "namespace": NS},
        "spec": {"image": "registry.example/skills/pdf:1"},
        "status": {"resolvedImage": image},
    }));
    let mut queued = held_run("queued");
    queued.status.as_mut().expect("a status").conditions[0].reason = "Queued".into();
    let runs = vec![held_run("held"), queued];
    ctx.register_caches(
        Some(NS),
        caches_with(vec![
            kind_cache(store_of(runs)),
            kind_cache(store_of(Vec::<ClusterSkillTrustPolicy>::new())),
            kind_cache(store_of(vec![revoker])),
            kind_cache(store_of(vec![agent])),
            kind_cache(store_of(vec![card])),
        ]),
    );
    let status = namespaced_status(&api, &ctx).await;
    assert_eq!(status.affected_runs, 1);
    assert_eq!(
        status.blast_radius,
        [affected("held", AgentRunPhase::Pending)]
    );
}

#[test]
fn a_run_held_before_its_start_requeues_the_policies_when_it_is_held_and_when_it_starts() {
    let seen = RunsSeen::default();
    let mut run = held_run("r");
    assert!(seen.changed(&run), "held: it may be in a blast radius");
    assert!(!seen.changed(&run), "seen again unchanged");
    run.status.as_mut().expect("a status").conditions[0].message = "another skill".into();
    assert!(seen.changed(&run), "held by something else");
    run.status.as_mut().expect("a status").conditions[0].reason = "Created".into();
    assert!(seen.changed(&run), "no longer held");
    assert!(!seen.forget(&run), "forgotten when it was released");
}
