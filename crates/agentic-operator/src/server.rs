//! The health and metrics endpoints.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::controllers::Readiness;
use crate::error::Chain;
use crate::metrics::Metrics;

/// `/healthz` answers while the process runs; `/readyz` once every watch has listed, or while
/// the replica waits for leadership, and never while a CRD the controllers need is missing
/// or a controller's watches keep failing (it names them).
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
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
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
    Ok(bound)
}
