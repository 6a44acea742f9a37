//! The shell scripts under hack/: clean under shellcheck and executable.

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{repo_root, run_ok};

/// Every `*.sh` under hack/, recursively (the stub agent's script included).
fn scripts() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "sh") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&repo_root().join("hack"), &mut found);
    found.sort();
    found
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
