//! Which commit a SkillCard's `ref` names, from what the server advertises.

use crate::GitError;

/// Hex digits of a full SHA-1 commit id.
const COMMIT_ID_LEN: usize = 40;

/// What `spec.ref` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// No ref: the remote's default branch (its `HEAD`).
    DefaultBranch,
    /// A branch or tag (a branch wins when both exist, as for `git clone --branch`), or a
    /// full ref name starting with `refs/`.
    Name(String),
    /// A full commit id.
    Commit(String),
}

/// How the resolved commit was named: everything but a commit id can move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefKind {
    /// The remote's default branch, `branch` when the server said which.
    DefaultBranch { branch: Option<String> },
    /// `refs/heads/<name>`.
    Branch(String),
    /// `refs/tags/<name>`.
    Tag(String),
    /// Another full ref name.
    Other(String),
    /// A commit id: it names one commit forever.
    Commit,
}

impl RefKind {
    /// Whether the same ref may name another commit later.
    pub fn is_moving(&self) -> bool {
        !matches!(self, RefKind::Commit)
    }
}

/// A commit and how the ref led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The full commit id, lower-case hex.
    pub commit: String,
    pub kind: RefKind,
}

/// One ref the server advertised: its full name and the commit it ends at (annotated tags
/// peeled). `target` is where a symbolic ref (`HEAD`) points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Advertised {
    pub name: String,
    pub commit: String,
    pub target: Option<String>,
}

