//! Gateway verification against a real HTTP server on loopback ([`llm_server`]), which
//! checks the headers each provider needs: the operator sends the key the right way, tells
//! the failures apart, checks again when the Secret changes, skips cloud-signed providers, and
//! never shows the key in status or events.

use agentic_api::Gateway;
use agentic_fixtures::{gateway, key_secret};
use agentic_integration_tests::{
    LLM_KEY, apply, condition, has_condition, llm_server, scenario, wait_for,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

/// Waits until the Gateway `name` is `Ready` with `status` and `reason` at its generation.
async fn wait_ready(gateways: &Api<Gateway>, name: &str, status: &str, reason: &str) -> Gateway {
    wait_for(gateways, name, reason, |g: &Gateway| {
        g.status.as_ref().is_some_and(|s| {
            has_condition(&s.conditions, "Ready", status, reason)
                && condition(&s.conditions, "Ready")
                    .is_some_and(|c| c.observed_generation == g.metadata.generation)
        })
    })
    .await
}

fn verified(gateway: &Gateway) -> bool {
    gateway.status.as_ref().expect("status").connection_verified
}

#[tokio::test]
async fn keys_are_sent_the_way_each_provider_wants_them() {
    let (ns, client, operator) = scenario("gw-headers", SandboxBackend::Pod).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let server = llm_server();
    apply(&secrets, &key_secret("key", LLM_KEY)).await;

    let cases = [
        ("bearer", "openai", "/openai", "ConnectionVerified"),
        ("claude", "anthropic", "/anthropic", "ConnectionVerified"),
        // Each server refuses the other provider's headers: the provider field decides.
        (
            "bearer-at-anthropic",
            "openai",
            "/anthropic",
            "Unauthorized",
        ),
        ("claude-at-openai", "anthropic", "/openai", "Unauthorized"),
    ];
    for (name, provider, path, _) in cases {
        let endpoint = format!("{server}{path}");
        apply(&gateways, &gateway(name, provider, &endpoint, Some("key"))).await;
    }
    for (name, _, path, reason) in cases {
        let ok = reason == "ConnectionVerified";
        let gw = wait_ready(&gateways, name, if ok { "True" } else { "False" }, reason).await;
        assert_eq!(verified(&gw), ok, "{name}");
        let status = gw.status.expect("status");
        let reachable = condition(&status.conditions, "EndpointReachable").expect("reachable");
        assert_eq!(reachable.reason, reason, "{name}");
        let url = format!("{server}{path}/v1/models");
        assert!(reachable.message.contains(&url), "{}", reachable.message);
    }
    operator.stop().await;
}

#[tokio::test]
async fn a_rotated_secret_is_checked_again_and_the_key_never_shows() {
    let (ns, client, operator) = scenario("gw-rotate", SandboxBackend::Pod).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let endpoint = format!("{}/openai", llm_server());
    let wrong = "sk-wrong-4711";

    apply(&secrets, &key_secret("key", LLM_KEY)).await;
    apply(&gateways, &gateway("llm", "openai", &endpoint, Some("key"))).await;
    let first = wait_ready(&gateways, "llm", "True", "ConnectionVerified").await;
    assert!(verified(&first));

    // Changing the Secret alone is a new credential: checked at once, refused, not Ready.
    apply(&secrets, &key_secret("key", wrong)).await;
    let refused = wait_ready(&gateways, "llm", "False", "Unauthorized").await;
    assert!(!verified(&refused));
    let message = &condition(
        &refused.status.as_ref().expect("status").conditions,
        "Ready",
    )
    .expect("Ready")
    .message;
    assert!(message.contains("401"), "{message}");

    apply(&secrets, &key_secret("key", LLM_KEY)).await;
    let back = wait_ready(&gateways, "llm", "True", "ConnectionVerified").await;
    assert!(verified(&back));

    // The server echoed the refused key in its answer; neither key reaches status or events.
    let status = serde_json::to_string(&back.status).expect("status JSON");
    for key in [LLM_KEY, wrong] {
        assert!(
            !status.contains(key),
            "the key {key} is in the status: {status}"
        );
    }
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let list = events.list(&ListParams::default()).await.expect("events");
    let about_gateway: Vec<&Event> = list
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Gateway"))
        .collect();
    assert!(
        about_gateway
            .iter()
            .any(|e| e.reason.as_deref() == Some("Unauthorized")),
        "a Warning event tells of the refusal: {about_gateway:?}"
    );
    for event in about_gateway {
        let text = serde_json::to_string(event).expect("event JSON");
        for key in [LLM_KEY, wrong] {
            assert!(!text.contains(key), "the key {key} is in an event: {text}");
        }
    }
    operator.stop().await;
}

#[tokio::test]
async fn failures_are_told_apart_and_cloud_signed_providers_are_skipped() {
    let (ns, client, operator) = scenario("gw-fail", SandboxBackend::Pod).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let server = llm_server();
    apply(&secrets, &key_secret("key", LLM_KEY)).await;

    // A port nothing listens on: bound, then let go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    let down = format!("http://{closed}");
    let tls = server.replacen("http://", "https://", 1);
    let cases = [
        (
            "down",
            "openai",
            down.clone(),
            "False",
            "EndpointUnreachable",
        ),
        (
            "plain-http",
            "openai",
            format!("{tls}/openai"),
            "False",
            "TLSFailure",
        ),
        (
            "broken",
            "openai",
            format!("{server}/status/503"),
            "False",
            "UnexpectedStatus",
        ),
        (
            "moved-here",
            "openai",
            format!("{server}/same"),
            "True",
            "ConnectionVerified",
        ),
        (
            "moved-away",
            "openai",
            format!("{server}/elsewhere"),
            "False",
            "UnexpectedStatus",
        ),
        (
            "query",
            "openai",
            format!("{server}/openai?x="),
            "False",
            "InvalidEndpoint",
        ),
        (
            "vertex",
            "gcp-vertex-ai",
            down.clone(),
            "True",
            "VerificationSkipped",
        ),
        (
            "bedrock",
            "aws_bedrock",
            down.clone(),
            "True",
            "VerificationSkipped",
        ),
    ];
    for (name, provider, endpoint, _, _) in &cases {
        apply(&gateways, &gateway(name, provider, endpoint, Some("key"))).await;
    }
    for (name, _, _, status, reason) in &cases {
        let gw = wait_ready(&gateways, name, status, reason).await;
        assert_eq!(verified(&gw), *reason == "ConnectionVerified", "{name}");
    }
    let broken = gateways.get("broken").await.expect("broken");
    let status = broken.status.expect("status");
    let message = &condition(&status.conditions, "Ready")
        .expect("Ready")
        .message;
    assert!(message.contains("503"), "{message}");
    operator.stop().await;
}
