//! The credential proxy on the test node, with the real goose (the goose test image, its
//! harness in `GOOSE_HARNESS_MODEL=gateway` mode) talking to a scripted model endpoint that
//! runs on this machine, on the node's bridge address, outside the pod: everything goose
//! asks goes through the `credential-proxy` sidecar.
//!
//! - The endpoint receives the Gateway's real key; goose holds a placeholder. The agent
//!   container's `/proc/1/environ`, every file under its directories and mounts, and the pod
//!   as the API server has it contain the key nowhere.
//! - Asked for another host, the proxy refuses.
//! - Rotation: the Secret changes while the model holds its answer to goose's first turn;
//!   the proxy's next requests carry the new key within 5 s (the bound), without a
//!   restart of the sidecar: the operator writes the Secret's version on the pod, which makes
//!   the kubelet sync the pod and mount its Secret volume again at once, instead of at its
//!   next periodic sync (`syncFrequency`, 10 s on the test node, plus jitter). The proxy
//!   reads the file at every request (its unit tests). The latency seen is printed.
//!
//! Needs `GOOSE_BIN`, as `goose_node` does.

use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentic_api::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentRuntime, AgentSpec, Gateway, ObjectRef, SkillCard,
    SkillCardSpec,
};
use agentic_fixtures::{gateway, key_secret};
use agentic_integration_tests::{
    CONVERGE, Operator, agent_log, apply, condition, env_var, goose_bin, has_condition,
    llm_agent_spec, log_values, meta, node_env, operator_binary, ready_agent, wait_finished,
    wait_for,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::{push_goose_image, push_operator_image};
use base64::Engine as _;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use serde_json::Value;
use sha2::Digest as _;

const STARTUP_DEADLINE_SECONDS: i32 = 300;
const ACTIVE_DEADLINE_SECONDS: i64 = 300;
/// How long the new key may take to reach the proxy, the bound. What it covers: the
/// Secret's watch event to the operator and the run's pass (its pod and the Secret's version
/// from the watch caches, no read), one apply of the pod's annotation; the pod's watch event
/// to the kubelet, whose pod worker syncs the pod and has its volume manager mount the
/// Secret's volume again (its loops poll every 100 ms; the Secret comes from its watch-based
/// cache); then the harness's next poll through the proxy (every second). Each step is one
/// event or one request, not a period to wait out; none is the kubelet's periodic sync.
const ROTATION_BOUND: Duration = Duration::from_secs(5);

/// A key no one else uses: 32 hex digits from the time and the process.
pub(crate) fn fresh_key(label: &str) -> String {
    let seed = format!("{label} {:?} {}", Instant::now(), std::process::id());
    let digest = sha2::Sha256::digest(format!("{seed} {:?}", std::time::SystemTime::now()));
    format!("sk-{label}-{}", &hex::encode(digest)[..32])
}

/// The scripted model (`goose-fake-llm --serve`) on this machine, killed when dropped.
pub(crate) struct Model {
    child: Child,
    pub(crate) address: SocketAddr,
    record: PathBuf,
    pub(crate) release: PathBuf,
    _dir: tempfile::TempDir,
}

impl Model {
    pub(crate) fn start(host: std::net::Ipv4Addr, loads: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("requests.jsonl");
        let release = dir.path().join("release");
        let mut child = Command::new(env!("CARGO_BIN_EXE_goose-fake-llm"))
            .arg("--serve")
            .arg(format!("{host}:0"))
            .arg(&release)
            .arg(&record)
            .args(loads)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the scripted model starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("its address");
        let address = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("not an address line: {line:?}"));
        Model {
            child,
            address,
            record,
            release,
            _dir: dir,
        }
    }

    /// Every request so far: method, path, `authorization` and body.
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a recorded request is JSON"))
            .collect()
    }

    /// Waits until a request after the first `after` matches `check`; returns its index.
    async fn wait_for(
        &self,
        what: &str,
        after: usize,
        bound: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> usize {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(found) = self.requests().iter().skip(after).position(&check) {
                return after + found;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {bound:?}: {:#?}",
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn is_chat_turn(request: &Value) -> bool {
    request["path"]
        .as_str()
        .is_some_and(|path| path.ends_with("/chat/completions"))
        && request["body"].get("tools").is_some()
}

/// The harness's poll through the proxy (the operator's Gateway check asks `/v1/models`
/// without a query, with the key it reads itself).
fn is_poll_with(request: &Value, key: &str) -> bool {
    request["path"] == "/v1/models?from=harness"
        && request["authorization"] == format!("Bearer {key}")
}

fn is_from_proxy(request: &Value) -> bool {
    request["path"] != "/v1/models"
}

pub(crate) fn count(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle.as_bytes())
        .count()
}

/// A namespace of the test node with the operator on `backend` (and its image, for the proxy), the
/// scripted model on this machine loading `java-upgrade`, the Gateway `model` keyed by the
/// Secret `model-key` holding `key`, the inline skill `java-upgrade` with `skill_body`, and the
/// Ready Agent `migrator` running the goose test image, with `runtime` when given.
pub(crate) struct GooseBehindTheProxy {
    pub(crate) model: Model,
    pub(crate) operator: Operator,
    pub(crate) ns: String,
    pub(crate) client: kube::Client,
}

pub(crate) async fn goose_behind_the_proxy(
    namespace: &str,
    backend: SandboxBackend,
    key: &str,
    skill_body: &str,
    runtime: Option<AgentRuntime>,
) -> GooseBehindTheProxy {
    let env = node_env().await;
    let registry = env.registry_addr().expect("the node's registry");
    let goose_image = push_goose_image(
        &registry,
        &goose_bin(),
        Path::new(env!("CARGO_BIN_EXE_goose-fake-llm")),
    )
    .await
    .expect("the goose image is pushed");
    let operator_image = push_operator_image(&registry, operator_binary())
        .await
        .expect("the operator image is pushed");
    let host = env.node_host_address().expect("the node's bridge address");
    let model = Model::start(host, &["java-upgrade"]);

    let ns = env.namespace(namespace).await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_with_operator_image(
        client.clone(),
        &ns,
        backend,
        vec![registry.clone()],
        &operator_image,
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(&secrets, &key_secret("model-key", key)).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let endpoint = format!("http://{}", model.address);
    apply(
        &gateways,
        &gateway("model", "openai", &endpoint, Some("model-key")),
    )
    .await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("java"),
            spec: SkillCardSpec {
                inline: Some(format!(
                    "---\nname: java-upgrade\ndescription: Upgrade Java.\n---\n{skill_body}\n"
                )),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    wait_for(&cards, "java", "Ready", |card: &SkillCard| {
        card.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "True", "SkillValid"))
    })
    .await;
    let spec = AgentSpec {
        prompt: Some("You migrate Java code.".into()),
        gateways: vec![ObjectRef {
            name: "model".into(),
        }],
        skill_cards: vec![ObjectRef {
            name: "java".into(),
        }],
        runtime,
        ..llm_agent_spec(goose_image)
    };
    ready_agent(&client, &ns, "migrator", spec).await;
    GooseBehindTheProxy {
        model,
        operator,
        ns,
        client,
    }
}

#[tokio::test]
async fn goose_reaches_its_model_only_through_the_proxy_which_alone_holds_the_rotating_key() {
    goose_behind_the_proxy_with_a_rotating_key("proxy", SandboxBackend::Pod).await;
}

/// The same with agent-sandbox, whose controller makes the pod: the operator's annotation
/// goes on a pod it did not create, and stays.
#[tokio::test]
async fn with_agent_sandbox_the_rotated_key_reaches_the_proxy_as_soon() {
    goose_behind_the_proxy_with_a_rotating_key("proxy-sandbox", SandboxBackend::AgentSandbox).await;
}

async fn goose_behind_the_proxy_with_a_rotating_key(namespace: &str, backend: SandboxBackend) {
    let (first_key, second_key) = (fresh_key("first"), fresh_key("second"));
    let GooseBehindTheProxy {
        model,
        operator,
        ns,
        client,
    } = goose_behind_the_proxy(namespace, backend, &first_key, "Use records.", None).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &AgentRun {
            metadata: meta("proxied"),
            spec: AgentRunSpec {
                agent_ref: "migrator".into(),
                instructions: Some("Upgrade the service to Java 21.".into()),
                env: vec![
                    env_var("GOOSE_HARNESS_MODEL", "gateway"),
                    env_var("GOOSE_HARNESS_LOADS", "java-upgrade"),
                ],
                startup_deadline_seconds: Some(STARTUP_DEADLINE_SECONDS),
                active_deadline_seconds: Some(ACTIVE_DEADLINE_SECONDS),
                ..AgentRunSpec::default()
            },
            status: None,
        },
    )
    .await;

    // goose's first turn with tools: the model holds its answer.
    let startup = Duration::from_secs(u64::try_from(STARTUP_DEADLINE_SECONDS).expect("positive"));
    let held = model
        .wait_for("turn with tools", 0, startup + CONVERGE, is_chat_turn)
        .await;
    assert_eq!(
        model.requests()[held]["authorization"],
        format!("Bearer {first_key}"),
        "the proxy adds the Gateway's key in place of goose's placeholder"
    );
    // Rotate, and wait for the proxy's polled requests to carry the new key.
    let rotated = Instant::now();
    apply(&secrets, &key_secret("model-key", &second_key)).await;
    let first_new = model
        .wait_for(
            "request with the new key",
            held,
            ROTATION_BOUND,
            |request| is_poll_with(request, &second_key),
        )
        .await;
    eprintln!(
        "the proxy sent the rotated key {:?} after the Secret's update ({backend:?})",
        rotated.elapsed()
    );
    // What brought it: the Secret's version on the pod, written by the operator.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let version = secrets
        .get("model-key")
        .await
        .expect("the Secret")
        .metadata
        .resource_version;
    let annotations = pods
        .get("proxied")
        .await
        .expect("the pod")
        .metadata
        .annotations
        .unwrap_or_default();
    assert_eq!(
        annotations.get("konveyor.io/credential-version"),
        version.as_ref(),
        "{annotations:#?}"
    );
    std::fs::write(&model.release, b"").expect("release the held answer");

    let finished = wait_finished(
        &runs,
        "proxied",
        STARTUP_DEADLINE_SECONDS,
        ACTIVE_DEADLINE_SECONDS,
    )
    .await;
    let log = agent_log(&client, &ns, &finished).await;
    let status = finished.status.as_ref().expect("status");
    assert_eq!(
        status.phase,
        Some(AgentRunPhase::Succeeded),
        "{status:#?}\n{log}"
    );
    let isolation = condition(&status.conditions, "CredentialIsolation").expect("condition");
    assert_eq!(
        (isolation.status.as_str(), isolation.reason.as_str()),
        ("True", "KeyProxied")
    );

    // What reached the endpoint through the proxy: only the Gateway's keys, never the
    // placeholder; after the first request with the new key, never the old one; goose's turns
    // after the held one with the new key.
    let requests = model.requests();
    let (old, new) = (
        format!("Bearer {first_key}"),
        format!("Bearer {second_key}"),
    );
    for (index, request) in requests
        .iter()
        .enumerate()
        .filter(|(_, r)| is_from_proxy(r))
    {
        let auth = request["authorization"].as_str().unwrap_or_default();
        let expected = if index < first_new {
            [old.as_str(), new.as_str()]
        } else {
            [new.as_str(), new.as_str()]
        };
        assert!(expected.contains(&auth), "request {index}: {request}");
    }
    let later_turns: Vec<&Value> = requests[held + 1..]
        .iter()
        .filter(|r| is_chat_turn(r))
        .collect();
    assert!(!later_turns.is_empty(), "{requests:#?}");
    for turn in later_turns {
        assert_eq!(turn["authorization"], format!("Bearer {second_key}"));
    }

    // The agent container holds neither key: its environment, its directories and mounts.
    let other = log_values(&log, "harness-proxy-other-host: ");
    assert_eq!(other.len(), 1, "{log}");
    assert!(
        other[0].contains("403"),
        "the proxy forwarded for another host: {other:?}"
    );
    let decode = |prefix: &str| {
        let values = log_values(&log, prefix);
        assert_eq!(values.len(), 1, "one {prefix:?} line: {log}");
        base64::engine::general_purpose::STANDARD
            .decode(values[0].trim())
            .expect("base64")
    };
    let environ = decode("harness-environ: ");
    assert!(
        count(
            &environ,
            "KONVEYOR_LLM_API_KEY=konveyor-credential-proxy-placeholder"
        ) == 1
    );
    let mut mounts = Vec::new();
    flate2::read::GzDecoder::new(&decode("harness-mounts: ")[..])
        .read_to_end(&mut mounts)
        .expect("a gzipped tar");
    let names: Vec<String> = tar::Archive::new(&mounts[..])
        .entries()
        .expect("entries")
        .map(|entry| {
            entry
                .expect("an entry")
                .path()
                .expect("a path")
                .display()
                .to_string()
        })
        .collect();
    for expected in [
        "opt/skills/java-upgrade/SKILL.md",
        "run/konveyor/params.json",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
    }
    assert!(
        names.iter().any(|name| name.starts_with("tmp/goose-home/")),
        "goose's own files are among those searched: {names:?}"
    );
    let pod = pods.get("proxied").await.expect("the pod");
    let pod_json = serde_json::to_vec(&pod).expect("JSON");
    for key in [&first_key, &second_key] {
        assert_eq!(count(&environ, key), 0, "the agent's environment");
        assert_eq!(count(&mounts, key), 0, "a file of the agent's");
        assert_eq!(count(&pod_json, key), 0, "the pod");
        assert_eq!(count(log.as_bytes(), key), 0, "the agent's log");
    }
    // Rotated without a restart.
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default();
    let sidecar = statuses
        .iter()
        .find(|s| s.name == "credential-proxy")
        .unwrap_or_else(|| panic!("no sidecar status: {statuses:#?}"));
    assert_eq!(sidecar.restart_count, 0, "{sidecar:#?}");
    operator.stop().await;
}
