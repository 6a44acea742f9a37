//! Reading each (digest, subPath) once, however many SkillCards point at it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt as _, TryFutureExt as _};

use crate::{OciError, RegistryAuth, RegistryClient, ResolvedImage, SkillContent};

type SharedFetch = Shared<BoxFuture<'static, Result<Arc<SkillContent>, OciError>>>;

/// Cache key. The registry and repository are part of it: a digest read from one repository
/// says nothing about whether another repository (or registry) serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    registry: String,
    repository: String,
    digest: String,
    sub_path: Option<String>,
}

struct Entry {
    fetch: SharedFetch,
    /// Tells this entry from a newer one under the same key.
    generation: u64,
    last_used: u64,
    /// What the answer costs in memory, once it is known.
    bytes: Option<u64>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    clock: u64,
    /// Sum of the known `bytes` of the entries.
    bytes: u64,
}

impl State {
    fn remove(&mut self, key: &Key) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes.unwrap_or(0);
        }
    }

    /// Removes the least recently used entry among those `eligible`; false when none is.
    fn evict_least_recently_used(&mut self, eligible: impl Fn(&Entry) -> bool) -> bool {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, entry)| eligible(entry))
            .min_by_key(|(_, entry)| entry.last_used)
            .map(|(key, _)| key.clone());
        match oldest {
            Some(key) => {
                self.remove(&key);
                true
            }
            None => false,
        }
    }
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
    /// Estimated memory held by the finished entries, in bytes.
    pub bytes: u64,
}

/// Skills read from images, keyed by (registry, repository, digest, subPath).
///
/// Concurrent requests for the same key share one fetch. Successes and content verdicts
/// ([`OciError::is_content_verdict`]: invalid skill, missing `SKILL.md`, unsafe or oversized
/// image) are kept, because the content behind a digest never changes; other errors
/// (registry outages, refused credentials, digest mismatches) are dropped so the next request
/// tries again. The cache holds at most `capacity` entries and about
/// [`max_bytes`](SkillCache::with_max_bytes) bytes (`SKILL.md`, paths, messages); the least
/// recently used entries make room.
///
/// The key ignores credentials: resolve the reference with the caller's credentials first
/// ([`resolve_digest`](crate::resolve_digest)), which proves the caller may read the image.
pub struct SkillCache {
    state: Mutex<State>,
    capacity: usize,
    max_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for SkillCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillCache")
            .field("capacity", &self.capacity)
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Default bound of [`SkillCache::with_max_bytes`]: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// Counted for every entry on top of its strings: key, map slot, shared future.
const ENTRY_OVERHEAD_BYTES: u64 = 512;

impl SkillCache {
    /// A cache holding at most `capacity` entries (at least one) and
    /// [`DEFAULT_CACHE_BYTES`].
    pub fn new(capacity: usize) -> Self {
        SkillCache {
            state: Mutex::new(State::default()),
            capacity: capacity.max(1),
            max_bytes: DEFAULT_CACHE_BYTES,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Bounds the estimated memory of the finished entries. An answer larger than the whole
    /// bound is returned but not kept.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// [`RegistryClient::fetch_skill`] through the cache.
    pub async fn fetch_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        auth: &RegistryAuth,
        client: &RegistryClient,
    ) -> Result<Arc<SkillContent>, OciError> {
        let (image, owned_sub_path, auth, client) = (
            resolved.clone(),
            sub_path.map(str::to_string),
            auth.clone(),
            client.clone(),
        );
        self.get_or_fetch(resolved, sub_path, move || {
            async move {
                client
                    .fetch_skill(&image, owned_sub_path.as_deref(), &auth)
                    .await
            }
            .boxed()
        })
        .await
    }

    /// The cached answer for (`image`, `sub_path`), or the answer of `fetch` (started only
    /// when no fetch for the key is cached or under way).
    pub async fn get_or_fetch<F>(
        &self,
        image: &ResolvedImage,
        sub_path: Option<&str>,
        fetch: F,
    ) -> Result<Arc<SkillContent>, OciError>
    where
        F: FnOnce() -> BoxFuture<'static, Result<SkillContent, OciError>>,
    {
        let key = Key {
            registry: image.registry.clone(),
            repository: image.repository.clone(),
            digest: image.digest.clone(),
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
                        state.evict_least_recently_used(|_| true);
                    }
                    let shared = fetch().map_ok(Arc::new).boxed().shared();
                    state.entries.insert(
                        key.clone(),
                        Entry {
                            fetch: shared.clone(),
                            generation: now,
                            last_used: now,
                            bytes: None,
                        },
                    );
                    (shared, now)
                }
            }
        };

