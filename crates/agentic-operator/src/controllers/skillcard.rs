//! SkillCard: resolve, read and validate the skill, then report it.
//!
//! Pipeline: dereference (pull secrets) → validate (registry read through the digest cache, or
//! the inline text) → build (inline ConfigMap) → apply → status.

use std::sync::Arc;
use std::time::Instant;

use agentic_api::{
    CONDITION_READY, ConditionStatus, DeliveryMode, SkillCard, SkillCardStatus, SkillFrontmatter,
};
use agentic_core::conditions::{find_condition, set_condition};
use agentic_core::sandbox::REASON_OBJECT_NAME_TAKEN;
use agentic_oci::{DockerConfig, RegistryAuth};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use super::namespace_of;
use crate::apply::{NAME_TAKEN_RETRY, apply_owned, apply_status};
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "SkillCard";
/// Condition telling whether the last digest check reached the registry.
pub const CONDITION_REGISTRY_REACHABLE: &str = "RegistryReachable";

/// What a pass concluded about the card's content.
enum Verdict {
    Valid {
        skill: SkillFrontmatter,
        resolved_image: Option<String>,
        delivery: DeliveryMode,
        body_bytes: Option<i64>,
    },
    Invalid {
        reason: &'static str,
        message: String,
        /// The registry answered (the verdict is about the image, not about the card's
        /// references), so `RegistryReachable` is True.
        registry_answered: bool,
    },
    /// The registry could not be reached: nothing is known about the content now.
    Unreachable { message: String },
}

/// A verdict on the card itself (its spec or references); the registry was not asked.
fn invalid(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict::Invalid {
        reason,
        message: message.into(),
        registry_answered: false,
    }
}

/// A verdict on the image, given by the registry's answer or the content it served.
fn rejected(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict::Invalid {
        reason,
        message: message.into(),
        registry_answered: true,
    }
}

