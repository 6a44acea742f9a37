//! AgentWorkflow: Ready when every stage's Agent exists and is Ready.

use std::sync::Arc;

use agentic_api::{Agent, AgentWorkflow, CONDITION_READY};
use agentic_core::conditions::set_condition;
use agentic_core::workflow::workflow_readiness;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::{lookup, namespace_of, read_reference};
use crate::apply::apply_status;
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "AgentWorkflow";

pub async fn reconcile(workflow: Arc<AgentWorkflow>, ctx: Arc<Context>) -> Result<Action> {
    let namespace = namespace_of(workflow.as_ref(), KIND)?;
    let mut agents = Vec::new();
    for stage in &workflow.spec.stages {
        let agent = read_reference::<Agent>(&ctx.client, &namespace, &stage.agent_ref).await?;
        agents.push((stage.name.as_str(), stage.agent_ref.as_str(), agent));
    }
    let lookups: Vec<_> = agents
        .iter()
        .map(|(stage, agent, read)| (*stage, *agent, lookup(read)))
        .collect();
    let (ready, reason, message) = workflow_readiness(&workflow, &lookups);

    let generation = workflow.metadata.generation;
    let old = workflow.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.observed_generation = generation;
    set_condition(
        &mut new.conditions,
        CONDITION_READY,
        ready,
        reason,
        &message,
        generation,
        crate::now(),
    );
    if new != old {
        let api: Api<AgentWorkflow> = Api::namespaced(ctx.client.clone(), &namespace);
        // Events before the write: a pass that stops in between raises them again.
        ctx.announce(
            workflow.as_ref(),
            &old.conditions,
            &new.conditions,
            CONDITION_READY,
        )
        .await;
        apply_status(&api, &workflow.name_any(), &new).await?;
    }
    Ok(Action::await_change())
}

pub fn error_policy(workflow: Arc<AgentWorkflow>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoff(KIND, workflow.as_ref(), error)
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
