//! Typing a run's params against the params its Agent declares.
//!
//! Runs give every value as a string; the sandbox reads typed JSON values from
//! `/run/konveyor/params.json`. The rules:
//!
//! | type      | accepted text                                   | JSON value                 |
//! |-----------|-------------------------------------------------|----------------------------|
//! | `string`  | anything                                        | the string as given        |
//! | `number`  | one JSON number, no surrounding space; integers must fit 64 bits | integer stays integer, `2.5` stays float |
//! | `boolean` | exactly `true` or `false`                       | `true` / `false`           |
//!
//! A declared param the run does not set takes its default; one with neither a value nor a
//! default is absent from the map.
//!
//! [`resolve_run`] puts a run's whole `/run/konveyor/params.json` together, Konveyor's three
//! sections: `workflow` (the run's `spec.workflowParams`, `{}` when unset), `agent` (the
//! typed params above) and `execution` (`mode`, and `maxTurns`, `maxCost`, `askUser` when
//! set, the run's value over the Agent's). It also substitutes `$(agent.<name>)` and
//! `$(workflow.<name>)` in the Agent's prompt and the run's instructions
//! ([`crate::substitution`]): an agent param's text is the value the run gives, else the
//! declared default, exactly as written (`"1e3"` stays `1e3`); a workflow param's is the
//! string itself, or the JSON text of any other value.

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::{
    AgentParam, AgentRunSpec, AgentSpec, ExecutionLimits, ExecutionMode, ParamType, RunExecution,
    RunParam,
};
use serde_json::{Map, Number, Value};

use crate::Error;
use crate::substitution::{Scopes, substitute};

/// What a run's sandbox gets from its params: the sections of `/run/konveyor/params.json`,
/// and the prompt and instructions with their references substituted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunParams {
    /// `workflow`: the run's `spec.workflowParams`, as written.
    pub workflow: Map<String, Value>,
    /// `agent`: the Agent's params, typed, with defaults applied.
    pub agent: BTreeMap<String, Value>,
    /// `execution`: the run's execution settings over the Agent's.
    pub execution: ResolvedExecution,
    /// The Agent's `spec.prompt`, substituted; empty when unset.
    pub prompt: String,
    /// The run's `spec.instructions`, substituted; empty when unset.
    pub instructions: String,
}

/// The `execution` section of params.json.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedExecution {
    /// The run's mode; `auto` when unset.
    pub mode: ExecutionMode,
    /// The run's `maxTurns`, else the Agent's.
    pub max_turns: Option<i32>,
    /// The run's `maxCost`, else the Agent's.
    pub max_cost: Option<String>,
    /// The run's `askUser`.
    pub ask_user: Option<bool>,
}

impl ResolvedExecution {
    /// Each field of the run's execution, else of the Agent's limits.
    pub fn resolve(run: Option<&RunExecution>, agent: Option<&ExecutionLimits>) -> Self {
        ResolvedExecution {
            mode: run.and_then(|r| r.mode).unwrap_or_default(),
            max_turns: run
                .and_then(|r| r.max_turns)
                .or_else(|| agent.and_then(|a| a.max_turns)),
            max_cost: run
                .and_then(|r| r.max_cost.clone())
                .or_else(|| agent.and_then(|a| a.max_cost.clone())),
            ask_user: run.and_then(|r| r.ask_user),
        }
    }

    /// The section as params.json holds it: `mode` always, the other fields when set.
    pub fn to_json(&self) -> Value {
        let mut section = Map::new();
        section.insert("mode".into(), Value::from(self.mode.as_str()));
        if let Some(turns) = self.max_turns {
            section.insert("maxTurns".into(), Value::from(turns));
        }
        if let Some(cost) = &self.max_cost {
            section.insert("maxCost".into(), Value::from(cost.as_str()));
        }
        if let Some(ask) = self.ask_user {
            section.insert("askUser".into(), Value::from(ask));
        }
        Value::Object(section)
    }
}

