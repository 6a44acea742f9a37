//! Trust policies (`trust.agentic-operator.io`): the check of a SkillCard's pin against the
//! policies of its namespace and the cluster, and the mapping of a policy change to the cards
//! it reaches. The decisions are `agentic_core::trust`'s; this module reads the policies from
//! the watch caches, their keys from Secrets and ConfigMaps, and the signatures through
//! `agentic-trust`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_api::{
    ClusterSkillTrustPolicy, KeyRef, KeySource, SignatureBinding, SkillCard, SkillTrustPolicy,
    TrustPolicy,
};
use agentic_core::cards::verified::TrustEvidence;
use agentic_core::pin::Pin;
use agentic_core::trust::{
    NamedPolicy, Outcome, OutcomesByPin, PinnedSource, Policies, PolicyId, Signature,
};
use agentic_oci::{RegistryAuth, ResolvedImage};
use agentic_trust::{
    AllowedSigners, CommitSigners, Identity, Keyless, Layout, MaterialDigest, Pattern, PublicKey,
    RefusalReason, Requirement, TrustRoot,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use sha2::{Digest, Sha256};

use crate::caches::{Guarded, listed, valid};
use crate::context::Context;

/// The verdicts of signature checks, by image and digest (or git URL and commit) and the
/// requirement's key material: a thousand cards on one image under one policy cost one
/// signature read.
#[derive(Default)]
struct Verifications(agentic_trust::VerificationCache);

/// The credentials a card's skill is read with, which its signatures are read with too: the
/// pull secrets of an image card, the `spec.sourceSecret` of a git card.
pub(super) struct SourceAuth {
    pub registry: RegistryAuth,
    pub git: agentic_git::GitAuth,
}

impl SourceAuth {
    /// No credentials: what a cluster-wide default skill is mounted with in another namespace.
    pub const ANONYMOUS: SourceAuth = SourceAuth {
        registry: RegistryAuth::Anonymous,
        git: agentic_git::GitAuth::Anonymous,
    };
}

/// The policies that apply in `namespace`, from the watch caches, once both trust-policy
/// watches have listed (waiting up to `trust_policy_list_wait` for them); or why they cannot be
/// known: not listed (their CRDs missing, a list the operator may not make), or a policy in
/// scope that does not deserialize. A namespace this process does not watch has no
/// controllers here, and no policies.
pub(super) async fn listed_policies(ctx: &Context, namespace: &str) -> Result<Policies, String> {
    if let Some(caches) = ctx.caches(namespace) {
        let cluster = caches.of::<ClusterSkillTrustPolicy>();
        let namespaced = caches.of::<SkillTrustPolicy>();
        let both_listed =
            || cluster.as_ref().is_none_or(listed) && namespaced.as_ref().is_none_or(listed);
        if !until(both_listed, ctx.settings.trust_policy_list_wait).await {
            report_unlisted(ctx, namespace);
        }
    }
    policies_of(ctx, namespace)
}

/// How often a pass waiting for the policies to list looks again.
const LISTED_POLL: Duration = Duration::from_millis(50);

/// Whether `done` turned true within `wait`, looking every [`LISTED_POLL`].
///
/// Looks rather than awaiting the stores' `wait_until_ready`: kube-runtime keeps that as a
/// oneshot channel that wakes only the waiter that polled it last, and at a restart many
/// card and run passes wait for the policies at once. All but one would sit out the whole
/// wait, and then report the policies unlisted although they had listed.
async fn until(done: impl Fn() -> bool, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(LISTED_POLL).await;
    }
}

/// The namespaces whose policies were found unlisted after the wait, reported once each.
#[derive(Default)]
struct Unlisted(std::sync::Mutex<std::collections::BTreeSet<String>>);

/// Logs, at ERROR and once per namespace, that trust enforcement cannot run there: it is
/// never silently off.
fn report_unlisted(ctx: &Context, namespace: &str) {
    let unlisted = ctx.kind_state::<Unlisted>();
    let mut reported = unlisted
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if reported.insert(namespace.to_string()) {
        tracing::error!(
            namespace,
            "the trust policies have not been listed: their CRDs may be missing or the operator may not list them; no new skill is pinned or admitted until they are"
        );
    }
}

