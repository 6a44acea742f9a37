//! What the operator enforces on a run beyond what its pod says: cancellation, the startup
//! deadline, pods that cannot start, the run deadline and the time to live of finished runs. Every decision is derived from the run's status, its objects'
//! timestamps and the current time, so a restarted operator decides the same.

use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::outcome::{RunOutcome, agent_status, waiting_reason};
use crate::reasons::AgentRunReason;

/// Waiting reasons of the agent container (or an init container) that end a run at once: the kubelet would retry
/// them forever without a change to the run or the Agent. `ErrImagePull` is not one: the
/// first failed pull may be a registry blip, and the kubelet reports `ImagePullBackOff` once
/// that pull has failed and it waits to retry.
pub const FATAL_WAITING_REASONS: [&str; 4] = [
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// What the kubelet says in an `ImagePullBackOff` it gave itself: more pulls at once than
/// its `registryPullQPS` allows (30 skill images new to the node do it), not a failed pull.
/// It pulls them in turn, so the run waits, bounded by its startup deadline.
const KUBELET_PULL_QPS_EXCEEDED: &str = "pull QPS exceeded";

/// The first container of `pod` that waits with one of [`FATAL_WAITING_REASONS`]: the agent
/// container, else an init container (the skill fetch of a git skill, whose image is the
/// operator's), named for a message, with the kubelet's reason and message.
fn fatal_waiting(pod: &Pod) -> Option<(String, &str, Option<&str>)> {
    fn fatal(status: &ContainerStatus) -> Option<(&str, Option<&str>)> {
        waiting_reason(status).filter(|(reason, message)| {
            FATAL_WAITING_REASONS.contains(reason)
                && !message.is_some_and(|m| m.contains(KUBELET_PULL_QPS_EXCEEDED))
        })
    }
    if let Some((reason, message)) = agent_status(pod).and_then(fatal) {
        return Some(("the agent container".to_string(), reason, message));
    }
    pod.status
        .as_ref()?
        .init_container_statuses
        .iter()
        .flatten()
        .find_map(|status| {
            fatal(status).map(|(reason, message)| {
                (format!("init container {}", status.name), reason, message)
            })
        })
}

/// The startup deadline of a run in seconds: its `spec.startupDeadlineSeconds` when positive,
/// else the operator's default; `None` (no deadline) when both are 0 or unset.
pub fn startup_deadline(spec: Option<i32>, default_seconds: u64) -> Option<u64> {
    spec.and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .or(Some(default_seconds).filter(|s| *s > 0))
}

/// The limits the operator enforces on one run that has a sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// The run's `spec.cancel`.
    pub cancel: bool,
    /// Seconds the agent may take to start, from the sandbox's creation; `None` for no limit.
    pub startup_deadline: Option<u64>,
    /// Seconds the agent may run, from its container's start; `None` for no limit.
    pub active_deadline: Option<u64>,
}

/// A run's outcome once the operator's limits are applied, and when to look again because a
/// deadline will pass (`None`: only a change of the run or its objects matters).
#[derive(Clone, Debug, PartialEq)]
pub struct Enforced {
    pub outcome: RunOutcome,
    pub recheck_after: Option<Duration>,
}

