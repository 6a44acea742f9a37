//! A SkillCollection's SkillCards: the ones it generates (one per skill of its image, or per
//! `image`/`source` entry), the ones its `skillCardRef` entries name, and whether they are
//! all Ready.

use std::collections::BTreeMap;

use agentic_api::{
    CONDITION_READY, ConditionStatus, DEFAULT_SKILLS_LABEL, DEFAULTS_MANAGER, MANAGED_BY_LABEL,
    SKILL_COLLECTION_LABEL, SkillCard, SkillCardSpec, SkillCollection, SkillCollectionSkill,
    SkillCollectionStatus, SkillType,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::Error;
use crate::cards::{Fetched, Finding, Next};
use crate::conditions::{Conditions, find_condition};
use crate::names::{collection_skill_card_name, label_value};
use crate::owners::is_controlled_by;
use crate::pin::Pin;
use crate::reasons::SkillCollectionReason;
use crate::skills::{Lookup, card_not_usable};

/// The most skills one collection may hold: each becomes a SkillCard, and every Agent using
/// the collection mounts them all. The CRD bounds `spec.skills` to the same number.
pub const MAX_COLLECTION_SKILLS: usize = 256;

/// The skills an image holds, as listed through the registry API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSkills {
    /// One skill at the image root, with the frontmatter name read from its `SKILL.md`.
    Root { name: String },
    /// One skill per top-level directory (sorted). A valid skill's frontmatter name is its
    /// directory's name, so the directory names the card.
    Directories(Vec<String>),
}

/// What a collection consists of.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The SkillCards it generates and controls, sorted by name.
    pub generated: Vec<SkillCard>,
    /// The SkillCards its `skillCardRef` entries name, in spec order.
    pub referenced: Vec<String>,
}

