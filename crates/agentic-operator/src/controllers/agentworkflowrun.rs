//! AgentWorkflowRun: snapshot the workflow, run its stages in order (one AgentRun each),
//! follow them to Succeeded or Failed, stop on cancel, and delete the run once its time to
//! live is over.
//!
//! The decisions are [`agentic_core::workflow`]'s; this reads what they need and applies
//! them. Crash-safe: a stage's run has a deterministic name and is created only when no
//! object holds it, so a pass that stopped between the create and the status write finds
//! its own run next time and records it, and an object this workflow run does not control is
//! never adopted or changed.

use std::sync::Arc;
use std::time::Duration;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentWorkflow, AgentWorkflowRun, AgentWorkflowRunStatus,
};
use agentic_core::events::StatusEvent;
use agentic_core::owners::is_controlled_by;
use agentic_core::reasons::EventReason;
use agentic_core::workflow::{
    self, StageRun, advance, current_stage, stage_run_name, start, started, workflow_run_events,
};
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::pipeline::{Pass, Policy, Reconciled, run_controller};
use super::support::{Read, lookup, namespace_of, owner_of, read_reference, relate};
use super::watches::{Stop, Watches};
use crate::apply::{Expiring, create_owned, expire_finished};
use crate::caches::Guarded;
use crate::context::Context;
use crate::error::Result;

pub const KIND: &str = "AgentWorkflowRun";
/// How often a stage waiting for its Agent to exist checks again; no watch follows Agents
/// for workflow runs.
const AGENT_RETRY: Duration = Duration::from_secs(10);

/// The AgentWorkflowRun controller: starts a run when its workflow turns Ready, and follows
/// its stages' runs.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let runs = watches.of::<AgentWorkflowRun>();
    let store = runs.store();
    // Only a run not started yet waits on its workflow: a finished run is in no index.
    let waiting = runs.index(|run| {
        if waits_on_workflow(run) {
            vec![run.spec.workflow_ref.clone()]
        } else {
            Vec::new()
        }
    });
    let controller = Controller::for_shared_stream(runs.applied(), store.clone())
        .owns_shared_stream(watches.of::<AgentRun>().touched())
        .watches_shared_stream(
            watches.of::<AgentWorkflow>().touched(),
            relate(store.clone(), waiting, |runs, ns, workflow| {
                runs_waiting_on_workflow(runs, ns, workflow)
            }),
        );
    let policy = Policy::backing_off(reconcile, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for AgentWorkflowRun {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    }

    fn events(old: &AgentWorkflowRunStatus, new: &AgentWorkflowRunStatus) -> Vec<StatusEvent> {
        workflow_run_events(old, new)
    }

    fn settled(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(AgentRunPhase::is_finished)
    }

    fn trim_settled(&mut self) {
        trim::trim_finished(self);
    }
}

/// Whether `run` waits on its workflow to take its snapshot: it has not started, nor
/// finished (a run cancelled before it started has no stages, and a finished run is cached
/// without them).
fn waits_on_workflow(run: &AgentWorkflowRun) -> bool {
    !run.settled() && run.status.as_ref().is_none_or(|s| !started(s))
}

pub async fn reconcile(
    run: Arc<AgentWorkflowRun>,
    ctx: Arc<Context>,
    old: AgentWorkflowRunStatus,
) -> Result<Pass<AgentWorkflowRunStatus>> {
    let namespace = namespace_of(run.as_ref(), KIND)?;
    if old.phase.is_some_and(AgentRunPhase::is_finished) {
        return finished(&run, &namespace, &ctx, old).await;
    }
    let now = crate::now();
    if !started(&old) {
        // Gather the workflow; decide the run's stages from the snapshot taken of it.
        let found =
            read_reference::<AgentWorkflow>(&ctx.client, &namespace, &run.spec.workflow_ref)
                .await?;
        let status = start(&run, lookup(&found), &now).status;
        return Ok(Pass::then(status, Action::await_change()));
    }
    // Gather: the current stage's AgentRun, and its Agent when that run is to be created.
    let owner = owner_of(run.as_ref(), KIND)?;
    let observed = read_stage_run(&run, &old, &namespace, &ctx).await?;
    let Some(stage_run) = stage_run_of(&run, observed.as_ref(), &owner.uid) else {
        return Ok(Pass::then(old, Action::await_change()));
    };
    let agent = read_stage_agent(&stage_run, &old, &namespace, &ctx).await?;
    // Decide.
    let workflow::Step {
        status,
        action,
        retry,
    } = advance(&run, stage_run, lookup(&agent), owner.clone(), &now);
    // Apply.
    let status = apply_step(&run, action, status, &owner.uid, &ctx, &now).await?;
    let next = if retry {
        Action::requeue(AGENT_RETRY)
    } else {
        Action::await_change()
    };
    Ok(Pass::then(status, next))
}

/// A finished workflow run's pass: deleted once its time to live is over.
///
/// Once its cache shows the run finished, `run` is the trimmed run the cache keeps
/// ([`trim::trim_finished`]): what this reads is all that is kept, and its only write is the
/// deletion. The status handed back is `old` as it came, so the pipeline writes no status
/// (and raises no Event) computed from a trimmed run.
async fn finished(
    run: &AgentWorkflowRun,
    namespace: &str,
    ctx: &Context,
    old: AgentWorkflowRunStatus,
) -> Result<Pass<AgentWorkflowRunStatus>> {
    let defaults = ctx.settings.run_defaults.ttl;
    let action = expire_finished(&ctx.client, namespace, run, KIND, &old, defaults).await?;
    Ok(Pass::then(old, action))
}

impl Expiring for AgentWorkflowRun {
    type Status = AgentWorkflowRunStatus;

