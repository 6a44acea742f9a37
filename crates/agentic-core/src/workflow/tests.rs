use super::*;
use agentic_api::{
    AgentRunStatus, AgentSpec, AgentStatus, AgentWorkflowRunSpec, AgentWorkflowSpec,
    AgentWorkflowStage, AgentWorkflowStatus, ExecutionMode, ParamType, RunExecution,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

fn now() -> Time {
    Time(Timestamp::from_second(1_800_000_000).expect("time"))
}

fn ready_condition(generation: Option<i64>) -> Condition {
    Condition {
        type_: CONDITION_READY.into(),
        status: "True".into(),
        reason: "Ready".into(),
        message: String::new(),
        observed_generation: generation,
        last_transition_time: now(),
    }
}

fn agent(name: &str, params: &[&str], ready: bool) -> Agent {
    let mut agent = Agent::new(
        name,
        AgentSpec {
            image: "harness:1".into(),
            params: params
                .iter()
                .map(|p| AgentParam {
                    name: (*p).into(),
                    ..AgentParam::default()
                })
                .collect(),
            ..AgentSpec::default()
        },
    );
    agent.metadata.generation = Some(1);
    agent.status = Some(AgentStatus {
        observed_generation: Some(1),
        conditions: if ready {
            vec![ready_condition(Some(1))]
        } else {
            vec![]
        },
        ..AgentStatus::default()
    });
    agent
}

fn workflow(ready: bool) -> AgentWorkflow {
    let mut workflow = AgentWorkflow::new(
        "migrate",
        AgentWorkflowSpec {
            guide: Some("Move to $(workflow.target)".into()),
            params: vec![AgentParam {
                name: "target".into(),
                default: Some("quarkus".into()),
                ..AgentParam::default()
            }],
            stages: vec![
                AgentWorkflowStage {
                    name: "plan".into(),
                    agent_ref: "planner".into(),
                    instructions: Some("plan for $(workflow.target)".into()),
                    execution: None,
                },
                AgentWorkflowStage {
                    name: "execute".into(),
                    agent_ref: "doer".into(),
                    instructions: Some("do it".into()),
                    execution: Some(RunExecution {
                        mode: Some(ExecutionMode::Approve),
                        max_turns: Some(7),
                        ..RunExecution::default()
                    }),
                },
            ],
        },
    );
    workflow.metadata.generation = Some(2);
    workflow.status = Some(AgentWorkflowStatus {
        observed_generation: Some(2),
        conditions: if ready {
            vec![ready_condition(Some(2))]
        } else {
            vec![]
        },
    });
    workflow
}

fn run() -> AgentWorkflowRun {
    let mut run = AgentWorkflowRun::new(
        "migrate-1",
        AgentWorkflowRunSpec {
            workflow_ref: "migrate".into(),
            gateway: Some("gw".into()),
            params: vec![
                RunParam {
                    name: "target".into(),
                    value: "spring".into(),
                },
                RunParam {
                    name: "depth".into(),
                    value: "3".into(),
                },
            ],
            env: vec![
                EnvVar {
                    name: "APP_ID".into(),
                    value: Some("1".into()),
                    value_from: None,
                },
                EnvVar {
                    name: "KONVEYOR_WORKFLOW_STAGE".into(),
                    value: Some("99".into()),
                    value_from: None,
                },
            ],
            ..AgentWorkflowRunSpec::default()
        },
    );
    run.metadata.namespace = Some("ns".into());
    run.metadata.uid = Some("awr-uid".into());
    run.metadata.generation = Some(1);
    run.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]));
    run
}

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "konveyor.io/v1alpha1".into(),
        kind: "AgentWorkflowRun".into(),
        name: "migrate-1".into(),
        uid: "awr-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn started_run() -> AgentWorkflowRun {
    let mut run = run();
    let step = start(&run, Lookup::Found(&workflow(true)), &now());
    run.status = Some(step.status);
    run
}

/// The pass of `run` now, as the workflow run that owns its stage runs.
fn advance_now(run: &AgentWorkflowRun, stage_run: StageRun<'_>, agent: Lookup<'_, Agent>) -> Step {
    advance(run, stage_run, agent, owner(), &now())
}

