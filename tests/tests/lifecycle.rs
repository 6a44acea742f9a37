//! A run's lifecycle on a real node (kubelet, containerd, runc): pods that cannot start,
//! deadlines, cancellation, the TTL of finished runs and an Agent's concurrency cap. The
//! stub agent (`hack/stub-agent`) exits with `STUB_EXIT_CODE` after sleeping
//! `STUB_SLEEP_SECONDS`.

use agentic_api::{AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec};
use agentic_integration_tests::{
    Operator, apply, condition, env_var, events_about, eventually, llm_agent_spec, meta, node_env,
    node_scenario, operator_binary, operator_command, ready_agent, registry, stub_agent, wait_for,
    wait_gone, wait_phase,
};
use agentic_operator::context::{RunDefaults, SandboxBackend};
use agentic_operator::controllers::agentrun::sandbox_resource;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectReference, Pod, SecretKeySelector};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{
    DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// A Gateway and the Agent `name` running `image`; waits until it is Ready.
async fn agent(client: &Client, ns: &str, name: &str, image: &str) {
    capped_agent(client, ns, name, image, None).await;
}

/// Like [`agent`], with `spec.maxConcurrentRuns`.
async fn capped_agent(client: &Client, ns: &str, name: &str, image: &str, cap: Option<i32>) {
    let spec = AgentSpec {
        max_concurrent_runs: cap,
        ..llm_agent_spec(image)
    };
    ready_agent(client, ns, name, spec).await;
}

fn run(name: &str, agent: &str, env: Vec<EnvVar>) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            env,
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// The `Ready` condition's reason and message.
fn reason(run: &AgentRun) -> (String, String) {
    let conditions = &run.status.as_ref().expect("status").conditions;
    let ready = condition(conditions, "Ready").unwrap_or_else(|| panic!("no Ready: {run:#?}"));
    (ready.reason.clone(), ready.message.clone())
}

/// The run's sandbox: the Pod (`pod` backend) or the Sandbox, whose pod the garbage
/// collector of a real cluster deletes (the test control plane has none).
fn sandboxes(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &sandbox_resource())
}

