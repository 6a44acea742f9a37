//! Tag resolutions shared between the SkillCards that name the same reference.
//!
//! A thousand cards on one tag used to cost a thousand `HEAD`s on every refresh. A resolution
//! is keyed by the reference and a fingerprint of the credentials it was made with (never by
//! the credentials themselves, and never shared between credentials: a card must not learn a
//! digest its own credentials cannot read). Callers that ask while a resolution of their key
//! is in flight wait for it and take its answer, which is as fresh as their own would be;
//! callers that accept an answer up to `max_age` old take a recent one without asking.
//! A failure is shared only with the callers that were waiting for it (so a hung registry
//! costs one deadline, not one per card in turn); the next caller asks the registry itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{OciError, RegistryAuth, RegistryClient, ResolvedImage};

/// How many keys are kept before the ones not in use and older than the longest age asked
/// for are dropped.
const MAX_KEYS: usize = 4096;

type Key = (String, [u8; 32]);
/// The latest outcome for a key, and when it came.
type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Result<ResolvedImage, OciError>)>>>;

/// Tag resolutions, shared by every card of the process.
#[derive(Default)]
pub struct Resolutions {
    slots: Mutex<HashMap<Key, Slot>>,
}

impl Resolutions {
    /// Resolves `reference` like [`RegistryClient::resolve_digest`], taking an answer made since this
    /// call began (by a concurrent caller) or at most `max_age` old. `Duration::ZERO` asks for
    /// a fresh answer: the first read of a card's generation, so a tag pushed a moment ago is
    /// seen.
    pub async fn resolve(
        &self,
        reference: &str,
        auth: &RegistryAuth,
        client: &RegistryClient,
        max_age: Duration,
    ) -> Result<ResolvedImage, OciError> {
        self.resolve_with(reference, auth, max_age, || {
            client.resolve_digest(reference, auth)
        })
        .await
    }

    async fn resolve_with<F, Fut>(
        &self,
        reference: &str,
        auth: &RegistryAuth,
        max_age: Duration,
        ask: F,
    ) -> Result<ResolvedImage, OciError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<ResolvedImage, OciError>>,
    {
        let asked_at = Instant::now();
        let slot = self.slot((reference.to_string(), auth.fingerprint()), max_age);
        let mut answer = slot.lock().await;
        if let Some((at, outcome)) = answer.as_ref() {
            let concurrent = *at >= asked_at;
            let recent = outcome.is_ok() && at.elapsed() <= max_age;
            if concurrent || recent {
                return outcome.clone();
            }
        }
        let outcome = ask().await;
        *answer = Some((Instant::now(), outcome.clone()));
        outcome
    }

