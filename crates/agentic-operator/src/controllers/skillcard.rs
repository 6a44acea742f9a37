//! SkillCard: resolve, read and validate the skill, then report it.
//!
//! Pipeline: gather (the trust policies from the watch caches; the pull secrets or the source
//! Secret, each read once; the registry read through the digest cache, the git fetch of the
//! pinned commit through the commit cache, or the inline text; for a valid inline skill, the
//! holder of its ConfigMap's name; the signatures of the pins the card may keep, through the
//! verification cache) → decide (`agentic_core::cards`: the status with the trust verdict, and
//! the inline ConfigMap) → apply (the ConfigMap; the status through the wrapper).

use std::sync::Arc;

use agentic_api::{CONDITION_READY, DeliveryMode, SkillCard, SkillCardStatus, SkillFrontmatter};
use agentic_core::cards::verified::{TrustEvidence, decide_trusted_card, pins_to_check};
use agentic_core::cards::{
    CardDecision, CardInputs, Fetched, Finding, ValidSkill, config_map_name, delivery_of,
    no_skill_source, pinned_skill, validated_at, validating,
};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::reasons::SkillCardReason;
use agentic_core::trust::CONDITION_VERIFIED;
use agentic_git::GitError;
use agentic_oci::{DockerConfig, RegistryAuth};
use agentic_skill::Refusal;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, backoff_within_tag_refresh, run_controller};
use super::support::{namespace_of, owner_of, relate};
use super::trustpolicy;
use super::watches::{Stop, Watches};
use crate::apply::{apply_owned_after_read, apply_status};
use crate::context::Context;
use crate::error::{Error, Result};
use reads::{Reader, action, registry_answer, registry_of, verdict_reason};

pub const KIND: &str = "SkillCard";
pub use agentic_core::cards::{
    CONDITION_MOVING_REF, CONDITION_REGISTRY_REACHABLE, CONDITION_SOURCE_REACHABLE,
};

/// The SkillCard controller: re-reads a card when a pull secret it names changes. It
/// reconciles any number of cards at once: a pass waits for a registry or git server, whose
/// reads are bounded per registry already (`agentic-oci`), and a bound here would let one
/// slow registry's cards hold every slot.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let cards = watches.of::<SkillCard>();
    let store = cards.store();
    let by_pull_secret = cards.index(|card| {
        card.spec
            .pull_secrets
            .iter()
            .flatten()
            .map(|s| s.name.clone())
            .collect()
    });
    let (cluster_cards, namespace_cards) = (store.clone(), store.clone());
    let controller = Controller::for_shared_stream(cards.applied(), store.clone())
        .watches_shared_stream(
            watches.secrets.touched(),
            relate(store.clone(), by_pull_secret, |cards, ns, name| {
                cards
                    .into_iter()
                    .filter(|c| c.namespace().as_deref() == Some(ns))
                    .filter(|c| c.spec.pull_secrets.iter().flatten().any(|s| s.name == name))
                    .map(ObjectRef::from_obj)
                    .collect()
            }),
        )
        // A policy change reaches the cards in its scope at once: a revocation takes effect
        // in the time of one pass, not of a tag refresh.
        .watches_shared_stream(
            watches
                .of::<agentic_api::ClusterSkillTrustPolicy>()
                .touched(),
            move |_| trustpolicy::cards_in_scope(&cluster_cards, None),
        )
        .watches_shared_stream(
            watches.of::<agentic_api::SkillTrustPolicy>().touched(),
            move |policy| {
                trustpolicy::cards_in_scope(&namespace_cards, policy.namespace().as_deref())
            },
        );
    let policy = Policy {
        reconcile,
        error_policy: backoff_within_tag_refresh,
        concurrency: 0,
    };
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for SkillCard {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        super::pipeline::ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &SkillCardStatus, new: &SkillCardStatus) -> Vec<StatusEvent> {
        let mut events = condition_events(
            &old.conditions,
            &new.conditions,
            &[CONDITION_READY, CONDITION_VERIFIED],
        );
        // A refused new pin leaves `Verified` True (the kept pin is verified), but a tag
        // moved to bytes that do not verify is what an operator must hear about; so is trust
        // enforcement that cannot run.
        for event in &mut events {
            if event.reason == SkillCardReason::NewPinRefused.as_str()
                || event.reason == SkillCardReason::TrustPoliciesUnavailable.as_str()
            {
                event.warning = true;
            }
        }
        events
    }

    fn extensions(
        &self,
        old: &SkillCardStatus,
        new: &mut SkillCardStatus,
        now: &Time,
    ) -> Option<StatusEvent> {
        let (record, event) = agentic_core::extensions::judge(
            &old.extension_fields,
            agentic_core::extensions::of_skill_card(&self.spec),
            &old.conditions,
            &mut new.conditions,
            self.metadata.generation,
            now,
            SkillCardReason::ExtensionFieldsDropped,
        );
        new.extension_fields = record;
        event
    }
}

