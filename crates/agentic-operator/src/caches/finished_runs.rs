//! The finished runs of one watched scope, kept out of the run cache as compact entries
//! ([`agentic_core::finished`]), and the AgentRun controller's passes of finished runs (a
//! sandbox to stop, an expiry) are woken from here.
//!
//! They come in one of two ways ([`FinishedRunsWatched`]). Where the API server selects
//! AgentRuns by `status.phase` (the CRD's selectable field), the runs' watch lists the live
//! runs only and each finished phase has a watch of its own, started once the live runs have
//! listed: a restart over 100,000 finished runs no longer waits for them before the first
//! pass of a live run (#37). Elsewhere the one watch of every run hands each finished run
//! here instead of caching it ([`Diverted`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase};
use agentic_core::finished::{FinishedRuns, Kept};
use agentic_core::sandbox::TtlDefaults;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::Client;
use kube::api::{Api, ListParams};
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

/// How the finished runs are watched, as the API server allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FinishedRunsWatched {
    /// By a watch per finished phase (`status.phase=Succeeded`, `=Failed`), apart from the
    /// live runs' watch (`status.phase!=Succeeded,status.phase!=Failed`).
    Apart,
    /// By the one watch of every run, which diverts them.
    #[default]
    WithTheLive,
}

/// Selects the runs that have not finished: the runs' watch with [`FinishedRunsWatched::Apart`].
pub const LIVE_RUNS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// The field selector of the finished runs of `phase`.
pub fn finished_runs_of(phase: AgentRunPhase) -> String {
    format!("status.phase={}", phase.as_str())
}

/// How long the probe waits for the API server's answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl FinishedRunsWatched {
    /// Asks the API server whether it selects the AgentRuns the operator may see (of
    /// `namespace`, or of every namespace) by `status.phase`: it does when the installed CRD
    /// declares the field selectable (ours does; a CRD without it, such as Konveyor's own, or
    /// an API server before Kubernetes 1.31, refuses the selector with 400). Anything but a
    /// clean answer means one watch of every run, which every API server serves.
    pub async fn probe(client: &Client, namespace: Option<&str>) -> Self {
        let api: Api<AgentRun> = match namespace {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        };
        let params = ListParams::default()
            .fields(&finished_runs_of(AgentRunPhase::Succeeded))
            .limit(1);
        match tokio::time::timeout(PROBE_TIMEOUT, api.list_metadata(&params)).await {
            Ok(Ok(_)) => Self::Apart,
            Ok(Err(e)) => {
                tracing::info!(error = %crate::error::Chain(&e), "the API server does not select AgentRuns by status.phase: finished runs are watched with the live ones");
                Self::WithTheLive
            }
            Err(_) => {
                tracing::info!(timeout = ?PROBE_TIMEOUT, "no answer to a list of AgentRuns by status.phase: finished runs are watched with the live ones");
                Self::WithTheLive
            }
        }
    }
}

/// The finished runs of a scope, shared by the watches that fill them, the passes that
/// stop their sandboxes and delete them when they expire, and the readers (the census, the
/// trust policies' blast radius, the orphan sweep, the OTLP receiver).
#[derive(Clone)]
pub struct FinishedRunCache {
    runs: Arc<Mutex<FinishedRuns>>,
    /// The runs whose pass is due now (a sandbox to stop).
    due: UnboundedSender<RunName>,
    /// Rung when the earliest expiry may have moved earlier.
    rescheduled: Arc<Notify>,
    /// How many of the watches that fill it have not listed yet.
    unlisted: Arc<tokio::sync::watch::Sender<usize>>,
}

impl FinishedRunCache {
    /// No runs yet, with runs that set no time to live kept for `defaults`; and the runs
    /// whose pass is due, as they come.
    pub fn new(defaults: TtlDefaults) -> (Self, UnboundedReceiver<RunName>) {
        let (due, receiver) = unbounded();
        let cache = Self {
            runs: Arc::new(Mutex::new(FinishedRuns::new(defaults))),
            due,
            rescheduled: Arc::default(),
            unlisted: Arc::new(tokio::sync::watch::Sender::new(0)),
        };
        (cache, receiver)
    }

    /// What a watch that fills this cache diverts to it: the finished runs of `phase` when
    /// the watch lists that phase only, of every phase with `None`. Each watch has its own:
    /// a list sweeps only what that watch lists.
    pub fn feed(&self, phase: Option<AgentRunPhase>) -> Arc<dyn Diverted<Guarded<AgentRun>>> {
        self.unlisted.send_modify(|unlisted| *unlisted += 1);
        Arc::new(Feed {
            cache: self.clone(),
            phase,
            listing: Mutex::default(),
            listed_once: AtomicBool::new(false),
        })
    }

    /// Whether every watch that fills it has listed once: until then a run may be finished
    /// and not here yet.
    pub fn is_listed(&self) -> bool {
        *self.unlisted.borrow() == 0
    }

