//! The AgentWorkflowRun controller's real pass, over a workflow the real AgentWorkflow pass
//! made Ready, against the fake API server.

use agentic_api::{AgentRun, AgentWorkflow, AgentWorkflowRun};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::reconcile;
use crate::controllers::agentworkflow;
use crate::controllers::agentworkflow::scenarios::{ready_agent, workflow};
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass};

fn workflow_run() -> AgentWorkflowRun {
    object(json!({
        "metadata": {"name": "nightly", "uid": "uid-wfr"},
        "spec": {"workflowRef": "flow"},
    }))
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
