//! Talking to registries: resolving tags to digests, reading skills from images, pushing.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt as _, future};
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::{Client, Reference};
use serde::Deserialize;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::io::{StreamReader, SyncIoBridge};

use crate::error::bounded;
use crate::layers::{LayerBlob, Listing, Located, SkillFile, SkillLocator, validate_sub_path};
use crate::limits::{MAX_DESCRIPTORS, MAX_MANIFEST_BYTES};
use crate::pack::{MANIFEST_MEDIA_TYPE, PackedImage, sha256_digest};
use crate::{Limits, OciError, RegistryAuth};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for any one read from the registry.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`RegistryOptions::fetch_timeout`].
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Layers decoded at once, process-wide: decoding runs on blocking threads, which must not
/// pile up behind slow registries.
static LAYER_READERS: Semaphore = Semaphore::const_new(4);
/// Layers decoded at once from one registry: a slow or hostile registry holds at most this
/// many of the [`LAYER_READERS`], so reads from every other registry go on meanwhile.
const LAYER_READERS_PER_REGISTRY: usize = 2;
/// The per-registry share of [`LAYER_READERS`], by `host[:port]`; a registry's entry goes
/// once no read holds or waits for it, so hostile names cannot grow the map.
static REGISTRY_READERS: LazyLock<Mutex<HashMap<String, Arc<Semaphore>>>> =
    LazyLock::new(Mutex::default);
const USER_AGENT: &str = concat!("agentic-operator/", env!("CARGO_PKG_VERSION"));

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const ACCEPTED_MANIFESTS: [&str; 4] = [
    MANIFEST_MEDIA_TYPE,
    DOCKER_MANIFEST,
    OCI_INDEX,
    DOCKER_MANIFEST_LIST,
];
/// Layer media types read; the bytes themselves decide between gzip and plain tar.
const ACCEPTED_LAYERS: [&str; 4] = [
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
];

/// How long a pull authorization (a registry's bearer token, or its word that none is
/// needed) is used again for the same repository and credentials. The distribution spec
/// gives tokens at least 60 s to live; this stays under that without reading their expiry.
const AUTHORIZATION_REUSE: Duration = Duration::from_secs(50);
/// How long the client of credentials nobody used is kept.
const CLIENT_IDLE: Duration = Duration::from_secs(300);

/// Registry requests made through one [`RegistryClient`], for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// Requests sent: manifests, blobs, and each authorization (the `/v2/` challenge with
    /// its token exchange, when one is needed) as one.
    pub requests: u64,
    /// Those among them that failed.
    pub failed_requests: u64,
}

/// The way to registries that every image read of a process shares: pooled connections,
/// pull authorizations reused for [`AUTHORIZATION_REUSE`] per repository and credentials,
/// and the request counts. Cheap to clone; the operator keeps one for all its controllers,
/// and the free functions of this crate ([`resolve_digest`], [`fetch_skill`], …) make one
/// per call.
#[derive(Clone)]
pub struct RegistryClient {
    shared: Arc<Shared>,
}

/// One finished registry request, as a [`RegistryClient`] reports it to its observer.
#[derive(Debug, Clone, Copy)]
pub struct RegistryRequest<'a> {
    /// `host[:port]`, as the image reference names it.
    pub registry: &'a str,
    /// False when the request failed, was refused or went unanswered.
    pub ok: bool,
    /// From sending it to its answer (for a layer, to the start of its body).
    pub took: Duration,
}

/// What a [`RegistryClient`] tells of each request it makes (metrics, for the operator).
pub type RegistryObserver = Arc<dyn Fn(&RegistryRequest<'_>) + Send + Sync>;

/// What [`RegistryClient::fetch_artifact`] reads from a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactRequest<'a> {
    /// A manifest or index, by tag or by digest (a digest is checked against the bytes).
    Manifest(&'a str),
    /// A blob, by digest (checked against the bytes).
    Blob(&'a str),
    /// The OCI referrers API's index of the manifests whose `subject` is this digest.
    Referrers(&'a str),
}

/// How many bytes [`RegistryClient::fetch_artifact`] may read, and the name of that limit
/// for errors (e.g. `MAX_SIGNATURE_MANIFEST_BYTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimit<'a> {
    pub max_bytes: u64,
    pub name: &'a str,
}

/// What [`RegistryClient::fetch_artifact`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub bytes: Vec<u8>,
    /// `sha256:…` of `bytes`.
    pub digest: String,
}

struct Shared {
    options: RegistryOptions,
    observer: Option<RegistryObserver>,
    /// Manifest requests to every registry, whatever the credentials: it pools connections
    /// only, and each request carries its own authorization.
    http: reqwest::Client,
    /// Layer reads and pushes go through oci-client, one client per registry and
    /// credentials: its token cache is keyed by repository alone, so two credentials must
    /// never share one.
    clients: Mutex<HashMap<CredentialKey, Authorizations>>,
    requests: AtomicU64,
    failed_requests: AtomicU64,
}

/// The registry (`host[:port]`) and the credentials' fingerprint.
type CredentialKey = (String, [u8; 32]);

struct Authorizations {
    client: Client,
    last_used: Instant,
    /// Pull authorizations by repository, with when each was asked for.
    by_repository: HashMap<String, (Instant, Credentials)>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("options", &self.shared.options)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl RegistryClient {
    /// A client for reads and pushes within `options`.
    pub fn new(options: RegistryOptions) -> Result<RegistryClient, OciError> {
        RegistryClient::build(options, None)
    }

    /// Like [`RegistryClient::new`], telling `observer` of every request.
    pub fn observed(
        options: RegistryOptions,
        observer: RegistryObserver,
    ) -> Result<RegistryClient, OciError> {
        RegistryClient::build(options, Some(observer))
    }

    fn build(
        options: RegistryOptions,
        observer: Option<RegistryObserver>,
    ) -> Result<RegistryClient, OciError> {
        // The workspace builds rustls with ring only (the Kubernetes client's provider); make it
        // the process default unless the program chose one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|error| OciError::Internal {
                message: format!("cannot build the registry client: {error}"),
            })?;
        Ok(RegistryClient {
            shared: Arc::new(Shared {
                options,
                observer,
                http,
                clients: Mutex::default(),
                requests: AtomicU64::new(0),
                failed_requests: AtomicU64::new(0),
            }),
        })
    }

    /// The options it was made with.
    pub fn options(&self) -> &RegistryOptions {
        &self.shared.options
    }

    /// The requests made through this client (and its clones) so far.
    pub fn stats(&self) -> RegistryStats {
        RegistryStats {
            requests: self.shared.requests.load(Ordering::Relaxed),
            failed_requests: self.shared.failed_requests.load(Ordering::Relaxed),
        }
    }
}

