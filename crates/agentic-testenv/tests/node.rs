//! The real node: it runs a pod from the test registry to completion, and leaves nothing
//! behind — no process, mount, bridge, iptables chain, cgroup or directory — whether it is
//! dropped or its owner is SIGKILLed.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentic_testenv::{NODE_NAME, TestEnv, TestEnvOptions, TestImages};
use common::{KillOnDrop, is_running, wait_until_gone};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{LogParams, PostParams};
use serde_json::json;

/// What the node could leave behind in the host's namespaces.
#[derive(Debug, PartialEq, Eq)]
struct HostState {
    links: BTreeSet<String>,
    iptables_chains: BTreeSet<String>,
    mounts: BTreeSet<String>,
    cgroups: BTreeSet<PathBuf>,
    paths: BTreeSet<PathBuf>,
}

fn command_lines(program: &str, args: &[&str]) -> Vec<String> {
    Command::new(program)
        .args(args)
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl HostState {
    fn read() -> HostState {
        let links = command_lines("ip", &["-o", "link", "show"])
            .iter()
            .filter_map(|line| line.split(": ").nth(1).map(str::to_owned))
            .collect();
        let iptables_chains = ["iptables", "ip6tables"]
            .iter()
            .flat_map(|tool| ["filter", "nat", "mangle"].map(|table| (*tool, table)))
            .flat_map(|(tool, table)| {
                command_lines(tool, &["-t", table, "-S"])
                    .into_iter()
                    .map(move |rule| format!("{tool} {table} {rule}"))
            })
            .collect();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
            .collect();
        let mut cgroups = BTreeSet::new();
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            for child in std::fs::read_dir(hierarchy.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if child.path().is_dir() {
                    cgroups.insert(child.path());
                }
            }
        }
        let paths = [
            "/var/lib/kubelet",
            "/var/lib/containerd",
            "/var/lib/cni",
            "/run/containerd",
            "/var/log/pods",
            "/var/log/containers",
            "/opt/containerd",
            "/etc/cni/net.d",
        ]
        .into_iter()
        .map(PathBuf::from)
        .filter(|path| path.exists())
        .collect();
        HostState {
            links,
            iptables_chains,
            mounts,
            cgroups,
            paths,
        }
    }
}

/// Polls until the host looks as it did before, or fails with the difference.
fn assert_host_restored(before: &HostState) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = HostState::read();
        if &now == before {
            return;
        }
        if Instant::now() >= deadline {
            let added = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> {
                b.difference(a).cloned().collect()
            };
            panic!(
                "the node left things behind: links {:?}, iptables {:?}, mounts {:?}, cgroups {:?}, paths {:?}",
                added(&before.links, &now.links),
                added(&before.iptables_chains, &now.iptables_chains),
                added(&before.mounts, &now.mounts),
                now.cgroups.difference(&before.cgroups).collect::<Vec<_>>(),
                now.paths.difference(&before.paths).collect::<Vec<_>>(),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `sh -c script` in busybox on the node and returns its log once it has succeeded.
async fn run_busybox(env: &TestEnv, images: &TestImages, script: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "generateName": "busybox-" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": images.busybox,
                "command": ["sh", "-c", script],
            }],
        },
    }))
    .expect("a pod");
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let name = created.metadata.name.expect("a generated name");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pod = pods.get(&name).await.expect("read the pod");
        let status = pod.status.unwrap_or_default();
        match status.phase.as_deref() {
            Some("Succeeded") => {
                assert_eq!(
                    pod.spec.and_then(|spec| spec.node_name).as_deref(),
                    Some(NODE_NAME)
                );
                break;
            }
            Some("Failed") => panic!("pod {name} failed: {status:#?}"),
            _ if Instant::now() >= deadline => panic!("pod {name} did not finish: {status:#?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    pods.logs(&name, &LogParams::default())
        .await
        .expect("the pod's log through the API server")
}

/// The tests compare the host before and after: one node at a time.
static ONE_NODE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_node_runs_pods_and_leaves_nothing_behind() {
    let _serial = ONE_NODE_AT_A_TIME.lock().await;
    let before = HostState::read();
    let env = TestEnv::start(TestEnvOptions {
        with_node: true,
        ..TestEnvOptions::default()
    })
    .await
    .expect("start a control plane with a node");
    let images = env.images().expect("the node's images").clone();
    for image in [&images.pause, &images.busybox, &images.stub_agent] {
        assert!(image.contains("@sha256:"), "pinned: {image}");
        assert!(
            image.starts_with(&env.registry_addr().expect("a registry")),
            "from the test registry: {image}"
        );
    }

    let log = run_busybox(&env, &images, "echo hello from $(hostname)").await;
    assert!(log.starts_with("hello from busybox-"), "{log}");
    let host = HostState::read();
    assert_ne!(
        host.links, before.links,
        "the node's bridge and veths exist while it runs"
    );

    let pids = env.pids();
    let node_dir = env.node_dir().expect("a node dir").to_path_buf();
    drop(env);
    let alive = wait_until_gone(&pids, Duration::from_secs(5));
    assert!(alive.is_empty(), "still running after drop: {alive:?}");
    assert!(
        !node_dir.exists(),
        "{} outlived the node",
        node_dir.display()
    );
    assert_host_restored(&before);
}

#[tokio::test]
async fn sigkilling_up_with_a_node_leaves_nothing_behind() {
    let _serial = ONE_NODE_AT_A_TIME.lock().await;
    let before = HostState::read();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("up.log");
    let mut up = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_agentic-testenv"))
            .args(["up", "--with-node", "--dir"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("spawn agentic-testenv up --with-node"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.path().join("node-ready").exists() {
        if let Some(status) = up.0.try_wait().expect("poll up") {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("`agentic-testenv up --with-node` exited early: {status}\n{log}");
        }
        assert!(Instant::now() < deadline, "no node-ready file after 120s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let images: TestImages = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("images.json")).expect("images.json"),
    )
    .expect("images.json lists the node's images");
    assert!(
        images.stub_agent.contains("/agentic-stub-agent:v1@sha256:"),
        "{images:?}"
    );
    assert!(dir.path().join("ready").exists());

    // Every process of the node, containers included, shares one PID namespace.
    let kubelets: Vec<u32> = std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .split('\0')
                    .next()
                    .is_some_and(|arg0| arg0.ends_with("/kubelet"))
            })
        })
        .collect();
    assert_eq!(kubelets.len(), 1, "one kubelet runs: {kubelets:?}");

    up.0.kill().expect("SIGKILL up");
    up.0.wait().expect("reap up");
    let alive = wait_until_gone(&kubelets, Duration::from_secs(15));
    assert!(alive.is_empty(), "kubelet outlived up: {alive:?}");
    assert!(is_running(std::process::id()));
    assert_host_restored(&before);
}
