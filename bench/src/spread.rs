//! Runs spread over several namespaces and served by several replicas (`--namespaces`,
//! `--replicas`): what #37's "a second replica takes half" is measured on.
//!
//! The operator shards by namespace (a hash of its name), so one namespace gives a second
//! replica nothing to do. The bench picks its namespaces' names so that each of `--shards`
//! shards holds as many of them, puts run `i` (existing or timed) in namespace `i mod K`, and
//! picks the same names whether one replica or two serve them, so that a round with one
//! replica and a round with two put the same load on the same namespaces.
//!
//! With `--replicas` over 1 each replica is an `agentic-operator run --shards S` process of
//! its own, named in the shard Leases by `POD_NAME`, its Leases in a namespace of their own.
//! When each served which shards comes from its log: "serving shards" (with the set) before
//! a set's controllers start, "stopped serving shards" after they stop, and "every watch has
//! listed; ready" once the current set's watches have listed. The replicas are ready, and the
//! timed runs are created, once their sets split every shard between them and each has
//! listed its own.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentic_core::shard::Shards;
use anyhow::{Context as _, bail};

/// What the bench's namespaces are named after: `bench-000`, `bench-001`, … (not every
/// number is taken: see [`pick_namespaces`]).
const PREFIX: &str = "bench-";

/// `count` namespace names, as evenly spread over `shards` as the count allows: the first
/// `count mod S` shards get one more. The same names for the same arguments, whatever the
/// replicas.
pub fn pick_namespaces(count: usize, shards: Shards) -> Vec<String> {
    let per_shard = |shard: u32| {
        let (base, extra) = (
            count / shards.count() as usize,
            count % shards.count() as usize,
        );
        base + usize::from((shard as usize) < extra)
    };
    let mut taken = vec![0usize; shards.count() as usize];
    let mut picked = Vec::with_capacity(count);
    let mut j = 0usize;
    while picked.len() < count {
        let name = format!("{PREFIX}{j:03}");
        let shard = shards.of(&name);
        if taken[shard as usize] < per_shard(shard) {
            taken[shard as usize] += 1;
            picked.push(name);
        }
        j += 1;
    }
    picked
}

/// The namespace of run `i`, existing or timed.
pub fn namespace_of(i: usize, namespaces: &[String]) -> &str {
    &namespaces[i % namespaces.len()]
}

/// How many of `n` runs [`namespace_of`] puts in each of `k` namespaces.
pub fn runs_per_namespace(n: usize, k: usize) -> Vec<usize> {
    (0..k).map(|j| n / k + usize::from(j < n % k)).collect()
}

/// What one replica's log says it serves now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// The shards of its current set; empty when it serves none.
    pub shards: BTreeSet<u32>,
    /// Whether the current set's watches have all listed.
    pub listed: bool,
    /// How many sets it has started serving since its start (more than one: it took shards
    /// and gave some up, or lost some, and listed again).
    pub sets: usize,
}

/// The operator's log lines this reads (text format, `RUST_LOG=info`).
const SERVING: &str = "serving shards";
const STOPPED: &str = "stopped serving shards";
const LISTED: &str = "every watch has listed; ready";

/// What a replica's text log says it serves, read line by line.
pub fn served(log: &str) -> Served {
    let mut served = Served::default();
    for line in log.lines() {
        if line.contains(STOPPED) {
            served.shards.clear();
            served.listed = false;
        } else if let Some((_, rest)) = line.split_once(SERVING) {
            served.shards = shard_set(rest).unwrap_or_default();
            served.listed = false;
            served.sets += 1;
        } else if line.contains(LISTED) {
            served.listed = true;
        }
    }
    served
}

/// The set of `shards={0, 1}` in the fields of a log line.
fn shard_set(fields: &str) -> Option<BTreeSet<u32>> {
    let (_, rest) = fields.split_once("shards={")?;
    let (set, _) = rest.split_once('}')?;
    set.split(',')
        .map(str::trim)
        .filter(|shard| !shard.is_empty())
        .map(|shard| shard.parse().ok())
        .collect()
}

/// Whether `replicas` split every shard of `shards` between them, none idle, no shard twice,
/// each having listed its own.
pub fn is_split(replicas: &[Served], shards: Shards) -> bool {
    let mut union = BTreeSet::new();
    for replica in replicas {
        if replica.shards.is_empty() || !replica.listed {
            return false;
        }
        for shard in &replica.shards {
            if !union.insert(*shard) {
                return false;
            }
        }
    }
    union == shards.all().collect()
}

/// Waits until the replicas whose logs are `logs` have split the shards ([`is_split`]); how
/// long from `since`, and what each serves.
pub async fn wait_split(
    logs: &[&std::path::Path],
    shards: Shards,
    since: Instant,
) -> anyhow::Result<(Duration, Vec<Served>)> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let served: Vec<Served> = logs
            .iter()
            .map(|log| std::fs::read_to_string(log).map(|text| self::served(&text)))
            .collect::<Result<_, _>>()?;
        if is_split(&served, shards) {
            return Ok((since.elapsed(), served));
        }
        if Instant::now() > deadline {
            bail!("the replicas did not split the shards within 600 s: {served:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The namespaces of `namespaces` in one of `served`.
pub fn namespaces_in<'a>(
    namespaces: &'a [String],
    shards: Shards,
    served: &BTreeSet<u32>,
) -> Vec<&'a str> {
    namespaces
        .iter()
        .filter(|namespace| served.contains(&shards.of(namespace)))
        .map(String::as_str)
        .collect()
}