/// A card's pass: gather (its credentials, the trust policies, its skill, what holds its
/// inline ConfigMap's name, the signatures of the pins it may keep), decide its status with
/// the trust verdict (`agentic_core::cards`), apply its ConfigMap. Nothing runs after apply.
pub async fn reconcile(
    card: Arc<SkillCard>,
    ctx: Arc<Context>,
    old: SkillCardStatus,
) -> Result<Pass<SkillCardStatus>> {
    let namespace = namespace_of(card.as_ref(), KIND)?;
    let now = crate::now();
    let gathered = gather(&card, &old, &namespace, &ctx, &now).await?;
    let decision = decide_trusted_card(&gathered.inputs, &gathered.trust, &old, &now);
    apply(gathered, decision, &old, &namespace, &ctx, &now).await
}

/// What a card's pass read.
struct Gathered<'a> {
    inputs: CardInputs<'a>,
    /// The object holding the inline ConfigMap's name, whole, for the apply to write over
    /// without a second read (read whenever the decision can want the ConfigMap: a valid
    /// inline skill).
    holder: Option<ConfigMap>,
    trust: TrustEvidence,
}

/// The credentials of a card's skill, each Secret read once a pass: its pull Secrets for an
/// image, its `spec.sourceSecret` for git; `None` when the pass needs none.
struct Credentials {
    registry: Option<Fetched<RegistryAuth>>,
    git: Option<Fetched<agentic_git::GitAuth>>,
}

impl Credentials {
    /// Reads the credentials the skill read needs (`for_skill`) or the signatures do
    /// (`for_trust`).
    async fn read(
        card: &SkillCard,
        namespace: &str,
        ctx: &Context,
        for_skill: bool,
        for_trust: bool,
    ) -> Result<Self> {
        let needed = for_skill || for_trust;
        let registry = match card.spec.image.as_deref().map(registry_of::<RegistryAuth>) {
            Some(Ok(registry)) if needed => Some(pull_auth(card, &registry, namespace, ctx).await?),
            _ => None,
        };
        let git = if card.spec.source.is_some() && needed {
            Some(source_auth(card, namespace, ctx).await?)
        } else {
            None
        };
        Ok(Self { registry, git })
    }

    /// The credentials signatures are read with: the skill's own. A secret that cannot be
    /// used leaves the card not Ready already, so anonymous stands in.
    fn for_signatures(&self) -> trustpolicy::SourceAuth {
        let registry = match &self.registry {
            Some(Fetched::Read(auth)) => auth.clone(),
            _ => RegistryAuth::Anonymous,
        };
        let git = match &self.git {
            Some(Fetched::Read(auth)) => auth.clone(),
            _ => agentic_git::GitAuth::Anonymous,
        };
        trustpolicy::SourceAuth { registry, git }
    }
}

