//! Agent: Ready when every referenced SkillCard, SkillCollection and Gateway is Ready and
//! skill names are unique.

use std::sync::Arc;

use agentic_api::{
    Agent, AgentStatus, CONDITION_READY, DEFAULT_SKILLS_LABEL, Gateway, SkillCard, SkillCollection,
};
use agentic_core::agent::{AgentInputs, decide_agent};
use agentic_core::conditions::find_condition;
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::prefetch::CONDITION_SKILLS_PREFETCHED;
use agentic_core::reasons::AgentReason;
use agentic_core::sandbox::CONDITION_CREDENTIAL_ISOLATION;
use agentic_core::skills::{
    CONDITION_DEFAULT_SKILLS, CONDITION_GATEWAY_CONFIGURED, CONDITION_RULES_FIT_CONTEXT, CardRef,
    DefaultCollection, DefaultScope, Lookup, ResolvedSkills, collection_cards, resolve_skills,
};
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, ready_phase, run_controller};
use super::support::{
    MEMBERS, Read, cached_named, guard_ref, lookup, member_if, namespace_of, read_cached,
    read_reference, relate,
};
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
    let agents = watches.of::<Agent>();
    let store = agents.store();
    let agents_of_changed_collection = {
        let store = store.clone();
        let listing = agents.index(|agent| names(&agent.spec.skill_collections));
        let defaulted = agents.index(|agent| member_if(agent.spec.default_skills != Some(false)));
        let reporting = agents.index(|agent| member_if(reports_default_skills(agent)));
        let cluster_defaults = ctx.settings.default_skills_namespace.clone();
        move |collection: Arc<Guarded<SkillCollection>>| {
            let Ok(collection) = &collection.0 else {
                return Vec::new();
            };
            let namespace = collection.namespace().unwrap_or_default();
            let mut candidates: Vec<(String, String)> = listing
                .get(&namespace, &collection.name_any())
                .into_iter()
                .map(|name| (namespace.clone(), name))
                .collect();
            // Only an Agent that takes default skills, or reports on them, may follow one.
            let followers = if is_default_collection(collection) {
                &defaulted
            } else {
                &reporting
            };
            if cluster_defaults.as_deref() == Some(namespace.as_str()) {
                candidates.extend(followers.everywhere(MEMBERS));
            } else {
                let here = followers.get(&namespace, MEMBERS);
                candidates.extend(here.into_iter().map(|name| (namespace.clone(), name)));
            }
            let found = cached_named(&store, candidates);
            let mut picked: Vec<_> =
                agents_of_collection(valid(&found), collection, cluster_defaults.as_deref())
                    .into_iter()
                    .map(guard_ref)
                    .collect();
            picked.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            picked.dedup();
            picked
        }
    };
    let mut controller = Controller::for_shared_stream(agents.applied(), store.clone())
        .watches_shared_stream(
            watches.of::<SkillCollection>().touched(),
            agents_of_changed_collection.clone(),
        );
    if let Some(defaults) = &mut watches.default_collections {
        controller =
            controller.watches_shared_stream(defaults.touched(), agents_of_changed_collection);
    }
    let by_card = agents.index(|agent| {
        let mut cards = names(&agent.spec.skill_cards);
        cards.extend(
            agent
                .status
                .iter()
                .flat_map(|s| &s.skills)
                .map(|s| s.skill_card.clone()),
        );
        cards
    });
    let by_gateway = agents.index(|agent| names(&agent.spec.gateways));
    let controller = controller
        .watches_shared_stream(
            watches.of::<SkillCard>().touched(),
            relate(store.clone(), by_card, |agents, ns, card| {
                agents_referencing(agents, ns, Reference::SkillCard, card)
            }),
        )
        .watches_shared_stream(
            watches.of::<Gateway>().touched(),
            relate(store.clone(), by_gateway, |agents, ns, gateway| {
                agents_referencing(agents, ns, Reference::Gateway, gateway)
            }),
        );
    let controller = match (&watches.prefetch, &ctx.settings.skill_prefetch) {
        (Some(watched), Some(settings)) => {
            let changes = Arc::new(prefetch::NodeChanges::new(
                settings,
                watched.nodes.store(),
                agents.index(prefetch::prefetching),
            ));
            controller
                .watches_shared_stream(watched.pods.touched(), prefetch::agent_of_pod)
                .watches_shared_stream(watched.nodes.touched(), move |node| changes.agents(&node))
        }
        _ => controller,
    };
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
                CONDITION_CREDENTIAL_ISOLATION,
                CONDITION_DEFAULT_SKILLS,
                CONDITION_RULES_FIT_CONTEXT,
                CONDITION_SKILLS_PREFETCHED,
            ],
        )
    }

    fn extensions(
        &self,
        old: &AgentStatus,
        new: &mut AgentStatus,
        now: &Time,
    ) -> Option<StatusEvent> {
        let (record, event) = agentic_core::extensions::judge(
            &old.extension_fields,
            agentic_core::extensions::of_agent(&self.spec),
            &old.conditions,
            &mut new.conditions,
            self.metadata.generation,
            now,
            AgentReason::ExtensionFieldsDropped,
        );
        new.extension_fields = record;
        event
    }
}

