//! The orphan sweep: deletes the sandboxes, Pods, Services, ConfigMaps and Secrets labelled for an
//! AgentRun that no longer exists (the decision is [`agentic_core::sweep::verdict`]), and the
//! unlabelled Secrets whose owners are all runs that no longer exist: the token Secrets
//! (`agentic-run-*`) Konveyor's Hub creates for the runs and workflow runs it starts, whose
//! group-less ownerReference the garbage collector never follows
//! ([`agentic_core::sweep::owned_verdict`]).
//!
//! It runs on the leader only (the controllers run only there), once as soon as the AgentRun
//! watches have listed and then every `--orphan-sweep-seconds`. Each pass lists the labelled
//! objects by label selector, metadata only and a page at a time, and looks their runs up in
//! the AgentRun watch cache. The cache may lag behind the API server (a run created a moment
//! ago may not be in it yet), so an object the cache calls an orphan is checked once more
//! against a fresh GET of its run (of each run it names) before it is deleted; the cache only picks candidates,
//! the API server decides. A pass examines at most [`MAX_CANDIDATES_PER_PASS`] candidates
//! over every scope; the rest wait for the next pass.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentic_api::{AgentRun, AgentWorkflowRun};
use agentic_core::owners::controlling_run;
use agentic_core::sandbox::RUN_LABEL;
use agentic_core::sweep::{Runs, Verdict, owned_verdict, verdict};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::{Api, Resource, ResourceExt};
use tokio::sync::watch;

use crate::caches::{FinishedRunCache, Guarded, sandbox_resource};
use crate::context::{Context, SandboxBackend};
use crate::error::Chain;

/// Objects asked for per list request.
const PAGE_SIZE: u32 = 250;
/// Orphan candidates (each one costs a GET of its run, and maybe a DELETE) a pass handles at
/// most; a cluster with more catches up over the next passes.
pub const MAX_CANDIDATES_PER_PASS: usize = 100;

/// One kind the sweep deletes, and how it finds the candidates.
struct Swept {
    kind: &'static str,
    resource: ApiResource,
    selection: Selection,
}

/// Which objects of a kind the sweep looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Selection {
    /// Those labelled for a run, which the run controls ([`verdict`]).
    Labelled,
    /// Those without the label whose owners are runs ([`owned_verdict`]): Konveyor's Hub's
    /// token Secrets.
    RunOwned,
}

impl Swept {
    fn labelled(kind: &'static str, resource: ApiResource) -> Self {
        Self {
            kind,
            resource,
            selection: Selection::Labelled,
        }
    }
}

/// One scope the sweep covers: its namespace (`None`: every one) and the watch caches of its
/// runs and workflow runs.
pub(crate) struct SweepScope {
    pub namespace: Option<String>,
    pub runs: Store<Guarded<AgentRun>>,
    /// The finished runs, kept out of `runs`.
    pub finished_runs: Option<FinishedRunCache>,
    pub workflow_runs: Store<Guarded<AgentWorkflowRun>>,
}

/// The runs a pass starts from, as the caches show them.
struct Known {
    /// The AgentRuns of the run cache, by namespace and name.
    runs: Runs,
    /// The UIDs of the AgentRuns of the run cache and of every AgentWorkflowRun.
    live: BTreeSet<String>,
    /// The finished runs, kept apart from the run cache: looked up by the names an object
    /// gives, not copied for each pass (they are most of the runs).
    finished: Option<FinishedRunCache>,
}

impl Known {
    fn of(scope: &SweepScope) -> Self {
        let runs = scope.runs.state();
        let workflow_runs = scope.workflow_runs.state();
        let uids = runs
            .iter()
            .filter_map(|r| r.meta().uid.clone())
            .chain(workflow_runs.iter().filter_map(|r| r.meta().uid.clone()));
        Self {
            runs: Runs::from_metadata(runs.iter().map(|run| run.meta())),
            live: uids.collect(),
            finished: scope.finished_runs.clone(),
        }
    }