/// Reads what the card's status is decided from: the policies in force, the credentials, its
/// skill, the holder of its inline ConfigMap's name, and the signatures of the pins it may
/// keep.
async fn gather<'a>(
    card: &'a SkillCard,
    old: &SkillCardStatus,
    namespace: &str,
    ctx: &Context,
    now: &Time,
) -> Result<Gathered<'a>> {
    let owner = owner_of(card, KIND)?;
    // The one write a pass makes before its end: a progress mark, with no Event, so that a
    // slow registry or git read does not leave the card without a word for this generation.
    if let Some(validating) = validating(card, old, now) {
        let api: Api<SkillCard> = Api::namespaced(ctx.client.clone(), namespace);
        apply_status(&api, &card.name_any(), &validating).await?;
        ctx.written.remember(KIND, card, validating);
    }
    let policies = trustpolicy::listed_policies(ctx, namespace).await;
    let delivery = delivery_of(card);
    // A git card reads its secret to resolve its ref; an image card pinned by this
    // generation's digest reads nothing.
    let for_skill = delivery == Some(DeliveryMode::Source) || pinned_skill(card, old).is_none();
    let for_trust = policies.as_ref().is_ok_and(|policies| !policies.is_empty());
    let credentials = Credentials::read(card, namespace, ctx, for_skill, for_trust).await?;
    let skill = match delivery {
        Some(DeliveryMode::Inline) => read_inline(card),
        Some(DeliveryMode::Source) => read_git(card, old, credentials.git.clone(), ctx).await,
        Some(DeliveryMode::Image) => {
            read_image(card, old, credentials.registry.clone(), namespace, ctx).await
        }
        None => no_skill_source(),
    };
    let holder = match (&skill, config_map_name(card)) {
        (Fetched::Read(_), Some(name)) => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
            api.get_opt(&name).await?
        }
        _ => None,
    };
    let read_pin = match &skill {
        Fetched::Read(skill) => skill.pinned.as_deref(),
        _ => None,
    };
    let pins = pins_to_check(read_pin, old);
    let trust = trustpolicy::gather_trust(policies, pins, &credentials.for_signatures(), ctx).await;
    let inputs = CardInputs {
        card,
        owner,
        skill,
        config_map: holder.as_ref().map(|holder| holder.metadata.clone()),
    };
    Ok(Gathered {
        inputs,
        holder,
        trust,
    })
}

/// Writes the inline ConfigMap the decision wants over the holder gather read. An object that
/// took its name since it was read is a holder the decision did not see: the card is decided
/// again with it.
async fn apply(
    mut gathered: Gathered<'_>,
    mut decision: CardDecision,
    old: &SkillCardStatus,
    namespace: &str,
    ctx: &Context,
    now: &Time,
) -> Result<Pass<SkillCardStatus>> {
    if let Some(config_map) = decision.config_map.take() {
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
        let uid = &gathered.inputs.owner.uid;
        let holder = gathered.holder.as_ref();
        let applied = apply_owned_after_read(&api, holder, config_map, "ConfigMap", uid);
        if let Err(taken) = applied.await? {
            gathered.inputs.config_map = Some(ObjectMeta {
                name: Some(taken.name),
                ..ObjectMeta::default()
            });
            decision = decide_trusted_card(&gathered.inputs, &gathered.trust, old, now);
        }
    }
    let card = gathered.inputs.card;
    let next = action(decision.next, ctx.settings.tag_refresh_interval, || {
        let what = format!("SkillCard {namespace}/{}", card.name_any());
        if card.spec.source.is_some() {
            Error::SourceUnavailable(what)
        } else {
            Error::RegistryUnavailable(what)
        }
    });
    Ok(Pass {
        status: decision.status,
        next,
    })
}

