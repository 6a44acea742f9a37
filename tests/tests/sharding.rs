//! Two replicas splitting the namespaces (`--shards 2`): each serves the namespaces of the
//! shard whose Lease it holds, never two replicas one shard at once, every Event posted by
//! the replica serving its namespace's shard at that moment, and when one is killed the
//! other takes its shard over within the lease duration plus 5 s. Real operator processes,
//! killed with SIGKILL; no pod needs to run (the runs' sandboxes are only created), so the
//! control plane without a node proves it.
//!
//! When each replica served which shards comes from its own log, which says "serving
//! shards" before anything serves them and "stopped serving shards" after the last pass
//! ended. A shard may legitimately move while the test runs (a replica whose renewals the
//! API server did not confirm in time stops serving): the checks hold at every moment, not
//! against one reading of the Leases.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunSpec};
use agentic_core::shard::{ShardHash, Shards};
use agentic_integration_tests::{
    apply, env, eventually, llm_agent_spec, meta, operator_binary, operator_command_watching,
    ready_agent, wait_for_sandbox,
};
use agentic_testenv::{TestEnv, TestEnvOptions};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;
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

/// The operator's Events in `namespace`.
async fn operator_events(client: &Client, namespace: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|event| event.reporting_controller.as_deref() == Some("agentic-operator"))
        .collect()
}

/// The replicas (`reportingInstance`) that posted the operator's Events in `namespace`.
async fn reporters(client: &Client, namespace: &str) -> BTreeSet<String> {
    operator_events(client, namespace)
        .await
        .into_iter()
        .filter_map(|event| event.reporting_instance)
        .collect()
}

/// A stretch of time over which one replica served `shards`; `until` None: still serving
/// when its log was read.
#[derive(Debug)]
struct Served {
    replica: String,
    shards: BTreeSet<u32>,
    from: Timestamp,
    until: Option<Timestamp>,
}

impl Served {
    fn covers(&self, shard: u32, at: Timestamp, end: Timestamp) -> bool {
        self.shards.contains(&shard) && self.from <= at && at <= self.until.unwrap_or(end)
    }
}

/// `{0, 1}`, as the operator logs a set of shards.
fn shard_set(logged: &str) -> BTreeSet<u32> {
    logged
        .trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter(|shard| !shard.trim().is_empty())
        .map(|shard| shard.trim().parse().expect("a shard number"))
        .collect()
}

/// What `replica`'s JSON log says it served, and when.
fn served(replica: &str, log: &str) -> Vec<Served> {
    let mut stretches: Vec<Served> = Vec::new();
    for line in log.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
        let at: Timestamp = field("timestamp").parse().expect("a log timestamp");
        match field("message").as_str() {
            "serving shards" => stretches.push(Served {
                replica: replica.to_owned(),
                shards: shard_set(&field("shards")),
                from: at,
                until: None,
            }),
            "stopped serving shards" => {
                let open = stretches
                    .iter_mut()
                    .rev()
                    .find(|stretch| stretch.until.is_none())
                    .expect("a stop follows a start");
                assert_eq!(
                    open.shards,
                    shard_set(&field("shards")),
                    "{replica}: {line}"
                );
                open.until = Some(at);
            }
            _ => {}
        }
    }
    stretches
}

/// Every replica's stretches, from the logs in `logs`; `killed` names the replica killed
/// at `killed_at`, whose open stretch ended then.
fn all_served(
    logs: &std::path::Path,
    replicas: &[&str],
    killed: Option<(&str, Timestamp)>,
) -> Vec<Served> {
    let mut all = Vec::new();
    for replica in replicas {
        let log = std::fs::read_to_string(logs.join(replica)).unwrap_or_default();
        for mut stretch in served(replica, &log) {
            if let Some((victim, at)) = killed
                && victim == *replica
                && stretch.until.is_none()
            {
                stretch.until = Some(at);
            }
            all.push(stretch);
        }
    }
    all
}

/// No shard served by two replicas at one moment.
fn assert_one_replica_per_shard(served: &[Served], end: Timestamp) {
    for (i, first) in served.iter().enumerate() {
        for second in &served[i + 1..] {
            if first.replica == second.replica || first.shards.is_disjoint(&second.shards) {
                continue;
            }
            let apart = first.until.unwrap_or(end) < second.from
                || second.until.unwrap_or(end) < first.from;
            assert!(
                apart,
                "two replicas served a shard at once:\n{first:?}\n{second:?}\nall: {served:#?}"
            );
        }
    }
}

/// Who served what until now, read from the replicas' logs in `logs` (`killed`: the replica
/// killed at that time), checked at every moment: never two replicas on one shard, and every
/// operator Event of `namespaces` posted by a replica serving its namespace's shard then.
async fn assert_served_one_replica_at_a_time(
    client: &Client,
    shards: Shards,
    namespaces: &[String],
    logs: &Path,
    replicas: &[&str],
    killed: Option<(&str, Timestamp)>,
) -> Vec<Served> {
    let now = Timestamp::now();
    let served = all_served(logs, replicas, killed);
    assert_one_replica_per_shard(&served, now);
    for namespace in namespaces {
        assert_events_from_the_shards_server(client, namespace, shards.of(namespace), &served, now)
            .await;
    }
    served
}

