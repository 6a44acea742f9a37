//! Workflows: an AgentWorkflow's readiness, and each step of an AgentWorkflowRun.
//!
//! A run snapshots its workflow (guide, params, stages) into its status when it starts and
//! works from that snapshot afterwards, so an edit of the workflow never changes a run under
//! way. The stages run in order, one AgentRun each, named deterministically
//! ([`stage_run_name`]) and controlled by the workflow run: the controller creates a stage's
//! run only when no object holds its name, and never adopts one it does not control, so a
//! stage never gets two runs, also across a restart between the create and the status write.
//!
//! Each pass the controller reads what [`start`] or [`advance`] need and applies the
//! [`Step`] they return: the action first (create the stage's run, or cancel it), then the
//! status. A pass that observes nothing new returns the status unchanged.

use std::collections::BTreeMap;

use agentic_api::{
    Agent, AgentParam, AgentRun, AgentRunPhase, AgentRunSpec, AgentWorkflow, AgentWorkflowRun,
    AgentWorkflowRunStageStatus, AgentWorkflowRunStatus, AgentWorkflowStatus, CONDITION_READY,
    ConditionStatus, RunParam,
};
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde_json::{Map, Value};

use crate::Error;
use crate::conditions::{Conditions, find_condition};
use crate::events::StatusEvent;
use crate::names::{collection_skill_card_name, label_value};
use crate::params::{TypedParams, resolve_params_with_texts};
use crate::reasons::{AgentWorkflowReason, AgentWorkflowRunReason};
use crate::sandbox::{MANAGED_BY, MANAGED_BY_LABEL, WORKFLOW_ENV};
use crate::skills::{Lookup, check_agent, malformed_detail};
use crate::substitution::{Scopes, substitute};

/// Label on every stage's AgentRun naming its AgentWorkflowRun (shortened with a hash past
/// 63 characters, like [`label_value`]).
pub const WORKFLOW_RUN_LABEL: &str = "konveyor.io/agentworkflowrun";
/// Label on every stage's AgentRun naming its stage.
pub const STAGE_LABEL: &str = "konveyor.io/stage";

/// Where `guide` substitution failures point.
const GUIDE_FIELD: &str = "AgentWorkflow spec.guide";

