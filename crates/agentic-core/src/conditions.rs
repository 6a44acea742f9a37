//! Status conditions that change only when something changed.
//!
//! Controllers rebuild status on every pass; [`Conditions`], the one writer of conditions,
//! keeps a pass that observes nothing new byte-identical to the stored status, so an idle
//! cluster sees no writes.

use std::marker::PhantomData;

use agentic_api::{CONDITION_READY, ConditionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::reasons::Reason;

/// The API server's limit on `conditions[].message`, in bytes.
pub const MAX_CONDITION_MESSAGE_BYTES: usize = 32768;

/// The conditions of one object, written by one pass: every condition it sets carries the
/// pass's `observedGeneration` and, when its status changes, the pass's `now`, and a reason
/// of the object's kind (`R`).
///
/// `lastTransitionTime` becomes `now` only when the condition is new or its `status`
/// changes; a new reason, message or observed generation alone keeps the old time, so a pass
/// that observes nothing new leaves the list byte-identical. Messages longer than
/// [`MAX_CONDITION_MESSAGE_BYTES`] are cut at a character boundary so the API server accepts
/// them.
pub struct Conditions<'a, R> {
    conditions: &'a mut Vec<Condition>,
    observed_generation: Option<i64>,
    now: Time,
    kind: PhantomData<R>,
}

impl<'a, R: Reason> Conditions<'a, R> {
    /// The writer of `conditions` for a pass over generation `observed_generation` at `now`.
    pub fn new(
        conditions: &'a mut Vec<Condition>,
        observed_generation: Option<i64>,
        now: Time,
    ) -> Self {
        Self {
            conditions,
            observed_generation,
            now,
            kind: PhantomData,
        }
    }

    /// Sets the condition `type_`, adding it at the end when absent. Returns whether anything
    /// changed.
    pub fn set(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: impl Into<R>,
        message: &str,
    ) -> bool {
        write(
            self.conditions,
            type_,
            status,
            reason.into().as_str(),
            message,
            self.observed_generation,
            &self.now,
        )
    }

    /// Removes the condition `type_`. Returns whether it was present.
    pub fn remove(&mut self, type_: &str) -> bool {
        remove_condition(self.conditions, type_)
    }
}

/// The one rule of a condition's update; see [`Conditions`].
fn write(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let message = truncate(message, MAX_CONDITION_MESSAGE_BYTES);
    let status = status.as_str();
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) else {
        conditions.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation,
            last_transition_time: now.clone(),
        });
        return true;
    };
    let mut changed = false;
    if existing.status != status {
        existing.status = status.to_string();
        existing.last_transition_time = now.clone();
        changed = true;
    }
    changed |= replace(&mut existing.reason, reason);
    changed |= replace(&mut existing.message, message);
    if existing.observed_generation != observed_generation {
        existing.observed_generation = observed_generation;
        changed = true;
    }
    changed
}

/// Removes the condition `type_`. Returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the `Ready` condition is present with status `True`.
pub fn is_ready(conditions: &[Condition]) -> bool {
    find_condition(conditions, CONDITION_READY).is_some_and(|c| c.status == "True")
}

fn replace(field: &mut String, value: &str) -> bool {
    if field == value {
        return false;
    }
    value.clone_into(field);
    true
}

