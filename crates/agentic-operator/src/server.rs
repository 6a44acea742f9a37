//! The health and metrics endpoints, and the authentication, authorization and TLS of
//! `/metrics` with `--metrics-secure`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::Listener;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::controllers::Readiness;
use crate::error::Chain;
use crate::metrics::Metrics;

/// `/healthz` answers while the process runs; `/readyz` once every watch has listed, or while
/// the replica waits for leadership, and never while a CRD the controllers need is missing
/// or the watches of a kind keep failing (it names them).
pub fn health_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> impl IntoResponse {
    let missing = readiness.missing_crds();
    let broken = readiness.broken_watches();
    if !missing.is_empty() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("CRDs not installed: {}", missing.join(", ")),
        )
    } else if readiness.is_standby() {
        (StatusCode::OK, "standby: waiting for leadership".to_owned())
    } else if !broken.is_empty() {
        let broken: Vec<String> = broken.iter().map(ToString::to_string).collect();
        (StatusCode::SERVICE_UNAVAILABLE, broken.join("\n"))
    } else if readiness.is_ready() {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "watches have not listed yet".to_owned(),
        )
    }
}

/// `/metrics` in the Prometheus text format.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .with_state(metrics)
}

async fn render_metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

/// Binds `addr` now (so callers learn a port chosen by the OS) and serves in the background.
pub async fn spawn(
    addr: SocketAddr,
    router: Router,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    serve(listener, bound, router, shutdown);
    Ok(bound)
}

fn serve<L>(listener: L, bound: SocketAddr, router: Router, mut shutdown: watch::Receiver<bool>)
where
    L: Listener<Addr = SocketAddr>,
{
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(%bound, error = %Chain(&e), "HTTP server failed");
        }
    });
}

/// `/metrics` over TLS for callers whose bearer token the API server authenticates (a
/// TokenReview) and authorizes to `get` the non-resource URL `/metrics` (a
/// SubjectAccessReview), as controller-runtime's `WithAuthenticationAndAuthorization` does.
#[derive(Clone, Debug, Default)]
pub struct SecureMetrics {
    /// PEM files of the certificate chain and of its private key; None generates a
    /// self-signed certificate at start.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
}

impl SecureMetrics {
    /// The TLS configuration: the given certificate, or a fresh self-signed one.
    pub fn tls_config(&self) -> anyhow::Result<rustls::ServerConfig> {
        let (chain, key) = match &self.cert_and_key {
            Some((cert, key)) => {
                let read = |path: &PathBuf| {
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
                };
                let chain = CertificateDer::pem_slice_iter(&read(cert)?)
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("{} is not a PEM certificate", cert.display()))?;
                anyhow::ensure!(
                    !chain.is_empty(),
                    "{} holds no PEM certificate",
                    cert.display()
                );
                let private_key = PrivateKeyDer::from_pem_slice(&read(key)?)
                    .with_context(|| format!("{} is not a PEM private key", key.display()))?;
                (chain, private_key)
            }
            None => {
                let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                    .context("generating a self-signed certificate for /metrics")?;
                let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                    .map_err(|e| anyhow::anyhow!("the generated key does not encode: {e}"))?;
                (vec![generated.cert.der().clone()], key)
            }
        };
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the /metrics certificate does not match its key")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Like [`spawn`], over TLS with `tls`. Handshakes run apart from the accept loop, so a slow
/// or silent client holds up no one else.
pub async fn spawn_tls(
    addr: SocketAddr,
    router: Router,
    tls: rustls::ServerConfig,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let (handshaken, accepted) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(%bound, error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                // The server has stopped and dropped its end.
                () = handshaken.closed() => return,
            };
            let (acceptor, handshaken) = (acceptor.clone(), handshaken.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = handshaken.send((stream, peer)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    serve(TlsListener { bound, accepted }, bound, router, shutdown);
    Ok(bound)
}

/// The connections whose TLS handshake has finished, for `axum::serve`.
struct TlsListener {
    bound: SocketAddr,
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends after this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.bound)
    }
}

/// `/metrics` behind [`MetricsAuth`].
pub fn secure_metrics_router(metrics: Arc<Metrics>, client: kube::Client) -> Router {
    metrics_router(metrics).layer(axum::middleware::from_fn_with_state(
        Arc::new(MetricsAuth::new(client)),
        authorize,
    ))
}

/// How long a review's outcome is reused: a scrape every 15 s costs one TokenReview and one
/// SubjectAccessReview a minute per token, and a revoked binding takes effect within it.
pub const DECISION_TTL: Duration = Duration::from_secs(60);
/// The most tokens remembered; beyond it expired ones are forgotten, then all.
const MAX_DECISIONS: usize = 1024;

/// What the API server said of a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The TokenReview did not authenticate it.
    Unauthenticated,
    /// Authenticated as `user`, who may not `get` `/metrics`.
    Forbidden {
        user: String,
    },
    Allowed,
}

/// Recent decisions by the SHA-256 of their token (the tokens themselves are not kept).
#[derive(Default)]
pub struct DecisionCache {
    decisions: Mutex<HashMap<[u8; 32], (Decision, Instant)>>,
}

