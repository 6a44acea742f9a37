//! The AgentWorkflow controller's real pass against the fake API server.

use agentic_api::{Agent, AgentWorkflow};
use serde_json::json;

use super::reconcile;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, ready, status_after_pass};

/// An Agent whose status says Ready, as its controller would have written it.
pub(crate) fn ready_agent(name: &str) -> Agent {
    object(json!({
        "metadata": {"name": name},
        "spec": {"image": "registry.test/harness:1"},
        "status": {
            "observedGeneration": 1,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "AgentReady", "message": "",
                "observedGeneration": 1, "lastTransitionTime": "2026-12-01T00:00:00Z",
            }],
        },
    }))
}

pub(crate) fn workflow(stages: &[&str]) -> AgentWorkflow {
    let stages: Vec<_> = stages
        .iter()
        .map(|agent| json!({"name": format!("{agent}-stage"), "agentRef": agent}))
        .collect();
    object(json!({"metadata": {"name": "flow"}, "spec": {"stages": stages}}))
}

#[tokio::test]
async fn a_workflow_is_ready_when_every_stage_agent_is_and_not_before() {
    let api = FakeApi::default();
    api.put(&workflow(&["plan", "code"]));
    api.put(&ready_agent("plan"));
    let ctx = context(&api);
    let status = status_after_pass::<AgentWorkflow, _>(&api, &ctx, "flow", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "AgentsNotReady".into())
    );
    api.put(&ready_agent("code"));
    let status = status_after_pass::<AgentWorkflow, _>(&api, &ctx, "flow", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "AllAgentsReady".into())
    );
}

#[test]
fn a_changed_agent_brings_back_the_workflows_that_run_it() {
    let flow = workflow(&["plan", "code"]);
    let other: AgentWorkflow = object(json!({
        "metadata": {"name": "other"},
        "spec": {"stages": [{"name": "s", "agentRef": "review"}]},
    }));
    let picked = super::workflows_of_agent([&flow, &other], NS, "code");
    assert_eq!(
        picked,
        [kube::runtime::reflector::ObjectRef::new("flow").within(NS)]
    );
}
