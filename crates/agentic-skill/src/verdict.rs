//! The verdicts on a skill that every source of skills (an image, a git repository) gives in
//! the same words, so that a skill reads alike wherever it came from.

use crate::{Refusal, Report};

/// No skill where one was asked for, or a `SKILL.md` refused. Each is a verdict on the content
/// read (an image by its digest, a commit by its id), so it never changes and may be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillVerdict {
    /// There is no `SKILL.md` where one was asked for.
    #[error("no skill at {path}: {message}")]
    SkillNotFound { path: String, message: String },

    /// The `SKILL.md` exists but does not pass validation; `summary` lists every problem.
    #[error("invalid skill {path}: {summary}")]
    InvalidSkill { path: String, summary: String },

    /// The `SKILL.md` is valid by the specification, but goose, the agent runtime that reads
    /// the mounted skills, would skip it or read it cut short; `summary` lists the findings,
    /// each saying what goose would do.
    #[error("{path}: {summary}")]
    GooseIncompatible { path: String, summary: String },
}

impl SkillVerdict {
    /// A stable CamelCase reason for conditions, events and metrics labels: the variant's name.
    pub fn reason(&self) -> &'static str {
        match self {
            SkillVerdict::SkillNotFound { .. } => "SkillNotFound",
            SkillVerdict::InvalidSkill { .. } => "InvalidSkill",
            SkillVerdict::GooseIncompatible { .. } => "GooseIncompatible",
        }
    }

    /// The verdict on the `SKILL.md` at `path` that `report` refuses ([`Report::refusal`]),
    /// `None` when it does not.
    pub fn refused(path: String, report: &Report) -> Option<Self> {
        let summary = report.summary();
        report.refusal().map(|refusal| match refusal {
            Refusal::GooseIncompatible => SkillVerdict::GooseIncompatible { path, summary },
            Refusal::InvalidSkill => SkillVerdict::InvalidSkill { path, summary },
        })
    }

    /// The same verdict on the same path, its summary or message rewritten by `detail`.
    #[must_use]
    pub fn with_detail(self, detail: impl FnOnce(String) -> String) -> Self {
        match self {
            SkillVerdict::SkillNotFound { path, message } => SkillVerdict::SkillNotFound {
                path,
                message: detail(message),
            },
            SkillVerdict::InvalidSkill { path, summary } => SkillVerdict::InvalidSkill {
                path,
                summary: detail(summary),
            },
            SkillVerdict::GooseIncompatible { path, summary } => SkillVerdict::GooseIncompatible {
                path,
                summary: detail(summary),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_and_reasons_are_those_both_sources_gave() {
        let missing = SkillVerdict::SkillNotFound {
            path: "demo/SKILL.md".into(),
            message: "demo does not exist".into(),
        };
        assert_eq!(
            missing.to_string(),
            "no skill at demo/SKILL.md: demo does not exist"
        );
        assert_eq!(missing.reason(), "SkillNotFound");
        let detailed = missing.with_detail(|message| format!("{message} (in the arm64 manifest)"));
        assert_eq!(
            detailed.to_string(),
            "no skill at demo/SKILL.md: demo does not exist (in the arm64 manifest)"
        );
        assert_eq!(detailed.reason(), "SkillNotFound");
    }

    #[test]
    fn a_refused_skill_md_gets_the_verdict_of_its_refusal() {
        let valid = crate::validate_skill_md(b"---\nname: demo\ndescription: A demo.\n---\n", None);
        assert_eq!(SkillVerdict::refused("SKILL.md".into(), &valid), None);
        let unnamed = crate::validate_skill_md(b"---\ndescription: A demo.\n---\n", None);
        let verdict = SkillVerdict::refused("SKILL.md".into(), &unnamed).expect("refused");
        assert_eq!(verdict.reason(), "InvalidSkill");
        assert_eq!(
            verdict.to_string(),
            format!("invalid skill SKILL.md: {}", unnamed.summary())
        );
    }
}
