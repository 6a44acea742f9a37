//! The operator's OTLP/HTTP trace receiver: what a run's agent reports about the skills it
//! loaded (#34).
//!
//! `POST /v1/traces` takes an `ExportTraceServiceRequest` (`application/x-protobuf` or
//! `application/json`, optionally gzip) from a run's agent, which the run's bearer
//! authenticates: `Authorization: Bearer <namespace>/<run>/<random>`, the `otlp-token` key of
//! the run's own Secret. The run is looked up by name in the watch cache (no scan) and the
//! bearer checked against that Secret (read once per run, then kept as a hash). Identity
//! comes from the bearer alone: what a request says about itself (resource attributes)
//! cannot make it count for another run.
//!
//! In order, a request is refused with
//! - 401: no bearer, a bearer of no run, or not the run's;
//! - 403: its run finished longer than the grace period ago;
//! - 429: its run sent more than [`Limits::requests_per_second`] (with a burst of twice that);
//! - 413: a body over [`Limits::max_body_bytes`] (or inflating past
//!   [`Limits::max_decoded_bytes`]), or more than [`Limits::max_spans`] spans;
//! - 415 / 400: another content type, or a body that does not decode.
//!
//! An accepted request is read for skill loads and scrubbed of message content
//! ([`agentic_otlp::take_skill_loads`]) before anything else sees it: the loads are counted
//! ([`usage::SkillUsage`]) and the run's pass records them in its status; the scrubbed
//! request goes to the [`TraceSink`], when there is one (the trace forwarder).

pub mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use agentic_api::{AgentRun, AgentRunPhase};
use agentic_core::names::{acp_secret_name, sandbox_name};
use agentic_core::owners::is_controlled_by;
use agentic_core::sandbox::{OTLP_TOKEN_KEY, run_of_token};
use agentic_otlp::Encoding;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use sha2::{Digest, Sha256};

use crate::context::Context;
use crate::error::Chain;
use crate::traces::{ReportingRun, TraceSink};
use usage::SkillUsage;

/// The path OTLP/HTTP exporters post traces to.
pub const TRACES_PATH: &str = "/v1/traces";
/// The port of `--otlp-bind-address` by default: OTLP/HTTP's.
pub const DEFAULT_PORT: u16 = 4318;

/// What one run may send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, as sent.
    pub max_body_bytes: usize,
    /// The largest body once decompressed.
    pub max_decoded_bytes: usize,
    /// The most spans in one request.
    pub max_spans: usize,
    /// Requests a run may send per second, on average (bursts of twice that).
    pub requests_per_second: u32,
    /// How long after its end a run's reports are still taken: an exporter flushes its last
    /// batch as the agent exits, which may reach the receiver after the run's end was seen.
    pub finished_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 << 20,
            max_decoded_bytes: 16 << 20,
            max_spans: 4096,
            requests_per_second: 20,
            finished_grace: Duration::from_secs(120),
        }
    }
}

/// The receiver's settings (`--otlp-*`).
#[derive(Clone, Debug)]
pub struct OtlpOptions {
    /// Where to listen.
    pub bind: SocketAddr,
    /// What sandboxes are told ([`agentic_core::sandbox::TraceReceiver`]).
    pub receiver: agentic_core::sandbox::TraceReceiver,
    pub limits: Limits,
}

/// The receiver's state: the controllers' context once this replica leads, what it knows of
/// each run's bearer, and each run's request budget.
pub struct Receiver {
    limits: Limits,
    context: RwLock<Option<Arc<Context>>>,
    sink: Option<Arc<dyn TraceSink>>,
    runs: Mutex<HashMap<String, RunGate>>,
}

/// What the receiver keeps per run, by UID.
struct RunGate {
    /// The SHA-256 of the run's bearer; None while its Secret could not be read, until
    /// `retry_at`.
    token: Option<[u8; 32]>,
    retry_at: Instant,
    /// The token bucket of its requests: how many it may send now, as of `refilled`.
    budget: f64,
    refilled: Instant,
}