/// `text` cut to at most `max_bytes`, at a character boundary: the API server caps condition
/// and event messages in bytes.
pub fn truncate(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reasons::AgentWorkflowRunReason as R;
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("valid timestamp"))
    }

    /// One pass at `now` over generation 1 that sets `Ready`.
    fn ready(
        conditions: &mut Vec<Condition>,
        status: ConditionStatus,
        reason: R,
        now: i64,
    ) -> bool {
        Conditions::<R>::new(conditions, Some(1), at(now)).set("Ready", status, reason, "msg")
    }

    #[test]
    fn new_condition_is_added_with_now() {
        let mut conditions = Vec::new();
        assert!(ready(
            &mut conditions,
            ConditionStatus::True,
            R::Succeeded,
            10
        ));
        assert_eq!(
            conditions,
            vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Succeeded".into(),
                message: "msg".into(),
                observed_generation: Some(1),
                last_transition_time: at(10),
            }]
        );
    }

    #[test]
    fn identical_pass_changes_nothing_at_all() {
        let mut conditions = Vec::new();
        ready(&mut conditions, ConditionStatus::True, R::Succeeded, 10);
        let before = serde_json::to_string(&conditions).expect("serializes");
        assert!(!ready(
            &mut conditions,
            ConditionStatus::True,
            R::Succeeded,
            99
        ));
        assert_eq!(
            serde_json::to_string(&conditions).expect("serializes"),
            before
        );
    }

    #[test]
    fn reason_change_keeps_transition_time() {
        let mut conditions = Vec::new();
        ready(&mut conditions, ConditionStatus::False, R::StageRunning, 10);
        assert!(ready(
            &mut conditions,
            ConditionStatus::False,
            R::StageSucceeded,
            20
        ));
        assert_eq!(conditions[0].reason, "StageSucceeded");
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn generation_change_is_a_change_but_not_a_transition() {
        let mut conditions = Vec::new();
        ready(&mut conditions, ConditionStatus::True, R::Succeeded, 10);
        let mut next = Conditions::<R>::new(&mut conditions, Some(2), at(20));
        assert!(next.set("Ready", ConditionStatus::True, R::Succeeded, "msg"));
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn status_change_moves_transition_time() {
        let mut conditions = Vec::new();
        ready(&mut conditions, ConditionStatus::False, R::StageRunning, 10);
        assert!(ready(
            &mut conditions,
            ConditionStatus::True,
            R::Succeeded,
            20
        ));
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(20));
    }

    #[test]
    fn other_types_are_left_alone_and_order_is_kept() {
        let mut conditions = Vec::new();
        ready(&mut conditions, ConditionStatus::True, R::Succeeded, 10);
        Conditions::<R>::new(&mut conditions, None, at(10)).set(
            "Completed",
            ConditionStatus::False,
            R::StageRunning,
            "",
        );
        ready(&mut conditions, ConditionStatus::False, R::StageFailed, 20);
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "Completed"]);
        assert_eq!(conditions[1].last_transition_time, at(10));
    }

    #[test]
    fn a_reason_of_the_pure_middle_is_written_as_its_word() {
        let mut conditions = Vec::new();
        let error = crate::Error::AgentNotFound { name: "a".into() };
        Conditions::<R>::new(&mut conditions, Some(1), at(1)).set(
            "Ready",
            ConditionStatus::False,
            error.reason(),
            &error.to_string(),
        );
        assert_eq!(conditions[0].reason, "AgentNotFound");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let mut conditions = Vec::new();
        let message = "é".repeat(MAX_CONDITION_MESSAGE_BYTES); // 2 bytes each
        let mut pass = Conditions::<R>::new(&mut conditions, None, at(1));
        pass.set("Ready", ConditionStatus::False, R::StageFailed, &message);
        // Setting the same long message again is not a change.
        let mut again = Conditions::<R>::new(&mut conditions, None, at(2));
        assert!(!again.set("Ready", ConditionStatus::False, R::StageFailed, &message));
        assert_eq!(conditions[0].message.len(), MAX_CONDITION_MESSAGE_BYTES);
    }

    #[test]
    fn find_remove_and_is_ready() {
        let mut conditions = Vec::new();
        assert!(!is_ready(&conditions));
        ready(&mut conditions, ConditionStatus::False, R::StageRunning, 1);
        assert!(!is_ready(&conditions));
        ready(&mut conditions, ConditionStatus::True, R::Succeeded, 2);
        assert!(is_ready(&conditions));
        assert_eq!(
            find_condition(&conditions, "Ready").map(|c| c.reason.as_str()),
            Some("Succeeded")
        );
        assert!(find_condition(&conditions, "Other").is_none());
        let mut pass = Conditions::<R>::new(&mut conditions, Some(1), at(3));
        assert!(pass.remove("Ready"));
        assert!(!pass.remove("Ready"));
        assert!(conditions.is_empty());
    }
}