    fn slot(&self, key: Key, max_age: Duration) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.len() >= MAX_KEYS && !slots.contains_key(&key) {
            // Keep what is in use (someone holds or waits on it) or recent enough to share.
            slots.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot.try_lock().map_or(true, |answer| {
                        answer
                            .as_ref()
                            .is_some_and(|(at, _)| at.elapsed() <= max_age)
                    })
            });
        }
        slots.entry(key).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn image(digest_byte: char) -> ResolvedImage {
        ResolvedImage::from_pinned(&format!(
            "registry.test/team/skill@sha256:{}",
            digest_byte.to_string().repeat(64)
        ))
        .expect("a pinned reference")
    }

    /// A registry request answering `outcome`, counted in `asked`.
    fn counted(
        asked: &Arc<AtomicU32>,
        outcome: Result<ResolvedImage, OciError>,
    ) -> impl FnOnce() -> std::future::Ready<Result<ResolvedImage, OciError>> {
        let asked = asked.clone();
        move || {
            asked.fetch_add(1, Ordering::SeqCst);
            std::future::ready(outcome)
        }
    }

    fn basic(password: &str) -> RegistryAuth {
        RegistryAuth::Basic {
            username: "u".into(),
            password: password.into(),
        }
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_request() {
        let resolutions = Arc::new(Resolutions::default());
        let asked = Arc::new(AtomicU32::new(0));
        let callers = (0..50).map(|_| {
            let resolutions = resolutions.clone();
            let asked = asked.clone();
            tokio::spawn(async move {
                resolutions
                    .resolve_with(
                        "registry.test/team/skill:v1",
                        &RegistryAuth::Anonymous,
                        Duration::ZERO,
                        || async move {
                            asked.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok(image('a'))
                        },
                    )
                    .await
            })
        });
        for caller in futures::future::join_all(callers).await {
            assert_eq!(caller.expect("joined").expect("resolved"), image('a'));
        }
        // The first asks; the ones that waited for it take its answer. A caller that began
        // only after that answer asks again (it wants one at most 0 s old): a handful at most.
        let asked = asked.load(Ordering::SeqCst);
        assert!(asked < 5, "{asked} requests for 50 concurrent callers");
    }

    #[tokio::test]
    async fn callers_waiting_on_a_failure_share_it_and_later_ones_ask_again() {
        let resolutions = Arc::new(Resolutions::default());
        let reference = "registry.test/team/skill:v1";
        let asked = Arc::new(AtomicU32::new(0));
        let callers = (0..20).map(|_| {
            let resolutions = resolutions.clone();
            let asked = asked.clone();
            tokio::spawn(async move {
                resolutions
                    .resolve_with(
                        reference,
                        &RegistryAuth::Anonymous,
                        Duration::ZERO,
                        || async move {
                            asked.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Err(OciError::RegistryUnavailable {
                                image: reference.into(),
                                message: "timed out".into(),
                            })
                        },
                    )
                    .await
            })
        });
        for caller in futures::future::join_all(callers).await {
            assert!(caller.expect("joined").is_err());
        }
        let before = asked.load(Ordering::SeqCst);
        assert!(
            before < 5,
            "{before} deadlines in turn for 20 waiting callers"
        );
        let later = resolutions
            .resolve_with(
                reference,
                &RegistryAuth::Anonymous,
                Duration::from_secs(60),
                counted(&asked, Ok(image('a'))),
            )
            .await;
        assert_eq!(later.expect("asked again"), image('a'));
        assert_eq!(asked.load(Ordering::SeqCst), before + 1);
    }

    #[tokio::test]
    async fn an_answer_is_shared_within_max_age_and_asked_again_after() {
        let resolutions = Resolutions::default();
        let reference = "registry.test/team/skill:v1";
        let anonymous = RegistryAuth::Anonymous;
        let asked = Arc::new(AtomicU32::new(0));
        let first = resolutions
            .resolve_with(
                reference,
                &anonymous,
                Duration::ZERO,
                counted(&asked, Ok(image('a'))),
            )
            .await
            .expect("resolved");
        assert_eq!(first, image('a'));
        // A refresh that accepts a minute-old answer takes the shared one.
        let shared = resolutions
            .resolve_with(
                reference,
                &anonymous,
                Duration::from_secs(60),
                counted(&asked, Ok(image('b'))),
            )
            .await
            .expect("resolved");
        assert_eq!(shared, image('a'));
        // A first read of a new generation asks the registry: the tag moved.
        let fresh = resolutions
            .resolve_with(
                reference,
                &anonymous,
                Duration::ZERO,
                counted(&asked, Ok(image('b'))),
            )
            .await
            .expect("resolved");
        assert_eq!(fresh, image('b'));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn credentials_never_share_and_failures_are_not_kept() {
        let resolutions = Resolutions::default();
        let reference = "registry.test/private/skill:v1";
        let minute = Duration::from_secs(60);
        resolutions
            .resolve_with(reference, &basic("right"), minute, || async {
                Ok(image('a'))
            })
            .await
            .expect("resolved with the right password");
        let wrong = resolutions
            .resolve_with(reference, &basic("wrong"), minute, || async {
                Err(OciError::Unauthorized {
                    image: reference.into(),
                    message: "401".into(),
                })
            })
            .await;
        assert!(
            matches!(wrong, Err(OciError::Unauthorized { .. })),
            "{wrong:?}"
        );
        let anonymous = resolutions
            .resolve_with(reference, &RegistryAuth::Anonymous, minute, || async {
                Err(OciError::Unauthorized {
                    image: reference.into(),
                    message: "401".into(),
                })
            })
            .await;
        assert!(
            anonymous.is_err(),
            "anonymous never gets the digest the password read"
        );
        // A failure is not an answer: the next caller with those credentials asks again.
        let retried = resolutions
            .resolve_with(reference, &basic("wrong"), minute, || async {
                Ok(image('c'))
            })
            .await
            .expect("asked again");
        assert_eq!(retried, image('c'));
    }
}
