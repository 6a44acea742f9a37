//! Typing a run's params against the params its Agent declares, as Konveyor's controller
//! types them.
//!
//! Runs give every value as a string; the sandbox reads typed JSON values from
//! `/run/konveyor/params.json`. A declared param's effective value is the run's, else its
//! default. The rules are Go's `strconv`, which Konveyor's controller calls:
//!
//! | type      | accepted text (Go's function)                                   | JSON value                 |
//! |-----------|-----------------------------------------------------------------|----------------------------|
//! | `string`  | anything                                                        | the string as given        |
//! | `number`  | a base-10 64-bit integer (`ParseInt`: `3`, `+5`, `-0`, `007`), else a float (`ParseFloat`: `2.5`, `25.0`, `.5`, `1e3`, `1_000`, `0x1p4`) | integers and integral floats that fit 64 bits as integers (`25.0` → `25`), other floats as floats |
//! | `boolean` | `ParseBool`: `1`, `t`, `T`, `TRUE`, `true`, `True` and `0`, `f`, `F`, `FALSE`, `false`, `False` | `true` / `false` |
//!
//! Go's `ParseFloat` also reads `NaN`, `Inf` and `Infinity`, which Konveyor then cannot
//! write into params.json (its run retries forever); here they are not numbers, and neither
//! is a float beyond the 64-bit range (`1e999`), as in Go.
//!
//! A declared param whose effective value is empty (no value, no default, or `""`) is absent
//! from params.json and substitutes `""`; it is missing only when `required` and neither set
//! nor defaulted.
//!
//! [`resolve_run`] puts a run's whole `/run/konveyor/params.json` together, Konveyor's three
//! sections: `workflow` (the run's `spec.workflowParams`, `{}` when unset), `agent` (the
//! typed params above) and `execution` (`mode`, and `maxTurns`, `maxCost`, `askUser` when
//! set, the run's value over the Agent's). It also substitutes `$(agent.<name>)` and
//! `$(workflow.<name>)` in the Agent's prompt and the run's instructions
//! ([`crate::substitution`]): an agent param's text is its coerced value written canonically
//! ([`Coerced::text`]: `T` → `true`, `25.0` → `25`, `1e3` → `1000`); a workflow param's is
//! the string itself, or the JSON text of any other value.

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
    pub max_turns: Option<i64>,
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
    let Resolved {
        typed,
        texts,
        mut problems,
    } = resolve(&agent.params, &run.params);
    let workflow = run.workflow_params.clone().unwrap_or_default();
    let scopes = Scopes {
        agent: texts,
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

/// A workflow param's text for `$(workflow.<name>)`: a string as it is, anything else as JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The run's params, typed, with the Agent's defaults applied, keyed by name; params whose
/// effective value is empty are left out.
///
/// On failure returns [`Error::InvalidParams`] listing every problem: run params the Agent
/// does not declare or that repeat (in the run's order; the first value of a repeated param
/// is the one checked), then, in the Agent's order, required params that are missing, values
/// and defaults that do not parse.
pub fn resolve_params(
    declared: &[AgentParam],
    given: &[RunParam],
) -> Result<BTreeMap<String, Value>, Error> {
    let resolved = resolve(declared, given);
    if resolved.problems.is_empty() {
        Ok(resolved.typed)
    } else {
        Err(Error::InvalidParams(resolved.problems))
    }
}

/// Declared params resolved against a run's values: what [`resolve_params_with_texts`] gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypedParams {
    /// The typed values, as [`resolve_params`] gives them.
    pub values: BTreeMap<String, Value>,
    /// Every declared param's text for a reference to it: its coerced value written
    /// canonically ([`Coerced::text`]), `""` for one without a value.
    pub texts: BTreeMap<String, String>,
}

/// [`resolve_params`], with the texts references take. Konveyor's workflow controller
/// substitutes the workflow's guide with these texts.
pub fn resolve_params_with_texts(
    declared: &[AgentParam],
    given: &[RunParam],
) -> Result<TypedParams, Error> {
    let resolved = resolve(declared, given);
    if resolved.problems.is_empty() {
        Ok(TypedParams {
            values: resolved.typed,
            texts: resolved.texts,
        })
    } else {
        Err(Error::InvalidParams(resolved.problems))
    }
}

