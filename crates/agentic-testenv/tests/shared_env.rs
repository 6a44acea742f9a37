//! The shared control plane: version, CRDs, registry and the agent-sandbox controller.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use agentic_testenv::TestEnv;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

const SANDBOX_CRD: &str = "sandboxes.agents.x-k8s.io";

async fn env() -> &'static TestEnv {
    TestEnv::shared()
        .await
        .expect("start the shared test environment")
}

#[tokio::test]
async fn apiserver_reports_kubernetes_1_36() {
    let info = env()
        .await
        .client()
        .apiserver_version()
        .await
        .expect("GET /version");
    assert_eq!(info.major, "1");
    assert_eq!(info.minor, "36");
    assert!(
        info.git_version.starts_with("v1.36."),
        "gitVersion {:?} is not a v1.36.x release",
        info.git_version
    );
    assert_eq!(info.git_tree_state, "clean");
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

#[tokio::test]
async fn our_crds_and_the_sandbox_crd_are_established() {
    let api = Api::<CustomResourceDefinition>::all(env().await.client());
    let mut expected: Vec<String> = agentic_api::crds()
        .into_iter()
        .chain(agentic_api::trust_crds())
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert!(!expected.is_empty(), "agentic_api::crds() returned no CRDs");
    expected.push(SANDBOX_CRD.to_owned());
    for name in expected {
        let crd = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("get CRD {name}: {e}"));
        assert!(
            is_established(&crd),
            "{name} is not Established: {:?}",
            crd.status
        );
    }
    let sandbox = api.get(SANDBOX_CRD).await.expect("get the Sandbox CRD");
    assert!(
        sandbox
            .spec
            .versions
            .iter()
            .any(|v| v.name == "v1beta1" && v.served),
        "Sandbox CRD serves no v1beta1"
    );
}

#[tokio::test]
async fn shared_registry_answers_v2() {
    let addr = env()
        .await
        .registry_addr()
        .expect("the shared env runs a registry");
    let response = common::http_request(&addr, "GET", "/v2/").await;
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "GET /v2/ answered:\n{response}"
    );
}

#[tokio::test]
async fn namespaces_are_fresh_and_prefixes_are_checked() {
    let env = env().await;
    let first = env.namespace("testenv-ns").await.expect("first namespace");
    let second = env.namespace("testenv-ns").await.expect("second namespace");
    assert!(first.starts_with("testenv-ns-"), "{first}");
    assert_ne!(first, second);
    let error = env
        .namespace("Not_A_Label")
        .await
        .expect_err("bad prefix is refused");
    assert_eq!(error.reason(), "InvalidNamespacePrefix");
}

#[tokio::test]
async fn pods_are_admitted_without_a_default_service_account() {
    // No controller-manager creates `default` ServiceAccounts; the ServiceAccount admission
    // plugin is off so Pods are still accepted, and stored as sent.
    let env = env().await;
    let ns = env.namespace("testenv-pod").await.expect("namespace");
    let client = env.client();
    let no_accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .list(&kube::api::ListParams::default())
        .await
        .expect("list service accounts");
    assert!(
        no_accounts.items.is_empty(),
        "unexpected ServiceAccounts in {ns}"
    );
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "probe" },
        "spec": { "containers": [{ "name": "c", "image": "registry.example/probe:1" }] },
    }))
    .expect("pod literal");
    let created = Api::<Pod>::namespaced(client, &ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create a pod");
    let volumes = created
        .spec
        .and_then(|spec| spec.volumes)
        .unwrap_or_default();
    assert!(
        volumes.is_empty(),
        "no token volume is injected: {volumes:?}"
    );
}

#[tokio::test]
async fn agent_sandbox_controller_reconciles_a_sandbox_into_a_pod() {
    let env = env().await;
    let ns = env.namespace("testenv-sandbox").await.expect("namespace");
    let client = env.client();
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    let sandboxes =
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    let sandbox: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": { "name": "probe" },
        "spec": { "podTemplate": { "spec": {
            "containers": [{ "name": "agent", "image": "registry.example/agent:1" }],
        } } },
    }))
    .expect("sandbox literal");
    sandboxes
        .create(&PostParams::default(), &sandbox)
        .await
        .expect("create a v1beta1 Sandbox");

    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let pod = loop {
        if let Some(pod) = pods.get_opt("probe").await.expect("get pod") {
            break pod;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the controller made no Pod for Sandbox {ns}/probe in 30s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let owner = pod
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .find(|owner| owner.kind == "Sandbox");
    assert_eq!(owner.map(|o| o.name).as_deref(), Some("probe"));

    // Reading it back as v1alpha1 goes through the conversion webhook the controller serves.
    let alpha = GroupVersionKind::gvk("agents.x-k8s.io", "v1alpha1", "Sandbox");
    let converted =
        Api::<DynamicObject>::namespaced_with(client, &ns, &ApiResource::from_gvk(&alpha))
            .get("probe")
            .await
            .expect("read the Sandbox as v1alpha1 through the conversion webhook");
    assert_eq!(
        converted.types.map(|t| t.api_version).as_deref(),
        Some("agents.x-k8s.io/v1alpha1")
    );
}

#[tokio::test]
async fn rbac_applies_to_an_impersonated_service_account() {
    let env = env().await;
    let ns = env.namespace("testenv-rbac").await.expect("namespace");
    let admin = env.client();
    let post = PostParams::default();
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "reader" } }))
            .expect("service account literal");
    Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
        .create(&post, &account)
        .await
        .expect("create the ServiceAccount");
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pod-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }],
    }))
    .expect("role literal");
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&post, &role)
        .await
        .expect("create the Role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "reader-reads-pods" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns }],
    }))
    .expect("role binding literal");
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&post, &binding)
        .await
        .expect("create the RoleBinding");

    let mut config = env.kube_config();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:reader"));
    let reader = kube::Client::try_from(config).expect("impersonating client");
    Api::<Pod>::namespaced(reader.clone(), &ns)
        .list(&kube::api::ListParams::default())
        .await
        .expect("the binding allows listing pods");
    let denied = Api::<ServiceAccount>::namespaced(reader, &ns)
        .list(&kube::api::ListParams::default())
        .await
        .expect_err("nothing allows listing service accounts");
    assert!(
        matches!(&denied, kube::Error::Api(status) if status.code == 403),
        "expected 403 Forbidden, got {denied:?}"
    );
}

#[tokio::test]
async fn service_account_tokens_are_issued() {
    let env = env().await;
    let ns = env.namespace("testenv-token").await.expect("namespace");
    let accounts = Api::<ServiceAccount>::namespaced(env.client(), &ns);
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "runner" } }))
            .expect("service account literal");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create the ServiceAccount");
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "audiences": [], "expirationSeconds": 600 },
    }))
    .expect("token request literal");
    let issued: TokenRequest = accounts
        .create_subresource("token", "runner", &PostParams::default(), &request)
        .await
        .expect("request a token");
    let token = issued
        .status
        .and_then(|status| status.token)
        .unwrap_or_default();
    // A signed JWT: header.payload.signature.
    assert_eq!(token.split('.').count(), 3, "not a JWT: {token:?}");
}
