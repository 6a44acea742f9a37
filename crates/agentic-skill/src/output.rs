//! What `agentic-operator skill validate` prints: one [`PathReport`] per path, as text or JSON.

use std::fmt::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::finding::{Finding, Report};

/// The outcome for one path given on the command line. `--output json` prints a JSON array
/// of these: `{"path", "name", "valid", "errors": [{"code", "message"}], "warnings": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathReport {
    /// The path as given.
    pub path: String,
    /// The skill's name; present only when the skill is valid.
    pub name: Option<String>,
    /// True when there are no errors.
    pub valid: bool,
    /// Problems that make the skill invalid.
    pub errors: Vec<Finding>,
    /// Problems that leave the skill valid.
    pub warnings: Vec<Finding>,
}

impl PathReport {
    /// Pairs a report with the path it was made for.
    pub fn new(path: &Path, report: Report) -> Self {
        PathReport {
            path: path.display().to_string(),
            name: report.frontmatter.as_ref().map(|f| f.name.clone()),
            valid: report.is_valid(),
            errors: report.errors,
            warnings: report.warnings,
        }
    }
}

/// Renders reports for a terminal: a verdict line per path, an indented line per finding,
/// and a closing count.
///
/// ```text
/// valid    skills/pdf-processing (pdf-processing)
/// invalid  skills/Broken
///   error    NameUppercase: name 'Broken' contains uppercase letters; it must be lowercase
/// 2 skills checked: 1 valid, 1 invalid
/// ```
pub fn render_text(reports: &[PathReport]) -> String {
    let mut out = String::new();
    for report in reports {
        let verdict = if report.valid { "valid" } else { "invalid" };
        let _ = write!(out, "{verdict:<8} {}", report.path);
        if let Some(name) = &report.name {
            let _ = write!(out, " ({name})");
        }
        out.push('\n');
        for (severity, findings) in [("error", &report.errors), ("warning", &report.warnings)] {
            for finding in findings {
                let _ = writeln!(out, "  {severity:<8} {}: {}", finding.code, finding.message);
            }
        }
    }
    let valid = reports.iter().filter(|r| r.valid).count();
    let noun = if reports.len() == 1 {
        "skill"
    } else {
        "skills"
    };
    let _ = writeln!(
        out,
        "{} {noun} checked: {valid} valid, {} invalid",
        reports.len(),
        reports.len() - valid
    );
    out
}