    /// An object is an orphan when neither the cached runs nor the finished ones keep it
    /// (a run's name is either cached or finished, never both).
    fn is_orphan(&self, selection: Selection, object: &ObjectMeta) -> bool {
        let finished = self.finished_named_by(object);
        match selection {
            Selection::Labelled => {
                verdict(object, &self.runs).is_orphan() && verdict(object, &finished).is_orphan()
            }
            Selection::RunOwned => {
                let uids = finished.uids().map(str::to_owned).collect();
                owned_verdict(object, &self.live).is_orphan()
                    && owned_verdict(object, &uids).is_orphan()
            }
        }
    }

    /// The finished runs `object`'s owner references name, in its namespace.
    fn finished_named_by(&self, object: &ObjectMeta) -> Runs {
        let mut named = Runs::default();
        let (Some(finished), Some(namespace)) = (&self.finished, &object.namespace) else {
            return named;
        };
        let finished = finished.lock();
        for owner in object.owner_references.iter().flatten() {
            if let Some(run) = finished.get(namespace, &owner.name) {
                named.insert(namespace, &owner.name, &run.uid);
            }
        }
        named
    }
}

/// The kinds swept, the sandbox first so that an orphaned agent stops before its inputs go:
/// the sandbox of the backend in use (a `Sandbox`, or the `Pod`), then the pods (agent-sandbox
/// pods have the Sandbox as their controller and are left to it), ConfigMaps (runs no longer
/// get one: these are of runs an earlier version started) and Secrets, then the Secrets of
/// runs that Konveyor's Hub made.
fn swept_kinds(backend: SandboxBackend) -> Vec<Swept> {
    let mut kinds = Vec::new();
    if backend == SandboxBackend::AgentSandbox {
        kinds.push(Swept::labelled(
            agentic_core::sandbox::SANDBOX_KIND,
            sandbox_resource(),
        ));
    }
    kinds.push(Swept::labelled("Pod", ApiResource::erase::<Pod>(&())));
    if backend == SandboxBackend::Pod {
        kinds.push(Swept::labelled(
            "Service",
            ApiResource::erase::<Service>(&()),
        ));
    }
    kinds.push(Swept::labelled(
        "ConfigMap",
        ApiResource::erase::<ConfigMap>(&()),
    ));
    kinds.push(Swept::labelled("Secret", ApiResource::erase::<Secret>(&())));
    kinds.push(Swept {
        kind: "Secret",
        resource: ApiResource::erase::<Secret>(&()),
        selection: Selection::RunOwned,
    });
    kinds
}

