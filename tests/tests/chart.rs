//! The Helm chart in charts/agentic-operator, rendered by the real helm: lint, the objects
//! each configuration creates, the restricted pod security settings and the exact RBAC.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use agentic_integration_tests::support;
use serde_json::{Value, json};
use support::{
    CHART, GENERATED_CRD_FILES, KUBE_VERSION, all_of_kind, cluster_policy_permissions,
    crd_check_permissions, find, first_difference, generated_crds, helm_template, identities, kind,
    lease_permissions, meta, metrics_review_permissions, namespaced_permissions, parse_yaml_stream,
    permissions, read_yaml_file, repo_root, run_err, run_ok, testenv_tool,
};

const RELEASE: &str = "agentic-operator";
const NAMESPACE: &str = "agentic-operator-system";

fn helm() -> Command {
    let mut command = Command::new(testenv_tool("helm"));
    command.current_dir(repo_root());
    command
}

/// `helm template` of the chart as release `agentic-operator` in `agentic-operator-system`
/// with `--set`/`--set-json` style arguments.
fn template_command(args: &[&str]) -> Command {
    let mut command = helm_template(RELEASE, NAMESPACE);
    command.args(args);
    command
}

fn render(args: &[&str]) -> Vec<Value> {
    let text = run_ok(&mut template_command(args));
    parse_yaml_stream(&text, &format!("helm template {}", args.join(" ")))
}

fn deployment(objects: &[Value]) -> &Value {
    find(objects, "Deployment", RELEASE)
}

fn container(objects: &[Value]) -> &Value {
    let containers = deployment(objects)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("the Deployment has containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    &containers[0]
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .map(|a| a.as_str().expect("args are strings").to_owned())
        .collect()
}

fn app_version() -> String {
    let chart = read_yaml_file(&format!("{CHART}/Chart.yaml"));
    chart[0]["appVersion"]
        .as_str()
        .expect("Chart.yaml has an appVersion string")
        .to_owned()
}

fn identity(kind: &str, namespace: &str, name: &str) -> (String, String, String) {
    (kind.to_owned(), namespace.to_owned(), name.to_owned())
}

#[test]
fn lint_is_clean_with_default_and_full_values() {
    run_ok(helm().args(["lint", "--strict", CHART, "--kube-version", KUBE_VERSION]));
    run_ok(helm().args([
        "lint",
        "--strict",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "leaderElection.enabled=true,replicas=3,metrics.serviceMonitor.enabled=true",
        "--set-json",
        r#"watchNamespaces=["team-a","team-b"]"#,
        "--set-json",
        r#"insecureRegistries=["registry.local:5000"]"#,
        "--set",
        "sandboxBackend=agent-sandbox,logFormat=json",
        "--set-json",
        r#"tenancy={"agentImages":["ghcr.io/acme"],"skillImages":["ghcr.io"],"secretNamePrefixes":["agent-"],"namespaceSelector":{"matchLabels":{"tenant":"yes"}}}"#,
    ]));
}

#[test]
fn default_values_create_the_cluster_wide_operator() {
    let objects = render(&[]);
    let mut want_objects = generated_crd_identities();
    want_objects.extend([
        identity("ServiceAccount", NAMESPACE, RELEASE),
        identity("ClusterRole", "", RELEASE),
        identity("ClusterRole", "", &format!("{RELEASE}-view")),
        identity("ClusterRole", "", &format!("{RELEASE}-edit")),
        identity("ClusterRoleBinding", "", RELEASE),
        identity("Service", NAMESPACE, "agentic-operator-metrics"),
        identity("Service", NAMESPACE, "agentic-operator-otlp"),
        identity("Deployment", NAMESPACE, RELEASE),
    ]);
    assert_eq!(identities(&objects), want_objects);

    let mut want = namespaced_permissions();
    want.extend(crd_check_permissions());
    want.extend(cluster_policy_permissions());
    assert_eq!(
        permissions(&find(&objects, "ClusterRole", RELEASE)["rules"]),
        want
    );

    let binding = find(&objects, "ClusterRoleBinding", RELEASE);
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RELEASE})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}])
    );

    let deployment = deployment(&objects);
    assert_eq!(deployment["spec"]["replicas"], json!(1));
    assert_eq!(deployment["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        json!(RELEASE)
    );
    let container = container(&objects);
    assert_eq!(
        container["image"],
        json!(format!(
            "ghcr.io/konveyor/agentic-operator:{}",
            app_version()
        ))
    );
    assert_eq!(
        args(&objects),
        [
            "run",
            "--health-addr=0.0.0.0:8081",
            "--metrics-addr=0.0.0.0:8080",
            "--otlp-bind-address=0.0.0.0:4318",
            "--otlp-advertised-address=http://agentic-operator-otlp.agentic-operator-system.svc:4318",
            "--otlp-capture-content=true",
            "--otlp-finished-grace-seconds=120",
            "--sandbox-backend=auto",
            "--tag-refresh-seconds=300",
            "--startup-deadline-seconds=600",
            "--orphan-sweep-seconds=300",
            "--default-skills-namespace=agentic-operator-system",
            "--log-format=text",
        ]
    );
}

