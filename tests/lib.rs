//! Shared helpers for the integration tests: run the operator in-process against the
//! shared test control plane, wait for conditions, and publish skills to its registry.
//! The tests themselves are modules of three test binaries (tests/Cargo.toml says why three).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod loopback_proxy;
pub mod sharding_support;
pub mod support;
pub mod trace_json;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_api::{
    Agent, AgentParam, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, ObjectRef, ParamType,
    SkillCard, SkillCardSpec,
};
use agentic_core::sandbox::CredentialProxyMode;
use agentic_oci::{RegistryClient, RegistryOptions};
use agentic_operator::context::{Context, RunDefaults, SandboxBackend, Settings};
use agentic_operator::controllers::{self, Readiness, Scope};
use agentic_operator::metrics::Metrics;
use agentic_operator::operator::{BackendChoice, RunOptions, Started};
use agentic_testenv::{TestEnv, TestEnvOptions};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a test waits for the operator to converge before failing.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// Whether this test binary's control plane has a real node; fixed by the first call of
/// [`env`] or [`node_env`].
static WITH_NODE: OnceLock<bool> = OnceLock::new();

/// The shared control plane of this test binary: the one with a node when the binary asked
/// for it with [`node_env`], else the one without.
pub async fn env() -> &'static TestEnv {
    let started = if *WITH_NODE.get_or_init(|| false) {
        TestEnv::shared_with_node().await
    } else {
        TestEnv::shared().await
    };
    started.expect("the test control plane starts (run `make test`, which builds it)")
}

/// The shared control plane with a real node (kubelet, containerd, runc): pods really run.
/// Every test of a binary that uses it calls this first, so that [`env`] and the helpers
/// built on it ([`scenario`], [`push`], [`registry`]) use the same control plane.
pub async fn node_env() -> &'static TestEnv {
    assert!(
        *WITH_NODE.get_or_init(|| true),
        "this test binary already uses the control plane without a node"
    );
    env().await
}

/// A fresh namespace on the control plane with a node, and the operator watching it.
pub async fn node_scenario(prefix: &str, backend: SandboxBackend) -> (String, Client, Operator) {
    node_env().await;
    scenario(prefix, backend).await
}

/// The stub agent image of the node (`hack/stub-agent`), pinned by digest.
pub async fn stub_agent() -> String {
    node_env()
        .await
        .images()
        .expect("the node's images")
        .stub_agent
        .clone()
}

/// A cluster for workloads ([`TestEnvOptions::with_workloads`]) of the calling test's own,
/// stopped when dropped, and its turn on the machine. The tests that install the chart or the
/// kustomize configuration each install the cluster-wide CRDs and the operator's namespace,
/// so each gets a fresh cluster; and a machine runs one test node at a time, so they take
/// turns.
pub struct WorkloadsCluster {
    /// Declared before the turn, so the cluster and its node stop before the next test's start.
    env: TestEnv,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for WorkloadsCluster {
    type Target = TestEnv;

    fn deref(&self) -> &TestEnv {
        &self.env
    }
}

/// Waits for this binary's turn, then starts a [`WorkloadsCluster`].
pub async fn workloads_cluster() -> WorkloadsCluster {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let env = TestEnv::start(TestEnvOptions {
        with_agent_sandbox: true,
        with_registry: true,
        with_workloads: true,
        ..TestEnvOptions::default()
    })
    .await
    .expect("the test cluster for workloads starts (run `make test`, which builds it)");
    WorkloadsCluster { env, _turn: turn }
}

/// The operator's controllers running in this process, watching one namespace.
pub struct Operator {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
}

/// The settings of [`Operator`] only some tests set.
#[derive(Default)]
struct Launch {
    default_skills_namespace: Option<String>,
    /// `--operator-image` (which git skills' init containers run) and `--credential-proxy`.
    own_image: Option<(agentic_core::sandbox::SkillFetcher, CredentialProxyMode)>,
    skill_prefetch: Option<agentic_core::prefetch::PrefetchSettings>,
}

impl Operator {
    /// Starts the controllers for `namespace` with the given sandbox backend; `insecure`
    /// lists the registries and git hosts reached over plain HTTP.
    pub fn start(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
    ) -> Self {
        Self::start_with(client, namespace, backend, insecure, RunDefaults::default())
    }

