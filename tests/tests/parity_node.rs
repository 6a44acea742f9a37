//! Konveyor parity on a real node (issue #25, items 1–4): params in Go's grammar reach the
//! agent coerced, a file mount waits for its Secret and fails at once on a missing key, and
//! an ACP client reaches a running agent through the run's headless Service on both sandbox
//! backends. The stub agent (`hack/stub-agent`) prints what it sees; these tests read its log.

use std::collections::BTreeMap;
use std::time::Duration;

use agentic_api::{
    AgentParam, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, FileMount, ParamType, RunParam,
};
use agentic_integration_tests::{
    CONVERGE, agent_log, apply, condition, env_var, has_condition, llm_agent_spec, log_values,
    meta, node_scenario, ready_agent, stub_agent, wait_for, wait_phase,
};
use agentic_operator::context::SandboxBackend;
use base64::Engine as _;
use k8s_openapi::api::core::v1::{KeyToPath, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How often the operator rechecks a run waiting for a file mount's source when no Secret
/// event brings it back (`FILE_MOUNT_RETRY` in the AgentRun controller).
const FILE_MOUNT_RETRY: Duration = Duration::from_secs(10);

/// The port the harness serves ACP on and clients reach through the Service
/// (`agentic_core::sandbox::ACP_PORT`).
const ACP_PORT: u16 = 4000;

/// The Gateway `llm` and an Agent `name` running the stub agent with `prompt` and `params`;
/// waits until it is Ready.
async fn stub(client: &Client, ns: &str, name: &str, prompt: &str, params: Vec<AgentParam>) {
    let spec = AgentSpec {
        prompt: Some(prompt.into()),
        params,
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(client, ns, name, spec).await;
}

/// A run of `agent` with `params` and the stub agent's `env`.
fn run(name: &str, agent: &str, params: &[(&str, &str)], env: &[(&str, &str)]) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            params: params
                .iter()
                .map(|(name, value)| RunParam {
                    name: (*name).into(),
                    value: (*value).into(),
                })
                .collect(),
            env: env
                .iter()
                .map(|(name, value)| env_var(name, value))
                .collect(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// A Secret `name` holding `data` (as `stringData`).
fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(name),
        string_data: Some(
            data.iter()
                .map(|(key, value)| ((*key).to_string(), (*value).to_string()))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// A file mount of the Secret `secret`'s key `key` as `<dir>/<file>`.
fn secret_mount(dir: &str, secret: &str, key: &str, file: &str) -> FileMount {
    FileMount {
        mount_path: dir.into(),
        secret_name: Some(secret.into()),
        items: vec![KeyToPath {
            key: key.into(),
            path: file.into(),
            mode: None,
        }],
        ..FileMount::default()
    }
}

/// The sandbox the run recorded.
fn sandbox_of(run: &AgentRun) -> String {
    run.status
        .as_ref()
        .and_then(|status| status.sandbox_name.clone())
        .unwrap_or_else(|| panic!("the run names its sandbox: {run:#?}"))
}

/// The file the stub agent printed as base64.
fn printed_file(log: &str, path: &str) -> Vec<u8> {
    let prefix = format!("file-base64: {path} ");
    let encoded = log_values(log, &prefix)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("the agent printed no {path}:\n{log}"));
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64")
}

/// The `Ready` condition's status, reason and message.
fn ready(run: &AgentRun) -> (String, String, String) {
    let conditions = &run.status.as_ref().expect("status").conditions;
    let ready = condition(conditions, "Ready").unwrap_or_else(|| panic!("no Ready: {run:#?}"));
    (
        ready.status.clone(),
        ready.reason.clone(),
        ready.message.clone(),
    )
}

/// The names of the pods in `ns`.
async fn pod_names(pods: &Api<Pod>) -> Vec<String> {
    pods.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter_map(|pod| pod.metadata.name)
        .collect()
}

/// Konveyor's grammar: a boolean `T` and a number `25.0` are valid, the prompt reads them
/// canonically (`true`, `25`), params.json holds them typed, and a declared param without a
/// value or default substitutes `""` instead of failing the run.
#[tokio::test]
async fn params_in_gos_grammar_reach_the_agent_coerced() {
    let (ns, client, operator) = node_scenario("parity-params", SandboxBackend::Pod).await;
    stub(
        &client,
        &ns,
        "typed",
        "Flag $(agent.flag), n $(agent.n), note [$(agent.note)].",
        vec![
            AgentParam {
                name: "flag".into(),
                param_type: ParamType::Boolean,
                ..AgentParam::default()
            },
            AgentParam {
                name: "n".into(),
                param_type: ParamType::Number,
                ..AgentParam::default()
            },
            AgentParam {
                name: "note".into(),
                param_type: ParamType::String,
                ..AgentParam::default()
            },
        ],
    )
    .await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &run(
            "coerced",
            "typed",
            &[("flag", "T"), ("n", "25.0")],
            &[("STUB_PRINT_FILES", "/run/konveyor/params.json")],
        ),
    )
    .await;

    let done = wait_phase(&runs, "coerced", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    assert_eq!(
        log_values(&log, "KONVEYOR_PROMPT="),
        ["Flag true, n 25, note []."],
        "{log}"
    );
    let params: Value = serde_json::from_slice(&printed_file(&log, "/run/konveyor/params.json"))
        .expect("params.json is JSON");
    // `json!(25)` is an integer: a float 25.0 would not compare equal. The param without a
    // value is left out, as Konveyor leaves it.
    assert_eq!(params["agent"], json!({"flag": true, "n": 25}), "{log}");
    operator.stop().await;
}

/// A run whose file mount names a Secret that does not exist yet waits (Pending,
/// `FileMountSourceNotFound`, no pod) instead of failing; once the Secret is created the run
/// starts, the agent sees the file, and the run Succeeds.
#[tokio::test]
async fn a_file_mount_waits_for_its_secret_then_the_run_starts() {
    let (ns, client, operator) = node_scenario("parity-late-secret", SandboxBackend::Pod).await;
    stub(&client, &ns, "reader", "Read the token.", Vec::new()).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut waiting = run(
        "waiting",
        "reader",
        &[],
        &[("STUB_PRINT_FILES", "/etc/late/token.txt")],
    );
    waiting.spec.file_mounts = vec![secret_mount(
        "/etc/late",
        "late-creds",
        "token",
        "token.txt",
    )];
    apply(&runs, &waiting).await;

    let seen = wait_for(
        &runs,
        "waiting",
        "Ready=False FileMountSourceNotFound",
        |r: &AgentRun| {
            r.status.as_ref().is_some_and(|s| {
                has_condition(&s.conditions, "Ready", "False", "FileMountSourceNotFound")
            })
        },
    )
    .await;
    let (_, _, message) = ready(&seen);
    assert!(
        message.contains("late-creds"),
        "names the Secret: {message}"
    );

    // It keeps waiting through the operator's recheck: never failed, never a sandbox or pod.
    let watched_until = tokio::time::Instant::now() + FILE_MOUNT_RETRY + Duration::from_secs(2);
    while tokio::time::Instant::now() < watched_until {
        let current = runs.get("waiting").await.expect("get the run");
        let status = current.status.as_ref().expect("status");
        assert_eq!(status.phase, Some(AgentRunPhase::Pending), "{current:#?}");
        assert_eq!(ready(&current).1, "FileMountSourceNotFound", "{current:#?}");
        assert_eq!(status.sandbox_name, None, "{current:#?}");
        assert_eq!(pod_names(&pods).await, Vec::<String>::new());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(
        &secrets,
        &secret("late-creds", &[("token", "arrived-late")]),
    )
    .await;
    // The Secret's watch event brings the run back; the recheck does at the latest.
    let deadline = tokio::time::Instant::now() + FILE_MOUNT_RETRY + CONVERGE;
    loop {
        let current = runs.get("waiting").await.expect("get the run");
        if current
            .status
            .as_ref()
            .is_some_and(|s| s.sandbox_name.is_some())
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not start after its Secret appeared: {current:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let done = wait_phase(&runs, "waiting", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    assert_eq!(
        printed_file(&log, "/etc/late/token.txt"),
        b"arrived-late",
        "{log}"
    );
    operator.stop().await;
}

/// A run whose file mount's Secret exists but lacks the key it projects fails at once with
/// `InvalidFileMounts` (not after the pod's startup deadline) and never gets a pod.
#[tokio::test]
async fn a_file_mount_of_a_missing_key_fails_the_run_at_once() {
    let (ns, client, operator) = node_scenario("parity-missing-key", SandboxBackend::Pod).await;
    stub(&client, &ns, "reader", "Read the token.", Vec::new()).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(&secrets, &secret("partial", &[("other", "not the token")])).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let mut missing = run("missing-key", "reader", &[], &[]);
    missing.spec.file_mounts = vec![secret_mount("/etc/app", "partial", "token", "token.txt")];
    apply(&runs, &missing).await;

    let failed = wait_phase(&runs, "missing-key", AgentRunPhase::Failed).await;
    let (status, reason, message) = ready(&failed);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InvalidFileMounts"),
        "{failed:#?}"
    );
    assert!(
        message.contains("partial") && message.contains("token"),
        "names the Secret and the key: {message}"
    );
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.sandbox_name.clone()),
        None,
        "{failed:#?}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert_eq!(pod_names(&pods).await, Vec::<String>::new());
    operator.stop().await;
}

/// The label selector `k=v,...` of a Service's selector.
fn selector_text(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// An ACP client reaches a running agent through the headless Service `<sandbox>`: the
/// Service exists, selects exactly the run's pod, and the address it resolves to (the pod's,
/// port 4000) accepts a connection and answers.
///
/// The node runs no EndpointSlice controller (no kube-controller-manager runs with it), so
/// the endpoint is computed as that controller would: the Ready pods the selector matches;
/// any EndpointSlice of the Service must agree.
async fn acp_reaches_the_agent_through_the_service(backend: SandboxBackend, prefix: &str) {
    let (ns, client, operator) = node_scenario(prefix, backend).await;
    stub(&client, &ns, "listener", "Serve ACP.", Vec::new()).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let port = ACP_PORT.to_string();
    apply(
        &runs,
        &run(
            "serving",
            "listener",
            &[],
            &[("STUB_LISTEN_PORT", &port), ("STUB_SLEEP_SECONDS", "300")],
        ),
    )
    .await;
    let listening = wait_for(&runs, "serving", "ACPReady=True", |r: &AgentRun| {
        r.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "ACPReady", "True", "Listening"))
    })
    .await;
    let sandbox = sandbox_of(&listening);

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = wait_for(&services, &sandbox, "the ACP Service", |_: &Service| true).await;
    let spec = service.spec.clone().expect("the Service has a spec");
    assert_eq!(
        spec.cluster_ip.as_deref(),
        Some("None"),
        "headless: {service:#?}"
    );
    let selector = spec.selector.clone().unwrap_or_default();
    assert!(!selector.is_empty(), "selects by labels: {service:#?}");
    if backend == SandboxBackend::Pod {
        // agent-sandbox's Service lists no ports (a headless Service needs none to resolve);
        // the operator's names the ACP port, for `kubectl port-forward svc/<sandbox>`.
        let ports: Vec<_> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
            .collect();
        assert_eq!(
            ports,
            [(
                Some("acp".to_string()),
                i32::from(ACP_PORT),
                Some("TCP".into())
            )],
            "{service:#?}"
        );
        let run_uid = listening.metadata.uid.clone().expect("the run's UID");
        assert!(
            service
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.uid == run_uid && owner.controller == Some(true)),
            "owned by the run: {service:#?}"
        );
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selected = pods
        .list(&ListParams::default().labels(&selector_text(&selector)))
        .await
        .expect("list the pods the Service selects")
        .items;
    let names: Vec<_> = selected
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    assert_eq!(names, [sandbox.as_str()], "selects exactly the run's pod");
    let pod_status = selected[0].status.clone().expect("the pod has a status");
    assert!(
        pod_status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "an endpoint is a Ready pod: {pod_status:#?}"
    );
    let pod_ip: std::net::IpAddr = pod_status
        .pod_ip
        .as_deref()
        .expect("the pod has an address")
        .parse()
        .expect("an IP address");

    // Where an EndpointSlice controller runs, the Service's slices hold that same address.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    let service_label = format!("kubernetes.io/service-name={sandbox}");
    for slice in slices
        .list(&ListParams::default().labels(&service_label))
        .await
        .expect("list the Service's EndpointSlices")
        .items
    {
        let addresses: Vec<_> = slice
            .endpoints
            .iter()
            .flatten()
            .flat_map(|endpoint| endpoint.addresses.clone())
            .collect();
        assert_eq!(addresses, [pod_ip.to_string()], "{slice:#?}");
    }

    // What a client inside the cluster does with `<sandbox>.<namespace>.svc:4000`.
    let mut stream =
        tokio::time::timeout(CONVERGE, tokio::net::TcpStream::connect((pod_ip, ACP_PORT)))
            .await
            .unwrap_or_else(|_| panic!("connecting to {pod_ip}:{ACP_PORT} timed out"))
            .unwrap_or_else(|e| panic!("connecting to {pod_ip}:{ACP_PORT}: {e}"));
    stream
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .await
        .expect("send a request");
    let mut answer = Vec::new();
    tokio::time::timeout(CONVERGE, stream.read_to_end(&mut answer))
        .await
        .expect("the agent answers in time")
        .expect("read the answer");
    assert!(
        answer.starts_with(b"HTTP/1."),
        "the agent's listener answers: {:?}",
        String::from_utf8_lossy(&answer)
    );

    runs.patch(
        "serving",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .expect("cancel the run");
    wait_phase(&runs, "serving", AgentRunPhase::Failed).await;
    operator.stop().await;
}

#[tokio::test]
async fn acp_reaches_a_pod_backend_agent_through_its_service() {
    acp_reaches_the_agent_through_the_service(SandboxBackend::Pod, "parity-acp-pod").await;
}

#[tokio::test]
async fn acp_reaches_an_agent_sandbox_agent_through_its_service() {
    acp_reaches_the_agent_through_the_service(SandboxBackend::AgentSandbox, "parity-acp-sandbox")
        .await;
}
