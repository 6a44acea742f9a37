//! Two replicas splitting the namespaces (`--shards 2`): each serves the namespaces of the
//! shard whose Lease it holds, never two replicas one shard at once, every Event posted by
//! the replica serving its namespace's shard at that moment, and when one is killed the
//! other takes its shard over within the lease duration plus 5 s. Real operator processes,
//! killed with SIGKILL; here no pod runs (the runs' sandboxes are only created), on the
//! control plane without a node. The kill test also runs on the node, a run's pod running
//! through the kill (tests/tests/sharding_node.rs); the replicas and the checks of who
//! served what are [`agentic_integration_tests::sharding_support`]'s.

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::{AgentRun, AgentRunSpec};
use agentic_core::shard::{ShardHash, Shards};
use agentic_integration_tests::sharding_support::{
    IDENTITIES, Replicas, SHARDS, holders, namespaces_by_shard, reporters,
};
use agentic_integration_tests::{
    apply, env, eventually, llm_agent_spec, meta, ready_agent, wait_for_sandbox,
};
use agentic_testenv::{TestEnv, TestEnvOptions};
use kube::api::ListParams;
use kube::{Api, Client};

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

/// An Agent `coder` in each of `namespaces` and a run `first` of it, once it has its sandbox.
async fn first_runs_served(client: &Client, namespaces: &[String]) {
    for namespace in namespaces {
        ready_agent(
            client,
            namespace,
            "coder",
            llm_agent_spec("harness.invalid/agent:1"),
        )
        .await;
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace);
        apply(&runs, &run("first")).await;
    }
    for namespace in namespaces {
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace);
        wait_for_sandbox(&runs, "first").await;
    }
}

#[tokio::test]
async fn two_replicas_split_the_namespaces_and_one_takes_over_the_others_shard_when_it_dies() {
    let env = env().await;
    let client = env.client();
    let shards = Shards::new(SHARDS);
    let by_shard = namespaces_by_shard(env, "shard-work", 2).await;
    let namespaces: Vec<String> = by_shard.values().flatten().cloned().collect();
    let mut replicas = Replicas::start(env, &namespaces, &[]).await;
    replicas.split(&client).await;

    first_runs_served(&client, &namespaces).await;
    // Every object of a namespace was written by the replica serving its shard at the time:
    // its Events (the Agent's, the Gateway's, the run's) say so.
    let so_far = replicas
        .assert_served_one_replica_at_a_time(&client, shards, &namespaces)
        .await;
    for identity in IDENTITIES {
        assert!(
            so_far.iter().any(|stretch| stretch.replica == identity),
            "{identity} served no shard: {so_far:#?}"
        );
    }

    let victim_shard = 0;
    let killed = replicas.kill_holder_of(&client, victim_shard).await;
    let orphaned = &by_shard[&victim_shard][0];
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), orphaned);
    apply(&runs, &run("after")).await;
    let taken_over = replicas
        .assert_taken_over(&client, victim_shard, &killed)
        .await;
    wait_for_sandbox(&runs, "after").await;
    eprintln!(
        "shard taken over {taken_over:?} after the kill, its new run served after {:?}",
        killed.at.elapsed()
    );

    let all = replicas
        .assert_served_one_replica_at_a_time(&client, shards, &namespaces)
        .await;
    eprintln!("who served what: {all:#?}");
    assert!(
        reporters(&client, orphaned)
            .await
            .contains(&killed.survivor),
        "the run created after the kill is the survivor's"
    );
    replicas.stop().await;
}

/// `--shard-watch=server` on an API server with KEP-5866 on (the test environment turns its
/// feature gate on): the list a replica's watches make returns its shards' objects only, each
/// replica of two watching every namespace says the API server filters for it, and each
/// namespace's objects are still served by its shard's replica alone. A control plane of
/// this test's own, as the replicas watch every namespace.
#[tokio::test]
async fn with_server_side_shard_watches_the_api_server_sends_each_replica_its_shards_only() {
    let env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("a control plane of this test's own");
    let client = env.client();
    let shards = Shards::with_hash(SHARDS, ShardHash::Fnv1a);
    // Names whose FNV-1a hashes fall in either half (generated ones share their high bits).
    let namespaces = ["platform", "team-a"].map(str::to_owned);
    let by_shard: BTreeMap<u32, String> = namespaces
        .iter()
        .map(|namespace| (shards.of(namespace), namespace.clone()))
        .collect();
    assert_eq!(by_shard.len(), 2, "one namespace in each shard");
    for namespace in &namespaces {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        apply(
            &api,
            &k8s_openapi::api::core::v1::Namespace {
                metadata: meta(namespace),
                ..Default::default()
            },
        )
        .await;
    }

    let replicas = Replicas::start(&env, &[], &["--shard-watch", "server"]).await;
    first_runs_served(&client, &namespaces).await;

    // What a replica's watches ask for: its shard's objects, and the API server says so.
    for (shard, namespace) in &by_shard {
        let selector = shards
            .selector(&BTreeSet::from([*shard]))
            .expect("FNV-1a shards have a selector");
        assert!(agentic_operator::shards::selector::applied(&client, &selector).await);
        let agents: Api<agentic_api::Agent> = Api::all(
            agentic_operator::shards::selector::selecting(&client, &selector),
        );
        let listed: BTreeSet<String> = agents
            .list(&ListParams::default())
            .await
            .expect("a sharded list")
            .items
            .into_iter()
            .filter_map(|agent| agent.metadata.namespace)
            .collect();
        assert_eq!(listed, BTreeSet::from([namespace.clone()]), "shard {shard}");
    }

    // Each replica serves one shard, its watches filtered by the API server.
    eventually(
        "each replica to serve one shard, filtered by the API server",
        || async {
            let held = holders(&client, &replicas.leases_namespace).await;
            let distinct: BTreeSet<_> = held.values().flatten().cloned().collect();
            if distinct.len() < 2 {
                return None;
            }
            held.iter()
                .all(|(shard, holder)| {
                    let log = replicas.log_of(holder.as_deref().unwrap_or(""));
                    let selector = shards
                        .selector(&BTreeSet::from([*shard]))
                        .expect("a selector");
                    log.lines().any(|line| {
                        line.contains("the API server sends this replica its shards' objects only")
                            && line.contains(&selector)
                    })
                })
                .then_some(())
        },
    )
    .await;
    replicas
        .assert_served_one_replica_at_a_time(&client, shards, &namespaces)
        .await;
    replicas.stop().await;
}
