//! AgentRun: check the run against its Agent, create exactly one sandbox pinned to the Agent's
//! validated skills, and follow it to Succeeded or Failed.
//!
//! Pipeline: dereference (Agent, Gateway, SkillCards) → validate (params, gateway) → build
//! (pod spec with the skills manifest and params as annotations, ACP key Secret) → apply →
//! status. Once the sandbox exists the run
//! only observes it: a later change to an Agent or SkillCard never changes a running sandbox.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentRunStatus, CONDITION_READY, ClusterSkillTrustPolicy,
    Gateway, PinnedSkill, SkillCard, SkillTrustPolicy,
};
use agentic_core::conditions::{find_condition, is_ready};
use agentic_core::events::StatusEvent;
use agentic_core::names::sandbox_name;
use agentic_core::owners::{controlling_run, is_controlled_by};
use agentic_core::params::resolve_run;
use agentic_core::reasons::{AgentRunReason, ErrorReason};
use agentic_core::sandbox::{
    Enforced, FileMountSources, FileSourceKind, Limits, MountedSkill, PINNED_SKILLS_ANNOTATION,
    RunOutcome, SANDBOX_KIND, SandboxInputs, SourceLookup, admit, admit_in_namespace,
    build_acp_secret, build_acp_service, build_pod, build_sandbox, cancelled, end_revoked, enforce,
    file_mount_source, file_mount_sources, run_events, run_outcome, startup_deadline,
    stops_sandbox,
};
use agentic_core::skills::{
    Lookup, check_agent, malformed_detail, resolve_skill_delivery, select_gateway,
};
use agentic_core::trust::cancelling_revocation;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Preconditions};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, run_controller};
use super::support::{lookup, namespace_of, read_cached};
use super::watches::{Stop, Watches};
use crate::apply::{Expiring, NAME_TAKEN_RETRY, NameTaken, create_owned, expire_finished};
use crate::caches::listed;
use crate::context::{Context, SandboxBackend};
use crate::error::{Error, Result};

mod cache;
mod sweep;
mod wakes;

/// The agent-sandbox `Sandbox` kind.
pub use crate::caches::sandbox_resource;
pub use sweep::MAX_CANDIDATES_PER_PASS;
pub(super) use sweep::sweep;
use wakes::{RunIndexes, Wakes};
#[cfg(test)]
pub(super) use wakes::{live, runs_a_policy_may_cancel};

pub const KIND: &str = "AgentRun";
/// Condition that is True once the run has finished, with the outcome as its reason.
pub const CONDITION_COMPLETED: &str = "Completed";
/// How often a queued run checks for a free slot, besides the watch on the Agent's runs that
/// brings it back when one finishes or is deleted.
const QUEUED_RETRY: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a run waiting for its Gateway to exist or be Ready checks again.
const GATEWAY_RETRY: std::time::Duration = std::time::Duration::from_secs(10);
/// How often a run waiting for a file mount's Secret or ConfigMap checks again; a Secret's
/// watch brings it back sooner, ConfigMaps are not watched.
const FILE_MOUNT_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// The AgentRun controller: starts a run when its Agent turns Ready (and a slot frees under
/// a cap), and follows its sandbox and pod.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let runs = watches.of::<AgentRun>();
    let store = runs.store();
    let namespace_cap = ctx
        .settings
        .run_defaults
        .max_concurrent_runs_per_namespace
        .is_some();
    let wakes = Arc::new(Wakes::new(
        store.clone(),
        RunIndexes::kept_by(&runs),
        namespace_cap,
    ));
    let mut controller = Controller::for_shared_stream(runs.applied(), store.clone())
        .watches_shared_stream(
            watches.of::<Agent>().touched(),
            Wakes::on(&wakes, Wakes::agent_changed),
        )
        .watches_shared_stream(
            watches.secrets.touched(),
            Wakes::on(&wakes, Wakes::secret_changed),
        )
        .watches_shared_stream(runs.changed(), Wakes::on(&wakes, Wakes::run_changed))
        .watches_shared_stream(runs.deleted(), Wakes::on(&wakes, Wakes::run_deleted))
        .watches_shared_stream(
            watches.of::<ClusterSkillTrustPolicy>().touched(),
            Wakes::on(&wakes, Wakes::cluster_policy_changed),
        )
        .watches_shared_stream(
            watches.of::<SkillTrustPolicy>().touched(),
            Wakes::on(&wakes, Wakes::policy_changed),
        )
        .watches_shared_stream(
            watches.pods.touched(),
            Wakes::on(&wakes, Wakes::pod_changed),
        );
    if let Some(sandboxes) = &mut watches.sandboxes {
        controller = controller.watches_shared_stream_with(
            sandboxes.touched(),
            wakes::sandbox_changed,
            sandbox_resource(),
        );
    }
    let policy = Policy::backing_off(reconcile, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for AgentRun {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    }

    fn events(old: &AgentRunStatus, new: &AgentRunStatus) -> Vec<StatusEvent> {
        run_events(old, new)
    }

    fn written(&self, ctx: &Context, old: &AgentRunStatus, new: &AgentRunStatus) {
        ctx.metrics.run_transitioned(self, old, new);
    }

    fn trim_cached(&mut self) {
        cache::trim_finished(self);
    }

    fn settled(&self) -> bool {
        wakes::is_finished(self)
    }
}