#[tokio::test]
async fn a_missing_image_fails_the_run_with_the_kubelets_reason() {
    let (ns, client, operator) = node_scenario("life-noimage", SandboxBackend::Pod).await;
    let missing = format!("{}/agentic-testenv/missing:1", registry().await);
    agent(&client, &ns, "broken", &missing).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let started = tokio::time::Instant::now();
    apply(&runs, &run("nope", "broken", vec![])).await;
    let failed = wait_phase(&runs, "nope", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&failed);
    assert_eq!(reason, "StartupFailed", "{failed:#?}");
    assert!(message.contains("ImagePullBackOff"), "{message}");
    assert!(message.contains("missing"), "names the image: {message}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(45),
        "long before any deadline: {:?}",
        started.elapsed()
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_gone(&pods, "nope", "the pod").await;
    operator.stop().await;
}

#[tokio::test]
async fn an_agent_that_does_not_start_in_time_fails_at_the_startup_deadline() {
    let (ns, client, operator) = node_scenario("life-startup", SandboxBackend::Pod).await;
    // A registry on loopback that accepts connections and never answers: the kubelet's pull
    // hangs, which is no fatal state, so only the deadline ends the wait.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent_addr = silent.local_addr().expect("address");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    agent(
        &client,
        &ns,
        "hangs",
        &format!("{silent_addr}/agentic-testenv/hangs:1"),
    )
    .await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let mut slow = run("slow", "hangs", vec![]);
    slow.spec.startup_deadline_seconds = Some(5);
    apply(&runs, &slow).await;
    let failed = wait_phase(&runs, "slow", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&failed);
    assert_eq!(reason, "StartupDeadlineExceeded", "{failed:#?}");
    assert!(message.contains("5s"), "names the deadline: {message}");
    assert!(
        message.contains("pod slow"),
        "says what the pod waits for: {message}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_gone(&pods, "slow", "the pod").await;
    holder.abort();
    operator.stop().await;
}

#[tokio::test]
async fn a_missing_secret_key_fails_the_run_with_create_container_config_error() {
    let (ns, client, operator) = node_scenario("life-nokey", SandboxBackend::AgentSandbox).await;
    agent(&client, &ns, "stub", &stub_agent().await).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let from_missing_key = EnvVar {
        name: "TOKEN".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: "llm-key".into(),
                key: "no-such-key".into(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    apply(&runs, &run("nokey", "stub", vec![from_missing_key])).await;
    let failed = wait_phase(&runs, "nokey", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&failed);
    assert_eq!(reason, "StartupFailed", "{failed:#?}");
    assert!(message.contains("CreateContainerConfigError"), "{message}");
    assert!(
        message.contains("no-such-key"),
        "the kubelet's message: {message}"
    );
    wait_gone(&sandboxes(&client, &ns), "nokey", "the Sandbox").await;
    operator.stop().await;
}

/// Sets `spec.cancel`, as `kubectl patch agentrun NAME --type merge -p '{"spec":{"cancel":true}}'`.
async fn cancel(runs: &Api<AgentRun>, name: &str) {
    runs.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .unwrap_or_else(|e| panic!("cancelling {name}: {e}"));
}

#[tokio::test]
async fn cancel_stops_a_running_agent_and_keeps_the_runs_status() {
    let (ns, client, operator) = node_scenario("life-cancel", SandboxBackend::Pod).await;
    agent(&client, &ns, "stub", &stub_agent().await).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &run("busy", "stub", vec![env_var("STUB_SLEEP_SECONDS", "300")]),
    )
    .await;
    let running = wait_phase(&runs, "busy", AgentRunPhase::Running).await;
    let started = running.status.as_ref().and_then(|s| s.start_time.clone());
    assert!(started.is_some(), "{running:#?}");

    cancel(&runs, "busy").await;
    let cancelled = wait_phase(&runs, "busy", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&cancelled);
    assert_eq!(reason, "Cancelled", "{cancelled:#?}");
    assert!(message.contains("spec.cancel"), "{message}");
    let status = cancelled.status.as_ref().expect("status");
    assert_eq!(status.start_time, started, "the status is kept");
    assert_eq!(status.sandbox_name.as_deref(), Some("busy"));
    assert!(status.completion_time.is_some());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_gone(&pods, "busy", "the pod").await;
    operator.stop().await;
}

#[tokio::test]
async fn a_run_cancelled_while_waiting_never_gets_a_sandbox() {
    let (ns, client, operator) = node_scenario("life-cancel-wait", SandboxBackend::Pod).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    // No Agent yet: the run waits.
    apply(&runs, &run("early", "later", vec![])).await;
    wait_for(&runs, "early", "AgentNotFound", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, "Ready").is_some_and(|c| c.reason == "AgentNotFound")
        })
    })
    .await;
    cancel(&runs, "early").await;
    let cancelled = wait_phase(&runs, "early", AgentRunPhase::Failed).await;
    assert_eq!(reason(&cancelled).0, "Cancelled");
    agent(&client, &ns, "later", &stub_agent().await).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert!(pods.get_opt("early").await.expect("get").is_none());
    let after = runs.get("early").await.expect("the run is kept");
    assert_eq!(reason(&after).0, "Cancelled");
    assert_eq!(after.status.and_then(|s| s.sandbox_name), None);
    operator.stop().await;
}

