//! What a run's agent reported loading: its skill loads, counted against the skills the run
//! mounted, as `status.skills[].loads` / `firstLoadedAt` and `status.unmountedSkillLoads`
//! record them.
//!
//! The receiver keeps one [`SkillLoads`] per run: seeded from the run's status the first
//! time the run reports ([`SkillLoads::recorded`], so counts survive an operator restart),
//! then [`SkillLoads::add`]ed to; the run's pass writes it into the status it computes
//! ([`SkillLoads::record`]).

use std::collections::BTreeMap;

use agentic_api::{AgentRunStatus, PinnedSkill, UnmountedSkillLoad};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// How many names of skills the run did not mount a status records; loads of further names
/// are not counted (the status is the run's, but its size is bounded).
pub const MAX_UNMOUNTED_NAMES: usize = 20;
/// The longest name of an unmounted skill recorded (a skill name's limit); a longer one is
/// not a skill name and is not counted.
pub const MAX_SKILL_NAME_LEN: usize = 64;

/// The loads of one run's skills, in total.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillLoads {
    /// Mounted skills by name: how many loads, and the first one's time.
    pub mounted: BTreeMap<String, (i64, Time)>,
    /// Names the run did not mount, and how many loads.
    pub unmounted: BTreeMap<String, i64>,
}

/// What one load counted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// A load of a skill the run mounted.
    Mounted,
    /// A load of a name the run did not mount.
    Unmounted,
    /// Not counted: not a name a skill can have, or past [`MAX_UNMOUNTED_NAMES`].
    Ignored,
}

impl SkillLoads {
    /// What `status` records already.
    pub fn recorded(status: &AgentRunStatus) -> Self {
        let mounted = status
            .skills
            .iter()
            .filter_map(|skill| {
                Some((
                    skill.name.clone(),
                    (skill.loads?, skill.first_loaded_at.clone()?),
                ))
            })
            .collect();
        let unmounted = status
            .unmounted_skill_loads
            .iter()
            .map(|load| (load.name.clone(), load.count))
            .collect();
        Self { mounted, unmounted }
    }

    /// One load of the skill `name` at `at`, matched by name against the run's `pinned`
    /// skills.
    pub fn add(&mut self, pinned: &[PinnedSkill], name: &str, at: &Time) -> Counted {
        if pinned.iter().any(|skill| skill.name == name) {
            let (count, first) = self
                .mounted
                .entry(name.to_owned())
                .or_insert_with(|| (0, at.clone()));
            *count += 1;
            if at.0 < first.0 {
                *first = at.clone();
            }
            return Counted::Mounted;
        }
        let plausible = !name.is_empty()
            && name.len() <= MAX_SKILL_NAME_LEN
            && !name.chars().any(char::is_control);
        if !plausible {
            return Counted::Ignored;
        }
        if let Some(count) = self.unmounted.get_mut(name) {
            *count += 1;
            return Counted::Unmounted;
        }
        if self.unmounted.len() >= MAX_UNMOUNTED_NAMES {
            return Counted::Ignored;
        }
        self.unmounted.insert(name.to_owned(), 1);
        Counted::Unmounted
    }

    /// Writes these loads into `status`: each mounted skill's `loads` and `firstLoadedAt`,
    /// and `unmountedSkillLoads` by name. Skills without loads keep their fields absent.
    pub fn record(&self, status: &mut AgentRunStatus) {
        for skill in &mut status.skills {
            if let Some((count, first)) = self.mounted.get(&skill.name) {
                skill.loads = Some(*count);
                skill.first_loaded_at = Some(first.clone());
            }
        }
        status.unmounted_skill_loads = self
            .unmounted
            .iter()
            .map(|(name, count)| UnmountedSkillLoad {
                name: name.clone(),
                count: *count,
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn pinned(name: &str) -> PinnedSkill {
        PinnedSkill {
            name: name.into(),
            image: format!("registry/{name}@sha256:00"),
            ..PinnedSkill::default()
        }
    }

    #[test]
    fn loads_are_counted_against_the_mounted_skills_by_name() {
        let skills = [pinned("java"), pinned("style"), pinned("notes")];
        let mut loads = SkillLoads::default();
        assert_eq!(loads.add(&skills, "java", &at(20)), Counted::Mounted);
        assert_eq!(loads.add(&skills, "java", &at(10)), Counted::Mounted);
        assert_eq!(loads.add(&skills, "style", &at(30)), Counted::Mounted);
        assert_eq!(loads.add(&skills, "baked-in", &at(40)), Counted::Unmounted);
        assert_eq!(loads.add(&skills, "baked-in", &at(41)), Counted::Unmounted);
        assert_eq!(
            loads.add(&skills, &"x".repeat(MAX_SKILL_NAME_LEN + 1), &at(1)),
            Counted::Ignored
        );
        assert_eq!(loads.add(&skills, "bad\nname", &at(1)), Counted::Ignored);

        let mut status = AgentRunStatus {
            skills: skills.to_vec(),
            ..AgentRunStatus::default()
        };
        loads.record(&mut status);
        let recorded: Vec<_> = status
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.loads, s.first_loaded_at.clone()))
            .collect();
        assert_eq!(
            recorded,
            [
                ("java", Some(2), Some(at(10))),
                ("style", Some(1), Some(at(30))),
                ("notes", None, None),
            ]
        );
        assert_eq!(
            status.unmounted_skill_loads,
            [UnmountedSkillLoad {
                name: "baked-in".into(),
                count: 2
            }]
        );
        // What the status records seeds the next process's counts.
        assert_eq!(SkillLoads::recorded(&status), loads);
    }

    #[test]
    fn unmounted_names_are_bounded_and_nothing_reported_leaves_the_status_alone() {
        let skills = [pinned("java")];
        let mut loads = SkillLoads::default();
        for i in 0..MAX_UNMOUNTED_NAMES {
            assert_eq!(
                loads.add(&skills, &format!("n{i}"), &at(1)),
                Counted::Unmounted
            );
        }
        assert_eq!(loads.add(&skills, "one-more", &at(1)), Counted::Ignored);
        assert_eq!(loads.add(&skills, "n0", &at(1)), Counted::Unmounted);
        assert_eq!(loads.add(&skills, "java", &at(1)), Counted::Mounted);

        let untouched = AgentRunStatus {
            skills: skills.to_vec(),
            ..AgentRunStatus::default()
        };
        let mut status = untouched.clone();
        SkillLoads::default().record(&mut status);
        assert_eq!(status, untouched);
    }
}
