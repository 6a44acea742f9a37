//! The standalone registry: it answers the OCI distribution API and leaves nothing behind.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use agentic_testenv::Registry;
use common::{http_request, is_running, wait_until_gone};

#[tokio::test]
async fn registry_serves_the_distribution_api_and_cleans_up_on_drop() {
    let registry = Registry::start().await.expect("start the registry");
    let addr = registry.addr();
    assert!(
        addr.starts_with("127.0.0.1:"),
        "loopback address, got {addr}"
    );

    let response = http_request(&addr, "GET", "/v2/").await;
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "GET /v2/ answered:\n{response}"
    );
    assert!(
        response
            .to_ascii_lowercase()
            .contains("docker-distribution-api-version: registry/2.0"),
        "GET /v2/ lacks the API version header:\n{response}"
    );

    // A blob upload session can be opened: the storage directory is writable.
    let response = http_request(&addr, "POST", "/v2/testenv/probe/blobs/uploads/").await;
    assert!(
        response.starts_with("HTTP/1.1 202"),
        "starting an upload answered:\n{response}"
    );

    let pids = registry.pids();
    assert_eq!(pids.len(), 2, "the registry and its watchdog: {pids:?}");
    assert!(
        pids.iter().all(|pid| is_running(*pid)),
        "all running before drop: {pids:?}"
    );
    let work_dir = registry.work_dir().to_path_buf();
    assert!(
        work_dir.join("registry-storage").is_dir(),
        "storage lives in the work dir"
    );

    drop(registry);
    let alive = wait_until_gone(&pids, Duration::from_secs(1));
    assert!(alive.is_empty(), "still running after drop: {alive:?}");
    assert!(
        !work_dir.exists(),
        "{} still exists after drop",
        work_dir.display()
    );
}

#[tokio::test]
async fn two_registries_run_side_by_side() {
    let (first, second) = tokio::join!(Registry::start(), Registry::start());
    let (first, second) = (
        first.expect("first registry"),
        second.expect("second registry"),
    );
    assert_ne!(first.addr(), second.addr());
    assert_ne!(first.work_dir(), second.work_dir());
    for registry in [&first, &second] {
        let response = http_request(&registry.addr(), "GET", "/v2/").await;
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "{}: {response}",
            registry.addr()
        );
    }
}
