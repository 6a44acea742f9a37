//! SkillCollection: list the skills of its image through the registry API (or take its
//! `skills` entries), own one SkillCard per skill, delete the generated cards it no longer
//! lists, and report Ready when every one of its SkillCards is Ready.
//!
//! Pipeline: gather (resolve the image to a digest, list its skills, read the root skill's
//! name) → decide the cards it should have (`agentic_core::collections::plan_collection`:
//! the generated SkillCards, pinned by digest) → gather those cards and the ones it controls
//! → decide (`decide_collection`: the status, the cards to write and to delete) → apply
//! (create or update the cards it controls, leave any other card of the name alone) → prune;
//! the status through the wrapper.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use agentic_api::{
    CONDITION_READY, SKILL_COLLECTION_LABEL, SkillCard, SkillCardSpec, SkillCollection,
    SkillCollectionStatus,
};
use agentic_core::cards::Fetched;
use agentic_core::collections::{
    CollectionDecision, ImageListing, ImageSkills, Planned, decide_collection,
    label_cluster_defaults, plan_collection,
};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::names::label_value;
use agentic_core::owners::controlling_collection;
use agentic_core::skills::Lookup;
use agentic_oci::{RegistryAuth, SkillListing};
use futures::future::BoxFuture;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, backoff_within_tag_refresh, run_controller};
use super::skillcard::reads::{Reader, action, registry_answer, registry_of};
use super::support::{Read, lookup, namespace_of, owner_of, read_reference, related};
use super::watches::{Stop, Watches};
use crate::apply::apply_owned;
use crate::caches::Guarded;
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "SkillCollection";

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
    let collections = watches.of::<SkillCollection>();
    let store = collections.store();
    let by_card = collections.index(|collection| {
        collection
            .spec
            .skills
            .iter()
            .flatten()
            .filter_map(|s| s.skill_card_ref.clone())
            .collect()
    });
    let cached = store.clone();
    let controller = Controller::for_shared_stream(collections.applied(), store.clone())
        .watches_shared_stream(
            watches.of::<SkillCard>().touched(),
            move |card: Arc<Guarded<SkillCard>>| {
                let Ok(card) = &card.0 else {
                    return Vec::new();
                };
                // The collections listing the card, and the one that made it.
                let candidates = |namespace: &str, name: &str| {
                    let mut names = by_card.get(namespace, name);
                    names.extend(controlling_collection(card.meta()).map(str::to_string));
                    names
                };
                related(&cached, card, candidates, |collections, ns, _| {
                    collections_of_card(collections, ns, card)
                })
            },
        );
    let policy = Policy {
        reconcile,
        error_policy: backoff_within_tag_refresh,
        concurrency: ctx.settings.reconcile_concurrency,
    };
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for SkillCollection {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        super::pipeline::ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &SkillCollectionStatus, new: &SkillCollectionStatus) -> Vec<StatusEvent> {
        condition_events(&old.conditions, &new.conditions, &[CONDITION_READY])
    }
}

/// A collection's pass: list its image (or take its entries) and decide the cards it should
/// have, read those cards and the ones it controls, decide its status and what to write and
/// delete, then apply and prune.
pub async fn reconcile(
    collection: Arc<SkillCollection>,
    ctx: Arc<Context>,
    old: SkillCollectionStatus,
) -> Result<Pass<SkillCollectionStatus>> {
    let namespace = namespace_of(collection.as_ref(), KIND)?;
    let name = collection.name_any();
    let owner = owner_of(collection.as_ref(), KIND)?;
    let api: Api<SkillCard> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = crate::now();

    let listing = match &collection.spec.image {
        Some(image) => Some(list_image(image, &namespace, &name, &ctx).await),
        None => None,
    };
    let mut planned = plan_collection(&collection, &owner, listing);
    label_cluster_defaults(
        &mut planned,
        &collection,
        ctx.settings.default_skills_namespace.as_deref(),
    );
    let mut cards = gather_cards(&api, &name, &planned, &namespace, &ctx).await?;
    let decide = |cards: &Cards| {
        decide_collection(
            &collection,
            &owner.uid,
            planned.clone(),
            &cards.lookups(),
            &old,
            &now,
        )
    };
    let mut decision = decide(&cards);
    let taken = apply(&api, &owner.uid, &decision, &cards).await?;
    if !taken.is_empty() {
        // Taken between the read and the write: decided again with the cards apply found.
        for name in taken {
            cards.taken(name);
        }
        decision = decide(&cards);
    }
    let next = action(decision.next, ctx.settings.tag_refresh_interval, || {
        Error::RegistryUnavailable(format!("SkillCollection {namespace}/{name}"))
    });
    Ok(Pass {
        status: decision.status,
        next,
    })
}

