//! The skill loads the receiver counted, per run, until the run's pass writes them: one
//! [`SkillLoads`] per run, and the coalesced wake of the run's controller that gets it
//! written. The AgentRun pass is the only writer of the status ([`SkillUsage::record`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentic_api::{AgentRun, AgentRunStatus};
use agentic_core::usage::{Counted, SkillLoads};
use agentic_otlp::SkillLoad;
use futures::Stream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::broadcast;

use crate::caches::Guarded;
use crate::metrics::Metrics;

/// At most one wake of a run's pass per this long, however often it reports: its status is
/// written at most once per interval for its loads (the pass of its end writes whatever
/// came before).
pub const WRITE_INTERVAL: Duration = Duration::from_secs(2);

/// How long a run's counts stay in memory after its last report: long after they were
/// written (within [`WRITE_INTERVAL`]); a run that reports again later starts from what its
/// status recorded.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// The counts of every run that reported, by UID.
pub struct SkillUsage {
    runs: Mutex<HashMap<String, RunUsage>>,
    wakes: broadcast::Sender<(String, String)>,
}

struct RunUsage {
    loads: SkillLoads,
    /// When the run's pass was last woken for its loads.
    woken: Option<Instant>,
    /// A wake is due at the end of the interval.
    scheduled: bool,
    reported: Instant,
}

impl Default for SkillUsage {
    fn default() -> Self {
        Self {
            runs: Mutex::default(),
            // A wake missed by a lagging controller is the same as one coalesced: the next
            // one, or the run's end, writes the counts.
            wakes: broadcast::channel(1024).0,
        }
    }
}

