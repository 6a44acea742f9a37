//! A throw-away git server on loopback, or on an address of a bridge this machine created:
//! Debian's `git daemon` for `git://`, and `git http-backend` behind a small in-process HTTP
//! server for `http://`, optionally with HTTP basic authentication. Repositories are bare,
//! in the server's temporary directory, and written with the same `git` binary, so tests can
//! move, tag and delete refs while the server runs.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;

use crate::error::{Error, Result};
use crate::net::free_port;
use crate::supervisor::Supervisor;
use crate::wait_for;

/// Environment variable naming the git binary; defaults to [`DEFAULT_GIT_BIN`].
pub const GIT_BIN_ENV: &str = "AGENTIC_GIT_BIN";
/// Where Debian's `git` package puts it (`make node-packages` installs it).
pub const DEFAULT_GIT_BIN: &str = "/usr/bin/git";

const DAEMON: &str = "git-daemon";
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest request body the HTTP side accepts (a fetch request is a few kilobytes).
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// One file of a commit written by [`GitServer::commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitFile {
    /// A regular file.
    File(Vec<u8>),
    /// An executable file.
    Executable(Vec<u8>),
    /// A symlink to the given target.
    Symlink(String),
}

/// How [`GitServer::commit_signed`] signs: `git commit-tree -S` with these `-c` settings
/// (e.g. `gpg.format=ssh` and `user.signingkey=<path>`, or a GPG key id) and environment
/// variables (e.g. `GNUPGHOME`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitSigning {
    pub config: Vec<(String, String)>,
    pub env: Vec<(String, std::ffi::OsString)>,
}

/// A git server: `git://ADDRESS:PORT/<repo>` and `http://ADDRESS:PORT/<repo>`, on loopback
/// unless started with [`GitServer::start_on`].
///
/// The daemon is stopped and the repositories removed when the value is dropped, and also
/// when the test process dies without dropping it (see the crate docs); the HTTP side is a
/// task of the test's runtime, and each request a `git http-backend` child killed with it.
pub struct GitServer {
    git: PathBuf,
    daemon_addr: SocketAddr,
    http_addr: SocketAddr,
    http: tokio::task::JoinHandle<()>,
    supervisor: Supervisor,
}

impl GitServer {
    /// Starts the server on loopback without authentication.
    pub async fn start() -> Result<GitServer> {
        Self::start_on(Ipv4Addr::LOCALHOST, None).await
    }

    /// Starts the server on loopback with HTTP basic authentication required on the HTTP
    /// side; the `git://` side has none (the protocol has none).
    pub async fn start_with_basic_auth(username: &str, password: &str) -> Result<GitServer> {
        Self::start_on(Ipv4Addr::LOCALHOST, Some((username, password))).await
    }

    /// Starts the server listening on `address` only (loopback, or this machine's address
    /// on a bridge it created, such as the test node's), with HTTP basic authentication
    /// when `basic_auth` names a user and password.
    pub async fn start_on(
        address: Ipv4Addr,
        basic_auth: Option<(&str, &str)>,
    ) -> Result<GitServer> {
        let authorization = basic_auth.map(|(username, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            format!("Basic {token}")
        });
        let git = git_binary()?;
        let mut supervisor = Supervisor::new("agentic-git-")?;
        let root = supervisor.dir().join("repos");
        std::fs::create_dir(&root).map_err(Error::io("creating", &root))?;

        let daemon_addr = SocketAddr::from((address, free_port()?));
        let mut command = Command::new(&git);
        command
            .arg("daemon")
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--informative-errors")
            .arg(format!("--base-path={}", root.display()))
            .arg(format!("--listen={}", daemon_addr.ip()))
            .arg(format!("--port={}", daemon_addr.port()))
            .arg(&root)
            .env_remove("GIT_CONFIG_GLOBAL")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", supervisor.dir());
        supervisor.spawn(DAEMON, command)?;
        wait_for(
            &mut supervisor,
            DAEMON,
            format!("git daemon at {daemon_addr}"),
            READY_TIMEOUT,
            || async move { tokio::net::TcpStream::connect(daemon_addr).await.is_ok() },
        )
        .await?;

        let listener = tokio::net::TcpListener::bind((address, 0))
            .await
            .map_err(Error::io(
                "binding the git HTTP server to",
                address.to_string(),
            ))?;
        let http_addr = listener
            .local_addr()
            .map_err(Error::io("reading the address of", "the git HTTP server"))?;
        let backend = Backend {
            git: git.clone(),
            root,
            home: supervisor.dir().to_path_buf(),
            authorization,
        };
        let app = axum::Router::new().fallback(move |request| {
            let backend = backend.clone();
            async move { backend.serve(request).await }
        });
        let http = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        tracing::info!(%daemon_addr, %http_addr, "git server ready");
        Ok(GitServer {
            git,
            daemon_addr,
            http_addr,
            http,
            supervisor,
        })
    }

