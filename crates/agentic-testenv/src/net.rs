//! Loopback ports, a plain-HTTP probe for readiness checks, and a TCP forwarder onto the
//! node's bridge.

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

/// Relays every TCP connection accepted on `listen` to `target`: what makes a server bound to
/// loopback reachable from pods on the node's bridge, and from nowhere else. It runs on a
/// thread of its own, because the environment outlives the runtime of any one test, and stops
/// accepting when dropped.
pub(crate) struct Forwarder {
    listen: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Forwarder {
    /// Binds `listen` (so a failure shows here) and starts relaying to `target`.
    pub(crate) fn start(listen: SocketAddr, target: SocketAddr) -> Result<Forwarder> {
        let address = || std::path::PathBuf::from(listen.to_string());
        let listener =
            TcpListener::bind(listen).map_err(Error::io("binding the forwarder on", address()))?;
        listener
            .set_nonblocking(true)
            .map_err(Error::io("configuring the forwarder on", address()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::io(
                "starting the runtime of the forwarder on",
                address(),
            ))?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("forward-{}", listen.port()))
            .spawn(move || runtime.block_on(relay(listener, target, stopped)))
            .map_err(Error::io(
                "starting the thread of the forwarder on",
                address(),
            ))?;
        Ok(Forwarder {
            listen,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where it accepts connections.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.listen
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // The relay returns at once: it only waits for connections or the shutdown. Open
        // connections end with the thread's runtime.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn relay(
    listener: TcpListener,
    target: SocketAddr,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%target, %error, "the forwarder cannot accept connections");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((mut inbound, _)) = accepted else {
                    // Out of file descriptors, say: let connections close before retrying.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                tokio::spawn(async move {
                    // A refused or reset connection is the client's to see, as it would be
                    // without the forwarder.
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }
    }
}
