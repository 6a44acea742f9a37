//! The orphan sweep on a real API server, which has no garbage collector here: the objects
//! labelled for a run that is gone (or was recreated) are deleted, at start and then
//! periodically; objects of existing runs, objects another controller owns and objects
//! without the run label are left alone.

use std::time::Duration;

use agentic_api::AgentRun;
use agentic_integration_tests::{Operator, apply, env, run_object, wait_gone};
use agentic_operator::context::SandboxBackend;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// A UID no run has.
const GONE_UID: &str = "0b7e9a52-1111-4111-8111-111111111111";

/// The operator watching `ns`, sweeping every `interval`.
async fn operator(
    client: &Client,
    ns: &str,
    backend: SandboxBackend,
    interval: Duration,
) -> Operator {
    Operator::sweeping(client, ns, backend, interval).await
}

/// Creates the AgentRun `name` (its Agent does not exist: it waits, creating nothing) and
/// returns its UID.
async fn run(client: &Client, ns: &str, name: &str) -> String {
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
    let run: AgentRun = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"agentRef": "absent"},
    }))
    .expect("an AgentRun");
    apply(&runs, &run).await.metadata.uid.expect("a UID")
}

/// The API of the `v1` kind `kind` (`ConfigMap`, `Secret`, `Pod`) in `ns`.
fn core_api(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates `object` (a `v1` object, a Pod given a container) in `ns`.
async fn create(client: &Client, ns: &str, mut object: Value) {
    let kind = object["kind"].as_str().expect("a kind").to_string();
    if kind == "Pod" {
        object["spec"] =
            json!({"containers": [{"name": "agent", "image": "harness.invalid/agent:1"}]});
    }
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    core_api(client, ns, &kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

/// `object` with its ownerReferences replaced.
fn owned_by(mut object: Value, owners: Value) -> Value {
    object["metadata"]["ownerReferences"] = owners;
    object
}

async fn exists(client: &Client, ns: &str, kind: &str, name: &str) -> bool {
    core_api(client, ns, kind)
        .get_opt(name)
        .await
        .expect("get")
        .is_some()
}

/// Waits until the operator's counter of deleted orphans of each kind reaches `want`.
async fn until_swept(operator: &Operator, want: &[(&str, u64)]) {
    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    loop {
        let text = operator.metrics.encode();
        let all = want.iter().all(|(kind, n)| {
            text.lines()
                .any(|l| l == format!(r#"agentic_orphans_deleted_total{{kind="{kind}"}} {n}"#))
        });
        if all {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "want {want:?} swept; metrics:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_sweep_deletes_the_objects_of_runs_that_are_gone_and_nothing_else() {
    let env = env().await;
    let ns = env.namespace("sweep").await.expect("namespace");
    let client = env.client();
    let operator = operator(&client, &ns, SandboxBackend::Pod, Duration::from_secs(1)).await;
    let live = run(&client, &ns, "live").await;

    // Created while the operator runs: a periodic pass, not the one at start, finds them.
    let orphans = [
        ("Pod", "gone-sandbox"),
        ("ConfigMap", "gone-sandbox-config"),
        ("Secret", "gone-sandbox-acp-key"),
        // The run "live" was deleted and created again: these are the old one's.
        ("ConfigMap", "replaced-config"),
    ];
    for (kind, name) in &orphans[..3] {
        create(&client, &ns, run_object(kind, name, "gone", GONE_UID)).await;
    }
    create(
        &client,
        &ns,
        run_object("ConfigMap", "replaced-config", "live", GONE_UID),
    )
    .await;

    let kept = [
        ("ConfigMap", "live-config"),
        ("Secret", "live-acp-key"),
        ("ConfigMap", "foreign"),
        ("Pod", "sandbox-pod"),
        ("ConfigMap", "unlabelled"),
        ("ConfigMap", "ownerless"),
    ];
    create(
        &client,
        &ns,
        run_object("ConfigMap", "live-config", "live", &live),
    )
    .await;
    create(
        &client,
        &ns,
        run_object("Secret", "live-acp-key", "live", &live),
    )
    .await;
    // Labelled for the gone run, but another controller owns them.
    create(
        &client,
        &ns,
        owned_by(
            run_object("ConfigMap", "foreign", "gone", GONE_UID),
            json!([{
                "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": "5d0c6f1e-2222-4222-8222-222222222222", "controller": true,
            }]),
        ),
    )
    .await;
    create(
        &client,
        &ns,
        owned_by(
            run_object("Pod", "sandbox-pod", "gone", GONE_UID),
            json!([{
                "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": "gone-sandbox",
                "uid": "9a3e5b7c-3333-4333-8333-333333333333", "controller": true,
            }]),
        ),
    )
    .await;
    // Controlled by the gone run, without our label: not one of the operator's objects.
    let mut unlabelled = run_object("ConfigMap", "unlabelled", "gone", GONE_UID);
    unlabelled["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    create(&client, &ns, unlabelled).await;
    // Labelled, with no controller at all.
    create(
        &client,
        &ns,
        owned_by(
            run_object("ConfigMap", "ownerless", "gone", GONE_UID),
            json!([]),
        ),
    )
    .await;

    for (kind, name) in orphans {
        wait_gone(&core_api(&client, &ns, kind), name, kind).await;
    }
    until_swept(&operator, &[("Pod", 1), ("ConfigMap", 2), ("Secret", 1)]).await;
    // More passes change nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (kind, name) in kept {
        assert!(
            exists(&client, &ns, kind, name).await,
            "{kind} {name} is kept"
        );
    }
    until_swept(&operator, &[("Pod", 1), ("ConfigMap", 2), ("Secret", 1)]).await;
    operator.stop().await;
}

#[tokio::test]
async fn an_object_of_a_run_deleted_while_the_operator_was_down_goes_at_its_start() {
    let env = env().await;
    let ns = env.namespace("sweep-restart").await.expect("namespace");
    let client = env.client();
    let first = operator(&client, &ns, SandboxBackend::Pod, Duration::from_secs(1)).await;
    let uid = run(&client, &ns, "brief").await;
    create(
        &client,
        &ns,
        run_object("ConfigMap", "brief-config", "brief", &uid),
    )
    .await;
    // Passes while the run exists keep its object.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&client, &ns, "ConfigMap", "brief-config").await);
    first.stop().await;

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    runs.delete("brief", &DeleteParams::default())
        .await
        .expect("delete the run");
    wait_gone(&runs, "brief", "the run").await;
    assert!(
        exists(&client, &ns, "ConfigMap", "brief-config").await,
        "no garbage collector here"
    );

    // The next pass is an hour away: only the pass at start can delete it.
    let restarted = operator(&client, &ns, SandboxBackend::Pod, Duration::from_secs(3600)).await;
    wait_gone(
        &core_api(&client, &ns, "ConfigMap"),
        "brief-config",
        "the orphan",
    )
    .await;
    until_swept(&restarted, &[("ConfigMap", 1), ("Pod", 0), ("Secret", 0)]).await;
    restarted.stop().await;
}

#[tokio::test]
async fn the_sweep_deletes_the_sandbox_of_a_run_that_is_gone() {
    let env = env().await;
    let ns = env.namespace("sweep-sandbox").await.expect("namespace");
    let client = env.client();
    let operator = operator(
        &client,
        &ns,
        SandboxBackend::AgentSandbox,
        Duration::from_secs(1),
    )
    .await;
    let live = run(&client, &ns, "live").await;
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &agentic_operator::controllers::agentrun::sandbox_resource(),
    );
    for (name, run, uid) in [
        ("gone-sandbox", "gone", GONE_UID),
        ("live-sandbox", "live", live.as_str()),
    ] {
        let mut sandbox = run_object("Sandbox", name, run, uid);
        sandbox["apiVersion"] = json!("agents.x-k8s.io/v1beta1");
        sandbox["spec"] = json!({"podTemplate": {"spec": {
            "containers": [{"name": "agent", "image": "harness.invalid/agent:1"}],
        }}});
        let sandbox: DynamicObject = serde_json::from_value(sandbox).expect("a Sandbox");
        sandboxes
            .create(&PostParams::default(), &sandbox)
            .await
            .expect("create a Sandbox");
    }
    wait_gone(&sandboxes, "gone-sandbox", "the orphaned Sandbox").await;
    until_swept(&operator, &[("Sandbox", 1)]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        sandboxes
            .get_opt("live-sandbox")
            .await
            .expect("get")
            .is_some(),
        "the Sandbox of an existing run is kept"
    );
    operator.stop().await;
}

/// Creates the ConfigMaps `{prefix}-000`… (`count` of them) for the run `run` with `uid`,
/// a few at a time.
async fn config_maps(client: &Client, ns: &str, prefix: &str, count: usize, run: &str, uid: &str) {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:03}")).collect();
    for chunk in names.chunks(20) {
        futures::future::join_all(
            chunk
                .iter()
                .map(|name| create(client, ns, run_object("ConfigMap", name, run, uid))),
        )
        .await;
    }
}

/// The names of the ConfigMaps in `ns` starting with `prefix`.
async fn config_maps_named(client: &Client, ns: &str, prefix: &str) -> Vec<String> {
    core_api(client, ns, "ConfigMap")
        .list(&kube::api::ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|name| name.starts_with(prefix))
        .collect()
}

#[tokio::test]
async fn a_pass_reads_every_page_and_deletes_at_most_its_budget() {
    let env = env().await;
    let client = env.client();

    // More labelled objects of a live run than one page holds, listed (by name) before the
    // orphans: the pass at start must read on to the second page to find them.
    let paged = env.namespace("sweep-pages").await.expect("namespace");
    let live = run(&client, &paged, "live").await;
    config_maps(&client, &paged, "a-live", 260, "live", &live).await;
    config_maps(&client, &paged, "z-gone", 3, "gone", GONE_UID).await;
    // More orphans than a pass examines.
    let crowded = env.namespace("sweep-budget").await.expect("namespace");
    let budget = agentic_operator::controllers::MAX_CANDIDATES_PER_PASS;
    config_maps(&client, &crowded, "gone", budget + 5, "gone", GONE_UID).await;

    // An hour between passes: only the pass at start runs.
    let paged_operator = operator(
        &client,
        &paged,
        SandboxBackend::Pod,
        Duration::from_secs(3600),
    )
    .await;
    until_swept(&paged_operator, &[("ConfigMap", 3)]).await;
    assert!(
        config_maps_named(&client, &paged, "z-gone")
            .await
            .is_empty()
    );
    assert_eq!(
        config_maps_named(&client, &paged, "a-live").await.len(),
        260
    );
    paged_operator.stop().await;

    let crowded_operator = operator(
        &client,
        &crowded,
        SandboxBackend::Pod,
        Duration::from_secs(3600),
    )
    .await;
    until_swept(&crowded_operator, &[("ConfigMap", budget as u64)]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        config_maps_named(&client, &crowded, "gone").await.len(),
        5,
        "the rest wait for the next pass"
    );
    until_swept(&crowded_operator, &[("ConfigMap", budget as u64)]).await;
    crowded_operator.stop().await;
}