    /// Like [`Operator::start`], with the operator's run defaults (its `run` flags).
    pub fn start_with(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
        run_defaults: RunDefaults,
    ) -> Self {
        let namespaces = vec![namespace.to_string()];
        Self::launch(
            client,
            namespaces,
            backend,
            insecure,
            run_defaults,
            Launch::default(),
        )
    }

    /// Like [`Operator::start`], told its own image (`--operator-image`), which the init
    /// containers of git skills run.
    pub fn start_with_operator_image(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
        operator_image: &str,
    ) -> Self {
        let fetcher = agentic_core::sandbox::SkillFetcher {
            image: operator_image.to_string(),
            insecure_git_hosts: insecure.clone(),
        };
        let namespaces = vec![namespace.to_string()];
        let run_defaults = RunDefaults::default();
        Self::launch(
            client,
            namespaces,
            backend,
            insecure,
            run_defaults,
            Launch {
                own_image: Some((fetcher, CredentialProxyMode::default())),
                ..Launch::default()
            },
        )
    }

    /// Like [`Operator::start`], with skill prefetch on as `prefetch` says; its image is the
    /// operator's for git skills too.
    pub fn start_prefetching(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
        prefetch: agentic_core::prefetch::PrefetchSettings,
    ) -> Self {
        let fetcher = agentic_core::sandbox::SkillFetcher {
            image: prefetch.image.clone(),
            insecure_git_hosts: insecure.clone(),
        };
        Self::launch(
            client,
            vec![namespace.to_string()],
            backend,
            insecure,
            RunDefaults::default(),
            Launch {
                own_image: Some((fetcher, CredentialProxyMode::default())),
                skill_prefetch: Some(prefetch),
                ..Launch::default()
            },
        )
    }

    /// Like [`Operator::start_with_operator_image`], with `--credential-proxy=<mode>`.
    pub fn start_with_credential_proxy(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
        operator_image: &str,
        mode: CredentialProxyMode,
    ) -> Self {
        let fetcher = agentic_core::sandbox::SkillFetcher {
            image: operator_image.to_string(),
            insecure_git_hosts: insecure.clone(),
        };
        Self::launch(
            client,
            vec![namespace.to_string()],
            backend,
            insecure,
            RunDefaults::default(),
            Launch {
                own_image: Some((fetcher, mode)),
                ..Launch::default()
            },
        )
    }

    /// Like [`Operator::start`] with the shared registry, the orphan sweep passing every
    /// `interval` (the first pass as soon as the runs are listed).
    pub async fn sweeping(
        client: &Client,
        namespace: &str,
        backend: SandboxBackend,
        interval: Duration,
    ) -> Self {
        Self::start_with(
            client.clone(),
            namespace,
            backend,
            vec![registry().await],
            RunDefaults {
                orphan_sweep_interval: Some(interval),
                ..RunDefaults::default()
            },
        )
    }

    /// Starts the controllers for several namespaces, with cluster-wide default skills from
    /// `default_skills_namespace`.
    pub fn start_watching(
        client: Client,
        namespaces: Vec<String>,
        backend: SandboxBackend,
        insecure: Vec<String>,
        default_skills_namespace: Option<String>,
    ) -> Self {
        let run_defaults = RunDefaults::default();
        Self::launch(
            client,
            namespaces,
            backend,
            insecure,
            run_defaults,
            Launch {
                default_skills_namespace,
                ..Launch::default()
            },
        )
    }

