//! A run's phase and conditions, read from its sandbox's pod.

use std::fmt::Write as _;

use agentic_api::{AgentRunPhase, AgentRunStatus, CONDITION_READY, ConditionStatus};
use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStatus, LocalObjectReference, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value};

use super::credentials::{CONDITION_CREDENTIAL_ISOLATION, CredentialIsolation};
use super::{ACP_PORT, AGENT_CONTAINER, SKILL_FETCH_CONTAINER_PREFIX};
use crate::conditions::{Conditions, truncate};
use crate::names::acp_secret_name;
use crate::reasons::AgentRunReason;

pub use agentic_api::CONDITION_COMPLETED;

/// Konveyor's condition for the run's outcome: Unknown until the run ends, then True when it
/// succeeded and False otherwise.
pub const CONDITION_SUCCEEDED: &str = "Succeeded";
/// Konveyor's condition for whether the agent accepts ACP connections.
pub const CONDITION_ACP_READY: &str = "ACPReady";

/// The exit code of an agent that stopped at an execution limit.
pub const EXIT_LIMIT_REACHED: i32 = 2;
/// The exit code of an agent that refused the task.
pub const EXIT_REFUSED: i32 = 3;
/// The largest termination message kept as `status.terminationData`, in bytes (the
/// kubelet's own limit on termination messages).
pub const MAX_TERMINATION_DATA_BYTES: usize = 4096;
/// The most of a termination message that goes into the conditions' message, in bytes.
pub const MAX_TERMINATION_MESSAGE_BYTES: usize = 4096;

/// Where a run stands, and why: the phase, a stable reason, a message for the user, and the
/// agent container's start and finish times when known.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// The run's phase.
    pub phase: AgentRunPhase,
    /// The reason of the `Ready` and `Completed` conditions.
    pub reason: AgentRunReason,
    /// What happened, for the user.
    pub message: String,
    /// When the agent container started.
    pub start_time: Option<Time>,
    /// When the agent container finished.
    pub completion_time: Option<Time>,
    /// Whether the agent accepts ACP connections: its pod is Ready.
    pub listening: bool,
    /// The agent's termination message, when it is a JSON object within
    /// [`MAX_TERMINATION_DATA_BYTES`].
    pub termination_data: Option<Box<Map<String, Value>>>,
    /// What the run's sandbox does with the model key, decided when the sandbox is created
    /// (or the run refused for it); the condition it gives is kept after that.
    pub credential_isolation: Option<Box<CredentialIsolation>>,
}

impl RunOutcome {
    /// A run waiting for something, for example its Agent.
    pub fn pending(reason: impl Into<AgentRunReason>, message: impl Into<String>) -> Self {
        Self::new(AgentRunPhase::Pending, reason.into(), message.into())
    }

    /// A run that cannot run, for example because its params are invalid.
    pub fn failed(reason: impl Into<AgentRunReason>, message: impl Into<String>) -> Self {
        Self::new(AgentRunPhase::Failed, reason.into(), message.into())
    }

    /// A run blocked by an object it does not control: the `kind` object `name` holds the
    /// name of the run's sandbox, ConfigMap or Secret. The operator neither changes nor
    /// deletes it; the run goes on once the name is free.
    pub fn name_taken(kind: &str, name: &str) -> Self {
        Self::pending(
            AgentRunReason::ObjectNameTaken,
            format!(
                "{kind} {name} exists and is not controlled by this run, so the run cannot create its own {kind} {name}; it starts once that object is gone (an earlier run of the same name still being deleted, or an object of someone else that needs another name)"
            ),
        )
    }

    fn new(phase: AgentRunPhase, reason: AgentRunReason, message: String) -> Self {
        RunOutcome {
            phase,
            reason,
            message,
            start_time: None,
            completion_time: None,
            listening: false,
            termination_data: None,
            credential_isolation: None,
        }
    }

    /// The outcome, with the [`CONDITION_CREDENTIAL_ISOLATION`] that `isolation` gives.
    #[must_use]
    pub fn with_credential_isolation(mut self, isolation: CredentialIsolation) -> Self {
        self.credential_isolation = Some(Box::new(isolation));
        self
    }

