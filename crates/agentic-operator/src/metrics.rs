//! Prometheus metrics of the controllers, served on `--metrics-addr` at `/metrics`.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunStatus};
use agentic_core::reasons::ReconcileErrorReason;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabels {
    pub kind: &'static str,
    /// `ok`, or `error` for a pass that failed (and is retried with backoff).
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RegistryLabels {
    /// `host[:port]`, or `other` past [`MAX_REGISTRY_HOSTS`] distinct ones.
    pub registry: String,
    /// `ok`, or `error` (refused, failed or unanswered).
    pub outcome: &'static str,
}

/// Registries named in their own series; any further one is counted as `other`, so tenants
/// naming hosts cannot grow the exposition without bound.
pub const MAX_REGISTRY_HOSTS: usize = 32;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub kind: &'static str,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    pub phase: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    /// `queue_full` or `export_failed`.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `Succeeded` or `Failed`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PrefetchLabels {
    /// `started`, `succeeded` or `failed`.
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkillLabels {
    pub namespace: String,
    /// A skill the run mounted (names the agent made up are not counted here).
    pub skill: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AgentLabels {
    pub namespace: String,
    pub agent: String,
}

/// Every metric the operator exports, registered once at start.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<PassLabels, Counter>,
    leader: Gauge,
    /// With `--shards`: how many shards this replica serves.
    shards_served: Gauge,
    registry_latency: Family<RegistryLabels, Histogram>,
    /// The registries that have a series of their own.
    registry_hosts: Mutex<HashSet<String>>,
    errors: Family<ErrorLabels, Counter>,
    duration: Family<KindLabels, Histogram>,
    objects: Family<PhaseLabels, Gauge>,
    runs: Family<RunLabels, Gauge>,
    queued: Family<AgentLabels, Gauge>,
    run_start: Histogram,
    run_duration: Family<OutcomeLabels, Histogram>,
    /// The runs whose start and end were observed, so that a pass working from a cache that
    /// has not caught up with the status it wrote does not observe a transition again.
    observed: Mutex<Observed<(String, Transition)>>,
    swept: Family<KindLabels, Counter>,
    trace_dropped: Family<DropLabels, Counter>,
    prefetches: Family<PrefetchLabels, Counter>,
    prefetch_pull: Histogram,
    /// The prefetch pods whose end was counted, by uid, so each is counted once however
    /// many passes see it; bounded, as every set of what was observed.
    prefetches_ended: Mutex<Observed<String>>,
    /// When this process started (seconds since the epoch): a prefetch pod created before
    /// it was counted by the process that created it.
    started: i64,
    skill_loads: Family<SkillLabels, Counter>,
    registry_requests: Counter,
    cache_hits: Counter,
    cache_misses: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("agentic");
        let reconciles = Family::<PassLabels, Counter>::default();
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        let leader = Gauge::default();
        let shards_served = Gauge::default();
        // 5 ms to about 80 s: a HEAD on loopback to a layer read at the fetch deadline.
        let registry_latency = Family::<RegistryLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 15))
        });
        let errors = Family::<ErrorLabels, Counter>::default();
        let duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        let objects = Family::<PhaseLabels, Gauge>::default();
        let runs = Family::<RunLabels, Gauge>::default();
        let queued = Family::<AgentLabels, Gauge>::default();
        // 0.5 s to about 2.3 hours: an image pull of minutes and a queue of hours.
        let run_start = Histogram::new(exponential_buckets(0.5, 2.0, 15));
        // 1 s to about 18 hours.
        let run_duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(1.0, 2.0, 17))
        });
        let swept = Family::<KindLabels, Counter>::default();
        let trace_dropped = Family::<DropLabels, Counter>::default();
        let prefetches = Family::<PrefetchLabels, Counter>::default();
        // 0.25 s to about 68 minutes: one small image on a warm registry to thirty large ones.
        let prefetch_pull = Histogram::new(exponential_buckets(0.25, 2.0, 15));
        let skill_loads = Family::<SkillLabels, Counter>::default();
        let registry_requests = Counter::default();
        let cache_hits = Counter::default();
        let cache_misses = Counter::default();
        registry.register(
            "reconciles",
            "Reconcile passes by kind and result (ok, or error for a failed pass)",
            reconciles.clone(),
        );
        registry.register(
            "build_info",
            "The operator's version, as a label of a series that is always 1",
            build_info,
        );
        registry.register(
            "leader",
            "1 while this replica runs the controllers (it holds the Lease, serves a shard, or leader election is off), 0 while it waits",
            leader.clone(),
        );
        registry.register(
            "shards_served",
            "The shards this replica serves (--shards); 0 without sharding",
            shards_served.clone(),
        );
        registry.register(
            "registry_request_duration_seconds",
            "Duration of requests to OCI registries by registry host and outcome (ok or error); an authorization counts as one request",
            registry_latency.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconcile passes by kind and reason",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconcile passes by kind",
            duration.clone(),
        );
        registry.register(
            "objects",
            "Objects by kind and phase (Ready/NotReady, or an AgentRun phase)",
            objects.clone(),
        );
        registry.register(
            "agentruns",
            "AgentRuns by phase and the reason of their Ready condition",
            runs.clone(),
        );
        registry.register(
            "agentruns_queued",
            "AgentRuns waiting (Queued) for a slot of their Agent's maxConcurrentRuns or of the namespace cap, by namespace and Agent",
            queued.clone(),
        );
        registry.register(
            "run_start_seconds",
            "Seconds from an AgentRun's creation to the start of its agent container (status.startTime), queueing and image pulls included; observed once per run",
            run_start.clone(),
        );
        registry.register(
            "run_duration_seconds",
            "Seconds from an AgentRun's startTime to its completionTime, by outcome (Succeeded or Failed); observed once per run that started",
            run_duration.clone(),
        );
        registry.register(
            "orphans_deleted",
            "Objects labelled for an AgentRun that no longer exists, deleted by the orphan sweep, by kind",
            swept.clone(),
        );
        registry.register(
            "trace_requests_dropped",
            "OTLP requests (the operator's spans of runs, or an agent's) never sent to --trace-collector, by reason: queue_full (the bounded queue was full) or export_failed (the collector refused or did not answer)",
            trace_dropped.clone(),
        );
        registry.register(
            "skill_prefetches",
            "Skill prefetch pods by event: started (created), succeeded or failed (ended so)",
            prefetches.clone(),
        );
        registry.register(
            "skill_prefetch_pull_seconds",
            "Seconds from a prefetch pod's creation to the start of its container, once every skill image is pulled and mounted (scheduling included); observed once per pod that started",
            prefetch_pull.clone(),
        );
        registry.register(
            "skill_loads",
            "Loads of a mounted skill the agents reported over OTLP, by namespace and skill name (no run or digest: bounded by the skills in use)",
            skill_loads.clone(),
        );
        registry.register(
            "registry_requests",
            "Requests sent to OCI registries",
            registry_requests.clone(),
        );
        registry.register(
            "skill_cache_hits",
            "Skill validations answered from the digest cache",
            cache_hits.clone(),
        );
        registry.register(
            "skill_cache_misses",
            "Skill validations that had to read the image",
            cache_misses.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            leader,
            shards_served,
            registry_latency,
            registry_hosts: Mutex::default(),
            errors,
            duration,
            objects,
            runs,
            queued,
            run_start,
            run_duration,
            observed: Mutex::default(),
            swept,
            trace_dropped,
            prefetches,
            prefetch_pull,
            prefetches_ended: Mutex::default(),
            started: k8s_openapi::jiff::Timestamp::now().as_second(),
            skill_loads,
            registry_requests,
            cache_hits,
            cache_misses,
        }
    }
}

