//! docs/getting-started.md, "On an existing cluster", run as written against the test cluster
//! for workloads: every `sh` block of the section in order, in one shell. Two things differ
//! from a user's cluster, both stated here: the variables the first block sets point at the
//! test registry (plain HTTP), and the `sh docker` block (building and pushing the images) is
//! replaced by the images the test environment builds without Docker.

use std::process::Command;

use agentic_integration_tests::support;
use agentic_integration_tests::{operator_binary, workloads_cluster};
use agentic_testenv::{TestEnv, push_operator_image};
use support::{cluster_state, repo_root, testenv_tool};

const DOCUMENT: &str = "docs/getting-started.md";
const SECTION: &str = "## On an existing cluster";

/// A fenced block of the section: its info string and its text.
struct Block {
    info: String,
    text: String,
}

/// The fenced blocks between `SECTION` and the next heading of the same level.
fn section_blocks(markdown: &str) -> Vec<Block> {
    let start = markdown
        .find(SECTION)
        .unwrap_or_else(|| panic!("{DOCUMENT} has a section {SECTION:?}"));
    let rest = &markdown[start + SECTION.len()..];
    let section = rest.find("\n## ").map_or(rest, |end| &rest[..end]);
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in section.lines() {
        match (open.take(), line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    text: String::new(),
                });
            }
            (Some(block), Some(_)) => blocks.push(block),
            (Some(mut block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(
        open.is_none(),
        "{DOCUMENT}: a block of {SECTION:?} is not closed"
    );
    blocks
}

#[test]
fn blocks_are_read_in_order_with_their_info_strings() {
    let markdown = "# T\n## On an existing cluster\ntext\n```sh\na\nb\n```\n```sh docker\nc\n```\n\
                    ## Next\n```sh\nnot this\n```\n";
    let blocks = section_blocks(markdown);
    let read: Vec<(&str, &str)> = blocks
        .iter()
        .map(|block| (block.info.as_str(), block.text.as_str()))
        .collect();
    assert_eq!(read, [("sh", "a\nb\n"), ("sh docker", "c\n")]);
}

// Two workers: the shell blocks one; kube clients of the environment may use the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_existing_cluster_steps_run_as_written() {
    let cluster = workloads_cluster().await;
    let env: &TestEnv = &cluster;
    let registry = env.registry_addr().expect("a registry");
    let pod_registry = env
        .pod_registry_addr()
        .expect("the registry as pods reach it");
    // What the `sh docker` block builds: the operator (a workspace build) and the stub agent,
    // which the environment pushed as `agentic-stub-agent:v1` to the same registry.
    let image = push_operator_image(&registry, operator_binary())
        .await
        .expect("pushing the operator image");
    let (operator_image, _) = image.split_once('@').expect("a pinned image");

    let markdown = std::fs::read_to_string(repo_root().join(DOCUMENT)).expect("reading the guide");
    let blocks = section_blocks(&markdown);
    assert!(
        blocks.iter().any(|block| block.info == "sh docker"
            && block.text.contains("agentic-stub-agent:v1")
            && block.text.contains("$OPERATOR_IMAGE")),
        "the guide builds and pushes both images"
    );
    let mut script = String::from("set -euxo pipefail\n");
    for (index, block) in blocks.iter().enumerate() {
        match block.info.as_str() {
            "sh" => script.push_str(&block.text),
            "sh docker" => continue,
            other => panic!("{DOCUMENT}: a block of {SECTION:?} is `{other}`, not `sh`"),
        }
        if index == 0 {
            // The test cluster's values for the variables the first block sets.
            script.push_str(&format!(
                "export REGISTRY={pod_registry}\nexport OPERATOR_IMAGE={operator_image}\n\
                 export INSECURE_REGISTRY={pod_registry}\n"
            ));
        }
    }

    let home = tempfile::tempdir().expect("a temporary home for helm");
    let tools = testenv_tool("kubectl");
    let tools_dir = tools.parent().expect("the tools' directory");
    let path = format!(
        "{}:{}",
        tools_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(repo_root())
        .env("PATH", path)
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("AGENTIC_OPERATOR", operator_binary())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("bash starts");
    assert!(
        run.status.success(),
        "the guide's steps failed with {}:\nstdout:\n{}\nstderr:\n{}\nthe cluster then:\n{}",
        run.status,
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
        cluster_state(env.kubeconfig_path(), "agentic-operator-system"),
    );
    let output = String::from_utf8_lossy(&run.stdout);
    // The run's log, which the guide prints last before the cleanup.
    for line in [
        "skill-file: java-upgrade/SKILL.md",
        "KONVEYOR_RULES=no-system-out",
        "HARNESS_SKILL_MODE=native",
        "stub-agent: done",
    ] {
        assert!(
            output.lines().any(|printed| printed == line),
            "the guide's run printed {line:?}:\n{output}"
        );
    }
}
