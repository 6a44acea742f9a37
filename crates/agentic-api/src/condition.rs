//! Condition vocabulary shared by every kind.

/// The condition every kind reports: True when the object is usable.
pub const CONDITION_READY: &str = "Ready";

/// The AgentRun condition that is True once the run has finished, with the outcome as its
/// reason.
pub const CONDITION_COMPLETED: &str = "Completed";

/// The `status` of a `metav1.Condition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}