/// What [`resolve`] makes of a run's params.
struct Resolved {
    /// The `agent` section of params.json.
    typed: BTreeMap<String, Value>,
    /// Every declared param's text for `$(agent.<name>)`; a value that does not parse keeps
    /// its text, so the run fails for the value alone and not also for the reference.
    texts: BTreeMap<String, String>,
    problems: Vec<Error>,
}

fn resolve(declared: &[AgentParam], given: &[RunParam]) -> Resolved {
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
    let mut texts = BTreeMap::new();
    for param in declared {
        // Konveyor reads an empty default as no default: Go cannot tell them apart.
        let default = param.default.as_deref().filter(|d| !d.is_empty());
        let (text, from_default) = match (values.get(param.name.as_str()), default) {
            (Some(value), _) => (*value, false),
            (None, Some(default)) => (default, true),
            (None, None) => {
                if param.required == Some(true) {
                    problems.push(Error::MissingParam {
                        name: param.name.clone(),
                    });
                }
                ("", false)
            }
        };
        if text.is_empty() {
            texts.insert(param.name.clone(), String::new());
            continue;
        }
        match coerce(text, param.param_type) {
            Some(value) => {
                texts.insert(param.name.clone(), value.text());
                typed.insert(param.name.clone(), value.to_json());
            }
            None => {
                texts.insert(param.name.clone(), text.to_string());
                problems.push(if from_default {
                    invalid_default(param, text)
                } else {
                    invalid_value(param, text)
                });
            }
        }
    }
    Resolved {
        typed,
        texts,
        problems,
    }
}

fn invalid_value(param: &AgentParam, value: &str) -> Error {
    Error::InvalidParamValue {
        name: param.name.clone(),
        value: value.to_string(),
        expected: param.param_type,
    }
}

fn invalid_default(param: &AgentParam, default: &str) -> Error {
    Error::InvalidParamDefault {
        name: param.name.clone(),
        value: default.to_string(),
        expected: param.param_type,
    }
}

/// Checks an Agent's param declarations: every non-empty default parses as its type and no
/// name repeats. On failure returns [`Error::InvalidParams`] listing every problem.
pub fn validate_param_declarations(declared: &[AgentParam]) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for param in declared {
        if !seen.insert(param.name.as_str()) {
            problems.push(Error::DuplicateParam {
                name: param.name.clone(),
            });
        }
        if let Some(default) = param.default.as_deref().filter(|d| !d.is_empty())
            && coerce(default, param.param_type).is_none()
        {
            problems.push(invalid_default(param, default));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidParams(problems))
    }
}

/// A param's value coerced to its declared type, as Konveyor's controller coerces it.
#[derive(Clone, Debug, PartialEq)]
pub enum Coerced {
    /// A `string` param: the text as given.
    Text(String),
    /// A `boolean` param.
    Boolean(bool),
    /// A `number` param that Go's `ParseInt` reads in base 10 into 64 bits.
    Integer(i64),
    /// Any other `number` param, as Go's `ParseFloat` reads it; always finite.
    Float(f64),
}

impl Coerced {
    /// The value in params.json. Go writes an integral float without a fraction (`25`), so
    /// one that fits 64 bits becomes a JSON integer; other floats are written by
    /// `serde_json`, which may choose another notation than Go's for the same number
    /// (`1e21` where Go writes `1e+21`).
    pub fn to_json(&self) -> Value {
        match self {
            Coerced::Text(text) => Value::String(text.clone()),
            Coerced::Boolean(b) => Value::Bool(*b),
            Coerced::Integer(i) => Value::from(*i),
            Coerced::Float(f) => match integral(*f) {
                Some(i) => Value::from(i),
                None => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            },
        }
    }

