//! Signing keys for tests of signed git commits, made with the tools on `PATH`
//! (`ssh-keygen`, `gpg`, `gpgconf`).
//!
//! [`SigningKeys`] is a scratch directory holding SSH key pairs and a private `GNUPGHOME`;
//! its gpg-agent (started by the first `gpg` that needs it) is stopped and the directory
//! removed when the value is dropped. [`ssh_signing`] and [`SigningKeys::gpg_signing`] say
//! how `git commit -S` (or [`GitServer::commit_signed`](crate::GitServer::commit_signed))
//! signs with either kind of key; [`ssh_public_line`], [`ssh_fingerprint`] and
//! [`SigningKeys::gpg_key`] give what a trust policy lists and a verifier names.
//!
//! ```no_run
//! use agentic_testenv::signing::{SigningKeys, ssh_fingerprint, ssh_public_line, ssh_signing};
//!
//! # fn main() -> agentic_testenv::Result<()> {
//! let keys = SigningKeys::new()?;
//! let dev = keys.ssh_key("dev", "ed25519")?;
//! let allowed = format!("dev@example.com {}\n", ssh_public_line(&dev)?);
//! let signer = ssh_fingerprint(&dev)?; // SHA256:…
//! let by_dev = ssh_signing(&dev);
//! let gpg_dev = keys.gpg_key("Dev <dev@example.com>", "never")?;
//! let by_gpg_dev = keys.gpg_signing(&gpg_dev);
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::CommitSigning;
use crate::error::{Error, Result};

/// A scratch directory of signing keys: SSH key pairs made by [`SigningKeys::ssh_key`], and
/// a private `GNUPGHOME` ([`SigningKeys::gnupg_home`]) that [`SigningKeys::gpg`] works in.
///
/// Dropping it stops the home's gpg-agent and removes the directory.
#[derive(Debug)]
pub struct SigningKeys {
    dir: tempfile::TempDir,
}

impl SigningKeys {
    /// A new, empty scratch directory with an empty `GNUPGHOME` (mode 0700, as gpg wants).
    pub fn new() -> Result<SigningKeys> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("agentic-keys-")
            .tempdir()
            .map_err(Error::io("creating", std::env::temp_dir()))?;
        let keys = SigningKeys { dir };
        let home = keys.gnupg_home();
        std::fs::create_dir(&home).map_err(Error::io("creating", &home))?;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))
            .map_err(Error::io("chmod", &home))?;
        Ok(keys)
    }

    /// The scratch directory: the SSH keys' files are in it, and a test may put its own.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The `GNUPGHOME` of this value's GPG keys.
    pub fn gnupg_home(&self) -> PathBuf {
        self.dir.path().join("gnupg")
    }

    /// A new SSH key pair without a passphrase, of ssh-keygen's type `kind` (`ed25519`,
    /// `ecdsa`, …) and with `name` as its comment: the private key's path, `dir()/name`; the
    /// public key is beside it with the extension `.pub`.
    pub fn ssh_key(&self, name: &str, kind: &str) -> Result<PathBuf> {
        let path = self.dir.path().join(name);
        run(
            "ssh-keygen",
            Command::new("ssh-keygen")
                .args(["-q", "-t", kind, "-N", "", "-C", name, "-f"])
                .arg(&path),
        )?;
        Ok(path)
    }

    /// Runs `gpg` in batch mode, with an empty passphrase and this `GNUPGHOME`, with `args`:
    /// its standard output.
    pub fn gpg(&self, args: &[&str]) -> Result<Vec<u8>> {
        run(
            "gpg",
            Command::new("gpg")
                .env("GNUPGHOME", self.gnupg_home())
                .args([
                    "--batch",
                    "--yes",
                    "--pinentry-mode",
                    "loopback",
                    "--passphrase",
                    "",
                ])
                .args(args),
        )
    }

    /// A new Ed25519 GPG key for `user` (`Name <email>`) that signs with its primary key and
    /// expires after `expiry` (`never`, `1d`, …): its fingerprint.
    pub fn gpg_key(&self, user: &str, expiry: &str) -> Result<String> {
        self.gpg(&["--quick-gen-key", user, "ed25519", "sign", expiry])?;
        let fingerprints = self.gpg_fingerprints(user)?;
        fingerprints
            .into_iter()
            .next()
            .ok_or_else(|| Error::CommandFailed {
                command: format!("gpg --list-keys {user}"),
                status: "success".to_string(),
                stderr: "it listed no fingerprint for the key just made".to_string(),
            })
    }

    /// The fingerprints of the keys gpg finds for `user` (a user id, part of one, or a
    /// fingerprint): for each key its primary key first, then its subkeys.
    pub fn gpg_fingerprints(&self, user: &str) -> Result<Vec<String>> {
        let listing = self.gpg(&["--with-colons", "--list-keys", user])?;
        Ok(String::from_utf8_lossy(&listing)
            .lines()
            .filter(|line| line.starts_with("fpr:"))
            .filter_map(|line| line.split(':').nth(9))
            .map(str::to_string)
            .collect())
    }

    /// The public key `fingerprint`, ASCII-armored.
    pub fn gpg_export(&self, fingerprint: &str) -> Result<String> {
        let armor = self.gpg(&["--armor", "--export", fingerprint])?;
        Ok(String::from_utf8_lossy(&armor).into_owned())
    }

    /// How `git commit -S` signs with the GPG key (or subkey, with a `!` after it)
    /// `fingerprint` of this `GNUPGHOME`.
    pub fn gpg_signing(&self, fingerprint: &str) -> CommitSigning {
        CommitSigning {
            config: vec![
                ("gpg.format".into(), "openpgp".into()),
                ("user.signingkey".into(), fingerprint.to_string()),
            ],
            env: vec![("GNUPGHOME".into(), self.gnupg_home().into_os_string())],
        }
    }
}