/// An Agent's pass: read what it names, then decide its status; then prefetch its skill
/// images onto the nodes ([`prefetch`]), the only objects it owns.
pub async fn reconcile(
    agent: Arc<Agent>,
    ctx: Arc<Context>,
    old: AgentStatus,
) -> Result<Pass<AgentStatus>> {
    let namespace = namespace_of(agent.as_ref(), KIND)?;
    let References {
        gateways,
        skills,
        defaults,
    } = dereference(&agent, &namespace, &ctx).await?;
    let inputs = AgentInputs {
        gateways: gateways
            .iter()
            .map(|(name, gateway)| (name.as_str(), lookup(gateway)))
            .collect(),
        skills,
        defaults: defaults.iter().map(default_collection).collect(),
        credential_proxy: &ctx.settings.credential_proxy,
    };
    let now = crate::now();
    let mut status = decide_agent(&agent, inputs, old, &now);
    let recheck = prefetch::prefetch(&agent, &namespace, &ctx, &mut status, &now).await;
    Ok(Pass::then(
        status,
        recheck.map_or_else(Action::await_change, Action::requeue),
    ))
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

/// A default-skills collection as `agentic-core` takes it, borrowed from what was read.
fn default_collection(read: &ReadDefault) -> DefaultCollection<'_> {
    DefaultCollection {
        namespace: &read.namespace,
        name: &read.name,
        scope: read.scope,
        collection: lookup(&read.collection),
        cards: read
            .cards
            .iter()
            .map(|(n, c)| (n.as_str(), lookup(c)))
            .collect(),
    }
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
        let api: Api<Guarded<SkillCollection>> = Api::namespaced(ctx.client.clone(), &ns);
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
    let is_default = is_default_collection(collection);
    let in_defaults = cluster_defaults == Some(namespace.as_str());
    agents
        .into_iter()
        .filter(|a| {
            let here = a.namespace().as_deref() == Some(namespace.as_str());
            let listed = here && a.spec.skill_collections.iter().any(|r| r.name == name);
            let defaulted = a.spec.default_skills != Some(false)
                && (here || in_defaults)
                && (is_default || reports_default_skills(a));
            listed || defaulted
        })
        .map(ObjectRef::from_obj)
        .collect()
}

/// Whether `collection` is one of the default skill collections (labelled as such).
fn is_default_collection(collection: &SkillCollection) -> bool {
    collection
        .labels()
        .get(DEFAULT_SKILLS_LABEL)
        .is_some_and(|v| v == "true")
}

/// Whether `agent` reports on default skills (has their condition).
fn reports_default_skills(agent: &Agent) -> bool {
    agent
        .status
        .iter()
        .any(|s| find_condition(&s.conditions, CONDITION_DEFAULT_SKILLS).is_some())
}

/// The names of `references`.
fn names(references: &[agentic_api::ObjectRef]) -> Vec<String> {
    references.iter().map(|r| r.name.clone()).collect()
}

pub(in crate::controllers) mod prefetch;
#[cfg(test)]
mod scenarios;
