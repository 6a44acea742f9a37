//! SkillCard: resolve, read and validate the skill, then report it.
//!
//! Pipeline: dereference (pull secrets, the source Secret) → validate (registry read through
//! the digest cache, git fetch of the pinned commit through the commit cache, or the inline
//! text) → build (inline ConfigMap) → apply → status.

use std::sync::Arc;

use agentic_api::{
    CONDITION_READY, ConditionStatus, DeliveryMode, SkillCard, SkillCardStatus, SkillFrontmatter,
};
use agentic_core::conditions::{find_condition, set_condition};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::reasons::{
    REASON_DEFAULT_BRANCH, REASON_DIGEST_RESOLVED, REASON_INVALID_PULL_SECRET,
    REASON_INVALID_SOURCE_SECRET, REASON_PULL_SECRET_NOT_FOUND, REASON_REF_RESOLVED,
    REASON_REF_SET, REASON_REGISTRY_UNAVAILABLE, REASON_SKILL_VALID,
    REASON_SOURCE_SECRET_NOT_FOUND,
};
use agentic_core::sandbox::REASON_OBJECT_NAME_TAKEN;
use agentic_oci::{DockerConfig, RegistryAuth};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, run_controller};
use super::support::{namespace_of, related};
use super::watches::{Stop, Watches};
use crate::apply::{NAME_TAKEN_RETRY, apply_owned, apply_status};
use crate::caches::SecretMeta;
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "SkillCard";
/// Condition telling whether the last digest check reached the registry.
pub const CONDITION_REGISTRY_REACHABLE: &str = "RegistryReachable";
/// Condition telling whether the last ref check reached the git server (git cards).
pub const CONDITION_SOURCE_REACHABLE: &str = "SourceReachable";
/// Condition telling whether a git card follows the repository's default branch.
pub const CONDITION_MOVING_REF: &str = "MovingRef";
/// `Ready` is Unknown: the registry or git server is being asked about this generation.
pub use agentic_core::reasons::REASON_VALIDATING;

/// What a pass concluded about the card's content.
enum CardVerdict {
    Valid {
        skill: SkillFrontmatter,
        resolved_image: Option<String>,
        /// `<url>@<commit>` for git cards.
        resolved_source: Option<String>,
        delivery: DeliveryMode,
        body_bytes: Option<i64>,
    },
    Invalid {
        reason: &'static str,
        message: String,
        /// The registry or git server answered (the verdict is about the content, not about
        /// the card's references), so `RegistryReachable` or `SourceReachable` is True.
        registry_answered: bool,
    },
    /// The registry or git server could not be reached (`transient`), or no longer has the
    /// ref: nothing new is known about the content, and a card validated at this generation
    /// keeps what it pinned.
    Unreachable {
        reason: &'static str,
        message: String,
        transient: bool,
    },
}

/// A verdict on the card itself (its spec or references); the registry was not asked.
fn invalid(reason: &'static str, message: impl Into<String>) -> CardVerdict {
    CardVerdict::Invalid {
        reason,
        message: message.into(),
        registry_answered: false,
    }
}

/// A verdict on the image, given by the registry's answer or the content it served.
fn rejected(reason: &'static str, message: impl Into<String>) -> CardVerdict {
    CardVerdict::Invalid {
        reason,
        message: message.into(),
        registry_answered: true,
    }
}

/// The SkillCard controller: re-reads a card when a pull secret it names changes. It
/// reconciles any number of cards at once: a pass waits for a registry or git server, whose
/// reads are bounded per registry already (`agentic-oci`), and a bound here would let one
/// slow registry's cards hold every slot.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let store = watches.skill_cards.store();
    let cards = store.clone();
    let controller = Controller::for_shared_stream(watches.skill_cards.applied(), store.clone())
        .watches_shared_stream(watches.secrets.touched(), move |secret: Arc<SecretMeta>| {
            related(&cards, secret.as_ref(), |cards, ns, name| {
                cards
                    .into_iter()
                    .filter(|c| c.namespace().as_deref() == Some(ns))
                    .filter(|c| c.spec.pull_secrets.iter().flatten().any(|s| s.name == name))
                    .map(ObjectRef::from_obj)
                    .collect()
            })
        });
    let policy = Policy {
        reconcile,
        error_policy,
        concurrency: 0,
    };
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for SkillCard {
    const KIND: &'static str = KIND;

    fn events(old: &SkillCardStatus, new: &SkillCardStatus) -> Vec<StatusEvent> {
        condition_events(&old.conditions, &new.conditions, &[CONDITION_READY])
    }
}