/// How to reach registries and how much reading an image may cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// Registries (`host:port`, as written in image references) served over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Bounds on reading one image.
    pub limits: Limits,
    /// Longest time one [`fetch_skill`] or [`resolve_digest`] may take, all requests and
    /// layer decoding included; past it the read fails as
    /// [`OciError::RegistryUnavailable`]. Default 60 s.
    pub fetch_timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            insecure_registries: Vec::new(),
            limits: Limits::default(),
            fetch_timeout: FETCH_TIMEOUT,
        }
    }
}

/// An image pinned by digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedImage {
    /// `host[:port]/repository@sha256:…`: what pods reference.
    pub repository_with_digest: String,
    /// `sha256:…` of the manifest (or of the index, for multi-platform images).
    pub digest: String,
    /// `host[:port]` of the registry.
    pub registry: String,
    /// The repository path inside the registry.
    pub repository: String,
}

impl ResolvedImage {
    /// Reads back a `host/repository@sha256:…` reference (a tag may be present too) without
    /// asking the registry, e.g. a digest recorded in a status earlier.
    pub fn from_pinned(reference: &str) -> Result<ResolvedImage, OciError> {
        let parsed = parse_reference(reference)?;
        let Some(digest) = parsed.digest() else {
            return Err(OciError::InvalidReference {
                reference: reference.to_string(),
                message: "it is not pinned by digest".to_string(),
            });
        };
        Ok(ResolvedImage::new(&parsed, digest))
    }

    /// The image `repository` (`host/path`, a tag allowed) at `digest` (`sha256:…`): a pin
    /// its caller has already told apart from a tag, such as `agentic_core::pin::Pin::Image`,
    /// without asking the registry. Both parts are checked.
    pub fn at_digest(repository: &str, digest: &str) -> Result<ResolvedImage, OciError> {
        let reference = format!("{repository}@{digest}");
        let parsed = parse_reference(&reference)?;
        if parsed.digest() != Some(digest) {
            return Err(OciError::InvalidReference {
                reference,
                message: "the repository names a digest of its own".to_string(),
            });
        }
        Ok(ResolvedImage::new(&parsed, digest))
    }

    fn new(parsed: &Reference, digest: &str) -> ResolvedImage {
        ResolvedImage {
            repository_with_digest: format!(
                "{}/{}@{digest}",
                parsed.registry(),
                parsed.repository()
            ),
            digest: digest.to_string(),
            registry: parsed.registry().to_string(),
            repository: parsed.repository().to_string(),
        }
    }

    fn reference(&self) -> Reference {
        Reference::with_digest(
            self.registry.clone(),
            self.repository.clone(),
            self.digest.clone(),
        )
    }
}

/// A skill read from an image: its `SKILL.md` and the validation report.
#[derive(Clone)]
pub struct SkillContent {
    /// The image it was read from.
    pub image: ResolvedImage,
    /// The `subPath` it was read with.
    pub sub_path: Option<String>,
    /// Where `SKILL.md` is inside the image.
    pub path: String,
    /// The `SKILL.md` bytes, at most [`agentic_skill::MAX_SKILL_MD_BYTES`].
    pub skill_md: Vec<u8>,
    /// The validation report: always valid here (invalid skills are
    /// [`SkillVerdict::InvalidSkill`](agentic_skill::SkillVerdict::InvalidSkill)), possibly with warnings.
    pub report: agentic_skill::Report,
    /// Top-level directories of the image that hold a `SKILL.md`, sorted; only the first
    /// [`MAX_LISTED_DIRECTORIES`](crate::MAX_LISTED_DIRECTORIES).
    pub skill_dirs: Vec<String>,
    /// How many top-level directories hold a `SKILL.md`.
    pub skill_dir_count: usize,
}

impl std::fmt::Debug for SkillContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillContent")
            .field("image", &self.image.repository_with_digest)
            .field("sub_path", &self.sub_path)
            .field("path", &self.path)
            .field("skill_md_bytes", &self.skill_md.len())
            .field("report", &self.report.summary())
            .field("skill_dirs", &self.skill_dirs)
            .field("skill_dir_count", &self.skill_dir_count)
            .finish()
    }
}

/// The registry (`host[:port]`) an image reference points at, as docker config keys name it;
/// `docker.io` for references without a registry.
pub fn image_registry(reference: &str) -> Result<String, OciError> {
    Ok(parse_reference(reference)?.registry().to_string())
}

/// Resolves `reference` to the digest it points at now, through a client of its own; see
/// [`RegistryClient::resolve_digest`].
pub async fn resolve_digest(
    reference: &str,
    auth: &RegistryAuth,
    opts: &RegistryOptions,
) -> Result<ResolvedImage, OciError> {
    RegistryClient::new(opts.clone())?
        .resolve_digest(reference, auth)
        .await
}

/// Reads and validates the skill of an image, through a client of its own; see
/// [`RegistryClient::fetch_skill`].
pub async fn fetch_skill(
    resolved: &ResolvedImage,
    sub_path: Option<&str>,
    auth: &RegistryAuth,
    opts: &RegistryOptions,
) -> Result<SkillContent, OciError> {
    RegistryClient::new(opts.clone())?
        .fetch_skill(resolved, sub_path, auth)
        .await
}

/// A skill with its files, through a client of its own; see [`RegistryClient::pull_skill`].
pub async fn pull_skill(
    resolved: &ResolvedImage,
    sub_path: Option<&str>,
    auth: &RegistryAuth,
    opts: &RegistryOptions,
) -> Result<(SkillContent, Vec<SkillFile>), OciError> {
    RegistryClient::new(opts.clone())?
        .pull_skill(resolved, sub_path, auth)
        .await
}

/// The skills of an image, through a client of its own; see [`RegistryClient::list_skills`].
pub async fn list_skills(
    resolved: &ResolvedImage,
    auth: &RegistryAuth,
    opts: &RegistryOptions,
) -> Result<SkillListing, OciError> {
    RegistryClient::new(opts.clone())?
        .list_skills(resolved, auth)
        .await
}

/// The skills an image holds, as [`list_skills`] found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillListing {
    /// The image they were read from.
    pub image: ResolvedImage,
    /// A `SKILL.md` at the image root: the image is one skill, read without a `subPath`.
    pub root: bool,
    /// Otherwise, every top-level directory holding a `SKILL.md`, sorted: one skill each,
    /// read with the directory as `subPath`. Empty (and `root` false): no skill at all.
    pub directories: Vec<String>,
}

