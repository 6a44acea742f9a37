//! Schema parity with Konveyor: every one-field manifest Konveyor's CRDs accept is accepted by
//! ours, or is a decided difference listed in docs/compatibility.md.
//!
//! The facts are tests/konveyor-fields.yaml: Konveyor's fields with their type, enum,
//! default and limits. From each field the test builds one manifest per probe (the limit
//! edges Konveyor allows, an empty, an odd and a long value where Konveyor sets no limit,
//! each enum value) and sends it to the test API server (a dry-run server-side apply with
//! strict field validation, so nothing is stored and no field is silently dropped), then reads
//! what the server would store through the operator's types, which must write it back
//! unchanged. A refusal must be listed in the compatibility table; a listed difference that our
//! CRDs accept after all fails too, so the table cannot go stale. A Konveyor default must be
//! ours as well.

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::{
    Agent, AgentRun, AgentWorkflow, AgentWorkflowRun, Gateway, SkillCard, SkillCollection,
};
use agentic_integration_tests::env;
use agentic_integration_tests::support;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use support::{parse_yaml_stream, repo_root};

/// One of Konveyor's fields, as tests/konveyor-fields.yaml records it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Field {
    kind: String,
    path: String,
    #[serde(rename = "type")]
    field_type: String,
    #[serde(default)]
    format: Option<String>,
    #[serde(default, rename = "enum")]
    values: Vec<String>,
    #[serde(default)]
    default: Option<Value>,
    #[serde(default)]
    min_length: Option<usize>,
    #[serde(default)]
    max_length: Option<usize>,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    minimum: Option<i64>,
    #[serde(default)]
    example: Option<Value>,
    #[serde(default)]
    long: Option<String>,
    #[serde(default)]
    base: Option<Value>,
    #[serde(default)]
    within: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Facts {
    kinds: BTreeMap<String, Value>,
    fields: Vec<Field>,
}

/// A manifest to send: which field and probe it is, and the value it sets.
#[derive(Debug)]
struct Probe {
    case: String,
    value: Value,
}

/// Longer than any name, shorter than any object limit.
const LONG: usize = 300;
/// Characters no object name or label allows, all of which a plain string takes.
const ODD: &str = "Odd_Name.1";

fn facts() -> Facts {
    let path = repo_root().join("tests/konveyor-fields.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut documents = parse_yaml_stream(&text, "tests/konveyor-fields.yaml");
    assert_eq!(documents.len(), 1, "one document");
    serde_json::from_value(documents.remove(0)).expect("tests/konveyor-fields.yaml has the facts")
}

/// The manifests Konveyor accepts for `field`, by the facts.
fn probes(field: &Field) -> Vec<Probe> {
    let probe = |case: &str, value: Value| Probe {
        case: case.to_string(),
        value,
    };
    let mut probes = Vec::new();
    match field.field_type.as_str() {
        "string" if !field.values.is_empty() => {
            probes.extend(field.values.iter().map(|v| probe(v, json!(v))));
        }
        "string" => {
            let min = field.min_length.unwrap_or(0);
            match &field.example {
                Some(example) => probes.push(probe("example", example.clone())),
                None => probes.push(probe("a", json!("a".repeat(min.max(1))))),
            }
            if field.pattern.is_none() {
                if min == 0 {
                    probes.push(probe("empty", json!("")));
                }
                if field.example.is_none() {
                    probes.push(probe("odd", json!(ODD)));
                }
                if let Some(max) = field.max_length {
                    probes.push(probe("maxLength", json!("a".repeat(max))));
                } else if field.example.is_none() {
                    probes.push(probe("long", json!("a".repeat(LONG))));
                }
            }
            if let Some(long) = &field.long {
                probes.push(probe("long", json!(long)));
            }
        }
        "integer" => {
            if let Some(minimum) = field.minimum {
                probes.push(probe("minimum", json!(minimum)));
            }
            // A Go `int` has no format and takes 64 bits; `int32` stops at its maximum.
            match field.format.as_deref() {
                Some("int32") => probes.push(probe("int32 max", json!(i32::MAX))),
                _ => probes.push(probe("2^31", json!(1_i64 << 31))),
            }
        }
        "boolean" => {
            probes.push(probe("true", json!(true)));
            probes.push(probe("false", json!(false)));
        }
        "object" => probes.push(probe(
            "example",
            field
                .example
                .clone()
                .expect("an object field has an example"),
        )),
        other => panic!("{} {}: no probes for type {other}", field.kind, field.path),
    }
    probes
}

/// `spec` with `value` at `path` (below `spec.`); the first `[]` becomes a one-element list
/// whose element starts as `within`.
#[allow(clippy::ref_option)] // `within` is a field of the probe, passed as it is held.
fn set(spec: &mut Value, path: &str, value: Value, within: &Option<Map<String, Value>>) {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    let object = spec
        .as_object_mut()
        .expect("a spec path runs through objects");
    match (head.strip_suffix("[]"), rest) {
        (Some(list), None) => {
            object.insert(list.to_string(), json!([value]));
        }
        (Some(list), Some(rest)) => {
            let mut element = Value::Object(within.clone().unwrap_or_default());
            set(&mut element, rest, value, &None);
            object.insert(list.to_string(), json!([element]));
        }
        (None, None) => {
            object.insert(head.to_string(), value);
        }
        (None, Some(rest)) => {
            let child = object.entry(head.to_string()).or_insert_with(|| json!({}));
            set(child, rest, value, within);
        }
    }
}

/// The value at `path` in `spec`, through the first element of each list.
fn get<'a>(spec: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(spec, |value, segment| match segment.strip_suffix("[]") {
            Some(list) => value.get(list)?.get(0),
            None => value.get(segment),
        })
}

