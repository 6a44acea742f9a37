//! How the work is split between replicas: a namespace belongs to one shard, by a hash of
//! its name that every replica and every version of the operator computes alike, and each
//! replica takes its fair share of the shards.
//!
//! The hash is the first eight bytes of the SHA-256 of the namespace's name, read big-endian,
//! mapped onto the shards by multiplication (its high bits) rather than a remainder: SHA-256
//! is specified and fixed, unlike std's randomly seeded hasher, and well mixed, unlike
//! FNV-1a, whose high bits barely move with the last characters of short names (`team-1`,
//! `team-2`). A namespace's runs, their caps and their admissions therefore stay with one
//! replica.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

/// The number of shards of an installation (`--shards`): at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards(u32);

impl Shards {
    /// `count` shards; zero is taken as one.
    pub fn new(count: u32) -> Self {
        Self(count.max(1))
    }

    /// How many there are.
    pub fn count(self) -> u32 {
        self.0
    }

    /// Every shard's index, from 0.
    pub fn all(self) -> std::ops::Range<u32> {
        0..self.0
    }

    /// The shard of `namespace`, in `0..count`.
    pub fn of(self, namespace: &str) -> u32 {
        let digest = Sha256::digest(namespace.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        let hash = u64::from_be_bytes(first);
        let shard = (u128::from(hash) * u128::from(self.0)) >> 64;
        // Below `self.0`, a u32, by construction.
        u32::try_from(shard).unwrap_or(0)
    }
}

/// The most shards one replica holds while `replicas` replicas are alive: every shard is
/// held and none has more than one replica's share over another's.
pub fn fair_share(shards: Shards, replicas: usize) -> usize {
    let shards = shards.count() as usize;
    shards.div_ceil(replicas.max(1))
}

/// What a replica does with the shard Leases at one look.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebalance {
    /// Shards it holds over its fair share: it stops serving them, then releases their
    /// Leases, highest index first.
    pub release: Vec<u32>,
    /// Shards nobody holds (free or expired) that it takes, up to its fair share, lowest
    /// index first.
    pub take: Vec<u32>,
}

/// A replica holding `held` with a fair share of `fair` keeps its share, gives up what is
/// over it, and takes from `takeable` what is missing.
pub fn rebalance(fair: usize, held: &BTreeSet<u32>, takeable: &BTreeSet<u32>) -> Rebalance {
    let release: Vec<u32> = held
        .iter()
        .rev()
        .take(held.len().saturating_sub(fair))
        .copied()
        .collect();
    let take: Vec<u32> = takeable
        .iter()
        .filter(|shard| !held.contains(shard))
        .take(fair.saturating_sub(held.len()))
        .copied()
        .collect();
    Rebalance { release, take }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed once with another implementation (Python's hashlib); a change here moves
    /// namespaces between replicas of a running installation during an upgrade.
    #[test]
    fn a_namespaces_shard_is_the_same_in_every_process_and_version() {
        let expected: [(&str, [u32; 5]); 7] = [
            ("default", [0, 0, 0, 0, 1]),
            ("team-a", [0, 1, 1, 2, 4]),
            ("team-b", [0, 1, 2, 3, 7]),
            ("kube-system", [0, 1, 1, 2, 4]),
            ("agents", [0, 1, 1, 2, 4]),
            ("platform", [0, 1, 2, 3, 6]),
            ("tenant-42", [0, 1, 2, 3, 7]),
        ];
        for (namespace, shards) in expected {
            let computed: Vec<u32> = [1, 2, 3, 4, 8]
                .into_iter()
                .map(|count| Shards::new(count).of(namespace))
                .collect();
            assert_eq!(computed, shards, "{namespace}");
        }
    }

    #[test]
    fn similar_names_spread_evenly_over_the_shards() {
        for count in [2u32, 3, 4, 8] {
            let shards = Shards::new(count);
            let mut per_shard = vec![0usize; count as usize];
            for i in 0..1000 {
                per_shard[shards.of(&format!("team-{i}")) as usize] += 1;
            }
            let even = 1000 / count as usize;
            // A fair coin's spread over 1,000 names stays well within a fifth of the mean.
            for held in &per_shard {
                assert!(
                    held.abs_diff(even) * 5 < even,
                    "{count} shards: {per_shard:?}"
                );
            }
        }
    }

    #[test]
    fn zero_shards_is_one_and_every_namespace_is_in_it() {
        let one = Shards::new(0);
        assert_eq!(one.count(), 1);
        assert_eq!(one.of("anything"), 0);
        assert_eq!(one.all().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn the_fair_share_covers_every_shard() {
        assert_eq!(fair_share(Shards::new(2), 1), 2);
        assert_eq!(fair_share(Shards::new(2), 2), 1);
        assert_eq!(fair_share(Shards::new(3), 2), 2);
        assert_eq!(fair_share(Shards::new(2), 3), 1);
        assert_eq!(fair_share(Shards::new(4), 0), 4);
        for shards in 1..10 {
            for replicas in 1..10 {
                assert!(fair_share(Shards::new(shards), replicas) * replicas >= shards as usize);
            }
        }
    }

    fn set(shards: &[u32]) -> BTreeSet<u32> {
        shards.iter().copied().collect()
    }

    #[test]
    fn a_replica_over_its_share_releases_the_highest_shards_and_one_under_it_takes_the_lowest() {
        assert_eq!(
            rebalance(1, &set(&[0, 1, 2]), &set(&[])),
            Rebalance {
                release: vec![2, 1],
                take: vec![]
            }
        );
        assert_eq!(
            rebalance(2, &set(&[3]), &set(&[0, 1, 2])),
            Rebalance {
                release: vec![],
                take: vec![0]
            }
        );
        // At its share it neither gives nor takes, whatever is free.
        assert_eq!(
            rebalance(2, &set(&[0, 1]), &set(&[2, 3])),
            Rebalance::default()
        );
        // Held shards are not taken again.
        assert_eq!(
            rebalance(2, &set(&[1]), &set(&[1, 3])),
            Rebalance {
                release: vec![],
                take: vec![3]
            }
        );
    }
}
