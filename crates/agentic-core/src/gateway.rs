//! Checking a Gateway: which request shows that its endpoint answers with its credential, and
//! what the answer means for the Gateway's conditions. The request itself is made by the
//! operator (ADR 0009); nothing here does I/O.

use std::fmt;
use std::time::Duration;

use agentic_api::{CONDITION_READY, ConditionStatus, GatewaySpec, GatewayStatus};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::{Conditions, find_condition};
pub use crate::reasons::GatewayReason;

/// The condition with the result of the latest check, whatever `Ready` says.
pub const CONDITION_ENDPOINT_REACHABLE: &str = "EndpointReachable";

/// The `anthropic-version` header sent to Anthropic endpoints.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The longest a check may take, connection and answer together.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a check may take to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of an error answer kept for the operator's log.
pub const MAX_LOGGED_BODY_BYTES: usize = 512;
/// When a Gateway whose check succeeded is checked again: a key revoked at the provider shows
/// within this time without flooding the provider.
pub const RECHECK_AFTER_SUCCESS: Duration = Duration::from_secs(600);
/// When a Gateway whose check failed is checked again, so that a Gateway created before its
/// endpoint came up turns Ready soon after without anyone touching it.
pub const RECHECK_AFTER_FAILURE: Duration = Duration::from_secs(60);

/// How a provider wants its API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>` (OpenAI and the many servers compatible with it).
    Bearer,
    /// `x-api-key: <key>` and `anthropic-version`.
    Anthropic,
}

/// How `provider` authenticates; `None` for providers whose requests are signed with cloud
/// credentials (`gcp-vertex-ai`, `aws-bedrock`, also with `_`), which a plain GET cannot check.
pub fn auth_style(provider: &str) -> Option<AuthStyle> {
    let provider = provider.to_ascii_lowercase().replace('_', "-");
    match provider.as_str() {
        "gcp-vertex-ai" | "aws-bedrock" => None,
        "anthropic" => Some(AuthStyle::Anthropic),
        _ => Some(AuthStyle::Bearer),
    }
}

/// The Gateway's credential as the check sees it.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// No `spec.credentialRef`: the endpoint is checked without a key.
    None,
    /// The value of `spec.credentialRef.key` in the Secret.
    Key(&'a [u8]),
    /// A `spec.credentialRef` without `key`: every key of the Secret goes to the sandbox.
    WholeSecret,
}

/// What to do about a Gateway.
#[derive(Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing to check; Ready with [`GatewayReason::VerificationSkipped`] and this message.
    Skip(String),
    /// Not Ready with this reason and message, without a request.
    Refuse(GatewayReason, String),
    /// Send `GET url` with `headers`.
    Check(Probe),
}

/// The request of a check. Its `Debug` leaves the header values and the key out.
#[derive(Clone, PartialEq, Eq)]
pub struct Probe {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    /// The key the headers carry, to scrub from the answers the operator logs.
    pub key: Option<String>,
}

impl fmt::Debug for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Probe")
            .field("url", &self.url)
            .field("headers", &names)
            .finish()
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Skip(message) => f.debug_tuple("Skip").field(message).finish(),
            Self::Refuse(reason, message) => f
                .debug_tuple("Refuse")
                .field(reason)
                .field(message)
                .finish(),
            Self::Check(probe) => f.debug_tuple("Check").field(probe).finish(),
        }
    }
}