impl RegistryClient {
    /// Resolves `reference` to the digest it points at now. A reference already pinned by
    /// digest resolves to itself once the registry confirms it has the manifest.
    ///
    /// For a multi-platform image the digest is the index's: each node then mounts its own
    /// platform's manifest.
    pub async fn resolve_digest(
        &self,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<ResolvedImage, OciError> {
        let parsed = parse_reference(reference)?;
        let digest = self
            .within(reference, parsed.clone(), auth, |session| async move {
                session.resolve(reference).await
            })
            .await?;
        tracing::debug!(%reference, %digest, "resolved image");
        Ok(ResolvedImage::new(&parsed, &digest))
    }

    /// Reads and validates the skill of an image: `SKILL.md` at the image root, or under
    /// `sub_path` (validated with the last segment of `sub_path` as the expected name).
    ///
    /// An image index is valid only if every platform manifest it lists (attestations aside)
    /// is, and they all carry the same `SKILL.md`: each node mounts its own platform's
    /// manifest. Every manifest, index and layer is checked against its digest before it is
    /// used; manifests and indexes are refused past
    /// [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES) before their body is read. Layers
    /// are streamed in order, gzip or plain tar, with OCI whiteouts applied; memory and work
    /// stay within [`RegistryOptions::limits`], time within [`RegistryOptions::fetch_timeout`].
    ///
    /// Errors: [`OciError::SubPathRequired`] for a multi-skill image read without `sub_path`,
    /// [`SkillVerdict::SkillNotFound`](agentic_skill::SkillVerdict::SkillNotFound), [`SkillVerdict::InvalidSkill`](agentic_skill::SkillVerdict::InvalidSkill) (the report's summary),
    /// [`OciError::NestedSkillFile`] for a `SKILL.md` below the skill's root and
    /// [`OciError::LinkInSkill`] for a symlink or hardlink inside it (in any layer),
    /// [`OciError::UnsafeImageContent`] for path traversal, device nodes, or symlinks and
    /// hardlinks at `SKILL.md` or along its path, [`OciError::ImageTooLarge`],
    /// [`OciError::DigestMismatch`], and the registry errors ([`OciError::ImageNotFound`],
    /// [`OciError::Unauthorized`], [`OciError::RegistryUnavailable`], …).
    pub async fn fetch_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        auth: &RegistryAuth,
    ) -> Result<SkillContent, OciError> {
        self.read_skill(resolved, sub_path, auth, false)
            .await
            .map(|(content, _)| content)
    }

    /// Like [`RegistryClient::fetch_skill`], with every regular file of the skill directory,
    /// sorted by path (the `SKILL.md` among them), for writing it to disk
    /// (`agentic-operator skill pull`). The same limits and checks apply. Of an
    /// image index, the files of the first platform's manifest are returned; every platform
    /// must carry the same `SKILL.md`, as for [`RegistryClient::fetch_skill`].
    pub async fn pull_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        auth: &RegistryAuth,
    ) -> Result<(SkillContent, Vec<SkillFile>), OciError> {
        self.read_skill(resolved, sub_path, auth, true).await
    }

    async fn read_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        auth: &RegistryAuth,
        collect: bool,
    ) -> Result<(SkillContent, Vec<SkillFile>), OciError> {
        if let Some(sub_path) = sub_path {
            validate_sub_path(sub_path)?;
        }
        self.within(
            &resolved.repository_with_digest,
            resolved.reference(),
            auth,
            |session| async move { session.read_skill(resolved, sub_path, collect).await },
        )
        .await
    }

    /// Lists the skills of an image through the registry API, within the same limits,
    /// digest checks and deadline as [`RegistryClient::fetch_skill`], without validating any
    /// of them: that is for the reader of each skill (with its directory as `subPath`). An
    /// image index must carry the same skills on every platform it lists. More skill
    /// directories than [`Limits::max_skills`](crate::Limits::max_skills) is
    /// [`OciError::TooManySkills`]: memory stays within the same bound as a read's.
    pub async fn list_skills(
        &self,
        resolved: &ResolvedImage,
        auth: &RegistryAuth,
    ) -> Result<SkillListing, OciError> {
        self.within(
            &resolved.repository_with_digest,
            resolved.reference(),
            auth,
            |session| async move { session.list_skills(resolved).await },
        )
        .await
    }

    /// Reads one small artifact of `image`'s repository: a manifest by tag or digest, a blob,
    /// or the referrers API's index of a digest (what signature verification reads). At
    /// most `limit.max_bytes`, refused by `Content-Length` before the body is read and while
    /// reading; content named by digest is checked against it. `Ok(None)` when the registry
    /// has no such thing (404; for referrers, a registry without the referrers API). Within
    /// [`RegistryOptions::fetch_timeout`], through the same authorizations as image reads.
    pub async fn fetch_artifact(
        &self,
        image: &ResolvedImage,
        request: ArtifactRequest<'_>,
        limit: ArtifactLimit<'_>,
        auth: &RegistryAuth,
    ) -> Result<Option<Artifact>, OciError> {
        let label = match request {
            ArtifactRequest::Manifest(name) => {
                format!("{}/{}:{name}", image.registry, image.repository)
            }
            ArtifactRequest::Blob(digest) | ArtifactRequest::Referrers(digest) => {
                format!("{}/{}@{digest}", image.registry, image.repository)
            }
        };
        let read = self
            .within(&label, image.reference(), auth, |session| {
                let label = label.clone();
                async move { session.fetch_artifact(request, limit, &label).await }
            })
            .await;
        match read {
            Ok(artifact) => Ok(Some(artifact)),
            Err(OciError::ImageNotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Opens a session on `reference` and runs `work` in it, the two together within
    /// [`RegistryOptions::fetch_timeout`].
    async fn within<T, F, Fut>(
        &self,
        image: &str,
        reference: Reference,
        auth: &RegistryAuth,
        work: F,
    ) -> Result<T, OciError>
    where
        F: FnOnce(Session) -> Fut,
        Fut: Future<Output = Result<T, OciError>>,
    {
        let timeout = self.shared.options.fetch_timeout;
        let deadline = Instant::now() + timeout;
        let read = async {
            let session = Session::open(&self.shared, reference, image, auth, deadline).await?;
            work(session).await
        };
        tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| OciError::RegistryUnavailable {
                image: image.to_string(),
                message: format!(
                    "the registry did not answer within {timeout:?} (RegistryOptions::fetch_timeout)"
                ),
            })?
    }
}

/// What reading one image needs: the clients, the credentials and the deadline.
struct Session {
    shared: Arc<Shared>,
    /// The repository read; its tag or digest names the first manifest.
    reference: Reference,
    limits: Limits,
    deadline: Instant,
    /// Layers go through oci-client, which verifies them and keeps the token for them.
    client: Client,
    scheme: &'static str,
    /// What manifest requests (read apart, where their size can be bounded before the body
    /// is read) authenticate with.
    credentials: Credentials,
}

#[derive(Clone)]
enum Credentials {
    None,
    Bearer(String),
    Basic { username: String, password: String },
}

impl Shared {
    /// The client for `auth` at `registry`, with the pull authorization for `repository`
    /// when one was asked for within [`AUTHORIZATION_REUSE`]. Forgets what has not been used
    /// for longer than that (authorizations) or [`CLIENT_IDLE`] (clients).
    fn client_for(
        &self,
        key: &CredentialKey,
        repository: &str,
    ) -> Result<(Client, Option<Credentials>), OciError> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|_, entry| entry.last_used.elapsed() < CLIENT_IDLE);
        let entry = match clients.entry(key.clone()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(vacant) => vacant.insert(Authorizations {
                client: layer_client(&self.options)?,
                last_used: Instant::now(),
                by_repository: HashMap::new(),
            }),
        };
        entry.last_used = Instant::now();
        entry
            .by_repository
            .retain(|_, (asked, _)| asked.elapsed() < AUTHORIZATION_REUSE);
        let reused = entry
            .by_repository
            .get(repository)
            .map(|(_, credentials)| credentials.clone());
        Ok((entry.client.clone(), reused))
    }

    /// Keeps the pull authorization asked for at `asked` for reuse.
    fn remember(
        &self,
        key: &CredentialKey,
        repository: &str,
        asked: Instant,
        credentials: &Credentials,
    ) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = clients.get_mut(key) {
            entry
                .by_repository
                .insert(repository.to_string(), (asked, credentials.clone()));
        }
    }

    /// Runs one request to `registry`, counts it and tells the observer.
    async fn counted<T, E>(
        &self,
        registry: &str,
        request: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let sent = Instant::now();
        let result = request.await;
        if result.is_err() {
            self.failed_requests.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(observer) = &self.observer {
            observer(&RegistryRequest {
                registry,
                ok: result.is_ok(),
                took: sent.elapsed(),
            });
        }
        result
    }
}