pub async fn reconcile(
    run: Arc<AgentRun>,
    ctx: Arc<Context>,
    old: AgentRunStatus,
) -> Result<Pass<AgentRunStatus>> {
    let namespace = namespace_of(run.as_ref(), KIND)?;
    if old.phase.is_some_and(AgentRunPhase::is_finished) {
        return finished(&run, &namespace, &ctx, old).await;
    }
    // Gather: the run's sandbox, created when it has none, and the run judged by it.
    let mut new = old.clone();
    let Enforced {
        outcome,
        recheck_after,
    } = sandbox_outcome(&run, &namespace, &ctx, &mut new).await?;
    // Decide: the status, and when to look again.
    outcome.apply(&mut new, run.metadata.generation, crate::now());
    let next = next_look(&run, &new, &outcome, recheck_after);
    Ok(Pass::then(new, next))
}

/// A finished run's pass: its sandbox stopped when the operator ended it, and the run
/// deleted once its time to live is over. The status is written first, so a run is never
/// left unfinished without its sandbox: the sandbox of a run the operator ended goes in the
/// pass after (also after a restart in between).
async fn finished(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    old: AgentRunStatus,
) -> Result<Pass<AgentRunStatus>> {
    if let Some(sandbox) = stopped_sandbox(run, &old) {
        stop_sandbox(run, namespace, ctx, &sandbox).await?;
    }
    let defaults = if agentic_core::workflow::is_stage_run(run) {
        agentic_core::sandbox::TtlDefaults::default()
    } else {
        ctx.settings.run_defaults.ttl
    };
    let action = expire_finished(&ctx.client, namespace, run, KIND, &old, defaults).await?;
    Ok(Pass::then(old, action))
}

impl Expiring for AgentRun {
    type Status = AgentRunStatus;

    fn ttl_seconds_after_finished(&self) -> Option<i32> {
        self.spec.ttl_seconds_after_finished
    }

    fn finished(status: &AgentRunStatus) -> (Option<AgentRunPhase>, Option<&Time>) {
        (status.phase, status.completion_time.as_ref())
    }
}

/// The run judged by its sandbox: the one it recorded (its end confirmed from the API
/// server, never concluded from a cache), or the one created now; or why it cannot start.
async fn sandbox_outcome(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    new: &mut AgentRunStatus,
) -> Result<Enforced> {
    if let Some(name) = new.sandbox_name.clone() {
        let world = observe(run, namespace, ctx, new).await?;
        let judged = judge(run, ctx, new, &world);
        if world.cached && judged.outcome.phase.is_finished() {
            let world = read_sandbox(ctx, namespace, &name).await?;
            return Ok(judge(run, ctx, new, &world));
        }
        return Ok(judged);
    }
    if run.spec.cancel == Some(true) {
        return Ok(Enforced {
            outcome: cancelled(None),
            recheck_after: None,
        });
    }
    Ok(match begin(run, namespace, ctx, new).await? {
        Begun::Blocked(outcome) => Enforced {
            outcome,
            recheck_after: None,
        },
        // Judged from the sandbox just created (or found), exactly as the next pass
        // judges it: the status is a function of the world, so that pass writes nothing.
        Begun::Sandbox(world) => judge(run, ctx, new, &world),
    })
}

