//! The statuses this process wrote, until the watch cache shows them.
//!
//! A pass reads its object from the watch cache, and the cache can be a moment behind the
//! operator's own last status write: a pass woken by a timer, a Secret or a run's pod before
//! the object's watch event arrived starts from the status before that write. Computed from
//! it, the next status undoes the write: a git SkillCard whose branch was deleted kept the
//! commit pinned before the branch last moved, and a run wrote a transition twice. The
//! operator is the only writer of these statuses, so the one it wrote last is the object's.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::{Resource, ResourceExt};

/// How long a status this process wrote is preferred to the watch cache's: far longer than
/// a watch event takes, short enough that the memory of deleted objects is bounded.
const CACHE_LAG_LIMIT: Duration = Duration::from_secs(60);
/// Past this many remembered statuses, the ones older than [`CACHE_LAG_LIMIT`] are dropped
/// (objects deleted before their cache caught up are never asked about again), at most once
/// per [`PRUNE_EVERY`] so that many young entries do not make every write scan them all.
const PRUNE_ABOVE: usize = 1024;
const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// A kind and an object's namespace and name.
type Key = (&'static str, String, String);

struct Written {
    at: Instant,
    /// The object the status was written to: a namesake created since is another object.
    uid: Option<String>,
    status: Arc<dyn Any + Send + Sync>,
}

/// The last status this process wrote to each object whose watch cache does not show it yet.
#[derive(Default)]
pub struct WrittenStatuses {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_object: HashMap<Key, Written>,
    pruned: Option<Instant>,
}

impl WrittenStatuses {
    /// The status a pass of `object` (of the kind `kind`) starts from: `cached`, the status
    /// in the watch cache, unless this process wrote another one since that the cache does
    /// not show yet.
    pub fn current<K, S>(&self, kind: &'static str, object: &K, cached: S) -> S
    where
        K: Resource,
        S: PartialEq + Clone + Send + Sync + 'static,
    {
        let key = key(kind, object);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entries = &mut entries.by_object;
        let Some(written) = entries.get(&key) else {
            return cached;
        };
        let newer = written.uid == object.uid()
            && written.at.elapsed() < CACHE_LAG_LIMIT
            && written
                .status
                .downcast_ref::<S>()
                .is_some_and(|s| *s != cached);
        if newer && let Some(status) = written.status.downcast_ref::<S>() {
            return status.clone();
        }
        // The cache caught up, or the object is another one: nothing to remember any more.
        entries.remove(&key);
        cached
    }

    /// Forgets the status this process wrote to `object`: its cache shows it, in a form
    /// [`WrittenStatuses::current`] cannot compare (a settled object cached trimmed). A
    /// status written to another object of the same name is kept.
    pub fn forget<K: Resource>(&self, kind: &'static str, object: &K) {
        let key = key(kind, object);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entries = &mut entries.by_object;
        if entries
            .get(&key)
            .is_some_and(|written| written.uid == object.uid())
        {
            entries.remove(&key);
        }
    }

    /// Remembers `status`, just written to `object`, until its cache shows it.
    pub fn remember<K, S>(&self, kind: &'static str, object: &K, status: S)
    where
        K: Resource,
        S: Send + Sync + 'static,
    {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let Entries { by_object, pruned } = &mut *entries;
        if by_object.len() >= PRUNE_ABOVE && pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            by_object.retain(|_, written| written.at.elapsed() < CACHE_LAG_LIMIT);
            *pruned = Some(Instant::now());
        }
        by_object.insert(
            key(kind, object),
            Written {
                at: Instant::now(),
                uid: object.uid(),
                status: Arc::new(status),
            },
        );
    }

    /// How many statuses are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.by_object.len()
    }
}

fn key<K: Resource>(kind: &'static str, object: &K) -> Key {
    (
        kind,
        object.namespace().unwrap_or_default(),
        object.name_any(),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str, uid: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_written_status_wins_over_the_cache_until_the_cache_shows_it() {
        let written = WrittenStatuses::default();
        let card = object("card", "u1");
        assert_eq!(written.current("Card", &card, "first"), "first");
        written.remember("Card", &card, "second");
        // The cache is behind: the pass starts from what was written.
        assert_eq!(written.current("Card", &card, "first"), "second");
        assert_eq!(written.current("Card", &card, "first"), "second");
        // The cache caught up: it is the source again, and the memory is gone.
        assert_eq!(written.current("Card", &card, "second"), "second");
        assert_eq!(written.len(), 0);
        assert_eq!(written.current("Card", &card, "third"), "third");
    }

    #[test]
    fn a_forgotten_status_is_gone_but_not_a_namesakes() {
        let written = WrittenStatuses::default();
        written.remember("Run", &object("run", "u1"), "finished");
        written.forget("Run", &object("run", "u1"));
        assert_eq!(written.len(), 0);
        // Written to a run created again under the name: not the cached run's to forget.
        written.remember("Run", &object("run", "u2"), "started");
        written.forget("Run", &object("run", "u1"));
        assert_eq!(
            written.current("Run", &object("run", "u2"), "cached"),
            "started"
        );
    }

    #[test]
    fn kinds_namesakes_and_recreated_objects_are_kept_apart() {
        let written = WrittenStatuses::default();
        written.remember("Card", &object("a", "u1"), "written");
        assert_eq!(
            written.current("Run", &object("a", "u1"), "cached"),
            "cached"
        );
        assert_eq!(
            written.current("Card", &object("b", "u2"), "cached"),
            "cached"
        );
        // Deleted and created again under the same name: the new object's own status.
        assert_eq!(
            written.current("Card", &object("a", "u3"), "cached"),
            "cached"
        );
        assert_eq!(written.len(), 0);
    }

    #[test]
    fn a_status_of_another_type_under_the_same_key_is_not_used() {
        let written = WrittenStatuses::default();
        let card = object("card", "u1");
        written.remember("Card", &card, 7_u32);
        assert_eq!(written.current("Card", &card, "cached"), "cached");
    }
}
