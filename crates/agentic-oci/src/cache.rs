//! Reading each (digest, subPath) once, however many SkillCards point at it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt as _, TryFutureExt as _};

use crate::{OciError, RegistryAuth, RegistryOptions, ResolvedImage, SkillContent, fetch_skill};

type SharedFetch = Shared<BoxFuture<'static, Result<Arc<SkillContent>, OciError>>>;

/// Cache key: image content is addressed by digest, so the registry and repository it was
/// found in do not matter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    digest: String,
    sub_path: Option<String>,
}

struct Entry {
    fetch: SharedFetch,
    /// Tells this entry from a newer one under the same key.
    generation: u64,
    last_used: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    clock: u64,
}

/// Hit and miss counters of a [`SkillCache`], for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests answered by an earlier or ongoing fetch.
    pub hits: u64,
    /// Requests that started a fetch.
    pub misses: u64,
    /// Entries held now.
    pub entries: usize,
}

/// Skills read from images, keyed by (digest, subPath).
///
/// Concurrent requests for the same key share one fetch. Successes and content verdicts
/// ([`OciError::is_content_verdict`]: invalid skill, missing `SKILL.md`, unsafe or oversized
/// image) are kept, because the content behind a digest never changes; other errors
/// (registry outages, refused credentials) are dropped so the next request tries again.
/// When full, the least recently used entry makes room.
///
/// The key ignores credentials: resolve the reference with the caller's credentials first
/// ([`resolve_digest`](crate::resolve_digest)), which proves the caller may read the image.
pub struct SkillCache {
    state: Mutex<State>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for SkillCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillCache")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl SkillCache {
    /// A cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        SkillCache {
            state: Mutex::new(State::default()),
            capacity: capacity.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// [`fetch_skill`] through the cache.
    pub async fn fetch_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        auth: &RegistryAuth,
        opts: &RegistryOptions,
    ) -> Result<Arc<SkillContent>, OciError> {
        let (resolved, owned_sub_path, auth, opts) = (
            resolved.clone(),
            sub_path.map(str::to_string),
            auth.clone(),
            opts.clone(),
        );
        self.get_or_fetch(&resolved.digest.clone(), sub_path, move || {
            async move { fetch_skill(&resolved, owned_sub_path.as_deref(), &auth, &opts).await }
                .boxed()
        })
        .await
    }

    /// The cached answer for (`digest`, `sub_path`), or the answer of `fetch` (started only
    /// when no fetch for the key is cached or under way).
    pub async fn get_or_fetch<F>(
        &self,
        digest: &str,
        sub_path: Option<&str>,
        fetch: F,
    ) -> Result<Arc<SkillContent>, OciError>
    where
        F: FnOnce() -> BoxFuture<'static, Result<SkillContent, OciError>>,
    {
        let key = Key {
            digest: digest.to_string(),
            sub_path: sub_path.map(str::to_string),
        };
        let (shared, generation) = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.clock += 1;
            let now = state.clock;
            match state.entries.get_mut(&key) {
                Some(entry) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    entry.last_used = now;
                    (entry.fetch.clone(), entry.generation)
                }
                None => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    if state.entries.len() >= self.capacity {
                        evict_least_recently_used(&mut state.entries);
                    }
                    let shared = fetch().map_ok(Arc::new).boxed().shared();
                    state.entries.insert(
                        key.clone(),
                        Entry {
                            fetch: shared.clone(),
                            generation: now,
                            last_used: now,
                        },
                    );
                    (shared, now)
                }
            }
        };

        let result = shared.await;
        if let Err(error) = &result
            && !error.is_content_verdict()
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state
                .entries
                .get(&key)
                .is_some_and(|entry| entry.generation == generation)
            {
                state.entries.remove(&key);
            }
        }
        result
    }

    /// Hits, misses and size, for metrics.
    pub fn stats(&self) -> CacheStats {
        let entries = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
        }
    }
}

fn evict_least_recently_used(entries: &mut HashMap<Key, Entry>) {
    let oldest = entries
        .iter()
        .min_by_key(|(_, entry)| entry.last_used)
        .map(|(key, _)| key.clone());
    if let Some(key) = oldest {
        entries.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn content(digest: &str) -> SkillContent {
        let skill_md = b"---\nname: demo\ndescription: Demo.\n---\n".to_vec();
        SkillContent {
            image: ResolvedImage::from_pinned(&format!("r.example/skills@{digest}")).unwrap(),
            sub_path: None,
            path: "SKILL.md".into(),
            report: agentic_skill::validate_skill_md(&skill_md, None),
            skill_md,
            skill_dirs: Vec::new(),
        }
    }

    fn digest(n: u8) -> String {
        format!("sha256:{}", hex::encode([n; 32]))
    }

    /// Fetches `key` through `cache`, counting the fetches that really run.
    async fn get(
        cache: &SkillCache,
        key: u8,
        runs: &Arc<AtomicUsize>,
    ) -> Result<Arc<SkillContent>, OciError> {
        let runs = runs.clone();
        cache
            .get_or_fetch(&digest(key), None, move || {
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(content(&digest(key)))
                }
                .boxed()
            })
            .await
    }

    #[tokio::test]
    async fn the_least_recently_used_entry_makes_room() {
        let cache = SkillCache::new(2);
        let runs = Arc::new(AtomicUsize::new(0));
        get(&cache, 1, &runs).await.unwrap();
        get(&cache, 2, &runs).await.unwrap();
        get(&cache, 1, &runs).await.unwrap(); // 1 is now more recent than 2
        get(&cache, 3, &runs).await.unwrap(); // evicts 2
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        get(&cache, 1, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 3, "1 stayed");
        get(&cache, 2, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 4, "2 was evicted");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (2, 4, 2));
    }

    #[tokio::test]
    async fn sub_paths_are_separate_entries_and_verdicts_stay() {
        let cache = SkillCache::new(8);
        let runs = Arc::new(AtomicUsize::new(0));
        for sub_path in [Some("a"), Some("b"), Some("a"), None] {
            let runs = runs.clone();
            let result = cache
                .get_or_fetch(&digest(9), sub_path, move || {
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Err(OciError::SkillNotFound {
                            path: "x/SKILL.md".into(),
                            message: "none".into(),
                        })
                    }
                    .boxed()
                })
                .await;
            assert_eq!(result.unwrap_err().reason(), "SkillNotFound");
        }
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "a, b and the root; the second a is cached"
        );
    }
}