pub async fn reconcile(
    card: Arc<SkillCard>,
    ctx: Arc<Context>,
    old: SkillCardStatus,
) -> Result<Pass<SkillCardStatus>> {
    let namespace = namespace_of(card.as_ref(), KIND)?;
    let generation = card.metadata.generation;
    // The one write a pass makes before its end: a progress mark, with no Event, so that a
    // slow registry read does not leave the card without a word for this generation.
    if let Some(validating) = validating(&card, &old, generation) {
        let api: Api<SkillCard> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(&api, &card.name_any(), &validating).await?;
        ctx.written.remember(KIND, card.as_ref(), validating);
    }
    let verdict = evaluate(&card, &old, &namespace, &ctx).await?;

    let mut status = old.clone();
    status.observed_generation = generation;
    let now = crate::now();
    let unreachable = matches!(
        verdict,
        CardVerdict::Unreachable {
            transient: true,
            ..
        }
    );
    let reachability = reachability_of(&card);
    let name_taken = matches!(
        verdict,
        CardVerdict::Invalid { reason, .. } if reason == REASON_OBJECT_NAME_TAKEN
    );
    match verdict {
        CardVerdict::Valid {
            skill,
            resolved_image,
            resolved_source,
            delivery,
            body_bytes,
        } => {
            let message = match &resolved_source {
                Some(source) => format!("skill {} is valid at {source}", skill.name),
                None => format!("skill {} is valid", skill.name),
            };
            status.skill = Some(skill);
            status.resolved_image = resolved_image;
            status.resolved_source = resolved_source;
            status.body_bytes = body_bytes;
            status.delivery_mode = Some(delivery);
            set_condition(
                &mut status.conditions,
                CONDITION_READY,
                ConditionStatus::True,
                REASON_SKILL_VALID,
                &message,
                generation,
                now.clone(),
            );
            if let Some(reachability) = reachability {
                reachable(&mut status.conditions, reachability, generation, now);
            }
        }
        CardVerdict::Invalid {
            reason,
            message,
            registry_answered,
        } => {
            if registry_answered && let Some(reachability) = reachability {
                reachable(
                    &mut status.conditions,
                    reachability,
                    generation,
                    now.clone(),
                );
            }
            status.skill = None;
            status.resolved_image = None;
            status.resolved_source = None;
            status.body_bytes = None;
            status.delivery_mode = delivery_of(&card);
            set_condition(
                &mut status.conditions,
                CONDITION_READY,
                ConditionStatus::False,
                reason,
                &message,
                generation,
                now,
            );
        }
        CardVerdict::Unreachable {
            reason, message, ..
        } => {
            let condition = reachability.map_or(CONDITION_REGISTRY_REACHABLE, |r| r.condition);
            set_condition(
                &mut status.conditions,
                condition,
                ConditionStatus::False,
                reason,
                &message,
                generation,
                now.clone(),
            );
            // An outage (or, for git, a ref deleted since) says nothing about content already
            // validated at this generation: such a card stays Ready and keeps what it pinned.
            if !validated_at(&old, generation) {
                status.delivery_mode = delivery_of(&card);
                set_condition(
                    &mut status.conditions,
                    CONDITION_READY,
                    ConditionStatus::False,
                    reason,
                    &message,
                    generation,
                    crate::now(),
                );
            }
        }
    }
    if card.spec.source.is_some() {
        moving_ref(&card, &mut status.conditions, generation);
    }

    let next = if unreachable {
        let what = format!("SkillCard {namespace}/{}", card.name_any());
        Err(if card.spec.source.is_some() {
            Error::SourceUnavailable(what)
        } else {
            Error::RegistryUnavailable(what)
        })
    } else if name_taken {
        Ok(Action::requeue(NAME_TAKEN_RETRY))
    } else if card.spec.image.is_some() || card.spec.source.is_some() {
        Ok(Action::requeue(ctx.settings.tag_refresh_interval))
    } else {
        Ok(Action::await_change())
    };
    Ok(Pass { status, next })
}

