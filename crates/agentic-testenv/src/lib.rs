//! A real Kubernetes control plane and OCI registry on loopback, for tests and local runs.
//!
//! [`TestEnv`] runs etcd and kube-apiserver, installs the `konveyor.io` CRDs and the
//! agent-sandbox CRDs, and can run the agent-sandbox controller and a [`Registry`] next to
//! them, a node, and kube-controller-manager with pods reaching the API server and the
//! registry ([`TestEnvOptions::with_workloads`]: a cluster a chart runs on). The binaries come from `hack/testenv-tools.sh` (`make testenv`),
//! found through the `AGENTIC_TESTENV_BIN` environment variable.
//!
//! # No orphans
//!
//! Every process is started in a process group of its own and stopped (SIGTERM, then SIGKILL)
//! when its owner is dropped, which also happens when a test panics. For the cases where
//! nothing is dropped — the static [`TestEnv::shared`] when the test binary exits, or a
//! process killed with SIGKILL — each environment has a watchdog: a small `sh` process that
//! holds the read end of a pipe whose only write end lives in the owning process. The kernel
//! closes that pipe however the owner ends, and on end-of-file the watchdog SIGKILLs the
//! children's process groups and removes the temporary directory.

mod env;
mod error;
mod git;
mod images;
mod jaeger;
mod net;
mod node;
mod pki;
mod registry;
pub mod signing;
mod supervisor;

use std::future::Future;
use std::time::{Duration, Instant};

pub use env::{BIN_DIR_ENV, TestEnv, TestEnvOptions};
pub use error::{Error, Result};
pub use git::{CommitSigning, DEFAULT_GIT_BIN, GIT_BIN_ENV, GitFile, GitServer};
pub use images::{BUSYBOX_ENV, DEFAULT_BUSYBOX, TestImages, push_goose_image, push_operator_image};
pub use jaeger::{JAEGER_BIN_ENV, Jaeger};
pub use net::http_get;
pub use node::NODE_NAME;
pub use registry::{DEFAULT_REGISTRY_BIN, REGISTRY_BIN_ENV, Registry};

use supervisor::Supervisor;

/// Polls `probe` until it returns true, failing early with the child's log if the child
/// called `name` exits, and with [`Error::NotReady`] after `timeout`.
async fn wait_for<F, Fut>(
    supervisor: &mut Supervisor,
    name: &'static str,
    what: String,
    timeout: Duration,
    mut probe: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        supervisor.check_running(name)?;
        if probe().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::NotReady {
                what,
                timeout,
                log: supervisor.log_path(name),
                log_tail: supervisor.log_tail(name),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
