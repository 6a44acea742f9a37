//! Parsing and validation of `SKILL.md`, the file that defines an
//! [Agent Skill](https://agentskills.io/specification): YAML frontmatter between `---`
//! lines, followed by Markdown instructions.
//!
//! [`validate_skill_md`] checks bytes (as read from an image layer), [`validate_path`] a
//! directory or file on disk. Both return a [`Report`] listing every problem at once, each
//! with a stable [`FindingCode`]. Verdicts match the reference validator (`skills-ref`
//! 0.1.1) except for the deliberate differences listed in `docs/skill-validation.md`.
//!
//! ```
//! let report = agentic_skill::validate_skill_md(
//!     b"---\nname: pdf-tools\ndescription: Fill PDF forms.\n---\n# PDF tools\n",
//!     Some("pdf-tools"),
//! );
//! assert!(report.is_valid());
//! assert_eq!(report.frontmatter.unwrap().description, "Fill PDF forms.");
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod document;
mod error;
mod finding;
mod goose;
mod output;
mod text;
mod validate;
mod verdict;
mod yaml;

pub use error::SkillError;
pub use finding::{Finding, FindingCode, MAX_FINDINGS_PER_CODE, Refusal, Report, Severity};
pub use output::{PathReport, render_text};
pub use text::{
    MAX_LISTED_DIRECTORIES, MAX_SOURCE_MESSAGE_BYTES, and_more, bounded_message,
    listed_directories, truncate_message,
};
pub use validate::{
    MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, RECOMMENDED_MAX_LINES,
    validate_path, validate_skill_md,
};
pub use verdict::SkillVerdict;

/// The size in bytes of a SKILL.md's Markdown body (after the frontmatter, line endings
/// normalized), or `None` when the frontmatter cannot be found. A `type: rule` skill puts
/// this much into every prompt.
pub fn body_bytes(content: &[u8]) -> Option<usize> {
    document::Document::split(content)
        .ok()
        .map(|document| document.body().len())
}

/// Largest SKILL.md accepted, in bytes. Larger files are rejected without being read whole.
pub const MAX_SKILL_MD_BYTES: u64 = 1024 * 1024;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// Longest `subPath` accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_SUB_PATH_BYTES: usize = 4096;

/// Checks a SkillCard `subPath`, wherever the skill comes from: plain relative segments, no
/// `.` or `..`, no empty segments, at most [`MAX_SUB_PATH_BYTES`]. The error says why.
pub fn check_sub_path(sub_path: &str) -> Result<(), String> {
    if sub_path.is_empty() {
        return Err("it is empty; leave it unset for a skill at the root".to_string());
    }
    if sub_path.starts_with('/') {
        return Err("it must be relative to the root".to_string());
    }
    if sub_path.len() > MAX_SUB_PATH_BYTES {
        return Err(format!("it is longer than {MAX_SUB_PATH_BYTES} bytes"));
    }
    for segment in sub_path.split('/') {
        match segment {
            "" => return Err("it has an empty segment (a doubled or trailing '/')".to_string()),
            "." | ".." => return Err("'.' and '..' segments are not allowed".to_string()),
            _ => {}
        }
    }
    Ok(())
}

/// The frontmatter fields of a valid SKILL.md, as written (no trimming).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frontmatter {
    /// The skill's identifier: 1 to 64 characters of `a-z`, `0-9` and single inner hyphens.
    pub name: String,
    /// What the skill does and when to use it: 1 to 1024 characters.
    pub description: String,
    /// A license name or the name of a bundled license file.
    pub license: Option<String>,
    /// Environment requirements: 1 to 500 characters.
    pub compatibility: Option<String>,
    /// Space-separated pre-approved tools (the `allowed-tools` field; experimental).
    pub allowed_tools: Option<String>,
    /// Client-specific string properties; empty when absent.
    pub metadata: BTreeMap<String, String>,
}
