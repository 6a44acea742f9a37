//! Message content out of a trace request, by attribute name.
//!
//! The rule: an attribute key is content when, compared case-insensitively and split into
//! words at `.` and `_`, it contains the words of one of [`CONTENT_ATTRIBUTES`] in a row.
//! That covers the names themselves (`gen_ai.input.messages`), their flattened forms
//! (`gen_ai.input.messages.0.content`), the same names under another prefix
//! (`llm.input_messages`) and the conventions' older `gen_ai.prompt` / `gen_ai.completion`.
//! It errs towards dropping: a key that merely contains such a run of words goes too.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

use crate::ExportTraceServiceRequest;

/// The attribute names whose values are message content. Scrubbing drops these and any
/// key named like them (see the module's rule).
pub const CONTENT_ATTRIBUTES: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    // The GenAI conventions before 1.37 put the same content here.
    "gen_ai.prompt",
    "gen_ai.completion",
];

/// The runs of words that make a key content: each name of [`CONTENT_ATTRIBUTES`] without
/// its `gen_ai` namespace, except the older two whose words alone are too common.
const CONTENT_WORDS: &[&[&str]] = &[
    &["input", "messages"],
    &["output", "messages"],
    &["system", "instructions"],
    &["tool", "call", "arguments"],
    &["tool", "call", "result"],
    &["gen", "ai", "prompt"],
    &["gen", "ai", "completion"],
];

/// Whether the attribute `key` is message content (see the module's rule).
pub fn is_content_attribute(key: &str) -> bool {
    let words: Vec<String> = key.split(['.', '_']).map(str::to_ascii_lowercase).collect();
    CONTENT_WORDS.iter().any(|run| {
        words.windows(run.len()).any(|window| {
            window
                .iter()
                .zip(run.iter())
                .all(|(word, want)| word == want)
        })
    })
}

/// Removes every content attribute from `request`: from the resources, scopes, spans, span
/// events and span links, and from key-value lists nested in the values left. Each list's
/// `dropped_attributes_count` grows by what it lost, as the OTLP model expects of a sender
/// that drops attributes.
pub fn scrub(request: &mut ExportTraceServiceRequest) {
    for resource_spans in &mut request.resource_spans {
        if let Some(resource) = &mut resource_spans.resource {
            resource.dropped_attributes_count += scrub_attributes(&mut resource.attributes);
        }
        for scope_spans in &mut resource_spans.scope_spans {
            if let Some(scope) = &mut scope_spans.scope {
                scope.dropped_attributes_count += scrub_attributes(&mut scope.attributes);
            }
            for span in &mut scope_spans.spans {
                span.dropped_attributes_count += scrub_attributes(&mut span.attributes);
                for event in &mut span.events {
                    event.dropped_attributes_count += scrub_attributes(&mut event.attributes);
                }
                for link in &mut span.links {
                    link.dropped_attributes_count += scrub_attributes(&mut link.attributes);
                }
            }
        }
    }
}

/// Drops the content keys of `attributes` (and of lists nested in the values kept); returns
/// how many top-level attributes went.
fn scrub_attributes(attributes: &mut Vec<KeyValue>) -> u32 {
    let before = attributes.len();
    attributes.retain(|attribute| !is_content_attribute(&attribute.key));
    for attribute in attributes.iter_mut() {
        if let Some(value) = &mut attribute.value {
            scrub_value(value);
        }
    }
    u32::try_from(before - attributes.len()).unwrap_or(u32::MAX)
}

fn scrub_value(value: &mut AnyValue) {
    match &mut value.value {
        Some(Value::KvlistValue(list)) => {
            scrub_attributes(&mut list.values);
        }
        Some(Value::ArrayValue(array)) => array.values.iter_mut().for_each(scrub_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, InstrumentationScope, KeyValueList};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    use super::*;
    use crate::fixtures::string;

    fn keys(attributes: &[KeyValue]) -> Vec<&str> {
        attributes.iter().map(|a| a.key.as_str()).collect()
    }

    #[test]
    fn the_named_attributes_and_their_kin_are_content() {
        for key in CONTENT_ATTRIBUTES {
            assert!(is_content_attribute(key), "{key}");
        }
        for key in [
            "gen_ai.input.messages.0.content",
            "GEN_AI.Output.Messages",
            "llm.input_messages",
            "gen_ai.tool.call_arguments",
            "vendor.gen_ai.tool.call.result",
            "gen_ai.prompt.0.content",
            "gen_ai.completion",
            "gen_ai.system_instructions.text",
        ] {
            assert!(is_content_attribute(key), "{key}");
        }
        for key in [
            "gen_ai.tool.name",
            "gen_ai.tool.call.id",
            "gen_ai.operation.name",
            "gen_ai.skill.name",
            "gen_ai.usage.input_tokens",
            "k8s.pod.name",
            "prompt",
            "messages",
        ] {
            assert!(!is_content_attribute(key), "{key}");
        }
    }

    #[test]
    fn scrubbing_reaches_every_attribute_list() {
        let content = || {
            vec![
                string("gen_ai.input.messages", "secret prompt"),
                string("keep", "yes"),
            ]
        };
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: content(),
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        attributes: content(),
                        ..InstrumentationScope::default()
                    }),
                    spans: vec![Span {
                        attributes: vec![
                            string("gen_ai.tool.call.arguments", r#"{"name":"a"}"#),
                            string("gen_ai.tool.call.result", "the skill's body"),
                            string("gen_ai.tool.name", "load_skill"),
                            KeyValue {
                                key: "nested".to_owned(),
                                value: Some(AnyValue {
                                    value: Some(Value::ArrayValue(ArrayValue {
                                        values: vec![AnyValue {
                                            value: Some(Value::KvlistValue(KeyValueList {
                                                values: content(),
                                            })),
                                        }],
                                    })),
                                }),
                                ..KeyValue::default()
                            },
                        ],
                        events: vec![Event {
                            attributes: content(),
                            ..Event::default()
                        }],
                        links: vec![Link {
                            attributes: content(),
                            ..Link::default()
                        }],
                        ..Span::default()
                    }],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };

        scrub(&mut request);

        let resource_spans = &request.resource_spans[0];
        let resource = resource_spans.resource.as_ref().unwrap();
        assert_eq!(keys(&resource.attributes), ["keep"]);
        assert_eq!(resource.dropped_attributes_count, 1);
        let scope_spans = &resource_spans.scope_spans[0];
        assert_eq!(
            keys(&scope_spans.scope.as_ref().unwrap().attributes),
            ["keep"]
        );
        let span = &scope_spans.spans[0];
        assert_eq!(keys(&span.attributes), ["gen_ai.tool.name", "nested"]);
        assert_eq!(span.dropped_attributes_count, 2);
        assert_eq!(keys(&span.events[0].attributes), ["keep"]);
        assert_eq!(span.events[0].dropped_attributes_count, 1);
        assert_eq!(keys(&span.links[0].attributes), ["keep"]);
        let Some(Value::ArrayValue(array)) = &span.attributes[1].value.as_ref().unwrap().value
        else {
            panic!("the nested attribute keeps its shape")
        };
        let Some(Value::KvlistValue(list)) = &array.values[0].value else {
            panic!("the nested list keeps its shape")
        };
        assert_eq!(keys(&list.values), ["keep"]);
        let text = format!("{request:?}");
        assert!(!text.contains("secret prompt"), "{text}");
        assert!(!text.contains("the skill's body"), "{text}");
    }
}
