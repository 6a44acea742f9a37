use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of the Gateway.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "Gateway",
    doc = "A Gateway is an LLM endpoint and the credentials to reach it. It is Ready when its credential Secret (and key, when given) exists.",
    namespaced,
    status = "GatewayStatus",
    shortname = "gw",
    category = "konveyor",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider"),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.model.name"),
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
pub struct GatewaySpec {
    /// LLM provider, for example `openai`, `anthropic` or `ollama`; given to sandboxes as
    /// `KONVEYOR_LLM_PROVIDER`.
    #[schemars(length(min = 1, max = 63))]
    pub provider: String,

    /// URL of the endpoint, given to sandboxes as `KONVEYOR_LLM_ENDPOINT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub endpoint: Option<String>,

    /// The Secret with the API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_ref: Option<CredentialRef>,

    /// The model to use.
    pub model: GatewayModel,
}

/// A Secret holding an API key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialRef {
    /// Name of the Secret in the Gateway's namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub secret_name: String,
    /// Key in the Secret holding the API key, given to sandboxes as `KONVEYOR_LLM_API_KEY`.
    /// Without a key, every key of the Secret becomes an environment variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// The model served by a Gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayModel {
    /// Model name, given to sandboxes as `KONVEYOR_LLM_MODEL`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Context window of the model in tokens.
    #[schemars(range(min = 1))]
    pub context_window: i64,
    /// Optional tier label, for example `fast` or `smart`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// The observed state of a Gateway.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` tells whether the credential Secret and key exist.
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
