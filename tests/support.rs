//! Helpers shared by the tests of the shipping surface: the Helm chart, the kustomize
//! configuration, the samples and the scripts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The directory of control-plane binaries (`make testenv`), where helm and kubectl live.
pub const TESTENV_BIN_ENV: &str = "AGENTIC_TESTENV_BIN";

/// The Kubernetes version the chart is rendered and linted for, given explicitly so these
/// tests do not depend on the default helm was built with (tests/tests/testenv_tools.rs
/// checks that default).
pub const KUBE_VERSION: &str = "1.36.0";

/// The Helm chart, relative to [`repo_root`].
pub const CHART: &str = "charts/agentic-operator";

/// `helm template <release> <chart> --namespace <namespace> --kube-version <KUBE_VERSION>`,
/// run from the repository root; callers add their `--set` arguments.
pub fn helm_template(release: &str, namespace: &str) -> Command {
    let mut command = Command::new(testenv_tool("helm"));
    command.current_dir(repo_root()).args([
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
    ]);
    command
}

/// The repository checkout.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the repository")
        .to_path_buf()
}

/// `$AGENTIC_TESTENV_BIN/<name>`; panics with what to do when it is missing, because a test
/// that cannot run its tool must fail, not pass silently.
pub fn testenv_tool(name: &str) -> PathBuf {
    let Some(dir) = std::env::var_os(TESTENV_BIN_ENV) else {
        panic!(
            "{TESTENV_BIN_ENV} is not set: run the tests with `make test`, or export \
             {TESTENV_BIN_ENV}=\"$(hack/testenv-tools.sh | tail -n1)\""
        );
    };
    let path = PathBuf::from(dir).join(name);
    assert!(
        path.is_file(),
        "{} does not exist: `hack/testenv-tools.sh` builds {name} into ${TESTENV_BIN_ENV}",
        path.display()
    );
    path
}

fn describe(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    words.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

fn output(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", describe(command)))
}

/// Runs `command`, expects exit status 0 and returns its stdout.
pub fn run_ok(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        out.status.success(),
        "`{}` failed with {}:\nstdout:\n{}\nstderr:\n{}",
        describe(command),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap_or_else(|e| panic!("`{}` printed non-UTF-8: {e}", describe(command)))
}

/// What the cluster of `kubeconfig` looked like, for a failure message: every pod, the recent
/// Events, and the description and log of the pods of `namespace`. A test that waits on the
/// cluster through a tool (`helm --wait`, `kubectl wait`) learns only that time ran out; this
/// says why.
pub fn cluster_state(kubeconfig: &Path, namespace: &str) -> String {
    let kubectl = |args: &[&str]| -> String {
        let out = Command::new(testenv_tool("kubectl"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .output();
        match out {
            Ok(out) => format!(
                "$ kubectl {}\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => format!("$ kubectl {}: cannot start: {e}\n", args.join(" ")),
        }
    };
    [
        kubectl(&["get", "pods", "--all-namespaces", "--output", "wide"]),
        kubectl(&[
            "get",
            "events",
            "--all-namespaces",
            "--sort-by",
            ".lastTimestamp",
        ]),
        kubectl(&["describe", "pods", "--namespace", namespace]),
        kubectl(&[
            "logs",
            "--namespace",
            namespace,
            "--all-containers",
            "--prefix",
            "--tail",
            "100",
            "--selector",
            "app.kubernetes.io/name=agentic-operator",
        ]),
    ]
    .concat()
}

/// Runs `command`, expects it to fail and returns its stderr.
pub fn run_err(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        !out.status.success(),
        "`{}` succeeded but should have failed; stdout:\n{}",
        describe(command),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every non-empty document of a YAML stream, as JSON values.
pub fn parse_yaml_stream(text: &str, origin: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("{origin} is not valid YAML: {e}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// A YAML file of the repository, every document.
/// The generated CRD files: Konveyor's kinds, then our trust policies.
pub const GENERATED_CRD_FILES: [&str; 2] = [
    "config/crd/bases/konveyor.io.yaml",
    "config/crd/bases/trust.agentic-operator.io.yaml",
];

/// Every generated CRD, from [`GENERATED_CRD_FILES`].
pub fn generated_crds() -> Vec<Value> {
    GENERATED_CRD_FILES
        .iter()
        .flat_map(|file| read_yaml_file(file))
        .collect()
}

pub fn read_yaml_file(relative: &str) -> Vec<Value> {
    let path = repo_root().join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_yaml_stream(&text, relative)
}

/// `metadata.<field>` of an object, or "" when absent.
pub fn meta<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or("")
}

pub fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or("")
}

/// `(kind, namespace, name)` of every object, to compare what two renderings create.
pub fn identities(objects: &[Value]) -> BTreeSet<(String, String, String)> {
    objects
        .iter()
        .map(|o| {
            (
                kind(o).to_owned(),
                meta(o, "namespace").to_owned(),
                meta(o, "name").to_owned(),
            )
        })
        .collect()
}

/// The only object of `kind` named `name`; panics listing what there is otherwise.
pub fn find<'a>(objects: &'a [Value], kind_name: &str, name: &str) -> &'a Value {
    let matching: Vec<&Value> = objects
        .iter()
        .filter(|o| kind(o) == kind_name && meta(o, "name") == name)
        .collect();
    match matching.as_slice() {
        [one] => one,
        _ => panic!(
            "want exactly one {kind_name} {name}, found {}; objects: {:?}",
            matching.len(),
            identities(objects)
        ),
    }
}

pub fn all_of_kind<'a>(objects: &'a [Value], kind_name: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| kind(o) == kind_name).collect()
}

/// One permission an RBAC rule grants: API group, resource, verb and, when the rule names
/// objects, the object name (`*` otherwise).
pub type Permission = (String, String, String, String);

/// Expands RBAC rules into single permissions, so that rule sets compare whatever their
/// grouping. Panics on rule fields this operator never needs (non-resource URLs).
pub fn permissions(rules: &Value) -> BTreeSet<Permission> {
    let strings = |rule: &Value, field: &str| -> Vec<String> {
        rule[field]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .unwrap_or_else(|| panic!("{field} holds a non-string: {i}"))
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut granted = BTreeSet::new();
    for rule in rules.as_array().expect("rules is a list") {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "unexpected nonResourceURLs rule: {rule}"
        );
        let names = strings(rule, "resourceNames");
        let names = if names.is_empty() {
            vec!["*".to_owned()]
        } else {
            names
        };
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in strings(rule, "verbs") {
                    for name in &names {
                        granted.insert((
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            name.clone(),
                        ));
                    }
                }
            }
        }
    }
    granted
}

