//! A SkillCard's next status and the objects it needs, decided from what its pass read: the
//! outcome of reading its skill (from a registry, a git server or its own inline text), the
//! ConfigMap of an inline skill as found, the status it starts from and the time.
//!
//! The outcome type, [`Fetched`], is shared by the image and git paths, and by a
//! SkillCollection's listing of its image ([`crate::collections`]).

use agentic_api::{
    CONDITION_READY, ConditionStatus, DeliveryMode, SkillCard, SkillCardStatus, SkillFrontmatter,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};

use crate::conditions::{Conditions, find_condition};
use crate::names::inline_skill_config_map_name;
use crate::owners::is_controlled_by;
use crate::pin::{Pin, is_commit_id};
use crate::reasons::SkillCardReason;
use crate::sandbox::build_inline_skill_config_map;

/// Condition telling whether the last digest check reached the registry.
pub const CONDITION_REGISTRY_REACHABLE: &str = "RegistryReachable";
/// Condition telling whether the last ref check reached the git server (git cards).
pub const CONDITION_SOURCE_REACHABLE: &str = "SourceReachable";
/// Condition telling whether a git card follows the repository's default branch.
pub const CONDITION_MOVING_REF: &str = "MovingRef";

/// Why something could not be used: a condition's reason and message. The reason is a
/// card's: a SkillCollection writes the finding of its listing through
/// [`crate::reasons::SkillCollectionReason::for_collection`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub reason: SkillCardReason,
    pub message: String,
}

impl Finding {
    pub fn new(reason: SkillCardReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// What reading from a registry or git server came to, whatever was read (a card's skill, a
/// collection's listing): the one outcome of the image and git paths.
#[derive(Clone, Debug, PartialEq)]
pub enum Fetched<T> {
    /// What was read.
    Read(T),
    /// The object itself makes the read impossible (its spec, a missing or malformed
    /// Secret): no server was asked.
    Refused(Finding),
    /// The server answered, and refused: no such image or ref, or content that is not a valid
    /// skill.
    Rejected(Finding),
    /// The server answered that the ref a git card follows no longer exists: a card validated
    /// at this generation keeps its pinned commit.
    RefGone(Finding),
    /// The server did not answer: nothing new is known.
    Unavailable(Finding),
}

impl<T> Fetched<T> {
    /// What reading on from what was read comes to; any other outcome stands.
    pub fn and_then<U>(self, read_on: impl FnOnce(T) -> Fetched<U>) -> Fetched<U> {
        match self.into_read() {
            Ok(read) => read_on(read),
            Err(outcome) => outcome,
        }
    }

    /// What was read, or the outcome that stands instead, as the outcome of a later read
    /// (a Secret read before the skill: its refusal is the skill's).
    pub fn into_read<U>(self) -> Result<T, Fetched<U>> {
        match self {
            Self::Read(read) => Ok(read),
            Self::Refused(finding) => Err(Fetched::Refused(finding)),
            Self::Rejected(finding) => Err(Fetched::Rejected(finding)),
            Self::RefGone(finding) => Err(Fetched::RefGone(finding)),
            Self::Unavailable(finding) => Err(Fetched::Unavailable(finding)),
        }
    }
}

/// The outcome of reading a card that sets none of `spec.image`, `spec.inline` and
/// `spec.source` (the CRD's rule forbids it): nothing to read.
pub fn no_skill_source<T>() -> Fetched<T> {
    Fetched::Refused(Finding::new(
        SkillCardReason::NoSkillSource,
        "set exactly one of spec.image, spec.inline or spec.source",
    ))
}

/// A skill read and found valid.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSkill {
    pub frontmatter: SkillFrontmatter,
    /// `repository@sha256:...` for an image, `<url>@<commit>` for git, none inline.
    pub pinned: Option<String>,
    /// The size of SKILL.md's body, when it could be measured.
    pub body_bytes: Option<i64>,
}

/// When a pass looks again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// When the object changes.
    AwaitChange,
    /// After the tag refresh interval: a tag or branch may move.
    Refresh,
    /// After the retry of a name another object holds.
    NameTaken,
    /// With the error's backoff: the registry or git server did not answer.
    Unavailable,
    /// Soon: the trust policies are not known yet, and the card fails closed until they are.
    TrustPoliciesUnavailable,
}