/// A card whose registry is down is asked again at least once per tag refresh interval: the
/// growing backoff (up to minutes) alone kept cards stale long after the registry was back.
pub fn error_policy(card: Arc<SkillCard>, error: &Error, ctx: Arc<Context>) -> Action {
    let cap = ctx.settings.tag_refresh_interval;
    ctx.backoff_at_most(KIND, card.as_ref(), error, cap)
}

/// The condition telling whether the card's registry or git server answered, with what it
/// says when it did.
#[derive(Clone, Copy)]
struct Reachability {
    condition: &'static str,
    reason: &'static str,
    message: &'static str,
}

fn reachability_of(card: &SkillCard) -> Option<Reachability> {
    if card.spec.image.is_some() {
        Some(Reachability {
            condition: CONDITION_REGISTRY_REACHABLE,
            reason: REASON_DIGEST_RESOLVED,
            message: "the registry answered the last digest check",
        })
    } else if card.spec.source.is_some() {
        Some(Reachability {
            condition: CONDITION_SOURCE_REACHABLE,
            reason: REASON_REF_RESOLVED,
            message: "the git server answered the last ref check",
        })
    } else {
        None
    }
}

/// Sets the reachability condition True: the server answered the last check, whatever the
/// verdict on the content.
fn reachable(
    conditions: &mut Vec<Condition>,
    reachability: Reachability,
    generation: Option<i64>,
    now: Time,
) {
    set_condition(
        conditions,
        reachability.condition,
        ConditionStatus::True,
        reachability.reason,
        reachability.message,
        generation,
        now,
    );
}

/// `MovingRef` True when a git card has no `spec.ref`: it follows the default branch, so
/// what it pins changes whenever someone pushes there.
fn moving_ref(card: &SkillCard, conditions: &mut Vec<Condition>, generation: Option<i64>) {
    let (status, reason, message) = match card.spec.git_ref.as_deref() {
        None | Some("") => (
            ConditionStatus::True,
            REASON_DEFAULT_BRANCH,
            "spec.ref is empty: the card follows the repository's default branch, resolved again every tag refresh; set spec.ref to a tag or commit to pin it".to_string(),
        ),
        Some(git_ref) => (
            ConditionStatus::False,
            REASON_REF_SET,
            format!("the card follows spec.ref {git_ref}"),
        ),
    };
    set_condition(
        conditions,
        CONDITION_MOVING_REF,
        status,
        reason,
        &message,
        generation,
        crate::now(),
    );
}

fn delivery_of(card: &SkillCard) -> Option<DeliveryMode> {
    if card.spec.image.is_some() {
        Some(DeliveryMode::Image)
    } else if card.spec.inline.is_some() {
        Some(DeliveryMode::Inline)
    } else if card.spec.source.is_some() {
        Some(DeliveryMode::Source)
    } else {
        None
    }
}

/// The status that says a registry or git server is being asked, for a card whose `Ready`
/// says nothing yet about this generation: a slow or hung server must not leave a new or
/// edited card without any condition until the read's deadline. `None` when `Ready` already
/// speaks for this generation, or the card is inline (read from the object itself).
fn validating(
    card: &SkillCard,
    old: &SkillCardStatus,
    generation: Option<i64>,
) -> Option<SkillCardStatus> {
    let what = match (&card.spec.image, &card.spec.source) {
        (Some(image), _) => format!("reading the skill from image {image}"),
        (None, Some(source)) => format!("reading the skill from {source}"),
        (None, None) => return None,
    };
    let current = find_condition(&old.conditions, CONDITION_READY)
        .is_some_and(|ready| ready.observed_generation == generation);
    if current {
        return None;
    }
    let mut status = old.clone();
    set_condition(
        &mut status.conditions,
        CONDITION_READY,
        ConditionStatus::Unknown,
        REASON_VALIDATING,
        &what,
        generation,
        crate::now(),
    );
    Some(status)
}