#[test]
fn pod_meets_the_restricted_pod_security_standard() {
    let objects = render(&[]);
    let pod = &deployment(&objects)["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], json!(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"],
        json!({"type": "RuntimeDefault"})
    );
    assert!(pod["hostNetwork"].is_null() && pod["hostPID"].is_null());
    assert!(
        pod["securityContext"]["runAsUser"].as_i64().unwrap_or(0) > 0,
        "a non-zero runAsUser: {}",
        pod["securityContext"]
    );

    let container = container(&objects);
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], json!(false));
    assert_eq!(security["readOnlyRootFilesystem"], json!(true));
    assert_eq!(security["runAsNonRoot"], json!(true));
    assert_eq!(security["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(
        security["seccompProfile"],
        json!({"type": "RuntimeDefault"})
    );
    assert!(security.get("privileged").is_none());

    for (kind, field) in [
        ("requests", "cpu"),
        ("requests", "memory"),
        ("limits", "memory"),
    ] {
        assert!(
            container["resources"][kind][field].is_string(),
            "resources.{kind}.{field} is set: {}",
            container["resources"]
        );
    }
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "health"})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "health"})
    );
    let ports: Vec<(&str, i64)> = container["ports"]
        .as_array()
        .expect("the container has ports")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or(""),
                p["containerPort"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(ports, [("metrics", 8080), ("health", 8081), ("otlp", 4318)]);

    let env = container["env"].as_array().expect("the container has env");
    let pod_namespace = env
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE is set");
    assert_eq!(
        pod_namespace["valueFrom"],
        json!({"fieldRef": {"fieldPath": "metadata.namespace"}})
    );
}

#[test]
fn watched_namespaces_get_roles_and_only_the_crd_check_stays_cluster_wide() {
    let objects = render(&["--set-json", r#"watchNamespaces=["team-a","team-b"]"#]);

    for namespace in ["team-a", "team-b"] {
        let role = all_of_kind(&objects, "Role")
            .into_iter()
            .find(|r| meta(r, "namespace") == namespace)
            .unwrap_or_else(|| panic!("a Role in {namespace}"));
        assert_eq!(meta(role, "name"), RELEASE);
        assert_eq!(permissions(&role["rules"]), namespaced_permissions());
        let binding = all_of_kind(&objects, "RoleBinding")
            .into_iter()
            .find(|b| meta(b, "namespace") == namespace)
            .unwrap_or_else(|| panic!("a RoleBinding in {namespace}"));
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RELEASE})
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}])
        );
    }
    assert_eq!(all_of_kind(&objects, "Role").len(), 2);

    let mut want = crd_check_permissions();
    want.extend(cluster_policy_permissions());
    assert_eq!(
        permissions(&find(&objects, "ClusterRole", RELEASE)["rules"]),
        want
    );
    let args = args(&objects);
    assert!(args.contains(&"--namespace=team-a".to_owned()), "{args:?}");
    assert!(args.contains(&"--namespace=team-b".to_owned()), "{args:?}");
}

