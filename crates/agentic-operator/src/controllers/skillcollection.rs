//! SkillCollection: list the skills of its image through the registry API (or take its
//! `skills` entries), own one SkillCard per skill, delete the generated cards it no longer
//! lists, and report Ready when every one of its SkillCards is Ready.
//!
//! Pipeline: validate (resolve the image to a digest, list its skills, read the root skill's
//! name) → build (the generated SkillCards, pinned by digest) → apply (create or update the
//! cards it controls, leave any other card of the name alone) → prune → status.

use std::collections::HashMap;
use std::sync::Arc;

use agentic_api::{
    CONDITION_READY, ConditionStatus, SKILL_COLLECTION_LABEL, SkillCard, SkillCollection,
    SkillCollectionStatus,
};
use agentic_core::collections::{ImageSkills, Plan, plan_entries, plan_image, readiness};
use agentic_core::conditions::{find_condition, set_condition};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::names::label_value;
use agentic_core::owners::{controlling_collection, is_controlled_by};
use agentic_core::reasons::REASON_REGISTRY_UNAVAILABLE;
use agentic_core::sandbox::REASON_OBJECT_NAME_TAKEN;
use agentic_oci::{RegistryAuth, SkillListing};
use futures::future::BoxFuture;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, run_controller};
use super::support::{lookup, namespace_of, read_reference, related};
use super::watches::{Stop, Watches};
use crate::apply::{NAME_TAKEN_RETRY, apply_owned};
use crate::caches::Guarded;
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "SkillCollection";

/// What the collection's spec comes to, before any card is written.
enum ListingVerdict {
    /// Its SkillCards, and the image they were listed from.
    Planned {
        plan: Plan,
        resolved_image: Option<String>,
    },
    /// It cannot be used as it is.
    Refused {
        reason: &'static str,
        message: String,
    },
    /// The registry did not answer: nothing is known about the image now.
    Unreachable { message: String },
}

fn refused(reason: &'static str, message: impl Into<String>) -> ListingVerdict {
    ListingVerdict::Refused {
        reason,
        message: message.into(),
    }
}

/// Image listings kept; past this many, the cache starts over.
const LISTING_CACHE_ENTRIES: usize = 1024;

/// The skills of the images SkillCollections point at, by `repository@digest`: what a digest
/// holds never changes, so each is listed through the registry once per process.
#[derive(Default)]
struct Listings(std::sync::Mutex<HashMap<String, SkillListing>>);

impl Listings {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SkillListing>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The skills listed earlier from the image `pinned` (`repository@sha256:...`).
    fn get(&self, pinned: &str) -> Option<SkillListing> {
        self.lock().get(pinned).cloned()
    }

    fn remember(&self, listing: SkillListing) {
        let mut listings = self.lock();
        if listings.len() >= LISTING_CACHE_ENTRIES {
            listings.clear();
        }
        listings.insert(listing.image.repository_with_digest.clone(), listing);
    }
}

/// The SkillCollection controller: follows the SkillCards it generated or references.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let store = watches.skill_collections.store();
    let collections = store.clone();
    let controller =
        Controller::for_shared_stream(watches.skill_collections.applied(), store.clone())
            .watches_shared_stream(
                watches.skill_cards.touched(),
                move |card: Arc<Guarded<SkillCard>>| {
                    let Ok(card) = &card.0 else {
                        return Vec::new();
                    };
                    related(&collections, card, |collections, ns, _| {
                        collections_of_card(collections, ns, card)
                    })
                },
            );
    let policy = Policy {
        reconcile,
        error_policy,
        concurrency: ctx.settings.reconcile_concurrency,
    };
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for SkillCollection {
    const KIND: &'static str = KIND;

    fn events(old: &SkillCollectionStatus, new: &SkillCollectionStatus) -> Vec<StatusEvent> {
        condition_events(&old.conditions, &new.conditions, &[CONDITION_READY])
    }
}

