//! Verification results shared by every card that pins the same digest under the same
//! requirement.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::ImageVerdict;

/// Default of [`VerificationCache::new`]'s capacity.
pub const DEFAULT_CACHE_ENTRIES: usize = 4096;
/// How long a verdict other than [`ImageVerdict::Verified`] is kept: a signature pushed after an
/// `Unsigned` verdict is found within this.
pub const UNVERIFIED_TTL: Duration = Duration::from_secs(60);

/// What a verdict is cached under: the image, the pinned digest, and the requirement's
/// identity (e.g. the policy's UID and `metadata.generation`: a policy change is a new key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// `host[:port]/repository`.
    pub repository: String,
    /// `sha256:…`.
    pub digest: String,
    pub requirement: String,
}

/// The identity of what a requirement was built from (keys, identities, settings), for
/// [`CacheKey::requirement`]: a SHA-256 over its parts, each framed by its length, so that
/// parts split differently (`["ab", "c"]`, `["a", "bc"]`) never make the same key.
#[derive(Clone, Default)]
pub struct MaterialDigest(Sha256);

impl MaterialDigest {
    /// Adds one part.
    pub fn add(&mut self, part: impl AsRef<[u8]>) {
        let part = part.as_ref();
        self.0
            .update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        self.0.update(part);
    }

    /// The digest of every part added, in hex.
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// Verdicts by [`CacheKey`]. Concurrent lookups of one key share a single verification, so a
/// thousand cards on one image cost one signature read. [`ImageVerdict::Unavailable`] is never
/// kept (the next lookup tries again); other non-verified verdicts for [`UNVERIFIED_TTL`];
/// verified ones until evicted. Cheap to clone.
#[derive(Clone)]
pub struct VerificationCache {
    shared: Arc<Mutex<Entries>>,
}

struct Entries {
    capacity: usize,
    by_key: HashMap<CacheKey, Entry>,
    /// Counts lookups: the order of use, for eviction.
    ticks: u64,
}

struct Entry {
    cell: Arc<OnceCell<(ImageVerdict, Instant)>>,
    last_used: u64,
}

impl Default for VerificationCache {
    fn default() -> Self {
        VerificationCache::new(DEFAULT_CACHE_ENTRIES)
    }
}

impl VerificationCache {
    /// A cache of at most `capacity` verdicts (the least recently used go first).
    pub fn new(capacity: usize) -> VerificationCache {
        VerificationCache {
            shared: Arc::new(Mutex::new(Entries {
                capacity: capacity.max(1),
                by_key: HashMap::new(),
                ticks: 0,
            })),
        }
    }

    /// The cached verdict of `key`, or the one `verify` returns (run once for all concurrent
    /// callers of the same key).
    pub async fn get_or_verify<F, Fut>(&self, key: &CacheKey, verify: F) -> ImageVerdict
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ImageVerdict>,
    {
        let cell = self.cell(key);
        let (verdict, _) = cell
            .get_or_init(|| async { (verify().await, Instant::now()) })
            .await
            .clone();
        if matches!(verdict, ImageVerdict::Unavailable { .. }) {
            self.forget_cell(key, &cell);
        }
        verdict
    }

    /// Drops every verdict of `repository` at `digest` (e.g. on a revocation).
    pub fn forget(&self, repository: &str, digest: &str) {
        let mut entries = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .by_key
            .retain(|key, _| key.repository != repository || key.digest != digest);
    }

    /// How many verdicts (finished or under way) it holds.
    pub fn len(&self) -> usize {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_key
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn cell(&self, key: &CacheKey) -> Arc<OnceCell<(ImageVerdict, Instant)>> {
        let mut entries = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let stale = entries.by_key.get(key).is_some_and(|entry| {
            entry.cell.get().is_some_and(|(verdict, at)| {
                !matches!(verdict, ImageVerdict::Verified(_))
                    && now.duration_since(*at) >= UNVERIFIED_TTL
            })
        });
        if stale {
            entries.by_key.remove(key);
        }
        if !entries.by_key.contains_key(key) && entries.by_key.len() >= entries.capacity {
            let oldest = entries
                .by_key
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.by_key.remove(&oldest);
            }
        }
        entries.ticks += 1;
        let tick = entries.ticks;
        let entry = entries.by_key.entry(key.clone()).or_insert_with(|| Entry {
            cell: Arc::new(OnceCell::new()),
            last_used: tick,
        });
        entry.last_used = tick;
        Arc::clone(&entry.cell)
    }

