//! The agent container's OpenTelemetry environment: where its runtime exports traces (the
//! operator's receiver), with the run's own bearer and the resource attributes that name it.

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

use super::{OTLP_TOKEN_KEY, SandboxInputs, env};
use crate::names::acp_secret_name;

/// Where the operator receives OTLP traces, as sandboxes reach it, and whether agents
/// export message content by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceReceiver {
    /// The base URL (`http://<host>:<port>`): runtimes append `/v1/traces`.
    pub endpoint: String,
    /// Whether the runtime exports message content unless the Agent's
    /// `spec.captureMessageContent` says otherwise (`--otlp-capture-content`).
    pub capture_content: bool,
}

/// The resource attribute naming the run.
pub const RUN_NAME_ATTRIBUTE: &str = "konveyor.agentrun.name";
/// The resource attribute holding the run's UID.
pub const RUN_UID_ATTRIBUTE: &str = "konveyor.agentrun.uid";

/// The variables, in order: the bearer and the pod's name first, for the `$(VAR)`
/// references of the variables after them (Kubernetes expands only variables defined
/// earlier in the list), so the token never appears in the pod spec. None without a
/// receiver.
pub(super) fn telemetry_env(inputs: &SandboxInputs) -> Vec<EnvVar> {
    let Some(receiver) = inputs.trace_receiver else {
        return Vec::new();
    };
    let token = EnvVar {
        name: env::OTLP_TOKEN.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                name: acp_secret_name(inputs.sandbox_name()),
                key: OTLP_TOKEN_KEY.to_string(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    };
    let pod_name = EnvVar {
        name: env::POD_NAME.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".to_string(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
    };
    let uid = inputs.run.metadata.uid.as_deref().unwrap_or_default();
    // Kubernetes names and UIDs hold no `,`, `=` or `%`: nothing to percent-encode.
    let attributes = format!(
        "k8s.namespace.name={},k8s.pod.name=$({}),{RUN_NAME_ATTRIBUTE}={},{RUN_UID_ATTRIBUTE}={uid}",
        inputs.namespace,
        env::POD_NAME,
        inputs.run_name,
    );
    let capture = inputs
        .agent
        .spec
        .capture_message_content
        .unwrap_or(receiver.capture_content);
    let mut vars = vec![
        token,
        pod_name,
        value(env::OTEL_ENDPOINT, &receiver.endpoint),
        value(env::OTEL_PROTOCOL, "http/protobuf"),
        // The header list is W3C-baggage-like: the space after `Bearer` is percent-encoded.
        value(
            env::OTEL_HEADERS,
            &format!("Authorization=Bearer%20$({})", env::OTLP_TOKEN),
        ),
        value(env::OTEL_RESOURCE_ATTRIBUTES, &attributes),
    ];
    if capture {
        vars.push(value(env::OTEL_CAPTURE_CONTENT, "true"));
    }
    vars
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// The run's bearer for the trace receiver: `<namespace>/<run>/<random>`. Names hold no
/// `/`, so the receiver reads the run back with [`run_of_token`] and then checks the whole
/// bearer against the run's Secret.
pub fn otlp_token(namespace: &str, run: &str, random: &str) -> String {
    format!("{namespace}/{run}/{random}")
}

/// The namespace and run a bearer names, when it has the shape [`otlp_token`] gives; says
/// nothing about whether it is the run's.
pub fn run_of_token(token: &str) -> Option<(&str, &str)> {
    let mut parts = token.splitn(3, '/');
    let (namespace, run, random) = (parts.next()?, parts.next()?, parts.next()?);
    let named = |part: &str| {
        !part.is_empty()
            && part.len() <= crate::names::MAX_SUBDOMAIN_LEN
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    (named(namespace) && named(run) && !random.is_empty()).then_some((namespace, run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_run_and_nothing_else_parses() {
        let token = otlp_token("team-a", "fix.bug-1", "c2VjcmV0");
        assert_eq!(token, "team-a/fix.bug-1/c2VjcmV0");
        assert_eq!(run_of_token(&token), Some(("team-a", "fix.bug-1")));
        for bad in [
            "",
            "team-a",
            "team-a/run",
            "team-a/run/",
            "/run/x",
            "Team/run/x",
            "team a/run/x",
        ] {
            assert_eq!(run_of_token(bad), None, "{bad:?}");
        }
        let long = "a".repeat(crate::names::MAX_SUBDOMAIN_LEN + 1);
        assert_eq!(run_of_token(&format!("ns/{long}/x")), None);
    }
}
