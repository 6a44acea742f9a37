use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, LocalObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{FileMount, GitConfig, RunExecution, SkillType};

/// The spec never changes, but for one transition: `cancel` from unset or false to true, every
/// other field as it was (absent stays absent). Each field is listed; a unit test checks that
/// none is missing, so a new field is immutable too.
pub const SPEC_IMMUTABLE_RULE: &str = concat!(
    "self == oldSelf || (",
    "self.?cancel == optional.of(true) && !oldSelf.?cancel.orValue(false)",
    " && self.agentRef == oldSelf.agentRef",
    " && has(self.gateway) == has(oldSelf.gateway) && (!has(self.gateway) || self.gateway == oldSelf.gateway)",
    " && has(self.params) == has(oldSelf.params) && (!has(self.params) || self.params == oldSelf.params)",
    " && has(self.instructions) == has(oldSelf.instructions) && (!has(self.instructions) || self.instructions == oldSelf.instructions)",
    " && has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env)",
    " && has(self.envFrom) == has(oldSelf.envFrom) && (!has(self.envFrom) || self.envFrom == oldSelf.envFrom)",
    " && has(self.activeDeadlineSeconds) == has(oldSelf.activeDeadlineSeconds) && (!has(self.activeDeadlineSeconds) || self.activeDeadlineSeconds == oldSelf.activeDeadlineSeconds)",
    " && has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && (!has(self.ttlSecondsAfterFinished) || self.ttlSecondsAfterFinished == oldSelf.ttlSecondsAfterFinished)",
    " && has(self.startupDeadlineSeconds) == has(oldSelf.startupDeadlineSeconds) && (!has(self.startupDeadlineSeconds) || self.startupDeadlineSeconds == oldSelf.startupDeadlineSeconds)",
    " && has(self.execution) == has(oldSelf.execution) && (!has(self.execution) || self.execution == oldSelf.execution)",
    " && has(self.fileMounts) == has(oldSelf.fileMounts) && (!has(self.fileMounts) || self.fileMounts == oldSelf.fileMounts)",
    " && has(self.gitConfig) == has(oldSelf.gitConfig) && (!has(self.gitConfig) || self.gitConfig == oldSelf.gitConfig)",
    " && has(self.workflowParams) == has(oldSelf.workflowParams) && (!has(self.workflowParams) || self.workflowParams == oldSelf.workflowParams)",
    ")"
);
/// The message of [`SPEC_IMMUTABLE_RULE`].
pub const SPEC_IMMUTABLE_MESSAGE: &str =
    "spec is immutable, except that spec.cancel may be set to true; create a new AgentRun instead";

/// The desired state of the AgentRun.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "AgentRun",
    doc = "An AgentRun is one execution of an Agent. The operator checks it against the Agent, creates one sandbox (an agent-sandbox Sandbox, or a Pod) with every skill mounted read-only at `/opt/skills/<name>` pinned by digest, and follows it to Succeeded or Failed. The spec is immutable, except that `spec.cancel` may be set to true to stop the run: create a new run to change anything else.",
    namespaced,
    status = "AgentRunStatus",
    shortname = "ar",
    category = "konveyor",
    selectable = ".status.phase",
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agentRef"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Duration",
        type_ = "integer",
        json_path = ".status.duration",
        priority = "1"
    )
)]
#[x_kube(validation = Rule::new(SPEC_IMMUTABLE_RULE).message(SPEC_IMMUTABLE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct AgentRunSpec {
    /// Name of the Agent to run, in the same namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub agent_ref: String,

    /// Gateway to use; must be one of the Agent's. Defaults to the Agent's only gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub gateway: Option<String>,

    /// Values for the Agent's declared params, as strings; the operator parses them into the
    /// declared type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub params: Vec<RunParam>,

    /// Task for this run, given to the sandbox as `KONVEYOR_INSTRUCTIONS`. `$(agent.<name>)`
    /// and `$(workflow.<name>)` are replaced by the param's value, here and in the Agent's
    /// prompt; a reference to a param without a value fails the run with reason
    /// `InvalidParams`. Write `$$(` for a literal `$(`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,

    /// Supervision mode and budget limits of this run; each field left unset takes the
    /// Agent's `spec.execution` value, and `mode` defaults to `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<RunExecution>,

    /// Secrets and ConfigMaps mounted read-only into the agent container, one per
    /// `mountPath`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["mountPath".into()]))]
    pub file_mounts: Vec<FileMount>,

    /// The author of the agent's commits in this run; replaces the Agent's `gitConfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_config: Option<GitConfig>,

    /// Workflow-level params of a workflow stage's run, a JSON object of typed values
    /// stamped by the workflow controller: the `workflow` section of params.json and the
    /// values of `$(workflow.<name>)`. Standalone runs leave it unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::any_object_schema")]
    pub workflow_params: Option<serde_json::Map<String, serde_json::Value>>,

    /// Extra environment variables for the agent container, added after the operator's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub env: Vec<EnvVar>,

    /// Extra environment sources for the agent container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub env_from: Vec<EnvFromSource>,

    /// Seconds the agent container may take to start (scheduling, image pulls), counted from
    /// the creation of the run's sandbox. A run whose agent has not started by then fails
    /// with reason `StartupDeadlineExceeded`. 0 or unset uses the operator's
    /// `--startup-deadline-seconds` (default 600). A pod that cannot start at all
    /// (`ImagePullBackOff`, `InvalidImageName`, `CreateContainerConfigError`,
    /// `CreateContainerError`) fails the run at once with reason `StartupFailed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub startup_deadline_seconds: Option<i32>,

    /// Seconds the agent may run, counted from `status.startTime` (when its container
    /// started), like a Job's `activeDeadlineSeconds`. Past it the sandbox is deleted and the
    /// run fails with reason `DeadlineExceeded`. Unset: no limit. (An agentic-operator
    /// extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,

    /// Seconds to keep the run once it has finished (Succeeded or Failed), counted from
    /// `status.completionTime`, like a Job's `ttlSecondsAfterFinished`; then the run is
    /// deleted, and with it everything it owns. 0 deletes it as soon as it finishes. Unset
    /// uses the operator's `--ttl-after-succeeded` or `--ttl-after-failed`; with neither, the
    /// run is kept until someone deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Set to true to stop the run: its sandbox is deleted and the run ends `Failed` with
    /// reason `Cancelled`, keeping its status. The one change the spec allows, and only from
    /// unset or false to true. A run that has already finished is left as it is. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<bool>,
}

