//! Per-object exponential backoff: one object failing again and again waits longer and
//! longer, without slowing down any other object.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Which object a failure belongs to: kind, namespace, name.
pub type ObjectKey = (&'static str, String, String);

/// Consecutive failures per object, turned into retry delays.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<ObjectKey, u32>>,
}

impl Default for Backoff {
    /// 2 seconds after the first failure, doubling up to 5 minutes.
    fn default() -> Self {
        Self::new(Duration::from_secs(2), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying.
    pub fn failed(&self, key: ObjectKey) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(key).or_insert(0);
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(*n))
            .min(self.max);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key` after a successful pass.
    pub fn reset(&self, key: &ObjectKey) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ("SkillCard", "ns".to_string(), name.to_string())
    }

    #[test]
    fn doubles_per_object_up_to_the_cap_and_resets_on_success() {
        let backoff = Backoff::default();
        let delays: Vec<u64> = (0..10)
            .map(|_| backoff.failed(key("a")).as_secs())
            .collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);

        // Another object is not slowed down by the first one's failures.
        assert_eq!(backoff.failed(key("b")), Duration::from_secs(2));

        backoff.reset(&key("a"));
        assert_eq!(backoff.failed(key("a")), Duration::from_secs(2));
        assert_eq!(backoff.failed(key("b")), Duration::from_secs(4));
    }

    #[test]
    fn many_failures_never_overflow() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..200 {
            assert!(backoff.failed(key("a")) <= Duration::from_secs(60));
        }
    }
}