    /// The text `$(agent.<name>)` becomes: Go's `FormatBool`, `FormatInt`, and
    /// `FormatFloat(f, 'f', -1, 64)` (the shortest digits that read back as the same float,
    /// never an exponent), which Rust's `Display` for `f64` writes too.
    pub fn text(&self) -> String {
        match self {
            Coerced::Text(text) => text.clone(),
            Coerced::Boolean(b) => b.to_string(),
            Coerced::Integer(i) => i.to_string(),
            Coerced::Float(f) => f.to_string(),
        }
    }
}

/// `f` as an integer when it has no fraction, fits 64 bits and is not `-0` (which Go writes
/// as `-0`).
fn integral(f: f64) -> Option<i64> {
    // 2^63 itself does not fit; every float below it that has no fraction does.
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    let fits = f.fract() == 0.0 && (-TWO_TO_63..TWO_TO_63).contains(&f);
    // The range check makes the cast exact.
    #[allow(clippy::cast_possible_truncation)]
    (fits && !(f == 0.0 && f.is_sign_negative())).then_some(f as i64)
}

/// `text` coerced to `param_type`, or None when it is not a value of that type.
pub fn coerce(text: &str, param_type: ParamType) -> Option<Coerced> {
    match param_type {
        ParamType::String => Some(Coerced::Text(text.to_string())),
        ParamType::Boolean => go_parse_bool(text).map(Coerced::Boolean),
        // Rust's `i64` parser takes exactly what Go's `ParseInt(text, 10, 64)` takes: an
        // optional sign and decimal digits, in range.
        ParamType::Number => text
            .parse::<i64>()
            .ok()
            .map(Coerced::Integer)
            .or_else(|| go_parse_float(text).map(Coerced::Float)),
    }
}

