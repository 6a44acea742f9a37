//! How long a test control plane takes to start: etcd, kube-apiserver with every CRD
//! established, the agent-sandbox controller and a registry. The README's startup figure
//! comes from here: `cargo bench -p agentic-testenv --bench startup`.
//!
//! Under `cargo test` (no `--bench` argument) it starts once, as a smoke test.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use agentic_testenv::{TestEnv, TestEnvOptions};

fn main() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let rounds = if benchmarking { 7 } else { 1 };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            runtime.block_on(async {
                let started = Instant::now();
                let env = TestEnv::start(TestEnvOptions {
                    with_agent_sandbox: true,
                    with_registry: true,
                    with_node: false,
                    with_workloads: false,
                    bin_dir: None,
                })
                .await
                .expect("start a test environment (AGENTIC_TESTENV_BIN set?)");
                let took = started.elapsed();
                drop(env);
                took
            })
        })
        .collect();
    samples.sort();
    let median = samples[samples.len() / 2];
    println!(
        "testenv startup over {rounds} run(s): min {:.2?}, median {median:.2?}, max {:.2?}",
        samples[0],
        samples[samples.len() - 1]
    );
}