/// What a SkillCard's pass read.
#[derive(Clone, Debug)]
pub struct CardInputs<'a> {
    pub card: &'a SkillCard,
    /// The card's controller ownerReference (its own UID), for the objects it owns.
    pub owner: OwnerReference,
    /// Its skill, read from the registry, the git server or the inline text.
    pub skill: Fetched<ValidSkill>,
    /// The metadata of the object holding the inline ConfigMap's name, if any (read only
    /// for a valid inline skill).
    pub config_map: Option<ObjectMeta>,
}

/// A SkillCard's next status and what to apply for it.
#[derive(Clone, Debug, PartialEq)]
pub struct CardDecision {
    pub status: SkillCardStatus,
    /// The inline skill's ConfigMap, owned by the card.
    pub config_map: Option<ConfigMap>,
    pub next: Next,
}

/// What reading the skill told about the card's content.
enum Verdict {
    Valid(ValidSkill),
    /// Not usable. `answered`: the registry or git server answered (the verdict is about the
    /// content, not about the card's references), so its reachability condition is True.
    Invalid {
        finding: Finding,
        answered: bool,
    },
    /// Nothing new is known about the content (`transient`: the server did not answer; else
    /// the ref is gone): a card validated at this generation keeps what it pinned.
    Unknown {
        finding: Finding,
        transient: bool,
    },
}

/// The card's next status and its inline ConfigMap, from what its pass read, the status it
/// started from and the time.
pub fn decide_card(inputs: &CardInputs<'_>, old: &SkillCardStatus, now: &Time) -> CardDecision {
    let card = inputs.card;
    let generation = card.metadata.generation;
    let from_git = delivery_of(card) == Some(DeliveryMode::Source);
    let (verdict, config_map) = verdict(inputs, old);
    let mut next = match &verdict {
        Verdict::Unknown {
            transient: true, ..
        } => Next::Unavailable,
        _ if card.spec.image.is_some() || card.spec.source.is_some() => Next::Refresh,
        _ => Next::AwaitChange,
    };
    let mut status = old.clone();
    status.observed_generation = generation;
    let reachability = reachability_of(card);
    match verdict {
        Verdict::Valid(skill) => {
            let message = match &skill.pinned {
                Some(pinned) if from_git => {
                    format!("skill {} is valid at {pinned}", skill.frontmatter.name)
                }
                _ => format!("skill {} is valid", skill.frontmatter.name),
            };
            status.skill = Some(skill.frontmatter);
            (status.resolved_image, status.resolved_source) = if from_git {
                (None, skill.pinned)
            } else {
                (skill.pinned, None)
            };
            status.body_bytes = skill.body_bytes;
            status.delivery_mode = delivery_of(card);
            card_conditions(&mut status.conditions, generation, now).set(
                CONDITION_READY,
                ConditionStatus::True,
                SkillCardReason::SkillValid,
                &message,
            );
            if let Some(reachability) = reachability {
                reachable(&mut status.conditions, reachability, generation, now);
            }
        }
        Verdict::Invalid { finding, answered } => {
            if finding.reason == SkillCardReason::ObjectNameTaken {
                next = Next::NameTaken;
            }
            if answered && let Some(reachability) = reachability {
                reachable(&mut status.conditions, reachability, generation, now);
            }
            status.skill = None;
            status.resolved_image = None;
            status.resolved_source = None;
            status.body_bytes = None;
            status.delivery_mode = delivery_of(card);
            card_conditions(&mut status.conditions, generation, now).set(
                CONDITION_READY,
                ConditionStatus::False,
                finding.reason,
                &finding.message,
            );
        }
        Verdict::Unknown { finding, .. } => {
            let condition = reachability.map_or(CONDITION_REGISTRY_REACHABLE, |r| r.condition);
            card_conditions(&mut status.conditions, generation, now).set(
                condition,
                ConditionStatus::False,
                finding.reason,
                &finding.message,
            );
            // An outage (or, for git, a ref deleted since) says nothing about content already
            // validated at this generation: such a card stays Ready and keeps what it pinned.
            if !validated_at(old, generation) {
                status.delivery_mode = delivery_of(card);
                card_conditions(&mut status.conditions, generation, now).set(
                    CONDITION_READY,
                    ConditionStatus::False,
                    finding.reason,
                    &finding.message,
                );
            }
        }
    }
    if from_git {
        moving_ref(card, &mut status.conditions, now);
    }
    CardDecision {
        status,
        config_map,
        next,
    }
}