/// How long a run whose Secret could not be read (not yet there, not the run's) is refused
/// without reading it again: a flood of bearers naming a run costs the API server one read
/// per interval.
const UNREADABLE_SECRET_RETRY: Duration = Duration::from_secs(5);
/// Runs not heard from for this long are forgotten (their bearer is read again if they
/// report again).
const FORGET_RUN_AFTER: Duration = Duration::from_secs(600);

impl Receiver {
    pub fn new(limits: Limits, sink: Option<Arc<dyn TraceSink>>) -> Arc<Self> {
        Arc::new(Self {
            limits,
            context: RwLock::default(),
            sink,
            runs: Mutex::default(),
        })
    }

    /// The controllers' context while this replica leads; None while it does not (requests
    /// are then answered 503, which exporters retry).
    pub fn set_context(&self, context: Option<Arc<Context>>) {
        *self.context.write().unwrap_or_else(PoisonError::into_inner) = context;
    }

    fn context(&self) -> Option<Arc<Context>> {
        self.context
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `POST /v1/traces`.
pub fn router(receiver: Arc<Receiver>) -> Router {
    Router::new()
        .route(TRACES_PATH, post(traces))
        .with_state(receiver)
}

/// A refusal: its status and a body that says why.
struct Refused(StatusCode, String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let mut response = (self.0, self.1).into_response();
        if self.0 == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

async fn traces(State(receiver): State<Arc<Receiver>>, request: Request) -> Response {
    match receive(&receiver, request).await {
        Ok(response) => response,
        Err(refused) => refused.into_response(),
    }
}

async fn receive(receiver: &Receiver, request: Request) -> Result<Response, Refused> {
    let (parts, body) = request.into_parts();
    let token = bearer(&parts.headers).ok_or_else(|| {
        Refused(
            StatusCode::UNAUTHORIZED,
            "no bearer: the operator gives each run's agent OTEL_EXPORTER_OTLP_HEADERS with its own".into(),
        )
    })?;
    let ctx = receiver.context().ok_or_else(|| {
        Refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "this replica does not lead; retry".into(),
        )
    })?;
    let run = authenticate(receiver, &ctx, &token).await?;
    let name = format!(
        "{}/{}",
        run.metadata.namespace.as_deref().unwrap_or_default(),
        run.metadata.name.as_deref().unwrap_or_default()
    );
    if finished_before(&run, receiver.limits.finished_grace) {
        return Err(Refused(
            StatusCode::FORBIDDEN,
            format!(
                "run {name} finished more than {}s ago; its traces are no longer taken",
                receiver.limits.finished_grace.as_secs()
            ),
        ));
    }
    let uid = run.metadata.uid.clone().unwrap_or_default();
    if !receiver.spend(&uid) {
        return Err(Refused(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "run {name} sent more than {} requests per second; retry later",
                receiver.limits.requests_per_second
            ),
        ));
    }
    let encoding = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(Encoding::from_content_type)
        .ok_or_else(|| {
            Refused(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send application/x-protobuf or application/json".into(),
            )
        })?;
    let limits = receiver.limits;
    let bytes = read_body(body, limits.max_body_bytes).await?;
    let content_encoding = parts
        .headers
        .get(header::CONTENT_ENCODING)
        .and_then(|value| value.to_str().ok());
    let mut request =
        agentic_otlp::decode(&bytes, encoding, content_encoding, limits.max_decoded_bytes)
            .map_err(|error| match error {
                agentic_otlp::DecodeError::TooLarge { limit } => Refused(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the decompressed body is over {limit} bytes"),
                ),
                other => Refused(StatusCode::BAD_REQUEST, other.to_string()),
            })?;
    let spans = agentic_otlp::span_count(&request);
    if spans > limits.max_spans {
        return Err(Refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{spans} spans in one request, over the limit of {}; send smaller batches",
                limits.max_spans
            ),
        ));
    }
    // Message content goes here, before anything else sees the request.
    let loads = agentic_otlp::take_skill_loads(&mut request);
    ctx.kind_state::<SkillUsage>()
        .add(&run, &loads, &ctx.metrics);
    if let Some(sink) = &receiver.sink {
        let reporting = ReportingRun {
            namespace: run.metadata.namespace.clone().unwrap_or_default(),
            name: run.metadata.name.clone().unwrap_or_default(),
            uid,
            skills: run
                .status
                .as_ref()
                .map(|s| s.skills.clone())
                .unwrap_or_default(),
        };
        sink.accept(&reporting, request, &loads);
    }
    // An empty ExportTraceServiceResponse: no bytes in protobuf, `{}` in JSON.
    Ok(match encoding {
        Encoding::Protobuf => (
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            Vec::new(),
        )
            .into_response(),
        Encoding::Json => ([(header::CONTENT_TYPE, "application/json")], "{}").into_response(),
    })
}

