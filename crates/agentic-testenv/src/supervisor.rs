//! Child processes that never outlive their owner, and a work directory that goes with them.
//!
//! Dropping a [`Supervisor`] stops its children and removes its directory. That alone is not
//! enough: a test binary exits without dropping statics, and a process killed with SIGKILL
//! drops nothing. So every supervisor also starts a watchdog, a small `sh` script in a
//! process group of its own that reads the pids of the children from a pipe. Only this
//! process holds the pipe's write end, so the kernel closes it however this process ends;
//! the watchdog then reads end-of-file, SIGKILLs every child's process group and removes the
//! directory. Children run in process groups of their own too, so a Ctrl-C aimed at the test
//! run doesn't kill them before the watchdog can account for them.

use std::fs::File;
use std::io::{PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// How long children get to exit on SIGTERM before they are SIGKILLed. Short: their state
/// is thrown away, and kube-apiserver would take seconds to drain gracefully.
const STOP_GRACE: Duration = Duration::from_millis(500);
/// How long the watchdog may take to finish after its pipe closed.
const WATCHDOG_EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a child's log quoted in startup errors.
const LOG_TAIL_BYTES: u64 = 4096;

/// Reads `add PID` / `del PID` lines until end-of-file, then kills the process group of every
/// pid still listed, waits briefly for them to go, runs the cleanup script (`$2`, may be
/// empty) and removes the work directory (`$1`).
/// Written for dash: its `kill` takes no `--`, and a negative pid names a process group.
const WATCHDOG_SCRIPT: &str = r#"
dir=$1
cleanup=$2
groups=
while read -r verb pid; do
  case $verb in
    add) groups="$groups $pid" ;;
    del) kept=; for g in $groups; do [ "$g" = "$pid" ] || kept="$kept $g"; done; groups=$kept ;;
  esac
done
for g in $groups; do kill -9 "-$g" 2>/dev/null; done
tries=0
while [ $tries -lt 50 ]; do
  alive=
  for g in $groups; do kill -0 "-$g" 2>/dev/null && alive=1; done
  [ -z "$alive" ] && break
  sleep 0.1
  tries=$((tries + 1))
done
[ -n "$cleanup" ] && /bin/sh -c "$cleanup"
rm -rf -- "$dir"
"#;

/// A process started by a [`Supervisor`], with what it was started as, to start it again.
struct Managed {
    name: &'static str,
    child: Child,
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
}

/// Owns a temporary work directory and the processes started in it; see the module docs.
pub(crate) struct Supervisor {
    dir: PathBuf,
    watchdog: Child,
    /// Closing this tells the watchdog to clean up; `None` once it has been closed.
    watchdog_pipe: Option<PipeWriter>,
    children: Vec<Managed>,
    /// A shell script that undoes what the children did outside the directory.
    cleanup: String,
}

impl Supervisor {
    /// Creates a fresh directory under the system temp dir and starts its watchdog.
    pub(crate) fn new(prefix: &str) -> Result<Self> {
        Self::with_cleanup(prefix, String::new())
    }

