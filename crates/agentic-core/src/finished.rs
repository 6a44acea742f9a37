//! The finished runs as the operator keeps them: a compact entry per run, not the run.
//!
//! A platform keeps finished runs for days (their time to live, audits), so there are many
//! more finished runs than live ones, and a finished run is read for little: the census
//! counts it by phase and `Ready` reason, a trust policy's blast radius reads the skills it
//! mounted, its sandbox is stopped once when the operator ended it, and it is deleted when
//! its time to live is over. Kept whole in the watch cache (and in the controller's queue
//! after each list) a finished run cost about 4.5 KB; [`FinishedRun`] holds only what those
//! readers read, with each namespace and each list of pinned skills stored once however
//! many runs share it, and [`FinishedRuns`] keeps the expiries in time order so that nothing
//! waits per run in a queue.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use agentic_api::{AgentRun, AgentRunPhase, CONDITION_READY, PinnedSkill};

use crate::conditions::find_condition;
use crate::reasons::{AgentRunReason, Reason};
use crate::sandbox::{TtlDefaults, stops_sandbox, time_to_live};

/// A finished run's `Ready` reason: one of [`AgentRunReason`], or a word another writer put
/// there (kept, so that the census counts it as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadyReason {
    Known(AgentRunReason),
    Other(Box<str>),
}

impl ReadyReason {
    fn of(reason: &str) -> Self {
        AgentRunReason::all()
            .into_iter()
            .find(|known| known.as_str() == reason)
            .map_or_else(|| Self::Other(reason.into()), Self::Known)
    }

    /// The word, as the condition has it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(reason) => reason.as_str(),
            Self::Other(reason) => reason,
        }
    }
}

/// What the operator keeps of one finished run.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedRun {
    pub uid: Box<str>,
    /// `Succeeded` or `Failed`.
    pub phase: AgentRunPhase,
    pub reason: ReadyReason,
    /// The skills it mounted (`status.skills` without their load counts), shared with every
    /// run that mounted the same.
    pub skills: Arc<[PinnedSkill]>,
    /// The sandbox the operator ended the run with and has not stopped yet
    /// ([`stops_sandbox`]); `None` once stopped, or when the agent ended the run itself.
    pub sandbox_to_stop: Option<Box<str>>,
    /// When its time to live is over, in seconds since the epoch; `None`: kept for good.
    pub expires_at: Option<i64>,
    /// The list (or the watch event) that last showed it, to drop the runs a new list lacks.
    listed: u64,
}

/// The finished runs of one watch, by namespace and name, with their expiries in time order.
#[derive(Debug, Default)]
pub struct FinishedRuns {
    runs: HashMap<Arc<str>, HashMap<Box<str>, FinishedRun>>,
    /// Every distinct list of pinned skills, by a hash of it.
    skills: HashMap<u64, Vec<Arc<[PinnedSkill]>>>,
    /// (expiry, namespace, name) of every run with a time to live.
    expiries: BTreeSet<(i64, Arc<str>, Box<str>)>,
    /// The time to live of runs that set none, by outcome.
    defaults: TtlDefaults,
    /// Counts lists and watch events: what a list that ends sees last.
    listing: u64,
}

/// What a change to [`FinishedRuns`] asks of its runs' passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Nothing now: its expiry, if any, is scheduled.
    Scheduled,
    /// A pass now: its sandbox is to be stopped.
    StopSandbox,
    /// Not a finished run (no phase, or still going), or one without a namespace or name.
    NotFinished,
}

impl FinishedRuns {
    /// No runs yet; runs without `spec.ttlSecondsAfterFinished` live for `defaults` (a
    /// workflow's stage runs go with their workflow run instead).
    pub fn new(defaults: TtlDefaults) -> Self {
        Self {
            defaults,
            ..Self::default()
        }
    }

