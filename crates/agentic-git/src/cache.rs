//! Verdicts on skills by repository, commit and `subPath`, so that many SkillCards on one
//! commit fetch and validate it once.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use agentic_skill::SkillVerdict;

use crate::{GitAuth, GitError, GitOptions, SourceUrl};

/// A skill validated at one commit: what a SkillCard's status needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedSkill {
    /// The full commit id.
    pub commit: String,
    /// The skill's directory in the repository, empty for the root.
    pub dir: String,
    pub frontmatter: agentic_skill::Frontmatter,
    /// Bytes of the SKILL.md body after the frontmatter.
    pub body_bytes: Option<usize>,
    /// The raw commit object ([`Fetched::raw_commit`](crate::Fetched::raw_commit)), for
    /// checking its signature without fetching again.
    pub commit_object: Vec<u8>,
}

/// Fetches `commit` and validates the skill at the root or at `sub_path`.
pub fn validate_commit(
    source: &SourceUrl,
    commit: &str,
    sub_path: Option<&str>,
    auth: &GitAuth,
    options: &GitOptions,
) -> Result<ValidatedSkill, GitError> {
    let fetched = crate::fetch_commit(source, commit, auth, options)?;
    let skill = fetched.skill(sub_path, &options.limits)?;
    let frontmatter = skill.report.frontmatter.ok_or_else(|| {
        GitError::Skill(SkillVerdict::InvalidSkill {
            path: skill.dir.clone(),
            summary: "SKILL.md has no frontmatter".to_string(),
        })
    })?;
    Ok(ValidatedSkill {
        commit: skill.commit,
        dir: skill.dir,
        frontmatter,
        body_bytes: skill.body_bytes,
        commit_object: fetched.raw_commit()?,
    })
}

type Key = (String, String, Option<String>);
type Verdict = Result<ValidatedSkill, GitError>;

/// Keeps the verdicts that cannot change: a commit's content is fixed by its id, so a valid
/// skill and a verdict on the content ([`GitError::is_content_verdict`]) stay true. Outages,
/// refused credentials and missing commits are not kept. The oldest entry goes first when
/// `capacity` is reached.
#[derive(Debug)]
pub struct SkillCache {
    capacity: usize,
    entries: Mutex<(HashMap<Key, Verdict>, VecDeque<Key>)>,
}

impl SkillCache {
    pub fn new(capacity: usize) -> Self {
        SkillCache {
            capacity: capacity.max(1),
            entries: Mutex::default(),
        }
    }

    /// The kept verdict on `sub_path` of `commit` in `url`, if any.
    pub fn get(&self, url: &str, commit: &str, sub_path: Option<&str>) -> Option<Verdict> {
        let key = (
            url.to_string(),
            commit.to_string(),
            sub_path.map(str::to_string),
        );
        self.lock().0.get(&key).cloned()
    }

    /// The raw object of `commit` in `url`, kept with any valid skill validated there.
    pub fn commit_object(&self, url: &str, commit: &str) -> Option<Vec<u8>> {
        self.lock()
            .0
            .iter()
            .find(|((u, c, _), _)| u == url && c == commit)
            .and_then(|(_, verdict)| verdict.as_ref().ok())
            .map(|skill| skill.commit_object.clone())
    }

    /// Keeps `verdict` when it cannot change.
    pub fn insert(&self, url: &str, commit: &str, sub_path: Option<&str>, verdict: &Verdict) {
        if verdict.as_ref().is_err_and(|e| !e.is_content_verdict()) {
            return;
        }
        let key = (
            url.to_string(),
            commit.to_string(),
            sub_path.map(str::to_string),
        );
        let mut guard = self.lock();
        let (map, order) = &mut *guard;
        if map.insert(key.clone(), verdict.clone()).is_none() {
            order.push_back(key);
        }
        while map.len() > self.capacity {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            map.remove(&oldest);
        }
    }

    /// How many verdicts are kept.
    pub fn len(&self) -> usize {
        self.lock().0.len()
    }

    /// Whether no verdict is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<Key, Verdict>, VecDeque<Key>)> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(commit: &str) -> Verdict {
        Ok(ValidatedSkill {
            commit: commit.into(),
            dir: String::new(),
            body_bytes: Some(0),
            commit_object: format!("tree 0\n\n{commit}\n").into_bytes(),
            frontmatter: agentic_skill::Frontmatter {
                name: "demo".into(),
                description: "d".into(),
                license: None,
                compatibility: None,
                allowed_tools: None,
                metadata: std::collections::BTreeMap::default(),
            },
        })
    }

    #[test]
    fn keeps_lasting_verdicts_by_url_commit_and_sub_path() {
        let cache = SkillCache::new(8);
        cache.insert("git://h/r", "c1", None, &valid("c1"));
        assert_eq!(cache.get("git://h/r", "c1", None), Some(valid("c1")));
        assert_eq!(cache.get("git://h/r", "c1", Some("demo")), None);
        assert_eq!(cache.get("git://h/other", "c1", None), None);
        assert_eq!(
            cache.commit_object("git://h/r", "c1"),
            Some(b"tree 0\n\nc1\n".to_vec())
        );
        assert_eq!(cache.commit_object("git://h/other", "c1"), None);
        let invalid: Verdict = Err(GitError::Skill(SkillVerdict::InvalidSkill {
            path: "SKILL.md".into(),
            summary: "x".into(),
        }));
        cache.insert("git://h/r", "c2", None, &invalid);
        assert_eq!(cache.get("git://h/r", "c2", None), Some(invalid));
        assert_eq!(cache.commit_object("git://h/r", "c2"), None);
        let outage: Verdict = Err(GitError::SourceUnavailable {
            source_url: "git://h/r".into(),
            message: "refused".into(),
        });
        cache.insert("git://h/r", "c3", None, &outage);
        assert_eq!(cache.get("git://h/r", "c3", None), None);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn drops_the_oldest_beyond_capacity() {
        let cache = SkillCache::new(2);
        for commit in ["a", "b", "c"] {
            cache.insert("u", commit, None, &valid(commit));
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("u", "a", None), None);
        assert!(cache.get("u", "c", None).is_some());
    }
}