/// Go's `strconv.ParseBool`.
fn go_parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseFloat(text, 64)` for finite results: decimal (`2.5`, `.5`, `5.`,
/// `1e3`) and hexadecimal (`0x1.8p1`, the `p` exponent required) floats, with `_` allowed
/// only between digits (or after `0x`). None for anything else, for `NaN` and infinities,
/// and for values beyond the float range, where Go returns a range error. Values below it
/// round to zero, as in Go.
fn go_parse_float(text: &str) -> Option<f64> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let hex = unsigned.len() > 2 && (unsigned.starts_with("0x") || unsigned.starts_with("0X"));
    let digits = if unsigned.contains('_') {
        if !underscores_between_digits(unsigned, hex) {
            return None;
        }
        unsigned.replace('_', "")
    } else {
        unsigned.to_string()
    };
    let magnitude = if hex {
        parse_hex_float(&digits[2..])?
    } else if is_decimal_float(&digits) {
        digits.parse::<f64>().ok()?
    } else {
        return None;
    };
    magnitude
        .is_finite()
        .then_some(if negative { -magnitude } else { magnitude })
}

/// Go's rule for `_` in a number: each one follows a digit (or the `0x` prefix) and is
/// followed by one.
fn underscores_between_digits(unsigned: &str, hex: bool) -> bool {
    #[derive(PartialEq)]
    enum Last {
        Start,
        Digit,
        Underscore,
        Other,
    }
    let (mut last, body) = if hex {
        (Last::Digit, &unsigned[2..])
    } else {
        (Last::Start, unsigned)
    };
    for c in body.chars() {
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            last = Last::Digit;
        } else if c == '_' {
            if last != Last::Digit {
                return false;
            }
            last = Last::Underscore;
        } else if last == Last::Underscore {
            return false;
        } else {
            last = Last::Other;
        }
    }
    last != Last::Underscore
}

/// Digits with at most one `.` and at least one digit, then an optional exponent (`e` or
/// `E`, an optional sign, digits). Checked here because Rust's parser also reads `inf` and
/// `nan`.
fn is_decimal_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits_from = |at: usize| {
        bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut at = digits_from(0);
    let mut mantissa_digits = at;
    if bytes.get(at) == Some(&b'.') {
        let fraction = digits_from(at + 1);
        mantissa_digits += fraction;
        at += 1 + fraction;
    }
    if mantissa_digits == 0 {
        return false;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let exponent = digits_from(at);
        if exponent == 0 {
            return false;
        }
        at += exponent;
    }
    at == bytes.len()
}

/// The magnitude of a hexadecimal float after its `0x`: hex digits with at most one `.`, at
/// least one digit, then `p` or `P`, an optional sign and decimal digits; rounded to the
/// nearest float, ties to even. Infinite when beyond the float range.
fn parse_hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = text.split_once(['p', 'P'])?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if whole.len() + fraction.len() == 0 || !all_hex(whole) || !all_hex(fraction) {
        return None;
    }
    let (exponent_negative, exponent_digits) = match exponent.as_bytes().first() {
        Some(b'-') => (true, &exponent[1..]),
        Some(b'+') => (false, &exponent[1..]),
        _ => (false, exponent),
    };
    if exponent_digits.is_empty() || !exponent_digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Any exponent past this many binary places is zero or infinite whatever the digits.
    const EXPONENT_CAP: i64 = 100_000;
    let written_exponent = exponent_digits.bytes().fold(0i64, |e, b| {
        (e * 10 + i64::from(b - b'0')).min(EXPONENT_CAP)
    });

    // The value is mantissa * 2^binary_exponent, exactly but for the digits past 60 bits,
    // which only tell whether anything non-zero was dropped.
    let mut mantissa: u64 = 0;
    let mut binary_exponent: i64 = if exponent_negative {
        -written_exponent
    } else {
        written_exponent
    };
    let mut dropped_non_zero = false;
    for (digit, in_fraction) in whole
        .bytes()
        .map(|b| (b, false))
        .chain(fraction.bytes().map(|b| (b, true)))
    {
        let value = u64::from(char::from(digit).to_digit(16)?);
        if mantissa >> 60 == 0 {
            mantissa = mantissa * 16 + value;
            if in_fraction {
                binary_exponent -= 4;
            }
        } else {
            dropped_non_zero |= value != 0;
            if !in_fraction {
                binary_exponent += 4;
            }
        }
    }
    if mantissa == 0 {
        return Some(0.0);
    }
    Some(round_to_f64(mantissa, binary_exponent, dropped_non_zero))
}

/// The float nearest `mantissa * 2^exponent` (plus a little more when `sticky`), ties to
/// even; infinite when beyond the float range.
fn round_to_f64(mantissa: u64, exponent: i64, sticky: bool) -> f64 {
    const SIGNIFICAND_BITS: i64 = 53;
    const MIN_EXPONENT: i64 = -1022;
    const MAX_EXPONENT: i64 = 1023;
    let shift_left = i64::from(mantissa.leading_zeros());
    let normalised = u128::from(mantissa << shift_left);
    // The value lies in [2^top, 2^(top + 1)).
    let mut top = exponent - shift_left + 63;
    if top > MAX_EXPONENT {
        return f64::INFINITY;
    }
    // Subnormal floats keep fewer bits; below half the smallest one, nothing is left.
    let kept_bits = if top >= MIN_EXPONENT {
        SIGNIFICAND_BITS
    } else {
        SIGNIFICAND_BITS - (MIN_EXPONENT - top)
    };
    if kept_bits < 0 {
        return 0.0;
    }
    let shift = u32::try_from(64 - kept_bits).unwrap_or(64);
    let mut kept = normalised >> shift;
    let rest = normalised & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rest > half || (rest == half && (sticky || kept & 1 == 1)) {
        kept += 1;
    }
    let hidden_bit = 1u128 << (SIGNIFICAND_BITS - 1);
    if top < MIN_EXPONENT {
        // A subnormal's bits are its significand; rounding up to 2^52 makes the smallest
        // normal float, whose bits are the same number.
        return f64::from_bits(u64::try_from(kept).unwrap_or(0));
    }
    if kept == hidden_bit << 1 {
        kept = hidden_bit;
        top += 1;
        if top > MAX_EXPONENT {
            return f64::INFINITY;
        }
    }
    let biased = u64::try_from(top + MAX_EXPONENT).unwrap_or(0);
    let fraction = u64::try_from(kept - hidden_bit).unwrap_or(0);
    f64::from_bits((biased << 52) | fraction)
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

    /// What Go's `strconv.ParseInt(s, 10, 64)`, else `strconv.ParseFloat(s, 64)`, makes of
    /// each text (go1.25): the value's `encoding/json` text and its substitution text
    /// (`FormatInt`, `FormatFloat(f, 'f', -1, 64)`), or None when both return an error.
    const GO_NUMBERS: &[(&str, Option<(&str, &str)>)] = &[
        ("0", Some(("0", "0"))),
        ("42", Some(("42", "42"))),
        ("-7", Some(("-7", "-7"))),
        ("+5", Some(("5", "5"))),
        ("-0", Some(("0", "0"))),
        ("007", Some(("7", "7"))),
        (
            "9223372036854775807",
            Some(("9223372036854775807", "9223372036854775807")),
        ),
        (
            "-9223372036854775808",
            Some(("-9223372036854775808", "-9223372036854775808")),
        ),
        (
            "9223372036854775808",
            Some(("9223372036854776000", "9223372036854776000")),
        ),
        (
            "18446744073709551615",
            Some(("18446744073709552000", "18446744073709552000")),
        ),
        (
            "99999999999999999999",
            Some(("100000000000000000000", "100000000000000000000")),
        ),
        ("25.0", Some(("25", "25"))),
        ("2.5", Some(("2.5", "2.5"))),
        ("0.1", Some(("0.1", "0.1"))),
        ("12.50", Some(("12.5", "12.5"))),
        ("-0.0", Some(("-0", "-0"))),
        ("-.0", Some(("-0", "-0"))),
        (".5", Some(("0.5", "0.5"))),
        ("5.", Some(("5", "5"))),
        ("+.5e-3", Some(("0.0005", "0.0005"))),
        ("1e3", Some(("1000", "1000"))),
        ("1E3", Some(("1000", "1000"))),
        ("1e+3", Some(("1000", "1000"))),
        (
            "1e20",
            Some(("100000000000000000000", "100000000000000000000")),
        ),
        ("1e21", Some(("1e+21", "1000000000000000000000"))),
        ("1e-6", Some(("0.000001", "0.000001"))),
        ("1e-7", Some(("1e-7", "0.0000001"))),
        ("1e-400", Some(("0", "0"))),
        (
            "123456789012345678901234567890",
            Some(("1.2345678901234568e+29", "123456789012345680000000000000")),
        ),
        ("1_000", Some(("1000", "1000"))),
        ("1_000.5", Some(("1000.5", "1000.5"))),
        ("1e1_0", Some(("10000000000", "10000000000"))),
        ("0x1p4", Some(("16", "16"))),
        ("0X1P-2", Some(("0.25", "0.25"))),
        ("0x1.8p1", Some(("3", "3"))),
        ("-0x1p-2", Some(("-0.25", "-0.25"))),
        ("0x_1p0", Some(("1", "1"))),
        ("0x1p1_0", Some(("1024", "1024"))),
        ("0x.8p1", Some(("1", "1"))),
        (
            "0x1fffffffffffffp0",
            Some(("9007199254740991", "9007199254740991")),
        ),
        (
            "0x1fffffffffffff8p-4",
            Some(("9007199254740992", "9007199254740992")),
        ),
        ("0x1p-1075", Some(("0", "0"))),
        (
            "0x123456789abcdef0123p0",
            Some(("5.373003642731685e+21", "5373003642731685000000")),
        ),
        ("", None),
        (" ", None),
        (" 1", None),
        ("1 ", None),
        ("+", None),
        ("-", None),
        ("+-1", None),
        (".", None),
        ("e1", None),
        ("1e", None),
        ("1.2.3", None),
        ("0x10", None),
        ("0x", None),
        ("0xp1", None),
        ("0x.p1", None),
        ("0x1p", None),
        ("0b101", None),
        ("0o17", None),
        ("_10", None),
        ("10_", None),
        ("1__0", None),
        ("1_.5", None),
        ("1._5", None),
        ("1e_5", None),
        ("1e999", None),
        ("-1e999", None),
        ("0x1p1024", None),
        ("0x1.fffffffffffff8p1023", None),
        ("1,5", None),
        ("abc", None),
        ("[1]", None),
        ("\"1\"", None),
        ("1 2", None),
        ("１", None),
        ("٣", None),
    ];

    fn number(text: &str) -> Result<BTreeMap<String, Value>, Error> {
        resolve_params(
            &[param("n", ParamType::Number, None, false)],
            &given(&[("n", text)]),
        )
    }

    /// `ours` holds the number Go's `encoding/json` writes as `go`: the same integer when Go
    /// writes one that fits 64 bits, else the same float, sign of zero included.
    fn assert_same_json_number(text: &str, ours: &Value, go: &str) {
        match go.parse::<i64>() {
            Ok(integer) if go != "-0" => assert_eq!(ours.as_i64(), Some(integer), "{text:?}"),
            _ => assert_eq!(
                ours.as_f64().map(f64::to_bits),
                go.parse::<f64>().ok().map(f64::to_bits),
                "{text:?}: ours {ours}, Go {go}"
            ),
        }
    }

    #[test]
    fn numbers_follow_go_parse_int_then_parse_float() {
        for (text, expected) in GO_NUMBERS {
            let coerced = coerce(text, ParamType::Number);
            match expected {
                Some((go_json, go_text)) => {
                    let coerced = coerced.unwrap_or_else(|| panic!("{text:?} is a number in Go"));
                    assert_eq!(coerced.text(), *go_text, "{text:?}");
                    assert_same_json_number(text, &coerced.to_json(), go_json);
                    assert_eq!(
                        number(text).expect(text)["n"],
                        coerced.to_json(),
                        "{text:?}"
                    );
                }
                None => {
                    assert_eq!(coerced, None, "{text:?} is not a number in Go");
                    if text.is_empty() {
                        // An empty value is an unset param, never checked against its type.
                        continue;
                    }
                    assert_eq!(
                        number(text),
                        Err(Error::InvalidParams(vec![Error::InvalidParamValue {
                            name: "n".into(),
                            value: (*text).into(),
                            expected: ParamType::Number,
                        }])),
                        "{text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn integral_floats_are_json_integers_within_64_bits() {
        assert_eq!(
            coerce("25.0", ParamType::Number),
            Some(Coerced::Float(25.0))
        );
        assert_eq!(number("25.0").expect("valid")["n"].to_string(), "25");
        assert_eq!(number("-0.0").expect("valid")["n"].to_string(), "-0.0");
        assert_eq!(number("2.5").expect("valid")["n"].to_string(), "2.5");
        assert!(
            number("1e20").expect("valid")["n"].is_f64(),
            "beyond 64 bits"
        );
        assert_eq!(
            number("-0x1p63").expect("valid")["n"].as_i64(),
            Some(i64::MIN),
            "-2^63 fits"
        );
    }

    #[test]
    fn hexadecimal_floats_round_to_nearest_even_down_to_subnormals() {
        let smallest = f64::from_bits(1);
        for (text, expected) in [
            ("0x1p-1074", smallest),
            ("0x1.8p-1075", smallest),
            ("0x1p-1075", 0.0),
            ("0x1.0000000000001p-1075", smallest),
            ("0x1p-1022", f64::MIN_POSITIVE),
            ("0x.fffffffffffff8p-1022", f64::MIN_POSITIVE),
            ("0x1.fffffffffffffp1023", f64::MAX),
            ("0x1.00000000000008p0", 1.0),
            ("0x1.00000000000018p0", 1.0 + 2.0 * f64::EPSILON),
            ("0x1.000000000000080000001p0", 1.0 + f64::EPSILON),
            ("0x0.000p99999999", 0.0),
        ] {
            assert_eq!(
                go_parse_float(text).map(f64::to_bits),
                Some(expected.to_bits()),
                "{text}"
            );
        }
        assert_eq!(go_parse_float("0x1p99999999"), None);
    }

    #[test]
    fn nan_and_infinities_are_not_numbers() {
        // Go's ParseFloat reads these; Konveyor's run then never gets its params.json.
        for text in ["NaN", "nan", "Inf", "+Inf", "-inf", "infinity", "Infinity"] {
            assert_eq!(coerce(text, ParamType::Number), None, "{text}");
        }
    }

    #[test]
    fn booleans_follow_go_parse_bool() {
        for (text, expected) in [
            ("1", Some(true)),
            ("t", Some(true)),
            ("T", Some(true)),
            ("TRUE", Some(true)),
            ("true", Some(true)),
            ("True", Some(true)),
            ("0", Some(false)),
            ("f", Some(false)),
            ("F", Some(false)),
            ("FALSE", Some(false)),
            ("false", Some(false)),
            ("False", Some(false)),
            (" true", None),
            ("true ", None),
            ("tRuE", None),
            ("yes", None),
            ("no", None),
            ("on", None),
            ("2", None),
            ("00", None),
            ("+1", None),
        ] {
            let coerced = coerce(text, ParamType::Boolean);
            assert_eq!(coerced, expected.map(Coerced::Boolean), "{text:?}");
            if let Some(b) = expected {
                assert_eq!(coerced.map(|c| c.text()), Some(b.to_string()), "{text:?}");
            }
        }
    }

    #[test]
    fn values_are_typed_and_defaults_applied() {
        let declared = [
            param("target", ParamType::String, None, true),
            param("depth", ParamType::Number, Some("3"), false),
            param("ratio", ParamType::Number, None, false),
            param("dry_run", ParamType::Boolean, Some("F"), false),
            param("note", ParamType::String, None, false),
            param("blank", ParamType::String, Some(""), false),
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
    }

    #[test]
    fn run_value_wins_over_default_even_when_empty() {
        let declared = [param("depth", ParamType::Number, Some("3"), false)];
        let typed = resolve_params(&declared, &given(&[("depth", "7")])).expect("valid");
        assert_eq!(typed["depth"], json!(7));
        // Konveyor reads the run's "" as the value, an empty one: absent, not the default.
        let typed = resolve_params(&declared, &given(&[("depth", "")])).expect("valid");
        assert_eq!(typed.get("depth"), None);
    }

    #[test]
    fn strings_are_kept_verbatim_and_empty_ones_left_out() {
        let declared = [param("s", ParamType::String, None, false)];
        for text in [" padded ", "3", "true", "ünïcode\nline"] {
            let typed = resolve_params(&declared, &given(&[("s", text)])).expect("valid");
            assert_eq!(typed["s"], Value::String(text.into()));
        }
        let typed = resolve_params(&declared, &given(&[("s", "")])).expect("valid");
        assert!(typed.is_empty(), "{typed:?}");
    }

    #[test]
    fn an_empty_value_is_not_checked_against_the_type() {
        let declared = [
            param("n", ParamType::Number, None, false),
            param("b", ParamType::Boolean, None, true),
        ];
        let typed =
            resolve_params(&declared, &given(&[("n", ""), ("b", "")])).expect("empty is unset");
        assert!(typed.is_empty(), "{typed:?}");
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
        assert_eq!(error.reason().as_str(), "InvalidParams");
        let Error::InvalidParams(problems) = &error else {
            panic!("unexpected {error:?}");
        };
        let reasons: Vec<&str> = problems.iter().map(|e| e.reason().as_str()).collect();
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
             param \"depth\" must be a finite number as Go's strconv reads it (for example 3, +5, 2.5, 1e3 or 0x1p4), got \"deep\"; \
             param \"flag\" has default \"maybe\", which is not a boolean as Go's strconv reads it \
             (true, false, 1, 0, t, f, T, F, TRUE, FALSE, True or False)"
        );
    }

    #[test]
    fn a_bad_default_is_harmless_when_the_run_sets_the_value() {
        let declared = [param("flag", ParamType::Boolean, Some("maybe"), false)];
        let typed = resolve_params(&declared, &given(&[("flag", "true")])).expect("valid");
        assert_eq!(typed["flag"], json!(true));
    }

    #[test]
    fn a_default_satisfies_required_and_an_empty_one_does_not() {
        let typed = resolve_params(&[param("x", ParamType::String, Some("d"), true)], &[])
            .expect("Konveyor accepts a required param with a default");
        assert_eq!(typed["x"], json!("d"));
        assert_eq!(
            resolve_params(&[param("x", ParamType::String, Some(""), true)], &[]),
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
            params.prompt, "Migrate to quarkus, depth 1000.",
            "the coerced value, as Go's FormatFloat writes it"
        );
        assert_eq!(
            params.instructions,
            r#"Ticket MIG-7, stage 2 of {"fast":true}; $(agent.note) stays."#
        );
        assert_eq!(
            document(&params),
            json!({
                "workflow": {"ticket": "MIG-7", "stage": 2, "flags": {"fast": true}},
                "agent": {"target": "quarkus", "depth": 1000},
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
        // `ghost` is not declared; no workflow params.
        let agent = agent_spec("Use $(agent.ghost).", None);
        let run = run_spec("For $(workflow.ticket).", &[("target", "x")]);
        let error = resolve_run(&agent, &run).expect_err("unresolved");
        assert_eq!(error.reason().as_str(), "InvalidParams");
        assert_eq!(
            error,
            Error::InvalidParams(vec![
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
            "spec.prompt references $(agent.ghost), which is not a param the Agent declares; \
             spec.instructions references $(workflow.ticket), which spec.workflowParams does not set"
        );
    }

    #[test]
    fn references_take_the_canonical_coerced_text_and_empty_params_substitute_nothing() {
        let agent = AgentSpec {
            prompt: Some(
                "[$(agent.flag)] [$(agent.count)] [$(agent.note)] [$(agent.depth)]".into(),
            ),
            params: vec![
                param("flag", ParamType::Boolean, None, false),
                param("count", ParamType::Number, None, false),
                param("note", ParamType::String, None, false),
                param("depth", ParamType::Number, None, true),
            ],
            ..AgentSpec::default()
        };
        let run = run_spec("", &[("flag", "T"), ("count", "25.0"), ("depth", "")]);
        let params = resolve_run(&agent, &run).expect("valid");
        assert_eq!(params.prompt, "[true] [25] [] []");
        assert_eq!(
            document(&params)["agent"],
            json!({"flag": true, "count": 25}),
            "empty params are left out of params.json"
        );
    }

    #[test]
    fn texts_cover_every_declared_param() {
        let declared = [
            param("ratio", ParamType::Number, Some("2.50"), false),
            param("fast", ParamType::Boolean, None, false),
            param("note", ParamType::String, None, false),
        ];
        let TypedParams {
            values: typed,
            texts,
        } = resolve_params_with_texts(&declared, &given(&[("fast", "1")])).expect("valid");
        assert_eq!(
            typed,
            BTreeMap::from([("ratio".into(), json!(2.5)), ("fast".into(), json!(true))])
        );
        assert_eq!(
            texts,
            BTreeMap::from([
                ("ratio".into(), "2.5".into()),
                ("fast".into(), "true".into()),
                ("note".into(), String::new()),
            ])
        );
        assert_eq!(
            resolve_params_with_texts(&declared, &given(&[("fast", "yes")])),
            Err(Error::InvalidParams(vec![Error::InvalidParamValue {
                name: "fast".into(),
                value: "yes".into(),
                expected: ParamType::Boolean,
            }]))
        );
    }

    #[test]
    fn param_problems_and_references_are_reported_together() {
        let agent = agent_spec("$(agent.target)", None);
        let run = run_spec("$(agent.missing)", &[("depth", "deep")]);
        let Err(Error::InvalidParams(problems)) = resolve_run(&agent, &run) else {
            panic!("invalid");
        };
        let reasons: Vec<&str> = problems.iter().map(|e| e.reason().as_str()).collect();
        assert_eq!(
            reasons,
            ["MissingParam", "InvalidParamValue", "UnresolvedReference"],
            "a param that is missing or bad is reported once, not also where it is referenced"
        );
    }
}
