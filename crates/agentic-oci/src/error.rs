//! The one error type of this crate. What it shares with the errors of git skills (bounded
//! messages, listed skill directories, the verdicts on a skill) is in `agentic-skill`.

use agentic_skill::SkillVerdict;

use crate::limits::MAX_LISTED_DIRECTORIES;

// Registry answers and their causes are cut to agentic-skill's MAX_SOURCE_MESSAGE_BYTES.
pub(crate) use agentic_skill::bounded_message as bounded;

/// Everything that can go wrong while packing, pushing, resolving or reading a skill image.
///
/// Messages name the image, path or limit involved and never contain registry credentials.
/// [`OciError::reason`] gives a stable CamelCase string for status conditions and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OciError {
    /// The image reference cannot be parsed, or cannot be used for the operation.
    #[error("invalid image reference {reference:?}: {message}")]
    InvalidReference { reference: String, message: String },

    /// The `subPath` is not a plain relative path inside the image.
    #[error("invalid subPath {sub_path:?}: {message}")]
    InvalidSubPath { sub_path: String, message: String },

    /// The registry does not know the repository, tag, manifest or blob.
    #[error("image {image} not found: {message}")]
    ImageNotFound { image: String, message: String },

    /// The registry refused the credentials (or their absence).
    #[error("registry refused access to {image}: {message}")]
    Unauthorized { image: String, message: String },

    /// The registry cannot be reached, timed out, is overloaded or answered with a 5xx.
    #[error("registry for {image} is unavailable: {message}")]
    RegistryUnavailable { image: String, message: String },

    /// The registry answered in a way this client does not understand.
    #[error("registry error for {image}: {message}")]
    RegistryError { image: String, message: String },

    /// A docker config (a pull secret's `.dockerconfigjson` or `~/.docker/config.json`) is malformed.
    #[error("invalid registry credentials in {source_name}: {message}")]
    InvalidCredentials {
        source_name: String,
        message: String,
    },

    /// The registry served a manifest, index or layer whose bytes do not hash to the digest
    /// (or do not have the size) that names them: the transfer was corrupted or the registry
    /// cannot be trusted with this content. Nothing it served is used.
    #[error("{reference} does not match its digest: expected {expected}, got {actual}")]
    DigestMismatch {
        /// `registry/repository@sha256:…` of what was read.
        reference: String,
        /// The digest (and size, when known) that names the content.
        expected: String,
        /// What arrived: the digest of the bytes received, or how many there were.
        actual: String,
    },

    /// The image holds several skills in top-level directories and no `subPath` chose one.
    #[error(
        "the image has no SKILL.md at its root; set subPath to one of its skill directories: {}",
        agentic_skill::listed_directories(directories, *total)
    )]
    SubPathRequired {
        /// The first skill directories in sorted order, at most
        /// [`MAX_LISTED_DIRECTORIES`](crate::MAX_LISTED_DIRECTORIES).
        directories: Vec<String>,
        /// How many skill directories the image has.
        total: usize,
    },

    /// No `SKILL.md` where one was asked for, or one refused: worded as for git skills.
    #[error(transparent)]
    Skill(#[from] SkillVerdict),

    /// A `SKILL.md` below the skill's root. Agents register every `SKILL.md` they find
    /// (goose at any depth, the first found winning a name), so it would load as another
    /// skill, which nobody validated, or replace one. Refused in any layer.
    #[error(
        "{path} is a SKILL.md below the skill's root ({root}); agents would load it as another skill, which nobody validated: move it out of the skill or rename it"
    )]
    NestedSkillFile {
        /// Its path inside the image.
        path: String,
        /// The skill's root: its `subPath`, or "the image root".
        root: String,
    },

    /// A symlink or hardlink inside the skill. Agents follow links, out of the mounted skill
    /// too, so a skill holds only regular files and directories. Refused in any layer.
    #[error(
        "{path} is {kind} inside the skill ({root}); agents follow links out of the mounted skill, so a skill may hold only regular files and directories"
    )]
    LinkInSkill {
        /// Its path inside the image.
        path: String,
        /// "a symlink" or "a hardlink".
        kind: String,
        /// The skill's root: its `subPath`, or "the image root".
        root: String,
    },

    /// The image holds more skill directories than one image may list for a SkillCollection
    /// ([`Limits::max_skills`](crate::Limits::max_skills)).
    #[error(
        "the image holds {count} skill directories, more than the {max} one image may list (Limits::max_skills)"
    )]
    TooManySkills {
        /// How many top-level directories hold a `SKILL.md`.
        count: usize,
        /// The limit.
        max: usize,
    },

    /// The image tries something a skill image never needs: path traversal, links or
    /// device nodes where they matter, malformed archive metadata.
    #[error("unsafe image content: {message}")]
    UnsafeImageContent { message: String },

    /// The image exceeds one of the [`Limits`](crate::Limits).
    #[error("image too large: {message}")]
    ImageTooLarge { message: String },

    /// The image is not a container image this crate can read (media types, platforms,
    /// compression, corrupt archives).
    #[error("unsupported image: {message}")]
    InvalidImage { message: String },

    /// A directory given to `skill push` cannot be packed (links, special files, duplicates).
    #[error("cannot pack {path}: {message}")]
    InvalidSkillSource { path: String, message: String },

    /// A local file cannot be read.
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },

    /// A background task failed; this is a bug, not bad input.
    #[error("internal error: {message}")]
    Internal { message: String },
}

