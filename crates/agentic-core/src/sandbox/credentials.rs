//! Whether a run's agent may be kept from the Gateway's key: the per-sandbox credential proxy
//! (ADR 0010). When the Gateway's provider takes its key in a header the proxy can add, the
//! sandbox gets a native sidecar from the operator's image that alone mounts the key and
//! forwards to the Gateway's endpoint; the agent gets the proxy's loopback address and a
//! placeholder. Otherwise the key goes to the agent as before, and the run says why.

use agentic_api::{ConditionStatus, CredentialRef, GatewaySpec};

use crate::gateway::{AuthStyle, auth_style, models_url};
use crate::reasons::{AgentRunReason, ErrorReason};

/// The run's condition that says whether its agent container can read the model key.
pub const CONDITION_CREDENTIAL_ISOLATION: &str = "CredentialIsolation";
/// The native sidecar that adds the key.
pub const CREDENTIAL_PROXY_CONTAINER: &str = "credential-proxy";
/// The loopback port the proxy listens on (beside the agent's ACP port 4000).
pub const CREDENTIAL_PROXY_PORT: u16 = 4001;
/// What the agent container gets as `KONVEYOR_LLM_API_KEY` when the proxy adds the key:
/// clients that refuse to start without a key start, and the value is worth nothing.
pub const PLACEHOLDER_KEY: &str = "konveyor-credential-proxy-placeholder";
/// Where the proxy container mounts the Gateway's Secret.
pub const CREDENTIAL_DIR: &str = "/run/konveyor/gateway-credential";
/// The file of the key in [`CREDENTIAL_DIR`].
pub const CREDENTIAL_FILE: &str = "api-key";

/// `--credential-proxy`: whether runs get the credential proxy, and whether a run whose key
/// cannot be kept from its agent may start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CredentialProxyMode {
    /// Runs whose key the proxy cannot serve do not start (`CredentialIsolationRequired`).
    Required,
    /// The proxy where it can serve; elsewhere the key goes to the agent, and the run says so.
    #[default]
    Preferred,
    /// No proxy: the key goes to the agent as in Konveyor.
    Off,
}

/// The operator's side of the proxy: the mode and the image it runs from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialProxy {
    /// `--credential-proxy`.
    pub mode: CredentialProxyMode,
    /// The operator's image (`--operator-image`), whose binary is the proxy.
    pub image: Option<String>,
}

/// The sidecar of a run whose key the proxy adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyPlan {
    /// The operator's image.
    pub image: String,
    /// The Gateway's `spec.endpoint`, where the proxy forwards.
    pub upstream: String,
    /// How the key goes into the request.
    pub auth: AuthStyle,
    /// The Gateway's Secret and its key, mounted into the sidecar only.
    pub secret_name: String,
    pub secret_key: String,
    /// The endpoint's path (`/v1`, or empty), kept in the address the agent gets so that the
    /// agent builds the same request paths it would against the endpoint.
    pub base_path: String,
}

impl ProxyPlan {
    /// `KONVEYOR_LLM_ENDPOINT` of the agent: the proxy, with the endpoint's path.
    pub fn agent_endpoint(&self) -> String {
        format!("http://127.0.0.1:{CREDENTIAL_PROXY_PORT}{}", self.base_path)
    }
}

/// What a run's sandbox does with the Gateway's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialIsolation {
    /// The proxy adds it; the agent holds a placeholder.
    Proxied(ProxyPlan),
    /// The Gateway names no Secret: there is no key to hold.
    NoCredential,
    /// The key goes to the agent container, for this reason.
    Exposed(AgentRunReason),
}

impl CredentialIsolation {
    /// The proxy's plan, when there is one.
    pub fn proxy(&self) -> Option<&ProxyPlan> {
        match self {
            Self::Proxied(plan) => Some(plan),
            Self::NoCredential | Self::Exposed(_) => None,
        }
    }

