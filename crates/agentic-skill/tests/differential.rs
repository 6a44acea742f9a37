//! Differential test: our validator against the reference one, `skills-ref` 0.1.1
//! (`agentskills validate DIR`), over the shared skills corpus and generated edge cases.
//!
//! Verdicts (valid or invalid) must agree. Where they deliberately differ (see
//! `docs/skill-validation.md`), the case says so and the test asserts the difference, so a
//! change on either side shows up. It builds only with the `integration` feature, which
//! `make test` enables along with `AGENTSKILLS_BIN`; without that variable this test fails
//! rather than silently checking nothing.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use agentic_skill::{FindingCode, Report, validate_path};

mod cases;

use cases::{Expect, corpus_dir, corpus_skills, generated_cases};

/// What the reference validator concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference {
    Valid,
    /// Exit 1 with its list of problems.
    Invalid(String),
    /// Exit 1 with a Python traceback: skills-ref does not handle this input.
    Crashed(String),
}

impl Reference {
    fn is_valid(&self) -> bool {
        matches!(self, Reference::Valid)
    }
}

fn agentskills_bin() -> PathBuf {
    match std::env::var_os("AGENTSKILLS_BIN") {
        Some(bin) if !bin.is_empty() => PathBuf::from(bin),
        _ => panic!(
            "AGENTSKILLS_BIN is not set. Run `make test`, or set it to the reference validator: \
             AGENTSKILLS_BIN=\"$(hack/install-skills-ref.sh | tail -n1)\" cargo test -p agentic-skill --features integration"
        ),
    }
}

fn run_reference(bin: &Path, skill_dir: &Path) -> Reference {
    let output = Command::new(bin)
        .arg("validate")
        .arg(skill_dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    match output.status.code() {
        Some(0) if stdout.starts_with("Valid skill:") => Reference::Valid,
        Some(1) if stderr.starts_with("Validation failed for") => Reference::Invalid(stderr),
        Some(1) if stderr.contains("Traceback (most recent call last)") => {
            Reference::Crashed(stderr.lines().last().unwrap_or_default().to_owned())
        }
        status => panic!(
            "unexpected result from {} validate {}: status {status:?}\nstdout: {stdout}\nstderr: {stderr}",
            bin.display(),
            skill_dir.display()
        ),
    }
}

fn ours(skill_dir: &Path) -> Report {
    validate_path(skill_dir)
        .unwrap_or_else(|e| panic!("our validator failed on {}: {e}", skill_dir.display()))
}

fn codes(report: &Report) -> Vec<FindingCode> {
    report.errors.iter().map(|f| f.code).collect()
}

/// Checks one case's outcome; returns a description of the mismatch, if any.
fn judge(expect: Expect, ours: &Report, reference: &Reference) -> Option<String> {
    let ours_ok = ours.is_valid();
    let expected = match expect {
        Expect::Valid => ours_ok && reference.is_valid(),
        Expect::Invalid(code) => {
            !ours_ok && ours.has(code) && matches!(reference, Reference::Invalid(_))
        }
        Expect::ReferenceCrashes(code) => {
            !ours_ok && ours.has(code) && matches!(reference, Reference::Crashed(_))
        }
        Expect::OnlyWeAccept(_) => ours_ok && !reference.is_valid(),
        Expect::OnlyWeReject(code, _) => !ours_ok && ours.has(code) && reference.is_valid(),
    };
    (!expected).then(|| {
        format!(
            "expected {}; ours: valid={ours_ok} errors={:?} ({}); reference: {reference:?}",
            expect.describe(),
            codes(ours),
            ours.summary()
        )
    })
}

impl Expect {
    fn describe(self) -> String {
        match self {
            Expect::Valid => "both valid".to_owned(),
            Expect::Invalid(code) => format!("both invalid, ours with {code}"),
            Expect::ReferenceCrashes(code) => {
                format!("ours invalid with {code}, skills-ref crashing")
            }
            Expect::OnlyWeAccept(reason) => {
                format!("ours valid, skills-ref invalid (deliberate: {reason})")
            }
            Expect::OnlyWeReject(code, reason) => {
                format!("ours invalid with {code}, skills-ref valid (deliberate: {reason})")
            }
        }
    }
}

/// Runs `check` over `items` on two threads (skills-ref starts a Python interpreter each
/// time) and returns the failures.
fn run_all<T: Sync>(items: &[T], check: impl Fn(&T) -> Option<String> + Sync) -> Vec<String> {
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| first.iter().filter_map(&check).collect::<Vec<_>>());
        let mut failures: Vec<String> = second.iter().filter_map(&check).collect();
        failures.extend(other.join().expect("worker thread panicked"));
        failures
    })
}