/// The SkillCards a collection's decision is made from, by name.
struct Cards(BTreeMap<String, Read<SkillCard>>);

impl Cards {
    fn lookups(&self) -> Vec<(String, Lookup<'_, SkillCard>)> {
        self.0
            .iter()
            .map(|(name, card)| (name.clone(), lookup(card)))
            .collect()
    }

    /// Records that another object holds the name `name`.
    fn taken(&mut self, name: String) {
        let foreign = SkillCard::new(&name, SkillCardSpec::default());
        self.0.insert(name, Some(Ok(foreign)));
    }
}

/// Reads every card the plan names, and the labelled cards the collection controls. A
/// generated card that does not deserialize fails the pass, as its apply would.
async fn gather_cards(
    api: &Api<SkillCard>,
    collection: &str,
    planned: &Planned,
    namespace: &str,
    ctx: &Context,
) -> Result<Cards> {
    let mut cards = BTreeMap::new();
    let Planned::Cards { plan, .. } = planned else {
        return Ok(Cards(cards));
    };
    for card in &plan.generated {
        let name = card.name_any();
        let existing = api.get_opt(&name).await?;
        cards.insert(name, existing.map(Ok));
    }
    for name in &plan.referenced {
        let read = read_reference::<SkillCard>(&ctx.client, namespace, name).await?;
        cards.insert(name.clone(), read);
    }
    let selector = format!("{SKILL_COLLECTION_LABEL}={}", label_value(collection));
    for card in api.list(&ListParams::default().labels(&selector)).await? {
        cards.entry(card.name_any()).or_insert(Some(Ok(card)));
    }
    Ok(Cards(cards))
}

/// Creates or updates the cards the decision wants and deletes those it prunes. Returns the
/// names of the cards other objects took since they were read: those are left alone.
async fn apply(
    api: &Api<SkillCard>,
    uid: &str,
    decision: &CollectionDecision,
    cards: &Cards,
) -> Result<Vec<String>> {
    let mut taken = Vec::new();
    for card in &decision.apply {
        if let Err(t) = apply_owned(api, card.clone(), "SkillCard", uid).await? {
            taken.push(t.name);
        }
    }
    for name in &decision.prune {
        let uid = cards
            .0
            .get(name)
            .and_then(|card| card.as_ref()?.as_ref().ok()?.metadata.uid.clone());
        prune(api, name, uid).await?;
    }
    Ok(taken)
}

/// Resolves the collection's image to a digest and lists its skills through the registry
/// API (once per digest), reading the name of a skill at the image root from its SKILL.md.
/// Collections have no pull secrets: the image is read anonymously.
async fn list_image(
    image: &str,
    namespace: &str,
    name: &str,
    ctx: &Context,
) -> Fetched<ImageListing> {
    let auth = RegistryAuth::Anonymous;
    let client = &ctx.settings.registry;
    let registry = match registry_of(image) {
        Ok(registry) => registry,
        Err(refused) => return refused,
    };
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
        Ok(ImageListing {
            pinned: resolved.repository_with_digest,
            skills,
        })
    };
    let reader = Reader { namespace, name };
    registry_answer(answer.await, &registry, &reader, Some("spec.image"))
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
        .ok_or_else(|| {
            agentic_oci::OciError::Skill(agentic_skill::SkillVerdict::InvalidSkill {
                path: content.path.clone(),
                summary: content.report.summary(),
            })
        })?;
    Ok(ImageSkills::Root { name })
}

/// Deletes the SkillCard `name` the collection controls and no longer lists, on the
/// condition that it is still the object read (its `uid`).
async fn prune(cards: &Api<SkillCard>, name: &str, uid: Option<String>) -> Result<()> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match cards.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(card = %name, "deleted a SkillCard the collection no longer lists");
            Ok(())
        }
        // Gone already, or replaced by another object of the name: nothing of ours to delete.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
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
