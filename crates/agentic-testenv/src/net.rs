//! Loopback ports and a minimal plain-HTTP probe for readiness checks.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        // The status line is all we need: "HTTP/1.1 200 OK".
        let mut head = [0u8; 64];
        let mut filled = 0;
        while filled < 12 {
            let read = stream.read(&mut head[filled..]).await.ok()?;
            if read == 0 {
                break;
            }
            filled += read;
        }
        let status_line = std::str::from_utf8(&head[..filled]).ok()?;
        status_line.split(' ').nth(1)?.get(..3)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(1), exchange)
        .await
        .ok()
        .flatten()
}