/// Applies `limits` to `observed`, the outcome [`super::run_outcome`] read from `pod`.
/// `sandbox_created` is when the run's sandbox was created (the deadline counts from it).
///
/// | observed | decision |
/// |----------|----------|
/// | finished (the agent exited, the pod failed or was lost) | unchanged: what happened stands |
/// | `cancel` | Failed, `Cancelled` |
/// | the agent container, or an init container, waits with a reason of [`FATAL_WAITING_REASONS`] | Failed, `StartupFailed`, naming the container, with the kubelet's reason and message |
/// | not started, `startup_deadline` seconds after `sandbox_created` | Failed, `StartupDeadlineExceeded`, with what the kubelet last said |
/// | not started, before the deadline | unchanged; look again when it passes |
/// | running `active_deadline` seconds after the agent started | Failed, `DeadlineExceeded` |
/// | running, before that | unchanged; look again when it passes |
/// | anything else | unchanged |
pub fn enforce(
    observed: RunOutcome,
    pod: Option<&Pod>,
    sandbox_created: Option<&Time>,
    limits: &Limits,
    now: &Time,
) -> Enforced {
    let unchanged = |outcome| Enforced {
        outcome,
        recheck_after: None,
    };
    if observed.phase.is_finished() {
        return unchanged(observed);
    }
    if limits.cancel {
        let sandbox = pod.and_then(|p| p.metadata.name.as_deref());
        return unchanged(cancelled(sandbox));
    }
    if observed.phase == AgentRunPhase::Running {
        let (Some(deadline), Some(started)) = (limits.active_deadline, &observed.start_time) else {
            return unchanged(observed);
        };
        let remaining = remaining(deadline, started, now);
        if remaining.is_zero() {
            return unchanged(RunOutcome::failed(
                AgentRunReason::DeadlineExceeded,
                format!(
                    "the agent ran past spec.activeDeadlineSeconds ({deadline}s); {} is stopped",
                    pod.and_then(|p| p.metadata.name.as_deref())
                        .map_or_else(|| "its sandbox".to_string(), |p| format!("pod {p}"))
                ),
            ));
        }
        return Enforced {
            outcome: observed,
            recheck_after: Some(remaining),
        };
    }
    if observed.phase != AgentRunPhase::Pending {
        return unchanged(observed);
    }
    if observed.reason == AgentRunReason::PodPending {
        let pod_name = pod.and_then(|p| p.metadata.name.as_deref()).unwrap_or("");
        if let Some((container, reason, message)) = pod.and_then(fatal_waiting) {
            let mut text = format!("{container} of pod {pod_name} cannot start: {reason}");
            if let Some(message) = message.filter(|m| !m.is_empty()) {
                text.push_str(": ");
                text.push_str(message);
            }
            return unchanged(RunOutcome::failed(AgentRunReason::StartupFailed, text));
        }
    }
    let (Some(deadline), Some(created)) = (limits.startup_deadline, sandbox_created) else {
        return unchanged(observed);
    };
    let remaining = remaining(deadline, created, now);
    if remaining.is_zero() {
        return unchanged(RunOutcome::failed(
            AgentRunReason::StartupDeadlineExceeded,
            format!(
                "the agent did not start within the startup deadline of {deadline}s: {}",
                observed.message
            ),
        ));
    }
    Enforced {
        outcome: observed,
        recheck_after: Some(remaining),
    }
}

/// How long a finished run is kept before it is deleted: `spec_ttl` (its
/// `spec.ttlSecondsAfterFinished`) or else the operator's default for its phase, counted from
/// `completion_time`. `None`: keep it; zero: delete it now. A run not finished, or without a
/// completion time, is kept.
pub fn time_to_live(
    phase: Option<AgentRunPhase>,
    completion_time: Option<&Time>,
    spec_ttl: Option<i32>,
    defaults: TtlDefaults,
    now: &Time,
) -> Option<Duration> {
    let default = match phase? {
        AgentRunPhase::Succeeded => defaults.after_succeeded,
        AgentRunPhase::Failed => defaults.after_failed,
        AgentRunPhase::Pending | AgentRunPhase::Running => return None,
    };
    let ttl = spec_ttl.and_then(|s| u64::try_from(s).ok()).or(default)?;
    Some(remaining(ttl, completion_time?, now))
}

/// The operator's time to live of finished runs without `spec.ttlSecondsAfterFinished`, by
/// outcome; `None` keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TtlDefaults {
    pub after_succeeded: Option<u64>,
    pub after_failed: Option<u64>,
}

/// Whether the run `me` may create its sandbox under its Agent's cap of `max_concurrent_runs`,
/// given every run of the namespace as the API server has them. Active runs have a sandbox
/// recorded in their status and have not finished; waiting runs have neither and are not
/// cancelled. Waiting runs start in creation order (creationTimestamp, then name): `me` is
/// admitted when the active runs and the waiting runs before it leave it a slot, else it is
/// `Queued` with its place in the message.
pub fn admit(
    me: &AgentRun,
    max_concurrent_runs: Option<i32>,
    runs: &[AgentRun],
) -> Result<(), RunOutcome> {
    let Some(cap) = max_concurrent_runs.and_then(|c| usize::try_from(c).ok()) else {
        return Ok(());
    };
    let agent = &me.spec.agent_ref;
    queue(me, cap, runs, |r| &r.spec.agent_ref == agent, |_| true).map_err(|(place, active)| {
        RunOutcome::pending(
            AgentRunReason::Queued,
            format!(
                "number {place} in the queue of Agent {agent}: it runs at most {cap} at once (spec.maxConcurrentRuns) and {active} are active"
            ),
        )
    })
}

