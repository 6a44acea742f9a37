//! The checks of the Agent Skills specification, applied to a parsed SKILL.md.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::document::{Document, YAML_FIRST_LINE};
use crate::finding::{Finding, FindingCode, Report, quote};
use crate::goose;
use crate::yaml::{self, Entry, Node, Value};
use crate::{Frontmatter, MAX_SKILL_MD_BYTES, SKILL_FILE, SkillError};

/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// SKILL.md line count above which a [`FindingCode::TooManyLines`] warning is given.
pub const RECOMMENDED_MAX_LINES: usize = 500;

/// The closed set of top-level frontmatter fields.
const FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "allowed-tools",
    "metadata",
];

/// Validates the bytes of a SKILL.md.
///
/// `expected_name` is the name of the directory holding the file (or the name the caller
/// mounts the skill under); when given, `name` must equal it. Content longer than
/// [`MAX_SKILL_MD_BYTES`] is rejected without being parsed.
pub fn validate_skill_md(content: &[u8], expected_name: Option<&str>) -> Report {
    let mut findings = Vec::new();
    let frontmatter = check_skill_md(content, expected_name, &mut findings);
    Report::from_findings(findings, || frontmatter)
}

/// Validates a skill directory, or a `SKILL.md` file inside one.
///
/// The skill's `name` must equal the directory's name. A directory without a file named
/// exactly `SKILL.md` yields a report with [`FindingCode::SkillFileMissing`]; a file over
/// [`MAX_SKILL_MD_BYTES`] is rejected from its metadata, and never read past the limit.
/// The whole directory is walked: a `SKILL.md` below its root
/// ([`FindingCode::NestedSkillFile`]) or a symlink in it ([`FindingCode::LinkInSkill`])
/// makes the skill invalid, because goose would load more than the validated skill.
///
/// # Errors
/// [`SkillError::Io`] when the path, the file or a directory of the skill cannot be read
/// (or the skill has more than 100,000 entries), and
/// [`SkillError::UnsupportedPath`] for a file not named `SKILL.md`.
pub fn validate_path(path: &Path) -> Result<Report, SkillError> {
    let io_error = |source| SkillError::Io {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(io_error)?;
    let (dir, file) = if metadata.is_dir() {
        (path.to_path_buf(), path.join(SKILL_FILE))
    } else if path.file_name().is_some_and(|name| name == SKILL_FILE) {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        (
            parent.unwrap_or(Path::new(".")).to_path_buf(),
            path.to_path_buf(),
        )
    } else {
        return Err(SkillError::UnsupportedPath {
            path: path.to_path_buf(),
        });
    };
    let expected_name = directory_name(&dir);

    let file_metadata = match std::fs::metadata(&file) {
        Ok(m) if m.is_file() => m,
        Ok(_) => {
            return Ok(single_error(
                FindingCode::SkillFileMissing,
                format!("{SKILL_FILE} is not a regular file"),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let hint = if dir.join("skill.md").is_file() {
                " (found skill.md; the file name must be upper case)"
            } else {
                ""
            };
            return Ok(single_error(
                FindingCode::SkillFileMissing,
                format!("the skill directory has no {SKILL_FILE}{hint}"),
            ));
        }
        Err(source) => return Err(SkillError::Io { path: file, source }),
    };
    if file_metadata.len() > MAX_SKILL_MD_BYTES {
        return Ok(single_error(
            FindingCode::FileTooLarge,
            too_large_message(file_metadata.len()),
        ));
    }

    // The file may have grown since its metadata was read; never read more than the limit.
    let mut content = Vec::new();
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_SKILL_MD_BYTES + 1).read_to_end(&mut content))
        .map_err(|source| SkillError::Io {
            path: file.clone(),
            source,
        })?;
    let mut findings = Vec::new();
    let frontmatter = check_skill_md(&content, expected_name.as_deref(), &mut findings);
    check_layout(&dir, &mut findings)?;
    Ok(Report::from_findings(findings, || frontmatter))
}

/// Most entries of a skill directory walked by [`check_layout`]; the readers of images and
/// repositories bound skills far below this, so a local tree this large is not a skill.
const MAX_WALKED_ENTRIES: usize = 100_000;

/// Reports what would change the agent's skill set when the directory is mounted: a
/// `SKILL.md` below the root (goose registers every one it finds, at any depth, as a skill
/// of its own) and symlinks (goose follows them out of the mounted skill). Like goose, it
/// leaves `.git`, `.hg` and `.svn` folders out.
fn check_layout(dir: &Path, findings: &mut Vec<Finding>) -> Result<(), SkillError> {
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    let mut walked = 0usize;
    while let Some((path, relative)) = pending.pop() {
        let io_error = |source| SkillError::Io {
            path: path.clone(),
            source,
        };
        let mut children: Vec<_> = std::fs::read_dir(&path)
            .map_err(io_error)?
            .collect::<Result<_, _>>()
            .map_err(io_error)?;
        children.sort_by_key(std::fs::DirEntry::file_name);
        for child in children {
            walked += 1;
            if walked > MAX_WALKED_ENTRIES {
                return Err(SkillError::Io {
                    path: dir.to_path_buf(),
                    source: std::io::Error::other(format!(
                        "the skill directory has more than {MAX_WALKED_ENTRIES} entries"
                    )),
                });
            }
            let name = child.file_name().to_string_lossy().into_owned();
            let child_relative = if relative.is_empty() {
                name.clone()
            } else {
                format!("{relative}/{name}")
            };
            let file_type = child.file_type().map_err(|source| SkillError::Io {
                path: child.path(),
                source,
            })?;
            if file_type.is_symlink() {
                findings.push(Finding::new(
                    FindingCode::LinkInSkill,
                    format!(
                        "{} is a symlink; goose follows links out of the mounted skill, so the \
                         agent could load content nobody validated; put the file itself there",
                        quote(&child_relative)
                    ),
                ));
            } else if file_type.is_dir() {
                // goose does not descend into version control folders either.
                if !matches!(name.as_str(), ".git" | ".hg" | ".svn") {
                    pending.push((child.path(), child_relative));
                }
            } else if name == SKILL_FILE && !relative.is_empty() {
                findings.push(Finding::new(
                    FindingCode::NestedSkillFile,
                    format!(
                        "{} is below the skill's root; goose registers every {SKILL_FILE} it \
                         finds as a skill of its own, so the agent would get a skill nobody \
                         validated; rename it or ship it as a skill of its own",
                        quote(&child_relative)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The name a skill in `dir` must carry; `None` for a path without a last component (`/`).
fn directory_name(dir: &Path) -> Option<String> {
    // `.` and `..` have no file name of their own; resolve them to learn it.
    let name = match dir.file_name() {
        Some(name) => name.to_os_string(),
        None => std::fs::canonicalize(dir).ok()?.file_name()?.to_os_string(),
    };
    Some(name.to_string_lossy().into_owned())
}

fn single_error(code: FindingCode, message: String) -> Report {
    Report::from_findings(vec![Finding::new(code, message)], || None)
}

fn too_large_message(len: u64) -> String {
    format!("{SKILL_FILE} is {len} bytes; the limit is {MAX_SKILL_MD_BYTES} bytes")
}

fn check_skill_md(
    content: &[u8],
    expected_name: Option<&str>,
    findings: &mut Vec<Finding>,
) -> Option<Frontmatter> {
    // usize always fits in u64 on supported targets; saturate rather than assume.
    let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
    if len > MAX_SKILL_MD_BYTES {
        findings.push(Finding::new(
            FindingCode::FileTooLarge,
            too_large_message(len),
        ));
        return None;
    }
    let document = match Document::split(content) {
        Ok(document) => document,
        Err(finding) => {
            findings.push(finding);
            return None;
        }
    };
    check_body(&document, findings);
    check_characters(document.yaml(), findings);
    let root = match yaml::parse(document.yaml(), findings) {
        Ok(root) => root,
        Err(finding) => {
            findings.push(finding);
            return None;
        }
    };
    match root {
        Some(Node {
            value: Value::Mapping(entries),
            ..
        }) => {
            goose::check(document.yaml(), &entries, findings);
            check_fields(&entries, expected_name, findings)
        }
        Some(other) => {
            findings.push(Finding::new(
                FindingCode::FrontmatterNotMapping,
                format!(
                    "the frontmatter must be a YAML mapping of fields; found {}",
                    other.value.kind()
                ),
            ));
            None
        }
        None => {
            findings.push(Finding::new(
                FindingCode::FrontmatterNotMapping,
                "the frontmatter is empty; it must be a YAML mapping with at least name and description",
            ));
            None
        }
    }
}

fn check_body(document: &Document, findings: &mut Vec<Finding>) {
    if document.body().trim().is_empty() {
        findings.push(Finding::new(
            FindingCode::BodyEmpty,
            "the Markdown body after the frontmatter is empty, so the skill gives agents no instructions",
        ));
    }
    let lines = document.line_count();
    if lines > RECOMMENDED_MAX_LINES {
        findings.push(Finding::new(
            FindingCode::TooManyLines,
            format!(
                "{SKILL_FILE} has {lines} lines; the specification recommends at most \
                 {RECOMMENDED_MAX_LINES} and moving details to referenced files"
            ),
        ));
    }
}

/// Characters the frontmatter may not contain, each reported once at its first line:
/// - what YAML 1.2 excludes from streams (production c-printable): C0 controls other than
///   tab and line breaks, DEL, C1 controls other than NEL, U+FFFE and U+FFFF;
/// - U+0085, U+2028 and U+2029, which YAML 1.1 readers (strictyaml, so skills-ref) treat as
///   line breaks and YAML 1.2 readers (saphyr) as text, so the two would read different
///   documents;
/// - U+FEFF, a byte-order mark, which YAML only allows before a document.
fn check_characters(yaml: &str, findings: &mut Vec<Finding>) {
    #[derive(PartialEq)]
    enum Problem {
        Control,
        AmbiguousBreak,
        ByteOrderMark,
    }
    let problem = |c: char| match c {
        '\t' | '\n' | '\r' | ' '..='~' | '\u{A0}'..='\u{2027}' | '\u{202A}'..='\u{FEFE}' => None,
        '\u{85}' | '\u{2028}' | '\u{2029}' => Some(Problem::AmbiguousBreak),
        '\u{FEFF}' => Some(Problem::ByteOrderMark),
        '\u{FF00}'..='\u{FFFD}' | '\u{10000}'.. => None,
        _ => Some(Problem::Control),
    };
    let mut reported = Vec::new();
    let mut line = YAML_FIRST_LINE;
    for c in yaml.chars() {
        if c == '\n' {
            line += 1;
            continue;
        }
        let Some(kind) = problem(c).filter(|kind| !reported.contains(kind)) else {
            continue;
        };
        let code = u32::from(c);
        let message = match kind {
            Problem::Control => format!(
                "the frontmatter contains the control character U+{code:04X} at line {line}; \
                 YAML does not allow it"
            ),
            Problem::AmbiguousBreak => format!(
                "the frontmatter contains U+{code:04X} at line {line}, which YAML 1.1 reads as a \
                 line break and YAML 1.2 as text; write it as an escape in a double-quoted string"
            ),
            Problem::ByteOrderMark => format!(
                "the frontmatter contains a byte-order mark (U+FEFF) at line {line}; \
                 YAML allows one only at the start of the file"
            ),
        };
        findings.push(Finding::new(FindingCode::CharacterNotAllowed, message));
        reported.push(kind);
    }
}

fn check_fields(
    entries: &[Entry],
    expected_name: Option<&str>,
    findings: &mut Vec<Finding>,
) -> Option<Frontmatter> {
    for entry in entries {
        if !FIELDS.contains(&entry.key.as_str()) {
            findings.push(Finding::new(
                FindingCode::UnknownField,
                format!(
                    "unknown field {} at line {}; the allowed fields are {}",
                    quote(&entry.key),
                    entry.key_line,
                    FIELDS.join(", ")
                ),
            ));
        }
    }
    let field = |key: &str| entries.iter().find(|e| e.key == key).map(|e| &e.value);
    let name = check_name(field("name"), expected_name, findings);
    let description = check_description(field("description"), findings);
    let compatibility = check_compatibility(field("compatibility"), findings);
    let license = optional_string(
        field("license"),
        "license",
        FindingCode::LicenseNotString,
        findings,
    );
    let allowed_tools = optional_string(
        field("allowed-tools"),
        "allowed-tools",
        FindingCode::AllowedToolsNotString,
        findings,
    );
    let metadata = check_metadata(field("metadata"), findings);
    Some(Frontmatter {
        name: name?,
        description: description?,
        license,
        compatibility,
        allowed_tools,
        metadata,
    })
}

/// The string of a scalar node, or a `not_string` finding for anything else.
fn string_value<'a>(
    node: &'a Node,
    field: &str,
    not_string: FindingCode,
    findings: &mut Vec<Finding>,
) -> Option<&'a str> {
    match &node.value {
        Value::Scalar(s) => Some(s),
        other => {
            findings.push(Finding::new(
                not_string,
                format!(
                    "{field} must be a string; found {} at line {}",
                    other.kind(),
                    node.line
                ),
            ));
            None
        }
    }
}

fn check_name(
    node: Option<&Node>,
    expected_name: Option<&str>,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let Some(node) = node else {
        findings.push(Finding::new(
            FindingCode::NameMissing,
            "name is missing; it is required (1 to 64 characters: a-z, 0-9 and hyphens)",
        ));
        return None;
    };
    let name = string_value(node, "name", FindingCode::NameNotString, findings)?;
    if name.trim().is_empty() {
        findings.push(Finding::new(
            FindingCode::NameEmpty,
            format!("name is empty; it must be 1 to {MAX_NAME_CHARS} characters"),
        ));
        return None;
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        findings.push(Finding::new(
            FindingCode::NameTooLong,
            format!("name is {chars} characters; the limit is {MAX_NAME_CHARS}"),
        ));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        findings.push(Finding::new(
            FindingCode::NameUppercase,
            format!(
                "name {} contains uppercase letters; it must be lowercase",
                quote(name)
            ),
        ));
    }
    let mut invalid: Vec<char> = Vec::new();
    for c in name.chars() {
        let allowed = c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if !allowed && !c.is_ascii_uppercase() && !invalid.contains(&c) {
            invalid.push(c);
        }
    }
    if !invalid.is_empty() {
        let listed: Vec<String> = invalid
            .iter()
            .take(5)
            .map(|c| quote(&c.to_string()))
            .collect();
        findings.push(Finding::new(
            FindingCode::NameInvalidCharacter,
            format!(
                "name {} contains {}; only a-z, 0-9 and hyphens are allowed",
                quote(name),
                listed.join(", ")
            ),
        ));
    }
    if name.starts_with('-') {
        findings.push(Finding::new(
            FindingCode::NameLeadingHyphen,
            format!("name {} starts with a hyphen", quote(name)),
        ));
    }
    if name.ends_with('-') {
        findings.push(Finding::new(
            FindingCode::NameTrailingHyphen,
            format!("name {} ends with a hyphen", quote(name)),
        ));
    }
    if name.contains("--") {
        findings.push(Finding::new(
            FindingCode::NameConsecutiveHyphens,
            format!("name {} contains consecutive hyphens", quote(name)),
        ));
    }
    if let Some(expected) = expected_name.filter(|&expected| expected != name) {
        findings.push(Finding::new(
            FindingCode::NameMismatch,
            format!(
                "name {} does not match the skill directory name {}",
                quote(name),
                quote(expected)
            ),
        ));
    }
    Some(name.to_owned())
}

fn check_description(node: Option<&Node>, findings: &mut Vec<Finding>) -> Option<String> {
    let Some(node) = node else {
        findings.push(Finding::new(
            FindingCode::DescriptionMissing,
            format!(
                "description is missing; it is required (1 to {MAX_DESCRIPTION_CHARS} characters)"
            ),
        ));
        return None;
    };
    let description = string_value(
        node,
        "description",
        FindingCode::DescriptionNotString,
        findings,
    )?;
    if description.trim().is_empty() {
        findings.push(Finding::new(
            FindingCode::DescriptionEmpty,
            format!("description is empty; it must be 1 to {MAX_DESCRIPTION_CHARS} characters"),
        ));
        return None;
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        findings.push(Finding::new(
            FindingCode::DescriptionTooLong,
            format!("description is {chars} characters; the limit is {MAX_DESCRIPTION_CHARS}"),
        ));
    }
    Some(description.to_owned())
}

fn check_compatibility(node: Option<&Node>, findings: &mut Vec<Finding>) -> Option<String> {
    let compatibility = string_value(
        node?,
        "compatibility",
        FindingCode::CompatibilityNotString,
        findings,
    )?;
    if compatibility.trim().is_empty() {
        findings.push(Finding::new(
            FindingCode::CompatibilityEmpty,
            format!(
                "compatibility is empty; when present it must be 1 to {MAX_COMPATIBILITY_CHARS} characters"
            ),
        ));
    }
    let chars = compatibility.chars().count();
    if chars > MAX_COMPATIBILITY_CHARS {
        findings.push(Finding::new(
            FindingCode::CompatibilityTooLong,
            format!("compatibility is {chars} characters; the limit is {MAX_COMPATIBILITY_CHARS}"),
        ));
    }
    Some(compatibility.to_owned())
}

fn optional_string(
    node: Option<&Node>,
    field: &str,
    not_string: FindingCode,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    string_value(node?, field, not_string, findings).map(str::to_owned)
}

fn check_metadata(node: Option<&Node>, findings: &mut Vec<Finding>) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    let Some(node) = node else {
        return metadata;
    };
    match &node.value {
        Value::Mapping(entries) => {
            for entry in entries {
                match &entry.value.value {
                    Value::Scalar(value) => {
                        metadata.insert(entry.key.clone(), value.clone());
                    }
                    other => findings.push(Finding::new(
                        FindingCode::MetadataValueNotString,
                        format!(
                            "metadata value of {} must be a string; found {} at line {}",
                            quote(&entry.key),
                            other.kind(),
                            entry.value.line
                        ),
                    )),
                }
            }
        }
        // `metadata:` with nothing after it is YAML's way of writing no value.
        Value::Scalar(s) if s.is_empty() => {}
        other => findings.push(Finding::new(
            FindingCode::MetadataNotMapping,
            format!(
                "metadata must be a mapping of string keys to string values; found {} at line {}",
                other.kind(),
                node.line
            ),
        )),
    }
    metadata
}