    /// Keeps `run` when it has finished, replacing what was kept under its name.
    pub fn keep(&mut self, run: &AgentRun) -> Kept {
        let (Some(namespace), Some(name), Some(status)) = (
            run.metadata.namespace.as_deref(),
            run.metadata.name.as_deref(),
            run.status.as_ref(),
        ) else {
            return Kept::NotFinished;
        };
        let Some(phase) = status.phase.filter(|phase| phase.is_finished()) else {
            return Kept::NotFinished;
        };
        let reason = find_condition(&status.conditions, CONDITION_READY)
            .map(|ready| ready.reason.as_str())
            .unwrap_or_default();
        let defaults = if crate::workflow::is_stage_run(run) {
            TtlDefaults::default()
        } else {
            self.defaults
        };
        let expires_at = status.completion_time.as_ref().and_then(|completed| {
            let ttl = time_to_live(
                Some(phase),
                Some(completed),
                run.spec.ttl_seconds_after_finished,
                defaults,
                completed,
            )?;
            let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
            Some(completed.0.as_second().saturating_add(ttl))
        });
        let namespace = self.namespace(namespace);
        let sandbox_to_stop = stops_sandbox(reason).then(|| {
            status
                .sandbox_name
                .clone()
                .unwrap_or_else(|| crate::names::sandbox_name(name))
                .into_boxed_str()
        });
        // A sandbox already stopped stays stopped: a later event of the run (its loads
        // written) does not ask for it again.
        let stopped = self
            .get(&namespace, name)
            .is_some_and(|kept| kept.sandbox_to_stop.is_none());
        let sandbox_to_stop = sandbox_to_stop.filter(|_| !stopped);
        let kept = if sandbox_to_stop.is_some() {
            Kept::StopSandbox
        } else {
            Kept::Scheduled
        };
        let skills = self.shared_skills(&status.skills);
        self.listing += 1;
        let entry = FinishedRun {
            uid: run
                .metadata
                .uid
                .clone()
                .unwrap_or_default()
                .into_boxed_str(),
            phase,
            reason: ReadyReason::of(reason),
            skills,
            sandbox_to_stop,
            expires_at,
            listed: self.listing,
        };
        self.forget(&namespace, name);
        if let Some(at) = expires_at {
            self.expiries
                .insert((at, Arc::clone(&namespace), name.into()));
        }
        self.runs
            .entry(namespace)
            .or_default()
            .insert(name.into(), entry);
        kept
    }

    /// Forgets the run `namespace/name` (deleted, or no longer finished); whether it was kept.
    pub fn forget(&mut self, namespace: &str, name: &str) -> bool {
        let Some(in_namespace) = self.runs.get_mut(namespace) else {
            return false;
        };
        let Some((name, run)) = in_namespace.remove_entry(name) else {
            return false;
        };
        let namespace = if in_namespace.is_empty() {
            self.runs.remove_entry(namespace).map(|(ns, _)| ns)
        } else {
            self.runs
                .get_key_value(namespace)
                .map(|(ns, _)| Arc::clone(ns))
        };
        if let (Some(at), Some(namespace)) = (run.expires_at, namespace) {
            self.expiries.remove(&(at, namespace, name));
        }
        self.release_skills(run.skills);
        true
    }