/// Like [`admit`], under the operator's cap on the active runs of one namespace, whatever
/// their Agent (`--max-concurrent-runs-per-namespace`). A waiting run that its own Agent's
/// cap holds back (`agent_caps` maps the namespace's Agents to their
/// `spec.maxConcurrentRuns`) keeps no place in the namespace's queue, so that it cannot
/// leave a slot idle that a run of another Agent could use.
pub fn admit_in_namespace(
    me: &AgentRun,
    cap: u32,
    runs: &[AgentRun],
    agent_caps: &std::collections::BTreeMap<String, Option<i32>>,
) -> Result<(), RunOutcome> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let startable = |r: &AgentRun| {
        let agent_cap = agent_caps.get(&r.spec.agent_ref).copied().flatten();
        admit(r, agent_cap, runs).is_ok()
    };
    queue(me, cap, runs, |_| true, startable).map_err(|(place, active)| {
        let namespace = me.metadata.namespace.as_deref().unwrap_or_default();
        RunOutcome::pending(
            AgentRunReason::Queued,
            format!(
                "number {place} in the queue of namespace {namespace}: the operator runs at most {cap} at once in a namespace (--max-concurrent-runs-per-namespace) and {active} are active"
            ),
        )
    })
}

/// Admits `me` when the active runs among `runs` that are `in_scope`, and the waiting ones
/// before it that are `in_scope` and `startable`, leave it one of `cap` slots; else its place
/// in the queue and the number of active runs.
fn queue(
    me: &AgentRun,
    cap: usize,
    runs: &[AgentRun],
    in_scope: impl Fn(&AgentRun) -> bool,
    startable: impl Fn(&AgentRun) -> bool,
) -> Result<(), (usize, usize)> {
    let key = |run: &AgentRun| {
        (
            run.metadata.creation_timestamp.clone().map(|t| t.0),
            run.metadata.name.clone(),
        )
    };
    let others = runs
        .iter()
        .filter(|r| in_scope(r) && r.metadata.uid != me.metadata.uid);
    let status = |r: &AgentRun| r.status.clone().unwrap_or_default();
    let unfinished = |r: &&AgentRun| !status(r).phase.is_some_and(AgentRunPhase::is_finished);
    let active = others
        .clone()
        .filter(unfinished)
        .filter(|r| status(r).sandbox_name.is_some())
        .count();
    let ahead = others
        .filter(unfinished)
        .filter(|r| status(r).sandbox_name.is_none() && r.spec.cancel != Some(true))
        .filter(|r| key(r) < key(me))
        .filter(|r| startable(r))
        .count();
    let free = cap.saturating_sub(active);
    if ahead < free {
        return Ok(());
    }
    Err((ahead - free + 1, active))
}

/// The outcome of a cancelled run; `pod` names its pod when it has one.
pub fn cancelled(pod: Option<&str>) -> RunOutcome {
    let message = match pod {
        Some(pod) => format!("cancelled: spec.cancel is true; pod {pod} is stopped"),
        None => "cancelled: spec.cancel is true".to_string(),
    };
    RunOutcome::failed(AgentRunReason::Cancelled, message)
}

/// Ends a run whose mounted skill a trust policy with `action: Cancel` revokes (`revocation`,
/// as [`crate::trust::cancellation`] words it) the way `spec.cancel` ends it: Failed, reason
/// `SkillRevoked`, its sandbox stopped. A run that has finished, by its agent or by a limit
/// of the same pass, keeps that outcome.
pub fn end_revoked(enforced: Enforced, revocation: Option<String>, pod: Option<&Pod>) -> Enforced {
    let Some(why) = revocation.filter(|_| !enforced.outcome.phase.is_finished()) else {
        return enforced;
    };
    let message = match pod.and_then(|p| p.metadata.name.as_deref()) {
        Some(pod) => format!("cancelled: {why}; pod {pod} is stopped"),
        None => format!("cancelled: {why}"),
    };
    Enforced {
        outcome: RunOutcome::failed(AgentRunReason::SkillRevoked, message),
        recheck_after: None,
    }
}

/// What is left of `seconds` counted from `since` at `now`; zero once it has passed.
fn remaining(seconds: u64, since: &Time, now: &Time) -> Duration {
    let elapsed = now.0.as_second().saturating_sub(since.0.as_second());
    let elapsed = u64::try_from(elapsed).unwrap_or(0);
    Duration::from_secs(seconds.saturating_sub(elapsed))
}

/// Whether a run whose status ended with `reason` (as read back from it) was ended by the
/// operator rather than by its agent, so that its sandbox must be deleted (the pod would
/// otherwise go on pulling or running).
pub fn stops_sandbox(reason: &str) -> bool {
    [
        AgentRunReason::StartupFailed,
        AgentRunReason::StartupDeadlineExceeded,
        AgentRunReason::Cancelled,
        AgentRunReason::SkillRevoked,
        AgentRunReason::DeadlineExceeded,
    ]
    .iter()
    .any(|stopping| stopping.as_str() == reason)
}

#[cfg(test)]
mod tests;