impl SkillUsage {
    /// Counts `loads` reported by `run` (its status seeds counts this process has not seen
    /// yet), each at its span's start clamped to between the run's creation and now. Loads
    /// of mounted skills count in `agentic_skill_loads_total`. The run's pass is woken, at
    /// most once per [`WRITE_INTERVAL`].
    pub fn add(self: &Arc<Self>, run: &AgentRun, loads: &[SkillLoad], metrics: &Metrics) {
        let (Some(uid), Some(namespace), Some(name)) = (
            run.metadata.uid.as_deref(),
            run.metadata.namespace.as_deref(),
            run.metadata.name.as_deref(),
        ) else {
            return;
        };
        if loads.is_empty() {
            return;
        }
        let status = run.status.clone().unwrap_or_default();
        let now = Instant::now();
        let created = run.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let wake_in = {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            if !runs.contains_key(uid) {
                runs.retain(|_, usage| now.duration_since(usage.reported) < FORGET_AFTER);
            }
            let usage = runs.entry(uid.to_owned()).or_insert_with(|| RunUsage {
                loads: SkillLoads::recorded(&status),
                woken: None,
                scheduled: false,
                reported: now,
            });
            usage.reported = now;
            for load in loads {
                let at = load_time(load.start_time_unix_nano, created);
                if usage.loads.add(&status.skills, &load.skill, &at) == Counted::Mounted {
                    metrics.skill_loaded(namespace, &load.skill);
                }
            }
            if usage.scheduled {
                None
            } else {
                let wait = usage.woken.map_or(Duration::ZERO, |woken| {
                    WRITE_INTERVAL.saturating_sub(now.duration_since(woken))
                });
                usage.scheduled = true;
                Some(wait)
            }
        };
        if let Some(wait) = wake_in {
            let usage = Arc::clone(self);
            let (uid, run_ref) = (uid.to_owned(), (namespace.to_owned(), name.to_owned()));
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                usage.wake(&uid, run_ref);
            });
        }
    }

    fn wake(&self, uid: &str, run: (String, String)) {
        if let Some(usage) = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(uid)
        {
            usage.scheduled = false;
            usage.woken = Some(Instant::now());
        }
        // No receiver: no controller runs (yet); the run's next pass records the counts.
        let _ = self.wakes.send(run);
    }

    /// Writes the counts of the run `uid` into the status its pass computed; a run that
    /// reported nothing to this process keeps what its status has.
    pub fn record(&self, uid: Option<&str>, status: &mut AgentRunStatus) {
        let Some(uid) = uid else { return };
        if let Some(usage) = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
        {
            usage.loads.record(status);
        }
    }

    /// The runs to pass again for their loads, those of `namespace` (None: all).
    pub fn wakes(
        &self,
        namespace: Option<String>,
    ) -> impl Stream<Item = ObjectRef<Guarded<AgentRun>>> + Send + 'static {
        let receiver = self.wakes.subscribe();
        futures::stream::unfold(receiver, move |mut receiver| {
            let namespace = namespace.clone();
            async move {
                loop {
                    match receiver.recv().await {
                        Ok((ns, name)) if namespace.as_ref().is_none_or(|n| *n == ns) => {
                            return Some((ObjectRef::new(&name).within(&ns), receiver));
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
    }
}

/// A load's time: its span's start, in whole seconds as the API server stores times, but
/// never before the run was created nor after now (the agent's clock is not the operator's).
fn load_time(start_unix_nano: u64, created: Option<Timestamp>) -> Time {
    let now = Timestamp::now();
    let reported = i64::try_from(start_unix_nano / 1_000_000_000)
        .ok()
        .and_then(|seconds| Timestamp::from_second(seconds).ok())
        .unwrap_or(now);
    let earliest = created.unwrap_or(Timestamp::UNIX_EPOCH);
    let clamped = reported.max(earliest).min(now);
    Time(Timestamp::from_second(clamped.as_second()).unwrap_or(clamped))
}

#[cfg(test)]
mod tests {
    use agentic_api::{AgentRunSpec, PinnedSkill};
    use futures::StreamExt;

    use super::*;

    fn run() -> AgentRun {
        let mut run = AgentRun::new("r", AgentRunSpec::default());
        run.metadata.namespace = Some("ns".into());
        run.metadata.uid = Some("uid-1".into());
        run.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1_000).unwrap()));
        run.status = Some(AgentRunStatus {
            skills: vec![PinnedSkill {
                name: "java".into(),
                image: "r/java@sha256:00".into(),
                loads: Some(3),
                first_loaded_at: Some(Time(Timestamp::from_second(1_100).unwrap())),
                ..PinnedSkill::default()
            }],
            ..AgentRunStatus::default()
        });
        run
    }

    fn load(skill: &str, start_second: u64) -> SkillLoad {
        SkillLoad {
            skill: skill.into(),
            file: None,
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            start_time_unix_nano: start_second * 1_000_000_000,
        }
    }

    #[test]
    fn a_load_is_dated_by_its_span_within_the_runs_life() {
        let created = Some(Timestamp::from_second(1_000).unwrap());
        assert_eq!(
            load_time(1_500 * 1_000_000_000 + 7, created).0.as_second(),
            1_500
        );
        assert_eq!(load_time(5, created).0.as_second(), 1_000);
        assert!(load_time(u64::MAX, created).0 <= Timestamp::now());
    }

    #[tokio::test(start_paused = true)]
    async fn counts_start_from_the_status_and_wakes_are_coalesced() {
        let usage = Arc::new(SkillUsage::default());
        let metrics = Metrics::default();
        let mut wakes = Box::pin(usage.wakes(Some("ns".into())));
        let mut elsewhere = Box::pin(usage.wakes(Some("other".into())));

        usage.add(
            &run(),
            &[load("java", 1_050), load("baked", 1_200)],
            &metrics,
        );
        assert_eq!(wakes.next().await, Some(ObjectRef::new("r").within("ns")));
        // Two more reports within the interval: one wake, at its end.
        let reported = tokio::time::Instant::now();
        usage.add(&run(), &[load("java", 1_300)], &metrics);
        usage.add(&run(), &[load("java", 1_400)], &metrics);
        assert_eq!(wakes.next().await, Some(ObjectRef::new("r").within("ns")));
        assert!(reported.elapsed() >= WRITE_INTERVAL);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), wakes.next())
                .await
                .is_err(),
            "no third wake"
        );
        assert!(
            tokio::time::timeout(Duration::from_secs(1), elsewhere.next())
                .await
                .is_err(),
            "another namespace's controller is not woken"
        );

        let mut status = run().status.unwrap();
        usage.record(Some("uid-1"), &mut status);
        let java = &status.skills[0];
        assert_eq!(java.loads, Some(6), "3 recorded before, 3 reported");
        assert_eq!(java.first_loaded_at.as_ref().unwrap().0.as_second(), 1_050);
        assert_eq!(status.unmounted_skill_loads.len(), 1);
        assert_eq!(status.unmounted_skill_loads[0].name, "baked");
        let text = metrics.encode();
        assert!(
            text.contains(r#"agentic_skill_loads_total{namespace="ns",skill="java"} 3"#),
            "{text}"
        );
        assert!(
            !text.contains("baked"),
            "made-up names are not metric labels"
        );

        let mut untouched = run().status.unwrap();
        usage.record(Some("another-uid"), &mut untouched);
        assert_eq!(untouched, run().status.unwrap());
    }
}
