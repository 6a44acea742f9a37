//! Faults on a control plane of this test's own: the API server goes away and comes back.

use std::time::{Duration, Instant};

use agentic_api::{Agent, AgentRun, AgentSpec, ObjectRef};
use agentic_integration_tests::{
    Operator, agent_run, apply, http_get, llm_gateway, meta, run_options, wait_agent_ready,
    wait_for_sandbox,
};
use agentic_operator::context::SandboxBackend;
use agentic_operator::operator::RunOptions;
use agentic_testenv::{TestEnv, TestEnvOptions};
use kube::Api;

/// How long after an API server restart the operator may take to act on a new run. Its watches
/// reconnect with a backoff of at most a second per error; kube-runtime's default (up to 30 s,
/// reset only after 120 s of quiet, plus the relist after `410 Gone`) took minutes here.
const RECOVERY: Duration = Duration::from_secs(20);

#[tokio::test]
async fn runs_get_a_sandbox_within_seconds_of_an_api_server_restart() {
    let mut env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("a control plane of this test's own");
    let ns = env.namespace("faults").await.expect("namespace");
    let client = env.client();
    llm_gateway(&client, &ns).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    apply(
        &agents,
        &Agent {
            metadata: meta("stub"),
            spec: AgentSpec {
                image: "harness.invalid/agent:1".into(),
                gateways: vec![ObjectRef { name: "llm".into() }],
                skill_delivery: "native".into(),
                ..AgentSpec::default()
            },
            status: None,
        },
    )
    .await;
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, Vec::new());
    wait_agent_ready(&agents, "stub").await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &agent_run("before", "stub")).await;
    wait_for_sandbox(&runs, "before").await;

    // Long enough for kube-runtime's default backoff to grow to its 30 s ceiling.
    env.restart_apiserver(Duration::from_secs(25))
        .await
        .expect("the API server comes back");
    let client = env.client();
    let runs: Api<AgentRun> = Api::namespaced(client, &ns);
    let restarted = Instant::now();
    apply(&runs, &agent_run("after", "stub")).await;
    wait_for_sandbox(&runs, "after").await;
    let took = restarted.elapsed();
    assert!(
        took < RECOVERY,
        "the run got its sandbox {took:?} after the API server was back (at most {RECOVERY:?})"
    );
    operator.stop().await;
}

#[tokio::test]
async fn watches_that_keep_failing_make_the_operator_unready_and_then_stop_it() {
    let mut env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("a control plane of this test's own");
    let ns = env.namespace("watch-health").await.expect("namespace");
    let options = RunOptions {
        tag_refresh_interval: Duration::from_secs(300),
        watch_failure_timeout: Some(Duration::from_secs(20)),
        ..run_options(&ns)
    };
    let (_shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let started = agentic_operator::operator::start(env.client(), options, shutdown_rx)
        .await
        .expect("the operator starts");
    let health = started.health_addr;
    let readyz = || async move { http_get(health, "/readyz").await.ok() };
    let listed = Instant::now();
    while readyz().await.map(|(code, _)| code) != Some(200) {
        assert!(listed.elapsed() < Duration::from_secs(60), "never ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let observe = async {
        let down = Instant::now();
        let unready = loop {
            if let Some((503, body)) = readyz().await
                && body.contains("watches have failed")
            {
                break body;
            }
            assert!(
                down.elapsed() < Duration::from_secs(30),
                "/readyz never reported the failing watches"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let stopped = tokio::time::timeout(Duration::from_secs(30), started.finished())
            .await
            .expect("the operator stops on its own");
        (unready, stopped, down.elapsed())
    };
    let (restarted, (unready, stopped, after)) =
        tokio::join!(env.restart_apiserver(Duration::from_secs(45)), observe);
    restarted.expect("the API server comes back");
    assert!(unready.contains("watches have failed for"), "{unready}");
    let error = format!(
        "{:#}",
        stopped.expect_err("a stop on broken watches is an error")
    );
    assert!(
        error.contains("watches have failed for") && error.contains("--watch-failure-seconds"),
        "{error}"
    );
    assert!(
        after < Duration::from_secs(40),
        "stopped {after:?} into the outage"
    );
}
