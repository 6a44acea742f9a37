//! The AgentWorkflowRun controller's real pass, over a workflow the real AgentWorkflow pass
//! made Ready, against the fake API server.

use std::sync::Arc;

use agentic_api::{AgentRun, AgentWorkflow, AgentWorkflowRun};
use futures::future::join_all;
use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;

use super::{KIND, reconcile};
use crate::caches::{Guarded, LAST_APPLIED};
use crate::context::Context;
use crate::controllers::agentworkflow;
use crate::controllers::agentworkflow::scenarios::{ready_agent, workflow};
use crate::controllers::fake_api::FakeApi;
use crate::controllers::pipeline::guarded;
use crate::controllers::scenario::{NS, context, object, pass, store_of};
use crate::controllers::watch_health::WatchHealth;
use crate::controllers::watches::{
    Stop, WatchOptions, Watches, forget_unread_metadata, kind_cache, trim_for_cache,
};

fn workflow_run() -> AgentWorkflowRun {
    object(json!({
        "metadata": {"name": "nightly", "uid": "uid-wfr"},
        "spec": {"workflowRef": "flow"},
    }))
}

/// A workflow run in `phase` with `stages` stages of long instructions, large params and
/// env, as an API server serves one that was created with `kubectl apply`.
pub(super) fn large_workflow_run(phase: &str, stages: usize) -> AgentWorkflowRun {
    let instructions = "Refactor the module, keep the tests green. ".repeat(50);
    let stages: Vec<_> = (0..stages)
        .map(|i| {
            json!({
                "name": format!("stage-{i}"), "phase": "Succeeded",
                "agentRunName": format!("nightly-stage-{i}"), "agentRef": "coder",
                "instructions": instructions,
            })
        })
        .collect();
    let params: Vec<_> = (0..20)
        .map(|i| json!({"name": format!("param-{i}"), "value": "v".repeat(400)}))
        .collect();
    let declared: Vec<_> = (0..20)
        .map(|i| json!({"name": format!("param-{i}"), "description": "d".repeat(200)}))
        .collect();
    let spec = json!({
        "workflowRef": "flow", "gateway": "llm", "params": params,
        "env": [{"name": "TEAM", "value": "platform"}],
        "ttlSecondsAfterFinished": 3600,
    });
    let finished = phase == "Succeeded" || phase == "Failed";
    let ready = if phase == "Succeeded" {
        "True"
    } else {
        "False"
    };
    object(json!({
        "metadata": {
            "name": "nightly", "uid": "uid-wfr", "resourceVersion": "42",
            "labels": {"team": "platform"},
            "annotations": {
                "team.example/ticket": "OPS-1",
                LAST_APPLIED: json!({"spec": spec}).to_string(),
            },
        },
        "spec": spec,
        "status": {
            "phase": phase, "observedGeneration": 1,
            "currentStage": (!finished).then_some("stage-0"),
            "stages": stages, "guide": "g".repeat(4_000), "params": declared,
            "startTime": "2026-12-01T10:00:00Z",
            "completionTime": finished.then_some("2026-12-01T11:00:00Z"),
            "conditions": [{
                "type": "Ready", "status": ready,
                "reason": "Succeeded", "message": "all 3 stages succeeded",
                "lastTransitionTime": "2026-12-01T11:00:00Z", "observedGeneration": 1,
            }],
        },
    }))
}

/// The workflow runs `api` holds, as the AgentWorkflowRun watch of the scenario's namespace
/// caches them once it has listed; the requests of the list are forgotten.
async fn watched(api: &FakeApi, ctx: &Context) -> Store<Guarded<AgentWorkflowRun>> {
    let mut watches = Watches::new(ctx, Some(NS), &WatchOptions::default());
    let store = watches.of::<AgentWorkflowRun>().store();
    let never = || -> Stop { Box::pin(std::future::pending()) };
    let (watching, listed) = watches.start(&Arc::new(WatchHealth::default()), &never);
    // The fake API server lists but cannot watch: the watches are dropped once listed.
    tokio::select! {
        _ = join_all(watching) => panic!("the watches stopped"),
        listed = join_all(listed) => assert!(listed.into_iter().all(|listed| listed)),
    }
    api.clear_requests();
    store
}