/// Builds the expected permission set from `(group, resources, verbs, resource name)` rows.
pub fn expected_permissions(rows: &[(&str, &[&str], &[&str], &str)]) -> BTreeSet<Permission> {
    let mut set = BTreeSet::new();
    for (group, resources, verbs, name) in rows {
        for resource in *resources {
            for verb in *verbs {
                set.insert((
                    (*group).to_owned(),
                    (*resource).to_owned(),
                    (*verb).to_owned(),
                    (*name).to_owned(),
                ));
            }
        }
    }
    set
}

const READ: &[&str] = &["get", "list", "watch"];
const READ_APPLY: &[&str] = &["create", "get", "list", "patch", "watch"];
const KINDS: &[&str] = &[
    "agentruns",
    "agents",
    "agentworkflowruns",
    "agentworkflows",
    "gateways",
    "skillcards",
    "skillcollections",
];
const STATUSES: &[&str] = &[
    "agentruns/status",
    "agents/status",
    "agentworkflowruns/status",
    "agentworkflows/status",
    "gateways/status",
    "skillcollections/status",
    "skillcards/status",
];

/// What the controllers do in a namespace, from the operator's documented API usage: read
/// our kinds, patch their status, apply Secrets, ConfigMaps, Pods and Sandboxes, delete the
/// sandboxes of ended runs, the runs and workflow runs past their time to live and (one by
/// one) the objects of runs that no longer exist, create (and cancel, with a patch) the runs
/// of workflow stages, record Events, and read the namespace's trust policies and write their
/// status. Anything wider must fail the tests.
pub fn namespaced_permissions() -> BTreeSet<Permission> {
    expected_permissions(&[
        ("konveyor.io", KINDS, READ, "*"),
        (
            "konveyor.io",
            &["agentruns"],
            &["create", "delete", "patch"],
            "*",
        ),
        ("konveyor.io", &["agentworkflowruns"], &["delete"], "*"),
        (
            "konveyor.io",
            &["skillcards"],
            &["create", "delete", "patch"],
            "*",
        ),
        ("konveyor.io", STATUSES, &["get", "patch"], "*"),
        ("", &["secrets", "configmaps", "pods"], READ_APPLY, "*"),
        ("", &["secrets", "configmaps", "pods"], &["delete"], "*"),
        // The Service of a pod-backend sandbox: created, read back on a conflict, listed
        // and deleted by the orphan sweep.
        ("", &["services"], &["create", "delete", "get", "list"], "*"),
        ("agents.x-k8s.io", &["sandboxes"], READ_APPLY, "*"),
        ("agents.x-k8s.io", &["sandboxes"], &["delete"], "*"),
        ("events.k8s.io", &["events"], &["create", "patch"], "*"),
        // A namespace's trust policies: read, and their blast radius written to status.
        (
            "trust.agentic-operator.io",
            &["skilltrustpolicies"],
            READ,
            "*",
        ),
        (
            "trust.agentic-operator.io",
            &["skilltrustpolicies/status"],
            &["get", "patch"],
            "*",
        ),
    ])
}

