//! Which git URLs the operator fetches from, and how.

use gix::url::Scheme;

use crate::GitError;

/// A git URL the operator may fetch from: `https://`, `git://`, or `http://` to a host the
/// operator was told is insecure. Never carries credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceUrl {
    pub(crate) url: gix::Url,
    /// The URL as written; safe to show, since it holds no credentials.
    text: String,
}

impl SourceUrl {
    /// Checks `text` against what the operator fetches from. `insecure_hosts` lists
    /// `HOST` or `HOST:PORT` entries that may be reached over plain `http://`; `git://` is
    /// plain text by nature and always allowed (it carries no credentials).
    ///
    /// Refused: other schemes (`ssh`, `file`, `ext::`, scp-like `host:path`), URLs with a
    /// user or password (credentials belong in a Secret, not in a spec anyone may read),
    /// URLs without a host or path.
    pub fn parse(text: &str, insecure_hosts: &[String]) -> Result<Self, GitError> {
        let shown = without_userinfo(text);
        let invalid = |message: &str| GitError::InvalidSource {
            source_url: shown.clone(),
            message: message.to_string(),
        };
        if !(text.starts_with("https://")
            || text.starts_with("http://")
            || text.starts_with("git://"))
        {
            return Err(invalid(
                "only https://, git:// and (for hosts the operator lists as insecure) http:// URLs are supported",
            ));
        }
        let url =
            gix::url::parse(gix::bstr::BStr::new(text)).map_err(|e| invalid(&e.to_string()))?;
        if url.user().is_some() || url.password().is_some() {
            return Err(invalid(
                "the URL carries credentials; put them in the Secret named by spec.sourceSecret",
            ));
        }
        let Some(host) = url.host() else {
            return Err(invalid("the URL has no host"));
        };
        if url.path.is_empty() || url.path == "/" {
            return Err(invalid("the URL names no repository"));
        }
        if url.scheme == Scheme::Http {
            let with_port = url.port.map(|port| format!("{host}:{port}"));
            let listed = insecure_hosts
                .iter()
                .any(|h| h == host || Some(h) == with_port.as_ref());
            if !listed {
                return Err(invalid(&format!(
                    "plain http:// is allowed only for hosts the operator lists in --insecure-git-host; {} is not one",
                    with_port.as_deref().unwrap_or(host)
                )));
            }
        }
        Ok(SourceUrl {
            url,
            text: text.to_string(),
        })
    }

    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub(crate) fn is_git_protocol(&self) -> bool {
        self.url.scheme == Scheme::Git
    }
}

/// `text` with anything between `scheme://` and an `@` before the path replaced, so that an
/// error about a URL with credentials does not repeat them.
fn without_userinfo(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else {
        return text.to_string();
    };
    let authority_end = text[start..].find('/').map_or(text.len(), |i| start + i);
    match text[start..authority_end].rfind('@') {
        Some(at) => format!("{}<redacted>{}", &text[..start], &text[start + at..]),
        None => text.to_string(),
    }
}

impl std::fmt::Display for SourceUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Credentials for a git server over HTTP(S): basic authentication, where a token is the
/// password. `Debug` never shows them.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum GitAuth {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic authentication.
    Basic { username: String, password: String },
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitAuth::Anonymous => f.write_str("Anonymous"),
            GitAuth::Basic { .. } => f.write_str("Basic(<redacted>)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str, insecure: &[&str]) -> Result<String, String> {
        let insecure: Vec<String> = insecure
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        SourceUrl::parse(text, &insecure)
            .map(|u| u.as_str().to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_https_and_git() {
        assert!(reason("https://example.com/acme/skills.git", &[]).is_ok());
        assert!(reason("git://127.0.0.1:9418/skills.git", &[]).is_ok());
    }

    #[test]
    fn http_only_for_listed_hosts() {
        let error = reason("http://127.0.0.1:8080/r.git", &[]).unwrap_err();
        assert!(error.contains("127.0.0.1:8080 is not one"), "{error}");
        assert!(reason("http://127.0.0.1:8080/r.git", &["127.0.0.1:8080"]).is_ok());
        assert!(reason("http://127.0.0.1:8080/r.git", &["127.0.0.1"]).is_ok());
        assert!(reason("http://127.0.0.1:8080/r.git", &["127.0.0.1:9090"]).is_err());
        assert!(reason("http://gitea/r.git", &["gitea"]).is_ok());
    }

    #[test]
    fn refuses_other_schemes_credentials_and_empty_paths() {
        for text in [
            "ssh://git@example.com/r.git",
            "git@example.com:r.git",
            "file:///tmp/r",
            "/tmp/r",
            "ext::sh -c touch% /tmp/pwned",
        ] {
            let error = reason(text, &[]).unwrap_err();
            assert!(error.contains("only https://"), "{text}: {error}");
        }
        let error = reason("https://user:hunter2@example.com/r.git", &[]).unwrap_err();
        assert!(error.contains("carries credentials"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
        assert!(
            error.contains("https://<redacted>@example.com/r.git"),
            "{error}"
        );
        let error = reason("https://token@example.com/r.git", &[]).unwrap_err();
        assert!(error.contains("carries credentials"), "{error}");
        assert!(reason("https://example.com/", &[]).is_err());
    }

    #[test]
    fn debug_never_shows_credentials() {
        let auth = GitAuth::Basic {
            username: "bot".into(),
            password: "hunter2".into(),
        };
        let shown = format!("{auth:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("bot"),
            "{shown}"
        );
    }
}