/// A started run whose first stage's AgentRun was created.
fn run_with_plan_created() -> AgentWorkflowRun {
    let mut run = started_run();
    run.status.as_mut().expect("status").stages[0].agent_run_name = Some("migrate-1-plan".into());
    run
}

fn stage_run(phase: Option<AgentRunPhase>, reason: &str) -> AgentRun {
    let mut agent_run = AgentRun::new("migrate-1-plan", AgentRunSpec::default());
    agent_run.status = Some(AgentRunStatus {
        phase,
        conditions: vec![Condition {
            type_: CONDITION_READY.into(),
            status: "False".into(),
            reason: reason.into(),
            message: "the agent said no".into(),
            observed_generation: None,
            last_transition_time: now(),
        }],
        ..AgentRunStatus::default()
    });
    agent_run
}

fn reason(status: &AgentWorkflowRunStatus) -> (String, String) {
    let c = find_condition(&status.conditions, CONDITION_READY).expect("Ready");
    (c.status.clone(), c.reason.clone())
}

fn env<'a>(run: &'a AgentRun, name: &str) -> Vec<&'a str> {
    run.spec
        .env
        .iter()
        .filter(|e| e.name == name)
        .filter_map(|e| e.value.as_deref())
        .collect()
}

#[test]
fn a_workflow_is_ready_when_every_stage_agent_is() {
    let wf = workflow(false);
    let (planner, doer) = (agent("planner", &[], true), agent("doer", &[], true));
    let (status, reason, _) = workflow_readiness(
        &wf,
        &[
            ("plan", "planner", Lookup::Found(&planner)),
            ("execute", "doer", Lookup::Found(&doer)),
        ],
    );
    assert_eq!(
        (status, reason),
        (ConditionStatus::True, AgentWorkflowReason::AllAgentsReady)
    );

    let lazy = agent("doer", &[], false);
    let (status, reason, message) = workflow_readiness(
        &wf,
        &[
            ("plan", "planner", Lookup::Missing),
            ("execute", "doer", Lookup::Found(&lazy)),
        ],
    );
    assert_eq!(
        (status, reason),
        (ConditionStatus::False, AgentWorkflowReason::AgentsNotReady)
    );
    assert!(
        message.contains("stage \"plan\": Agent \"planner\" not found"),
        "{message}"
    );
    assert!(
        message.contains("stage \"execute\": Agent \"doer\" is not ready"),
        "{message}"
    );
}

#[test]
fn a_workflow_status_records_its_generation_and_keeps_its_ready_time_when_nothing_changed() {
    let mut wf = workflow(false);
    wf.metadata.generation = Some(4);
    let planner = agent("planner", &[], true);
    let agents = [("plan", "planner", Lookup::Found(&planner))];
    let at = |s| Time(Timestamp::from_second(s).expect("a time"));
    let first = decide_workflow(&wf, &agents, AgentWorkflowStatus::default(), at(10));
    assert_eq!(first.observed_generation, Some(4));
    let ready = find_condition(&first.conditions, CONDITION_READY).expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllAgentsReady")
    );
    let again = decide_workflow(&wf, &agents, first.clone(), at(20));
    assert_eq!(again, first);
}

#[test]
fn a_workflow_with_bad_param_declarations_is_not_ready() {
    let mut wf = workflow(false);
    wf.spec.params.push(AgentParam {
        name: "n".into(),
        param_type: ParamType::Number,
        default: Some("many".into()),
        ..AgentParam::default()
    });
    let planner = agent("planner", &[], true);
    let (status, reason, message) =
        workflow_readiness(&wf, &[("plan", "planner", Lookup::Found(&planner))]);
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::False, "InvalidParams")
    );
    assert!(message.starts_with("spec.params:"), "{message}");
}

#[test]
fn a_run_waits_for_its_workflow_to_exist_and_be_ready() {
    let step = start(&run(), Lookup::Missing, &now());
    assert_eq!(step.status.phase, Some(AgentRunPhase::Pending));
    assert_eq!(
        reason(&step.status),
        (
            "False".into(),
            AgentWorkflowRunReason::WorkflowNotFound.as_str().into()
        )
    );
    assert!(!started(&step.status));

    let step = start(&run(), Lookup::Found(&workflow(false)), &now());
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::WorkflowNotReady.as_str()
    );
    assert!(step.status.stages.is_empty());

    // Ready for an older generation is not Ready.
    let mut stale = workflow(true);
    stale.metadata.generation = Some(3);
    let step = start(&run(), Lookup::Found(&stale), &now());
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::WorkflowNotReady.as_str()
    );

    let step = start(&run(), Lookup::Malformed("bad"), &now());
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::WorkflowNotReady.as_str()
    );
    assert!(matches!(step.action, Action::None));
}

