//! The network side: listing refs and fetching one commit, each bounded in time and bytes.

use std::net::{TcpStream, ToSocketAddrs};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::credentials::helper::Action;
use gix::credentials::protocol::Outcome;
use gix::protocol::transport::client::blocking_io::Transport;
use gix::protocol::transport::client::blocking_io::http;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::client::git::blocking_io::Connection;
use gix::remote::Direction;
use gix::remote::fetch::{Shallow, Tags};

use crate::error::bounded;
use crate::refs::{Advertised, Resolved, Wanted};
use crate::tree::Fetched;
use crate::{GitAuth, GitError, GitOptions, SourceUrl};

/// Resolves `git_ref` (a branch, tag, full ref name or full commit id; `None` or empty for
/// the default branch) to a commit id. A commit id is returned as given, without asking the
/// server: [`fetch_commit`] checks that it exists.
pub fn resolve(
    source: &SourceUrl,
    git_ref: Option<&str>,
    auth: &GitAuth,
    options: &GitOptions,
) -> Result<Resolved, GitError> {
    let wanted = crate::refs::wanted(git_ref)?;
    if let Wanted::Commit(_) = wanted {
        return wanted.pick(&[], source.as_str());
    }
    let scratch = scratch_dir()?;
    let repo = init(scratch.path())?;
    let watchdog = Watchdog::start(options, None);
    let listed = (|| {
        let remote = remote(&repo, source, &wanted.refspecs())?;
        let connection = connect(&remote, source, auth, options)?;
        let (map, _) = connection.ref_map(
            gix::progress::Discard,
            gix::remote::ref_map::Options::default(),
        )?;
        Ok::<_, gix::Error>(map.remote_refs)
    })();
    let stopped = watchdog.stop();
    let refs = listed.map_err(|e| classify(&e, source, stopped, options))?;
    let advertised: Vec<Advertised> = refs
        .iter()
        .filter_map(|r| {
            let (name, target, peeled) = r.unpack();
            let commit = peeled.or(target)?.to_string();
            let symbolic = match r {
                gix::protocol::handshake::Ref::Symbolic { target, .. } => Some(target.to_string()),
                _ => None,
            };
            Some(Advertised {
                name: name.to_string(),
                commit,
                target: symbolic,
            })
        })
        .collect();
    wanted.pick(&advertised, source.as_str())
}

/// Fetches exactly `commit` (a full id) with depth 1 into a scratch repository that lives as
/// long as the returned [`Fetched`]. Every object the server sends is checked against its id,
/// so the tree read from it is that commit's.
pub fn fetch_commit(
    source: &SourceUrl,
    commit: &str,
    auth: &GitAuth,
    options: &GitOptions,
) -> Result<Fetched, GitError> {
    if !crate::refs::is_commit_id(commit) {
        return Err(GitError::InvalidRef {
            git_ref: commit.to_string(),
            message: "not a full 40-character commit id".to_string(),
        });
    }
    let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| GitError::InvalidRef {
        git_ref: commit.to_string(),
        message: e.to_string(),
    })?;
    let scratch = scratch_dir()?;
    let repo = init(scratch.path())?;
    let interrupt = Arc::new(AtomicBool::new(false));
    let watchdog = Watchdog::start(
        options,
        Some((scratch.path().to_path_buf(), interrupt.clone())),
    );
    let fetched = (|| {
        let remote = remote(&repo, source, &[commit.to_string()])?;
        let connection = connect(&remote, source, auth, options)?;
        let depth = NonZeroU32::MIN;
        connection
            .prepare_fetch(
                gix::progress::Discard,
                gix::remote::ref_map::Options::default(),
            )?
            .with_shallow(Shallow::DepthAtRemote(depth))
            .receive(gix::progress::Discard, &interrupt)?;
        Ok::<_, gix::Error>(())
    })();
    let stopped = watchdog.stop();
    if let Err(e) = fetched {
        if stopped == Some(Stopped::TooLarge) {
            return Err(GitError::too_large(format!(
                "fetching {commit} sent more than {} bytes (Limits::max_fetch_bytes)",
                options.limits.max_fetch_bytes
            )));
        }
        let error = classify(&e, source, stopped, options);
        return Err(match error {
            GitError::SourceUnavailable { message, .. } if names_missing_object(&message) => {
                GitError::RefNotFound {
                    source_url: source.to_string(),
                    message: format!("the repository has no commit {commit}"),
                }
            }
            other => other,
        });
    }
    Fetched::new(scratch, repo, id, source)
}