/// The heading of the table of refusals in docs/compatibility.md.
const REFUSALS_HEADING: &str = "Manifests Konveyor accepts and we refuse";

/// The decided differences of docs/compatibility.md: `(kind, field, probe)` of every row of
/// its table of refusals.
fn decided_differences() -> BTreeSet<(String, String, String)> {
    let path = repo_root().join("docs/compatibility.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let kinds = [
        "Agent",
        "AgentRun",
        "AgentWorkflow",
        "AgentWorkflowRun",
        "Gateway",
        "SkillCard",
        "SkillCollection",
    ];
    let section = text
        .split("\n## ")
        .find(|section| section.starts_with(REFUSALS_HEADING))
        .unwrap_or_else(|| panic!("docs/compatibility.md has no section {REFUSALS_HEADING:?}"));
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // `| kind | field | probe | ...`: the first cell is empty, before the first `|`.
            let unquote = |cell: &str| cell.trim_matches('`').to_string();
            (cells.len() > 4 && kinds.contains(&cells[1]))
                .then(|| (cells[1].to_string(), unquote(cells[2]), unquote(cells[3])))
        })
        .collect()
}

fn api_of(client: kube::Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    // Every kind of the API is a regular plural.
    let plural = format!("{}s", kind.to_lowercase());
    let resource = ApiResource {
        group: "konveyor.io".into(),
        version: "v1alpha1".into(),
        api_version: "konveyor.io/v1alpha1".into(),
        kind: kind.into(),
        plural,
    };
    Api::namespaced_with(client, namespace, &resource)
}

/// Applies the manifest as `kubectl apply --server-side --dry-run=server` does, with strict
/// field validation, so that a field our CRDs lack is an error, not silently dropped. Returns
/// the spec the server would store.
async fn dry_run_apply(api: &Api<DynamicObject>, kind: &str, spec: Value) -> Result<Value, String> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "parity"},
        "spec": spec,
    }))
    .expect("a probe is a valid DynamicObject");
    let mut params = PatchParams::apply("konveyor-parity").validation_strict();
    params.dry_run = true;
    match api.patch("parity", &params, &Patch::Apply(&object)).await {
        Ok(created) => Ok(created.data["spec"].clone()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(other) => panic!("the API server did not answer: {other}"),
    }
}

/// Whether the operator's type of `kind` reads the stored spec and writes it back unchanged.
fn through_our_type(kind: &str, spec: &Value) -> Result<(), String> {
    fn round_trip<K: DeserializeOwned + serde::Serialize>(spec: &Value) -> Result<Value, String> {
        let object = json!({
            "apiVersion": "konveyor.io/v1alpha1",
            "kind": "Any",
            "metadata": {"name": "parity"},
            "spec": spec,
        });
        let typed: K = serde_json::from_value(object).map_err(|e| e.to_string())?;
        let written = serde_json::to_value(typed).map_err(|e| e.to_string())?;
        Ok(written["spec"].clone())
    }
    let written = match kind {
        "Agent" => round_trip::<Agent>(spec),
        "AgentRun" => round_trip::<AgentRun>(spec),
        "AgentWorkflow" => round_trip::<AgentWorkflow>(spec),
        "AgentWorkflowRun" => round_trip::<AgentWorkflowRun>(spec),
        "Gateway" => round_trip::<Gateway>(spec),
        "SkillCard" => round_trip::<SkillCard>(spec),
        "SkillCollection" => round_trip::<SkillCollection>(spec),
        other => panic!("unknown kind {other}"),
    }
    .map_err(|e| format!("the operator cannot read it: {e}"))?;
    if &written == spec {
        Ok(())
    } else {
        Err(format!("the operator's type writes {written} for {spec}"))
    }
}

