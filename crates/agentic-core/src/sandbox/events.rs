//! The Events a run's status change raises (see [`crate::events`]).

use agentic_api::{AgentRunPhase, AgentRunStatus, CONDITION_READY};

use crate::conditions::find_condition;
use crate::events::StatusEvent;
use crate::reasons::{AgentRunReason, EventReason};

/// The Events for a run whose status goes from `old` to `new`, oldest first.
///
/// - The pass that records the run's sandbox usually reports `SandboxCreating` or `PodPending`,
///   whose Event names the sandbox. When the run is already further along (an operator
///   stopped between creating the sandbox and writing the status finds the agent running
///   when it comes back) it also raises `SandboxCreating` naming the sandbox, which would
///   otherwise never be announced. The usual first pass costs one Event, not two.
/// - A change of phase or of the `Ready` reason raises an Event with the new reason and
///   message; a Warning when the run failed.
/// - Names new in `status.unmountedSkillLoads` raise one Warning `UnmountedSkillLoaded`
///   naming them (a name already recorded raises nothing when its count grows).
pub fn run_events(old: &AgentRunStatus, new: &AgentRunStatus) -> Vec<StatusEvent> {
    let mut events = Vec::new();
    let reason = |status: &AgentRunStatus| {
        find_condition(&status.conditions, CONDITION_READY).map(|c| c.reason.clone())
    };
    let (old_reason, new_reason) = (reason(old), reason(new));
    if let (None, Some(sandbox)) = (&old.sandbox_name, &new.sandbox_name)
        && !new_reason.as_deref().is_some_and(|reason| {
            [AgentRunReason::SandboxCreating, AgentRunReason::PodPending]
                .iter()
                .any(|named| named.as_str() == reason)
        })
    {
        events.push(StatusEvent {
            warning: false,
            reason: AgentRunReason::SandboxCreating.to_string(),
            note: format!("sandbox {sandbox} created"),
        });
    }
    if (old.phase != new.phase || old_reason != new_reason)
        && let Some(ready) = find_condition(&new.conditions, CONDITION_READY)
    {
        events.push(StatusEvent {
            warning: new.phase == Some(AgentRunPhase::Failed),
            reason: ready.reason.clone(),
            note: ready.message.clone(),
        });
    }
    let new_names: Vec<&str> = new
        .unmounted_skill_loads
        .iter()
        .filter(|load| {
            !old.unmounted_skill_loads
                .iter()
                .any(|o| o.name == load.name)
        })
        .map(|load| load.name.as_str())
        .collect();
    if !new_names.is_empty() {
        events.push(StatusEvent {
            warning: true,
            reason: EventReason::UnmountedSkillLoaded.to_string(),
            note: format!(
                "the agent loaded {}, which the run did not mount: not validated, pinned or checked against the trust policies",
                new_names.join(", ")
            ),
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::Conditions;
    use crate::reasons::{AgentRunReason as R, ErrorReason};
    use agentic_api::ConditionStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn status(phase: AgentRunPhase, reason: impl Into<R>, sandbox: Option<&str>) -> AgentRunStatus {
        let reason = reason.into();
        let mut status = AgentRunStatus {
            phase: Some(phase),
            sandbox_name: sandbox.map(str::to_string),
            ..AgentRunStatus::default()
        };
        Conditions::<R>::new(
            &mut status.conditions,
            Some(1),
            Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
        .set(
            CONDITION_READY,
            ConditionStatus::False,
            reason,
            &format!("{reason} happened"),
        );
        status
    }

    fn reasons(events: &[StatusEvent]) -> Vec<&str> {
        events.iter().map(|e| e.reason.as_str()).collect()
    }

    #[test]
    fn a_sandbox_recorded_with_the_pod_already_running_is_announced_first() {
        let old = AgentRunStatus::default();
        let new = status(AgentRunPhase::Running, R::AgentRunning, Some("run-1"));
        let events = run_events(&old, &new);
        assert_eq!(reasons(&events), ["SandboxCreating", "AgentRunning"]);
        assert_eq!(events[0].note, "sandbox run-1 created");
        assert!(!events[0].warning && !events[1].warning);
    }

    #[test]
    fn a_sandbox_recorded_while_it_or_its_pod_is_created_is_announced_once() {
        let old = status(AgentRunPhase::Pending, R::Queued, None);
        for reason in [R::SandboxCreating, R::PodPending] {
            let new = status(AgentRunPhase::Pending, reason, Some("run-1"));
            let events = run_events(&old, &new);
            assert_eq!(reasons(&events), [reason.as_str()]);
            assert_eq!(events[0].note, format!("{reason} happened"));
        }
    }

    #[test]
    fn an_unchanged_reason_raises_nothing_and_a_failure_is_a_warning() {
        let running = status(AgentRunPhase::Running, R::AgentRunning, Some("run-1"));
        assert!(run_events(&running, &running.clone()).is_empty());
        let failed = status(AgentRunPhase::Failed, R::AgentFailed, Some("run-1"));
        let events = run_events(&running, &failed);
        assert_eq!(reasons(&events), ["AgentFailed"]);
        assert!(events[0].warning);
    }

    #[test]
    fn a_run_blocked_before_its_sandbox_raises_only_its_reason() {
        let old = AgentRunStatus::default();
        let new = status(AgentRunPhase::Pending, ErrorReason::AgentNotReady, None);
        assert_eq!(reasons(&run_events(&old, &new)), ["AgentNotReady"]);
    }

    #[test]
    fn a_new_unmounted_skill_raises_one_warning_and_a_growing_count_none() {
        let unmounted = |names: &[(&str, i64)]| AgentRunStatus {
            unmounted_skill_loads: names
                .iter()
                .map(|(name, count)| agentic_api::UnmountedSkillLoad {
                    name: (*name).into(),
                    count: *count,
                })
                .collect(),
            ..AgentRunStatus::default()
        };
        let events = run_events(&unmounted(&[]), &unmounted(&[("baked", 1), ("other", 2)]));
        assert_eq!(reasons(&events), ["UnmountedSkillLoaded"]);
        assert!(events[0].warning);
        assert!(
            events[0].note.contains("baked, other"),
            "{}",
            events[0].note
        );
        let events = run_events(
            &unmounted(&[("baked", 1)]),
            &unmounted(&[("baked", 3), ("third", 1)]),
        );
        assert_eq!(events.len(), 1);
        assert!(events[0].note.contains("third") && !events[0].note.contains("baked"));
        assert!(run_events(&unmounted(&[("baked", 1)]), &unmounted(&[("baked", 2)])).is_empty());
    }
}
