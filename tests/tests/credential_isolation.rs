//! Where a run's model key goes, on the control plane (no node: the pod specs and the runs'
//! conditions are what is checked; `credential_proxy_node` runs the proxy for real).
//!
//! - `preferred` (the default): a keyed bearer Gateway gets the `credential-proxy` sidecar, and
//!   the agent container names neither the Secret nor the key; a cloud-signed Gateway's key
//!   goes to the agent as in Konveyor, and the run says why.
//! - `required`: a run on the cloud-signed Gateway fails before it has a sandbox.
//! - The Agents say the same before any run, in their own `CredentialIsolation`, and an
//!   Agent's `spec.credentialProxy` replaces the operator's `preferred` for its runs, never its
//!   `required`.

use agentic_api::{Agent, AgentRun, AgentRunPhase, Gateway, ObjectRef};
use agentic_core::sandbox::CredentialProxyMode;
use agentic_fixtures::{LLM_KEY, gateway, key_secret};
use agentic_integration_tests::{
    Operator, agent_run, apply, condition, env, llm_agent_spec, ready_agent, registry,
    wait_for_sandbox, wait_phase,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, Client};

const OPERATOR_IMAGE: &str = "registry.example.com/agentic-operator:test";

/// A namespace with the Gateways `llm` (openai, keyed, the shared fake endpoint) and
/// `bedrock` (cloud-signed, keyed), the Agents `proxied` and `signed` on each, and the
/// operator with `mode`; the Agents as they were once Ready.
async fn scenario(
    prefix: &str,
    mode: CredentialProxyMode,
) -> (String, Client, Operator, [Agent; 2]) {
    let env = env().await;
    let ns = env.namespace(prefix).await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_with_credential_proxy(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
        OPERATOR_IMAGE,
        mode,
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(&secrets, &key_secret("bedrock-key", LLM_KEY)).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    apply(
        &gateways,
        &gateway(
            "bedrock",
            "aws-bedrock",
            "https://bedrock-runtime.us-east-1.amazonaws.com",
            Some("bedrock-key"),
        ),
    )
    .await;
    let proxied = ready_agent(
        &client,
        &ns,
        "proxied",
        llm_agent_spec("ghcr.io/acme/harness:1"),
    )
    .await;
    let signed = ready_agent(&client, &ns, "signed", signed_spec()).await;
    (ns, client, operator, [proxied, signed])
}

/// An Agent on the cloud-signed Gateway `bedrock`.
fn signed_spec() -> agentic_api::AgentSpec {
    let mut signed = llm_agent_spec("ghcr.io/acme/harness:1");
    signed.gateways = vec![ObjectRef {
        name: "bedrock".into(),
    }];
    signed
}

fn isolation(run: &AgentRun) -> (String, String) {
    let status = run.status.as_ref().expect("status");
    status_and_reason(&status.conditions)
}

/// An Agent's `CredentialIsolation`: status, reason and message.
fn agent_isolation(agent: &Agent) -> (String, String, String) {
    let status = agent.status.as_ref().expect("status");
    let (found, reason) = status_and_reason(&status.conditions);
    let message = condition(&status.conditions, "CredentialIsolation")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    (found, reason, message)
}

fn status_and_reason(conditions: &[Condition]) -> (String, String) {
    let found = condition(conditions, "CredentialIsolation")
        .unwrap_or_else(|| panic!("no CredentialIsolation: {conditions:#?}"));
    (found.status.clone(), found.reason.clone())
}

#[tokio::test]
async fn preferred_proxies_a_bearer_key_and_passes_a_cloud_signed_one_saying_so() {
    let (ns, client, operator, [proxied_agent, signed_agent]) =
        scenario("proxy-preferred", CredentialProxyMode::Preferred).await;
    let (status, reason, _) = agent_isolation(&proxied_agent);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "KeyProxied"));
    let (status, reason, message) = agent_isolation(&signed_agent);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CloudSignedProvider")
    );
    assert!(
        message.contains("Gateway bedrock")
            && message.contains("give their agent container the key"),
        "{message}"
    );
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    apply(&runs, &agent_run("proxied", "proxied")).await;
    let proxied = wait_for_sandbox(&runs, "proxied").await;
    assert_eq!(isolation(&proxied), ("True".into(), "KeyProxied".into()));
    let pod = pods.get("proxied").await.expect("the sandbox's pod");
    let spec = pod.spec.expect("spec");
    let sidecar = &spec.init_containers.as_ref().expect("init containers")[0];
    assert_eq!(sidecar.name, "credential-proxy");
    assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"));
    assert_eq!(sidecar.image.as_deref(), Some(OPERATOR_IMAGE));
    let agent = serde_json::to_string(&spec.containers[0]).expect("JSON");
    assert!(!agent.contains("llm-key"), "{agent}");
    assert!(
        agent
            .contains(r#"{"name":"KONVEYOR_LLM_ENDPOINT","value":"http://127.0.0.1:4100/openai"}"#),
        "{agent}"
    );

    apply(&runs, &agent_run("signed", "signed")).await;
    let signed = wait_for_sandbox(&runs, "signed").await;
    assert_eq!(
        isolation(&signed),
        ("False".into(), "CloudSignedProvider".into())
    );
    let pod = pods.get("signed").await.expect("the sandbox's pod");
    let spec = pod.spec.expect("spec");
    assert!(spec.init_containers.is_none());
    let agent = serde_json::to_string(&spec.containers[0]).expect("JSON");
    assert!(agent.contains(r#""name":"bedrock-key""#), "{agent}");
    operator.stop().await;
}

/// `agent`, on the cloud-signed Gateway under `required`, says its runs do not start; a run
/// of it (named as it) fails without a sandbox, saying why. Returns the run's message.
async fn refused(agent: &Agent, runs: &Api<AgentRun>) -> String {
    let (status, reason, message) = agent_isolation(agent);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CloudSignedProvider")
    );
    assert!(message.contains("do not start"), "{message}");
    let name = agent.metadata.name.as_deref().expect("a name");
    apply(runs, &agent_run(name, name)).await;
    let failed = wait_phase(runs, name, AgentRunPhase::Failed).await;
    assert_eq!(
        isolation(&failed),
        ("False".into(), "CloudSignedProvider".into())
    );
    let status = failed.status.as_ref().expect("status");
    assert_eq!(status.sandbox_name, None);
    let ready = condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(ready.reason, "CredentialIsolationRequired", "{status:#?}");
    ready.message.clone()
}

#[tokio::test]
async fn required_refuses_a_run_whose_key_would_reach_its_agent() {
    let (ns, client, operator, [_, signed_agent]) =
        scenario("proxy-required", CredentialProxyMode::Required).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let message = refused(&signed_agent, &runs).await;
    assert!(message.contains("cloud credentials"), "{message}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert!(pods.get_opt("signed").await.expect("read").is_none());

    // A run whose key the proxy serves starts under `required` too.
    apply(&runs, &agent_run("proxied", "proxied")).await;
    let proxied = wait_for_sandbox(&runs, "proxied").await;
    assert_eq!(isolation(&proxied), ("True".into(), "KeyProxied".into()));

    // The operator's `required` is a floor: an Agent's `off` does not lower it.
    let mut lax = signed_spec();
    lax.credential_proxy = Some(CredentialProxyMode::Off);
    let lax = ready_agent(&client, &ns, "lax", lax).await;
    refused(&lax, &runs).await;
    operator.stop().await;
}

#[tokio::test]
async fn an_agents_setting_replaces_the_operators_preferred_for_its_runs() {
    let (ns, client, operator, _) =
        scenario("proxy-agent-setting", CredentialProxyMode::Preferred).await;
    // `required` on the Agent, under an operator that only prefers the proxy.
    let mut strict = signed_spec();
    strict.credential_proxy = Some(CredentialProxyMode::Required);
    let strict = ready_agent(&client, &ns, "strict", strict).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let message = refused(&strict, &runs).await;
    assert!(message.contains("spec.credentialProxy"), "{message}");

    // `off` on an Agent of a keyed bearer Gateway: its runs get the key, and say so.
    let mut open = llm_agent_spec("ghcr.io/acme/harness:1");
    open.credential_proxy = Some(CredentialProxyMode::Off);
    let open = ready_agent(&client, &ns, "open", open).await;
    let (status, reason, _) = agent_isolation(&open);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CredentialProxyOff")
    );
    apply(&runs, &agent_run("open", "open")).await;
    let started = wait_for_sandbox(&runs, "open").await;
    assert_eq!(
        isolation(&started),
        ("False".into(), "CredentialProxyOff".into())
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods.get("open").await.expect("the sandbox's pod");
    assert!(pod.spec.expect("spec").init_containers.is_none());
    operator.stop().await;
}