/// The check for a Gateway of `provider` at `endpoint` with `credential`.
pub fn plan(provider: &str, endpoint: Option<&str>, credential: Credential<'_>) -> Plan {
    let Some(style) = auth_style(provider) else {
        return Plan::Skip(format!(
            "provider {provider} signs requests with cloud credentials; the endpoint is not checked"
        ));
    };
    let Some(endpoint) = endpoint else {
        return Plan::Skip(
            "the Gateway has no spec.endpoint; the harness uses its provider's default, which is not checked"
                .to_string(),
        );
    };
    let url = match models_url(endpoint) {
        Ok(url) => url,
        Err(problem) => {
            return Plan::Refuse(
                GatewayReason::InvalidEndpoint,
                format!("spec.endpoint {endpoint:?} {problem}"),
            );
        }
    };
    let key = match credential {
        Credential::None => None,
        Credential::WholeSecret => {
            return Plan::Skip(
                "spec.credentialRef has no key: the whole Secret goes to the sandbox and the operator cannot tell which of its keys is the API key; the endpoint is not checked"
                    .to_string(),
            );
        }
        Credential::Key(bytes) => match std::str::from_utf8(bytes) {
            Ok(key) if key.chars().all(|c| !c.is_control()) && !key.is_empty() => Some(key),
            _ => {
                return Plan::Refuse(
                    GatewayReason::InvalidCredential,
                    "the key in spec.credentialRef is empty, not UTF-8 or holds control characters (a trailing newline?), so it cannot be sent in a header"
                        .to_string(),
                );
            }
        },
    };
    let headers = match (style, key) {
        (_, None) => vec![],
        (AuthStyle::Bearer, Some(key)) => vec![("authorization", format!("Bearer {key}"))],
        (AuthStyle::Anthropic, Some(key)) => vec![
            ("x-api-key", key.to_string()),
            ("anthropic-version", ANTHROPIC_VERSION.to_string()),
        ],
    };
    Plan::Check(Probe {
        url,
        headers,
        key: key.map(str::to_owned),
    })
}

/// The check for a Gateway of `spec` in `namespace`, whose credential Secret (when it
/// names one) is `secret`: [`plan`], or a refusal when the Secret or its key is missing.
pub fn plan_for(spec: &GatewaySpec, namespace: &str, secret: Option<&Secret>) -> Plan {
    let endpoint = spec.endpoint.as_deref();
    let Some(credential) = &spec.credential_ref else {
        return plan(&spec.provider, endpoint, Credential::None);
    };
    let Some(secret) = secret else {
        return Plan::Refuse(
            GatewayReason::SecretNotFound,
            format!(
                "spec.credentialRef.secretName: Secret {} not found in namespace {namespace}",
                credential.secret_name
            ),
        );
    };
    let Some(key) = &credential.key else {
        return plan(&spec.provider, endpoint, Credential::WholeSecret);
    };
    match secret_value(secret, key) {
        Some(value) => plan(&spec.provider, endpoint, Credential::Key(value)),
        None => Plan::Refuse(
            GatewayReason::SecretKeyNotFound,
            format!(
                "spec.credentialRef.key: Secret {} has no key {key}",
                credential.secret_name
            ),
        ),
    }
}

/// The value of `key` in `secret` (`data`, else `stringData`).
fn secret_value<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.0.as_slice())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(std::string::String::as_bytes)
        })
}

/// The last check this process made of a Gateway, as the next pass sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreviousCheck {
    /// It checked the same Gateway (uid), generation and Secret version.
    pub same_subject: bool,
    /// How long ago it was made.
    pub elapsed: Duration,
    /// When it asked to be checked again.
    pub recheck_after: Duration,
    /// It succeeded.
    pub verified: bool,
}

/// Whether a Gateway whose plan is a check is checked in this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// The last check of this subject still holds; look again after this long.
    Wait(Duration),
    /// Check now. `verified_before` says whether a check already succeeded at this
    /// generation and Secret version, which keeps the Gateway Ready through an outage.
    Now { verified_before: bool },
}

/// Whether to check now, from the last check this process made (if any) and, without one (a
/// restarted operator), the status: a record for another subject means a new generation or
/// credential, which must prove itself.
pub fn due(previous: Option<PreviousCheck>, old: &GatewayStatus, generation: Option<i64>) -> Due {
    match previous {
        Some(last) if last.same_subject && last.elapsed < last.recheck_after => {
            Due::Wait(last.recheck_after.saturating_sub(last.elapsed))
        }
        Some(last) => Due::Now {
            verified_before: last.same_subject && last.verified,
        },
        None => Due::Now {
            verified_before: old.connection_verified
                && find_condition(&old.conditions, CONDITION_READY)
                    .is_some_and(|c| c.observed_generation == generation),
        },
    }
}

