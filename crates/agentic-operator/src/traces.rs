//! A run's trace, exported to the user's collector (`--trace-collector`, OTLP/HTTP; off by
//! default): the operator's own spans of the run (`agentic_core::trace::run_spans`, emitted at
//! the status write that completes each) and the agent's spans from the receiver, moved into
//! the run's trace (`agentic_otlp::into_run_trace`). Both share the trace id derived from the
//! run's UID, which the run's Sandbox also carries for agent-sandbox.
//!
//! Exporting never holds up a reconcile or the receiver: requests go into a bounded queue
//! that one task sends from, and a request that finds the queue full is dropped and counted
//! (`agentic_trace_requests_dropped_total{reason="queue_full"}`), as is one the collector
//! refuses or does not answer in time (`reason="export_failed"`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use agentic_api::{AgentRun, AgentRunStatus, PinnedSkill};
use agentic_core::trace::{RunSpan, RunTrace, run_spans, skill_source_uri};
use agentic_otlp::{ExportTraceServiceRequest, MountedSource, RunTraceIds, SkillLoad};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;
use prost::Message as _;
use tokio::sync::mpsc;

use crate::metrics::{DropReason, Metrics, Observed};

/// Requests waiting for the collector. A run sends a few operator requests in its life and
/// its agent at most the receiver's request rate; this holds bursts of hundreds of runs.
pub const QUEUE_REQUESTS: usize = 1024;
/// How long the collector has to answer one request.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// `service.name` of the operator's spans.
const SERVICE_NAME: &str = "agentic-operator";

/// The export to the user's collector; see the module docs.
pub struct TraceExport {
    queue: mpsc::Sender<ExportTraceServiceRequest>,
    resource: ResourceAttributesWithSchema,
    scope: InstrumentationScope,
    metrics: Arc<Metrics>,
    /// The operator spans sent, so that a pass from a cache that lags the status it wrote
    /// does not send one again.
    sent: Mutex<Observed<([u8; 16], [u8; 8])>>,
}

impl std::fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceExport").finish_non_exhaustive()
    }
}

impl TraceExport {
    /// Starts the task that posts to `<endpoint>/v1/traces` (protobuf), on the current
    /// runtime; it ends when the export is dropped.
    pub fn start(endpoint: &str, metrics: Arc<Metrics>) -> anyhow::Result<Arc<TraceExport>> {
        Self::with_queue(endpoint, metrics, QUEUE_REQUESTS)
    }

    fn with_queue(
        endpoint: &str,
        metrics: Arc<Metrics>,
        capacity: usize,
    ) -> anyhow::Result<Arc<TraceExport>> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| anyhow::anyhow!("--trace-collector {endpoint:?} is not a URL: {e}"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https"),
            "--trace-collector {endpoint:?} is not an http:// or https:// URL"
        );
        // reqwest is built without a crypto provider of its own (an https:// collector);
        // the process's is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build()?;
        let (queue, requests) = mpsc::channel(capacity);
        metrics.trace_dropped(DropReason::QueueFull, 0);
        metrics.trace_dropped(DropReason::ExportFailed, 0);
        tokio::spawn(send(requests, client, url, Arc::clone(&metrics)));
        let resource = Resource::builder_empty()
            .with_service_name(SERVICE_NAME)
            .build();
        Ok(Arc::new(TraceExport {
            queue,
            resource: (&resource).into(),
            scope: InstrumentationScope::builder(SERVICE_NAME)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            metrics,
            sent: Mutex::default(),
        }))
    }

    /// Sends the operator's spans that the status write from `old` to `new` completed.
    pub fn run_written(&self, run: &AgentRun, old: &AgentRunStatus, new: &AgentRunStatus) {
        let Some(uid) = run.metadata.uid.as_deref() else {
            return;
        };
        let trace = RunTrace::of_run(uid);
        let spans: Vec<SpanData> = run_spans(run, old, new, &crate::now())
            .into_iter()
            .filter(|span| self.first_send(trace, span.span_id))
            .map(|span| span_data(trace, span, &self.scope))
            .collect();
        if spans.is_empty() {
            return;
        }
        self.enqueue(ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, &self.resource),
        });
    }

    /// Sends an agent's request, already scrubbed, as part of its run's trace: `loads` are
    /// the skill loads read from it, `skills` what the run mounted.
    pub fn agent_spans(
        &self,
        run_uid: &str,
        skills: &[PinnedSkill],
        mut request: ExportTraceServiceRequest,
        loads: &[SkillLoad],
    ) {
        let trace = RunTrace::of_run(run_uid);
        let mounted: Vec<MountedSource> = skills
            .iter()
            .map(|skill| MountedSource {
                name: skill.name.clone(),
                source_uri: skill_source_uri(skill),
            })
            .collect();
        agentic_otlp::into_run_trace(
            &mut request,
            RunTraceIds {
                trace_id: trace.trace_id(),
                root_span_id: trace.root_span_id(),
            },
            loads,
            &mounted,
        );
        self.enqueue(request);
    }

    fn enqueue(&self, request: ExportTraceServiceRequest) {
        if self.queue.try_send(request).is_err() {
            self.metrics.trace_dropped(DropReason::QueueFull, 1);
        }
    }

    /// True the first time the span is asked about.
    fn first_send(&self, trace: RunTrace, span_id: [u8; 8]) -> bool {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((trace.trace_id(), span_id))
    }
}

