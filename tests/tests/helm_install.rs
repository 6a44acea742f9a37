//! `helm install`, `helm upgrade` and `helm uninstall` of the chart against the real test
//! control plane: the API server accepts every object the chart renders, with the RBAC it
//! asks for; an upgrade upgrades the CRDs and an uninstall keeps them.

use std::path::Path;
use std::process::Command;

use agentic_integration_tests::support;
use agentic_testenv::{TestEnv, TestEnvOptions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::{
    CHART, cluster_policy_permissions, crd_check_permissions, generated_crds, lease_permissions,
    meta, namespaced_permissions, permissions, read_yaml_file, repo_root, run_ok, testenv_tool,
};

const GENERATED_CRDS: &str = "config/crd/bases/konveyor.io.yaml";
/// The CRD the "older chart" ships with a different schema.
const CHANGED_CRD: &str = "agents.konveyor.io";
const OLD_DESCRIPTION: &str = "An Agent, as an older chart described it.";
const KEEP: &str = "helm.sh/resource-policy";

/// helm against the test control plane, with its cache and config in `home` rather than the
/// user's.
fn helm(kubeconfig: &Path, home: &Path) -> Command {
    let mut command = Command::new(testenv_tool("helm"));
    command
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .arg("--kubeconfig")
        .arg(kubeconfig);
    command
}

/// `spec.versions[0].schema.openAPIV3Schema.description` of a CRD, as JSON.
fn schema_description(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"]
}

/// A copy of the chart in `dir` as an older release of it would be: the Agent CRD's schema
/// describes it differently. Documents are written as JSON, which is YAML.
fn older_chart(dir: &Path) -> std::path::PathBuf {
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
    assert_ne!(schema_description(agent), &json!(OLD_DESCRIPTION));
    agent["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
        json!(OLD_DESCRIPTION);
    let text: String = crds.iter().map(|crd| format!("---\n{crd}\n")).collect();
    std::fs::write(chart.join("files/crds/konveyor.io.yaml"), text)
        .expect("writing the older chart's CRDs");
    chart
}

/// The live CRD called `name`, as JSON.
async fn live_crd(api: &Api<CustomResourceDefinition>, name: &str) -> Value {
    let crd = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name}: {e}"));
    serde_json::to_value(crd).expect("CRDs serialize")
}

fn rules_of<T: serde::Serialize>(object: &T) -> serde_json::Value {
    serde_json::to_value(object).expect("RBAC objects serialize")["rules"].clone()
}

#[tokio::test]
async fn chart_installs_and_uninstalls_on_a_real_api_server() {
    // A control plane of this test's own: it rewrites a CRD's schema, which would restart the
    // watches of every other test's operator on the shared one.
    let env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("the test control plane starts (run `make test`, which builds it)");
    let namespace = env
        .namespace("helm-install")
        .await
        .expect("a namespace for the release");
    let watched = env
        .namespace("helm-watched")
        .await
        .expect("a namespace to watch");
    let home = tempfile::tempdir().expect("a temporary helm home");
    // The release name is unique per run, so are the cluster-scoped object names.
    let release = namespace.clone();
    let fullname = format!("{release}-agentic-operator");

    // The test control plane installed the CRDs itself, as `kubectl apply` or an older chart's
    // crds/ would have: label and annotate them for the release, as docs/operations.md tells
    // users to, so that Helm adopts them.
    let client = env.client();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let generated = generated_crds();
    let adopt = json!({"metadata": {
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {
            "meta.helm.sh/release-name": release,
            "meta.helm.sh/release-namespace": namespace,
        },
    }});
    for crd in &generated {
        crds.patch(
            meta(crd, "name"),
            &PatchParams::default(),
            &Patch::Merge(&adopt),
        )
        .await
        .expect("labelling a CRD for adoption");
    }

    // No --wait: the control plane has no nodes, so the operator pod stays Pending.
    let values = [
        "--namespace",
        &namespace,
        "--set",
        "leaderElection.enabled=true,replicas=2",
        "--set-json",
        &format!(r#"watchNamespaces=["{watched}"]"#),
    ];
    let old_chart_dir = tempfile::tempdir().expect("a directory for the older chart");
    let old_chart = older_chart(old_chart_dir.path());
    run_ok(
        helm(env.kubeconfig_path(), home.path())
            .args(["install", &release])
            .arg(&old_chart)
            .args(values)
            .args(["--set", "crds.keep=false"]),
    );
    let agent_crd = live_crd(&crds, CHANGED_CRD).await;
    assert_eq!(schema_description(&agent_crd), &json!(OLD_DESCRIPTION));
    assert!(
        agent_crd["metadata"]["annotations"][KEEP].is_null(),
        "installed without the keep policy: {}",
        agent_crd["metadata"]
    );

    // The upgrade to this chart upgrades the CRD's schema and adds the keep policy.
    run_ok(
        helm(env.kubeconfig_path(), home.path())
            .args(["upgrade", &release, CHART])
            .args(values),
    );
    for crd in &generated {
        let name = meta(crd, "name");
        let live = live_crd(&crds, name).await;
        assert_eq!(
            schema_description(&live),
            schema_description(crd),
            "{name} after the upgrade"
        );
        assert_eq!(
            live["metadata"]["annotations"][KEEP],
            json!("keep"),
            "{name} after the upgrade"
        );
        assert_eq!(
            live["metadata"]["labels"]["app.kubernetes.io/instance"],
            json!(release),
            "{name} after the upgrade"
        );
    }
    assert_eq!(
        live_crd(&crds, CHANGED_CRD).await["spec"]["versions"][0]["schema"],
        generated
            .iter()
            .find(|crd| meta(crd, "name") == CHANGED_CRD)
            .expect("the generated Agent CRD")["spec"]["versions"][0]["schema"],
        "the whole upgraded schema is the generated one"
    );

    let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get(&fullname)
        .await
        .expect("the Deployment exists");
    let spec = deployment.spec.expect("the Deployment has a spec");
    assert_eq!(spec.replicas, Some(2));
    Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
        .get(&fullname)
        .await
        .expect("the ServiceAccount exists");
    Api::<Service>::namespaced(client.clone(), &namespace)
        .get(&format!("{fullname}-metrics"))
        .await
        .expect("the metrics Service exists");

    let role = Api::<Role>::namespaced(client.clone(), &watched)
        .get(&fullname)
        .await
        .expect("the Role in the watched namespace exists");
    assert_eq!(permissions(&rules_of(&role)), namespaced_permissions());
    Api::<RoleBinding>::namespaced(client.clone(), &watched)
        .get(&fullname)
        .await
        .expect("its RoleBinding exists");
    let lease_role = Api::<Role>::namespaced(client.clone(), &namespace)
        .get(&format!("{fullname}-leader-election"))
        .await
        .expect("the lease Role exists");
    assert_eq!(
        permissions(&rules_of(&lease_role)),
        lease_permissions(&format!("{fullname}-leader"))
    );
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    let cluster_role = cluster_roles
        .get(&fullname)
        .await
        .expect("the ClusterRole exists");
    let mut want = crd_check_permissions();
    want.extend(cluster_policy_permissions());
    assert_eq!(permissions(&rules_of(&cluster_role)), want);
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    bindings
        .get(&fullname)
        .await
        .expect("the ClusterRoleBinding exists");

    run_ok(helm(env.kubeconfig_path(), home.path()).args([
        "uninstall",
        &release,
        "--namespace",
        &namespace,
    ]));
    assert!(
        cluster_roles
            .get_opt(&fullname)
            .await
            .expect("reading ClusterRoles")
            .is_none(),
        "uninstall removes the ClusterRole"
    );
    assert!(
        bindings
            .get_opt(&fullname)
            .await
            .expect("reading ClusterRoleBindings")
            .is_none(),
        "uninstall removes the ClusterRoleBinding"
    );
    // The keep policy leaves the CRDs, and with them every user's objects, still served.
    for crd in &generated {
        let name = meta(crd, "name");
        let live = live_crd(&crds, name).await;
        let established = live["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        assert!(established, "uninstall keeps {name}: {}", live["status"]);
    }
}