#[test]
fn an_explicit_backend_needs_no_crd_permission_only_the_cluster_policies() {
    let namespaced = render(&[
        "--set",
        "sandboxBackend=pod",
        "--set-json",
        r#"watchNamespaces=["team-a"]"#,
    ]);
    // The roles aggregated into view/edit are for people; nothing binds them to the operator.
    let operator_roles: Vec<_> = all_of_kind(&namespaced, "ClusterRole")
        .into_iter()
        .filter(|role| {
            role["metadata"]["labels"]
                .as_object()
                .is_none_or(|labels| !labels.keys().any(|k| k.contains("/aggregate-to-")))
        })
        .collect();
    assert_eq!(
        operator_roles
            .iter()
            .map(|role| permissions(&role["rules"]))
            .collect::<Vec<_>>(),
        [cluster_policy_permissions()],
        "nothing cluster-scoped for the operator but the cluster's trust policies: {:?}",
        identities(&namespaced)
    );
    assert!(args(&namespaced).contains(&"--sandbox-backend=pod".to_owned()));

    let cluster_wide = render(&["--set", "sandboxBackend=agent-sandbox"]);
    let mut want = namespaced_permissions();
    want.extend(cluster_policy_permissions());
    assert_eq!(
        permissions(&find(&cluster_wide, "ClusterRole", RELEASE)["rules"]),
        want
    );
}

#[test]
fn leader_election_adds_the_lease_role_and_allows_replicas() {
    let objects = render(&["--set", "leaderElection.enabled=true,replicas=2"]);
    let role_name = format!("{RELEASE}-leader-election");

    let role = find(&objects, "Role", &role_name);
    assert_eq!(meta(role, "namespace"), NAMESPACE);
    assert_eq!(
        permissions(&role["rules"]),
        lease_permissions(&format!("{RELEASE}-leader"))
    );
    let binding = find(&objects, "RoleBinding", &role_name);
    assert_eq!(meta(binding, "namespace"), NAMESPACE);
    assert_eq!(binding["roleRef"]["name"], json!(role_name));
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}])
    );

    let deployment = deployment(&objects);
    assert_eq!(deployment["spec"]["replicas"], json!(2));
    assert_eq!(
        deployment["spec"]["strategy"]["type"],
        json!("RollingUpdate")
    );
    assert!(args(&objects).contains(&"--leader-elect".to_owned()));

    let without = render(&[]);
    assert!(all_of_kind(&without, "Role").is_empty());
    assert!(!args(&without).contains(&"--leader-elect".to_owned()));
}

/// With shards, replicas mean capacity: each replica serves its share of the namespaces
/// through the Leases of the shards and member slots, which the Role names one by one.
#[test]
fn shards_allow_replicas_and_name_each_shards_lease_in_the_role() {
    let objects = render(&["--set", "shards=2,replicas=2"]);
    let lease = format!("{RELEASE}-leader");
    let role = find(&objects, "Role", &format!("{RELEASE}-leader-election"));
    let mut want = lease_permissions(&lease);
    for name in ["shard-0", "member-0", "shard-1", "member-1"] {
        want.extend(lease_permissions(&format!("{lease}-{name}")));
    }
    assert_eq!(permissions(&role["rules"]), want);
    let given = args(&objects);
    assert!(given.contains(&"--shards=2".to_owned()), "{given:?}");
    assert!(
        given.contains(&format!("--leader-election-lease={lease}")),
        "{given:?}"
    );
    // The shard Leases replace the leader's: no standby waits.
    assert!(!given.contains(&"--leader-elect".to_owned()), "{given:?}");
    assert_eq!(deployment(&objects)["spec"]["replicas"], json!(2));

    let one = render(&[]);
    assert!(!args(&one).iter().any(|arg| arg.starts_with("--shards")));
    let stderr = run_err(&mut template_command(&["--set", "shards=0"]));
    assert!(stderr.contains("shards"), "{stderr}");

    // Server-side sharded watches: only with shards, and only when asked for.
    assert!(!given.iter().any(|arg| arg.starts_with("--shard-watch")));
    let server = render(&["--set", "shards=2,replicas=2,shardWatch=server"]);
    assert!(args(&server).contains(&"--shard-watch=server".to_owned()));
    let single = render(&["--set", "shardWatch=server"]);
    assert!(
        !args(&single)
            .iter()
            .any(|arg| arg.starts_with("--shard-watch"))
    );
    let stderr = run_err(&mut template_command(&["--set", "shardWatch=both"]));
    assert!(stderr.contains("shardWatch"), "{stderr}");
}

#[test]
fn replicas_without_leader_election_are_refused() {
    let stderr = run_err(&mut template_command(&["--set", "replicas=2"]));
    assert!(
        stderr.contains("replicas is 2 but leaderElection.enabled is false"),
        "{stderr}"
    );
}