/// [`listed_policies`] without waiting: the policies as the watch caches hold them now.
pub(super) fn policies_of(ctx: &Context, namespace: &str) -> Result<Policies, String> {
    let Some(caches) = ctx.caches(namespace) else {
        return Ok(Policies::default());
    };
    let cluster = known(caches.of::<ClusterSkillTrustPolicy>(), |_| true)?;
    let namespaced = known(caches.of::<SkillTrustPolicy>(), |policy| {
        policy.namespace.as_deref() == Some(namespace)
    })?;
    Ok(Policies::new(
        valid(&cluster),
        valid(&namespaced),
        namespace,
    ))
}

/// The policies of one kind in a store, once it has listed and every one of them `in_scope`
/// deserialized; none when the kind is not watched.
fn known<K>(
    store: Option<kube::runtime::reflector::Store<Guarded<K>>>,
    in_scope: impl Fn(&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool,
) -> Result<Vec<std::sync::Arc<Guarded<K>>>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let Some(store) = store else {
        return Ok(Vec::new());
    };
    let kind = K::kind(&());
    if !listed(&store) {
        return Err(format!(
            "the {kind} watch has not listed (is its CRD installed, and may the operator list it?)"
        ));
    }
    let state = store.state();
    if let Some(invalid) = state
        .iter()
        .filter_map(|guarded| guarded.0.as_ref().err())
        .find(|invalid| in_scope(&invalid.metadata))
    {
        let name = invalid.metadata.name.as_deref().unwrap_or_default();
        return Err(format!(
            "{kind} {name} does not match the schema this operator reads: {}",
            invalid.error
        ));
    }
    Ok(state)
}

/// What a card's trust is decided from: the policies in force for `namespace` and, when they
/// are known, the outcome of each selecting policy's requirement on each pin the pass may
/// keep ([`agentic_core::cards::verified::pins_to_check`]). Signatures are read with the card's own credentials.
pub(super) async fn gather_trust(
    policies: Result<Policies, String>,
    pins: Vec<Pin>,
    auth: &SourceAuth,
    ctx: &Context,
) -> TrustEvidence {
    let outcomes = match &policies {
        Ok(policies) => outcomes_of(policies, pins, auth, ctx).await,
        Err(_) => OutcomesByPin::new(),
    };
    TrustEvidence { policies, outcomes }
}

/// For each of `pins`, the outcome of each policy's requirement that selects it, in the order
/// of [`Policies::selecting`], the signatures read with `auth`.
pub(super) async fn outcomes_of(
    policies: &Policies,
    pins: impl IntoIterator<Item = Pin>,
    auth: &SourceAuth,
    ctx: &Context,
) -> OutcomesByPin {
    let mut outcomes = OutcomesByPin::new();
    for pin in pins {
        let mut found = Vec::new();
        for policy in policies.selecting(&PinnedSource::of(Some(&pin))) {
            found.push(outcome(policy, &pin, auth, ctx).await);
        }
        outcomes.insert(pin, found);
    }
    outcomes
}

/// Checks one policy's requirement against the pinned bytes.
async fn outcome(policy: NamedPolicy<'_>, pin: &Pin, auth: &SourceAuth, ctx: &Context) -> Outcome {
    match pin {
        Pin::Image { repository, digest } => {
            image_outcome(policy, repository, digest, &auth.registry, ctx).await
        }
        Pin::Git { url, commit } => commit_outcome(policy, url, commit, &auth.git, ctx).await,
    }
}

async fn image_outcome(
    policy: NamedPolicy<'_>,
    repository: &str,
    digest: &str,
    auth: &RegistryAuth,
    ctx: &Context,
) -> Outcome {
    let image = match ResolvedImage::at_digest(repository, digest) {
        Ok(image) => image,
        Err(e) => return Outcome::Invalid(e.to_string()),
    };
    let built = built_keys(policy, ctx, || requirement(policy.id, policy.policy, ctx)).await;
    let (requirement, material) = match built.as_deref() {
        Ok((requirement, material)) => (requirement, material.clone()),
        Err(why) => return Outcome::Unavailable(why.clone()),
    };
    let key = agentic_trust::CacheKey {
        repository: format!("{}/{}", image.registry, image.repository),
        digest: image.digest.clone(),
        requirement: material,
    };
    let cache = &ctx.kind_state::<Verifications>().0;
    let registry = &ctx.settings.registry;
    let verdict = cache
        .get_or_verify(&key, || {
            agentic_trust::verify_image(registry, auth, &image, requirement)
        })
        .await;
    outcome_of(verdict)
}

