//! A scrubbed request made part of its run's trace before it is forwarded to the user's
//! collector.
//!
//! goose ignores `TRACEPARENT`: each of its root spans starts a trace of its own. Forwarded
//! as sent, a run would be scattered over many traces, none of them the run's. So every span
//! moves to the run's trace id, the spans that had no parent become children of the run's
//! root span, and links into the request's own traces follow. Span ids are kept, so parents
//! within the agent's spans (and across its batches) still hold.
//!
//! The skill loads, found before scrubbing removed their arguments ([`crate::skill_loads`]),
//! get the GenAI conventions' skill attributes: `gen_ai.skill.name`,
//! `gen_ai.skill.resource.name` for a supporting file, and `gen_ai.skill.source.uri` when the
//! name is one the run mounted (a name the run did not mount has no source to name).

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::Span;

use crate::skills::{SKILL_NAME, SKILL_RESOURCE_NAME};
use crate::{ExportTraceServiceRequest, SkillLoad};

const SKILL_SOURCE_URI: &str = "gen_ai.skill.source.uri";

/// A skill the run mounted, and where it came from (`oci://<repository>@sha256:…`, a git URL
/// at its commit; `None` for an inline skill).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountedSource {
    pub name: String,
    pub source_uri: Option<String>,
}

/// The run's trace: the id every span is moved to, and the span the agent's root spans hang
/// under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunTraceIds {
    pub trace_id: [u8; 16],
    pub root_span_id: [u8; 8],
}

/// Moves every span of `request` into the run's trace and sets the skill attributes on the
/// spans of `loads` (matched by span id, as sent). `skills` are the run's pinned skills.
pub fn into_run_trace(
    request: &mut ExportTraceServiceRequest,
    run: RunTraceIds,
    loads: &[SkillLoad],
    skills: &[MountedSource],
) {
    let own_traces: Vec<Vec<u8>> = spans(request).map(|span| span.trace_id.clone()).collect();
    for span in spans_mut(request) {
        if let Some(load) = loads.iter().find(|load| load.span_id == span.span_id) {
            annotate_load(span, load, skills);
        }
        span.trace_id = run.trace_id.to_vec();
        if span.parent_span_id.is_empty() {
            span.parent_span_id = run.root_span_id.to_vec();
        }
        for link in &mut span.links {
            if own_traces.contains(&link.trace_id) {
                link.trace_id = run.trace_id.to_vec();
            }
        }
    }
}

fn annotate_load(span: &mut Span, load: &SkillLoad, skills: &[MountedSource]) {
    set(&mut span.attributes, SKILL_NAME, &load.skill);
    if let Some(file) = &load.file {
        set(&mut span.attributes, SKILL_RESOURCE_NAME, file);
    }
    let source = skills
        .iter()
        .find(|skill| skill.name == load.skill)
        .and_then(|skill| skill.source_uri.as_deref());
    match source {
        Some(uri) => set(&mut span.attributes, SKILL_SOURCE_URI, uri),
        // What the agent claimed as a source is not the operator's to vouch for.
        None => span.attributes.retain(|a| a.key != SKILL_SOURCE_URI),
    }
}

/// Sets `key` to the string `value`, replacing what the sender set.
fn set(attributes: &mut Vec<KeyValue>, key: &str, value: &str) {
    attributes.retain(|a| a.key != key);
    attributes.push(KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    });
}

fn spans(request: &ExportTraceServiceRequest) -> impl Iterator<Item = &Span> {
    request
        .resource_spans
        .iter()
        .flat_map(|resource| &resource.scope_spans)
        .flat_map(|scope| &scope.spans)
}

