use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{AgentParam, RunExecution};

/// The pattern of a stage name: a label value (it becomes the `konveyor.io/stage` label of the
/// stage's AgentRun) of lowercase letters, digits, `-` and `.`.
pub const STAGE_NAME_PATTERN: &str = r"^[a-z0-9]([a-z0-9\-\.]*[a-z0-9])?$";

/// The desired state of the AgentWorkflow.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "AgentWorkflow",
    doc = "An AgentWorkflow is a reusable sequence of stages, each an Agent with instructions, and a guide giving every stage the bigger picture. It is a template: an AgentWorkflowRun executes it. It is Ready when every stage's Agent exists and is Ready.",
    namespaced,
    status = "AgentWorkflowStatus",
    shortname = "aw",
    category = "konveyor",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowSpec {
    /// Context for every stage: each stage's agent gets it, with `$(workflow.<name>)`
    /// substituted, as `KONVEYOR_WORKFLOW_GUIDE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guide: Option<String>,

    /// The stages, run one after the other in this order, each as one AgentRun.
    #[schemars(length(min = 1))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub stages: Vec<AgentWorkflowStage>,

    /// Workflow-level parameters an AgentWorkflowRun may set. Their typed values go into the
    /// `workflow` section of every stage's `/run/konveyor/params.json` and replace
    /// `$(workflow.<name>)` in the guide and the stages' instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub params: Vec<AgentParam>,
}

/// One stage of a workflow: an Agent and its task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowStage {
    /// Name of the stage, unique in the workflow; the `konveyor.io/stage` label of its
    /// AgentRun, so at most 63 lowercase letters, digits, `-` and `.`.
    #[schemars(length(min = 1, max = 63), regex(pattern = STAGE_NAME_PATTERN))]
    pub name: String,

    /// Name of the Agent that runs this stage, in the same namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub agent_ref: String,

    /// Task of this stage: the `spec.instructions` of its AgentRun, where `$(agent.<name>)`
    /// and `$(workflow.<name>)` are substituted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,

    /// Supervision mode and budget limits of this stage's run; each field left unset takes
    /// the stage Agent's `spec.execution` value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<RunExecution>,
}

/// The observed state of an AgentWorkflow.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready`: True with reason `AllAgentsReady` when every stage's Agent exists and is
    /// Ready, else False with `AgentsNotReady` (or `InvalidParams` for bad `spec.params`).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
