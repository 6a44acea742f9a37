//! Gateway: reads the credential and checks the endpoint with it (`GET <endpoint>/v1/models`)
//! at each generation and each version of the Secret, again every ten minutes (every minute
//! while it fails). What to send and what the answer means is decided in
//! [`agentic_core::gateway`]; where the request runs and why is ADR 0009.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_api::{CONDITION_READY, Gateway, GatewayStatus};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::gateway::{
    self as check, CONDITION_ENDPOINT_REACHABLE, Due, Finding, Memory, Observation, Plan,
    PreviousCheck, Probe,
};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::pipeline::{Pass, Policy, Reconciled, ready_phase, run_controller};
use super::support::{namespace_of, relate};
use super::watches::{Stop, Watches};
use crate::context::Context;
use crate::error::{Chain, Error, Result};

pub const KIND: &str = "Gateway";

const USER_AGENT: &str = concat!("agentic-operator/", env!("CARGO_PKG_VERSION"));

/// What a check was about: a Gateway (by uid, so a recreated one starts afresh), its
/// generation and the version of its Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Subject {
    uid: Option<String>,
    generation: Option<i64>,
    secret_version: Option<String>,
}

/// The last check of one Gateway, kept in memory: it decides when to check again without a
/// status write per check, so an idle cluster sees no writes. A restarted operator checks
/// every Gateway once.
#[derive(Clone, Debug)]
struct LastCheck {
    subject: Subject,
    at: Instant,
    recheck_after: Duration,
    /// A check succeeded for this subject.
    verified: bool,
}

/// The last check of each Gateway made by this process, by namespace and name: the kind's
/// own state, kept in the context ([`Context::kind_state`]).
#[derive(Default)]
struct Checks(std::sync::Mutex<HashMap<(String, String), LastCheck>>);

impl Checks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), LastCheck>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn last(&self, key: &(String, String)) -> Option<LastCheck> {
        self.lock().get(key).cloned()
    }

    fn record(&self, key: (String, String), check: LastCheck) {
        self.lock().insert(key, check);
    }

    /// The Gateway is no longer checked (or is gone).
    fn forget(&self, key: &(String, String)) {
        self.lock().remove(key);
    }
}

/// The Gateway controller: re-checks a Gateway when its Secret appears or changes.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let gateways = watches.of::<Gateway>();
    let store = gateways.store();
    let by_secret = gateways.index(|gateway| {
        gateway
            .spec
            .credential_ref
            .iter()
            .map(|c| c.secret_name.clone())
            .collect()
    });
    let controller = Controller::for_shared_stream(gateways.applied(), store.clone())
        .watches_shared_stream(
            watches.secrets.touched(),
            relate(store.clone(), by_secret, |gateways, ns, secret| {
                gateways_using_secret(gateways, ns, secret)
            }),
        );
    let policy = Policy::backing_off(reconcile, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for Gateway {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &GatewayStatus, new: &GatewayStatus) -> Vec<StatusEvent> {
        condition_events(
            &old.conditions,
            &new.conditions,
            &[CONDITION_READY, CONDITION_ENDPOINT_REACHABLE],
        )
    }
}

/// A Gateway's pass: [`gather`] what the check needs and observes, [`check::decide`] the
/// status and the next check, then remember the check.
pub async fn reconcile(
    gateway: Arc<Gateway>,
    ctx: Arc<Context>,
    old: GatewayStatus,
) -> Result<Pass<GatewayStatus>> {
    let namespace = namespace_of(gateway.as_ref(), KIND)?;
    let key = (namespace.clone(), gateway.name_any());
    let checks = ctx.kind_state::<Checks>();
    // Gather: the credential Secret and, when a check is due, the endpoint's answer.
    let (finding, subject) = gather(&gateway, &ctx, &namespace, &checks, &old).await?;
    // Decide, then apply: remember the check.
    let decision = check::decide(finding, &old, gateway.metadata.generation, crate::now());
    remember(&checks, key, subject, decision.memory);
    Ok(Pass::then(
        decision.status,
        decision
            .recheck_after
            .map_or_else(Action::await_change, Action::requeue),
    ))
}

/// Keeps what the decision says about this check for the next pass: forget it (the
/// Gateway's endpoint or Secret changed), keep the last one, or record this one.
fn remember(checks: &Checks, key: (String, String), subject: Subject, memory: Memory) {
    match memory {
        Memory::Forget => checks.forget(&key),
        Memory::Keep => {}
        Memory::Record {
            verified,
            recheck_after,
        } => checks.record(
            key,
            LastCheck {
                subject,
                at: Instant::now(),
                recheck_after,
                verified,
            },
        ),
    }
}