impl Metrics {
    /// One load of the mounted skill `skill` by a run in `namespace`.
    pub fn skill_loaded(&self, namespace: &str, skill: &str) {
        self.skill_loads
            .get_or_create(&SkillLabels {
                namespace: namespace.to_owned(),
                skill: skill.to_owned(),
            })
            .inc();
    }

    /// Counts and times one pass, failed (`ok` false) or not.
    pub fn reconciled(&self, kind: &'static str, took: Duration, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reconciles
            .get_or_create(&PassLabels { kind, result })
            .inc();
        self.duration
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    pub fn failed(&self, kind: &'static str, reason: ReconcileErrorReason) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind,
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Creates the pass series of a kind whose controller starts, at zero, so that rates and
    /// alerts see the kind before its first pass fails.
    pub fn precreate_kind(&self, kind: &'static str) {
        for result in ["ok", "error"] {
            drop(self.reconciles.get_or_create(&PassLabels { kind, result }));
        }
        drop(self.duration.get_or_create(&KindLabels { kind }));
    }

    /// Replaces the per-phase object counts of one kind.
    pub fn set_objects(&self, kind: &'static str, counts: &[(String, i64)]) {
        for phase in [
            "Ready",
            "NotReady",
            "Pending",
            "Running",
            "Succeeded",
            "Failed",
        ] {
            let count = counts
                .iter()
                .find(|(p, _)| p == phase)
                .map_or(0, |(_, c)| *c);
            if count != 0 || self.objects_has(kind, phase) {
                self.objects
                    .get_or_create(&PhaseLabels {
                        kind,
                        phase: phase.to_string(),
                    })
                    .set(count);
            }
        }
    }

    /// Replaces the AgentRun counts by phase and reason, and the queue lengths by Agent
    /// (`(namespace, agent)`); series that are gone are dropped.
    pub fn set_runs(
        &self,
        by_reason: &[((String, String), i64)],
        queued: &[((String, String), i64)],
    ) {
        self.runs.clear();
        for ((phase, reason), count) in by_reason {
            self.runs
                .get_or_create(&RunLabels {
                    phase: phase.clone(),
                    reason: reason.clone(),
                })
                .set(*count);
        }
        self.queued.clear();
        for ((namespace, agent), count) in queued {
            self.queued
                .get_or_create(&AgentLabels {
                    namespace: namespace.clone(),
                    agent: agent.clone(),
                })
                .set(*count);
        }
    }

    /// Observes what a status write took `run` through: the start of its agent (`startTime`
    /// set) and its end (`completionTime` set, once it had started). Each is observed once
    /// per run in this process however many passes write it; a restarted operator sees the
    /// written status as its starting point and observes nothing again.
    pub fn run_transitioned(&self, run: &AgentRun, old: &AgentRunStatus, new: &AgentRunStatus) {
        let Some(uid) = run.metadata.uid.as_deref() else {
            return;
        };
        if old.start_time.is_none()
            && let (Some(started), Some(created)) =
                (&new.start_time, &run.metadata.creation_timestamp)
            && self.first_time(uid, Transition::Started)
        {
            self.run_start.observe(seconds_between(created, started));
        }
        if old.completion_time.is_none()
            && let (Some(completed), Some(started), Some(phase)) =
                (&new.completion_time, &new.start_time, new.phase)
            && phase.is_finished()
            && self.first_time(uid, Transition::Finished)
        {
            self.run_duration
                .get_or_create(&OutcomeLabels {
                    outcome: phase.as_str().to_string(),
                })
                .observe(seconds_between(started, completed));
        }
    }

    /// True the first time it is asked about this run and transition.
    fn first_time(&self, uid: &str, transition: Transition) -> bool {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((uid.to_string(), transition))
    }

    /// Counts `n` requests dropped on their way to the trace collector (0 creates the series).
    pub fn trace_dropped(&self, reason: DropReason, n: u64) {
        self.trace_dropped
            .get_or_create(&DropLabels {
                reason: reason.as_str(),
            })
            .inc_by(n);
    }

    /// Counts `n` objects of `kind` deleted by the orphan sweep (0 creates the series).
    pub fn swept(&self, kind: &'static str, n: u64) {
        self.swept.get_or_create(&KindLabels { kind }).inc_by(n);
    }

    fn objects_has(&self, kind: &'static str, phase: &str) -> bool {
        self.objects
            .get(&PhaseLabels {
                kind,
                phase: phase.to_string(),
            })
            .is_some()
    }

    /// Counts a prefetch pod created.
    pub fn prefetch_started(&self) {
        self.prefetches
            .get_or_create(&PrefetchLabels { event: "started" })
            .inc();
    }

    /// Counts the end of the prefetch pod `pod` (Succeeded or Failed) and observes its pull
    /// time, once per pod and only for pods this process created (after it started).
    pub fn prefetch_ended(
        &self,
        pod: agentic_core::prefetch::ObservedPod<'_>,
        pull_seconds: Option<i64>,
    ) {
        let event = match pod.status.and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => "succeeded",
            Some("Failed") => "failed",
            _ => return,
        };
        let created = pod.metadata.creation_timestamp.as_ref();
        let (Some(uid), Some(created)) = (pod.metadata.uid.as_ref(), created) else {
            return;
        };
        if created.0.as_second() < self.started {
            return;
        }
        let first = self
            .prefetches_ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(uid.clone());
        if !first {
            return;
        }
        self.prefetches
            .get_or_create(&PrefetchLabels { event })
            .inc();
        if let Some(seconds) = pull_seconds {
            #[allow(clippy::cast_precision_loss)] // seconds of a pull, far below 2^52
            self.prefetch_pull.observe(seconds as f64);
        }
    }

    /// Whether this replica runs the controllers.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// How many shards this replica serves.
    pub fn set_shards_served(&self, shards: usize) {
        self.shards_served
            .set(i64::try_from(shards).unwrap_or(i64::MAX));
    }

    /// Times one registry request to `registry`.
    pub fn registry_request(&self, registry: &str, ok: bool, took: Duration) {
        let registry = {
            let mut hosts = self
                .registry_hosts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if hosts.contains(registry)
                || (hosts.len() < MAX_REGISTRY_HOSTS && hosts.insert(registry.to_string()))
            {
                registry.to_string()
            } else {
                "other".to_string()
            }
        };
        let outcome = if ok { "ok" } else { "error" };
        self.registry_latency
            .get_or_create(&RegistryLabels { registry, outcome })
            .observe(took.as_secs_f64());
    }

    /// Copies the registry client's and skill cache's running totals into the counters.
    pub fn sync_registry_stats(&self, requests: u64, hits: u64, misses: u64) {
        advance(&self.registry_requests, requests);
        advance(&self.cache_hits, hits);
        advance(&self.cache_misses, misses);
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Transition {
    Started,
    Finished,
}

/// How many observed transitions (or spans sent) are remembered; the oldest are forgotten
/// first. A stale cache is behind by moments, never by this many.
pub(crate) const OBSERVED_ENTRIES: usize = 16_384;

/// A bounded set of what was observed (transitions, spans sent), oldest first out.
pub(crate) struct Observed<K> {
    set: HashSet<K>,
    order: VecDeque<K>,
}

impl<K> Default for Observed<K> {
    fn default() -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Clone + Eq + std::hash::Hash> Observed<K> {
    /// Remembers `key`; false when it was remembered already.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        if !self.set.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > OBSERVED_ENTRIES
            && let Some(oldest) = self.order.pop_front()
        {
            self.set.remove(&oldest);
        }
        true
    }
}

/// Seconds from `from` to `to`; 0 when the clocks that wrote them disagree.
fn seconds_between(from: &Time, to: &Time) -> f64 {
    let span = to.0.duration_since(from.0);
    span.as_secs_f64().max(0.0)
}

fn advance(counter: &Counter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

/// Why a trace export request never reached the collector
/// (`agentic_trace_requests_dropped_total{reason}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    QueueFull,
    ExportFailed,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::ExportFailed => "export_failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use agentic_api::AgentRunPhase;

    use super::*;

    fn pair(a: &str, b: &str, n: i64) -> ((String, String), i64) {
        ((a.to_string(), b.to_string()), n)
    }

    /// The series names of an exposition, from its `# TYPE` lines: a counter `x` is sampled
    /// as `x_total`, a histogram as `x_bucket`, `x_count` and `x_sum`.
    fn exported_series(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for declared in text.lines().filter_map(|line| line.strip_prefix("# TYPE ")) {
            let Some((family, kind)) = declared.split_once(' ') else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_count", "_sum"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|suffix| format!("{family}{suffix}")));
        }
        names
    }

    #[test]
    fn the_charts_alerts_and_dashboard_query_only_exported_series() {
        // A family is printed once it has a series: give each one.
        let metrics = Metrics::default();
        metrics.reconciled("SkillCard", Duration::from_millis(5), true);
        metrics.registry_request("registry.test", true, Duration::from_millis(5));
        metrics.failed("SkillCard", ReconcileErrorReason::RegistryUnavailable);
        metrics.set_objects("SkillCard", &[("Ready".to_string(), 1)]);
        metrics.set_runs(
            &[pair("Pending", "Queued", 1)],
            &[pair("team-a", "migrator", 1)],
        );
        let (old, started) = (status(None, None, None), status(Some(20), None, None));
        metrics.run_transitioned(&run("u1"), &old, &started);
        let finished = status(Some(20), Some(80), Some(AgentRunPhase::Succeeded));
        metrics.run_transitioned(&run("u1"), &started, &finished);
        metrics.swept("Pod", 1);
        metrics.skill_loaded("team-a", "java");
        let exported = exported_series(&metrics.encode());

        for (file, queries) in [
            (
                "alerts.yaml",
                include_str!("../../../charts/agentic-operator/files/alerts.yaml"),
            ),
            (
                "dashboard.json",
                include_str!("../../../charts/agentic-operator/files/dashboard.json"),
            ),
        ] {
            let used: BTreeSet<String> = queries
                .match_indices("agentic_")
                .map(|(start, _)| {
                    queries[start..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect()
                })
                .collect();
            assert!(used.len() >= 5, "{file} queries our metrics: {used:?}");
            for name in used {
                assert!(
                    exported.contains(&name),
                    "{file} queries {name}, which the operator does not export: {exported:?}"
                );
            }
        }
    }

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("valid timestamp"))
    }

    /// A run created at second 0.
    fn run(uid: &str) -> AgentRun {
        let mut run = AgentRun::new("fix", agentic_api::AgentRunSpec::default());
        run.metadata.uid = Some(uid.to_string());
        run.metadata.creation_timestamp = Some(at(0));
        run
    }

    fn status(
        started: Option<i64>,
        completed: Option<i64>,
        phase: Option<AgentRunPhase>,
    ) -> AgentRunStatus {
        AgentRunStatus {
            phase,
            start_time: started.map(at),
            completion_time: completed.map(at),
            ..Default::default()
        }
    }

    /// The `_count` and `_sum` samples of a histogram series, by its name and labels.
    fn count_and_sum(text: &str, series: &str, labels: &str) -> (u64, f64) {
        let sample = |suffix: &str| {
            let prefix = format!("{series}_{suffix}{labels} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_string()
        };
        (
            sample("count").parse().expect("a count"),
            sample("sum").parse().expect("a sum"),
        )
    }

    #[test]
    fn a_precreated_kind_has_its_pass_series_at_zero_and_the_build_is_named() {
        let metrics = Metrics::default();
        metrics.precreate_kind("SkillCard");
        let text = metrics.encode();
        for result in ["ok", "error"] {
            let series =
                format!("agentic_reconciles_total{{kind=\"SkillCard\",result=\"{result}\"}} 0");
            assert!(text.contains(&series), "{series} in:\n{text}");
        }
        assert!(
            text.contains("agentic_reconcile_duration_seconds_count{kind=\"SkillCard\"} 0"),
            "{text}"
        );
        let build = format!(
            "agentic_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
        assert!(text.contains("agentic_leader 0"), "{text}");
    }

    #[test]
    fn failed_passes_are_counted_apart_and_the_leader_gauge_follows() {
        let metrics = Metrics::default();
        metrics.reconciled("Agent", Duration::from_millis(3), true);
        metrics.reconciled("Agent", Duration::from_millis(3), false);
        metrics.reconciled("Agent", Duration::from_millis(3), false);
        metrics.set_leader(true);
        let text = metrics.encode();
        assert!(text.contains("agentic_reconciles_total{kind=\"Agent\",result=\"ok\"} 1"));
        assert!(text.contains("agentic_reconciles_total{kind=\"Agent\",result=\"error\"} 2"));
        assert!(
            text.contains("agentic_reconcile_duration_seconds_count{kind=\"Agent\"} 3"),
            "failed passes are timed too: {text}"
        );
        assert!(text.contains("agentic_leader 1"));
        metrics.set_leader(false);
        assert!(metrics.encode().contains("agentic_leader 0"));
        assert!(metrics.encode().contains("agentic_shards_served 0"));
        metrics.set_shards_served(2);
        assert!(metrics.encode().contains("agentic_shards_served 2"));
    }

    #[test]
    fn registry_hosts_past_the_bound_share_one_series() {
        let metrics = Metrics::default();
        for n in 0..MAX_REGISTRY_HOSTS + 10 {
            metrics.registry_request(&format!("r{n}.test"), n % 2 == 0, Duration::from_millis(1));
        }
        metrics.registry_request("r0.test", false, Duration::from_millis(1));
        let text = metrics.encode();
        let count = |registry: &str, outcome: &str| {
            let prefix = format!(
                "agentic_registry_request_duration_seconds_count{{registry=\"{registry}\",outcome=\"{outcome}\"}} "
            );
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .map(|value| value.parse::<u64>().expect("a count"))
        };
        assert_eq!(count("r0.test", "ok"), Some(1));
        assert_eq!(
            count("r0.test", "error"),
            Some(1),
            "a known host keeps its series"
        );
        assert_eq!(count("r31.test", "error"), Some(1));
        assert_eq!(count("r32.test", "ok"), None, "past the bound");
        assert_eq!(
            count("other", "ok").unwrap_or(0) + count("other", "error").unwrap_or(0),
            10
        );
    }

    #[test]
    fn a_runs_start_and_duration_are_observed_once_each() {
        let metrics = Metrics::default();
        let pending = status(None, None, Some(AgentRunPhase::Pending));
        let running = status(Some(30), None, Some(AgentRunPhase::Running));
        let failed = status(Some(30), Some(130), Some(AgentRunPhase::Failed));
        let fix = run("u-fix");
        metrics.run_transitioned(&fix, &pending, &pending);
        let text = metrics.encode();
        assert!(
            text.contains("agentic_run_start_seconds_count 0"),
            "nothing started yet: {text}"
        );
        metrics.run_transitioned(&fix, &pending, &running);
        // A pass from a cache that has not seen the written status yet.
        metrics.run_transitioned(&fix, &pending, &running);
        metrics.run_transitioned(&fix, &running, &failed);
        metrics.run_transitioned(&fix, &running, &failed);
        // An unchanged finished run.
        metrics.run_transitioned(&fix, &failed, &failed);
        let text = metrics.encode();
        assert_eq!(
            count_and_sum(&text, "agentic_run_start_seconds", ""),
            (1, 30.0)
        );
        assert_eq!(
            count_and_sum(
                &text,
                "agentic_run_duration_seconds",
                r#"{outcome="Failed"}"#
            ),
            (1, 100.0)
        );

        // Started and finished in one pass (a fast agent), and another run.
        let fast = run("u-fast");
        let succeeded = status(Some(4), Some(6), Some(AgentRunPhase::Succeeded));
        metrics.run_transitioned(&fast, &pending, &succeeded);
        let text = metrics.encode();
        assert_eq!(
            count_and_sum(&text, "agentic_run_start_seconds", ""),
            (2, 34.0)
        );
        assert_eq!(
            count_and_sum(
                &text,
                "agentic_run_duration_seconds",
                r#"{outcome="Succeeded"}"#
            ),
            (1, 2.0)
        );
    }

    #[test]
    fn a_run_that_never_started_has_no_duration() {
        let metrics = Metrics::default();
        let cancelled = status(None, Some(50), Some(AgentRunPhase::Failed));
        metrics.run_transitioned(&run("u"), &status(None, None, None), &cancelled);
        let text = metrics.encode();
        assert!(text.contains("agentic_run_start_seconds_count 0"), "{text}");
        assert!(
            !text.contains("agentic_run_duration_seconds_count"),
            "{text}"
        );
    }

    #[test]
    fn a_clock_behind_the_creation_counts_zero_not_negative() {
        let metrics = Metrics::default();
        let mut early = run("u");
        early.metadata.creation_timestamp = Some(at(100));
        metrics.run_transitioned(
            &early,
            &status(None, None, None),
            &status(Some(90), None, None),
        );
        assert_eq!(
            count_and_sum(&metrics.encode(), "agentic_run_start_seconds", ""),
            (1, 0.0)
        );
    }

    #[test]
    fn observed_transitions_are_bounded_oldest_first() {
        let mut observed = Observed::default();
        for i in 0..=OBSERVED_ENTRIES {
            assert!(observed.insert((i.to_string(), Transition::Started)));
        }
        assert_eq!(observed.set.len(), OBSERVED_ENTRIES);
        assert!(!observed.insert((OBSERVED_ENTRIES.to_string(), Transition::Started)));
        assert!(
            observed.insert(("0".to_string(), Transition::Started)),
            "the oldest was forgotten"
        );
        assert!(observed.insert((OBSERVED_ENTRIES.to_string(), Transition::Finished)));
    }

    #[test]
    fn swept_objects_are_counted_by_kind() {
        let metrics = Metrics::default();
        metrics.swept("Secret", 0);
        metrics.swept("Pod", 1);
        metrics.swept("Pod", 1);
        let text = metrics.encode();
        assert!(
            text.contains(r#"agentic_orphans_deleted_total{kind="Pod"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentic_orphans_deleted_total{kind="Secret"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn run_counts_and_queues_replace_the_previous_ones() {
        let metrics = Metrics::default();
        metrics.set_runs(
            &[
                pair("Pending", "Queued", 4),
                pair("Running", "AgentRunning", 2),
            ],
            &[pair("team-a", "migrator", 4)],
        );
        let text = metrics.encode();
        assert!(
            text.contains(r#"agentic_agentruns{phase="Pending",reason="Queued"} 4"#),
            "{text}"
        );
        assert!(
            text.contains(r#"agentic_agentruns_queued{namespace="team-a",agent="migrator"} 4"#),
            "{text}"
        );

        metrics.set_runs(&[pair("Succeeded", "AgentSucceeded", 6)], &[]);
        let text = metrics.encode();
        assert!(
            text.contains(r#"agentic_agentruns{phase="Succeeded",reason="AgentSucceeded"} 6"#),
            "{text}"
        );
        assert!(
            !text.contains("Queued"),
            "the emptied queue is gone: {text}"
        );
        assert!(!text.contains(r#"agent="migrator""#), "{text}");
    }
}
