//! A throw-away OCI registry (CNCF distribution, Debian's `docker-registry`) on loopback.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::net::{BIND_ATTEMPTS, free_port, http_get_status, port_taken};
use crate::supervisor::Supervisor;
use crate::wait_for;

/// Environment variable naming the registry binary; defaults to [`DEFAULT_REGISTRY_BIN`].
pub const REGISTRY_BIN_ENV: &str = "AGENTIC_REGISTRY_BIN";
/// Where Debian's `docker-registry` package puts the binary (`make registry` installs it).
pub const DEFAULT_REGISTRY_BIN: &str = "/usr/bin/docker-registry";

const NAME: &str = "registry";
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// An OCI registry serving plain HTTP on `127.0.0.1`, without authentication unless started
/// with [`Registry::start_with_htpasswd`], with blob and
/// manifest deletion enabled, and storage in a temporary directory.
///
/// The process is stopped and its storage removed when the value is dropped, and also when
/// the test process dies without dropping it (see the crate docs).
pub struct Registry {
    addr: SocketAddr,
    supervisor: Supervisor,
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until `GET /v2/` answers 200.
    pub async fn start() -> Result<Registry> {
        Self::start_with(None).await
    }

    /// Starts a registry that requires HTTP Basic credentials. `htpasswd` is the content of
    /// an htpasswd file: `user:bcrypt-hash` lines, the only hash distribution accepts.
    pub async fn start_with_htpasswd(htpasswd: &str) -> Result<Registry> {
        Self::start_with(Some(htpasswd)).await
    }

    async fn start_with(htpasswd: Option<&str>) -> Result<Registry> {
        let binary = registry_binary()?;
        let mut supervisor = Supervisor::new("agentic-registry-")?;
        let config_path = supervisor.dir().join("registry.yml");
        let storage = supervisor.dir().join("registry-storage");
        let htpasswd_path = match htpasswd {
            Some(content) => {
                let path = supervisor.dir().join("htpasswd");
                std::fs::write(&path, content).map_err(Error::io("writing", &path))?;
                Some(path)
            }
            None => None,
        };
        let mut attempt = 1;
        loop {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            std::fs::write(
                &config_path,
                config(addr, &storage, htpasswd_path.as_deref()),
            )
            .map_err(Error::io("writing", &config_path))?;

            let mut command = Command::new(&binary);
            command.arg("serve").arg(&config_path);
            // Keep the registry from picking up settings meant for another one.
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("REGISTRY_") {
                    command.env_remove(key);
                }
            }
            supervisor.spawn(NAME, command)?;
            let ready = wait_for(
                &mut supervisor,
                NAME,
                format!("the registry at http://{addr}/v2/"),
                READY_TIMEOUT,
                // With authentication on, an anonymous `/v2/` is refused with 401: it answers.
                || async { matches!(http_get_status(addr, "/v2/").await, Some(200 | 401)) },
            )
            .await;
            match ready {
                Ok(()) => {
                    tracing::info!(%addr, "registry ready");
                    return Ok(Registry { addr, supervisor });
                }
                // The free port was taken between our check and the registry's bind (an
                // outgoing connection can get it as its ephemeral port): take another.
                Err(error) if attempt < BIND_ATTEMPTS && port_taken(&error) => {
                    tracing::debug!(%addr, attempt, "the registry's port was taken; retrying");
                    supervisor.stop(NAME);
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// `127.0.0.1:PORT`, the host part of image references pushed to this registry.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The registry's socket address.
    pub fn socket_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Pids of the processes this registry started (the registry and its watchdog).
    pub fn pids(&self) -> Vec<u32> {
        self.supervisor.pids()
    }

    /// The temporary directory holding the configuration, storage and log.
    pub fn work_dir(&self) -> &Path {
        self.supervisor.dir()
    }

    /// Stops the registry, keeps it down for `downtime`, and starts it again on the same
    /// address with the same storage: a registry outage, for fault tests.
    pub async fn restart(&mut self, downtime: Duration) -> Result<()> {
        let command = self
            .supervisor
            .stop(NAME)
            .ok_or_else(|| Error::UnexpectedResponse("the registry is not running".to_owned()))?;
        tokio::time::sleep(downtime).await;
        self.supervisor.spawn(NAME, command)?;
        let addr = self.addr;
        wait_for(
            &mut self.supervisor,
            NAME,
            format!("the registry at http://{addr}/v2/"),
            READY_TIMEOUT,
            || async { matches!(http_get_status(addr, "/v2/").await, Some(200 | 401)) },
        )
        .await
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("addr", &self.addr)
            .field("work_dir", &self.supervisor.dir())
            .finish()
    }
}

fn registry_binary() -> Result<PathBuf> {
    let path = std::env::var_os(REGISTRY_BIN_ENV)
        .map_or_else(|| PathBuf::from(DEFAULT_REGISTRY_BIN), PathBuf::from);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::BinaryMissing {
            name: "docker-registry",
            path,
            hint: "run `make registry` (hack/install-registry.sh) or set AGENTIC_REGISTRY_BIN",
        })
    }
}

/// The registry configuration (distribution 2.x format). JSON is valid YAML, and serde_json
/// quotes the paths correctly.
fn config(addr: SocketAddr, storage: &Path, htpasswd: Option<&Path>) -> String {
    let mut config = serde_json::json!({
        "version": "0.1",
        "log": { "level": "warn", "accesslog": { "disabled": true } },
        "storage": {
            "filesystem": { "rootdirectory": storage },
            "delete": { "enabled": true },
            // Upload purging runs a background sweep that tests don't need.
            "maintenance": { "uploadpurging": { "enabled": false } },
        },
        "http": { "addr": addr.to_string() },
    });
    if let Some(path) = htpasswd {
        config["auth"] = serde_json::json!({ "htpasswd": { "realm": "skills", "path": path } });
    }
    config.to_string()
}