/// The verdict on the card's content, and the ConfigMap a valid inline skill needs.
fn verdict(inputs: &CardInputs<'_>, old: &SkillCardStatus) -> (Verdict, Option<ConfigMap>) {
    let card = inputs.card;
    let skill = match &inputs.skill {
        Fetched::Read(skill) => skill.clone(),
        Fetched::Refused(finding) => return (invalid(finding.clone()), None),
        Fetched::Rejected(finding) => return (rejected(finding.clone()), None),
        Fetched::RefGone(finding) if validated_at(old, card.metadata.generation) => {
            let finding = Finding::new(
                finding.reason,
                format!("{}; sandboxes keep the pinned commit", finding.message),
            );
            let verdict = Verdict::Unknown {
                finding,
                transient: false,
            };
            return (verdict, None);
        }
        Fetched::RefGone(finding) => return (rejected(finding.clone()), None),
        Fetched::Unavailable(finding) => {
            let verdict = Verdict::Unknown {
                finding: finding.clone(),
                transient: true,
            };
            return (verdict, None);
        }
    };
    if card.spec.inline.is_none() {
        return (Verdict::Valid(skill), None);
    }
    let config_map = match build_inline_skill_config_map(card, inputs.owner.clone()) {
        Ok(config_map) => config_map,
        Err(e) => {
            return (
                invalid(Finding::new(e.reason().into(), e.to_string())),
                None,
            );
        }
    };
    if let Some(holder) = &inputs.config_map
        && !is_controlled_by(holder, &inputs.owner.uid)
    {
        let name = config_map.metadata.name.unwrap_or_default();
        let finding = Finding::new(
            SkillCardReason::ObjectNameTaken,
            format!(
                "ConfigMap {name} exists and is not controlled by this SkillCard: it is left \
                 alone; delete or rename it to mount this skill"
            ),
        );
        return (invalid(finding), None);
    }
    (Verdict::Valid(skill), Some(config_map))
}

/// A verdict on the card itself (its spec or references); no server was asked.
fn invalid(finding: Finding) -> Verdict {
    Verdict::Invalid {
        finding,
        answered: false,
    }
}

/// A verdict given by the server's answer or the content it served.
fn rejected(finding: Finding) -> Verdict {
    Verdict::Invalid {
        finding,
        answered: true,
    }
}

/// The name of the ConfigMap of the inline card `card`.
pub fn config_map_name(card: &SkillCard) -> Option<String> {
    card.spec.inline.as_ref()?;
    card.metadata
        .name
        .as_deref()
        .map(inline_skill_config_map_name)
}

/// The condition telling whether the card's registry or git server answered, with what it
/// says when it did.
#[derive(Clone, Copy)]
struct Reachability {
    condition: &'static str,
    reason: SkillCardReason,
    message: &'static str,
}

