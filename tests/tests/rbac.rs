//! The chart's RBAC, proved on a real API server: the operator runs as the chart's
//! ServiceAccount (through impersonation) and takes skills to a finished run with either
//! sandbox backend, without a single forbidden request, and is refused what the chart does
//! not grant. With `metrics.secure`, the same RBAC lets it review the tokens of `/metrics`
//! callers, and the chart's metrics-reader role is what admits them.

use std::time::Duration;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentWorkflow, AgentWorkflowRun, Gateway, SkillCard,
};
use agentic_integration_tests::support;
use agentic_integration_tests::{
    CONVERGE, apply, env, http_get, kubelet, push, registry, run_object, run_options, stop_cleanly,
    wait_agent_ready, wait_for, wait_for_sandbox, wait_gone, wait_phase, write_skill,
};
use agentic_operator::context::SandboxBackend;
use agentic_operator::operator::{self, BackendChoice, LEASE_NAME, LeaderElection, RunOptions};
use agentic_operator::server::SecureMetrics;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::{helm_template, kind, meta, parse_yaml_stream, run_ok};
use tokio::sync::watch;

/// The chart's RBAC applied for one release, and a client acting as its ServiceAccount.
struct Release {
    /// The release namespace: the ServiceAccount and the leader-election Lease live here.
    namespace: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    user: String,
    /// The API server as the operator's ServiceAccount sees it.
    client: Client,
    /// The Lease the chart's Deployment tells the operator to hold, when it elects a leader.
    lease: Option<String>,
}

/// Renders the chart as release `<namespace>` (unique, so are its cluster-scoped names) with
/// `set` and applies its ServiceAccount and RBAC objects, nothing else, as the admin.
async fn install_rbac(admin: &Client, namespace: &str, set: &[&str]) -> Release {
    let mut helm = helm_template(namespace, namespace);
    for value in set {
        helm.args(["--set-json", value]);
    }
    let objects = parse_yaml_stream(&run_ok(&mut helm), "helm template");

    let mut service_account = None;
    let mut lease = None;
    for rendered in &objects {
        let ns = meta(rendered, "namespace").to_owned();
        match kind(rendered) {
            "ServiceAccount" => {
                service_account = Some(meta(rendered, "name").to_owned());
                apply_rendered(
                    Api::<ServiceAccount>::namespaced(admin.clone(), &ns),
                    rendered,
                )
                .await;
            }
            "Role" => apply_rendered(Api::<Role>::namespaced(admin.clone(), &ns), rendered).await,
            "RoleBinding" => {
                apply_rendered(Api::<RoleBinding>::namespaced(admin.clone(), &ns), rendered).await;
            }
            "ClusterRole" => apply_rendered(Api::<ClusterRole>::all(admin.clone()), rendered).await,
            "ClusterRoleBinding" => {
                apply_rendered(Api::<ClusterRoleBinding>::all(admin.clone()), rendered).await;
            }
            "Deployment" => {
                lease = rendered["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|arg| arg.as_str()?.strip_prefix("--leader-election-lease="))
                    .map(str::to_owned)
                    .next();
            }
            _ => {}
        }
    }
    let name = service_account.expect("the chart renders a ServiceAccount");
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let mut config = env().await.kube_config();
    config.auth_info.impersonate = Some(user.clone());
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ]);
    let client = Client::try_from(config).expect("an impersonating client");
    Release {
        namespace: namespace.to_owned(),
        user,
        client,
        lease,
    }
}

/// Waits until listing through `api` is allowed: the API server's RBAC cache follows new
/// bindings within moments, not at once.
async fn until_listable<K>(what: &str, api: &Api<K>)
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        match api.list(&ListParams::default()).await {
            Ok(_) => return,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{what} is still refused: {e}"),
        }
    }
}

/// Asserts that the API server refused `outcome` as forbidden (403), not for another reason.
fn assert_forbidden<T: std::fmt::Debug>(what: &str, outcome: Result<T, kube::Error>) {
    match outcome {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: want 403 Forbidden, got {other:?}"),
    }
}

