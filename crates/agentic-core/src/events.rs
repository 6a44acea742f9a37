//! The Events a status change raises.
//!
//! Events are derived from the change between the status a pass read and the status it
//! writes, and are raised before that write. A pass that dies after raising them and before
//! writing raises them again on the next pass, so an Event may repeat but is never lost.

use agentic_api::ConditionStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::conditions::find_condition;

/// One Event about an object whose status changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusEvent {
    /// A Warning rather than a Normal event.
    pub warning: bool,
    /// The Event's reason: the reason of the condition that changed.
    pub reason: String,
    /// What happened, for the user.
    pub note: String,
}

/// One Event for each condition of `types` whose status or reason differs between `old` and
/// `new`, in the order of `types`: Normal when it turned `True`, else a Warning. A condition
/// that is gone, or only changed its message, raises nothing.
pub fn condition_events(old: &[Condition], new: &[Condition], types: &[&str]) -> Vec<StatusEvent> {
    types
        .iter()
        .filter_map(|type_| {
            let after = find_condition(new, type_)?;
            let before = find_condition(old, type_);
            if before.is_some_and(|b| b.status == after.status && b.reason == after.reason) {
                return None;
            }
            Some(StatusEvent {
                warning: after.status != ConditionStatus::True.as_str(),
                reason: after.reason.clone(),
                note: after.message.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{Conditions, remove_condition};
    use crate::reasons::{AgentReason, Reason, SkillCardReason};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn with<R: Reason>(
        conditions: &[Condition],
        type_: &str,
        status: ConditionStatus,
        reason: R,
        message: &str,
    ) -> Vec<Condition> {
        let mut conditions = conditions.to_vec();
        let now = Time(Timestamp::from_second(1).expect("valid timestamp"));
        Conditions::<R>::new(&mut conditions, Some(1), now).set(type_, status, reason, message);
        conditions
    }

    #[test]
    fn a_new_status_or_reason_raises_one_event_and_a_new_message_none() {
        let old = with(
            &[],
            "Ready",
            ConditionStatus::False,
            SkillCardReason::Validating,
            "waiting",
        );
        let old = with(
            &old,
            "Other",
            ConditionStatus::True,
            SkillCardReason::DigestResolved,
            "fine",
        );

        let reworded = with(
            &old,
            "Ready",
            ConditionStatus::False,
            SkillCardReason::Validating,
            "still waiting",
        );
        assert_eq!(condition_events(&old, &reworded, &["Ready", "Other"]), []);

        let ready = with(
            &old,
            "Ready",
            ConditionStatus::True,
            AgentReason::AgentReady,
            "all set",
        );
        let broken = with(
            &ready,
            "Other",
            ConditionStatus::False,
            SkillCardReason::RegistryUnavailable,
            "it broke",
        );
        assert_eq!(
            condition_events(&old, &broken, &["Ready", "Other"]),
            [
                StatusEvent {
                    warning: false,
                    reason: "AgentReady".into(),
                    note: "all set".into()
                },
                StatusEvent {
                    warning: true,
                    reason: "RegistryUnavailable".into(),
                    note: "it broke".into()
                },
            ]
        );
        // Only the types asked for are announced.
        assert_eq!(condition_events(&old, &broken, &["Other"]).len(), 1);
    }

    #[test]
    fn a_first_condition_is_announced_and_a_removed_one_is_not() {
        let first = with(
            &[],
            "Ready",
            ConditionStatus::Unknown,
            SkillCardReason::Validating,
            "checking",
        );
        assert_eq!(
            condition_events(&[], &first, &["Ready"]),
            [StatusEvent {
                warning: true,
                reason: "Validating".into(),
                note: "checking".into()
            }]
        );
        let mut removed = first.clone();
        assert!(remove_condition(&mut removed, "Ready"));
        assert_eq!(condition_events(&first, &removed, &["Ready"]), []);
    }
}
