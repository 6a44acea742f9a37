//! Errors that stop validation before a verdict exists (the path cannot be read).

use std::path::PathBuf;

/// Failure to reach a SKILL.md at all. Problems *in* a SKILL.md are not errors of this
/// kind; they are [`Finding`](crate::Finding)s in a [`Report`](crate::Report).
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// Reading the path or its metadata failed (missing path, permissions, ...).
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The path is a file, but not one named `SKILL.md`.
    #[error(
        "{} is neither a skill directory nor a file named {}",
        path.display(),
        crate::SKILL_FILE
    )]
    UnsupportedPath {
        /// The path that was given.
        path: PathBuf,
    },
}

impl SkillError {
    /// A stable CamelCase reason, suitable for Kubernetes condition reasons and metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            SkillError::Io { .. } => "Io",
            SkillError::UnsupportedPath { .. } => "UnsupportedPath",
        }
    }
}