impl Session {
    async fn open(
        shared: &Arc<Shared>,
        reference: Reference,
        image: &str,
        auth: &RegistryAuth,
        deadline: Instant,
    ) -> Result<Session, OciError> {
        let key = (reference.registry().to_string(), auth.fingerprint());
        let (client, reused) = shared.client_for(&key, reference.repository())?;
        let credentials = match reused {
            Some(credentials) => credentials,
            None => {
                let asked = Instant::now();
                // Also stores the token for the layer requests made through `client`.
                let token = shared
                    .counted(
                        reference.registry(),
                        client.auth(&reference, &auth.to_client_auth(), RegistryOperation::Pull),
                    )
                    .await
                    .map_err(|error| registry_error(error, image))?;
                let credentials = match (token, auth) {
                    (Some(token), _) => Credentials::Bearer(token),
                    (None, RegistryAuth::Basic { username, password }) => Credentials::Basic {
                        username: username.clone(),
                        password: password.clone(),
                    },
                    (None, RegistryAuth::Anonymous) => Credentials::None,
                };
                shared.remember(&key, reference.repository(), asked, &credentials);
                credentials
            }
        };
        let insecure = shared
            .options
            .insecure_registries
            .iter()
            .any(|registry| registry == reference.registry());
        Ok(Session {
            shared: Arc::clone(shared),
            reference,
            limits: shared.options.limits,
            deadline,
            client,
            scheme: if insecure { "http" } else { "https" },
            credentials,
        })
    }

    /// The digest the reference points at: the registry's `Docker-Content-Digest` on HEAD,
    /// or the digest of the (bounded) manifest when the registry sends none.
    async fn resolve(&self, image: &str) -> Result<String, OciError> {
        let pinned = self.reference.digest();
        let wanted = pinned
            .or(self.reference.tag())
            .unwrap_or("latest")
            .to_string();
        let head = self
            .shared
            .counted(
                self.reference.registry(),
                self.manifest_request(reqwest::Method::HEAD, &wanted).send(),
            )
            .await
            .map_err(|error| unavailable(image, &error))?;
        let status = head.status();
        if !status.is_success() {
            return Err(by_status(
                status.as_u16(),
                image.to_string(),
                format!("looking up the manifest: {status}"),
            ));
        }
        let claimed = head
            .headers()
            .get("docker-content-digest")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let digest = match claimed {
            Some(digest) => digest,
            None => {
                let request = self.manifest_request(reqwest::Method::GET, &wanted);
                sha256_digest(
                    &self
                        .shared
                        .counted(self.reference.registry(), read_bounded(request, image))
                        .await?,
                )
            }
        };
        check_digest(&digest, image)?;
        match pinned {
            Some(pinned) if pinned != digest => Err(OciError::DigestMismatch {
                reference: image.to_string(),
                expected: pinned.to_string(),
                actual: digest,
            }),
            _ => Ok(digest),
        }
    }

    async fn read_skill(
        &self,
        resolved: &ResolvedImage,
        sub_path: Option<&str>,
        collect: bool,
    ) -> Result<(SkillContent, Vec<SkillFile>), OciError> {
        let image = &resolved.repository_with_digest;
        let document = self.pull_manifest(&resolved.digest, image).await?;
        let (located, report) = if document.is_index() {
            let mut first: Option<(String, Located, agentic_skill::Report)> = None;
            let mut read: Vec<&str> = Vec::new();
            for entry in platform_manifests(&document.manifests, &self.limits, image)? {
                if read.contains(&entry.digest.as_str()) {
                    continue;
                }
                read.push(&entry.digest);
                let platform = entry.platform_name();
                let label = format!(
                    "{}/{}@{} ({platform} in {image})",
                    resolved.registry, resolved.repository, entry.digest
                );
                let manifest = self.pull_manifest(&entry.digest, &label).await?;
                if manifest.is_index() {
                    return Err(OciError::invalid_image(format!(
                        "{label}: an index inside an index is not supported"
                    )));
                }
                let (located, report) = self
                    .read_manifest_skill(&manifest, sub_path, collect, &label)
                    .await
                    .map_err(|error| on_platform(error, &platform))?;
                match &first {
                    None => first = Some((platform, located, report)),
                    Some((first_platform, kept, _))
                        if kept.path != located.path || kept.skill_md != located.skill_md =>
                    {
                        return Err(OciError::invalid_image(format!(
                            "{image}: the {platform} manifest carries another {} than the {first_platform} one; every platform must carry the same skill",
                            located.path
                        )));
                    }
                    Some(_) => {}
                }
            }
            let (_, located, report) = first.ok_or_else(|| {
                OciError::invalid_image(format!("{image}: the image index lists no manifest"))
            })?;
            (located, report)
        } else {
            self.read_manifest_skill(&document, sub_path, collect, image)
                .await?
        };
        let content = SkillContent {
            image: resolved.clone(),
            sub_path: sub_path.map(str::to_string),
            path: located.path,
            skill_md: located.skill_md,
            report,
            skill_dirs: located.skill_dirs,
            skill_dir_count: located.skill_dir_count,
        };
        Ok((content, located.files))
    }