/// A value for one of the Agent's params.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RunParam {
    /// Name of a param the Agent declares.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The value, as a string.
    pub value: String,
}

/// Where a run is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AgentRunPhase {
    /// Waiting for the Agent, or for the sandbox pod to start.
    #[default]
    Pending,
    /// The agent container is running.
    Running,
    /// The agent container exited 0.
    Succeeded,
    /// The run was invalid, the agent exited non-zero, or its sandbox disappeared.
    Failed,
}

impl AgentRunPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }

    /// Succeeded and Failed are final.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// The observed state of an AgentRun.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunStatus {
    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,

    /// Name of the Sandbox (or Pod) created for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_name: Option<String>,

    /// When the agent container started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// Seconds from `startTime` to `completionTime`, once a run that started has finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<i64>,

    /// The Secret holding the key ACP clients must present to the agent (key `secret-key`);
    /// set once the run has a sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<LocalObjectReference>,

    /// The agent's termination message (`/dev/termination-log`) when it is a JSON object of
    /// at most 4096 bytes, typically a usage or cost report; copied as written, never
    /// interpreted. Any other termination message goes into the conditions' message instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::any_object_schema")]
    pub termination_data: Option<serde_json::Map<String, serde_json::Value>>,

    /// The skills mounted into the sandbox, pinned when it was created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<PinnedSkill>,

    /// Skills the agent loaded that the run did not mount (one baked into the harness image,
    /// say), by the name it asked for, with how often: such a skill bypassed validation and
    /// trust. Read from the agent's own OpenTelemetry spans; at most 20 names. Absent when
    /// there were none or the harness reports nothing. (An agentic-operator extension of the
    /// Konveyor API.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub unmounted_skill_loads: Vec<UnmountedSkillLoad>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` (the sandbox exists and runs) and `Completed`, with reasons for every outcome;
    /// and Konveyor's `Succeeded` (Unknown until the run ends, then True or False with reason
    /// `Succeeded`, `Failed`, `LimitReached`, `Refused` or the operator's reason) and `ACPReady`
    /// (True with reason `Listening` while the agent accepts ACP connections, else False with
    /// `NotListening`, or `Finished` once the run has ended).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// A skill as mounted into a run's sandbox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinnedSkill {
    /// Frontmatter name of the skill; mounted at `/opt/skills/<name>`.
    pub name: String,
    /// The image pinned by digest, `configmap:<name>` for inline skills, or `<url>@<commit>`
    /// for git skills: exactly the commit the pod's init container fetched.
    pub image: String,
    /// `skill` or `rule`.
    #[serde(default, rename = "type")]
    pub skill_type: SkillType,
    /// How the skill stood against the trust policies that selected it when it was mounted
    /// (its SkillCard's `status.verification` then); absent when none did. A policy's
    /// `status.blastRadius` is read from it. (An agentic-operator extension of the Konveyor
    /// API.)
    // Boxed: most runs mount skills no policy selects, and a run's status is cached for as
    // long as it runs; inline, the absent record would cost each pinned skill 128 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Box<crate::SkillVerification>>,
    /// How many times the agent loaded this skill (its SKILL.md or one of its files), read
    /// from the agent's own OpenTelemetry spans (`execute_tool` spans of `load_skill`, or
    /// with `gen_ai.skill.name`). Absent while the harness reported no load. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads: Option<i64>,
    /// When the agent first loaded this skill, as its span says. (An agentic-operator
    /// extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_loaded_at: Option<Time>,
}

/// A skill the agent loaded that its run did not mount.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UnmountedSkillLoad {
    /// The name the agent asked for.
    pub name: String,
    /// How many times it asked.
    pub count: i64,
}
