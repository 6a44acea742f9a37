//! The credential proxy as the sandbox runs it (the operator's binary, `credential-proxy`, as
//! a process of its own) streams a reply as it arrives: a scripted endpoint sends a
//! server-sent event, then holds the last one until the client says it has the first (or a
//! minute has passed, so that a buffering proxy fails the test instead of hanging it). The
//! client must see the first event while the endpoint has not sent the last: a proxy that
//! buffered the reply would only hand it over once the endpoint had.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentic_integration_tests::operator_binary;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, oneshot};

/// How long the endpoint holds its last event for the client's word: only a buffering proxy
/// makes it wait that long.
const HOLD: Duration = Duration::from_secs(60);
const KEY: &str = "sk-stream-test-key";

/// Reads a request head (and no body: the test's request has none) from `stream`.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = stream.read(&mut byte).await.expect("the request");
        assert_eq!(read, 1, "the connection closed in the request head");
        head.push(byte[0]);
    }
    String::from_utf8(head).expect("an ASCII head")
}

/// One chunk of a chunked body.
fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

#[tokio::test]
async fn a_streamed_reply_reaches_the_client_event_by_event() {
    let endpoint = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream: SocketAddr = endpoint.local_addr().expect("address");
    let (got_first, first_seen) = oneshot::channel::<()>();
    let last_sent = Arc::new(AtomicBool::new(false));
    let head_seen = Arc::new(Mutex::new(String::new()));
    let server = tokio::spawn({
        let (last_sent, head_seen) = (last_sent.clone(), head_seen.clone());
        async move {
            let (mut stream, _) = endpoint.accept().await.expect("the proxy connects");
            *head_seen.lock().await = read_head(&mut stream).await;
            let first = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}",
                chunk("data: first\n\n")
            );
            stream.write_all(first.as_bytes()).await.expect("write");
            stream.flush().await.expect("flush");
            // The client's word, or the hold's end for a proxy that never delivers it.
            let _ = tokio::time::timeout(HOLD, first_seen).await;
            last_sent.store(true, Ordering::SeqCst);
            let last = format!("{}0\r\n\r\n", chunk("data: last\n\n"));
            stream.write_all(last.as_bytes()).await.expect("write");
            stream.flush().await.expect("flush");
        }
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("api-key");
    std::fs::write(&key_file, KEY).expect("the key file");
    let (_proxy, listen) = agentic_fixtures::start_credential_proxy(
        operator_binary(),
        &format!("http://{upstream}/v1"),
        &key_file,
    )
    .await
    .expect("the proxy listens");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let mut response = client
        .get(format!("http://{listen}/v1/chat/completions"))
        .bearer_auth("placeholder")
        .send()
        .await
        .expect("the proxy answers");
    assert_eq!(response.status(), 200);
    let mut received = Vec::new();
    while !String::from_utf8_lossy(&received).contains("data: first") {
        let next = response.chunk().await.expect("the stream");
        received.extend_from_slice(&next.expect("the first event before the end"));
    }
    assert!(
        !last_sent.load(Ordering::SeqCst),
        "the first event reached the client only after the endpoint had sent the last"
    );
    got_first.send(()).expect("the endpoint waits");
    while let Some(next) = response.chunk().await.expect("the stream") {
        received.extend_from_slice(&next);
    }
    assert_eq!(
        String::from_utf8_lossy(&received),
        "data: first\n\ndata: last\n\n"
    );
    server.await.expect("the endpoint finished");
    let head = head_seen.lock().await.to_ascii_lowercase();
    assert!(
        head.contains(&format!(
            "authorization: bearer {}",
            KEY.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(!head.contains("placeholder"), "{head}");
}