/// The bearer of `Authorization: Bearer <token>` (the scheme in any case); also with the
/// space left percent-encoded, as an exporter that does not decode its header list sends it.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ').or_else(|| value.split_once("%20"))?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

async fn read_body(body: Body, limit: usize) -> Result<bytes::Bytes, Refused> {
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        Refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {limit} bytes, or was cut short"),
        )
    })
}

/// The run `token` belongs to, from the watch cache by the name it carries, when the
/// token is that run's.
async fn authenticate(
    receiver: &Receiver,
    ctx: &Context,
    token: &str,
) -> Result<AgentRun, Refused> {
    let unknown = || Refused(StatusCode::UNAUTHORIZED, "the bearer is not a run's".into());
    let (namespace, name) = run_of_token(token).ok_or_else(unknown)?;
    let caches = ctx.caches(namespace).ok_or_else(unknown)?;
    let cached = caches
        .of::<AgentRun>()
        .and_then(|runs| runs.get(&ObjectRef::new(name).within(namespace)));
    let run = match cached {
        Some(cached) => cached.0.as_ref().map_err(|_| unknown())?.clone(),
        // A finished run is cached as a compact entry: one reporting as it ends (within
        // the grace after it) is read whole.
        None if caches
            .finished_runs
            .as_ref()
            .is_some_and(|finished| finished.contains(namespace, name)) =>
        {
            let runs: Api<AgentRun> = Api::namespaced(ctx.client.clone(), namespace);
            runs.get_opt(name)
                .await
                .ok()
                .flatten()
                .ok_or_else(unknown)?
        }
        None => return Err(unknown()),
    };
    let uid = run.metadata.uid.clone().ok_or_else(unknown)?;
    let expected = match receiver.known_token(&uid) {
        Known::Hash(hash) => hash,
        Known::Unreadable => return Err(unknown()),
        Known::Unknown => {
            let hash = read_token(ctx, &run, &uid).await;
            receiver.remember_token(&uid, hash);
            hash.ok_or_else(unknown)?
        }
    };
    if Sha256::digest(token.as_bytes()).as_slice() != expected {
        return Err(unknown());
    }
    Ok(run)
}

enum Known {
    Hash([u8; 32]),
    Unreadable,
    Unknown,
}

impl Receiver {
    fn known_token(&self, uid: &str) -> Known {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        match runs.get(uid) {
            Some(RunGate {
                token: Some(hash), ..
            }) => Known::Hash(*hash),
            Some(gate) if Instant::now() < gate.retry_at => Known::Unreadable,
            _ => Known::Unknown,
        }
    }

    fn remember_token(&self, uid: &str, token: Option<[u8; 32]>) {
        let now = Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if !runs.contains_key(uid) {
            runs.retain(|_, gate| now.duration_since(gate.refilled) < FORGET_RUN_AFTER);
        }
        let burst = f64::from(self.limits.requests_per_second) * 2.0;
        let gate = runs.entry(uid.to_owned()).or_insert(RunGate {
            token: None,
            retry_at: now,
            budget: burst,
            refilled: now,
        });
        gate.token = token;
        gate.retry_at = now + UNREADABLE_SECRET_RETRY;
    }