#[test]
fn service_monitor_is_opt_in_and_scrapes_the_metrics_service() {
    assert!(all_of_kind(&render(&[]), "ServiceMonitor").is_empty());

    let objects = render(&[
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prometheus",
    ]);
    let monitor = find(&objects, "ServiceMonitor", RELEASE);
    assert_eq!(monitor["apiVersion"], json!("monitoring.coreos.com/v1"));
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        json!("prometheus")
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], json!("metrics"));
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], json!("/metrics"));
    assert_eq!(
        monitor["spec"]["namespaceSelector"],
        json!({"matchNames": [NAMESPACE]})
    );

    // The monitor selects the metrics Service, which selects the operator pods.
    let service = find(&objects, "Service", "agentic-operator-metrics");
    let service_labels = service["metadata"]["labels"]
        .as_object()
        .expect("the Service has labels");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("the monitor selects by labels")
    {
        assert_eq!(service_labels.get(key), Some(value), "Service label {key}");
    }
    assert_eq!(service["spec"]["ports"][0]["targetPort"], json!("metrics"));
    let pod_labels = &deployment(&objects)["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"]
        .as_object()
        .expect("the Service has a selector")
    {
        assert_eq!(&pod_labels[key], value, "pod label {key}");
    }
}

#[test]
fn secure_metrics_review_tokens_and_are_scraped_over_https() {
    // Off by default: no reviews, no reader role, plain HTTP.
    let plain = render(&["--set", "metrics.serviceMonitor.enabled=true"]);
    assert!(!args(&plain).contains(&"--metrics-secure".to_owned()));
    assert!(
        all_of_kind(&plain, "ClusterRole")
            .iter()
            .all(|role| !meta(role, "name").ends_with("-metrics-reader"))
    );
    let endpoint = &find(&plain, "ServiceMonitor", RELEASE)["spec"]["endpoints"][0];
    assert!(endpoint["scheme"].is_null(), "{endpoint}");

    let objects = render(&[
        "--set",
        "metrics.secure=true,metrics.serviceMonitor.enabled=true",
    ]);
    assert!(args(&objects).contains(&"--metrics-secure".to_owned()));
    assert!(
        !args(&objects)
            .iter()
            .any(|a| a.starts_with("--metrics-tls")),
        "self-signed without a Secret: {:?}",
        args(&objects)
    );
    let mut want = namespaced_permissions();
    want.extend(crd_check_permissions());
    want.extend(metrics_review_permissions());
    want.extend(cluster_policy_permissions());
    assert_eq!(
        permissions(&find(&objects, "ClusterRole", RELEASE)["rules"]),
        want
    );
    let reader = find(
        &objects,
        "ClusterRole",
        &format!("{RELEASE}-metrics-reader"),
    );
    assert_eq!(
        reader["rules"],
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
    let endpoint = &find(&objects, "ServiceMonitor", RELEASE)["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], json!("https"));
    assert_eq!(
        endpoint["bearerTokenFile"],
        json!("/var/run/secrets/kubernetes.io/serviceaccount/token")
    );
    assert_eq!(endpoint["tlsConfig"], json!({"insecureSkipVerify": true}));

    // Watching some namespaces with an explicit backend needs nothing else cluster-wide, so
    // the ClusterRole holds the reviews and the cluster's trust policies alone.
    let namespaced = render(&[
        "--set",
        "metrics.secure=true,sandboxBackend=pod",
        "--set-json",
        r#"watchNamespaces=["team-a"]"#,
    ]);
    let mut want = metrics_review_permissions();
    want.extend(cluster_policy_permissions());
    assert_eq!(
        permissions(&find(&namespaced, "ClusterRole", RELEASE)["rules"]),
        want
    );
    find(&namespaced, "ClusterRoleBinding", RELEASE);

    // A certificate from a Secret, and a verified scrape.
    let objects = render(&[
        "--set",
        "metrics.secure=true,metrics.tlsSecretName=operator-metrics-tls,metrics.serviceMonitor.enabled=true",
        "--set-json",
        r#"metrics.serviceMonitor.tlsConfig={"serverName":"agentic-operator-metrics.agentic-operator-system.svc","ca":{"secret":{"name":"operator-metrics-tls","key":"ca.crt"}}}"#,
    ]);
    let args = args(&objects);
    for flag in [
        "--metrics-tls-cert=/etc/agentic-operator/metrics-tls/tls.crt",
        "--metrics-tls-key=/etc/agentic-operator/metrics-tls/tls.key",
    ] {
        assert!(args.contains(&flag.to_owned()), "{args:?}");
    }
    let pod = &deployment(&objects)["spec"]["template"]["spec"];
    assert!(
        pod["volumes"].as_array().expect("volumes").contains(
            &json!({"name": "metrics-tls", "secret": {"secretName": "operator-metrics-tls"}})
        ),
        "{}",
        pod["volumes"]
    );
    assert!(
        container(&objects)["volumeMounts"]
            .as_array()
            .expect("mounts")
            .contains(&json!({"name": "metrics-tls", "mountPath": "/etc/agentic-operator/metrics-tls", "readOnly": true}))
    );
    let endpoint = &find(&objects, "ServiceMonitor", RELEASE)["spec"]["endpoints"][0];
    assert_eq!(
        endpoint["tlsConfig"]["serverName"],
        json!("agentic-operator-metrics.agentic-operator-system.svc")
    );
    assert!(endpoint["tlsConfig"]["insecureSkipVerify"].is_null());
}

#[test]
fn values_reach_the_command_line_and_pod() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let objects = render(&[
        "--set-json",
        r#"insecureRegistries=["registry.local:5000","10.0.0.7:5000"]"#,
        "--set-json",
        r#"insecureGitHosts=["git.local","10.0.0.8:3000"]"#,
        "--set",
        &format!("image.tag={digest},logFormat=json,logLevel=debug,tagRefreshSeconds=60"),
        "--set",
        "startupDeadlineSeconds=90,ttlAfterSucceeded=0,ttlAfterFailed=86400,maxConcurrentRunsPerNamespace=20,orphanSweepSeconds=0",
        "--set",
        "podAnnotations.team=migrations,nodeSelector.pool=operators",
        "--set",
        "traceCollector=http://otel.observability:4318",
        "--set-json",
        r#"imagePullSecrets=[{"name":"ghcr"}]"#,
    ]);
    let args = args(&objects);
    for expected in [
        "--insecure-registry=registry.local:5000",
        "--insecure-registry=10.0.0.7:5000",
        "--insecure-git-host=git.local",
        "--insecure-git-host=10.0.0.8:3000",
        "--log-format=json",
        "--tag-refresh-seconds=60",
        "--startup-deadline-seconds=90",
        // 0 is a time to live (delete at once), not "unset".
        "--ttl-after-succeeded=0",
        "--ttl-after-failed=86400",
        "--max-concurrent-runs-per-namespace=20",
        // 0 turns the sweep off, which the operator reads from the flag.
        "--orphan-sweep-seconds=0",
        "--trace-collector=http://otel.observability:4318",
    ] {
        assert!(
            args.contains(&expected.to_owned()),
            "{expected} in {args:?}"
        );
    }
    let container = container(&objects);
    assert_eq!(
        container["image"],
        json!(format!("ghcr.io/konveyor/agentic-operator@{digest}"))
    );
    let rust_log = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "RUST_LOG")
        .expect("RUST_LOG is set");
    assert_eq!(rust_log["value"], json!("debug"));
    let template = &deployment(&objects)["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"]["team"],
        json!("migrations")
    );
    assert_eq!(
        template["spec"]["nodeSelector"],
        json!({"pool": "operators"})
    );
    assert_eq!(
        template["spec"]["imagePullSecrets"],
        json!([{"name": "ghcr"}])
    );
}