/// Whether the status already carries content validated for this generation.
fn validated_at(status: &SkillCardStatus, generation: Option<i64>) -> bool {
    status.observed_generation == generation
        && (status.resolved_image.is_some() || status.resolved_source.is_some())
        && status.skill.is_some()
        && find_condition(&status.conditions, CONDITION_READY)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// The verdict on the card's content; `old` is the status the pass started from, with what
/// this generation already validated.
async fn evaluate(
    card: &SkillCard,
    old: &SkillCardStatus,
    namespace: &str,
    ctx: &Context,
) -> Result<CardVerdict> {
    if let Some(text) = &card.spec.inline {
        return evaluate_inline(card, text, namespace, ctx).await;
    }
    if let Some(url) = &card.spec.source {
        return evaluate_source(card, old, url, namespace, ctx).await;
    }
    let Some(image) = &card.spec.image else {
        return Ok(invalid(
            "NoSkillSource",
            "set exactly one of spec.image, spec.inline or spec.source".to_string(),
        ));
    };

    // A reference pinned by digest that this generation already validated cannot change:
    // skip the registry entirely.
    let validated = validated_at(old, card.metadata.generation);
    if image.contains("@sha256:")
        && validated
        && let (Some(skill), Some(resolved)) = (old.skill.clone(), old.resolved_image.clone())
    {
        return Ok(CardVerdict::Valid {
            skill,
            resolved_image: Some(resolved),
            resolved_source: None,
            delivery: DeliveryMode::Image,
            body_bytes: old.body_bytes,
        });
    }

    let registry = match agentic_oci::image_registry(image) {
        Ok(registry) => registry,
        Err(e) => {
            return Ok(invalid(e.reason(), format!("spec.image: {e}")));
        }
    };
    let auth = match pull_auth(card, &registry, namespace, ctx).await? {
        Ok(auth) => auth,
        Err(verdict) => return Ok(verdict),
    };
    let client = &ctx.settings.registry;
    // A refresh of content this generation validated takes a tag resolution another card
    // of the same reference and credentials made within the refresh interval: one request
    // per reference and interval, however many cards share it. The first read of a
    // generation asks the registry, so a tag pushed a moment ago is what it sees.
    let max_age = if validated {
        ctx.settings.tag_refresh_interval
    } else {
        std::time::Duration::ZERO
    };
    let resolved = ctx.resolutions.resolve(image, &auth, client, max_age).await;
    let checked = match resolved {
        Ok(resolved) => {
            ctx.skills
                .fetch_skill(&resolved, card.spec.sub_path.as_deref(), &auth, client)
                .await
        }
        Err(e) => Err(e),
    };
    sync_registry_metrics(ctx);
    Ok(match checked {
        Ok(content) => match &content.report.frontmatter {
            Some(frontmatter) => CardVerdict::Valid {
                skill: frontmatter_of(frontmatter),
                resolved_image: Some(content.image.repository_with_digest.clone()),
                resolved_source: None,
                delivery: DeliveryMode::Image,
                body_bytes: body_bytes_of(&content.skill_md),
            },
            None => rejected("InvalidSkill", content.report.summary()),
        },
        Err(e) if e.is_transient() => {
            // Which way the connection failed (refused, reset, a TLS handshake) stays in the
            // operator's log: in a status any card author could read, it would turn the
            // operator into a port scanner of every address it reaches.
            tracing::warn!(
                namespace,
                name = %card.name_any(),
                %registry,
                error = %crate::error::Chain(&e),
                "registry unreachable"
            );
            CardVerdict::Unreachable {
                reason: REASON_REGISTRY_UNAVAILABLE,
                message: format!(
                    "registry {registry} did not answer; the operator's log has the cause"
                ),
                transient: true,
            }
        }
        Err(e) => rejected(e.reason(), e.to_string()),
    })
}

fn sync_registry_metrics(ctx: &Context) {
    let cache = ctx.skills.stats();
    let registry = ctx.settings.registry.stats();
    ctx.metrics
        .sync_registry_stats(registry.requests, cache.hits, cache.misses);
}

/// Reads the card's pull secrets into registry credentials. A missing or malformed secret is
/// a verdict on the card, not an error of the pass.
async fn pull_auth(
    card: &SkillCard,
    registry: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<Result<RegistryAuth, CardVerdict>> {
    let names: Vec<&str> = card
        .spec
        .pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    if names.is_empty() {
        return Ok(Ok(RegistryAuth::Anonymous));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut configs = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        match secrets.get_opt(name).await? {
            Some(secret) => {
                let data = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(".dockerconfigjson"))
                    .map(|b| b.0.clone());
                let parsed =
                    data.map(|bytes| DockerConfig::parse(&bytes, &format!("Secret {name}")));
                match parsed {
                    Some(Ok(config)) => configs.push(config),
                    Some(Err(e)) => {
                        return Ok(Err(invalid(
                            REASON_INVALID_PULL_SECRET,
                            format!("spec.pullSecrets: {e}"),
                        )));
                    }
                    None => {
                        return Ok(Err(invalid(
                            REASON_INVALID_PULL_SECRET,
                            format!(
                                "spec.pullSecrets: Secret {name} has no .dockerconfigjson key; use a Secret of type kubernetes.io/dockerconfigjson"
                            ),
                        )));
                    }
                }
            }
            None => missing.push(name.to_string()),
        }
    }
    if !missing.is_empty() {
        return Ok(Err(invalid(
            REASON_PULL_SECRET_NOT_FOUND,
            format!(
                "spec.pullSecrets: Secret(s) not found in namespace {namespace}: {}",
                missing.join(", ")
            ),
        )));
    }
    Ok(Ok(RegistryAuth::from_docker_configs(&configs, registry)))
}

/// A git card: resolve the ref to a commit (skipped for a commit id this generation already
/// validated), then validate the skill at that commit, answered from the commit cache when
/// another card did it before.
async fn evaluate_source(
    card: &SkillCard,
    old: &SkillCardStatus,
    url: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<CardVerdict> {
    let options = ctx.settings.git.clone();
    let source = match agentic_git::SourceUrl::parse(url, &options.insecure_hosts) {
        Ok(source) => source,
        Err(e) => return Ok(invalid(e.reason(), format!("spec.source: {e}"))),
    };
    let auth = match source_auth(card, namespace, ctx).await? {
        Ok(auth) => auth,
        Err(verdict) => return Ok(verdict),
    };
    let git_ref = card.spec.git_ref.clone();
    let sub_path = card.spec.sub_path.clone();
    let pinned = |commit: &str| format!("{url}@{commit}");

    let is_commit = git_ref
        .as_deref()
        .is_some_and(|r| r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()));
    if is_commit
        && validated_at(old, card.metadata.generation)
        && let (Some(skill), Some(resolved)) = (old.skill.clone(), old.resolved_source.clone())
    {
        return Ok(CardVerdict::Valid {
            skill,
            resolved_image: None,
            resolved_source: Some(resolved),
            delivery: DeliveryMode::Source,
            body_bytes: old.body_bytes,
        });
    }

    let resolved = {
        let (source, auth, options) = (source.clone(), auth.clone(), options.clone());
        tokio::task::spawn_blocking(move || {
            agentic_git::resolve(&source, git_ref.as_deref(), &auth, &options)
        })
        .await
    };
    let resolved = match resolved {
        Ok(Ok(resolved)) => resolved,
        Ok(Err(e)) => return Ok(source_failure(card, old, namespace, &source, e)),
        Err(e) => {
            return Ok(source_failure(
                card,
                old,
                namespace,
                &source,
                join_failure(&source, e),
            ));
        }
    };
    let commit = resolved.commit;
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
            let checked = tokio::task::spawn_blocking(move || {
                let (source, auth, options, commit, sub_path) = task;
                agentic_git::validate_commit(&source, &commit, sub_path.as_deref(), &auth, &options)
            })
            .await;
            let verdict = match checked {
                Ok(verdict) => verdict,
                Err(e) => Err(join_failure(&source, e)),
            };
            ctx.git_skills
                .insert(url, &commit, card.spec.sub_path.as_deref(), &verdict);
            verdict
        }
    };
    Ok(match verdict {
        Ok(skill) => CardVerdict::Valid {
            skill: frontmatter_of(&skill.frontmatter),
            resolved_image: None,
            resolved_source: Some(pinned(&skill.commit)),
            delivery: DeliveryMode::Source,
            body_bytes: skill.body_bytes.and_then(|n| i64::try_from(n).ok()),
        },
        Err(e) => source_failure(card, old, namespace, &source, e),
    })
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