/// What `git upload-pack` says when a wanted object is not in the repository.
fn names_missing_object(message: &str) -> bool {
    message.contains("not our ref") || message.contains("no such") || message.contains("not found")
}

fn scratch_dir() -> Result<tempfile::TempDir, GitError> {
    tempfile::Builder::new()
        .prefix("agentic-git-")
        .tempdir()
        .map_err(|e| GitError::io(&std::env::temp_dir(), e))
}

/// A bare repository that reads no system, global or user configuration (no credential
/// helpers, no URL rewrites, no hooks).
fn init(dir: &Path) -> Result<gix::Repository, GitError> {
    gix::ThreadSafeRepository::init_opts(
        dir,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )
    .map(|repo| repo.to_thread_local())
    .map_err(|e| GitError::io(dir, chain(&e)))
}

fn remote<'repo>(
    repo: &'repo gix::Repository,
    source: &SourceUrl,
    refspecs: &[String],
) -> Result<gix::Remote<'repo>, gix::Error> {
    repo.remote_at_without_url_rewrite(source.url.clone())?
        .with_fetch_tags(Tags::None)
        .with_refspecs(refspecs.iter().map(String::as_str), Direction::Fetch)
}

type Connected<'a, 'repo> = gix::remote::Connection<'a, 'static, 'repo, Box<dyn Transport + Send>>;

/// A connection whose every step is bounded: `git://` over a socket with read and write
/// timeouts, HTTP(S) through a client with a connect timeout and a per-request timeout of the
/// whole deadline. Credentials come only from `auth`, never from helpers or prompts.
fn connect<'a, 'repo>(
    remote: &'a gix::Remote<'repo>,
    source: &SourceUrl,
    auth: &GitAuth,
    options: &GitOptions,
) -> Result<gix::remote::Connection<'a, 'static, 'repo, Box<dyn Transport + Send>>, gix::Error> {
    let connection: Connected<'a, 'repo> = if source.is_git_protocol() {
        let url = &source.url;
        let host = url.host().unwrap_or_default();
        let port = url.port.unwrap_or(9418);
        let address = (host, port)
            .to_socket_addrs()
            .map_err(gix::Error::from_error)?
            .next()
            .ok_or_else(|| {
                gix::Error::from_error(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{host} has no address"),
                ))
            })?;
        let stream = TcpStream::connect_timeout(&address, options.io_timeout)
            .map_err(gix::Error::from_error)?;
        stream
            .set_read_timeout(Some(options.io_timeout))
            .and_then(|()| stream.set_write_timeout(Some(options.io_timeout)))
            .map_err(gix::Error::from_error)?;
        let write = stream.try_clone().map_err(gix::Error::from_error)?;
        let transport = Connection::new(
            stream,
            write,
            gix::protocol::transport::Protocol::V2,
            url.path.clone(),
            Some((host.to_string(), url.port)),
            ConnectMode::Daemon,
            false,
        );
        remote.to_connection_with_transport(Box::new(transport) as Box<dyn Transport + Send>)
    } else {
        // reqwest builds its client on the process-wide rustls provider: ring, as for the
        // registry client (a no-op when one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let request_timeout = options.deadline;
        let backend = gix::protocol::transport::client::blocking_io::http::reqwest::Options {
            configure_client: Some(Box::new(
                move |builder| Ok(builder.timeout(request_timeout)),
            )),
            configure_request: None,
        };
        let http_options = http::Options {
            connect_timeout: Some(options.io_timeout),
            user_agent: Some(format!("agentic-operator/{}", env!("CARGO_PKG_VERSION"))),
            backend: Some(Arc::new(Mutex::new(backend))),
            ..http::Options::default()
        };
        remote
            .connect(Direction::Fetch)?
            .with_transport_options(Box::new(http_options))
    };
    let auth = auth.clone();
    Ok(
        connection.with_credentials(move |action| match (action, &auth) {
            (Action::Get(context), GitAuth::Basic { username, password }) => Ok(Some(Outcome {
                identity: gix::sec::identity::Account {
                    username: username.clone(),
                    password: password.clone(),
                    oauth_refresh_token: None,
                },
                next: context.into(),
            })),
            _ => Ok(None),
        }),
    )
}

