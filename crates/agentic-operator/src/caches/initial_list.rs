//! How each watch gets the objects that exist when it starts: streamed over the watch
//! itself where the API server offers it, in pages otherwise.
//!
//! A paginated list holds a page of 500 objects in memory at a time and costs the API
//! server a list request per page, and at a restart over 100,000 runs that is 200 pages of
//! AgentRuns alone (#37). A streaming list (`sendInitialEvents`, the API server's
//! `WatchList` feature, on by default since Kubernetes 1.34) sends the same objects one by
//! one as watch events from the API server's watch cache, ending with a bookmark. An API
//! server without it refuses the request (422), and kube's watcher would then retry it
//! forever: so the operator asks once at start, and watches in pages when the answer is not
//! a clean yes.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Client, Resource};

use agentic_api::AgentRun;

/// The annotation on the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
/// A label no object carries, so the probe's stream ends at once with its bookmark.
const PROBE_SELECTOR: &str = "agentic-operator.io/initial-list-probe";
/// How long the probe waits for that bookmark; the API server sends it at once.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a watch gets the objects that exist when it starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Streamed over the watch (`sendInitialEvents`).
    Streaming,
    /// Listed in pages of 500, then watched.
    #[default]
    Paginated,
}

impl InitialList {
    /// The watcher configuration every watch starts from.
    pub fn config(self) -> watcher::Config {
        match self {
            Self::Streaming => watcher::Config::default().streaming_lists(),
            Self::Paginated => watcher::Config::default(),
        }
    }

    /// Asks the API server, through a watch of the AgentRuns the operator may watch (of
    /// `namespace`, or of every namespace), whether it streams initial lists: yes only when
    /// it accepts the request and ends the (empty) initial events with their bookmark.
    /// Anything else, a refusal, an error or silence, means pages, which every API server
    /// serves.
    pub async fn probe(client: &Client, namespace: Option<&str>) -> Self {
        let api: Api<AgentRun> = match namespace {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        };
        match tokio::time::timeout(PROBE_TIMEOUT, streams_initial_events(&api)).await {
            Ok(Ok(true)) => Self::Streaming,
            Ok(Ok(false)) => {
                tracing::info!(
                    "the API server ended the watch without the initial events' bookmark: lists in pages"
                );
                Self::Paginated
            }
            Ok(Err(e)) => {
                tracing::info!(error = %crate::error::Chain(&e), "the API server does not stream initial lists (WatchList): lists in pages");
                Self::Paginated
            }
            Err(_) => {
                tracing::info!(
                    timeout = ?PROBE_TIMEOUT,
                    "no end of the initial events from the API server: lists in pages"
                );
                Self::Paginated
            }
        }
    }
}

/// Whether a streaming watch of `api` is accepted and ends its initial events.
async fn streams_initial_events<K>(api: &Api<K>) -> Result<bool, kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + 'static,
{
    let params = WatchParams {
        label_selector: Some(PROBE_SELECTOR.to_string()),
        bookmarks: true,
        send_initial_events: true,
        timeout: Some(PROBE_TIMEOUT.as_secs().try_into().unwrap_or(u32::MAX)),
        ..WatchParams::default()
    };
    let mut events = api.watch(&params, "0").await?.boxed();
    while let Some(event) = events.try_next().await? {
        match event {
            WatchEvent::Bookmark(bookmark)
                if bookmark
                    .metadata
                    .annotations
                    .contains_key(INITIAL_EVENTS_END) =>
            {
                return Ok(true);
            }
            WatchEvent::Error(status) => return Err(kube::Error::Api(status)),
            _ => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::super::answering;
    use super::*;

    #[tokio::test]
    async fn an_api_server_that_refuses_streaming_is_listed_in_pages() {
        // What kube-apiserver answers with the WatchList feature gate off.
        let refused = answering(
            422,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,
                "message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"}"#,
        );
        assert_eq!(
            InitialList::probe(&refused, Some("ns")).await,
            InitialList::Paginated
        );
    }

    #[tokio::test]
    async fn a_watch_that_ends_without_the_bookmark_is_listed_in_pages() {
        let ended = answering(200, "");
        assert_eq!(
            InitialList::probe(&ended, None).await,
            InitialList::Paginated
        );
    }

    #[tokio::test]
    async fn the_initial_events_bookmark_means_streaming() {
        let streams = answering(
            200,
            r#"{"type":"BOOKMARK","object":{"kind":"AgentRun","apiVersion":"konveyor.io/v1alpha1","metadata":{"resourceVersion":"42","annotations":{"k8s.io/initial-events-end":"true"}}}}
"#,
        );
        assert_eq!(
            InitialList::probe(&streams, None).await,
            InitialList::Streaming
        );
    }
}