/// The run's params.json sections and its substituted prompt and instructions.
///
/// On failure returns [`Error::InvalidParams`] listing every problem: those of
/// [`resolve_params`], then each reference without a value
/// ([`Error::UnresolvedReference`]), in the prompt first, then in the instructions.
pub fn resolve_run(agent: &AgentSpec, run: &AgentRunSpec) -> Result<RunParams, Error> {
    let mut problems = Vec::new();
    let typed = match resolve_params(&agent.params, &run.params) {
        Ok(typed) => typed,
        Err(Error::InvalidParams(found)) => {
            problems.extend(found);
            BTreeMap::new()
        }
        Err(other) => {
            problems.push(other);
            BTreeMap::new()
        }
    };
    let workflow = run.workflow_params.clone().unwrap_or_default();
    let scopes = Scopes {
        agent: agent_texts(&agent.params, &run.params),
        workflow: workflow
            .iter()
            .map(|(name, value)| (name.clone(), value_text(value)))
            .collect(),
    };
    let mut substituted = |field: &'static str, text: Option<&str>| match substitute(
        text.unwrap_or_default(),
        &scopes,
    ) {
        Ok(text) => text,
        Err(unresolved) => {
            problems.extend(
                unresolved
                    .into_iter()
                    .map(|reference| Error::UnresolvedReference { field, reference }),
            );
            String::new()
        }
    };
    let prompt = substituted("spec.prompt", agent.prompt.as_deref());
    let instructions = substituted("spec.instructions", run.instructions.as_deref());
    if !problems.is_empty() {
        return Err(Error::InvalidParams(problems));
    }
    Ok(RunParams {
        workflow,
        agent: typed,
        execution: ResolvedExecution::resolve(run.execution.as_ref(), agent.execution.as_ref()),
        prompt,
        instructions,
    })
}

/// Each declared param's text for `$(agent.<name>)`: the run's first value, else the default.
fn agent_texts(declared: &[AgentParam], given: &[RunParam]) -> BTreeMap<String, String> {
    declared
        .iter()
        .filter_map(|param| {
            given
                .iter()
                .find(|g| g.name == param.name)
                .map(|g| g.value.clone())
                .or_else(|| param.default.clone())
                .map(|text| (param.name.clone(), text))
        })
        .collect()
}

/// A workflow param's text for `$(workflow.<name>)`: a string as it is, anything else as JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The run's params, typed, with the Agent's defaults applied, keyed by name.
///
/// On failure returns [`Error::InvalidParams`] listing every problem: run params the Agent
/// does not declare or that repeat (in the run's order; the first value of a repeated param
/// is the one checked), then values that do not parse,
/// required params that are missing and defaults that do not parse (in the Agent's order).
pub fn resolve_params(
    declared: &[AgentParam],
    given: &[RunParam],
) -> Result<BTreeMap<String, Value>, Error> {
    let mut problems = Vec::new();
    let mut values: BTreeMap<&str, &str> = BTreeMap::new();
    for param in given {
        if !declared.iter().any(|d| d.name == param.name) {
            problems.push(Error::UnknownParam {
                name: param.name.clone(),
            });
        } else if values.contains_key(param.name.as_str()) {
            problems.push(Error::DuplicateParam {
                name: param.name.clone(),
            });
        } else {
            values.insert(&param.name, &param.value);
        }
    }

    let mut typed = BTreeMap::new();
    for param in declared {
        let value = match (values.get(param.name.as_str()), &param.default) {
            (Some(value), _) => {
                parse_value(value, param.param_type).ok_or_else(|| Error::InvalidParamValue {
                    name: param.name.clone(),
                    value: (*value).to_string(),
                    expected: param.param_type,
                })
            }
            (None, _) if param.required == Some(true) => Err(Error::MissingParam {
                name: param.name.clone(),
            }),
            (None, Some(default)) => parse_default(param, default),
            (None, None) => continue,
        };
        match value {
            Ok(value) => {
                typed.insert(param.name.clone(), value);
            }
            Err(problem) => problems.push(problem),
        }
    }

    if problems.is_empty() {
        Ok(typed)
    } else {
        Err(Error::InvalidParams(problems))
    }
}

/// Checks an Agent's param declarations: every default parses as its type and no name
/// repeats. On failure returns [`Error::InvalidParams`] listing every problem.
pub fn validate_param_declarations(declared: &[AgentParam]) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for param in declared {
        if !seen.insert(param.name.as_str()) {
            problems.push(Error::DuplicateParam {
                name: param.name.clone(),
            });
        }
        if let Some(default) = &param.default
            && let Err(problem) = parse_default(param, default)
        {
            problems.push(problem);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidParams(problems))
    }
}

fn parse_default(param: &AgentParam, default: &str) -> Result<Value, Error> {
    parse_value(default, param.param_type).ok_or_else(|| Error::InvalidParamDefault {
        name: param.name.clone(),
        value: default.to_string(),
        expected: param.param_type,
    })
}

