//! The chart and the kustomize configuration installed as users install them, each on a
//! cluster for workloads of its own, one at a time
//! ([`agentic_integration_tests::workloads_cluster`]); a binary of its own because a machine
//! runs one test node at a time, and the binary `with_node` keeps its node up until it exits.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod getting_started;
mod helm_lifecycle;
