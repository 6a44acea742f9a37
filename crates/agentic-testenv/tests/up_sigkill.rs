//! `agentic-testenv up` killed with SIGKILL: its watchdog still stops what it started.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{KillOnDrop, http_request, is_running, wait_until_gone};

/// The children of `parent`, with each one's working directory (the env's work dir).
fn children_of(parent: u32) -> BTreeMap<u32, Option<PathBuf>> {
    let mut children = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if ppid == Some(parent) {
            children.insert(pid, std::fs::read_link(format!("/proc/{pid}/cwd")).ok());
        }
    }
    children
}

#[tokio::test]
async fn children_die_and_work_dirs_go_when_up_is_sigkilled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut up = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_agentic-testenv"))
            .arg("up")
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agentic-testenv up"),
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.path().join("ready").exists() {
        if let Some(status) = up.0.try_wait().expect("poll up") {
            panic!("`agentic-testenv up` exited early: {status}");
        }
        assert!(Instant::now() < deadline, "no ready file after 60s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let registry = std::fs::read_to_string(dir.path().join("registry")).expect("registry file");
    let response = http_request(&registry, "GET", "/v2/").await;
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "registry at {registry}: {response}"
    );
    let kubeconfig = std::fs::read_to_string(dir.path().join("kubeconfig")).expect("kubeconfig");
    assert!(
        kubeconfig.contains("client-certificate-data"),
        "self-contained kubeconfig"
    );

    let children = children_of(up.0.id());
    // etcd, kube-apiserver, registry and one watchdog for each of the two work dirs.
    assert_eq!(children.len(), 5, "children of up: {children:?}");
    // The watchdogs run in `/`; the others in their env's work dir.
    let mut work_dirs: Vec<PathBuf> = children
        .values()
        .flatten()
        .filter(|dir| dir.starts_with(std::env::temp_dir()))
        .cloned()
        .collect();
    work_dirs.sort();
    work_dirs.dedup();
    assert_eq!(
        work_dirs.len(),
        2,
        "control-plane and registry work dirs: {children:?}"
    );
    let pids: Vec<u32> = children.keys().copied().collect();
    assert!(pids.iter().all(|pid| is_running(*pid)));

    up.0.kill().expect("SIGKILL up");
    up.0.wait().expect("reap up");
    let alive = wait_until_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "still running 15s after up was killed: {alive:?}"
    );
    for work_dir in &work_dirs {
        assert!(!work_dir.exists(), "{} outlived up", work_dir.display());
    }
}
