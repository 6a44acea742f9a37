//! Agent: Ready when every referenced SkillCard, SkillCollection and Gateway is Ready and
//! skill names are unique.

use std::sync::Arc;

use agentic_api::{
    Agent, AgentStatus, CONDITION_READY, ConditionStatus, DEFAULT_SKILLS_LABEL, Gateway, SkillCard,
    SkillCollection,
};
use agentic_core::conditions::{Conditions, find_condition};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::reasons::AgentReason;
use agentic_core::skills::{
    CONDITION_DEFAULT_SKILLS, CONDITION_GATEWAY_CONFIGURED, CONDITION_RULES_FIT_CONTEXT, CardRef,
    DefaultCollection, DefaultScope, Lookup, ResolvedSkills, SkillDeliveryMode, apply_defaults,
    collection_cards, gateway_configured, resolve_gateways, resolve_skill_delivery, resolve_skills,
    rules_fit,
};
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, ready_phase, run_controller};
use super::support::{Read, guard_ref, lookup, namespace_of, read_cached, read_reference, relate};
use super::watches::{Stop, Watches};
use crate::caches::{Guarded, valid};
use crate::context::Context;
use crate::error::Result;

pub const KIND: &str = "Agent";
/// Condition reporting how `spec.skillDelivery` was understood.
pub use agentic_core::skills::CONDITION_SKILL_DELIVERY_RESOLVED as CONDITION_SKILL_DELIVERY;

/// The Agent controller: follows the Agent's SkillCards, SkillCollections (the cluster's
/// default collections too) and Gateways.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let store = watches.of::<Agent>().store();
    let agents_of_changed_collection = {
        let store = store.clone();
        let cluster_defaults = ctx.settings.default_skills_namespace.clone();
        move |collection: Arc<Guarded<SkillCollection>>| {
            let Ok(collection) = &collection.0 else {
                return Vec::new();
            };
            let state = store.state();
            agents_of_collection(valid(&state), collection, cluster_defaults.as_deref())
                .into_iter()
                .map(guard_ref)
                .collect::<Vec<_>>()
        }
    };
    let mut controller =
        Controller::for_shared_stream(watches.of::<Agent>().applied(), store.clone())
            .watches_shared_stream(
                watches.of::<SkillCollection>().touched(),
                agents_of_changed_collection.clone(),
            );
    if let Some(defaults) = &mut watches.default_collections {
        controller =
            controller.watches_shared_stream(defaults.touched(), agents_of_changed_collection);
    }
    let controller = controller
        .watches_shared_stream(
            watches.of::<SkillCard>().touched(),
            relate(store.clone(), |agents, ns, card| {
                agents_referencing(agents, ns, Reference::SkillCard, card)
            }),
        )
        .watches_shared_stream(
            watches.of::<Gateway>().touched(),
            relate(store.clone(), |agents, ns, gateway| {
                agents_referencing(agents, ns, Reference::Gateway, gateway)
            }),
        );
    let policy = Policy::backing_off(reconcile, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for Agent {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &AgentStatus, new: &AgentStatus) -> Vec<StatusEvent> {
        condition_events(
            &old.conditions,
            &new.conditions,
            &[
                CONDITION_READY,
                CONDITION_SKILL_DELIVERY,
                CONDITION_GATEWAY_CONFIGURED,
                CONDITION_DEFAULT_SKILLS,
                CONDITION_RULES_FIT_CONTEXT,
            ],
        )
    }
}

/// An Agent's pass: read what it names, then decide its status. An Agent owns no objects,
/// so there is nothing to apply.
pub async fn reconcile(
    agent: Arc<Agent>,
    ctx: Arc<Context>,
    old: AgentStatus,
) -> Result<Pass<AgentStatus>> {
    let namespace = namespace_of(agent.as_ref(), KIND)?;
    let references = dereference(&agent, &namespace, &ctx).await?;
    let status = decide(&agent, references, old, &crate::now());
    Ok(Pass::then(status, Action::await_change()))
}

