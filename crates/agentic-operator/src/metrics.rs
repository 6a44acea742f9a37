//! Prometheus metrics of the controllers, served on `--metrics-addr` at `/metrics`.

use std::sync::Mutex;
use std::time::Duration;

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
pub struct AgentLabels {
    pub namespace: String,
    pub agent: String,
}

/// Every metric the operator exports, registered once at start.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<KindLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: Family<KindLabels, Histogram>,
    objects: Family<PhaseLabels, Gauge>,
    runs: Family<RunLabels, Gauge>,
    queued: Family<AgentLabels, Gauge>,
    registry_requests: Counter,
    cache_hits: Counter,
    cache_misses: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("agentic");
        let reconciles = Family::<KindLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        let objects = Family::<PhaseLabels, Gauge>::default();
        let runs = Family::<RunLabels, Gauge>::default();
        let queued = Family::<AgentLabels, Gauge>::default();
        let registry_requests = Counter::default();
        let cache_hits = Counter::default();
        let cache_misses = Counter::default();
        registry.register("reconciles", "Reconcile passes by kind", reconciles.clone());
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
            "AgentRuns waiting for a slot of their Agent's maxConcurrentRuns, by Agent",
            queued.clone(),
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
            errors,
            duration,
            objects,
            runs,
            queued,
            registry_requests,
            cache_hits,
            cache_misses,
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, kind: &'static str, took: Duration) {
        self.reconciles.get_or_create(&KindLabels { kind }).inc();
        self.duration
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    pub fn failed(&self, kind: &'static str, reason: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels { kind, reason })
            .inc();
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

    fn objects_has(&self, kind: &'static str, phase: &str) -> bool {
        self.objects
            .get(&PhaseLabels {
                kind,
                phase: phase.to_string(),
            })
            .is_some()
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
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

fn advance(counter: &Counter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
        metrics.reconciled("SkillCard", Duration::from_millis(5));
        metrics.failed("SkillCard", "RegistryUnavailable");
        metrics.set_objects("SkillCard", &[("Ready".to_string(), 1)]);
        metrics.set_runs(
            &[pair("Pending", "Queued", 1)],
            &[pair("team-a", "migrator", 1)],
        );
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