    async fn fetch_artifact(
        &self,
        request: ArtifactRequest<'_>,
        limit: ArtifactLimit<'_>,
        label: &str,
    ) -> Result<Artifact, OciError> {
        let (http, what, expected) = match request {
            ArtifactRequest::Manifest(name) => {
                let pinned = name.starts_with("sha256:").then_some(name);
                if let Some(digest) = pinned {
                    check_digest(digest, label)?;
                }
                (
                    self.manifest_request(reqwest::Method::GET, name),
                    "manifest",
                    pinned,
                )
            }
            ArtifactRequest::Blob(digest) => {
                check_digest(digest, label)?;
                (
                    self.authorized_get("blobs", digest, "*/*"),
                    "blob",
                    Some(digest),
                )
            }
            ArtifactRequest::Referrers(digest) => {
                check_digest(digest, label)?;
                (
                    self.authorized_get("referrers", digest, OCI_INDEX),
                    "referrers index",
                    None,
                )
            }
        };
        let bytes = self
            .shared
            .counted(
                self.reference.registry(),
                read_capped(http, label, what, limit.max_bytes, limit.name),
            )
            .await?;
        let digest = sha256_digest(&bytes);
        if let Some(expected) = expected
            && expected != digest
        {
            return Err(OciError::DigestMismatch {
                reference: label.to_string(),
                expected: expected.to_string(),
                actual: digest,
            });
        }
        Ok(Artifact { bytes, digest })
    }

    /// A GET of `/v2/<repository>/<endpoint>/<digest>` with the session's credentials.
    fn authorized_get(
        &self,
        endpoint: &str,
        digest: &str,
        accept: &str,
    ) -> reqwest::RequestBuilder {
        self.repository_request(
            reqwest::Method::GET,
            &format!("{endpoint}/{digest}"),
            accept,
        )
    }

    /// A request for `/v2/<repository>/<path>` with the session's credentials.
    fn repository_request(
        &self,
        method: reqwest::Method,
        path: &str,
        accept: &str,
    ) -> reqwest::RequestBuilder {
        let url = format!(
            "{}://{}/v2/{}/{path}",
            self.scheme,
            self.reference.resolve_registry(),
            self.reference.repository()
        );
        self.authorized(
            self.shared
                .http
                .request(method, &url)
                .header(http::header::ACCEPT, accept),
        )
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.credentials {
            Credentials::None => request,
            Credentials::Bearer(token) => request.bearer_auth(token),
            Credentials::Basic { username, password } => {
                request.basic_auth(username, Some(password))
            }
        }
    }

    /// A request for the manifest named `tag_or_digest` in the session's repository.
    fn manifest_request(
        &self,
        method: reqwest::Method,
        tag_or_digest: &str,
    ) -> reqwest::RequestBuilder {
        self.repository_request(
            method,
            &format!("manifests/{tag_or_digest}"),
            &ACCEPTED_MANIFESTS.join(", "),
        )
    }

    /// Reads a manifest by digest: at most [`MAX_MANIFEST_BYTES`], verified against `digest`.
    async fn pull_manifest(&self, digest: &str, image: &str) -> Result<ManifestDocument, OciError> {
        check_digest(digest, image)?;
        let request = self.manifest_request(reqwest::Method::GET, digest);
        let body = self
            .shared
            .counted(self.reference.registry(), read_bounded(request, image))
            .await?;
        let actual = sha256_digest(&body);
        if actual != digest {
            return Err(OciError::DigestMismatch {
                reference: image.to_string(),
                expected: digest.to_string(),
                actual,
            });
        }
        parse_manifest(&body, image)
    }

    /// Streams the layers of `manifest` and validates the `SKILL.md` found.
    async fn read_manifest_skill(
        &self,
        manifest: &ManifestDocument,
        sub_path: Option<&str>,
        collect: bool,
        image: &str,
    ) -> Result<(Located, agentic_skill::Report), OciError> {
        let locator = self.read_layers(manifest, sub_path, collect, image).await?;
        let located = locator.finish()?;
        tracing::debug!(%image, path = %located.path, layers = manifest.layers.total, "read SKILL.md from image");
        let expected_name = sub_path.and_then(|sub_path| sub_path.rsplit('/').next());
        let report = agentic_skill::validate_skill_md(&located.skill_md, expected_name);
        if !report.is_valid() {
            return Err(OciError::invalid_skill(located.path, &report));
        }
        Ok((located, report))
    }

    /// Where the skills of the image are: every platform manifest of an index is read and
    /// must list the same skills.
    async fn list_skills(&self, resolved: &ResolvedImage) -> Result<SkillListing, OciError> {
        let image = &resolved.repository_with_digest;
        let document = self.pull_manifest(&resolved.digest, image).await?;
        let listing = if document.is_index() {
            let mut first: Option<(String, Listing)> = None;
            for entry in platform_manifests(&document.manifests, &self.limits, image)? {
                let platform = entry.platform_name();
                let label = format!(
                    "{}/{}@{} ({platform} in {image})",
                    resolved.registry, resolved.repository, entry.digest
                );
                let manifest = self.pull_manifest(&entry.digest, &label).await?;
                if manifest.is_index() {
                    return Err(OciError::invalid_image(format!(
                        "{label}: an index inside an index is not supported"
                    )));
                }
                let listing = self
                    .read_layers(&manifest, None, false, &label)
                    .await
                    .and_then(|locator| locator.listing())
                    .map_err(|error| on_platform(error, &platform))?;
                match &first {
                    None => first = Some((platform, listing)),
                    Some((first_platform, kept)) if *kept != listing => {
                        return Err(OciError::invalid_image(format!(
                            "{image}: the {platform} manifest holds other skills than the {first_platform} one; every platform must carry the same skills"
                        )));
                    }
                    Some(_) => {}
                }
            }
            first.map(|(_, listing)| listing).ok_or_else(|| {
                OciError::invalid_image(format!("{image}: the image index lists no manifest"))
            })?
        } else {
            self.read_layers(&document, None, false, image)
                .await?
                .listing()?
        };
        Ok(SkillListing {
            image: resolved.clone(),
            root: listing.root,
            directories: listing.directories,
        })
    }