/// `value` as a typed object; panics naming it when it does not fit the type.
fn object<K: DeserializeOwned>(value: Value) -> K {
    let what = format!("{} {}", kind(&value), meta(&value, "name"));
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{what} is malformed: {e}"))
}

/// Applies the rendered object `rendered` through `api`, as the admin would with kubectl.
async fn apply_rendered<K>(api: Api<K>, rendered: &Value)
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    apply(&api, &object::<K>(rendered.clone())).await;
}

/// An image skill, an inline skill, a Gateway with its Secret and an Agent using them, created
/// by the admin as users would.
async fn skills_and_agent(admin: &Client, ns: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let pushed = push(&[dir], &format!("{ns}/java:1")).await;
    let tagged = pushed.split('@').next().expect("a tagged reference");
    let cards: Api<SkillCard> = Api::namespaced(admin.clone(), ns);
    apply(
        &cards,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
            "metadata": {"name": "java"},
            "spec": {"image": tagged},
        })),
    )
    .await;
    apply(
        &cards,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
            "metadata": {"name": "logging"},
            "spec": {
                "inline": "---\nname: no-system-out\ndescription: Log, never print.\n---\nUse a logger.\n",
                "type": "rule",
            },
        })),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    apply(
        &secrets,
        &object(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "llm-key"},
            "stringData": {"apiKey": "sk-test"},
        })),
    )
    .await;
    let gateways: Api<Gateway> = Api::namespaced(admin.clone(), ns);
    apply(
        &gateways,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "Gateway",
            "metadata": {"name": "llm"},
            "spec": {
                "provider": "openai",
                "credentialRef": {"secretName": "llm-key", "key": "apiKey"},
                "model": {"name": "gpt-test", "contextWindow": 128_000},
            },
        })),
    )
    .await;
    let agents: Api<Agent> = Api::namespaced(admin.clone(), ns);
    apply(
        &agents,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
            "metadata": {"name": "migrator"},
            "spec": {
                "image": "harness.invalid/agent:1",
                "gateways": [{"ref": "llm"}],
                "skillCards": [{"ref": "java"}, {"ref": "logging"}],
            },
        })),
    )
    .await;
    wait_agent_ready(&agents, "migrator").await;
}

/// Plays the kubelet for the sandbox pod `name` of `run`: the agent container runs, then
/// exits 0.
async fn kubelet_runs_to_completion(pods: &Api<Pod>, runs: &Api<AgentRun>, run: &str, name: &str) {
    wait_for(pods, name, "the sandbox pod", |_: &Pod| true).await;
    kubelet(pods, name, None).await;
    wait_phase(runs, run, AgentRunPhase::Running).await;
    kubelet(pods, name, Some(0)).await;
    wait_phase(runs, run, AgentRunPhase::Succeeded).await;
}

