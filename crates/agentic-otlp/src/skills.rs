//! What the agent loaded: the `execute_tool` spans of skill loads.
//!
//! A span is a skill load when its `gen_ai.operation.name` is `execute_tool` and either
//! - it carries `gen_ai.skill.name` (the GenAI conventions' skill attributes, which any
//!   harness may set), with `gen_ai.skill.resource.name` naming a supporting file; or
//! - its `gen_ai.tool.name` is `load_skill` (goose's skills tool) and its
//!   `gen_ai.tool.call.arguments` hold `{"name": "<skill>"}` or `{"name":
//!   "<skill>/<path>"}` for a supporting file. goose exports the arguments only with
//!   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`; without them such a span names
//!   no skill and is not counted.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::Span;

use crate::ExportTraceServiceRequest;

const OPERATION_NAME: &str = "gen_ai.operation.name";
const EXECUTE_TOOL: &str = "execute_tool";
const TOOL_NAME: &str = "gen_ai.tool.name";
const LOAD_SKILL: &str = "load_skill";
const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// The GenAI conventions' attributes of a skill on an `execute_tool` span: a harness may set
/// them, and the forwarder sets them on the loads it moves into a run's trace.
pub(crate) const SKILL_NAME: &str = "gen_ai.skill.name";
pub(crate) const SKILL_RESOURCE_NAME: &str = "gen_ai.skill.resource.name";

/// One skill load the agent reported, as read from its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillLoad {
    /// The skill's name as the agent asked for it (not checked against anything here).
    pub skill: String,
    /// The supporting file within the skill, when the load named one.
    pub file: Option<String>,
    /// The span's trace id, as sent (16 bytes from a conforming sender).
    pub trace_id: Vec<u8>,
    /// The span's id, as sent (8 bytes from a conforming sender), to find the span again.
    pub span_id: Vec<u8>,
    /// When the load started, in nanoseconds since the Unix epoch (0 if the sender left it out).
    pub start_time_unix_nano: u64,
}

/// The skill loads in `request`, in the order of its spans. Read it before [`crate::scrub`]:
/// goose's skill name is in the tool arguments, which scrubbing removes.
pub fn skill_loads(request: &ExportTraceServiceRequest) -> Vec<SkillLoad> {
    request
        .resource_spans
        .iter()
        .flat_map(|resource| &resource.scope_spans)
        .flat_map(|scope| &scope.spans)
        .filter_map(skill_load)
        .collect()
}

fn skill_load(span: &Span) -> Option<SkillLoad> {
    if string_attribute(&span.attributes, OPERATION_NAME)? != EXECUTE_TOOL {
        return None;
    }
    let (skill, file) = match string_attribute(&span.attributes, SKILL_NAME) {
        Some(skill) => (
            skill.to_owned(),
            string_attribute(&span.attributes, SKILL_RESOURCE_NAME).map(str::to_owned),
        ),
        None if string_attribute(&span.attributes, TOOL_NAME) == Some(LOAD_SKILL) => split_name(
            &argument_name(attribute(&span.attributes, TOOL_ARGUMENTS)?)?,
        ),
        None => return None,
    };
    let skill = skill.trim();
    if skill.is_empty() {
        return None;
    }
    Some(SkillLoad {
        skill: skill.to_owned(),
        file: file.filter(|file| !file.trim().is_empty()),
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        start_time_unix_nano: span.start_time_unix_nano,
    })
}

/// `<skill>` or `<skill>/<path>`, as goose's `load_skill` takes its `name`.
fn split_name(name: &str) -> (String, Option<String>) {
    match name.split_once('/') {
        Some((skill, file)) => (skill.to_owned(), Some(file.to_owned())),
        None => (name.to_owned(), None),
    }
}

