//! Workflows on a real node (kubelet, containerd, runc): an AgentWorkflowRun runs its
//! stages in order, one AgentRun each, and ends Succeeded, or Failed when a stage fails, its
//! run is deleted or the workflow run is cancelled; a finished workflow run goes after its
//! time to live; and an AgentRun someone else made under a stage run's name is never touched.
//! The stub agent (`hack/stub-agent`) exits with `STUB_EXIT_CODE` after sleeping
//! `STUB_SLEEP_SECONDS`, and prints params.json.

use std::collections::BTreeMap;

use agentic_api::{
    AgentParam, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, AgentWorkflow, AgentWorkflowRun,
    AgentWorkflowRunSpec, AgentWorkflowSpec, AgentWorkflowStage, RunExecution, RunParam,
};
use agentic_integration_tests::{
    apply, condition, env_var, llm_agent_spec, meta, node_scenario, ready_agent, stub_agent,
    wait_for, wait_gone, wait_phase,
};
use agentic_operator::context::SandboxBackend;
use base64::Engine as _;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, LogParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// A Gateway and the stub Agent `name` declaring `params`; waits until it is Ready.
async fn agent(client: &Client, ns: &str, name: &str, params: &[&str]) {
    let spec = AgentSpec {
        params: params
            .iter()
            .map(|p| AgentParam {
                name: (*p).into(),
                ..AgentParam::default()
            })
            .collect(),
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(client, ns, name, spec).await;
}

/// The workflow `name`: stage `plan` run by `planner`, then `execute` run by `doer`.
async fn workflow(client: &Client, ns: &str, name: &str) -> Api<AgentWorkflow> {
    let workflows: Api<AgentWorkflow> = Api::namespaced(client.clone(), ns);
    apply(
        &workflows,
        &AgentWorkflow {
            metadata: meta(name),
            spec: AgentWorkflowSpec {
                guide: Some("Move the app to $(workflow.target).".into()),
                params: vec![AgentParam {
                    name: "target".into(),
                    default: Some("quarkus".into()),
                    ..AgentParam::default()
                }],
                stages: vec![
                    AgentWorkflowStage {
                        name: "plan".into(),
                        agent_ref: "planner".into(),
                        instructions: Some("Plan the move to $(workflow.target).".into()),
                        execution: None,
                    },
                    AgentWorkflowStage {
                        name: "execute".into(),
                        agent_ref: "doer".into(),
                        instructions: Some("Do it.".into()),
                        execution: Some(RunExecution {
                            max_turns: Some(3),
                            ..RunExecution::default()
                        }),
                    },
                ],
            },
            status: None,
        },
    )
    .await;
    workflows
}

/// The two stage Agents and the workflow `migrate`, Ready.
async fn setup(client: &Client, ns: &str) {
    agent(client, ns, "planner", &["depth"]).await;
    agent(client, ns, "doer", &[]).await;
    let workflows = workflow(client, ns, "migrate").await;
    wait_for(&workflows, "migrate", "Ready", |w: &AgentWorkflow| {
        w.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, "Ready")
                .is_some_and(|c| c.status == "True" && c.reason == "AllAgentsReady")
        })
    })
    .await;
}

fn workflow_run(name: &str, env: Vec<EnvVar>, ttl: Option<i32>) -> AgentWorkflowRun {
    AgentWorkflowRun {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([("team".into(), "blue".into())])),
            ..meta(name)
        },
        spec: AgentWorkflowRunSpec {
            workflow_ref: "migrate".into(),
            params: vec![
                RunParam {
                    name: "target".into(),
                    value: "spring".into(),
                },
                RunParam {
                    name: "depth".into(),
                    value: "2".into(),
                },
            ],
            env,
            ttl_seconds_after_finished: ttl,
            ..AgentWorkflowRunSpec::default()
        },
        status: None,
    }
}

async fn wait_workflow_phase(
    runs: &Api<AgentWorkflowRun>,
    name: &str,
    phase: AgentRunPhase,
) -> AgentWorkflowRun {
    wait_for(
        runs,
        name,
        &format!("phase {phase:?}"),
        |r: &AgentWorkflowRun| r.status.as_ref().and_then(|s| s.phase) == Some(phase),
    )
    .await
}

/// The `Ready` condition's reason and message.
fn reason(run: &AgentWorkflowRun) -> (String, String) {
    let conditions = &run.status.as_ref().expect("status").conditions;
    let ready = condition(conditions, "Ready").unwrap_or_else(|| panic!("no Ready: {run:#?}"));
    (ready.reason.clone(), ready.message.clone())
}