        let result = shared.await;
        let keep = match &result {
            Ok(_) => true,
            Err(error) => error.is_content_verdict(),
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = state
            .entries
            .get_mut(&key)
            .filter(|entry| entry.generation == generation)
        else {
            return result;
        };
        if !keep {
            state.remove(&key);
        } else if entry.bytes.is_none() {
            let bytes = footprint(&result);
            entry.bytes = Some(bytes);
            state.bytes += bytes;
            // Entries still under way hold nothing yet; evicting them would not help.
            while state.bytes > self.max_bytes
                && state.evict_least_recently_used(|entry| entry.bytes.is_some())
            {}
        }
        result
    }

    /// Hits, misses and size, for metrics.
    pub fn stats(&self) -> CacheStats {
        let (entries, bytes) = {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (state.entries.len(), state.bytes)
        };
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
            bytes,
        }
    }
}

/// Estimated memory held by a cached answer.
fn footprint(result: &Result<Arc<SkillContent>, OciError>) -> u64 {
    let strings = match result {
        Ok(content) => {
            // The report holds parsed copies of parts of SKILL.md: count it twice.
            2 * content.skill_md.len()
                + content.path.len()
                + content.sub_path.as_ref().map_or(0, String::len)
                + 2 * content.image.repository_with_digest.len()
                + content.skill_dirs.iter().map(String::len).sum::<usize>()
        }
        Err(error) => error.to_string().len(),
    };
    ENTRY_OVERHEAD_BYTES + strings as u64
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn image(repository: &str, digest: &str) -> ResolvedImage {
        ResolvedImage::from_pinned(&format!("r.example/{repository}@{digest}")).unwrap()
    }

    fn content(image: &ResolvedImage) -> SkillContent {
        let skill_md = b"---\nname: demo\ndescription: Demo.\n---\n".to_vec();
        SkillContent {
            image: image.clone(),
            sub_path: None,
            path: "SKILL.md".into(),
            report: agentic_skill::validate_skill_md(&skill_md, None),
            skill_md,
            skill_dirs: Vec::new(),
            skill_dir_count: 0,
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
        get_from(cache, &image("skills", &digest(key)), runs).await
    }

    async fn get_from(
        cache: &SkillCache,
        image: &ResolvedImage,
        runs: &Arc<AtomicUsize>,
    ) -> Result<Arc<SkillContent>, OciError> {
        let (runs, fetched) = (runs.clone(), content(image));
        cache
            .get_or_fetch(image, None, move || {
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(fetched)
                }
                .boxed()
            })
            .await
    }

    #[tokio::test]
    async fn a_digest_read_in_one_repository_is_not_an_answer_for_another() {
        let cache = SkillCache::new(8);
        let runs = Arc::new(AtomicUsize::new(0));
        let here = image("skills", &digest(1));
        let elsewhere = image("other", &digest(1));
        let other_registry =
            ResolvedImage::from_pinned(&format!("other.example/skills@{}", digest(1))).unwrap();
        assert_eq!(get_from(&cache, &here, &runs).await.unwrap().image, here);
        assert_eq!(
            get_from(&cache, &elsewhere, &runs).await.unwrap().image,
            elsewhere
        );
        assert_eq!(
            get_from(&cache, &other_registry, &runs)
                .await
                .unwrap()
                .image,
            other_registry
        );
        assert_eq!(runs.load(Ordering::SeqCst), 3, "one fetch per repository");
        get_from(&cache, &here, &runs).await.unwrap();
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "the same repository is a hit"
        );
    }

    #[tokio::test]
    async fn the_byte_bound_evicts_the_least_recently_used_entries() {
        let probe = SkillCache::new(8);
        get(&probe, 1, &Arc::new(AtomicUsize::new(0)))
            .await
            .unwrap();
        let one_entry = probe.stats().bytes;
        assert!(one_entry > ENTRY_OVERHEAD_BYTES, "{one_entry}");

        let cache = SkillCache::new(100).with_max_bytes(2 * one_entry);
        let runs = Arc::new(AtomicUsize::new(0));
        for key in 1..=3 {
            get(&cache, key, &runs).await.unwrap();
        }
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes), (2, 2 * one_entry));
        get(&cache, 3, &runs).await.unwrap();
        get(&cache, 2, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 3, "2 and 3 stayed");
        get(&cache, 1, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 4, "1 was evicted");

        let tiny = SkillCache::new(100).with_max_bytes(one_entry - 1);
        get(&tiny, 1, &runs).await.unwrap();
        let stats = tiny.stats();
        assert_eq!((stats.entries, stats.bytes), (0, 0), "too large to keep");
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
                .get_or_fetch(&image("skills", &digest(9)), sub_path, move || {
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Err(OciError::Skill(
                            agentic_skill::SkillVerdict::SkillNotFound {
                                path: "x/SKILL.md".into(),
                                message: "none".into(),
                            },
                        ))
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
