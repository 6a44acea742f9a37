//! The skill cases both differential tests share: generated edge cases with what
//! skills-ref makes of them, and the shared skills corpus.

use std::path::{Path, PathBuf};

use agentic_skill::FindingCode;

/// What a generated case expects of our validator and of skills-ref.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Both validators accept it.
    Valid,
    /// Both reject it, and our report carries this code.
    Invalid(FindingCode),
    /// We reject it with this code; skills-ref rejects it by crashing.
    ReferenceCrashes(FindingCode),
    /// A documented deliberate difference: we accept, skills-ref rejects.
    OnlyWeAccept(&'static str),
    /// A documented deliberate difference: we reject with this code, skills-ref accepts.
    OnlyWeReject(FindingCode, &'static str),
}

/// One generated SKILL.md and its verdicts.
pub struct Case {
    pub label: &'static str,
    /// The skill directory's name.
    pub dir: String,
    /// The file the content is written to (SKILL.md except for one case).
    pub file: &'static str,
    pub content: Vec<u8>,
    pub expect: Expect,
}

fn skill_md(frontmatter: &str, body: &str) -> Vec<u8> {
    format!("---\n{frontmatter}---\n{body}").into_bytes()
}

/// A SKILL.md for directory `name` whose frontmatter is `name` plus `rest`.
fn with_name(name: &str, rest: &str) -> Vec<u8> {
    skill_md(&format!("name: {name}\n{rest}"), "# Instructions\n")
}

/// A SKILL.md named `x` with a description plus the `extra` frontmatter lines.
fn with_fields(extra: &str) -> Vec<u8> {
    with_name("x", &format!("description: Does x.\n{extra}"))
}

fn case(label: &'static str, dir: &str, content: Vec<u8>, expect: Expect) -> Case {
    Case {
        label,
        dir: dir.to_owned(),
        file: "SKILL.md",
        content,
        expect,
    }
}

// One case per line reads as a table; rustfmt would spread each over five.
#[rustfmt::skip]
pub fn generated_cases() -> Vec<Case> {
    use Expect::*;
    use FindingCode::*;

    let name64 = "a".repeat(64);
    let name65 = "a".repeat(65);
    let long = |n: usize, c: &str| c.repeat(n);
    let valid_frontmatter = "name: x\ndescription: Does x.\n";

    let mut cases = vec![
        // Boundaries of each limit.
        case("minimal skill", "x", with_fields(""), Valid),
        case("every field", "x", with_fields("license: Apache-2.0\ncompatibility: Requires git\nallowed-tools: Bash(git:*) Read\nmetadata:\n  author: example\n  version: 1.0\n  enabled: true\n"), Valid),
        case("name of 64 characters", &name64, with_name(&name64, "description: d\n"), Valid),
        case("name of 65 characters", &name65, with_name(&name65, "description: d\n"), Invalid(NameTooLong)),
        case("description of 1024 characters", "x", with_name("x", &format!("description: {}\n", long(1024, "d"))), Valid),
        case("description of 1025 characters", "x", with_name("x", &format!("description: {}\n", long(1025, "d"))), Invalid(DescriptionTooLong)),
        case("description of 1024 two-byte characters", "x", with_name("x", &format!("description: {}\n", long(1024, "é"))), Valid),
        case("description of 1025 two-byte characters", "x", with_name("x", &format!("description: {}\n", long(1025, "é"))), Invalid(DescriptionTooLong)),
        case("literal description of 1023 characters plus its final newline", "x", with_name("x", &format!("description: |\n  {}\n", long(1023, "d"))), Valid),
        case("literal description of 1024 characters plus its final newline", "x", with_name("x", &format!("description: |\n  {}\n", long(1024, "d"))), Invalid(DescriptionTooLong)),
        case("compatibility of 500 characters", "x", with_fields(&format!("compatibility: {}\n", long(500, "c"))), Valid),
        case("compatibility of 501 characters", "x", with_fields(&format!("compatibility: {}\n", long(501, "c"))), Invalid(CompatibilityTooLong)),
        // Name characters.
        case("name with digits and hyphens", "pdf-2-text", with_name("pdf-2-text", "description: d\n"), Valid),
        case("name of digits, read as a string", "123", with_name("123", "description: d\n"), Valid),
        case("name true, read as a string", "true", with_name("true", "description: d\n"), Valid),
        case("name null, read as a string", "null", with_name("null", "description: d\n"), OnlyWeReject(GooseNameNull, "goose reads an unquoted null name as no name")),
        case("quoted name null", "null", with_name("'null'", "description: d\n"), Valid),
        case("name 1.5, read as a string", "1.5", with_name("1.5", "description: d\n"), Invalid(NameInvalidCharacter)),
        case("name ~, read as a string", "~", with_name("~", "description: d\n"), Invalid(NameInvalidCharacter)),
        case("leading hyphen", "-pdf", with_name("-pdf", "description: d\n"), Invalid(NameLeadingHyphen)),
        case("trailing hyphen", "pdf-", with_name("pdf-", "description: d\n"), Invalid(NameTrailingHyphen)),
        case("consecutive hyphens", "pdf--tools", with_name("pdf--tools", "description: d\n"), Invalid(NameConsecutiveHyphens)),
        case("single hyphen", "-", with_name("'-'", "description: d\n"), Invalid(NameLeadingHyphen)),
        case("uppercase", "Pdf", with_name("Pdf", "description: d\n"), Invalid(NameUppercase)),
        case("underscore", "pdf_tools", with_name("pdf_tools", "description: d\n"), Invalid(NameInvalidCharacter)),
        case("inner space", "pdf tools", with_name("pdf tools", "description: d\n"), Invalid(NameInvalidCharacter)),
        case("name differs from directory", "other", with_name("x", "description: d\n"), Invalid(NameMismatch)),
        // Required fields and their types.
        case("name missing", "x", skill_md("description: d\n", "body\n"), Invalid(NameMissing)),
        case("description missing", "x", skill_md("name: x\n", "body\n"), Invalid(DescriptionMissing)),
        case("name empty", "x", skill_md("name:\ndescription: d\n", "body\n"), Invalid(NameEmpty)),
        case("name empty quoted", "x", skill_md("name: ''\ndescription: d\n", "body\n"), Invalid(NameEmpty)),
        case("name blank", "x", skill_md("name: '   '\ndescription: d\n", "body\n"), Invalid(NameEmpty)),
        case("description empty", "x", with_name("x", "description:\n"), Invalid(DescriptionEmpty)),
        case("description blank", "x", with_name("x", "description: \"  \"\n"), Invalid(DescriptionEmpty)),
        case("name is a sequence", "x", skill_md("name:\n  - x\ndescription: d\n", "body\n"), Invalid(NameNotString)),
        case("description is a mapping", "x", with_name("x", "description:\n  a: b\n"), Invalid(DescriptionNotString)),
        case("compatibility is a sequence", "x", with_fields("compatibility:\n  - git\n"), Invalid(CompatibilityNotString)),
        case("empty license and allowed-tools", "x", with_fields("license:\nallowed-tools: ''\n"), Valid),
        case("metadata with an empty value", "x", with_fields("metadata:\n"), Valid),
        case("metadata entry with an empty value", "x", with_fields("metadata:\n  a:\n"), Valid),
        // The closed field set.
        case("unknown field", "x", with_fields("version: 1.0\n"), Invalid(UnknownField)),
        case("field names are case-sensitive", "x", skill_md("Name: x\ndescription: d\n", "b\n"), Invalid(UnknownField)),
        case("numeric key", "x", with_fields("1: a\n"), Invalid(UnknownField)),
        // Frontmatter framing.
        case("no frontmatter", "x", b"# Just Markdown\n".to_vec(), Invalid(FrontmatterMissing)),
        case("empty file", "x", Vec::new(), Invalid(FrontmatterMissing)),
        case("blank line before frontmatter", "x", [b"\n".as_slice(), &with_fields("")].concat(), Invalid(FrontmatterMissing)),
        case("frontmatter never closed", "x", format!("---\n{valid_frontmatter}# Body\n").into_bytes(), Invalid(FrontmatterUnclosed)),
        case("empty frontmatter", "x", skill_md("", "body\n"), Invalid(FrontmatterNotMapping)),
        case("frontmatter of comments only", "x", skill_md("# name: x\n", "body\n"), Invalid(FrontmatterNotMapping)),
        case("frontmatter is a sequence", "x", skill_md("- name: x\n- description: d\n", "b\n"), Invalid(FrontmatterNotMapping)),
        case("frontmatter is a scalar", "x", skill_md("just text\n", "b\n"), Invalid(FrontmatterNotMapping)),
        case("closing delimiter at end of file", "x", format!("---\n{valid_frontmatter}---").into_bytes(), Valid),
        case("delimiters with trailing blanks", "x", format!("--- \n{valid_frontmatter}---\t\nbody\n").into_bytes(), Valid),
        case("three hyphens inside the last value", "x", skill_md("name: x\ndescription: a --- b\n", "b\n"), OnlyWeReject(GooseFrontmatterCut, "goose ends the frontmatter at the first ---")),
        case("CRLF line endings", "x", format!("---\r\n{}---\r\nbody\r\n", valid_frontmatter.replace('\n', "\r\n")) .into_bytes(), Valid),
        case("CR line endings", "x", format!("---\r{}---\rbody\r", valid_frontmatter.replace('\n', "\r")).into_bytes(), Valid),
        case("empty body", "x", skill_md(valid_frontmatter, ""), Valid),
        case("long body", "x", skill_md(valid_frontmatter, &"line\n".repeat(600)), Valid),
        // YAML.
        case("indented frontmatter", "x", skill_md("  name: x\n  description: d\n", "b\n"), OnlyWeReject(GooseIndentedFrontmatter, "goose strips the first field's indentation")),
        case("comments and document end marker", "x", skill_md("# header\nname: x # trailing\ndescription: d\n...\n", "b\n"), Valid),
        case("quoted keys and escapes", "x", skill_md("'name': \"x\"\n\"description\": \"tab\\there\"\n", "b\n"), Valid),
        case("folded and multi-line plain description", "x", with_name("x", "description: >\n  one\n  two\nlicense: a\n  b\n"), Valid),
        case("tab after a colon", "x", with_name("x", "description:\tdoes x\n"), Invalid(YamlInvalid)),
        case("tab inside a plain value", "x", with_name("x", "description: does\tx\n"), Invalid(TabNotAllowed)),
        case("trailing tab", "x", with_name("x", "description: does x\t\n"), Invalid(TabNotAllowed)),
        case("tab on a blank line", "x", with_name("x", "description: d\n\t\n"), Invalid(TabNotAllowed)),
        case("tab inside quoted values", "x", with_name("x", "description: 'does\tx'\nlicense: \"a\tb\"\n"), Valid),
        case("tab inside a literal block", "x", with_name("x", "description: |\n  does\tx\n"), Valid),
        case("tab inside comments", "x", with_name("x", "description: d # a\tcomment\n#\tmore\n"), Valid),
        case("explicit key", "x", with_name("x", "? description\n: d\n"), Valid),
        case("space before the colon", "x", skill_md("name : x\ndescription : d\n", "b\n"), Valid),
        case("empty key", "x", with_fields(": v\n"), Invalid(UnknownField)),
        case("empty literal description", "x", with_name("x", "description: |\n\nlicense: a\n"), Invalid(DescriptionEmpty)),
        case("quoted multi-line description", "x", with_name("x", "description: \"one\n  two\"\n"), Valid),
        case("non-BMP characters", "x", with_name("x", "description: 🦀 crabs\n"), Valid),
        case("invalid YAML", "x", with_name("x", "description: a: b\n"), Invalid(YamlInvalid)),
        case("unterminated quote", "x", with_name("x", "description: \"open\n"), Invalid(YamlInvalid)),
        case("tab indentation", "x", with_fields("metadata:\n\ta: b\n"), Invalid(YamlInvalid)),
        case("second YAML document", "x", skill_md("name: x\n...\ndescription: d\n", "b\n"), Invalid(YamlInvalid)),
        case("directive without document start", "x", skill_md("%YAML 1.2\nname: x\ndescription: d\n", "b\n"), Invalid(YamlInvalid)),
        case("undefined alias", "x", with_name("x", "description: *a\n"), Invalid(YamlInvalid)),
        case("duplicate field", "x", with_fields("name: x\n"), Invalid(DuplicateKey)),
        case("duplicate metadata key", "x", with_fields("metadata:\n  a: b\n  a: c\n"), Invalid(DuplicateKey)),
        case("flow mapping", "x", with_fields("metadata: {a: b}\n"), Invalid(FlowStyleNotAllowed)),
        case("flow sequence", "x", with_fields("allowed-tools: [Read, Write]\n"), Invalid(FlowStyleNotAllowed)),
        case("empty flow mapping", "x", with_fields("metadata: {}\n"), Invalid(FlowStyleNotAllowed)),
        case("anchor and alias", "x", with_name("x", "description: &d text\nlicense: *d\n"), Invalid(AnchorNotAllowed)),
        case("tag", "x", with_name("x", "description: !!str d\n"), Invalid(TagNotAllowed)),
        // skills-ref crashes (exit 1 with a traceback) on these.
        case("not UTF-8", "x", b"---\nname: x\ndescription: caf\xe9\n---\nbody\n".to_vec(), ReferenceCrashes(FileNotUtf8)),
        case("sequence as a key", "x", with_fields("? - a\n: b\n"), ReferenceCrashes(NonScalarKey)),
        case("control character", "x", with_name("x", "description: a\u{1}b\n"), ReferenceCrashes(CharacterNotAllowed)),
        case("DEL character", "x", with_name("x", "description: a\u{7f}b\n"), ReferenceCrashes(CharacterNotAllowed)),
        // Deliberate differences (docs/skill-validation.md).
        case("non-ASCII lowercase letter", "café", with_name("café", "description: d\n"), OnlyWeReject(NameInvalidCharacter, "the specification allows only a-z")),
        case("letters of another script", "技能", with_name("技能", "description: d\n"), OnlyWeReject(NameInvalidCharacter, "the specification allows only a-z")),
        case("digits of another script", "١٢٣", with_name("١٢٣", "description: d\n"), OnlyWeReject(NameInvalidCharacter, "the specification allows only 0-9")),
        case("compatibility character that NFKC folds", "file", with_name("\u{fb01}le", "description: d\n"), OnlyWeReject(NameInvalidCharacter, "no Unicode normalization")),
        case("name with surrounding blanks", "x", with_name("' x '", "description: d\n"), OnlyWeReject(NameInvalidCharacter, "names are not trimmed")),
        case("byte-order mark", "x", [b"\xEF\xBB\xBF".as_slice(), &with_fields("")].concat(), OnlyWeAccept("a leading UTF-8 BOM is dropped")),
        case("metadata is a string", "x", with_fields("metadata: v1\n"), OnlyWeReject(MetadataNotMapping, "metadata must be a mapping")),
        case("metadata is a sequence", "x", with_fields("metadata:\n  - a\n"), OnlyWeReject(MetadataNotMapping, "metadata must be a mapping")),
        case("metadata value is a mapping", "x", with_fields("metadata:\n  a:\n    b: c\n"), OnlyWeReject(MetadataValueNotString, "metadata values must be strings")),
        case("metadata value is a sequence", "x", with_fields("metadata:\n  a:\n    - b\n"), OnlyWeReject(MetadataValueNotString, "metadata values must be strings")),
        case("license is a mapping", "x", with_fields("license:\n  spdx: MIT\n"), OnlyWeReject(LicenseNotString, "license must be a string")),
        case("allowed-tools is a sequence", "x", with_fields("allowed-tools:\n  - Read\n"), OnlyWeReject(AllowedToolsNotString, "allowed-tools must be a string")),
        case("compatibility empty", "x", with_fields("compatibility: ''\n"), OnlyWeReject(CompatibilityEmpty, "the specification requires 1-500 characters when present")),
        case("opening delimiter followed by text", "x", b"---name: x\ndescription: d\n---\nb\n".to_vec(), OnlyWeReject(FrontmatterMissing, "delimiters are whole lines")),
        case("opening delimiter followed by a comment", "x", format!("--- # skill\n{valid_frontmatter}---\nb\n").into_bytes(), OnlyWeReject(FrontmatterMissing, "delimiters are whole lines")),
        case("closing delimiter of four hyphens", "x", format!("---\n{valid_frontmatter}----\nb\n").into_bytes(), OnlyWeReject(FrontmatterUnclosed, "delimiters are whole lines")),
        case("unclosed, with three hyphens in the body", "x", format!("---\n{valid_frontmatter}# a --- b\n").into_bytes(), OnlyWeReject(FrontmatterUnclosed, "delimiters are whole lines")),
        case("three hyphens inside a value before other fields", "x", skill_md("description: a---b\nname: x\n", "b\n"), Invalid(GooseFrontmatterCut)),
    ];
    cases.extend([
        case("byte-order mark inside a value", "x", with_name("x", "description: a\u{feff}b\n"), OnlyWeReject(CharacterNotAllowed, "YAML allows a BOM only before a document")),
        case("byte-order mark on its own line", "x", with_fields("\u{feff}\n"), Invalid(CharacterNotAllowed)),
        case("line separator in a value", "x", with_name("x", "description: a\u{2028}b\n"), OnlyWeReject(CharacterNotAllowed, "YAML 1.1 and 1.2 disagree on U+2028")),
        case("next-line character in a value", "x", with_name("x", "description: a\u{85}b\n"), OnlyWeReject(CharacterNotAllowed, "YAML 1.1 and 1.2 disagree on U+0085")),
        case("next-line character in a comment", "x", with_fields("# note\u{85}more: x\n"), Invalid(CharacterNotAllowed)),
        case("tab on a blank line after an empty line", "x", skill_md("\n\t\nname: x\ndescription: d\n", "b\n"), OnlyWeReject(TabNotAllowed, "tabs are rejected outside quoted and block scalars and comments")),
        case("escaped lone surrogate", "x", with_name("x", "description: \"a\\ud800b\"\n"), OnlyWeReject(YamlInvalid, "a lone surrogate is not a character")),
        case("quoted continuation line indented by a tab", "x", with_name("x", "description: 'a\n\tb'\n"), OnlyWeReject(YamlInvalid, "YAML 1.2 requires the continuation line's indentation to be spaces")),
    ]);
    let mut large = skill_md(valid_frontmatter, "");
    large.resize(
        usize::try_from(agentic_skill::MAX_SKILL_MD_BYTES).expect("fits") + 1,
        b'x',
    );
    cases.push(case(
        "SKILL.md over 1 MiB",
        "x",
        large,
        OnlyWeReject(FileTooLarge, "SKILL.md is bounded to 1 MiB"),
    ));
    cases.push(Case {
        label: "lowercase skill.md",
        dir: "x".to_owned(),
        file: "skill.md",
        content: with_fields(""),
        expect: OnlyWeReject(SkillFileMissing, "the file must be named SKILL.md"),
    });
    cases
}

pub fn corpus_dir() -> PathBuf {
    // crates/agentic-skill -> workspace root -> its sibling `shared`.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/skills-corpus")
}

/// Skill directories two levels down (`<collection>/<skill>`).
pub fn corpus_skills(corpus: &Path) -> Vec<PathBuf> {
    let mut skills = Vec::new();
    for collection in std::fs::read_dir(corpus).expect("read corpus") {
        let collection = collection.expect("corpus entry").path();
        if !collection.is_dir() {
            continue;
        }
        for skill in std::fs::read_dir(&collection).expect("read collection") {
            let skill = skill.expect("collection entry").path();
            if skill.is_dir() {
                skills.push(skill);
            }
        }
    }
    skills.sort();
    skills
}