/// The cached run `name`, as the watch hands it to the controller.
fn cached(store: &Store<Guarded<AgentWorkflowRun>>, name: &str) -> Arc<Guarded<AgentWorkflowRun>> {
    store
        .get(&ObjectRef::new(name).within(NS))
        .expect("a cached run")
}

/// The cached run `name` itself.
fn cached_run(store: &Store<Guarded<AgentWorkflowRun>>, name: &str) -> AgentWorkflowRun {
    cached(store, name).0.clone().expect("a valid run")
}

/// What `object` would be served as: what the tests compare.
pub(super) fn served<K: serde::Serialize>(object: &K) -> serde_json::Value {
    serde_json::to_value(object).expect("serializable")
}

/// A large run (`large_workflow_run`) that succeeded at `completed`, stored in `api`.
fn succeeded_at(api: &FakeApi, completed: Time) -> AgentWorkflowRun {
    let mut run = large_workflow_run("Succeeded", 3);
    if let Some(status) = run.status.as_mut() {
        status.completion_time = Some(completed);
    }
    api.put(&run);
    api.get(NS, "nightly").expect("the run")
}

#[tokio::test]
async fn the_watch_caches_a_finished_run_trimmed_and_a_live_one_whole_but_kubectls_copy() {
    let api = FakeApi::default();
    let finished = succeeded_at(&api, crate::now());
    let mut live = large_workflow_run("Running", 3);
    live.metadata.name = Some("live".into());
    api.put(&live);
    let live: AgentWorkflowRun = api.get(NS, "live").expect("the live run");
    let store = watched(&api, &context(&api)).await;
    let mut trimmed = finished.clone();
    forget_unread_metadata(&mut trimmed.metadata);
    trim_for_cache(&mut trimmed);
    assert_eq!(served(&cached_run(&store, "nightly")), served(&trimmed));
    assert_ne!(served(&trimmed), served(&finished));
    let mut expected = live.clone();
    forget_unread_metadata(&mut expected.metadata);
    assert!(live.annotations().contains_key(LAST_APPLIED));
    assert!(!expected.annotations().contains_key(LAST_APPLIED));
    assert_eq!(served(&cached_run(&store, "live")), served(&expected));
}

#[tokio::test]
async fn a_finished_run_cached_trimmed_is_deleted_at_its_time_to_live_and_nothing_else_is_written()
{
    let api = FakeApi::default();
    let long_ago = Time(Timestamp::from_second(1_700_000_000).expect("a time"));
    succeeded_at(&api, long_ago);
    let ctx = context(&api);
    let store = watched(&api, &ctx).await;
    let action = guarded(cached(&store, "nightly"), ctx, reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::await_change());
    let writes = api.writes();
    let written: Vec<_> = writes
        .iter()
        .map(|w| (&w.method, w.path.as_str()))
        .collect();
    assert_eq!(
        written,
        [(
            &Method::DELETE,
            "/apis/konveyor.io/v1alpha1/namespaces/team/agentworkflowruns/nightly"
        )]
    );
    assert!(writes[0].body.contains("uid-wfr"), "{}", writes[0].body);
    assert!(api.get::<AgentWorkflowRun>(NS, "nightly").is_none());
}

#[tokio::test]
async fn a_finished_run_cached_trimmed_waits_for_its_time_to_live_and_forgets_its_last_write() {
    let api = FakeApi::default();
    let stored = succeeded_at(&api, crate::now());
    let ctx = context(&api);
    // The pass that finished the run wrote its whole status, which the trimmed one the
    // cache shows never equals.
    ctx.written
        .remember(KIND, &stored, stored.status.clone().expect("a status"));
    let store = watched(&api, &ctx).await;
    let action = guarded(cached(&store, "nightly"), Arc::clone(&ctx), reconcile)
        .await
        .expect("a pass");
    assert_ne!(action, Action::await_change(), "looks again at its expiry");
    assert!(api.writes().is_empty(), "{:?}", api.writes());
    let trimmed = cached_run(&store, "nightly");
    let status = trimmed.status.clone().expect("a status");
    assert_eq!(ctx.written.current(KIND, &trimmed, status.clone()), status);
}