#[test]
fn the_schema_rejects_unknown_and_invalid_values() {
    for (args, complaint) in [
        (["--set", "replicaCount=2"], "replicaCount"),
        (["--set", "sandboxBackend=docker"], "sandboxBackend"),
        (["--set", "logFormat=yaml"], "logFormat"),
        (["--set", "image.tagg=1"], "tagg"),
        (["--set", "metrics.port=0"], "metrics/port"),
        (
            ["--set", "startupDeadlineSeconds=-1"],
            "startupDeadlineSeconds",
        ),
        (["--set", "ttlAfterFailed=soon"], "ttlAfterFailed"),
        (
            ["--set", "maxConcurrentRunsPerNamespace=-2"],
            "maxConcurrentRunsPerNamespace",
        ),
        (["--set", "orphanSweepSeconds=-1"], "orphanSweepSeconds"),
        (["--set", "traceCollector=otel:4318"], "traceCollector"),
        (["--set", "crds.enabled=maybe"], "crds/enabled"),
        (["--set", "crds.delete=true"], "delete"),
        (
            ["--set", "metrics.tlsSecretName=Not_A_Name"],
            "tlsSecretName",
        ),
    ] {
        let stderr = run_err(&mut template_command(&args));
        assert!(stderr.contains(complaint), "{args:?}: {stderr}");
    }
    let stderr = run_err(&mut template_command(&[
        "--set-json",
        r#"watchNamespaces=["Team_A"]"#,
    ]));
    assert!(stderr.contains("watchNamespaces"), "{stderr}");
}

