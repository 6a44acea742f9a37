//! The operator's client for the API server (`agentic_operator::api_client`), against the real
//! API server through a loopback proxy that counts connections: requests multiplexed over one
//! HTTP/2 connection, each watch on an HTTP/1.1 connection of its own.

use agentic_integration_tests::env;
use agentic_integration_tests::loopback_proxy::LoopbackProxy;
use agentic_operator::api_client;
use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::client::Body;
use kube::{Api, Client};
use serde_json::json;

/// Requests in flight at once: far more than one HTTP/1.1 connection could carry.
const CONCURRENT: usize = 64;
/// Watches held open while those requests go.
const WATCHES: usize = 3;

async fn get(client: &Client, uri: &str) -> http::Response<Body> {
    let request = http::Request::get(uri)
        .body(Body::empty())
        .expect("a request");
    client.send(request).await.expect("the API server answers")
}

#[tokio::test]
async fn requests_share_one_http2_connection_and_each_watch_has_its_own() {
    let env = env().await;
    let ns = env.namespace("api-client").await.expect("namespace");
    let proxy = LoopbackProxy::start(env.apiserver_addr()).await;
    let client = api_client::connect(env.kube_config_via(proxy.addr)).expect("a client");

    let list = format!("/api/v1/namespaces/{ns}/configmaps");
    let response = get(&client, &list).await;
    assert!(response.status().is_success(), "{:?}", response.status());
    assert_eq!(response.version(), http::Version::HTTP_2, "a request");
    assert_eq!(proxy.accepted(), 1);

    // Watches, held open (their bodies kept) while the requests below go.
    let mut watches = Vec::new();
    for _ in 0..WATCHES {
        let watch = get(&client, &format!("{list}?watch=true&timeoutSeconds=60")).await;
        assert!(watch.status().is_success(), "{:?}", watch.status());
        assert_eq!(watch.version(), http::Version::HTTP_11, "a watch");
        watches.push(watch);
    }
    assert_eq!(proxy.accepted(), 1 + WATCHES);

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let creates = (0..CONCURRENT).map(|i| {
        let configmaps = configmaps.clone();
        async move {
            let configmap: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("c{i}")},
                "data": {"i": i.to_string()},
            }))
            .expect("a ConfigMap");
            configmaps.create(&PostParams::default(), &configmap).await
        }
    });
    for created in join_all(creates).await {
        created.expect("every create of the burst succeeds");
    }
    assert_eq!(
        proxy.accepted(),
        1 + WATCHES,
        "{CONCURRENT} requests at once over the one HTTP/2 connection, beside the watches'"
    );
    let listed = configmaps.list(&ListParams::default()).await.expect("list");
    let ours = listed
        .items
        .iter()
        .filter(|configmap| {
            configmap
                .metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with('c'))
        })
        .count();
    assert_eq!(ours, CONCURRENT);
    drop(watches);
}
