//! A run is one trace, seen through a real trace backend: Jaeger (JAEGER_BIN, from
//! `hack/install-jaeger.sh`, which `make test` sets) as the user's collector, read back
//! through its HTTP query API.

use agentic_core::trace::RunTrace;
use agentic_testenv::Jaeger;
use serde_json::{Value, json};

/// Every span of a trace as the query API returns it (`result.resourceSpans[].scopeSpans[]
/// .spans[]`).
fn spans(trace: &Value) -> Vec<&Value> {
    let mut spans = Vec::new();
    for resource in trace["result"]["resourceSpans"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            spans.extend(scope["spans"].as_array().into_iter().flatten());
        }
    }
    spans
}

/// A span's string attribute.
fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"]["stringValue"]
        .as_str()
}

#[tokio::test]
async fn jaeger_stores_what_it_is_sent_under_the_runs_trace_id() {
    let jaeger = Jaeger::start().await.expect("starting jaeger (JAEGER_BIN)");
    let trace = RunTrace::of_run("0b7f3c9e-0000-4000-8000-000000000001");
    assert_eq!(
        jaeger.trace(&trace.trace_id_hex()).await.expect("query"),
        None,
        "an empty backend has no trace"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    let request = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "probe"}}]},
        "scopeSpans": [{"scope": {}, "spans": [{
            "traceId": trace.trace_id_hex(),
            "spanId": "00f067aa0ba902b7",
            "name": "probe",
            "kind": 1,
            "startTimeUnixNano": now.to_string(),
            "endTimeUnixNano": (now + 1_000).to_string(),
            "attributes": [{"key": "probe.key", "value": {"stringValue": "probe-value"}}],
        }]}],
    }]});
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(format!("{}/v1/traces", jaeger.otlp_endpoint()))
        .json(&request)
        .send()
        .await
        .expect("OTLP/HTTP export");
    assert!(response.status().is_success(), "{response:?}");

    let stored = jaeger
        .trace(&trace.trace_id_hex())
        .await
        .expect("query")
        .expect("the trace, once its export was answered");
    let stored_spans = spans(&stored);
    assert_eq!(stored_spans.len(), 1, "{stored}");
    assert_eq!(attribute(stored_spans[0], "probe.key"), Some("probe-value"));
}