/// When to look at the run again without a watch event.
fn next_look(
    run: &AgentRun,
    new: &AgentRunStatus,
    outcome: &RunOutcome,
    recheck_after: Option<std::time::Duration>,
) -> Action {
    if stopped_sandbox(run, new).is_some() {
        // Its sandbox goes in the next pass, right after the status is written.
        Action::requeue(std::time::Duration::ZERO)
    } else if outcome.reason == AgentRunReason::ObjectNameTaken {
        Action::requeue(NAME_TAKEN_RETRY)
    } else if matches!(
        outcome.reason,
        AgentRunReason::Error(ErrorReason::GatewayNotFound | ErrorReason::GatewayNotReady)
    ) {
        // No watch brings back a run waiting on a Gateway its Agent does not list.
        Action::requeue(GATEWAY_RETRY)
    } else if matches!(
        outcome.reason,
        AgentRunReason::FileMountSourceNotFound | AgentRunReason::FileMountSourceUnavailable
    ) {
        Action::requeue(FILE_MOUNT_RETRY)
    } else if outcome.reason == AgentRunReason::Queued {
        Action::requeue(QUEUED_RETRY)
    } else if let Some(after) = recheck_after {
        // A deadline passes then; a second of slack so the pass lands after it.
        Action::requeue(after + std::time::Duration::from_secs(1))
    } else {
        Action::await_change()
    }
}

/// The sandbox of a run the operator ended (cancelled, a deadline, a pod that cannot start),
/// which must go so that its pod stops. A run cancelled before it recorded its sandbox may
/// still have one from a pass that stopped short: its name is derived.
fn stopped_sandbox(run: &AgentRun, status: &AgentRunStatus) -> Option<String> {
    let finished = status.phase.is_some_and(AgentRunPhase::is_finished);
    let reason = reason_of(status)?;
    if !finished || !stops_sandbox(&reason) {
        return None;
    }
    Some(
        status
            .sandbox_name
            .clone()
            .unwrap_or_else(|| sandbox_name(&run.name_any())),
    )
}

/// Deletes the run's sandbox (the Sandbox, or the Pod), when it exists and the run controls
/// it; the object checked is the object deleted (a UID precondition).
async fn stop_sandbox(run: &AgentRun, namespace: &str, ctx: &Context, name: &str) -> Result<()> {
    let uid = owner_of(run)?.uid;
    match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => {
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            delete_controlled(&api, name, &uid).await
        }
        SandboxBackend::AgentSandbox => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), namespace, &sandbox_resource());
            delete_controlled(&api, name, &uid).await
        }
    }
}