/// Every operator Event in `namespace` (of `shard`) was posted, and its series last
/// observed, while its reporter served the shard.
async fn assert_events_from_the_shards_server(
    client: &Client,
    namespace: &str,
    shard: u32,
    served: &[Served],
    end: Timestamp,
) {
    for event in operator_events(client, namespace).await {
        let reporter = event.reporting_instance.clone().unwrap_or_default();
        let times = event
            .event_time
            .iter()
            .chain(event.series.iter().map(|series| &series.last_observed_time))
            .map(|time| time.0);
        for at in times {
            assert!(
                served
                    .iter()
                    .any(|stretch| stretch.replica == reporter && stretch.covers(shard, at, end)),
                "{reporter} posted {:?} ({}) in {namespace} at {at} without serving shard \
                 {shard} then; who served what: {served:#?}",
                event.reason,
                event.note.as_deref().unwrap_or_default()
            );
        }
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

/// Replica `identity` of a `--shards 2` operator over `namespaces` (none: every namespace),
/// with `extra` flags, its Leases in `leases_namespace`, its JSON log in `logs`.
fn start_replica(
    env: &TestEnv,
    identity: &str,
    namespaces: &[String],
    extra: &[&str],
    leases_namespace: &str,
    logs: &Path,
) -> tokio::process::Child {
    let log = std::fs::File::create(logs.join(identity)).expect("a log file");
    let mut command = operator_command_watching(operator_binary(), env, namespaces);
    command
        .args(["--shards", &SHARDS.to_string(), "--log-format", "json"])
        .args(extra)
        .env("POD_NAMESPACE", leases_namespace)
        .env("POD_NAME", identity)
        .env("RUST_LOG", "info")
        // The operator logs to standard output.
        .stdout(log.try_clone().expect("the log file again"))
        .stderr(log)
        .spawn()
        .expect("start agentic-operator")
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
        start_replica(
            env,
            identity,
            &namespaces,
            &[],
            &leases_namespace,
            logs.path(),
        )
    };
    let log_of =
        |identity: &str| std::fs::read_to_string(logs.path().join(identity)).unwrap_or_default();
    let identities = ["replica-a", "replica-b"];
    let mut replicas: BTreeMap<String, tokio::process::Child> = identities
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

    first_runs_served(&client, &namespaces).await;
    // Every object of a namespace was written by the replica serving its shard at the time:
    // its Events (the Agent's, the Gateway's, the run's) say so.
    let so_far = assert_served_one_replica_at_a_time(
        &client,
        shards,
        &namespaces,
        logs.path(),
        &identities,
        None,
    )
    .await;
    for identity in identities {
        assert!(
            so_far.iter().any(|stretch| stretch.replica == identity),
            "{identity} served no shard: {so_far:#?}"
        );
    }

    // Killed, without a chance to release its Leases.
    let (victim_shard, victim) = split
        .iter()
        .find_map(|(shard, holder)| Some((*shard, holder.clone()?)))
        .expect("a held shard");
    let survivor = identities
        .into_iter()
        .find(|identity| *identity != victim)
        .expect("another replica")
        .to_owned();
    let victim_shard = holders(&client, &leases_namespace)
        .await
        .into_iter()
        .find_map(|(shard, holder)| (holder.as_deref() == Some(victim.as_str())).then_some(shard))
        .unwrap_or(victim_shard);
    let mut killed = replicas.remove(&victim).expect("the victim's process");
    killed.start_kill().expect("SIGKILL");
    killed.wait().await.expect("the victim exits");
    let killed_at = Instant::now();
    let killed_at_wall = Timestamp::now();
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
    let served_after = killed_at.elapsed();
    assert!(
        taken_over <= LEASE_DURATION + Duration::from_secs(5),
        "shard {victim_shard} taken over {taken_over:?} after the kill; the survivor's log:\n{}",
        log_of(&survivor)
    );
    eprintln!(
        "shard taken over {taken_over:?} after the kill, its new run served after {served_after:?}"
    );

    let all = assert_served_one_replica_at_a_time(
        &client,
        shards,
        &namespaces,
        logs.path(),
        &identities,
        Some((victim.as_str(), killed_at_wall)),
    )
    .await;
    eprintln!("who served what: {all:#?}");
    assert!(
        reporters(&client, orphaned).await.contains(&survivor),
        "the run created after the kill is the survivor's"
    );

    let mut last = replicas.remove(&survivor).expect("the survivor's process");
    last.start_kill().expect("SIGKILL");
    let _ = last.wait().await;
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
    let leases_namespace = env.namespace("shard-leases").await.expect("namespace");
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

    let logs = tempfile::tempdir().expect("a folder for the logs");
    let identities = ["replica-a", "replica-b"];
    let mut replicas: Vec<tokio::process::Child> = identities
        .iter()
        .map(|identity| {
            start_replica(
                &env,
                identity,
                &[],
                &["--shard-watch", "server"],
                &leases_namespace,
                logs.path(),
            )
        })
        .collect();
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
            let held = holders(&client, &leases_namespace).await;
            let distinct: BTreeSet<_> = held.values().flatten().cloned().collect();
            if distinct.len() < 2 {
                return None;
            }
            held.iter()
                .all(|(shard, holder)| {
                    let log =
                        std::fs::read_to_string(logs.path().join(holder.as_deref().unwrap_or("")))
                            .unwrap_or_default();
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
    assert_served_one_replica_at_a_time(
        &client,
        shards,
        &namespaces,
        logs.path(),
        &identities,
        None,
    )
    .await;
    for replica in &mut replicas {
        replica.start_kill().expect("SIGKILL");
        let _ = replica.wait().await;
    }
}
