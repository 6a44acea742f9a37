use std::sync::Mutex;

use axum::body::Bytes;
use futures::StreamExt as _;

use super::*;

fn listen() -> SocketAddr {
    "127.0.0.1:4100".parse().expect("an address")
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a name"),
            HeaderValue::from_str(value).expect("a value"),
        );
    }
    map
}

#[test]
fn connect_other_hosts_and_foreign_host_headers_are_refused() {
    let get = Method::GET;
    let own = headers(&[("host", "127.0.0.1:4100")]);
    let uri = |text: &str| text.parse::<Uri>().expect("a URI");
    assert_eq!(
        check_target(&get, &uri("/v1/models"), &own, listen()),
        Ok(())
    );
    for host in ["localhost:4100", "[::1]:4100"] {
        let ok = headers(&[("host", host)]);
        assert_eq!(
            check_target(&get, &uri("/v1/models"), &ok, listen()),
            Ok(()),
            "{host}"
        );
    }
    assert_eq!(
        check_target(&Method::CONNECT, &uri("api.openai.com:443"), &own, listen()),
        Err(Refusal::Connect)
    );
    let other = headers(&[("host", "example.com")]);
    assert_eq!(
        check_target(&get, &uri("http://example.com/"), &other, listen()),
        Err(Refusal::OtherHost)
    );
    // Origin form with another Host, or loopback at another port, is not the proxy either.
    for host in [
        "example.com",
        "example.com:4100",
        "127.0.0.1:80",
        "127.0.0.2.example:4100",
    ] {
        let foreign = headers(&[("host", host)]);
        assert_eq!(
            check_target(&get, &uri("/v1/models"), &foreign, listen()),
            Err(Refusal::OtherHost),
            "{host}"
        );
    }
    // Absolute form naming the proxy itself is the proxy.
    assert_eq!(
        check_target(
            &get,
            &uri("http://127.0.0.1:4100/v1/models"),
            &own,
            listen()
        ),
        Ok(())
    );
}

