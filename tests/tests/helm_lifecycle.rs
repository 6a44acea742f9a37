//! The chart and the kustomize configuration as users install them, on a test cluster they
//! run on (kube-controller-manager, ServiceAccount tokens, pods reaching the API server and
//! the registry): the operator as a pod on the node under the restricted Pod Security level,
//! the samples' run to Succeeded, chart upgrades that turn leader election on, change the
//! watched namespaces and upgrade the CRDs without two operators acting at once, and an
//! uninstall that leaves nothing behind.
//!
//! Both tests install the cluster-wide CRDs, so each has a cluster of its own, in turn.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase};
use agentic_integration_tests::support;
use agentic_integration_tests::{OperatorWatch, operator_binary, warnings, workloads_cluster};
use agentic_testenv::{TestEnv, push_operator_image};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::{CHART, meta, read_yaml_file, repo_root, run_ok, testenv_tool};

const GENERATED_CRDS: &str = "config/crd/bases/konveyor.io.yaml";
/// The CRD the "newer chart" of the second upgrade changes.
const CHANGED_CRD: &str = "agents.konveyor.io";
const NEW_DESCRIPTION: &str = "An Agent, as a newer chart describes it.";
/// The samples' run (config/samples/agentrun.yaml) and the skills it mounts.
const SAMPLE_RUN: &str = "upgrade-to-21";
const SAMPLE_SKILLS: [&str; 5] = [
    "commit-summary",
    "java-upgrade",
    "maven-deps",
    "no-system-out",
    "quarkus-config",
];
/// How long helm waits for the operator's rollout: pulling the image from the local registry
/// and starting take seconds; this leaves room for a machine busy compiling.
const HELM_TIMEOUT: &str = "300s";
/// How long a run may take from `kubectl apply` to Succeeded (3.5 s measured on an idle
/// machine): skills resolved, the pod scheduled, images pulled from the local registry.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the garbage collector and the CRD finalizer may take after an uninstall.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(120);
/// The namespace and instance label config/default installs the operator with.
const KUSTOMIZE_NAMESPACE: &str = "agentic-operator-system";
const KUSTOMIZE_INSTANCE: &str = "agentic-operator";

fn helm(env: &TestEnv, home: &Path) -> Command {
    let mut command = Command::new(testenv_tool("helm"));
    command
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    command
}

fn kubectl(env: &TestEnv) -> Command {
    let mut command = Command::new(testenv_tool("kubectl"));
    command
        .current_dir(repo_root())
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    command
}