    /// `git://ADDRESS:PORT/<repo>`.
    pub fn git_url(&self, repo: &str) -> String {
        format!("git://{}/{repo}", self.daemon_addr)
    }

    /// `http://ADDRESS:PORT/<repo>`.
    pub fn http_url(&self, repo: &str) -> String {
        format!("http://{}/{repo}", self.http_addr)
    }

    /// `ADDRESS:PORT` of the HTTP side, for the operator's insecure git hosts.
    pub fn http_host(&self) -> String {
        self.http_addr.to_string()
    }

    /// Pids of the processes this server started (the daemon and its watchdog).
    pub fn pids(&self) -> Vec<u32> {
        self.supervisor.pids()
    }

    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.supervisor.dir().join("repos").join(repo)
    }

    /// Creates an empty bare repository whose default branch (`HEAD`) is `main`.
    pub fn create_repo(&self, repo: &str) -> Result<()> {
        let dir = self.repo_dir(repo);
        self.run(
            &["init", "--quiet", "--bare", "--initial-branch=main"],
            Some(&dir),
            &[],
        )?;
        Ok(())
    }

    /// Commits exactly `files` (the whole tree; paths `/`-separated) on `branch`, on top of
    /// the branch's current commit when it has one, and returns the commit id. Author and
    /// dates are fixed, so the same files on the same parent give the same id.
    pub fn commit(&self, repo: &str, branch: &str, files: &[(&str, GitFile)]) -> Result<String> {
        self.commit_as(repo, branch, files, None)
    }

    /// [`GitServer::commit`], signed as `signing` says.
    pub fn commit_signed(
        &self,
        repo: &str,
        branch: &str,
        files: &[(&str, GitFile)],
        signing: &CommitSigning,
    ) -> Result<String> {
        self.commit_as(repo, branch, files, Some(signing))
    }

    fn commit_as(
        &self,
        repo: &str,
        branch: &str,
        files: &[(&str, GitFile)],
        signing: Option<&CommitSigning>,
    ) -> Result<String> {
        let git_dir = self.repo_dir(repo);
        let work = tempfile::Builder::new()
            .prefix("agentic-git-work-")
            .tempdir_in(self.supervisor.dir())
            .map_err(Error::io("creating a work tree in", self.supervisor.dir()))?;
        let tree_dir = work.path().join("tree");
        for (path, file) in files {
            let target = tree_dir.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
            }
            match file {
                GitFile::File(data) | GitFile::Executable(data) => {
                    std::fs::write(&target, data).map_err(Error::io("writing", &target))?;
                    if matches!(file, GitFile::Executable(_)) {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                            .map_err(Error::io("chmod", &target))?;
                    }
                }
                GitFile::Symlink(to) => {
                    std::os::unix::fs::symlink(to, &target)
                        .map_err(Error::io("linking", &target))?;
                }
            }
        }
        std::fs::create_dir_all(&tree_dir).map_err(Error::io("creating", &tree_dir))?;
        let index = work.path().join("index");
        let env = [("GIT_INDEX_FILE", index.as_os_str())];
        let git_dir_arg = format!("--git-dir={}", git_dir.display());
        let work_tree_arg = format!("--work-tree={}", tree_dir.display());
        self.run(
            &[&git_dir_arg, &work_tree_arg, "add", "--all", "."],
            Some(&tree_dir),
            &env,
        )?;
        let tree = self.run(&[&git_dir_arg, "write-tree"], None, &env)?;
        let reference = format!("refs/heads/{branch}");
        let parent = self
            .run(
                &[&git_dir_arg, "rev-parse", "--verify", "--quiet", &reference],
                None,
                &[],
            )
            .ok();
        let settings: Vec<String> = signing
            .iter()
            .flat_map(|signing| &signing.config)
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let mut args: Vec<&str> = settings.iter().flat_map(|s| ["-c", s.as_str()]).collect();
        args.extend([
            git_dir_arg.as_str(),
            "commit-tree",
            tree.as_str(),
            "-m",
            branch,
        ]);
        if let Some(parent) = &parent {
            args.extend(["-p", parent.as_str()]);
        }
        if signing.is_some() {
            args.push("-S");
        }
        let signing_env: Vec<(&str, &std::ffi::OsStr)> = signing
            .iter()
            .flat_map(|signing| &signing.env)
            .map(|(key, value)| (key.as_str(), value.as_os_str()))
            .collect();
        let commit = self.run(&args, None, &signing_env)?;
        self.run(
            &[&git_dir_arg, "update-ref", &reference, &commit],
            None,
            &[],
        )?;
        Ok(commit)
    }

    /// Points `refs/tags/<tag>` at `commit` (a lightweight tag).
    pub fn tag(&self, repo: &str, tag: &str, commit: &str) -> Result<()> {
        let git_dir = format!("--git-dir={}", self.repo_dir(repo).display());
        self.run(
            &[&git_dir, "update-ref", &format!("refs/tags/{tag}"), commit],
            None,
            &[],
        )?;
        Ok(())
    }

    /// Deletes the branch `branch`.
    pub fn delete_branch(&self, repo: &str, branch: &str) -> Result<()> {
        let git_dir = format!("--git-dir={}", self.repo_dir(repo).display());
        self.run(
            &[
                &git_dir,
                "update-ref",
                "-d",
                &format!("refs/heads/{branch}"),
            ],
            None,
            &[],
        )?;
        Ok(())
    }

    /// Runs git and returns its trimmed standard output.
    fn run(
        &self,
        args: &[&str],
        dir: Option<&Path>,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Result<String> {
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
        }
        let mut command = Command::new(&self.git);
        command
            .args(args)
            .current_dir(dir.unwrap_or(self.supervisor.dir()))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.supervisor.dir())
            .env("GIT_AUTHOR_NAME", "agentic-testenv")
            .env("GIT_AUTHOR_EMAIL", "testenv@example.invalid")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_NAME", "agentic-testenv")
            .env("GIT_COMMITTER_EMAIL", "testenv@example.invalid")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .stdin(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.output().map_err(|source| Error::Spawn {
            name: "git",
            program: self.git.clone(),
            source,
        })?;
        if !output.status.success() {
            return Err(Error::CommandFailed {
                command: format!("git {}", args.join(" ")),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.http.abort();
    }
}

impl std::fmt::Debug for GitServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitServer")
            .field("daemon_addr", &self.daemon_addr)
            .field("http_addr", &self.http_addr)
            .field("work_dir", &self.supervisor.dir())
            .finish()
    }
}