/// What a pass found about a Gateway: the inputs of [`decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The plan: nothing to check ([`Plan::Skip`]).
    Skipped(String),
    /// The plan: not Ready without a request ([`Plan::Refuse`]).
    Refused(GatewayReason, String),
    /// The last check still holds ([`Due::Wait`]).
    NotDue(Duration),
    /// The check was sent to `url` and `observation` came back.
    Checked {
        url: String,
        observation: Observation,
        verified_before: bool,
    },
}

/// What the pass keeps in memory about the Gateway's checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Nothing is checked any more: forget the last check.
    Forget,
    /// Keep the last check as it is.
    Keep,
    /// Remember the check just made.
    Record {
        verified: bool,
        recheck_after: Duration,
    },
}

/// The outcome of a pass over a Gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The status to write.
    pub status: GatewayStatus,
    /// When to look again; `None` waits for a change of the Gateway or its Secret.
    pub recheck_after: Option<Duration>,
    /// What to remember of the check.
    pub memory: Memory,
}

/// The status and next check of a Gateway at `generation` from what the pass found, the
/// status it started from and the time of the pass.
pub fn decide(
    finding: Finding,
    old: &GatewayStatus,
    generation: Option<i64>,
    now: Time,
) -> Decision {
    let mut status = old.clone();
    status.observed_generation = generation;
    let mut conditions = Conditions::<GatewayReason>::new(&mut status.conditions, generation, now);
    let (recheck_after, memory) = match finding {
        Finding::Skipped(message) => {
            conditions.set(
                CONDITION_READY,
                ConditionStatus::True,
                GatewayReason::VerificationSkipped,
                &message,
            );
            conditions.remove(CONDITION_ENDPOINT_REACHABLE);
            status.connection_verified = false;
            (None, Memory::Forget)
        }
        Finding::Refused(reason, message) => {
            conditions.set(CONDITION_READY, ConditionStatus::False, reason, &message);
            conditions.remove(CONDITION_ENDPOINT_REACHABLE);
            status.connection_verified = false;
            (None, Memory::Forget)
        }
        Finding::NotDue(remaining) => (Some(remaining), Memory::Keep),
        Finding::Checked {
            url,
            observation,
            verified_before,
        } => {
            let checked = checked(&url, observation, verified_before);
            let reachable = &checked.reachable;
            conditions.set(
                CONDITION_ENDPOINT_REACHABLE,
                reachable.status,
                reachable.reason,
                &reachable.message,
            );
            let ready = &checked.ready;
            conditions.set(CONDITION_READY, ready.status, ready.reason, &ready.message);
            status.connection_verified = checked.connection_verified;
            (
                Some(checked.recheck_after),
                Memory::Record {
                    verified: checked.connection_verified,
                    recheck_after: checked.recheck_after,
                },
            )
        }
    };
    Decision {
        status,
        recheck_after,
        memory,
    }
}

/// `<endpoint>/v1/models`, or why `endpoint` cannot be checked. An endpoint that already ends
/// in `/v1` (as OpenAI's base URLs do) does not get a second one.
pub fn models_url(endpoint: &str) -> Result<String, &'static str> {
    let lower = endpoint.to_ascii_lowercase();
    let Some(rest) = ["https://", "http://"]
        .iter()
        .find_map(|scheme| lower.strip_prefix(scheme))
    else {
        return Err("is not an http:// or https:// URL");
    };
    if endpoint
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("holds whitespace or control characters");
    }
    if endpoint.contains(['?', '#']) {
        return Err("has a query or fragment, which would change the path that is checked");
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err("has no host");
    }
    if authority.contains('@') {
        return Err("carries a user name or password; put credentials in spec.credentialRef");
    }
    let base = endpoint.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    Ok(format!("{base}/v1/models"))
}

/// What a check observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The endpoint answered with this HTTP status (redirects to another origin are not
    /// followed, so they arrive here as 3xx).
    Status(u16),
    /// No answer within [`CHECK_TIMEOUT`].
    TimedOut,
    /// No connection (name not resolved, refused, reset).
    Unreachable,
    /// The TLS handshake failed.
    Tls,
}

/// A condition to set: status, reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextCondition {
    pub status: ConditionStatus,
    pub reason: GatewayReason,
    pub message: String,
}