#[test]
fn starting_snapshots_the_workflow_and_creates_nothing_yet() {
    let step = start(&run(), Lookup::Found(&workflow(true)), &now());
    assert!(matches!(step.action, Action::None));
    let status = &step.status;
    assert_eq!(status.phase, Some(AgentRunPhase::Running));
    assert_eq!(status.current_stage.as_deref(), Some("plan"));
    assert_eq!(status.guide.as_deref(), Some("Move to $(workflow.target)"));
    assert_eq!(status.params[0].name, "target");
    assert_eq!(status.start_time, Some(now()));
    let names: Vec<_> = status.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["plan", "execute"]);
    assert_eq!(status.stages[1].agent_ref.as_deref(), Some("doer"));
    assert_eq!(
        status.stages[1]
            .execution
            .as_ref()
            .and_then(|e| e.max_turns),
        Some(7)
    );
    assert!(
        status
            .stages
            .iter()
            .all(|s| s.phase == AgentRunPhase::Pending && s.agent_run_name.is_none())
    );
    assert_eq!(
        reason(status).1,
        AgentWorkflowRunReason::StageRunning.as_str()
    );
}

#[test]
fn a_guide_reference_without_a_value_fails_the_run_at_start() {
    let mut wf = workflow(true);
    wf.spec.guide = Some("$(workflow.missing) and $(agent.depth)".into());
    let step = start(&run(), Lookup::Found(&wf), &now());
    assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
    let c = find_condition(&step.status.conditions, CONDITION_READY).expect("Ready");
    assert_eq!(c.reason, "InvalidParams");
    assert!(c.message.contains("$(workflow.missing)"), "{}", c.message);
    assert!(c.message.contains("$(agent.depth)"), "{}", c.message);
    assert!(step.status.completion_time.is_some());
}

#[test]
fn the_first_stage_run_carries_the_stage_and_the_run() {
    let run = started_run();
    let planner = agent("planner", &["depth"], true);
    let step = advance_now(&run, StageRun::Absent, Lookup::Found(&planner));
    let Action::Create {
        run: created,
        dropped,
    } = &step.action
    else {
        panic!("expected a create: {:?}", step.action);
    };
    assert_eq!(dropped, &["target".to_string()]);
    assert_eq!(created.metadata.name.as_deref(), Some("migrate-1-plan"));
    assert_eq!(created.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(created.metadata.owner_references, Some(vec![owner()]));
    let labels = created.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(WORKFLOW_RUN_LABEL).map(String::as_str),
        Some("migrate-1")
    );
    assert_eq!(labels.get(STAGE_LABEL).map(String::as_str), Some("plan"));
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert_eq!(created.spec.agent_ref, "planner");
    assert_eq!(created.spec.gateway.as_deref(), Some("gw"));
    assert_eq!(
        created.spec.params,
        vec![RunParam {
            name: "depth".into(),
            value: "3".into()
        }]
    );
    assert_eq!(
        created.spec.instructions.as_deref(),
        Some("plan for $(workflow.target)")
    );
    assert_eq!(
        created.spec.workflow_params,
        Some(Map::from_iter([(
            "target".to_string(),
            Value::from("spring")
        )]))
    );
    assert_eq!(env(created, "APP_ID"), ["1"]);
    assert_eq!(
        env(created, "KONVEYOR_WORKFLOW_STAGE"),
        ["1"],
        "the user's copy is replaced"
    );
    assert_eq!(env(created, "KONVEYOR_WORKFLOW_STAGE_COUNT"), ["2"]);
    assert_eq!(env(created, "KONVEYOR_WORKFLOW_GUIDE"), ["Move to spring"]);
    assert_eq!(
        step.status.stages[0].agent_run_name.as_deref(),
        Some("migrate-1-plan")
    );
    assert_eq!(step.status.phase, Some(AgentRunPhase::Running));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::StageRunning.as_str()
    );
}

