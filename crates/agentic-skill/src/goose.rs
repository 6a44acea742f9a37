//! Frontmatter that is valid by the specification but that goose, the agent runtime that
//! reads `/opt/skills`, would skip or read differently. A Ready skill must be the skill the
//! agent sees, so each of these is an error that says what goose would do.
//!
//! goose (checked against 1.50.0 and 1.52.0; `tests/goose.rs` holds the rules to the
//! binaries) finds the frontmatter by splitting the whole file at every `---`, whether or
//! not it is a line of its own, trims white space from both ends of the second piece, and
//! reads that with serde_yaml 0.9 into a typed `name` (optional string) and `description`
//! (string), skipping the skill when that fails.

use crate::document::YAML_FIRST_LINE;
use crate::finding::{Finding, FindingCode, quote};
use crate::yaml::{Entry, Value};

/// Adds a finding for each way goose would skip or cut short `yaml` (the frontmatter
/// between our delimiters, whose root `entries` were parsed from it).
///
/// One difference is left alone: goose trims white space from the end of the frontmatter,
/// so a `|` or `>` description written last loses its final line break. That changes no
/// word the agent sees, and Konveyor's own skills are written so.
pub(crate) fn check(yaml: &str, entries: &[Entry], findings: &mut Vec<Finding>) {
    check_three_hyphens(yaml, findings);
    check_first_line_indentation(yaml, findings);
    check_null_name(entries, findings);
    check_metadata_integers(entries, findings);
}

fn check_three_hyphens(yaml: &str, findings: &mut Vec<Finding>) {
    let Some(line) = yaml.lines().position(|line| line.contains("---")) else {
        return;
    };
    findings.push(Finding::new(
        FindingCode::GooseFrontmatterCut,
        format!(
            "goose would not read this frontmatter whole: it ends the frontmatter at the first \
             '---' anywhere in the file, and line {} holds '---', so goose would skip the skill \
             or cut its fields short there; write it without three hyphens in a row",
            line + YAML_FIRST_LINE
        ),
    ));
}

/// goose trims the frontmatter before parsing it, so an indented first field loses its
/// indentation and no longer lines up with the fields below it.
fn check_first_line_indentation(yaml: &str, findings: &mut Vec<Finding>) {
    let first = yaml
        .lines()
        .enumerate()
        .find(|(_, line)| !line.trim().is_empty());
    let Some((index, line)) = first else {
        return;
    };
    let indented = line.starts_with([' ', '\t']);
    if indented && !line.trim_start().starts_with('#') {
        findings.push(Finding::new(
            FindingCode::GooseIndentedFrontmatter,
            format!(
                "goose would not list this skill: it strips the white space before the \
                 frontmatter's first field (line {}), so the fields below no longer line up \
                 with it; start the fields at the beginning of their lines",
                index + YAML_FIRST_LINE
            ),
        ));
    }
}

/// serde_yaml reads a plain `null` as no value, and goose skips a skill without a name.
fn check_null_name(entries: &[Entry], findings: &mut Vec<Finding>) {
    let Some(entry) = entries.iter().find(|e| e.key == "name") else {
        return;
    };
    if let Value::Scalar(name) = &entry.value.value
        && entry.value.plain
        && matches!(name.as_str(), "null" | "Null" | "NULL" | "~")
    {
        findings.push(Finding::new(
            FindingCode::GooseNameNull,
            format!(
                "goose would not list this skill: it reads the unquoted name {} at line {} as \
                 no name at all; quote it or choose another name",
                quote(name),
                entry.value.line
            ),
        ));
    }
}

/// goose cannot read a `metadata` value that serde_yaml takes for an integer beyond 64 bits,
/// and skips the whole skill.
fn check_metadata_integers(entries: &[Entry], findings: &mut Vec<Finding>) {
    let Some(Value::Mapping(metadata)) = entries
        .iter()
        .find(|e| e.key == "metadata")
        .map(|e| &e.value.value)
    else {
        return;
    };
    for entry in metadata {
        let Value::Scalar(value) = &entry.value.value else {
            continue;
        };
        if entry.value.plain && integer_beyond_64_bits(value) {
            findings.push(Finding::new(
                FindingCode::GooseIntegerOutOfRange,
                format!(
                    "goose would not list this skill: the metadata value of {} at line {} is \
                     the integer {}, which does not fit in 64 bits and goose cannot read; quote \
                     it to keep it text",
                    quote(&entry.key),
                    entry.value.line,
                    quote(value)
                ),
            ));
        }
    }
}

/// Whether serde_yaml 0.9 reads `scalar` (plain) as an integer that fits 128 bits but not 64
/// (goose then fails; past 128 bits serde_yaml reads a float or a string, which goose
/// ignores): an optional sign, then `0x`, `0o` or `0b` digits, or decimal digits without a
/// leading zero.
fn integer_beyond_64_bits(scalar: &str) -> bool {
    let (negative, unsigned) = match scalar.as_bytes().first() {
        Some(b'-') => (true, &scalar[1..]),
        Some(b'+') => (false, &scalar[1..]),
        _ => (false, scalar),
    };
    let (digits, radix) = if let Some(hex) = unsigned.strip_prefix("0x") {
        (hex, 16)
    } else if let Some(octal) = unsigned.strip_prefix("0o") {
        (octal, 8)
    } else if let Some(binary) = unsigned.strip_prefix("0b") {
        (binary, 2)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        // serde_yaml reads decimal digits with a leading zero as a string.
        return false;
    } else {
        (unsigned, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    let Ok(magnitude) = u128::from_str_radix(digits, radix) else {
        return false;
    };
    if negative {
        magnitude > u128::from(i64::MIN.unsigned_abs()) && magnitude <= i128::MIN.unsigned_abs()
    } else {
        magnitude > u128::from(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_beyond_64_bits_in_every_notation() {
        for beyond in [
            "18446744073709551616",
            "+18446744073709551616",
            "-9223372036854775809",
            "0x10000000000000000",
            "-0x8000000000000001",
            "0o2000000000000000000000",
            "0b10000000000000000000000000000000000000000000000000000000000000000",
            "340282366920938463463374607431768211455",
            "-170141183460469231731687303715884105728",
        ] {
            assert!(integer_beyond_64_bits(beyond), "{beyond}");
        }
        for within_or_text in [
            "18446744073709551615",
            "-9223372036854775808",
            "0xFFFFFFFFFFFFFFFF",
            // Past 128 bits serde_yaml reads a float or a string.
            "340282366920938463463374607431768211456",
            "-170141183460469231731687303715884105729",
            "0x100000000000000000000000000000000",
            "0",
            "-0",
            "00018446744073709551616",
            "1_000",
            "1e400",
            "0x",
            "+",
            "-",
            "",
            "v18446744073709551616",
            "0x+1",
            "1.5",
        ] {
            assert!(!integer_beyond_64_bits(within_or_text), "{within_or_text}");
        }
    }
}