async fn delete_controlled<K>(api: &Api<K>, name: &str, uid: &str) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(object) = api.get_opt(name).await? else {
        return Ok(());
    };
    if !is_controlled_by(object.meta(), uid) || object.meta().deletion_timestamp.is_some() {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: object.meta().uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Gone, or replaced, since the read.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn reason_of(status: &AgentRunStatus) -> Option<String> {
    find_condition(&status.conditions, CONDITION_READY).map(|c| c.reason.clone())
}

/// What a pass before the sandbox is recorded comes to.
enum Begun {
    /// The run cannot start (yet): why.
    Blocked(RunOutcome),
    /// The run's sandbox exists, created now or adopted; the status records it.
    Sandbox(Box<SandboxState>),
}

/// Before the sandbox exists: check the run, then create its objects.
async fn begin(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    status: &mut AgentRunStatus,
) -> Result<Begun> {
    Ok(match create_sandbox(run, namespace, ctx).await? {
        Ok((name, pinned, world)) => {
            status.sandbox_name = Some(name);
            status.skills = pinned;
            Begun::Sandbox(Box::new(world))
        }
        Err(outcome) => Begun::Blocked(outcome),
    })
}

/// The run's sandbox name, the skills it pins and the world around it; or why it cannot be
/// created.
type Created = std::result::Result<(String, Vec<PinnedSkill>, SandboxState), RunOutcome>;

async fn create_sandbox(run: &AgentRun, namespace: &str, ctx: &Context) -> Result<Created> {
    let name = sandbox_name(&run.name_any());
    let owner = owner_of(run)?;

    // A sandbox from an earlier pass (the operator stopped before writing status) is adopted,
    // never rebuilt: its annotation says what it mounts.
    match existing_sandbox(ctx, namespace, &name, &owner.uid).await? {
        Existing::Absent => {}
        Existing::Foreign => {
            return blocked(RunOutcome::name_taken(sandbox_kind(ctx), &name));
        }
        Existing::Ours(pinned) => {
            let world = observe_sandbox(ctx, namespace, &name).await?;
            return Ok(Ok((name, pinned, world)));
        }
    }

    // Gather what the sandbox is built from, and decide it.
    let References {
        agent,
        params,
        gateway,
        skills,
    } = match read_references(run, namespace, ctx).await? {
        Ok(references) => references,
        Err(outcome) => return blocked(outcome),
    };
    let delivery = resolve_skill_delivery(&agent.spec.skill_delivery);
    let inputs = match SandboxInputs::new(
        run,
        &agent,
        &gateway,
        skills,
        delivery.mode,
        params,
        ctx.settings.skill_fetcher.as_ref(),
    ) {
        Ok(inputs) => inputs,
        // The operator's configuration, not the run, is missing: restarted with the flag, it
        // reconciles every run again and this one starts.
        Err(e @ agentic_core::Error::OperatorImageNotSet { .. }) => {
            return blocked(RunOutcome::pending(e.reason(), e.to_string()));
        }
        Err(e) => return blocked(RunOutcome::failed(e.reason(), e.to_string())),
    };
    if let Err(outcome) = check_file_mount_sources(run, namespace, ctx).await? {
        return blocked(outcome);
    }
    // Apply: create the sandbox's objects, admitted under the caps.
    let _admission = match admission(run, &agent, namespace, ctx).await? {
        Ok(admission) => admission,
        Err(queued) => return blocked(queued),
    };
    match create_sandbox_objects(ctx, namespace, &inputs, owner).await? {
        Ok((pinned, world)) => Ok(Ok((name, pinned, world))),
        Err(taken) => blocked(RunOutcome::name_taken(taken.kind, &taken.name)),
    }
}

/// What a run names, read and checked: its Agent, its params resolved against the Agent's,
/// the Gateway it uses and the skills it mounts (as the Agent pinned them).
struct References {
    agent: Agent,
    params: agentic_core::params::RunParams,
    gateway: Gateway,
    skills: Vec<MountedSkill>,
}

/// Reads what the run names; or why the run cannot start (yet).
async fn read_references(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<References, RunOutcome>> {
    let agent_ref = &run.spec.agent_ref;
    let found = read_cached(ctx, namespace, agent_ref, |agent| {
        check_agent(agent_ref, Lookup::Found(agent)).is_ok()
    })
    .await?;
    let agent = match check_agent(&run.spec.agent_ref, lookup(&found)) {
        Ok(agent) => agent,
        Err(e) => {
            let outcome = RunOutcome::pending(e.reason(), format!("spec.agentRef: {e}"));
            return Ok(Err(outcome));
        }
    };
    let params = match resolve_run(&agent.spec, &run.spec) {
        Ok(params) => params,
        Err(e) => {
            let outcome = RunOutcome::failed(e.reason(), format!("spec.params: {e}"));
            return Ok(Err(outcome));
        }
    };
    let gateway = match read_gateway(run, agent, namespace, ctx).await? {
        Ok(gateway) => gateway,
        Err(outcome) => return Ok(Err(outcome)),
    };
    let skills = match read_skills(agent, namespace, ctx).await? {
        Ok(skills) => skills,
        Err(outcome) => return Ok(Err(outcome)),
    };
    Ok(Ok(References {
        agent: agent.clone(),
        params,
        gateway,
        skills,
    }))
}

/// The Gateway the run uses: the one it names among its Agent's, or the Agent's first.
async fn read_gateway(
    run: &AgentRun,
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<Gateway, RunOutcome>> {
    let gateway_name = match select_gateway(&agent.spec.gateways, run.spec.gateway.as_deref()) {
        Ok(name) => name,
        Err(e) => {
            let outcome = RunOutcome::failed(e.reason(), format!("spec.gateway: {e}"));
            return Ok(Err(outcome));
        }
    };
    let found = read_cached(ctx, namespace, &gateway_name, |gateway: &Gateway| {
        !agent.spec.gateways.is_empty()
            || is_ready(&gateway.status.clone().unwrap_or_default().conditions)
    })
    .await?;
    Ok(match lookup(&found) {
        // The Agent's Ready covers the gateways it lists, not one a run names itself.
        Lookup::Found(gateway)
            if agent.spec.gateways.is_empty()
                && !is_ready(&gateway.status.clone().unwrap_or_default().conditions) =>
        {
            Err(RunOutcome::pending(
                ErrorReason::GatewayNotReady,
                format!("Gateway {gateway_name:?} is not Ready"),
            ))
        }
        Lookup::Found(gateway) => Ok(gateway.clone()),
        Lookup::Missing => Err(RunOutcome::pending(
            ErrorReason::GatewayNotFound,
            format!("Gateway {gateway_name:?} not found"),
        )),
        Lookup::Malformed(error) => {
            let e = agentic_core::Error::GatewayNotReady(vec![(
                gateway_name.clone(),
                malformed_detail(error),
            )]);
            Err(RunOutcome::pending(e.reason(), e.to_string()))
        }
    })
}

/// The skills the Agent pinned, each checked against its SkillCard as it is now.
async fn read_skills(
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<Vec<MountedSkill>, RunOutcome>> {
    let agent_status = agent.status.clone().unwrap_or_default();
    let mut skills = Vec::new();
    for pinned in &agent_status.skills {
        // A cluster-wide default skill's card lives in the default-skills namespace.
        let card_namespace = pinned.namespace.as_deref().unwrap_or(namespace);
        let card = read_cached(
            ctx,
            card_namespace,
            &pinned.skill_card,
            |card: &SkillCard| MountedSkill::from_agent_skill(pinned, Lookup::Found(card)).is_ok(),
        )
        .await?;
        match MountedSkill::from_agent_skill(pinned, lookup(&card)) {
            Ok(skill) => skills.push(skill),
            // The Agent's status is behind its SkillCards; its next pass will catch up and
            // the watch on the Agent brings the run back.
            Err(e) => return Ok(Err(RunOutcome::pending(e.reason(), e.to_string()))),
        }
    }
    Ok(Ok(skills))
}

/// Konveyor's order: a source that is missing (or unreadable) makes the run wait, one that
/// lacks a key it projects fails it, before any object is created.
async fn check_file_mount_sources(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<(), RunOutcome>> {
    let sources = file_mount_source_keys(ctx, namespace, &run.spec.file_mounts).await?;
    Ok(
        match file_mount_sources(namespace, &run.spec.file_mounts, |kind, name| {
            sources
                .get(&(kind.as_str(), name.to_string()))
                .cloned()
                .unwrap_or(SourceLookup::NotFound)
        }) {
            FileMountSources::Ready => Ok(()),
            FileMountSources::Wait { reason, message } => Err(RunOutcome::pending(reason, message)),
            FileMountSources::Invalid(e) => Err(RunOutcome::failed(e.reason(), e.to_string())),
        },
    )
}

/// Admits the run under its Agent's and its namespace's caps, holding the lock its sandbox
/// must be created under (none without a cap); or the run is queued.
///
/// Under a cap, a run counts the others and creates its sandbox under its Agent's lock
/// (under a namespace cap every run of the namespace counts, so they share one lock): two
/// runs reconciled at once cannot both take the last slot. Once its sandbox exists the run
/// holds its slot, whatever its status says, so the status is written after the lock is
/// gone. Without a cap, starts do not depend on each other and take no lock.
async fn admission(
    run: &AgentRun,
    agent: &Agent,
    namespace: &str,
    ctx: &Context,
) -> Result<std::result::Result<Option<tokio::sync::OwnedMutexGuard<()>>, RunOutcome>> {
    let namespace_cap = ctx.settings.run_defaults.max_concurrent_runs_per_namespace;
    if agent.spec.max_concurrent_runs.is_none() && namespace_cap.is_none() {
        return Ok(Ok(None));
    }
    let scope = namespace_cap
        .is_none()
        .then_some(run.spec.agent_ref.as_str());
    let admission = ctx.kind_state::<Admissions>().admit(namespace, scope).await;
    // Read from the API server, not the watch cache: a run admitted a moment ago counts.
    let mut runs: Vec<AgentRun> = list_readable(ctx, namespace).await?;
    // A run whose sandbox exists holds a slot even when its status does not say so yet:
    // the operator may have died between creating the sandbox and writing the status.
    let holding = runs_with_sandboxes(ctx, namespace).await?;
    for other in &mut runs {
        if other.uid().is_some_and(|uid| holding.contains(&uid)) {
            let name = sandbox_name(&other.name_any());
            let status = other.status.get_or_insert_with(Default::default);
            status.sandbox_name.get_or_insert(name);
        }
    }
    // Nor is a run queued whose own sandbox exists: it is already running.
    if run.uid().is_some_and(|uid| holding.contains(&uid)) {
        return Ok(Ok(Some(admission)));
    }
    if let Err(queued) = admit(run, agent.spec.max_concurrent_runs, &runs) {
        return Ok(Err(queued));
    }
    if let Some(cap) = namespace_cap {
        let agents: Vec<Agent> = list_readable(ctx, namespace).await?;
        let caps = agents
            .into_iter()
            .map(|a| (a.name_any(), a.spec.max_concurrent_runs))
            .collect();
        if let Err(queued) = admit_in_namespace(run, cap, &runs, &caps) {
            return Ok(Err(queued));
        }
    }
    Ok(Ok(Some(admission)))
}

fn blocked(outcome: RunOutcome) -> Result<Created> {
    Ok(Err(outcome))
}

/// The keys of every Secret and ConfigMap the run's file mounts read, from the API server
/// (the Secret watch carries no data, ConfigMaps are not watched). Keys only: the values
/// are dropped here. A source the operator may not read is `Unavailable`, as Konveyor has it.
async fn file_mount_source_keys(
    ctx: &Context,
    namespace: &str,
    mounts: &[agentic_api::FileMount],
) -> Result<BTreeMap<(&'static str, String), SourceLookup>> {
    let mut found = BTreeMap::new();
    for (kind, name) in mounts.iter().filter_map(file_mount_source) {
        let key = (kind.as_str(), name.to_string());
        if found.contains_key(&key) {
            continue;
        }
        let read = match kind {
            FileSourceKind::Secret => Api::<Secret>::namespaced(ctx.client.clone(), namespace)
                .get_opt(name)
                .await
                .map(|secret| secret.map(|s| s.data.unwrap_or_default().into_keys().collect())),
            FileSourceKind::ConfigMap => {
                Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map(|config_map| {
                        config_map.map(|c| {
                            let data = c.data.unwrap_or_default().into_keys();
                            data.chain(c.binary_data.unwrap_or_default().into_keys())
                                .collect()
                        })
                    })
            }
        };
        let lookup = match read {
            Ok(Some(keys)) => SourceLookup::Found(keys),
            Ok(None) => SourceLookup::NotFound,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                SourceLookup::Unavailable(format!(
                    "the operator may not read {} {name}: {}",
                    kind.as_str(),
                    status.message
                ))
            }
            Err(e) => return Err(e.into()),
        };
        found.insert(key, lookup);
    }
    Ok(found)
}

/// The UIDs of the runs that control a sandbox (a Pod, with the Pod backend) in `namespace`,
/// from the API server, metadata only.
async fn runs_with_sandboxes(
    ctx: &Context,
    namespace: &str,
) -> Result<std::collections::BTreeSet<String>> {
    let resource = match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => ApiResource::erase::<Pod>(&()),
        SandboxBackend::AgentSandbox => sandbox_resource(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let listed = api
        .list_metadata(&ListParams::default().labels(agentic_core::sandbox::RUN_LABEL))
        .await?;
    Ok(listed
        .items
        .iter()
        .filter(|object| controlling_run(&object.metadata).is_some())
        .filter_map(|object| {
            object
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|owner| owner.controller == Some(true))
                .map(|owner| owner.uid.clone())
        })
        .collect())
}

/// Every object of kind `K` in `namespace` that the operator can read, from the API server.
async fn list_readable<K>(ctx: &Context, namespace: &str) -> Result<Vec<K>>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<DeserializeGuard<K>> = Api::namespaced(ctx.client.clone(), namespace);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|guarded| guarded.0.ok())
        .collect())
}

fn owner_of(run: &AgentRun) -> Result<OwnerReference> {
    run.controller_owner_ref(&())
        .ok_or_else(|| Error::MissingMetadata {
            kind: KIND,
            name: run.name_any(),
            field: "metadata.uid",
        })
}

/// Creates the run's Secret (and, with the `pod` backend, its Service) side by side, then its
/// sandbox, which carries the skills manifest and params itself, stopping at the first name
/// another object holds; the skills the sandbox mounts (from its annotation: a sandbox an
/// earlier pass created keeps its own) and the sandbox as created.
async fn create_sandbox_objects(
    ctx: &Context,
    namespace: &str,
    inputs: &SandboxInputs<'_>,
    owner: OwnerReference,
) -> Result<Result<(Vec<PinnedSkill>, SandboxState), NameTaken>> {
    let uid = owner.uid.clone();

    // The ACP key is random: created once, never re-applied, so a retry cannot rotate it
    // under a sandbox that already uses it.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = build_acp_secret(inputs, random_key(), owner.clone());
    // The pod backend's sandbox gets the Service agent-sandbox makes for a Sandbox, so that
    // ACP clients reach the agent at <sandbox>.<namespace>.svc:4000 on either backend.
    let service = async {
        if ctx.settings.sandbox_backend != SandboxBackend::Pod {
            return Ok(Ok(()));
        }
        let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
        let service = build_acp_service(inputs, owner.clone());
        Ok(create_owned(&services, &service, "Service", &uid)
            .await?
            .map(drop))
    };
    // When one name is taken the other objects may still be created: they are the run's
    // own, and go with the run.
    let (secret, service) =
        futures::try_join!(create_owned(&secrets, &secret, "Secret", &uid), service,)?;
    if let Err(taken) = secret.map(drop).and(service) {
        return Ok(Err(taken));
    }

    match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => {
            let pod = build_pod(inputs, owner);
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            Ok(create_owned(&pods, &pod, "Pod", &uid).await?.map(|pod| {
                let world = SandboxState {
                    sandbox_created: Some(pod.metadata.creation_timestamp.clone()),
                    pod: Some(pod),
                    cached: false,
                };
                (
                    world
                        .pod
                        .as_ref()
                        .map(|p| pinned_skills(&p.metadata))
                        .unwrap_or_default(),
                    world,
                )
            }))
        }
        SandboxBackend::AgentSandbox => {
            let sandbox = build_sandbox(inputs, owner)?;
            let object: DynamicObject =
                serde_json::from_value(sandbox).map_err(|source| Error::Serialize {
                    what: "Sandbox",
                    source,
                })?;
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), namespace, &sandbox_resource());
            // Its pod comes later, from the agent-sandbox controller.
            Ok(create_owned(&api, &object, SANDBOX_KIND, &uid)
                .await?
                .map(|sandbox| {
                    let pinned = pinned_skills(&sandbox.metadata);
                    let world = SandboxState {
                        sandbox_created: Some(sandbox.metadata.creation_timestamp),
                        pod: None,
                        cached: false,
                    };
                    (pinned, world)
                }))
        }
    }
}

