//! What an Agent references, resolved: its skills, its gateways, how skills are delivered,
//! and which gateway a run uses.

use std::collections::BTreeMap;

use agentic_api::{
    Agent, AgentSkill, ConditionStatus, Gateway, ObjectRef, SkillCard, SkillCollection,
    SkillFrontmatter, SkillOrigin, SkillType,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};

use crate::Error;
use crate::conditions::find_condition;
use crate::names::inline_skill_config_map_name;
use crate::pin::Pin;
use crate::reasons::AgentReason;
pub use crate::sandbox::SkillDeliveryMode;
use crate::sandbox::{MountedSkill, SkillSource};

/// An object a reference names, as a controller read it.
#[derive(Debug, PartialEq)]
pub enum Lookup<'a, K> {
    /// No object of that name exists.
    Missing,
    /// The object.
    Found(&'a K),
    /// An object of that name exists but does not deserialize as the operator's type: it was
    /// written with the CRD's validation bypassed, or stored before a schema change. Holds
    /// the deserialization error. It counts as not Ready, never as an error of the pass.
    Malformed(&'a str),
}

impl<K> Clone for Lookup<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Lookup<'_, K> {}

impl<'a, K> From<Option<&'a K>> for Lookup<'a, K> {
    fn from(found: Option<&'a K>) -> Self {
        found.map_or(Lookup::Missing, Lookup::Found)
    }
}

/// Why a malformed referenced object is not Ready, for a `...NotReady` message.
pub fn malformed_detail(error: &str) -> String {
    format!("it does not match the schema this operator reads ({error}); fix or replace it")
}

/// An Agent's skills, ready for its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSkills {
    /// Every skill, sorted by frontmatter name.
    pub skills: Vec<AgentSkill>,
    /// Names of the `type: rule` skills, sorted.
    pub rules: Vec<String>,
    /// The SKILL.md bodies of the rules together, in bytes (`status.bodyBytes` of their
    /// cards): what every prompt carries.
    pub rule_body_bytes: u64,
}

/// The bytes one token is counted for: a conservative estimate (English prose averages about
/// four bytes a token, code and other languages fewer), so the estimate errs high.
pub const BYTES_PER_TOKEN: u64 = 3;
/// The share of the smallest gateway context window, in percent, an Agent's rules may take
/// before `RulesFitContext` turns False: the rest is for the prompt, the task and the work.
pub const RULES_CONTEXT_SHARE_PERCENT: u64 = 25;
/// The condition an Agent with rules and gateways reports about their size.
pub const CONDITION_RULES_FIT_CONTEXT: &str = "RulesFitContext";

/// Whether an Agent's rules (`rule_body_bytes` of SKILL.md bodies, estimated at one token per
/// [`BYTES_PER_TOKEN`] bytes, rounded up) fit [`RULES_CONTEXT_SHARE_PERCENT`] of the smallest
/// positive `contextWindow` of its gateways: `(fits, reason, message)`, or `None` without
/// rules or without a context window to compare with.
pub fn rules_fit(
    rules: &[String],
    rule_body_bytes: u64,
    context_windows: &[i64],
) -> Option<(bool, AgentReason, String)> {
    if rules.is_empty() {
        return None;
    }
    let smallest = context_windows
        .iter()
        .filter_map(|w| u64::try_from(*w).ok())
        .filter(|w| *w > 0)
        .min()?;
    let tokens = rule_body_bytes.div_ceil(BYTES_PER_TOKEN);
    let budget = smallest.saturating_mul(RULES_CONTEXT_SHARE_PERCENT) / 100;
    let summary = format!(
        "the {} rule(s) ({}) are {rule_body_bytes} bytes, about {tokens} tokens at {BYTES_PER_TOKEN} bytes a token; {RULES_CONTEXT_SHARE_PERCENT}% of the smallest gateway context window ({smallest} tokens) is {budget}",
        rules.len(),
        rules.join(", ")
    );
    Some(if tokens <= budget {
        (true, AgentReason::RulesFit, summary)
    } else {
        (
            false,
            AgentReason::RulesExceedContext,
            format!(
                "{summary}: every prompt starts with the rules, leaving little room for the work"
            ),
        )
    })
}

