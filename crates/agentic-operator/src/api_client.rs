//! The operator's client for the API server: kube's layers (base URI, authentication, extra
//! headers, retries of 429, 503 and 504, a span per request) over two connection pools.
//!
//! - **Requests** (gets, lists, applies, creates, deletes) share one HTTP/2 connection,
//!   multiplexed. kube's own client speaks HTTP/1.1 only, so every request in flight had a TLS
//!   connection of its own: 85 of them while 1,000 runs start, each with its buffers.
//! - **Watches** keep an HTTP/1.1 connection each, as before. A watch holds its request open
//!   for good: on HTTP/2 each would hold a stream, and past the API server's streams per
//!   connection (`--http2-max-streams-per-connection`), which an operator watching many
//!   namespaces reaches, every new request would wait for a stream that never frees.
//!
//! Why the stack is assembled here rather than taken from kube: ADR 0014.

use std::time::Duration;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ConfigExt};
use kube::{Client, Config};
use tower::retry::RetryLayer;
use tower::steer::Steer;
use tower::{BoxError, ServiceBuilder};
use tower_http::trace::TraceLayer;

/// How often the HTTP/2 connection is pinged, busy or idle, so that a connection the network
/// dropped is found and replaced within this plus [`PING_TIMEOUT`], not at the kernel's TCP
/// timeout with every request waiting on it.
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is closed.
const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Which pool a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// The shared HTTP/2 connection.
    Requests,
    /// An HTTP/1.1 connection of its own.
    Watches,
}

impl Pool {
    /// The pool for a request: watches (`watch=true`, streaming lists included) to their own
    /// connections, everything else to the shared one.
    pub fn of(uri: &http::Uri) -> Self {
        let watch = uri.query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| pair == "watch=true" || pair == "watch=1")
        });
        if watch { Pool::Watches } else { Pool::Requests }
    }

    fn index(self) -> usize {
        match self {
            Pool::Requests => 0,
            Pool::Watches => 1,
        }
    }
}

/// A client for `config`: requests over HTTP/2, watches over HTTP/1.1 (see the module's
/// documentation). A configuration with a proxy gets kube's own client, which refuses it as
/// the operator is built without kube's proxy features.
pub fn connect(config: Config) -> kube::Result<Client> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let requests = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_INTERVAL)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector(&config, true)?);
    let watches = HyperClient::builder(TokioExecutor::new()).build(connector(&config, false)?);
    let pools = Steer::new(
        [requests, watches],
        |request: &http::Request<Body>, _: &[_]| Pool::of(request.uri()).index(),
    );
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(TraceLayer::new_for_http())
        .map_err(BoxError::from)
        .service(pools);
    Ok(Client::new(service, config.default_namespace))
}

/// kube's TLS configuration (its roots, client identity and reloading of an in-cluster CA
/// file) under `config`'s timeouts, offering HTTP/2 by ALPN when `http2`.
fn connector(
    config: &Config,
    http2: bool,
) -> kube::Result<TimeoutConnector<hyper_rustls::HttpsConnector<HttpConnector>>> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = name.clone().try_into().map_err(|error| {
            kube::Error::Service(format!("tls-server-name {name:?}: {error}").into())
        })?;
        builder =
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = if http2 {
        builder.enable_all_versions().wrap_connector(http)
    } else {
        builder.enable_http1().wrap_connector(http)
    };
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    Ok(connector)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(uri: &str) -> Pool {
        Pool::of(&uri.parse().unwrap())
    }

    #[test]
    fn watches_and_streaming_lists_get_a_connection_of_their_own() {
        assert_eq!(
            pool(
                "/apis/konveyor.io/v1alpha1/agentruns?watch=true&resourceVersion=12&timeoutSeconds=290"
            ),
            Pool::Watches
        );
        assert_eq!(
            pool(
                "/api/v1/pods?labelSelector=a%3Db&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&watch=true"
            ),
            Pool::Watches
        );
        assert_eq!(pool("/api/v1/namespaces/a/pods?watch=1"), Pool::Watches);
    }

    #[test]
    fn everything_else_shares_the_http2_connection() {
        assert_eq!(
            pool("/apis/konveyor.io/v1alpha1/agentruns?limit=500"),
            Pool::Requests
        );
        assert_eq!(pool("/api/v1/namespaces/a/secrets/b"), Pool::Requests);
        assert_eq!(pool("/api/v1/pods?watch=false"), Pool::Requests);
        // A label selector naming "watch" is not a watch.
        assert_eq!(
            pool("/api/v1/pods?labelSelector=watch%3Dtrue"),
            Pool::Requests
        );
    }
}
