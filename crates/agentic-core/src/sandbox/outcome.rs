//! A run's phase and conditions, read from its sandbox's pod.

use agentic_api::{AgentRunPhase, AgentRunStatus, CONDITION_READY, ConditionStatus};
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::AGENT_CONTAINER;
use crate::conditions::set_condition;

/// The condition that is True once a run has finished, with the outcome as its reason.
pub const CONDITION_COMPLETED: &str = "Completed";

/// No pod yet: the sandbox is being created, or agent-sandbox has not made its pod.
pub const REASON_SANDBOX_CREATING: &str = "SandboxCreating";
/// The pod exists but the agent container has not started (scheduling, image pulls).
pub const REASON_POD_PENDING: &str = "PodPending";
/// The agent container runs.
pub const REASON_AGENT_RUNNING: &str = "AgentRunning";
/// The agent container exited 0.
pub const REASON_AGENT_SUCCEEDED: &str = "AgentSucceeded";
/// The agent container exited non-zero.
pub const REASON_AGENT_FAILED: &str = "AgentFailed";
/// The pod failed without the agent container terminating (for example it was evicted).
pub const REASON_POD_FAILED: &str = "PodFailed";
/// The sandbox or its pod disappeared, or was replaced, after the agent started.
pub const REASON_SANDBOX_LOST: &str = "SandboxLost";
/// An object the run does not control holds the name of one of the run's objects.
pub const REASON_OBJECT_NAME_TAKEN: &str = "ObjectNameTaken";

/// Where a run stands, and why: the phase, a stable reason, a message for the user, and the
/// agent container's start and finish times when known.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// The run's phase.
    pub phase: AgentRunPhase,
    /// A stable CamelCase reason for the `Ready` and `Completed` conditions.
    pub reason: &'static str,
    /// What happened, for the user.
    pub message: String,
    /// When the agent container started.
    pub start_time: Option<Time>,
    /// When the agent container finished.
    pub completion_time: Option<Time>,
}

impl RunOutcome {
    /// A run waiting for something, for example its Agent.
    pub fn pending(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(AgentRunPhase::Pending, reason, message.into())
    }

    /// A run that cannot run, for example because its params are invalid.
    pub fn failed(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(AgentRunPhase::Failed, reason, message.into())
    }

    /// A run blocked by an object it does not control: the `kind` object `name` holds the
    /// name of the run's sandbox, ConfigMap or Secret. The operator neither changes nor
    /// deletes it; the run goes on once the name is free.
    pub fn name_taken(kind: &str, name: &str) -> Self {
        Self::pending(
            REASON_OBJECT_NAME_TAKEN,
            format!(
                "{kind} {name} exists and is not controlled by this run, so the run cannot create its own {kind} {name}; it starts once that object is gone (an earlier run of the same name still being deleted, or an object of someone else that needs another name)"
            ),
        )
    }

    fn new(phase: AgentRunPhase, reason: &'static str, message: String) -> Self {
        RunOutcome {
            phase,
            reason,
            message,
            start_time: None,
            completion_time: None,
        }
    }

    /// Writes the outcome into a run's status and returns whether anything changed:
    ///
    /// - `phase`, and `observedGeneration`;
    /// - `Ready`: True while the agent runs, otherwise False; `Completed`: True once the run
    ///   has finished, otherwise False; both with the outcome's reason and message;
    /// - `startTime` once, the first time it is known; `completionTime` when the run
    ///   finishes: the agent's finish time, or `now` when the pod does not say.
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
        for (type_, condition_status) in
            [(CONDITION_READY, ready), (CONDITION_COMPLETED, completed)]
        {
            set_condition(
                &mut status.conditions,
                type_,
                condition_status,
                self.reason,
                &self.message,
                observed_generation,
                now.clone(),
            );
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
/// | agent container terminated non-zero (code, reason and termination message in the message) | Failed | `AgentFailed` |
/// | pod phase Failed, agent container not terminated (eviction, node loss; the pod's reason in the message) | Failed | `PodFailed` |
/// | pod phase Succeeded without an agent container status | Succeeded | `AgentSucceeded` |
/// | sandbox or pod gone after the agent started | Failed | `SandboxLost` |
/// | a different pod than the one that started (agent-sandbox recreates deleted pods) | Failed | `SandboxLost` |
/// | agent container running | Running | `AgentRunning` |
/// | pod exists, agent container not started (waiting reason in the message) | Pending | `PodPending` |
/// | no pod yet, agent never started | Pending | `SandboxCreating` |
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
                REASON_SANDBOX_CREATING,
                format!("sandbox {sandbox} exists; waiting for its pod"),
            ),
            (false, false) => RunOutcome::pending(
                REASON_SANDBOX_CREATING,
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
            let reason = pod_status
                .and_then(|s| s.reason.as_deref())
                .unwrap_or("no reason given");
            let mut message = format!("pod {pod_name} failed before the agent finished: {reason}");
            if let Some(detail) = pod_status.and_then(|s| s.message.as_deref()) {
                message.push_str(": ");
                message.push_str(detail);
            }
            return RunOutcome::failed(REASON_POD_FAILED, message);
        }
        Some("Succeeded") => {
            return RunOutcome::new(
                AgentRunPhase::Succeeded,
                REASON_AGENT_SUCCEEDED,
                format!("pod {pod_name} succeeded"),
            );
        }
        _ => {}
    }
    if running.is_some() {
        return RunOutcome {
            start_time: running_since.cloned(),
            ..RunOutcome::new(
                AgentRunPhase::Running,
                REASON_AGENT_RUNNING,
                format!("the agent is running in pod {pod_name}"),
            )
        };
    }
    RunOutcome::pending(REASON_POD_PENDING, pending_message(pod, pod_name, agent))
}

fn lost(message: String) -> RunOutcome {
    RunOutcome::failed(REASON_SANDBOX_LOST, message)
}

fn finished(terminated: &ContainerStateTerminated) -> RunOutcome {
    let (phase, reason) = if terminated.exit_code == 0 {
        (AgentRunPhase::Succeeded, REASON_AGENT_SUCCEEDED)
    } else {
        (AgentRunPhase::Failed, REASON_AGENT_FAILED)
    };
    let mut message = format!("the agent exited with code {}", terminated.exit_code);
    if let Some(reason) = terminated.reason.as_deref().filter(|r| !r.is_empty()) {
        message.push_str(&format!(" ({reason})"));
    }
    if let Some(text) = terminated
        .message
        .as_deref()
        .map(str::trim_end)
        .filter(|m| !m.is_empty())
    {
        message.push_str(": ");
        message.push_str(text);
    }
    RunOutcome {
        start_time: terminated.started_at.clone(),
        completion_time: terminated.finished_at.clone(),
        ..RunOutcome::new(phase, reason, message)
    }
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

/// The kubelet's reason (and message) for a container that waits to start.
pub(crate) fn waiting_reason(container: &ContainerStatus) -> Option<(&str, Option<&str>)> {
    let waiting = container.state.as_ref()?.waiting.as_ref()?;
    Some((waiting.reason.as_deref()?, waiting.message.as_deref()))
}

#[cfg(test)]
mod tests;
