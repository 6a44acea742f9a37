//! Two operator replicas splitting the namespaces (`--shards 2`) as processes of their own,
//! and the checks of who served which shard when: tests/tests/sharding.rs runs them on the
//! control plane, tests/tests/sharding_node.rs on the node.
//!
//! When each replica served which shards comes from its own log, which says "serving
//! shards" before anything serves them and "stopped serving shards" after the last pass
//! ended. A shard may legitimately move while a test runs (a replica whose renewals the API
//! server did not confirm in time stops serving): the checks hold at every moment, not
//! against one reading of the Leases.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentic_core::shard::Shards;
use agentic_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;
use tokio::time::Instant;

use crate::{eventually, operator_binary, operator_command_watching};

/// The operator's lease duration with `--shards` (its `run` command's).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long after a kill the issue (#37) allows for the dead replica's shards to be served
/// by another: the lease duration plus 5 s.
pub const TAKEOVER_BOUND: Duration = LEASE_DURATION.saturating_add(Duration::from_secs(5));
pub const SHARDS: u32 = 2;
/// The replicas' identities (`POD_NAME`), as the shard Leases name their holders.
pub const IDENTITIES: [&str; 2] = ["replica-a", "replica-b"];

/// Generated namespaces named after `prefix` until each shard has `per_shard` of them
/// (generated names land in either).
pub async fn namespaces_by_shard(
    env: &TestEnv,
    prefix: &str,
    per_shard: usize,
) -> BTreeMap<u32, Vec<String>> {
    let shards = Shards::new(SHARDS);
    let mut by_shard: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    while by_shard.len() < SHARDS as usize || by_shard.values().any(|list| list.len() < per_shard) {
        let namespace = env.namespace(prefix).await.expect("namespace");
        let list = by_shard.entry(shards.of(&namespace)).or_default();
        if list.len() < per_shard {
            list.push(namespace);
        }
    }
    by_shard
}

