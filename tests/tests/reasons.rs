//! The condition reasons in `docs/conditions.md` and the ones the code produces must agree:
//! a documented reason that no code writes any more, or a reason constant or error reason
//! nobody documented, fails here. Scripts and alerts match on reasons, so drift between the
//! two is a user-visible bug.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Reasons that never reach a condition: the command line's own (`skill push` and
/// `skill validate` reading local files and `~/.docker/config.json`), and invariants of the
/// code that no object can trigger.
const NOT_CONDITIONS: &[&str] = &[
    "InvalidCredentials",
    "InvalidSkillSource",
    "Io",
    "IoError",
    "UnsupportedPath",
    "Internal",
    "MissingInlineSkill",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the repository")
        .to_path_buf()
}

/// Every `.rs` file under the crates' `src/` directories, without the test environment and
/// without unit-test modules (`tests.rs`, `tests/`).
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).expect("readable source directory") {
            let path = entry.expect("directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&path).expect("readable source");
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("crates")).expect("crates/") {
        let krate = entry.expect("crate dir").path();
        if krate.ends_with("agentic-testenv") {
            continue;
        }
        let src = krate.join("src");
        if src.is_dir() {
            walk(&src, &mut out);
        }
    }
    out
}

fn is_reason(word: &str) -> bool {
    word.len() > 1
        && word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_lowercase())
}

/// Backquoted words of `text` that look like reasons (CamelCase).
fn quoted_reasons(text: &str) -> impl Iterator<Item = &str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| is_reason(word))
}

/// The reasons `docs/conditions.md` documents: every backquoted CamelCase word in the
/// `reason` column of its tables, and in its "Reconcile errors" section.
fn documented() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/conditions.md")).expect("conditions.md");
    let mut reasons = BTreeSet::new();
    let mut column = None;
    let mut in_errors = false;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_errors = heading.trim() == "Reconcile errors";
        }
        if in_errors {
            reasons.extend(quoted_reasons(line).map(str::to_owned));
        }
        if !line.starts_with('|') {
            column = None;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if let Some(index) = cells.iter().position(|cell| *cell == "reason") {
            column = Some(index);
            continue;
        }
        if let Some(cell) = column.and_then(|index| cells.get(index)) {
            reasons.extend(quoted_reasons(cell).map(str::to_owned));
        }
    }
    reasons
}

/// What the code declares as reasons: the values of `REASON_*` constants and the arms of
/// the errors' `reason()` functions.
fn declared(sources: &[(PathBuf, String)]) -> BTreeSet<String> {
    let mut reasons = BTreeSet::new();
    for (_, text) in sources {
        for line in text.lines() {
            let line = line.trim();
            if (line.starts_with("pub const REASON_") || line.starts_with("const REASON_"))
                && let Some(value) = line.split('"').nth(1)
            {
                reasons.insert(value.to_owned());
            }
        }
        let mut rest = text.as_str();
        while let Some(start) = rest.find("fn reason(&self) -> &'static str {") {
            let body = &rest[start..];
            let end = body.find("\n    }\n").unwrap_or(body.len());
            for arm in body[..end].lines().filter(|l| l.contains("=> \"")) {
                if let Some(value) = arm.split('"').nth(1) {
                    reasons.insert(value.to_owned());
                }
            }
            rest = &body[end..];
        }
    }
    reasons
}

#[test]
fn documented_and_declared_reasons_are_the_same() {
    let sources = sources();
    let documented = documented();
    let declared = declared(&sources);
    assert!(
        documented.len() > 30,
        "the tables were read: {documented:?}"
    );
    assert!(declared.len() > 30, "the code was read: {declared:?}");

    let undocumented: Vec<_> = declared
        .iter()
        .filter(|r| !documented.contains(*r) && !NOT_CONDITIONS.contains(&r.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "reasons the code declares that docs/conditions.md does not list: {undocumented:?}"
    );

    // A documented reason must be written somewhere, as a constant or a literal.
    let stale: Vec<_> = documented
        .iter()
        .filter(|reason| {
            let literal = format!("\"{reason}\"");
            !sources.iter().any(|(_, text)| text.contains(&literal))
        })
        .collect();
    assert!(
        stale.is_empty(),
        "reasons docs/conditions.md lists that no code writes: {stale:?}"
    );
}

/// The reason of the Warning Event on a failed pass: an Event's, never a condition's.
const EVENT_ONLY: &[&str] = &[agentic_operator::controllers::REASON_RECONCILE_FAILED];

#[test]
fn every_reason_the_code_declares_is_in_a_kinds_table_and_every_table_entry_is_declared() {
    use agentic_core::reasons::{RECONCILE_ERRORS, VOCABULARY};

    let declared = declared(&sources());
    let tables: BTreeSet<String> = VOCABULARY
        .iter()
        .flat_map(|vocabulary| vocabulary.reasons.iter())
        .chain(RECONCILE_ERRORS)
        .map(|reason| (*reason).to_owned())
        .collect();
    let untabled: Vec<_> = declared
        .iter()
        .filter(|reason| {
            !tables.contains(*reason)
                && !NOT_CONDITIONS.contains(&reason.as_str())
                && !EVENT_ONLY.contains(&reason.as_str())
        })
        .collect();
    assert!(
        untabled.is_empty(),
        "reasons the code declares that no table of agentic_core::reasons lists: {untabled:?}"
    );
    let undeclared: Vec<_> = tables
        .iter()
        .filter(|reason| !declared.contains(*reason))
        .collect();
    assert!(
        undeclared.is_empty(),
        "reasons a table lists that no constant or error reason() declares: {undeclared:?}"
    );
}