#[tokio::test]
async fn a_sleeping_agent_stops_at_the_run_deadline() {
    let (ns, client, operator) = node_scenario("life-deadline", SandboxBackend::Pod).await;
    agent(&client, &ns, "stub", &stub_agent().await).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let mut sleepy = run("sleepy", "stub", vec![env_var("STUB_SLEEP_SECONDS", "300")]);
    sleepy.spec.active_deadline_seconds = Some(3);
    apply(&runs, &sleepy).await;
    let failed = wait_phase(&runs, "sleepy", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&failed);
    assert_eq!(reason, "DeadlineExceeded", "{failed:#?}");
    assert!(message.contains("3s"), "{message}");
    let status = failed.status.as_ref().expect("status");
    let ran = status
        .completion_time
        .as_ref()
        .expect("completionTime")
        .0
        .as_second()
        - status.start_time.as_ref().expect("startTime").0.as_second();
    // At the deadline, not at the agent's exit 300 s in: the bound tells the two apart
    // with room for a busy machine's delayed pass, without a margin of its own.
    assert!(
        (3..150).contains(&ran),
        "stopped after the 3s deadline, not at exit: {ran}s"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_gone(&pods, "sleepy", "the pod").await;
    operator.stop().await;
}

#[tokio::test]
async fn a_finished_run_is_deleted_after_its_ttl() {
    let (ns, client, operator) = node_scenario("life-ttl", SandboxBackend::Pod).await;
    agent(&client, &ns, "stub", &stub_agent().await).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let mut brief = run("brief", "stub", vec![]);
    brief.spec.ttl_seconds_after_finished = Some(3);
    apply(&runs, &brief).await;
    // Kept with no TTL of its own (the test operator has no default).
    apply(&runs, &run("kept", "stub", vec![])).await;
    let done = wait_phase(&runs, "brief", AgentRunPhase::Succeeded).await;
    let completed = done
        .status
        .as_ref()
        .and_then(|s| s.completion_time.clone())
        .expect("completionTime");
    wait_gone(&runs, "brief", "the run").await;
    // Never before its time to live: the operator deletes it once 3 s have passed since
    // `completionTime`. How soon after that depends on the machine (a busy one delays the
    // requeued pass), so the upper bound is wait_gone's convergence budget, not a margin
    // of our own (one of 15 s failed on a loaded 2-core machine).
    let lived = agentic_operator::now().0.as_second() - completed.0.as_second();
    assert!(
        lived >= 3,
        "deleted {lived}s after completion, before its 3s TTL"
    );
    wait_phase(&runs, "kept", AgentRunPhase::Succeeded).await;
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(runs.get_opt("kept").await.expect("get").is_some());
    operator.stop().await;
}

#[tokio::test]
async fn an_agent_with_a_cap_of_two_never_runs_more_than_two_across_a_restart() {
    let (ns, client, mut operator) = node_scenario("life-cap", SandboxBackend::Pod).await;
    capped_agent(&client, &ns, "capped", &stub_agent().await, Some(2)).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let names: Vec<String> = (1..=6).map(|i| format!("q{i}")).collect();
    for name in &names {
        apply(
            &runs,
            &run(name, "capped", vec![env_var("STUB_SLEEP_SECONDS", "2")]),
        )
        .await;
    }

    // Poll the API: a run is active from the moment it records its sandbox until it finishes.
    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    let mut most_active = 0;
    let mut saw_queue_place = false;
    let mut restarted = false;
    loop {
        let listed = runs
            .list(&ListParams::default())
            .await
            .expect("list runs")
            .items;
        let status = |r: &AgentRun| r.status.clone().unwrap_or_default();
        let active: Vec<String> = listed
            .iter()
            .filter(|r| {
                let s = status(r);
                s.sandbox_name.is_some() && !s.phase.is_some_and(AgentRunPhase::is_finished)
            })
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        most_active = most_active.max(active.len());
        // Creation order: a run may start before an earlier one only while a slot is left
        // for that one (both were admitted in the same wave, one pass after the other).
        let started: Vec<bool> = names
            .iter()
            .map(|name| {
                listed
                    .iter()
                    .find(|r| r.metadata.name.as_ref() == Some(name))
                    .is_some_and(|r| status(r).sandbox_name.is_some())
            })
            .collect();
        let overtaken = started.windows(2).any(|pair| !pair[0] && pair[1]);
        assert!(
            !overtaken || active.len() < 2,
            "a later run took the slot of an earlier one: started {started:?}, active {active:?}"
        );
        saw_queue_place |= listed.iter().any(|r| {
            condition(&status(r).conditions, "Ready").is_some_and(|c| {
                c.reason == "Queued" && c.message.contains("number 1 in the queue")
            })
        });
        let finished = listed
            .iter()
            .filter(|r| status(r).phase == Some(AgentRunPhase::Succeeded))
            .count();
        // A new operator, knowing nothing, while two runs are active and four queued.
        if !restarted && active.len() == 2 {
            operator.stop().await;
            operator = Operator::start(
                client.clone(),
                &ns,
                SandboxBackend::Pod,
                vec![registry().await],
            );
            restarted = true;
        }
        if finished == names.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all runs finished: {listed:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        most_active <= 2,
        "at most 2 active at once, saw {most_active}"
    );
    assert_eq!(most_active, 2, "the cap is used");
    assert!(saw_queue_place, "queued runs show their place");
    assert!(restarted);
    // The census (every 5 s) counts the runs by phase and reason, and empties the queue.
    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    loop {
        let text = operator.metrics.encode();
        let queue = format!(r#"agentic_agentruns_queued{{namespace="{ns}",agent="capped"}}"#);
        if text.contains(r#"agentic_agentruns{phase="Succeeded",reason="AgentSucceeded"} 6"#)
            && !text.contains(&queue)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "metrics:\n{text}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    operator.stop().await;
}

#[tokio::test]
async fn the_namespace_cap_holds_across_agents_and_starts_runs_in_creation_order() {
    // The operator of this test caps the namespace at 2; its Agents have no cap of their own.
    let testenv = agentic_integration_tests::node_env().await;
    let ns = testenv.namespace("life-nscap").await.expect("namespace");
    let client = testenv.client();
    let operator = Operator::start_with(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
        RunDefaults {
            max_concurrent_runs_per_namespace: Some(2),
            ..RunDefaults::default()
        },
    );
    let image = stub_agent().await;
    agent(&client, &ns, "left", &image).await;
    agent(&client, &ns, "right", &image).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let names: Vec<String> = (1..=6).map(|i| format!("n{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let agent = if i % 2 == 0 { "left" } else { "right" };
        apply(
            &runs,
            &run(name, agent, vec![env_var("STUB_SLEEP_SECONDS", "2")]),
        )
        .await;
    }

    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    let mut most_active = 0;
    let mut saw_queue_place = false;
    loop {
        let listed = runs
            .list(&ListParams::default())
            .await
            .expect("list runs")
            .items;
        let status = |r: &AgentRun| r.status.clone().unwrap_or_default();
        let active = listed
            .iter()
            .filter(|r| {
                let s = status(r);
                s.sandbox_name.is_some() && !s.phase.is_some_and(AgentRunPhase::is_finished)
            })
            .count();
        most_active = most_active.max(active);
        let started: Vec<bool> = names
            .iter()
            .map(|name| {
                listed
                    .iter()
                    .find(|r| r.metadata.name.as_ref() == Some(name))
                    .is_some_and(|r| status(r).sandbox_name.is_some())
            })
            .collect();
        let overtaken = started.windows(2).any(|pair| !pair[0] && pair[1]);
        assert!(
            !overtaken || active < 2,
            "a later run took the slot of an earlier one: started {started:?}"
        );
        saw_queue_place |= listed.iter().any(|r| {
            condition(&status(r).conditions, "Ready").is_some_and(|c| {
                c.reason == "Queued"
                    && c.message.contains("number 1 in the queue of namespace")
                    && c.message.contains("--max-concurrent-runs-per-namespace")
            })
        });
        let finished = listed
            .iter()
            .filter(|r| status(r).phase == Some(AgentRunPhase::Succeeded))
            .count();
        if finished == names.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all runs finished: {listed:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        most_active, 2,
        "at most 2 active at once, and the cap is used"
    );
    assert!(
        saw_queue_place,
        "queued runs show their place in the namespace"
    );
    operator.stop().await;
}

/// The operator as its own process for namespace `ns`, so that a test can kill it with
/// SIGKILL; `registry` is reached over plain HTTP.
fn operator_process(
    testenv: &agentic_testenv::TestEnv,
    ns: &str,
    registry: &str,
) -> tokio::process::Child {
    operator_command(operator_binary(), testenv, ns)
        .args(["--insecure-registry", registry])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the operator starts")
}

#[tokio::test]
async fn a_cap_of_two_holds_for_twenty_runs_across_kill_9s_of_the_operator_process() {
    let testenv = node_env().await;
    let ns = testenv.namespace("life-kill").await.expect("namespace");
    let client = testenv.client();
    let registry = registry().await;
    let mut operator = operator_process(testenv, &ns, &registry);
    capped_agent(&client, &ns, "capped", &stub_agent().await, Some(2)).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for i in 1..=20 {
        apply(
            &runs,
            &run(
                &format!("k{i:02}"),
                "capped",
                vec![env_var("STUB_SLEEP_SECONDS", "1")],
            ),
        )
        .await;
    }

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(240);
    let mut kills_at = vec![12, 4];
    let mut most_pods = 0;
    loop {
        // Pods whose agent has not ended: what the cap bounds, whatever the statuses say. The
        // kubelet reports the container terminated before it moves the pod's phase.
        let listed_pods = pods
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items;
        let live_pods: Vec<String> = listed_pods
            .iter()
            .filter(|p| {
                let status = p.status.as_ref();
                let ended = matches!(
                    status.and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                );
                let exited = status
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|containers| {
                        !containers.is_empty()
                            && containers
                                .iter()
                                .all(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
                    });
                !ended && !exited
            })
            .map(ResourceExt::name_any)
            .collect();
        let live = live_pods.len();
        most_pods = most_pods.max(live);
        assert!(
            live <= 2,
            "{live} pods of the capped Agent at once: {live_pods:?}"
        );
        let finished = runs
            .list(&ListParams::default())
            .await
            .expect("list runs")
            .items
            .iter()
            .filter(|r| {
                r.status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(AgentRunPhase::is_finished)
            })
            .count();
        if finished == 20 {
            break;
        }
        if kills_at.last().is_some_and(|at| finished >= *at) && live == 2 {
            kills_at.pop();
            operator.start_kill().expect("SIGKILL");
            operator.wait().await.expect("the operator is gone");
            operator = operator_process(testenv, &ns, &registry);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{finished} of 20 runs finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        kills_at.is_empty(),
        "the operator was killed twice mid-burst"
    );
    assert_eq!(most_pods, 2, "the cap is used");
    let succeeded = runs
        .list(&ListParams::default())
        .await
        .expect("list runs")
        .items
        .iter()
        .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(AgentRunPhase::Succeeded))
        .count();
    assert_eq!(succeeded, 20, "every run ran once and succeeded");
    operator.start_kill().expect("stop the operator");
}

/// A ValidatingAdmissionPolicy `name`, bound to namespace `ns`, that refuses the requests
/// `rules` match with `message`.
async fn refuse(client: &Client, ns: &str, name: &str, rules: serde_json::Value, check: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": check, "message": format!("held by the test ({name})")}],
        },
    }))
    .expect("a policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
        },
    }))
    .expect("a binding");
    apply(
        &Api::<ValidatingAdmissionPolicy>::all(client.clone()),
        &policy,
    )
    .await;
    apply(
        &Api::<ValidatingAdmissionPolicyBinding>::all(client.clone()),
        &binding,
    )
    .await;
}