/// An image card's skill: the tag resolved to a digest (skipped for a digest this generation
/// already validated) with its pull Secrets' `credentials`, `SKILL.md` read through the skill
/// cache.
async fn read_image(
    card: &SkillCard,
    old: &SkillCardStatus,
    credentials: Option<Fetched<RegistryAuth>>,
    namespace: &str,
    ctx: &Context,
) -> Fetched<ValidSkill> {
    let image = card.spec.image.as_deref().unwrap_or_default();
    if let Some(skill) = pinned_skill(card, old) {
        return Fetched::Read(skill);
    }
    let registry = match registry_of(image) {
        Ok(registry) => registry,
        Err(refused) => return refused,
    };
    let auth = match credentials.map(Fetched::into_read) {
        Some(Ok(auth)) => auth,
        Some(Err(refused)) => return refused,
        None => RegistryAuth::Anonymous,
    };
    let client = &ctx.settings.registry;
    // A refresh of content this generation validated takes a tag resolution another card
    // of the same reference and credentials made within the refresh interval: one request
    // per reference and interval, however many cards share it. The first read of a
    // generation asks the registry, so a tag pushed a moment ago is what it sees.
    let max_age = if validated_at(old, card.metadata.generation) {
        ctx.settings.tag_refresh_interval
    } else {
        std::time::Duration::ZERO
    };
    let resolved = ctx.resolutions.resolve(image, &auth, client, max_age).await;
    let content = match resolved {
        Ok(resolved) => {
            ctx.skills
                .fetch_skill(&resolved, card.spec.sub_path.as_deref(), &auth, client)
                .await
        }
        Err(e) => Err(e),
    };
    sync_registry_metrics(ctx);
    let reader = Reader {
        namespace,
        name: &card.name_any(),
    };
    let answer = registry_answer(content, &registry, &reader, None);
    answer.and_then(|content| match &content.report.frontmatter {
        Some(frontmatter) => Fetched::Read(ValidSkill {
            frontmatter: frontmatter_of(frontmatter),
            pinned: Some(content.image.repository_with_digest.clone()),
            body_bytes: body_bytes_of(&content.skill_md),
        }),
        None => Fetched::Rejected(Finding::new(
            SkillCardReason::InvalidSkill,
            content.report.summary(),
        )),
    })
}

fn sync_registry_metrics(ctx: &Context) {
    let cache = ctx.skills.stats();
    let registry = ctx.settings.registry.stats();
    ctx.metrics
        .sync_registry_stats(registry.requests, cache.hits, cache.misses);
}