    /// Takes one request from the run's budget; false when it has none left.
    fn spend(&self, uid: &str) -> bool {
        let now = Instant::now();
        let rate = f64::from(self.limits.requests_per_second);
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(gate) = runs.get_mut(uid) else {
            return false;
        };
        gate.budget =
            (gate.budget + now.duration_since(gate.refilled).as_secs_f64() * rate).min(rate * 2.0);
        gate.refilled = now;
        if gate.budget < 1.0 {
            return false;
        }
        gate.budget -= 1.0;
        true
    }
}

/// The SHA-256 of the bearer in the run's Secret, when the run controls that Secret.
async fn read_token(ctx: &Context, run: &AgentRun, uid: &str) -> Option<[u8; 32]> {
    let namespace = run.metadata.namespace.as_deref()?;
    let sandbox = run
        .status
        .as_ref()
        .and_then(|s| s.sandbox_name.clone())
        .unwrap_or_else(|| sandbox_name(run.metadata.name.as_deref().unwrap_or_default()));
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = match secrets.get_opt(&acp_secret_name(&sandbox)).await {
        Ok(secret) => secret?,
        Err(error) => {
            tracing::warn!(namespace, run = ?run.metadata.name, error = %Chain(&error), "cannot read a run's Secret to check its trace bearer");
            return None;
        }
    };
    if !is_controlled_by(&secret.metadata, uid) {
        return None;
    }
    let token = secret.data?.remove(OTLP_TOKEN_KEY)?;
    Some(Sha256::digest(&token.0).into())
}

/// Whether `run` finished longer than `grace` ago.
fn finished_before(run: &AgentRun, grace: Duration) -> bool {
    let Some(status) = &run.status else {
        return false;
    };
    if !status.phase.is_some_and(AgentRunPhase::is_finished) {
        return false;
    }
    let Some(completed) = &status.completion_time else {
        return false;
    };
    let since = k8s_openapi::jiff::Timestamp::now().duration_since(completed.0);
    since.as_secs() > i64::try_from(grace.as_secs()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_is_read_from_either_spelling_of_the_header() {
        let headers = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert_eq!(bearer(&headers("Bearer ns/r/x")).as_deref(), Some("ns/r/x"));
        assert_eq!(
            bearer(&headers("bearer%20ns/r/x")).as_deref(),
            Some("ns/r/x")
        );
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&headers("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn a_runs_budget_refills_at_its_rate_and_allows_a_burst() {
        let receiver = Receiver::new(
            Limits {
                requests_per_second: 2,
                ..Limits::default()
            },
            None,
        );
        assert!(
            !receiver.spend("uid"),
            "an unauthenticated run has no budget"
        );
        receiver.remember_token("uid", Some([0; 32]));
        let spent = (0..10).take_while(|_| receiver.spend("uid")).count();
        assert_eq!(spent, 4, "a burst of twice the rate");
        assert!(!receiver.spend("uid"));
    }

    #[test]
    fn a_run_is_refused_only_past_the_grace_after_its_end() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut run = AgentRun::new("r", agentic_api::AgentRunSpec::default());
        let grace = Duration::from_secs(60);
        assert!(!finished_before(&run, grace));
        let ended = |seconds_ago: i64| agentic_api::AgentRunStatus {
            phase: Some(AgentRunPhase::Succeeded),
            completion_time: Some(Time(
                k8s_openapi::jiff::Timestamp::now()
                    - k8s_openapi::jiff::SignedDuration::from_secs(seconds_ago),
            )),
            ..Default::default()
        };
        run.status = Some(ended(10));
        assert!(!finished_before(&run, grace));
        run.status = Some(ended(120));
        assert!(finished_before(&run, grace));
    }
}