/// Runs the whole operator (`operator::start`, with leader election) as the chart's
/// ServiceAccount, takes an AgentRun to Succeeded on `backend`, and checks that nothing it
/// did was refused.
async fn run_as_service_account(prefix: &str, backend: BackendChoice) {
    let env = env().await;
    let admin = env.client();
    let release_ns = env.namespace(prefix).await.expect("release namespace");
    let watched = env
        .namespace(&format!("{prefix}-watched"))
        .await
        .expect("watched namespace");
    let release = install_rbac(
        &admin,
        &release_ns,
        &[
            &format!(r#"watchNamespaces=["{watched}"]"#),
            "leaderElection.enabled=true",
        ],
    )
    .await;
    let cards: Api<SkillCard> = Api::namespaced(release.client.clone(), &watched);
    until_listable("listing SkillCards as the operator", &cards).await;
    // The Lease the chart's Role lets this release hold, and its Deployment names.
    let lease_name = release
        .lease
        .clone()
        .expect("with leader election the chart names the Lease");

    // Objects of a run that no longer exists, for the sweep at start to delete.
    let orphan_uid = "7c1f0c0e-0000-4000-8000-000000000000";
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), &watched);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &watched);
    config_maps
        .create(
            &PostParams::default(),
            &object(run_object("ConfigMap", "gone-config", "gone", orphan_uid)),
        )
        .await
        .expect("create the orphan ConfigMap");
    secrets
        .create(
            &PostParams::default(),
            &object(run_object("Secret", "gone-acp-key", "gone", orphan_uid)),
        )
        .await
        .expect("create the orphan Secret");

    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(
        release.client.clone(),
        RunOptions {
            insecure_registries: vec![registry().await],
            sandbox_backend: backend,
            leader_election: Some(LeaderElection {
                lease_name: lease_name.clone(),
                ..LeaderElection::new(release.namespace.clone(), Some("rbac-test".into()))
            }),
            tag_refresh_interval: Duration::from_secs(2),
            ..run_options(&watched)
        },
        shutdown,
    )
    .await
    .unwrap_or_else(|e| panic!("the operator starts as {}: {e:#}", release.user));

    skills_and_agent(&admin, &watched).await;
    let runs: Api<AgentRun> = Api::namespaced(admin.clone(), &watched);
    apply(
        &runs,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
            "metadata": {"name": "upgrade"},
            "spec": {"agentRef": "migrator", "instructions": "Upgrade to Java 21."},
        })),
    )
    .await;
    let run = wait_for_sandbox(&runs, "upgrade").await;
    let sandbox = run.status.and_then(|s| s.sandbox_name).expect("sandbox");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &watched);
    kubelet_runs_to_completion(&pods, &runs, "upgrade", &sandbox).await;
    // The sweep deleted the orphans, one by one, with the chart's permissions.
    wait_gone(&config_maps, "gone-config", "the orphan ConfigMap").await;
    wait_gone(&secrets, "gone-acp-key", "the orphan Secret").await;

    // A one-stage workflow: the operator creates the stage's run and reports on both.
    let workflows: Api<AgentWorkflow> = Api::namespaced(admin.clone(), &watched);
    apply(
        &workflows,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflow",
            "metadata": {"name": "upgrade-flow"},
            "spec": {"stages": [{"name": "only", "agentRef": "migrator"}]},
        })),
    )
    .await;
    let workflow_runs: Api<AgentWorkflowRun> = Api::namespaced(admin.clone(), &watched);
    apply(
        &workflow_runs,
        &object(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflowRun",
            "metadata": {"name": "flow"},
            "spec": {"workflowRef": "upgrade-flow"},
        })),
    )
    .await;
    let stage = wait_for_sandbox(&runs, "flow-only").await;
    let sandbox = stage.status.and_then(|s| s.sandbox_name).expect("sandbox");
    kubelet_runs_to_completion(&pods, &runs, "flow-only", &sandbox).await;
    wait_for(
        &workflow_runs,
        "flow",
        "Succeeded",
        |r: &AgentWorkflowRun| {
            r.status.as_ref().and_then(|s| s.phase) == Some(AgentRunPhase::Succeeded)
        },
    )
    .await;

    // The operator held the Lease in the release namespace.
    let lease = Api::<Lease>::namespaced(admin.clone(), &release.namespace)
        .get(&lease_name)
        .await
        .expect("the Lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("rbac-test")
    );
    // Events are published best effort (a refused one is only logged), so look for them.
    let events = Api::<Event>::namespaced(admin.clone(), &watched)
        .list(&ListParams::default())
        .await
        .expect("list events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reporting_controller.as_deref() == Some("agentic-operator")),
        "the operator recorded Events as {}",
        release.user
    );
    let (code, metrics) = http_get(started.metrics_addr, "/metrics")
        .await
        .expect("GET /metrics");
    assert_eq!(code, 200);
    let refused: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("agentic_reconcile_errors_total{"))
        .filter(|l| l.contains(r#"reason="ApiError""#))
        .collect();
    assert!(
        refused.is_empty(),
        "API requests failed as {}: {refused:?}",
        release.user
    );
    assert!(
        metrics
            .lines()
            .filter_map(
                |l| l.strip_prefix(r#"agentic_reconciles_total{kind="AgentRun",result="ok"} "#)
            )
            .any(|count| count.parse::<f64>().is_ok_and(|count| count >= 1.0)),
        "the operator reconciled the run:\n{metrics}"
    );
    for kind in ["ConfigMap", "Secret"] {
        let swept = format!(r#"agentic_orphans_deleted_total{{kind="{kind}"}} 1"#);
        assert!(metrics.lines().any(|l| l == swept), "{swept}:\n{metrics}");
    }

    stop_cleanly(stop, started).await;
    let lease = Api::<Lease>::namespaced(admin.clone(), &release.namespace)
        .get(&lease_name)
        .await
        .expect("the Lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        None,
        "the Lease is released on shutdown"
    );
}

#[tokio::test]
async fn the_chart_service_account_runs_skills_to_a_finished_pod() {
    run_as_service_account("rbac-pod", BackendChoice::Pod).await;
}

#[tokio::test]
async fn the_chart_service_account_runs_skills_to_a_finished_sandbox() {
    // `auto` finds the agent-sandbox CRD with the chart's one cluster-scoped permission.
    run_as_service_account("rbac-sandbox", BackendChoice::Auto).await;
}

#[tokio::test]
async fn watching_some_namespaces_grants_nothing_beyond_them() {
    let env = env().await;
    let admin = env.client();
    let release_ns = env.namespace("rbac-least").await.expect("namespace");
    let watched = env
        .namespace("rbac-least-watched")
        .await
        .expect("namespace");
    let other = env.namespace("rbac-least-other").await.expect("namespace");
    let release = install_rbac(
        &admin,
        &release_ns,
        &[
            &format!(r#"watchNamespaces=["{watched}"]"#),
            "leaderElection.enabled=true",
        ],
    )
    .await;
    let sa = release.client.clone();

    // What the chart grants, so that the refusals below cannot come from a broken client.
    until_listable(
        "listing SkillCards in the watched namespace",
        &Api::<SkillCard>::namespaced(sa.clone(), &watched),
    )
    .await;
    Api::<Secret>::namespaced(sa.clone(), &watched)
        .list(&ListParams::default())
        .await
        .expect("secrets are readable in the watched namespace");
    Api::<ConfigMap>::namespaced(sa.clone(), &watched)
        .create(
            &PostParams::default(),
            &object(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "granted"}}),
            ),
        )
        .await
        .expect("ConfigMaps can be created in the watched namespace");
    assert_eq!(
        operator::resolve_backend(&sa, BackendChoice::Auto)
            .await
            .expect("the Sandbox CRD check is allowed"),
        SandboxBackend::AgentSandbox
    );

    // Nothing outside the watched namespace.
    assert_forbidden(
        "listing Secrets in an unwatched namespace",
        Api::<Secret>::namespaced(sa.clone(), &other)
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "reading Secrets in the release namespace",
        Api::<Secret>::namespaced(sa.clone(), &release.namespace)
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "listing SkillCards in every namespace",
        Api::<SkillCard>::all(sa.clone())
            .list(&ListParams::default())
            .await,
    );
    // Inside it, no deletes beyond single objects (the sandboxes of runs it ends, runs past
    // their time to live, the objects of runs that are gone), and no writes to the users'
    // objects.
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), &watched);
    config_maps
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "someone-elses"},
                "data": {"owner": "the admin"},
            })),
        )
        .await
        .expect("the admin creates a ConfigMap");
    assert_forbidden(
        "deleting every ConfigMap at once",
        Api::<ConfigMap>::namespaced(sa.clone(), &watched)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    assert_forbidden(
        "changing a ConfigMap with a full update",
        Api::<ConfigMap>::namespaced(sa.clone(), &watched)
            .replace(
                "someone-elses",
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "someone-elses"},
                    "data": {"owner": "the operator"},
                })),
            )
            .await,
    );
    assert!(
        config_maps
            .get_opt("someone-elses")
            .await
            .expect("get")
            .is_some()
    );
    assert_forbidden(
        "deleting every pod at once",
        Api::<Pod>::namespaced(sa.clone(), &watched)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    assert_forbidden(
        "deleting Secrets",
        Api::<Secret>::namespaced(sa.clone(), &watched)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    // SkillCards may be created (a SkillCollection's), Agents never.
    assert_forbidden(
        "creating an Agent",
        Api::<Agent>::namespaced(sa.clone(), &watched)
            .create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
                    "metadata": {"name": "planted"},
                    "spec": {"image": "registry.invalid/agent:1"},
                })),
            )
            .await,
    );
    // One CRD may be read, no other.
    assert_forbidden(
        "reading another CRD",
        Api::<CustomResourceDefinition>::all(sa.clone())
            .get("skillcards.konveyor.io")
            .await,
    );
    // The Lease by name only.
    assert_forbidden(
        "reading another Lease",
        Api::<Lease>::namespaced(sa.clone(), &release.namespace)
            .get("someone-elses-lease")
            .await,
    );
}

