//! The Leases that say which replica serves which shard: `<prefix>-shard-<i>` for each
//! shard, and `<prefix>-member-<i>` slots that count the live replicas (a replica holds one
//! slot; there are as many slots as shards, as a replica past that would have no shard to
//! serve). Every name is known in advance, so RBAC can name each Lease.
//!
//! A Lease is taken only when it is free (no holder: its holder released it after it
//! stopped serving) or expired: its holder and renewal time have not changed for a whole
//! lease duration *as this replica observed them* (client-go's rule, which needs no shared
//! clock). Its holder renews it every [`RENEW_INTERVAL`] and stops serving it
//! [`STOP_MARGIN`] before the duration has passed since the start of its last confirmed
//! renewal, so two replicas never serve one shard at once. Every write names the version it
//! read, so of two replicas racing for a Lease one wins.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentic_core::shard::{Rebalance, Shards, fair_share, rebalance};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::time::Instant;

use crate::error::Chain;

/// How often a replica reads the Leases, renews its own and rebalances.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(2);
/// How long before its Lease could expire a replica stops serving a shard whose renewal it
/// could not confirm: a round of Lease requests, and the controllers' stop.
pub const STOP_MARGIN: Duration = Duration::from_secs(5);

/// Which Leases, and who this replica is in them.
#[derive(Clone, Debug)]
pub struct ShardLeasing {
    /// Namespace of the Leases.
    pub namespace: String,
    /// `<prefix>-shard-<i>` and `<prefix>-member-<i>`: the leader-election Lease's name.
    pub prefix: String,
    /// This replica's name in the Leases.
    pub identity: String,
    pub shards: Shards,
    /// How long a Lease stays valid after a renewal.
    pub lease_duration: Duration,
}

impl ShardLeasing {
    /// The Lease of shard `shard`.
    pub fn shard_lease(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.prefix)
    }

    /// The Lease of member slot `slot`.
    pub fn member_lease(&self, slot: u32) -> String {
        format!("{}-member-{slot}", self.prefix)
    }
}

/// A Lease as last read: who holds it, since when this replica has seen it unchanged.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    holder: Option<String>,
    renewed: Option<MicroTime>,
    /// When this replica first saw this holder and renewal.
    since: Instant,
}

/// What this replica has seen of each Lease, by name.
#[derive(Debug, Default)]
pub struct Observations {
    seen: BTreeMap<String, Seen>,
}

impl Observations {
    /// Records the Lease `name` as read at `now` (`None`: it does not exist).
    pub fn observe(&mut self, name: &str, lease: Option<&Lease>, now: Instant) {
        let spec = lease.and_then(|lease| lease.spec.as_ref());
        let holder = spec
            .and_then(|spec| spec.holder_identity.clone())
            .filter(|holder| !holder.is_empty());
        let renewed = spec.and_then(|spec| spec.renew_time.clone());
        match self.seen.get_mut(name) {
            Some(seen) if seen.holder == holder && seen.renewed == renewed => {}
            _ => {
                self.seen.insert(
                    name.to_owned(),
                    Seen {
                        holder,
                        renewed,
                        since: now,
                    },
                );
            }
        }
    }

    /// Whether another replica may still be acting on the Lease `name` at `now`: it has a
    /// holder that renewed it less than `duration` ago as seen from here. A Lease never read
    /// counts as held.
    pub fn held(&self, name: &str, now: Instant, duration: Duration) -> bool {
        self.seen.get(name).is_none_or(|seen| {
            seen.holder.is_some() && now.saturating_duration_since(seen.since) < duration
        })
    }

    /// The holder of `name` as last read.
    pub fn holder(&self, name: &str) -> Option<&str> {
        self.seen.get(name).and_then(|seen| seen.holder.as_deref())
    }
}

/// A Lease this replica holds, and until when it may act on it.
#[derive(Clone, Debug)]
struct Held {
    /// The start of its last confirmed renewal plus the lease duration.
    valid_until: Instant,
}

/// The shard Leases of one replica.
pub struct ShardLeases {
    leasing: ShardLeasing,
    api: Api<Lease>,
    owner: Option<OwnerReference>,
    seen: Observations,
    /// Each Lease as last read (`None`: it did not exist); what a write replaces.
    read: BTreeMap<String, Option<Lease>>,
    /// The member slot held, if any.
    member: Option<(u32, Held)>,
    held: BTreeMap<u32, Held>,
}

