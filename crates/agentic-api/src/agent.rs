use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ExecutionLimits, GitConfig, SkillType};

/// The desired state of the Agent.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "Agent",
    doc = "An Agent is a template for runs: the harness image, its prompt, the LLM gateways it may use, the skills it gets, and the parameters a run may set. It is Ready when every referenced SkillCard, SkillCollection and Gateway is Ready and no two skills share a frontmatter name.",
    namespaced,
    status = "AgentStatus",
    shortname = "ag",
    category = "konveyor",
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.image",
        priority = "1"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Gateway",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"GatewayConfigured\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// Container image of the agent harness, for example one wrapping goose.
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,

    /// System prompt given to the agent, as `KONVEYOR_PROMPT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,

    /// Gateways (LLM endpoints) runs of this agent may use. A run with no `gateway` uses the
    /// only one listed here. May be empty: then every run must name a Gateway of its
    /// namespace in its `spec.gateway` (which must exist and be Ready), and the Agent's
    /// `GatewayConfigured` condition is False.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["ref".into()]))]
    pub gateways: Vec<ObjectRef>,

    /// SkillCards mounted into every run's sandbox at `/opt/skills/<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["ref".into()]))]
    pub skill_cards: Vec<ObjectRef>,

    /// SkillCollections whose SkillCards every run also gets, as if listed in `skillCards`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["ref".into()]))]
    pub skill_collections: Vec<ObjectRef>,

    /// Whether the default skills apply to this Agent: the SkillCollections labelled
    /// `konveyor.io/default-skills: "true"` in its namespace, and in the operator's
    /// `--default-skills-namespace` for the whole cluster. Default true; `false` opts out.
    /// Defaults are best effort (one that is not Ready is left out, and the `DefaultSkills`
    /// condition says so) and an Agent's own skill of the same name wins. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_skills: Option<bool>,

    /// Parameters a run may set; the sandbox reads them, typed and with defaults applied,
    /// from `/run/konveyor/params.json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub params: Vec<AgentParam>,

    /// How the harness delivers skills: `native` (the agent runtime discovers them under
    /// /opt/skills) or `inject` (the harness puts every skill into the prompt). An unknown
    /// value falls back to `inject` and is reported in the `SkillDeliveryResolved` condition.
    #[serde(default = "default_skill_delivery")]
    #[schemars(length(min = 1, max = 63))]
    pub skill_delivery: String,

    /// How many runs of this Agent may be active (have a sandbox and not have finished) at
    /// once. Runs over the cap wait `Pending` with reason `Queued`, their place in the queue in
    /// the message, and start in creation order as runs finish. Unset: no cap. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent_runs: Option<i32>,

    /// Whether the agent's runtime may export message content (prompts, replies, tool
    /// arguments and results) to the operator's trace receiver: it sets
    /// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true in the agent container. The
    /// receiver reads a loaded skill's name out of the tool arguments and drops all content
    /// before anything else sees a span; nothing of it is stored or logged. Default true
    /// (unless the operator's --otlp-capture-content=false); `false` turns it off, and then
    /// `status.skills[].loads` stays empty for runtimes that name the skill only in the
    /// arguments (goose). (An agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_message_content: Option<bool>,

    /// Default budget limits (`maxTurns`, `maxCost`) of this Agent's runs; a run's
    /// `spec.execution` overrides each field it sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionLimits>,

    /// The author of the agent's commits in every run, unless the run sets its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_config: Option<GitConfig>,

    /// Runs the agent runtime (goose) in a container of its own beside the harness, under
    /// another user id, as Konveyor's ADR 0017 proposes: the runtime cannot read the harness's
    /// files, environment or credentials (the ACP key, the run's `env`, `envFrom` and
    /// `fileMounts`); the two share `/workspace` and talk ACP on loopback. Unset: one
    /// container, as in Konveyor. (An agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<AgentRuntime>,

    /// Whether this Agent's runs keep the Gateway's model key out of the agent container,
    /// behind the credential-proxy sidecar that adds it to the agent's requests: `required`
    /// (a run whose Gateway the proxy cannot serve, such as a cloud-signed provider, does not
    /// start), `preferred` (such a run gets the key as in Konveyor) or `off` (every run gets
    /// the key). The `CredentialIsolation` condition says which Gateways the proxy serves.
    /// Unset: the operator's --credential-proxy (default `preferred`). An operator running
    /// with --credential-proxy=required ignores this field: no Agent lowers it. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_proxy: Option<CredentialProxyMode>,
}

/// The agent runtime's own container (ADR 0017's two-container shape).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("self.harnessUser != self.runtimeUser").message("harnessUser and runtimeUser must differ: the runtime must not be able to read the harness's files")
)]
#[serde(rename_all = "camelCase")]
pub struct AgentRuntime {
    /// Image of the runtime container; unset: the Agent's `spec.image` (an image that holds
    /// both the harness and the runtime, as Konveyor's agent-base does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,

