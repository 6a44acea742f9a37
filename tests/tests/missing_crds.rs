//! An operator started where one of its CRDs is not installed says which, in `/readyz` and
//! in its log, instead of only "watches have not listed yet", and becomes ready once the CRD
//! is applied. This test deletes a CRD, so it runs on a control plane of its own, never on
//! one other tests share.

use std::time::Duration;

use agentic_integration_tests::{http_get, run_options, stop_cleanly};
use agentic_operator::operator::{self};
use agentic_testenv::{TestEnv, TestEnvOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use tokio::sync::watch;

const GATEWAYS: &str = "gateways.konveyor.io";

/// The Gateway CRD exactly as the repository ships it.
fn gateway_crd() -> CustomResourceDefinition {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/crd/bases/konveyor.io.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the generated CRDs");
    serde_saphyr::from_multiple::<CustomResourceDefinition>(&text)
        .expect("CRD YAML")
        .into_iter()
        .find(|crd| crd.metadata.name.as_deref() == Some(GATEWAYS))
        .expect("the Gateway CRD is generated")
}

async fn until_readyz(addr: std::net::SocketAddr, want: impl Fn(u16, &str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = http_get(addr, "/readyz").await;
        if let Ok((code, body)) = &answer
            && want(*code, body)
        {
            return body.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz did not change as expected; last answer {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn readyz_names_a_missing_crd_until_it_is_installed() {
    let env = TestEnv::start(TestEnvOptions {
        with_agent_sandbox: false,
        with_registry: false,
        with_node: false,
        with_workloads: false,
        bin_dir: None,
    })
    .await
    .expect("a control plane of this test's own");
    let client = env.client();
    let ns = env.namespace("missing-crds").await.expect("a namespace");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(GATEWAYS, &DeleteParams::default())
        .await
        .expect("delete the Gateway CRD");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while crds.get_opt(GATEWAYS).await.expect("get CRD").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRD is not gone"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(client.clone(), run_options(&ns), shutdown)
        .await
        .expect("the operator starts without the CRD");

    let body = until_readyz(started.health_addr, |code, body| {
        code == 503 && body.contains("CRDs not installed")
    })
    .await;
    assert_eq!(body, format!("CRDs not installed: {GATEWAYS}"));

    crds.patch(
        GATEWAYS,
        &PatchParams::apply("missing-crds-test"),
        &Patch::Apply(&gateway_crd()),
    )
    .await
    .expect("apply the Gateway CRD again");
    // Checked every 10 seconds; the watch of the new CRD then lists within its backoff.
    let body = until_readyz(started.health_addr, |code, _| code == 200).await;
    assert_eq!(body, "ok");

    stop_cleanly(stop, started).await;
}
