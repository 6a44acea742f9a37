//! The integration tests that run pods, as one test binary of modules (tests/Cargo.toml says
//! why there are three). They share one control plane with a real node
//! ([`agentic_integration_tests::node_env`]), which every test asks for first; the node needs
//! root, and a machine runs one at a time (`flock /tmp/agentic-node.lock` when several people
//! share it).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod collections;
mod credential_proxy_node;
mod goose_node;
mod lifecycle;
mod node;
mod parity_node;
mod prefetch_node;
mod runtime_container_node;
mod sharding_node;
mod skill_usage_node;
mod trust_revocation;
mod workflows;
