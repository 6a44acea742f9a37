//! How the work is split between replicas: a namespace belongs to one shard, by a hash of
//! its name that every replica and every version of the operator computes alike, and each
//! replica takes its fair share of the shards.
//!
//! The hash is 64 bits, mapped onto the shards by multiplication (its high bits), so that
//! each shard is one contiguous range of hashes. Two hashes, chosen per installation:
//! - [`ShardHash::Sha256`] (the default): the first eight bytes of the SHA-256 of the name,
//!   read big-endian. Specified and fixed, unlike std's randomly seeded hasher, and well
//!   mixed. The API server cannot select by it, so a replica that watches every namespace
//!   receives every object and drops the other shards' itself.
//! - [`ShardHash::Fnv1a`]: the 64-bit FNV-1a of the name, the hash the API server computes
//!   for a KEP-5866 shard selector (`shardRange(object.metadata.namespace, …)`), so that it
//!   sends each replica its own shards' objects only. Its high bits barely move with the
//!   last characters of short names: `team-1` and `team-2` usually share a shard.
//!
//! Either way a namespace's runs, their caps and their admissions stay with one replica.

use std::collections::BTreeSet;
use std::hash::Hasher as _;

use sha2::{Digest, Sha256};

/// The hash a namespace's shard is read from; every replica of an installation uses the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardHash {
    /// The first eight bytes of SHA-256, big-endian.
    #[default]
    Sha256,
    /// 64-bit FNV-1a, as the API server hashes for a shard selector.
    Fnv1a,
}

impl ShardHash {
    fn of(self, namespace: &str) -> u64 {
        match self {
            Self::Sha256 => {
                let digest = Sha256::digest(namespace.as_bytes());
                let mut first = [0u8; 8];
                first.copy_from_slice(&digest[..8]);
                u64::from_be_bytes(first)
            }
            Self::Fnv1a => {
                let mut hasher = fnv::FnvHasher::default();
                hasher.write(namespace.as_bytes());
                hasher.finish()
            }
        }
    }
}

/// The shards of an installation (`--shards`, at least one) and the hash that places a
/// namespace in one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards {
    count: u32,
    hash: ShardHash,
}

impl Shards {
    /// `count` shards by SHA-256; zero is taken as one.
    pub fn new(count: u32) -> Self {
        Self::with_hash(count, ShardHash::Sha256)
    }

    /// `count` shards by `hash`; zero is taken as one.
    pub fn with_hash(count: u32, hash: ShardHash) -> Self {
        Self {
            count: count.max(1),
            hash,
        }
    }

    /// How many there are.
    pub fn count(self) -> u32 {
        self.count
    }

    /// The hash that places namespaces.
    pub fn hash(self) -> ShardHash {
        self.hash
    }

    /// Every shard's index, from 0.
    pub fn all(self) -> std::ops::Range<u32> {
        0..self.count
    }

    /// The shard of `namespace`, in `0..count`.
    pub fn of(self, namespace: &str) -> u32 {
        self.of_hash(self.hash.of(namespace))
    }

    /// The shard of a name that hashes to `hash`: its high bits, scaled to the count.
    fn of_hash(self, hash: u64) -> u32 {
        let shard = (u128::from(hash) * u128::from(self.count)) >> 64;
        // Below `self.count`, a u32, by construction.
        u32::try_from(shard).unwrap_or(0)
    }

    /// The first hash of `shard`'s range: the least `h` with `h * count >> 64 == shard`.
    fn start(self, shard: u32) -> u128 {
        let count = u128::from(self.count);
        (u128::from(shard) << 64).div_ceil(count)
    }

    /// The KEP-5866 shard selector of the namespaces of `owned`, one `shardRange` per run of
    /// consecutive shards: what the API server filters by. None with [`ShardHash::Sha256`],
    /// which it cannot compute, or when `owned` is empty.
    pub fn selector(self, owned: &BTreeSet<u32>) -> Option<String> {
        if self.hash != ShardHash::Fnv1a {
            return None;
        }
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &shard in owned.iter().filter(|shard| **shard < self.count) {
            match ranges.last_mut() {
                Some((_, end)) if *end == shard => *end = shard + 1,
                _ => ranges.push((shard, shard + 1)),
            }
        }
        let terms: Vec<String> = ranges
            .into_iter()
            .map(|(first, end)| {
                // The API server reads 16 hex digits, and 2^64 as the end of the last range.
                format!(
                    "shardRange(object.metadata.namespace, '0x{:016x}', '0x{:016x}')",
                    self.start(first),
                    self.start(end)
                )
            })
            .collect();
        (!terms.is_empty()).then(|| terms.join(" || "))
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

    /// The API server's FNV-1a (KEP-5866), as a v1.36.3 kube-apiserver answered: with the
    /// selector of `[0, 2^63)` it listed `platform` and none of the others.
    #[test]
    fn fnv1a_shards_are_the_api_servers_hash_ranges() {
        let halves = Shards::with_hash(2, ShardHash::Fnv1a);
        assert_eq!(
            halves.selector(&set(&[0])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
            )
        );
        assert_eq!(
            halves.selector(&set(&[1])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
            )
        );
        assert_eq!(halves.of("platform"), 0);
        for namespace in [
            "team-a",
            "team-b",
            "team-c",
            "agents",
            "default2",
            "kube-system",
        ] {
            assert_eq!(halves.of(namespace), 1, "{namespace}");
        }
        // Its weakness, and the reason it is not the default: similar names share a shard.
        assert_eq!(
            ShardHash::Fnv1a.of("team-a") >> 48,
            ShardHash::Fnv1a.of("team-c") >> 48
        );
    }

    #[test]
    fn a_selector_covers_exactly_the_owned_shards_ranges() {
        let shards = Shards::with_hash(3, ShardHash::Fnv1a);
        // Consecutive shards make one range; the ranges meet with no gap.
        assert_eq!(
            shards.selector(&set(&[0, 1])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0xaaaaaaaaaaaaaaab')"
            )
        );
        assert_eq!(
            shards.selector(&set(&[0, 2])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x5555555555555556') \
                 || shardRange(object.metadata.namespace, '0xaaaaaaaaaaaaaaab', '0x10000000000000000')"
            )
        );
        // Every hash at a range's edge lands in the shard the selector gives it.
        for shard in shards.all() {
            let start = u64::try_from(shards.start(shard)).expect("below 2^64");
            assert_eq!(shards.of_hash(start), shard);
            if shard > 0 {
                assert_eq!(shards.of_hash(start - 1), shard - 1);
            }
        }
        assert_eq!(shards.selector(&set(&[])), None);
        assert_eq!(Shards::new(2).selector(&set(&[0])), None);
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