    fn launch(
        client: Client,
        namespaces: Vec<String>,
        backend: SandboxBackend,
        insecure: Vec<String>,
        run_defaults: RunDefaults,
        launch: Launch,
    ) -> Self {
        let Launch {
            default_skills_namespace,
            own_image,
            skill_prefetch,
        } = launch;
        let (skill_fetcher, mode) = own_image
            .map_or((None, CredentialProxyMode::default()), |(fetcher, mode)| {
                (Some(fetcher), mode)
            });
        let metrics = Arc::new(Metrics::default());
        let readiness = Arc::new(Readiness::default());
        let settings = Settings {
            registry: RegistryClient::new(RegistryOptions {
                insecure_registries: insecure.clone(),
                ..RegistryOptions::default()
            })
            .expect("registry client"),
            git: agentic_git::GitOptions {
                insecure_hosts: insecure,
                ..agentic_git::GitOptions::default()
            },
            sandbox_backend: backend,
            tag_refresh_interval: Duration::from_secs(2),
            run_defaults,
            reconcile_concurrency: agentic_operator::context::DEFAULT_RECONCILE_CONCURRENCY,
            default_skills_namespace,
            credential_proxy: agentic_core::sandbox::CredentialProxy {
                mode,
                image: skill_fetcher.as_ref().map(|fetcher| fetcher.image.clone()),
            },
            skill_fetcher,
            skill_prefetch,
            trace_receiver: None,
            trust_policy_list_wait: agentic_operator::context::TRUST_POLICY_LIST_WAIT,
            trace_export: None,
        };
        let ctx = Arc::new(Context::new(client, settings, metrics.clone()));
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(controllers::run_until_shutdown(
            ctx,
            Scope::Namespaces(namespaces),
            readiness.clone(),
            rx,
        ));
        Self {
            stop,
            task,
            metrics,
            readiness,
        }
    }

    /// Stops taking work and waits for in-flight reconciles to finish.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the controllers stop within 30s")
            .expect("the controllers task does not panic");
    }
}

/// Asks the operator started by `operator::start` to shut down (`stop` is the sender of its
/// shutdown channel) and expects it to stop cleanly within 30 seconds.
pub async fn stop_cleanly(stop: watch::Sender<bool>, started: Started) {
    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(30), started.finished())
        .await
        .expect("the operator stops within 30s")
        .expect("the operator stops cleanly");
}

/// A fresh namespace named after `prefix`, an admin client, and the operator's controllers
/// watching that namespace with `backend`, trusting the shared registry over plain HTTP.
pub async fn scenario(prefix: &str, backend: SandboxBackend) -> (String, Client, Operator) {
    let env = env().await;
    let namespace = env.namespace(prefix).await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(client.clone(), &namespace, backend, vec![registry().await]);
    (namespace, client, operator)
}

/// Applies `object` as a user would with `kubectl apply`
/// ([`agentic_fixtures::apply`]).
pub async fn apply<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    agentic_fixtures::apply(api, object)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

pub use agentic_fixtures::LLM_KEY;

/// The fake LLM endpoint of this test binary ([`agentic_fixtures::llm_server`]).
pub fn llm_server() -> &'static str {
    agentic_fixtures::llm_server().unwrap_or_else(|e| panic!("{e:#}"))
}

