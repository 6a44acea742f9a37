//! The one error type of this crate. What it shares with the errors of skill images (bounded
//! messages, listed skill directories, the verdicts on a skill) is in `agentic-skill`.

use agentic_skill::SkillVerdict;

pub use agentic_skill::MAX_LISTED_DIRECTORIES;
// Server answers and library error chains are cut to agentic-skill's
// MAX_SOURCE_MESSAGE_BYTES.
pub(crate) use agentic_skill::bounded_message as bounded;

/// Everything that can go wrong while resolving, fetching or reading a skill from git.
///
/// Messages name the repository, ref, path or limit involved and never contain credentials
/// (URLs with credentials are refused, see [`SourceUrl::parse`](crate::SourceUrl::parse)).
/// [`GitError::reason`] gives a stable CamelCase string for conditions and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// The URL cannot be parsed, has a scheme the operator does not fetch from, carries
    /// credentials, or is plain `http://` to a host not listed as insecure.
    #[error("invalid git source {source_url:?}: {message}")]
    InvalidSource { source_url: String, message: String },

    /// The ref cannot name a branch, tag or commit.
    #[error("invalid ref {git_ref:?}: {message}")]
    InvalidRef { git_ref: String, message: String },

    /// The `subPath` is not a plain relative path.
    #[error("invalid subPath {sub_path:?}: {message}")]
    InvalidSubPath { sub_path: String, message: String },

    /// The repository has no branch or tag of that name (or no default branch), or not the
    /// commit asked for.
    #[error("{source_url}: {message}")]
    RefNotFound { source_url: String, message: String },

    /// The server does not have the repository (or does not export it).
    #[error("repository {source_url} not found: {message}")]
    RepositoryNotFound { source_url: String, message: String },

    /// The server refused the credentials (or their absence), or does not export the
    /// repository to this client.
    #[error("git server refused access to {source_url}: {message}")]
    Unauthorized { source_url: String, message: String },

    /// The server cannot be reached, timed out, or failed while answering.
    #[error("git server for {source_url} is unavailable: {message}")]
    SourceUnavailable { source_url: String, message: String },

    /// The commit has no `SKILL.md` at its root and several skill directories.
    #[error(
        "the repository has no SKILL.md at its root; set subPath to one of its skill directories: {}",
        agentic_skill::listed_directories(directories, *total)
    )]
    SubPathRequired {
        /// The first skill directories in sorted order, at most [`MAX_LISTED_DIRECTORIES`].
        directories: Vec<String>,
        /// How many there are.
        total: usize,
    },

    /// No `SKILL.md` where one was asked for, or one refused: worded as for skill images.
    #[error(transparent)]
    Skill(#[from] SkillVerdict),

    /// A `SKILL.md` below the skill's root: goose registers every `SKILL.md` it finds, at any
    /// depth, as a skill of its own, so it would be a skill nobody validated. `path` is the
    /// file in the repository.
    #[error(
        "{path} is a SKILL.md below the root of the skill at {root}; goose registers every \
         SKILL.md it finds as a skill of its own, so the agent would get a skill nobody validated"
    )]
    NestedSkillFile {
        path: String,
        /// The skill's directory (its `subPath`), or "the repository root".
        root: String,
    },

    /// A symlink inside the skill: goose follows links, out of the mounted skill too. `path`
    /// is the link in the repository.
    #[error(
        "{path} is a symlink inside the skill at {root}; goose follows links out of the \
         mounted skill, so the agent could load content nobody validated"
    )]
    LinkInSkill {
        path: String,
        /// The skill's directory (its `subPath`), or "the repository root".
        root: String,
    },

    /// Symlinks at or along the skill's path, or names that cannot be written safely.
    #[error("unsafe repository content: {message}")]
    UnsafeContent { message: String },

    /// The fetch or the skill directory exceeds one of the [`Limits`](crate::Limits).
    #[error("repository too large: {message}")]
    TooLarge { message: String },

    /// A local file or directory cannot be written or read.
    #[error("cannot use {path}: {message}")]
    Io { path: String, message: String },
}