#[tokio::test]
async fn a_finished_run_cached_trimmed_is_counted_as_before() {
    let api = FakeApi::default();
    let runs: Vec<AgentWorkflowRun> = ["Succeeded", "Failed", "Running", "Pending"]
        .into_iter()
        .map(|phase| {
            let mut run = large_workflow_run(phase, 3);
            run.metadata.name = Some(phase.to_lowercase());
            api.put(&run);
            run
        })
        .collect();
    let counted = |store| {
        let mut phases = kind_cache::<AgentWorkflowRun>(store).phases();
        phases.sort();
        phases
    };
    let whole = counted(store_of(runs));
    assert_eq!(counted(watched(&api, &context(&api)).await), whole);
    let phases: Vec<_> = whole.iter().map(|(_, phase)| *phase).collect();
    assert_eq!(phases, ["Failed", "Pending", "Running", "Succeeded"]);
}

#[tokio::test]
async fn a_run_of_a_ready_workflow_starts_its_first_stage_only() {
    let api = FakeApi::default();
    api.put(&ready_agent("plan"));
    api.put(&ready_agent("code"));
    api.put(&workflow(&["plan", "code"]));
    let ctx = context(&api);
    pass::<AgentWorkflow, _>(&api, &ctx, "flow", agentworkflow::reconcile)
        .await
        .expect("a workflow pass");
    api.put(&workflow_run());
    // The first pass takes the workflow's snapshot; the next creates the stage's run.
    for _ in 0..2 {
        pass::<AgentWorkflowRun, _>(&api, &ctx, "nightly", reconcile)
            .await
            .expect("a pass");
    }
    let stage_runs = api.names::<AgentRun>(NS);
    assert_eq!(stage_runs, ["nightly-plan-stage"]);
    let stage: AgentRun = api.get(NS, "nightly-plan-stage").expect("the stage run");
    assert_eq!(stage.spec.agent_ref, "plan");
    let owner = &stage.metadata.owner_references.expect("an owner")[0];
    assert_eq!(owner.uid, "uid-wfr");
    let status = api
        .get::<AgentWorkflowRun>(NS, "nightly")
        .expect("the run")
        .status;
    assert_eq!(
        status.expect("a status").current_stage.as_deref(),
        Some("plan-stage")
    );
}

#[tokio::test]
async fn a_run_of_a_missing_workflow_starts_nothing() {
    let api = FakeApi::default();
    api.put(&workflow_run());
    pass::<AgentWorkflowRun, _>(&api, &context(&api), "nightly", reconcile)
        .await
        .expect("a pass");
    assert!(api.names::<AgentRun>(NS).is_empty());
    let status = api
        .get::<AgentWorkflowRun>(NS, "nightly")
        .expect("the run")
        .status;
    let conditions = status.expect("a status").conditions;
    assert!(
        conditions.iter().any(|c| c.reason == "WorkflowNotFound"),
        "{conditions:?}"
    );
}

#[test]
fn a_changed_workflow_brings_back_only_its_runs_that_have_not_started() {
    let waiting = workflow_run();
    let started: AgentWorkflowRun = object(json!({
        "metadata": {"name": "started"},
        "spec": {"workflowRef": "flow"},
        "status": {"stages": [{"name": "plan", "agentRef": "plan", "phase": "Running"}]},
    }));
    let other: AgentWorkflowRun = object(json!({
        "metadata": {"name": "other"},
        "spec": {"workflowRef": "release"},
    }));
    let cancelled_before_it_started: AgentWorkflowRun = object(json!({
        "metadata": {"name": "cancelled"},
        "spec": {"workflowRef": "flow", "cancel": true},
        "status": {"phase": "Failed"},
    }));
    let picked = super::runs_waiting_on_workflow(
        [&waiting, &started, &other, &cancelled_before_it_started],
        NS,
        "flow",
    );
    assert_eq!(picked, [ObjectRef::new("nightly").within(NS)]);
}