impl Plan {
    /// Every SkillCard of the collection, sorted and without repeats: `status.resolvedSkills`.
    pub fn card_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .generated
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .chain(self.referenced.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// The SkillCards of a `spec.image` collection: one per skill of the image at `pinned`
/// (`repository@sha256:...`), named `<collection>-<skill>`, with `subPath` set for skills in
/// directories and the collection's `type`. Errors: [`Error::NoSkills`],
/// [`Error::TooManySkills`], [`Error::DuplicateSkillCardName`].
pub fn plan_image(
    collection: &SkillCollection,
    owner: &OwnerReference,
    pinned: &str,
    skills: &ImageSkills,
) -> Result<Plan, Error> {
    let skill_type = collection.spec.skill_type.unwrap_or_default();
    let wanted: Vec<(String, SkillCardSpec)> = match skills {
        ImageSkills::Root { name } => vec![(name.clone(), image_spec(pinned, None, skill_type))],
        ImageSkills::Directories(directories) => directories
            .iter()
            .map(|dir| (dir.clone(), image_spec(pinned, Some(dir), skill_type)))
            .collect(),
    };
    if wanted.is_empty() {
        return Err(Error::NoSkills {
            image: pinned.to_string(),
        });
    }
    build(collection, owner, wanted, Vec::new())
}

/// The SkillCards of a `spec.skills` collection: `skillCardRef` entries as they are, `image`
/// and `source` entries as generated cards named `<collection>-<name>`. `ref` is kept only
/// with `source` and `subPath` only with `image` or `source`, the rules a SkillCard has.
pub fn plan_entries(collection: &SkillCollection, owner: &OwnerReference) -> Result<Plan, Error> {
    let mut wanted = Vec::new();
    let mut referenced = Vec::new();
    for entry in collection.spec.skills.iter().flatten() {
        if let Some(card) = &entry.skill_card_ref {
            referenced.push(card.clone());
        } else if let Some(spec) = entry_spec(entry) {
            wanted.push((entry.name.clone(), spec));
        }
    }
    build(collection, owner, wanted, referenced)
}

fn image_spec(image: &str, sub_path: Option<&str>, skill_type: SkillType) -> SkillCardSpec {
    SkillCardSpec {
        image: Some(image.to_string()),
        sub_path: sub_path.map(str::to_string),
        skill_type,
        ..SkillCardSpec::default()
    }
}

fn entry_spec(entry: &SkillCollectionSkill) -> Option<SkillCardSpec> {
    let skill_type = entry.skill_type.unwrap_or_default();
    if let Some(image) = &entry.image {
        return Some(image_spec(image, entry.sub_path.as_deref(), skill_type));
    }
    entry.source.as_ref().map(|source| SkillCardSpec {
        source: Some(source.clone()),
        git_ref: entry.git_ref.clone(),
        sub_path: entry.sub_path.clone(),
        skill_type,
        ..SkillCardSpec::default()
    })
}

fn build(
    collection: &SkillCollection,
    owner: &OwnerReference,
    wanted: Vec<(String, SkillCardSpec)>,
    referenced: Vec<String>,
) -> Result<Plan, Error> {
    if wanted.len() + referenced.len() > MAX_COLLECTION_SKILLS {
        return Err(Error::TooManySkills {
            count: wanted.len() + referenced.len(),
            max: MAX_COLLECTION_SKILLS,
        });
    }
    let name = collection.metadata.name.clone().unwrap_or_default();
    let mut by_card: BTreeMap<String, (String, SkillCard)> = BTreeMap::new();
    for (skill, spec) in wanted {
        let card_name = collection_skill_card_name(&name, &skill);
        if let Some((first, _)) = by_card.get(&card_name) {
            return Err(Error::DuplicateSkillCardName {
                card: card_name,
                first: first.clone(),
                second: skill,
            });
        }
        let card = SkillCard {
            metadata: ObjectMeta {
                name: Some(card_name.clone()),
                namespace: collection.metadata.namespace.clone(),
                labels: Some(BTreeMap::from([(
                    SKILL_COLLECTION_LABEL.to_string(),
                    label_value(&name),
                )])),
                owner_references: Some(vec![owner.clone()]),
                ..ObjectMeta::default()
            },
            ..SkillCard::new(&card_name, spec)
        };
        by_card.insert(card_name, (skill, card));
    }
    if let Some(taken) = referenced.iter().find(|r| by_card.contains_key(*r)) {
        return Err(Error::DuplicateSkillCardName {
            card: taken.clone(),
            first: taken.clone(),
            second: by_card[taken].0.clone(),
        });
    }
    Ok(Plan {
        generated: by_card.into_values().map(|(_, card)| card).collect(),
        referenced,
    })
}

/// Whether a collection is Ready, from its SkillCards as read (`cards`, sorted by name):
/// True with [`SkillCollectionReason::AllSkillsResolved`] when every one is usable, otherwise
/// False with [`SkillCollectionReason::SkillsNotReady`] and a message naming each missing or
/// unusable card and why.
pub fn readiness<N: AsRef<str>>(
    cards: &[(N, Lookup<SkillCard>)],
) -> (bool, SkillCollectionReason, String) {
    let problems: Vec<String> = cards
        .iter()
        .filter_map(|(name, card)| {
            let name = name.as_ref();
            match card {
                Lookup::Missing => Some(format!("SkillCard {name:?} not found")),
                Lookup::Malformed(error) => Some(format!(
                    "SkillCard {name:?}: {}",
                    crate::skills::malformed_detail(error)
                )),
                Lookup::Found(card) => {
                    card_not_usable(card).map(|why| format!("SkillCard {name:?}: {why}"))
                }
            }
        })
        .collect();
    if problems.is_empty() {
        (
            true,
            SkillCollectionReason::AllSkillsResolved,
            format!("all {} skill(s) are Ready", cards.len()),
        )
    } else {
        (
            false,
            SkillCollectionReason::SkillsNotReady,
            format!(
                "{} of {} skill(s) are not Ready: {}",
                problems.len(),
                cards.len(),
                problems.join("; ")
            ),
        )
    }
}

/// A collection's image as listed: pinned by digest, with its skills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageListing {
    /// `repository@sha256:...`.
    pub pinned: String,
    pub skills: ImageSkills,
}

/// The SkillCards a collection should have, or why it has none now.
#[derive(Clone, Debug)]
pub enum Planned {
    /// Its cards, and the image they were listed from.
    Cards {
        plan: Plan,
        resolved_image: Option<String>,
    },
    /// It cannot be used as it is.
    Refused(CollectionFinding),
    /// The registry did not answer: nothing is known about the image now.
    Unavailable(CollectionFinding),
}

/// Why a collection cannot be used, or is not Ready: its `Ready` condition's reason and
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectionFinding {
    pub reason: SkillCollectionReason,
    pub message: String,
}

impl CollectionFinding {
    pub fn new(reason: impl Into<SkillCollectionReason>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

impl From<Finding> for CollectionFinding {
    /// The finding of a card read (the listing of the collection's image) as the
    /// collection's: see [`SkillCollectionReason::for_collection`].
    fn from(finding: Finding) -> Self {
        Self::new(
            SkillCollectionReason::for_collection(finding.reason),
            finding.message,
        )
    }
}

/// The SkillCards the collection should have: from `listing`, the outcome of listing its
/// `spec.image` (`None` for a collection of `spec.skills` entries).
pub fn plan_collection(
    collection: &SkillCollection,
    owner: &OwnerReference,
    listing: Option<Fetched<ImageListing>>,
) -> Planned {
    let planned = match listing {
        None => plan_entries(collection, owner).map(|plan| (plan, None)),
        Some(Fetched::Read(listing)) => {
            plan_image(collection, owner, &listing.pinned, &listing.skills)
                .map(|plan| (plan, Some(listing.pinned)))
        }
        Some(Fetched::Unavailable(finding)) => return Planned::Unavailable(finding.into()),
        Some(
            Fetched::Refused(finding) | Fetched::Rejected(finding) | Fetched::RefGone(finding),
        ) => return Planned::Refused(finding.into()),
    };
    match planned {
        Ok((plan, resolved_image)) => Planned::Cards {
            plan,
            resolved_image,
        },
        Err(e) => Planned::Refused(CollectionFinding::new(e.reason(), e.to_string())),
    }
}

/// Whether `collection` is one of the cluster's default skills: labelled
/// `konveyor.io/default-skills: "true"` in the operator's default-skills namespace
/// `cluster_defaults`.
pub fn is_cluster_default(collection: &SkillCollection, cluster_defaults: Option<&str>) -> bool {
    cluster_defaults.is_some_and(|ns| collection.metadata.namespace.as_deref() == Some(ns))
        && collection
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(DEFAULT_SKILLS_LABEL))
            .is_some_and(|value| value == "true")
}

/// Labels the cards a cluster-default collection generates
/// `app.kubernetes.io/managed-by: agentic-controller-defaults`, the label Konveyor's Hub reads
/// as "installed by the operator": the console then refuses to edit or delete them (409,
/// "create your own") rather than accept a change the collection's next pass would undo.
/// Cards of other collections are left as they are.
pub fn label_cluster_defaults(
    planned: &mut Planned,
    collection: &SkillCollection,
    cluster_defaults: Option<&str>,
) {
    if !is_cluster_default(collection, cluster_defaults) {
        return;
    }
    let Planned::Cards { plan, .. } = planned else {
        return;
    };
    for card in &mut plan.generated {
        card.metadata
            .labels
            .get_or_insert_default()
            .insert(MANAGED_BY_LABEL.to_string(), DEFAULTS_MANAGER.to_string());
    }
}

/// A collection's next status, and what to write for it.
#[derive(Clone, Debug)]
pub struct CollectionDecision {
    pub status: SkillCollectionStatus,
    /// The generated cards to create or update: every one but those whose name another
    /// object holds.
    pub apply: Vec<SkillCard>,
    /// The cards it controls and no longer lists, to delete.
    pub prune: Vec<String>,
    pub next: Next,
}

/// The collection's next status and the cards to write and delete, from its plan, its cards
/// as read (`cards`: each card the plan names, and each labelled card it controls), the
/// status it started from and the time.
///
/// A generated card is judged as it will be once applied: a card whose spec the apply
/// changes is at its next generation, which its status does not describe yet; a card
/// about to be created has no status. A card of a generated name that the collection does
/// not control is left alone (`ObjectNameTaken`). A collection that cannot be listed now
/// writes and deletes nothing, and one Ready at this generation stays Ready through a
/// registry outage.
pub fn decide_collection(
    collection: &SkillCollection,
    owner_uid: &str,
    planned: Planned,
    cards: &[(String, Lookup<'_, SkillCard>)],
    old: &SkillCollectionStatus,
    now: &Time,
) -> CollectionDecision {
    let generation = collection.metadata.generation;
    let mut status = old.clone();
    status.observed_generation = generation;
    let mut decision = CollectionDecision {
        status,
        apply: Vec::new(),
        prune: Vec::new(),
        next: next_listing(collection),
    };
    let status = &mut decision.status;
    let (plan, resolved_image) = match planned {
        Planned::Cards {
            plan,
            resolved_image,
        } => (plan, resolved_image),
        Planned::Refused(finding) => {
            status.resolved_skills.clear();
            status.resolved_image = None;
            set_ready(status, false, &finding, generation, now);
            return decision;
        }
        Planned::Unavailable(finding) => {
            decision.next = Next::Unavailable;
            if !ready_at(old, generation) {
                let finding = CollectionFinding::new(
                    SkillCollectionReason::RegistryUnavailable,
                    finding.message,
                );
                set_ready(status, false, &finding, generation, now);
            }
            return decision;
        }
    };
    let read = |name: &str| {
        cards
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Lookup::Missing, |(_, card)| *card)
    };
    let mut taken = Vec::new();
    let mut applied = Vec::new();
    for desired in &plan.generated {
        let name = desired.metadata.name.clone().unwrap_or_default();
        match read(&name) {
            Lookup::Found(existing) if !is_controlled_by(&existing.metadata, owner_uid) => {
                taken.push(name);
            }
            Lookup::Found(existing) => {
                applied.push((name, as_applied(existing, desired)));
                decision.apply.push(desired.clone());
            }
            Lookup::Missing | Lookup::Malformed(_) => {
                applied.push((name, desired.clone()));
                decision.apply.push(desired.clone());
            }
        }
    }
    let wanted = plan.card_names();
    decision.prune = cards
        .iter()
        .filter_map(|(name, card)| match card {
            Lookup::Found(card)
                if is_controlled_by(&card.metadata, owner_uid)
                    && labelled_by(card, collection)
                    && !wanted.contains(name) =>
            {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    let usable: Vec<String> = wanted.into_iter().filter(|n| !taken.contains(n)).collect();
    let looked_up: Vec<(&str, Lookup<'_, SkillCard>)> = usable
        .iter()
        .map(|name| {
            let card = match applied.iter().find(|(n, _)| n == name) {
                Some((_, card)) => Lookup::Found(card),
                None => read(name),
            };
            (name.as_str(), card)
        })
        .collect();
    let (ready, finding) = if taken.is_empty() {
        let (ready, reason, message) = readiness(&looked_up);
        (ready, CollectionFinding::new(reason, message))
    } else {
        decision.next = Next::NameTaken;
        let message = format!(
            "SkillCard(s) {} exist and are not controlled by this SkillCollection: they are left alone; delete or rename them to use these skills",
            taken.join(", ")
        );
        (
            false,
            CollectionFinding::new(SkillCollectionReason::ObjectNameTaken, message),
        )
    };
    status.resolved_skills = usable;
    status.resolved_image = resolved_image;
    set_ready(status, ready, &finding, generation, now);
    decision
}

/// When a collection lists its image again: a tag may move, like a SkillCard's.
fn next_listing(collection: &SkillCollection) -> Next {
    match &collection.spec.image {
        Some(image) if Pin::image(image).is_none() => Next::Refresh,
        _ => Next::AwaitChange,
    }
}

/// `existing` once `desired` is applied over it: a changed spec moves the generation on.
fn as_applied(existing: &SkillCard, desired: &SkillCard) -> SkillCard {
    let mut applied = existing.clone();
    if !holds(&existing.spec, &desired.spec) {
        applied.spec = desired.spec.clone();
        applied.metadata.generation = existing.metadata.generation.map(|g| g + 1);
    }
    applied
}

/// Whether `existing` already says everything `desired` says (fields the API server
/// defaulted may be added).
fn holds(existing: &SkillCardSpec, desired: &SkillCardSpec) -> bool {
    match (
        serde_json::to_value(existing),
        serde_json::to_value(desired),
    ) {
        (Ok(existing), Ok(desired)) => crate::applied::holds(&existing, &desired),
        _ => false,
    }
}

fn labelled_by(card: &SkillCard, collection: &SkillCollection) -> bool {
    let name = collection.metadata.name.as_deref().unwrap_or_default();
    card.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(SKILL_COLLECTION_LABEL))
        .is_some_and(|value| *value == label_value(name))
}

fn set_ready(
    status: &mut SkillCollectionStatus,
    ready: bool,
    finding: &CollectionFinding,
    generation: Option<i64>,
    now: &Time,
) {
    let condition = if ready {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    Conditions::<SkillCollectionReason>::new(&mut status.conditions, generation, now.clone()).set(
        CONDITION_READY,
        condition,
        finding.reason,
        &finding.message,
    );
}

/// Whether the status already describes a Ready collection at this generation.
fn ready_at(status: &SkillCollectionStatus, generation: Option<i64>) -> bool {
    status.observed_generation == generation
        && find_condition(&status.conditions, CONDITION_READY)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

#[cfg(test)]
mod tests;
