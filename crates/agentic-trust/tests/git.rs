//! SSH-signed git commits (git and ssh-keygen), verified by `verify_commit` and, for
//! comparison, by `git verify-commit` with the same allowed-signers file.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentic_trust::{AllowedSigners, CommitVerdict, verify_commit};

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("a scratch directory"),
        };
        std::fs::create_dir_all(repo.work()).expect("a work tree");
        repo.git(&["init", "--quiet", "--initial-branch=main"]);
        repo
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn git_command(&self) -> Command {
        let mut command = Command::new("git");
        command
            .current_dir(self.work())
            .env("HOME", self.dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Dev")
            .env("GIT_AUTHOR_EMAIL", "dev@example.com")
            .env("GIT_COMMITTER_NAME", "Dev")
            .env("GIT_COMMITTER_EMAIL", "dev@example.com")
            .env("GIT_AUTHOR_DATE", "1767268800 +0000")
            .env("GIT_COMMITTER_DATE", "1767268800 +0000");
        command
    }

    fn git(&self, args: &[&str]) -> Vec<u8> {
        let out = self.git_command().args(args).output().expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// A new SSH key pair of `kind` (`ed25519`, `ecdsa`): the private key's path.
    fn key(&self, name: &str, kind: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-N", "", "-C", name, "-f"])
            .arg(&path)
            .output()
            .expect("ssh-keygen runs");
        assert!(
            out.status.success(),
            "ssh-keygen: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    }

    /// Commits (empty) with `message`, signed with `key` when given; the raw commit object.
    fn commit(&self, message: &str, key: Option<&Path>) -> Vec<u8> {
        let mut args = vec!["commit", "--quiet", "--allow-empty", "-m", message];
        let signing;
        if let Some(key) = key {
            signing = format!("user.signingkey={}", key.display());
            args = [
                vec!["-c", "gpg.format=ssh", "-c", signing.as_str()],
                args,
                vec!["-S"],
            ]
            .concat();
        }
        self.git(&args);
        self.git(&["cat-file", "commit", "HEAD"])
    }

    fn write_allowed(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("allowed_signers");
        std::fs::write(&path, text).expect("allowed signers written");
        path
    }

    /// What `git verify-commit HEAD` says with `allowed` as the allowed-signers file.
    fn git_accepts(&self, allowed: &Path) -> bool {
        self.git_command()
            .args([
                "-c",
                &format!("gpg.ssh.allowedSignersFile={}", allowed.display()),
                "verify-commit",
                "HEAD",
            ])
            .output()
            .expect("git runs")
            .status
            .success()
    }
}

fn public(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub"))
        .expect("the public key")
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn fingerprint(key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(key.with_extension("pub"))
        .output()
        .expect("ssh-keygen runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .expect("a fingerprint")
        .to_string()
}

fn expect_invalid(verdict: CommitVerdict, expected: &str) {
    match verdict {
        CommitVerdict::Invalid { why } => {
            assert!(why.contains(expected), "expected {expected:?} in {why:?}")
        }
        other => panic!("expected Invalid ({expected}), got {other:?}"),
    }
}

#[test]
fn ssh_signed_commits_against_an_allowed_signers_list() {
    let repo = Repo::new();
    let dev = repo.key("dev", "ed25519");
    let ops = repo.key("ops", "ecdsa");
    let stranger = repo.key("stranger", "ed25519");
    let list = format!(
        "# who may sign skills\ndev@example.com namespaces=\"git\" {}\nops@example.com,*@ops.example {}\n",
        public(&dev),
        public(&ops)
    );
    let allowed_path = repo.write_allowed(&list);
    let allowed = AllowedSigners::parse(&list, "allowed_signers").expect("the list reads");
    assert_eq!(allowed.len(), 2);

    // Signed by each allowed key (Ed25519, ECDSA P-256): the principal and the key, and git agrees.
    let raw = repo.commit("signed by dev", Some(&dev));
    assert_eq!(
        verify_commit(&raw, &allowed),
        CommitVerdict::Verified {
            principal: "dev@example.com".to_string(),
            fingerprint: fingerprint(&dev),
        }
    );
    assert!(repo.git_accepts(&allowed_path), "git verify-commit agrees");
    let raw = repo.commit("signed by ops", Some(&ops));
    assert_eq!(
        verify_commit(&raw, &allowed),
        CommitVerdict::Verified {
            principal: "ops@example.com,*@ops.example".to_string(),
            fingerprint: fingerprint(&ops),
        }
    );

    // The commit's content changed after signing.
    let tampered = String::from_utf8(raw)
        .expect("UTF-8")
        .replace("signed by ops", "signed by 0ps");
    expect_invalid(
        verify_commit(tampered.as_bytes(), &allowed),
        "does not verify",
    );

    // A key that is not listed: refused, as git refuses it.
    let raw = repo.commit("signed by a stranger", Some(&stranger));
    expect_invalid(verify_commit(&raw, &allowed), "is not an allowed signer");
    assert!(
        !repo.git_accepts(&allowed_path),
        "git verify-commit refuses it too"
    );

    // Unsigned.
    let raw = repo.commit("unsigned", None);
    assert_eq!(verify_commit(&raw, &allowed), CommitVerdict::Unsigned);

    // The signer's line allows other namespaces only, or expired before the commit.
    let raw = repo.commit("signed by dev again", Some(&dev));
    let file_only = AllowedSigners::parse(
        &format!("dev@example.com namespaces=\"file\" {}\n", public(&dev)),
        "file-only",
    )
    .expect("reads");
    expect_invalid(
        verify_commit(&raw, &file_only),
        "may sign only in namespaces",
    );
    let expired = AllowedSigners::parse(
        &format!(
            "dev@example.com valid-before=\"20251231\" {}\n",
            public(&dev)
        ),
        "expired",
    )
    .expect("reads");
    expect_invalid(
        verify_commit(&raw, &expired),
        "was not valid at the commit's time",
    );
    let current = AllowedSigners::parse(
        &format!(
            "dev@example.com valid-after=\"20251231\",valid-before=\"20260102\" {}\n",
            public(&dev)
        ),
        "current",
    )
    .expect("reads");
    assert!(matches!(
        verify_commit(&raw, &current),
        CommitVerdict::Verified { .. }
    ));
}

#[test]
fn a_bad_allowed_signers_line_is_named() {
    let error = AllowedSigners::parse(
        "# ok\n\ndev@example.com ssh-ed25519 not-base64!\n",
        "policy/keys",
    )
    .expect_err("an unreadable key");
    let text = error.to_string();
    assert!(text.starts_with("policy/keys, line 3:"), "{text}");
}