/// What the pass finds: the plan from the spec and the credential Secret, and when a check is
/// due, its result; with the subject a check made now is about.
async fn gather(
    gateway: &Gateway,
    ctx: &Context,
    namespace: &str,
    checks: &Checks,
    old: &GatewayStatus,
) -> Result<(Finding, Subject)> {
    let secret = match &gateway.spec.credential_ref {
        None => None,
        Some(credential) => {
            let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
            secrets.get_opt(&credential.secret_name).await?
        }
    };
    let generation = gateway.metadata.generation;
    let subject = Subject {
        uid: gateway.metadata.uid.clone(),
        generation,
        secret_version: secret
            .as_ref()
            .and_then(|s| s.metadata.resource_version.clone()),
    };
    let probe = match check::plan_for(&gateway.spec, namespace, secret.as_ref()) {
        Plan::Skip(message) => return Ok((Finding::Skipped(message), subject)),
        Plan::Refuse(reason, message) => return Ok((Finding::Refused(reason, message), subject)),
        Plan::Check(probe) => probe,
    };
    let name = gateway.name_any();
    let previous = checks
        .last(&(namespace.to_string(), name.clone()))
        .map(|last| PreviousCheck {
            same_subject: last.subject == subject,
            elapsed: last.at.elapsed(),
            recheck_after: last.recheck_after,
            verified: last.verified,
        });
    let finding = match check::due(previous, old, generation) {
        Due::Wait(remaining) => Finding::NotDue(remaining),
        Due::Now { verified_before } => Finding::Checked {
            observation: send(&probe, namespace, &name).await?,
            url: probe.url,
            verified_before,
        },
    };
    Ok((finding, subject))
}

/// Sends the check and says what came back. Bounded: [`check::CONNECT_TIMEOUT`] to connect,
/// [`check::CHECK_TIMEOUT`] in all; redirects only within the endpoint's origin; of an error
/// answer at most [`check::MAX_LOGGED_BODY_BYTES`] are read, for the log, with the key
/// scrubbed. The key itself is never logged.
async fn send(probe: &Probe, namespace: &str, name: &str) -> Result<Observation> {
    // The workspace builds rustls with ring only; make it the process default unless the
    // program chose one already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HeaderMap::new();
    for (header, value) in &probe.headers {
        let mut value = HeaderValue::from_bytes(value.as_bytes())
            .map_err(|e| Error::HttpClient(format!("header {header}: {e}")))?;
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static(header), value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(check::CONNECT_TIMEOUT)
        .timeout(check::CHECK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let url = attempt.url();
            let within = attempt.previous().first().is_some_and(|first| {
                first.scheme() == url.scheme()
                    && first.host_str() == url.host_str()
                    && first.port_or_known_default() == url.port_or_known_default()
            });
            if within && attempt.previous().len() <= check::MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| Error::HttpClient(Chain(&e).to_string()))?;
    let response = match client.get(&probe.url).headers(headers).send().await {
        Ok(response) => response,
        Err(error) => {
            let observation = if error.is_timeout() {
                Observation::TimedOut
            } else if is_tls(&error) {
                Observation::Tls
            } else {
                Observation::Unreachable
            };
            tracing::info!(namespace, gateway = name, url = %probe.url, ?observation, error = %Chain(&error), "gateway check failed");
            return Ok(observation);
        }
    };
    let code = response.status().as_u16();
    if !response.status().is_success() {
        let body = read_at_most(response, check::MAX_LOGGED_BODY_BYTES).await;
        tracing::info!(
            namespace,
            gateway = name,
            url = %probe.url,
            status = code,
            body = %check::scrubbed(&body, probe.key.as_deref()),
            "gateway check answered"
        );
    }
    Ok(Observation::Status(code))
}

/// The first `limit` bytes of the body (a little more when a chunk ends past it); a body that
/// fails halfway gives what arrived.
async fn read_at_most(mut response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(limit);
    body
}

/// Whether the request failed in the TLS handshake: rustls's error somewhere among the
/// causes. `io::Error` hides its inner error from `source()` (and hyper-util wraps one
/// `io::Error` in another), so inner errors are looked into too.
fn is_tls(error: &(dyn std::error::Error + 'static)) -> bool {
    error.is::<rustls::Error>()
        || error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .is_some_and(|inner| is_tls(inner))
        || error.source().is_some_and(is_tls)
}

/// The Gateways that name `secret` as their credential.
pub fn gateways_using_secret<'a>(
    gateways: impl IntoIterator<Item = &'a Gateway>,
    namespace: &str,
    secret: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<Gateway>> {
    gateways
        .into_iter()
        .filter(|g| g.namespace().as_deref() == Some(namespace))
        .filter(|g| {
            g.spec
                .credential_ref
                .as_ref()
                .is_some_and(|c| c.secret_name == secret)
        })
        .map(kube::runtime::reflector::ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on 127.0.0.1 that answers every connection with `reply` and closes it.
    async fn answering(reply: &'static [u8]) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(reply).await;
            }
        });
        addr
    }

    fn probe(url: String) -> Probe {
        Probe {
            url,
            headers: vec![("authorization", "Bearer sk-unit".to_string())],
            key: Some("sk-unit".to_string()),
        }
    }

    #[tokio::test]
    async fn https_to_a_plain_http_server_is_a_tls_failure() {
        let addr = answering(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        let observed = send(&probe(format!("https://{addr}/v1/models")), "ns", "gw")
            .await
            .expect("a client");
        assert_eq!(observed, Observation::Tls);
    }

    #[tokio::test]
    async fn answers_and_closed_ports_are_told_apart() {
        let addr =
            answering(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").await;
        let observed = send(&probe(format!("http://{addr}/v1/models")), "ns", "gw")
            .await
            .expect("a client");
        assert_eq!(observed, Observation::Status(503));

        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address");
        let observed = send(&probe(format!("http://{closed}/v1/models")), "ns", "gw")
            .await
            .expect("a client");
        assert_eq!(observed, Observation::Unreachable);
    }
}

#[cfg(test)]
mod scenarios;