#[test]
fn the_facts_and_the_table_parse() {
    let facts = facts();
    assert!(facts.fields.len() > 50, "{} fields", facts.fields.len());
    for field in &facts.fields {
        assert!(
            facts.kinds.contains_key(&field.kind),
            "{}: unknown kind",
            field.kind
        );
        assert!(
            field.path.starts_with("spec."),
            "{}: spec fields only",
            field.path
        );
        assert!(!probes(field).is_empty(), "{} {}", field.kind, field.path);
    }
    let known: BTreeSet<(String, String)> = facts
        .fields
        .iter()
        .map(|f| (f.kind.clone(), f.path.clone()))
        .collect();
    for (kind, path, probe) in decided_differences() {
        assert!(
            known.contains(&(kind.clone(), path.clone())),
            "docs/compatibility.md lists {kind} {path} ({probe}), which the facts do not have"
        );
    }
}

#[tokio::test]
async fn every_manifest_konveyor_accepts_is_accepted_or_a_decided_difference() {
    let facts = facts();
    let decided = decided_differences();
    let env = env().await;
    let namespace = env.namespace("konveyor-parity").await.expect("a namespace");
    let client = env.client();

    let mut failures = Vec::new();
    let mut refused_as_decided = BTreeSet::new();
    for field in &facts.fields {
        let api = api_of(client.clone(), &namespace, &field.kind);
        let base = field
            .base
            .clone()
            .unwrap_or_else(|| facts.kinds[&field.kind].clone());
        let key = |probe: &str| (field.kind.clone(), field.path.clone(), probe.to_string());
        let path = field.path.strip_prefix("spec.").expect("spec fields only");

        for probe in probes(field) {
            let mut spec = base.clone();
            set(&mut spec, path, probe.value.clone(), &field.within);
            let listed = decided.contains(&key(&probe.case));
            match dry_run_apply(&api, &field.kind, spec).await {
                Ok(_) if listed => failures.push(format!(
                    "{} {} ({}): accepted, but docs/compatibility.md lists it as refused",
                    field.kind, field.path, probe.case
                )),
                Ok(stored) => {
                    if let Err(problem) = through_our_type(&field.kind, &stored) {
                        failures.push(format!(
                            "{} {} ({}): {problem}",
                            field.kind, field.path, probe.case
                        ));
                    }
                    if get(&stored, path) != Some(&probe.value) {
                        failures.push(format!(
                            "{} {} ({}): accepted but not kept: sent {}, stored {:?}",
                            field.kind,
                            field.path,
                            probe.case,
                            probe.value,
                            get(&stored, path)
                        ));
                    }
                }
                Err(_) if listed => {
                    refused_as_decided.insert(key(&probe.case));
                }
                Err(message) => failures.push(format!(
                    "{} {} ({}): Konveyor accepts {}, ours refuses: {message}",
                    field.kind, field.path, probe.case, probe.value
                )),
            }
        }

        if let Some(default) = &field.default {
            // The field's parent, present without the field: the default fills it in.
            let mut spec = base.clone();
            let probe = probes(field).remove(0);
            set(&mut spec, path, probe.value, &field.within);
            let (parent, leaf) = path.rsplit_once('.').unwrap_or(("", path));
            let holder = if parent.is_empty() {
                Some(&mut spec)
            } else {
                parent.split('.').try_fold(&mut spec, |value, segment| {
                    match segment.strip_suffix("[]") {
                        Some(list) => value.get_mut(list)?.get_mut(0),
                        None => value.get_mut(segment),
                    }
                })
            };
            holder
                .and_then(Value::as_object_mut)
                .map(|object| object.remove(leaf))
                .expect("the field's parent is in the probe");
            match dry_run_apply(&api, &field.kind, spec).await {
                Ok(stored) if get(&stored, path) == Some(default) => {}
                Ok(stored) => failures.push(format!(
                    "{} {}: Konveyor defaults it to {default}, ours stored {:?}",
                    field.kind,
                    field.path,
                    get(&stored, path)
                )),
                Err(message) => failures.push(format!(
                    "{} {}: without it, refused: {message}",
                    field.kind, field.path
                )),
            }
        }
    }

    for stale in decided.difference(&refused_as_decided) {
        if !failures
            .iter()
            .any(|f| f.starts_with(&format!("{} {} ({})", stale.0, stale.1, stale.2)))
        {
            failures.push(format!(
                "docs/compatibility.md lists {} {} ({}), which no probe produces",
                stale.0, stale.1, stale.2
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} difference(s) from Konveyor's schema:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