    /// Streams the manifest's layers, bottom to top, through a [`SkillLocator`].
    async fn read_layers(
        &self,
        manifest: &ManifestDocument,
        sub_path: Option<&str>,
        collect: bool,
        image: &str,
    ) -> Result<SkillLocator, OciError> {
        check_layers(&manifest.layers, &self.limits, image)?;
        let reference = &self.reference;
        let mut locator = SkillLocator::new(sub_path, self.limits);
        if collect {
            locator = locator.collecting();
        }
        for layer in &manifest.layers.kept {
            let blob = LayerBlob {
                name: format!(
                    "{}/{}@{}",
                    reference.registry(),
                    reference.repository(),
                    layer.digest
                ),
                digest: layer.digest.clone(),
                size: layer.size,
            };
            // Only the digest is passed on: foreign-layer `urls` are never followed.
            let sized = self
                .shared
                .counted(
                    reference.registry(),
                    self.client
                        .pull_blob_stream(reference, layer.digest.as_str()),
                )
                .await
                .map_err(|error| registry_error(error, &blob.name))?;
            // oci-client verifies the digest too, but reports a mismatch as an opaque I/O error
            // at the end of the stream; ending the stream there lets our own check name it.
            let stream = sized.stream.take_while(|item| {
                let digest_failure = item
                    .as_ref()
                    .err()
                    .and_then(|error| error.get_ref())
                    .is_some_and(
                    <dyn std::error::Error + std::marker::Send + std::marker::Sync + 'static>::is::<
                        DigestError,
                    >,
                );
                future::ready(!digest_failure)
            });
            let reader = SyncIoBridge::new(StreamReader::new(until(self.deadline, stream)));
            let closed = |error: tokio::sync::AcquireError| OciError::Internal {
                message: format!("layer readers closed: {error}"),
            };
            // Always the registry's share first, then the process-wide permit: one order, so
            // no two reads can each hold what the other waits for.
            let share = registry_readers(reference.registry())
                .acquire_owned()
                .await
                .map_err(closed)?;
            let permit = LAYER_READERS.acquire().await.map_err(closed)?;
            locator = tokio::task::spawn_blocking(move || {
                let _permits = (share, permit);
                locator.apply_layer(reader, &blob).map(|()| locator)
            })
            .await
            .map_err(|error| OciError::Internal {
                message: format!("layer reader task failed: {error}"),
            })??;
        }
        Ok(locator)
    }
}

/// The semaphore of `registry`'s share of the layer readers.
fn registry_readers(registry: &str) -> Arc<Semaphore> {
    let mut shares = REGISTRY_READERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Only the map holds an idle registry's semaphore: no read holds or awaits a permit.
    shares.retain(|_, share| Arc::strong_count(share) > 1);
    shares
        .entry(registry.to_owned())
        .or_insert_with(|| Arc::new(Semaphore::new(LAYER_READERS_PER_REGISTRY)))
        .clone()
}

/// Ends `stream` with a `TimedOut` error at `deadline`. The blocking layer reader drains the
/// stream; this is what stops it when a registry trickles bytes (dropping the task's handle
/// would not).
fn until<S>(deadline: Instant, stream: S) -> impl Stream<Item = io::Result<bytes::Bytes>> + Unpin
where
    S: Stream<Item = io::Result<bytes::Bytes>> + Unpin,
{
    Box::pin(futures::stream::unfold(
        Some(stream),
        move |state| async move {
            let mut stream = state?;
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(item)) => Some((item, Some(stream))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the image fetch deadline passed (RegistryOptions::fetch_timeout)",
                    )),
                    None,
                )),
            }
        },
    ))
}

/// Sends `request` and reads the body, refusing more than [`MAX_MANIFEST_BYTES`]: by
/// `Content-Length` before reading, and while reading when there is none or it lies.
async fn read_bounded(request: reqwest::RequestBuilder, image: &str) -> Result<Vec<u8>, OciError> {
    read_capped(
        request,
        image,
        "manifest",
        MAX_MANIFEST_BYTES,
        "MAX_MANIFEST_BYTES",
    )
    .await
}

