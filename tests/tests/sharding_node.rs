//! The sharded mode's kill test on the node (issue #37): two replicas (`--shards 2`, real
//! operator processes) serve a namespace of each shard, and a run's pod in each runs on the
//! node (kubelet, containerd, runc). The replica serving one of them is killed with SIGKILL
//! while that pod runs; the other takes the shard over within the lease duration plus 5 s,
//! follows the orphaned run to the outcome its pod gives, and runs a run created after the
//! kill to its end. At no moment did two replicas serve one shard, and every Event came
//! from the replica serving its namespace's shard then
//! ([`agentic_integration_tests::sharding_support`], as on the control plane in
//! tests/tests/sharding.rs).

use agentic_api::{AgentRun, AgentRunPhase, CONDITION_READY};
use agentic_core::reasons::AgentRunReason;
use agentic_core::sandbox::run_outcome;
use agentic_core::shard::Shards;
use agentic_integration_tests::sharding_support::{Replicas, SHARDS, namespaces_by_shard};
use agentic_integration_tests::{
    agent_log, agent_run, apply, condition, env_var, events_about, eventually, llm_agent_spec,
    node_env, ready_agent, registry, stub_agent, wait_phase,
};
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::{Api, Client};

/// How long the runs that go through the kill work: longer than the takeover can take
/// (the lease duration plus 5 s after the kill), so the survivor follows a pod that still
/// runs rather than one that already ended.
const BUSY_SECONDS: u64 = 30;

/// The shard whose replica is killed.
const VICTIM_SHARD: u32 = 0;

/// The run `name` of the stub agent, which sleeps `seconds` before it exits 0.
fn stub_run(name: &str, seconds: u64) -> AgentRun {
    let mut run = agent_run(name, "stub");
    run.spec.env = vec![env_var("STUB_SLEEP_SECONDS", &seconds.to_string())];
    run
}

/// The agent container of `pod`, once the kubelet reports it ended.
fn agent_terminated(pod: &Pod) -> Option<ContainerStateTerminated> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|status| status.name == "agent")?
        .state
        .as_ref()?
        .terminated
        .clone()
}

/// Waits for the run `name` in `ns` to succeed, and checks that its status is what the
/// operator's own judgement of its pod gives (phase, reason and times; a replaced or
/// restarted container would be judged lost), that the agent exited 0 after printing its
/// last line, and that the Event of its end came from `survivor`. Returns the agent
/// container's end.
async fn assert_succeeded_by_its_pod(
    client: &Client,
    ns: &str,
    name: &str,
    survivor: &str,
) -> ContainerStateTerminated {
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
    let run = wait_phase(&runs, name, AgentRunPhase::Succeeded).await;
    let status = run.status.clone().expect("a status");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods
        .get(status.sandbox_name.as_deref().expect("a sandbox"))
        .await
        .expect("a succeeded run keeps its pod");
    let judged = run_outcome(Some(&pod), true, &status);
    let ready = condition(&status.conditions, CONDITION_READY).expect("a Ready condition");
    assert_eq!(
        (
            judged.phase,
            judged.reason.as_str(),
            &judged.start_time,
            &judged.completion_time
        ),
        (
            AgentRunPhase::Succeeded,
            ready.reason.as_str(),
            &status.start_time,
            &status.completion_time
        ),
        "{name}: the pod's outcome against the run's status: {pod:#?}\n{run:#?}"
    );
    let terminated = agent_terminated(&pod).expect("the agent ended");
    assert_eq!(terminated.exit_code, 0, "{name}: {terminated:#?}");
    let log = agent_log(client, ns, &run).await;
    assert!(
        log.contains("stub-agent: done"),
        "{name} worked to its end:\n{log}"
    );
    let ended = events_about(client, ns, "AgentRun", name)
        .await
        .into_iter()
        .find(|event| event.reason.as_deref() == Some(AgentRunReason::AgentSucceeded.as_str()))
        .expect("an Event of the run's end");
    assert_eq!(
        ended.reporting_instance.as_deref(),
        Some(survivor),
        "{name}: who posted its end: {ended:#?}"
    );
    terminated
}

/// Who posted the `AgentRunning` Event of the run `name` in `ns`, once there is one.
async fn running_reporter(client: &Client, ns: &str, name: &str) -> String {
    eventually("the Event of the run's start", || async {
        events_about(client, ns, "AgentRun", name)
            .await
            .into_iter()
            .find(|event| event.reason.as_deref() == Some(AgentRunReason::AgentRunning.as_str()))
            .and_then(|event| event.reporting_instance)
    })
    .await
}

#[tokio::test]
async fn a_replica_killed_mid_run_hands_its_running_pods_over_to_the_other() {
    let env = node_env().await;
    let client = env.client();
    let shards = Shards::new(SHARDS);
    let by_shard = namespaces_by_shard(env, "shard-node", 1).await;
    let namespaces: Vec<String> = by_shard.values().flatten().cloned().collect();
    let orphaned = by_shard[&VICTIM_SHARD][0].clone();
    let registry = registry().await;
    let mut replicas = Replicas::start(
        env,
        &namespaces,
        &["--insecure-registry", registry.as_str()],
    )
    .await;
    replicas.split(&client).await;

    let image = stub_agent().await;
    for ns in &namespaces {
        ready_agent(&client, ns, "stub", llm_agent_spec(image.clone())).await;
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
        apply(&runs, &stub_run("busy", BUSY_SECONDS)).await;
    }
    // Both pods running, and the victim's run's start announced by the replica serving it.
    for ns in &namespaces {
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
        wait_phase(&runs, "busy", AgentRunPhase::Running).await;
    }
    let started_by = running_reporter(&client, &orphaned, "busy").await;

    let killed = replicas.kill_holder_of(&client, VICTIM_SHARD).await;
    assert_eq!(
        started_by, killed.victim,
        "the run that goes through the kill was the victim's"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &orphaned);
    let at_kill = pods.get("busy").await.expect("the run's pod");
    assert_eq!(
        at_kill.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running"),
        "the pod runs when its replica dies: {at_kill:#?}"
    );
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &orphaned);
    apply(&runs, &stub_run("after", 1)).await;

    let taken_over = replicas
        .assert_taken_over(&client, VICTIM_SHARD, &killed)
        .await;
    // The run created after the kill ends first (it sleeps 1 s), so each is timed.
    assert_succeeded_by_its_pod(&client, &orphaned, "after", &killed.survivor).await;
    let after_done = killed.at.elapsed();
    let busy = assert_succeeded_by_its_pod(&client, &orphaned, "busy", &killed.survivor).await;
    let busy_done = killed.at.elapsed();
    let (started, finished) = (
        busy.started_at.expect("a start").0,
        busy.finished_at.expect("an end").0,
    );
    assert!(
        started <= killed.at_wall && killed.at_wall < finished,
        "the kill at {} landed while the agent ran, {started} to {finished}",
        killed.at_wall
    );
    // The survivor's own shard went on through the kill: its run ended after it.
    let own = &by_shard[&(1 - VICTIM_SHARD)][0];
    assert_succeeded_by_its_pod(&client, own, "busy", &killed.survivor).await;
    eprintln!(
        "after the kill: shard taken over in {taken_over:?}, the orphaned run Succeeded after \
         {busy_done:?} (its agent ended {:?} after the kill), the new run after {after_done:?}",
        finished.duration_since(killed.at_wall)
    );

    let all = replicas
        .assert_served_one_replica_at_a_time(&client, shards, &namespaces)
        .await;
    eprintln!("who served what: {all:#?}");
    replicas.stop().await;
}
