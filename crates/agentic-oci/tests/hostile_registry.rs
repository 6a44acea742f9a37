//! Registries that misbehave on purpose: a small fake on 127.0.0.1 serves crafted manifests
//! and blobs (wrong digests, oversized manifests, lies about what it has, trickled bytes).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentic_oci::{
    PackedImage, RegistryAuth, RegistryClient, RegistryOptions, ResolvedImage, SkillCache,
    fetch_skill, pack_skills, resolve_digest,
};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};

const ANONYMOUS: RegistryAuth = RegistryAuth::Anonymous;

/// What the fake registry answers at one path.
#[derive(Clone)]
enum Route {
    /// These bytes, whatever digest the path names.
    Bytes(Vec<u8>),
    /// HEAD says the manifest is there; GET says it is not.
    HeadOnly,
    /// `length` bytes of `{`, generated as they are sent; `sent` counts them. HEAD names no
    /// digest, so that resolving a tag must read the manifest.
    Endless {
        length: u64,
        claim_length: bool,
        sent: Arc<AtomicU64>,
    },
    /// These bytes, one every `every`; `dropped` turns true when the server lets go of them.
    Trickle {
        bytes: Vec<u8>,
        every: Duration,
        dropped: Arc<AtomicBool>,
    },
}

struct FakeRegistry {
    addr: String,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeRegistry {
    async fn start(routes: HashMap<String, Route>) -> FakeRegistry {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(Arc::new(routes));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeRegistry { addr, server }
    }

    fn options(&self) -> RegistryOptions {
        RegistryOptions {
            insecure_registries: vec![self.addr.clone()],
            ..RegistryOptions::default()
        }
    }

    fn pinned(&self, repository: &str, digest: &str) -> ResolvedImage {
        ResolvedImage::from_pinned(&format!("{}/{repository}@{digest}", self.addr)).unwrap()
    }
}

async fn serve(
    State(routes): State<Arc<HashMap<String, Route>>>,
    method: Method,
    uri: Uri,
) -> Response {
    let path = uri.path();
    if path == "/v2/" {
        return StatusCode::OK.into_response();
    }
    let Some(route) = routes.get(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let digest = path.rsplit('/').next().unwrap_or_default().to_string();
    if method == Method::HEAD && matches!(route, Route::Endless { .. }) {
        return StatusCode::OK.into_response();
    }
    if method == Method::HEAD {
        return (
            [
                (
                    header::CONTENT_TYPE,
                    agentic_oci::MANIFEST_MEDIA_TYPE.to_string(),
                ),
                (
                    header::HeaderName::from_static("docker-content-digest"),
                    digest,
                ),
            ],
            (),
        )
            .into_response();
    }
    match route.clone() {
        Route::Bytes(bytes) => bytes.into_response(),
        Route::HeadOnly => StatusCode::NOT_FOUND.into_response(),
        Route::Endless {
            length,
            claim_length,
            sent,
        } => {
            const CHUNK: u64 = 64 * 1024;
            let chunks = futures::stream::iter(0..length.div_ceil(CHUNK)).map(move |n| {
                let size = CHUNK.min(length - n * CHUNK);
                sent.fetch_add(size, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Bytes::from(vec![b'{'; usize::try_from(size).unwrap()]))
            });
            let mut response = Body::from_stream(chunks).into_response();
            if claim_length {
                response
                    .headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
            }
            response
        }
        Route::Trickle {
            bytes,
            every,
            dropped,
        } => {
            let guard = DropFlag(dropped);
            let trickle = futures::stream::iter(bytes).then(move |byte| {
                let _held = &guard;
                async move {
                    tokio::time::sleep(every).await;
                    Ok::<_, std::io::Error>(Bytes::from(vec![byte]))
                }
            });
            Body::from_stream(trickle).into_response()
        }
    }
}

/// Sets its flag when dropped: tells that the server stopped sending a body.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn skill_image(root: &Path, name: &str) -> PackedImage {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n"),
    )
    .unwrap();
    pack_skills(&[dir]).unwrap()
}

/// Routes serving `image` faithfully from `repository`.
fn faithful(repository: &str, image: &PackedImage) -> HashMap<String, Route> {
    HashMap::from([
        (
            format!("/v2/{repository}/manifests/{}", image.manifest_digest),
            Route::Bytes(image.manifest.clone()),
        ),
        (
            format!("/v2/{repository}/blobs/{}", image.layer_digest),
            Route::Bytes(image.layer.clone()),
        ),
    ])
}