    /// Like [`Supervisor::new`], with a shell script that runs once every child is gone
    /// (before the directory is removed), both on drop and from the watchdog.
    pub(crate) fn with_cleanup(prefix: &str, cleanup: String) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(Error::io(
                "creating a temporary directory in",
                std::env::temp_dir(),
            ))?
            .keep();
        let (reader, writer) = std::io::pipe().map_err(Error::io("creating a pipe for", &dir))?;
        let watchdog = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("agentic-testenv-watchdog")
            .arg(&dir)
            .arg(&cleanup)
            // Anywhere but a directory someone may want to remove.
            .current_dir("/")
            .stdin(reader)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let watchdog = match watchdog {
            Ok(child) => child,
            Err(source) => {
                // Best effort: nothing has been started in it yet.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(Error::Spawn {
                    name: "watchdog",
                    program: "/bin/sh".into(),
                    source,
                });
            }
        };
        Ok(Supervisor {
            dir,
            watchdog,
            watchdog_pipe: Some(writer),
            children: Vec::new(),
            cleanup,
        })
    }

    /// The work directory; it is removed when the supervisor is dropped.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log file of the child called `name`.
    pub(crate) fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Pids of the running children and of the watchdog.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children
            .iter()
            .map(|managed| managed.child.id())
            .chain([self.watchdog.id()])
            .collect()
    }

    /// Starts `command` in its own process group, in the work directory, with stdout and
    /// stderr going to `<dir>/<name>.log`, and tells the watchdog about it.
    pub(crate) fn spawn(&mut self, name: &'static str, mut command: Command) -> Result<u32> {
        let log_path = self.log_path(name);
        // Appended to: a restarted child keeps the log of its earlier life.
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(Error::io("creating log file", &log_path))?;
        let log_for_stderr = log
            .try_clone()
            .map_err(Error::io("duplicating the handle of", &log_path))?;
        command
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_for_stderr)
            .process_group(0);
        let child = command.spawn().map_err(|source| Error::Spawn {
            name,
            program: command.get_program().into(),
            source,
        })?;
        let pid = child.id();
        self.children.push(Managed {
            name,
            child,
            program: command.get_program().to_owned(),
            args: command.get_args().map(ToOwned::to_owned).collect(),
        });
        self.tell_watchdog("add", pid);
        tracing::debug!(name, pid, log = %log_path.display(), "started");
        Ok(pid)
    }

    /// Stops the child called `name` as [`Drop`] would (SIGTERM, then SIGKILL after the grace
    /// period) and returns how to start it again: the same program and arguments.
    pub(crate) fn stop(&mut self, name: &'static str) -> Option<Command> {
        let index = self.children.iter().position(|m| m.name == name)?;
        let mut managed = self.children.remove(index);
        signal_group(managed.child.id(), Signal::SIGTERM);
        reap_group(&mut managed, Instant::now() + STOP_GRACE);
        self.tell_watchdog("del", managed.child.id());
        let mut command = Command::new(&managed.program);
        command.args(&managed.args);
        Some(command)
    }

    /// Fails with the child's log tail if the child called `name` has exited.
    pub(crate) fn check_running(&mut self, name: &'static str) -> Result<()> {
        let Some(managed) = self.children.iter_mut().find(|m| m.name == name) else {
            return Ok(());
        };
        match managed.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::ExitedEarly {
                name,
                status: status.to_string(),
                log: self.log_path(name),
                log_tail: self.log_tail(name),
            }),
            Err(source) => Err(Error::io("checking the status of", self.log_path(name))(
                source,
            )),
        }
    }

    /// The last few kilobytes of the log of the child called `name`.
    pub(crate) fn log_tail(&self, name: &str) -> String {
        log_tail(&self.log_path(name))
    }

    fn tell_watchdog(&mut self, verb: &str, pid: u32) {
        if let Some(pipe) = self.watchdog_pipe.as_mut() {
            // A watchdog that is gone can't be helped; `Drop` still cleans up directly.
            let _ = writeln!(pipe, "{verb} {pid}");
        }
    }

    /// Stops every child: SIGTERM to each process group, then SIGKILL to whatever is left
    /// after a short grace period. Children are reaped, so none is left as a zombie.
    fn stop_children(&mut self) {
        for managed in &self.children {
            signal_group(managed.child.id(), Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        let mut children = std::mem::take(&mut self.children);
        for managed in &mut children {
            reap_group(managed, deadline);
            self.tell_watchdog("del", managed.child.id());
        }
    }
}

/// Waits for a signalled child until `deadline`, SIGKILLs what is left of its process group
/// and reaps the child, so none is left as a zombie.
fn reap_group(managed: &mut Managed, deadline: Instant) {
    let status = wait_until(&mut managed.child, deadline).or_else(|| {
        signal_group(managed.child.id(), Signal::SIGKILL);
        managed.child.wait().ok()
    });
    let pid = managed.child.id();
    // The group may still hold processes the child forked; they go too.
    signal_group(pid, Signal::SIGKILL);
    tracing::debug!(
        name = managed.name,
        pid,
        status = status.map(|s| s.to_string()).unwrap_or_default(),
        "stopped"
    );
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop_children();
        if !self.cleanup.is_empty() {
            match Command::new("/bin/sh")
                .arg("-c")
                .arg(&self.cleanup)
                .status()
            {
                Ok(status) if status.success() => {}
                outcome => tracing::warn!(?outcome, dir = %self.dir.display(), "cleanup script"),
            }
        }
        if let Err(error) = std::fs::remove_dir_all(&self.dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), %error, "removing the work directory");
        }
        // End-of-file for the watchdog: with nothing left to kill, it only exits.
        self.watchdog_pipe = None;
        if wait_until(&mut self.watchdog, Instant::now() + WATCHDOG_EXIT_TIMEOUT).is_none() {
            let _ = self.watchdog.kill();
            let _ = self.watchdog.wait();
        }
    }
}

/// Sends `signal` to the process group led by `pid`; a group that is already gone is fine.
fn signal_group(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// Polls `child` until it exits or `deadline` passes.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// The last [`LOG_TAIL_BYTES`] of a log file, or a note saying why there are none.
pub(crate) fn log_tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return "(no log)".to_owned();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}
