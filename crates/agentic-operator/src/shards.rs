//! Sharding: the namespaces split between replicas by [`agentic_core::shard`], each shard
//! served by the replica holding its Lease ([`leases`]), and the filter that keeps a
//! replica's watches to the namespaces of the shards it holds ([`ShardFilter`]).

pub mod leases;
pub mod selector;

use std::collections::BTreeSet;

use agentic_core::shard::Shards;

/// The shards a replica serves: the objects of their namespaces, and every cluster-scoped
/// object (trust policies, nodes), which all replicas read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardFilter {
    shards: Shards,
    owned: BTreeSet<u32>,
}

impl ShardFilter {
    /// The filter of a replica holding `owned` of `shards`.
    pub fn new(shards: Shards, owned: BTreeSet<u32>) -> Self {
        Self { shards, owned }
    }

    /// Whether an object of `namespace` (`None`: cluster-scoped) is this replica's to cache
    /// and reconcile.
    pub fn keeps(&self, namespace: Option<&str>) -> bool {
        namespace.is_none_or(|namespace| self.owned.contains(&self.shards.of(namespace)))
    }

    /// Whether this replica holds every shard, and so sees every namespace.
    pub fn is_everything(&self) -> bool {
        self.shards.all().all(|shard| self.owned.contains(&shard))
    }

    /// The shards held.
    pub fn owned(&self) -> &BTreeSet<u32> {
        &self.owned
    }

    /// The KEP-5866 selector of the namespaces of the shards held, when the shards are the
    /// API server's hash ranges (`--shard-watch=server`).
    pub fn selector(&self) -> Option<String> {
        self.shards.selector(&self.owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_keeps_its_shards_namespaces_and_every_cluster_scoped_object() {
        let shards = Shards::new(2);
        let first = ShardFilter::new(shards, BTreeSet::from([0]));
        let second = ShardFilter::new(shards, BTreeSet::from([1]));
        for namespace in ["default", "team-a", "team-b", "platform", "agents"] {
            // Exactly one of the two replicas keeps each namespace.
            assert_ne!(
                first.keeps(Some(namespace)),
                second.keeps(Some(namespace)),
                "{namespace}"
            );
            assert_eq!(
                first.keeps(Some(namespace)),
                shards.of(namespace) == 0,
                "{namespace}"
            );
        }
        assert!(first.keeps(None) && second.keeps(None));
        assert!(!first.is_everything());
        assert!(ShardFilter::new(shards, BTreeSet::from([0, 1])).is_everything());
    }
}
