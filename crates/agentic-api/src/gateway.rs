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
    doc = "A Gateway is an LLM endpoint and the credentials to reach it. The operator checks the endpoint with the credential (GET <endpoint>/v1/models) at each generation and each change of the Secret; the Gateway is Ready once that check succeeds, or when the provider signs requests with cloud credentials the operator does not check.",
    namespaced,
    status = "GatewayStatus",
    shortname = "gw",
    category = "konveyor",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".spec.endpoint"),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.model.name"),
    printcolumn(
        name = "Verified",
        type_ = "boolean",
        json_path = ".status.connectionVerified"
    ),
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
    /// `KONVEYOR_LLM_PROVIDER`. It also decides how the endpoint is checked: `anthropic` with
    /// the `x-api-key` and `anthropic-version` headers, `gcp-vertex-ai` and `aws-bedrock`
    /// (also spelled with `_`) not at all, since they sign requests with cloud credentials,
    /// any other with `Authorization: Bearer <key>`.
    #[schemars(length(min = 1))]
    pub provider: String,

    /// URL of the endpoint (`http` or `https`, without query, fragment or user name), given to
    /// sandboxes as `KONVEYOR_LLM_ENDPOINT`. The operator checks it with `GET
    /// <endpoint>/v1/models` (a trailing `/v1` is not doubled). Without an endpoint nothing is
    /// checked.
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
    #[schemars(length(min = 1))]
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

    /// Whether the last check of the endpoint with the credential succeeded at this generation
    /// and this version of the Secret. A later outage leaves it true (see the
    /// `EndpointReachable` condition); a refused credential turns it false.
    #[serde(default)]
    pub connection_verified: bool,

    /// `Ready` tells whether runs may use the Gateway: the endpoint answered the check, or the
    /// check is skipped. `EndpointReachable` (our extension) is the result of the latest
    /// check, repeated every 10 minutes (every minute while it fails).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