/// Checks one policy's `gitSigners` against the signature of the pinned commit, read from
/// the commit object the card's pass kept (fetched again only when it is not kept, as after
/// a restart).
async fn commit_outcome(
    policy: NamedPolicy<'_>,
    url: &str,
    commit: &str,
    auth: &agentic_git::GitAuth,
    ctx: &Context,
) -> Outcome {
    let built = built_keys(policy, ctx, || git_signers(policy.id, policy.policy, ctx)).await;
    let (signers, material) = match built.as_deref() {
        Ok((signers, material)) => (signers, material.clone()),
        Err(why) => return Outcome::Unavailable(why.clone()),
    };
    let key = agentic_trust::CacheKey {
        repository: url.to_string(),
        digest: commit.to_string(),
        requirement: material,
    };
    let cache = &ctx.kind_state::<Verifications>().0;
    let verdict = cache
        .get_or_verify(&key, || async {
            match commit_object(url, commit, auth, ctx).await {
                Ok(raw) => {
                    agentic_trust::verify_commit(&raw, signers, std::time::SystemTime::now())
                        .into_verdict(commit)
                }
                Err(e) if e.is_content_verdict() => agentic_trust::ImageVerdict::Invalid(
                    agentic_trust::Refusal::new(RefusalReason::Malformed, e.to_string()),
                ),
                Err(e) => agentic_trust::ImageVerdict::Unavailable { why: e.to_string() },
            }
        })
        .await;
    outcome_of(verdict)
}

/// The raw object of `commit` in `url`: kept by the card's pass, or fetched.
async fn commit_object(
    url: &str,
    commit: &str,
    auth: &agentic_git::GitAuth,
    ctx: &Context,
) -> Result<Vec<u8>, agentic_git::GitError> {
    if let Some(raw) = ctx.git_skills.commit_object(url, commit) {
        return Ok(raw);
    }
    let options = ctx.settings.git.clone();
    let source = agentic_git::SourceUrl::parse(url, &options.insecure_hosts)?;
    let (commit, auth) = (commit.to_string(), auth.clone());
    tokio::task::spawn_blocking(move || {
        agentic_git::fetch_commit(&source, &commit, &auth, &options)?.raw_commit()
    })
    .await
    .unwrap_or_else(|e| {
        Err(agentic_git::GitError::Io {
            path: url.to_string(),
            message: format!("the git task failed: {e}"),
        })
    })
}

/// A verdict of `agentic-trust` as the outcome of one policy.
fn outcome_of(verdict: agentic_trust::ImageVerdict) -> Outcome {
    match verdict {
        agentic_trust::ImageVerdict::Verified(verified) => Outcome::Verified(Signature {
            signer: match verified.signer {
                agentic_trust::Signer::Key { fingerprint } => fingerprint,
                agentic_trust::Signer::Identity { issuer, subject } => {
                    format!("{issuer} {subject}")
                }
            },
            digest: (verified.layout != Layout::Commit).then_some(verified.signature_digest),
            layout: match verified.layout {
                Layout::Tag => "tag",
                Layout::Referrers | Layout::ReferrersTag => "referrers",
                Layout::Commit => "commit",
            }
            .to_string(),
        }),
        agentic_trust::ImageVerdict::Unsigned => Outcome::Unsigned,
        // Every refusal is `SignatureInvalid` on the card; its stable reason is named in the
        // message, for those who act on one kind of refusal.
        agentic_trust::ImageVerdict::Invalid(refusal) => {
            Outcome::Invalid(format!("{} ({})", refusal.message, refusal.reason))
        }
        agentic_trust::ImageVerdict::Unavailable { why } => Outcome::Unavailable(why),
    }
}

