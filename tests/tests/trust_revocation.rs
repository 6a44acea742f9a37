//! Revocation on a real node (kubelet, containerd, runc): adding a running run's pinned
//! digest to a trust policy's `revoked.digests` turns its card `Ready=False` (`Revoked`) and
//! its Agent not Ready within seconds, so no new run starts; with `action: Cancel` the
//! running run ends `Failed`/`SkillRevoked` and its pod goes, with `action: Block` it goes on.
//!
//! Cluster policies reach every namespace of the shared control plane, so the cluster
//! policy here revokes only a digest of this test's own skill (its description names the
//! namespace), and is deleted at the end.

use std::time::{Duration, Instant};

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, ClusterSkillTrustPolicy,
    ClusterSkillTrustPolicySpec, ObjectRef, RevocationAction, Revocations, SkillCard,
    SkillCardSpec, SkillTrustPolicy, SkillTrustPolicySpec, TrustPolicy,
};
use agentic_integration_tests::{
    apply, condition, env_var, has_condition, llm_agent_spec, meta, node_scenario, push,
    ready_agent, stub_agent, wait_for, wait_gone, wait_phase, write_skill,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::DeleteParams;
use kube::{Api, Client};

/// What the issue promises: a revocation blocks new runs within seconds of the policy's
/// apply. The operator's part is one watch event to the cards in the policy's scope, one
/// card pass that reads no registry (the digest was validated), one status write, then the
/// same for the Agent: milliseconds each (`tests/tests/trust.rs` measured 75 ms for the
/// card). The rest of the margin is for a busy 2-core machine.
const PROMISE: Duration = Duration::from_secs(5);

/// Pushes a one-skill image whose description names `ns`, so that its digest is this
/// test's alone; the card `name` on its tag, and the digest.
async fn skill_card(client: &Client, ns: &str, name: &str) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(
        tmp.path(),
        &format!("skill-{name}"),
        &format!("A skill of {ns} that a policy revokes."),
    );
    let pushed = push(&[skill], &format!("{ns}/{name}:1")).await;
    let (tag, digest) = pushed.rsplit_once('@').expect("pinned");
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta(name),
            spec: SkillCardSpec {
                image: Some(tag.to_string()),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    digest.to_string()
}

/// The Agent `name` running the stub agent with the card `card`; waits until it is Ready.
async fn agent_on(client: &Client, ns: &str, name: &str, card: &str) {
    let spec = AgentSpec {
        skill_cards: vec![ObjectRef { name: card.into() }],
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(client, ns, name, spec).await;
}

/// A run of `agent` whose stub agent works for five minutes, long past this test.
fn busy_run(name: &str, agent: &str) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            env: vec![env_var("STUB_SLEEP_SECONDS", "300")],
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

fn revoking(digest: &str, action: RevocationAction) -> TrustPolicy {
    TrustPolicy {
        action,
        revoked: Some(Revocations {
            digests: vec![digest.to_string()],
            ..Revocations::default()
        }),
        ..TrustPolicy::default()
    }
}

fn ready_is(conditions: &[Condition], status: &str, reason: &str) -> bool {
    has_condition(conditions, "Ready", status, reason)
}

fn card_revoked(card: &SkillCard) -> bool {
    card.status
        .as_ref()
        .is_some_and(|s| ready_is(&s.conditions, "False", "Revoked"))
}

fn agent_not_ready(agent: &Agent) -> bool {
    agent.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, "Ready").is_some_and(|ready| ready.status == "False")
    })
}

