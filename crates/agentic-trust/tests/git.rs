//! Signed git commits, verified by `verify_commit`: SSH signatures (git and ssh-keygen),
//! compared with `git verify-commit` on the same allowed-signers file, and GPG signatures
//! (git and gpg, in a scratch GNUPGHOME).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use agentic_testenv::CommitSigning;
use agentic_testenv::signing::{SigningKeys, ssh_fingerprint, ssh_public_line, ssh_signing};
use agentic_trust::{AllowedSigners, CommitSigners, CommitVerdict, GpgKeys, verify_commit};

/// `verify_commit` with SSH signers only, now.
fn verify(raw: &[u8], allowed: &AllowedSigners) -> CommitVerdict {
    verify_commit(raw, &allowed.clone().into(), SystemTime::now())
}

/// A work tree, with the signing keys its commits are signed with.
struct Repo {
    dir: tempfile::TempDir,
    keys: SigningKeys,
}

impl Repo {
    fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("a scratch directory"),
            keys: SigningKeys::new().expect("a directory for signing keys"),
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
            .env("GNUPGHOME", self.keys.gnupg_home())
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
        self.git_signed(args, None)
    }

    /// `git` with `signing`'s settings before `args` and its environment.
    fn git_signed(&self, args: &[&str], signing: Option<&CommitSigning>) -> Vec<u8> {
        let mut command = self.git_command();
        if let Some(signing) = signing {
            for (key, value) in &signing.config {
                command.arg("-c").arg(format!("{key}={value}"));
            }
            for (key, value) in &signing.env {
                command.env(key, value);
            }
        }
        let out = command.args(args).output().expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// A new SSH key pair of `kind` (`ed25519`, `ecdsa`): the private key's path.
    fn key(&self, name: &str, kind: &str) -> PathBuf {
        self.keys.ssh_key(name, kind).expect("an SSH key")
    }

    /// Commits (empty) with `message`, signed with the SSH key `key` when given; the raw
    /// commit object.
    fn commit(&self, message: &str, key: Option<&Path>) -> Vec<u8> {
        self.commit_signed(message, key.map(ssh_signing).as_ref())
    }

    /// Commits (empty) with `message`, GPG-signed with the key (or subkey, with a `!`)
    /// `signing_key`; the raw commit object.
    fn gpg_commit(&self, message: &str, signing_key: &str) -> Vec<u8> {
        self.commit_signed(message, Some(&self.keys.gpg_signing(signing_key)))
    }

    /// Commits (empty) with `message`, signed as `signing` says when given; the raw commit
    /// object.
    fn commit_signed(&self, message: &str, signing: Option<&CommitSigning>) -> Vec<u8> {
        let mut args = vec!["commit", "--quiet", "--allow-empty", "-m", message];
        if signing.is_some() {
            args.push("-S");
        }
        self.git_signed(&args, signing);
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
    ssh_public_line(key).expect("the public key")
}

fn fingerprint(key: &Path) -> String {
    ssh_fingerprint(key).expect("a fingerprint")
}

fn expect_invalid(verdict: CommitVerdict, expected: &str) {
    match verdict {
        CommitVerdict::Invalid(why) => {
            assert!(
                why.message.contains(expected),
                "expected {expected:?} in {why:?}"
            );
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
        verify(&raw, &allowed),
        CommitVerdict::Verified {
            principal: "dev@example.com".to_string(),
            fingerprint: fingerprint(&dev),
        }
    );
    assert!(repo.git_accepts(&allowed_path), "git verify-commit agrees");
    let raw = repo.commit("signed by ops", Some(&ops));
    assert_eq!(
        verify(&raw, &allowed),
        CommitVerdict::Verified {
            principal: "ops@example.com,*@ops.example".to_string(),
            fingerprint: fingerprint(&ops),
        }
    );

    // The commit's content changed after signing.
    let tampered = String::from_utf8(raw)
        .expect("UTF-8")
        .replace("signed by ops", "signed by 0ps");
    expect_invalid(verify(tampered.as_bytes(), &allowed), "does not verify");

    // A key that is not listed: refused, as git refuses it.
    let raw = repo.commit("signed by a stranger", Some(&stranger));
    expect_invalid(verify(&raw, &allowed), "is not an allowed signer");
    assert!(
        !repo.git_accepts(&allowed_path),
        "git verify-commit refuses it too"
    );

    // Unsigned.
    let raw = repo.commit("unsigned", None);
    assert_eq!(verify(&raw, &allowed), CommitVerdict::Unsigned);

    // The signer's line allows other namespaces only, or expired before the commit.
    let raw = repo.commit("signed by dev again", Some(&dev));
    let file_only = AllowedSigners::parse(
        &format!("dev@example.com namespaces=\"file\" {}\n", public(&dev)),
        "file-only",
    )
    .expect("reads");
    expect_invalid(verify(&raw, &file_only), "may sign only in namespaces");
    let expired = AllowedSigners::parse(
        &format!(
            "dev@example.com valid-before=\"20251231\" {}\n",
            public(&dev)
        ),
        "expired",
    )
    .expect("reads");
    expect_invalid(verify(&raw, &expired), "was not valid at the commit's time");
    let current = AllowedSigners::parse(
        &format!(
            "dev@example.com valid-after=\"20251231\",valid-before=\"20260102\" {}\n",
            public(&dev)
        ),
        "current",
    )
    .expect("reads");
    assert!(matches!(
        verify(&raw, &current),
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
    assert!(
        matches!(
            &error,
            agentic_trust::TrustError::InvalidAllowedSigners {
                line: 3,
                error: agentic_trust::SignerLineError::Key { key_type, .. },
                ..
            } if key_type == "ssh-ed25519"
        ),
        "{error:?}"
    );
}

/// The GPG side of a [`Repo`]'s signing keys.
struct Gpg<'r> {
    keys: &'r SigningKeys,
}

impl Gpg<'_> {
    fn new(repo: &Repo) -> Gpg<'_> {
        Gpg { keys: &repo.keys }
    }

    fn run(&self, args: &[&str]) -> Vec<u8> {
        self.keys.gpg(args).expect("gpg")
    }

    /// A new key for `user` that signs with its primary key, expiring after `expiry`
    /// (`never`, `1d`): its fingerprint.
    fn key(&self, user: &str, expiry: &str) -> String {
        self.keys.gpg_key(user, expiry).expect("a GPG key")
    }

    /// The fingerprints of `user`'s key: the primary first, then its subkeys.
    fn fingerprints(&self, user: &str) -> Vec<String> {
        self.keys.gpg_fingerprints(user).expect("gpg lists the key")
    }

    fn keys(&self, fingerprints: &[&str]) -> CommitSigners {
        let mut keys = GpgKeys::default();
        for fingerprint in fingerprints {
            let armored = self.keys.gpg_export(fingerprint).expect("gpg exports it");
            keys.add(&armored, fingerprint)
                .expect("the exported key reads");
        }
        CommitSigners {
            gpg_keys: keys,
            ..CommitSigners::default()
        }
    }

    /// Revokes the key with the revocation certificate gpg made when it made the key.
    fn revoke(&self, fingerprint: &str) {
        let path = self
            .keys
            .gnupg_home()
            .join("openpgp-revocs.d")
            .join(format!("{fingerprint}.rev"));
        // gpg writes it with `:` before the armor so that it is not imported by mistake.
        let certificate = std::fs::read_to_string(path)
            .expect("the revocation certificate")
            .replace(":-----BEGIN", "-----BEGIN");
        let armored = self.keys.dir().join(format!("{fingerprint}.rev.asc"));
        std::fs::write(&armored, certificate).expect("the certificate written");
        self.run(&["--import", &armored.display().to_string()]);
    }
}

#[test]
fn gpg_signed_commits_against_gpg_keys() {
    let repo = Repo::new();
    let gpg = Gpg::new(&repo);
    let dev = gpg.key("Dev <dev@example.com>", "never");
    let eve = gpg.key("Eve <eve@example.com>", "never");
    let signers = gpg.keys(&[&dev]);
    let now = SystemTime::now();

    let raw = repo.gpg_commit("signed by dev", &dev);
    assert_eq!(
        verify_commit(&raw, &signers, now),
        CommitVerdict::Verified {
            principal: "Dev <dev@example.com>".to_string(),
            fingerprint: dev.clone(),
        }
    );
    // The SSH list alone does not admit it.
    expect_invalid(
        verify(&raw, &AllowedSigners::default()),
        "no GPG keys are allowed",
    );

    let tampered = String::from_utf8(raw)
        .expect("UTF-8")
        .replace("signed by dev", "signed by d3v");
    expect_invalid(
        verify_commit(tampered.as_bytes(), &signers, now),
        "does not verify",
    );

    let raw = repo.gpg_commit("signed by eve", &eve);
    expect_invalid(
        verify_commit(&raw, &signers, now),
        &format!("the signing key {eve} is not among the allowed GPG keys"),
    );

    let raw = repo.commit("unsigned", None);
    assert_eq!(verify_commit(&raw, &signers, now), CommitVerdict::Unsigned);

    // A signing subkey counts for its primary key, whose fingerprint names the signer.
    gpg.run(&["--quick-add-key", &dev, "ed25519", "sign", "never"]);
    let subkey = gpg.fingerprints("dev@example.com")[1].clone();
    let raw = repo.gpg_commit("signed by dev's subkey", &format!("{subkey}!"));
    let signers = gpg.keys(&[&dev]);
    assert_eq!(
        verify_commit(&raw, &signers, now),
        CommitVerdict::Verified {
            principal: "Dev <dev@example.com>".to_string(),
            fingerprint: dev.clone(),
        }
    );

    // Revoked: the same signature no longer counts.
    gpg.revoke(&dev);
    expect_invalid(
        verify_commit(&raw, &gpg.keys(&[&dev]), now),
        &format!("the GPG key {dev} is revoked"),
    );
}

#[test]
fn an_expired_gpg_key_no_longer_counts() {
    let repo = Repo::new();
    let gpg = Gpg::new(&repo);
    let short_lived = gpg.key("Temp <temp@example.com>", "1d");
    let raw = repo.gpg_commit("signed while valid", &short_lived);
    expect_valid_then_expired(&raw, &gpg.keys(&[&short_lived]));
}

/// `raw` verifies with `signers` now, and no longer two days later (past a one-day expiry).
fn expect_valid_then_expired(raw: &[u8], signers: &CommitSigners) {
    assert!(matches!(
        verify_commit(raw, signers, SystemTime::now()),
        CommitVerdict::Verified { .. }
    ));
    let two_days_later = SystemTime::now() + Duration::from_secs(2 * 86_400);
    expect_invalid(verify_commit(raw, signers, two_days_later), "has expired");
}

#[test]
fn a_bad_gpg_key_is_named() {
    let mut keys = GpgKeys::default();
    let error = keys
        .add(
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64!\n-----END PGP PUBLIC KEY BLOCK-----\n",
            "policy/gpgKeys[0]",
        )
        .expect_err("an unreadable key");
    assert!(
        error.to_string().starts_with("policy/gpgKeys[0]: "),
        "{error}"
    );
    assert!(keys.is_empty());
}

/// gpg stamps self-signatures to the second; a self-signature meant to be the newer one
/// must be made in a later second.
fn next_second() {
    std::thread::sleep(Duration::from_millis(1100));
}

#[test]
fn a_revoked_user_id_does_not_lift_an_expiry() {
    let repo = Repo::new();
    let gpg = Gpg::new(&repo);
    let key = gpg.key("Temp <temp@example.com>", "1d");
    gpg.run(&["--quick-add-uid", &key, "Other <other@example.com>"]);
    let raw = repo.gpg_commit("signed while valid", &key);
    next_second();
    // The revocation is the key's newest self-signature, and carries no expiry.
    gpg.run(&["--quick-revoke-uid", &key, "Other <other@example.com>"]);
    expect_valid_then_expired(&raw, &gpg.keys(&[&key]));
}

#[test]
fn a_primary_key_no_longer_allowed_to_sign_does_not_count() {
    let repo = Repo::new();
    let gpg = Gpg::new(&repo);
    let key = gpg.key("Dev <dev@example.com>", "never");
    let raw = repo.gpg_commit("signed by the primary key", &key);
    assert!(matches!(
        verify_commit(&raw, &gpg.keys(&[&key]), SystemTime::now()),
        CommitVerdict::Verified { .. }
    ));
    next_second();
    // A newer self-signature takes the signing capability away (certify only).
    let commands = repo.keys.dir().join("change-usage");
    std::fs::write(&commands, "change-usage\nS\nQ\nsave\n").expect("the commands written");
    gpg.run(&[
        "--expert",
        "--command-file",
        &commands.display().to_string(),
        "--edit-key",
        &key,
    ]);
    expect_invalid(
        verify_commit(&raw, &gpg.keys(&[&key]), SystemTime::now()),
        "has a primary key that is not allowed to sign",
    );
}

#[test]
fn weak_digests_are_refused_as_gnupg_refuses_them() {
    let repo = Repo::new();
    let gpg = Gpg::new(&repo);
    gpg.run(&[
        "--quick-gen-key",
        "Old <old@example.com>",
        "rsa2048",
        "sign",
        "never",
    ]);
    let key = gpg.fingerprints("old@example.com")[0].clone();
    let conf = repo.keys.gnupg_home().join("gpg.conf");
    for (digest, name) in [
        ("SHA256", None),
        ("RIPEMD160", Some("RIPEMD160")),
        ("MD5", Some("MD5")),
    ] {
        std::fs::write(&conf, format!("digest-algo {digest}\n")).expect("gpg.conf written");
        let raw = repo.gpg_commit(&format!("signed with {digest}"), &key);
        let verdict = verify_commit(&raw, &gpg.keys(&[&key]), SystemTime::now());
        match name {
            None => assert!(
                matches!(verdict, CommitVerdict::Verified { .. }),
                "{verdict:?}"
            ),
            Some(name) => expect_invalid(verdict, &format!("uses the {name} digest")),
        }
    }
}
