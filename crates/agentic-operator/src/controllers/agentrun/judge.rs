//! Judge: a run by its sandbox and pod, within its limits and the trust policies' `Cancel`
//! revocations. The sandbox and pod are read from the watch caches when they hold both, a
//! run judged finished from them is judged again from the API server before that final
//! status is written.

use agentic_api::{AgentRun, AgentRunStatus};
use agentic_core::sandbox::{
    Enforced, Limits, end_revoked, enforce, run_outcome, startup_deadline,
};
use agentic_core::trust::cancelling_revocation;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::{rotation, sandbox_resource};
use crate::caches::listed;
use crate::context::{Context, SandboxBackend};
use crate::controllers::trustpolicy::policies_of;
use crate::error::Result;

/// The run's sandbox and its pod, as found.
pub(super) struct SandboxState {
    /// The sandbox's pod.
    pub pod: Option<Pod>,
    /// `None` when the sandbox is gone; else its creation time, when it has one.
    #[allow(clippy::option_option)]
    pub sandbox_created: Option<Option<Time>>,
    /// Read from the watch caches.
    pub cached: bool,
}

/// A run whose status records its sandbox `name`, judged by it: its end confirmed from the
/// API server, never concluded from a cache. While it goes on, a new version of the Secret
/// its credential proxy mounts is passed on to its pod ([`rotation`]).
pub(super) async fn started(
    run: &AgentRun,
    namespace: &str,
    ctx: &Context,
    status: &AgentRunStatus,
    name: &str,
) -> Result<Enforced> {
    let world = observe_sandbox(ctx, namespace, name).await?;
    let judged = judge(run, ctx, status, &world);
    if world.cached && judged.outcome.phase.is_finished() {
        let world = read_sandbox(ctx, namespace, name).await?;
        return Ok(judge(run, ctx, status, &world));
    }
    if !judged.outcome.phase.is_finished() {
        rotation::pass_on(ctx, namespace, world.pod.as_ref()).await?;
    }
    Ok(judged)
}

/// The sandbox `name` and its pod: from the watch caches when they hold both, else from the
/// API server. The caches only move forward, and the watch event that brings a run back is
/// in them before the run is reconciled.
pub(super) async fn observe_sandbox(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<SandboxState> {
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
pub(super) fn judge(
    run: &AgentRun,
    ctx: &Context,
    status: &AgentRunStatus,
    world: &SandboxState,
) -> Enforced {
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
    // read); `spec.cancel`, decided above, wins. Policies not known yet cancel nothing: their
    // watch's list wakes the runs they may cancel.
    let policies = policies_of(ctx, &run.namespace().unwrap_or_default()).unwrap_or_default();
    let revocation = cancelling_revocation(&policies, status);
    end_revoked(enforced, revocation, pod)
}