fn random_key() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The locks runs take to be admitted under a cap, by namespace and Agent (no Agent: the lock
/// of the whole namespace, under the namespace cap).
#[derive(Default)]
struct Admissions(std::sync::Mutex<HashMap<AdmissionScope, Arc<tokio::sync::Mutex<()>>>>);

/// A namespace, and the Agent whose runs a lock admits (`None`: every run of the namespace).
type AdmissionScope = (String, Option<String>);

impl Admissions {
    /// Held while a run of the Agent `agent` in `namespace` (`None`: of any Agent, under the
    /// namespace cap) decides whether it may start and creates its sandbox, so that two runs
    /// reconciled at once cannot both take the last slot of the Agent's
    /// `spec.maxConcurrentRuns` or of the namespace. Taken only under a cap. The count itself
    /// is always read from the API.
    async fn admit(
        &self,
        namespace: &str,
        agent: Option<&str>,
    ) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            locks
                .entry((namespace.to_string(), agent.map(str::to_string)))
                .or_default()
                .clone()
        };
        lock.lock_owned().await
    }
}

/// What holds the run's sandbox name before the run has recorded a sandbox.
enum Existing {
    Absent,
    /// A sandbox this run created on an earlier pass, with the skills it pinned.
    Ours(Vec<PinnedSkill>),
    /// Someone else's object, for example the sandbox of a deleted run of the same name.
    Foreign,
}