/// Runs `command` with `input` on its standard input; expects exit status 0.
fn run_with_input(command: &mut Command, input: &str) -> String {
    use std::io::Write as _;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the command starts");
    child
        .stdin
        .take()
        .expect("a stdin pipe")
        .write_all(input.as_bytes())
        .expect("writing the command's input");
    let out = child.wait_with_output().expect("the command runs");
    assert!(
        out.status.success(),
        "{command:?} failed with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A copy of the chart in `dir` as a newer release of it would be: the Agent CRD's schema
/// describes it differently. Documents are written as JSON, which is YAML.
fn newer_chart(dir: &Path) -> std::path::PathBuf {
    run_ok(
        Command::new("cp")
            .arg("-r")
            .arg(repo_root().join(CHART))
            .arg(dir),
    );
    let chart = dir.join("agentic-operator");
    let mut crds = read_yaml_file(GENERATED_CRDS);
    let agent = crds
        .iter_mut()
        .find(|crd| meta(crd, "name") == CHANGED_CRD)
        .expect("the generated CRDs include agents.konveyor.io");
    agent["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
        json!(NEW_DESCRIPTION);
    let text: String = crds.iter().map(|crd| format!("---\n{crd}\n")).collect();
    std::fs::write(chart.join("files/crds/konveyor.io.yaml"), text)
        .expect("writing the newer chart's CRDs");
    chart
}

/// Pushes the sample skills to `registry` with the script users run, and applies the rendered
/// samples to `namespace`.
fn apply_samples(env: &TestEnv, registry: &str, namespace: &str) {
    run_ok(
        Command::new(repo_root().join("hack/push-samples.sh"))
            .env("AGENTIC_OPERATOR", operator_binary())
            .args(["--insecure", registry]),
    );
    let rendered = run_ok(Command::new(repo_root().join("hack/render-samples.sh")).arg(registry));
    run_with_input(
        kubectl(env).args(["apply", "--server-side", "-n", namespace, "-f", "-"]),
        &rendered,
    );
}

/// Waits until the run `name` ends and expects it Succeeded with every sample skill.
async fn expect_succeeded(runs: &Api<AgentRun>, name: &str) {
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let run = loop {
        let run = runs.get_opt(name).await.expect("reading the AgentRun");
        let phase = run
            .as_ref()
            .and_then(|run| run.status.as_ref())
            .and_then(|status| status.phase);
        if phase.is_some_and(AgentRunPhase::is_finished) {
            break run.expect("a run with a phase exists");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "AgentRun {name} did not finish in {RUN_TIMEOUT:?}: {run:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let status = run.status.clone().unwrap_or_default();
    assert_eq!(
        status.phase,
        Some(AgentRunPhase::Succeeded),
        "AgentRun {name}: {status:#?}"
    );
    let mut skills: Vec<String> = status.skills.iter().map(|s| s.name.clone()).collect();
    skills.sort();
    assert_eq!(
        skills, SAMPLE_SKILLS,
        "AgentRun {name} mounted every sample skill"
    );
}

/// The operator pods of the release, once `count` of them run and are Ready.
async fn ready_pods(pods: &Api<Pod>, selector: &str, count: usize) -> Vec<Pod> {
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    loop {
        let listed = pods
            .list(&ListParams::default().labels(selector))
            .await
            .expect("listing the operator pods");
        let ready: Vec<Pod> = listed
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                pod.status
                    .as_ref()
                    .and_then(|status| status.conditions.as_ref())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                    })
            })
            .collect();
        if ready.len() == count {
            return ready;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} Ready operator pods ({selector}) after {RUN_TIMEOUT:?}: {} are",
            ready.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Labels `namespace` so the API server admits only pods of the restricted Pod Security level.
async fn enforce_restricted(client: &Client, namespace: &str) {
    let patch = json!({ "metadata": { "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("labelling the release namespace restricted");
}

/// The names of the objects labelled `selector`, for messages.
async fn names<K>(api: &Api<K>, selector: &str) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().labels(selector))
        .await
        .expect("listing")
        .items
        .iter()
        .filter_map(|object| object.meta().name.clone())
        .collect()
}

/// A second run of the sample Agent, created after the upgrades.
fn second_run(name: &str) -> AgentRun {
    serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1",
        "kind": "AgentRun",
        "metadata": { "name": name },
        "spec": {
            "agentRef": "java-migrator",
            "params": [{ "name": "repository", "value": "https://example.invalid/app.git" }],
        },
    }))
    .expect("an AgentRun")
}

// Two workers: helm and kubectl block one while the watch of the operators runs on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_installs_runs_upgrades_and_uninstalls_on_the_test_node() {
    let cluster = workloads_cluster().await;
    let env: &TestEnv = &cluster;
    let client = env.client();
    let registry = env.registry_addr().expect("a registry");
    let pod_registry = env
        .pod_registry_addr()
        .expect("the registry as pods reach it");
    let image = push_operator_image(&registry, operator_binary())
        .await
        .expect("pushing the operator image");
    let (named, digest) = image.split_once('@').expect("a pinned image");
    let repository = named
        .rsplit_once(':')
        .map_or(named, |(repository, _)| repository);

    let namespace = env.namespace("agentic-system").await.expect("a namespace");
    enforce_restricted(&client, &namespace).await;
    let demo = env
        .namespace("demo")
        .await
        .expect("a namespace for the samples");
    let release = namespace.clone();
    let fullname = format!("{release}-agentic-operator");
    let lease_name = format!("{fullname}-leader");
    let selector = format!("app.kubernetes.io/instance={release}");
    let home = tempfile::tempdir().expect("a temporary helm home");
    let watch = OperatorWatch::start(client.clone(), &namespace, &selector, &lease_name);

    // The chart's defaults, the workspace's image, and the test registry trusted over HTTP.
    run_ok(
        helm(env, home.path())
            .args(["install", &release, CHART, "--namespace", &namespace])
            .args(["--set", &format!("image.repository={repository}")])
            .args(["--set", &format!("image.tag={digest}")])
            .args(["--set", &format!("insecureRegistries[0]={pod_registry}")])
            .args(["--wait", "--timeout", HELM_TIMEOUT]),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let installed = ready_pods(&pods, &selector, 1).await;
    let spec = installed[0].spec.clone().expect("a pod spec");
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some(fullname.as_str())
    );
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some(format!("{repository}@{digest}").as_str()),
        "the pod runs the pushed image"
    );

    apply_samples(env, &pod_registry, &demo);
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &demo);
    expect_succeeded(&runs, SAMPLE_RUN).await;

    // Leader election on, two replicas: the pod that does not elect must stop before a new
    // one takes the Lease.
    run_ok(
        helm(env, home.path())
            .args([
                "upgrade",
                &release,
                CHART,
                "--namespace",
                &namespace,
                "--reuse-values",
            ])
            .args(["--set", "leaderElection.enabled=true,replicas=2"])
            .args(["--wait", "--timeout", HELM_TIMEOUT]),
    );
    let electing = ready_pods(&pods, &selector, 2).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let lease = leases
        .get(&lease_name)
        .await
        .expect("the Lease exists once the operators elect");
    let owners = lease.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "ServiceAccount" && o.name == fullname),
        "the Lease is owned by the operator's ServiceAccount, so it goes with the release: \
         {owners:?}"
    );
    let electing_names: Vec<String> = electing
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    assert!(
        !electing_names.contains(&installed[0].metadata.name.clone().unwrap_or_default()),
        "the pod without leader election was replaced: {electing_names:?}"
    );
    assert_eq!(
        watch.overlaps(),
        Vec::<String>::new(),
        "while turning election on"
    );

    // Watch one namespace, upgrade the CRDs, drop their keep policy: a rolling update between
    // two electing versions.
    let newer_dir = tempfile::tempdir().expect("a directory for the newer chart");
    let newer = newer_chart(newer_dir.path());
    // The new scope replaces the ClusterRole with Roles at once, while the old leader still
    // runs: its refused watches until it stops are what this upgrade asked for.
    let scope_changed = tokio::time::Instant::now();
    run_ok(
        helm(env, home.path())
            .arg("upgrade")
            .arg(&release)
            .arg(&newer)
            .args(["--namespace", &namespace, "--reuse-values"])
            .args(["--set-json", &format!(r#"watchNamespaces=["{demo}"]"#)])
            .args(["--set", "crds.keep=false"])
            .args(["--wait", "--timeout", HELM_TIMEOUT]),
    );
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let agent_crd = serde_json::to_value(crds.get(CHANGED_CRD).await.expect("the Agent CRD"))
        .expect("CRDs serialize");
    assert_eq!(
        agent_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"],
        json!(NEW_DESCRIPTION),
        "the upgrade upgraded the CRD"
    );
    Api::<Role>::namespaced(client.clone(), &demo)
        .get(&fullname)
        .await
        .expect("the watched namespace's Role");
    ready_pods(&pods, &selector, 2).await;
    runs.create(&PostParams::default(), &second_run("after-upgrades"))
        .await
        .expect("creating a second run");
    expect_succeeded(&runs, "after-upgrades").await;
    assert_eq!(
        watch.overlaps(),
        Vec::<String>::new(),
        "during the upgrades"
    );
    let unasked: Vec<_> = watch
        .logs()
        .into_iter()
        .filter(|log| log.read < scope_changed || !electing_names.contains(&log.pod))
        .collect();
    let before_uninstall = warnings(&unasked);
    assert_eq!(
        before_uninstall,
        Vec::<String>::new(),
        "nothing at WARN or above from install to the last upgrade"
    );

    run_ok(helm(env, home.path()).args([
        "uninstall",
        &release,
        "--namespace",
        &namespace,
        "--wait",
        "--timeout",
        HELM_TIMEOUT,
    ]));
    let deadline = tokio::time::Instant::now() + CLEANUP_TIMEOUT;
    loop {
        let lease = leases
            .get_opt(&lease_name)
            .await
            .expect("reading the Lease");
        let crds_left: Vec<String> = crds
            .list(&ListParams::default())
            .await
            .expect("listing CRDs")
            .items
            .iter()
            .filter_map(|crd| crd.metadata.name.clone())
            .filter(|name| name.ends_with(".konveyor.io"))
            .collect();
        if lease.is_none() && crds_left.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{CLEANUP_TIMEOUT:?} after the uninstall: Lease {lease:?}, CRDs {crds_left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let logs = watch.stop().await;
    for ns in [&namespace, &demo] {
        let roles = names(&Api::<Role>::namespaced(client.clone(), ns), &selector).await;
        let bindings = names(
            &Api::<RoleBinding>::namespaced(client.clone(), ns),
            &selector,
        )
        .await;
        assert!(
            roles.is_empty() && bindings.is_empty(),
            "RBAC left in {ns}: {roles:?} {bindings:?}"
        );
    }
    let cluster_roles = names(&Api::<ClusterRole>::all(client.clone()), &selector).await;
    let cluster_bindings = names(&Api::<ClusterRoleBinding>::all(client.clone()), &selector).await;
    assert!(
        cluster_roles.is_empty() && cluster_bindings.is_empty(),
        "cluster RBAC left: {cluster_roles:?} {cluster_bindings:?}"
    );
    // A release that failed is never reported as done.
    for pod in logs
        .iter()
        .map(|log| &log.pod)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let said = |text: &str| {
            logs.iter()
                .any(|log| &log.pod == pod && log.line.contains(text))
        };
        assert!(
            !(said("Lease released") && said("could not release the Lease")),
            "{pod} logged a release that failed as done"
        );
    }
    assert!(
        logs.iter().any(|log| log.line.contains("became leader")),
        "the operators' logs were read"
    );
}

/// `target` as a path relative to the directory `from` (both absolute): kustomize takes no
/// absolute paths in `resources`.
fn relative_to(from: &Path, target: &Path) -> std::path::PathBuf {
    let up = from.components().skip(1).map(|_| "..");
    let mut relative: std::path::PathBuf = up.collect();
    relative.push(target.strip_prefix("/").expect("an absolute path"));
    relative
}

/// Waits until no konveyor.io CRD is left.
async fn wait_crds_gone(crds: &Api<CustomResourceDefinition>) {
    let deadline = tokio::time::Instant::now() + CLEANUP_TIMEOUT;
    loop {
        let left: Vec<String> = crds
            .list(&ListParams::default())
            .await
            .expect("listing CRDs")
            .items
            .iter()
            .filter_map(|crd| crd.metadata.name.clone())
            .filter(|name| name.ends_with(".konveyor.io"))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{CLEANUP_TIMEOUT:?} after the uninstall, CRDs are left: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// Two workers: kubectl blocks one while the watch of the operator runs on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_configuration_installs_runs_and_deletes_on_the_test_node() {
    let cluster = workloads_cluster().await;
    let env: &TestEnv = &cluster;
    let client = env.client();
    let registry = env.registry_addr().expect("a registry");
    let pod_registry = env
        .pod_registry_addr()
        .expect("the registry as pods reach it");
    let image = push_operator_image(&registry, operator_binary())
        .await
        .expect("pushing the operator image");
    let (named, digest) = image.split_once('@').expect("a pinned image");
    let repository = named
        .rsplit_once(':')
        .map_or(named, |(repository, _)| repository);
    let demo = env
        .namespace("demo")
        .await
        .expect("a namespace for the samples");
    let selector = format!("app.kubernetes.io/instance={KUSTOMIZE_INSTANCE}");

    // An overlay, as the configuration's comments tell users to write one: another image,
    // and the test registry trusted over plain HTTP.
    let overlay = tempfile::tempdir().expect("a directory for the overlay");
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative_to(overlay.path(), &repo_root().join("config/default"))],
        "images": [{
            "name": "ghcr.io/konveyor/agentic-operator",
            "newName": repository,
            "digest": digest,
        }],
        "patches": [{
            "target": { "kind": "Deployment", "name": "agentic-operator" },
            "patch": serde_json::to_string(&json!([{
                "op": "add",
                "path": "/spec/template/spec/containers/0/args/-",
                "value": format!("--insecure-registry={pod_registry}"),
            }])).expect("a JSON patch"),
        }],
    });
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        kustomization.to_string(),
    )
    .expect("writing the overlay");

    let watch = OperatorWatch::start(
        client.clone(),
        KUSTOMIZE_NAMESPACE,
        &selector,
        &format!("{KUSTOMIZE_INSTANCE}-leader"),
    );
    run_ok(
        kubectl(env)
            .args(["apply", "--server-side", "-k"])
            .arg(overlay.path()),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), KUSTOMIZE_NAMESPACE);
    let running = ready_pods(&pods, &selector, 1).await;
    let spec = running[0].spec.clone().expect("a pod spec");
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("agentic-operator")
    );
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some(format!("{repository}@{digest}").as_str()),
        "the pod runs the pushed image"
    );

    apply_samples(env, &pod_registry, &demo);
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &demo);
    expect_succeeded(&runs, SAMPLE_RUN).await;
    assert_eq!(
        warnings(&watch.logs()),
        Vec::<String>::new(),
        "nothing at WARN or above while installed"
    );
    assert_eq!(watch.overlaps(), Vec::<String>::new());

    run_ok(
        kubectl(env)
            .args(["delete", "--wait", "-k"])
            .arg(overlay.path()),
    );
    wait_crds_gone(&Api::<CustomResourceDefinition>::all(client.clone())).await;
    watch.stop().await;
    // Every object of the configuration carries this label (config/default's `labels`).
    let part_of = "app.kubernetes.io/part-of=agentic-operator";
    let cluster_roles = names(&Api::<ClusterRole>::all(client.clone()), part_of).await;
    assert!(
        !names(
            &Api::<ClusterRole>::all(client.clone()),
            "kubernetes.io/bootstrapping=rbac-defaults"
        )
        .await
        .is_empty(),
        "the label query sees ClusterRoles at all"
    );
    let cluster_bindings = names(&Api::<ClusterRoleBinding>::all(client.clone()), part_of).await;
    assert!(
        cluster_roles.is_empty() && cluster_bindings.is_empty(),
        "cluster RBAC left: {cluster_roles:?} {cluster_bindings:?}"
    );
    let namespace = Api::<Namespace>::all(client.clone())
        .get_opt(KUSTOMIZE_NAMESPACE)
        .await
        .expect("reading the namespace");
    assert!(
        namespace.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()),
        "the configuration's namespace goes with it"
    );
}