fn spans_mut(request: &mut ExportTraceServiceRequest) -> impl Iterator<Item = &mut Span> {
    request
        .resource_spans
        .iter_mut()
        .flat_map(|resource| &mut resource.scope_spans)
        .flat_map(|scope| &mut scope.spans)
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::trace::v1::span::Link;

    use super::*;
    use crate::fixtures::{request, string};
    use crate::take_skill_loads;

    const RUN: RunTraceIds = RunTraceIds {
        trace_id: [0xab; 16],
        root_span_id: [0xcd; 8],
    };

    /// A span of goose's trace `trace`, child of `parent` (0: a root span).
    fn span(trace: u8, id: u8, parent: u8, attributes: Vec<KeyValue>) -> Span {
        Span {
            trace_id: vec![trace; 16],
            span_id: vec![id; 8],
            parent_span_id: if parent == 0 {
                Vec::new()
            } else {
                vec![parent; 8]
            },
            attributes,
            ..Span::default()
        }
    }

    fn goose_load(trace: u8, id: u8, parent: u8, name: &str) -> Span {
        span(
            trace,
            id,
            parent,
            vec![
                string("gen_ai.operation.name", "execute_tool"),
                string("gen_ai.tool.name", "load_skill"),
                string(
                    "gen_ai.tool.call.arguments",
                    &format!(r#"{{"name":"{name}"}}"#),
                ),
            ],
        )
    }

    fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
        match span
            .attributes
            .iter()
            .find(|a| a.key == key)?
            .value
            .as_ref()?
            .value
            .as_ref()?
        {
            Value::StringValue(value) => Some(value),
            _ => None,
        }
    }

    fn by_id(request: &ExportTraceServiceRequest, id: u8) -> &Span {
        spans(request)
            .find(|span| span.span_id == vec![id; 8])
            .expect("the span")
    }

    fn mounted() -> Vec<MountedSource> {
        vec![
            MountedSource {
                name: "code-review".into(),
                source_uri: Some("oci://r.example/skills/review@sha256:00ff".into()),
            },
            MountedSource {
                name: "notes".into(),
                source_uri: None,
            },
        ]
    }

    #[test]
    fn every_span_joins_the_runs_trace_and_the_agents_roots_hang_under_the_runs_span() {
        // Two of goose's traces (it ignores TRACEPARENT), one root span each, and a child.
        let mut request = request(vec![
            span(1, 10, 0, vec![]),
            span(1, 11, 10, vec![]),
            span(2, 20, 0, vec![]),
            Span {
                links: vec![
                    Link {
                        trace_id: vec![1; 16],
                        span_id: vec![10; 8],
                        ..Link::default()
                    },
                    Link {
                        trace_id: vec![9; 16],
                        span_id: vec![90; 8],
                        ..Link::default()
                    },
                ],
                ..span(2, 21, 20, vec![])
            },
        ]);
        into_run_trace(&mut request, RUN, &[], &[]);
        for span in spans(&request) {
            assert_eq!(span.trace_id, RUN.trace_id.to_vec());
        }
        assert_eq!(
            by_id(&request, 10).parent_span_id,
            RUN.root_span_id.to_vec()
        );
        assert_eq!(
            by_id(&request, 20).parent_span_id,
            RUN.root_span_id.to_vec()
        );
        // Children keep their parents; span ids are untouched.
        assert_eq!(by_id(&request, 11).parent_span_id, vec![10; 8]);
        assert_eq!(by_id(&request, 21).parent_span_id, vec![20; 8]);
        // A link into the request's own trace follows it; a link elsewhere is left alone.
        let links = &by_id(&request, 21).links;
        assert_eq!(links[0].trace_id, RUN.trace_id.to_vec());
        assert_eq!(links[1].trace_id, vec![9; 16]);
    }

    #[test]
    fn a_span_already_in_the_runs_trace_is_unchanged() {
        let mut request = request(vec![Span {
            trace_id: RUN.trace_id.to_vec(),
            parent_span_id: RUN.root_span_id.to_vec(),
            ..span(0, 5, 0, vec![])
        }]);
        let before = request.clone();
        into_run_trace(&mut request, RUN, &[], &[]);
        assert_eq!(request, before);
    }

    #[test]
    fn loads_get_the_skill_attributes_with_the_pinned_source_and_nothing_of_the_arguments() {
        let mut request = request(vec![
            goose_load(1, 1, 0, "code-review"),
            goose_load(1, 2, 0, "code-review/reference/checklist.md"),
            goose_load(1, 3, 0, "notes"),
            // Not mounted: named, with no source; a source the agent set itself is dropped.
            Span {
                attributes: vec![
                    string("gen_ai.operation.name", "execute_tool"),
                    string("gen_ai.skill.name", "baked-in"),
                    string("gen_ai.skill.source.uri", "oci://elsewhere@sha256:11"),
                ],
                ..span(1, 4, 0, vec![])
            },
            span(1, 5, 0, vec![string("gen_ai.operation.name", "chat")]),
        ]);
        let loads = take_skill_loads(&mut request);
        into_run_trace(&mut request, RUN, &loads, &mounted());

        let review = by_id(&request, 1);
        assert_eq!(attribute(review, "gen_ai.skill.name"), Some("code-review"));
        assert_eq!(
            attribute(review, "gen_ai.skill.source.uri"),
            Some("oci://r.example/skills/review@sha256:00ff")
        );
        assert_eq!(attribute(review, "gen_ai.skill.resource.name"), None);
        assert_eq!(attribute(review, "gen_ai.tool.call.arguments"), None);

        let file = by_id(&request, 2);
        assert_eq!(attribute(file, "gen_ai.skill.name"), Some("code-review"));
        assert_eq!(
            attribute(file, "gen_ai.skill.resource.name"),
            Some("reference/checklist.md")
        );

        let inline = by_id(&request, 3);
        assert_eq!(attribute(inline, "gen_ai.skill.name"), Some("notes"));
        assert_eq!(attribute(inline, "gen_ai.skill.source.uri"), None);

        let unmounted = by_id(&request, 4);
        assert_eq!(attribute(unmounted, "gen_ai.skill.name"), Some("baked-in"));
        assert_eq!(attribute(unmounted, "gen_ai.skill.source.uri"), None);

        let chat = by_id(&request, 5);
        assert_eq!(attribute(chat, "gen_ai.skill.name"), None);
        // Each attribute once: set replaces.
        for span in spans(&request) {
            let mut keys: Vec<&str> = span.attributes.iter().map(|a| a.key.as_str()).collect();
            let total = keys.len();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), total, "{:?}", span.attributes);
        }
    }
}
