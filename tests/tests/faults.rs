//! Faults on a control plane of this test's own: the API server goes away and comes back.

use std::time::{Duration, Instant};

use agentic_api::{Agent, AgentRun, AgentRunSpec, AgentSpec, ObjectRef};
use agentic_integration_tests::{Operator, apply, llm_gateway, wait_agent_ready, wait_for_sandbox};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::{TestEnv, TestEnvOptions};
use kube::Api;
use kube::api::ObjectMeta;

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

fn run(name: &str) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: "stub".into(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

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
    apply(&runs, &run("before")).await;
    wait_for_sandbox(&runs, "before").await;

    // Long enough for kube-runtime's default backoff to grow to its 30 s ceiling.
    env.restart_apiserver(Duration::from_secs(25))
        .await
        .expect("the API server comes back");
    let client = env.client();
    let runs: Api<AgentRun> = Api::namespaced(client, &ns);
    let restarted = Instant::now();
    apply(&runs, &run("after")).await;
    wait_for_sandbox(&runs, "after").await;
    let took = restarted.elapsed();
    assert!(
        took < RECOVERY,
        "the run got its sandbox {took:?} after the API server was back (at most {RECOVERY:?})"
    );
    operator.stop().await;
}