/// What one look at the Leases came to.
#[derive(Debug, Default)]
pub struct Look {
    /// Shards over this replica's fair share, to stop serving and then [`ShardLeases::release`].
    pub release: Vec<u32>,
}

impl ShardLeases {
    /// The Leases of `leasing`, created owned by `owner` when given (the pod's
    /// ServiceAccount, so that uninstalling removes them).
    pub fn new(api: Api<Lease>, leasing: ShardLeasing, owner: Option<OwnerReference>) -> Self {
        Self {
            leasing,
            api,
            owner,
            seen: Observations::default(),
            read: BTreeMap::new(),
            member: None,
            held: BTreeMap::new(),
        }
    }

    /// The shards this replica holds.
    pub fn held(&self) -> BTreeSet<u32> {
        self.held.keys().copied().collect()
    }

    /// The earliest time this replica must stop serving a shard whose renewal it has not
    /// confirmed by then; None while it holds none.
    pub fn deadline(&self) -> Option<Instant> {
        self.held
            .values()
            .map(|held| {
                held.valid_until
                    .checked_sub(STOP_MARGIN)
                    .unwrap_or(held.valid_until)
            })
            .min()
    }

    /// Forgets the shards whose renewal was not confirmed in time: from `now` on they may
    /// expire, so they are no longer served. Returns them.
    pub fn lapse(&mut self, now: Instant) -> Vec<u32> {
        let lapsed: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, held)| now + STOP_MARGIN >= held.valid_until)
            .map(|(shard, _)| *shard)
            .collect();
        for shard in &lapsed {
            self.held.remove(shard);
            tracing::warn!(
                shard,
                lease = %self.leasing.shard_lease(*shard),
                "no renewal of the shard's Lease confirmed before it could expire; stopped serving it"
            );
        }
        if self
            .member
            .as_ref()
            .is_some_and(|(_, held)| now + STOP_MARGIN >= held.valid_until)
        {
            self.member = None;
        }
        lapsed
    }

    /// Reads every Lease, renews this replica's, and takes what is free up to its fair share
    /// of the live replicas; says which shards are over that share.
    pub async fn look(&mut self) -> Look {
        let shards = self.leasing.shards;
        for slot in shards.all() {
            let name = self.leasing.member_lease(slot);
            self.read(&name).await;
            let name = self.leasing.shard_lease(slot);
            self.read(&name).await;
        }
        let now = Instant::now();
        let duration = self.leasing.lease_duration;

        // Membership first: a replica counts only once it holds a slot.
        if let Some((slot, _)) = self.member.clone() {
            let name = self.leasing.member_lease(slot);
            match self.write(&name).await {
                Some(held) => self.member = Some((slot, held)),
                None if self.seen.holder(&name) != Some(&self.leasing.identity) => {
                    self.member = None;
                }
                None => {}
            }
        }
        // Joining afresh (no slot names this replica yet): others starting with it may not
        // hold a slot yet either, so it takes no shard before its next look counts them.
        let mut joining = false;
        if self.member.is_none() {
            // A slot that still names this replica (its renewal was not confirmed in time)
            // first: taking another would count this replica twice until that one expired.
            let own = shards
                .all()
                .find(|slot| self.names_me(&self.leasing.member_lease(*slot)));
            joining = own.is_none();
            for slot in own.into_iter().chain(shards.all()) {
                let name = self.leasing.member_lease(slot);
                if (self.names_me(&name) || !self.seen.held(&name, now, duration))
                    && let Some(held) = self.write(&name).await
                {
                    self.member = Some((slot, held));
                    break;
                }
            }
        }
        let live = shards
            .all()
            .filter(|slot| {
                self.member.as_ref().is_some_and(|(mine, _)| mine == slot)
                    || self
                        .seen
                        .held(&self.leasing.member_lease(*slot), now, duration)
            })
            .count();
        let fair = match &self.member {
            // Keeps what it holds, takes nothing more: replicas started together would
            // otherwise each count itself alone, the first would take every shard, start
            // listing them all, and give half back at its next look.
            Some(_) if joining => fair_share(shards, live).min(self.held.len()),
            Some(_) => fair_share(shards, live),
            None => 0,
        };

        for shard in self.held() {
            let name = self.leasing.shard_lease(shard);
            match self.write(&name).await {
                Some(held) => {
                    self.held.insert(shard, held);
                }
                None if self.seen.holder(&name) != Some(&self.leasing.identity) => {
                    self.held.remove(&shard);
                    tracing::warn!(shard, lease = %name, "another replica holds the shard's Lease; stopped serving it");
                }
                None => {}
            }
        }
        // Shards this replica stopped serving when a renewal went unconfirmed, while their
        // Leases still name it, are taken back first, up to its share: no other replica can
        // have taken them (a write names the version read this round), and waiting for them
        // to expire would leave them unserved for a whole lease duration.
        let named: Vec<u32> = shards
            .all()
            .filter(|shard| {
                !self.held.contains_key(shard) && self.names_me(&self.leasing.shard_lease(*shard))
            })
            .take(fair.saturating_sub(self.held.len()))
            .collect();
        for shard in named {
            let name = self.leasing.shard_lease(shard);
            if let Some(held) = self.write(&name).await {
                tracing::info!(shard, lease = %name, "took the shard's Lease back");
                self.held.insert(shard, held);
            }
        }
        let takeable: BTreeSet<u32> = shards
            .all()
            .filter(|shard| {
                !self
                    .seen
                    .held(&self.leasing.shard_lease(*shard), now, duration)
            })
            .collect();
        let Rebalance { release, take } = rebalance(fair, &self.held(), &takeable);
        for shard in take {
            let name = self.leasing.shard_lease(shard);
            if let Some(held) = self.write(&name).await {
                tracing::info!(shard, lease = %name, live_replicas = live, "took the shard's Lease");
                self.held.insert(shard, held);
            }
        }
        Look { release }
    }

    /// Whether the Lease `name`, as read this round, names this replica as its holder.
    fn names_me(&self, name: &str) -> bool {
        self.read.contains_key(name)
            && self.seen.holder(name) == Some(self.leasing.identity.as_str())
    }

    /// Gives up the Leases of `shards` (which this replica no longer serves), so that
    /// another replica takes them without waiting for them to expire.
    pub async fn release(&mut self, shards: &[u32]) {
        for shard in shards {
            if self.held.remove(shard).is_some() {
                let name = self.leasing.shard_lease(*shard);
                self.vacate(&name).await;
                tracing::info!(shard, lease = %name, "released the shard's Lease");
            }
        }
    }

    /// Gives up every Lease held, shards and member slot, once nothing is served any more.
    pub async fn release_all(&mut self) {
        let shards: Vec<u32> = self.held.keys().copied().collect();
        self.release(&shards).await;
        if let Some((slot, _)) = self.member.take() {
            let name = self.leasing.member_lease(slot);
            self.vacate(&name).await;
        }
    }

    /// Reads the Lease `name` into the observations; a failed read leaves them as they were.
    async fn read(&mut self, name: &str) {
        match self.api.get_opt(name).await {
            Ok(lease) => {
                self.seen.observe(name, lease.as_ref(), Instant::now());
                self.read.insert(name.to_owned(), lease);
            }
            Err(e) => {
                // Unknown until read again: neither renewed nor taken over this round.
                self.read.remove(name);
                tracing::warn!(lease = name, error = %Chain(&e), "cannot read a shard Lease");
            }
        }
    }

    /// Takes or renews the Lease `name` for this replica, over the version read this round
    /// (so a change since fails with a conflict); the new validity when the API server
    /// confirmed it.
    async fn write(&mut self, name: &str) -> Option<Held> {
        let started = Instant::now();
        let identity = self.leasing.identity.clone();
        let now = MicroTime(Timestamp::now());
        let current = self.read.get(name)?.clone();
        let written = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        owner_references: self.owner.clone().map(|owner| vec![owner]),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec(&identity, now.clone(), now, 0)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                let spec = lease.spec.take().unwrap_or_default();
                let ours = spec.holder_identity.as_deref() == Some(identity.as_str());
                if !ours && self.seen.held(name, started, self.leasing.lease_duration) {
                    return None;
                }
                let (acquired, transitions) = if ours {
                    (
                        spec.acquire_time.unwrap_or_else(|| now.clone()),
                        spec.lease_transitions.unwrap_or_default(),
                    )
                } else {
                    (now.clone(), spec.lease_transitions.unwrap_or_default() + 1)
                };
                lease.spec = Some(self.spec(&identity, acquired, now, transitions));
                self.api.replace(name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(lease) => {
                self.seen.observe(name, Some(&lease), Instant::now());
                self.read.insert(name.to_owned(), Some(lease));
                Some(Held {
                    valid_until: started + self.leasing.lease_duration,
                })
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                self.read.remove(name);
                None
            }
            Err(e) => {
                tracing::warn!(lease = name, error = %Chain(&e), "cannot write a shard Lease");
                None
            }
        }
    }

    fn spec(
        &self,
        identity: &str,
        acquired: MicroTime,
        renewed: MicroTime,
        transitions: i32,
    ) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(identity.to_owned()),
            lease_duration_seconds: i32::try_from(self.leasing.lease_duration.as_secs()).ok(),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Clears the holder of the Lease `name`, if this replica still holds it.
    async fn vacate(&mut self, name: &str) {
        let Ok(Some(mut lease)) = self.api.get_opt(name).await else {
            return;
        };
        let mut spec = lease.spec.take().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.leasing.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        lease.spec = Some(spec);
        if let Err(e) = self.api.replace(name, &PostParams::default(), &lease).await {
            tracing::warn!(lease = name, error = %Chain(&e), "could not release a shard Lease; it expires instead");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_at: i64) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(
                    Timestamp::from_second(renewed_at).expect("a time"),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    const DURATION: Duration = Duration::from_secs(15);

    #[test]
    fn a_lease_expires_a_duration_after_this_replica_last_saw_it_change() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut seen = Observations::default();
        // Never read: held, whatever the time.
        assert!(seen.held("l", at(100), DURATION));
        seen.observe("l", Some(&lease(Some("a"), 1)), at(0));
        assert!(seen.held("l", at(14), DURATION));
        // Read again unchanged: still counted from the first sight.
        seen.observe("l", Some(&lease(Some("a"), 1)), at(10));
        assert!(!seen.held("l", at(15), DURATION));
        // A renewal, whatever its clock says, starts the count again.
        seen.observe("l", Some(&lease(Some("a"), 0)), at(16));
        assert!(seen.held("l", at(30), DURATION));
        assert!(!seen.held("l", at(31), DURATION));
        assert_eq!(seen.holder("l"), Some("a"));
    }

    fn replica(api: &crate::controllers::fake_api::FakeApi, identity: &str) -> ShardLeases {
        let leasing = ShardLeasing {
            namespace: "ops".into(),
            prefix: "lease".into(),
            identity: identity.into(),
            shards: Shards::new(2),
            lease_duration: DURATION,
        };
        ShardLeases::new(Api::namespaced(api.client(), "ops"), leasing, None)
    }

    fn shards(list: &[u32]) -> BTreeSet<u32> {
        list.iter().copied().collect()
    }

    /// Replicas started together: each joins with no shard, and at its next look takes its
    /// share of the replicas it now counts. None takes more than its share and gives it back.
    #[tokio::test(start_paused = true)]
    async fn replicas_started_together_take_their_shares_without_giving_any_back() {
        let api = crate::controllers::fake_api::FakeApi::default();
        let mut a = replica(&api, "a");
        let mut b = replica(&api, "b");
        for replica in [&mut a, &mut b] {
            assert!(replica.look().await.release.is_empty());
            assert_eq!(replica.held(), shards(&[]), "joins before it takes");
        }
        for replica in [&mut a, &mut b] {
            assert!(replica.look().await.release.is_empty());
        }
        assert_eq!((a.held(), b.held()), (shards(&[0]), shards(&[1])));
    }

    /// Two replicas against one API server: the first, alone, takes both shards, gives one
    /// up to the second once it counts it, and never do both hold one shard; when the first
    /// stops renewing, the second takes its shard only once the Lease has expired as it
    /// saw it.
    #[tokio::test(start_paused = true)]
    async fn replicas_share_the_shards_and_take_over_a_silent_ones_only_after_it_expired() {
        let api = crate::controllers::fake_api::FakeApi::default();
        let mut a = replica(&api, "a");
        let mut b = replica(&api, "b");
        let disjoint = |a: &ShardLeases, b: &ShardLeases| a.held().is_disjoint(&b.held());

        a.look().await;
        assert!(a.look().await.release.is_empty());
        assert_eq!(a.held(), shards(&[0, 1]));
        b.look().await;
        assert_eq!(b.held(), shards(&[]));
        assert!(disjoint(&a, &b));

        // A now counts two replicas: it stops serving shard 1 (here: at once), then releases it.
        let look = a.look().await;
        assert_eq!(look.release, [1]);
        a.release(&look.release).await;
        assert_eq!(a.held(), shards(&[0]));
        b.look().await;
        assert_eq!(b.held(), shards(&[1]));
        assert!(disjoint(&a, &b));

        // A goes silent. Until its Lease has been unchanged for a whole duration, B waits.
        tokio::time::advance(DURATION.saturating_sub(RENEW_INTERVAL)).await;
        b.look().await;
        assert_eq!(b.held(), shards(&[1]));
        // A stops serving before anyone may take over.
        assert_eq!(a.lapse(Instant::now()), [0]);
        tokio::time::advance(RENEW_INTERVAL).await;
        b.look().await;
        assert_eq!(b.held(), shards(&[0, 1]));
        // Back, A finds its Lease taken and its share zero while B's slot is live.
        a.look().await;
        assert_eq!(a.held(), shards(&[]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_cannot_renew_stops_serving_before_its_lease_could_expire() {
        let api = crate::controllers::fake_api::FakeApi::default();
        let mut a = replica(&api, "a");
        a.look().await;
        a.look().await;
        let deadline = a.deadline().expect("a deadline while holding shards");
        assert!(deadline + STOP_MARGIN <= Instant::now() + DURATION);
        tokio::time::advance(DURATION.saturating_sub(STOP_MARGIN + RENEW_INTERVAL)).await;
        assert!(a.lapse(Instant::now()).is_empty());
        tokio::time::advance(RENEW_INTERVAL).await;
        assert_eq!(a.lapse(Instant::now()), [0, 1]);
        assert_eq!(a.held(), shards(&[]));
    }

    /// A replica whose renewals went unconfirmed for a while (a slow API server) stops
    /// serving; its Leases still name it, so it takes back the same shards and slot at its
    /// next look, and the other replica's shards do not move.
    #[tokio::test(start_paused = true)]
    async fn a_replica_that_lapsed_takes_its_own_leases_back_and_nothing_moves() {
        let api = crate::controllers::fake_api::FakeApi::default();
        let mut a = replica(&api, "a");
        let mut b = replica(&api, "b");
        for _ in 0..2 {
            a.look().await;
            b.look().await;
        }
        assert_eq!((a.held(), b.held()), (shards(&[0]), shards(&[1])));

        // A's looks stall; B keeps renewing. A stops serving before its Lease could expire.
        tokio::time::advance(DURATION.saturating_sub(STOP_MARGIN)).await;
        b.look().await;
        assert_eq!(a.lapse(Instant::now()), [0]);
        assert_eq!(a.held(), shards(&[]));

        a.look().await;
        b.look().await;
        assert_eq!((a.held(), b.held()), (shards(&[0]), shards(&[1])));
        // Its slot was taken back too: B still counts two replicas and keeps its one shard.
        tokio::time::advance(DURATION).await;
        a.look().await;
        assert!(b.look().await.release.is_empty());
        assert_eq!((a.held(), b.held()), (shards(&[0]), shards(&[1])));
    }

    #[test]
    fn a_released_or_missing_lease_is_free_at_once() {
        let now = Instant::now();
        let mut seen = Observations::default();
        seen.observe("released", Some(&lease(None, 1)), now);
        seen.observe("emptied", Some(&lease(Some(""), 1)), now);
        seen.observe("missing", None, now);
        for name in ["released", "emptied", "missing"] {
            assert!(!seen.held(name, now, DURATION), "{name}");
            assert_eq!(seen.holder(name), None);
        }
    }
}