    /// The run's [`CONDITION_CREDENTIAL_ISOLATION`]: status, reason and message.
    pub fn condition(&self) -> (ConditionStatus, AgentRunReason, String) {
        match self {
            Self::Proxied(plan) => (
                ConditionStatus::True,
                AgentRunReason::KeyProxied,
                format!(
                    "the {CREDENTIAL_PROXY_CONTAINER} sidecar adds the key to requests to {}; the agent container holds a placeholder",
                    plan.upstream
                ),
            ),
            Self::NoCredential => (
                ConditionStatus::True,
                AgentRunReason::NoCredential,
                "the Gateway has no spec.credentialRef: the sandbox holds no model key".to_string(),
            ),
            Self::Exposed(reason) => (
                ConditionStatus::False,
                *reason,
                format!(
                    "the agent container can read the Gateway's key: {}",
                    exposed_because(*reason)
                ),
            ),
        }
    }
}

/// Why the key goes to the agent, for the condition's message.
fn exposed_because(reason: AgentRunReason) -> &'static str {
    match reason {
        AgentRunReason::CloudSignedProvider => {
            "the provider signs requests with cloud credentials, which the proxy does not add"
        }
        AgentRunReason::NoEndpoint => {
            "the Gateway has no spec.endpoint, so the harness picks its provider's default and the proxy has nowhere to forward"
        }
        AgentRunReason::WholeSecretImported => {
            "spec.credentialRef names no key, so the whole Secret goes to the agent as environment variables"
        }
        AgentRunReason::UnsupportedEndpoint => {
            "spec.endpoint is not an http:// or https:// URL the proxy can forward to"
        }
        AgentRunReason::CredentialProxyOff => "the operator runs with --credential-proxy=off",
        AgentRunReason::Error(ErrorReason::OperatorImageNotSet) => {
            "the operator has no --operator-image to run the proxy from"
        }
        _ => "the proxy cannot serve this Gateway",
    }
}

/// What a run's sandbox does with the key of a Gateway of `spec`, under `proxy`.
pub fn credential_isolation(spec: &GatewaySpec, proxy: &CredentialProxy) -> CredentialIsolation {
    use AgentRunReason as R;
    let Some(CredentialRef { secret_name, key }) = &spec.credential_ref else {
        return CredentialIsolation::NoCredential;
    };
    if proxy.mode == CredentialProxyMode::Off {
        return CredentialIsolation::Exposed(R::CredentialProxyOff);
    }
    let Some(auth) = auth_style(&spec.provider) else {
        return CredentialIsolation::Exposed(R::CloudSignedProvider);
    };
    let Some(endpoint) = spec.endpoint.as_deref() else {
        return CredentialIsolation::Exposed(R::NoEndpoint);
    };
    let Some(key) = key else {
        return CredentialIsolation::Exposed(R::WholeSecretImported);
    };
    let Some(base_path) = base_path(endpoint) else {
        return CredentialIsolation::Exposed(R::UnsupportedEndpoint);
    };
    let Some(image) = &proxy.image else {
        return CredentialIsolation::Exposed(R::Error(ErrorReason::OperatorImageNotSet));
    };
    CredentialIsolation::Proxied(ProxyPlan {
        image: image.clone(),
        upstream: endpoint.to_string(),
        auth,
        secret_name: secret_name.clone(),
        secret_key: key.clone(),
        base_path,
    })
}