/// What was built from each policy's keys (its requirement, or who may sign its commits),
/// by policy, with the version it was built at: read again only when the policy's spec or a
/// Secret holding one of its keys changed.
struct BuiltKeys<T>(std::sync::Mutex<HashMap<String, (String, Arc<T>)>>);

impl<T> Default for BuiltKeys<T> {
    fn default() -> Self {
        Self(std::sync::Mutex::default())
    }
}

/// What `build` makes of `policy`'s keys, from [`BuiltKeys`] when its spec and the
/// resourceVersions of the objects holding its keys are those it was built at: a Secret's
/// from the watch cache, a ConfigMap's or an unwatched namespace's Secret's from
/// [`KeyReads`] while that read is fresh. A policy whose keys cannot be read is built (and
/// its keys read) again each time: unknown keys verify nothing.
async fn built_keys<T, F, Fut>(
    policy: NamedPolicy<'_>,
    ctx: &Context,
    build: F,
) -> Result<Arc<T>, String>
where
    T: Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let id = policy.id.to_string();
    let version = key_version(policy, ctx);
    let cache = &ctx.kind_state::<BuiltKeys<T>>().0;
    let lock = || {
        cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(version) = &version
        && let Some((built_at, built)) = lock().get(&id)
        && built_at == version
    {
        return Ok(Arc::clone(built));
    }
    let built = Arc::new(build().await?);
    if let Some(version) = version {
        lock().insert(id, (version, Arc::clone(&built)));
    }
    Ok(built)
}

/// The version of everything `policy`'s keys are built from: its spec, and the
/// resourceVersion of each Secret holding a key, from the watch caches; `None` when one of
/// them cannot be told without a read.
fn key_version(policy: NamedPolicy<'_>, ctx: &Context) -> Option<String> {
    let spec = policy.policy;
    let root = spec.trust_root.iter().flat_map(|root| {
        root.trusted_root
            .iter()
            .chain(&root.fulcio_certificates)
            .chain(&root.rekor_keys)
            .chain(&root.ct_log_keys)
    });
    let git = spec
        .git_signers
        .iter()
        .flat_map(|git| git.allowed_signers.iter().chain(&git.gpg_keys));
    let mut version = Sha256::new();
    version.update(format!("{spec:?}"));
    for source in spec.keys.iter().chain(root).chain(git) {
        if source.pem.is_some() {
            continue;
        }
        let (reference, kind) = key_object(source)?;
        let namespace = policy.id.key_namespace(reference).ok()?;
        let at = match watched_version(kind, namespace, &reference.name, ctx) {
            Watched::At(version) => version,
            Watched::Missing => return None,
            Watched::Unfollowed => ctx.kind_state::<KeyReads>().fresh_version(
                kind,
                namespace,
                &reference.name,
                Instant::now(),
            )?,
        };
        version.update(format!("\n{kind:?} {namespace}/{}@{at}", reference.name));
    }
    Some(hex::encode(version.finalize()))
}

/// The object a key source names, and its kind; `None` for an inline `pem` or a source
/// that names nothing.
fn key_object(source: &KeySource) -> Option<(&KeyRef, KeyKind)> {
    match (&source.secret_key_ref, &source.config_map_key_ref) {
        (Some(reference), _) => Some((reference, KeyKind::Secret)),
        (None, Some(reference)) => Some((reference, KeyKind::ConfigMap)),
        (None, None) => None,
    }
}

/// The Secret or ConfigMap a key is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum KeyKind {
    Secret,
    ConfigMap,
}

/// What the watches say of an object holding a key.
enum Watched {
    /// Its resourceVersion in the Secret watch of its namespace.
    At(String),
    /// The watch does not hold it (missing, or not listed yet).
    Missing,
    /// No watch follows it: a ConfigMap, or a Secret of a namespace not watched.
    Unfollowed,
}

fn watched_version(kind: KeyKind, namespace: &str, name: &str, ctx: &Context) -> Watched {
    let secrets = ctx.caches(namespace).and_then(|caches| caches.secrets);
    let (KeyKind::Secret, Some(secrets)) = (kind, secrets) else {
        return Watched::Unfollowed;
    };
    secrets
        .get(&ObjectRef::new(name).within(namespace))
        .and_then(|secret| secret.metadata.resource_version.clone())
        .map_or(Watched::Missing, Watched::At)
}