#[test]
fn the_snapshot_not_the_live_workflow_decides_the_stage() {
    let mut run = started_run();
    // The workflow is edited after the start: the run never reads it again, and its
    // snapshot says what the second stage is.
    let status = run.status.as_mut().expect("status");
    status.stages[0].phase = AgentRunPhase::Succeeded;
    status.stages[0].agent_run_name = Some("migrate-1-plan".into());
    let doer = agent("doer", &[], true);
    let step = advance_now(&run, StageRun::Absent, Lookup::Found(&doer));
    let Action::Create { run: created, .. } = &step.action else {
        panic!("expected a create");
    };
    assert_eq!(created.metadata.name.as_deref(), Some("migrate-1-execute"));
    assert_eq!(created.spec.agent_ref, "doer");
    assert_eq!(
        created.spec.execution,
        Some(RunExecution {
            mode: Some(ExecutionMode::Approve),
            max_turns: Some(7),
            ..RunExecution::default()
        })
    );
    assert_eq!(env(created, "KONVEYOR_WORKFLOW_STAGE"), ["2"]);
    assert!(created.spec.params.is_empty());
    assert_eq!(step.status.current_stage.as_deref(), Some("execute"));
}

#[test]
fn a_stage_whose_agent_is_missing_waits_and_retries() {
    let run = started_run();
    let step = advance_now(&run, StageRun::Absent, Lookup::Missing);
    assert!(matches!(step.action, Action::None));
    assert!(step.retry);
    assert_eq!(reason(&step.status).1, "AgentNotFound");
    assert_eq!(step.status.stages[0].agent_run_name, None);
    assert!(!step.status.phase.is_some_and(AgentRunPhase::is_finished));
}

#[test]
fn a_stage_run_created_by_a_pass_that_stopped_short_is_adopted_not_recreated() {
    let run = started_run();
    let ours = stage_run(None, "");
    let step = advance_now(&run, StageRun::Ours(&ours), Lookup::Missing);
    assert!(matches!(step.action, Action::None));
    assert_eq!(
        step.status.stages[0].agent_run_name.as_deref(),
        Some("migrate-1-plan")
    );
    assert_eq!(step.status.stages[0].phase, AgentRunPhase::Pending);
}

#[test]
fn stages_advance_in_order_and_the_last_success_finishes_the_run() {
    let mut run = started_run();
    let done = stage_run(Some(AgentRunPhase::Succeeded), "AgentSucceeded");
    let step = advance_now(&run, StageRun::Ours(&done), Lookup::Missing);
    assert!(matches!(step.action, Action::None));
    assert_eq!(step.status.stages[0].phase, AgentRunPhase::Succeeded);
    assert_eq!(step.status.current_stage.as_deref(), Some("execute"));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::StageSucceeded.as_str()
    );
    assert_eq!(current_stage(&step.status), Some(1));

    run.status = Some(step.status);
    run.status.as_mut().expect("status").stages[1].agent_run_name =
        Some("migrate-1-execute".into());
    let step = advance_now(&run, StageRun::Ours(&done), Lookup::Missing);
    assert_eq!(step.status.phase, Some(AgentRunPhase::Succeeded));
    assert_eq!(reason(&step.status), ("True".into(), "Succeeded".into()));
    assert_eq!(step.status.current_stage, None);
    assert_eq!(step.status.completion_time, Some(now()));
}

#[test]
fn a_failed_stage_fails_the_run_with_its_reason() {
    let run = run_with_plan_created();
    let failed = stage_run(Some(AgentRunPhase::Failed), "Refused");
    let step = advance_now(&run, StageRun::Ours(&failed), Lookup::Missing);
    assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(step.status.stages[0].phase, AgentRunPhase::Failed);
    assert_eq!(step.status.stages[1].phase, AgentRunPhase::Pending);
    let c = find_condition(&step.status.conditions, CONDITION_READY).expect("Ready");
    assert_eq!(c.reason, AgentWorkflowRunReason::StageFailed.as_str());
    assert!(
        c.message.contains("Refused: the agent said no"),
        "{}",
        c.message
    );
    assert!(matches!(step.action, Action::None));
}