pub async fn reconcile(
    collection: Arc<SkillCollection>,
    ctx: Arc<Context>,
    old: SkillCollectionStatus,
) -> Result<Pass<SkillCollectionStatus>> {
    let namespace = namespace_of(collection.as_ref(), KIND)?;
    let name = collection.name_any();
    let owner = collection
        .controller_owner_ref(&())
        .ok_or_else(|| Error::MissingMetadata {
            kind: KIND,
            name: name.clone(),
            field: "metadata.uid",
        })?;
    let uid = owner.uid.clone();
    let cards: Api<SkillCard> = Api::namespaced(ctx.client.clone(), &namespace);

    // Validate and build.
    let verdict = match &collection.spec.image {
        Some(image) => match list_image(image, &namespace, &name, &ctx).await {
            Ok((pinned, skills)) => match plan_image(&collection, &owner, &pinned, &skills) {
                Ok(plan) => ListingVerdict::Planned {
                    plan,
                    resolved_image: Some(pinned),
                },
                Err(e) => refused(e.reason(), e.to_string()),
            },
            Err(verdict) => verdict,
        },
        None => match plan_entries(&collection, &owner) {
            Ok(plan) => ListingVerdict::Planned {
                plan,
                resolved_image: None,
            },
            Err(e) => refused(e.reason(), e.to_string()),
        },
    };

    let generation = collection.metadata.generation;
    let mut status = old.clone();
    status.observed_generation = generation;
    let now = crate::now();
    let mut name_taken = false;
    let mut unreachable = false;
    match verdict {
        ListingVerdict::Planned {
            plan,
            resolved_image,
        } => {
            // Apply: every generated card, unless another object holds its name.
            let mut taken = Vec::new();
            for card in &plan.generated {
                if let Err(t) = apply_owned(&cards, card.clone(), "SkillCard", &uid).await? {
                    taken.push(t.name);
                }
            }
            let wanted = plan.card_names();
            prune(&cards, &name, &uid, &wanted).await?;

            let usable: Vec<String> = wanted.into_iter().filter(|n| !taken.contains(n)).collect();
            let mut read = Vec::new();
            for card in &usable {
                read.push((
                    card.clone(),
                    read_reference::<SkillCard>(&ctx.client, &namespace, card).await?,
                ));
            }
            let looked_up: Vec<(&str, _)> =
                read.iter().map(|(n, c)| (n.as_str(), lookup(c))).collect();
            let (ready, reason, message) = if taken.is_empty() {
                readiness(&looked_up)
            } else {
                name_taken = true;
                (
                    false,
                    REASON_OBJECT_NAME_TAKEN,
                    format!(
                        "SkillCard(s) {} exist and are not controlled by this SkillCollection: they are left alone; delete or rename them to use these skills",
                        taken.join(", ")
                    ),
                )
            };
            status.resolved_skills = usable;
            status.resolved_image = resolved_image;
            set_condition(
                &mut status.conditions,
                CONDITION_READY,
                if ready {
                    ConditionStatus::True
                } else {
                    ConditionStatus::False
                },
                reason,
                &message,
                generation,
                now,
            );
        }
        ListingVerdict::Refused { reason, message } => {
            status.resolved_skills.clear();
            status.resolved_image = None;
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
        ListingVerdict::Unreachable { message } => {
            unreachable = true;
            // A registry outage says nothing about skills already listed and validated at
            // this generation: the collection stays Ready on its pinned cards, none pruned.
            if !validated_at(&old, generation) {
                set_condition(
                    &mut status.conditions,
                    CONDITION_READY,
                    ConditionStatus::False,
                    REASON_REGISTRY_UNAVAILABLE,
                    &message,
                    generation,
                    now,
                );
            }
        }
    }

    let next = if unreachable {
        Err(Error::RegistryUnavailable(format!(
            "SkillCollection {namespace}/{name}"
        )))
    } else if name_taken {
        Ok(Action::requeue(NAME_TAKEN_RETRY))
    } else if collection
        .spec
        .image
        .as_deref()
        .is_some_and(|image| !image.contains("@sha256:"))
    {
        // A tag may move: list it again, like a SkillCard's tag.
        Ok(Action::requeue(ctx.settings.tag_refresh_interval))
    } else {
        Ok(Action::await_change())
    };
    Ok(Pass { status, next })
}

/// A collection whose registry is down is asked again at least once per tag refresh.
pub fn error_policy(collection: Arc<SkillCollection>, error: &Error, ctx: Arc<Context>) -> Action {
    let cap = ctx.settings.tag_refresh_interval;
    ctx.backoff_at_most(KIND, collection.as_ref(), error, cap)
}

/// Whether the status already describes a Ready collection at this generation.
fn validated_at(status: &SkillCollectionStatus, generation: Option<i64>) -> bool {
    status.observed_generation == generation
        && find_condition(&status.conditions, CONDITION_READY)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// Resolves the collection's image to a digest and lists its skills through the registry
/// API (once per digest), reading the name of a skill at the image root from its SKILL.md.
/// Collections have no pull secrets: the image is read anonymously.
async fn list_image(
    image: &str,
    namespace: &str,
    name: &str,
    ctx: &Context,
) -> std::result::Result<(String, ImageSkills), ListingVerdict> {
    let auth = RegistryAuth::Anonymous;
    let client = &ctx.settings.registry;
    let registry = agentic_oci::image_registry(image)
        .map_err(|e| refused(e.reason(), format!("spec.image: {e}")))?;
    let answer = async {
        let resolved = client.resolve_digest(image, &auth).await?;
        let listings = ctx.kind_state::<Listings>();
        let listing = match listings.get(&resolved.repository_with_digest) {
            Some(listing) => listing,
            None => {
                let listing = client.list_skills(&resolved, &auth).await?;
                listings.remember(listing.clone());
                listing
            }
        };
        let skills = skills_of(&listing, ctx, &auth).await?;
        Ok::<_, agentic_oci::OciError>((resolved.repository_with_digest, skills))
    };
    answer.await.map_err(|e| {
        if e.is_transient() {
            // As for SkillCards: how the connection failed stays in the operator's log.
            tracing::warn!(
                namespace,
                name,
                %registry,
                error = %crate::error::Chain(&e),
                "registry unreachable"
            );
            ListingVerdict::Unreachable {
                message: format!(
                    "registry {registry} did not answer; the operator's log has the cause"
                ),
            }
        } else {
            refused(e.reason(), format!("spec.image: {e}"))
        }
    })
}

/// The skills of a listing; a skill at the image root is named by its frontmatter, read (and
/// validated) through the skill cache the SkillCards use too.
async fn skills_of(
    listing: &SkillListing,
    ctx: &Context,
    auth: &RegistryAuth,
) -> std::result::Result<ImageSkills, agentic_oci::OciError> {
    if !listing.root {
        return Ok(ImageSkills::Directories(listing.directories.clone()));
    }
    let content = ctx
        .skills
        .fetch_skill(&listing.image, None, auth, &ctx.settings.registry)
        .await?;
    let name = content
        .report
        .frontmatter
        .as_ref()
        .map(|f| f.name.clone())
        .ok_or_else(|| agentic_oci::OciError::InvalidSkill {
            path: content.path.clone(),
            summary: content.report.summary(),
        })?;
    Ok(ImageSkills::Root { name })
}

/// Deletes the SkillCards this collection (`uid`) controls that it no longer lists. Cards
/// it does not control are never touched, whatever their labels say.
async fn prune(
    cards: &Api<SkillCard>,
    collection: &str,
    uid: &str,
    wanted: &[String],
) -> Result<()> {
    let selector = format!("{SKILL_COLLECTION_LABEL}={}", label_value(collection));
    let listed = cards.list(&ListParams::default().labels(&selector)).await?;
    for card in listed {
        let card_name = card.name_any();
        if !is_controlled_by(card.meta(), uid) || wanted.contains(&card_name) {
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: card.meta().uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match cards.delete(&card_name, &params).await {
            Ok(_) => {
                tracing::info!(collection, card = %card_name, "deleted a SkillCard the collection no longer lists")
            }
            // Gone already, or replaced by another object of the name: nothing of ours to delete.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The collections in `namespace` that a change to the SkillCard `card` concerns: the one
/// controlling it, and those whose `skillCardRef` entries name it.
pub fn collections_of_card<'a>(
    collections: impl IntoIterator<Item = &'a SkillCollection>,
    namespace: &str,
    card: &SkillCard,
) -> Vec<ObjectRef<SkillCollection>> {
    let name = card.name_any();
    let controller = controlling_collection(card.meta());
    collections
        .into_iter()
        .filter(|c| c.namespace().as_deref() == Some(namespace))
        .filter(|c| {
            controller == Some(c.name_any().as_str())
                || c.spec
                    .skills
                    .iter()
                    .flatten()
                    .any(|s| s.skill_card_ref.as_deref() == Some(name.as_str()))
        })
        .map(ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
mod scenarios;