/// What the operator reads cluster-wide whatever namespaces it watches: the cluster's trust
/// policies (read and given their status: they apply to every namespace), and the nodes
/// (skill prefetch: which nodes runs can land on).
pub fn cluster_policy_permissions() -> BTreeSet<Permission> {
    expected_permissions(&[
        ("", &["nodes"], READ, "*"),
        (
            "trust.agentic-operator.io",
            &["clusterskilltrustpolicies"],
            READ,
            "*",
        ),
        (
            "trust.agentic-operator.io",
            &["clusterskilltrustpolicies/status"],
            &["get", "patch"],
            "*",
        ),
    ])
}

/// The one cluster-scoped permission: whether the Sandbox CRD exists (backend `auto`).
pub fn crd_check_permissions() -> BTreeSet<Permission> {
    expected_permissions(&[(
        "apiextensions.k8s.io",
        &["customresourcedefinitions"],
        &["get"],
        "sandboxes.agents.x-k8s.io",
    )])
}

/// With `metrics.secure`: review the bearer tokens of `/metrics` requests (cluster-scoped).
pub fn metrics_review_permissions() -> BTreeSet<Permission> {
    expected_permissions(&[
        ("authentication.k8s.io", &["tokenreviews"], &["create"], "*"),
        (
            "authorization.k8s.io",
            &["subjectaccessreviews"],
            &["create"],
            "*",
        ),
    ])
}

/// The leader-election Lease `lease`: created by name, then read and renewed
/// (kube-lease-manager patches it; `update` covers clients that replace it).
pub fn lease_permissions(lease: &str) -> BTreeSet<Permission> {
    let mut set = expected_permissions(&[("coordination.k8s.io", &["leases"], &["create"], "*")]);
    set.extend(expected_permissions(&[(
        "coordination.k8s.io",
        &["leases"],
        &["get", "patch", "update"],
        lease,
    )]));
    set
}

/// Where two JSON values first differ (`None` when they are equal). Numbers compare by value,
/// because YAML tools print `1.0` and `1` interchangeably.
pub fn first_difference(left: &Value, right: &Value) -> Option<String> {
    fn walk(left: &Value, right: &Value, path: &str) -> Option<String> {
        match (left, right) {
            (Value::Number(l), Value::Number(r)) => {
                (l.as_f64() != r.as_f64()).then(|| format!("{path}: {l} != {r}"))
            }
            (Value::Object(l), Value::Object(r)) => {
                let keys: BTreeSet<&String> = l.keys().chain(r.keys()).collect();
                keys.into_iter().find_map(|key| {
                    let child = format!("{path}.{key}");
                    match (l.get(key), r.get(key)) {
                        (Some(lv), Some(rv)) => walk(lv, rv, &child),
                        (lv, rv) => Some(format!("{child}: {lv:?} != {rv:?}")),
                    }
                })
            }
            (Value::Array(l), Value::Array(r)) if l.len() == r.len() => l
                .iter()
                .zip(r)
                .enumerate()
                .find_map(|(i, (lv, rv))| walk(lv, rv, &format!("{path}[{i}]"))),
            _ => (left != right).then(|| format!("{path}: {left} != {right}")),
        }
    }
    walk(left, right, "")
}