#[tokio::test]
async fn a_digest_read_in_one_repository_does_not_vouch_for_another() {
    let root = tempfile::tempdir().unwrap();
    let image = skill_image(root.path(), "demo");
    let mut routes = faithful("good/skill", &image);
    // The other repository claims the digest when asked with HEAD, but has nothing to serve.
    routes.insert(
        format!("/v2/liar/skill/manifests/{}", image.manifest_digest),
        Route::HeadOnly,
    );
    let registry = FakeRegistry::start(routes).await;
    let opts = registry.options();
    let client = RegistryClient::new(opts.clone()).unwrap();
    let cache = SkillCache::new(16);

    let good = registry.pinned("good/skill", &image.manifest_digest);
    let content = cache
        .fetch_skill(&good, None, &ANONYMOUS, &client)
        .await
        .unwrap();
    assert_eq!(content.image, good);

    let liar = resolve_digest(
        &format!("{}/liar/skill@{}", registry.addr, image.manifest_digest),
        &ANONYMOUS,
        &opts,
    )
    .await
    .unwrap();
    assert_eq!(liar.repository, "liar/skill", "HEAD alone resolves");
    let error = cache
        .fetch_skill(&liar, None, &ANONYMOUS, &client)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "ImageNotFound", "{error}");
    let error = fetch_skill(&liar, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "ImageNotFound", "{error}");
    assert_eq!(cache.stats().misses, 2, "each repository is its own entry");
}

#[tokio::test]
async fn content_that_does_not_hash_to_its_digest_is_a_digest_mismatch() {
    let root = tempfile::tempdir().unwrap();
    let image = skill_image(root.path(), "demo");
    let other = skill_image(root.path(), "other");
    let mut corrupt_layer = image.layer.clone();
    *corrupt_layer.last_mut().unwrap() ^= 0xff;
    let mut routes = faithful("corrupt/layer", &image);
    routes.insert(
        format!("/v2/corrupt/layer/blobs/{}", image.layer_digest),
        Route::Bytes(corrupt_layer.clone()),
    );
    // Another image's manifest, served under this one's digest.
    routes.insert(
        format!("/v2/corrupt/manifest/manifests/{}", image.manifest_digest),
        Route::Bytes(other.manifest.clone()),
    );
    let registry = FakeRegistry::start(routes).await;
    let opts = registry.options();

    for (repository, expected, actual) in [
        ("corrupt/layer", &image.layer_digest, sha256(&corrupt_layer)),
        (
            "corrupt/manifest",
            &image.manifest_digest,
            other.manifest_digest.clone(),
        ),
    ] {
        let resolved = registry.pinned(repository, &image.manifest_digest);
        let error = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "DigestMismatch", "{error}");
        assert!(!error.is_transient(), "not a registry outage: {error}");
        let text = error.to_string();
        assert!(
            text.contains(&format!("{}/{repository}@{expected}", registry.addr)),
            "names the reference: {text}"
        );
        assert!(text.contains(&format!("expected {expected}")), "{text}");
        assert!(text.contains(&format!("got {actual}")), "{text}");
    }
}

#[tokio::test]
async fn oversized_manifests_are_refused_before_their_body_is_read() {
    let digest = sha256(b"a manifest that is never read whole");
    let claimed = Arc::new(AtomicU64::new(0));
    let chunked = Arc::new(AtomicU64::new(0));
    let tagged = Arc::new(AtomicU64::new(0));
    let routes = HashMap::from([
        (
            format!("/v2/huge/claimed/manifests/{digest}"),
            Route::Endless {
                length: 512 * 1024 * 1024,
                claim_length: true,
                sent: claimed.clone(),
            },
        ),
        (
            format!("/v2/huge/chunked/manifests/{digest}"),
            Route::Endless {
                length: 64 * 1024 * 1024,
                claim_length: false,
                sent: chunked.clone(),
            },
        ),
        (
            "/v2/huge/tagged/manifests/v1".to_string(),
            Route::Endless {
                length: 64 * 1024 * 1024,
                claim_length: false,
                sent: tagged.clone(),
            },
        ),
    ]);
    let registry = FakeRegistry::start(routes).await;
    let opts = registry.options();

    for (repository, sent) in [
        ("huge/claimed", &claimed),
        ("huge/chunked", &chunked),
        ("huge/tagged", &tagged),
    ] {
        let error = if repository == "huge/tagged" {
            // Resolving a tag reads the manifest when HEAD names no digest.
            resolve_digest(
                &format!("{}/{repository}:v1", registry.addr),
                &ANONYMOUS,
                &opts,
            )
            .await
            .unwrap_err()
        } else {
            fetch_skill(
                &registry.pinned(repository, &digest),
                None,
                &ANONYMOUS,
                &opts,
            )
            .await
            .unwrap_err()
        };
        assert_eq!(error.reason(), "ImageTooLarge", "{repository}: {error}");
        assert!(
            error
                .to_string()
                .contains(&agentic_oci::MAX_MANIFEST_BYTES.to_string()),
            "names the limit: {error}"
        );
        // Loopback socket buffers take several MiB before the server blocks; the body itself
        // (64 or 512 MiB) is never read.
        let sent = sent.load(Ordering::SeqCst);
        assert!(
            sent < 32 * 1024 * 1024,
            "{repository}: {sent} bytes left the server"
        );
    }
}

