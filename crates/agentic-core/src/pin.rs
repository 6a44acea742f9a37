//! What a skill is pinned to, decided once: an image by digest or a git commit, parsed from
//! the strings specs and statuses carry (`spec.image`, `status.resolvedImage`,
//! `status.resolvedSource`, an Agent's and a run's `status.skills[].image`). Whether
//! something is pinned is [`Pin`]'s answer, not a look at the string.

use std::fmt;

/// Content that cannot move.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pin {
    /// An image by digest: `repository@sha256:<hex>` (the repository may carry a tag).
    Image { repository: String, digest: String },
    /// A git commit: `<url>@<40 lowercase hex digits>`.
    Git { url: String, commit: String },
}

impl Pin {
    /// An image reference pinned by digest; `None` for a tag.
    pub fn image(reference: &str) -> Option<Self> {
        let (repository, digest) = reference.rsplit_once('@')?;
        (!repository.is_empty() && digest.starts_with("sha256:")).then(|| Pin::Image {
            repository: repository.to_string(),
            digest: digest.to_string(),
        })
    }

    /// A git source pinned to a full commit id; `None` for a branch, a tag or a short id.
    pub fn git(pinned: &str) -> Option<Self> {
        let (url, commit) = pinned.rsplit_once('@')?;
        (!url.is_empty() && is_commit_id(commit)).then(|| Pin::Git {
            url: url.to_string(),
            commit: commit.to_string(),
        })
    }
}

impl Pin {
    /// A pin as statuses record it (`status.resolvedImage`, `status.resolvedSource`, a
    /// run's `status.skills[].image`): an image by digest or a git commit; `None` for
    /// anything else (an inline skill's `configmap:<name>`, a tag, a branch).
    pub fn parse(recorded: &str) -> Option<Self> {
        Self::image(recorded).or_else(|| Self::git(recorded))
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pin::Image { repository, digest } => write!(f, "{repository}@{digest}"),
            Pin::Git { url, commit } => write!(f, "{url}@{commit}"),
        }
    }
}

/// A full git commit id: 40 lowercase hex digits.
pub fn is_commit_id(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn an_image_is_pinned_by_a_digest_and_not_by_a_tag() {
        let pinned = format!("r.example/skills/pdf@{DIGEST}");
        assert_eq!(
            Pin::image(&pinned),
            Some(Pin::Image {
                repository: "r.example/skills/pdf".into(),
                digest: DIGEST.into(),
            })
        );
        assert_eq!(Pin::image(&pinned).unwrap().to_string(), pinned);
        for unpinned in [
            "r.example/skills/pdf:1",
            "r.example/skills/pdf@v1",
            &format!("@{DIGEST}"),
        ] {
            assert_eq!(Pin::image(unpinned), None, "{unpinned}");
        }
        // A tag beside the digest: the digest pins it.
        assert!(Pin::image(&format!("r.example/skills/pdf:1@{DIGEST}")).is_some());
    }

    #[test]
    fn a_recorded_pin_is_an_image_or_a_commit_and_nothing_else() {
        let image = format!("r.example/skills/pdf@{DIGEST}");
        let git = format!("https://git.example/skills.git@{COMMIT}");
        assert_eq!(Pin::parse(&image), Pin::image(&image));
        assert_eq!(Pin::parse(&git), Pin::git(&git));
        for other in [
            "configmap:pdf",
            "r.example/skills/pdf:1",
            "https://git.example/skills.git@main",
        ] {
            assert_eq!(Pin::parse(other), None, "{other}");
        }
    }

    #[test]
    fn a_git_source_is_pinned_by_a_full_lowercase_commit_id() {
        let pinned = format!("https://git.example/skills.git@{COMMIT}");
        assert_eq!(Pin::git(&pinned).unwrap().to_string(), pinned);
        for unpinned in [
            "https://git.example/skills.git@main".to_string(),
            format!("https://git.example/skills.git@{}", &COMMIT[..12]),
            format!("https://git.example/skills.git@{}", COMMIT.to_uppercase()),
            format!("@{COMMIT}"),
        ] {
            assert_eq!(Pin::git(&unpinned), None, "{unpinned}");
        }
    }
}
