//! What the compiler cannot check about reasons: that `docs/conditions.md` documents them.
//!
//! Conditions are written through `agentic_core::conditions::Conditions`, which takes the
//! kind's reason enum of `agentic_core::reasons`; the registry, git and SKILL.md errors reach
//! a SkillCard's conditions through one exhaustive match per error type in the operator, so
//! a reason no enum lists does not compile. What is left is the documentation: each section
//! of `docs/conditions.md` lists exactly the variants of its kind's enum.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agentic_core::reasons::{EventReason, Reason, ReconcileErrorReason, vocabulary};

fn conditions_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the repository")
        .join("docs/conditions.md");
    std::fs::read_to_string(path).expect("docs/conditions.md")
}

fn is_reason(word: &str) -> bool {
    word.len() > 1
        && word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_lowercase())
}

/// The backquoted CamelCase words of the `reason` column of each `## Kind` section's tables
/// (its `###` subsections included), and of the "Reconcile errors" section's text.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let text = conditions_md();
    let mut sections: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut section = String::new();
    let mut column = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim().to_string();
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let words = if section == ReconcileErrorReason::KIND {
            line
        } else if !line.starts_with('|') {
            column = None;
            continue;
        } else if let Some(index) = cells.iter().position(|cell| *cell == "reason") {
            column = Some(index);
            continue;
        } else {
            match column.and_then(|index| cells.get(index)) {
                Some(cell) => cell,
                None => continue,
            }
        };
        let reasons = words
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|word| is_reason(word));
        sections
            .entry(section.clone())
            .or_default()
            .extend(reasons.map(str::to_owned));
    }
    sections
}

#[test]
fn each_section_of_the_docs_lists_exactly_its_kinds_reasons() {
    let documented = documented();
    for vocabulary in vocabulary() {
        let listed: BTreeSet<String> = vocabulary.reasons.iter().map(|r| (*r).to_owned()).collect();
        let section = documented.get(vocabulary.kind).cloned().unwrap_or_default();
        let undocumented: Vec<_> = listed.difference(&section).collect();
        let unknown: Vec<_> = section.difference(&listed).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "{}: not in its section of docs/conditions.md: {undocumented:?}; documented but in no variant of its enum: {unknown:?}",
            vocabulary.kind
        );
    }
    let errors = documented
        .get(ReconcileErrorReason::KIND)
        .cloned()
        .unwrap_or_default();
    let listed: BTreeSet<String> = ReconcileErrorReason::all()
        .into_iter()
        .map(|r| r.as_str().to_owned())
        .collect();
    assert!(
        listed.is_subset(&errors),
        "reconcile errors not documented: {:?}",
        listed.difference(&errors).collect::<Vec<_>>()
    );
}

#[test]
fn event_reasons_are_documented() {
    let text = conditions_md();
    for reason in EventReason::all() {
        assert!(
            text.contains(&format!("`{reason}`")),
            "docs/conditions.md does not mention the Event reason `{reason}`"
        );
    }
}