fn env_values<'a>(run: &'a AgentRun, name: &str) -> Vec<&'a str> {
    run.spec
        .env
        .iter()
        .filter(|e| e.name == name)
        .filter_map(|e| e.value.as_deref())
        .collect()
}

/// The params.json the stub agent of the run's pod printed.
async fn printed_params(client: &Client, ns: &str, run: &AgentRun) -> Value {
    let pod = run
        .status
        .as_ref()
        .and_then(|s| s.sandbox_name.clone())
        .expect("the run names its sandbox");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let log = pods
        .logs(
            &pod,
            &LogParams {
                container: Some("agent".into()),
                ..LogParams::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("reading the log of pod {pod}: {e}"));
    let encoded = log
        .lines()
        .find_map(|l| l.strip_prefix("file-base64: /run/konveyor/params.json "))
        .unwrap_or_else(|| panic!("the agent printed no params.json:\n{log}"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("params.json is JSON")
}

/// The test control plane has no garbage collector: the pods of stage runs that are left
/// sleeping are deleted by hand, so they do not hold the node.
async fn delete_pods(client: &Client, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete pods");
}

#[tokio::test]
async fn a_two_stage_workflow_runs_its_stages_in_order_to_succeeded() {
    let (ns, client, operator) = node_scenario("wf-two", SandboxBackend::Pod).await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);

    // Created before its workflow: it waits, and starts when the workflow turns Ready.
    apply(
        &runs,
        &workflow_run("m1", vec![env_var("APP_ID", "7")], None),
    )
    .await;
    let waiting = wait_for(&runs, "m1", "WorkflowNotFound", |r: &AgentWorkflowRun| {
        r.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, "Ready").is_some_and(|c| c.reason == "WorkflowNotFound")
        })
    })
    .await;
    assert_eq!(
        waiting.status.expect("status").phase,
        Some(AgentRunPhase::Pending)
    );
    setup(&client, &ns).await;

    let done = wait_workflow_phase(&runs, "m1", AgentRunPhase::Succeeded).await;
    assert_eq!(reason(&done).0, "Succeeded", "{done:#?}");
    let status = done.status.clone().expect("status");
    assert_eq!(status.current_stage, None);
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert_eq!(
        status.guide.as_deref(),
        Some("Move the app to $(workflow.target).")
    );
    let stages: Vec<_> = status
        .stages
        .iter()
        .map(|s| (s.name.as_str(), s.phase, s.agent_run_name.as_deref()))
        .collect();
    assert_eq!(
        stages,
        [
            ("plan", AgentRunPhase::Succeeded, Some("m1-plan")),
            ("execute", AgentRunPhase::Succeeded, Some("m1-execute")),
        ]
    );

    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let plan = agent_runs
        .get("m1-plan")
        .await
        .expect("the plan stage's run");
    let execute = agent_runs
        .get("m1-execute")
        .await
        .expect("the execute stage's run");
    // In order: the second stage's run was created only after the first had finished.
    let plan_done = plan
        .status
        .as_ref()
        .and_then(|s| s.completion_time.clone())
        .expect("plan finished");
    let execute_created = execute
        .metadata
        .creation_timestamp
        .clone()
        .expect("created");
    assert!(
        execute_created.0 >= plan_done.0,
        "{execute_created:?} < {plan_done:?}"
    );

    for (stage_run, stage, number) in [(&plan, "plan", "1"), (&execute, "execute", "2")] {
        let owner = stage_run
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .expect("a controller");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("AgentWorkflowRun", "m1")
        );
        assert_eq!(owner.uid, done.uid().expect("uid"));
        let labels = stage_run.labels();
        assert_eq!(
            labels
                .get("konveyor.io/agentworkflowrun")
                .map(String::as_str),
            Some("m1")
        );
        assert_eq!(
            labels.get("konveyor.io/stage").map(String::as_str),
            Some(stage)
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("blue"));
        assert_eq!(env_values(stage_run, "KONVEYOR_WORKFLOW_STAGE"), [number]);
        assert_eq!(
            env_values(stage_run, "KONVEYOR_WORKFLOW_STAGE_COUNT"),
            ["2"]
        );
        assert_eq!(
            env_values(stage_run, "KONVEYOR_WORKFLOW_GUIDE"),
            ["Move the app to spring."]
        );
        assert_eq!(env_values(stage_run, "APP_ID"), ["7"]);
        assert_eq!(
            stage_run.spec.workflow_params,
            Some(serde_json::Map::from_iter([(
                "target".to_string(),
                json!("spring")
            )]))
        );
    }
    // Only the params each stage's Agent declares.
    assert_eq!(
        plan.spec.params,
        [RunParam {
            name: "depth".into(),
            value: "2".into()
        }]
    );
    assert!(execute.spec.params.is_empty());
    // Each stage's dropped params are named in a Normal event on its run.
    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list events");
    let filtered = |run: &str| -> Vec<String> {
        events
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("ParamsFiltered"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(run))
            .filter_map(|e| e.note.clone())
            .collect()
    };
    let plan_filtered = filtered("m1-plan");
    assert_eq!(plan_filtered.len(), 1, "{plan_filtered:?}");
    assert!(
        plan_filtered[0].ends_with("\"planner\" does not declare are not passed: target"),
        "{plan_filtered:?}"
    );
    let execute_filtered = filtered("m1-execute");
    assert_eq!(execute_filtered.len(), 1, "{execute_filtered:?}");
    assert!(
        execute_filtered[0].ends_with("\"doer\" does not declare are not passed: target, depth"),
        "{execute_filtered:?}"
    );

    // What the pods saw: the workflow section and the stage's execution, the substituted
    // instructions.
    let params = printed_params(&client, &ns, &plan).await;
    assert_eq!(params["workflow"], json!({"target": "spring"}));
    assert_eq!(params["agent"], json!({"depth": "2"}));
    let params = printed_params(&client, &ns, &execute).await;
    assert_eq!(params["execution"]["maxTurns"], json!(3));
    operator.stop().await;
}