/// The sandbox of a run that reported, as a [`TraceSink`] learns it.
#[derive(Clone, Debug)]
pub struct ReportingRun {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The skills its sandbox mounts, pinned (`status.skills`).
    pub skills: Vec<PinnedSkill>,
}

/// Where an accepted request goes once scrubbed: the hand-off to the trace forwarder. It
/// gets the request with no message content left, the run it came from (by its bearer, not
/// by what it says), and the skill loads read from it, with their span ids. It is called on
/// the request's task: one that does I/O queues the request and returns.
pub trait TraceSink: Send + Sync {
    fn accept(&self, run: &ReportingRun, request: ExportTraceServiceRequest, loads: &[SkillLoad]);
}

/// The receiver's hand-off: what a run's agent sent, scrubbed, goes to the run's trace.
impl TraceSink for TraceExport {
    fn accept(&self, run: &ReportingRun, request: ExportTraceServiceRequest, loads: &[SkillLoad]) {
        self.agent_spans(&run.uid, &run.skills, request, loads);
    }
}

/// Posts each queued request; a failure is counted and logged when the collector goes from
/// answering to not (not once per request: a collector that is down would flood the log).
async fn send(
    mut requests: mpsc::Receiver<ExportTraceServiceRequest>,
    client: reqwest::Client,
    url: String,
    metrics: Arc<Metrics>,
) {
    let mut failing = false;
    while let Some(request) = requests.recv().await {
        let sent = client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(request.encode_to_vec())
            .send()
            .await;
        let error = match sent {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("the collector answered {}", response.status())),
            Err(error) => Some(crate::error::Chain(&error).to_string()),
        };
        match error {
            None if failing => {
                failing = false;
                tracing::info!(%url, "the trace collector takes requests again");
            }
            None => {}
            Some(error) => {
                metrics.trace_dropped(DropReason::ExportFailed, 1);
                if !failing {
                    failing = true;
                    tracing::warn!(%url, %error, "exporting to the trace collector failed; dropping its requests until it answers");
                }
            }
        }
    }
}

/// An operator span in the SDK's form, for the OTLP conversion of opentelemetry-proto.
fn span_data(trace: RunTrace, span: RunSpan, scope: &InstrumentationScope) -> SpanData {
    let trace_id = TraceId::from_bytes(trace.trace_id());
    SpanData {
        span_context: SpanContext::new(
            trace_id,
            SpanId::from_bytes(span.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: span
            .parent_span_id
            .map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: span.name.into(),
        start_time: system_time(span.start_unix_nano),
        end_time: system_time(span.end_unix_nano),
        attributes: span
            .attributes
            .into_iter()
            .map(|(key, value)| KeyValue::new(key, value))
            .collect(),
        dropped_attributes_count: 0,
        events: opentelemetry_sdk::trace::SpanEvents::default(),
        links: opentelemetry_sdk::trace::SpanLinks::default(),
        status: if span.failed {
            Status::error("the run failed")
        } else {
            Status::Unset
        },
        instrumentation_scope: scope.clone(),
    }
}

fn system_time(unix_nano: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(unix_nano)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(metrics: &Metrics, reason: &str) -> String {
        let prefix = format!("agentic_trace_requests_dropped_total{{reason=\"{reason}\"}} ");
        metrics
            .encode()
            .lines()
            .find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
            .unwrap_or_else(|| panic!("no series {prefix}"))
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let metrics = Arc::new(Metrics::default());
        // Nothing listens there; the sender task does not run before this test awaits.
        let export = TraceExport::with_queue("http://127.0.0.1:9", Arc::clone(&metrics), 2)
            .expect("an export");
        assert_eq!(dropped(&metrics, "queue_full"), "0");
        for _ in 0..3 {
            export.agent_spans("uid", &[], ExportTraceServiceRequest::default(), &[]);
        }
        assert_eq!(dropped(&metrics, "queue_full"), "1");
    }

    #[test]
    fn a_collector_that_is_not_a_url_is_refused_at_start() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _entered = runtime.enter();
        let error = TraceExport::start("otel.observability:4318", Arc::new(Metrics::default()))
            .expect_err("not a URL");
        assert!(error.to_string().contains("--trace-collector"), "{error}");
    }

    #[test]
    fn operator_spans_are_sent_once_per_run_and_step() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _entered = runtime.enter();
        let export = TraceExport::start("http://127.0.0.1:9", Arc::new(Metrics::default()))
            .expect("an export");
        let trace = RunTrace::of_run("uid");
        assert!(export.first_send(trace, trace.span_id("sandbox")));
        assert!(!export.first_send(trace, trace.span_id("sandbox")));
        assert!(export.first_send(RunTrace::of_run("another"), trace.span_id("sandbox")));
    }
}