#[test]
fn every_object_carries_the_release_labels() {
    let objects = render(&[
        "--set",
        "leaderElection.enabled=true,metrics.serviceMonitor.enabled=true",
    ]);
    for object in &objects {
        let labels = &object["metadata"]["labels"];
        assert_eq!(
            labels["app.kubernetes.io/instance"],
            json!(RELEASE),
            "{} {}",
            kind(object),
            meta(object, "name")
        );
        assert_eq!(labels["app.kubernetes.io/managed-by"], json!("Helm"));
    }
}

fn generated_crd_identities() -> BTreeSet<(String, String, String)> {
    identities(&generated_crds())
}

#[test]
fn chart_crds_are_the_generated_ones() {
    // The chart's copy is byte for byte the generated file (agentic-api's
    // `committed_manifests_match_the_code` ties that file to the Rust types)...
    for generated_file in GENERATED_CRD_FILES {
        let file_name = Path::new(generated_file).file_name().expect("a file name");
        let chart_file = Path::new(CHART).join("files/crds").join(file_name);
        let chart = std::fs::read(repo_root().join(&chart_file))
            .unwrap_or_else(|e| panic!("the chart has {}: {e}", chart_file.display()));
        let generated = std::fs::read(repo_root().join(generated_file))
            .unwrap_or_else(|e| panic!("{generated_file} exists: {e}"));
        assert!(
            chart == generated,
            "{} differs from {generated_file}; run `make crds`",
            chart_file.display()
        );
    }
    // ...with no crds/ next to the templates, from which Helm would install them a second
    // time and never upgrade them.
    assert!(
        !repo_root().join(CHART).join("crds").exists(),
        "the chart's CRDs are templates; remove charts/agentic-operator/crds/"
    );

    // What the template renders is the generated CRD, plus the release labels and the keep
    // annotation.
    let objects = render(&[]);
    let rendered = all_of_kind(&objects, "CustomResourceDefinition");
    let generated = generated_crds();
    assert_eq!(rendered.len(), generated.len(), "every CRD is rendered");
    for crd in &generated {
        let name = meta(crd, "name");
        let mut ours = find(&objects, "CustomResourceDefinition", name).clone();
        assert_eq!(
            ours["metadata"]["annotations"],
            json!({"helm.sh/resource-policy": "keep"}),
            "{name}"
        );
        assert_eq!(
            ours["metadata"]["labels"]["app.kubernetes.io/instance"],
            json!(RELEASE),
            "{name}"
        );
        let metadata = ours["metadata"].as_object_mut().expect("metadata");
        metadata.remove("annotations");
        metadata.remove("labels");
        if let Some(difference) = first_difference(&ours, crd) {
            panic!("the chart's {name} differs from the generated one at {difference}");
        }
    }
}

#[test]
fn crds_can_be_left_to_others_and_deleted_on_uninstall() {
    let objects = render(&["--set", "crds.keep=false"]);
    let crds = all_of_kind(&objects, "CustomResourceDefinition");
    assert_eq!(crds.len(), generated_crd_identities().len());
    for crd in crds {
        assert!(
            crd["metadata"]["annotations"].is_null(),
            "no keep policy: {}",
            crd["metadata"]
        );
    }

    let objects = render(&["--set", "crds.enabled=false"]);
    assert!(all_of_kind(&objects, "CustomResourceDefinition").is_empty());
    assert!(
        !objects.is_empty(),
        "the rest of the chart is still rendered"
    );

    // `helm upgrade --reuse-values` from a release of a chart without `crds` values: the
    // CRDs are installed and kept, as by default.
    let objects = render(&["--set", "crds=null"]);
    let crds = all_of_kind(&objects, "CustomResourceDefinition");
    assert_eq!(crds.len(), generated_crd_identities().len());
    for crd in crds {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            json!("keep")
        );
    }
}

