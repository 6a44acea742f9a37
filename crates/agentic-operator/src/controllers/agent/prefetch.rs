//! Skill prefetch, the second half of an Agent's pass: once the Agent's status is decided,
//! read the nodes and the Agent's prefetch pods from their caches, plan with
//! [`agentic_core::prefetch::plan_prefetch`], delete and create the pods the plan names, and
//! write the `SkillsPrefetched` condition into the status the pipeline then writes. Nothing
//! here fails the pass: a prefetch that cannot be made is logged and tried again, and the
//! Agent's Ready never depends on it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_api::{Agent, AgentStatus, ConditionStatus, SkillCard};
use agentic_core::conditions::{Conditions, is_ready};
use agentic_core::owners::is_controlled_by;
use agentic_core::pin::Pin;
use agentic_core::prefetch::{
    CONDITION_SKILLS_PREFETCHED, NodeSelection, ObservedPod, PrefetchOwner, PrefetchSettings,
    SkillImages, plan_prefetch, pull_seconds, selected_nodes,
};
use agentic_core::reasons::AgentReason;
use agentic_core::sandbox::MountedSkill;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};

use crate::apply::create_owned;
use crate::caches::{Guarded, Index, PULLING, PrefetchCaches, listed};
use crate::context::Context;
use crate::controllers::support::{MEMBERS, guard_ref, lookup, member_if, read_cached};
use crate::error::Chain;

/// How soon a pass looks again when the prefetch caches have not listed yet, or a write
/// failed.
const RETRY: Duration = Duration::from_secs(5);

/// Whether the Agent has something to prefetch: Ready, with an image skill.
pub(super) fn prefetching(agent: &Agent) -> Vec<String> {
    let status = agent.status.as_ref();
    member_if(status.is_some_and(|s| {
        is_ready(&s.conditions)
            && s.skills
                .iter()
                .any(|skill| skill.image.as_deref().and_then(Pin::image).is_some())
    }))
}

/// The Agent a changed prefetch pod belongs to.
pub(super) fn agent_of_pod(pod: Arc<Guarded<Pod>>) -> Option<ObjectRef<Guarded<Agent>>> {
    let pod = pod.0.as_ref().ok()?;
    let agent = PrefetchCaches::controlling_agent(pod).pop()?;
    let namespace = pod.namespace()?;
    Some(guard_ref(ObjectRef::new(&agent).within(&namespace)))
}

/// Maps node events to the Agents that prefetch, but only when the set of selected nodes
/// changed (a node joined, left, or changed whether runs can land on it): a node's status
/// changes every few minutes, and each change must not wake every Agent.
pub(super) struct NodeChanges {
    selection: NodeSelection,
    nodes: Store<Node>,
    selected: Mutex<BTreeSet<String>>,
    agents: Index<Agent>,
}

impl NodeChanges {
    pub fn new(settings: &PrefetchSettings, nodes: Store<Node>, agents: Index<Agent>) -> Self {
        Self {
            selection: settings.nodes.clone(),
            nodes,
            selected: Mutex::default(),
            agents,
        }
    }

    /// The Agents to look at after `node` changed: every one that prefetches, when the
    /// selection changed; none otherwise.
    pub fn agents(&self, node: &Node) -> Vec<ObjectRef<Guarded<Agent>>> {
        let name = node.name_any();
        // The cache holds what the node is now; a deleted node is gone from it.
        let cached = self.nodes.get(&ObjectRef::new(&name));
        let now = cached.is_some_and(|n| !selected_nodes([n.as_ref()], &self.selection).is_empty());
        let mut selected = self.selected.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = if now {
            selected.insert(name)
        } else {
            selected.remove(&name)
        };
        if !changed {
            return Vec::new();
        }
        drop(selected);
        self.agents
            .everywhere(MEMBERS)
            .into_iter()
            .map(|(namespace, name)| guard_ref(ObjectRef::new(&name).within(&namespace)))
            .collect()
    }
}