/// Compares both validators on every generated case and, when the shared corpus exists, on
/// every corpus skill; all disagreements are reported together.
#[test]
fn verdicts_agree_with_skills_ref() {
    let bin = agentskills_bin();
    let mut failures = generated_case_failures(&bin);
    let corpus = corpus_dir();
    if corpus.is_dir() {
        failures.extend(corpus_failures(&bin, &corpus));
    } else {
        eprintln!(
            "{} not found; compared generated cases only",
            corpus.display()
        );
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn generated_case_failures(bin: &Path) -> Vec<String> {
    let root = tempfile::tempdir().expect("temp dir");
    let cases = generated_cases();
    let mut dirs = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let dir = root.path().join(format!("case-{i}")).join(&case.dir);
        std::fs::create_dir_all(&dir).expect("create case dir");
        std::fs::write(dir.join(case.file), &case.content).expect("write case");
        dirs.push((case, dir));
    }
    run_all(&dirs, |(case, dir)| {
        judge(case.expect, &ours(dir), &run_reference(bin, dir))
            .map(|problem| format!("generated case {:?}: {problem}", case.label))
    })
}

/// A row of the corpus README's verdict table.
struct ReadmeVerdict {
    /// `collection/skill`.
    skill: String,
    valid: bool,
    /// For invalid rows, the reference's message, e.g. `Description exceeds ... (1068 chars)`.
    reason: String,
}

fn readme_verdicts(corpus: &Path) -> Vec<ReadmeVerdict> {
    let readme = std::fs::read_to_string(corpus.join("README.md")).unwrap_or_default();
    readme
        .lines()
        .filter_map(|line| {
            let mut cells = line.trim().strip_prefix('|')?.split('|');
            let skill = cells.next()?.trim().strip_prefix('`')?.strip_suffix('`')?;
            let verdict = cells.next()?.trim();
            Some(ReadmeVerdict {
                skill: skill.to_owned(),
                valid: verdict == "valid",
                reason: verdict
                    .strip_prefix("invalid:")
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            })
        })
        .collect()
}

fn corpus_failures(bin: &Path, corpus: &Path) -> Vec<String> {
    let skills = corpus_skills(corpus);
    let mut failures = Vec::new();
    if skills.is_empty() {
        failures.push(format!("no skills under {}", corpus.display()));
    }
    failures.extend(run_all(&skills, |dir| {
        let ours = ours(dir);
        let reference = run_reference(bin, dir);
        (ours.is_valid() != reference.is_valid()).then(|| {
            format!(
                "corpus skill {}: ours valid={} ({}); reference: {reference:?}",
                dir.display(),
                ours.is_valid(),
                ours.summary()
            )
        })
    }));

    // The README records the reference verdicts; ours must match them, and where it quotes
    // a length ("(1068 chars)"), our message must report the same count.
    let verdicts = readme_verdicts(corpus);
    if verdicts.is_empty() {
        failures.push("no verdict table in the corpus README".to_owned());
    }
    for row in verdicts {
        let report = ours(&corpus.join(&row.skill));
        if report.is_valid() != row.valid {
            failures.push(format!(
                "corpus README says {} is valid={}, ours valid={} ({})",
                row.skill,
                row.valid,
                report.is_valid(),
                report.summary()
            ));
        }
        let count = row
            .reason
            .rsplit_once('(')
            .and_then(|(_, tail)| tail.strip_suffix(" chars)"));
        if let Some(count) = count
            && !report.summary().contains(&format!("is {count} characters"))
        {
            failures.push(format!(
                "corpus README reports {count} characters for {}; ours: {}",
                row.skill,
                report.summary()
            ));
        }
    }
    failures
}
