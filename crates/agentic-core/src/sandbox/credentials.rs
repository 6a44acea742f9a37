//! Whether a run's agent may be kept from the Gateway's key: the per-sandbox credential proxy
//! (ADR 0010). When the Gateway's provider takes its key in a header the proxy can add, the
//! sandbox gets a native sidecar from the operator's image that alone mounts the key and
//! forwards to the Gateway's endpoint; the agent gets the proxy's loopback address and a
//! placeholder. Otherwise the key goes to the agent as before, and the run says why.

use agentic_api::{AgentSpec, ConditionStatus, CredentialRef, GatewaySpec};

use crate::gateway::{AuthStyle, auth_style, models_url};
use crate::reasons::{AgentReason, AgentRunReason, ErrorReason};

/// The run's condition that says whether its agent container can read the model key.
pub const CONDITION_CREDENTIAL_ISOLATION: &str = "CredentialIsolation";
/// The native sidecar that adds the key.
pub const CREDENTIAL_PROXY_CONTAINER: &str = "credential-proxy";
/// The loopback port the proxy listens on: clear of the harness's ACP port 4000 and of
/// 4001, where Konveyor's harness runs goose (its ADR 0008) and the runtime container serves.
pub const CREDENTIAL_PROXY_PORT: u16 = 4100;
/// What the agent container gets as `KONVEYOR_LLM_API_KEY` when the proxy adds the key:
/// clients that refuse to start without a key start, and the value is worth nothing.
pub const PLACEHOLDER_KEY: &str = "konveyor-credential-proxy-placeholder";
/// Where the proxy container mounts the Gateway's Secret.
pub const CREDENTIAL_DIR: &str = "/run/konveyor/gateway-credential";
/// The file of the key in [`CREDENTIAL_DIR`].
pub const CREDENTIAL_FILE: &str = "api-key";

/// `--credential-proxy`, or an Agent's `spec.credentialProxy`: whether runs get the
/// credential proxy, and whether a run whose key cannot be kept from its agent may start.
pub use agentic_api::CredentialProxyMode;

/// The operator's side of the proxy: the mode and the image it runs from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialProxy {
    /// `--credential-proxy`.
    pub mode: CredentialProxyMode,
    /// The operator's image (`--operator-image`), whose binary is the proxy.
    pub image: Option<String>,
}

impl CredentialProxy {
    /// The proxy for runs of an Agent of `spec`: its `spec.credentialProxy`, when set,
    /// replaces the operator's `preferred` or `off`. The operator's `required` is the
    /// cluster's floor: an Agent's author (a tenant) cannot give its runs a key the platform
    /// team keeps from every agent.
    #[must_use]
    pub fn for_agent(&self, spec: &AgentSpec) -> Self {
        let mode = match (self.mode, spec.credential_proxy) {
            (CredentialProxyMode::Required, _) | (_, None) => self.mode,
            (_, Some(agent)) => agent,
        };
        Self {
            mode,
            image: self.image.clone(),
        }
    }
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
    Exposed(Exposure),
}

/// Why a Gateway's key goes to the agent container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// The provider signs requests with cloud credentials.
    CloudSignedProvider,
    /// The Gateway has no `spec.endpoint`.
    NoEndpoint,
    /// `spec.credentialRef` names no key.
    WholeSecretImported,
    /// `spec.endpoint` is not a URL the proxy forwards to.
    UnsupportedEndpoint,
    /// The mode is `off`.
    CredentialProxyOff,
    /// The operator has no image to run the proxy from.
    OperatorImageNotSet,
}

