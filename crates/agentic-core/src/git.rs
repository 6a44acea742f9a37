//! The git author of a run's commits: the run's `spec.gitConfig`, else the Agent's.

use agentic_api::{GitConfig, MAX_GIT_USER_EMAIL, MAX_GIT_USER_NAME};

use crate::Error;

/// A checked commit author.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitAuthor {
    /// git's `user.name`.
    pub name: String,
    /// git's `user.email`.
    pub email: String,
}

/// The author of a run's commits: the run's `gitConfig` when it sets one, else the Agent's,
/// else none. An empty `gitConfig` counts as unset. The one chosen is checked as the CRD
/// schema checks it, for objects stored before the schema did: both fields or neither,
/// `userName` at most 128 characters without control characters, `<` or `>`, `userEmail`
/// at most 254 characters, one `@` between two parts without spaces, control characters,
/// `<` or `>`. `field` in the error is `spec.gitConfig` of the run or the Agent.
pub fn git_author(
    agent: Option<&GitConfig>,
    run: Option<&GitConfig>,
) -> Result<Option<GitAuthor>, Error> {
    let is_set = |config: &&GitConfig| config.user_name.is_some() || config.user_email.is_some();
    let (field, config) = match (run.filter(is_set), agent.filter(is_set)) {
        (Some(config), _) => ("AgentRun spec.gitConfig", config),
        (None, Some(config)) => ("Agent spec.gitConfig", config),
        (None, None) => return Ok(None),
    };
    let invalid = |problem: String| Error::InvalidGitConfig { field, problem };
    let (Some(name), Some(email)) = (&config.user_name, &config.user_email) else {
        return Err(invalid(
            "set both userName and userEmail, or neither".into(),
        ));
    };
    if name.is_empty() || name.chars().count() > MAX_GIT_USER_NAME {
        return Err(invalid(format!(
            "userName must be 1 to {MAX_GIT_USER_NAME} characters"
        )));
    }
    if name.chars().any(|c| c.is_control() || c == '<' || c == '>') {
        return Err(invalid(format!(
            "userName {name:?} may not hold control characters, '<' or '>'"
        )));
    }
    if email.chars().count() > MAX_GIT_USER_EMAIL || !is_address(email) {
        return Err(invalid(format!(
            "userEmail {email:?} must be an address (local@domain, at most {MAX_GIT_USER_EMAIL} characters, no spaces, control characters, '<' or '>')"
        )));
    }
    Ok(Some(GitAuthor {
        name: name.clone(),
        email: email.clone(),
    }))
}

fn is_address(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    let part_ok = |part: &str| {
        !part.is_empty()
            && !part
                .chars()
                .any(|c| c == '@' || c == '<' || c == '>' || c.is_whitespace() || c.is_control())
    };
    part_ok(local) && part_ok(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: Option<&str>, email: Option<&str>) -> GitConfig {
        GitConfig {
            user_name: name.map(Into::into),
            user_email: email.map(Into::into),
        }
    }

    fn author(name: &str, email: &str) -> Option<GitAuthor> {
        Some(GitAuthor {
            name: name.into(),
            email: email.into(),
        })
    }

    #[test]
    fn the_runs_config_replaces_the_agents() {
        let agent = config(Some("Agent Bot"), Some("agent@example.com"));
        let run = config(Some("Run Bot"), Some("run@example.com"));
        assert_eq!(
            git_author(Some(&agent), Some(&run)),
            Ok(author("Run Bot", "run@example.com"))
        );
        assert_eq!(
            git_author(Some(&agent), None),
            Ok(author("Agent Bot", "agent@example.com"))
        );
        assert_eq!(
            git_author(Some(&agent), Some(&GitConfig::default())),
            Ok(author("Agent Bot", "agent@example.com")),
            "an empty gitConfig is unset"
        );
        assert_eq!(git_author(None, None), Ok(None));
    }

    #[test]
    fn both_fields_or_neither() {
        let error = git_author(None, Some(&config(Some("Bot"), None))).expect_err("half");
        assert_eq!(error.reason().as_str(), "InvalidGitConfig");
        assert_eq!(
            error.to_string(),
            "AgentRun spec.gitConfig: set both userName and userEmail, or neither"
        );
        let error = git_author(Some(&config(None, Some("a@b"))), None).expect_err("half");
        assert!(
            error.to_string().starts_with("Agent spec.gitConfig: "),
            "{error}"
        );
    }

    #[test]
    fn names_and_addresses_are_checked() {
        for (name, email) in [
            ("", "a@b.c"),
            ("Bot <evil>", "a@b.c"),
            ("Line\nbreak", "a@b.c"),
            ("Tab\there", "a@b.c"),
            ("C1\u{85}control", "a@b.c"),
            (&"n".repeat(129), "a@b.c"),
            ("Bot", "no-at-sign"),
            ("Bot", "@example.com"),
            ("Bot", "bot@"),
            ("Bot", "two@at@signs"),
            ("Bot", "sp ace@example.com"),
            ("Bot", "<bot@example.com>"),
            ("Bot", &format!("{}@example.com", "b".repeat(243))),
        ] {
            let result = git_author(None, Some(&config(Some(name), Some(email))));
            assert!(
                matches!(result, Err(Error::InvalidGitConfig { .. })),
                "{name:?} {email:?}: {result:?}"
            );
        }
        let longest = "n".repeat(128);
        let longest_email = format!("{}@example.com", "b".repeat(242));
        assert_eq!(longest_email.len(), 254);
        assert_eq!(
            git_author(None, Some(&config(Some(&longest), Some(&longest_email)))),
            Ok(author(&longest, &longest_email))
        );
        assert_eq!(
            git_author(
                None,
                Some(&config(Some("Zoë O'Brien-Ñandú"), Some("zoë@例え.jp")))
            ),
            Ok(author("Zoë O'Brien-Ñandú", "zoë@例え.jp"))
        );
    }
}
