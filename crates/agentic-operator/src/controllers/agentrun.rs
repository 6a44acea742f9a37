//! AgentRun: check the run against its Agent, create exactly one sandbox pinned to the Agent's
//! validated skills, and follow it to Succeeded or Failed.
//!
//! A pass ([`reconcile`]) is gather → decide → apply → judge. For a run without a sandbox,
//! [`gather`] reads what holds the sandbox's name, the Agent and what it names;
//! `agentic_core::start::plan_start` decides to wait, adopt or create; [`create`] admits the
//! run under the caps and creates its objects under the admission lock. Once the sandbox
//! exists the run only observes it ([`judge`]): a later change to an Agent or SkillCard never
//! changes a running sandbox, but for the key its credential proxy reads: a change of that
//! Secret is passed on to the pod's kubelet ([`rotation`]). A finished run's pass is
//! [`finish`]'s; finished runs are kept out of the run cache and the controller's queue,
//! and passed when due ([`finished_runs`]). The wrapper (`controllers::pipeline`) writes
//! the status and raises the Events.

use std::sync::Arc;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentRunStatus, ClusterSkillTrustPolicy, SkillTrustPolicy,
};
use agentic_core::events::StatusEvent;
use agentic_core::names::sandbox_name;
use agentic_core::reasons::{AgentRunReason, ErrorReason};
use agentic_core::sandbox::{Enforced, RunOutcome, run_events};
use agentic_core::start::{StartPlan, plan_start};
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};

use super::pipeline::{Pass, Policy, Reconciled, run_controller};
use super::support::{namespace_of, owner_of};
use super::watches::{Stop, Watches};
use crate::apply::NAME_TAKEN_RETRY;
use crate::caches::FinishedRunCache;
use crate::context::Context;
use crate::error::Result;
use crate::otlp::usage::SkillUsage;
use create::Created;

mod create;
mod finish;
mod finished_runs;
mod gather;
mod judge;
mod rotation;
mod sweep;
mod wakes;

/// The agent-sandbox `Sandbox` kind.
pub use crate::caches::sandbox_resource;
pub use sweep::MAX_CANDIDATES_PER_PASS;
pub(super) use sweep::{SweepScope, sweep};
use wakes::{ProxiedPods, RunIndexes, Wakes};
#[cfg(test)]
pub(super) use wakes::{live, runs_a_policy_may_cancel};