pub(crate) fn is_commit_id(text: &str) -> bool {
    text.len() == COMMIT_ID_LEN && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Classifies `git_ref`. Names are limited to `A-Z a-z 0-9 . _ / -` without `..`, `//`,
/// a leading `-` or `/`, a trailing `/` or `.`, or `.lock`: they become refspecs, where
/// `:`, `+`, `*` or `^` would change what is fetched.
// `.lock` is git's rule for ref names, and git's rules are case-sensitive.
#[allow(clippy::case_sensitive_file_extension_comparisons)]
pub(crate) fn wanted(git_ref: Option<&str>) -> Result<Wanted, GitError> {
    let Some(name) = git_ref.filter(|r| !r.is_empty()) else {
        return Ok(Wanted::DefaultBranch);
    };
    if is_commit_id(name) {
        return Ok(Wanted::Commit(name.to_ascii_lowercase()));
    }
    let invalid = |message: &str| GitError::InvalidRef {
        git_ref: name.to_string(),
        message: message.to_string(),
    };
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
    {
        return Err(invalid(
            "a ref may hold only letters, digits, '.', '_', '/' and '-'",
        ));
    }
    if name.contains("..")
        || name.contains("//")
        || name.starts_with(['-', '/'])
        || name.ends_with(['/', '.'])
        || name.ends_with(".lock")
    {
        return Err(invalid(
            "not a valid branch or tag name ('..', '//', a leading '-' or '/', a trailing '/', '.' or '.lock')",
        ));
    }
    Ok(Wanted::Name(name.to_string()))
}

impl Wanted {
    /// The refspecs whose advertisement answers the question (fetch direction, no
    /// destination: nothing is written for them).
    pub(crate) fn refspecs(&self) -> Vec<String> {
        match self {
            Wanted::DefaultBranch => vec!["HEAD".into()],
            Wanted::Name(name) if name.starts_with("refs/") => vec![name.clone()],
            Wanted::Name(name) => vec![format!("refs/heads/{name}"), format!("refs/tags/{name}")],
            Wanted::Commit(id) => vec![id.clone()],
        }
    }

    /// Picks the commit from the server's advertisement.
    pub(crate) fn pick(
        &self,
        advertised: &[Advertised],
        source: &str,
    ) -> Result<Resolved, GitError> {
        let find = |full: &str| advertised.iter().find(|a| a.name == full);
        let not_found = |message: String| GitError::RefNotFound {
            source_url: source.to_string(),
            message,
        };
        match self {
            Wanted::Commit(id) => Ok(Resolved {
                commit: id.clone(),
                kind: RefKind::Commit,
            }),
            Wanted::DefaultBranch => match find("HEAD") {
                Some(head) => Ok(Resolved {
                    commit: head.commit.clone(),
                    kind: RefKind::DefaultBranch {
                        branch: head
                            .target
                            .as_deref()
                            .map(|t| t.strip_prefix("refs/heads/").unwrap_or(t).to_string()),
                    },
                }),
                None => Err(not_found(
                    "the repository has no default branch (HEAD); set spec.ref".to_string(),
                )),
            },
            Wanted::Name(name) if name.starts_with("refs/") => match find(name) {
                Some(found) => Ok(Resolved {
                    commit: found.commit.clone(),
                    kind: RefKind::Other(name.clone()),
                }),
                None => Err(not_found(format!("no ref {name}"))),
            },
            Wanted::Name(name) => {
                if let Some(branch) = find(&format!("refs/heads/{name}")) {
                    return Ok(Resolved {
                        commit: branch.commit.clone(),
                        kind: RefKind::Branch(name.clone()),
                    });
                }
                if let Some(tag) = find(&format!("refs/tags/{name}")) {
                    return Ok(Resolved {
                        commit: tag.commit.clone(),
                        kind: RefKind::Tag(name.clone()),
                    });
                }
                let hint = if name.len() >= 4 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                    "; a commit must be given by its full 40-character id"
                } else {
                    ""
                };
                Err(not_found(format!("no branch or tag {name}{hint}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn advertised(name: &str, commit: &str) -> Advertised {
        Advertised {
            name: name.into(),
            commit: commit.into(),
            target: None,
        }
    }

    #[test]
    fn classifies_refs() {
        assert_eq!(wanted(None).unwrap(), Wanted::DefaultBranch);
        assert_eq!(wanted(Some("")).unwrap(), Wanted::DefaultBranch);
        assert_eq!(
            wanted(Some(&A.to_uppercase())).unwrap(),
            Wanted::Commit(A.into())
        );
        assert_eq!(wanted(Some("v1.2")).unwrap(), Wanted::Name("v1.2".into()));
        for bad in [
            "a:b", "+main", "main^", "a..b", "-x", "x/", "x.lock", "a b", "*",
        ] {
            let error = wanted(Some(bad)).unwrap_err();
            assert_eq!(error.reason(), "InvalidRef", "{bad}");
        }
    }

    #[test]
    fn a_branch_wins_over_a_tag_of_the_same_name() {
        let refs = [advertised("refs/tags/x", A), advertised("refs/heads/x", B)];
        let resolved = Wanted::Name("x".into()).pick(&refs, "git://h/r").unwrap();
        assert_eq!(resolved.commit, B);
        assert_eq!(resolved.kind, RefKind::Branch("x".into()));
        let resolved = Wanted::Name("x".into())
            .pick(&refs[..1], "git://h/r")
            .unwrap();
        assert_eq!(resolved.kind, RefKind::Tag("x".into()));
        assert!(resolved.kind.is_moving());
    }

    #[test]
    fn default_branch_names_its_target() {
        let refs = [Advertised {
            name: "HEAD".into(),
            commit: A.into(),
            target: Some("refs/heads/trunk".into()),
        }];
        let resolved = Wanted::DefaultBranch.pick(&refs, "git://h/r").unwrap();
        assert_eq!(
            resolved.kind,
            RefKind::DefaultBranch {
                branch: Some("trunk".into())
            }
        );
        let error = Wanted::DefaultBranch.pick(&[], "git://h/r").unwrap_err();
        assert_eq!(error.reason(), "RefNotFound");
    }

    #[test]
    fn missing_names_and_short_ids_are_not_found() {
        let error = Wanted::Name("gone".into())
            .pick(&[], "git://h/r")
            .unwrap_err();
        assert_eq!(error.to_string(), "git://h/r: no branch or tag gone");
        let error = Wanted::Name("abc1234".into())
            .pick(&[], "git://h/r")
            .unwrap_err();
        assert!(
            error.to_string().contains("full 40-character id"),
            "{error}"
        );
        let pinned = Wanted::Commit(A.into()).pick(&[], "git://h/r").unwrap();
        assert!(!pinned.kind.is_moving());
    }

    #[test]
    fn refspecs_ask_for_branch_and_tag() {
        assert_eq!(
            Wanted::Name("x".into()).refspecs(),
            vec!["refs/heads/x".to_string(), "refs/tags/x".to_string()]
        );
        assert_eq!(Wanted::DefaultBranch.refspecs(), vec!["HEAD".to_string()]);
    }
}