impl Exposure {
    /// Why, for a condition's message.
    fn because(self) -> &'static str {
        match self {
            Self::CloudSignedProvider => {
                "the provider signs requests with cloud credentials, which the proxy does not add"
            }
            Self::NoEndpoint => {
                "the Gateway has no spec.endpoint, so the harness picks its provider's default and the proxy has nowhere to forward"
            }
            Self::WholeSecretImported => {
                "spec.credentialRef names no key, so the whole Secret goes to the agent as environment variables"
            }
            Self::UnsupportedEndpoint => {
                "spec.endpoint is not an http:// or https:// URL the proxy can forward to"
            }
            Self::CredentialProxyOff => {
                "the credential proxy is off (the Agent's spec.credentialProxy, or else the operator's --credential-proxy)"
            }
            Self::OperatorImageNotSet => {
                "the operator has no --operator-image to run the proxy from"
            }
        }
    }
}

/// The reasons of a kind's [`CONDITION_CREDENTIAL_ISOLATION`]: a run's and an Agent's spell
/// them alike.
pub trait IsolationReason: From<Exposure> {
    /// True: the proxy adds the key.
    const KEY_PROXIED: Self;
    /// True: there is no key.
    const NO_CREDENTIAL: Self;
}

macro_rules! isolation_reasons {
    ($($kind:ident),+) => {$(
        impl From<Exposure> for $kind {
            fn from(exposure: Exposure) -> Self {
                match exposure {
                    Exposure::CloudSignedProvider => Self::CloudSignedProvider,
                    Exposure::NoEndpoint => Self::NoEndpoint,
                    Exposure::WholeSecretImported => Self::WholeSecretImported,
                    Exposure::UnsupportedEndpoint => Self::UnsupportedEndpoint,
                    Exposure::CredentialProxyOff => Self::CredentialProxyOff,
                    Exposure::OperatorImageNotSet => Self::Error(ErrorReason::OperatorImageNotSet),
                }
            }
        }

        impl IsolationReason for $kind {
            const KEY_PROXIED: Self = Self::KeyProxied;
            const NO_CREDENTIAL: Self = Self::NoCredential;
        }
    )+};
}

isolation_reasons!(AgentRunReason, AgentReason);

impl CredentialIsolation {
    /// The proxy's plan, when there is one.
    pub fn proxy(&self) -> Option<&ProxyPlan> {
        match self {
            Self::Proxied(plan) => Some(plan),
            Self::NoCredential | Self::Exposed(_) => None,
        }
    }

    /// The run's [`CONDITION_CREDENTIAL_ISOLATION`]: status, reason and message.
    pub fn condition<R: IsolationReason>(&self) -> (ConditionStatus, R, String) {
        match self {
            Self::Proxied(plan) => (
                ConditionStatus::True,
                R::KEY_PROXIED,
                format!(
                    "the {CREDENTIAL_PROXY_CONTAINER} sidecar adds the key to requests to {}; the agent container holds a placeholder",
                    plan.upstream
                ),
            ),
            Self::NoCredential => (
                ConditionStatus::True,
                R::NO_CREDENTIAL,
                "the Gateway has no spec.credentialRef: the sandbox holds no model key".to_string(),
            ),
            Self::Exposed(exposure) => (
                ConditionStatus::False,
                R::from(*exposure),
                format!(
                    "the agent container can read the Gateway's key: {}",
                    exposure.because()
                ),
            ),
        }
    }
}

