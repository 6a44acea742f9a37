//! The Gateway controller's real pass against the fake API server and an endpoint on
//! 127.0.0.1.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentic_api::Gateway;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::reconcile;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready, status_after_pass};

fn gateway(endpoint: &str) -> Gateway {
    object(json!({
        "metadata": {"name": "llm"},
        "spec": {
            "provider": "openai",
            "endpoint": endpoint,
            "credentialRef": {"secretName": "llm-key", "key": "apiKey"},
            "model": {"name": "m", "contextWindow": 128_000},
        },
    }))
}

/// An endpoint on 127.0.0.1 that answers every request with 200 and a model list, and
/// counts the requests.
async fn models_endpoint() -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let served = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&served);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            counter.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"object":"list","data":[]}"#;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
        }
    });
    (format!("http://{address}"), served)
}

#[tokio::test]
async fn a_gateway_whose_secret_is_missing_is_not_ready_and_says_which() {
    let api = FakeApi::default();
    api.put(&gateway("http://127.0.0.1:9"));
    let status = status_after_pass::<Gateway, _>(&api, &context(&api), "llm", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SecretNotFound".into())
    );
}

#[tokio::test]
async fn a_checked_gateway_is_ready_and_not_checked_again_until_its_recheck() {
    let api = FakeApi::default();
    let (endpoint, served) = models_endpoint().await;
    api.put(&gateway(&endpoint));
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "llm-key", "namespace": NS},
        "stringData": {}, "data": {"apiKey": "c2stdGVzdA=="},
    }))
    .expect("a Secret");
    api.put(&secret);
    let ctx = context(&api);
    let status = status_after_pass::<Gateway, _>(&api, &ctx, "llm", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "ConnectionVerified".into())
    );
    assert!(status.connection_verified);
    assert_eq!(served.load(Ordering::SeqCst), 1);
    // The check is remembered in the kind's state: the next pass neither asks the
    // endpoint nor writes.
    api.clear_requests();
    pass::<Gateway, _>(&api, &ctx, "llm", reconcile)
        .await
        .expect("a pass");
    assert_eq!(served.load(Ordering::SeqCst), 1);
    assert!(api.writes().is_empty(), "{:?}", api.writes());
}

fn key_secret(data: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "llm-key", "namespace": NS},
        "data": data,
    }))
    .expect("a Secret")
}

#[tokio::test]
async fn a_secret_without_the_key_is_refused_without_asking_the_endpoint() {
    let api = FakeApi::default();
    let (endpoint, served) = models_endpoint().await;
    api.put(&gateway(&endpoint));
    api.put(&key_secret(json!({"other": "c2stdGVzdA=="})));
    let status = status_after_pass::<Gateway, _>(&api, &context(&api), "llm", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SecretKeyNotFound".into())
    );
    assert!(!status.connection_verified);
    assert_eq!(served.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_changed_secret_is_checked_again_at_once() {
    let api = FakeApi::default();
    let (endpoint, served) = models_endpoint().await;
    api.put(&gateway(&endpoint));
    api.put(&key_secret(json!({"apiKey": "c2stdGVzdA=="})));
    let ctx = context(&api);
    status_after_pass::<Gateway, _>(&api, &ctx, "llm", reconcile).await;
    assert_eq!(served.load(Ordering::SeqCst), 1);
    // A new version of the Secret is another subject: the remembered check no longer holds.
    api.put(&key_secret(json!({"apiKey": "c2stcm90YXRlZA=="})));
    let status = status_after_pass::<Gateway, _>(&api, &ctx, "llm", reconcile).await;
    assert_eq!(served.load(Ordering::SeqCst), 2);
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "ConnectionVerified".into())
    );
}

#[test]
fn a_changed_secret_brings_back_the_gateways_of_its_namespace_that_use_it() {
    let using = gateway("http://llm.test");
    let mut other_key = gateway("http://llm.test");
    other_key.metadata.name = Some("other".into());
    if let Some(credential) = other_key.spec.credential_ref.as_mut() {
        credential.secret_name = "other-key".into();
    }
    let mut elsewhere = gateway("http://llm.test");
    elsewhere.metadata.namespace = Some("elsewhere".into());
    let picked = super::gateways_using_secret([&using, &other_key, &elsewhere], NS, "llm-key");
    assert_eq!(
        picked,
        [kube::runtime::reflector::ObjectRef::new("llm").within(NS)]
    );
}