/// What an Agent names, as read.
struct References {
    /// Each of `spec.gateways`, by name.
    gateways: Vec<(String, Read<Gateway>)>,
    /// Its own skill set resolved, or why it cannot be.
    skills: std::result::Result<ResolvedSkills, agentic_core::Error>,
    /// The default-skills collections that apply to it (none when it opted out or its own
    /// skills do not resolve).
    defaults: Vec<ReadDefault>,
}

/// Reads the Gateways, SkillCards and SkillCollections the Agent names, from the caches the
/// watches keep (an object not cached is read from the API server), and the default-skills
/// collections that apply to it.
async fn dereference(agent: &Agent, namespace: &str, ctx: &Context) -> Result<References> {
    let mut gateways = Vec::new();
    for r in &agent.spec.gateways {
        let gateway = read_cached(ctx, namespace, &r.name, |_| true).await?;
        gateways.push((r.name.clone(), gateway));
    }
    let skills = skill_set(agent, namespace, ctx).await?;
    let defaults = if skills.is_ok() && agent.spec.default_skills != Some(false) {
        read_defaults(agent, namespace, ctx).await?
    } else {
        Vec::new()
    };
    Ok(References {
        gateways,
        skills,
        defaults,
    })
}

/// The Agent's next status, from what it names: pure.
fn decide(agent: &Agent, references: References, old: AgentStatus, now: &Time) -> AgentStatus {
    let References {
        gateways,
        skills,
        defaults,
    } = references;
    let gateway_refs: Vec<(&str, Lookup<Gateway>)> = gateways
        .iter()
        .map(|(n, g)| (n.as_str(), lookup(g)))
        .collect();
    let delivery = resolve_skill_delivery(&agent.spec.skill_delivery);
    let generation = agent.metadata.generation;
    let mut new = old;
    new.observed_generation = generation;
    new.delivery_mode = Some(delivery.mode.as_str().to_string());
    let (skills, defaults) = match skills {
        Ok(resolved) if agent.spec.default_skills != Some(false) => {
            let defaults: Vec<DefaultCollection> = defaults
                .iter()
                .map(|d| DefaultCollection {
                    namespace: &d.namespace,
                    name: &d.name,
                    scope: d.scope,
                    collection: lookup(&d.collection),
                    cards: d
                        .cards
                        .iter()
                        .map(|(n, c)| (n.as_str(), lookup(c)))
                        .collect(),
                })
                .collect();
            let (merged, report) = apply_defaults(resolved, &defaults);
            (Ok(merged), report.condition())
        }
        other => (other, None),
    };
    let mut rules = None;
    let ready = match (skills, resolve_gateways(&gateway_refs)) {
        (Ok(resolved), Ok(())) => {
            let windows: Vec<i64> = gateway_refs
                .iter()
                .filter_map(|(_, g)| match g {
                    Lookup::Found(g) => Some(g.spec.model.context_window),
                    _ => None,
                })
                .collect();
            rules = rules_fit(&resolved.rules, resolved.rule_body_bytes, &windows);
            let message = format!(
                "{} skill(s) and {} gateway(s) are ready",
                resolved.skills.len(),
                agent.spec.gateways.len()
            );
            new.skills = resolved.skills;
            new.rules = resolved.rules;
            (ConditionStatus::True, AgentReason::AgentReady, message)
        }
        (Err(e), _) | (Ok(_), Err(e)) => {
            new.skills.clear();
            new.rules.clear();
            (ConditionStatus::False, e.reason().into(), e.to_string())
        }
    };
    let truth = |holds: bool| {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    };
    let mut conditions =
        Conditions::<AgentReason>::new(&mut new.conditions, generation, now.clone());
    // Sets the condition `type_`, or removes it for `None`.
    let mut put = |type_: &str, condition: Option<(ConditionStatus, AgentReason, &str)>| {
        match condition {
            Some((status, reason, message)) => conditions.set(type_, status, reason, message),
            None => conditions.remove(type_),
        };
    };
    put(CONDITION_READY, Some((ready.0, ready.1, &ready.2)));
    let delivery_message = match &delivery.unknown {
        Some(value) => delivery.fallback_message().unwrap_or_else(|| value.clone()),
        None => format!("runs use skill delivery {}", delivery.mode.as_str()),
    };
    put(
        CONDITION_SKILL_DELIVERY,
        Some(match &delivery.unknown {
            Some(_) => (
                ConditionStatus::False,
                AgentReason::UnknownSkillDelivery,
                &delivery_message,
            ),
            None if delivery.mode == SkillDeliveryMode::Inject => (
                ConditionStatus::True,
                AgentReason::HarnessMayIgnoreInject,
                agentic_core::skills::HARNESS_MAY_IGNORE_INJECT,
            ),
            None => (
                ConditionStatus::True,
                AgentReason::KnownSkillDelivery,
                &delivery_message,
            ),
        }),
    );
    let (status, reason, message) = gateway_configured(&agent.spec.gateways);
    put(
        CONDITION_GATEWAY_CONFIGURED,
        Some((status, reason, &message)),
    );
    put(
        CONDITION_DEFAULT_SKILLS,
        defaults
            .as_ref()
            .map(|(applied, reason, message)| (truth(*applied), *reason, message.as_str())),
    );
    put(
        CONDITION_RULES_FIT_CONTEXT,
        rules
            .as_ref()
            .map(|(fits, reason, message)| (truth(*fits), *reason, message.as_str())),
    );
    new
}