#[test]
fn a_deleted_stage_run_fails_the_run_and_is_never_recreated() {
    let run = run_with_plan_created();
    let planner = agent("planner", &[], true);
    for observed in [StageRun::Absent, StageRun::Foreign] {
        let step = advance_now(&run, observed, Lookup::Found(&planner));
        assert!(matches!(step.action, Action::None), "{observed:?}");
        assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
        assert_eq!(
            reason(&step.status).1,
            AgentWorkflowRunReason::AgentRunDeleted.as_str()
        );
        assert_eq!(step.status.stages[0].phase, AgentRunPhase::Failed);
    }
}

#[test]
fn a_foreign_object_holding_the_name_fails_the_run_and_is_left_alone() {
    let run = started_run();
    let planner = agent("planner", &[], true);
    let step = advance_now(&run, StageRun::Foreign, Lookup::Found(&planner));
    assert!(matches!(step.action, Action::None));
    assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::ObjectNameTaken.as_str()
    );
    assert_eq!(step.status.stages[0].agent_run_name, None);

    // Taken between the read and the create: the same outcome.
    let step = advance_now(&run, StageRun::Absent, Lookup::Found(&planner));
    let status = name_taken(step.status, &run, &now());
    assert_eq!(status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(
        reason(&status).1,
        AgentWorkflowRunReason::ObjectNameTaken.as_str()
    );
    assert_eq!(status.stages[0].agent_run_name, None);
}

#[test]
fn cancel_stops_the_current_stage_run_and_the_workflow() {
    let mut run = started_run();
    run.spec.cancel = Some(true);
    let running = stage_run(Some(AgentRunPhase::Running), "AgentRunning");
    let step = advance_now(&run, StageRun::Ours(&running), Lookup::Missing);
    assert!(matches!(&step.action, Action::Cancel(name) if name == "migrate-1-plan"));
    assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::Cancelled.as_str()
    );
    assert_eq!(step.status.stages[0].phase, AgentRunPhase::Failed);
    assert_eq!(step.status.stages[1].phase, AgentRunPhase::Pending);

    // Already cancelled (a pass that stopped short): no second patch.
    let mut cancelled = running.clone();
    cancelled.spec.cancel = Some(true);
    let step = advance_now(&run, StageRun::Ours(&cancelled), Lookup::Missing);
    assert!(matches!(step.action, Action::None));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::Cancelled.as_str()
    );
    assert_eq!(step.status.stages[0].phase, AgentRunPhase::Failed);

    // No stage run yet: nothing is created.
    let planner = agent("planner", &[], true);
    let step = advance_now(&run, StageRun::Absent, Lookup::Found(&planner));
    assert!(matches!(step.action, Action::None));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::Cancelled.as_str()
    );

    // Before the start: no snapshot, no stage.
    let mut fresh = self::run();
    fresh.spec.cancel = Some(true);
    let step = start(&fresh, Lookup::Found(&workflow(true)), &now());
    assert_eq!(step.status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(
        reason(&step.status).1,
        AgentWorkflowRunReason::Cancelled.as_str()
    );
    assert!(step.status.stages.is_empty());
}

#[test]
fn a_pass_that_observes_nothing_new_changes_nothing() {
    let mut run = run_with_plan_created();
    let running = stage_run(Some(AgentRunPhase::Running), "AgentRunning");
    let step = advance_now(&run, StageRun::Ours(&running), Lookup::Missing);
    run.status = Some(step.status.clone());
    let later = Time(Timestamp::from_second(1_800_000_100).expect("time"));
    let again = advance(
        &run,
        StageRun::Ours(&running),
        Lookup::Missing,
        owner(),
        &later,
    );
    assert_eq!(again.status, step.status);
}

#[test]
fn stage_run_names_are_deterministic_and_valid() {
    assert_eq!(stage_run_name("migrate-1", "plan"), "migrate-1-plan");
    assert_eq!(stage_run_name("migrate-1", "v1.2"), "migrate-1-v1.2");
    let odd = stage_run_name("migrate-1", "a..b");
    assert!(crate::names::is_dns_subdomain(&odd), "{odd}");
    assert_ne!(odd, stage_run_name("migrate-1", "a.-b"));
    let long = "r".repeat(250);
    let name = stage_run_name(&long, "plan");
    assert!(crate::names::is_dns_subdomain(&name), "{name}");
    assert_eq!(name, stage_run_name(&long, "plan"));
    assert_ne!(name, stage_run_name(&long, "plan2"));
}

