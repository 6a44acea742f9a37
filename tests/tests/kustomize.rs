//! The kustomize configuration in config/, rendered by the real `kubectl kustomize`, against
//! the Helm chart: both must install the same objects with the same RBAC and the same pod.

use std::collections::BTreeSet;
use std::process::Command;

use agentic_integration_tests::support;
use serde_json::{Value, json};
use support::{
    all_of_kind, cluster_policy_permissions, crd_check_permissions, find, first_difference,
    generated_crds, helm_template, identities, kind, lease_permissions, meta,
    namespaced_permissions, parse_yaml_stream, permissions, repo_root, run_ok, testenv_tool,
};

const NAME: &str = "agentic-operator";
const NAMESPACE: &str = "agentic-operator-system";

fn kustomize(dir: &str) -> Vec<Value> {
    let text = run_ok(
        Command::new(testenv_tool("kubectl"))
            .current_dir(repo_root())
            .args(["kustomize", dir]),
    );
    parse_yaml_stream(&text, &format!("kubectl kustomize {dir}"))
}

/// The chart as release `agentic-operator` in `agentic-operator-system`.
fn chart(set: &[&str]) -> Vec<Value> {
    let mut command = helm_template(NAME, NAMESPACE);
    for value in set {
        command.args(["--set", value]);
    }
    let text = run_ok(&mut command);
    parse_yaml_stream(&text, "helm template")
}

/// The objects a chart install also creates: everything but the Namespace, which helm
/// leaves to `--create-namespace`.
fn without_namespace(objects: &[Value]) -> Vec<Value> {
    objects
        .iter()
        .filter(|o| kind(o) != "Namespace")
        .cloned()
        .collect()
}

fn crd_names(objects: &[Value]) -> BTreeSet<String> {
    all_of_kind(objects, "CustomResourceDefinition")
        .into_iter()
        .map(|crd| meta(crd, "name").to_owned())
        .collect()
}

#[test]
fn crd_kustomization_is_exactly_the_generated_crds() {
    let rendered = kustomize("config/crd");
    let generated = generated_crds();
    assert_eq!(
        rendered.len(),
        9,
        "Konveyor's seven CRDs and our two trust policies: {:?}",
        crd_names(&rendered)
    );
    assert_eq!(crd_names(&rendered), crd_names(&generated));
    for crd in &generated {
        let name = meta(crd, "name");
        let kustomized = find(&rendered, "CustomResourceDefinition", name);
        if let Some(difference) = first_difference(kustomized, crd) {
            panic!("{name} differs from the generated one at {difference}");
        }
    }
}

#[test]
fn default_installs_what_the_chart_installs() {
    let kustomized = kustomize("config/default");
    let helm = chart(&[]);

    let namespace = find(&kustomized, "Namespace", NAMESPACE);
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        json!("restricted")
    );
    assert_eq!(
        crd_names(&kustomized),
        crd_names(&generated_crds()),
        "config/default installs every CRD"
    );
    assert_eq!(
        identities(&without_namespace(&kustomized)),
        identities(&helm),
        "same kinds, namespaces and names as the chart"
    );
}

#[test]
fn default_rbac_equals_the_chart_and_the_documented_rules() {
    let kustomized = kustomize("config/default");
    let helm = chart(&[]);

    let kustomize_rules = permissions(&find(&kustomized, "ClusterRole", NAME)["rules"]);
    let chart_rules = permissions(&find(&helm, "ClusterRole", NAME)["rules"]);
    assert_eq!(kustomize_rules, chart_rules);

    let mut documented = namespaced_permissions();
    documented.extend(crd_check_permissions());
    documented.extend(cluster_policy_permissions());
    assert_eq!(kustomize_rules, documented);

    let binding = find(&kustomized, "ClusterRoleBinding", NAME);
    assert_eq!(binding["roleRef"]["name"], json!(NAME));
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}])
    );
    assert!(all_of_kind(&kustomized, "Role").is_empty());

    // The roles aggregated into view, edit and admin are the chart's.
    for role in [format!("{NAME}-view"), format!("{NAME}-edit")] {
        let (ours, theirs) = (
            find(&kustomized, "ClusterRole", &role),
            find(&helm, "ClusterRole", &role),
        );
        assert_eq!(
            permissions(&ours["rules"]),
            permissions(&theirs["rules"]),
            "{role}"
        );
        for (key, value) in theirs["metadata"]["labels"].as_object().expect("labels") {
            if key.starts_with("rbac.authorization.k8s.io/") {
                assert_eq!(&ours["metadata"]["labels"][key], value, "{role}: {key}");
            }
        }
    }
}

/// The parts of a Deployment that decide what runs: replicas, update strategy, selector and
/// the whole pod spec. Labels and annotations are left out: the chart adds its own.
fn workload(objects: &[Value]) -> Value {
    let spec = &find(objects, "Deployment", NAME)["spec"];
    json!({
        "replicas": spec["replicas"],
        "strategy": spec["strategy"],
        "selector": spec["selector"],
        "pod": spec["template"]["spec"],
    })
}

#[test]
fn default_runs_the_same_pod_and_service_as_the_chart() {
    let kustomized = kustomize("config/default");
    let helm = chart(&[]);
    assert_eq!(workload(&kustomized), workload(&helm));
    for service in ["agentic-operator-metrics", "agentic-operator-otlp"] {
        assert_eq!(
            find(&kustomized, "Service", service)["spec"],
            find(&helm, "Service", service)["spec"],
            "{service}"
        );
    }
}

#[test]
fn ha_overlay_equals_the_chart_with_leader_election() {
    let kustomized = kustomize("config/ha");
    let helm = chart(&["leaderElection.enabled=true", "replicas=2"]);

    assert_eq!(
        identities(&without_namespace(&kustomized)),
        identities(&helm)
    );
    let role = format!("{NAME}-leader-election");
    let kustomize_lease = find(&kustomized, "Role", &role);
    assert_eq!(meta(kustomize_lease, "namespace"), NAMESPACE);
    assert_eq!(
        permissions(&kustomize_lease["rules"]),
        lease_permissions("agentic-operator-leader")
    );
    assert_eq!(
        permissions(&kustomize_lease["rules"]),
        permissions(&find(&helm, "Role", &role)["rules"])
    );
    assert_eq!(
        find(&kustomized, "RoleBinding", &role)["subjects"],
        json!([{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}])
    );
    assert_eq!(workload(&kustomized), workload(&helm));
    assert_eq!(workload(&kustomized)["replicas"], json!(2));
}

#[test]
fn every_namespaced_object_lands_in_the_operator_namespace() {
    for dir in ["config/default", "config/ha"] {
        for object in without_namespace(&kustomize(dir)) {
            let cluster_scoped = matches!(
                kind(&object),
                "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"
            );
            let want = if cluster_scoped { "" } else { NAMESPACE };
            assert_eq!(
                meta(&object, "namespace"),
                want,
                "{dir}: {} {}",
                kind(&object),
                meta(&object, "name")
            );
        }
    }
}