/// How long a key read from an object no watch of this process follows (a ConfigMap, a
/// Secret of a namespace not watched) is used before it is read again: the longest a changed
/// or deleted key of such an object keeps counting. Watching them instead would mean
/// watching every ConfigMap (with its data) of each namespace a policy names, or a watch per
/// referenced object, for a handful of reads a minute.
pub(super) const KEY_READ_TTL: Duration = Duration::from_secs(30);

/// Keys read from the API, by the object and key they came from: the key's text (or why the
/// object does not hold a usable one) and the object's resourceVersion, with when it was
/// read. A read that failed (the API unreachable, the object forbidden or missing) is not
/// kept: it is tried again on the next pass, and the policy verifies nothing until then.
#[derive(Default)]
struct KeyReads(std::sync::Mutex<HashMap<KeyRead, Read>>);

/// One key of one object.
type KeyRead = (KeyKind, String, String, String);

#[derive(Clone)]
struct Read {
    at: Instant,
    resource_version: String,
    key: Result<String, String>,
}

impl KeyReads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<KeyRead, Read>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The read of `key`, if it is fresh at `now` and (for a watched Secret) of the version
    /// the watch holds.
    fn fresh(&self, key: &KeyRead, watched: Option<&str>, now: Instant) -> Option<Read> {
        let read = self.lock().get(key).cloned()?;
        let current = match watched {
            Some(version) => read.resource_version == version,
            None => now.saturating_duration_since(read.at) < KEY_READ_TTL,
        };
        current.then_some(read)
    }

    /// The resourceVersion of the object `kind` `namespace/name` as last read, while fresh.
    fn fresh_version(
        &self,
        kind: KeyKind,
        namespace: &str,
        name: &str,
        now: Instant,
    ) -> Option<String> {
        self.lock()
            .iter()
            .find(|((k, ns, n, _), read)| {
                *k == kind
                    && ns == namespace
                    && n == name
                    && now.saturating_duration_since(read.at) < KEY_READ_TTL
            })
            .map(|(_, read)| read.resource_version.clone())
    }

    fn keep(&self, key: KeyRead, read: Read) {
        self.lock().insert(key, read);
    }
}

/// Who may sign the commits `policy` selects, with its keys read, and a digest of them: the
/// cache key, so that a changed allowed-signers list or GPG key is checked afresh.
async fn git_signers(
    id: &PolicyId,
    policy: &TrustPolicy,
    ctx: &Context,
) -> Result<(CommitSigners, String), String> {
    let none = || {
        format!(
            "{id} selects this skill but lists no spec.gitSigners.allowedSigners and no spec.gitSigners.gpgKeys"
        )
    };
    let git = policy.git_signers.as_ref().ok_or_else(none)?;
    let mut material = MaterialDigest::default();
    material.add(id.to_string());
    let mut signers = CommitSigners::default();
    if let Some(source) = &git.allowed_signers {
        let text = read_key(id, source, ctx).await?;
        material.add("allowedSigners\n");
        material.add(&text);
        let name = format!("{id}: spec.gitSigners.allowedSigners");
        signers.allowed_signers = AllowedSigners::parse(&text, &name).map_err(|e| e.to_string())?;
    }
    for (index, source) in git.gpg_keys.iter().enumerate() {
        let text = read_key(id, source, ctx).await?;
        material.add("gpgKey\n");
        material.add(&text);
        let name = format!("{id}: spec.gitSigners.gpgKeys[{index}]");
        signers
            .gpg_keys
            .add(&text, &name)
            .map_err(|e| e.to_string())?;
    }
    if signers.is_empty() {
        return Err(none());
    }
    Ok((signers, material.finish()))
}