    /// Resolves once every watch that fills it has listed.
    pub async fn listed(&self) {
        let mut unlisted = self.unlisted.subscribe();
        // The sender lives as long as this cache does.
        let _ = unlisted.wait_for(|unlisted| *unlisted == 0).await;
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

/// One watch's way into a [`FinishedRunCache`].
struct Feed {
    cache: FinishedRunCache,
    /// The phase its watch lists, if only one.
    phase: Option<AgentRunPhase>,
    /// The list in progress: when it began.
    listing: Mutex<Option<u64>>,
    listed_once: AtomicBool,
}

impl Diverted<Guarded<AgentRun>> for Feed {
    fn keep(&self, object: &Guarded<AgentRun>) -> bool {
        object.0.as_ref().is_ok_and(|run| self.cache.kept(run))
    }

    fn listing(&self) {
        let started = self.cache.lock().listing();
        *self.listing.lock().unwrap_or_else(PoisonError::into_inner) = Some(started);
    }

    fn listed(&self) {
        let started = self
            .listing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(started) = started {
            self.cache.lock().listed(started, self.phase);
        }
        if !self.listed_once.swap(true, Ordering::Relaxed) {
            self.cache
                .unlisted
                .send_modify(|unlisted| *unlisted = unlisted.saturating_sub(1));
        }
    }

    fn forget(&self, object: &Guarded<AgentRun>) {
        let meta = match &object.0 {
            Ok(run) => &run.metadata,
            Err(invalid) => &invalid.metadata,
        };
        if let (Some(namespace), Some(name)) = (&meta.namespace, &meta.name) {
            self.cache.lock().forget(namespace, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::answering;
    use super::*;
    use crate::caches::Guarded;
    use futures::FutureExt;
    use serde_json::json;

    fn run(name: &str, phase: &str, reason: &str, ttl: Option<i32>) -> Guarded<AgentRun> {
        Guarded(Ok(serde_json::from_value(json!({
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
        let feed = cache.feed(None);
        assert!(feed.keep(&run("done", "Succeeded", "AgentSucceeded", None)));
        assert!(!feed.keep(&run("going", "Running", "AgentRunning", None)));
        assert!(cache.contains("team", "done"));
        assert!(!cache.contains("team", "going"));
        // Nothing to do now for a run its agent ended.
        assert!(due.try_recv().is_err());
    }

    #[test]
    fn a_run_the_operator_ended_asks_for_its_pass_at_once() {
        let (cache, mut due) = FinishedRunCache::new(TtlDefaults::default());
        assert!(
            cache
                .feed(None)
                .keep(&run("stopped", "Failed", "Cancelled", None))
        );
        let woken = due.try_recv().expect("a run due");
        assert_eq!(woken, ("team".to_string(), "stopped".to_string()));
    }

    #[test]
    fn an_earlier_expiry_reschedules_and_a_later_one_does_not() {
        let (cache, _due) = FinishedRunCache::new(TtlDefaults::default());
        let feed = cache.feed(None);
        feed.keep(&run("late", "Succeeded", "AgentSucceeded", Some(60)));
        assert!(
            cache.rescheduled().now_or_never().is_some(),
            "the first expiry"
        );
        feed.keep(&run("later", "Succeeded", "AgentSucceeded", Some(120)));
        assert!(cache.rescheduled().now_or_never().is_none());
        feed.keep(&run("early", "Succeeded", "AgentSucceeded", Some(10)));
        assert!(cache.rescheduled().now_or_never().is_some());
    }

    #[test]
    fn a_list_and_a_delete_forget_the_runs_gone() {
        let (cache, _due) = FinishedRunCache::new(TtlDefaults::default());
        let feed = cache.feed(None);
        feed.keep(&run("a", "Succeeded", "AgentSucceeded", None));
        feed.keep(&run("b", "Succeeded", "AgentSucceeded", None));
        feed.listing();
        feed.keep(&run("b", "Succeeded", "AgentSucceeded", None));
        feed.listed();
        assert!(!cache.contains("team", "a"));
        assert!(cache.contains("team", "b"));
        feed.forget(&run("b", "Succeeded", "AgentSucceeded", None));
        assert!(cache.lock().is_empty());
    }

    #[test]
    fn each_phase_watch_sweeps_its_own_runs_and_the_cache_is_listed_once_both_have() {
        let (cache, _due) = FinishedRunCache::new(TtlDefaults::default());
        let succeeded = cache.feed(Some(AgentRunPhase::Succeeded));
        let failed = cache.feed(Some(AgentRunPhase::Failed));
        assert!(!cache.is_listed());
        failed.listing();
        failed.keep(&run("broke", "Failed", "AgentFailed", None));
        failed.listed();
        assert!(!cache.is_listed(), "the Succeeded runs are not listed yet");
        assert!(cache.listed().now_or_never().is_none());
        succeeded.listing();
        succeeded.keep(&run("done", "Succeeded", "AgentSucceeded", None));
        succeeded.listed();
        assert!(cache.is_listed());
        assert!(cache.listed().now_or_never().is_some());
        // A relist of the Succeeded runs that no longer shows `done` drops it, and leaves
        // the Failed run its own watch showed.
        succeeded.listing();
        succeeded.listed();
        assert!(!cache.contains("team", "done"));
        assert!(cache.contains("team", "broke"));
        assert!(cache.is_listed(), "listed once is for good");
    }

    #[tokio::test]
    async fn a_crd_without_the_selectable_phase_watches_finished_runs_with_the_live() {
        // What kube-apiserver answers for a field the CRD does not declare selectable.
        let refused = answering(
            400,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,
                "message":"field label not supported: status.phase"}"#,
        );
        assert_eq!(
            FinishedRunsWatched::probe(&refused, Some("ns")).await,
            FinishedRunsWatched::WithTheLive
        );
    }

    #[tokio::test]
    async fn a_list_by_phase_answered_means_finished_runs_apart() {
        let answered = answering(
            200,
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"items":[]}"#,
        );
        assert_eq!(
            FinishedRunsWatched::probe(&answered, None).await,
            FinishedRunsWatched::Apart
        );
    }
}