async fn existing_sandbox(
    ctx: &Context,
    namespace: &str,
    name: &str,
    run_uid: &str,
) -> Result<Existing> {
    // From the cache once it has listed: absent there is absent, but for a sandbox this
    // process created a moment ago that its watch has not brought yet. Creating that one
    // again meets 409, and `create_owned` hands back the existing sandbox with its pinned
    // skills.
    if let Some(caches) = ctx.caches(namespace) {
        let cached = match (ctx.settings.sandbox_backend, &caches.sandboxes) {
            (SandboxBackend::Pod, _) => listed(&caches.pods).then(|| {
                caches
                    .pods
                    .get(&ObjectRef::new(name).within(namespace))
                    .map(|p| p.metadata.clone())
            }),
            (SandboxBackend::AgentSandbox, Some(sandboxes)) => listed(sandboxes).then(|| {
                sandboxes
                    .get(&ObjectRef::new_with(name, sandbox_resource()).within(namespace))
                    .map(|s| s.metadata.clone())
            }),
            (SandboxBackend::AgentSandbox, None) => None,
        };
        if let Some(metadata) = cached {
            return Ok(existing(metadata, run_uid));
        }
    }
    let metadata = match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            pods.get_opt(name).await?.map(|p| p.metadata)
        }
        SandboxBackend::AgentSandbox => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), namespace, &sandbox_resource());
            api.get_opt(name).await?.map(|s| s.metadata)
        }
    };
    Ok(existing(metadata, run_uid))
}