/// One SkillCard of an Agent's skill set, as read.
#[derive(Clone, Copy, Debug)]
pub struct CardRef<'a> {
    /// The card's name.
    pub name: &'a str,
    /// The SkillCollection that lists it; `None` for `spec.skillCards`.
    pub collection: Option<&'a str>,
    /// What was found under the name.
    pub card: Lookup<'a, SkillCard>,
}

/// Resolves an Agent's SkillCards (`spec.skillCards`, then those of its collections), in
/// that order.
///
/// A SkillCard is usable when its `Ready` condition is True for its current generation
/// (`status.observedGeneration == metadata.generation`), `status.skill` is set, and, for
/// image cards, `status.resolvedImage` is pinned by digest, for git cards
/// `status.resolvedSource` to a commit (`<url>@<commit>`). Errors, checked in this order:
/// every missing card ([`Error::MissingSkillCards`]), every unusable card
/// ([`Error::SkillCardsNotReady`], malformed cards among them), then the first frontmatter
/// name two cards share ([`Error::DuplicateSkillName`], naming both cards and their
/// collections). A card listed twice (by the Agent and a collection, or by two collections)
/// counts once.
pub fn resolve_skills(cards: &[CardRef]) -> Result<ResolvedSkills, Error> {
    let mut missing: Vec<String> = cards
        .iter()
        .filter(|c| matches!(c.card, Lookup::Missing))
        .map(|c| c.name.to_string())
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        return Err(Error::MissingSkillCards(missing));
    }

    let mut usable = Vec::new();
    let mut not_ready: Vec<(String, String)> = Vec::new();
    for (index, entry) in cards.iter().enumerate() {
        if cards[..index].iter().any(|c| c.name == entry.name) {
            continue;
        }
        let card = match entry.card {
            Lookup::Missing => continue,
            Lookup::Malformed(error) => {
                not_ready.push((entry.name.to_string(), malformed_detail(error)));
                continue;
            }
            Lookup::Found(card) => card,
        };
        match usable_skill(card) {
            Ok((skill, source)) => usable.push((entry, card, skill, source)),
            Err(why) => not_ready.push((entry.name.to_string(), why)),
        }
    }
    if !not_ready.is_empty() {
        return Err(Error::SkillCardsNotReady(not_ready));
    }

    let mut by_name: BTreeMap<&str, AgentSkill> = BTreeMap::new();
    let mut rule_body_bytes = 0;
    for (entry, card, skill, source) in usable {
        if card.spec.skill_type == SkillType::Rule {
            rule_body_bytes += body_bytes_of(card);
        }
        if let Some(first) = by_name.get(skill.name.as_str()) {
            return Err(Error::DuplicateSkillName {
                skill: skill.name.clone(),
                first_card: first.skill_card.clone(),
                first_collection: first.collection.clone(),
                second_card: entry.name.to_string(),
                second_collection: entry.collection.map(str::to_string),
            });
        }
        let image = pin_of(&source);
        by_name.insert(
            &skill.name,
            AgentSkill {
                name: skill.name.clone(),
                skill_card: entry.name.to_string(),
                collection: entry.collection.map(str::to_string),
                namespace: None,
                origin: if entry.collection.is_some() {
                    SkillOrigin::Collection
                } else {
                    SkillOrigin::Agent
                },
                image,
                skill_type: card.spec.skill_type,
            },
        );
    }
    let skills: Vec<AgentSkill> = by_name.into_values().collect();
    let rules = skills
        .iter()
        .filter(|s| s.skill_type == SkillType::Rule)
        .map(|s| s.name.clone())
        .collect();
    Ok(ResolvedSkills {
        skills,
        rules,
        rule_body_bytes,
    })
}

