//! The clients `hack/testenv-tools.sh` builds report the releases they are built from, and
//! helm assumes the control plane's Kubernetes version, as a release build would. The Go
//! linker ignores `-X` for a variable that does not exist, so a renamed variable upstream
//! would otherwise go unnoticed.

use std::process::Command;

use agentic_integration_tests::support;
use serde_json::Value;
use support::{repo_root, run_ok, testenv_tool};

/// The version of `module` that `hack/tools/<tool>/go.mod` requires.
fn required_version(tool: &str, module: &str) -> String {
    let path = repo_root().join("hack/tools").join(tool).join("go.mod");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(module))
                .then(|| words.next())
                .flatten()
                .filter(|version| version.starts_with('v'))
        })
        .unwrap_or_else(|| panic!("{} requires no {module}", path.display()))
        .to_owned()
}

fn kubernetes_version() -> String {
    required_version("kubernetes", "k8s.io/kubernetes")
}

/// The minor of a `v1.<minor>.<patch>` version.
fn minor(version: &str) -> &str {
    version
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .unwrap_or_else(|| panic!("{version} is not v1.<minor>.<patch>"))
}

#[test]
fn kubectl_and_the_kubernetes_servers_report_their_release() {
    let version = kubernetes_version();
    let text = run_ok(Command::new(testenv_tool("kubectl")).args([
        "version",
        "--client",
        "--output=json",
    ]));
    let report: Value = serde_json::from_str(&text).expect("kubectl prints JSON");
    let client = &report["clientVersion"];
    assert_eq!(
        client["gitVersion"],
        Value::from(version.as_str()),
        "{text}"
    );
    assert_eq!(client["major"], "1", "{text}");
    assert_eq!(client["minor"], minor(&version), "{text}");
    assert_eq!(client["gitTreeState"], "clean", "{text}");

    for binary in [
        "kube-apiserver",
        "kube-controller-manager",
        "kubelet",
        "kube-scheduler",
    ] {
        let text = run_ok(Command::new(testenv_tool(binary)).arg("--version"));
        assert_eq!(text.trim(), format!("Kubernetes {version}"), "{binary}");
    }
}

#[test]
fn containerd_reports_its_release() {
    let version = required_version("containerd", "github.com/containerd/containerd/v2");
    let text = run_ok(Command::new(testenv_tool("containerd")).arg("--version"));
    assert!(
        text.split_whitespace().any(|word| word == version),
        "containerd --version names {version}: {text}"
    );
}

#[test]
fn helm_reports_its_release() {
    let text = run_ok(Command::new(testenv_tool("helm")).args([
        "version",
        "--template",
        "{{.Version}} {{.GitTreeState}}",
    ]));
    let version = required_version("helm", "helm.sh/helm/v3");
    assert_eq!(text.trim(), format!("{version} clean"));
}

/// A chart that prints the Kubernetes version helm assumes and uses an API removed in 1.32.
fn probe_chart(dir: &std::path::Path) {
    let templates = dir.join("templates");
    std::fs::create_dir_all(&templates).expect("create the probe chart");
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
    )
    .expect("write Chart.yaml");
    std::fs::write(
        templates.join("version.yaml"),
        "# kube: {{ .Capabilities.KubeVersion.Version }}\n",
    )
    .expect("write the version template");
    std::fs::write(
        templates.join("flowschema.yaml"),
        "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\nmetadata:\n  name: probe\n",
    )
    .expect("write the FlowSchema template");
}

#[test]
fn helm_assumes_the_control_plane_kubernetes_version() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let chart = dir.path().join("probe");
    probe_chart(&chart);
    let expected = format!("v1.{}.0", minor(&kubernetes_version()));

    let rendered = run_ok(
        Command::new(testenv_tool("helm"))
            .arg("template")
            .arg(&chart),
    );
    assert!(
        rendered.contains(&format!("# kube: {expected}\n")),
        "helm template without --kube-version assumes {expected}:\n{rendered}"
    );

    // `helm lint` judges API deprecations against the same version.
    let lint = run_ok(Command::new(testenv_tool("helm")).arg("lint").arg(&chart));
    assert!(
        lint.contains("FlowSchema is deprecated in v1.29+, unavailable in v1.32+"),
        "helm lint without --kube-version checks removals up to {expected}:\n{lint}"
    );
}
