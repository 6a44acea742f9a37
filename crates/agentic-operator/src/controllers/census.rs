//! `agentic_objects` and `agentic_runs`: the objects in the watch caches, counted by kind
//! and phase.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentic_api::{
    Agent, AgentRun, AgentWorkflow, AgentWorkflowRun, CONDITION_READY, ConditionStatus, Gateway,
    SkillCard, SkillCollection,
};
use agentic_core::conditions::find_condition;
use agentic_core::reasons::AgentRunReason;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use tokio::sync::watch;

use super::pipeline::Reconciled;
use crate::caches::{Caches, Guarded, valid};
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

/// Counts the objects in the caches by kind and phase: `Ready`/`NotReady` from the Ready
/// condition, or the AgentRun phase (`Pending` until the first status). Objects that do not
/// match the API schema are left out; `agentic_reconcile_errors_total` counts them.
fn count_objects(metrics: &Metrics, caches: &[Caches]) {
    fn tally<K: Clone>(
        states: impl Iterator<Item = Vec<Arc<Guarded<K>>>>,
        phase: impl Fn(&K) -> &'static str,
    ) -> Vec<(String, i64)> {
        let mut counts: BTreeMap<&'static str, i64> = BTreeMap::new();
        for state in states {
            for obj in valid(&state) {
                *counts.entry(phase(obj)).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|(phase, n)| (phase.to_string(), n))
            .collect()
    }
    let skill_cards = tally(caches.iter().map(|c| c.skill_cards.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let skill_collections = tally(caches.iter().map(|c| c.skill_collections.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let gateways = tally(caches.iter().map(|c| c.gateways.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let agents = tally(caches.iter().map(|c| c.agents.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let workflows = tally(caches.iter().map(|c| c.workflows.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let workflow_runs = tally(caches.iter().map(|c| c.workflow_runs.state()), |o| {
        o.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    });
    let agent_runs = tally(caches.iter().map(|c| c.agent_runs.state()), |o| {
        o.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    });
    metrics.set_objects(SkillCard::KIND, &skill_cards);
    metrics.set_objects(SkillCollection::KIND, &skill_collections);
    metrics.set_objects(Gateway::KIND, &gateways);
    metrics.set_objects(Agent::KIND, &agents);
    metrics.set_objects(AgentWorkflow::KIND, &workflows);
    metrics.set_objects(AgentWorkflowRun::KIND, &workflow_runs);
    metrics.set_objects(AgentRun::KIND, &agent_runs);

    let mut by_reason: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut queued: BTreeMap<(String, String), i64> = BTreeMap::new();
    let states: Vec<_> = caches.iter().map(|c| c.agent_runs.state()).collect();
    for run in states.iter().flat_map(|state| valid(state)) {
        let status = run.status.clone().unwrap_or_default();
        let phase = status.phase.unwrap_or_default().as_str().to_string();
        let reason = find_condition(&status.conditions, CONDITION_READY)
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
    metrics.set_runs(
        &by_reason.into_iter().collect::<Vec<_>>(),
        &queued.into_iter().collect::<Vec<_>>(),
    );
}

fn ready_phase(conditions: Option<&[Condition]>) -> &'static str {
    let ready = conditions
        .and_then(|c| find_condition(c, CONDITION_READY))
        .is_some_and(|c| c.status == ConditionStatus::True.as_str());
    if ready { "Ready" } else { "NotReady" }
}
