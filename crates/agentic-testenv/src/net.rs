//! Loopback ports and a plain-HTTP probe for readiness checks.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use crate::error::{Error, Result};

/// How many times a child whose free port was taken before it bound it is started again on
/// another.
pub(crate) const BIND_ATTEMPTS: u32 = 3;

/// Whether `error` is a child that exited because its port was taken between
/// [`free_port`] and its bind (an outgoing connection can get it as its ephemeral port).
pub(crate) fn port_taken(error: &Error) -> bool {
    matches!(error, Error::ExitedEarly { log_tail, .. } if log_tail.contains("address already in use"))
}

/// A port on 127.0.0.1 that was free a moment ago. The kernel doesn't hand the same
/// ephemeral port out again right away, so it stays free until the child that gets it binds
/// it; a clash shows up as that child exiting during startup.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::NoFreePort)?;
    let port = listener.local_addr().map_err(Error::NoFreePort)?.port();
    Ok(port)
}

/// The HTTP status code of `GET path` on a plain-HTTP server, or `None` when it doesn't
/// answer (yet) within a second.
pub(crate) async fn http_get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    get(addr, path, Duration::from_secs(1))
        .await
        .ok()
        .map(|(code, _)| code)
}

/// `GET path` of a plain-HTTP server on loopback (the operator's probes and metrics): the
/// status code and the body, or why there is none within 30 s.
pub async fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    get(addr, path, Duration::from_secs(30))
        .await
        .map_err(std::io::Error::other)
}

async fn get(addr: SocketAddr, path: &str, timeout: Duration) -> reqwest::Result<(u16, String)> {
    // reqwest is built without a crypto provider of its own; the process's is ring. A
    // client per request: its pool belongs to the runtime that first used it, and each test
    // has a runtime of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()?;
    let response = client.get(format!("http://{addr}{path}")).send().await?;
    let code = response.status().as_u16();
    Ok((code, response.text().await?))
}