/// Polls `api` for `name` every 50 ms until `check` accepts it, and returns it; panics when
/// that takes longer than [`PROMISE`] from `since`.
async fn within_promise<K, F>(api: &Api<K>, name: &str, what: &str, since: Instant, check: F) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    F: Fn(&K) -> bool,
{
    loop {
        let object = api.get(name).await.expect("get");
        if check(&object) {
            eprintln!("{what} {:?} after the policy's apply", since.elapsed());
            return object;
        }
        assert!(
            since.elapsed() < PROMISE,
            "{name}: not {what} within {PROMISE:?} of the policy's apply: {object:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_revocation_blocks_new_runs_within_seconds_and_cancel_ends_the_running_one() {
    let (ns, client, operator) = node_scenario("trust-revocation", SandboxBackend::Pod).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let cluster: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());
    let namespaced: Api<SkillTrustPolicy> = Api::namespaced(client.clone(), &ns);

    // Two skills, each on its own Agent, each with a run working on the node.
    let blocked_digest = skill_card(&client, &ns, "blocked").await;
    let cancelled_digest = skill_card(&client, &ns, "cancelled").await;
    agent_on(&client, &ns, "keeps", "blocked").await;
    agent_on(&client, &ns, "stops", "cancelled").await;
    apply(&runs, &busy_run("goes-on", "keeps")).await;
    apply(&runs, &busy_run("ends", "stops")).await;
    for (run, digest) in [("goes-on", &blocked_digest), ("ends", &cancelled_digest)] {
        let running = wait_phase(&runs, run, AgentRunPhase::Running).await;
        let skills = &running.status.as_ref().expect("status").skills;
        assert!(
            skills
                .iter()
                .any(|s| s.image.ends_with(&format!("@{digest}"))),
            "{run} pinned its skill's digest: {skills:?}"
        );
    }

    // Block: the card and its Agent turn not Ready, the running run goes on.
    let block = format!("{ns}-block");
    apply(
        &cluster,
        &ClusterSkillTrustPolicy {
            metadata: meta(&block),
            spec: ClusterSkillTrustPolicySpec {
                policy: revoking(&blocked_digest, RevocationAction::Block),
            },
            status: None,
        },
    )
    .await;
    wait_for(&cards, "blocked", "Revoked", card_revoked).await;
    wait_for(&agents, "keeps", "not Ready", agent_not_ready).await;

    // Cancel, measured from its apply.
    let applied = Instant::now();
    apply(
        &namespaced,
        &SkillTrustPolicy {
            metadata: meta("cancel"),
            spec: SkillTrustPolicySpec {
                policy: revoking(&cancelled_digest, RevocationAction::Cancel),
            },
            status: None,
        },
    )
    .await;
    let card = within_promise(&cards, "cancelled", "Revoked", applied, card_revoked).await;
    let ready = condition(&card.status.as_ref().expect("status").conditions, "Ready")
        .expect("Ready")
        .clone();
    assert!(
        ready.message.contains(&cancelled_digest),
        "names the digest: {}",
        ready.message
    );
    within_promise(&agents, "stops", "not Ready", applied, agent_not_ready).await;
    apply(&runs, &busy_run("new", "stops")).await;
    let new = within_promise(&runs, "new", "held back", applied, |r: &AgentRun| {
        r.status
            .as_ref()
            .is_some_and(|s| ready_is(&s.conditions, "False", "AgentNotReady"))
    })
    .await;
    assert_eq!(
        new.status.as_ref().and_then(|s| s.sandbox_name.clone()),
        None,
        "a new run does not start: {new:#?}"
    );

    let ended = wait_phase(&runs, "ends", AgentRunPhase::Failed).await;
    let status = ended.status.as_ref().expect("status");
    let ready = condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(ready.reason, "SkillRevoked", "{ended:#?}");
    for named in [
        "skill-cancelled",
        cancelled_digest.as_str(),
        &format!("SkillTrustPolicy/{ns}/cancel"),
    ] {
        assert!(
            ready.message.contains(named),
            "names {named}: {}",
            ready.message
        );
    }
    wait_gone(&pods, "ends", "the revoked run's pod").await;

    // The policy change woke every live run of the namespace: by the time the cancelled
    // run's second pass deleted its pod, the run under Block had its pass too (both were
    // queued by the same event, before that second pass), and it still runs.
    let going = runs.get("goes-on").await.expect("the run under Block");
    let status = going.status.as_ref().expect("status");
    assert_eq!(status.phase, Some(AgentRunPhase::Running), "{going:#?}");
    assert!(
        ready_is(&status.conditions, "True", "AgentRunning"),
        "{going:#?}"
    );
    assert!(
        pods.get_opt("goes-on").await.expect("get").is_some(),
        "its pod runs on"
    );

    cluster
        .delete(&block, &DeleteParams::default())
        .await
        .expect("deleting the cluster policy");
    operator.stop().await;
}