/// The path of an endpoint the Gateway check accepts (`https://host/v1/` gives `/v1`), without
/// a trailing `/`; `None` for one it refuses.
fn base_path(endpoint: &str) -> Option<String> {
    models_url(endpoint).ok()?;
    let (_, rest) = endpoint.split_once("://")?;
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    Some(path.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use agentic_api::GatewayModel;

    use super::*;

    fn spec(provider: &str, endpoint: Option<&str>, key: Option<&str>) -> GatewaySpec {
        GatewaySpec {
            provider: provider.into(),
            endpoint: endpoint.map(Into::into),
            credential_ref: Some(CredentialRef {
                secret_name: "llm-key".into(),
                key: key.map(Into::into),
            }),
            model: GatewayModel {
                name: "m".into(),
                context_window: 1,
                tier: None,
            },
        }
    }

    fn preferred() -> CredentialProxy {
        CredentialProxy {
            mode: CredentialProxyMode::Preferred,
            image: Some("registry/operator@sha256:1".into()),
        }
    }

    #[test]
    fn bearer_and_anthropic_providers_are_proxied_with_the_endpoint_path_kept() {
        let openai = credential_isolation(
            &spec("openai", Some("https://llm.example.com/v1/"), Some("key")),
            &preferred(),
        );
        let plan = openai.proxy().expect("proxied");
        assert_eq!(plan.auth, AuthStyle::Bearer);
        assert_eq!(plan.upstream, "https://llm.example.com/v1/");
        assert_eq!(plan.agent_endpoint(), "http://127.0.0.1:4001/v1");
        assert_eq!(
            (plan.secret_name.as_str(), plan.secret_key.as_str()),
            ("llm-key", "key")
        );
        let anthropic = credential_isolation(
            &spec("anthropic", Some("http://10.0.0.5:8080"), Some("key")),
            &preferred(),
        );
        let plan = anthropic.proxy().expect("proxied");
        assert_eq!(plan.auth, AuthStyle::Anthropic);
        assert_eq!(plan.agent_endpoint(), "http://127.0.0.1:4001");
        let (status, reason, _) = anthropic.condition();
        assert_eq!(
            (status, reason),
            (ConditionStatus::True, AgentRunReason::KeyProxied)
        );
    }

    #[test]
    fn each_gateway_the_proxy_cannot_serve_says_why() {
        use AgentRunReason as R;
        let cases = [
            (
                spec("aws_bedrock", Some("https://b.example.com"), Some("k")),
                R::CloudSignedProvider,
            ),
            (
                spec("gcp-vertex-ai", Some("https://v.example.com"), Some("k")),
                R::CloudSignedProvider,
            ),
            (spec("openai", None, Some("k")), R::NoEndpoint),
            (
                spec("openai", Some("https://o.example.com"), None),
                R::WholeSecretImported,
            ),
            (
                spec("openai", Some("ftp://o.example.com"), Some("k")),
                R::UnsupportedEndpoint,
            ),
            (
                spec("openai", Some("https://u:p@o.example.com"), Some("k")),
                R::UnsupportedEndpoint,
            ),
        ];
        for (spec, reason) in cases {
            let isolation = credential_isolation(&spec, &preferred());
            assert_eq!(isolation, CredentialIsolation::Exposed(reason), "{spec:?}");
            let (status, written, message) = isolation.condition();
            assert_eq!((status, written), (ConditionStatus::False, reason));
            assert!(
                !message.contains("proxy cannot serve this Gateway"),
                "{message}"
            );
        }
        let no_image = CredentialProxy {
            image: None,
            ..preferred()
        };
        assert_eq!(
            credential_isolation(
                &spec("openai", Some("https://o.example.com"), Some("k")),
                &no_image
            ),
            CredentialIsolation::Exposed(R::Error(ErrorReason::OperatorImageNotSet))
        );
        let off = CredentialProxy {
            mode: CredentialProxyMode::Off,
            ..preferred()
        };
        assert_eq!(
            credential_isolation(
                &spec("openai", Some("https://o.example.com"), Some("k")),
                &off
            ),
            CredentialIsolation::Exposed(R::CredentialProxyOff)
        );
    }

    #[test]
    fn a_gateway_without_a_secret_has_no_key_to_hide_whatever_the_mode() {
        let mut spec = spec("aws-bedrock", None, None);
        spec.credential_ref = None;
        for mode in [
            CredentialProxyMode::Required,
            CredentialProxyMode::Preferred,
            CredentialProxyMode::Off,
        ] {
            let proxy = CredentialProxy { mode, image: None };
            assert_eq!(
                credential_isolation(&spec, &proxy),
                CredentialIsolation::NoCredential
            );
        }
    }
}
