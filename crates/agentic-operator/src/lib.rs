//! The agentic-operator controllers and command line.
//!
//! `main` only parses the command line; everything else lives here so that integration tests
//! run the same controllers in-process against a real API server.

pub mod api_client;
pub mod apply;
pub mod backoff;
pub mod caches;
pub mod cli;
pub mod context;
pub mod controllers;
pub mod credential_proxy;
pub mod error;
pub mod metrics;
pub mod operator;
pub mod otlp;
pub mod recorder;
pub mod server;
pub mod shards;
pub mod traces;
pub mod written;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The current time at the precision the API server stores, so a condition written now
/// compares equal to the same condition read back.
pub fn now() -> Time {
    let secs = Timestamp::now().as_second();
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}