#[tokio::test]
async fn a_trickling_registry_is_cut_off_at_the_fetch_deadline() {
    let root = tempfile::tempdir().unwrap();
    let image = skill_image(root.path(), "demo");
    let dropped = Arc::new(AtomicBool::new(false));
    let mut routes = faithful("slow/skill", &image);
    routes.insert(
        format!("/v2/slow/skill/blobs/{}", image.layer_digest),
        Route::Trickle {
            bytes: image.layer.clone(),
            every: Duration::from_millis(50),
            dropped: dropped.clone(),
        },
    );
    let registry = FakeRegistry::start(routes).await;
    let opts = RegistryOptions {
        fetch_timeout: Duration::from_secs(1),
        ..registry.options()
    };
    assert!(
        image.layer.len() > 60,
        "the whole layer takes longer than the deadline"
    );

    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        fetch_skill(
            &registry.pinned("slow/skill", &image.manifest_digest),
            None,
            &ANONYMOUS,
            &opts,
        ),
    )
    .await
    .expect("the fetch deadline ends the read");
    let error = outcome.unwrap_err();
    assert_eq!(error.reason(), "RegistryUnavailable", "{error}");
    assert!(error.to_string().contains("fetch_timeout"), "{error}");
    assert!(error.is_transient());
    assert!(started.elapsed() < Duration::from_secs(5));

    // The layer reader on its blocking thread lets go too: the server sees the body dropped.
    for _ in 0..50 {
        if dropped.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the trickled layer is still being read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_registry_cannot_starve_the_reads_of_another() {
    let root = tempfile::tempdir().unwrap();
    let image = skill_image(root.path(), "demo");
    let mut routes = faithful("slow/skill", &image);
    routes.insert(
        format!("/v2/slow/skill/blobs/{}", image.layer_digest),
        Route::Trickle {
            bytes: image.layer.clone(),
            every: Duration::from_millis(200),
            dropped: Arc::new(AtomicBool::new(false)),
        },
    );
    let slow = FakeRegistry::start(routes).await;
    let fast = FakeRegistry::start(faithful("fast/skill", &image)).await;
    let slow_opts = RegistryOptions {
        fetch_timeout: Duration::from_secs(20),
        ..slow.options()
    };
    // More slow reads than there are layer readers in the whole process.
    let stuck: Vec<_> = (0..6)
        .map(|_| {
            let pinned = slow.pinned("slow/skill", &image.manifest_digest);
            let opts = slow_opts.clone();
            tokio::spawn(async move { fetch_skill(&pinned, None, &ANONYMOUS, &opts).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let started = Instant::now();
    let skill = tokio::time::timeout(
        Duration::from_secs(5),
        fetch_skill(
            &fast.pinned("fast/skill", &image.manifest_digest),
            None,
            &ANONYMOUS,
            &fast.options(),
        ),
    )
    .await
    .expect("the fast registry is read while the slow one trickles")
    .expect("the skill is read");
    assert_eq!(skill.path, "SKILL.md");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        stuck.iter().all(|read| !read.is_finished()),
        "the slow reads are still in progress"
    );
    for read in stuck {
        read.abort();
    }
}

#[tokio::test]
async fn the_default_fetch_deadline_is_a_minute() {
    assert_eq!(
        RegistryOptions::default().fetch_timeout,
        Duration::from_secs(60)
    );
}