/// Why the watchdog stopped an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    Deadline,
    TooLarge,
}

/// Ends an operation at its deadline, or when the scratch directory outgrows the fetch
/// limit, by raising the interrupt flag gix checks between reads.
struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<Stopped>>>,
}

impl Watchdog {
    fn start(options: &GitOptions, watched: Option<(PathBuf, Arc<AtomicBool>)>) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + options.deadline;
        let max_bytes = options.limits.max_fetch_bytes;
        let finished = done.clone();
        let thread = std::thread::spawn(move || {
            while !finished.load(Ordering::Relaxed) {
                let stop = if Instant::now() > deadline {
                    Some(Stopped::Deadline)
                } else if let Some((dir, _)) = &watched
                    && disk_usage(dir) > max_bytes
                {
                    Some(Stopped::TooLarge)
                } else {
                    None
                };
                if let Some(stop) = stop {
                    if let Some((_, interrupt)) = &watched {
                        interrupt.store(true, Ordering::Relaxed);
                    }
                    return Some(stop);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        Watchdog {
            done,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Option<Stopped> {
        self.done.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).flatten()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => disk_usage(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The error chain as one line, bounded.
fn chain(error: &gix::Error) -> String {
    let mut text = String::new();
    for (i, e) in error.iter_errors().enumerate() {
        let part = e.to_string();
        if i > 0 {
            if text.ends_with(&part) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    bounded(text)
}

/// Turns a failed network step into a verdict: refused credentials, a missing repository, or
/// (for everything else) an unavailable server, which is retried.
fn classify(
    error: &gix::Error,
    source: &SourceUrl,
    stopped: Option<Stopped>,
    options: &GitOptions,
) -> GitError {
    let source_url = source.to_string();
    let message = chain(error);
    if stopped == Some(Stopped::Deadline) {
        return GitError::SourceUnavailable {
            source_url,
            message: format!("no answer within {:?}: {message}", options.deadline),
        };
    }
    let http_status = |code: u16| {
        error.iter_errors().any(|e| {
            e.downcast_ref::<gix::protocol::transport::client::Error>()
                .is_some_and(|t| t.to_string().contains(&code.to_string()))
        }) || message.contains(&format!("status {code}"))
            || message.contains(&format!("{code} "))
    };
    let authentication = error.iter_errors().any(|e| {
        e.downcast_ref::<gix::protocol::transport::client::AuthenticationRequired>()
            .is_some()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
    });
    if error.classify().is_unauthenticated()
        || error.classify().is_permission_denied()
        || authentication
        || http_status(401)
        || http_status(403)
    {
        return GitError::Unauthorized {
            source_url,
            message,
        };
    }
    if http_status(404)
        || message.contains("repository not exported")
        || message.contains("does not appear to be a git repository")
    {
        return GitError::RepositoryNotFound {
            source_url,
            message,
        };
    }
    GitError::SourceUnavailable {
        source_url,
        message,
    }
}
