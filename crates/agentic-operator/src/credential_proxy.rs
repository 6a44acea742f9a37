//! The credential proxy: `agentic-operator credential-proxy`, the native sidecar of a
//! sandbox whose Gateway's key is kept from the agent (ADR 0010, `docs/pod-contract.md`).
//!
//! It listens on loopback, takes plain HTTP requests for the Gateway's endpoint, removes any
//! credential the agent sent, adds the key (bearer or Anthropic headers, as the Gateway check
//! sends them) and forwards the request to the endpoint, streaming the answer back as it
//! arrives. It forwards to that endpoint only: a request for another host (a proxy request
//! in absolute form, another `Host`), `CONNECT`, or a path outside the endpoint's is refused.
//! The key is read from its file at every request, so a rotated Secret is used as soon as
//! the kubelet has written it, without a restart. Nothing it logs holds a header or a body.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_core::gateway::{ANTHROPIC_VERSION, AuthStyle, models_url};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::error::Chain;

/// The largest request body forwarded by default: far above a long conversation with tool
/// results (a 200,000-token context is under 1 MB of JSON), small enough that a runaway agent
/// cannot fill the sidecar's memory.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// How long connecting to the endpoint may take. An answer may take as long as the model
/// needs (a stream can last minutes), so reads are not bounded.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest key file read: an API key is a header value, not a document.
const MAX_KEY_BYTES: u64 = 16 * 1024;

/// Headers that describe one connection, not the request (RFC 9110 section 7.6.1), or that
/// the client sets itself; never forwarded either way.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];
/// Credentials an agent may send on its own (its placeholder, or a key it found): removed, so
/// only the Gateway's key reaches the endpoint.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

/// What the proxy is told on its command line.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Where it listens: a loopback address.
    pub listen: SocketAddr,
    /// The Gateway's `spec.endpoint`.
    pub upstream: String,
    /// How the key goes into a request.
    pub auth: AuthStyle,
    /// The key's file, from the Gateway's Secret.
    pub key_file: PathBuf,
    /// The largest request body forwarded.
    pub max_request_bytes: usize,
}

/// The endpoint requests go to: its origin (`https://host:port`) and its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    origin: String,
    base_path: String,
}

impl Upstream {
    /// The endpoint of `endpoint`, or why the proxy cannot forward to it (the Gateway check's
    /// rules: http or https, a host, no user name, query or fragment).
    pub fn parse(endpoint: &str) -> Result<Self, String> {
        models_url(endpoint).map_err(|problem| format!("--upstream {endpoint:?} {problem}"))?;
        let (scheme, rest) = endpoint
            .split_once("://")
            .ok_or_else(|| format!("--upstream {endpoint:?} has no scheme"))?;
        let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
        Ok(Upstream {
            origin: format!("{}://{authority}", scheme.to_ascii_lowercase()),
            base_path: path.trim_end_matches('/').to_string(),
        })
    }

    /// The endpoint's URL for a request to `path_and_query`, or why it is refused: a path
    /// outside the endpoint's, or one with `.` or `..` segments that could leave it.
    pub fn url_for(&self, path_and_query: &str) -> Result<String, Refusal> {
        let path = path_and_query.split('?').next().unwrap_or_default();
        let escapes = path.split('/').any(|segment| {
            let segment = segment.to_ascii_lowercase().replace("%2e", ".");
            segment == "." || segment == ".."
        });
        let inside = path == self.base_path
            || path
                .strip_prefix(&self.base_path)
                .is_some_and(|rest| rest.starts_with('/'));
        if escapes || !inside || !path.starts_with('/') {
            return Err(Refusal::OutsideEndpoint);
        }
        Ok(format!("{}{path_and_query}", self.origin))
    }
}

