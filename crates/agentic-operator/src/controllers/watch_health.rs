//! Whether the controllers' watches work: a watch that keeps failing is reported by
//! `/readyz` and, past `--watch-failure-seconds`, stops the operator, so that a restart (or
//! the standby replica) takes over instead of a leader that holds its Lease and sees nothing.
//!
//! A shared watch reports each failed watch request here,
//! and nothing when it works again. A broken watch is retried at least once a
//! second (the shared watch's backoff), and a request to a silent API server fails within the
//! client's connect timeout, so a watch is taken as failing while its errors come less than
//! [`QUIET`] apart, and as working once that long has passed without one.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long without a watch error before the failure is over.
pub const QUIET: Duration = Duration::from_secs(45);
/// How long a watch must have been failing before `/readyz` reports it.
pub const UNREADY_AFTER: Duration = Duration::from_secs(15);

/// The current failure of the watches of one kind.
#[derive(Clone, Debug)]
struct Failure {
    since: Instant,
    last: Instant,
    error: String,
}

/// A kind whose watches have failed for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenWatch {
    /// The kind watched.
    pub kind: &'static str,
    /// How long its watches have been failing.
    pub failing_for: Duration,
    /// The last error, with its cause.
    pub error: String,
}

impl std::fmt::Display for BrokenWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} watches have failed for {}s: {}",
            self.kind,
            self.failing_for.as_secs(),
            self.error
        )
    }
}

/// The watch failures, by the kind watched.
#[derive(Default)]
pub struct WatchHealth {
    failures: Mutex<BTreeMap<&'static str, Failure>>,
}

impl WatchHealth {
    /// Records a failed request of a watch of `kind` at `now`.
    pub fn failed(&self, kind: &'static str, error: String, now: Instant) {
        let mut failures = self.lock();
        match failures.get_mut(kind) {
            Some(failure) if now.saturating_duration_since(failure.last) < QUIET => {
                failure.last = now;
                failure.error = error;
            }
            _ => {
                failures.insert(
                    kind,
                    Failure {
                        since: now,
                        last: now,
                        error,
                    },
                );
            }
        }
    }

    /// The kinds whose watches have been failing for at least `threshold` at `now`.
    pub fn broken(&self, threshold: Duration, now: Instant) -> Vec<BrokenWatch> {
        self.lock()
            .iter()
            .filter(|(_, failure)| now.saturating_duration_since(failure.last) < QUIET)
            .filter_map(|(kind, failure)| {
                let failing_for = now.saturating_duration_since(failure.since);
                (failing_for >= threshold).then(|| BrokenWatch {
                    kind,
                    failing_for,
                    error: failure.error.clone(),
                })
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Failure>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_broken_while_its_errors_keep_coming() {
        let health = WatchHealth::default();
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        health.failed("AgentRun", "connection refused".into(), at(0));
        assert!(health.broken(Duration::from_secs(10), at(5)).is_empty());
        for second in 1..=20 {
            health.failed("AgentRun", format!("attempt {second}"), at(second));
        }
        assert_eq!(
            health.broken(Duration::from_secs(10), at(20)),
            [BrokenWatch {
                kind: "AgentRun",
                failing_for: Duration::from_secs(20),
                error: "attempt 20".into(),
            }]
        );
        // Errors as far apart as a silent server's connect timeouts are one failure.
        health.failed("AgentRun", "timed out".into(), at(50));
        assert_eq!(
            health.broken(Duration::from_secs(10), at(50))[0].failing_for,
            Duration::from_secs(50)
        );
    }

    #[test]
    fn a_quiet_period_ends_the_failure_and_the_next_error_starts_afresh() {
        let health = WatchHealth::default();
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        for second in 0..30 {
            health.failed("SkillCard", "forbidden".into(), at(second));
        }
        assert_eq!(health.broken(UNREADY_AFTER, at(30)).len(), 1);
        let recovered = at(29) + QUIET;
        assert!(health.broken(UNREADY_AFTER, recovered).is_empty());
        health.failed("SkillCard", "once".into(), recovered);
        assert!(
            health
                .broken(Duration::ZERO, recovered)
                .iter()
                .all(|b| b.failing_for == Duration::ZERO)
        );
    }
}