impl DecisionCache {
    fn key(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    /// The decision on `token` made less than [`DECISION_TTL`] before `now`.
    pub fn get(&self, token: &str, now: Instant) -> Option<Decision> {
        let decisions = self
            .decisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        decisions
            .get(&Self::key(token))
            .filter(|(_, at)| now.saturating_duration_since(*at) < DECISION_TTL)
            .map(|(decision, _)| decision.clone())
    }

    pub fn insert(&self, token: &str, decision: Decision, now: Instant) {
        let mut decisions = self
            .decisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if decisions.len() >= MAX_DECISIONS {
            decisions.retain(|_, (_, at)| now.saturating_duration_since(*at) < DECISION_TTL);
            if decisions.len() >= MAX_DECISIONS {
                decisions.clear();
            }
        }
        decisions.insert(Self::key(token), (decision, now));
    }

    pub fn len(&self) -> usize {
        self.decisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reviews bearer tokens with the API server, caching decisions for [`DECISION_TTL`].
pub struct MetricsAuth {
    client: kube::Client,
    cache: DecisionCache,
}

impl MetricsAuth {
    pub fn new(client: kube::Client) -> Self {
        MetricsAuth {
            client,
            cache: DecisionCache::default(),
        }
    }

    /// Whether `token` may read `/metrics`: from the cache, else a TokenReview and, once
    /// authenticated, a SubjectAccessReview.
    pub async fn decide(&self, token: &str) -> kube::Result<Decision> {
        if let Some(decision) = self.cache.get(token, Instant::now()) {
            return Ok(decision);
        }
        let decision = self.review(token).await?;
        self.cache.insert(token, decision.clone(), Instant::now());
        Ok(decision)
    }

    async fn review(&self, token: &str) -> kube::Result<Decision> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        let (Some(true), Some(user)) = (status.authenticated, status.user) else {
            return Ok(Decision::Unauthenticated);
        };
        let username = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        Ok(if reviewed.status.is_some_and(|status| status.allowed) {
            Decision::Allowed
        } else {
            Decision::Forbidden { user: username }
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// 401 without a valid token, 403 when its user may not `get` `/metrics`, 500 when the API
/// server cannot be asked (not cached: the next scrape asks again).
async fn authorize(State(auth): State<Arc<MetricsAuth>>, request: Request, next: Next) -> Response {
    let unauthorized = |message: &'static str| {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            message,
        )
            .into_response()
    };
    let Some(token) = bearer_token(request.headers()) else {
        return unauthorized("Unauthorized: /metrics needs an Authorization: Bearer token\n");
    };
    match auth.decide(token).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => {
            unauthorized("Unauthorized: the API server did not authenticate the token\n")
        }
        Ok(Decision::Forbidden { user }) => (
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: user \"{user}\" may not get the non-resource URL /metrics \
                 (bind it to the metrics-reader ClusterRole)\n"
            ),
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %Chain(&e), "cannot review a /metrics bearer token");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot review the token with the API server; see the operator's log\n",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_in_any_case_and_nothing_else_is() {
        let headers = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::AUTHORIZATION,
                value.parse().expect("a header value"),
            );
            headers
        };
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic YTpi")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn decisions_are_reused_for_a_minute_then_asked_again() {
        let cache = DecisionCache::default();
        let start = Instant::now();
        cache.insert("token-a", Decision::Allowed, start);
        assert_eq!(cache.get("token-a", start), Some(Decision::Allowed));
        assert_eq!(
            cache.get("token-a", start + Duration::from_secs(45)),
            Some(Decision::Allowed),
            "a scrape 15 s apart reuses the decision"
        );
        assert_eq!(cache.get("token-a", start + DECISION_TTL), None);
        assert_eq!(cache.get("token-b", start), None, "per token");
    }

    #[test]
    fn the_cache_stays_bounded() {
        let cache = DecisionCache::default();
        let start = Instant::now();
        for i in 0..MAX_DECISIONS {
            cache.insert(&format!("old-{i}"), Decision::Unauthenticated, start);
        }
        assert_eq!(cache.len(), MAX_DECISIONS);
        // Once the old ones have expired, a new token makes room by forgetting them.
        let later = start + DECISION_TTL;
        cache.insert("new", Decision::Allowed, later);
        assert_eq!(cache.len(), 1);
        // When none have expired, the cache starts over rather than grow.
        for i in 0..MAX_DECISIONS {
            cache.insert(&format!("fresh-{i}"), Decision::Allowed, later);
        }
        assert!(cache.len() <= MAX_DECISIONS, "{}", cache.len());
        assert!(!cache.is_empty());
    }

    #[test]
    fn a_self_signed_certificate_is_made_when_none_is_given() {
        let config = SecureMetrics::default()
            .tls_config()
            .expect("a self-signed configuration");
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn unreadable_or_mismatched_certificate_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let missing = SecureMetrics {
            cert_and_key: Some((cert.clone(), key.clone())),
        };
        let error = format!("{:#}", missing.tls_config().expect_err("no files"));
        assert!(error.contains("tls.crt"), "{error}");

        let one = rcgen::generate_simple_self_signed(vec!["a".to_owned()]).expect("a cert");
        let other = rcgen::generate_simple_self_signed(vec!["b".to_owned()]).expect("a cert");
        std::fs::write(&cert, one.cert.pem()).expect("write cert");
        std::fs::write(&key, other.signing_key.serialize_pem()).expect("write key");
        let error = format!("{:#}", missing.tls_config().expect_err("mismatched"));
        assert!(error.contains("does not match"), "{error}");

        std::fs::write(&key, one.signing_key.serialize_pem()).expect("write key");
        missing.tls_config().expect("a matching pair loads");
    }
}
