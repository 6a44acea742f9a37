//! A SkillCollection's SkillCards: the ones it generates (one per skill of its image, or per
//! `image`/`source` entry), the ones its `skillCardRef` entries name, and whether they are
//! all Ready.

use std::collections::BTreeMap;

use agentic_api::{
    SKILL_COLLECTION_LABEL, SkillCard, SkillCardSpec, SkillCollection, SkillCollectionSkill,
    SkillType,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::Error;
use crate::names::{collection_skill_card_name, label_value};
use crate::skills::{Lookup, card_not_usable};

/// Reason of `Ready` = True: every SkillCard of the collection is Ready (Konveyor's word).
pub const REASON_ALL_SKILLS_RESOLVED: &str = "AllSkillsResolved";
/// Reason of `Ready` = False: some SkillCards of the collection are missing or not Ready.
pub const REASON_SKILLS_NOT_READY: &str = "SkillsNotReady";

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
/// True with [`REASON_ALL_SKILLS_RESOLVED`] when every one is usable, otherwise False with
/// [`REASON_SKILLS_NOT_READY`] and a message naming each missing or unusable card and why.
pub fn readiness<N: AsRef<str>>(cards: &[(N, Lookup<SkillCard>)]) -> (bool, &'static str, String) {
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
            REASON_ALL_SKILLS_RESOLVED,
            format!("all {} skill(s) are Ready", cards.len()),
        )
    } else {
        (
            false,
            REASON_SKILLS_NOT_READY,
            format!(
                "{} of {} skill(s) are not Ready: {}",
                problems.len(),
                cards.len(),
                problems.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests;