/// The typed value of `text`, or None when it is not a value of `param_type`.
fn parse_value(text: &str, param_type: ParamType) -> Option<Value> {
    match param_type {
        ParamType::String => Some(Value::String(text.to_string())),
        ParamType::Boolean => match text {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ParamType::Number => parse_number(text).map(Value::Number),
    }
}

/// A JSON number, exactly as JSON writes it: no sign `+`, no leading zeros, no `NaN` or
/// `Infinity`, no surrounding whitespace. Integers outside the 64-bit range are rejected
/// rather than silently rounded to a float.
fn parse_number(text: &str) -> Option<Number> {
    if text.trim() != text {
        return None;
    }
    // serde_json rejects non-finite values (`1e999`) and anything that is not one number.
    let number: Number = serde_json::from_str(text).ok()?;
    let written_as_integer = !text.contains(['.', 'e', 'E']);
    if written_as_integer && number.is_f64() {
        // serde_json reads `-0` as the float -0.0; every other such case is out of range.
        return (number.as_f64() == Some(0.0)).then(|| Number::from(0));
    }
    Some(number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param(
        name: &str,
        param_type: ParamType,
        default: Option<&str>,
        required: bool,
    ) -> AgentParam {
        AgentParam {
            name: name.into(),
            param_type,
            description: None,
            default: default.map(Into::into),
            required: required.then_some(true),
        }
    }

    fn given(pairs: &[(&str, &str)]) -> Vec<RunParam> {
        pairs
            .iter()
            .map(|(name, value)| RunParam {
                name: (*name).into(),
                value: (*value).into(),
            })
            .collect()
    }

    fn number(text: &str) -> Result<BTreeMap<String, Value>, Error> {
        resolve_params(
            &[param("n", ParamType::Number, None, false)],
            &given(&[("n", text)]),
        )
    }

    #[test]
    fn values_are_typed_and_defaults_applied() {
        let declared = [
            param("target", ParamType::String, None, true),
            param("depth", ParamType::Number, Some("3"), false),
            param("ratio", ParamType::Number, None, false),
            param("dry_run", ParamType::Boolean, Some("false"), false),
            param("note", ParamType::String, None, false),
        ];
        let typed = resolve_params(
            &declared,
            &given(&[("target", "quarkus"), ("ratio", "0.25")]),
        )
        .expect("valid");
        assert_eq!(
            serde_json::to_value(&typed).expect("serializes"),
            json!({"target": "quarkus", "depth": 3, "ratio": 0.25, "dry_run": false})
        );
        assert!(
            !typed.contains_key("note"),
            "no value and no default means absent"
        );
    }

    #[test]
    fn run_value_wins_over_default() {
        let declared = [param("depth", ParamType::Number, Some("3"), false)];
        let typed = resolve_params(&declared, &given(&[("depth", "7")])).expect("valid");
        assert_eq!(typed["depth"], json!(7));
    }

    #[test]
    fn strings_are_kept_verbatim() {
        let declared = [param("s", ParamType::String, None, false)];
        for text in ["", " padded ", "3", "true", "ünïcode\nline"] {
            let typed = resolve_params(&declared, &given(&[("s", text)])).expect("valid");
            assert_eq!(typed["s"], Value::String(text.into()));
        }
    }

    #[test]
    fn numbers_keep_integers_integral() {
        assert_eq!(number("42").expect("valid")["n"].as_i64(), Some(42));
        assert_eq!(number("-7").expect("valid")["n"].as_i64(), Some(-7));
        assert_eq!(
            number("18446744073709551615").expect("valid")["n"].as_u64(),
            Some(u64::MAX)
        );
        assert_eq!(number("2.5").expect("valid")["n"].as_f64(), Some(2.5));
        assert_eq!(number("1e3").expect("valid")["n"].as_f64(), Some(1000.0));
        assert_eq!(number("-0").expect("valid")["n"], json!(0));
        // What the sandbox reads in params.json.
        let written: Vec<String> = ["3", "2.5", "1e3", "-0", "-12"]
            .iter()
            .map(|text| number(text).expect("valid")["n"].to_string())
            .collect();
        assert_eq!(written, ["3", "2.5", "1000.0", "0", "-12"]);
    }

    #[test]
    fn numbers_reject_everything_json_does_not_write() {
        for text in [
            "",
            " ",
            " 1",
            "1 ",
            "+1",
            "01",
            ".5",
            "5.",
            "NaN",
            "nan",
            "inf",
            "Infinity",
            "-Infinity",
            "1e999",
            "0x10",
            "1_000",
            "1,5",
            "abc",
            "[1]",
            "\"1\"",
            "1 2",
            "99999999999999999999999",
        ] {
            let error = number(text).expect_err(text);
            assert_eq!(
                error,
                Error::InvalidParams(vec![Error::InvalidParamValue {
                    name: "n".into(),
                    value: text.into(),
                    expected: ParamType::Number,
                }]),
                "{text:?}"
            );
        }
    }

    #[test]
    fn booleans_are_exactly_true_or_false() {
        let declared = [param("b", ParamType::Boolean, None, false)];
        assert_eq!(
            resolve_params(&declared, &given(&[("b", "true")])).expect("valid")["b"],
            json!(true)
        );
        assert_eq!(
            resolve_params(&declared, &given(&[("b", "false")])).expect("valid")["b"],
            json!(false)
        );
        for text in ["True", "FALSE", "1", "0", "yes", "", " true"] {
            assert!(
                resolve_params(&declared, &given(&[("b", text)])).is_err(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn every_problem_is_reported_at_once_in_order() {
        let declared = [
            param("target", ParamType::String, None, true),
            param("depth", ParamType::Number, None, false),
            param("flag", ParamType::Boolean, Some("maybe"), false),
        ];
        let error = resolve_params(
            &declared,
            &given(&[("colour", "red"), ("depth", "deep"), ("depth", "1")]),
        )
        .expect_err("invalid");
        assert_eq!(error.reason(), "InvalidParams");
        let Error::InvalidParams(problems) = &error else {
            panic!("unexpected {error:?}");
        };
        let reasons: Vec<&str> = problems.iter().map(Error::reason).collect();
        assert_eq!(
            reasons,
            [
                "UnknownParam",
                "DuplicateParam",
                "MissingParam",
                "InvalidParamValue",
                "InvalidParamDefault"
            ]
        );
        assert_eq!(
            error.to_string(),
            "param \"colour\" is not declared by the Agent; \
             param \"depth\" is set more than once; \
             param \"target\" is required but not set; \
             param \"depth\" must be a number in JSON syntax (for example 3, -1 or 2.5), got \"deep\"; \
             param \"flag\" has default \"maybe\", which is not true or false"
        );
    }

    #[test]
    fn a_bad_default_is_harmless_when_the_run_sets_the_value() {
        let declared = [param("flag", ParamType::Boolean, Some("maybe"), false)];
        let typed = resolve_params(&declared, &given(&[("flag", "true")])).expect("valid");
        assert_eq!(typed["flag"], json!(true));
    }

    #[test]
    fn required_is_required_even_with_a_default() {
        // The CRD forbids the combination; if it slips through, required wins.
        let declared = [param("x", ParamType::String, Some("d"), true)];
        assert_eq!(
            resolve_params(&declared, &[]),
            Err(Error::InvalidParams(vec![Error::MissingParam {
                name: "x".into()
            }]))
        );
    }

    #[test]
    fn declarations_are_checked_for_defaults_and_repeats() {
        assert_eq!(
            validate_param_declarations(&[
                param("a", ParamType::Number, Some("1.5"), false),
                param("b", ParamType::Boolean, Some("true"), false),
                param("c", ParamType::String, Some(""), false),
            ]),
            Ok(())
        );
        assert_eq!(
            validate_param_declarations(&[
                param("a", ParamType::Number, Some("lots"), false),
                param("a", ParamType::Boolean, None, false),
            ]),
            Err(Error::InvalidParams(vec![
                Error::InvalidParamDefault {
                    name: "a".into(),
                    value: "lots".into(),
                    expected: ParamType::Number
                },
                Error::DuplicateParam { name: "a".into() },
            ]))
        );
    }

    fn agent_spec(prompt: &str, execution: Option<ExecutionLimits>) -> AgentSpec {
        AgentSpec {
            prompt: Some(prompt.into()),
            params: vec![
                param("target", ParamType::String, None, true),
                param("depth", ParamType::Number, Some("3"), false),
                param("note", ParamType::String, None, false),
            ],
            execution,
            ..AgentSpec::default()
        }
    }

    fn run_spec(instructions: &str, pairs: &[(&str, &str)]) -> AgentRunSpec {
        AgentRunSpec {
            instructions: Some(instructions.into()),
            params: given(pairs),
            ..AgentRunSpec::default()
        }
    }

    fn document(params: &RunParams) -> Value {
        json!({
            "workflow": params.workflow,
            "agent": params.agent,
            "execution": params.execution.to_json(),
        })
    }

    #[test]
    fn a_run_gets_three_sections_and_substituted_text() {
        let agent = agent_spec("Migrate to $(agent.target), depth $(agent.depth).", None);
        let mut run = run_spec(
            "Ticket $(workflow.ticket), stage $(workflow.stage) of $(workflow.flags); $$(agent.note) stays.",
            &[("target", "quarkus"), ("depth", "1e3")],
        );
        run.workflow_params = Some(
            json!({"ticket": "MIG-7", "stage": 2, "flags": {"fast": true}})
                .as_object()
                .cloned()
                .expect("object"),
        );
        let params = resolve_run(&agent, &run).expect("valid");
        assert_eq!(
            params.prompt, "Migrate to quarkus, depth 1e3.",
            "as written"
        );
        assert_eq!(
            params.instructions,
            r#"Ticket MIG-7, stage 2 of {"fast":true}; $(agent.note) stays."#
        );
        assert_eq!(
            document(&params),
            json!({
                "workflow": {"ticket": "MIG-7", "stage": 2, "flags": {"fast": true}},
                "agent": {"target": "quarkus", "depth": 1000.0},
                "execution": {"mode": "auto"},
            })
        );
    }

    #[test]
    fn without_anything_the_sections_are_still_there() {
        let params = resolve_run(&AgentSpec::default(), &AgentRunSpec::default()).expect("valid");
        assert_eq!(
            document(&params),
            json!({"workflow": {}, "agent": {}, "execution": {"mode": "auto"}})
        );
        assert_eq!(
            (params.prompt.as_str(), params.instructions.as_str()),
            ("", "")
        );
    }

    #[test]
    fn the_runs_execution_overrides_the_agents_field_by_field() {
        let agent = agent_spec(
            "",
            Some(ExecutionLimits {
                max_turns: Some(40),
                max_cost: Some("10.00".into()),
            }),
        );
        let mut run = run_spec("", &[("target", "x")]);
        let resolved =
            |run: &AgentRunSpec| resolve_run(&agent, run).expect("valid").execution.to_json();
        assert_eq!(
            resolved(&run),
            json!({"mode": "auto", "maxTurns": 40, "maxCost": "10.00"})
        );
        run.execution = Some(RunExecution {
            mode: Some(ExecutionMode::Approve),
            ask_user: Some(true),
            max_turns: Some(5),
            max_cost: None,
        });
        assert_eq!(
            resolved(&run),
            json!({"mode": "approve", "askUser": true, "maxTurns": 5, "maxCost": "10.00"})
        );
        assert_eq!(
            ResolvedExecution::resolve(None, None),
            ResolvedExecution::default()
        );
    }

    #[test]
    fn unresolved_references_fail_with_invalid_params_naming_them() {
        // `note` is declared but has no value; `ghost` is not declared; no workflow params.
        let agent = agent_spec("Use $(agent.note) and $(agent.ghost).", None);
        let run = run_spec("For $(workflow.ticket).", &[("target", "x")]);
        let error = resolve_run(&agent, &run).expect_err("unresolved");
        assert_eq!(error.reason(), "InvalidParams");
        assert_eq!(
            error,
            Error::InvalidParams(vec![
                Error::UnresolvedReference {
                    field: "spec.prompt",
                    reference: "$(agent.note)".into()
                },
                Error::UnresolvedReference {
                    field: "spec.prompt",
                    reference: "$(agent.ghost)".into()
                },
                Error::UnresolvedReference {
                    field: "spec.instructions",
                    reference: "$(workflow.ticket)".into()
                },
            ])
        );
        assert_eq!(
            error.to_string(),
            "spec.prompt references $(agent.note), which is not a declared param with a value or a default; \
             spec.prompt references $(agent.ghost), which is not a declared param with a value or a default; \
             spec.instructions references $(workflow.ticket), which spec.workflowParams does not set"
        );
    }

    #[test]
    fn param_problems_and_references_are_reported_together() {
        let agent = agent_spec("$(agent.target)", None);
        let run = run_spec("$(agent.missing)", &[("depth", "deep")]);
        let Err(Error::InvalidParams(problems)) = resolve_run(&agent, &run) else {
            panic!("invalid");
        };
        let reasons: Vec<&str> = problems.iter().map(Error::reason).collect();
        assert_eq!(
            reasons,
            [
                "MissingParam",
                "InvalidParamValue",
                "UnresolvedReference",
                "UnresolvedReference"
            ]
        );
    }
}