pub const KIND: &str = "AgentRun";
/// How often a queued run checks for a free slot, besides the watch on the Agent's runs that
/// brings it back when one finishes or is deleted.
const QUEUED_RETRY: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a run held by a revocation of a skill it would mount checks again.
const BLOCKED_RETRY: std::time::Duration = std::time::Duration::from_secs(30);
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
    let (finished, due) = FinishedRunCache::new(ctx.settings.run_defaults.ttl);
    watches.keep_finished_runs(&runs, finished.clone());
    let namespace_cap = ctx
        .settings
        .run_defaults
        .max_concurrent_runs_per_namespace
        .is_some();
    let wakes = Arc::new(Wakes::new(
        store.clone(),
        RunIndexes::kept_by(&runs),
        ProxiedPods::kept_by(&watches.pods),
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
    // The runs whose agents reported skill loads, so that their pass records them.
    let usage = ctx.kind_state::<SkillUsage>();
    let namespace = watches.namespace().map(str::to_owned);
    controller = controller.reconcile_on(usage.wakes(namespace.clone()));
    let finished_passes =
        finished_runs::drive(finished, due, usage.wakes(namespace), ctx.clone(), stop());
    if let Some(sandboxes) = &mut watches.sandboxes {
        controller = controller.watches_shared_stream_with(
            sandboxes.touched(),
            wakes::sandbox_changed,
            sandbox_resource(),
        );
    }
    let policy = Policy::backing_off(reconcile, ctx);
    let live = run_controller(controller, store, policy, ctx.clone(), stop);
    Box::pin(async move {
        tokio::join!(live, finished_passes);
    })
}

impl Reconciled for AgentRun {
    const KIND: &'static str = KIND;
    const LIVE_FIELDS: Option<&'static str> = Some(crate::caches::LIVE_RUNS);

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

    /// A run's labels are its author's (a Hub's task, a team): the operator selects no run
    /// by them and copies none to what it creates, and a map of one label costs a run a
    /// whole B-tree node, half a kilobyte.
    fn forget_unread(&mut self) {
        self.metadata.labels = None;
    }

    fn written(&self, ctx: &Context, old: &AgentRunStatus, new: &AgentRunStatus) {
        ctx.metrics.run_transitioned(self, old, new);
        if let Some(export) = &ctx.settings.trace_export {
            export.run_written(self, old, new);
        }
    }
}

/// A run's pass, from its watch to its status: a finished run only stops the sandbox the
/// operator ended and waits out its time to live ([`finish`]); a started run is judged by
/// its sandbox ([`judge`]); a run without one is gathered ([`gather`]), its start planned
/// ([`plan_start`]) and its sandbox adopted or created under the admission lock
/// ([`create`]), then judged like a started one.
pub async fn reconcile(
    run: Arc<AgentRun>,
    ctx: Arc<Context>,
    old: AgentRunStatus,
) -> Result<Pass<AgentRunStatus>> {
    let namespace = namespace_of(run.as_ref(), KIND)?;
    if old.phase.is_some_and(AgentRunPhase::is_finished) {
        return finish::finished(&run, &namespace, &ctx, old).await;
    }
    let mut new = old.clone();
    let Enforced {
        outcome,
        recheck_after,
    } = match &old.sandbox_name {
        Some(sandbox) => judge::started(&run, &namespace, &ctx, &new, sandbox).await?,
        None => start(&run, &namespace, &ctx, &mut new).await?,
    };
    outcome.apply(&mut new, run.metadata.generation, crate::now());
    ctx.kind_state::<SkillUsage>()
        .record(run.metadata.uid.as_deref(), &mut new);
    let next = next_look(&run, &new, &outcome, recheck_after);
    Ok(Pass::then(new, next))
}

/// A run without a sandbox: what it names read, its start decided, its sandbox adopted or
/// created and recorded in `status`; then judged by that sandbox exactly as the next pass
/// judges it (the status is a function of the world, so that pass writes nothing).
async fn start(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    status: &mut AgentRunStatus,
) -> Result<Enforced> {
    let owner = owner_of(run, KIND)?;
    let run_uid = owner.uid.clone();
    let gathered = gather::gather(run, namespace, ctx).await?;
    let name = sandbox_name(&run.name_any());
    let (pinned, world, isolation) = match plan_start(&gathered.inputs(run, &run_uid, ctx)) {
        StartPlan::Blocked(outcome) => return Ok(held(outcome)),
        StartPlan::Adopt(pinned) => {
            let world = judge::observe_sandbox(ctx, namespace, &name).await?;
            (pinned, Box::new(world), None)
        }
        StartPlan::Create(inputs) => match create::create(&inputs, ctx, owner).await? {
            Created::Held(outcome) => return Ok(held(outcome)),
            Created::Sandbox { pinned, world } => (
                pinned,
                world,
                Some(Box::new(inputs.credential_isolation().clone())),
            ),
        },
    };
    status.sandbox_name = Some(name);
    status.skills = pinned;
    let mut enforced = judge::judge(run, ctx, status, &world);
    // Decided with the sandbox, then kept: later passes judge the pod alone.
    enforced.outcome.credential_isolation = isolation;
    Ok(enforced)
}

/// A run that does not start in this pass, for `outcome`'s reason.
fn held(outcome: RunOutcome) -> Enforced {
    Enforced {
        outcome,
        recheck_after: None,
    }
}

/// When to look at the run again without a watch event.
fn next_look(
    run: &AgentRun,
    new: &AgentRunStatus,
    outcome: &RunOutcome,
    recheck_after: Option<std::time::Duration>,
) -> Action {
    if finish::stopped_sandbox(run, new).is_some() {
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
    } else if outcome.reason == AgentRunReason::SkillBlocked {
        // A lifted revocation wakes only the runs it may cancel, which have started.
        Action::requeue(BLOCKED_RETRY)
    } else if let Some(after) = recheck_after {
        // A deadline passes then; a second of slack so the pass lands after it.
        Action::requeue(after + std::time::Duration::from_secs(1))
    } else {
        Action::await_change()
    }
}

#[cfg(test)]
mod scenarios;