/// Why a request is not forwarded; the answer says it, and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `CONNECT`: the proxy opens no tunnels.
    Connect,
    /// A request for another host: a proxy request in absolute form, or another `Host`.
    OtherHost,
    /// A path outside the Gateway's endpoint.
    OutsideEndpoint,
    /// A body over the bound.
    TooLarge,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::Connect => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::OtherHost => StatusCode::FORBIDDEN,
            Refusal::OutsideEndpoint => StatusCode::NOT_FOUND,
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    fn message(self, max_request_bytes: usize) -> String {
        match self {
            Refusal::Connect => {
                "credential-proxy: CONNECT is refused; this proxy forwards to the Gateway's endpoint only\n".to_string()
            }
            Refusal::OtherHost => {
                "credential-proxy: requests for other hosts are refused; this proxy forwards to the Gateway's endpoint only\n".to_string()
            }
            Refusal::OutsideEndpoint => {
                "credential-proxy: the path is outside the Gateway's endpoint\n".to_string()
            }
            Refusal::TooLarge => {
                format!("credential-proxy: request bodies are limited to {max_request_bytes} bytes\n")
            }
        }
    }
}

/// Whether a request is for the proxy itself: not `CONNECT`, in origin form (or absolute
/// form naming the proxy's own address), with a `Host` that names the proxy (loopback at its
/// port). Anything else would make it an open proxy with a key.
pub fn check_target(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    listen: SocketAddr,
) -> Result<(), Refusal> {
    if method == Method::CONNECT {
        return Err(Refusal::Connect);
    }
    let own = |authority: &str| is_own_authority(authority, listen);
    if let Some(authority) = uri.authority()
        && !own(authority.as_str())
    {
        return Err(Refusal::OtherHost);
    }
    match headers.get(header::HOST).map(HeaderValue::to_str) {
        None => Ok(()),
        Some(Ok(host)) if own(host) => Ok(()),
        Some(_) => Err(Refusal::OtherHost),
    }
}

/// `authority` names loopback at the proxy's port.
fn is_own_authority(authority: &str, listen: SocketAddr) -> bool {
    let Some((host, port)) = authority.rsplit_once(':') else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback && port.parse::<u16>() == Ok(listen.port())
}

/// The headers sent to the endpoint: the agent's, less hop-by-hop headers, `Host` and every
/// credential it sent, plus the key as `auth` wants it. Values that carry the key are marked
/// sensitive, so no `Debug` prints them.
pub fn upstream_headers(
    inbound: &HeaderMap,
    auth: AuthStyle,
    key: &str,
) -> Result<HeaderMap, KeyError> {
    let mut headers = HeaderMap::new();
    for (name, value) in inbound {
        let name_str = name.as_str();
        if HOP_BY_HOP.contains(&name_str)
            || CREDENTIAL_HEADERS.contains(&name_str)
            || name == header::HOST
            || name == header::CONTENT_LENGTH
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    let sensitive = |text: &str| {
        let mut value = HeaderValue::from_str(text).map_err(|_| KeyError::NotAHeaderValue)?;
        value.set_sensitive(true);
        Ok(value)
    };
    if key.is_empty() || key.chars().any(char::is_control) {
        return Err(KeyError::NotAHeaderValue);
    }
    match auth {
        AuthStyle::Bearer => {
            headers.insert(header::AUTHORIZATION, sensitive(&format!("Bearer {key}"))?);
        }
        AuthStyle::Anthropic => {
            headers.insert(HeaderName::from_static("x-api-key"), sensitive(key)?);
            headers
                .entry(HeaderName::from_static("anthropic-version"))
                .or_insert(HeaderValue::from_static(ANTHROPIC_VERSION));
        }
    }
    Ok(headers)
}

/// Why the key cannot be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The file is missing or unreadable (the Secret lacks the key, or it is too large).
    Unreadable,
    /// It is empty, not UTF-8, or holds control characters (a trailing newline?).
    NotAHeaderValue,
}

/// The key, read from its file now: a rotated Secret is used from the next request on.
async fn read_key(path: &Path) -> Result<String, KeyError> {
    use tokio::io::AsyncReadExt as _;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|_| KeyError::Unreadable)?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|_| KeyError::Unreadable)?;
    if bytes.len() as u64 > MAX_KEY_BYTES {
        return Err(KeyError::Unreadable);
    }
    String::from_utf8(bytes).map_err(|_| KeyError::NotAHeaderValue)
}

