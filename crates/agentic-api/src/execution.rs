//! How a run executes: Konveyor's supervision mode and budget limits.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pattern of `maxCost`: a decimal number of US dollars with at most two decimals.
pub const MAX_COST_PATTERN: &str = r"^[0-9]+(\.[0-9]{1,2})?$";

/// Budget ceilings of a run: the agent winds down at the first it reaches and exits 2, which
/// ends the run `Failed` with reason `LimitReached`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionLimits {
    /// The most turns the agent may take, at least 1; the agent runtime defines what a turn is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<i64>,

    /// The most the run may cost, in US dollars, as a decimal string with at most two
    /// decimals, for example "10.00".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MAX_COST_PATTERN))]
    pub max_cost: Option<String>,
}

/// How one run executes: the supervision mode and the budget limits. Each field left unset
/// takes the Agent's `spec.execution` value; the sandbox reads the result from the
/// `execution` section of `/run/konveyor/params.json`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunExecution {
    /// How tool calls are supervised: `auto` (default) runs them, `approve` asks an attached
    /// viewer to approve each one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ExecutionMode>,

    /// Whether the agent may ask the user questions while it runs; passed to the harness as
    /// `execution.askUser` in params.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_user: Option<bool>,

    /// The most turns the agent may take, at least 1; overrides the Agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<i64>,

    /// The most the run may cost, in US dollars ("10.00"); overrides the Agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MAX_COST_PATTERN))]
    pub max_cost: Option<String>,
}

/// How a run's tool calls are supervised.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// Tool calls run without asking.
    #[default]
    Auto,
    /// Every tool call waits for a viewer's approval; with no viewer attached it is denied.
    Approve,
}

impl ExecutionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Approve => "approve",
        }
    }
}