/// Who holds each shard's Lease in `namespace`.
pub async fn holders(client: &Client, namespace: &str) -> BTreeMap<u32, Option<String>> {
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
pub async fn operator_events(client: &Client, namespace: &str) -> Vec<Event> {
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
pub async fn reporters(client: &Client, namespace: &str) -> BTreeSet<String> {
    operator_events(client, namespace)
        .await
        .into_iter()
        .filter_map(|event| event.reporting_instance)
        .collect()
}

/// A stretch of time over which one replica served `shards`; `until` None: still serving
/// when its log was read.
#[derive(Debug)]
pub struct Served {
    pub replica: String,
    pub shards: BTreeSet<u32>,
    pub from: Timestamp,
    pub until: Option<Timestamp>,
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

/// A replica killed with SIGKILL, and when.
#[derive(Debug, Clone)]
pub struct Killed {
    pub victim: String,
    /// The other replica, which is to take the victim's shards over.
    pub survivor: String,
    /// Once the process had exited.
    pub at: Instant,
    /// The same moment on the wall clock, which the logs and Events use.
    pub at_wall: Timestamp,
}

/// The replicas [`IDENTITIES`] of a `--shards 2` operator, each a process of its own with
/// its JSON log in a folder of the test's; their Leases in a namespace of their own.
pub struct Replicas {
    pub leases_namespace: String,
    logs: tempfile::TempDir,
    processes: BTreeMap<String, tokio::process::Child>,
    killed: Option<Killed>,
}

impl Replicas {
    /// Starts both over `namespaces` (none: every namespace) of `env`, with `extra` flags.
    pub async fn start(env: &TestEnv, namespaces: &[String], extra: &[&str]) -> Self {
        let leases_namespace = env.namespace("shard-leases").await.expect("namespace");
        let logs = tempfile::tempdir().expect("a folder for the logs");
        let processes = IDENTITIES
            .into_iter()
            .map(|identity| {
                let log = std::fs::File::create(logs.path().join(identity)).expect("a log file");
                let mut command = operator_command_watching(operator_binary(), env, namespaces);
                command
                    .args(["--shards", &SHARDS.to_string(), "--log-format", "json"])
                    .args(extra)
                    .env("POD_NAMESPACE", &leases_namespace)
                    .env("POD_NAME", identity)
                    .env("RUST_LOG", "info")
                    // The operator logs to standard output.
                    .stdout(log.try_clone().expect("the log file again"))
                    .stderr(log);
                let child = command.spawn().expect("start agentic-operator");
                (identity.to_owned(), child)
            })
            .collect();
        Self {
            leases_namespace,
            logs,
            processes,
            killed: None,
        }
    }

    /// What `identity` has logged so far.
    pub fn log_of(&self, identity: &str) -> String {
        std::fs::read_to_string(self.logs.path().join(identity)).unwrap_or_default()
    }

    /// Waits until each replica holds one shard (each joins, then takes its share at its
    /// next look); returns who holds which.
    pub async fn split(&self, client: &Client) -> BTreeMap<u32, Option<String>> {
        eventually("each replica to hold one shard", || async {
            let holders = holders(client, &self.leases_namespace).await;
            let distinct: BTreeSet<_> = holders.values().flatten().cloned().collect();
            (holders.values().all(Option::is_some) && distinct.len() == 2).then_some(holders)
        })
        .await
    }

    /// Kills whichever replica holds `shard` now with SIGKILL, without a chance to release
    /// its Leases.
    pub async fn kill_holder_of(&mut self, client: &Client, shard: u32) -> Killed {
        let victim = eventually("a holder of the shard to kill", || async {
            holders(client, &self.leases_namespace)
                .await
                .remove(&shard)
                .flatten()
        })
        .await;
        let survivor = IDENTITIES
            .into_iter()
            .find(|identity| *identity != victim)
            .expect("another replica")
            .to_owned();
        let mut process = self
            .processes
            .remove(&victim)
            .expect("the victim's process");
        process.start_kill().expect("SIGKILL");
        process.wait().await.expect("the victim exits");
        let killed = Killed {
            victim,
            survivor,
            at: Instant::now(),
            at_wall: Timestamp::now(),
        };
        self.killed = Some(killed.clone());
        killed
    }

    /// Waits until `killed.survivor` holds `shard` and checks that it took no longer than
    /// [`TAKEOVER_BOUND`] after the kill; returns how long it took.
    pub async fn assert_taken_over(
        &self,
        client: &Client,
        shard: u32,
        killed: &Killed,
    ) -> Duration {
        eventually("the survivor to hold the victim's shard", || async {
            let holders = holders(client, &self.leases_namespace).await;
            (holders[&shard].as_deref() == Some(killed.survivor.as_str())).then_some(())
        })
        .await;
        let taken_over = killed.at.elapsed();
        assert!(
            taken_over <= TAKEOVER_BOUND,
            "shard {shard} taken over {taken_over:?} after the kill; the survivor's log:\n{}",
            self.log_of(&killed.survivor)
        );
        taken_over
    }

    /// Who served what until now, read from the replicas' logs, checked at every moment:
    /// never two replicas on one shard, and every operator Event of `namespaces` posted by a
    /// replica serving its namespace's shard then (a killed replica's last stretch ended at
    /// its kill).
    pub async fn assert_served_one_replica_at_a_time(
        &self,
        client: &Client,
        shards: Shards,
        namespaces: &[String],
    ) -> Vec<Served> {
        let now = Timestamp::now();
        let mut all = Vec::new();
        for replica in IDENTITIES {
            for mut stretch in served(replica, &self.log_of(replica)) {
                if let Some(killed) = &self.killed
                    && killed.victim == replica
                    && stretch.until.is_none()
                {
                    stretch.until = Some(killed.at_wall);
                }
                all.push(stretch);
            }
        }
        assert_one_replica_per_shard(&all, now);
        for namespace in namespaces {
            assert_events_from_the_shards_server(
                client,
                namespace,
                shards.of(namespace),
                &all,
                now,
            )
            .await;
        }
        all
    }

    /// Kills the replicas still running.
    pub async fn stop(mut self) {
        for process in self.processes.values_mut() {
            process.start_kill().expect("SIGKILL");
            let _ = process.wait().await;
        }
    }
}