impl GitError {
    /// A stable CamelCase reason for conditions, events and metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            GitError::InvalidSource { .. } => "InvalidSource",
            GitError::InvalidRef { .. } => "InvalidRef",
            GitError::InvalidSubPath { .. } => "InvalidSubPath",
            GitError::RefNotFound { .. } => "RefNotFound",
            GitError::RepositoryNotFound { .. } => "RepositoryNotFound",
            GitError::Unauthorized { .. } => "Unauthorized",
            GitError::SourceUnavailable { .. } => "SourceUnavailable",
            GitError::SubPathRequired { .. } => "SubPathRequired",
            GitError::Skill(verdict) => verdict.reason(),
            GitError::NestedSkillFile { .. } => "NestedSkillFile",
            GitError::LinkInSkill { .. } => "LinkInSkill",
            GitError::UnsafeContent { .. } => "UnsafeSourceContent",
            GitError::TooLarge { .. } => "RepositoryTooLarge",
            GitError::Io { .. } => "IoError",
        }
    }

    /// Whether asking again later may succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            GitError::SourceUnavailable { .. } | GitError::Io { .. }
        )
    }

    /// Whether this is a verdict on the content of one commit: commits are addressed by
    /// their id, so such a verdict never changes and may be cached.
    pub fn is_content_verdict(&self) -> bool {
        matches!(
            self,
            GitError::SubPathRequired { .. }
                | GitError::Skill(_)
                | GitError::NestedSkillFile { .. }
                | GitError::LinkInSkill { .. }
                | GitError::UnsafeContent { .. }
                | GitError::TooLarge { .. }
        )
    }

    pub(crate) fn sub_path_required(mut directories: Vec<String>) -> Self {
        let total = directories.len();
        directories.truncate(MAX_LISTED_DIRECTORIES);
        GitError::SubPathRequired { directories, total }
    }

    pub(crate) fn unsafe_content(message: impl Into<String>) -> Self {
        GitError::UnsafeContent {
            message: message.into(),
        }
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        GitError::TooLarge {
            message: message.into(),
        }
    }

    pub(crate) fn io(path: &std::path::Path, error: impl std::fmt::Display) -> Self {
        GitError::Io {
            path: path.display().to_string(),
            message: bounded(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_not_transient_and_outages_are() {
        let verdicts = [
            GitError::sub_path_required(vec!["a".into()]),
            GitError::unsafe_content("x"),
            GitError::too_large("x"),
            GitError::Skill(SkillVerdict::InvalidSkill {
                path: "SKILL.md".into(),
                summary: "x".into(),
            }),
            GitError::Skill(SkillVerdict::GooseIncompatible {
                path: "a/SKILL.md".into(),
                summary: "x".into(),
            }),
            GitError::NestedSkillFile {
                path: "a/b/SKILL.md".into(),
                root: "a".into(),
            },
            GitError::LinkInSkill {
                path: "a/b".into(),
                root: "a".into(),
            },
        ];
        for error in verdicts {
            assert!(error.is_content_verdict(), "{}", error.reason());
            assert!(!error.is_transient(), "{}", error.reason());
        }
        let down = GitError::SourceUnavailable {
            source_url: "git://h/r".into(),
            message: "refused".into(),
        };
        assert!(down.is_transient());
        assert!(!down.is_content_verdict());
        let gone = GitError::RefNotFound {
            source_url: "git://h/r".into(),
            message: "no branch or tag x".into(),
        };
        assert!(!gone.is_transient() && !gone.is_content_verdict());
        assert_eq!(gone.reason(), "RefNotFound");
    }

    #[test]
    fn sub_path_required_keeps_a_bounded_list() {
        let names: Vec<String> = (0..1000).map(|n| format!("s{n:04}")).collect();
        let error = GitError::sub_path_required(names);
        let text = error.to_string();
        assert!(text.ends_with(&format!("(and {} more)", 1000 - MAX_LISTED_DIRECTORIES)));
        assert!(text.len() < 1024, "{}", text.len());
    }
}