#[tokio::test]
async fn a_failing_stage_fails_the_workflow_and_no_later_stage_starts() {
    let (ns, client, operator) = node_scenario("wf-fail", SandboxBackend::Pod).await;
    setup(&client, &ns).await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);
    // Every stage would refuse (exit 3); the first one does.
    apply(
        &runs,
        &workflow_run("m2", vec![env_var("STUB_EXIT_CODE", "3")], None),
    )
    .await;
    let failed = wait_workflow_phase(&runs, "m2", AgentRunPhase::Failed).await;
    let (why, message) = reason(&failed);
    assert_eq!(why, "StageFailed", "{failed:#?}");
    assert!(
        message.contains("\"plan\"") && message.contains("Refused"),
        "{message}"
    );
    let status = failed.status.expect("status");
    assert_eq!(status.stages[0].phase, AgentRunPhase::Failed);
    assert_eq!(status.stages[1].phase, AgentRunPhase::Pending);
    assert_eq!(status.stages[1].agent_run_name, None);
    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        agent_runs
            .get_opt("m2-execute")
            .await
            .expect("get")
            .is_none()
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_deleted_stage_run_fails_the_workflow_and_is_not_recreated() {
    let (ns, client, operator) = node_scenario("wf-deleted", SandboxBackend::Pod).await;
    setup(&client, &ns).await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &workflow_run("m3", vec![env_var("STUB_SLEEP_SECONDS", "120")], None),
    )
    .await;
    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    wait_phase(&agent_runs, "m3-plan", AgentRunPhase::Running).await;
    agent_runs
        .delete("m3-plan", &DeleteParams::default())
        .await
        .expect("delete the stage run");
    let failed = wait_workflow_phase(&runs, "m3", AgentRunPhase::Failed).await;
    assert_eq!(reason(&failed).0, "AgentRunDeleted", "{failed:#?}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(agent_runs.get_opt("m3-plan").await.expect("get").is_none());
    assert!(
        agent_runs
            .get_opt("m3-execute")
            .await
            .expect("get")
            .is_none()
    );
    delete_pods(&client, &ns).await;
    operator.stop().await;
}

