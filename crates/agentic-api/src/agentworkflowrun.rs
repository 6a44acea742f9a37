use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{AgentParam, AgentRunPhase, FileMount, RunExecution, RunParam};

/// The spec never changes, but for one transition: `cancel` from unset or false to true, every
/// other field as it was (absent stays absent). Each field is listed; a unit test checks that
/// none is missing, so a new field is immutable too.
pub const WORKFLOW_RUN_SPEC_IMMUTABLE_RULE: &str = concat!(
    "self == oldSelf || (",
    "self.?cancel == optional.of(true) && !oldSelf.?cancel.orValue(false)",
    " && self.workflowRef == oldSelf.workflowRef",
    " && has(self.gateway) == has(oldSelf.gateway) && (!has(self.gateway) || self.gateway == oldSelf.gateway)",
    " && has(self.params) == has(oldSelf.params) && (!has(self.params) || self.params == oldSelf.params)",
    " && has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env)",
    " && has(self.envFrom) == has(oldSelf.envFrom) && (!has(self.envFrom) || self.envFrom == oldSelf.envFrom)",
    " && has(self.fileMounts) == has(oldSelf.fileMounts) && (!has(self.fileMounts) || self.fileMounts == oldSelf.fileMounts)",
    " && has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && (!has(self.ttlSecondsAfterFinished) || self.ttlSecondsAfterFinished == oldSelf.ttlSecondsAfterFinished)",
    ")"
);
/// The message of [`WORKFLOW_RUN_SPEC_IMMUTABLE_RULE`].
pub const WORKFLOW_RUN_SPEC_IMMUTABLE_MESSAGE: &str = "spec is immutable, except that spec.cancel may be set to true; create a new AgentWorkflowRun instead";

/// The desired state of the AgentWorkflowRun.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "AgentWorkflowRun",
    doc = "An AgentWorkflowRun is one execution of an AgentWorkflow. The operator snapshots the workflow when the run starts, then runs its stages in order, one AgentRun each, and follows them to Succeeded (every stage succeeded) or Failed (a stage failed or its run was deleted). The spec is immutable, except that `spec.cancel` may be set to true to stop the run.",
    namespaced,
    status = "AgentWorkflowRunStatus",
    shortname = "awr",
    category = "konveyor",
    printcolumn(name = "Workflow", type_ = "string", json_path = ".spec.workflowRef"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Current Stage",
        type_ = "string",
        json_path = ".status.currentStage"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new(WORKFLOW_RUN_SPEC_IMMUTABLE_RULE).message(WORKFLOW_RUN_SPEC_IMMUTABLE_MESSAGE)
)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowRunSpec {
    /// Name of the AgentWorkflow to run, in the same namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub workflow_ref: String,

    /// Gateway every stage's run uses (its `spec.gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub gateway: Option<String>,

    /// Values for the workflow's params and for the stage Agents' params, as strings. Each
    /// stage's run gets only the values its Agent declares; a Normal event `ParamsFiltered`
    /// on the stage's run lists the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub params: Vec<RunParam>,

    /// Extra environment variables for every stage's agent container. The operator's
    /// `KONVEYOR_WORKFLOW_GUIDE`, `KONVEYOR_WORKFLOW_STAGE` and `KONVEYOR_WORKFLOW_STAGE_COUNT`
    /// replace any copy given here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub env: Vec<EnvVar>,

    /// Extra environment sources for every stage's agent container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub env_from: Vec<EnvFromSource>,

    /// Secrets and ConfigMaps mounted read-only into every stage's agent container, one per
    /// `mountPath`. (An agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["mountPath".into()]))]
    pub file_mounts: Vec<FileMount>,

    /// Seconds to keep the workflow run once it has finished, counted from
    /// `status.completionTime`; then it is deleted, and with it its stages' runs. 0 deletes it
    /// as soon as it finishes. Unset uses the operator's `--ttl-after-succeeded` or
    /// `--ttl-after-failed`; with neither, it is kept until someone deletes it. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Set to true to stop the workflow: the current stage's run is cancelled (its
    /// `spec.cancel`), no further stage starts, and the workflow run ends `Failed` with reason
    /// `Cancelled`. The one change the spec allows, and only from unset or false to true. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<bool>,
}

/// The observed state of an AgentWorkflowRun.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowRunStatus {
    /// `Pending` (waiting for the workflow), `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Name of the stage running now; cleared once every stage has succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage: Option<String>,

    /// Every stage of the workflow, as snapshotted when the run started, with its progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub stages: Vec<AgentWorkflowRunStageStatus>,

    /// The workflow's `spec.guide` when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guide: Option<String>,

    /// The workflow's `spec.params` declarations when the run started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub params: Vec<AgentParam>,

    /// When the run started (took its snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// `Ready`: True with reason `Succeeded` once every stage has succeeded; otherwise False,
    /// with the reason saying where the run is (`WorkflowNotFound`, `WorkflowNotReady`,
    /// `StageRunning`, `StageSucceeded`) or why it failed (`StageFailed`, `AgentRunDeleted`,
    /// `Cancelled`, `InvalidParams`, `ObjectNameTaken`).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// One stage of a workflow run: the snapshot of its definition and its progress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentWorkflowRunStageStatus {
    /// Name of the stage in the workflow.
    pub name: String,

    /// The phase of the stage's AgentRun; `Pending` until it exists.
    pub phase: AgentRunPhase,

    /// Name of the AgentRun created for this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_run_name: Option<String>,

    /// The stage's `agentRef` when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_ref: Option<String>,

    /// The stage's `instructions` when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,

    /// The stage's `execution` when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<RunExecution>,
}