/// Reads and resolves the Agent's skill set: its `spec.skillCards`, then the SkillCards of
/// each of its `spec.skillCollections` (once those are Ready).
async fn skill_set(
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<ResolvedSkills, agentic_core::Error>> {
    let mut collections = Vec::new();
    for r in &agent.spec.skill_collections {
        let collection = read_cached(ctx, namespace, &r.name, |_| true).await?;
        collections.push((r.name.clone(), collection));
    }
    let collection_refs: Vec<(&str, Lookup<SkillCollection>)> = collections
        .iter()
        .map(|(n, c)| (n.as_str(), lookup(c)))
        .collect();
    let from_collections = match collection_cards(&collection_refs) {
        Ok(cards) => cards,
        Err(e) => return Ok(Err(e)),
    };

    let mut cards = Vec::new();
    for r in &agent.spec.skill_cards {
        cards.push((None, r.name.clone()));
    }
    for (collection, names) in from_collections {
        for name in names {
            cards.push((Some(collection), name.clone()));
        }
    }
    let mut read = Vec::new();
    for (collection, name) in cards {
        let card = read_cached(ctx, namespace, &name, |_| true).await?;
        read.push((collection, name, card));
    }
    let card_refs: Vec<CardRef> = read
        .iter()
        .map(|(collection, name, card)| CardRef {
            name,
            collection: *collection,
            card: lookup(card),
        })
        .collect();
    Ok(resolve_skills(&card_refs))
}

/// A default-skills SkillCollection as read, with the SkillCards it names.
struct ReadDefault {
    namespace: String,
    name: String,
    scope: DefaultScope,
    collection: Read<SkillCollection>,
    cards: Vec<(String, Read<SkillCard>)>,
}

/// Reads the default-skills collections that apply to the Agent: those labelled
/// `konveyor.io/default-skills=true` in its namespace (but the ones it lists itself), and in
/// the operator's default-skills namespace. A default-skills namespace the operator may not
/// read gives no defaults, with a warning in the log.
async fn read_defaults(agent: &Agent, namespace: &str, ctx: &Context) -> Result<Vec<ReadDefault>> {
    let mut scopes = vec![(namespace.to_string(), DefaultScope::Namespace)];
    if let Some(cluster) = &ctx.settings.default_skills_namespace
        && cluster != namespace
    {
        scopes.push((cluster.clone(), DefaultScope::Cluster));
    }
    let selector = format!("{DEFAULT_SKILLS_LABEL}=true");
    let mut found = Vec::new();
    for (ns, scope) in scopes {
        let api: Api<DeserializeGuard<SkillCollection>> = Api::namespaced(ctx.client.clone(), &ns);
        let listed = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(listed) => listed,
            Err(kube::Error::Api(e)) if e.code == 403 && scope == DefaultScope::Cluster => {
                tracing::warn!(namespace = %ns, "cannot list the cluster-wide default skills: {}", e.message);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for guarded in listed {
            let (name, collection) = match guarded.0 {
                Ok(collection) => (collection.name_any(), Ok(collection)),
                Err(invalid) => (
                    invalid.metadata.name.clone().unwrap_or_default(),
                    Err(invalid.error),
                ),
            };
            if scope == DefaultScope::Namespace
                && agent.spec.skill_collections.iter().any(|r| r.name == name)
            {
                continue;
            }
            let mut cards = Vec::new();
            if let Ok(collection) = &collection {
                for card in collection.status.iter().flat_map(|s| &s.resolved_skills) {
                    let read = read_reference::<SkillCard>(&ctx.client, &ns, card).await?;
                    cards.push((card.clone(), read));
                }
            }
            found.push(ReadDefault {
                namespace: ns.clone(),
                name,
                scope,
                collection: Some(collection),
                cards,
            });
        }
    }
    Ok(found)
}

/// What an Agent references by name.
#[derive(Clone, Copy, Debug)]
pub enum Reference {
    SkillCard,
    Gateway,
}

/// The Agents in `namespace` that reference the SkillCard or Gateway `name`. For a
/// SkillCard, also those whose skills come from it through a collection.
pub fn agents_referencing<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    namespace: &str,
    reference: Reference,
    name: &str,
) -> Vec<ObjectRef<Agent>> {
    agents
        .into_iter()
        .filter(|a| a.namespace().as_deref() == Some(namespace))
        .filter(|a| {
            let refs = match reference {
                Reference::SkillCard => &a.spec.skill_cards,
                Reference::Gateway => &a.spec.gateways,
            };
            refs.iter().any(|r| r.name == name)
                || matches!(reference, Reference::SkillCard)
                    && a.status
                        .iter()
                        .flat_map(|s| &s.skills)
                        .any(|s| s.skill_card == name)
        })
        .map(ObjectRef::from_obj)
        .collect()
}

/// The Agents a change to the SkillCollection `collection` concerns: those of its namespace
/// listing it, and, for a default-skills collection, every Agent of its namespace or (in the
/// default-skills namespace `cluster_defaults`) of the cluster that has not opted out. A
/// collection that lost the label concerns the Agents that report on default skills.
pub fn agents_of_collection<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    collection: &SkillCollection,
    cluster_defaults: Option<&str>,
) -> Vec<ObjectRef<Agent>> {
    let namespace = collection.namespace().unwrap_or_default();
    let name = collection.name_any();
    let is_default = collection
        .labels()
        .get(DEFAULT_SKILLS_LABEL)
        .is_some_and(|v| v == "true");
    let in_defaults = cluster_defaults == Some(namespace.as_str());
    agents
        .into_iter()
        .filter(|a| {
            let here = a.namespace().as_deref() == Some(namespace.as_str());
            let listed = here && a.spec.skill_collections.iter().any(|r| r.name == name);
            let reports = a
                .status
                .iter()
                .any(|s| find_condition(&s.conditions, CONDITION_DEFAULT_SKILLS).is_some());
            let defaulted = a.spec.default_skills != Some(false)
                && (here || in_defaults)
                && (is_default || reports);
            listed || defaulted
        })
        .map(ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
mod scenarios;