/// Reads the card's pull secrets into registry credentials. A missing or malformed secret
/// refuses the card; an error of the API is the pass's.
async fn pull_auth(
    card: &SkillCard,
    registry: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<Fetched<RegistryAuth>> {
    let names: Vec<&str> = card
        .spec
        .pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    if names.is_empty() {
        return Ok(Fetched::Read(RegistryAuth::Anonymous));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut configs = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        let Some(secret) = secrets.get_opt(name).await? else {
            missing.push(name.to_string());
            continue;
        };
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .map(|b| b.0.clone());
        let message = match data.map(|bytes| DockerConfig::parse(&bytes, &format!("Secret {name}")))
        {
            Some(Ok(config)) => {
                configs.push(config);
                continue;
            }
            Some(Err(e)) => format!("spec.pullSecrets: {e}"),
            None => format!(
                "spec.pullSecrets: Secret {name} has no .dockerconfigjson key; use a Secret of type kubernetes.io/dockerconfigjson"
            ),
        };
        return Ok(Fetched::Refused(Finding::new(
            SkillCardReason::InvalidPullSecret,
            message,
        )));
    }
    if !missing.is_empty() {
        return Ok(Fetched::Refused(Finding::new(
            SkillCardReason::PullSecretNotFound,
            format!(
                "spec.pullSecrets: Secret(s) not found in namespace {namespace}: {}",
                missing.join(", ")
            ),
        )));
    }
    Ok(Fetched::Read(RegistryAuth::from_docker_configs(
        &configs, registry,
    )))
}

/// A git card's skill: the ref resolved to a commit with `spec.sourceSecret`'s
/// `credentials` (skipped for a commit id this generation already validated), the skill at
/// that commit validated, answered from the commit cache when another card did it before.
async fn read_git(
    card: &SkillCard,
    old: &SkillCardStatus,
    credentials: Option<Fetched<agentic_git::GitAuth>>,
    ctx: &Context,
) -> Fetched<ValidSkill> {
    let url = card.spec.source.as_deref().unwrap_or_default();
    let options = ctx.settings.git.clone();
    let source = match agentic_git::SourceUrl::parse(url, &options.insecure_hosts) {
        Ok(source) => source,
        Err(e) => {
            let finding = Finding::new(git_reason(&e), format!("spec.source: {e}"));
            return Fetched::Refused(finding);
        }
    };
    let auth = match credentials.map(Fetched::into_read) {
        Some(Ok(auth)) => auth,
        Some(Err(refused)) => return refused,
        None => agentic_git::GitAuth::Anonymous,
    };
    if let Some(skill) = pinned_skill(card, old) {
        return Fetched::Read(skill);
    }
    let git_ref = card.spec.git_ref.clone();
    let sub_path = card.spec.sub_path.clone();
    let resolved = {
        let (source, auth, options) = (source.clone(), auth.clone(), options.clone());
        tokio::task::spawn_blocking(move || {
            agentic_git::resolve(&source, git_ref.as_deref(), &auth, &options)
        })
    };
    let resolved = resolved
        .await
        .unwrap_or_else(|e| Err(join_failure(&source, e)));
    let namespace = card.namespace().unwrap_or_default();
    let commit = match resolved {
        Ok(resolved) => resolved.commit,
        Err(e) => return git_answer(card, &namespace, &source, e),
    };
    let verdict = match ctx.git_skills.get(url, &commit, sub_path.as_deref()) {
        Some(verdict) => verdict,
        None => {
            let task = (
                source.clone(),
                auth.clone(),
                options.clone(),
                commit.clone(),
                sub_path.clone(),
            );
            let verdict = tokio::task::spawn_blocking(move || {
                let (source, auth, options, commit, sub_path) = task;
                agentic_git::validate_commit(&source, &commit, sub_path.as_deref(), &auth, &options)
            })
            .await
            .unwrap_or_else(|e| Err(join_failure(&source, e)));
            ctx.git_skills
                .insert(url, &commit, sub_path.as_deref(), &verdict);
            verdict
        }
    };
    match verdict {
        Ok(skill) => Fetched::Read(ValidSkill {
            frontmatter: frontmatter_of(&skill.frontmatter),
            pinned: Some(format!("{url}@{}", skill.commit)),
            body_bytes: skill.body_bytes.and_then(|n| i64::try_from(n).ok()),
        }),
        Err(e) => git_answer(card, &namespace, &source, e),
    }
}

fn join_failure(
    source: &agentic_git::SourceUrl,
    error: tokio::task::JoinError,
) -> agentic_git::GitError {
    agentic_git::GitError::Io {
        path: source.to_string(),
        message: format!("the git task failed: {error}"),
    }
}

/// What a failed git step comes to. An unavailable server hides its cause (in the operator's
/// log only, as for registries).
fn git_answer(
    card: &SkillCard,
    namespace: &str,
    source: &agentic_git::SourceUrl,
    error: agentic_git::GitError,
) -> Fetched<ValidSkill> {
    if error.is_transient() {
        tracing::warn!(
            namespace,
            name = %card.name_any(),
            source = %source,
            error = %error,
            "git server unreachable"
        );
        return Fetched::Unavailable(Finding::new(
            SkillCardReason::SourceUnavailable,
            format!("the git server of {source} did not answer; the operator's log has the cause"),
        ));
    }
    let finding = Finding::new(git_reason(&error), error.to_string());
    match error {
        GitError::RefNotFound { .. } => Fetched::RefGone(finding),
        _ => Fetched::Rejected(finding),
    }
}

/// The reason a card writes for a git error: the error's own word (`GitError::reason`). No
/// arm is a catch-all, so a new variant does not compile until it is given a reason.
fn git_reason(error: &GitError) -> SkillCardReason {
    use SkillCardReason as R;
    match error {
        GitError::InvalidSource { .. } => R::InvalidSource,
        GitError::InvalidRef { .. } => R::InvalidRef,
        GitError::InvalidSubPath { .. } => R::InvalidSubPath,
        GitError::RefNotFound { .. } => R::RefNotFound,
        GitError::RepositoryNotFound { .. } => R::RepositoryNotFound,
        GitError::Unauthorized { .. } => R::Unauthorized,
        // Transient, both: `git_answer` reports them as the outage they are. `Io` is a
        // failure of the operator's own fetch (its scratch directory, a failed task).
        GitError::SourceUnavailable { .. } | GitError::Io { .. } => R::SourceUnavailable,
        GitError::SubPathRequired { .. } => R::SubPathRequired,
        GitError::Skill(verdict) => verdict_reason(verdict),
        GitError::NestedSkillFile { .. } => R::NestedSkillFile,
        GitError::LinkInSkill { .. } => R::LinkInSkill,
        GitError::UnsafeContent { .. } => R::UnsafeSourceContent,
        GitError::TooLarge { .. } => R::RepositoryTooLarge,
    }
}

/// Reads `spec.sourceSecret` into HTTP credentials. A missing Secret or key refuses the card;
/// an error of the API is the pass's.
async fn source_auth(
    card: &SkillCard,
    namespace: &str,
    ctx: &Context,
) -> Result<Fetched<agentic_git::GitAuth>> {
    let Some(reference) = &card.spec.source_secret else {
        return Ok(Fetched::Read(agentic_git::GitAuth::Anonymous));
    };
    let name = &reference.name;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(Fetched::Refused(Finding::new(
            SkillCardReason::SourceSecretNotFound,
            format!("spec.sourceSecret: Secret {name} not found in namespace {namespace}"),
        )));
    };
    let value = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    Ok(match (value("username"), value("password")) {
        (Some(username), Some(password)) => {
            Fetched::Read(agentic_git::GitAuth::Basic { username, password })
        }
        _ => Fetched::Refused(Finding::new(
            SkillCardReason::InvalidSourceSecret,
            format!(
                "spec.sourceSecret: Secret {name} needs the keys username and password (UTF-8), as a Secret of type kubernetes.io/basic-auth has"
            ),
        )),
    })
}