/// The SkillCards of an Agent's `spec.skillCollections`: `collections` holds, in spec order,
/// each reference's name and what was found under it; the answer pairs each collection with
/// its `status.resolvedSkills`. Every missing collection is
/// [`Error::MissingSkillCollections`]; then every collection malformed or not Ready for its
/// current generation is [`Error::SkillCollectionsNotReady`].
pub fn collection_cards<'a, N: AsRef<str>>(
    collections: &'a [(N, Lookup<'a, SkillCollection>)],
) -> Result<Vec<(&'a str, &'a [String])>, Error> {
    let missing: Vec<String> = collections
        .iter()
        .filter(|(_, c)| matches!(c, Lookup::Missing))
        .map(|(name, _)| name.as_ref().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(Error::MissingSkillCollections(missing));
    }
    let mut cards = Vec::new();
    let mut not_ready = Vec::new();
    for (name, collection) in collections {
        let collection = match collection {
            Lookup::Missing => continue,
            Lookup::Malformed(error) => {
                not_ready.push((name.as_ref().to_string(), malformed_detail(error)));
                continue;
            }
            Lookup::Found(collection) => *collection,
        };
        let status = collection.status.as_ref();
        let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
        match not_ready_reason(
            &collection.metadata,
            status.and_then(|s| s.observed_generation),
            conditions,
        ) {
            Some(why) => not_ready.push((name.as_ref().to_string(), why)),
            None => cards.push((
                name.as_ref(),
                status.map_or(&[][..], |s| &s.resolved_skills[..]),
            )),
        }
    }
    if not_ready.is_empty() {
        Ok(cards)
    } else {
        Err(Error::SkillCollectionsNotReady(not_ready))
    }
}

/// The condition an Agent reports about its default skills, when any apply.
pub const CONDITION_DEFAULT_SKILLS: &str = "DefaultSkills";

/// Whose default a default-skills SkillCollection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultScope {
    /// Of the Agent's own namespace.
    Namespace,
    /// Of the operator's default-skills namespace, for every Agent of the cluster.
    Cluster,
}

/// A default-skills SkillCollection as read, with the SkillCards of its `resolvedSkills`.
#[derive(Clone, Debug)]
pub struct DefaultCollection<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub scope: DefaultScope,
    pub collection: Lookup<'a, SkillCollection>,
    pub cards: Vec<(&'a str, Lookup<'a, SkillCard>)>,
}

/// What the default skills did to an Agent's skill set; each entry is a sentence part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DefaultsReport {
    pub applied: Vec<String>,
    pub shadowed: Vec<String>,
    pub skipped: Vec<String>,
    pub conflicts: Vec<String>,
}

impl DefaultsReport {
    /// The `DefaultSkills` condition (status, reason, message), or `None` when no default
    /// skill concerned the Agent. Skipped and conflicting defaults make it False, never the
    /// Agent's `Ready`.
    pub fn condition(&self) -> Option<(bool, AgentReason, String)> {
        if self.applied.is_empty()
            && self.shadowed.is_empty()
            && self.skipped.is_empty()
            && self.conflicts.is_empty()
        {
            return None;
        }
        let mut parts = Vec::new();
        for (title, items) in [
            ("applied", &self.applied),
            ("replaced by the Agent's own skill", &self.shadowed),
            ("left out, not usable", &self.skipped),
            (
                "left out, provided by more than one default",
                &self.conflicts,
            ),
        ] {
            if !items.is_empty() {
                parts.push(format!("{title}: {}", items.join(", ")));
            }
        }
        let message = parts.join("; ");
        Some(if !self.skipped.is_empty() {
            (false, AgentReason::DefaultSkillsSkipped, message)
        } else if !self.conflicts.is_empty() {
            (false, AgentReason::DuplicateDefaultSkill, message)
        } else if !self.shadowed.is_empty() {
            (true, AgentReason::DefaultSkillsShadowed, message)
        } else {
            (true, AgentReason::DefaultSkillsApplied, message)
        })
    }
}