#[test]
fn the_lease_is_named_per_release_and_overridable() {
    let default = render(&["--set", "leaderElection.enabled=true,replicas=2"]);
    assert!(args(&default).contains(&format!("--leader-election-lease={RELEASE}-leader")));

    let other = run_ok(
        helm_template("team-b", NAMESPACE)
            .args(["--set", "leaderElection.enabled=true,replicas=2"]),
    );
    let other = parse_yaml_stream(&other, "release team-b");
    let role = find(&other, "Role", "team-b-agentic-operator-leader-election");
    assert_eq!(
        permissions(&role["rules"]),
        lease_permissions("team-b-agentic-operator-leader"),
        "another release competes for another Lease"
    );

    let named = render(&[
        "--set",
        "leaderElection.enabled=true,replicas=2,leaderElection.leaseName=ops-leader",
    ]);
    assert!(args(&named).contains(&"--leader-election-lease=ops-leader".to_owned()));
    let role = find(&named, "Role", &format!("{RELEASE}-leader-election"));
    assert_eq!(permissions(&role["rules"]), lease_permissions("ops-leader"));
}

#[test]
fn the_pod_knows_its_name_for_the_lease_and_events() {
    let env = container(&render(&[]))["env"].clone();
    let pod_name = env
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "POD_NAME")
        .expect("POD_NAME is set");
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        json!("metadata.name")
    );
}

#[test]
fn extra_args_env_volumes_and_security_contexts_reach_the_pod() {
    let objects = render(&[
        "--set-json",
        r#"extraArgs=["--ttl-after-failed=86400"]"#,
        "--set-json",
        r#"extraEnv=[{"name":"SSL_CERT_DIR","value":"/etc/ca"}]"#,
        "--set-json",
        r#"extraVolumes=[{"name":"ca","configMap":{"name":"corp-ca"}}]"#,
        "--set-json",
        r#"extraVolumeMounts=[{"name":"ca","mountPath":"/etc/ca","readOnly":true}]"#,
        "--set-json",
        r#"podSecurityContext={"runAsNonRoot":true,"runAsUser":1000,"fsGroup":1000}"#,
        "--set-json",
        r#"topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]"#,
    ]);
    assert_eq!(
        args(&objects).last().map(String::as_str),
        Some("--ttl-after-failed=86400")
    );
    let container = container(&objects);
    assert!(
        container["env"]
            .as_array()
            .expect("env")
            .contains(&json!({"name": "SSL_CERT_DIR", "value": "/etc/ca"}))
    );
    assert!(
        container["volumeMounts"]
            .as_array()
            .expect("mounts")
            .contains(&json!({"name": "ca", "mountPath": "/etc/ca", "readOnly": true}))
    );
    let pod = &deployment(&objects)["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .expect("volumes")
            .contains(&json!({"name": "ca", "configMap": {"name": "corp-ca"}}))
    );
    // Helm merges the override into the default; a key set to null removes it.
    assert_eq!(pod["securityContext"]["runAsUser"], json!(1000));
    assert_eq!(pod["securityContext"]["fsGroup"], json!(1000));
    assert_eq!(
        pod["topologySpreadConstraints"][0]["topologyKey"],
        json!("topology.kubernetes.io/zone")
    );
}

#[test]
fn a_disruption_budget_keeps_a_standby_through_drains() {
    assert!(all_of_kind(&render(&[]), "PodDisruptionBudget").is_empty());
    let objects = render(&["--set", "leaderElection.enabled=true,replicas=2"]);
    let budget = find(&objects, "PodDisruptionBudget", RELEASE);
    assert_eq!(budget["spec"]["minAvailable"], json!(1));
    let pod_labels = &deployment(&objects)["spec"]["template"]["metadata"]["labels"];
    for (key, value) in budget["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("the budget selects by labels")
    {
        assert_eq!(&pod_labels[key], value, "pod label {key}");
    }
    let off = render(&[
        "--set",
        "leaderElection.enabled=true,replicas=2,podDisruptionBudget.enabled=false",
    ]);
    assert!(all_of_kind(&off, "PodDisruptionBudget").is_empty());
}

#[test]
fn the_kinds_join_the_built_in_view_edit_and_admin_roles() {
    let objects = render(&[]);
    let view = find(&objects, "ClusterRole", &format!("{RELEASE}-view"));
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        json!("true")
    );
    let verbs = |role: &Value| -> BTreeSet<String> {
        permissions(&role["rules"])
            .into_iter()
            .map(|(_, _, verb, _)| verb)
            .collect()
    };
    assert_eq!(
        verbs(view),
        ["get", "list", "watch"].map(str::to_owned).into()
    );
    let edit = find(&objects, "ClusterRole", &format!("{RELEASE}-edit"));
    for label in ["aggregate-to-edit", "aggregate-to-admin"] {
        assert_eq!(
            edit["metadata"]["labels"][format!("rbac.authorization.k8s.io/{label}")],
            json!("true")
        );
    }
    // Writing status stays the operator's: no role for people grants it.
    for role in [view, edit] {
        assert!(
            permissions(&role["rules"])
                .iter()
                .all(|(group, resource, _, _)| group == "konveyor.io" && !resource.contains('/')),
            "{role}"
        );
    }
    let off = render(&["--set", "rbac.aggregateToDefaultRoles=false"]);
    assert!(
        all_of_kind(&off, "ClusterRole")
            .iter()
            .all(|r| !meta(r, "name").ends_with("-view") && !meta(r, "name").ends_with("-edit"))
    );
}