impl Drop for SigningKeys {
    fn drop(&mut self) {
        // Nothing to report if no agent runs, and a drop has no one to tell.
        let _ = Command::new("gpgconf")
            .env("GNUPGHOME", self.gnupg_home())
            .args(["--kill", "gpg-agent"])
            .output();
    }
}

/// How `git commit -S` signs with the SSH private key at `key`.
pub fn ssh_signing(key: &Path) -> CommitSigning {
    CommitSigning {
        config: vec![
            ("gpg.format".into(), "ssh".into()),
            ("user.signingkey".into(), key.display().to_string()),
        ],
        env: Vec::new(),
    }
}

/// The public key of the SSH private key at `key` as an allowed-signers line ends:
/// `<type> <base64>`, without the comment.
pub fn ssh_public_line(key: &Path) -> Result<String> {
    let path = key.with_extension("pub");
    let text = std::fs::read_to_string(&path).map_err(Error::io("reading", &path))?;
    Ok(text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" "))
}

/// The SHA-256 fingerprint (`SHA256:…`) of the SSH private key at `key`, as `ssh-keygen -l`
/// prints it.
pub fn ssh_fingerprint(key: &Path) -> Result<String> {
    let public = key.with_extension("pub");
    let out = run(
        "ssh-keygen",
        Command::new("ssh-keygen")
            .args(["-l", "-E", "sha256", "-f"])
            .arg(&public),
    )?;
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace()
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| Error::CommandFailed {
            command: format!("ssh-keygen -l -E sha256 -f {}", public.display()),
            status: "success".to_string(),
            stderr: format!("no fingerprint in its output {text:?}"),
        })
}

/// Runs `command` (the program `name`): its standard output, or an error with its
/// standard error if it fails.
fn run(name: &'static str, command: &mut Command) -> Result<Vec<u8>> {
    let out = command.output().map_err(|source| Error::Spawn {
        name,
        program: PathBuf::from(name),
        source,
    })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(Error::CommandFailed {
            command: format!("{command:?}"),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}
