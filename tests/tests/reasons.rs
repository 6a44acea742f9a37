//! What the compiler cannot check about reasons.
//!
//! Conditions are written through `agentic_core::conditions::Conditions`, which takes the
//! kind's reason enum of `agentic_core::reasons`, and `agentic-core` tests each enum against
//! its section of `docs/conditions.md`. The registry, git and SKILL.md errors live in crates
//! below `agentic-core` and name their reasons as words (`reason() -> &'static str`); a
//! SkillCard or SkillCollection writes those words into its conditions, so each must be a
//! reason of one of those kinds (or one the command line alone reports).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentic_core::reasons::vocabulary;

/// Reasons that never reach a condition: the command line's own (`skill push` and
/// `skill validate` reading local files and `~/.docker/config.json`).
const NOT_CONDITIONS: &[&str] = &[
    "InvalidCredentials",
    "InvalidSkillSource",
    "Io",
    "IoError",
    "UnsupportedPath",
    "Internal",
];

/// The crates whose errors name their reasons as words.
const WORDED_ERRORS: &[&str] = &["agentic-oci", "agentic-git", "agentic-skill"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the repository")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, without unit-test modules (`tests.rs`, `tests/`).
fn sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(std::fs::read_to_string(&path).expect("readable source"));
        }
    }
}

/// The words the arms of the errors' `reason()` functions return.
fn worded_error_reasons() -> BTreeSet<String> {
    let mut texts = Vec::new();
    for krate in WORDED_ERRORS {
        sources(&repo().join("crates").join(krate).join("src"), &mut texts);
    }
    let mut reasons = BTreeSet::new();
    for text in &texts {
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
fn every_worded_error_reason_is_a_skillcard_or_skillcollection_reason() {
    let reasons = worded_error_reasons();
    assert!(reasons.len() > 20, "the errors were read: {reasons:?}");
    let cards: BTreeSet<&str> = vocabulary()
        .into_iter()
        .filter(|v| ["SkillCard", "SkillCollection"].contains(&v.kind))
        .flat_map(|v| v.reasons)
        .collect();
    let unknown: Vec<_> = reasons
        .iter()
        .filter(|r| !cards.contains(r.as_str()) && !NOT_CONDITIONS.contains(&r.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "error reasons that neither SkillCardReason nor SkillCollectionReason lists: {unknown:?}"
    );
}
