//! Reading a trace as Jaeger's query API returns it: OTLP JSON under `result`
//! (`resourceSpans[].scopeSpans[].spans[]`).

use serde_json::Value;

/// Every span of a trace.
pub fn spans(trace: &Value) -> Vec<&Value> {
    resources(trace).flat_map(spans_of).collect()
}

/// The spans of a trace sent by the service `service` (its resource's `service.name`).
pub fn spans_of_service<'a>(trace: &'a Value, service: &str) -> Vec<&'a Value> {
    resources(trace)
        .filter(|resource| attribute(&resource["resource"], "service.name") == Some(service))
        .flat_map(spans_of)
        .collect()
}

/// A span's (or a resource's) string attribute.
pub fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"]["stringValue"]
        .as_str()
}

/// Every attribute key of every span and resource of a trace.
pub fn attribute_keys(trace: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    for resource in resources(trace) {
        let lists = std::iter::once(&resource["resource"]["attributes"]).chain(
            spans_of(resource)
                .into_iter()
                .map(|span| &span["attributes"]),
        );
        for list in lists {
            for attribute in list.as_array().into_iter().flatten() {
                keys.push(attribute["key"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    keys
}

/// The span named `name` among `spans`; panics naming them all when there is none.
pub fn named<'a>(spans: &[&'a Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|span| span["name"] == name)
        .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
}

fn resources(trace: &Value) -> impl Iterator<Item = &Value> {
    trace["result"]["resourceSpans"]
        .as_array()
        .into_iter()
        .flatten()
}

fn spans_of(resource: &Value) -> Vec<&Value> {
    let mut spans = Vec::new();
    for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
        spans.extend(scope["spans"].as_array().into_iter().flatten());
    }
    spans
}

/// Bytes as the query API writes ids: lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