/// The Gateway `llm` and its Secret `llm-key`, which most run tests need and none looks into
/// ([`agentic_fixtures::llm_gateway`]).
pub async fn llm_gateway(client: &Client, ns: &str) {
    agentic_fixtures::llm_gateway(client, ns)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// An object of `kind` (`v1` kinds: `ConfigMap`, `Secret`, `Pod`...) named `name` as the
/// operator makes them for the AgentRun `run` with the UID `run_uid`: labelled for the run,
/// with the run as its controller. For objects of runs that do not exist (orphans).
pub fn run_object(kind: &str, name: &str, run: &str, run_uid: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": kind,
        "metadata": {
            "name": name,
            "labels": {agentic_core::sandbox::RUN_LABEL: run},
            "ownerReferences": [{
                "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
                "name": run, "uid": run_uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
    })
}

/// Polls until `name` no longer exists; panics after [`CONVERGE`].
pub async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while api.get_opt(name).await.expect("get").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: timed out waiting for {what} to be deleted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls `name` until `check` accepts it; panics with the last state after [`CONVERGE`].
pub async fn wait_for<K, F>(api: &Api<K>, name: &str, what: &str, check: F) -> K
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
    F: Fn(&K) -> bool,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        if let Some(obj) = api.get_opt(name).await.expect("get") {
            if check(&obj) {
                return obj;
            }
            last = Some(obj);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name}: timed out waiting for {what}; last state: {last:#?}");
}

pub use agentic_fixtures::{operator_command, operator_command_watching};

/// How tests run the whole operator (`operator::start`): watching `ns` with the pod backend,
/// probes and metrics on free loopback ports, no insecure registries, no leader election, and
/// the command line's defaults otherwise. Tests change what they need with `..run_options(ns)`.
pub fn run_options(ns: &str) -> RunOptions {
    RunOptions {
        scope: Scope::Namespaces(vec![ns.to_owned()]),
        insecure_registries: Vec::new(),
        insecure_git_hosts: Vec::new(),
        sandbox_backend: BackendChoice::Pod,
        health_addr: ([127, 0, 0, 1], 0).into(),
        metrics_addr: ([127, 0, 0, 1], 0).into(),
        secure_metrics: None,
        leader_election: None,
        shards: None,
        tag_refresh_interval: Duration::from_secs(60),
        run_defaults: RunDefaults::default(),
        reconcile_concurrency: agentic_operator::context::DEFAULT_RECONCILE_CONCURRENCY,
        default_skills_namespace: None,
        operator_image: None,
        credential_proxy: CredentialProxyMode::default(),
        skill_prefetch: None,
        watch_failure_timeout: None,
        trace_collector: None,
        otlp: None,
    }
}

/// The Events in `ns` about the `kind` named `name`.
pub async fn events_about(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&kube::api::ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect()
}

/// Polls `probe` until it returns a value; panics after [`CONVERGE`].
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The trace of the run `run` in `jaeger` (the user's collector) once it holds the run's
/// root span, `AgentRun <run>`. The operator sends that span last, at the status write that
/// ends the run; its forwarder sends in order and Jaeger stores a request before answering
/// it, so from then on every span forwarded before it is there too.
pub async fn run_trace_in(
    jaeger: &agentic_testenv::Jaeger,
    run: &str,
    trace: &agentic_core::trace::RunTrace,
) -> serde_json::Value {
    let root_name = format!("AgentRun {run}");
    let trace_id = trace.trace_id_hex();
    eventually("the run's root span in jaeger", || async {
        let stored = jaeger.trace(&trace_id).await.ok().flatten()?;
        trace_json::spans(&stored)
            .iter()
            .any(|span| span["name"] == root_name.as_str())
            .then_some(stored)
    })
    .await
}

/// Waits until the run `name` is in `phase`.
pub async fn wait_phase(runs: &Api<AgentRun>, name: &str, phase: AgentRunPhase) -> AgentRun {
    wait_for(runs, name, &format!("phase {phase:?}"), |r: &AgentRun| {
        r.status.as_ref().and_then(|s| s.phase) == Some(phase)
    })
    .await
}

/// Waits until the run `name` has recorded its sandbox.
pub async fn wait_for_sandbox(runs: &Api<AgentRun>, name: &str) -> AgentRun {
    wait_for(runs, name, "a sandbox", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| s.sandbox_name.is_some())
    })
    .await
}

/// Waits until the Agent `name` is Ready.
pub async fn wait_agent_ready(agents: &Api<Agent>, name: &str) -> Agent {
    wait_for(agents, name, "Agent Ready", |a: &Agent| {
        a.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "True", "AgentReady"))
    })
    .await
}

/// The spec of an Agent running `image` on the Gateway `llm` ([`llm_gateway`]), its skills
/// delivered natively: what most run tests start from.
pub fn llm_agent_spec(image: impl Into<String>) -> AgentSpec {
    AgentSpec {
        image: image.into(),
        gateways: vec![ObjectRef { name: "llm".into() }],
        skill_delivery: "native".into(),
        ..AgentSpec::default()
    }
}

/// The environment variable `name` set to `value`.
pub fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// The params of the migrator Agent of the run tests: `target`, a required number, and
/// `dry_run`, a boolean that is false by default.
pub fn migrator_params() -> Vec<AgentParam> {
    vec![
        AgentParam {
            name: "target".into(),
            param_type: ParamType::Number,
            required: Some(true),
            ..AgentParam::default()
        },
        AgentParam {
            name: "dry_run".into(),
            param_type: ParamType::Boolean,
            default: Some("false".into()),
            ..AgentParam::default()
        },
    ]
}

/// The Gateway `llm` ([`llm_gateway`]) and the Agent `name` with `spec`; waits until the
/// Agent is Ready and returns it.
pub async fn ready_agent(client: &Client, ns: &str, name: &str, spec: AgentSpec) -> Agent {
    llm_gateway(client, ns).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), ns);
    let agent = Agent {
        metadata: meta(name),
        spec,
        status: None,
    };
    apply(&agents, &agent).await;
    wait_agent_ready(&agents, name).await
}