    fn ttl_seconds_after_finished(&self) -> Option<i32> {
        self.spec.ttl_seconds_after_finished
    }

    fn finished(status: &AgentWorkflowRunStatus) -> (Option<AgentRunPhase>, Option<&Time>) {
        (status.phase, status.completion_time.as_ref())
    }
}

/// The object under the current stage's AgentRun name, as read from the API server.
async fn read_stage_run(
    run: &AgentWorkflowRun,
    status: &AgentWorkflowRunStatus,
    namespace: &str,
    ctx: &Context,
) -> Result<Option<Guarded<AgentRun>>> {
    let Some(index) = current_stage(status) else {
        return Ok(None);
    };
    let name = stage_run_name(&run.name_any(), &status.stages[index].name);
    let guarded: Api<Guarded<AgentRun>> = Api::namespaced(ctx.client.clone(), namespace);
    Ok(guarded.get_opt(&name).await?)
}

/// Whose the object under the stage run's name is; `None` for the workflow run's own stage
/// run that no longer deserializes: its controller raises a Warning on it, and the workflow
/// waits until it is fixed (the watch on owned runs brings it back) rather than mistake it
/// for someone else's.
fn stage_run_of<'a>(
    run: &AgentWorkflowRun,
    observed: Option<&'a Guarded<AgentRun>>,
    owner_uid: &str,
) -> Option<StageRun<'a>> {
    Some(match observed.map(|g| &g.0) {
        None => StageRun::Absent,
        Some(Ok(agent_run)) if is_controlled_by(agent_run.meta(), owner_uid) => {
            StageRun::Ours(agent_run)
        }
        Some(Ok(_)) => StageRun::Foreign,
        Some(Err(invalid)) if is_controlled_by(&invalid.metadata, owner_uid) => {
            tracing::warn!(
                namespace = run.namespace().unwrap_or_default(),
                name = %run.name_any(),
                error = %invalid.error,
                "the current stage's AgentRun does not match the schema; waiting"
            );
            return None;
        }
        Some(Err(_)) => StageRun::Foreign,
    })
}

/// The current stage's Agent, read only when the stage's run is to be created.
async fn read_stage_agent(
    stage_run: &StageRun<'_>,
    status: &AgentWorkflowRunStatus,
    namespace: &str,
    ctx: &Context,
) -> Result<Read<Agent>> {
    Ok(match (stage_run, current_stage(status)) {
        (StageRun::Absent, Some(index)) if status.stages[index].agent_run_name.is_none() => {
            let agent_ref = status.stages[index].agent_ref.clone().unwrap_or_default();
            read_reference::<Agent>(&ctx.client, namespace, &agent_ref).await?
        }
        _ => None,
    })
}

/// Carries out what the step decided: the next stage's AgentRun created (a name taken by
/// someone else fails the workflow run), or the current one cancelled.
async fn apply_step(
    run: &AgentWorkflowRun,
    action: workflow::Action,
    status: AgentWorkflowRunStatus,
    owner_uid: &str,
    ctx: &Context,
    now: &Time,
) -> Result<AgentWorkflowRunStatus> {
    let namespace = run.namespace().unwrap_or_default();
    let runs: Api<AgentRun> = Api::namespaced(ctx.client.clone(), &namespace);
    match action {
        workflow::Action::None => {}
        workflow::Action::Create {
            run: agent_run,
            dropped,
        } => match create_owned(&runs, &agent_run, "AgentRun", owner_uid).await? {
            Ok(_) if !dropped.is_empty() => {
                filtered_event(&runs, &agent_run, &dropped, ctx).await;
            }
            Ok(_) => {}
            Err(_taken) => return Ok(workflow::name_taken(status, run, now)),
        },
        workflow::Action::Cancel(name) => cancel_stage_run(&runs, &name).await?,
    }
    Ok(status)
}

/// The workflow runs in `namespace` of the workflow `name` that have not started: the ones
/// a change of it can move.
pub fn runs_waiting_on_workflow<'a>(
    runs: impl IntoIterator<Item = &'a AgentWorkflowRun>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<AgentWorkflowRun>> {
    runs.into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .filter(|r| r.spec.workflow_ref == name)
        .filter(|r| waits_on_workflow(r))
        .map(ObjectRef::from_obj)
        .collect()
}

/// A Normal event on a stage's run naming the workflow run's params its Agent does not
/// declare, which the run does not get. On the stage's run rather than the workflow run, whose
/// events of one reason the recorder folds into one (keeping the first note).
async fn filtered_event(runs: &Api<AgentRun>, built: &AgentRun, dropped: &[String], ctx: &Context) {
    // The created object, for the event's reference to carry its UID. Events are best effort.
    let created = match runs.get_opt(&built.name_any()).await {
        Ok(Some(created)) => created,
        Ok(None) => return,
        Err(error) => {
            tracing::warn!(name = %built.name_any(), error = %crate::error::Chain(&error), "reading a stage run for its event failed");
            return;
        }
    };
    let note = format!(
        "params of AgentWorkflowRun {} that Agent {:?} does not declare are not passed: {}",
        built
            .owner_references()
            .first()
            .map(|o| o.name.as_str())
            .unwrap_or_default(),
        built.spec.agent_ref,
        dropped.join(", ")
    );
    ctx.publish_transition(
        &created,
        EventType::Normal,
        EventReason::ParamsFiltered.as_str(),
        note,
    )
    .await;
}

/// Sets `spec.cancel` on a stage's run; its controller stops the sandbox. The one change
/// its spec allows.
async fn cancel_stage_run(runs: &Api<AgentRun>, name: &str) -> Result<()> {
    let patch = serde_json::json!({"spec": {"cancel": true}});
    match runs
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // Deleted since the read: nothing left to stop.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

mod trim;

#[cfg(test)]
mod scenarios;
