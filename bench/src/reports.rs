//! Skill-load reports (`--report-loads`): what a harness that reports its skill loads costs a
//! run (issue #34). The operator serves its OTLP receiver on loopback; once the runs have
//! their sandboxes, the bench stands in for each run's agent and posts one OTLP/HTTP request
//! (protobuf, as goose sends it) with a `load_skill` span for each of the Agent's three
//! skills, with the run's own bearer from its ACP Secret. A run's report is done when its
//! status counts the three loads.

use std::time::{SystemTime, UNIX_EPOCH};

use agentic_core::names::{acp_secret_name, sandbox_name};
use agentic_core::sandbox::OTLP_TOKEN_KEY;
use agentic_fixtures::{load_skill_span, otlp_string};
use agentic_otlp::ExportTraceServiceRequest;
use agentic_otlp::resource::v1::Resource;
use agentic_otlp::trace::v1::{ResourceSpans, ScopeSpans, Span};
use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use prost::Message as _;

/// The operator's arguments for a round with reports: the receiver on a free loopback port
/// (the address pods would be told is never used: no pod runs).
pub const OPERATOR_ARGS: [&str; 2] = [
    "--otlp-bind-address=127.0.0.1:0",
    "--otlp-advertised-address=http://127.0.0.1:4318",
];

/// The line the operator logs with the receiver's address, and its field.
pub const RECEIVER_LOG: (&str, &str) = ("serving the OTLP trace receiver", "otlp");

/// Posts each run's report to the receiver at `receiver` (`IP:PORT`), `concurrency` at a
/// time. Each run's bearer is read from its Secret: one GET per run, which the caller
/// subtracts from the operator's reads.
pub async fn post_all(
    client: &Client,
    ns: &str,
    receiver: &str,
    runs: &[String],
    skills: &[&str],
    concurrency: usize,
) -> anyhow::Result<()> {
    // reqwest is built without a crypto provider of its own; the process's is ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build()?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let url = format!("http://{receiver}/v1/traces");
    futures::stream::iter(runs.iter().enumerate())
        .map(|(i, run)| {
            let (http, secrets, url) = (&http, &secrets, &url);
            async move {
                let secret = secrets.get(&acp_secret_name(&sandbox_name(run))).await?;
                let bearer = secret
                    .data
                    .as_ref()
                    .and_then(|data| data.get(OTLP_TOKEN_KEY))
                    .with_context(|| format!("run {run}'s Secret has no {OTLP_TOKEN_KEY}"))?;
                let bearer = std::str::from_utf8(&bearer.0)?;
                let response = http
                    .post(url)
                    .bearer_auth(bearer)
                    .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(loads_request(i, skills).encode_to_vec())
                    .send()
                    .await?;
                if !response.status().is_success() {
                    let status = response.status();
                    bail!(
                        "the receiver refused run {run}'s report: {status} {}",
                        response.text().await.unwrap_or_default()
                    );
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await
}

/// What goose sends for its loads of `skills`: one `execute_tool load_skill` span each, the
/// skill named in the tool's arguments, in a trace of its own (`run` makes the ids unique).
fn loads_request(run: usize, skills: &[&str]) -> ExportTraceServiceRequest {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let mut trace_id = [0xb0; 16];
    trace_id[..8].copy_from_slice(&(run as u64).to_be_bytes());
    let spans = skills
        .iter()
        .zip(1u64..)
        .map(|(skill, n)| Span {
            start_time_unix_nano: now,
            end_time_unix_nano: now + 1_000_000,
            ..load_skill_span(trace_id.to_vec(), n.to_be_bytes().to_vec(), skill)
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![otlp_string("service.name", "goose")],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}
