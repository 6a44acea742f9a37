//! The watch caches the controllers keep, one set per watched scope, and the shapes the
//! objects are cached in. Below both the context and the controllers: it names no
//! controller, so a pass and the context can read it without importing each other.

mod sandbox_pod;

use std::sync::Arc;

use agentic_api::{
    Agent, AgentRun, AgentWorkflow, AgentWorkflowRun, ClusterSkillTrustPolicy, Gateway, SkillCard,
    SkillCollection, SkillTrustPolicy,
};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::Store;

pub use sandbox_pod::SandboxPod;

/// A cached object of a kind the operator reconciles: one that does not deserialize is kept
/// as its error, so one malformed object cannot stop a watch.
pub type Guarded<K> = DeserializeGuard<K>;

/// Secrets are watched for their names and versions only (kube asks for metadata alone for
/// a `PartialObjectMeta`): a Secret's data never reaches the operator through a watch (a pass
/// reads the one it needs), and a namespace's many large Secrets (Helm releases,
/// certificates) cost a few hundred bytes of event each; a change of data still changes the
/// version, which triggers the pass.
pub type SecretMeta = PartialObjectMeta<Secret>;

/// The agent-sandbox `Sandbox` kind.
pub fn sandbox_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"),
        "sandboxes",
    )
}

/// The watch caches of the seven kinds in one namespace (or in all), and of the sandboxes
/// (Pods labelled with the run label, agent-sandbox Sandboxes) the AgentRun controller follows.
#[derive(Clone)]
pub struct Caches {
    pub skill_cards: Store<Guarded<SkillCard>>,
    pub skill_collections: Store<Guarded<SkillCollection>>,
    pub gateways: Store<Guarded<Gateway>>,
    pub agents: Store<Guarded<Agent>>,
    pub workflows: Store<Guarded<AgentWorkflow>>,
    pub workflow_runs: Store<Guarded<AgentWorkflowRun>>,
    pub agent_runs: Store<Guarded<AgentRun>>,
    pub pods: Store<SandboxPod>,
    /// With the agent-sandbox backend only.
    pub sandboxes: Option<Store<DynamicObject>>,
    /// The cluster's trust policies (the same in every scope) and the scope's namespaced ones.
    pub cluster_trust_policies: Store<Guarded<ClusterSkillTrustPolicy>>,
    pub trust_policies: Store<Guarded<SkillTrustPolicy>>,
}

/// Whether the watch behind `store` has listed, so that what it lacks is absent.
pub fn listed<K>(store: &Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// The objects of a cache's state that deserialized, borrowed: a watch event is mapped
/// without copying the cache (a pod event of a busy namespace used to clone every run).
pub fn valid<K>(state: &[Arc<Guarded<K>>]) -> Vec<&K> {
    state.iter().filter_map(|g| g.0.as_ref().ok()).collect()
}