/// Sends `request` and reads the body, refusing more than `max_bytes` (the limit named
/// `limit_name` in errors): by `Content-Length` before reading, and while reading when there
/// is none or it lies.
async fn read_capped(
    request: reqwest::RequestBuilder,
    image: &str,
    what: &str,
    max_bytes: u64,
    limit_name: &str,
) -> Result<Vec<u8>, OciError> {
    let too_large = |size: String| {
        OciError::too_large(format!(
            "{image}: the {what} is {size} bytes, over the limit of {max_bytes} bytes ({limit_name})"
        ))
    };
    let response = request
        .send()
        .await
        .map_err(|error| unavailable(image, &error))?;
    let status = response.status();
    if !status.is_success() {
        return Err(by_status(
            status.as_u16(),
            image.to_string(),
            format!("reading the {what}: {status}"),
        ));
    }
    if let Some(length) = response.content_length()
        && length > max_bytes
    {
        return Err(too_large(length.to_string()));
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| unavailable(image, &error))?;
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large(format!("more than {max_bytes}")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn unavailable(image: &str, error: &reqwest::Error) -> OciError {
    OciError::RegistryUnavailable {
        image: image.to_string(),
        message: bounded(describe(error)),
    }
}

/// Names the platform in a verdict on one manifest of an index.
fn on_platform(error: OciError, platform: &str) -> OciError {
    let within = |text: String| format!("{text} (in the {platform} manifest)");
    match error {
        OciError::Skill(verdict) => OciError::Skill(verdict.with_detail(within)),
        OciError::UnsafeImageContent { message } => OciError::unsafe_content(within(message)),
        OciError::ImageTooLarge { message } => OciError::too_large(within(message)),
        OciError::InvalidImage { message } => OciError::invalid_image(within(message)),
        OciError::NestedSkillFile { path, root } => OciError::NestedSkillFile {
            path,
            root: format!("{root}, in the {platform} manifest"),
        },
        OciError::LinkInSkill { path, kind, root } => OciError::LinkInSkill {
            path,
            kind,
            root: format!("{root}, in the {platform} manifest"),
        },
        other => other,
    }
}

/// Pushes a packed image, through a client of its own; see [`RegistryClient::push_image`].
pub async fn push_image(
    image: &PackedImage,
    reference: &str,
    auth: &RegistryAuth,
    opts: &RegistryOptions,
) -> Result<String, OciError> {
    RegistryClient::new(opts.clone())?
        .push_image(image, reference, auth)
        .await
}

impl RegistryClient {
    /// Pushes a packed image to `reference` (`host/repository:tag`; `latest` when the tag is
    /// left out) and returns it pinned: `host/repository:tag@sha256:…`. Blobs the registry
    /// already has are not uploaded again.
    pub async fn push_image(
        &self,
        image: &PackedImage,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<String, OciError> {
        let parsed = parse_reference(reference)?;
        let blobs = [
            Blob {
                bytes: &image.layer,
                digest: &image.layer_digest,
            },
            Blob {
                bytes: &image.config,
                digest: &image.config_digest,
            },
        ];
        self.push_manifest(
            reference,
            &blobs,
            &image.manifest,
            MANIFEST_MEDIA_TYPE,
            auth,
        )
        .await?;
        Ok(format!(
            "{}/{}:{}@{}",
            parsed.registry(),
            parsed.repository(),
            parsed.tag().unwrap_or("latest"),
            image.manifest_digest
        ))
    }

    /// Pushes `blobs` (those the registry lacks) and then `manifest`, whose media type is
    /// `media_type`, to the tag `reference` names: what an image or a signature manifest
    /// (a cosign `.sig` tag) needs.
    pub async fn push_manifest(
        &self,
        reference: &str,
        blobs: &[Blob<'_>],
        manifest: &[u8],
        media_type: &str,
        auth: &RegistryAuth,
    ) -> Result<(), OciError> {
        let parsed = parse_reference(reference)?;
        if parsed.digest().is_some() {
            return Err(OciError::InvalidReference {
                reference: reference.to_string(),
                message: "push to a tag; the digest is computed from the content".to_string(),
            });
        }
        let content_type =
            http::HeaderValue::from_str(media_type).map_err(|error| OciError::Internal {
                message: format!("media type {media_type:?}: {error}"),
            })?;
        // A client of its own: the shared ones hold pull tokens, and a push needs another scope.
        let client = layer_client(&self.shared.options)?;
        client
            .store_auth_if_needed(parsed.resolve_registry(), &auth.to_client_auth())
            .await;
        let failed = |error| registry_error(error, reference);
        let shared = &self.shared;
        for blob in blobs {
            if shared
                .counted(parsed.registry(), client.blob_exists(&parsed, blob.digest))
                .await
                .map_err(failed)?
            {
                tracing::debug!(%reference, digest = %blob.digest, "blob already in the registry");
            } else {
                shared
                    .counted(
                        parsed.registry(),
                        client.push_blob(&parsed, blob.bytes.to_vec(), blob.digest),
                    )
                    .await
                    .map_err(failed)?;
            }
        }
        shared
            .counted(
                parsed.registry(),
                client.push_manifest_raw(&parsed, manifest.to_vec(), content_type),
            )
            .await
            .map_err(failed)?;
        Ok(())
    }
}

/// A blob [`RegistryClient::push_manifest`] uploads: its bytes and their `sha256:…` digest.
#[derive(Debug, Clone, Copy)]
pub struct Blob<'a> {
    pub bytes: &'a [u8],
    pub digest: &'a str,
}

fn parse_reference(reference: &str) -> Result<Reference, OciError> {
    crate::reference::parse(reference).map_err(|message| OciError::InvalidReference {
        reference: reference.to_string(),
        message,
    })
}

fn layer_client(opts: &RegistryOptions) -> Result<Client, OciError> {
    let protocol = if opts.insecure_registries.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(opts.insecure_registries.clone())
    };
    let config = ClientConfig {
        protocol,
        // Indexes are resolved here, the same way on every operator architecture.
        platform_resolver: None,
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        user_agent: USER_AGENT,
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|error| OciError::Internal {
        message: format!("cannot build the registry client: {error}"),
    })
}

/// A manifest or index, reduced to what is read here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDocument {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Descriptors,
    #[serde(default)]
    manifests: Descriptors,
}

/// A manifest's `layers` or an index's `manifests`: the first [`MAX_DESCRIPTORS`] parsed, the
/// rest only counted.
#[derive(Debug, Default)]
struct Descriptors {
    kept: Vec<Descriptor>,
    total: usize,
}

impl<'de> Deserialize<'de> for Descriptors {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Bounded;
        impl<'de> serde::de::Visitor<'de> for Bounded {
            type Value = Descriptors;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a list of descriptors")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Descriptors, A::Error> {
                let mut descriptors = Descriptors::default();
                while descriptors.kept.len() < MAX_DESCRIPTORS {
                    match seq.next_element()? {
                        Some(descriptor) => descriptors.kept.push(descriptor),
                        None => break,
                    }
                }
                descriptors.total = descriptors.kept.len();
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    descriptors.total += 1;
                }
                Ok(descriptors)
            }
        }
        deserializer.deserialize_seq(Bounded)
    }
}

impl ManifestDocument {
    fn is_index(&self) -> bool {
        match self.media_type.as_deref() {
            Some(media_type) => media_type == OCI_INDEX || media_type == DOCKER_MANIFEST_LIST,
            None => self.config.is_none() && self.manifests.total > 0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Debug, Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

impl Descriptor {
    /// `os/architecture`, for messages.
    fn platform_name(&self) -> String {
        match &self.platform {
            Some(platform) => format!("{}/{}", platform.os, platform.architecture),
            None => "unspecified platform".to_string(),
        }
    }
}

fn parse_manifest(body: &[u8], image: &str) -> Result<ManifestDocument, OciError> {
    let document: ManifestDocument = serde_json::from_slice(body).map_err(|error| {
        OciError::invalid_image(format!("{image}: the manifest is not valid JSON: {error}"))
    })?;
    if let Some(media_type) = &document.media_type
        && !ACCEPTED_MANIFESTS.contains(&media_type.as_str())
    {
        return Err(OciError::invalid_image(format!(
            "{image}: manifest media type {media_type} is not an image manifest or index"
        )));
    }
    Ok(document)
}

/// The manifests of an index that a node may pull: every entry but attestations
/// (`unknown/unknown`).
fn platform_manifests<'d>(
    entries: &'d Descriptors,
    limits: &Limits,
    image: &str,
) -> Result<Vec<&'d Descriptor>, OciError> {
    if entries.total > MAX_DESCRIPTORS {
        return Err(OciError::too_large(format!(
            "{image}: the image index lists {} manifests; at most {MAX_DESCRIPTORS} are read",
            entries.total
        )));
    }
    let images: Vec<&Descriptor> = entries
        .kept
        .iter()
        .filter(|entry| {
            entry.platform.as_ref().is_none_or(|platform| {
                platform.os != "unknown" && platform.architecture != "unknown"
            })
        })
        .collect();
    if images.len() > limits.max_index_manifests {
        return Err(OciError::too_large(format!(
            "{image}: the image index lists {} platform manifests, over the limit of {} (Limits::max_index_manifests)",
            images.len(),
            limits.max_index_manifests
        )));
    }
    Ok(images)
}

fn check_layers(layers: &Descriptors, limits: &Limits, image: &str) -> Result<(), OciError> {
    // Past MAX_DESCRIPTORS the layers were only counted, not parsed.
    if layers.total > limits.max_layers.min(MAX_DESCRIPTORS) {
        return Err(OciError::too_large(format!(
            "{image} has {} layers, over the limit of {} (Limits::max_layers)",
            layers.total,
            limits.max_layers.min(MAX_DESCRIPTORS)
        )));
    }
    for layer in &layers.kept {
        check_digest(&layer.digest, image)?;
        if !ACCEPTED_LAYERS.contains(&layer.media_type.as_str()) {
            return Err(OciError::invalid_image(format!(
                "{image}: layer {} has media type {}; skill images use tar or tar+gzip layers",
                layer.digest, layer.media_type
            )));
        }
        if layer.size > limits.max_layer_bytes {
            return Err(OciError::too_large(format!(
                "{image}: layer {} is {} bytes compressed, over the limit of {} (Limits::max_layer_bytes)",
                layer.digest, layer.size, limits.max_layer_bytes
            )));
        }
    }
    Ok(())
}

/// Only `sha256:<64 hex>` digests are accepted; they also end up in URLs.
fn check_digest(digest: &str, image: &str) -> Result<(), OciError> {
    let valid = digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    });
    if valid {
        Ok(())
    } else {
        Err(OciError::invalid_image(format!(
            "{image}: digest {digest:?} is not a sha256 digest"
        )))
    }
}