/// The HTTP side: every request runs `git http-backend` (CGI) once.
#[derive(Clone)]
struct Backend {
    git: PathBuf,
    root: PathBuf,
    home: PathBuf,
    /// The `Authorization` header every request must carry, when set.
    authorization: Option<String>,
}

impl Backend {
    async fn serve(&self, request: axum::extract::Request) -> axum::response::Response {
        use axum::response::IntoResponse;
        let (parts, body) = request.into_parts();
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        if let Some(expected) = &self.authorization
            && header("authorization") != *expected
        {
            return (
                http::StatusCode::UNAUTHORIZED,
                [("www-authenticate", "Basic realm=\"git\"")],
                "credentials required",
            )
                .into_response();
        }
        let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
            return (http::StatusCode::PAYLOAD_TOO_LARGE, "request too large").into_response();
        };
        let mut command = tokio::process::Command::new(&self.git);
        command
            .arg("http-backend")
            .env_clear()
            .env("GIT_PROJECT_ROOT", &self.root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.home)
            .env("REQUEST_METHOD", parts.method.as_str())
            .env("PATH_INFO", parts.uri.path())
            .env("QUERY_STRING", parts.uri.query().unwrap_or_default())
            .env("CONTENT_TYPE", header("content-type"))
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_GIT_PROTOCOL", header("git-protocol"))
            .env("REMOTE_ADDR", "127.0.0.1")
            .env(
                "REMOTE_USER",
                if self.authorization.is_some() {
                    "test"
                } else {
                    ""
                },
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let encoding = header("content-encoding");
        if !encoding.is_empty() {
            command.env("HTTP_CONTENT_ENCODING", encoding);
        }
        let Ok(mut child) = command.spawn() else {
            return (
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "cannot run git http-backend",
            )
                .into_response();
        };
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(&body).await;
        }
        let Ok(output) = child.wait_with_output().await else {
            return (
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "git http-backend failed",
            )
                .into_response();
        };
        cgi_response(&output.stdout)
    }
}

/// Turns a CGI answer (headers, a blank line, the body) into an HTTP response.
fn cgi_response(output: &[u8]) -> axum::response::Response {
    use axum::response::IntoResponse;
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        });
    let Some((end, body_start)) = split else {
        return (http::StatusCode::BAD_GATEWAY, "malformed CGI answer").into_response();
    };
    let mut status = http::StatusCode::OK;
    let mut builder = http::Response::builder();
    for line in String::from_utf8_lossy(&output[..end]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            if let Some(code) = value.split(' ').next().and_then(|c| c.parse().ok()) {
                status = http::StatusCode::from_u16(code).unwrap_or(status);
            }
        } else {
            builder = builder.header(name.trim(), value);
        }
    }
    builder
        .status(status)
        .body(axum::body::Body::from(output[body_start..].to_vec()))
        .unwrap_or_else(|_| (http::StatusCode::BAD_GATEWAY, "bad CGI headers").into_response())
}

fn git_binary() -> Result<PathBuf> {
    let path =
        std::env::var_os(GIT_BIN_ENV).map_or_else(|| PathBuf::from(DEFAULT_GIT_BIN), PathBuf::from);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::BinaryMissing {
            name: "git",
            path,
            hint: "run `make node-packages` (hack/install-node-packages.sh) or set AGENTIC_GIT_BIN",
        })
    }
}