/// An AgentWorkflow's next status: its `Ready` condition from its stages' Agents (`agents`:
/// each stage's name, its `agentRef` and the lookup of that Agent, in stage order), its old
/// status and the time.
pub fn decide_workflow(
    workflow: &AgentWorkflow,
    agents: &[(&str, &str, Lookup<'_, Agent>)],
    old: AgentWorkflowStatus,
    now: Time,
) -> AgentWorkflowStatus {
    let (ready, reason, message) = workflow_readiness(workflow, agents);
    let generation = workflow.metadata.generation;
    let mut new = old;
    new.observed_generation = generation;
    Conditions::<AgentWorkflowReason>::new(&mut new.conditions, generation, now).set(
        CONDITION_READY,
        ready,
        reason,
        &message,
    );
    new
}

/// An AgentWorkflow's Ready condition: `(status, reason, message)`. `agents` holds each
/// stage's name and the lookup of its Agent, in stage order.
fn workflow_readiness(
    workflow: &AgentWorkflow,
    agents: &[(&str, &str, Lookup<'_, Agent>)],
) -> (ConditionStatus, AgentWorkflowReason, String) {
    if let Err(e) = crate::params::validate_param_declarations(&workflow.spec.params) {
        return (
            ConditionStatus::False,
            e.reason().into(),
            format!("spec.params: {e}"),
        );
    }
    let problems: Vec<String> = agents
        .iter()
        .filter_map(|(stage, name, agent)| {
            check_agent(name, *agent)
                .err()
                .map(|e| format!("stage {stage:?}: {e}"))
        })
        .collect();
    if problems.is_empty() {
        (
            ConditionStatus::True,
            AgentWorkflowReason::AllAgentsReady,
            format!("the Agents of all {} stage(s) are Ready", agents.len()),
        )
    } else {
        (
            ConditionStatus::False,
            AgentWorkflowReason::AgentsNotReady,
            problems.join("; "),
        )
    }
}

/// The name of the AgentRun of stage `stage` of the workflow run `run`: `<run>-<stage>` when
/// that is a DNS-1123 subdomain, otherwise sanitized and shortened with a hash of the
/// original (as [`collection_skill_card_name`]), so it is the same on every pass.
pub fn stage_run_name(run: &str, stage: &str) -> String {
    collection_skill_card_name(run, stage)
}

/// The AgentRun of the current stage, as the controller found it under [`stage_run_name`].
#[derive(Clone, Copy, Debug)]
pub enum StageRun<'a> {
    /// No object has the name.
    Absent,
    /// An AgentRun this workflow run controls.
    Ours(&'a AgentRun),
    /// An object this workflow run does not control (or that does not deserialize).
    Foreign,
}

/// What the controller does in a pass, before writing `status`.
#[derive(Clone, Debug)]
pub enum Action {
    /// Nothing.
    None,
    /// Create this stage run, unless an object holds its name. `dropped` are the workflow
    /// run's params that the stage's Agent does not declare, for a Normal event.
    Create {
        run: Box<AgentRun>,
        dropped: Vec<String>,
    },
    /// Set `spec.cancel` on the stage run of this name.
    Cancel(String),
}

/// The outcome of one pass: the status to write, what to do first, and whether to look again
/// later without a watch event (a stage Agent that does not exist yet).
#[derive(Clone, Debug)]
pub struct Step {
    pub status: AgentWorkflowRunStatus,
    pub action: Action,
    pub retry: bool,
}

impl Step {
    fn new(status: AgentWorkflowRunStatus) -> Self {
        Step {
            status,
            action: Action::None,
            retry: false,
        }
    }
}

/// Whether the run has taken its snapshot.
pub fn started(status: &AgentWorkflowRunStatus) -> bool {
    !status.stages.is_empty()
}

/// The index of the current stage: the first that has not succeeded; `None` once all have.
pub fn current_stage(status: &AgentWorkflowRunStatus) -> Option<usize> {
    status
        .stages
        .iter()
        .position(|s| s.phase != AgentRunPhase::Succeeded)
}

/// A pass of a run that has not started: wait for its workflow, or take the snapshot.
pub fn start(run: &AgentWorkflowRun, workflow: Lookup<'_, AgentWorkflow>, now: &Time) -> Step {
    let mut status = run.status.clone().unwrap_or_default();
    status.observed_generation = run.metadata.generation;
    let name = &run.spec.workflow_ref;
    if run.spec.cancel == Some(true) {
        finish(
            &mut status,
            run,
            AgentRunPhase::Failed,
            AgentWorkflowRunReason::Cancelled,
            "cancelled: spec.cancel is true; no stage had started",
            now,
        );
        return Step::new(status);
    }
    let workflow = match workflow {
        Lookup::Missing => {
            return pending(
                status,
                run,
                AgentWorkflowRunReason::WorkflowNotFound,
                format!("AgentWorkflow {name:?} not found"),
                now,
            );
        }
        Lookup::Malformed(error) => {
            return pending(
                status,
                run,
                AgentWorkflowRunReason::WorkflowNotReady,
                format!("AgentWorkflow {name:?}: {}", malformed_detail(error)),
                now,
            );
        }
        Lookup::Found(workflow) => workflow,
    };
    let ready = workflow
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, CONDITION_READY))
        .filter(|c| {
            workflow.metadata.generation.is_none()
                || c.observed_generation == workflow.metadata.generation
        });
    match ready {
        Some(c) if c.status == ConditionStatus::True.as_str() => {}
        other => {
            let why = other.map_or_else(|| "not checked yet".to_string(), |c| c.message.clone());
            return pending(
                status,
                run,
                AgentWorkflowRunReason::WorkflowNotReady,
                format!("AgentWorkflow {name:?} is not Ready: {why}"),
                now,
            );
        }
    }

    status.guide.clone_from(&workflow.spec.guide);
    status.params.clone_from(&workflow.spec.params);
    status.stages = workflow
        .spec
        .stages
        .iter()
        .map(|stage| AgentWorkflowRunStageStatus {
            name: stage.name.clone(),
            phase: AgentRunPhase::Pending,
            agent_run_name: None,
            agent_ref: Some(stage.agent_ref.clone()),
            instructions: stage.instructions.clone(),
            execution: stage.execution.clone(),
        })
        .collect();
    status.start_time = Some(now.clone());
    if let Err(e) = workflow_values(&status, &run.spec.params) {
        finish(
            &mut status,
            run,
            AgentRunPhase::Failed,
            e.reason(),
            &format!("AgentWorkflow {name:?}: {e}"),
            now,
        );
        return Step::new(status);
    }
    let first = status.stages.first().map(|s| s.name.clone());
    status.phase = Some(AgentRunPhase::Running);
    status.current_stage.clone_from(&first);
    set_ready(
        &mut status,
        run,
        ConditionStatus::False,
        AgentWorkflowRunReason::StageRunning,
        &format!(
            "took the snapshot of AgentWorkflow {name:?}; starting stage {:?}",
            first.unwrap_or_default()
        ),
        now,
    );
    Step::new(status)
}

/// A pass of a started run: follow the current stage's run, start the next stage, finish.
/// `stage_run` is what holds [`stage_run_name`] of the current stage, and `agent` the
/// current stage's Agent (only read when its run is to be created).
pub fn advance(
    run: &AgentWorkflowRun,
    stage_run: StageRun<'_>,
    agent: Lookup<'_, Agent>,
    owner: OwnerReference,
    now: &Time,
) -> Step {
    let mut status = run.status.clone().unwrap_or_default();
    status.observed_generation = run.metadata.generation;
    let cancel = run.spec.cancel == Some(true);
    let count = status.stages.len();
    let Some(index) = current_stage(&status) else {
        succeed(&mut status, run, now);
        return Step::new(status);
    };
    let stage = status.stages[index].clone();
    let name = stage_run_name(&run_name(run), &stage.name);
    let label = format!("stage {}/{count} {:?}", index + 1, stage.name);
    status.current_stage = Some(stage.name.clone());
    status.phase = Some(AgentRunPhase::Running);

    match stage_run {
        StageRun::Ours(agent_run) => {
            let observed = agent_run.status.clone().unwrap_or_default();
            let phase = observed.phase.unwrap_or_default();
            status.stages[index].agent_run_name = Some(name.clone());
            status.stages[index].phase = phase;
            if cancel {
                // The stage run ends Failed (Cancelled) once its controller has stopped it.
                if !phase.is_finished() {
                    status.stages[index].phase = AgentRunPhase::Failed;
                }
                let action = if phase.is_finished() || agent_run.spec.cancel == Some(true) {
                    Action::None
                } else {
                    Action::Cancel(name.clone())
                };
                finish(
                    &mut status,
                    run,
                    AgentRunPhase::Failed,
                    AgentWorkflowRunReason::Cancelled,
                    &format!(
                        "cancelled: spec.cancel is true; {label}: AgentRun {name} is cancelled"
                    ),
                    now,
                );
                return Step {
                    status,
                    action,
                    retry: false,
                };
            }
            let detail = find_condition(&observed.conditions, CONDITION_READY)
                .map(|c| format!("{}: {}", c.reason, c.message))
                .unwrap_or_default();
            match phase {
                AgentRunPhase::Succeeded => match current_stage(&status) {
                    None => succeed(&mut status, run, now),
                    Some(next) => {
                        let next = status.stages[next].name.clone();
                        status.current_stage = Some(next.clone());
                        set_ready(
                            &mut status,
                            run,
                            ConditionStatus::False,
                            AgentWorkflowRunReason::StageSucceeded,
                            &format!("{label} succeeded; starting stage {next:?}"),
                            now,
                        );
                    }
                },
                AgentRunPhase::Failed => finish(
                    &mut status,
                    run,
                    AgentRunPhase::Failed,
                    AgentWorkflowRunReason::StageFailed,
                    &format!("{label} failed: AgentRun {name}: {detail}"),
                    now,
                ),
                AgentRunPhase::Pending | AgentRunPhase::Running => set_ready(
                    &mut status,
                    run,
                    ConditionStatus::False,
                    AgentWorkflowRunReason::StageRunning,
                    &format!("{label}: AgentRun {name} is {}", phase.as_str()),
                    now,
                ),
            }
            Step::new(status)
        }
        StageRun::Absent | StageRun::Foreign if stage.agent_run_name.is_some() => {
            status.stages[index].phase = AgentRunPhase::Failed;
            let what = match stage_run {
                StageRun::Foreign => "was deleted; the object now of that name is not this run's",
                _ => "was deleted before it finished",
            };
            finish(
                &mut status,
                run,
                AgentRunPhase::Failed,
                AgentWorkflowRunReason::AgentRunDeleted,
                &format!("{label}: AgentRun {name} {what}"),
                now,
            );
            Step::new(status)
        }
        _ if cancel => {
            finish(
                &mut status,
                run,
                AgentRunPhase::Failed,
                AgentWorkflowRunReason::Cancelled,
                &format!("cancelled: spec.cancel is true; {label} had not started"),
                now,
            );
            Step::new(status)
        }
        StageRun::Foreign => {
            finish(
                &mut status,
                run,
                AgentRunPhase::Failed,
                AgentWorkflowRunReason::ObjectNameTaken,
                &format!(
                    "{label}: an AgentRun named {name} exists and this workflow run does not control it; it is left alone: delete it and create a new workflow run"
                ),
                now,
            );
            Step::new(status)
        }
        StageRun::Absent => {
            let agent_ref = stage.agent_ref.clone().unwrap_or_default();
            let agent = match agent {
                Lookup::Found(agent) => Ok(agent),
                Lookup::Missing => Err(Error::AgentNotFound { name: agent_ref }),
                Lookup::Malformed(error) => Err(Error::AgentNotReady {
                    name: agent_ref,
                    detail: malformed_detail(error),
                }),
            };
            let agent = match agent {
                Ok(agent) => agent,
                Err(e) => {
                    set_ready(
                        &mut status,
                        run,
                        ConditionStatus::False,
                        e.reason(),
                        &format!("{label}: {e}"),
                        now,
                    );
                    return Step {
                        status,
                        action: Action::None,
                        retry: true,
                    };
                }
            };
            match stage_agent_run(run, &status, index, agent, owner) {
                Ok((agent_run, dropped)) => {
                    status.stages[index].agent_run_name = Some(name.clone());
                    status.stages[index].phase = AgentRunPhase::Pending;
                    set_ready(
                        &mut status,
                        run,
                        ConditionStatus::False,
                        AgentWorkflowRunReason::StageRunning,
                        &format!("{label}: AgentRun {name} created"),
                        now,
                    );
                    Step {
                        status,
                        action: Action::Create {
                            run: Box::new(agent_run),
                            dropped,
                        },
                        retry: false,
                    }
                }
                Err(e) => {
                    finish(
                        &mut status,
                        run,
                        AgentRunPhase::Failed,
                        e.reason(),
                        &format!("{label}: {e}"),
                        now,
                    );
                    Step::new(status)
                }
            }
        }
    }
}

/// The Event for a workflow run whose status goes from `old` to `new`: one when its phase or
/// its `Ready` reason changes, with the new reason and message; a Warning when it failed.
pub fn workflow_run_events(
    old: &AgentWorkflowRunStatus,
    new: &AgentWorkflowRunStatus,
) -> Vec<StatusEvent> {
    let reason = |status: &AgentWorkflowRunStatus| {
        find_condition(&status.conditions, CONDITION_READY).map(|c| c.reason.clone())
    };
    if old.phase == new.phase && reason(old) == reason(new) {
        return Vec::new();
    }
    find_condition(&new.conditions, CONDITION_READY)
        .map(|ready| StatusEvent {
            warning: new.phase == Some(AgentRunPhase::Failed),
            reason: ready.reason.clone(),
            note: ready.message.clone(),
        })
        .into_iter()
        .collect()
}

/// The status after the controller found, on creating it, that an object it does not
/// control took the stage run's name since its read: the run fails, the object is left.
pub fn name_taken(
    mut status: AgentWorkflowRunStatus,
    run: &AgentWorkflowRun,
    now: &Time,
) -> AgentWorkflowRunStatus {
    let Some(index) = current_stage(&status) else {
        return status;
    };
    let stage = &mut status.stages[index];
    let name = stage.agent_run_name.take().unwrap_or_default();
    let message = format!(
        "stage {:?}: an AgentRun named {name} exists and this workflow run does not control it; it is left alone: delete it and create a new workflow run",
        stage.name
    );
    finish(
        &mut status,
        run,
        AgentRunPhase::Failed,
        AgentWorkflowRunReason::ObjectNameTaken,
        &message,
        now,
    );
    status
}

/// The AgentRun of stage `index`, from the snapshot in `status`: only the params its Agent
/// declares (the others are returned, for an event), the run's gateway, env, envFrom and
/// fileMounts, the three `KONVEYOR_WORKFLOW_*` variables (replacing any copy in the run's
/// env), the typed workflow params, and the stage's instructions and execution.
pub fn stage_agent_run(
    run: &AgentWorkflowRun,
    status: &AgentWorkflowRunStatus,
    index: usize,
    agent: &Agent,
    owner: OwnerReference,
) -> Result<(AgentRun, Vec<String>), Error> {
    let stage = &status.stages[index];
    let (workflow_params, guide) = workflow_values(status, &run.spec.params)?;
    let declared = |p: &RunParam| agent.spec.params.iter().any(|d| d.name == p.name);
    let params: Vec<RunParam> = run
        .spec
        .params
        .iter()
        .filter(|p| declared(p))
        .cloned()
        .collect();
    let dropped = run
        .spec
        .params
        .iter()
        .filter(|p| !declared(p))
        .map(|p| p.name.clone())
        .collect();

    let mut env: Vec<EnvVar> = run
        .spec
        .env
        .iter()
        .filter(|e| !WORKFLOW_ENV.contains(&e.name.as_str()))
        .cloned()
        .collect();
    let [guide_var, stage_var, count_var] = WORKFLOW_ENV;
    for (name, value) in [
        (guide_var, guide),
        (stage_var, (index + 1).to_string()),
        (count_var, status.stages.len().to_string()),
    ] {
        env.push(EnvVar {
            name: name.to_string(),
            value: Some(value),
            value_from: None,
        });
    }

    let run_name = run_name(run);
    let mut labels = run.metadata.labels.clone().unwrap_or_default();
    labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    labels.insert(WORKFLOW_RUN_LABEL.to_string(), label_value(&run_name));
    labels.insert(STAGE_LABEL.to_string(), stage.name.clone());

    let agent_run = AgentRun {
        metadata: ObjectMeta {
            name: Some(stage_run_name(&run_name, &stage.name)),
            namespace: run.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: AgentRunSpec {
            agent_ref: stage.agent_ref.clone().unwrap_or_default(),
            gateway: run.spec.gateway.clone(),
            params,
            instructions: stage.instructions.clone(),
            execution: stage.execution.clone(),
            file_mounts: run.spec.file_mounts.clone(),
            workflow_params: (!workflow_params.is_empty()).then_some(workflow_params),
            env,
            env_from: run.spec.env_from.clone(),
            ..AgentRunSpec::default()
        },
        status: None,
    };
    Ok((agent_run, dropped))
}

/// The typed workflow params (the run's values for the params the snapshot declares, with
/// defaults) and the snapshot's guide with `$(workflow.<name>)` substituted. The guide sees
/// the workflow scope only. On failure, [`Error::InvalidParams`] lists every problem.
pub fn workflow_values(
    status: &AgentWorkflowRunStatus,
    given: &[RunParam],
) -> Result<(Map<String, Value>, String), Error> {
    let declared: &[AgentParam] = &status.params;
    let own: Vec<RunParam> = given
        .iter()
        .filter(|p| declared.iter().any(|d| d.name == p.name))
        .cloned()
        .collect();
    let mut problems = Vec::new();
    // A declared param without a value substitutes "" in the guide, as in Konveyor.
    let TypedParams {
        values: typed,
        texts,
    } = match resolve_params_with_texts(declared, &own) {
        Ok(resolved) => resolved,
        Err(Error::InvalidParams(found)) => {
            problems.extend(found);
            TypedParams::default()
        }
        Err(other) => {
            problems.push(other);
            TypedParams::default()
        }
    };
    let scopes = Scopes {
        agent: BTreeMap::new(),
        workflow: texts,
    };
    let guide =
        match substitute(status.guide.as_deref().unwrap_or_default(), &scopes) {
            Ok(guide) => guide,
            Err(unresolved) => {
                problems.extend(unresolved.into_iter().map(|reference| {
                    Error::UnresolvedReference {
                        field: GUIDE_FIELD,
                        reference,
                    }
                }));
                String::new()
            }
        };
    if !problems.is_empty() {
        return Err(Error::InvalidParams(problems));
    }
    Ok((typed.into_iter().collect(), guide))
}

fn run_name(run: &AgentWorkflowRun) -> String {
    run.metadata.name.clone().unwrap_or_default()
}

fn pending(
    mut status: AgentWorkflowRunStatus,
    run: &AgentWorkflowRun,
    reason: impl Into<AgentWorkflowRunReason>,
    message: String,
    now: &Time,
) -> Step {
    status.phase = Some(AgentRunPhase::Pending);
    set_ready(
        &mut status,
        run,
        ConditionStatus::False,
        reason,
        &message,
        now,
    );
    Step::new(status)
}

/// Every stage has succeeded, and so has the run.
fn succeed(status: &mut AgentWorkflowRunStatus, run: &AgentWorkflowRun, now: &Time) {
    let message = format!("all {} stage(s) succeeded", status.stages.len());
    finish(
        status,
        run,
        AgentRunPhase::Succeeded,
        AgentWorkflowRunReason::Succeeded,
        &message,
        now,
    );
}

fn finish(
    status: &mut AgentWorkflowRunStatus,
    run: &AgentWorkflowRun,
    phase: AgentRunPhase,
    reason: impl Into<AgentWorkflowRunReason>,
    message: &str,
    now: &Time,
) {
    status.phase = Some(phase);
    status.completion_time = Some(now.clone());
    if phase == AgentRunPhase::Succeeded {
        status.current_stage = None;
    }
    let ready = if phase == AgentRunPhase::Succeeded {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    set_ready(status, run, ready, reason, message, now);
}

fn set_ready(
    status: &mut AgentWorkflowRunStatus,
    run: &AgentWorkflowRun,
    ready: ConditionStatus,
    reason: impl Into<AgentWorkflowRunReason>,
    message: &str,
    now: &Time,
) {
    Conditions::<AgentWorkflowRunReason>::new(
        &mut status.conditions,
        run.metadata.generation,
        now.clone(),
    )
    .set(CONDITION_READY, ready, reason, message);
}

/// Whether `run` is a stage of a workflow run: controlled by an AgentWorkflowRun. Such a run
/// is never deleted for the operator's TTL defaults: its workflow run must see it end, and it
/// goes with its workflow run (its owner).
pub fn is_stage_run(run: &AgentRun) -> bool {
    run.metadata.owner_references.iter().flatten().any(|owner| {
        owner.controller == Some(true)
            && owner.kind == "AgentWorkflowRun"
            && owner.api_version.split('/').next() == Some("konveyor.io")
    })
}

#[cfg(test)]
mod tests;