/// Plays the kubelet for the sandbox pod `name` (no kubelet runs in the tests): the agent
/// container runs (`None`), then exits with the given code.
pub async fn kubelet(pods: &Api<Pod>, name: &str, exit_code: Option<i32>) {
    let started = "2026-11-29T12:00:00Z";
    let state = match exit_code {
        None => json!({"running": {"startedAt": started}}),
        Some(code) => json!({"terminated": {
            "exitCode": code, "startedAt": started, "finishedAt": "2026-11-29T12:05:00Z",
            "reason": if code == 0 { "Completed" } else { "Error" },
            "message": format!("agent exited {code}"),
        }}),
    };
    let phase = match exit_code {
        None => "Running",
        Some(0) => "Succeeded",
        Some(_) => "Failed",
    };
    let status = json!({"status": {
        "phase": phase,
        "containerStatuses": [{
            "name": "agent", "image": "harness.invalid/agent:1", "imageID": "",
            "ready": exit_code.is_none(), "restartCount": 0, "state": state,
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch pod status");
}

/// The metadata of an object named `name`, the rest left to the API server.
pub fn meta(name: &str) -> kube::api::ObjectMeta {
    kube::api::ObjectMeta {
        name: Some(name.to_string()),
        ..kube::api::ObjectMeta::default()
    }
}

/// A run named `name` of the Agent `agent`, nothing else set.
pub fn agent_run(name: &str, agent: &str) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// The agent container's log of the run's pod (the node's tests, where pods really run).
pub async fn agent_log(client: &Client, ns: &str, run: &AgentRun) -> String {
    let pod = run
        .status
        .as_ref()
        .and_then(|status| status.sandbox_name.clone())
        .unwrap_or_else(|| panic!("the run names its sandbox: {run:#?}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.logs(
        &pod,
        &kube::api::LogParams {
            container: Some("agent".into()),
            ..kube::api::LogParams::default()
        },
    )
    .await
    .unwrap_or_else(|error| panic!("reading the log of pod {pod}: {error}"))
}

/// The values of the log lines that start with `prefix`: what the stub agent printed.
pub fn log_values<'a>(log: &'a str, prefix: &str) -> Vec<&'a str> {
    log.lines()
        .filter_map(|line| line.strip_prefix(prefix))
        .collect()
}

/// The condition of `type_`, if present.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition `type_` has `status` and `reason`.
pub fn has_condition(conditions: &[Condition], type_: &str, status: &str, reason: &str) -> bool {
    condition(conditions, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Whether the card's `Ready` condition has `status` and `reason`.
pub fn card_ready_is(card: &SkillCard, status: &str, reason: &str) -> bool {
    card.status
        .as_ref()
        .is_some_and(|s| has_condition(&s.conditions, "Ready", status, reason))
}

/// The SkillCard `name` of the image `image` (by tag or digest), the API's defaults otherwise.
pub fn image_card(name: &str, image: &str) -> SkillCard {
    SkillCard {
        metadata: meta(name),
        spec: SkillCardSpec {
            image: Some(image.to_string()),
            ..SkillCardSpec::default()
        },
        status: None,
    }
}

/// Writes a skill directory `<parent>/<name>/SKILL.md` with valid frontmatter
/// ([`agentic_fixtures::write_skill`]).
pub fn write_skill(parent: &Path, name: &str, description: &str) -> PathBuf {
    agentic_fixtures::write_skill(parent, name, description).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Every file and directory below `dir` (not `dir` itself) as a path relative to it, sorted.
/// Symlinks are listed, never followed. The one walker of the tests: what a skill holds,
/// what a command wrote, which scripts and samples the repository has.
pub fn paths_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", current.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", current.display()));
            let path = entry.path();
            let is_dir = entry
                .file_type()
                .unwrap_or_else(|e| panic!("cannot stat {}: {e}", path.display()))
                .is_dir();
            if is_dir {
                pending.push(path.clone());
            }
            let relative = path.strip_prefix(dir).expect("a path below the walked one");
            found.push(relative.to_path_buf());
        }
    }
    found.sort();
    found
}

/// The files (everything but directories) below `dir`, relative to it, sorted
/// ([`paths_below`]).
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    paths_below(dir)
        .into_iter()
        .filter(|relative| !dir.join(relative).is_dir())
        .collect()
}

/// Packs `dirs` and pushes them to the test registry as `repo:tag`; returns the pushed
/// reference as the registry reports it (`host/repo:tag@sha256:…`).
pub async fn push(dirs: &[PathBuf], repo_tag: &str) -> String {
    push_to(&registry().await, dirs, repo_tag).await
}

/// Like [`push`], to the plain-HTTP registry at `registry` ([`agentic_fixtures::push_to`]).
pub async fn push_to(registry: &str, dirs: &[PathBuf], repo_tag: &str) -> String {
    agentic_fixtures::push_to(registry, dirs, repo_tag)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// The registry address, for the operator's insecure list.
pub async fn registry() -> String {
    env()
        .await
        .registry_addr()
        .expect("the shared env has a registry")
}

/// The workspace's `agentic-operator` binary. Built once per test binary with `cargo build`
/// (a no-op when it is up to date), so a test never runs a missing or stale binary whatever
/// was built before it.
pub fn operator_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let mut cargo = Command::new(env!("CARGO"));
        // Cargo describes this test's package in the environment; a build that sees those
        // variables fingerprints differently (ring's build script watches
        // CARGO_MANIFEST_DIR) and would rebuild half the tree, twice per test run.
        for (name, _) in std::env::vars_os() {
            let package_var = name.to_str().is_some_and(|name| {
                [
                    "CARGO_MANIFEST_",
                    "CARGO_PKG_",
                    "CARGO_BIN_EXE_",
                    "CARGO_CRATE_",
                    "CARGO_PRIMARY_",
                ]
                .iter()
                .any(|prefix| name.starts_with(prefix))
            });
            if package_var {
                cargo.env_remove(name);
            }
        }
        let out = cargo
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--package",
                "agentic-operator",
                "--bin",
                "agentic-operator",
                "--message-format=json-render-diagnostics",
            ])
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building agentic-operator failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|message| message["target"]["name"] == "agentic-operator")
            .find_map(|message| message["executable"].as_str().map(PathBuf::from))
            .expect("cargo reports the agentic-operator executable")
    })
}

