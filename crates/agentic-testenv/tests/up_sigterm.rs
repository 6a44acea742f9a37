//! `agentic-testenv up` shuts down cleanly on SIGTERM.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::KillOnDrop;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

#[test]
fn sigterm_stops_up_and_removes_the_ready_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("up.log");
    let mut up = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_agentic-testenv"))
            .arg("up")
            .arg("--dir")
            .arg(dir.path())
            .arg("--with-agent-sandbox")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn agentic-testenv up"),
    );

    let ready = dir.path().join("ready");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        if let Some(status) = up.0.try_wait().expect("poll up") {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("`agentic-testenv up` exited early: {status}\n{log}");
        }
        assert!(Instant::now() < deadline, "no ready file after 60s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let registry = std::fs::read_to_string(dir.path().join("registry")).expect("registry file");
    assert!(
        registry.starts_with("127.0.0.1:"),
        "registry file: {registry:?}"
    );

    let pid = Pid::from_raw(i32::try_from(up.0.id()).expect("pid fits i32"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM up");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = up.0.try_wait().expect("poll up") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "up still running 20s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "exit status {status}\n{log}");
    assert!(!ready.exists(), "the ready file outlived up");
    assert!(log.contains("stopped"), "log:\n{log}");
}
