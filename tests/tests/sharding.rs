//! Two replicas splitting the namespaces (`--shards 2`): each serves the namespaces of the
//! shard whose Lease it holds, no object is written by both, and when one is killed the
//! other takes its shard over within the lease duration plus 5 s. Real operator processes,
//! killed with SIGKILL; no pod needs to run (the runs' sandboxes are only created), so the
//! control plane without a node proves it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunSpec};
use agentic_core::shard::Shards;
use agentic_integration_tests::{
    apply, env, eventually, llm_agent_spec, meta, operator_binary, operator_command, ready_agent,
    wait_for_sandbox,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::time::Instant;

/// The operator's lease duration with `--shards` (its `run` command's).
const LEASE_DURATION: Duration = Duration::from_secs(15);
const SHARDS: u32 = 2;

fn run(name: &str) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: "coder".into(),
            instructions: Some("Say hello.".into()),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// Who holds each shard's Lease in `namespace`.
async fn holders(client: &Client, namespace: &str) -> BTreeMap<u32, Option<String>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mut holders = BTreeMap::new();
    for shard in 0..SHARDS {
        let name = format!("{}-shard-{shard}", agentic_operator::operator::LEASE_NAME);
        let holder = leases
            .get_opt(&name)
            .await
            .expect("get a shard Lease")
            .and_then(|lease| lease.spec)
            .and_then(|spec| spec.holder_identity)
            .filter(|holder| !holder.is_empty());
        holders.insert(shard, holder);
    }
    holders
}

/// The replicas (`reportingInstance`) that posted the operator's Events in `namespace`.
async fn reporters(client: &Client, namespace: &str) -> BTreeSet<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|event| event.reporting_controller.as_deref() == Some("agentic-operator"))
        .filter_map(|event| event.reporting_instance)
        .collect()
}

#[tokio::test]
async fn two_replicas_split_the_namespaces_and_one_takes_over_the_others_shard_when_it_dies() {
    let env = env().await;
    let client = env.client();
    let shards = Shards::new(SHARDS);
    let leases_namespace = env.namespace("shard-leases").await.expect("namespace");
    // Namespaces until each shard has two (generated names land in either).
    let mut by_shard: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    while by_shard.len() < SHARDS as usize || by_shard.values().any(|list| list.len() < 2) {
        let namespace = env.namespace("shard-work").await.expect("namespace");
        let list = by_shard.entry(shards.of(&namespace)).or_default();
        if list.len() < 2 {
            list.push(namespace);
        }
    }
    let namespaces: Vec<String> = by_shard.values().flatten().cloned().collect();

    let logs = tempfile::tempdir().expect("a folder for the logs");
    let start = |identity: &str| {
        let mut command = operator_command(operator_binary(), env, &namespaces[0]);
        for namespace in &namespaces[1..] {
            command.args(["--namespace", namespace]);
        }
        let log = std::fs::File::create(logs.path().join(identity)).expect("a log file");
        command
            .args(["--shards", &SHARDS.to_string(), "--log-format", "json"])
            .env("POD_NAMESPACE", &leases_namespace)
            .env("POD_NAME", identity)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start agentic-operator")
    };
    let log_of =
        |identity: &str| std::fs::read_to_string(logs.path().join(identity)).unwrap_or_default();
    let mut replicas: BTreeMap<String, tokio::process::Child> = ["replica-a", "replica-b"]
        .into_iter()
        .map(|identity| (identity.to_owned(), start(identity)))
        .collect();

    // Whichever starts first takes both shards, then gives one up to the other.
    let split = eventually("each replica to hold one shard", || async {
        let holders = holders(&client, &leases_namespace).await;
        let distinct: BTreeSet<_> = holders.values().flatten().cloned().collect();
        (holders.values().all(Option::is_some) && distinct.len() == 2).then_some(holders)
    })
    .await;
    let holder_of = |namespace: &str| {
        split[&shards.of(namespace)]
            .clone()
            .expect("every shard held")
    };

    for namespace in &namespaces {
        ready_agent(
            &client,
            namespace,
            "coder",
            llm_agent_spec("harness.invalid/agent:1"),
        )
        .await;
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace);
        apply(&runs, &run("first")).await;
    }
    for namespace in &namespaces {
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace);
        wait_for_sandbox(&runs, "first").await;
    }
    // Every object of a namespace was written by the replica holding its shard alone: its
    // Events (the Agent's, the Gateway's, the run's) name that replica and no other.
    for namespace in &namespaces {
        let reporters = reporters(&client, namespace).await;
        assert_eq!(
            reporters,
            BTreeSet::from([holder_of(namespace)]),
            "the replicas writing in {namespace} (shard {})",
            shards.of(namespace)
        );
    }

    // Killed, without a chance to release its Leases.
    let (victim_shard, victim) = split
        .iter()
        .find_map(|(shard, holder)| Some((*shard, holder.clone()?)))
        .expect("a held shard");
    let survivor = split
        .values()
        .flatten()
        .find(|holder| **holder != victim)
        .expect("another replica")
        .clone();
    let mut killed = replicas.remove(&victim).expect("the victim's process");
    killed.start_kill().expect("SIGKILL");
    killed.wait().await.expect("the victim exits");
    let killed_at = Instant::now();
    let orphaned = &by_shard[&victim_shard][0];
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), orphaned);
    apply(&runs, &run("after")).await;

    eventually("the survivor to hold the victim's shard", || async {
        let holders = holders(&client, &leases_namespace).await;
        (holders[&victim_shard].as_deref() == Some(survivor.as_str())).then_some(())
    })
    .await;
    let taken_over = killed_at.elapsed();
    wait_for_sandbox(&runs, "after").await;
    let served = killed_at.elapsed();
    assert!(
        taken_over <= LEASE_DURATION + Duration::from_secs(5),
        "shard {victim_shard} taken over {taken_over:?} after the kill; the survivor's log:\n{}",
        log_of(&survivor)
    );
    eprintln!(
        "shard taken over {taken_over:?} after the kill, its new run served after {served:?}"
    );
    assert_eq!(
        reporters(&client, orphaned).await,
        BTreeSet::from([victim.clone(), survivor.clone()]),
        "the run created after the kill is the survivor's"
    );

    let mut last = replicas.remove(&survivor).expect("the survivor's process");
    last.start_kill().expect("SIGKILL");
    let _ = last.wait().await;
}
