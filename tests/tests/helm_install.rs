//! `helm install` and `helm uninstall` of the chart against the real test control plane:
//! the API server accepts every object the chart renders, with the RBAC it asks for.

mod support;

use std::path::Path;
use std::process::Command;

use agentic_testenv::TestEnv;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use support::{
    crd_check_permissions, lease_permissions, namespaced_permissions, permissions, repo_root,
    run_ok, testenv_tool,
};

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

fn rules_of<T: serde::Serialize>(object: &T) -> serde_json::Value {
    serde_json::to_value(object).expect("RBAC objects serialize")["rules"].clone()
}

#[tokio::test]
async fn chart_installs_and_uninstalls_on_a_real_api_server() {
    let env = TestEnv::shared()
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

    // No --wait: the control plane has no nodes, so the operator pod stays Pending.
    run_ok(helm(env.kubeconfig_path(), home.path()).args([
        "install",
        &release,
        "charts/agentic-operator",
        "--namespace",
        &namespace,
        "--set",
        "leaderElection.enabled=true,replicas=2",
        "--set-json",
        &format!(r#"watchNamespaces=["{watched}"]"#),
    ]));

    let client = env.client();
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
    assert_eq!(
        permissions(&rules_of(&cluster_role)),
        crd_check_permissions()
    );
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
}