/// Sweeps each watched scope (a namespace, or `None` for all) with the AgentRun cache of
/// that scope, every `interval`, until `shutdown` turns true; `None` never sweeps. The first
/// pass waits until `listed` (every watch has listed) turns true, and the finished runs
/// too, when they are watched apart: a sandbox of a finished run not listed yet is not an
/// orphan.
pub(crate) async fn sweep(
    ctx: Arc<Context>,
    scopes: Vec<SweepScope>,
    interval: Option<Duration>,
    mut listed: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(interval) = interval.filter(|i| !i.is_zero()) else {
        return;
    };
    let finished_listed = futures::future::join_all(
        scopes
            .iter()
            .filter_map(|s| s.finished_runs.clone())
            .map(|finished| async move { finished.listed().await }),
    );
    let everything_listed = async {
        let listed = listed.wait_for(|listed| *listed).await.is_ok();
        finished_listed.await;
        listed
    };
    tokio::select! {
        listed = everything_listed => if !listed { return },
        _ = shutdown.wait_for(|stop| *stop) => return,
    }
    for kind in swept_kinds(ctx.settings.sandbox_backend) {
        // Zero from the start, so that rate() sees the first deletion.
        ctx.metrics.swept(kind.kind, 0);
    }
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let every_scope = async {
            let mut budget = MAX_CANDIDATES_PER_PASS;
            for scope in &scopes {
                pass(&ctx, scope, &mut budget).await;
                if budget == 0 {
                    tracing::info!(
                        "orphan sweep: {MAX_CANDIDATES_PER_PASS} candidates this pass; the rest wait for the next"
                    );
                    break;
                }
            }
        };
        // Every deletion is idempotent: a pass cut short by shutdown loses nothing.
        tokio::select! {
            () = every_scope => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// One pass over one scope, examining at most `budget` candidates (what is left of the
/// pass's).
async fn pass(ctx: &Context, scope: &SweepScope, budget: &mut usize) {
    let namespace = scope.namespace.as_deref();
    let cached = Known::of(scope);
    let mut deleted = 0;
    for swept in swept_kinds(ctx.settings.sandbox_backend) {
        if *budget == 0 {
            break;
        }
        match sweep_kind(ctx, namespace, &swept, &cached, budget).await {
            Ok(n) => deleted += n,
            Err(e) => tracing::warn!(
                namespace = namespace.unwrap_or_default(),
                kind = swept.kind,
                error = %Chain(&e),
                "orphan sweep: listing failed; retrying next pass"
            ),
        }
    }
    tracing::debug!(
        namespace = namespace.unwrap_or_default(),
        deleted,
        "orphan sweep pass done"
    );
}

/// Lists the objects of one kind labelled for a run, page by page, and deletes the orphans
/// among them while `budget` lasts; returns how many it deleted.
async fn sweep_kind(
    ctx: &Context,
    namespace: Option<&str>,
    swept: &Swept,
    cached: &Known,
    budget: &mut usize,
) -> kube::Result<usize> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &swept.resource),
        None => Api::all_with(ctx.client.clone(), &swept.resource),
    };
    let selector = match swept.selection {
        Selection::Labelled => RUN_LABEL.to_string(),
        Selection::RunOwned => format!("!{RUN_LABEL}"),
    };
    let mut params = ListParams::default().labels(&selector).limit(PAGE_SIZE);
    let mut deleted = 0;
    loop {
        let page = api.list_metadata(&params).await?;
        for object in &page.items {
            if *budget == 0 {
                return Ok(deleted);
            }
            // Another replica's shard: its runs are not in this cache, and it sweeps them.
            if !object
                .metadata
                .namespace
                .as_deref()
                .is_none_or(|namespace| ctx.serves(namespace))
            {
                continue;
            }
            if !cached.is_orphan(swept.selection, &object.metadata) {
                continue;
            }
            *budget -= 1;
            if delete_orphan(ctx, swept, object).await {
                deleted += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(deleted),
        }
    }
}

/// Deletes one object the cache calls an orphan, once a fresh read of its run agrees; true
/// when it deleted it. Failures are logged: the next pass tries again.
async fn delete_orphan(
    ctx: &Context,
    swept: &Swept,
    object: &PartialObjectMeta<DynamicObject>,
) -> bool {
    let meta = &object.metadata;
    let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return false;
    };
    let verdict = match fresh_verdict(ctx, swept.selection, namespace, meta).await {
        Ok(verdict) => verdict,
        Err(e) => {
            tracing::warn!(namespace, kind = swept.kind, name, error = %Chain(&e), "orphan sweep: cannot read the run; keeping the object for now");
            return false;
        }
    };
    let Verdict::Orphan { run, replaced_by } = verdict else {
        // The cache was behind: the run exists.
        return false;
    };
    let run = run.as_str();
    // The object checked is the object deleted: a new one of the same name, or this one
    // changed since it was listed, is left for the next pass to judge.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        }),
        ..DeleteParams::background()
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &swept.resource);
    match api.delete(name, &params).await {
        Ok(_) => {
            ctx.metrics.swept(swept.kind, 1);
            match replaced_by {
                None => tracing::info!(
                    namespace,
                    kind = swept.kind,
                    name,
                    run,
                    "orphan sweep: deleted an object of a run that no longer exists"
                ),
                Some(uid) => {
                    tracing::info!(namespace, kind = swept.kind, name, run, new_uid = %uid, "orphan sweep: deleted an object of a run that was deleted and created again");
                }
            }
            true
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => false,
        Err(e) => {
            tracing::warn!(namespace, kind = swept.kind, name = %object.name_any(), error = %Chain(&e), "orphan sweep: deleting failed; retrying next pass");
            false
        }
    }
}