fn existing(metadata: Option<ObjectMeta>, run_uid: &str) -> Existing {
    match metadata {
        None => Existing::Absent,
        Some(metadata) if !is_controlled_by(&metadata, run_uid) => Existing::Foreign,
        Some(metadata) => Existing::Ours(pinned_skills(&metadata)),
    }
}

/// The skills a sandbox mounts, from its annotation.
fn pinned_skills(metadata: &ObjectMeta) -> Vec<PinnedSkill> {
    metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PINNED_SKILLS_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The kind of the object the sandbox backend creates.
fn sandbox_kind(ctx: &Context) -> &'static str {
    match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => "Pod",
        SandboxBackend::AgentSandbox => SANDBOX_KIND,
    }
}

/// The run's sandbox and its pod, as found.
struct SandboxState {
    /// The sandbox's pod.
    pod: Option<Pod>,
    /// `None` when the sandbox is gone; else its creation time.
    sandbox_created: Option<Option<Time>>,
    /// Read from the watch caches.
    cached: bool,
}

/// After the sandbox exists: what its sandbox and pod are now.
async fn observe(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    status: &AgentRunStatus,
) -> Result<SandboxState> {
    let name = status
        .sandbox_name
        .clone()
        .unwrap_or_else(|| sandbox_name(&run.name_any()));
    observe_sandbox(ctx, namespace, &name).await
}

