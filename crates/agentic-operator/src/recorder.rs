//! Events that can repeat (a pass failing again and again), folded into one Event's
//! `series` as `kubectl describe` and `kubectl events` show them.
//!
//! kube's `Recorder` does the same folding, but keeps every Event it posted in the last six
//! minutes and scans all of them on each publish: when thousands of runs fail at once (their
//! Agent is gone, a registry is down) that is memory and work per Event that grow with the
//! number of objects (#37). [`Series`] keeps at most [`MAX_SERIES`] of them, and finds the
//! ones to forget without a scan. A series it forgot starts a new Event: a repeat then costs
//! one Event more, never a wrong count.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;

/// How long a posted Event takes repeats into its series: client-go's and kube's six
/// minutes, so an Event's count means what it means for the other controllers.
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// How many Events the operator remembers for their repeats: a few hundred bytes each. More
/// objects than this failing within six minutes still get their Events; the oldest series
/// are forgotten first.
pub const MAX_SERIES: usize = 4096;

/// What makes a repeat a repeat: the same object (by uid, so a recreated object starts
/// afresh), the same reason and the same type. The note is left out, as client-go does: a
/// failure's message often carries a changing detail.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    namespace: String,
    kind: String,
    name: String,
    uid: String,
    reason: String,
    warning: bool,
}

impl SeriesKey {
    pub fn new(regarding: &ObjectReference, reason: &str, warning: bool) -> Self {
        let field = |value: &Option<String>| value.clone().unwrap_or_default();
        Self {
            namespace: field(&regarding.namespace),
            kind: field(&regarding.kind),
            name: field(&regarding.name),
            uid: field(&regarding.uid),
            reason: reason.to_string(),
            warning,
        }
    }
}

/// What to do with an Event about to be published.
#[derive(Debug, PartialEq, Eq)]
pub enum Publish {
    /// Post a new Event.
    Create,
    /// Patch the Event `name` (of the regarding object's namespace) to this series count.
    Repeat { name: String, count: i32 },
}

struct Entry {
    event: String,
    count: i32,
    /// The entry's place in [`Series::by_age`].
    seen: (Instant, u64),
}

/// The Events posted in the last [`SERIES_TTL`], at most [`MAX_SERIES`] of them, oldest
/// first in `by_age` so forgetting one is a pop, not a scan.
#[derive(Default)]
pub struct Series {
    entries: HashMap<SeriesKey, Entry>,
    by_age: BTreeMap<(Instant, u64), SeriesKey>,
    sequence: u64,
}

impl Series {
    /// Whether an Event for `key` at `now` repeats one posted earlier.
    pub fn observe(&mut self, key: &SeriesKey, now: Instant) -> Publish {
        self.forget_expired(now);
        match self.entries.get(key) {
            Some(entry) => Publish::Repeat {
                name: entry.event.clone(),
                count: entry.count.saturating_add(1),
            },
            None => Publish::Create,
        }
    }

    /// Records that the Event `event` for `key` was posted (`count` 1) or patched to `count`
    /// at `now`.
    pub fn posted(&mut self, key: SeriesKey, event: String, count: i32, now: Instant) {
        self.sequence += 1;
        let seen = (now, self.sequence);
        if let Some(previous) = self
            .entries
            .insert(key.clone(), Entry { event, count, seen })
        {
            self.by_age.remove(&previous.seen);
        }
        self.by_age.insert(seen, key);
        while self.entries.len() > MAX_SERIES {
            self.forget_oldest();
        }
    }

    /// Forgets the series of `key`: its Event is gone (expired on the server).
    pub fn forget(&mut self, key: &SeriesKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.by_age.remove(&entry.seen);
        }
    }

    fn forget_expired(&mut self, now: Instant) {
        while let Some((&(seen, _), _)) = self.by_age.first_key_value() {
            if now.saturating_duration_since(seen) < SERIES_TTL {
                break;
            }
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) {
        if let Some((_, key)) = self.by_age.pop_first() {
            self.entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, reason: &str) -> SeriesKey {
        let regarding = ObjectReference {
            namespace: Some("ns".into()),
            kind: Some("AgentRun".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        };
        SeriesKey::new(&regarding, reason, true)
    }

    #[test]
    fn a_repeat_within_the_ttl_counts_on_the_first_event() {
        let mut series = Series::default();
        let start = Instant::now();
        let failed = key("r", "AgentNotFound");
        assert_eq!(series.observe(&failed, start), Publish::Create);
        series.posted(failed.clone(), "r-abc".into(), 1, start);
        let later = start + SERIES_TTL / 2;
        assert_eq!(
            series.observe(&failed, later),
            Publish::Repeat {
                name: "r-abc".into(),
                count: 2
            }
        );
        series.posted(failed.clone(), "r-abc".into(), 2, later);
        // The TTL runs from the last repeat, not the first Event.
        assert_eq!(
            series.observe(&failed, later + SERIES_TTL / 2),
            Publish::Repeat {
                name: "r-abc".into(),
                count: 3
            }
        );
    }

    #[test]
    fn another_reason_or_object_is_another_event() {
        let mut series = Series::default();
        let now = Instant::now();
        series.posted(key("r", "AgentNotFound"), "r-abc".into(), 1, now);
        assert_eq!(
            series.observe(&key("r", "GatewayNotFound"), now),
            Publish::Create
        );
        assert_eq!(
            series.observe(&key("s", "AgentNotFound"), now),
            Publish::Create
        );
    }

    #[test]
    fn a_series_older_than_the_ttl_starts_a_new_event_and_is_forgotten() {
        let mut series = Series::default();
        let start = Instant::now();
        let failed = key("r", "AgentNotFound");
        series.posted(failed.clone(), "r-abc".into(), 1, start);
        assert_eq!(series.observe(&failed, start + SERIES_TTL), Publish::Create);
        assert_eq!(series.entries.len(), 0);
    }

    #[test]
    fn memory_is_bounded_however_many_objects_fail_and_the_oldest_go_first() {
        let mut series = Series::default();
        let now = Instant::now();
        let objects = MAX_SERIES + 100;
        for n in 0..objects {
            series.posted(
                key(&format!("r{n}"), "AgentNotFound"),
                format!("e{n}"),
                1,
                now,
            );
        }
        assert_eq!(series.entries.len(), MAX_SERIES);
        assert_eq!(series.by_age.len(), MAX_SERIES);
        assert_eq!(
            series.observe(&key("r0", "AgentNotFound"), now),
            Publish::Create
        );
        let newest = objects - 1;
        assert_eq!(
            series.observe(&key(&format!("r{newest}"), "AgentNotFound"), now),
            Publish::Repeat {
                name: format!("e{newest}"),
                count: 2
            }
        );
    }

    #[test]
    fn a_repeat_keeps_one_place_in_the_age_order() {
        let mut series = Series::default();
        let now = Instant::now();
        let failed = key("r", "AgentNotFound");
        for count in 1..=10 {
            series.posted(failed.clone(), "r-abc".into(), count, now);
        }
        assert_eq!(series.by_age.len(), 1);
        series.forget(&failed);
        assert_eq!((series.entries.len(), series.by_age.len()), (0, 0));
    }
}
