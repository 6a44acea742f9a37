//! A private environment: everything it starts stops when it is dropped, panics included.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic_testenv::{TestEnv, TestEnvOptions};
use common::{is_running, wait_until_gone};

fn options() -> TestEnvOptions {
    TestEnvOptions {
        with_agent_sandbox: true,
        with_registry: true,
        with_node: false,
        with_workloads: false,
        bin_dir: None,
    }
}

#[tokio::test]
async fn dropping_the_env_stops_every_process_and_removes_its_directories() {
    let env = TestEnv::start(options())
        .await
        .expect("start a test environment");

    // etcd, kube-apiserver, the controller and a watchdog; the registry and its watchdog.
    let pids = env.pids();
    assert_eq!(pids.len(), 6, "pids: {pids:?}");
    assert!(
        pids.iter().all(|pid| is_running(*pid)),
        "all running: {pids:?}"
    );
    let dirs = [
        env.work_dir().to_path_buf(),
        env.registry().expect("registry").work_dir().to_path_buf(),
    ];
    assert!(
        dirs.iter().all(|dir| dir.is_dir()),
        "work dirs exist: {dirs:?}"
    );
    assert!(env.kubeconfig_path().starts_with(&dirs[0]));
    env.client()
        .apiserver_version()
        .await
        .expect("the apiserver answers before drop");

    drop(env);
    let alive = wait_until_gone(&pids, Duration::from_secs(1));
    assert!(alive.is_empty(), "still running after drop: {alive:?}");
    for dir in &dirs {
        assert!(!dir.exists(), "{} still exists after drop", dir.display());
    }
}

#[tokio::test]
async fn a_panicking_test_still_stops_its_env() {
    // What the env looked like just before the panic: its pids and work dir.
    type Seen = Option<(Vec<u32>, std::path::PathBuf)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let record = Arc::clone(&seen);
    let outcome = tokio::spawn(async move {
        let env = TestEnv::start(TestEnvOptions::default())
            .await
            .expect("start a test environment");
        *record.lock().expect("lock") = Some((env.pids(), env.work_dir().to_path_buf()));
        panic!("a failing assertion while the env runs");
    })
    .await;
    assert!(outcome.expect_err("the task panicked").is_panic());

    let (pids, dir) = seen
        .lock()
        .expect("lock")
        .take()
        .expect("the env had started");
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver and the watchdog: {pids:?}"
    );
    let alive = wait_until_gone(&pids, Duration::from_secs(1));
    assert!(alive.is_empty(), "still running after the panic: {alive:?}");
    assert!(
        !dir.exists(),
        "{} still exists after the panic",
        dir.display()
    );
}

#[tokio::test]
async fn a_missing_bin_dir_is_a_clear_error() {
    let error = TestEnv::start(TestEnvOptions {
        bin_dir: Some("/nonexistent/agentic-testenv/bin".into()),
        ..TestEnvOptions::default()
    })
    .await
    .expect_err("no binaries there");
    assert_eq!(error.reason(), "BinaryMissing");
    assert!(error.to_string().contains("make testenv"), "{error}");
}
