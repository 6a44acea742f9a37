//! The shell scripts under hack/: clean under shellcheck and executable.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

use agentic_integration_tests::files_below;
use agentic_integration_tests::support;
use support::{repo_root, run_ok};

/// Every `*.sh` under hack/, recursively (the stub agent's script included).
fn scripts() -> Vec<PathBuf> {
    let hack = repo_root().join("hack");
    files_below(&hack)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "sh"))
        .map(|relative| hack.join(relative))
        .collect()
}

#[test]
fn the_scripts_this_test_guards_exist() {
    let names: Vec<String> = scripts()
        .iter()
        .map(|p| {
            p.strip_prefix(repo_root())
                .expect("under the repository")
                .display()
                .to_string()
        })
        .collect();
    for expected in [
        "hack/kind-e2e.sh",
        "hack/push-samples.sh",
        "hack/render-samples.sh",
        "hack/stub-agent/stub-agent.sh",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
}

#[test]
fn shellcheck_is_clean() {
    let shellcheck = Command::new("shellcheck").arg("--version").output();
    assert!(
        shellcheck.is_ok_and(|out| out.status.success()),
        "shellcheck is not installed: `apt-get install shellcheck` (make test installs it)"
    );
    // Severity `style` and up: everything shellcheck reports; `source`d files are followed.
    run_ok(
        Command::new("shellcheck")
            .current_dir(repo_root())
            .args(["--severity=style", "--external-sources"])
            .args(scripts()),
    );
}

#[test]
fn scripts_are_executable() {
    for script in scripts() {
        let mode = std::fs::metadata(&script)
            .unwrap_or_else(|e| panic!("cannot stat {}: {e}", script.display()))
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "{} is not executable", script.display());
    }
}
