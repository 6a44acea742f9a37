//! Bounds on what fetching and reading one skill may cost.

use std::time::Duration;

/// Bounds on the work, disk and memory spent on one skill from git, the counterparts of the
/// image limits in `agentic-oci`. A repository over a limit fails with
/// [`GitError::TooLarge`](crate::GitError::TooLarge) naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the server may send for one fetch (the pack of the whole tree at the commit,
    /// depth 1), checked while it arrives. Default 64 MiB, like one image layer.
    pub max_fetch_bytes: u64,
    /// Uncompressed bytes of the files in the skill directory. Default 256 MiB, like all
    /// layers of an image together.
    pub max_skill_bytes: u64,
    /// Files, directories and links in the skill directory. Default 100 000.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_fetch_bytes: 64 * 1024 * 1024,
            max_skill_bytes: 256 * 1024 * 1024,
            max_entries: 100_000,
        }
    }
}

/// Bytes of the commit object read for its signature ([`Fetched::raw_commit`]): headers,
/// signature and message. A real commit is a few KiB; this is `agentic-trust`'s bound too.
///
/// [`Fetched::raw_commit`]: crate::Fetched::raw_commit
pub const MAX_COMMIT_BYTES: u64 = 1024 * 1024;

/// Longest path inside the skill directory (Linux `PATH_MAX`).
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// How the operator talks to git servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOptions {
    /// `HOST` or `HOST:PORT` entries that may be reached over plain `http://`.
    pub insecure_hosts: Vec<String>,
    /// Longest wait for a connection, and for each read or write on a `git://` connection.
    /// Default 10 s.
    pub io_timeout: Duration,
    /// Longest one resolve or one fetch may take in all, HTTP requests included. Default 60 s.
    pub deadline: Duration,
    pub limits: Limits,
}

impl Default for GitOptions {
    fn default() -> Self {
        GitOptions {
            insecure_hosts: Vec::new(),
            io_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(60),
            limits: Limits::default(),
        }
    }
}