/// What a failed git step means for the card. An unavailable server is retried and hides its
/// cause (in the operator's log only, as for registries); a ref that no longer exists keeps a
/// card validated at this generation Ready on its pinned commit.
fn source_failure(
    card: &SkillCard,
    old: &SkillCardStatus,
    namespace: &str,
    source: &agentic_git::SourceUrl,
    error: agentic_git::GitError,
) -> CardVerdict {
    if error.is_transient() {
        tracing::warn!(
            namespace,
            name = %card.name_any(),
            source = %source,
            error = %error,
            "git server unreachable"
        );
        return CardVerdict::Unreachable {
            reason: "SourceUnavailable",
            message: format!(
                "the git server of {source} did not answer; the operator's log has the cause"
            ),
            transient: true,
        };
    }
    if let agentic_git::GitError::RefNotFound { .. } = &error
        && validated_at(old, card.metadata.generation)
    {
        return CardVerdict::Unreachable {
            reason: error.reason(),
            message: format!("{error}; sandboxes keep the pinned commit"),
            transient: false,
        };
    }
    rejected(error.reason(), error.to_string())
}

/// Reads `spec.sourceSecret` into HTTP credentials. A missing Secret or key is a verdict on
/// the card, not an error of the pass.
async fn source_auth(
    card: &SkillCard,
    namespace: &str,
    ctx: &Context,
) -> Result<Result<agentic_git::GitAuth, CardVerdict>> {
    let Some(reference) = &card.spec.source_secret else {
        return Ok(Ok(agentic_git::GitAuth::Anonymous));
    };
    let name = &reference.name;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(Err(invalid(
            REASON_SOURCE_SECRET_NOT_FOUND,
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
    match (value("username"), value("password")) {
        (Some(username), Some(password)) => {
            Ok(Ok(agentic_git::GitAuth::Basic { username, password }))
        }
        _ => Ok(Err(invalid(
            REASON_INVALID_SOURCE_SECRET,
            format!(
                "spec.sourceSecret: Secret {name} needs the keys username and password (UTF-8), as a Secret of type kubernetes.io/basic-auth has"
            ),
        ))),
    }
}

async fn evaluate_inline(
    card: &SkillCard,
    text: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<CardVerdict> {
    let report = agentic_skill::validate_skill_md(text.as_bytes(), None);
    match (&report.frontmatter, report.is_valid()) {
        (Some(frontmatter), true) => {
            let owner = card
                .controller_owner_ref(&())
                .ok_or_else(|| Error::MissingMetadata {
                    kind: KIND,
                    name: card.name_any(),
                    field: "metadata.uid",
                })?;
            let uid = owner.uid.clone();
            let config_map = match agentic_core::sandbox::build_inline_skill_config_map(card, owner)
            {
                Ok(config_map) => config_map,
                Err(e) => {
                    return Ok(invalid(e.reason(), e.to_string()));
                }
            };
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
            if let Err(taken) = apply_owned(&api, config_map, "ConfigMap", &uid).await? {
                return Ok(invalid(
                    REASON_OBJECT_NAME_TAKEN,
                    format!(
                        "{} {} exists and is not controlled by this SkillCard: it is left \
                         alone; delete or rename it to mount this skill",
                        taken.kind, taken.name
                    ),
                ));
            }
            Ok(CardVerdict::Valid {
                skill: frontmatter_of(frontmatter),
                resolved_image: None,
                resolved_source: None,
                delivery: DeliveryMode::Inline,
                body_bytes: body_bytes_of(text.as_bytes()),
            })
        }
        // Valid by the specification, but goose would not read it as written: a reason of
        // its own, as for images and git.
        _ if report.is_goose_incompatibility_only() => Ok(invalid(
            "GooseIncompatible",
            format!("spec.inline: {}", report.summary()),
        )),
        _ => Ok(invalid(
            "InvalidSkill",
            format!("spec.inline: {}", report.summary()),
        )),
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

#[cfg(test)]
pub(crate) mod scenarios;