/// The requirement of `policy` with its keys read, and a digest of everything it was built
/// from: the cache key, so that a rotated key or a changed identity is checked afresh.
async fn requirement(
    id: &PolicyId,
    policy: &TrustPolicy,
    ctx: &Context,
) -> Result<(Requirement, String), String> {
    let mut material = MaterialDigest::default();
    material.add(id.to_string());
    let mut keys = Vec::new();
    for (index, source) in policy.keys.iter().enumerate() {
        let pem = read_key(id, source, ctx).await?;
        material.add(&pem);
        let name = format!("{id}: spec.keys[{index}]");
        keys.push(PublicKey::from_pem(&pem, &name).map_err(|e| e.to_string())?);
    }
    let mut requirement = Requirement::keys(keys);
    if !policy.keyless.is_empty() {
        let Some(root) = &policy.trust_root else {
            return Err(format!(
                "{id}: spec.keyless needs spec.trustRoot (Fulcio certificates and Rekor keys)"
            ));
        };
        let mut read_all = async |sources: &[KeySource]| -> Result<String, String> {
            let mut text = String::new();
            for source in sources {
                let pem = read_key(id, source, ctx).await?;
                material.add(&pem);
                text.push_str(&pem);
                text.push('\n');
            }
            Ok(text)
        };
        let trust_root = match &root.trusted_root {
            Some(source) => {
                let json = read_all(std::slice::from_ref(source)).await?;
                let name = format!("{id}: spec.trustRoot.trustedRoot");
                TrustRoot::from_trusted_root_json(&json, &name)
            }
            None => {
                let fulcio = read_all(&root.fulcio_certificates).await?;
                let rekor = read_all(&root.rekor_keys).await?;
                let ct = read_all(&root.ct_log_keys).await?;
                TrustRoot::from_pem(&fulcio, &rekor, &ct)
            }
        }
        .map_err(|e| e.to_string())?;
        let mut identities = Vec::new();
        for (index, identity) in policy.keyless.iter().enumerate() {
            let field = |name: &str| format!("{id}: spec.keyless[{index}].{name}");
            let pattern =
                |exact: &Option<String>, regex: &Option<String>, name: &str| match (exact, regex) {
                    (Some(exact), _) => Ok(Pattern::Exact(exact.clone())),
                    (None, Some(regex)) => {
                        Pattern::regex(regex, &field(name)).map_err(|e| e.to_string())
                    }
                    (None, None) => Err(format!("{} is not set", field(name))),
                };
            material.add(format!("{identity:?}"));
            identities.push(Identity {
                issuer: pattern(&identity.issuer, &identity.issuer_reg_exp, "issuer")?,
                subject: pattern(&identity.subject, &identity.subject_reg_exp, "subject")?,
            });
        }
        requirement.keyless = Some(Keyless {
            identities,
            trust_root,
        });
    }
    if requirement.is_empty() {
        return Err(format!(
            "{id} selects this skill but lists no spec.keys and no spec.keyless identity"
        ));
    }
    requirement.repository_bound = policy.signature_binding == SignatureBinding::Repository;
    material.add(format!("signatureBinding {:?}", policy.signature_binding));
    Ok((requirement, material.finish()))
}

/// The text of one key: inline, or from a Secret or ConfigMap of the namespace the policy
/// may read.
async fn read_key(id: &PolicyId, source: &KeySource, ctx: &Context) -> Result<String, String> {
    if let Some(pem) = &source.pem {
        return Ok(pem.clone());
    }
    let Some((reference, kind)) = key_object(source) else {
        return Err(format!("{id}: a key names no pem, Secret or ConfigMap"));
    };
    let namespace = id.key_namespace(reference)?;
    let missing = || {
        format!(
            "{id}: {kind:?} {namespace}/{} has no key {:?}",
            reference.name, reference.key
        )
    };
    let reads = ctx.kind_state::<KeyReads>();
    let read_key = (
        kind,
        namespace.to_string(),
        reference.name.clone(),
        reference.key.clone(),
    );
    let watched = match watched_version(kind, namespace, &reference.name, ctx) {
        Watched::At(version) => Some(version),
        Watched::Missing | Watched::Unfollowed => None,
    };
    if let Some(read) = reads.fresh(&read_key, watched.as_deref(), Instant::now()) {
        return read.key.map_err(|why| format!("{}{why}", missing()));
    }
    let unreadable =
        |e: kube::Error| format!("{id}: reading {kind:?} {namespace}/{}: {e}", reference.name);
    let (resource_version, key) = match kind {
        KeyKind::Secret => {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
            let secret = api.get(&reference.name).await.map_err(unreadable)?;
            let key = match secret.data.and_then(|mut data| data.remove(&reference.key)) {
                Some(bytes) => String::from_utf8(bytes.0).map_err(|_| ": not UTF-8".to_string()),
                None => Err(String::new()),
            };
            (secret.metadata.resource_version, key)
        }
        KeyKind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
            let config_map = api.get(&reference.name).await.map_err(unreadable)?;
            let key = config_map
                .data
                .and_then(|mut data| data.remove(&reference.key))
                .ok_or_else(String::new);
            (config_map.metadata.resource_version, key)
        }
    };
    if let Some(resource_version) = resource_version {
        let at = Instant::now();
        reads.keep(
            read_key,
            Read {
                at,
                resource_version,
                key: key.clone(),
            },
        );
    }
    key.map_err(|why| format!("{}{why}", missing()))
}

