//! Shared helpers for the integration tests: run the operator in-process against the
//! shared test control plane, wait for conditions, and publish skills to its registry.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentic_oci::{RegistryAuth, RegistryOptions};
use agentic_operator::context::{Context, SandboxBackend, Settings};
use agentic_operator::controllers::{self, Readiness, Scope};
use agentic_operator::metrics::Metrics;
use agentic_testenv::TestEnv;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a test waits for the operator to converge before failing.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// The shared control plane of this test binary.
pub async fn env() -> &'static TestEnv {
    TestEnv::shared()
        .await
        .expect("the test control plane starts (run `make test`, which builds it)")
}

/// The operator's controllers running in this process, watching one namespace.
pub struct Operator {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
}

impl Operator {
    /// Starts the controllers for `namespace` with the given sandbox backend.
    pub fn start(
        client: Client,
        namespace: &str,
        backend: SandboxBackend,
        insecure: Vec<String>,
    ) -> Self {
        let metrics = Arc::new(Metrics::default());
        let readiness = Arc::new(Readiness::default());
        let settings = Settings {
            registry: RegistryOptions {
                insecure_registries: insecure,
                ..RegistryOptions::default()
            },
            sandbox_backend: backend,
            tag_refresh_interval: Duration::from_secs(2),
        };
        let ctx = Arc::new(Context::new(client, settings, metrics.clone()));
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(controllers::run(
            ctx,
            Scope::Namespaces(vec![namespace.to_string()]),
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

/// Applies `object` with a test field manager (as a user would with `kubectl apply`).
pub async fn apply<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().expect("object has a name");
    api.patch(
        &name,
        &PatchParams::apply("integration-test").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"))
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

/// The condition of `type_`, if present.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition `type_` has `status` and `reason`.
pub fn has_condition(conditions: &[Condition], type_: &str, status: &str, reason: &str) -> bool {
    condition(conditions, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Writes a skill directory `<parent>/<name>/SKILL.md` with valid frontmatter.
pub fn write_skill(parent: &Path, name: &str, description: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).expect("create skill dir");
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nUse it well.\n"),
    )
    .expect("write SKILL.md");
    dir
}

/// Packs `dirs` and pushes them to the test registry as `repo:tag`; returns the pushed
/// reference as the registry reports it (`host/repo:tag@sha256:…`).
pub async fn push(dirs: &[PathBuf], repo_tag: &str) -> String {
    let registry = env()
        .await
        .registry_addr()
        .expect("the shared env has a registry");
    let reference = format!("{registry}/{repo_tag}");
    let image = agentic_oci::pack_skills(dirs).expect("pack skills");
    let options = RegistryOptions {
        insecure_registries: vec![registry],
        ..RegistryOptions::default()
    };
    agentic_oci::push_image(&image, &reference, &RegistryAuth::Anonymous, &options)
        .await
        .expect("push skill image")
}

/// The registry address, for the operator's insecure list.
pub async fn registry() -> String {
    env()
        .await
        .registry_addr()
        .expect("the shared env has a registry")
}