pub async fn reconcile(card: Arc<SkillCard>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let namespace = namespace_of(card.as_ref(), KIND)?;
    let api: Api<SkillCard> = Api::namespaced(ctx.client.clone(), &namespace);
    let verdict = evaluate(&card, &namespace, &ctx).await?;

    let generation = card.metadata.generation;
    let old = card.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = generation;
    let now = crate::now();
    let unreachable = matches!(verdict, Verdict::Unreachable { .. });
    let name_taken = matches!(
        verdict,
        Verdict::Invalid { reason, .. } if reason == REASON_OBJECT_NAME_TAKEN
    );
    match verdict {
        Verdict::Valid {
            skill,
            resolved_image,
            delivery,
            body_bytes,
        } => {
            let message = format!("skill {} is valid", skill.name);
            status.skill = Some(skill);
            status.resolved_image = resolved_image;
            status.body_bytes = body_bytes;
            status.delivery_mode = Some(delivery);
            set_condition(
                &mut status.conditions,
                CONDITION_READY,
                ConditionStatus::True,
                "SkillValid",
                &message,
                generation,
                now.clone(),
            );
            if delivery == DeliveryMode::Image {
                registry_reachable(&mut status.conditions, generation, now);
            }
        }
        Verdict::Invalid {
            reason,
            message,
            registry_answered,
        } => {
            if registry_answered {
                registry_reachable(&mut status.conditions, generation, now.clone());
            }
            status.skill = None;
            status.resolved_image = None;
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
        Verdict::Unreachable { message } => {
            set_condition(
                &mut status.conditions,
                CONDITION_REGISTRY_REACHABLE,
                ConditionStatus::False,
                "RegistryUnavailable",
                &message,
                generation,
                now.clone(),
            );
            // A registry outage says nothing about content already validated at this
            // generation: such a card stays Ready and keeps its pinned digest.
            if !validated_at(&old, generation) {
                status.delivery_mode = delivery_of(&card);
                set_condition(
                    &mut status.conditions,
                    CONDITION_READY,
                    ConditionStatus::False,
                    "RegistryUnavailable",
                    &message,
                    generation,
                    crate::now(),
                );
            }
        }
    }

    if status != old {
        apply_status(&api, &card.name_any(), &status).await?;
        ctx.announce(
            card.as_ref(),
            &old.conditions,
            &status.conditions,
            CONDITION_READY,
        )
        .await;
    }
    ctx.metrics.reconciled(KIND, started.elapsed());
    if unreachable {
        return Err(Error::RegistryUnavailable(format!(
            "SkillCard {namespace}/{}",
            card.name_any()
        )));
    }
    ctx.succeeded(KIND, card.as_ref());
    Ok(if name_taken {
        Action::requeue(NAME_TAKEN_RETRY)
    } else if card.spec.image.is_some() {
        Action::requeue(ctx.settings.tag_refresh_interval)
    } else {
        Action::await_change()
    })
}

/// A card whose registry is down is asked again at least once per tag refresh interval: the
/// growing backoff (up to minutes) alone kept cards stale long after the registry was back.
pub fn error_policy(card: Arc<SkillCard>, error: &Error, ctx: Arc<Context>) -> Action {
    let cap = ctx.settings.tag_refresh_interval;
    ctx.backoff_at_most(KIND, card.as_ref(), error, cap)
}

/// Sets `RegistryReachable` True: the registry answered the last digest check, whatever
/// the verdict on the content.
fn registry_reachable(conditions: &mut Vec<Condition>, generation: Option<i64>, now: Time) {
    set_condition(
        conditions,
        CONDITION_REGISTRY_REACHABLE,
        ConditionStatus::True,
        "DigestResolved",
        "the registry answered the last digest check",
        generation,
        now,
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

/// Whether the status already carries content validated for this generation.
fn validated_at(status: &SkillCardStatus, generation: Option<i64>) -> bool {
    status.observed_generation == generation
        && status.resolved_image.is_some()
        && status.skill.is_some()
        && find_condition(&status.conditions, CONDITION_READY)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

async fn evaluate(card: &SkillCard, namespace: &str, ctx: &Context) -> Result<Verdict> {
    if let Some(text) = &card.spec.inline {
        return evaluate_inline(card, text, namespace, ctx).await;
    }
    if card.spec.source.is_some() {
        return Ok(invalid(
            "SourceNotSupported",
            "skills from git (spec.source) are not supported yet; use spec.image or spec.inline"
                .to_string(),
        ));
    }
    let Some(image) = &card.spec.image else {
        return Ok(invalid(
            "NoSkillSource",
            "set exactly one of spec.image, spec.inline or spec.source".to_string(),
        ));
    };

    // A reference pinned by digest that this generation already validated cannot change:
    // skip the registry entirely.
    let old = card.status.clone().unwrap_or_default();
    if image.contains("@sha256:")
        && validated_at(&old, card.metadata.generation)
        && let (Some(skill), Some(resolved)) = (old.skill, old.resolved_image)
    {
        return Ok(Verdict::Valid {
            skill,
            resolved_image: Some(resolved),
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
    let options = &ctx.settings.registry;
    let checked = match agentic_oci::resolve_digest(image, &auth, options).await {
        Ok(resolved) => {
            ctx.skills
                .fetch_skill(&resolved, card.spec.sub_path.as_deref(), &auth, options)
                .await
        }
        Err(e) => Err(e),
    };
    sync_registry_metrics(ctx);
    Ok(match checked {
        Ok(content) => match &content.report.frontmatter {
            Some(frontmatter) => Verdict::Valid {
                skill: frontmatter_of(frontmatter),
                resolved_image: Some(content.image.repository_with_digest.clone()),
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
            Verdict::Unreachable {
                message: format!(
                    "registry {registry} did not answer; the operator's log has the cause"
                ),
            }
        }
        Err(e) => rejected(e.reason(), e.to_string()),
    })
}

fn sync_registry_metrics(ctx: &Context) {
    let cache = ctx.skills.stats();
    let registry = agentic_oci::registry_stats();
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
) -> Result<Result<RegistryAuth, Verdict>> {
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
                            "InvalidPullSecret",
                            format!("spec.pullSecrets: {e}"),
                        )));
                    }
                    None => {
                        return Ok(Err(invalid(
                            "InvalidPullSecret",
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
            "PullSecretNotFound",
            format!(
                "spec.pullSecrets: Secret(s) not found in namespace {namespace}: {}",
                missing.join(", ")
            ),
        )));
    }
    Ok(Ok(RegistryAuth::from_docker_configs(&configs, registry)))
}

async fn evaluate_inline(
    card: &SkillCard,
    text: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<Verdict> {
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
            Ok(Verdict::Valid {
                skill: frontmatter_of(frontmatter),
                resolved_image: None,
                delivery: DeliveryMode::Inline,
                body_bytes: body_bytes_of(text.as_bytes()),
            })
        }
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