#[tokio::test]
async fn watching_every_namespace_reads_everywhere_and_deletes_only_what_runs_end() {
    let env = env().await;
    let admin = env.client();
    let release_ns = env.namespace("rbac-all").await.expect("namespace");
    let elsewhere = env
        .namespace("rbac-all-elsewhere")
        .await
        .expect("namespace");
    let release = install_rbac(&admin, &release_ns, &[]).await;
    let sa = release.client.clone();

    until_listable(
        "listing SkillCards in every namespace",
        &Api::<SkillCard>::all(sa.clone()),
    )
    .await;
    Api::<Secret>::namespaced(sa.clone(), &elsewhere)
        .list(&ListParams::default())
        .await
        .expect("Secrets are readable in any namespace");
    // Single pods, sandboxes and runs, yes (an ended run's); whole collections, never.
    assert_forbidden(
        "deleting every pod at once",
        Api::<Pod>::namespaced(sa.clone(), &elsewhere)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    // Single SkillCards, yes (those a SkillCollection no longer lists); all at once, never.
    assert_forbidden(
        "deleting every SkillCard at once",
        Api::<SkillCard>::namespaced(sa.clone(), &elsewhere)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    assert_forbidden(
        "deleting an Agent",
        Api::<Agent>::namespaced(sa.clone(), &elsewhere)
            .delete("any", &DeleteParams::default())
            .await,
    );
    assert_forbidden(
        "deleting every Secret at once",
        Api::<Secret>::namespaced(sa.clone(), &elsewhere)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    assert_forbidden(
        "updating an Agent's spec",
        Api::<Agent>::namespaced(sa.clone(), &elsewhere)
            .patch(
                "any",
                &PatchParams::apply("intruder"),
                &Patch::Apply(json!({
                    "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
                    "spec": {"image": "x"},
                })),
            )
            .await,
    );
    assert_forbidden(
        "creating a Lease without leader election",
        Api::<Lease>::namespaced(sa.clone(), &release.namespace)
            .create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEASE_NAME},
                })),
            )
            .await,
    );
}

