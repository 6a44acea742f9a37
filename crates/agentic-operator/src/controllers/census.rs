//! `agentic_objects` and `agentic_runs`: the objects in the watch caches, counted by kind
//! and phase.

use std::collections::BTreeMap;
use std::time::Duration;

use agentic_api::{AgentRun, CONDITION_READY};
use agentic_core::conditions::find_condition;
use agentic_core::reasons::AgentRunReason;
use kube::ResourceExt;
use tokio::sync::watch;

use super::pipeline::Reconciled;
use crate::caches::{Caches, ObjectKey, valid};
use crate::metrics::Metrics;

/// How often `agentic_objects` is recounted from the watch caches. Reconciles do not see
/// deletions, so the count follows the caches rather than the reconcile passes.
const CENSUS_INTERVAL: Duration = Duration::from_secs(5);

/// Keeps `agentic_objects` up to date until `shutdown` turns true.
pub(super) async fn census(
    metrics: &Metrics,
    caches: &[Caches],
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(CENSUS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => count_objects(metrics, caches),
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// Counts the objects in the caches by kind and phase (each kind's [`Reconciled::phase`]:
/// `Ready`/`NotReady` from the Ready condition, or the run's phase). A cluster-scoped object
/// every scope caches is counted once. Objects that do not match the API schema are left out;
/// `agentic_reconcile_errors_total` counts them.
///
/// [`Reconciled::phase`]: super::pipeline::Reconciled::phase
fn count_objects(metrics: &Metrics, caches: &[Caches]) {
    let mut kinds: BTreeMap<&'static str, BTreeMap<ObjectKey, &'static str>> = BTreeMap::new();
    for cache in caches.iter().flat_map(Caches::kinds) {
        kinds
            .entry(cache.kind())
            .or_default()
            .extend(cache.phases());
    }
    // The finished runs kept out of the run cache, by phase and reason; counted, not
    // listed (a namespace is in one scope, so none is counted twice).
    let mut finished: BTreeMap<(&'static str, String), i64> = BTreeMap::new();
    for runs in caches.iter().filter_map(|c| c.finished_runs.as_ref()) {
        for ((phase, reason), n) in runs.lock().counts() {
            *finished.entry((phase, reason.to_owned())).or_default() += n;
        }
    }
    let runs_kind = <AgentRun as Reconciled>::KIND;
    if !finished.is_empty() {
        kinds.entry(runs_kind).or_default();
    }
    for (kind, objects) in kinds {
        let mut counts: BTreeMap<&'static str, i64> = BTreeMap::new();
        for phase in objects.into_values() {
            *counts.entry(phase).or_default() += 1;
        }
        if kind == runs_kind {
            for ((phase, _), n) in &finished {
                *counts.entry(phase).or_default() += n;
            }
        }
        let counts: Vec<(String, i64)> = counts
            .into_iter()
            .map(|(phase, n)| (phase.to_string(), n))
            .collect();
        metrics.set_objects(kind, &counts);
    }

    let mut by_reason: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut queued: BTreeMap<(String, String), i64> = BTreeMap::new();
    let states: Vec<_> = caches
        .iter()
        .filter_map(super::super::caches::Caches::of::<AgentRun>)
        .map(|runs| runs.state())
        .collect();
    for run in states.iter().flat_map(|state| valid(state)) {
        let status = run.status.as_ref();
        let phase = status
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
            .to_string();
        let reason = status
            .and_then(|s| find_condition(&s.conditions, CONDITION_READY))
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        if reason == AgentRunReason::Queued.as_str() {
            *queued
                .entry((
                    run.namespace().unwrap_or_default(),
                    run.spec.agent_ref.clone(),
                ))
                .or_default() += 1;
        }
        *by_reason.entry((phase, reason)).or_default() += 1;
    }
    for ((phase, reason), n) in finished {
        *by_reason.entry((phase.to_owned(), reason)).or_default() += n;
    }
    metrics.set_runs(
        &by_reason.into_iter().collect::<Vec<_>>(),
        &queued.into_iter().collect::<Vec<_>>(),
    );
}
