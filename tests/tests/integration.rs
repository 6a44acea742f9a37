//! The integration tests that need no node, as one test binary of modules (tests/Cargo.toml
//! says why there are three). They share one control plane without a node
//! ([`agentic_integration_tests::env`]), each test in namespaces of its own; the few that
//! cannot share it (they stop the API server, delete or rewrite a CRD) start their own.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agents;
mod api_client;
mod cel;
mod chart;
mod chart_readme;
mod cli;
mod credential_isolation;
mod credential_proxy_stream;
mod faults;
mod gateways;
mod git_skills;
mod helm_install;
mod hub;
mod konveyor_parity;
mod kustomize;
mod missing_crds;
mod operations;
mod otlp;
mod prefetch;
mod rbac;
mod reasons;
mod runs;
mod samples;
mod scripts;
mod sharding;
mod skill_sign;
mod skillcards;
mod sweep;
mod takeover;
mod tenancy;
mod testenv_tools;
mod traces;
mod trust;
mod trust_git;
mod trust_registry;

use std::collections::BTreeMap;

use agentic_integration_tests::support::repo_root;

/// The test binaries' root files, which tests/Cargo.toml names.
const ROOTS: [&str; 3] = ["integration.rs", "with_node.rs", "workloads.rs"];

/// With `autotests = false`, a file added to tests/tests and declared in no root would never
/// be compiled: every file must be a module of exactly one binary.
#[test]
fn every_test_file_is_a_module_of_one_binary() {
    let dir = repo_root().join("tests/tests");
    let manifest = std::fs::read_to_string(repo_root().join("tests/Cargo.toml"))
        .expect("reading tests/Cargo.toml");
    let mut declared: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for root in ROOTS {
        assert!(
            manifest.contains(&format!("path = \"tests/{root}\"")),
            "tests/Cargo.toml names {root} as a test binary"
        );
        let text = std::fs::read_to_string(dir.join(root)).expect("reading a root file");
        for line in text.lines() {
            if let Some(module) = line.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                declared
                    .entry(format!("{module}.rs"))
                    .or_default()
                    .push(root);
            }
        }
    }
    let files: Vec<String> = agentic_integration_tests::files_below(&dir)
        .into_iter()
        .map(|file| file.display().to_string())
        .filter(|file| !ROOTS.contains(&file.as_str()))
        .collect();
    for file in &files {
        match declared.get(file).map(Vec::as_slice) {
            Some([_]) => {}
            Some(roots) => panic!("tests/tests/{file} is a module of several binaries: {roots:?}"),
            None => panic!(
                "tests/tests/{file} is a module of no test binary: declare it in one of {ROOTS:?}"
            ),
        }
    }
    let missing: Vec<&String> = declared.keys().filter(|m| !files.contains(m)).collect();
    assert!(missing.is_empty(), "declared but missing: {missing:?}");
}