/// A GET of the operator's probe and metrics endpoints (plain HTTP): the status code and
/// the body.
pub use agentic_testenv::http_get;

/// The operator's pods as a cluster runs them (a chart or the kustomize configuration on the
/// control plane with workloads, [`workloads_cluster`]), watched from the side:
/// every log line of their `operator` container, and every moment at which two of them could
/// act at once.
///
/// A pod acts when its container runs and it either does not elect a leader (no
/// `--leader-elect` argument) or holds the Lease. The watch polls the Lease, then the pods, so
/// a holder seen next to another acting pod was acting at the same time as it.
pub struct OperatorWatch {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    overlaps: Arc<std::sync::Mutex<Vec<String>>>,
    logs: Arc<std::sync::Mutex<Vec<LogLine>>>,
}

/// One line an operator pod logged.
#[derive(Debug, Clone)]
pub struct LogLine {
    /// When the test read it.
    pub read: tokio::time::Instant,
    pub pod: String,
    pub line: String,
}

/// The operator's container in the chart and the kustomize configuration.
const OPERATOR_CONTAINER: &str = "operator";
/// How often [`OperatorWatch`] looks: far shorter than any overlap a rolling update makes
/// (the new pod's first readiness probe, then the old pod's termination).
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

impl OperatorWatch {
    /// Watches the pods matching `selector` in `namespace` and the Lease `lease` there.
    pub fn start(client: Client, namespace: &str, selector: &str, lease: &str) -> OperatorWatch {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client, namespace);
        let (stop, mut stopped) = watch::channel(false);
        let overlaps = Arc::new(std::sync::Mutex::new(Vec::new()));
        let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (selector, lease) = (selector.to_owned(), lease.to_owned());
        let task = {
            let (overlaps, logs) = (overlaps.clone(), logs.clone());
            tokio::spawn(async move {
                let mut followed = std::collections::BTreeSet::new();
                let list = kube::api::ListParams::default().labels(&selector);
                loop {
                    let holder = match leases.get_opt(&lease).await {
                        Ok(found) => found
                            .and_then(|lease| lease.spec)
                            .and_then(|spec| spec.holder_identity),
                        Err(_) => None,
                    };
                    if let Ok(listed) = pods.list(&list).await {
                        let mut acting = Vec::new();
                        for pod in &listed.items {
                            let name = pod.metadata.name.clone().unwrap_or_default();
                            if !operator_running(pod) {
                                continue;
                            }
                            if followed.insert(name.clone()) {
                                tokio::spawn(follow_log(pods.clone(), name.clone(), logs.clone()));
                            }
                            if !elects(pod) || holder.as_deref() == Some(name.as_str()) {
                                acting.push(name);
                            }
                        }
                        if acting.len() > 1 {
                            overlaps.lock().expect("not poisoned").push(format!(
                                "{acting:?} acting at once (Lease holder {holder:?})"
                            ));
                        }
                    }
                    tokio::select! {
                        () = tokio::time::sleep(WATCH_INTERVAL) => {}
                        _ = stopped.changed() => return,
                    }
                }
            })
        };
        OperatorWatch {
            stop,
            task,
            overlaps,
            logs,
        }
    }

    /// Every moment seen so far at which two operators acted at once.
    pub fn overlaps(&self) -> Vec<String> {
        self.overlaps.lock().expect("not poisoned").clone()
    }

    /// Every line logged so far.
    pub fn logs(&self) -> Vec<LogLine> {
        self.logs.lock().expect("not poisoned").clone()
    }

    /// Stops watching; the log lines already read stay.
    pub async fn stop(self) -> Vec<LogLine> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        self.logs.lock().expect("not poisoned").clone()
    }
}