/// The cards a changed policy reaches: a cluster policy every card of the scope, a
/// namespaced one the cards of its namespace.
pub(super) fn cards_in_scope(
    cards: &kube::runtime::reflector::Store<Guarded<SkillCard>>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<Guarded<SkillCard>>> {
    cards
        .state()
        .iter()
        .filter(|card| namespace.is_none_or(|ns| card.namespace().as_deref() == Some(ns)))
        .map(|card| ObjectRef::from_obj(card.as_ref()))
        .collect()
}

#[cfg(test)]
mod scenarios;
pub(super) mod status;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_pass_waiting_for_the_policies_goes_on_once_they_list() {
        use kube::runtime::reflector::store::Writer;
        use kube::runtime::watcher::Event;
        let mut writer = Writer::<Guarded<ClusterSkillTrustPolicy>>::default();
        let store = writer.as_reader();
        let wait = Duration::from_secs(30);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { until(|| listed(&store), wait).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        let listed_at = tokio::time::Instant::now();
        for waiter in waiters {
            assert!(waiter.await.expect("a waiter"), "saw the list");
        }
        assert!(
            listed_at.elapsed() <= LISTED_POLL,
            "each went on within one look of the list, not at the end of the wait: {:?}",
            listed_at.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_waits_no_longer_than_the_wait_for_policies_that_never_list() {
        let store = kube::runtime::reflector::store::Writer::<Guarded<SkillTrustPolicy>>::default()
            .as_reader();
        let started = tokio::time::Instant::now();
        let wait = Duration::from_secs(5);
        assert!(!until(|| listed(&store), wait).await);
        assert!(started.elapsed() >= wait && started.elapsed() <= wait + LISTED_POLL);
    }

    #[test]
    fn a_key_read_is_used_while_fresh_or_while_its_watch_holds_its_version() {
        let reads = KeyReads::default();
        let start = Instant::now();
        let key = (KeyKind::ConfigMap, "ns".into(), "keys".into(), "k".into());
        reads.keep(
            key.clone(),
            Read {
                at: start,
                resource_version: "7".into(),
                key: Ok("pem".into()),
            },
        );
        let almost = start + KEY_READ_TTL.saturating_sub(Duration::from_millis(1));
        assert!(reads.fresh(&key, None, almost).is_some());
        assert_eq!(
            reads.fresh_version(KeyKind::ConfigMap, "ns", "keys", almost),
            Some("7".into())
        );
        let stale = start + KEY_READ_TTL;
        assert!(reads.fresh(&key, None, stale).is_none(), "read again");
        assert_eq!(
            reads.fresh_version(KeyKind::ConfigMap, "ns", "keys", stale),
            None
        );
        assert!(
            reads.fresh(&key, Some("7"), stale).is_some(),
            "a watched object's read stands while the watch holds its version"
        );
        assert!(reads.fresh(&key, Some("8"), start).is_none(), "it changed");
        assert_eq!(
            reads.fresh_version(KeyKind::Secret, "ns", "keys", start),
            None,
            "another kind"
        );
    }
}
