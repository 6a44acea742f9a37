//! Checks of the whole workspace that read its sources and docs and need nothing else, so
//! they run in plain `cargo test`: one binary of modules, in the crate at the top of the
//! dependency graph.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod architecture;
mod module_graph;
mod sources;