fn operator_container_state(pod: &Pod) -> Option<k8s_openapi::api::core::v1::ContainerState> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|status| status.name == OPERATOR_CONTAINER)?
        .state
        .clone()
}

/// Whether the operator container runs (and so may act).
fn operator_running(pod: &Pod) -> bool {
    operator_container_state(pod).is_some_and(|state| state.running.is_some())
}

/// Whether the pod's operator elects a leader before acting.
fn elects(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .filter(|container| container.name == OPERATOR_CONTAINER)
            .flat_map(|container| container.args.iter().flatten())
            .any(|arg| arg == "--leader-elect")
    })
}

/// Appends every line the operator container of `pod` logs to `logs`, until it stops.
async fn follow_log(pods: Api<Pod>, pod: String, logs: Arc<std::sync::Mutex<Vec<LogLine>>>) {
    use futures::{AsyncBufReadExt as _, TryStreamExt as _};
    let params = kube::api::LogParams {
        container: Some(OPERATOR_CONTAINER.to_owned()),
        follow: true,
        ..kube::api::LogParams::default()
    };
    let Ok(stream) = pods.log_stream(&pod, &params).await else {
        return;
    };
    let mut lines = stream.lines();
    while let Ok(Some(line)) = lines.try_next().await {
        logs.lock().expect("not poisoned").push(LogLine {
            read: tokio::time::Instant::now(),
            pod: pod.clone(),
            line,
        });
    }
}

/// The lines at WARN or above (the text log format) in `logs`.
pub fn warnings(logs: &[LogLine]) -> Vec<String> {
    logs.iter()
        .filter(|log| log.line.contains(" WARN ") || log.line.contains(" ERROR "))
        .map(|log| format!("{}: {}", log.pod, log.line))
        .collect()
}

/// Runs `agentic-operator args…` with no docker credentials of the user's in reach.
pub fn cli(args: &[&str]) -> Output {
    cli_with_env(args, &[])
}

/// Like [`cli`], with the environment variables `env` set (e.g. `COSIGN_PASSWORD`).
pub fn cli_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let docker_config = tempfile::tempdir().expect("tempdir");
    Command::new(operator_binary())
        .args(args)
        .env("DOCKER_CONFIG", docker_config.path())
        .envs(env.iter().copied())
        .output()
        .expect("agentic-operator runs")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Pushes the skill directories `dirs` to `reference` over plain HTTP with `skill push`, and