/// An Agent's [`CONDITION_CREDENTIAL_ISOLATION`], from the Gateways it lists as read (by
/// name) under `proxy` (the operator's, with the Agent's setting applied): False when a run
/// on one of them would give its agent the key, with the first such Gateway's reason and
/// each named in the message; True when none would; `None` when no Gateway was read (the
/// Agent lists none, and runs name their own; or none could be read, and the Agent is not
/// Ready).
pub fn agent_credential_isolation(
    gateways: &[(&str, &GatewaySpec)],
    proxy: &CredentialProxy,
) -> Option<(ConditionStatus, AgentReason, String)> {
    let decided: Vec<(&str, CredentialIsolation)> = gateways
        .iter()
        .map(|(name, spec)| (*name, credential_isolation(spec, proxy)))
        .collect();
    let exposed: Vec<(&str, Exposure)> = decided
        .iter()
        .filter_map(|(name, isolation)| match isolation {
            CredentialIsolation::Exposed(why) => Some((*name, *why)),
            _ => None,
        })
        .collect();
    if let Some((_, first)) = exposed.first() {
        let each: Vec<String> = exposed
            .iter()
            .map(|(name, why)| format!("Gateway {name}: {}", why.because()))
            .collect();
        let consequence = if proxy.mode == CredentialProxyMode::Required {
            "the credential proxy is required, so runs on these Gateways do not start"
        } else {
            "runs on these Gateways give their agent container the key"
        };
        let message = format!("{consequence}; {}", each.join("; "));
        return Some((ConditionStatus::False, AgentReason::from(*first), message));
    }
    if decided.is_empty() {
        return None;
    }
    let proxied: Vec<&str> = decided
        .iter()
        .filter(|(_, isolation)| isolation.proxy().is_some())
        .map(|(name, _)| *name)
        .collect();
    Some(if proxied.is_empty() {
        (
            ConditionStatus::True,
            AgentReason::NoCredential,
            "no Gateway has a spec.credentialRef: runs hold no model key".to_string(),
        )
    } else {
        (
            ConditionStatus::True,
            AgentReason::KeyProxied,
            format!(
                "the {CREDENTIAL_PROXY_CONTAINER} sidecar adds the key of Gateway(s) {}; agent containers hold a placeholder",
                proxied.join(", ")
            ),
        )
    })
}

