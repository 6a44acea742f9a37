//! A finished run's pass: its sandbox stopped when the operator ended it, and the run
//! deleted once its time to live is over.

use agentic_api::{AgentRun, AgentRunPhase, AgentRunStatus, CONDITION_READY};
use agentic_core::conditions::find_condition;
use agentic_core::names::sandbox_name;
use agentic_core::owners::is_controlled_by;
use agentic_core::sandbox::stops_sandbox;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::{Api, Resource, ResourceExt};

use super::{KIND, sandbox_resource};
use crate::apply::{Expiring, expire_finished};
use crate::context::{Context, SandboxBackend};
use crate::controllers::pipeline::Pass;
use crate::controllers::support::owner_of;
use crate::error::Result;
use crate::otlp::usage::SkillUsage;

/// The status is written first, so a run is never left unfinished without its sandbox: the
/// sandbox of a run the operator ended goes in the pass after (also after a restart in
/// between).
pub(super) async fn finished(
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
    // Loads its agent reported as it exited, after the end was recorded.
    let usage = ctx.kind_state::<SkillUsage>();
    let uid = run.metadata.uid.as_deref();
    let mut status = old.clone();
    usage.record(uid, &mut status);
    if status != old {
        // The cache keeps a finished run's status trimmed, and the status is applied whole:
        // the loads go into the status as the API server has it.
        let runs: Api<AgentRun> = Api::namespaced(ctx.client.clone(), namespace);
        status = runs.get(&run.name_any()).await?.status.unwrap_or_default();
        usage.record(uid, &mut status);
    }
    Ok(Pass::then(status, action))
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

/// The sandbox of a run the operator ended (cancelled, a deadline, a pod that cannot start),
/// which must go so that its pod stops. A run cancelled before it recorded its sandbox may
/// still have one from a pass that stopped short: its name is derived.
pub(super) fn stopped_sandbox(run: &AgentRun, status: &AgentRunStatus) -> Option<String> {
    let finished = status.phase.is_some_and(AgentRunPhase::is_finished);
    let reason = find_condition(&status.conditions, CONDITION_READY)?
        .reason
        .as_str();
    if !finished || !stops_sandbox(reason) {
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
    let uid = owner_of(run, KIND)?.uid;
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