/// Deletes the policy and binding [`refuse`] made.
async fn allow(client: &Client, name: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the binding");
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the policy");
}

/// A status write to the AgentRun `probe`, as the operator would make one.
async fn write_probe_status(runs: &Api<AgentRun>) -> kube::Result<AgentRun> {
    runs.patch_status(
        "probe",
        &PatchParams::apply("lifecycle-test").force(),
        &Patch::Apply(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
            "status": {"sandboxName": "probe"},
        })),
    )
    .await
}

/// An Event about the AgentRun `probe`, as the operator would raise one.
fn probe_event(ns: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            generate_name: Some("probe-".into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        reporting_controller: Some("lifecycle-test".into()),
        reporting_instance: Some("lifecycle-test".into()),
        action: Some("Probe".into()),
        reason: Some("Probe".into()),
        type_: Some("Normal".into()),
        note: Some("are Events about runs accepted again?".into()),
        regarding: Some(ObjectReference {
            api_version: Some("konveyor.io/v1alpha1".into()),
            kind: Some("AgentRun".into()),
            name: Some("probe".into()),
            namespace: Some(ns.into()),
            ..ObjectReference::default()
        }),
        ..Event::default()
    }
}

/// The reasons and notes of the Events about the AgentRun `name`.
async fn run_events(client: &Client, ns: &str, name: &str) -> Vec<(String, String)> {
    events_about(client, ns, "AgentRun", name)
        .await
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// An operator killed after creating a run's sandbox and before writing its status (or
/// raising its Events) leaves a pod that runs on. The next operator finds the agent running
/// and goes straight to `Running`; the sandbox must still be announced. Admission policies
/// hold the run's status writes and Events back, so the kill lands in that window every time.
#[tokio::test]
async fn the_sandbox_of_a_run_is_announced_after_a_kill_9_before_its_status_was_written() {
    let testenv = node_env().await;
    let ns = testenv.namespace("life-events").await.expect("namespace");
    let client = testenv.client();
    let registry = registry().await;
    let mut operator = operator_process(testenv, &ns, &registry);
    agent(&client, &ns, "stub", &stub_agent().await).await;

    let held_status = format!("{ns}-held-run-status");
    let held_events = format!("{ns}-held-run-events");
    refuse(
        &client,
        &ns,
        &held_status,
        json!([{"apiGroups": ["konveyor.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["agentruns/status"]}]),
        "false",
    )
    .await;
    refuse(
        &client,
        &ns,
        &held_events,
        json!([{"apiGroups": ["events.k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["events"]}]),
        "object.regarding.kind != 'AgentRun'",
    )
    .await;
    // The policies take effect within a moment: until a probe run's status write is refused.
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("probe", "no-such-agent", vec![])).await;
    eventually("the status policy to refuse writes", || async {
        let written = write_probe_status(&runs).await;
        matches!(written, Err(kube::Error::Api(status)) if status.message.contains("held by the test"))
            .then_some(())
    })
    .await;

    apply(
        &runs,
        &run("late", "stub", vec![env_var("STUB_SLEEP_SECONDS", "300")]),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_for(&pods, "late", "the agent container to run", |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|containers| {
                containers.iter().any(|c| {
                    c.name == "agent" && c.state.as_ref().is_some_and(|s| s.running.is_some())
                })
            })
    })
    .await;
    let late = runs.get("late").await.expect("the run");
    assert!(
        late.status
            .as_ref()
            .is_none_or(|s| s.sandbox_name.is_none()),
        "no status was written yet: {late:#?}"
    );
    assert!(
        run_events(&client, &ns, "late").await.is_empty(),
        "no Event was raised yet"
    );

    operator.start_kill().expect("SIGKILL");
    operator.wait().await.expect("the operator is gone");
    allow(&client, &held_status).await;
    allow(&client, &held_events).await;
    // The policies go as they came, within a moment: the restarted operator must not meet
    // one of them still refusing (an Event refused is logged, not retried).
    eventually("the policies to be lifted", || async {
        let status = write_probe_status(&runs).await;
        let event = Api::<Event>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &probe_event(&ns))
            .await;
        (status.is_ok() && event.is_ok()).then_some(())
    })
    .await;
    let mut operator = operator_process(testenv, &ns, &registry);

    wait_phase(&runs, "late", AgentRunPhase::Running).await;
    let events = eventually("the run's Events", || async {
        let events = run_events(&client, &ns, "late").await;
        events
            .iter()
            .any(|(reason, _)| reason == "AgentRunning")
            .then_some(events)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "SandboxCreating" && note == "sandbox late created"),
        "the sandbox is announced: {events:?}"
    );
    cancel(&runs, "late").await;
    wait_gone(&pods, "late", "the pod").await;
    operator.start_kill().expect("stop the operator");
}