/// What a run's sandbox does with the key of a Gateway of `spec`, under `proxy`.
pub fn credential_isolation(spec: &GatewaySpec, proxy: &CredentialProxy) -> CredentialIsolation {
    use Exposure as R;
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
        return CredentialIsolation::Exposed(R::OperatorImageNotSet);
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
        assert_eq!(plan.agent_endpoint(), "http://127.0.0.1:4100/v1");
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
        assert_eq!(plan.agent_endpoint(), "http://127.0.0.1:4100");
        let (status, reason, _) = anthropic.condition::<AgentRunReason>();
        assert_eq!(
            (status, reason),
            (ConditionStatus::True, AgentRunReason::KeyProxied)
        );
    }

    #[test]
    fn each_gateway_the_proxy_cannot_serve_says_why() {
        use Exposure as R;
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
        let mut messages = std::collections::BTreeMap::new();
        for (spec, reason) in cases {
            let isolation = credential_isolation(&spec, &preferred());
            assert_eq!(isolation, CredentialIsolation::Exposed(reason), "{spec:?}");
            let (status, written, message) = isolation.condition();
            assert_eq!(
                (status, written),
                (ConditionStatus::False, AgentRunReason::from(reason))
            );
            messages.insert(message, reason);
        }
        // Each reason has its own explanation: four reasons, four messages.
        assert_eq!(messages.len(), 4, "{messages:?}");
        let no_image = CredentialProxy {
            image: None,
            ..preferred()
        };
        assert_eq!(
            credential_isolation(
                &spec("openai", Some("https://o.example.com"), Some("k")),
                &no_image
            ),
            CredentialIsolation::Exposed(R::OperatorImageNotSet)
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

    #[test]
    fn a_run_and_an_agent_spell_each_reason_alike() {
        use Exposure as E;
        for exposure in [
            E::CloudSignedProvider,
            E::NoEndpoint,
            E::WholeSecretImported,
            E::UnsupportedEndpoint,
            E::CredentialProxyOff,
            E::OperatorImageNotSet,
        ] {
            assert_eq!(
                AgentRunReason::from(exposure).as_str(),
                AgentReason::from(exposure).as_str()
            );
            assert_eq!(
                AgentReason::from(exposure).as_str(),
                format!("{exposure:?}")
            );
        }
        assert_eq!(
            AgentRunReason::KEY_PROXIED.as_str(),
            AgentReason::KEY_PROXIED.as_str()
        );
        assert_eq!(
            AgentRunReason::NO_CREDENTIAL.as_str(),
            AgentReason::NO_CREDENTIAL.as_str()
        );
    }

    #[test]
    fn an_agents_setting_replaces_preferred_or_off_and_unset_keeps_the_operators_mode() {
        let modes = [
            CredentialProxyMode::Required,
            CredentialProxyMode::Preferred,
            CredentialProxyMode::Off,
        ];
        for operator_mode in [CredentialProxyMode::Preferred, CredentialProxyMode::Off] {
            let operator = CredentialProxy {
                mode: operator_mode,
                ..preferred()
            };
            let mut agent = AgentSpec::default();
            assert_eq!(operator.for_agent(&agent), operator);
            for mode in modes {
                agent.credential_proxy = Some(mode);
                let effective = operator.for_agent(&agent);
                assert_eq!(effective.mode, mode);
                assert_eq!(effective.image, operator.image);
            }
        }
    }

    #[test]
    fn the_operators_required_is_a_floor_no_agent_lowers() {
        let operator = CredentialProxy {
            mode: CredentialProxyMode::Required,
            ..preferred()
        };
        let mut agent = AgentSpec::default();
        for mode in [
            None,
            Some(CredentialProxyMode::Required),
            Some(CredentialProxyMode::Preferred),
            Some(CredentialProxyMode::Off),
        ] {
            agent.credential_proxy = mode;
            assert_eq!(
                operator.for_agent(&agent).mode,
                CredentialProxyMode::Required,
                "{mode:?}"
            );
        }
    }

    #[test]
    fn an_agent_is_isolated_when_every_gateway_it_lists_keeps_the_key_from_its_runs() {
        let openai = spec("openai", Some("https://o.example.com/v1"), Some("k"));
        let bedrock = spec("aws-bedrock", Some("https://b.example.com"), Some("k"));
        let mut keyless = spec("openai", Some("https://o.example.com"), None);
        keyless.credential_ref = None;

        assert_eq!(agent_credential_isolation(&[], &preferred()), None);

        let (status, reason, message) =
            agent_credential_isolation(&[("llm", &openai), ("local", &keyless)], &preferred())
                .expect("a condition");
        assert_eq!(
            (status, reason),
            (ConditionStatus::True, AgentReason::KeyProxied)
        );
        assert!(
            message.contains("llm") && !message.contains("local"),
            "{message}"
        );

        let (status, reason, _) =
            agent_credential_isolation(&[("local", &keyless)], &preferred()).expect("a condition");
        assert_eq!(
            (status, reason),
            (ConditionStatus::True, AgentReason::NoCredential)
        );

        let listed = [("llm", &openai), ("bedrock", &bedrock)];
        let (status, reason, message) =
            agent_credential_isolation(&listed, &preferred()).expect("a condition");
        assert_eq!(
            (status, reason),
            (ConditionStatus::False, AgentReason::CloudSignedProvider)
        );
        assert!(
            message.contains("Gateway bedrock: ") && !message.contains("Gateway llm"),
            "{message}"
        );
        assert!(
            message.contains("give their agent container the key"),
            "{message}"
        );

        let required = CredentialProxy {
            mode: CredentialProxyMode::Required,
            ..preferred()
        };
        let (_, _, message) = agent_credential_isolation(&listed, &required).expect("a condition");
        assert!(message.contains("do not start"), "{message}");

        // `off` exposes every keyed Gateway; the first listed gives the reason.
        let off = CredentialProxy {
            mode: CredentialProxyMode::Off,
            ..preferred()
        };
        let (status, reason, message) =
            agent_credential_isolation(&listed, &off).expect("a condition");
        assert_eq!(
            (status, reason),
            (ConditionStatus::False, AgentReason::CredentialProxyOff)
        );
        assert!(
            message.contains("Gateway llm: ") && message.contains("Gateway bedrock: "),
            "{message}"
        );
    }
}