    /// Writes the outcome into a run's status and returns whether anything changed:
    ///
    /// - `phase`, and `observedGeneration`;
    /// - `Ready`: True while the agent runs, otherwise False; `Completed`: True once the run
    ///   has finished, otherwise False; both with the outcome's reason and message;
    /// - Konveyor's `Succeeded`: Unknown until the run finishes, then True or False, with the
    ///   reason mapped by [`succeeded_reason`]; `ACPReady`: True (`Listening`) while the agent
    ///   runs in a Ready pod, False with `NotListening` before, `Finished` after;
    /// - `startTime` once, the first time it is known; `completionTime` when the run
    ///   finishes: the agent's finish time, or `now` when the pod does not say; `duration`,
    ///   the whole seconds between the two, when both are known;
    /// - `secretKeyRef`, the ACP key Secret, once the run has a sandbox;
    /// - `terminationData`, the agent's JSON termination message, when the run finishes;
    /// - `CredentialIsolation` (ours), when the outcome carries one: set when the sandbox is
    ///   created or the run is refused for it, then left as it is.
    ///
    /// A finished run (Succeeded or Failed) is final: its status is left untouched. Applying
    /// an outcome equal to the last one changes nothing, so an idle run causes no writes.
    pub fn apply(
        &self,
        status: &mut AgentRunStatus,
        observed_generation: Option<i64>,
        now: Time,
    ) -> bool {
        if status.phase.is_some_and(AgentRunPhase::is_finished) {
            return false;
        }
        let before = status.clone();
        let finished = self.phase.is_finished();
        status.phase = Some(self.phase);
        status.observed_generation = observed_generation;
        if status.start_time.is_none() {
            status.start_time.clone_from(&self.start_time);
        }
        if finished {
            status.completion_time =
                Some(self.completion_time.clone().unwrap_or_else(|| now.clone()));
        }
        let ready = if self.phase == AgentRunPhase::Running {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        let completed = if finished {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        let mut conditions =
            Conditions::<AgentRunReason>::new(&mut status.conditions, observed_generation, now);
        for (type_, condition_status) in
            [(CONDITION_READY, ready), (CONDITION_COMPLETED, completed)]
        {
            conditions.set(type_, condition_status, self.reason, &self.message);
        }
        let succeeded = match self.phase {
            AgentRunPhase::Succeeded => ConditionStatus::True,
            AgentRunPhase::Failed => ConditionStatus::False,
            AgentRunPhase::Pending | AgentRunPhase::Running => ConditionStatus::Unknown,
        };
        conditions.set(
            CONDITION_SUCCEEDED,
            succeeded,
            succeeded_reason(self.reason),
            &self.message,
        );
        let sandbox = status.sandbox_name.as_deref().unwrap_or("of this run");
        let (acp_status, acp_reason, acp_message) = if finished {
            (
                ConditionStatus::False,
                AgentRunReason::Finished,
                "the run has ended; its ACP endpoint is gone".to_string(),
            )
        } else if self.phase == AgentRunPhase::Running && self.listening {
            (
                ConditionStatus::True,
                AgentRunReason::Listening,
                format!(
                    "the agent of sandbox {sandbox} accepts ACP connections on port {ACP_PORT}"
                ),
            )
        } else {
            (
                ConditionStatus::False,
                AgentRunReason::NotListening,
                format!("waiting for the agent of sandbox {sandbox} to listen on port {ACP_PORT}"),
            )
        };
        conditions.set(CONDITION_ACP_READY, acp_status, acp_reason, &acp_message);
        if let Some(isolation) = &self.credential_isolation {
            let (status, reason, message) = isolation.condition::<AgentRunReason>();
            conditions.set(CONDITION_CREDENTIAL_ISOLATION, status, reason, &message);
        }
        status.secret_key_ref = status
            .sandbox_name
            .as_deref()
            .map(|name| LocalObjectReference {
                name: acp_secret_name(name),
            });
        if finished {
            status.duration = match (&status.start_time, &status.completion_time) {
                (Some(start), Some(end)) => {
                    Some(end.0.as_second().saturating_sub(start.0.as_second()).max(0))
                }
                _ => None,
            };
            status.termination_data = self.termination_data.as_deref().cloned();
        }
        *status != before
    }
}

/// The outcome of a run that has a sandbox, from what the controller observes: the sandbox's
/// pod (None when it does not exist), whether the sandbox object exists (for the `pod`
/// backend, whether the pod exists), and the run's current status.
///
/// | observed | phase | reason |
/// |----------|-------|--------|
/// | agent container terminated with exit code 0 | Succeeded | `AgentSucceeded` |
/// | agent container terminated with exit code 2 | Failed | `LimitReached` |
/// | agent container terminated with exit code 3 | Failed | `Refused` |
/// | agent container terminated with another non-zero code (code, reason and termination message in the message) | Failed | `AgentFailed` |
/// | pod phase Failed, a `skill-fetch-<index>` init container exited non-zero (its exit code and termination message in the message) | Failed | `SkillFetchFailed` |
/// | pod phase Failed, agent container not terminated (eviction, node loss; the pod's reason in the message) | Failed | `PodFailed` |
/// | pod phase Succeeded without an agent container status | Succeeded | `AgentSucceeded` |
/// | sandbox or pod gone after the agent started | Failed | `SandboxLost` |
/// | a different pod than the one that started (agent-sandbox recreates deleted pods) | Failed | `SandboxLost` |
/// | agent container running | Running | `AgentRunning` |
/// | pod exists, agent container not started (waiting reason in the message) | Pending | `PodPending` |
/// | no pod yet, agent never started | Pending | `SandboxCreating` |
///
/// A termination message that is a JSON object (within [`MAX_TERMINATION_DATA_BYTES`]) is
/// the outcome's `termination_data`, and the message says so; any other goes into the
/// message, cut after [`MAX_TERMINATION_MESSAGE_BYTES`]. `listening` is whether a running
/// agent's pod is Ready.
///
/// "The agent started" means the status records a `startTime` or phase Running. A pod is the
/// same pod when its agent container's start time equals the recorded `startTime`, which is
/// why [`RunOutcome::apply`] records the container's start time.
pub fn run_outcome(pod: Option<&Pod>, sandbox_exists: bool, status: &AgentRunStatus) -> RunOutcome {
    let sandbox = status.sandbox_name.as_deref().unwrap_or("of this run");
    let started = status.phase == Some(AgentRunPhase::Running) || status.start_time.is_some();
    let Some(pod) = pod else {
        return match (started, sandbox_exists) {
            (true, true) => lost(format!(
                "the pod of sandbox {sandbox} disappeared while the agent was running"
            )),
            (true, false) => lost(format!(
                "sandbox {sandbox} was deleted while the agent was running"
            )),
            (false, true) => RunOutcome::pending(
                AgentRunReason::SandboxCreating,
                format!("sandbox {sandbox} exists; waiting for its pod"),
            ),
            (false, false) => RunOutcome::pending(
                AgentRunReason::SandboxCreating,
                format!("waiting for sandbox {sandbox} to be created"),
            ),
        };
    };
    let pod_name = pod.metadata.name.as_deref().unwrap_or(sandbox);
    let pod_status = pod.status.as_ref();
    let agent = agent_status(pod);
    let state = agent.and_then(|c| c.state.as_ref());
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let running = state.and_then(|s| s.running.as_ref());
    let running_since = running.and_then(|r| r.started_at.as_ref());
    let container_start = running_since.or_else(|| terminated.and_then(|t| t.started_at.as_ref()));

    if started && !sandbox_exists {
        return lost(format!(
            "sandbox {sandbox} was deleted while the agent was running"
        ));
    }
    let replaced = match &status.start_time {
        Some(recorded) => container_start != Some(recorded),
        None => started && container_start.is_none(),
    };
    if started && replaced {
        return lost(format!(
            "pod {pod_name} was replaced after the agent started; the run does not start over"
        ));
    }

    if let Some(terminated) = terminated {
        return finished(terminated);
    }
    match pod_status.and_then(|s| s.phase.as_deref()) {
        Some("Failed") => {
            if let Some(message) = failed_skill_fetch(pod) {
                return RunOutcome::failed(
                    AgentRunReason::SkillFetchFailed,
                    format!("pod {pod_name}: {message}"),
                );
            }
            let reason = pod_status
                .and_then(|s| s.reason.as_deref())
                .unwrap_or("no reason given");
            let mut message = format!("pod {pod_name} failed before the agent finished: {reason}");
            if let Some(detail) = pod_status.and_then(|s| s.message.as_deref()) {
                message.push_str(": ");
                message.push_str(detail);
            }
            return RunOutcome::failed(AgentRunReason::PodFailed, message);
        }
        Some("Succeeded") => {
            return RunOutcome::new(
                AgentRunPhase::Succeeded,
                AgentRunReason::AgentSucceeded,
                format!("pod {pod_name} succeeded"),
            );
        }
        _ => {}
    }
    if running.is_some() {
        return RunOutcome {
            start_time: running_since.cloned(),
            listening: pod_ready(pod),
            ..RunOutcome::new(
                AgentRunPhase::Running,
                AgentRunReason::AgentRunning,
                format!("the agent is running in pod {pod_name}"),
            )
        };
    }
    RunOutcome::pending(
        AgentRunReason::PodPending,
        pending_message(pod, pod_name, agent),
    )
}

/// The reason of Konveyor's `Succeeded` condition for a run whose `Ready` reason is `reason`:
/// Konveyor's names where it has one (`AgentSucceeded` → `Succeeded`, `AgentFailed` →
/// `Failed`, `AgentRunning` → `Running`), otherwise the reason itself (`LimitReached`,
/// `Refused`, `InvalidParams`, `Cancelled`, ...).
pub fn succeeded_reason(reason: AgentRunReason) -> AgentRunReason {
    match reason {
        AgentRunReason::AgentSucceeded => AgentRunReason::Succeeded,
        AgentRunReason::AgentFailed => AgentRunReason::Failed,
        AgentRunReason::AgentRunning => AgentRunReason::Running,
        other => other,
    }
}

fn lost(message: String) -> RunOutcome {
    RunOutcome::failed(AgentRunReason::SandboxLost, message)
}

fn finished(terminated: &ContainerStateTerminated) -> RunOutcome {
    let (phase, reason) = match terminated.exit_code {
        0 => (AgentRunPhase::Succeeded, AgentRunReason::AgentSucceeded),
        EXIT_LIMIT_REACHED => (AgentRunPhase::Failed, AgentRunReason::LimitReached),
        EXIT_REFUSED => (AgentRunPhase::Failed, AgentRunReason::Refused),
        _ => (AgentRunPhase::Failed, AgentRunReason::AgentFailed),
    };
    let mut message = format!("the agent exited with code {}", terminated.exit_code);
    if let Some(reason) = terminated.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = write!(message, " ({reason})");
    }
    let text = terminated
        .message
        .as_deref()
        .map(str::trim_end)
        .filter(|m| !m.is_empty());
    let termination_data = text.and_then(json_object).map(Box::new);
    match text {
        Some(_) if termination_data.is_some() => {
            message.push_str("; its termination message is in status.terminationData");
        }
        Some(text) => {
            message.push_str(": ");
            let kept = truncate(text, MAX_TERMINATION_MESSAGE_BYTES);
            message.push_str(kept);
            if kept.len() < text.len() {
                message.push_str(" [cut]");
            }
        }
        None => {}
    }
    RunOutcome {
        start_time: terminated.started_at.clone(),
        completion_time: terminated.finished_at.clone(),
        termination_data,
        ..RunOutcome::new(phase, reason, message)
    }
}

/// `text` as a JSON object, when it is one within [`MAX_TERMINATION_DATA_BYTES`].
fn json_object(text: &str) -> Option<Map<String, Value>> {
    if text.len() > MAX_TERMINATION_DATA_BYTES {
        return None;
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// Whether the pod reports Ready: its readiness probe connects to the ACP port.
fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Why the agent has not started: the container's waiting reason (image pulls, missing
/// Secrets), else an unschedulable pod, else plain waiting.
fn pending_message(pod: &Pod, pod_name: &str, agent: Option<&ContainerStatus>) -> String {
    if let Some((reason, detail)) = agent.and_then(waiting_reason) {
        return match detail {
            Some(detail) => {
                format!("the agent container of pod {pod_name} is waiting: {reason}: {detail}")
            }
            None => format!("the agent container of pod {pod_name} is waiting: {reason}"),
        };
    }
    let unschedulable = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        });
    if let Some(condition) = unschedulable {
        return format!(
            "pod {pod_name} cannot be scheduled: {}",
            condition.message.as_deref().unwrap_or("no reason given")
        );
    }
    format!("waiting for the agent container of pod {pod_name} to start")
}

/// The agent container's status in `pod`, when the kubelet has reported one.
pub(crate) fn agent_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().find(|c| c.name == AGENT_CONTAINER))
}

/// What the first failed skill-fetch init container said: its exit code and termination
/// message (the end of its log, the `error: ...` line of `skill fetch`).
fn failed_skill_fetch(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .filter(|c| c.name.starts_with(SKILL_FETCH_CONTAINER_PREFIX))
        .find_map(|c| {
            let terminated = c.state.as_ref()?.terminated.as_ref()?;
            (terminated.exit_code != 0).then(|| {
                let said = terminated
                    .message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map_or("no message", |m| truncate(m, MAX_TERMINATION_MESSAGE_BYTES));
                format!(
                    "init container {} fetching a git skill exited {}: {said}",
                    c.name, terminated.exit_code
                )
            })
        })
}

/// The kubelet's reason (and message) for a container that waits to start.
pub(crate) fn waiting_reason(container: &ContainerStatus) -> Option<(&str, Option<&str>)> {
    let waiting = container.state.as_ref()?.waiting.as_ref()?;
    Some((waiting.reason.as_deref()?, waiting.message.as_deref()))
}

#[cfg(test)]
mod tests;
