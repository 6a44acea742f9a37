//! Jaeger (the collector-based `cmd/jaeger`, `hack/install-jaeger.sh`) on loopback: a real
//! trace backend standing in for a user's collector. It takes OTLP/HTTP and answers its HTTP
//! query API; traces are kept in memory and go with the process.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::net::{BIND_ATTEMPTS, free_port, http_get, http_get_status, port_taken};
use crate::supervisor::Supervisor;
use crate::wait_for;

/// Environment variable naming the Jaeger binary (`hack/install-jaeger.sh | tail -n1`).
pub const JAEGER_BIN_ENV: &str = "JAEGER_BIN";

const NAME: &str = "jaeger";
/// A collector pipeline starts in about a second; a busy 2-core machine gets more.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The traces the in-memory store keeps.
const MAX_TRACES: usize = 10_000;
/// How many traces a search returns at most; under the store's `max_traces` (see [`config`]).
const SEARCH_DEPTH: usize = 1_000;

/// A Jaeger process with an OTLP/HTTP receiver and the query API, each on a free loopback
/// port, and in-memory storage. Stopped when dropped, and when the test process dies without
/// dropping it (see the crate docs).
pub struct Jaeger {
    otlp: SocketAddr,
    query: SocketAddr,
    supervisor: Supervisor,
}

impl Jaeger {
    /// Starts Jaeger and waits until both its query API and its OTLP receiver answer.
    pub async fn start() -> Result<Jaeger> {
        let binary = jaeger_binary()?;
        let mut supervisor = Supervisor::new("agentic-jaeger-")?;
        let config_path = supervisor.dir().join("jaeger.yaml");
        let mut attempt = 1;
        loop {
            let otlp = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            let query = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            let query_grpc = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            std::fs::write(&config_path, config(otlp, query, query_grpc))
                .map_err(Error::io("writing", &config_path))?;
            let mut command = Command::new(&binary);
            command.arg("--config").arg(&config_path);
            // Keep the collector from picking up settings meant for the code under test.
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("OTEL_") {
                    command.env_remove(key);
                }
            }
            supervisor.spawn(NAME, command)?;
            let ready = wait_for(
                &mut supervisor,
                NAME,
                format!("jaeger (OTLP/HTTP at {otlp}, query at {query})"),
                READY_TIMEOUT,
                // The receiver answers a GET of its traces path (405) once it listens.
                || async {
                    http_get_status(query, "/api/v3/services").await == Some(200)
                        && http_get_status(otlp, "/v1/traces").await.is_some()
                },
            )
            .await;
            match ready {
                Ok(()) => {
                    tracing::info!(%otlp, %query, "jaeger ready");
                    return Ok(Jaeger {
                        otlp,
                        query,
                        supervisor,
                    });
                }
                // One of the free ports was taken before Jaeger bound it: take others.
                Err(error) if attempt < BIND_ATTEMPTS && port_taken(&error) => {
                    tracing::debug!(attempt, "a port of jaeger's was taken; retrying");
                    supervisor.stop(NAME);
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The OTLP/HTTP endpoint, `http://127.0.0.1:PORT` (an exporter appends `/v1/traces`).
    pub fn otlp_endpoint(&self) -> String {
        format!("http://{}", self.otlp)
    }

    /// The query API's address (`/api/v3/traces/<id>`, `/api/v3/services`).
    pub fn query_addr(&self) -> SocketAddr {
        self.query
    }

    /// The trace `trace_id` (32 hex digits) as the query API returns it (OTLP JSON under
    /// `result`), or `None` while Jaeger has none of its spans.
    pub async fn trace(&self, trace_id: &str) -> Result<Option<serde_json::Value>> {
        self.query_json(&format!("/api/v3/traces/{trace_id}")).await
    }

    /// The query API's JSON answer at `path`, `None` for its 404 (nothing found).
    async fn query_json(&self, path: &str) -> Result<Option<serde_json::Value>> {
        let (code, body) = http_get(self.query, path)
            .await
            .map_err(Error::io("querying jaeger at", self.query.to_string()))?;
        match code {
            200 => serde_json::from_str(&body).map(Some).map_err(|e| {
                Error::UnexpectedResponse(format!("jaeger's {path} is not JSON ({e}): {body}"))
            }),
            404 => Ok(None),
            _ => Err(Error::UnexpectedResponse(format!(
                "jaeger's {path} answered {code}: {body}"
            ))),
        }
    }

    /// Every trace holding a span of the service `service` (`service.name`), as the query API
    /// returns them (their spans together, OTLP JSON under `result`), or `None` while there
    /// is none.
    pub async fn traces_of_service(&self, service: &str) -> Result<Option<serde_json::Value>> {
        // The search needs a time window and a depth under the store's `max_traces`.
        let path = format!(
            "/api/v3/traces?query.service_name={service}&query.start_time_min=1970-01-01T00:00:00Z\
             &query.start_time_max=9999-12-31T00:00:00Z&query.num_traces={SEARCH_DEPTH}"
        );
        self.query_json(&path).await
    }

    /// Pids of the processes this Jaeger started (Jaeger and its watchdog).
    pub fn pids(&self) -> Vec<u32> {
        self.supervisor.pids()
    }
}

impl std::fmt::Debug for Jaeger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jaeger")
            .field("otlp", &self.otlp)
            .field("query", &self.query)
            .field("work_dir", &self.supervisor.dir())
            .finish()
    }
}

fn jaeger_binary() -> Result<PathBuf> {
    let path = std::env::var_os(JAEGER_BIN_ENV).map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => Ok(path),
        path => Err(Error::BinaryMissing {
            name: "jaeger",
            path: path.unwrap_or_default(),
            hint: "run `make test`, or set JAEGER_BIN=\"$(hack/install-jaeger.sh | tail -n1)\"",
        }),
    }
}

/// The collector configuration: OTLP/HTTP in, straight to memory (no batching, so a span is
/// queryable once its request is answered), the query API on loopback, no telemetry of its
/// own (its metrics server would bind a fixed port). JSON is valid YAML.
fn config(otlp: SocketAddr, query: SocketAddr, query_grpc: SocketAddr) -> String {
    serde_json::json!({
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": { "receivers": ["otlp"], "exporters": ["jaeger_storage_exporter"] },
            },
            "telemetry": { "metrics": { "level": "none" }, "logs": { "level": "warn" } },
        },
        "extensions": {
            "jaeger_storage": { "backends": { "memstore": { "memory": { "max_traces": MAX_TRACES } } } },
            "jaeger_query": {
                "storage": { "traces": "memstore" },
                "http": { "endpoint": query.to_string() },
                "grpc": { "endpoint": query_grpc.to_string() },
            },
        },
        "receivers": {
            "otlp": { "protocols": { "http": { "endpoint": otlp.to_string() } } },
        },
        "exporters": { "jaeger_storage_exporter": { "trace_storage": "memstore" } },
    })
    .to_string()
}