/// What a check means for the Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The `EndpointReachable` condition: the result of this check.
    pub reachable: NextCondition,
    /// The `Ready` condition.
    pub ready: NextCondition,
    /// `status.connectionVerified`.
    pub connection_verified: bool,
    /// When to check again.
    pub recheck_after: Duration,
}

/// The conditions after checking `url` and observing `observation`. `verified_before` says
/// whether a check already succeeded at this generation and Secret version.
///
/// A Gateway once verified stays Ready through outages (timeouts, refused connections, TLS
/// failures, 5xx): runs already admitted go on, Agents do not flap, and a provider's bad
/// minute does not stop a namespace; `EndpointReachable` and a Warning event tell of it. A
/// refused credential (401, 403) is no outage: the key was revoked or rotated at the
/// provider, every run would fail, so Ready turns False at once.
pub fn checked(url: &str, observation: Observation, verified_before: bool) -> Checked {
    let failed = |reason, message: String| NextCondition {
        status: ConditionStatus::False,
        reason,
        message,
    };
    let reachable = match observation {
        Observation::Status(code) if (200..300).contains(&code) => NextCondition {
            status: ConditionStatus::True,
            reason: GatewayReason::ConnectionVerified,
            message: format!("GET {url} answered {code} with the credential"),
        },
        Observation::Status(code @ (401 | 403)) => failed(
            GatewayReason::Unauthorized,
            format!("GET {url} answered {code}: the endpoint refused the credential"),
        ),
        Observation::Status(code @ 300..=399) => failed(
            GatewayReason::UnexpectedStatus,
            format!(
                "GET {url} answered {code}, a redirect to another origin or more than {MAX_REDIRECTS} redirects, which are not followed; set spec.endpoint to where it leads"
            ),
        ),
        Observation::Status(code) => failed(
            GatewayReason::UnexpectedStatus,
            format!("GET {url} answered {code}; a 2xx status was expected"),
        ),
        Observation::TimedOut => failed(
            GatewayReason::EndpointUnreachable,
            format!(
                "GET {url} got no answer within {} seconds",
                CHECK_TIMEOUT.as_secs()
            ),
        ),
        Observation::Unreachable => failed(
            GatewayReason::EndpointUnreachable,
            format!("GET {url}: no connection to the endpoint"),
        ),
        Observation::Tls => failed(
            GatewayReason::TLSFailure,
            format!("GET {url}: the TLS handshake failed"),
        ),
    };
    let succeeded = reachable.status == ConditionStatus::True;
    let refused = reachable.reason == GatewayReason::Unauthorized;
    let connection_verified = succeeded || (verified_before && !refused);
    let ready = if succeeded || !connection_verified {
        reachable.clone()
    } else {
        NextCondition {
            status: ConditionStatus::True,
            reason: GatewayReason::ConnectionVerified,
            message: format!(
                "{url} was verified at this generation and Secret version; the latest check failed ({}), see EndpointReachable",
                reachable.reason
            ),
        }
    };
    Checked {
        recheck_after: if succeeded {
            RECHECK_AFTER_SUCCESS
        } else {
            RECHECK_AFTER_FAILURE
        },
        reachable,
        ready,
        connection_verified,
    }
}

/// Redirects followed within the endpoint's own origin (scheme, host and port); a redirect
/// elsewhere is never followed, since the key would go with it.
pub const MAX_REDIRECTS: usize = 3;

/// `body` cut to [`MAX_LOGGED_BODY_BYTES`] at a character boundary, with `secret` (the key,
/// when there is one) replaced: some servers echo the key they refuse.
pub fn scrubbed(body: &[u8], secret: Option<&str>) -> String {
    let text = String::from_utf8_lossy(body);
    let secret = secret.filter(|s| !s.is_empty());
    let text = match secret {
        Some(secret) => text.replace(secret, "[redacted]"),
        None => text.into_owned(),
    };
    let mut cut = crate::conditions::truncate(&text, MAX_LOGGED_BODY_BYTES);
    // The body was read up to a bound, so it may end in the first part of the key.
    if let Some(secret) = secret
        && let Some(start) = (1..secret.len())
            .rev()
            .filter(|end| secret.is_char_boundary(*end))
            .find(|end| cut.ends_with(&secret[..*end]))
    {
        cut = &cut[..cut.len() - start];
    }
    cut.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests;
