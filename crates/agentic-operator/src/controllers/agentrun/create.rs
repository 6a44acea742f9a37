//! Apply, for a run whose start the plan decided: admitted under its Agent's and its
//! namespace's caps, its objects created under the admission lock, so that two runs
//! reconciled at once cannot both take the last slot.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use agentic_api::{Agent, AgentRun, PinnedSkill};
use agentic_core::names::sandbox_name;
use agentic_core::owners::controlling_run;
use agentic_core::sandbox::{
    RUN_LABEL, RunOutcome, SANDBOX_KIND, SandboxInputs, admit, admit_in_namespace,
    build_acp_secret, build_acp_service, build_pod, build_sandbox, pinned_skills,
};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use tokio::sync::OwnedMutexGuard;

use super::judge::SandboxState;
use super::sandbox_resource;
use crate::apply::create_owned;
use crate::caches::Guarded;
use crate::context::{Context, SandboxBackend};
use crate::error::{Error, Result};

/// What creating a run's sandbox came to.
pub(super) enum Created {
    /// The run cannot start now: it is queued for a slot, or another object holds a name.
    Held(RunOutcome),
    /// Its sandbox exists: the skills it mounts (from its annotation: a sandbox an earlier
    /// pass created keeps its own) and the sandbox as created.
    Sandbox {
        pinned: Vec<PinnedSkill>,
        world: Box<SandboxState>,
    },
}

/// Creates the run's objects from `inputs`, once it is admitted under the caps.
pub(super) async fn create(
    inputs: &SandboxInputs<'_>,
    ctx: &Context,
    owner: OwnerReference,
) -> Result<Created> {
    let _admission = match admission(inputs.run(), inputs.agent(), inputs.namespace(), ctx).await? {
        Admission::Admitted(lock) => lock,
        Admission::Queued(queued) => return Ok(Created::Held(queued)),
    };
    create_objects(ctx, inputs, owner).await
}

/// Whether a run may create its sandbox now.
enum Admission {
    /// It may, holding the lock its sandbox must be created under (none without a cap).
    Admitted(Option<OwnedMutexGuard<()>>),
    /// It waits for a slot: its place.
    Queued(RunOutcome),
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
    async fn admit(&self, namespace: &str, agent: Option<&str>) -> OwnedMutexGuard<()> {
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
) -> Result<Admission> {
    let namespace_cap = ctx.settings.run_defaults.max_concurrent_runs_per_namespace;
    if agent.spec.max_concurrent_runs.is_none() && namespace_cap.is_none() {
        return Ok(Admission::Admitted(None));
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
        return Ok(Admission::Admitted(Some(admission)));
    }
    if let Err(queued) = admit(run, agent.spec.max_concurrent_runs, &runs) {
        return Ok(Admission::Queued(queued));
    }
    if let Some(cap) = namespace_cap {
        let agents: Vec<Agent> = list_readable(ctx, namespace).await?;
        let caps = agents
            .into_iter()
            .map(|a| (a.name_any(), a.spec.max_concurrent_runs))
            .collect();
        if let Err(queued) = admit_in_namespace(run, cap, &runs, &caps) {
            return Ok(Admission::Queued(queued));
        }
    }
    Ok(Admission::Admitted(Some(admission)))
}

/// The UIDs of the runs that control a sandbox (a Pod, with the Pod backend) in `namespace`,
/// from the API server, metadata only.
async fn runs_with_sandboxes(ctx: &Context, namespace: &str) -> Result<BTreeSet<String>> {
    let resource = match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => ApiResource::erase::<Pod>(&()),
        SandboxBackend::AgentSandbox => sandbox_resource(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let listed = api
        .list_metadata(&ListParams::default().labels(RUN_LABEL))
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
    let api: Api<Guarded<K>> = Api::namespaced(ctx.client.clone(), namespace);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|guarded| guarded.0.ok())
        .collect())
}

/// Creates the run's Secret (and, with the `pod` backend, its Service) side by side, then its
/// sandbox, which carries the skills manifest and params itself, stopping at the first name
/// another object holds.
async fn create_objects(
    ctx: &Context,
    inputs: &SandboxInputs<'_>,
    owner: OwnerReference,
) -> Result<Created> {
    let namespace = inputs.namespace();
    let uid = owner.uid.clone();

    // The ACP key is random: created once, never re-applied, so a retry cannot rotate it
    // under a sandbox that already uses it.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = build_acp_secret(inputs, random_key(), &random_key(), owner.clone());
    // The pod backend's sandbox gets the Service agent-sandbox makes for a Sandbox, so that
    // ACP clients reach the agent at <sandbox>.<namespace>.svc:4000 on either backend.
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    let service = (ctx.settings.sandbox_backend == SandboxBackend::Pod)
        .then(|| build_acp_service(inputs, owner.clone()));
    let service = async {
        match &service {
            Some(service) => Ok(create_owned(&services, service, "Service", &uid)
                .await?
                .map(drop)),
            None => Ok(Ok(())),
        }
    };
    // When one name is taken the other objects may still be created: they are the run's
    // own, and go with the run.
    let (secret, service) =
        futures::try_join!(create_owned(&secrets, &secret, "Secret", &uid), service)?;
    if let Err(taken) = secret.map(drop).and(service) {
        return Ok(Created::Held(RunOutcome::name_taken(
            taken.kind,
            &taken.name,
        )));
    }

    let created = match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => {
            let pod = build_pod(inputs, owner);
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            create_owned(&pods, &pod, "Pod", &uid)
                .await?
                .map(|pod| Created::Sandbox {
                    pinned: pinned_skills(&pod.metadata),
                    world: Box::new(SandboxState {
                        sandbox_created: Some(pod.metadata.creation_timestamp.clone()),
                        pod: Some(pod),
                        cached: false,
                    }),
                })
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
            create_owned(&api, &object, SANDBOX_KIND, &uid)
                .await?
                .map(|sandbox| Created::Sandbox {
                    pinned: pinned_skills(&sandbox.metadata),
                    world: Box::new(SandboxState {
                        sandbox_created: Some(sandbox.metadata.creation_timestamp),
                        pod: None,
                        cached: false,
                    }),
                })
        }
    };
    Ok(created
        .unwrap_or_else(|taken| Created::Held(RunOutcome::name_taken(taken.kind, &taken.name))))
}

fn random_key() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