#[test]
fn only_paths_inside_the_endpoint_are_forwarded() {
    let upstream = Upstream::parse("https://llm.example.com/v1/").expect("valid");
    assert_eq!(
        upstream.url_for("/v1/chat/completions?stream=true"),
        Ok("https://llm.example.com/v1/chat/completions?stream=true".to_string())
    );
    assert_eq!(
        upstream.url_for("/v1"),
        Ok("https://llm.example.com/v1".to_string())
    );
    for path in [
        "/v10/models",
        "/admin",
        "/v1/../admin",
        "/v1/%2E%2E/admin",
        "/v1/./models",
        "*",
    ] {
        assert_eq!(
            upstream.url_for(path),
            Err(Refusal::OutsideEndpoint),
            "{path}"
        );
    }
    let root = Upstream::parse("HTTP://10.0.0.5:8080").expect("valid");
    assert_eq!(
        root.url_for("/v1/messages"),
        Ok("http://10.0.0.5:8080/v1/messages".to_string())
    );
    for bad in ["ftp://x", "https://user:pw@x", "https://x/?q=1", "https://"] {
        assert!(Upstream::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_agents_credentials_and_connection_headers_are_replaced_by_the_key() {
    let inbound = headers(&[
        ("host", "127.0.0.1:4100"),
        ("authorization", "Bearer placeholder"),
        ("x-api-key", "placeholder"),
        ("api-key", "placeholder"),
        ("proxy-authorization", "Basic abc"),
        ("connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("content-length", "12"),
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
    ]);
    let bearer = upstream_headers(&inbound, AuthStyle::Bearer, "sk-real").expect("valid key");
    let mut names: Vec<&str> = bearer.keys().map(HeaderName::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["accept", "authorization", "content-type"]);
    assert_eq!(bearer["authorization"], "Bearer sk-real");
    assert!(bearer["authorization"].is_sensitive());
    assert!(!format!("{bearer:?}").contains("sk-real"));

    let anthropic = upstream_headers(&inbound, AuthStyle::Anthropic, "sk-ant").expect("valid");
    assert_eq!(anthropic["x-api-key"], "sk-ant");
    assert_eq!(anthropic["anthropic-version"], ANTHROPIC_VERSION);
    assert!(anthropic.get("authorization").is_none());
    // The agent's own anthropic-version stands.
    let versioned = headers(&[("anthropic-version", "2024-01-01")]);
    let kept = upstream_headers(&versioned, AuthStyle::Anthropic, "sk-ant").expect("valid");
    assert_eq!(kept["anthropic-version"], "2024-01-01");

    for key in ["", "sk-real\n", "a\u{7f}b"] {
        assert_eq!(
            upstream_headers(&inbound, AuthStyle::Bearer, key),
            Err(KeyError::NotAHeaderValue),
            "{key:?}"
        );
    }
}

/// What the scripted endpoint saw: each request's path and `authorization` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// An endpoint on loopback that records each request and answers `/stream` with the chunks
/// sent into `chunks`, as they are sent; anything else with `ok`.
async fn endpoint(chunks: futures::channel::mpsc::UnboundedReceiver<Bytes>) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let chunks = Arc::new(Mutex::new(Some(chunks)));
    let recorded = seen.clone();
    let router = axum::Router::new().fallback(move |request: Request| {
        let (recorded, chunks) = (recorded.clone(), chunks.clone());
        async move {
            let auth = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            recorded
                .lock()
                .expect("lock")
                .push((request.uri().path().to_string(), auth));
            if request.uri().path() == "/stream" {
                let chunks = chunks.lock().expect("lock").take().expect("one stream");
                Body::from_stream(chunks.map(Ok::<_, std::convert::Infallible>)).into_response()
            } else {
                "ok".into_response()
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, seen)
}

/// A proxy on loopback in front of `upstream`, with its key in `key_file`.
async fn proxy(upstream: SocketAddr, key_file: &Path, max_request_bytes: usize) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let listen = listener.local_addr().expect("address");
    let config = ProxyConfig {
        listen,
        upstream: format!("http://{upstream}"),
        auth: AuthStyle::Bearer,
        key_file: key_file.to_path_buf(),
        max_request_bytes,
    };
    tokio::spawn(serve_on(listener, config, std::future::pending()));
    listen
}

/// Writes `key` as the kubelet updates a Secret volume: a new file renamed over the old.
fn rotate(key_file: &Path, key: &str) {
    let staged = key_file.with_extension("new");
    std::fs::write(&staged, key).expect("write");
    std::fs::rename(&staged, key_file).expect("rename");
}

fn client() -> reqwest::Client {
    builder().no_proxy().build().expect("client")
}

fn builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

#[tokio::test]
async fn the_key_is_read_at_every_request_so_a_rotated_secret_is_used_at_once() {
    let (_chunks, receiver) = futures::channel::mpsc::unbounded();
    let (upstream, seen) = endpoint(receiver).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("api-key");
    rotate(&key_file, "sk-first");
    let listen = proxy(upstream, &key_file, DEFAULT_MAX_REQUEST_BYTES).await;
    let client = client();
    let send = || {
        client
            .post(format!("http://{listen}/v1/chat/completions"))
            .bearer_auth("placeholder")
            .body("{}")
            .send()
    };
    assert_eq!(send().await.expect("answer").status(), 200);
    rotate(&key_file, "sk-second");
    assert_eq!(send().await.expect("answer").status(), 200);
    // A key the kubelet could not have written (a newline) is not sent.
    rotate(&key_file, "sk-third\n");
    assert_eq!(send().await.expect("answer").status(), 502);
    assert_eq!(
        *seen.lock().expect("lock"),
        [
            (
                "/v1/chat/completions".to_string(),
                Some("Bearer sk-first".to_string())
            ),
            (
                "/v1/chat/completions".to_string(),
                Some("Bearer sk-second".to_string())
            ),
        ]
    );
}

#[tokio::test]
async fn an_answer_streams_through_chunk_by_chunk() {
    let (chunks, receiver) = futures::channel::mpsc::unbounded();
    let (upstream, _) = endpoint(receiver).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("api-key");
    rotate(&key_file, "sk-key");
    let listen = proxy(upstream, &key_file, DEFAULT_MAX_REQUEST_BYTES).await;
    chunks
        .unbounded_send(Bytes::from_static(b"data: first\n\n"))
        .expect("send");
    // The second chunk is sent only once the first has come through the proxy: a proxy that
    // waited for the whole body would never deliver the answer, and the bound runs out.
    let (mut answer, first) = tokio::time::timeout(Duration::from_secs(60), async {
        let mut answer = client()
            .get(format!("http://{listen}/stream"))
            .send()
            .await
            .expect("answer");
        let first = answer.chunk().await.expect("a chunk");
        (answer, first)
    })
    .await
    .expect("the first chunk arrives before the last is sent");
    assert_eq!(first.as_deref(), Some(&b"data: first\n\n"[..]));
    chunks
        .unbounded_send(Bytes::from_static(b"data: last\n\n"))
        .expect("send");
    drop(chunks);
    let mut rest = Vec::new();
    while let Some(chunk) = answer.chunk().await.expect("a chunk") {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(rest, b"data: last\n\n");
}

#[tokio::test]
async fn other_hosts_connect_and_large_bodies_never_reach_the_endpoint() {
    let (_chunks, receiver) = futures::channel::mpsc::unbounded();
    let (upstream, seen) = endpoint(receiver).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("api-key");
    rotate(&key_file, "sk-key");
    let listen = proxy(upstream, &key_file, 1024).await;
    // Used as a forward proxy for another host.
    let via_proxy = builder()
        .proxy(reqwest::Proxy::http(format!("http://{listen}")).expect("proxy"))
        .build()
        .expect("client");
    let answer = via_proxy
        .get(format!("http://{upstream}/v1/models"))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 403);
    // CONNECT, as a client tunnelling https through it sends.
    let mut stream = tokio::net::TcpStream::connect(listen)
        .await
        .expect("connect");
    {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        stream
            .write_all(b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n")
            .await
            .expect("write");
        let mut head = [0; 12];
        stream.read_exact(&mut head).await.expect("read");
        assert_eq!(&head, b"HTTP/1.1 405");
    }
    let client = client();
    let large = client
        .post(format!("http://{listen}/v1/chat/completions"))
        .body(vec![b'x'; 2048])
        .send()
        .await
        .expect("answer");
    assert_eq!(large.status(), 413);
    let fits = client
        .post(format!("http://{listen}/v1/chat/completions"))
        .body(vec![b'x'; 1024])
        .send()
        .await
        .expect("answer");
    assert_eq!(fits.status(), 200);
    assert_eq!(
        seen.lock().expect("lock").len(),
        1,
        "only the request that fits"
    );
}

#[tokio::test]
async fn the_proxy_refuses_to_listen_beyond_loopback() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let config = ProxyConfig {
        listen: "0.0.0.0:4100".parse().expect("address"),
        upstream: "http://127.0.0.1:1".into(),
        auth: AuthStyle::Bearer,
        key_file: "/nonexistent".into(),
        max_request_bytes: 1,
    };
    let error = serve_on(listener, config, std::future::ready(()))
        .await
        .expect_err("refused");
    assert!(error.contains("not a loopback address"), "{error}");
}