/// The sandbox `name` and its pod: from the watch caches when they hold both, else from the
/// API server. The caches only move forward, and the watch event that brings a run back is
/// in them before the run is reconciled; a run judged finished from them is judged again
/// from the API server (see [`reconcile`]) before that final status is written.
async fn observe_sandbox(ctx: &Context, namespace: &str, name: &str) -> Result<SandboxState> {
    if let Some(world) = cached_sandbox(ctx, namespace, name) {
        return Ok(world);
    }
    read_sandbox(ctx, namespace, name).await
}

fn cached_sandbox(ctx: &Context, namespace: &str, name: &str) -> Option<SandboxState> {
    let caches = ctx.caches(namespace)?;
    let pod = caches.pods.get(&ObjectRef::new(name).within(namespace));
    match ctx.settings.sandbox_backend {
        // The pod is the sandbox: one the cache lacks may be one it has not brought yet.
        SandboxBackend::Pod => {
            let pod = pod?;
            Some(SandboxState {
                sandbox_created: Some(pod.metadata.creation_timestamp.clone()),
                pod: Some(pod.to_pod()),
                cached: true,
            })
        }
        // A Sandbox without a pod waits for agent-sandbox to make one, whose watch event
        // brings the run back.
        SandboxBackend::AgentSandbox => {
            let sandbox = caches
                .sandboxes
                .as_ref()?
                .get(&ObjectRef::new_with(name, sandbox_resource()).within(namespace))?;
            if pod.is_none() && !listed(&caches.pods) {
                return None;
            }
            Some(SandboxState {
                pod: pod.map(|p| p.to_pod()),
                sandbox_created: Some(sandbox.metadata.creation_timestamp.clone()),
                cached: true,
            })
        }
    }
}

/// The sandbox `name` and its pod, from the API server.
async fn read_sandbox(ctx: &Context, namespace: &str, name: &str) -> Result<SandboxState> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let pod = pods.get_opt(name).await?;
    let sandbox_created = match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => pod.as_ref().map(|p| p.metadata.creation_timestamp.clone()),
        SandboxBackend::AgentSandbox => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), namespace, &sandbox_resource());
            api.get_opt(name)
                .await?
                .map(|s| s.metadata.creation_timestamp)
        }
    };
    Ok(SandboxState {
        pod,
        sandbox_created,
        cached: false,
    })
}

/// The run's outcome in `world`, within the run's limits and the trust policies' `Cancel`
/// revocations: a function of the world, the policies and the recorded status alone, so
/// that a pass that finds them unchanged writes nothing.
fn judge(run: &AgentRun, ctx: &Context, status: &AgentRunStatus, world: &SandboxState) -> Enforced {
    let pod = world.pod.as_ref();
    let observed = run_outcome(pod, world.sandbox_created.is_some(), status);
    let limits = Limits {
        cancel: run.spec.cancel == Some(true),
        startup_deadline: startup_deadline(
            run.spec.startup_deadline_seconds,
            ctx.settings.run_defaults.startup_deadline_seconds,
        ),
        active_deadline: run
            .spec
            .active_deadline_seconds
            .and_then(|s| u64::try_from(s).ok()),
    };
    // Without its sandbox, the deadline counts from the run's creation.
    let since = world
        .sandbox_created
        .clone()
        .flatten()
        .or_else(|| run.metadata.creation_timestamp.clone());
    let enforced = enforce(observed, pod, since.as_ref(), &limits, &crate::now());
    // The skills the status records against the policies of the watch caches (no API
    // read); `spec.cancel`, decided above, wins.
    let policies = super::trustpolicy::policies_of(ctx, &run.namespace().unwrap_or_default());
    let revocation = cancelling_revocation(&policies, status);
    end_revoked(enforced, revocation, pod)
}

#[cfg(test)]
mod scenarios;
