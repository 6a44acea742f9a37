//! `agentic-bench --proxy`: what the credential proxy adds to a model request, and what it
//! costs a sandbox in memory. No cluster: the operator's binary runs `credential-proxy` as
//! the sidecar does, a process of its own on loopback, in front of a scripted endpoint in
//! this process (it answers every request with the same small JSON, as fast as it can). The
//! bench sends `--proxy` requests (2000 unless given) one at a time, alternating direct to the endpoint and
//! through the proxy, each a POST with a chat-sized body over a kept-alive connection, and
//! prints p50 and p99 of each and of their difference, and the proxy's resident memory
//! (`VmRSS` when idle after start, after the load, and its peak `VmHWM`).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};

use crate::{percentile, status_mb};

/// A request body of about the size of an agent's chat turn without history (system prompt,
/// tools, one message).
const BODY_BYTES: usize = 16 * 1024;
/// The endpoint's answer: a short completion.
const ANSWER: &str = r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#;
/// Unmeasured requests each way first: connections made, allocators warm.
const WARMUP: usize = 50;

/// `requests` requests each way through the proxy of the `operator` binary.
pub async fn bench(operator: &Path, requests: usize) -> anyhow::Result<()> {
    if requests == 0 {
        bail!("--proxy must be positive");
    }
    let operator = std::fs::canonicalize(operator).with_context(|| {
        format!(
            "the operator binary {} (build it: cargo build --release -p agentic-operator)",
            operator.display()
        )
    })?;
    let endpoint = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream = endpoint.local_addr()?;
    let app = axum::Router::new()
        .fallback(|| async { ([(http::header::CONTENT_TYPE, "application/json")], ANSWER) });
    tokio::spawn(async move { axum::serve(endpoint, app).await });

    let dir = tempfile::tempdir()?;
    let key_file = dir.path().join("api-key");
    std::fs::write(&key_file, "sk-bench-key")?;
    let (proxy, listen) = agentic_fixtures::start_credential_proxy(
        &operator,
        &format!("http://{upstream}/v1"),
        &key_file,
    )
    .await?;
    let pid = proxy.id().context("the proxy's pid")?;
    let idle_rss = status_mb(pid, "VmRSS")?;

    // reqwest is built without a TLS provider of its own; plain http needs none, the
    // builder still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build()?;
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(BODY_BYTES)
    );
    let direct_url = format!("http://{upstream}/v1/chat/completions");
    let proxied_url = format!("http://{listen}/v1/chat/completions");
    let request = |url: &str| {
        let (client, body, url) = (client.clone(), body.clone(), url.to_string());
        async move {
            let started = Instant::now();
            let response = client
                .post(url)
                .bearer_auth("placeholder")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await?;
            if !response.status().is_success() {
                bail!("status {}", response.status());
            }
            response.bytes().await?;
            anyhow::Ok(started.elapsed().as_secs_f64() * 1000.0)
        }
    };
    for _ in 0..WARMUP {
        request(&direct_url).await?;
        request(&proxied_url).await?;
    }
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..requests {
        direct.push(request(&direct_url).await?);
        proxied.push(request(&proxied_url).await?);
    }
    let added: Vec<f64> = proxied.iter().zip(&direct).map(|(p, d)| p - d).collect();
    let loaded_rss = status_mb(pid, "VmRSS")?;
    let peak_rss = status_mb(pid, "VmHWM")?;

    println!(
        "credential proxy: {} requests each way, alternating, one at a time, {} KiB bodies",
        requests,
        BODY_BYTES / 1024
    );
    for (label, mut values) in [
        ("direct", direct),
        ("via proxy", proxied),
        ("added (pairwise)", added),
    ] {
        values.sort_by(f64::total_cmp);
        println!(
            "  {label:<17} p50 / p99  {:.3} / {:.3} ms",
            percentile(&values, 0.5),
            percentile(&values, 0.99)
        );
    }
    println!(
        "  proxy RSS  idle {idle_rss:.1} MB, after the load {loaded_rss:.1} MB, peak {peak_rss:.1} MB"
    );
    Ok(())
}