/// Adds the default skills to an Agent's resolved skill set, best effort: a collection that
/// is not Ready, or a card of it that is not usable, is left out and reported; so is an inline
/// card of a cluster-wide default (its ConfigMap cannot be mounted in another namespace). An
/// Agent's own skill (its cards and collections) replaces a default of the same frontmatter
/// name; two defaults of one name (different cards) are both left out rather than one picked.
pub fn apply_defaults(
    resolved: ResolvedSkills,
    defaults: &[DefaultCollection],
) -> (ResolvedSkills, DefaultsReport) {
    let mut report = DefaultsReport::default();
    let mut candidates: BTreeMap<String, Vec<(AgentSkill, u64)>> = BTreeMap::new();
    for default in defaults {
        let label = format!("SkillCollection {}/{}", default.namespace, default.name);
        let collection = match default.collection {
            Lookup::Missing => continue,
            Lookup::Malformed(error) => {
                report
                    .skipped
                    .push(format!("{label} ({})", malformed_detail(error)));
                continue;
            }
            Lookup::Found(collection) => collection,
        };
        let status = collection.status.as_ref();
        let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
        if let Some(why) = not_ready_reason(
            &collection.metadata,
            status.and_then(|s| s.observed_generation),
            conditions,
        ) {
            report.skipped.push(format!("{label} ({why})"));
            continue;
        }
        for (card_name, card) in &default.cards {
            let card_label = format!("SkillCard {}/{card_name} of {label}", default.namespace);
            let card = match card {
                Lookup::Missing => {
                    report.skipped.push(format!("{card_label} (not found)"));
                    continue;
                }
                Lookup::Malformed(error) => {
                    report
                        .skipped
                        .push(format!("{card_label} ({})", malformed_detail(error)));
                    continue;
                }
                Lookup::Found(card) => *card,
            };
            let (skill, source) = match usable_skill(card) {
                Ok(usable) => usable,
                Err(why) => {
                    report.skipped.push(format!("{card_label} ({why})"));
                    continue;
                }
            };
            let cluster = default.scope == DefaultScope::Cluster;
            let image = match &source {
                SkillSource::Inline { .. } if cluster => {
                    report.skipped.push(format!(
                        "{card_label} (an inline skill cannot be mounted in another namespace; use an image)"
                    ));
                    continue;
                }
                SkillSource::Git {
                    secret: Some(_), ..
                } if cluster => {
                    report.skipped.push(format!(
                        "{card_label} (its spec.sourceSecret cannot be used in another namespace; use a public repository or an image)"
                    ));
                    continue;
                }
                _ => pin_of(&source),
            };
            let found = candidates.entry(skill.name.clone()).or_default();
            if found.iter().any(|(s, _)| {
                s.skill_card == *card_name
                    && s.namespace.as_deref() == cluster.then_some(default.namespace)
            }) {
                continue;
            }
            found.push((
                AgentSkill {
                    name: skill.name.clone(),
                    skill_card: card_name.to_string(),
                    collection: Some(default.name.to_string()),
                    namespace: cluster.then(|| default.namespace.to_string()),
                    origin: if cluster {
                        SkillOrigin::ClusterDefault
                    } else {
                        SkillOrigin::NamespaceDefault
                    },
                    image,
                    skill_type: card.spec.skill_type,
                },
                body_bytes_of(card),
            ));
        }
    }

    let describe = |s: &AgentSkill| match &s.namespace {
        Some(ns) => format!("SkillCard {ns}/{}", s.skill_card),
        None => format!("SkillCard {}", s.skill_card),
    };
    let mut skills = resolved.skills;
    let mut rule_body_bytes = resolved.rule_body_bytes;
    let own: BTreeMap<String, String> = skills
        .iter()
        .map(|s| (s.name.clone(), s.skill_card.clone()))
        .collect();
    for (name, found) in candidates {
        if let Some(card) = own.get(&name) {
            report.shadowed.push(format!(
                "{name} ({} replaced by SkillCard {card})",
                describe(&found[0].0)
            ));
            continue;
        }
        if found.len() > 1 {
            let sources: Vec<String> = found.iter().map(|(s, _)| describe(s)).collect();
            report
                .conflicts
                .push(format!("{name} ({})", sources.join(" and ")));
            continue;
        }
        let Some((skill, bytes)) = found.into_iter().next() else {
            continue;
        };
        report
            .applied
            .push(format!("{name} ({})", describe(&skill)));
        if skill.skill_type == SkillType::Rule {
            rule_body_bytes += bytes;
        }
        skills.push(skill);
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    let rules = skills
        .iter()
        .filter(|s| s.skill_type == SkillType::Rule)
        .map(|s| s.name.clone())
        .collect();
    (
        ResolvedSkills {
            skills,
            rules,
            rule_body_bytes,
        },
        report,
    )
}

/// The SKILL.md body size a card's status reports; 0 when it reports none.
fn body_bytes_of(card: &SkillCard) -> u64 {
    card.status
        .as_ref()
        .and_then(|s| s.body_bytes)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// Why a SkillCard cannot be mounted now, or `None` when it can.
pub(crate) fn card_not_usable(card: &SkillCard) -> Option<String> {
    usable_skill(card).err()
}

impl MountedSkill {
    /// The mount for one skill of an Agent's status, checked against the SkillCard as it is
    /// now. The Agent's pin is what the sandbox mounts; the card adds the sub-path, the
    /// description and the pull secrets. A card that is gone is
    /// [`Error::MissingSkillCards`]; one that is malformed, no longer usable, or changed since
    /// the Agent pinned it (another name, image or delivery), is
    /// [`Error::SkillCardsNotReady`]: the run waits for the Agent to catch up. A card of
    /// another namespace (a cluster-wide default) is mounted without its pull secrets.
    pub fn from_agent_skill(skill: &AgentSkill, card: Lookup<SkillCard>) -> Result<Self, Error> {
        let not_ready =
            |why: String| Error::SkillCardsNotReady(vec![(skill.skill_card.clone(), why)]);
        let card = match card {
            Lookup::Missing => {
                return Err(Error::MissingSkillCards(vec![skill.skill_card.clone()]));
            }
            Lookup::Malformed(error) => return Err(not_ready(malformed_detail(error))),
            Lookup::Found(card) => card,
        };
        let (frontmatter, mut source) = usable_skill(card).map_err(not_ready)?;
        if frontmatter.name != skill.name || pin_of(&source) != skill.image {
            return Err(not_ready(
                "it changed since the Agent resolved it; waiting for the Agent".to_string(),
            ));
        }
        // A cluster-wide default lives in another namespace: its pull Secrets are not the
        // pod's to use, and the operator never copies Secrets. Its image must be one the
        // node can pull with the run namespace's own means.
        if skill.namespace.is_some()
            && let SkillSource::Git { secret, .. } = &mut source
        {
            // Not the pod's to mount either; a default with one is skipped by the Agent.
            *secret = None;
        }
        let pull_secrets = match &skill.namespace {
            Some(_) => Vec::new(),
            None => card
                .spec
                .pull_secrets
                .iter()
                .flatten()
                .map(|s| s.name.clone())
                .collect(),
        };
        Ok(MountedSkill {
            name: skill.name.clone(),
            description: frontmatter.description.clone(),
            skill_type: card.spec.skill_type,
            skill_card: skill.skill_card.clone(),
            sub_path: match source {
                SkillSource::Image { .. } => card.spec.sub_path.clone(),
                SkillSource::Inline { .. } | SkillSource::Git { .. } => None,
            },
            source,
            pull_secrets,
            verification: card.status.as_ref().and_then(|s| s.verification.clone()),
        })
    }
}

/// The validated skill of a usable card and where sandboxes get it, or why it is unusable.
fn usable_skill(card: &SkillCard) -> Result<(&SkillFrontmatter, SkillSource), String> {
    let status = card.status.as_ref();
    let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
    if let Some(why) = not_ready_reason(
        &card.metadata,
        status.and_then(|s| s.observed_generation),
        conditions,
    ) {
        return Err(why);
    }
    let skill = status
        .and_then(|s| s.skill.as_ref())
        .ok_or("its status has no validated skill")?;
    let source = if card.spec.image.is_some() {
        match status.and_then(|s| s.resolved_image.as_ref()) {
            Some(reference) if Pin::image(reference).is_some() => SkillSource::Image {
                reference: reference.clone(),
            },
            Some(reference) => {
                return Err(format!(
                    "status.resolvedImage {reference:?} is not pinned by digest"
                ));
            }
            None => return Err("its status has no resolved image".to_string()),
        }
    } else if card.spec.inline.is_some() {
        let name = card
            .metadata
            .name
            .as_deref()
            .ok_or("it has no metadata.name")?;
        SkillSource::Inline {
            config_map: inline_skill_config_map_name(name),
        }
    } else if card.spec.source.is_some() {
        let resolved = status
            .and_then(|s| s.resolved_source.as_deref())
            .ok_or("its status has no resolved source")?;
        let Some(Pin::Git { url, commit }) = Pin::git(resolved) else {
            return Err(format!(
                "status.resolvedSource {resolved:?} is not pinned to a commit (<url>@<40 hex digits>)"
            ));
        };
        SkillSource::Git {
            url,
            commit,
            sub_path: card.spec.sub_path.clone(),
            secret: card.spec.source_secret.as_ref().map(|s| s.name.clone()),
        }
    } else {
        return Err("it has no image, inline skill or source".to_string());
    };
    Ok((skill, source))
}

/// What an Agent's `status.skills[].image` records: the image by digest, `<url>@<commit>`
/// for a git skill, nothing for an inline skill (its ConfigMap follows its card).
fn pin_of(source: &SkillSource) -> Option<String> {
    match source {
        SkillSource::Image { .. } | SkillSource::Git { .. } => Some(source.pin()),
        SkillSource::Inline { .. } => None,
    }
}

/// Why an object with these conditions is not Ready for its current generation, if it is not.
fn not_ready_reason(
    metadata: &ObjectMeta,
    observed_generation: Option<i64>,
    conditions: &[Condition],
) -> Option<String> {
    let Some(ready) = find_condition(conditions, agentic_api::CONDITION_READY) else {
        return Some("it has no Ready condition yet".to_string());
    };
    if ready.status != "True" {
        return Some(if ready.message.is_empty() {
            format!("Ready is {} ({})", ready.status, ready.reason)
        } else {
            format!(
                "Ready is {} ({}: {})",
                ready.status, ready.reason, ready.message
            )
        });
    }
    if observed_generation != metadata.generation {
        return Some(format!(
            "its status describes generation {}, its spec is at generation {}",
            generation_text(observed_generation),
            generation_text(metadata.generation)
        ));
    }
    None
}

fn generation_text(generation: Option<i64>) -> String {
    generation.map_or_else(|| "none".to_string(), |g| g.to_string())
}

/// Checks an Agent's `spec.gateways`: `gateways` holds, in spec order, each reference's name
/// and what was found under it. Every missing gateway is [`Error::GatewayNotFound`]; then
/// every gateway malformed or not Ready for its current generation is
/// [`Error::GatewayNotReady`].
pub fn resolve_gateways<N: AsRef<str>>(gateways: &[(N, Lookup<Gateway>)]) -> Result<(), Error> {
    let missing: Vec<String> = gateways
        .iter()
        .filter(|(_, gateway)| matches!(gateway, Lookup::Missing))
        .map(|(name, _)| name.as_ref().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(Error::GatewayNotFound(missing));
    }
    let not_ready: Vec<(String, String)> = gateways
        .iter()
        .filter_map(|(name, gateway)| {
            let gateway = match gateway {
                Lookup::Missing => return None,
                Lookup::Malformed(error) => {
                    return Some((name.as_ref().to_string(), malformed_detail(error)));
                }
                Lookup::Found(gateway) => *gateway,
            };
            let status = gateway.status.as_ref();
            let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
            not_ready_reason(
                &gateway.metadata,
                status.and_then(|s| s.observed_generation),
                conditions,
            )
            .map(|why| (name.as_ref().to_string(), why))
        })
        .collect();
    if not_ready.is_empty() {
        Ok(())
    } else {
        Err(Error::GatewayNotReady(not_ready))
    }
}

/// The Agent a run names, when it exists and is Ready for its current generation. A
/// malformed Agent is [`Error::AgentNotReady`].
pub fn check_agent<'a>(name: &str, agent: Lookup<'a, Agent>) -> Result<&'a Agent, Error> {
    let agent = match agent {
        Lookup::Missing => {
            return Err(Error::AgentNotFound {
                name: name.to_string(),
            });
        }
        Lookup::Malformed(error) => {
            return Err(Error::AgentNotReady {
                name: name.to_string(),
                detail: malformed_detail(error),
            });
        }
        Lookup::Found(agent) => agent,
    };
    let status = agent.status.as_ref();
    let conditions = status.map_or(&[][..], |s| &s.conditions[..]);
    match not_ready_reason(
        &agent.metadata,
        status.and_then(|s| s.observed_generation),
        conditions,
    ) {
        Some(detail) => Err(Error::AgentNotReady {
            name: name.to_string(),
            detail,
        }),
        None => Ok(agent),
    }
}