/// The verdict on `meta` from a fresh read of the runs it names, in `namespace`.
async fn fresh_verdict(
    ctx: &Context,
    selection: Selection,
    namespace: &str,
    meta: &ObjectMeta,
) -> kube::Result<Verdict> {
    match selection {
        Selection::Labelled => {
            let Some(run) = controlling_run(meta) else {
                return Ok(Verdict::Keep(agentic_core::sweep::Kept::ForeignController));
            };
            let runs: Api<AgentRun> = Api::namespaced(ctx.client.clone(), namespace);
            let fresh = runs.get_metadata_opt(run).await?;
            Ok(verdict(
                meta,
                &Runs::from_metadata(fresh.iter().map(|r| &r.metadata)),
            ))
        }
        Selection::RunOwned => {
            let mut live = BTreeSet::new();
            for owner in meta.owner_references.iter().flatten() {
                let fresh = match owner.kind.as_str() {
                    "AgentWorkflowRun" => {
                        Api::<AgentWorkflowRun>::namespaced(ctx.client.clone(), namespace)
                            .get_metadata_opt(&owner.name)
                            .await?
                            .map(|r| r.metadata)
                    }
                    _ => Api::<AgentRun>::namespaced(ctx.client.clone(), namespace)
                        .get_metadata_opt(&owner.name)
                        .await?
                        .map(|r| r.metadata),
                };
                live.extend(fresh.and_then(|m| m.uid));
            }
            Ok(owned_verdict(meta, &live))
        }
    }
}

#[cfg(test)]
mod tests {
    use agentic_core::sandbox::TtlDefaults;
    use serde_json::json;

    use super::*;
    use crate::controllers::scenario::{NS, object, store_of};

    /// An object of the run `run` (UID `uid`): labelled for it, or (`labelled` false) a
    /// token Secret Konveyor's Hub made, owned by it.
    fn owned_by(run: &str, uid: &str, labelled: bool) -> ObjectMeta {
        serde_json::from_value(json!({
            "name": format!("{run}-object"), "namespace": NS,
            "labels": if labelled { json!({agentic_core::sandbox::RUN_LABEL: run}) } else { json!({}) },
            "ownerReferences": [{
                "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "name": run,
                "uid": uid, "controller": true
            }],
        }))
        .expect("metadata")
    }

    #[test]
    fn the_objects_of_a_finished_run_kept_apart_are_not_orphans() {
        let (finished, _due) = FinishedRunCache::new(TtlDefaults::default());
        let done: AgentRun = object(json!({
            "metadata": {"name": "done", "uid": "u-done"},
            "spec": {"agentRef": "coder"},
            "status": {"phase": "Succeeded"},
        }));
        assert!(finished.feed(None).keep(&Guarded(Ok(done))));
        let known = Known::of(&SweepScope {
            namespace: Some(NS.into()),
            runs: store_of(Vec::<AgentRun>::new()),
            finished_runs: Some(finished),
            workflow_runs: store_of(Vec::<AgentWorkflowRun>::new()),
        });
        for (selection, labelled) in [(Selection::Labelled, true), (Selection::RunOwned, false)] {
            assert!(!known.is_orphan(selection, &owned_by("done", "u-done", labelled)));
            assert!(known.is_orphan(selection, &owned_by("done", "u-old", labelled)));
            assert!(known.is_orphan(selection, &owned_by("gone", "u-gone", labelled)));
        }
    }
}
