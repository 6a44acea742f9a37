//! The status of SkillTrustPolicies and ClusterSkillTrustPolicies: the runs that mounted a
//! skill the policy revokes or did not verify (its blast radius, from the runs' watch cache),
//! and `Ready`, whether every key the policy names can be read and parsed.
//!
//! A policy is looked at again when it changes, when a run of its scope changes what it
//! mounted (`status.skills`, verification included) or its phase, is held before its start
//! by a revocation or released, or is deleted, and every
//! tag refresh interval, as the Secrets and ConfigMaps holding its keys are not watched. A
//! card whose verification changes reaches the policies through the runs that mounted it.
//!
//! A cluster policy's status is written only when the operator watches every namespace: an
//! operator watching some (`--namespaces`), or a replica serving some shards (`--shards`),
//! sees part of the runs, and several of them would overwrite each other's blast radius.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use agentic_api::{
    Agent, AgentRun, ClusterSkillTrustPolicy, PinnedSkill, SkillCard, SkillTrustPolicy,
    SkillTrustPolicyStatus, TrustPolicy,
};
use agentic_core::conditions::find_condition;
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::finished::FinishedRuns;
use agentic_core::trust::status::policy_status;
use agentic_core::trust::{PolicyId, blast_radius, held_before_start, intended_skills};
use futures::future::BoxFuture;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::{git_signers, requirement};
use crate::caches::{Caches, Guarded, valid};
use crate::context::Context;
use crate::controllers::pipeline::{Pass, Policy, Reconciled, ready_phase, run_controller};
use crate::controllers::support::namespace_of;
use crate::controllers::watches::{Stop, Watches};
use crate::error::Result;

pub const NAMESPACED_KIND: &str = "SkillTrustPolicy";
pub const CLUSTER_KIND: &str = "ClusterSkillTrustPolicy";

/// The Events of a trust policy's status change, of either kind: its `Ready` condition's.
fn policy_events(old: &SkillTrustPolicyStatus, new: &SkillTrustPolicyStatus) -> Vec<StatusEvent> {
    condition_events(
        &old.conditions,
        &new.conditions,
        &[agentic_api::CONDITION_READY],
    )
}

impl Reconciled for SkillTrustPolicy {
    const KIND: &'static str = NAMESPACED_KIND;

    fn phase(&self) -> &'static str {
        ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &SkillTrustPolicyStatus, new: &SkillTrustPolicyStatus) -> Vec<StatusEvent> {
        policy_events(old, new)
    }
}

impl Reconciled for ClusterSkillTrustPolicy {
    const KIND: &'static str = CLUSTER_KIND;

    fn phase(&self) -> &'static str {
        ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &SkillTrustPolicyStatus, new: &SkillTrustPolicyStatus) -> Vec<StatusEvent> {
        policy_events(old, new)
    }
}