#[test]
fn the_network_policy_opens_only_the_health_metrics_and_otlp_ports() {
    assert!(all_of_kind(&render(&[]), "NetworkPolicy").is_empty());
    let objects = render(&[
        "--set",
        "networkPolicy.enabled=true",
        "--set-json",
        r#"networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"name":"monitoring"}}}]"#,
    ]);
    let policy = find(&objects, "NetworkPolicy", RELEASE);
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(ingress.len(), 3);
    // Sandboxes of any namespace report to the receiver; the bearer authenticates.
    assert_eq!(
        ingress[2],
        json!({"ports": [{"port": "otlp", "protocol": "TCP"}]})
    );
    assert_eq!(
        ingress[0]["ports"],
        json!([{"port": "health", "protocol": "TCP"}])
    );
    assert!(
        ingress[0].get("from").is_none(),
        "probes come from the node"
    );
    assert_eq!(
        ingress[1]["ports"],
        json!([{"port": "metrics", "protocol": "TCP"}])
    );
    assert_eq!(
        ingress[1]["from"],
        json!([{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}])
    );
}

#[test]
fn alerts_and_the_dashboard_are_opt_in_and_target_the_release() {
    let default = render(&[]);
    assert!(all_of_kind(&default, "PrometheusRule").is_empty());
    assert!(all_of_kind(&default, "ConfigMap").is_empty());

    let objects = render(&[
        "--set",
        "metrics.prometheusRule.enabled=true,metrics.prometheusRule.labels.release=prometheus",
        "--set",
        "metrics.grafanaDashboard.enabled=true",
    ]);
    let rule = find(&objects, "PrometheusRule", RELEASE);
    assert_eq!(rule["apiVersion"], json!("monitoring.coreos.com/v1"));
    assert_eq!(rule["metadata"]["labels"]["release"], json!("prometheus"));
    let rules = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("a group of rules");
    let down = rules
        .iter()
        .find(|r| r["alert"] == "AgenticOperatorDown")
        .expect("the operator-down alert");
    // The job a ServiceMonitor gives the targets of the metrics Service.
    assert_eq!(
        down["expr"],
        json!(format!("absent(up{{job=\"{RELEASE}-metrics\"}} == 1)"))
    );
    find(&objects, "Service", &format!("{RELEASE}-metrics"));
    for rule in rules {
        assert!(rule["labels"]["severity"].is_string(), "{rule}");
        assert!(!rule.to_string().contains("__METRICS_JOB__"), "{rule}");
    }
    // Alert templates reach Prometheus untouched by helm.
    assert!(rule.to_string().contains("{{ $labels.kind }}"));

    let dashboard = find(&objects, "ConfigMap", &format!("{RELEASE}-dashboard"));
    assert_eq!(
        dashboard["metadata"]["labels"]["grafana_dashboard"],
        json!("1")
    );
    let json: Value = serde_json::from_str(
        dashboard["data"]["agentic-operator.json"]
            .as_str()
            .expect("the dashboard is a string"),
    )
    .expect("the dashboard is JSON");
    assert_eq!(json["uid"], json!("agentic-operator"));
    assert!(json["panels"].as_array().is_some_and(|p| p.len() >= 6));
    assert!(
        json["panels"].as_array().is_some_and(|panels| panels
            .iter()
            .any(|panel| panel.to_string().contains("agentic_skill_loads_total"))),
        "a panel of skill loads per skill"
    );
}
