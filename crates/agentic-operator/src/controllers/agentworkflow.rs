//! AgentWorkflow: Ready when every stage's Agent exists and is Ready.

use std::sync::Arc;

use agentic_api::{Agent, AgentWorkflow, AgentWorkflowStatus, CONDITION_READY};
use agentic_core::events::{StatusEvent, condition_events};
use agentic_core::workflow::decide_workflow;
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;

use super::pipeline::{Pass, Policy, Reconciled, ready_phase, run_controller};
use super::support::{lookup, namespace_of, read_cached, relate};
use super::watches::{Stop, Watches};
use crate::context::Context;
use crate::error::Result;

pub const KIND: &str = "AgentWorkflow";

/// The AgentWorkflow controller: Ready when its stages' Agents are.
pub(super) fn controller(
    watches: &mut Watches,
    ctx: &Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()> {
    let workflows = watches.of::<AgentWorkflow>();
    let store = workflows.store();
    let by_agent = workflows.index(|workflow| {
        workflow
            .spec
            .stages
            .iter()
            .map(|stage| stage.agent_ref.clone())
            .collect()
    });
    let controller = Controller::for_shared_stream(workflows.applied(), store.clone())
        .watches_shared_stream(
            watches.of::<Agent>().touched(),
            relate(store.clone(), by_agent, |workflows, ns, agent| {
                workflows_of_agent(workflows, ns, agent)
            }),
        );
    let policy = Policy::backing_off(reconcile, ctx);
    run_controller(controller, store, policy, ctx.clone(), stop)
}

impl Reconciled for AgentWorkflow {
    const KIND: &'static str = KIND;

    fn phase(&self) -> &'static str {
        ready_phase(self.status.as_ref().map(|s| s.conditions.as_slice()))
    }

    fn events(old: &AgentWorkflowStatus, new: &AgentWorkflowStatus) -> Vec<StatusEvent> {
        condition_events(&old.conditions, &new.conditions, &[CONDITION_READY])
    }
}

pub async fn reconcile(
    workflow: Arc<AgentWorkflow>,
    ctx: Arc<Context>,
    old: AgentWorkflowStatus,
) -> Result<Pass<AgentWorkflowStatus>> {
    let namespace = namespace_of(workflow.as_ref(), KIND)?;
    // Dereference: each stage's Agent, from the cache its own watch keeps.
    let mut agents = Vec::new();
    for stage in &workflow.spec.stages {
        let agent = read_cached(&ctx, &namespace, &stage.agent_ref, |_| true).await?;
        agents.push((stage.name.as_str(), stage.agent_ref.as_str(), agent));
    }
    // Decide.
    let lookups: Vec<_> = agents
        .iter()
        .map(|(stage, agent, read)| (*stage, *agent, lookup(read)))
        .collect();
    let new = decide_workflow(&workflow, &lookups, old, crate::now());
    Ok(Pass::then(new, Action::await_change()))
}

/// The workflows in `namespace` with a stage run by the Agent `agent`.
pub fn workflows_of_agent<'a>(
    workflows: impl IntoIterator<Item = &'a AgentWorkflow>,
    namespace: &str,
    agent: &str,
) -> Vec<ObjectRef<AgentWorkflow>> {
    workflows
        .into_iter()
        .filter(|w| w.namespace().as_deref() == Some(namespace))
        .filter(|w| w.spec.stages.iter().any(|s| s.agent_ref == agent))
        .map(ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
pub(crate) mod scenarios;
