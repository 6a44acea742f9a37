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

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::{AgentParam, ParamType, RunParam};
use serde_json::{Number, Value};

use crate::Error;

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
}