/// The delivery mode an Agent's runs use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillDelivery {
    /// The mode runs use.
    pub mode: SkillDeliveryMode,
    /// The `spec.skillDelivery` value when it is not a known mode (runs then use `inject`).
    pub unknown: Option<String>,
}

/// The condition an Agent reports when `spec.skillDelivery` is not a known mode.
pub const CONDITION_SKILL_DELIVERY_RESOLVED: &str = "SkillDeliveryResolved";
/// The message that goes with `HarnessMayIgnoreInject`.
pub const HARNESS_MAY_IGNORE_INJECT: &str = "runs use skill delivery inject (HARNESS_SKILL_MODE=inject), which Konveyor's harness ignores: it lets goose discover every skill under /opt/skills and injects only type: rule skills into the prompt; inject takes effect only with a harness that reads HARNESS_SKILL_MODE";

impl SkillDelivery {
    /// For an unknown value, the message of [`CONDITION_SKILL_DELIVERY_RESOLVED`] = False.
    pub fn fallback_message(&self) -> Option<String> {
        self.unknown.as_ref().map(|value| {
            format!(
                "spec.skillDelivery {value:?} is not a known mode (native, inject); runs use inject"
            )
        })
    }
}

/// Maps `spec.skillDelivery` to a mode: exactly `native` or `inject`; anything else falls back
/// to `inject`, which works with every harness, and is reported in `unknown`.
pub fn resolve_skill_delivery(spec: &str) -> SkillDelivery {
    match spec {
        "native" => SkillDelivery {
            mode: SkillDeliveryMode::Native,
            unknown: None,
        },
        "inject" => SkillDelivery {
            mode: SkillDeliveryMode::Inject,
            unknown: None,
        },
        other => SkillDelivery {
            mode: SkillDeliveryMode::Inject,
            unknown: Some(other.to_string()),
        },
    }
}