/// An inline card's skill, validated from the object itself.
fn read_inline(card: &SkillCard) -> Fetched<ValidSkill> {
    let text = card.spec.inline.as_deref().unwrap_or_default();
    let report = agentic_skill::validate_skill_md(text.as_bytes(), None);
    match (report.refusal(), &report.frontmatter) {
        (None, Some(frontmatter)) => Fetched::Read(ValidSkill {
            frontmatter: frontmatter_of(frontmatter),
            pinned: None,
            body_bytes: body_bytes_of(text.as_bytes()),
        }),
        // The refusal an image or a git commit would give, so the same reason. A report with
        // no refusal always has a frontmatter: the fallback only keeps the match total.
        (refusal, _) => {
            let reason = match refusal {
                Some(Refusal::GooseIncompatible) => SkillCardReason::GooseIncompatible,
                Some(Refusal::InvalidSkill) | None => SkillCardReason::InvalidSkill,
            };
            Fetched::Refused(Finding::new(
                reason,
                format!("spec.inline: {}", report.summary()),
            ))
        }
    }
}

fn body_bytes_of(skill_md: &[u8]) -> Option<i64> {
    agentic_skill::body_bytes(skill_md).and_then(|n| i64::try_from(n).ok())
}

fn frontmatter_of(f: &agentic_skill::Frontmatter) -> SkillFrontmatter {
    SkillFrontmatter {
        name: f.name.clone(),
        description: f.description.clone(),
        license: f.license.clone(),
        compatibility: f.compatibility.clone(),
        allowed_tools: f.allowed_tools.clone(),
        metadata: f.metadata.clone(),
    }
}

pub(super) mod reads;
#[cfg(test)]
pub(crate) mod scenarios;