/// The SkillTrustPolicy status controller: follows its policies and the runs of their
/// namespaces.
pub(in crate::controllers) fn namespaced_controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let store = watches.of::<SkillTrustPolicy>().store();
    let in_namespace = move |policies: &Store<Guarded<SkillTrustPolicy>>, run: &AgentRun| {
        let namespace = run.namespace();
        policies
            .state()
            .iter()
            .filter(|policy| policy.namespace() == namespace)
            .map(|policy| ObjectRef::from_obj(policy.as_ref()))
            .collect()
    };
    let controller =
        Controller::for_shared_stream(watches.of::<SkillTrustPolicy>().applied(), store.clone());
    let controller = follow_runs(controller, watches, store.clone(), in_namespace);
    let policy = Policy::backing_off(reconcile_namespaced, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

/// The ClusterSkillTrustPolicy status controller, when the operator watches every namespace
/// (`namespace` is `None`) and serves them all (no shards held by other replicas); otherwise
/// nothing (see the module's documentation).
pub(in crate::controllers) fn cluster_controller(
    watches: &mut Watches,
    namespace: Option<&str>,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    if namespace.is_some() || watches.sharded() {
        return Box::pin(std::future::ready(()));
    }
    let store = watches.of::<ClusterSkillTrustPolicy>().store();
    let every = |policies: &Store<Guarded<ClusterSkillTrustPolicy>>, _: &AgentRun| {
        policies
            .state()
            .iter()
            .map(|policy| ObjectRef::from_obj(policy.as_ref()))
            .collect()
    };
    let controller = Controller::for_shared_stream(
        watches.of::<ClusterSkillTrustPolicy>().applied(),
        store.clone(),
    );
    let controller = follow_runs(controller, watches, store.clone(), every);
    let policy = Policy::backing_off(reconcile_cluster, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

/// The policies in a store that cover a run.
type Covering<K> = fn(&Store<Guarded<K>>, &AgentRun) -> Vec<ObjectRef<Guarded<K>>>;

/// Adds to `controller` the runs: a run whose mounted skills or phase changed, or that was
/// deleted, re-queues the policies `covering` it.
fn follow_runs<K>(
    controller: Controller<Guarded<K>>,
    watches: &mut Watches,
    policies: Store<Guarded<K>>,
    covering: Covering<K>,
) -> Controller<Guarded<K>>
where
    K: Reconciled,
{
    let seen = Arc::new(RunsSeen::default());
    let (on_change, on_delete) = (Arc::clone(&seen), seen);
    let (changed_policies, deleted_policies) = (policies.clone(), policies);
    controller
        .watches_shared_stream(
            watches.of::<AgentRun>().applied(),
            move |run: Arc<Guarded<AgentRun>>| match &run.0 {
                Ok(run) if on_change.changed(run) => covering(&changed_policies, run),
                _ => Vec::new(),
            },
        )
        .watches_shared_stream(
            watches.of::<AgentRun>().deleted(),
            move |run: Arc<Guarded<AgentRun>>| match &run.0 {
                Ok(run) if on_delete.forget(run) => covering(&deleted_policies, run),
                _ => Vec::new(),
            },
        )
}

/// What each run mounted and its phase when a policy controller last saw it, as a hash,
/// for the runs that mounted any skill or are held before their start by a revocation: a
/// run event that changes none of it (most of them: its sandbox coming up, its conditions)
/// re-queues no policy, and any other run can be in no blast radius.
#[derive(Default)]
struct RunsSeen(Mutex<HashMap<(String, String), u64>>);

impl RunsSeen {
    fn key(run: &AgentRun) -> (String, String) {
        (run.namespace().unwrap_or_default(), run.name_any())
    }

    fn fingerprint(run: &AgentRun) -> Option<u64> {
        let status = run.status.as_ref()?;
        let held = held_before_start(run);
        if status.skills.is_empty() && !held {
            return None;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        status
            .phase
            .map(agentic_api::AgentRunPhase::as_str)
            .hash(&mut hasher);
        serde_json::to_string(&status.skills)
            .unwrap_or_default()
            .hash(&mut hasher);
        // A held run's message names the skill and policy holding it: a change of either
        // counts it again.
        if held {
            find_condition(&status.conditions, agentic_api::CONDITION_READY)
                .map(|ready| ready.message.as_str())
                .hash(&mut hasher);
        }
        Some(hasher.finish())
    }

    /// Whether what `run` mounted or its phase changed since it was last seen.
    fn changed(&self, run: &AgentRun) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = Self::key(run);
        let now = Self::fingerprint(run);
        let before = match now {
            Some(fingerprint) => seen.insert(key, fingerprint),
            None => seen.remove(&key),
        };
        before != now
    }

    /// Forgets a deleted run, or a finished one (the run cache hands those on as deleted:
    /// it keeps them apart, and a list does not hand them on); whether it mounted a skill.
    fn forget(&self, run: &AgentRun) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.remove(&Self::key(run)).is_some() || Self::fingerprint(run).is_some()
    }
}

/// A SkillTrustPolicy's pass: its blast radius over the runs of its namespace.
pub async fn reconcile_namespaced(
    policy: Arc<SkillTrustPolicy>,
    ctx: Arc<Context>,
    old: SkillTrustPolicyStatus,
) -> Result<Pass<SkillTrustPolicyStatus>> {
    let namespace = namespace_of(policy.as_ref(), NAMESPACED_KIND)?;
    let id = PolicyId::of_namespaced(&policy);
    let caches = ctx.caches(&namespace);
    status_of(
        &id,
        policy.as_ref(),
        &policy.spec.policy,
        caches,
        &ctx,
        &old,
    )
    .await
}

/// A ClusterSkillTrustPolicy's pass: its blast radius over the runs of every namespace.
pub async fn reconcile_cluster(
    policy: Arc<ClusterSkillTrustPolicy>,
    ctx: Arc<Context>,
    old: SkillTrustPolicyStatus,
) -> Result<Pass<SkillTrustPolicyStatus>> {
    let id = PolicyId::of_cluster(&policy);
    let caches = ctx.caches_of_every_namespace();
    status_of(
        &id,
        policy.as_ref(),
        &policy.spec.policy,
        caches,
        &ctx,
        &old,
    )
    .await
}

/// How long a policy's count stands before a change of a run counts it again. Counting reads
/// every cached run of the policy's scope, so a burst of run changes (a restart hands every
/// run over at once; thousands finishing) costs one count per interval and policy, not one
/// per change; a change of the policy itself counts at once.
const RECOUNT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// When each policy was last counted, and at which generation.
#[derive(Default)]
struct Counted(Mutex<HashMap<String, (Option<i64>, std::time::Instant)>>);

impl Counted {
    /// How long the policy `id` at `generation` waits before it is counted again; `None`
    /// when it is counted now, which is then recorded.
    fn wait(
        &self,
        id: &str,
        generation: Option<i64>,
        now: std::time::Instant,
    ) -> Option<std::time::Duration> {
        let mut counted = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((counted_generation, at)) = counted.get(id)
            && *counted_generation == generation
        {
            let due = *at + RECOUNT_INTERVAL;
            if now < due {
                return Some(due - now);
            }
        }
        counted.insert(id.to_string(), (generation, now));
        None
    }
}

/// How soon a policy's pass looks again while the finished runs are listing.
const FINISHED_RUNS_LISTING_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The status of the policy `id` from the runs and policies in `caches` (none: no run is
/// watched, so none is counted) and the keys it names.
async fn status_of(
    id: &PolicyId,
    object: &impl Resource,
    policy: &TrustPolicy,
    caches: Option<Caches>,
    ctx: &Context,
    old: &SkillTrustPolicyStatus,
) -> Result<Pass<SkillTrustPolicyStatus>> {
    let generation = object.meta().generation;
    if let Some(wait) =
        ctx.kind_state::<Counted>()
            .wait(&id.to_string(), generation, std::time::Instant::now())
    {
        return Ok(Pass::then(old.clone(), Action::requeue(wait)));
    }
    if let Some(finished) = caches.as_ref().and_then(|c| c.finished_runs.as_ref())
        && !finished.is_listed()
    {
        // Counted now, the blast radius would leave out the finished runs still listing.
        return Ok(Pass::then(
            old.clone(),
            Action::requeue(FINISHED_RUNS_LISTING_RETRY),
        ));
    }
    let blast = match &caches {
        Some(caches) => {
            let cluster: Vec<ClusterSkillTrustPolicy> =
                valid(&caches.state_of()).into_iter().cloned().collect();
            let namespaced: Vec<SkillTrustPolicy> =
                valid(&caches.state_of()).into_iter().cloned().collect();
            let runs = caches.state_of::<AgentRun>();
            let intended = |run: &AgentRun| held_runs_skills(ctx, run);
            let none = FinishedRuns::default();
            match &caches.finished_runs {
                Some(finished) => {
                    let finished = finished.lock();
                    blast_radius(&cluster, &namespaced, id, valid(&runs), &finished, intended)
                }
                None => blast_radius(&cluster, &namespaced, id, valid(&runs), &none, intended),
            }
        }
        None => (0, Vec::new()),
    };
    let keys = keys_readable(id, policy, ctx).await;
    let status = policy_status(old, object.meta().generation, keys, blast, crate::now());
    // The Secrets and ConfigMaps holding the keys are not watched: read them again now and then.
    Ok(Pass::then(
        status,
        Action::requeue(ctx.settings.tag_refresh_interval),
    ))
}

/// What a run held before its start would mount: its Agent's skills, with their cards'
/// verification, each looked up by name in the watch caches (no cache is scanned).
fn held_runs_skills(ctx: &Context, run: &AgentRun) -> Vec<PinnedSkill> {
    let namespace = run.namespace().unwrap_or_default();
    let Some(agent) = cached_one::<Agent>(ctx, &namespace, &run.spec.agent_ref) else {
        return Vec::new();
    };
    intended_skills(&agent, &namespace, |namespace, name| {
        cached_one::<SkillCard>(ctx, namespace, name)
    })
}

/// The valid `K` `namespace/name` in the watch caches of its namespace.
fn cached_one<K>(ctx: &Context, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let store = ctx.caches(namespace)?.of::<K>()?;
    let guarded = store.get(&ObjectRef::new(name).within(namespace))?;
    guarded
        .0
        .as_ref()
        .ok()
        .map(|object| Arc::new(object.clone()))
}

/// Whether every key, certificate, Secret and ConfigMap `policy` names can be read and
/// parsed, as a card's check would read them; why not, naming the field or object.
async fn keys_readable(id: &PolicyId, policy: &TrustPolicy, ctx: &Context) -> Result<(), String> {
    if !policy.keys.is_empty() || !policy.keyless.is_empty() {
        requirement(id, policy, ctx).await?;
    }
    if policy.git_signers.is_some() {
        git_signers(id, policy, ctx).await?;
    }
    Ok(())
}

#[cfg(test)]
mod scenarios;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_policy_is_counted_at_most_once_an_interval_unless_it_changed() {
        let counted = Counted::default();
        let start = Instant::now();
        assert_eq!(counted.wait("p", Some(1), start), None, "the first count");
        let soon = start + Duration::from_millis(500);
        assert_eq!(
            counted.wait("p", Some(1), soon),
            Some(RECOUNT_INTERVAL.saturating_sub(Duration::from_millis(500)))
        );
        assert_eq!(counted.wait("q", Some(1), soon), None, "another policy");
        assert_eq!(counted.wait("p", Some(2), soon), None, "a changed policy");
        let later = soon + RECOUNT_INTERVAL;
        assert_eq!(
            counted.wait("p", Some(2), later),
            None,
            "once the interval is over"
        );
    }
}