/// The condition telling whether an Agent lists gateways (an agentic-operator condition).
pub const CONDITION_GATEWAY_CONFIGURED: &str = "GatewayConfigured";

/// The status, reason and message of an Agent's [`CONDITION_GATEWAY_CONFIGURED`].
pub fn gateway_configured(gateways: &[ObjectRef]) -> (ConditionStatus, AgentReason, String) {
    if gateways.is_empty() {
        return (
            ConditionStatus::False,
            AgentReason::NoGatewaysListed,
            "spec.gateways is empty: every run must name a Gateway in spec.gateway".to_string(),
        );
    }
    let names: Vec<String> = gateways.iter().map(|g| format!("{:?}", g.name)).collect();
    (
        ConditionStatus::True,
        AgentReason::GatewaysListed,
        format!("runs may use gateway(s) {}", names.join(", ")),
    )
}

/// The gateway a run uses: the one it requests, which must be one of the Agent's (any
/// Gateway when the Agent lists none), or the Agent's only gateway. Errors:
/// [`Error::NoGateway`] when neither the Agent nor the run names one,
/// [`Error::GatewayNotAllowed`] for a gateway the Agent does not list, and
/// [`Error::GatewayRequired`] when the Agent lists several and the run picks none.
pub fn select_gateway(
    agent_gateways: &[ObjectRef],
    requested: Option<&str>,
) -> Result<String, Error> {
    let names = || agent_gateways.iter().map(|g| g.name.clone()).collect();
    match (agent_gateways, requested) {
        ([], Some(requested)) => Ok(requested.to_string()),
        ([], None) => Err(Error::NoGateway),
        (_, Some(requested)) if agent_gateways.iter().any(|g| g.name == requested) => {
            Ok(requested.to_string())
        }
        (_, Some(requested)) => Err(Error::GatewayNotAllowed {
            requested: requested.to_string(),
            allowed: names(),
        }),
        ([only], None) => Ok(only.name.clone()),
        (_, None) => Err(Error::GatewayRequired { choices: names() }),
    }
}

#[cfg(test)]
mod tests;
