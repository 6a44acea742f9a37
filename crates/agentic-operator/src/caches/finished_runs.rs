//! The finished runs of one watched scope, kept out of the run cache as compact entries
//! ([`agentic_core::finished`]): the runs' watch hands each finished run here instead of
//! caching it ([`Diverted`]), and the AgentRun controller's passes of finished runs (a
//! sandbox to stop, an expiry) are woken from here.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentic_api::AgentRun;
use agentic_core::finished::{FinishedRuns, Kept};
use agentic_core::sandbox::TtlDefaults;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use tokio::sync::Notify;

use super::Guarded;

/// What a watch keeps out of its cache, and where it goes instead: [`Diverted::keep`] takes
/// the objects it diverts, every list is framed by [`Diverted::listing`] and
/// [`Diverted::listed`], and [`Diverted::forget`] hears of an object deleted or no longer
/// diverted.
pub trait Diverted<K>: Send + Sync {
    /// Keeps `object` when it is one to divert: then the cache must not hold it.
    fn keep(&self, object: &K) -> bool;
    /// A list starts.
    fn listing(&self);
    /// The list ended: what it did not show is gone.
    fn listed(&self);
    /// `object` was deleted, or changed into one not diverted.
    fn forget(&self, object: &K);
}

/// A finished run to pass: its namespace and name.
pub type RunName = (String, String);

/// The finished runs of a scope, shared by the watch that fills them, the passes that
/// stop their sandboxes and delete them when they expire, and the readers (the census, the
/// trust policies' blast radius, the orphan sweep, the OTLP receiver).
#[derive(Clone)]
pub struct FinishedRunCache {
    runs: Arc<Mutex<FinishedRuns>>,
    /// The list in progress: when it began.
    listing: Arc<Mutex<Option<u64>>>,
    /// The runs whose pass is due now (a sandbox to stop).
    due: UnboundedSender<RunName>,
    /// Rung when the earliest expiry may have moved earlier.
    rescheduled: Arc<Notify>,
}

impl FinishedRunCache {
    /// No runs yet, with runs that set no time to live kept for `defaults`; and the runs
    /// whose pass is due, as they come.
    pub fn new(defaults: TtlDefaults) -> (Self, UnboundedReceiver<RunName>) {
        let (due, receiver) = unbounded();
        let cache = Self {
            runs: Arc::new(Mutex::new(FinishedRuns::new(defaults))),
            listing: Arc::default(),
            due,
            rescheduled: Arc::default(),
        };
        (cache, receiver)
    }

    /// The runs, locked for reading or changing: hold it briefly, never across an await.
    pub fn lock(&self) -> MutexGuard<'_, FinishedRuns> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `namespace/name` is a finished run kept here.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.lock().get(namespace, name).is_some()
    }

    /// Asks for the pass of `namespace/name` now.
    pub fn wake(&self, namespace: &str, name: &str) {
        // Closed only once the controller stopped: nothing to wake then.
        let _ = self
            .due
            .unbounded_send((namespace.to_owned(), name.to_owned()));
    }

    /// Resolves when the earliest expiry may have moved earlier than it was.
    pub async fn rescheduled(&self) {
        self.rescheduled.notified().await;
    }

    fn kept(&self, run: &AgentRun) -> bool {
        let (earliest, kept) = {
            let mut runs = self.lock();
            let earliest = runs.next_expiry();
            (earliest, runs.keep(run))
        };
        match kept {
            Kept::NotFinished => return false,
            Kept::StopSandbox => {
                if let (Some(namespace), Some(name)) = (&run.metadata.namespace, &run.metadata.name)
                {
                    self.wake(namespace, name);
                }
            }
            Kept::Scheduled => {}
        }
        if self.lock().next_expiry() != earliest {
            self.rescheduled.notify_one();
        }
        true
    }
}

impl Diverted<Guarded<AgentRun>> for FinishedRunCache {
    fn keep(&self, object: &Guarded<AgentRun>) -> bool {
        object.0.as_ref().is_ok_and(|run| self.kept(run))
    }

    fn listing(&self) {
        let started = self.lock().listing();
        *self.listing.lock().unwrap_or_else(PoisonError::into_inner) = Some(started);
    }

    fn listed(&self) {
        let started = self
            .listing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(started) = started {
            self.lock().listed(started);
        }
    }

    fn forget(&self, object: &Guarded<AgentRun>) {
        let meta = match &object.0 {
            Ok(run) => &run.metadata,
            Err(invalid) => &invalid.metadata,
        };
        if let (Some(namespace), Some(name)) = (&meta.namespace, &meta.name) {
            self.lock().forget(namespace, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use kube::core::DeserializeGuard;
    use serde_json::json;

    fn run(name: &str, phase: &str, reason: &str, ttl: Option<i32>) -> Guarded<AgentRun> {
        DeserializeGuard(Ok(serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
            "metadata": {"name": name, "namespace": "team", "uid": "u"},
            "spec": {"agentRef": "coder", "ttlSecondsAfterFinished": ttl},
            "status": {
                "phase": phase, "sandboxName": name,
                "completionTime": "2026-01-01T00:00:00Z",
                "conditions": [{
                    "type": "Ready", "status": "False", "reason": reason, "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"
                }],
            },
        }))
        .expect("an AgentRun")))
    }

    #[test]
    fn a_finished_run_is_kept_and_one_going_is_left_to_the_cache() {
        let (cache, mut due) = FinishedRunCache::new(TtlDefaults::default());
        assert!(cache.keep(&run("done", "Succeeded", "AgentSucceeded", None)));
        assert!(!cache.keep(&run("going", "Running", "AgentRunning", None)));
        assert!(cache.contains("team", "done"));
        assert!(!cache.contains("team", "going"));
        // Nothing to do now for a run its agent ended.
        assert!(due.try_recv().is_err());
    }

    #[test]
    fn a_run_the_operator_ended_asks_for_its_pass_at_once() {
        let (cache, mut due) = FinishedRunCache::new(TtlDefaults::default());
        assert!(cache.keep(&run("stopped", "Failed", "Cancelled", None)));
        let woken = due.try_recv().expect("a run due");
        assert_eq!(woken, ("team".to_string(), "stopped".to_string()));
    }

    #[test]
    fn an_earlier_expiry_reschedules_and_a_later_one_does_not() {
        let (cache, _due) = FinishedRunCache::new(TtlDefaults::default());
        cache.keep(&run("late", "Succeeded", "AgentSucceeded", Some(60)));
        assert!(
            cache.rescheduled().now_or_never().is_some(),
            "the first expiry"
        );
        cache.keep(&run("later", "Succeeded", "AgentSucceeded", Some(120)));
        assert!(cache.rescheduled().now_or_never().is_none());
        cache.keep(&run("early", "Succeeded", "AgentSucceeded", Some(10)));
        assert!(cache.rescheduled().now_or_never().is_some());
    }

    #[test]
    fn a_list_and_a_delete_forget_the_runs_gone() {
        let (cache, _due) = FinishedRunCache::new(TtlDefaults::default());
        cache.keep(&run("a", "Succeeded", "AgentSucceeded", None));
        cache.keep(&run("b", "Succeeded", "AgentSucceeded", None));
        cache.listing();
        cache.keep(&run("b", "Succeeded", "AgentSucceeded", None));
        cache.listed();
        assert!(!cache.contains("team", "a"));
        assert!(cache.contains("team", "b"));
        cache.forget(&run("b", "Succeeded", "AgentSucceeded", None));
        assert!(cache.lock().is_empty());
    }
}