#[test]
fn workflow_params_are_typed_with_defaults_and_bad_values_are_named() {
    let mut status = started_run().status.expect("status");
    status.params.push(AgentParam {
        name: "count".into(),
        param_type: ParamType::Number,
        required: Some(true),
        ..AgentParam::default()
    });
    let given = vec![RunParam {
        name: "count".into(),
        value: "two".into(),
    }];
    let Err(e) = workflow_values(&status, &given) else {
        panic!("a bad number passes");
    };
    assert!(e.to_string().contains("count"), "{e}");

    let given = vec![RunParam {
        name: "count".into(),
        value: "2".into(),
    }];
    let (typed, guide) = workflow_values(&status, &given).expect("values");
    assert_eq!(typed.get("count"), Some(&Value::from(2)));
    assert_eq!(typed.get("target"), Some(&Value::from("quarkus")));
    assert_eq!(guide, "Move to quarkus");
}

#[test]
fn the_guide_takes_canonical_texts_and_empty_params_substitute_nothing() {
    let mut status = started_run().status.expect("status");
    status.params.push(AgentParam {
        name: "fast".into(),
        param_type: ParamType::Boolean,
        ..AgentParam::default()
    });
    status.params.push(AgentParam {
        name: "ticket".into(),
        ..AgentParam::default()
    });
    status.guide = Some("fast=$(workflow.fast) ticket=[$(workflow.ticket)]".into());
    let given = vec![RunParam {
        name: "fast".into(),
        value: "T".into(),
    }];
    let (typed, guide) = workflow_values(&status, &given).expect("values");
    assert_eq!(guide, "fast=true ticket=[]");
    assert_eq!(typed.get("fast"), Some(&Value::from(true)));
    assert_eq!(
        typed.get("ticket"),
        None,
        "a param without a value is left out"
    );
}

#[test]
fn only_runs_controlled_by_a_workflow_run_are_stage_runs() {
    let owned = |kind: &str, api_version: &str, controller: Option<bool>| AgentRun {
        metadata: ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "wf".into(),
                uid: "uid-1".into(),
                controller,
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: AgentRunSpec::default(),
        status: None,
    };
    assert!(is_stage_run(&owned(
        "AgentWorkflowRun",
        "konveyor.io/v1alpha1",
        Some(true)
    )));
    assert!(!is_stage_run(&owned(
        "AgentWorkflowRun",
        "konveyor.io/v1alpha1",
        None
    )));
    assert!(!is_stage_run(&owned(
        "AgentWorkflowRun",
        "example.com/v1",
        Some(true)
    )));
    assert!(!is_stage_run(&owned("Job", "batch/v1", Some(true))));
    let unowned = AgentRun {
        metadata: ObjectMeta::default(),
        spec: AgentRunSpec::default(),
        status: None,
    };
    assert!(!is_stage_run(&unowned));
}

#[test]
fn a_workflow_run_raises_an_event_per_phase_or_reason_change_and_a_warning_when_it_fails() {
    let status = |phase: AgentRunPhase, reason: AgentWorkflowRunReason, message: &str| {
        let mut status = AgentWorkflowRunStatus {
            phase: Some(phase),
            ..AgentWorkflowRunStatus::default()
        };
        Conditions::<AgentWorkflowRunReason>::new(&mut status.conditions, Some(1), now()).set(
            CONDITION_READY,
            ConditionStatus::False,
            reason,
            message,
        );
        status
    };
    let first = status(
        AgentRunPhase::Running,
        AgentWorkflowRunReason::StageRunning,
        "stage one",
    );
    let next_stage = status(
        AgentRunPhase::Running,
        AgentWorkflowRunReason::StageRunning,
        "stage two",
    );
    assert_eq!(
        workflow_run_events(&first, &next_stage),
        [],
        "a new message alone is no transition"
    );
    let failed = status(
        AgentRunPhase::Failed,
        AgentWorkflowRunReason::StageFailed,
        "stage two failed",
    );
    assert_eq!(
        workflow_run_events(&next_stage, &failed),
        [StatusEvent {
            warning: true,
            reason: "StageFailed".into(),
            note: "stage two failed".into(),
        }]
    );
    let events = workflow_run_events(&AgentWorkflowRunStatus::default(), &first);
    assert_eq!(events.len(), 1);
    assert!(!events[0].warning, "{events:?}");
}
