//! Server-side sharded watches (KEP-5866, alpha in Kubernetes 1.36 behind the API server's
//! `ShardedListAndWatch` feature gate), asked for with `--shard-watch=server`.
//!
//! A replica that watches every namespace asks the API server, through a `shardSelector`
//! on each list and watch of a namespaced kind, for its shards' objects only, rather than
//! receiving and decoding every object of the cluster to drop most of them. kube's list and
//! watch parameters have no such field yet, so the selector is added to the requests of a
//! client made for those watches alone. The replica's own filter stays on behind it: the
//! shards are the API server's hash ranges ([`ShardHash::Fnv1a`]), so it drops nothing the
//! API server sent, and it is what keeps the replica to its shards when the API server
//! ignores or refuses the selector.
//!
//! [`ShardHash::Fnv1a`]: agentic_core::shard::ShardHash::Fnv1a

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};

/// How long the probe waits for the API server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A label no object carries, so the probe's list is empty.
const PROBE_LABEL: &str = "agentic-operator.io/shard-probe";

/// A client whose every request asks for the objects `selector` selects: for the list and
/// watch requests of namespaced kinds across every namespace, and nothing else.
pub fn selecting(client: &Client, selector: &str) -> Client {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", selector)
        .finish();
    let inner = client.clone();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        if let Some(uri) = with_query(request.uri(), &query) {
            *request.uri_mut() = uri;
        }
        async move { inner.send(request).await }
    });
    Client::new(service, client.default_namespace())
}

/// `uri` with `pair` added to its query.
fn with_query(uri: &http::Uri, pair: &str) -> Option<http::Uri> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{}?{query}&{pair}", uri.path()),
        None => format!("{}?{pair}", uri.path()),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

/// Whether the API server filters by `selector`: a list of pods through [`selecting`] must
/// come back with the selector echoed in its `shardInfo`. Pods rather than AgentRuns: in
/// Kubernetes 1.36 the API server filters custom resources by the selector too but does not
/// echo it on their lists. An API server without the feature refuses the parameter or
/// ignores it; either way the answer is no, and the replica filters for itself.
pub async fn applied(client: &Client, selector: &str) -> bool {
    let api: Api<Pod> = Api::all(selecting(client, selector));
    // A label no pod carries: the answer is an empty list with its metadata.
    let probe = ListParams::default().labels(PROBE_LABEL).limit(1);
    match tokio::time::timeout(PROBE_TIMEOUT, api.list(&probe)).await {
        Ok(Ok(list)) => list
            .metadata
            .shard_info
            .is_some_and(|info| info.selector == selector),
        Ok(Err(error)) => {
            tracing::warn!(error = %crate::error::Chain(&error), "the API server refused the shard selector (is its ShardedListAndWatch feature gate on?); this replica filters its shards itself");
            false
        }
        Err(_) => {
            tracing::warn!(timeout = ?PROBE_TIMEOUT, "no answer from the API server to a sharded list; this replica filters its shards itself");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_joins_the_query_encoded() {
        let pair = form_urlencoded::Serializer::new(String::new())
            .append_pair(
                "shardSelector",
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
            )
            .finish();
        let watch: http::Uri = "https://10.0.0.1:6443/apis/konveyor.io/v1alpha1/agentruns?watch=true&sendInitialEvents=true"
            .parse()
            .expect("a URI");
        let sharded = with_query(&watch, &pair).expect("a URI");
        assert_eq!(
            sharded.to_string(),
            "https://10.0.0.1:6443/apis/konveyor.io/v1alpha1/agentruns?watch=true&sendInitialEvents=true\
             &shardSelector=shardRange%28object.metadata.namespace%2C+%270x0000000000000000%27%2C+%270x8000000000000000%27%29"
        );
        let list: http::Uri = "/api/v1/pods".parse().expect("a URI");
        assert_eq!(
            with_query(&list, "a=b").expect("a URI").to_string(),
            "/api/v1/pods?a=b"
        );
    }
}