    /// The runtime's command: it must serve ACP on `127.0.0.1:$(KONVEYOR_RUNTIME_ACP_PORT)`
    /// (Kubernetes expands the reference), for example
    /// `[goose, serve, --host, 127.0.0.1, --port, $(KONVEYOR_RUNTIME_ACP_PORT)]`.
    #[schemars(length(min = 1))]
    pub command: Vec<String>,

    /// The user id the harness (the `agent` container) runs as.
    #[serde(default = "default_harness_user")]
    #[schemars(range(min = 1))]
    pub harness_user: i64,

    /// The user id the runtime runs as; it must differ from `harnessUser`.
    #[serde(default = "default_runtime_user")]
    #[schemars(range(min = 1))]
    pub runtime_user: i64,

    /// The group both run as and that owns the pod's volumes (`fsGroup`): what one writes
    /// group-writable (`chmod g=u`, umask 002) in `/workspace` the other may change. Default
    /// 0, the convention of Konveyor's images (and OpenShift's).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub group: i64,
}

/// ADR 0017's harness user.
fn default_harness_user() -> i64 {
    1001
}

/// ADR 0017's goose user.
fn default_runtime_user() -> i64 {
    1002
}

// Whether runs keep the Gateway's key behind the credential proxy (`--credential-proxy`,
// an Agent's `spec.credentialProxy`). No doc comment: the field's is the schema's description.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CredentialProxyMode {
    /// Runs whose key the proxy cannot serve do not start (`CredentialIsolationRequired`).
    Required,
    /// The proxy where it can serve; elsewhere the key goes to the agent, and the run says so.
    #[default]
    Preferred,
    /// No proxy: the key goes to the agent as in Konveyor.
    Off,
}

fn default_skill_delivery() -> String {
    "native".to_string()
}

/// A reference to another object of this API in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ObjectRef {
    /// Name of the referenced object.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// A parameter an AgentRun may set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("!(has(self.required) && self.required && has(self.default) && size(self.default) > 0)").message("a param with a non-empty default cannot be required")
)]
#[serde(rename_all = "camelCase")]
pub struct AgentParam {
    /// Name of the parameter, an identifier: letters, digits and `_`, not starting with a digit.
    #[schemars(length(min = 1), regex(pattern = r"^[a-zA-Z_][a-zA-Z0-9_]*$"))]
    pub name: String,

    /// Type of the value: `string` (default), `number` or `boolean`. Runs give values as
    /// strings; the operator parses them into this type.
    #[serde(default, rename = "type")]
    pub param_type: ParamType,

    /// What the parameter means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Value used when a run does not set the parameter, written as a string; empty means
    /// no default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,

    /// A run must set this parameter; only a param without a default (or with an empty one)
    /// may be required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// The type of a parameter's value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    #[default]
    String,
    Number,
    Boolean,
}

impl ParamType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }
}

/// The observed state of an Agent.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The skills runs get, sorted by name, each pinned to its validated image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<AgentSkill>,

    /// Names of the `type: rule` skills, sorted: always in the prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,

    /// The delivery mode runs use: `native` or `inject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_mode: Option<String>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The agentic-operator extension fields the spec set when the operator last read it
    /// (field path to its value as JSON): how it notices an update that removed them, as
    /// Konveyor's Hub and console do. (An agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extension_fields: BTreeMap<String, String>,

    /// `Ready`, `SkillDeliveryResolved` (False when `spec.skillDelivery` is not a known value),
    /// `GatewayConfigured` (False when `spec.gateways` is empty), `CredentialIsolation` (False
    /// when a listed Gateway's key would reach the agent container, with the reason; absent
    /// when no listed Gateway was read), and `ExtensionsKept` (only when an update removed
    /// extension fields: False, naming them, until the spec changes again).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// A skill as an Agent resolved it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Frontmatter name of the skill.
    pub name: String,
    /// The SkillCard it comes from.
    pub skill_card: String,
    /// The SkillCollection that brought the SkillCard; absent for `spec.skillCards`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
    /// The namespace of the SkillCard and its collection, when it is not the Agent's: a
    /// cluster-wide default skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Where the skill came from: `Agent` (`spec.skillCards`), `Collection`
    /// (`spec.skillCollections`), `NamespaceDefault` or `ClusterDefault` (a default-skills
    /// collection of the Agent's namespace, or of the operator's default-skills namespace).
    #[serde(default)]
    pub origin: SkillOrigin,
    /// The validated image pinned by digest, or for a git skill `<url>@<commit>`; absent for
    /// inline skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `skill` or `rule`.
    #[serde(rename = "type")]
    pub skill_type: SkillType,
}

/// Where a skill of an Agent came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SkillOrigin {
    /// The Agent's `spec.skillCards`.
    #[default]
    Agent,
    /// One of the Agent's `spec.skillCollections`.
    Collection,
    /// A default-skills SkillCollection of the Agent's namespace.
    NamespaceDefault,
    /// A default-skills SkillCollection of the operator's `--default-skills-namespace`.
    ClusterDefault,
}