fn reachability_of(card: &SkillCard) -> Option<Reachability> {
    if card.spec.image.is_some() {
        Some(Reachability {
            condition: CONDITION_REGISTRY_REACHABLE,
            reason: SkillCardReason::DigestResolved,
            message: "the registry answered the last digest check",
        })
    } else if card.spec.source.is_some() {
        Some(Reachability {
            condition: CONDITION_SOURCE_REACHABLE,
            reason: SkillCardReason::RefResolved,
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
    now: &Time,
) {
    card_conditions(conditions, generation, now).set(
        reachability.condition,
        ConditionStatus::True,
        reachability.reason,
        reachability.message,
    );
}

/// `MovingRef` True when a git card has no `spec.ref`: it follows the default branch, so
/// what it pins changes whenever someone pushes there.
fn moving_ref(card: &SkillCard, conditions: &mut Vec<Condition>, now: &Time) {
    let (status, reason, message) = match card.spec.git_ref.as_deref() {
        None | Some("") => (
            ConditionStatus::True,
            SkillCardReason::DefaultBranch,
            "spec.ref is empty: the card follows the repository's default branch, resolved again every tag refresh; set spec.ref to a tag or commit to pin it".to_string(),
        ),
        Some(git_ref) => (
            ConditionStatus::False,
            SkillCardReason::RefSet,
            format!("the card follows spec.ref {git_ref}"),
        ),
    };
    card_conditions(conditions, card.metadata.generation, now).set(
        CONDITION_MOVING_REF,
        status,
        reason,
        &message,
    );
}

/// How the card's skill reaches a sandbox, by which source its spec sets.
pub fn delivery_of(card: &SkillCard) -> Option<DeliveryMode> {
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
pub fn validating(card: &SkillCard, old: &SkillCardStatus, now: &Time) -> Option<SkillCardStatus> {
    let what = match (&card.spec.image, &card.spec.source) {
        (Some(image), _) => format!("reading the skill from image {image}"),
        (None, Some(source)) => format!("reading the skill from {source}"),
        (None, None) => return None,
    };
    let generation = card.metadata.generation;
    let current = find_condition(&old.conditions, CONDITION_READY)
        .is_some_and(|ready| ready.observed_generation == generation);
    if current {
        return None;
    }
    let mut status = old.clone();
    card_conditions(&mut status.conditions, generation, now).set(
        CONDITION_READY,
        ConditionStatus::Unknown,
        SkillCardReason::Validating,
        &what,
    );
    Some(status)
}

/// The writer of a card's conditions for a pass over `generation` at `now`.
fn card_conditions<'a>(
    conditions: &'a mut Vec<Condition>,
    generation: Option<i64>,
    now: &Time,
) -> Conditions<'a, SkillCardReason> {
    Conditions::new(conditions, generation, now.clone())
}

/// Whether the status already carries content validated for this generation.
pub fn validated_at(status: &SkillCardStatus, generation: Option<i64>) -> bool {
    status.observed_generation == generation
        && (status.resolved_image.is_some() || status.resolved_source.is_some())
        && status.skill.is_some()
        && find_condition(&status.conditions, CONDITION_READY)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// The skill this generation already validated at a pin that cannot move (a digest, or a
/// commit id): reading it again would find the same, so the pass skips the server.
pub fn pinned_skill(card: &SkillCard, old: &SkillCardStatus) -> Option<ValidSkill> {
    let pinned_by_spec = match (&card.spec.image, &card.spec.source) {
        (Some(image), _) => Pin::image(image).is_some(),
        (None, Some(_)) => card.spec.git_ref.as_deref().is_some_and(is_commit_id),
        (None, None) => false,
    };
    if !pinned_by_spec || !validated_at(old, card.metadata.generation) {
        return None;
    }
    let pinned = match card.spec.source {
        Some(_) => old.resolved_source.clone(),
        None => old.resolved_image.clone(),
    };
    Some(ValidSkill {
        frontmatter: old.skill.clone()?,
        pinned: Some(pinned?),
        body_bytes: old.body_bytes,
    })
}

pub mod verified;

#[cfg(test)]
mod tests;