/// The `name` of a tool call's arguments: a JSON object in a string (what goose sends), or
/// a key-value list (a structured attribute).
fn argument_name(arguments: &AnyValue) -> Option<String> {
    match arguments.value.as_ref()? {
        Value::StringValue(json) => {
            let arguments: serde_json::Value = serde_json::from_str(json).ok()?;
            arguments.get("name")?.as_str().map(str::to_owned)
        }
        Value::KvlistValue(list) => string_attribute(&list.values, "name").map(str::to_owned),
        _ => None,
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes
        .iter()
        .find(|attribute| attribute.key == key)?
        .value
        .as_ref()
}

fn string_attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attribute(attributes, key)?.value.as_ref()? {
        Value::StringValue(value) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::KeyValueList;

    use super::*;
    use crate::fixtures::{request, string};
    use crate::{is_content_attribute, take_skill_loads};

    fn span(id: u8, attributes: Vec<KeyValue>) -> Span {
        Span {
            trace_id: vec![7; 16],
            span_id: vec![id; 8],
            start_time_unix_nano: 1_000 + u64::from(id),
            attributes,
            ..Span::default()
        }
    }

    fn goose_load(id: u8, arguments: &str) -> Span {
        span(
            id,
            vec![
                string(OPERATION_NAME, EXECUTE_TOOL),
                string(TOOL_NAME, LOAD_SKILL),
                string(TOOL_ARGUMENTS, arguments),
                string("gen_ai.tool.call.result", "the skill's body"),
            ],
        )
    }

    fn load(id: u8, skill: &str, file: Option<&str>) -> SkillLoad {
        SkillLoad {
            skill: skill.to_owned(),
            file: file.map(str::to_owned),
            trace_id: vec![7; 16],
            span_id: vec![id; 8],
            start_time_unix_nano: 1_000 + u64::from(id),
        }
    }

    #[test]
    fn goose_loads_name_the_skill_in_their_arguments() {
        let request = request(vec![
            goose_load(1, r#"{"name":"code-review"}"#),
            goose_load(2, r#"{"name":"code-review/reference/checklist.md"}"#),
            // Not loads: another tool, another operation, no arguments (content capture off),
            // arguments without a name, an empty name.
            span(
                3,
                vec![
                    string(OPERATION_NAME, EXECUTE_TOOL),
                    string(TOOL_NAME, "shell"),
                    string(TOOL_ARGUMENTS, r#"{"name":"x"}"#),
                ],
            ),
            span(
                4,
                vec![
                    string(OPERATION_NAME, "chat"),
                    string(TOOL_NAME, LOAD_SKILL),
                    string(TOOL_ARGUMENTS, r#"{"name":"x"}"#),
                ],
            ),
            span(
                5,
                vec![
                    string(OPERATION_NAME, EXECUTE_TOOL),
                    string(TOOL_NAME, LOAD_SKILL),
                ],
            ),
            goose_load(6, r#"{"skill":"x"}"#),
            goose_load(7, r#"{"name":"  "}"#),
            goose_load(8, "not json"),
        ]);
        assert_eq!(
            skill_loads(&request),
            [
                load(1, "code-review", None),
                load(2, "code-review", Some("reference/checklist.md")),
            ]
        );
    }

    #[test]
    fn the_conventions_skill_attributes_count_for_any_tool() {
        let request = request(vec![
            span(
                1,
                vec![
                    string(OPERATION_NAME, EXECUTE_TOOL),
                    string(TOOL_NAME, "Skill"),
                    string(SKILL_NAME, "deploy"),
                    string(SKILL_RESOURCE_NAME, "scripts/run.sh"),
                ],
            ),
            // gen_ai.skill.name wins over the arguments when both are there.
            span(
                2,
                vec![
                    string(OPERATION_NAME, EXECUTE_TOOL),
                    string(TOOL_NAME, LOAD_SKILL),
                    string(SKILL_NAME, "deploy"),
                    string(TOOL_ARGUMENTS, r#"{"name":"other"}"#),
                ],
            ),
            span(
                3,
                vec![
                    string(OPERATION_NAME, EXECUTE_TOOL),
                    string(TOOL_NAME, LOAD_SKILL),
                    KeyValue {
                        key: TOOL_ARGUMENTS.to_owned(),
                        value: Some(AnyValue {
                            value: Some(Value::KvlistValue(KeyValueList {
                                values: vec![string("name", "structured")],
                            })),
                        }),
                        ..KeyValue::default()
                    },
                ],
            ),
        ]);
        assert_eq!(
            skill_loads(&request),
            [
                load(1, "deploy", Some("scripts/run.sh")),
                load(2, "deploy", None),
                load(3, "structured", None),
            ]
        );
    }

    #[test]
    fn taking_the_loads_leaves_no_content_behind() {
        let mut request = request(vec![goose_load(1, r#"{"name":"code-review"}"#)]);
        assert_eq!(
            take_skill_loads(&mut request),
            [load(1, "code-review", None)]
        );
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert!(
            span.attributes
                .iter()
                .all(|a| !is_content_attribute(&a.key))
        );
        assert_eq!(span.attributes.len(), 2, "operation and tool name stay");
        // Once scrubbed, the span no longer names the skill: the order matters.
        assert!(skill_loads(&request).is_empty());
    }
}