/// Prefetches the Agent's skill images, as its status `status` (just decided) allows, and
/// writes `SkillsPrefetched` into it. Returns when to look again.
pub(super) async fn prefetch(
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
    status: &mut AgentStatus,
    now: &Time,
) -> Option<Duration> {
    let (Some(settings), Some(caches)) = (
        ctx.settings.skill_prefetch.as_ref(),
        ctx.caches(namespace).and_then(|c| c.prefetch),
    ) else {
        report(agent, status, now, None);
        return None;
    };
    if !listed(&caches.nodes) || !listed(&caches.pods) {
        // Nodes not known yet are not nodes without the images: keep what was reported.
        return Some(RETRY);
    }
    let owner = agent.controller_owner_ref(&())?;
    let images = if is_ready(&status.conditions) {
        skill_images(agent, namespace, ctx, status).await
    } else {
        SkillImages::default()
    };
    let nodes = selected_nodes(
        caches.nodes.state().iter().map(AsRef::as_ref),
        &settings.nodes,
    );
    let uid = owner.uid.clone();
    let pods = agent_pods(&caches, namespace, &agent.name_any(), &uid);
    let observed: Vec<ObservedPod<'_>> = pods
        .iter()
        .map(|pod| ObservedPod {
            metadata: &pod.metadata,
            status: pod.status.as_ref(),
        })
        .collect();
    for pod in &observed {
        ctx.metrics.prefetch_ended(*pod, pull_seconds(*pod));
    }
    let cluster_pulling = caches.pulling.everywhere(PULLING).len();
    let name = agent.name_any();
    let prefetch_owner = PrefetchOwner {
        name: &name,
        namespace,
        owner,
    };
    let plan = plan_prefetch(
        settings,
        &prefetch_owner,
        &images,
        &nodes,
        &observed,
        cluster_pulling,
        now,
    );
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let mut applied = true;
    for name in &plan.delete {
        let Some(pod) = pods.iter().find(|p| p.metadata.name.as_ref() == Some(name)) else {
            continue;
        };
        applied &= delete_pod(&api, pod, namespace).await;
    }
    for pod in &plan.create {
        match create_owned(&api, pod, "Pod", &uid).await {
            Ok(Ok(_)) => ctx.metrics.prefetch_started(),
            Ok(Err(taken)) => {
                tracing::warn!(namespace, agent = %name, pod = %taken.name, "a pod the Agent does not control holds the name of its prefetch pod; skipping that node");
            }
            Err(error) => {
                tracing::warn!(namespace, agent = %name, error = %Chain(&error), "creating a prefetch pod failed; retrying");
                applied = false;
            }
        }
    }
    report(agent, status, now, plan.report.map(|r| r.condition()));
    if applied {
        plan.recheck
    } else {
        Some(plan.recheck.map_or(RETRY, |at| at.min(RETRY)))
    }
}

/// Writes `SkillsPrefetched` into the Agent's `status`, or removes it for `None`.
fn report(
    agent: &Agent,
    status: &mut AgentStatus,
    now: &Time,
    condition: Option<(ConditionStatus, AgentReason, String)>,
) {
    let mut conditions = Conditions::<AgentReason>::new(
        &mut status.conditions,
        agent.metadata.generation,
        now.clone(),
    );
    match condition {
        Some((truth, reason, message)) => {
            conditions.set(CONDITION_SKILLS_PREFETCHED, truth, reason, &message);
        }
        None => {
            conditions.remove(CONDITION_SKILLS_PREFETCHED);
        }
    }
}

/// The images of the Agent's skills, each checked against its SkillCard as a run's pod
/// mounts it ([`MountedSkill::from_agent_skill`]), with the card's pull secrets. A skill whose
/// card a run could not mount now is left out: the Agent catches up, and its next pass
/// prefetches it.
async fn skill_images(
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
    status: &AgentStatus,
) -> SkillImages {
    let mut mounted = Vec::new();
    for skill in &status.skills {
        if skill.image.as_deref().and_then(Pin::image).is_none() {
            continue;
        }
        let card_namespace = skill.namespace.as_deref().unwrap_or(namespace);
        let card = match read_cached::<SkillCard>(ctx, card_namespace, &skill.skill_card, |_| true)
            .await
        {
            Ok(card) => card,
            Err(error) => {
                tracing::warn!(namespace, agent = %agent.name_any(), card = %skill.skill_card, error = %Chain(&error), "cannot read a SkillCard to prefetch its image");
                continue;
            }
        };
        if let Ok(skill) = MountedSkill::from_agent_skill(skill, lookup(&card)) {
            mounted.push(skill);
        }
    }
    SkillImages::of(&mounted)
}

/// The prefetch pods the Agent with `uid` controls, from the cache.
fn agent_pods(caches: &PrefetchCaches, namespace: &str, agent: &str, uid: &str) -> Vec<Pod> {
    caches
        .by_agent
        .get(namespace, agent)
        .into_iter()
        .filter_map(|name| {
            caches
                .pods
                .get(&guard_ref(ObjectRef::<Pod>::new(&name).within(namespace)))
        })
        .filter_map(|pod| pod.0.as_ref().ok().cloned())
        .filter(|pod| is_controlled_by(&pod.metadata, uid))
        .collect()
}

/// Deletes the prefetch pod `pod` as cached (its uid a precondition, so a pod of the same
/// name created since is left alone); false when the API server refused.
async fn delete_pod(api: &Api<Pod>, pod: &Pod, namespace: &str) -> bool {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => true,
        // Gone already, or replaced since: nothing of ours to delete.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => true,
        Err(error) => {
            tracing::warn!(namespace, pod = %pod.name_any(), error = %Chain(&error), "deleting a prefetch pod failed; retrying");
            false
        }
    }
}