    /// The run `namespace/name`, when kept.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&FinishedRun> {
        self.runs.get(namespace)?.get(name)
    }

    /// How many runs are kept.
    pub fn len(&self) -> usize {
        self.runs.values().map(HashMap::len).sum()
    }

    /// Whether no run is kept.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Every run kept, with its namespace and name, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &FinishedRun)> {
        self.runs.iter().flat_map(|(namespace, runs)| {
            runs.iter()
                .map(move |(name, run)| (namespace.as_ref(), name.as_ref(), run))
        })
    }

    /// The runs by phase and `Ready` reason, counted.
    pub fn counts(&self) -> BTreeMap<(&'static str, &str), i64> {
        let mut counts = BTreeMap::new();
        for (_, _, run) in self.iter() {
            *counts
                .entry((run.phase.as_str(), run.reason.as_str()))
                .or_default() += 1;
        }
        counts
    }

    /// The sandbox of `namespace/name` is stopped (or found gone): not to be stopped again.
    pub fn sandbox_stopped(&mut self, namespace: &str, name: &str) {
        if let Some(run) = self
            .runs
            .get_mut(namespace)
            .and_then(|runs| runs.get_mut(name))
        {
            run.sandbox_to_stop = None;
        }
    }

    /// A list starts: the runs it does not show again are forgotten when it ends.
    pub fn listing(&mut self) -> u64 {
        self.listing += 1;
        self.listing
    }

    /// The list that began at `started` ([`FinishedRuns::listing`]) has ended: the runs it
    /// did not show (nor a watch event since) are gone. A list of the runs of one `phase`
    /// (the operator watches each finished phase apart where the API server selects runs by
    /// phase) drops only runs of that phase; `None`: a list of every run.
    pub fn listed(&mut self, started: u64, phase: Option<AgentRunPhase>) {
        let gone: Vec<(Arc<str>, Box<str>)> = self
            .runs
            .iter()
            .flat_map(|(namespace, runs)| {
                runs.iter()
                    .filter(|(_, run)| {
                        run.listed < started && phase.is_none_or(|phase| run.phase == phase)
                    })
                    .map(move |(name, _)| (Arc::clone(namespace), name.clone()))
            })
            .collect();
        for (namespace, name) in gone {
            self.forget(&namespace, &name);
        }
    }

    /// When the next run expires, in seconds since the epoch.
    pub fn next_expiry(&self) -> Option<i64> {
        self.expiries.first().map(|(at, _, _)| *at)
    }

    /// The runs whose time to live is over at `now` (seconds since the epoch), taken out of
    /// the schedule: each gets its pass once ([`FinishedRuns::retry_expiry`] after one that
    /// failed).
    pub fn take_expired(&mut self, now: i64) -> Vec<(String, String)> {
        let mut due = Vec::new();
        while let Some((at, _, _)) = self.expiries.first() {
            if *at > now {
                break;
            }
            if let Some((_, namespace, name)) = self.expiries.pop_first() {
                due.push((namespace.to_string(), name.into_string()));
            }
        }
        due
    }

    /// Schedules the expiry pass of `namespace/name` again at `at`, when it is still kept.
    pub fn retry_expiry(&mut self, namespace: &str, name: &str, at: i64) {
        let Some((namespace, runs)) = self.runs.get_key_value(namespace) else {
            return;
        };
        if let Some((name, _)) = runs.get_key_value(name) {
            self.expiries
                .insert((at, Arc::clone(namespace), name.clone()));
        }
    }

    /// The namespace as stored once, shared by its runs.
    fn namespace(&self, namespace: &str) -> Arc<str> {
        self.runs
            .get_key_value(namespace)
            .map_or_else(|| Arc::from(namespace), |(ns, _)| Arc::clone(ns))
    }

    /// `pinned` without load counts, stored once for every run that mounted the same.
    fn shared_skills(&mut self, pinned: &[PinnedSkill]) -> Arc<[PinnedSkill]> {
        let skills: Vec<PinnedSkill> = pinned
            .iter()
            .map(|skill| PinnedSkill {
                loads: None,
                first_loaded_at: None,
                ..skill.clone()
            })
            .collect();
        let lists = self.skills.entry(skills_hash(&skills)).or_default();
        if let Some(shared) = lists.iter().find(|shared| shared[..] == skills[..]) {
            return Arc::clone(shared);
        }
        let shared: Arc<[PinnedSkill]> = skills.into();
        lists.push(Arc::clone(&shared));
        shared
    }

    /// Drops `skills` from the shared lists when no run holds it any more.
    fn release_skills(&mut self, skills: Arc<[PinnedSkill]>) {
        // Held by the table and `skills` alone.
        if Arc::strong_count(&skills) > 2 {
            return;
        }
        let hash = skills_hash(&skills);
        if let Some(lists) = self.skills.get_mut(&hash) {
            lists.retain(|shared| !Arc::ptr_eq(shared, &skills));
            if lists.is_empty() {
                self.skills.remove(&hash);
            }
        }
    }
}

/// A hash of what identifies each skill of a list (its name, image and type).
fn skills_hash(skills: &[PinnedSkill]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for skill in skills {
        skill.name.hash(&mut hasher);
        skill.image.hash(&mut hasher);
        skill.skill_type.as_str().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests;