/// The headers of the endpoint's answer passed back to the agent: all but hop-by-hop ones.
fn downstream_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in upstream {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// The running proxy's state, shared by its requests.
struct Proxy {
    config: ProxyConfig,
    upstream: Upstream,
    client: reqwest::Client,
}

/// Binds `config.listen` and serves until `shutdown` resolves.
pub async fn serve(
    config: ProxyConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", config.listen))?;
    serve_on(listener, config, shutdown).await
}

/// Serves on `listener` (bound to `config.listen`) until `shutdown` resolves.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    config: ProxyConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    if !config.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {} is not a loopback address: the proxy adds a key to what it forwards, so only its pod may reach it",
            config.listen
        ));
    }
    let upstream = Upstream::parse(&config.upstream)?;
    // The workspace builds rustls with ring only; make it the process default unless the
    // program chose one already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // Straight to the endpoint: no HTTP_PROXY of the environment sees the key.
        .no_proxy()
        // The agent sees redirects; following one would send the key to wherever it leads.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("building the HTTP client: {}", Chain(&e)))?;
    tracing::info!(
        listen = %config.listen,
        upstream = %config.upstream,
        "credential proxy listening"
    );
    let proxy = Arc::new(Proxy {
        config,
        upstream,
        client,
    });
    let router = axum::Router::new().fallback(forward).with_state(proxy);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// One request: checked, its body read up to the bound, the key added, forwarded; the answer
/// streamed back as it arrives.
async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = match try_forward(&proxy, request).await {
        Ok(response) => response,
        Err((status, message)) => (status, message).into_response(),
    };
    // Method, path (no query: some APIs take keys there), status and time; never a header
    // or a body.
    tracing::info!(
        %method,
        %path,
        status = response.status().as_u16(),
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "forwarded"
    );
    response
}

async fn try_forward(proxy: &Proxy, request: Request) -> Result<Response, (StatusCode, String)> {
    let max = proxy.config.max_request_bytes;
    let refuse = |refusal: Refusal| (refusal.status(), refusal.message(max));
    let (parts, body) = request.into_parts();
    check_target(
        &parts.method,
        &parts.uri,
        &parts.headers,
        proxy.config.listen,
    )
    .map_err(refuse)?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let url = proxy.upstream.url_for(&path_and_query).map_err(refuse)?;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(refuse(Refusal::TooLarge));
    }
    // Requests are small and whole before a model answers; only answers stream.
    let body = axum::body::to_bytes(body, max)
        .await
        .map_err(|_| refuse(Refusal::TooLarge))?;
    let key = read_key(&proxy.config.key_file).await;
    let headers = key
        .and_then(|key| upstream_headers(&parts.headers, proxy.config.auth, &key))
        .map_err(|error| {
            let why = match error {
                KeyError::Unreadable => "cannot be read",
                KeyError::NotAHeaderValue => {
                    "is empty, not UTF-8 or holds control characters (a trailing newline?)"
                }
            };
            tracing::error!("the key file {why}; answering 502");
            (
                StatusCode::BAD_GATEWAY,
                format!("credential-proxy: the Gateway's key {why}\n"),
            )
        })?;
    let answer = proxy
        .client
        .request(parts.method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|error| {
            let why = if error.is_connect() {
                "no connection to the Gateway's endpoint"
            } else if error.is_timeout() {
                "the Gateway's endpoint did not answer in time"
            } else {
                "the request to the Gateway's endpoint failed"
            };
            tracing::warn!(error = %Chain(&error), "{why}");
            (
                StatusCode::BAD_GATEWAY,
                format!("credential-proxy: {why}\n"),
            )
        })?;
    let answer: axum::http::Response<reqwest::Body> = answer.into();
    let (mut answer_parts, answer_body) = answer.into_parts();
    answer_parts.headers = downstream_headers(&answer_parts.headers);
    Ok(Response::from_parts(answer_parts, Body::new(answer_body)))
}

#[cfg(test)]
mod tests;