/// How many of `n` runs spread by [`namespace_of`] over `namespaces` are in one of `served`.
pub fn runs_in(n: usize, namespaces: &[String], shards: Shards, served: &BTreeSet<u32>) -> usize {
    runs_per_namespace(n, namespaces.len())
        .into_iter()
        .zip(namespaces)
        .filter(|(_, namespace)| served.contains(&shards.of(namespace)))
        .map(|(runs, _)| runs)
        .sum()
}

/// Creates the namespaces `names`.
pub async fn create_namespaces(client: &kube::Client, names: &[String]) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    for name in names {
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..kube::api::ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&kube::api::PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating the namespace {name}"))?;
    }
    Ok(())
}

/// Resets `pid`'s peak RSS (`VmHWM`) to its RSS now, so that a later read says the peak
/// since (`/proc/<pid>/clear_refs`, Linux 4.0 and later).
pub fn reset_peak_rss(pid: u32) -> anyhow::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_spread_evenly_over_the_shards_and_the_same_each_time() {
        let shards = Shards::new(2);
        let picked = pick_namespaces(16, shards);
        assert_eq!(picked.len(), 16);
        assert_eq!(picked, pick_namespaces(16, shards));
        let distinct: BTreeSet<&String> = picked.iter().collect();
        assert_eq!(distinct.len(), 16);
        for shard in shards.all() {
            let here = picked.iter().filter(|ns| shards.of(ns) == shard).count();
            assert_eq!(here, 8, "shard {shard}");
        }
        // An odd count: the first shards get one more.
        let three = Shards::new(3);
        let picked = pick_namespaces(8, three);
        let counts: Vec<usize> = three
            .all()
            .map(|shard| picked.iter().filter(|ns| three.of(ns) == shard).count())
            .collect();
        assert_eq!(counts, [3, 3, 2]);
        assert_eq!(pick_namespaces(1, Shards::new(1)), ["bench-000"]);
    }

    #[test]
    fn runs_go_round_the_namespaces() {
        let namespaces: Vec<String> = ["a", "b", "c"].map(String::from).into();
        let placed: Vec<&str> = (0..7).map(|i| namespace_of(i, &namespaces)).collect();
        assert_eq!(placed, ["a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(runs_per_namespace(7, 3), [3, 2, 2]);
        assert_eq!(runs_per_namespace(30_000, 16).iter().sum::<usize>(), 30_000);
    }

    #[test]
    fn the_runs_of_a_replicas_shards_are_those_of_their_namespaces() {
        let shards = Shards::new(2);
        let namespaces = pick_namespaces(16, shards);
        let first = runs_in(30_000, &namespaces, shards, &BTreeSet::from([0]));
        let second = runs_in(30_000, &namespaces, shards, &BTreeSet::from([1]));
        assert_eq!(first + second, 30_000);
        // Eight namespaces each, 1,875 runs per namespace.
        assert_eq!((first, second), (15_000, 15_000));
        assert_eq!(
            namespaces_in(&namespaces, shards, &BTreeSet::from([0, 1])).len(),
            16
        );
        assert_eq!(
            namespaces_in(&namespaces, shards, &BTreeSet::from([1])),
            namespaces
                .iter()
                .filter(|ns| shards.of(ns) == 1)
                .map(String::as_str)
                .collect::<Vec<_>>()
        );
    }

    const LOG: &str = "\
2026-12-05T10:00:00.000000Z  INFO agentic_operator::operator: sharding: taking this replica's share of the shard Leases shards=2 namespace=bench-leases identity=replica-a
2026-12-05T10:00:00.100000Z  INFO agentic_operator::shards::leases: took the shard's Lease shard=0 lease=agentic-operator-leader-shard-0 live_replicas=1
2026-12-05T10:00:00.200000Z  INFO agentic_operator::operator: serving shards shards={0, 1}
2026-12-05T10:00:01.000000Z  INFO agentic_operator::controllers: how the watches list initial_list=Streaming
2026-12-05T10:00:02.000000Z  INFO agentic_operator::operator: stopped serving shards shards={0, 1}
2026-12-05T10:00:02.100000Z  INFO agentic_operator::operator: serving shards shards={0}
";

    #[test]
    fn a_log_says_which_shards_a_replica_serves_and_whether_it_listed_them() {
        let before = served(LOG);
        assert_eq!(
            before,
            Served {
                shards: BTreeSet::from([0]),
                listed: false,
                sets: 2
            }
        );
        let after = served(&format!(
            "{LOG}2026-12-05T10:00:05.000000Z  INFO agentic_operator::controllers: every watch has listed; ready\n"
        ));
        assert!(after.listed);
        let stopped = served(&format!(
            "{LOG}2026-12-05T10:00:06.000000Z  INFO agentic_operator::operator: stopped serving shards shards={{0}}\n"
        ));
        assert!(stopped.shards.is_empty() && !stopped.listed);
        assert_eq!(served(""), Served::default());
    }

    #[test]
    fn the_shards_are_split_when_each_replica_listed_its_own_and_together_they_hold_all() {
        let shards = Shards::new(2);
        let replica = |set: &[u32], listed: bool| Served {
            shards: set.iter().copied().collect(),
            listed,
            sets: 1,
        };
        assert!(is_split(
            &[replica(&[0], true), replica(&[1], true)],
            shards
        ));
        // Not listed yet.
        assert!(!is_split(
            &[replica(&[0], true), replica(&[1], false)],
            shards
        ));
        // One holds both, the other none.
        assert!(!is_split(
            &[replica(&[0, 1], true), replica(&[], false)],
            shards
        ));
        // The same shard twice (one of them has not noticed it lost it).
        assert!(!is_split(
            &[replica(&[0, 1], true), replica(&[1], true)],
            shards
        ));
        // A shard nobody serves.
        assert!(!is_split(&[replica(&[0], true)], shards));
        // One replica over one shard.
        assert!(is_split(&[replica(&[0], true)], Shards::new(1)));
    }
}
