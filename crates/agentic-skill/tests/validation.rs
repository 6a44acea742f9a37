//! The public API: every finding code, messages, the parsed frontmatter, paths and output.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agentic_skill::{
    FindingCode, Frontmatter, MAX_FINDINGS_PER_CODE, MAX_SKILL_MD_BYTES, PathReport, Refusal,
    Report, SKILL_FILE, Severity, SkillError, render_text, validate_path, validate_skill_md,
};

fn md(frontmatter: &str) -> Vec<u8> {
    format!("---\n{frontmatter}---\n# Instructions\n").into_bytes()
}

fn validate(frontmatter: &str) -> Report {
    validate_skill_md(&md(frontmatter), Some("x"))
}

fn error_codes(report: &Report) -> Vec<FindingCode> {
    report.errors.iter().map(|f| f.code).collect()
}

fn warning_codes(report: &Report) -> Vec<FindingCode> {
    report.warnings.iter().map(|f| f.code).collect()
}

/// One SKILL.md per finding code that `validate_skill_md` can produce, expected to yield
/// exactly that code (plus, where unavoidable, the listed others).
fn content_cases() -> Vec<(FindingCode, Vec<u8>, Vec<FindingCode>)> {
    use FindingCode::*;
    let mut too_large = md("name: x\ndescription: d\n");
    too_large.resize(usize::try_from(MAX_SKILL_MD_BYTES).unwrap() + 1, b'\n');
    vec![
        (FileTooLarge, too_large, vec![]),
        (
            FileNotUtf8,
            b"---\nname: x\ndescription: \xc3\n---\n".to_vec(),
            vec![],
        ),
        (FrontmatterMissing, b"# Title\n".to_vec(), vec![]),
        (
            FrontmatterUnclosed,
            b"---\nname: x\ndescription: d\n".to_vec(),
            vec![],
        ),
        (FrontmatterNotMapping, md("- a\n"), vec![]),
        (
            CharacterNotAllowed,
            md("name: x\ndescription: a\u{7}b\n"),
            vec![],
        ),
        (YamlInvalid, md("name: x\ndescription: 'open\n"), vec![]),
        (
            FlowStyleNotAllowed,
            md("name: x\ndescription: d\nmetadata: {}\n"),
            vec![],
        ),
        (AnchorNotAllowed, md("name: x\ndescription: &a d\n"), vec![]),
        (
            AliasNotAllowed,
            md("name: &a x\ndescription: *a\n"),
            vec![AnchorNotAllowed, DescriptionNotString],
        ),
        (TagNotAllowed, md("name: x\ndescription: !!str d\n"), vec![]),
        (TabNotAllowed, md("name: x\ndescription: d\t\n"), vec![]),
        (
            DuplicateKey,
            md("name: x\ndescription: d\ndescription: e\n"),
            vec![],
        ),
        (
            NonScalarKey,
            md("name: x\ndescription: d\n? - k\n: v\n"),
            vec![],
        ),
        (
            UnknownField,
            md("name: x\ndescription: d\nversion: 1\n"),
            vec![],
        ),
        (NameMissing, md("description: d\n"), vec![]),
        (
            NameNotString,
            md("name:\n  first: x\ndescription: d\n"),
            vec![],
        ),
        (NameEmpty, md("name: ''\ndescription: d\n"), vec![]),
        (
            NameTooLong,
            md(&format!("name: {}\ndescription: d\n", "x".repeat(65))),
            vec![NameMismatch],
        ),
        (
            NameUppercase,
            md("name: X\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (
            NameInvalidCharacter,
            md("name: x_y\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (
            NameLeadingHyphen,
            md("name: -x\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (
            NameTrailingHyphen,
            md("name: x-\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (
            NameConsecutiveHyphens,
            md("name: x--y\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (NameMismatch, md("name: y\ndescription: d\n"), vec![]),
        (DescriptionMissing, md("name: x\n"), vec![]),
        (
            DescriptionNotString,
            md("name: x\ndescription:\n  - d\n"),
            vec![],
        ),
        (DescriptionEmpty, md("name: x\ndescription: ' '\n"), vec![]),
        (
            DescriptionTooLong,
            md(&format!("name: x\ndescription: {}\n", "d".repeat(1025))),
            vec![],
        ),
        (
            CompatibilityNotString,
            md("name: x\ndescription: d\ncompatibility:\n  - a\n"),
            vec![],
        ),
        (
            CompatibilityEmpty,
            md("name: x\ndescription: d\ncompatibility: ''\n"),
            vec![],
        ),
        (
            CompatibilityTooLong,
            md(&format!(
                "name: x\ndescription: d\ncompatibility: {}\n",
                "c".repeat(501)
            )),
            vec![],
        ),
        (
            LicenseNotString,
            md("name: x\ndescription: d\nlicense:\n  - MIT\n"),
            vec![],
        ),
        (
            AllowedToolsNotString,
            md("name: x\ndescription: d\nallowed-tools:\n  - Read\n"),
            vec![],
        ),
        (
            MetadataNotMapping,
            md("name: x\ndescription: d\nmetadata: v\n"),
            vec![],
        ),
        (
            MetadataValueNotString,
            md("name: x\ndescription: d\nmetadata:\n  k:\n    - v\n"),
            vec![],
        ),
        (
            GooseFrontmatterCut,
            md("name: x\ndescription: before---after\n"),
            vec![],
        ),
        (
            GooseIndentedFrontmatter,
            md("  name: x\n  description: d\n"),
            vec![],
        ),
        (
            GooseNameNull,
            md("name: null\ndescription: d\n"),
            vec![NameMismatch],
        ),
        (
            GooseIntegerOutOfRange,
            md("name: x\ndescription: d\nmetadata:\n  id: 18446744073709551616\n"),
            vec![],
        ),
        (
            BodyEmpty,
            b"---\nname: x\ndescription: d\n---\n\n  \n".to_vec(),
            vec![],
        ),
        (
            TooManyLines,
            format!(
                "---\nname: x\ndescription: d\n---\n{}",
                "line\n".repeat(500)
            )
            .into_bytes(),
            vec![],
        ),
    ]
}

#[test]
fn each_code_is_produced_by_its_case_alone() {
    for (code, content, also) in content_cases() {
        let report = validate_skill_md(&content, Some("x"));
        let mut expected: BTreeSet<FindingCode> = also.into_iter().collect();
        expected.insert(code);
        let found: BTreeSet<FindingCode> = report
            .errors
            .iter()
            .chain(&report.warnings)
            .map(|f| f.code)
            .collect();
        assert_eq!(found, expected, "case for {code}: {report:?}");
        assert_eq!(
            report.is_valid(),
            code.severity() == Severity::Warning,
            "{code}"
        );
    }
}

#[test]
fn every_code_has_a_case() {
    let mut covered: BTreeSet<FindingCode> =
        content_cases().into_iter().map(|(code, ..)| code).collect();
    // Only a directory can lack SKILL.md; see `directory_without_skill_md`.
    covered.insert(FindingCode::SkillFileMissing);
    // Found by walking a directory: `a_nested_skill_file_or_a_link_is_refused`.
    covered.insert(FindingCode::NestedSkillFile);
    covered.insert(FindingCode::LinkInSkill);
    let all: BTreeSet<FindingCode> = FindingCode::ALL.iter().copied().collect();
    assert_eq!(covered, all);
}

#[test]
fn codes_serialize_as_their_stable_names() {
    for &code in FindingCode::ALL {
        assert_eq!(
            serde_json::to_value(code).unwrap(),
            serde_json::Value::String(code.as_str().to_owned())
        );
        assert_eq!(code.to_string(), code.as_str());
    }
}

#[test]
fn only_body_findings_are_warnings() {
    let warnings: Vec<FindingCode> = FindingCode::ALL
        .iter()
        .copied()
        .filter(|c| c.severity() == Severity::Warning)
        .collect();
    assert_eq!(
        warnings,
        [FindingCode::BodyEmpty, FindingCode::TooManyLines]
    );
}

#[test]
fn valid_skill_yields_its_frontmatter_as_written() {
    let report = validate_skill_md(
        &md(
            "name: pdf-2-text\ndescription: >-\n  Extract text.\n  Use for PDFs.\nlicense: Apache-2.0\n\
             compatibility: Requires poppler\nallowed-tools: Bash(pdftotext:*) Read\n\
             metadata:\n  version: 1.0\n  internal: true\n",
        ),
        Some("pdf-2-text"),
    );
    assert_eq!(report.errors, []);
    assert_eq!(report.warnings, []);
    assert_eq!(
        report.frontmatter,
        Some(Frontmatter {
            name: "pdf-2-text".into(),
            description: "Extract text. Use for PDFs.".into(),
            license: Some("Apache-2.0".into()),
            compatibility: Some("Requires poppler".into()),
            allowed_tools: Some("Bash(pdftotext:*) Read".into()),
            metadata: BTreeMap::from([
                ("internal".into(), "true".into()),
                ("version".into(), "1.0".into()),
            ]),
        })
    );
    assert_eq!(report.summary(), "");
}

#[test]
fn scalars_are_read_as_written() {
    for value in ["123", "true", "null", "0x1f", "1e3"] {
        // Unquoted, a `null` name is no name to goose (GooseNameNull).
        let name = if value == "null" { "'null'" } else { value };
        let report = validate_skill_md(&md(&format!("name: {name}\ndescription: {value}\n")), None);
        let frontmatter = report
            .frontmatter
            .unwrap_or_else(|| panic!("{value}: invalid"));
        assert_eq!(frontmatter.name, value);
        assert_eq!(frontmatter.description, value);
    }
}

#[test]
fn empty_optional_fields() {
    let report = validate("name: x\ndescription: d\nlicense:\nallowed-tools:\nmetadata:\n");
    let frontmatter = report.frontmatter.expect("valid");
    assert_eq!(frontmatter.license.as_deref(), Some(""));
    assert_eq!(frontmatter.allowed_tools.as_deref(), Some(""));
    assert!(frontmatter.metadata.is_empty());
}

#[test]
fn warnings_keep_the_skill_valid_and_the_frontmatter() {
    let report = validate_skill_md(b"---\nname: x\ndescription: d\n---\n", Some("x"));
    assert!(report.is_valid());
    assert_eq!(warning_codes(&report), [FindingCode::BodyEmpty]);
    assert!(report.frontmatter.is_some());
}

#[test]
fn invalid_skill_has_no_frontmatter() {
    let report = validate("name: x\ndescription: d\nextra: 1\n");
    assert!(!report.is_valid());
    assert_eq!(report.frontmatter, None);
}

#[test]
fn limits_are_inclusive() {
    let ok = validate_skill_md(
        &md(&format!(
            "name: {n}\ndescription: {}\ncompatibility: {}\n",
            "é".repeat(1024),
            "ü".repeat(500),
            n = "a".repeat(64)
        )),
        None,
    );
    assert_eq!(ok.errors, []);
    let report = validate_skill_md(
        &md(&format!(
            "name: {}\ndescription: {}\ncompatibility: {}\n",
            "a".repeat(65),
            "é".repeat(1025),
            "ü".repeat(501)
        )),
        None,
    );
    assert_eq!(
        report.summary(),
        "name is 65 characters; the limit is 64; \
         description is 1025 characters; the limit is 1024; \
         compatibility is 501 characters; the limit is 500"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let report = validate_skill_md(
        &md("name: -Bad_name-\ndescription: ''\nowner: me\ncompatibility: ''\nmetadata:\n  - x\n"),
        Some("bad-name"),
    );
    use FindingCode::*;
    assert_eq!(
        error_codes(&report),
        [
            UnknownField,
            NameUppercase,
            NameInvalidCharacter,
            NameLeadingHyphen,
            NameTrailingHyphen,
            NameMismatch,
            DescriptionEmpty,
            CompatibilityEmpty,
            MetadataNotMapping,
        ]
    );
}

#[test]
fn messages_name_the_field_and_the_problem() {
    let messages = |frontmatter: &str| -> Vec<String> {
        validate(frontmatter)
            .errors
            .into_iter()
            .map(|f| f.message)
            .collect()
    };
    assert_eq!(
        messages("description: d\n"),
        ["name is missing; it is required (1 to 64 characters: a-z, 0-9 and hyphens)"]
    );
    assert_eq!(
        messages("name: x\ndescription: d\nversion: 2\n"),
        [
            "unknown field 'version' at line 4; the allowed fields are name, description, license, \
          compatibility, allowed-tools, metadata"
        ]
    );
    assert_eq!(
        messages("name: x y\ndescription: d\n"),
        [
            "name 'x y' contains ' '; only a-z, 0-9 and hyphens are allowed",
            "name 'x y' does not match the skill directory name 'x'"
        ]
    );
    assert_eq!(
        messages("name: x\ndescription: d\nmetadata:\n  a:\n    b: c\n"),
        ["metadata value of 'a' must be a string; found a mapping at line 6"]
    );
    assert_eq!(
        messages("name: x\ndescription:\n  - d\n"),
        ["description must be a string; found a sequence at line 4"]
    );
}

#[test]
fn quoted_values_are_escaped_and_shortened() {
    let long = format!("{}\u{1}", "n".repeat(70));
    let report = validate_skill_md(
        &md(&format!(
            "name: \"{}\\u0001\"\ndescription: d\n",
            "n".repeat(70)
        )),
        None,
    );
    let message = &report
        .errors
        .iter()
        .find(|f| f.code == FindingCode::NameInvalidCharacter)
        .unwrap()
        .message;
    assert!(
        message.starts_with(&format!("name '{}…' contains '\\u{{1}}'", "n".repeat(64))),
        "{message}"
    );
    assert!(!message.contains(&long));
}

#[test]
fn line_endings_and_bom_are_tolerated() {
    for content in [
        // A field after the block keeps its final line break for goose too.
        "---\r\nname: x\r\ndescription: |\r\n  a\r\n  b\r\nlicense: MIT\r\n---\r\nbody\r\n",
        "---\rname: x\rdescription: |\r  a\r  b\rlicense: MIT\r---\rbody\r",
        "\u{feff}---\nname: x\ndescription: |\n  a\n  b\nlicense: MIT\n---\nbody\n",
    ] {
        let report = validate_skill_md(content.as_bytes(), Some("x"));
        assert_eq!(report.errors, [], "{content:?}");
        assert_eq!(report.frontmatter.unwrap().description, "a\nb\n");
    }
}

#[test]
fn too_large_content_is_not_parsed() {
    let mut content = b"not even frontmatter".to_vec();
    content.resize(usize::try_from(MAX_SKILL_MD_BYTES).unwrap() + 1, b' ');
    let report = validate_skill_md(&content, None);
    assert_eq!(error_codes(&report), [FindingCode::FileTooLarge]);
    assert_eq!(
        report.summary(),
        "SKILL.md is 1048577 bytes; the limit is 1048576 bytes"
    );
}

#[test]
fn repeated_findings_are_capped_per_code() {
    let keys: String = (0..25).map(|i| format!("k{i}: v\n")).collect();
    let report = validate(&format!("name: x\ndescription: d\n{keys}"));
    assert_eq!(report.errors.len(), MAX_FINDINGS_PER_CODE);
    let last = &report.errors[MAX_FINDINGS_PER_CODE - 1].message;
    assert!(last.ends_with("(and 15 more UnknownField)"), "{last}");
}

fn write_skill(dir: &Path, content: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(SKILL_FILE), content).unwrap();
}

#[test]
fn directory_name_is_the_expected_name() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("pdf-tools");
    write_skill(&dir, &md("name: pdf-tools\ndescription: d\n"));
    assert!(validate_path(&dir).unwrap().is_valid());
    assert!(validate_path(&dir.join(SKILL_FILE)).unwrap().is_valid());
    assert!(validate_path(&dir.join(".")).unwrap().is_valid());

    let other = root.path().join("other");
    write_skill(&other, &md("name: pdf-tools\ndescription: d\n"));
    for path in [other.clone(), other.join(SKILL_FILE)] {
        let report = validate_path(&path).unwrap();
        assert_eq!(
            error_codes(&report),
            [FindingCode::NameMismatch],
            "{}",
            path.display()
        );
    }
}

#[test]
fn directory_without_skill_md() {
    let root = tempfile::tempdir().unwrap();
    let report = validate_path(root.path()).unwrap();
    assert_eq!(error_codes(&report), [FindingCode::SkillFileMissing]);
    assert_eq!(report.summary(), "the skill directory has no SKILL.md");

    std::fs::write(
        root.path().join("skill.md"),
        md("name: x\ndescription: d\n"),
    )
    .unwrap();
    let report = validate_path(root.path()).unwrap();
    assert_eq!(
        report.summary(),
        "the skill directory has no SKILL.md (found skill.md; the file name must be upper case)"
    );

    let dir_named_skill_md = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir_named_skill_md.path().join(SKILL_FILE)).unwrap();
    let report = validate_path(dir_named_skill_md.path()).unwrap();
    assert_eq!(error_codes(&report), [FindingCode::SkillFileMissing]);
}

#[test]
fn oversized_file_is_rejected_from_its_metadata() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("x");
    std::fs::create_dir(&dir).unwrap();
    // A sparse 1 TiB file: reading it would take forever, so passing proves it is not read.
    let file = std::fs::File::create(dir.join(SKILL_FILE)).unwrap();
    file.set_len(1 << 40).unwrap();
    let report = validate_path(&dir).unwrap();
    assert_eq!(error_codes(&report), [FindingCode::FileTooLarge]);
    assert_eq!(
        report.summary(),
        "SKILL.md is 1099511627776 bytes; the limit is 1048576 bytes"
    );
}

#[test]
fn unreadable_paths_are_errors_not_findings() {
    let root = tempfile::tempdir().unwrap();
    let missing = validate_path(&root.path().join("absent")).unwrap_err();
    assert!(matches!(missing, SkillError::Io { .. }));
    assert_eq!(missing.reason(), "Io");
    assert!(missing.to_string().contains("absent"), "{missing}");

    let readme = root.path().join("README.md");
    std::fs::write(&readme, "hello").unwrap();
    let unsupported = validate_path(&readme).unwrap_err();
    assert!(matches!(unsupported, SkillError::UnsupportedPath { .. }));
    assert_eq!(unsupported.reason(), "UnsupportedPath");
    assert!(
        unsupported
            .to_string()
            .ends_with("README.md is neither a skill directory nor a file named SKILL.md"),
        "{unsupported}"
    );
}

#[test]
fn path_reports_serialize_for_the_cli() {
    let root = tempfile::tempdir().unwrap();
    let good = root.path().join("good");
    write_skill(&good, b"---\nname: good\ndescription: d\n---\n");
    let bad = root.path().join("bad");
    write_skill(&bad, &md("name: Bad\ndescription: d\n"));
    let reports = [
        PathReport::new(&good, validate_path(&good).unwrap()),
        PathReport::new(&bad, validate_path(&bad).unwrap()),
    ];

    let json = serde_json::to_value(&reports).unwrap();
    assert_eq!(json[0]["name"], "good");
    assert_eq!(json[0]["valid"], true);
    assert_eq!(json[0]["errors"], serde_json::json!([]));
    assert_eq!(json[0]["warnings"][0]["code"], "BodyEmpty");
    assert_eq!(json[1]["name"], serde_json::Value::Null);
    assert_eq!(json[1]["valid"], false);
    assert_eq!(json[1]["errors"][0]["code"], "NameUppercase");
    assert_eq!(json[1]["path"], bad.display().to_string());

    let text = render_text(&reports);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("valid    {} (good)", good.display()));
    assert!(
        lines[1].starts_with("  warning  BodyEmpty: the Markdown body"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], format!("invalid  {}", bad.display()));
    assert_eq!(
        lines[3],
        "  error    NameUppercase: name 'Bad' contains uppercase letters; it must be lowercase"
    );
    assert_eq!(
        lines[4],
        "  error    NameMismatch: name 'Bad' does not match the skill directory name 'bad'"
    );
    assert_eq!(lines[5], "2 skills checked: 1 valid, 1 invalid");
    assert_eq!(lines.len(), 6);
}

#[test]
fn goose_readings_that_keep_the_skill_listed_as_written_are_accepted() {
    for frontmatter in [
        // A comment may be indented: goose strips only white space, and a comment is no field.
        "  # about\nname: x\ndescription: d\n",
        "\n\nname: x\ndescription: d\n",
        // Quoted, `null` is a string to goose too.
        "name: x\ndescription: d\nlicense: 'null'\n",
        // goose drops the final line break of a block description written last; no word
        // of it changes, so that stays valid.
        "name: x\ndescription: |\n  d\n",
        // Large integers that goose reads: quoted, at the top level, or within 64 bits.
        "name: x\ndescription: d\nmetadata:\n  id: '18446744073709551616'\n",
        "name: x\ndescription: d\nmetadata:\n  id: 18446744073709551615\n",
        "name: x\ndescription: d\nlicense: 18446744073709551616\n",
        "name: x\ndescription: a -- b\n",
    ] {
        let report = validate(frontmatter);
        assert!(report.is_valid(), "{frontmatter:?}: {}", report.summary());
    }
}

#[test]
fn goose_findings_say_what_goose_would_do_and_where() {
    let cut = validate("name: x\ndescription: d\n# ---\n");
    assert!(
        cut.summary().contains("line 4 holds '---'"),
        "{}",
        cut.summary()
    );
    let indented = validate("\n  name: x\n  description: d\n");
    assert!(
        indented
            .summary()
            .starts_with("goose would not list this skill")
            && indented.summary().contains("(line 3)"),
        "{}",
        indented.summary()
    );
    let integer = validate("name: x\ndescription: d\nmetadata:\n  id: -0x8000000000000001\n");
    assert!(
        integer.summary().contains("'id' at line 5"),
        "{}",
        integer.summary()
    );
    assert!(integer.is_goose_incompatibility_only());
    let both = validate("name: null\ndescription: d\n");
    assert!(!both.is_goose_incompatibility_only(), "{}", both.summary());
    let valid = validate("name: x\ndescription: d\n");
    assert!(!valid.is_goose_incompatibility_only());
    // What a source reports: its own reason for goose alone, InvalidSkill for the rest.
    assert_eq!(integer.refusal(), Some(Refusal::GooseIncompatible));
    assert_eq!(both.refusal(), Some(Refusal::InvalidSkill));
    assert_eq!(valid.refusal(), None);
}

#[test]
fn a_nested_skill_file_or_a_link_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("x");
    write_skill(&dir, &md("name: x\ndescription: d\n"));
    // goose does not walk version control folders, so what they hold is not looked at.
    std::fs::create_dir_all(dir.join(".git/modules/m")).unwrap();
    std::fs::write(dir.join(".git/modules/m/SKILL.md"), "---\n---\n").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join(".git/outside")).unwrap();
    assert!(validate_path(&dir).unwrap().is_valid());

    std::fs::create_dir_all(dir.join("references/deep")).unwrap();
    std::fs::write(dir.join("references/deep/SKILL.md"), "---\n---\n").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("references/outside")).unwrap();
    let report = validate_path(&dir).unwrap();
    assert_eq!(
        error_codes(&report),
        [FindingCode::LinkInSkill, FindingCode::NestedSkillFile],
        "{}",
        report.summary()
    );
    assert!(report.is_goose_incompatibility_only());
    assert!(
        report
            .summary()
            .contains("'references/outside' is a symlink")
            && report
                .summary()
                .contains("'references/deep/SKILL.md' is below"),
        "{}",
        report.summary()
    );
    // The same through the path of the skill's SKILL.md.
    assert_eq!(
        error_codes(&validate_path(&dir.join(SKILL_FILE)).unwrap()),
        error_codes(&report)
    );
}