/// Sorts oci-client errors into the reasons callers act on.
fn registry_error(error: OciDistributionError, image: &str) -> OciError {
    let image = image.to_string();
    let message = bounded(describe(&error));
    match &error {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            OciError::Unauthorized { image, message }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => {
            OciError::ImageNotFound { image, message }
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let has = |wanted: &[OciErrorCode]| {
                envelope
                    .errors
                    .iter()
                    .any(|error| wanted.contains(&error.code))
            };
            if has(&[
                OciErrorCode::ManifestUnknown,
                OciErrorCode::NameUnknown,
                OciErrorCode::BlobUnknown,
                OciErrorCode::NotFound,
            ]) {
                OciError::ImageNotFound { image, message }
            } else if has(&[OciErrorCode::Unauthorized, OciErrorCode::Denied]) {
                OciError::Unauthorized { image, message }
            } else if has(&[OciErrorCode::Toomanyrequests]) {
                OciError::RegistryUnavailable { image, message }
            } else if has(&[OciErrorCode::NameInvalid]) {
                OciError::InvalidReference {
                    reference: image,
                    message,
                }
            } else {
                OciError::RegistryError { image, message }
            }
        }
        OciDistributionError::ServerError { code, .. } => by_status(*code, image, message),
        // Some calls (blob_exists) turn HTTP statuses into request errors.
        OciDistributionError::RequestError(request) => match request.status() {
            Some(status) => by_status(status.as_u16(), image, message),
            None => OciError::RegistryUnavailable { image, message },
        },
        OciDistributionError::IoError(_) => OciError::RegistryUnavailable { image, message },
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            OciError::DigestMismatch {
                reference: image,
                expected: expected.clone(),
                actual: actual.clone(),
            }
        }
        OciDistributionError::ManifestParsingError(_)
        | OciDistributionError::VersionedParsingError(_)
        | OciDistributionError::UnsupportedMediaTypeError(_)
        | OciDistributionError::UnsupportedSchemaVersionError(_)
        | OciDistributionError::ManifestEncodingError(_)
        | OciDistributionError::JsonError(_) => {
            OciError::invalid_image(format!("{image}: {message}"))
        }
        _ => OciError::RegistryError { image, message },
    }
}

fn by_status(code: u16, image: String, message: String) -> OciError {
    match code {
        404 => OciError::ImageNotFound { image, message },
        401 | 403 => OciError::Unauthorized { image, message },
        429 | 500..=599 => OciError::RegistryUnavailable { image, message },
        _ => OciError::RegistryError { image, message },
    }
}

/// An error with its causes (`reqwest` keeps "connection refused" in a source).
fn describe(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_descriptors(field: &str, count: usize) -> Vec<u8> {
        let descriptor = serde_json::json!({"mediaType": crate::LAYER_MEDIA_TYPE, "digest": "sha256:00", "size": 1});
        serde_json::to_vec(&serde_json::json!({ field: vec![descriptor; count] })).unwrap()
    }

    #[test]
    fn an_image_at_a_digest_is_built_from_its_checked_parts() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let image = ResolvedImage::at_digest("docker.io/skills/pdf:1", &digest).unwrap();
        assert_eq!(
            (image.registry.as_str(), image.repository.as_str()),
            ("docker.io", "skills/pdf")
        );
        assert_eq!(
            image,
            ResolvedImage::from_pinned(&format!("docker.io/skills/pdf@{digest}")).unwrap()
        );
        for (repository, digest) in [
            ("r.example/skills/pdf", "sha256:short".to_string()),
            ("r.example/skills/pdf", "main".to_string()),
            ("r.example/skills/pdf@sha256:x", digest.clone()),
            ("R.EXAMPLE/Skills", digest.clone()),
        ] {
            let error = ResolvedImage::at_digest(repository, &digest).unwrap_err();
            assert_eq!(error.reason(), "InvalidReference", "{repository}@{digest}");
        }
    }

    #[test]
    fn descriptors_past_the_parsed_ones_are_only_counted() {
        let manifest = parse_manifest(&with_descriptors("layers", 5_000), "r/x").unwrap();
        assert_eq!(
            (manifest.layers.kept.len(), manifest.layers.total),
            (MAX_DESCRIPTORS, 5_000)
        );
        let roomy = Limits {
            max_layers: usize::MAX,
            ..Limits::default()
        };
        let error = check_layers(&manifest.layers, &roomy, "r/x").unwrap_err();
        assert_eq!(error.reason(), "ImageTooLarge");
        assert!(
            error
                .to_string()
                .contains("has 5000 layers, over the limit of 1024"),
            "{error}"
        );

        let index = parse_manifest(&with_descriptors("manifests", 2_000), "r/x").unwrap();
        assert!(index.is_index());
        let error = platform_manifests(&index.manifests, &Limits::default(), "r/x").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("lists 2000 manifests; at most 1024 are read"),
            "{error}"
        );

        let few = parse_manifest(&with_descriptors("layers", 3), "r/x").unwrap();
        assert_eq!((few.layers.kept.len(), few.layers.total), (3, 3));
    }

    #[test]
    fn what_changes_a_skill_set_names_its_platform() {
        let nested = OciError::NestedSkillFile {
            path: "demo/x/SKILL.md".into(),
            root: "demo".into(),
        };
        let error = on_platform(nested, "linux/arm64");
        assert_eq!(error.reason(), "NestedSkillFile");
        assert!(
            error
                .to_string()
                .starts_with("demo/x/SKILL.md is a SKILL.md below the skill's root (demo, in the linux/arm64 manifest)"),
            "{error}"
        );
        let link = OciError::LinkInSkill {
            path: "demo/run".into(),
            kind: "a symlink".into(),
            root: "demo".into(),
        };
        let error = on_platform(link, "linux/arm64");
        assert!(
            error
                .to_string()
                .contains("inside the skill (demo, in the linux/arm64 manifest)"),
            "{error}"
        );
    }
}