    /// Removes `key` if it still holds `cell` (a newer lookup may have replaced it).
    fn forget_cell(&self, key: &CacheKey, cell: &Arc<OnceCell<(ImageVerdict, Instant)>>) {
        let mut entries = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if entries
            .by_key
            .get(key)
            .is_some_and(|entry| Arc::ptr_eq(&entry.cell, cell))
        {
            entries.by_key.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn material_parts_are_framed() {
        let digest = |parts: &[&str]| {
            let mut material = super::MaterialDigest::default();
            for part in parts {
                material.add(part);
            }
            material.finish()
        };
        assert_eq!(digest(&["ab", "c"]), digest(&["ab", "c"]));
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_ne!(digest(&["abc"]), digest(&["ab", "c"]));
        assert_ne!(digest(&["", "a"]), digest(&["a", ""]));
    }

    use super::*;
    use crate::{Layout, Signer, Verified};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key(digest: &str) -> CacheKey {
        CacheKey {
            repository: "127.0.0.1:5000/skills".to_string(),
            digest: digest.to_string(),
            requirement: "policy/1".to_string(),
        }
    }

    fn verified() -> ImageVerdict {
        ImageVerdict::Verified(Verified {
            signer: Signer::Key {
                fingerprint: "sha256:00".to_string(),
            },
            signature_digest: "sha256:11".to_string(),
            layout: Layout::Tag,
        })
    }

    #[tokio::test]
    async fn a_thousand_concurrent_lookups_verify_once() {
        let cache = VerificationCache::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let lookups = (0..1000).map(|_| {
            let cache = cache.clone();
            let calls = Arc::clone(&calls);
            async move {
                cache
                    .get_or_verify(&key("sha256:aa"), || async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        verified()
                    })
                    .await
            }
        });
        let verdicts = futures_join(lookups).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(verdicts.iter().all(|verdict| *verdict == verified()));
    }

    async fn futures_join<F: Future<Output = ImageVerdict> + Send + 'static>(
        lookups: impl Iterator<Item = F>,
    ) -> Vec<ImageVerdict> {
        let mut set = tokio::task::JoinSet::new();
        for lookup in lookups {
            set.spawn(lookup);
        }
        let mut verdicts = Vec::new();
        while let Some(verdict) = set.join_next().await {
            verdicts.push(verdict.expect("a lookup task"));
        }
        verdicts
    }

    #[tokio::test]
    async fn an_outage_is_not_remembered_and_another_key_verifies_again() {
        let cache = VerificationCache::default();
        let unavailable = cache
            .get_or_verify(&key("sha256:aa"), || async {
                ImageVerdict::Unavailable {
                    why: "registry down".to_string(),
                }
            })
            .await;
        assert!(matches!(unavailable, ImageVerdict::Unavailable { .. }));
        assert!(cache.is_empty());
        let after = cache
            .get_or_verify(&key("sha256:aa"), || async { verified() })
            .await;
        assert_eq!(after, verified());
        let other = cache
            .get_or_verify(&key("sha256:bb"), || async { ImageVerdict::Unsigned })
            .await;
        assert_eq!(other, ImageVerdict::Unsigned);
        assert_eq!(cache.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unsigned_verdict_expires_and_a_verified_one_stays() {
        let cache = VerificationCache::default();
        cache
            .get_or_verify(&key("sha256:aa"), || async { ImageVerdict::Unsigned })
            .await;
        cache
            .get_or_verify(&key("sha256:bb"), || async { verified() })
            .await;
        tokio::time::advance(UNVERIFIED_TTL).await;
        let again = cache
            .get_or_verify(&key("sha256:aa"), || async { verified() })
            .await;
        assert_eq!(again, verified(), "the unsigned verdict expired");
        let kept = cache
            .get_or_verify(&key("sha256:bb"), || async { ImageVerdict::Unsigned })
            .await;
        assert_eq!(kept, verified(), "a verified verdict does not expire");
    }

    #[tokio::test]
    async fn the_least_recently_used_verdict_goes_first() {
        let cache = VerificationCache::new(2);
        for digest in ["sha256:aa", "sha256:bb", "sha256:cc"] {
            cache
                .get_or_verify(&key(digest), || async { verified() })
                .await;
        }
        assert_eq!(cache.len(), 2);
        let recomputed = cache
            .get_or_verify(&key("sha256:aa"), || async { ImageVerdict::Unsigned })
            .await;
        assert_eq!(
            recomputed,
            ImageVerdict::Unsigned,
            "the oldest entry was evicted"
        );
    }
}