/// returns the reference it printed, pinned by digest.
pub fn push_insecure(dirs: &[&Path], reference: &str) -> String {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let mut args = vec!["skill", "push", "--insecure"];
    args.extend(dirs.iter().map(String::as_str));
    args.push(reference);
    let pushed = cli(&args);
    assert_eq!(pushed.status.code(), Some(0), "{}", stderr(&pushed));
    stdout(&pushed)
        .lines()
        .last()
        .expect("a reference")
        .to_owned()
}

/// The password of the cosign keys the tests make.
pub const COSIGN_TEST_PASSWORD: &str = "test-only-password";

/// Runs cosign (COSIGN_BIN, from `hack/install-cosign.sh`) in `dir` with
/// [`COSIGN_TEST_PASSWORD`], every non-loopback address sent to a closed loopback port, and
/// returns what it did.
pub fn cosign_output(dir: &Path, args: &[&str]) -> Output {
    let cosign =
        std::env::var("COSIGN_BIN").expect("COSIGN_BIN (hack/install-cosign.sh | tail -n1)");
    Command::new(cosign)
        .args(args)
        .current_dir(dir)
        .env("COSIGN_PASSWORD", COSIGN_TEST_PASSWORD)
        .env("HOME", dir)
        .env("TUF_ROOT", dir.join("tuf"))
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .expect("cosign runs")
}

/// [`cosign_output`] of a command that must succeed.
pub fn cosign(dir: &Path, args: &[&str]) {
    let out = cosign_output(dir, args);
    assert!(out.status.success(), "cosign {args:?}: {}", stderr(&out));
}

/// `sha256:<hex>` of the DER in a PEM block's body: how `skill verify` and `skill push --sign`
/// name a public key.
pub fn pem_fingerprint(pem: &str) -> String {
    use base64::Engine as _;
    let der = base64::engine::general_purpose::STANDARD
        .decode(
            pem.lines()
                .filter(|line| !line.starts_with("-----"))
                .collect::<String>(),
        )
        .expect("a base64 PEM body");
    format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&der))
    )
}

/// Upstream goose's binary (`GOOSE_BIN`, which `make test` sets from
/// `hack/install-goose.sh`); without it a goose test fails rather than checking nothing.
pub fn goose_bin() -> PathBuf {
    match std::env::var_os("GOOSE_BIN") {
        Some(bin) if !bin.is_empty() => PathBuf::from(bin),
        _ => panic!(
            "GOOSE_BIN is not set. Run `make test`, or set it to upstream's goose: \
             GOOSE_BIN=\"$(hack/install-goose.sh | tail -n1)\""
        ),
    }
}

/// Waits until the run `name` has finished. The operator ends it by the run's startup
/// deadline plus its active deadline at the latest (both in seconds, as the run's spec
/// gives them); [`CONVERGE`] covers the operator noticing.
pub async fn wait_finished(
    runs: &Api<AgentRun>,
    name: &str,
    startup_deadline_seconds: i32,
    active_deadline_seconds: i64,
) -> AgentRun {
    let bound = Duration::from_secs(
        u64::try_from(startup_deadline_seconds).expect("positive")
            + u64::try_from(active_deadline_seconds).expect("positive"),
    ) + CONVERGE;
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let run = runs.get(name).await.expect("get the run");
        let phase = run.status.as_ref().and_then(|status| status.phase);
        if matches!(
            phase,
            Some(AgentRunPhase::Succeeded | AgentRunPhase::Failed)
        ) {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} did not finish within {bound:?}: {run:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The run `name` of the Agent `agent` running the goose test image: its scripted model
/// calls `load_skill` with each of `loads` in order (`GOOSE_HARNESS_LOADS`), then answers.
pub fn goose_run(
    name: &str,
    agent: &str,
    instructions: &str,
    loads: &[&str],
    (startup_deadline_seconds, active_deadline_seconds): (i32, i64),
) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            instructions: Some(instructions.into()),
            env: vec![EnvVar {
                name: "GOOSE_HARNESS_LOADS".into(),
                value: Some(loads.join(" ")),
                ..EnvVar::default()
            }],
            startup_deadline_seconds: Some(startup_deadline_seconds),
            active_deadline_seconds: Some(active_deadline_seconds),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}