#[tokio::test]
async fn cancel_stops_the_current_stage_and_the_ttl_deletes_the_finished_run() {
    let (ns, client, operator) = node_scenario("wf-cancel", SandboxBackend::Pod).await;
    setup(&client, &ns).await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &workflow_run("m4", vec![env_var("STUB_SLEEP_SECONDS", "300")], Some(6)),
    )
    .await;
    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    wait_phase(&agent_runs, "m4-plan", AgentRunPhase::Running).await;

    // The command of the operations guide.
    runs.patch(
        "m4",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .expect("cancel");
    let cancelled = wait_workflow_phase(&runs, "m4", AgentRunPhase::Failed).await;
    assert_eq!(reason(&cancelled).0, "Cancelled", "{cancelled:#?}");
    let uid = cancelled.uid().expect("uid");
    let stage = wait_phase(&agent_runs, "m4-plan", AgentRunPhase::Failed).await;
    assert_eq!(stage.spec.cancel, Some(true));
    let stage_reason = condition(&stage.status.as_ref().expect("status").conditions, "Ready")
        .map(|c| c.reason.clone());
    assert_eq!(stage_reason.as_deref(), Some("Cancelled"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_gone(&pods, "m4-plan", "the cancelled stage's pod").await;
    assert!(
        agent_runs
            .get_opt("m4-execute")
            .await
            .expect("get")
            .is_none()
    );

    // Six seconds after its completion time the finished workflow run is deleted.
    let completed = cancelled
        .status
        .and_then(|s| s.completion_time)
        .expect("completion time");
    wait_gone(&runs, "m4", "the expired workflow run").await;
    let gone_after = k8s_openapi::jiff::Timestamp::now().as_second() - completed.0.as_second();
    assert!(gone_after >= 6, "deleted {gone_after}s after completion");
    // A new workflow run of the same name is not the one that expired.
    assert!(
        runs.get_opt("m4")
            .await
            .expect("get")
            .is_none_or(|r| r.uid() != Some(uid))
    );
    operator.stop().await;
}

#[tokio::test]
async fn an_agent_run_someone_else_made_under_a_stage_name_is_left_alone() {
    let (ns, client, operator) = node_scenario("wf-foreign", SandboxBackend::Pod).await;
    setup(&client, &ns).await;
    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    // Its Agent does not exist: it waits, and no pod runs.
    let foreign = apply(
        &agent_runs,
        &AgentRun {
            metadata: meta("m5-plan"),
            spec: AgentRunSpec {
                agent_ref: "someone-elses".into(),
                instructions: Some("mine".into()),
                ..AgentRunSpec::default()
            },
            status: None,
        },
    )
    .await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &workflow_run("m5", vec![], None)).await;
    let failed = wait_workflow_phase(&runs, "m5", AgentRunPhase::Failed).await;
    let (why, message) = reason(&failed);
    assert_eq!(why, "ObjectNameTaken", "{failed:#?}");
    assert!(message.contains("m5-plan"), "{message}");
    assert_eq!(
        failed.status.expect("status").stages[0].agent_run_name,
        None
    );

    let after = agent_runs.get("m5-plan").await.expect("still there");
    assert_eq!(after.uid(), foreign.uid());
    assert_eq!(after.spec, foreign.spec);
    assert_eq!(after.metadata.owner_references, None);
    assert_eq!(after.metadata.labels, foreign.metadata.labels);
    let stage_runs = agent_runs
        .list(&ListParams::default().labels("konveyor.io/agentworkflowrun=m5"))
        .await
        .expect("list");
    assert!(stage_runs.items.is_empty(), "{:?}", stage_runs.items);
    operator.stop().await;
}

#[tokio::test]
async fn stage_runs_outlive_the_operators_ttl_defaults_and_the_workflow_succeeds() {
    use agentic_core::sandbox::TtlDefaults;
    use agentic_integration_tests::{Operator, node_env};
    use agentic_operator::context::RunDefaults;
    let env = node_env().await;
    let ns = env.namespace("wf-ttl").await.expect("namespace");
    let client = env.client();
    // Finished runs would go at once (workflow runs without their own TTL too); a standalone
    // run proves the flags are in force.
    let defaults = RunDefaults {
        ttl: TtlDefaults {
            after_succeeded: Some(0),
            after_failed: Some(0),
        },
        ..RunDefaults::default()
    };
    let operator = Operator::start_with(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        Vec::new(),
        defaults,
    );
    setup(&client, &ns).await;
    let runs: Api<AgentWorkflowRun> = Api::namespaced(client.clone(), &ns);
    // The workflow run keeps itself for an hour; its stage runs follow it, not the flags.
    apply(&runs, &workflow_run("m6", Vec::new(), Some(3600))).await;
    let done = wait_workflow_phase(&runs, "m6", AgentRunPhase::Succeeded).await;
    assert_eq!(reason(&done).0, "Succeeded", "{done:#?}");
    let agent_runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    for stage in ["m6-plan", "m6-execute"] {
        let kept = agent_runs.get_opt(stage).await.expect("get");
        assert!(
            kept.is_some(),
            "{stage} was deleted before its workflow run"
        );
    }

    apply(
        &agent_runs,
        &AgentRun {
            metadata: meta("alone"),
            spec: AgentRunSpec {
                agent_ref: "doer".into(),
                ..AgentRunSpec::default()
            },
            status: None,
        },
    )
    .await;
    wait_gone(&agent_runs, "alone", "the expired run").await;
    operator.stop().await;
}