impl OciError {
    /// The verdict on the `SKILL.md` at `path` that `report` finds invalid: its own reason
    /// when goose alone would not read it as written ([`SkillVerdict::GooseIncompatible`]).
    pub fn invalid_skill(path: String, report: &agentic_skill::Report) -> Self {
        let summary = report.summary();
        let verdict = SkillVerdict::refused(path.clone(), report)
            .unwrap_or(SkillVerdict::InvalidSkill { path, summary });
        OciError::Skill(verdict)
    }

    /// A stable CamelCase reason for conditions, events and metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            OciError::InvalidReference { .. } => "InvalidReference",
            OciError::InvalidSubPath { .. } => "InvalidSubPath",
            OciError::ImageNotFound { .. } => "ImageNotFound",
            OciError::Unauthorized { .. } => "Unauthorized",
            OciError::RegistryUnavailable { .. } => "RegistryUnavailable",
            OciError::RegistryError { .. } => "RegistryError",
            OciError::InvalidCredentials { .. } => "InvalidCredentials",
            OciError::DigestMismatch { .. } => "DigestMismatch",
            OciError::SubPathRequired { .. } => "SubPathRequired",
            OciError::Skill(verdict) => verdict.reason(),
            OciError::NestedSkillFile { .. } => "NestedSkillFile",
            OciError::LinkInSkill { .. } => "LinkInSkill",
            OciError::TooManySkills { .. } => "TooManySkills",
            OciError::UnsafeImageContent { .. } => "UnsafeImageContent",
            OciError::ImageTooLarge { .. } => "ImageTooLarge",
            OciError::InvalidImage { .. } => "InvalidImage",
            OciError::InvalidSkillSource { .. } => "InvalidSkillSource",
            OciError::Io { .. } => "IoError",
            OciError::Internal { .. } => "Internal",
        }
    }

    /// Whether retrying the same request later may succeed without anyone changing anything
    /// (network trouble, registry outages). A [`OciError::DigestMismatch`] is not: it says
    /// what the registry served, and is reported as such (it is not kept by
    /// [`SkillCache`](crate::SkillCache) either, so a later read tries again).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            OciError::RegistryUnavailable { .. }
                | OciError::RegistryError { .. }
                | OciError::Internal { .. }
        )
    }

    /// Whether this error is a verdict on the image content itself. Content is addressed by
    /// digest, so such a verdict never changes and [`SkillCache`](crate::SkillCache) keeps it.
    pub fn is_content_verdict(&self) -> bool {
        matches!(
            self,
            OciError::SubPathRequired { .. }
                | OciError::Skill(_)
                | OciError::NestedSkillFile { .. }
                | OciError::LinkInSkill { .. }
                | OciError::TooManySkills { .. }
                | OciError::UnsafeImageContent { .. }
                | OciError::ImageTooLarge { .. }
                | OciError::InvalidImage { .. }
        )
    }

    /// `SubPathRequired` for the `total` skill directories of an image, given the first of
    /// their names in sorted order, of which it keeps only the first few.
    pub(crate) fn sub_path_required(mut directories: Vec<String>, total: usize) -> Self {
        directories.truncate(MAX_LISTED_DIRECTORIES);
        OciError::SubPathRequired { directories, total }
    }

    pub(crate) fn unsafe_content(message: impl Into<String>) -> Self {
        OciError::UnsafeImageContent {
            message: message.into(),
        }
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        OciError::ImageTooLarge {
            message: message.into(),
        }
    }

    pub(crate) fn invalid_image(message: impl Into<String>) -> Self {
        OciError::InvalidImage {
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_never_transient() {
        let samples = [
            OciError::sub_path_required(vec!["a".into()], 1),
            OciError::NestedSkillFile {
                path: "demo/refs/SKILL.md".into(),
                root: "demo".into(),
            },
            OciError::LinkInSkill {
                path: "demo/run".into(),
                kind: "a symlink".into(),
                root: "demo".into(),
            },
            OciError::TooManySkills {
                count: 300,
                max: 256,
            },
            OciError::unsafe_content("x"),
            OciError::too_large("x"),
            OciError::invalid_image("x"),
            OciError::Skill(SkillVerdict::InvalidSkill {
                path: "SKILL.md".into(),
                summary: "x".into(),
            }),
            OciError::Skill(SkillVerdict::GooseIncompatible {
                path: "SKILL.md".into(),
                summary: "x".into(),
            }),
            OciError::Skill(SkillVerdict::SkillNotFound {
                path: "SKILL.md".into(),
                message: "x".into(),
            }),
        ];
        for error in samples {
            assert!(error.is_content_verdict(), "{}", error.reason());
            assert!(!error.is_transient(), "{}", error.reason());
        }
        let unavailable = OciError::RegistryUnavailable {
            image: "r/x".into(),
            message: "refused".into(),
        };
        assert!(unavailable.is_transient());
        assert!(!unavailable.is_content_verdict());
        assert_eq!(unavailable.reason(), "RegistryUnavailable");
        let mismatch = OciError::DigestMismatch {
            reference: "r/x@sha256:1".into(),
            expected: "sha256:1".into(),
            actual: "sha256:2".into(),
        };
        assert!(!mismatch.is_transient(), "reported as what it is");
        assert!(!mismatch.is_content_verdict(), "not kept");
        assert_eq!(
            mismatch.to_string(),
            "r/x@sha256:1 does not match its digest: expected sha256:1, got sha256:2"
        );
    }

    #[test]
    fn sub_path_required_lists_directories() {
        let error = OciError::sub_path_required(vec!["alpha".into(), "beta".into()], 2);
        assert!(error.to_string().ends_with("alpha, beta"), "{error}");
    }

    #[test]
    fn sub_path_required_keeps_a_bounded_list() {
        let names: Vec<String> = (0..50).map(|n| format!("skill-{n:05}")).collect();
        let error = OciError::sub_path_required(names, 50_000);
        let OciError::SubPathRequired { directories, total } = &error else {
            unreachable!()
        };
        assert_eq!(
            (directories.len(), *total),
            (MAX_LISTED_DIRECTORIES, 50_000)
        );
        assert_eq!(directories[0], "skill-00000");
        let text = error.to_string();
        assert!(text.len() < 1024, "{} bytes", text.len());
        assert!(
            text.ends_with(&format!("(and {} more)", 50_000 - MAX_LISTED_DIRECTORIES)),
            "{text}"
        );
    }
}