/// A token of the ServiceAccount `name` in `ns`, created (with the ServiceAccount) by the
/// admin through the TokenRequest API.
async fn service_account_token(admin: &Client, ns: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    apply(
        &accounts,
        &object(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})),
    )
    .await;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {ns}/{name}: {e}"))
        .status
        .and_then(|status| status.token)
        .expect("the TokenRequest has a token")
}

/// Whether the API server (as the admin asks it) lets `user` get `/metrics`.
async fn may_get_metrics(admin: &Client, user: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/metrics".to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|status| status.allowed)
}

/// `GET /metrics` with `token` as the bearer token, if any: the status and the body.
async fn scrape(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("/metrics answers over TLS");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a body"))
}

#[tokio::test]
async fn secure_metrics_admit_only_service_accounts_bound_to_the_reader_role() {
    let env = env().await;
    let admin = env.client();
    let release_ns = env
        .namespace("rbac-metrics")
        .await
        .expect("release namespace");
    let watched = env
        .namespace("rbac-metrics-watched")
        .await
        .expect("watched namespace");
    // An explicit backend: the ClusterRole then holds the token reviews and nothing else.
    let release = install_rbac(
        &admin,
        &release_ns,
        &[
            &format!(r#"watchNamespaces=["{watched}"]"#),
            r#"sandboxBackend="pod""#,
            "metrics.secure=true",
        ],
    )
    .await;
    let cards: Api<SkillCard> = Api::namespaced(release.client.clone(), &watched);
    until_listable("listing SkillCards as the operator", &cards).await;

    // The certificate of --metrics-tls-cert/--metrics-tls-key, which the scraper trusts.
    let tls = tempfile::tempdir().expect("a directory for the certificate");
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let (cert, key) = (tls.path().join("tls.crt"), tls.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).expect("write the certificate");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write the key");

    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(
        release.client.clone(),
        RunOptions {
            secure_metrics: Some(SecureMetrics {
                cert_and_key: Some((cert, key)),
            }),
            ..run_options(&watched)
        },
        shutdown,
    )
    .await
    .unwrap_or_else(|e| panic!("the operator starts as {}: {e:#}", release.user));

    let _ = rustls::crypto::ring::default_provider().install_default();
    let scraper = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes())
                .expect("the certificate parses"),
        )
        .resolve("localhost", started.metrics_addr)
        .build()
        .expect("an HTTPS client");
    let url = format!("https://localhost:{}/metrics", started.metrics_addr.port());

    // Plain HTTP is not served.
    let (code, _) = http_get(started.metrics_addr, "/metrics")
        .await
        .unwrap_or((0, String::new()));
    assert_ne!(code, 200, "plain HTTP must not reach /metrics");

    let (code, body) = scrape(&scraper, &url, None).await;
    assert_eq!((code, body.contains("Bearer")), (401, true), "{body}");
    let (code, body) = scrape(&scraper, &url, Some("not-a-token")).await;
    assert_eq!(code, 401, "{body}");

    let denied = service_account_token(&admin, &release_ns, "scraper-without-role").await;
    let (code, body) = scrape(&scraper, &url, Some(&denied)).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!(
            "system:serviceaccount:{release_ns}:scraper-without-role"
        )),
        "{body}"
    );

    let reader = format!("{release_ns}-agentic-operator-metrics-reader");
    let allowed = service_account_token(&admin, &release_ns, "scraper").await;
    let user = format!("system:serviceaccount:{release_ns}:scraper");
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding = format!("{release_ns}-scraper");
    apply(
        &bindings,
        &object(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": release_ns}],
        })),
    )
    .await;
    // Ask the operator only once the API server allows it: a refusal would be cached.
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !may_get_metrics(&admin, &user).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the metrics-reader binding never took effect"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (code, body) = scrape(&scraper, &url, Some(&allowed)).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("# TYPE agentic_"), "the metrics text: {body}");

    // The decision is cached: once the binding is gone the API server refuses the user, but
    // a scrape within the minute is still answered without asking it again.
    bindings
        .delete(&binding, &DeleteParams::default())
        .await
        .expect("delete the binding");
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while may_get_metrics(&admin, &user).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deleting the binding never took effect"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (code, body) = scrape(&scraper, &url, Some(&allowed)).await;
    assert_eq!(code, 200, "a cached decision: {body}");
    // A token never seen is reviewed afresh and refused.
    let fresh = service_account_token(&admin, &release_ns, "scraper").await;
    let (code, body) = scrape(&scraper, &url, Some(&fresh)).await;
    assert_eq!(code, 403, "{body}");

    stop_cleanly(stop, started).await;
}
