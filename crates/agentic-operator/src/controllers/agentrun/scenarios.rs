//! The AgentRun controller's real pass against the fake API server (the `pod` backend).

use std::sync::Arc;

use agentic_api::{AgentRun, AgentRunPhase, Gateway};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use serde_json::json;

use super::reconcile;
use super::wakes::{runs_waiting_on_agent, runs_waiting_on_secret};
use crate::caches::{Caches, Guarded, SandboxPod};
use crate::controllers::agentworkflow::scenarios::ready_agent;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::pipeline::guarded;
use crate::controllers::scenario::{
    NS, caches_with, context, listed_writer, object, pass, ready, secret_meta, status_after_pass,
};
use crate::controllers::watches::trim_for_cache;

fn run(name: &str, agent: &str) -> AgentRun {
    object(json!({
        "metadata": {"name": name, "uid": format!("uid-run-{name}")},
        "spec": {"agentRef": agent},
    }))
}

/// A Ready Agent `coder` with the Gateway `llm`, as their controllers would leave them.
fn ready_agent_with_gateway(api: &FakeApi) {
    let mut agent = ready_agent("coder");
    agent.spec.gateways = vec![serde_json::from_value(json!({"ref": "llm"})).expect("a ref")];
    api.put(&agent);
    let gateway: Gateway = object(json!({
        "metadata": {"name": "llm"},
        "spec": {"provider": "openai", "model": {"name": "m", "contextWindow": 128_000}},
    }));
    api.put(&gateway);
}

#[tokio::test]
async fn a_run_of_a_ready_agent_gets_its_sandbox_objects_and_records_them() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    api.put(&run("fix-bug", "coder"));
    let status = status_after_pass::<AgentRun, _>(&api, &context(&api), "fix-bug", reconcile).await;
    assert_eq!(status.sandbox_name.as_deref(), Some("fix-bug"));
    assert!(
        !status.phase.is_some_and(AgentRunPhase::is_finished),
        "{status:?}"
    );
    assert!(!status.phase.is_some_and(AgentRunPhase::is_finished));
    let pod: Pod = api.get(NS, "fix-bug").expect("the sandbox pod");
    let owner = &pod.metadata.owner_references.clone().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("AgentRun", "uid-run-fix-bug")
    );
    // The skills manifest and params ride on the pod, for its downwardAPI volume.
    let annotations = pod.metadata.annotations.expect("annotations");
    assert!(annotations.contains_key("konveyor.io/skills-manifest"));
    assert!(annotations.contains_key("konveyor.io/params"));
    assert!(api.names::<ConfigMap>(NS).is_empty(), "no run ConfigMap");
    assert_eq!(api.names::<Secret>(NS).len(), 1);
    let service: Service = api.get(NS, "fix-bug").expect("the ACP Service");
    let ports = service.spec.and_then(|s| s.ports).unwrap_or_default();
    assert_eq!(ports.iter().map(|p| p.port).collect::<Vec<_>>(), [4000]);
    // Five writes start a run: its three objects (the Service for ACP clients with the pod
    // backend), one Event and one status apply.
    let writes: Vec<String> = api
        .writes()
        .iter()
        .map(|w| {
            format!(
                "{} {}",
                w.method,
                w.path.rsplit('/').next().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            "POST secrets",
            "POST services",
            "POST pods",
            "POST events",
            "PATCH status"
        ],
        "{:?}",
        api.writes().iter().map(|w| &w.body).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_run_is_cached_without_its_labels_and_a_pass_over_that_copy_loses_none() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    let mut labelled = run("fix-bug", "coder");
    let labels: std::collections::BTreeMap<String, String> =
        [("hub.konveyor.io/task".to_string(), "42".to_string())].into();
    labelled.metadata.labels = Some(labels.clone());
    api.put(&labelled);
    let mut cached = labelled.clone();
    trim_for_cache(&mut cached);
    assert_eq!(cached.metadata.labels, None);
    cached.metadata.labels = Some(labels.clone());
    assert_eq!(
        serde_json::to_value(&cached).expect("json"),
        serde_json::to_value(&labelled).expect("json"),
        "nothing but the labels is dropped"
    );
    trim_for_cache(&mut cached);

    guarded(Arc::new(Guarded(Ok(cached))), context(&api), reconcile)
        .await
        .expect("a pass");
    let served: AgentRun = api.get(NS, "fix-bug").expect("the run");
    assert_eq!(served.metadata.labels, Some(labels));
    assert_eq!(
        served.status.and_then(|s| s.sandbox_name).as_deref(),
        Some("fix-bug")
    );
    let pod: Pod = api.get(NS, "fix-bug").expect("the sandbox pod");
    assert!(
        !pod.metadata
            .labels
            .expect("labels")
            .contains_key("hub.konveyor.io/task")
    );
}

#[tokio::test]
async fn a_run_of_a_missing_agent_waits_and_creates_nothing() {
    let api = FakeApi::default();
    api.put(&run("fix-bug", "nobody"));
    let status = status_after_pass::<AgentRun, _>(&api, &context(&api), "fix-bug", reconcile).await;
    assert_eq!(ready(&status.conditions).1, "AgentNotFound");
    assert!(!status.phase.is_some_and(AgentRunPhase::is_finished));
    assert!(api.names::<Pod>(NS).is_empty());
    assert!(api.names::<Secret>(NS).is_empty());
}

/// The reads of Agents a pass made.
fn agent_reads(api: &FakeApi) -> Vec<String> {
    api.reads()
        .into_iter()
        .filter(|path| path.contains("/agents/"))
        .collect()
}

#[tokio::test]
async fn a_pass_over_a_run_already_waiting_for_its_missing_agent_reads_and_writes_nothing() {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    let api = FakeApi::default();
    api.put(&run("fix-bug", "nobody"));
    let ctx = context(&api);
    let mut agents = Writer::<crate::caches::Guarded<agentic_api::Agent>>::default();
    agents.apply_watcher_event(&Event::Init);
    agents.apply_watcher_event(&Event::InitDone);
    ctx.register_caches(
        Some(NS),
        caches_with(vec![crate::controllers::watches::kind_cache(
            agents.as_reader(),
        )]),
    );
    // A new run does not trust a cache that may be a moment behind its Agent.
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert_eq!(agent_reads(&api).len(), 1, "{:?}", api.reads());
    let first: AgentRun = api.get(NS, "fix-bug").expect("the run");
    let status = first.status.expect("a status");
    assert_eq!(ready(&status.conditions).1, "AgentNotFound");

    // As after a restart: the run's status already says why it waits, and the Agent's
    // watch wakes it when that changes.
    api.clear_requests();
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert!(agent_reads(&api).is_empty(), "{:?}", api.reads());
    assert!(api.writes().is_empty(), "{:?}", api.writes());

    // Without a listed cache of Agents only a read can tell.
    let unlisted = context(&api);
    unlisted.register_caches(
        Some(NS),
        caches_with(vec![crate::controllers::watches::kind_cache(
            Writer::<crate::caches::Guarded<agentic_api::Agent>>::default().as_reader(),
        )]),
    );
    api.clear_requests();
    pass::<AgentRun, _>(&api, &unlisted, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert_eq!(agent_reads(&api).len(), 1, "{:?}", api.reads());
}

#[tokio::test]
async fn a_run_cancelled_before_it_starts_ends_without_a_sandbox() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    let mut cancelled = run("fix-bug", "coder");
    cancelled.spec.cancel = Some(true);
    api.put(&cancelled);
    let status = status_after_pass::<AgentRun, _>(&api, &context(&api), "fix-bug", reconcile).await;
    assert!(status.phase.is_some_and(AgentRunPhase::is_finished));
    assert_eq!(ready(&status.conditions).1, "Cancelled");
    assert!(api.names::<Pod>(NS).is_empty());
}

#[tokio::test]
async fn a_second_pass_over_a_started_run_writes_nothing_new() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    api.put(&run("fix-bug", "coder"));
    let ctx = context(&api);
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    api.clear_requests();
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert!(api.writes().is_empty(), "{:?}", api.writes());
}

/// A run of `coder` that mounts the key `token` of the Secret `creds`.
fn run_mounting_secret() -> AgentRun {
    object(json!({
        "metadata": {"name": "fix-bug", "uid": "uid-run-fix-bug"},
        "spec": {
            "agentRef": "coder",
            "fileMounts": [{
                "mountPath": "/etc/creds",
                "secretName": "creds",
                "items": [{"key": "token", "path": "token"}],
            }],
        },
    }))
}

fn secret_with(key: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": NS},
        "data": {key: "c2VjcmV0"},
    }))
    .expect("a Secret")
}

#[tokio::test]
async fn a_run_waits_for_its_file_mount_secret_and_starts_once_it_exists() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    api.put(&run_mounting_secret());
    let ctx = context(&api);
    let status = status_after_pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile).await;
    assert_eq!(ready(&status.conditions).1, "FileMountSourceNotFound");
    assert!(!status.phase.is_some_and(AgentRunPhase::is_finished));
    assert!(api.names::<Pod>(NS).is_empty());
    api.put(&secret_with("token"));
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert_eq!(api.names::<Pod>(NS), ["fix-bug"]);
}

#[tokio::test]
async fn a_run_whose_file_mount_secret_lacks_the_key_fails_at_once() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    api.put(&run_mounting_secret());
    api.put(&secret_with("other"));
    let status = status_after_pass::<AgentRun, _>(&api, &context(&api), "fix-bug", reconcile).await;
    assert!(status.phase.is_some_and(AgentRunPhase::is_finished));
    assert_eq!(ready(&status.conditions).1, "InvalidFileMounts");
    assert!(api.names::<Pod>(NS).is_empty());
}

#[test]
fn a_secret_appearing_brings_back_the_unstarted_runs_that_mount_it() {
    let waiting = run_mounting_secret();
    let unrelated = run("other", "coder");
    let picked = runs_waiting_on_secret([&waiting, &unrelated], NS, "creds");
    assert_eq!(
        picked,
        [kube::runtime::reflector::ObjectRef::new("fix-bug").within(NS)]
    );
}

#[test]
fn an_agent_turning_ready_brings_back_only_its_unstarted_runs() {
    let waiting = run("a", "coder");
    let mut started = run("b", "coder");
    started.status = Some(serde_json::from_value(json!({"sandboxName": "b"})).expect("a status"));
    let other = run("c", "writer");
    let picked = runs_waiting_on_agent([&waiting, &started, &other], NS, "coder");
    assert_eq!(
        picked,
        [kube::runtime::reflector::ObjectRef::new("a").within(NS)]
    );
}

/// A run that finished at `completed` and is kept `ttl` seconds after that.
fn finished_run(completed: &str, ttl: i64) -> AgentRun {
    object(json!({
        "metadata": {"name": "done", "uid": "uid-run-done"},
        "spec": {"agentRef": "coder", "ttlSecondsAfterFinished": ttl},
        "status": {"phase": "Succeeded", "sandboxName": "done", "completionTime": completed},
    }))
}

#[tokio::test]
async fn a_finished_run_is_deleted_once_its_time_to_live_is_over_and_not_before() {
    let api = FakeApi::default();
    api.put(&finished_run("2026-01-01T00:00:00Z", 60));
    let ctx = context(&api);
    let action = pass::<AgentRun, _>(&api, &ctx, "done", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, kube::runtime::controller::Action::await_change());
    assert!(api.get::<AgentRun>(NS, "done").is_none());

    // Kept for an hour from now: the pass looks again a second after that, not sooner.
    let now = k8s_openapi::jiff::Timestamp::now();
    api.put(&finished_run(
        &format!("{}Z", now.strftime("%Y-%m-%dT%H:%M:%S")),
        3600,
    ));
    let action = pass::<AgentRun, _>(&api, &ctx, "done", reconcile)
        .await
        .expect("a pass");
    assert!(api.get::<AgentRun>(NS, "done").is_some());
    // Completion times have whole seconds: what is left is within a second of the hour.
    let hour_and_a_second = std::time::Duration::from_secs(3601);
    let earliest = kube::runtime::controller::Action::requeue(
        hour_and_a_second.saturating_sub(std::time::Duration::from_secs(1)),
    );
    let latest = kube::runtime::controller::Action::requeue(hour_and_a_second);
    let seconds = |a: &kube::runtime::controller::Action| {
        let text = format!("{a:?}");
        let start = text.find("Some(").map(|i| i + 5).expect("a requeue");
        let end = start + text[start..].find('s').expect("seconds");
        text[start..end]
            .parse::<f64>()
            .expect("a number of seconds")
    };
    let left = seconds(&action);
    assert!(
        seconds(&earliest) <= left && left <= seconds(&latest),
        "{action:?}"
    );
}

/// A run going on in the pod `fix-bug`, whose credential proxy mounts the Secret `llm-key`
/// and which was last told of `told` (a version of that Secret).
fn proxied_pod(told: Option<&str>) -> Pod {
    let mut annotations = json!({"konveyor.io/credential-secret": "llm-key"});
    if let Some(version) = told {
        annotations["konveyor.io/credential-version"] = version.into();
    }
    object(json!({
        "metadata": {
            "name": "fix-bug", "uid": "uid-pod-fix-bug", "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "name": "fix-bug",
                "uid": "uid-run-fix-bug", "controller": true
            }],
        },
        "status": {"phase": "Running"},
    }))
}

/// A run whose status was lost after its pod was made (the operator stopped in between)
/// adopts the pod with the skills it mounts. The pods' cache keeps no pinned-skills
/// annotation, so those come from the one read of the server's copy.
#[tokio::test]
async fn a_run_adopts_its_cached_pod_with_the_skills_the_servers_copy_names() {
    let api = FakeApi::default();
    ready_agent_with_gateway(&api);
    api.put(&run("fix-bug", "coder"));
    let pinned = r#"[{"name":"review","image":"registry.test/skills@sha256:0123","type":"skill"}]"#;
    let pod: Pod = object(json!({
        "metadata": {
            "name": "fix-bug", "uid": "uid-pod-fix-bug",
            "annotations": {"konveyor.io/pinned-skills": pinned},
            "ownerReferences": [{
                "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "name": "fix-bug",
                "uid": "uid-run-fix-bug", "controller": true
            }],
        },
        "status": {"phase": "Pending"},
    }));
    api.put(&pod);
    let mut cached: SandboxPod =
        serde_json::from_value(serde_json::to_value(&pod).expect("JSON")).expect("a pod");
    cached.forget_unread();
    assert_eq!(cached.metadata.annotations, None);
    let ctx = context(&api);
    let pods = listed_writer(vec![cached]).as_reader();
    ctx.register_caches(Some(NS), Caches::new(pods, None));

    let status = status_after_pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile).await;
    assert_eq!(status.sandbox_name.as_deref(), Some("fix-bug"));
    let skills: Vec<(&str, &str)> = status
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.image.as_str()))
        .collect();
    assert_eq!(skills, [("review", "registry.test/skills@sha256:0123")]);
    let pod_path = format!("/api/v1/namespaces/{NS}/pods/fix-bug");
    let reads = api.reads();
    assert_eq!(
        reads.iter().filter(|path| **path == pod_path).count(),
        1,
        "{reads:?}"
    );
    assert!(
        api.writes().iter().all(|w| !w.path.ends_with("/pods")),
        "no second pod: {:?}",
        api.writes()
    );
}

/// The Secret's change reaches the live run's pod as one annotation, applied under the
/// operator's field manager without force (the pod of agent-sandbox is its controller's), and
/// only while it differs: the pass after it writes nothing.
#[tokio::test]
async fn a_live_runs_pod_is_told_each_new_version_of_its_proxys_secret_once() {
    let api = FakeApi::default();
    let mut live = run("fix-bug", "coder");
    live.status = Some(
        serde_json::from_value(json!({"phase": "Pending", "sandboxName": "fix-bug"}))
            .expect("a status"),
    );
    api.put(&live);
    api.put(&proxied_pod(None));
    let ctx = context(&api);
    let mut secrets = listed_writer(vec![secret_meta("llm-key", "7")]);
    ctx.register_caches(
        Some(NS),
        caches_with(Vec::new()).with_secrets(secrets.as_reader()),
    );
    let pod_writes = || -> Vec<_> {
        api.writes()
            .into_iter()
            .filter(|w| w.path.ends_with("/pods/fix-bug"))
            .collect()
    };

    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    let written = pod_writes();
    assert_eq!(written.len(), 1, "{:?}", api.writes());
    assert_eq!(written[0].method, http::Method::PATCH);
    assert!(
        written[0].query.contains("fieldManager=agentic-operator"),
        "{:?}",
        written[0]
    );
    assert!(!written[0].query.contains("force"), "{:?}", written[0]);
    let body: serde_json::Value = serde_json::from_str(&written[0].body).expect("JSON");
    assert_eq!(
        body,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "fix-bug", "uid": "uid-pod-fix-bug",
                "annotations": {"konveyor.io/credential-version": "7"},
            },
        })
    );

    // Told: nothing more until the Secret changes again.
    api.put(&proxied_pod(Some("7")));
    api.clear_requests();
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    assert!(pod_writes().is_empty(), "{:?}", api.writes());
    secrets.apply_watcher_event(&kube::runtime::watcher::Event::Apply(secret_meta(
        "llm-key", "8",
    )));
    pass::<AgentRun, _>(&api, &ctx, "fix-bug", reconcile)
        .await
        .expect("a pass");
    let written = pod_writes();
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(
        written[0]
            .body
            .contains(r#""konveyor.io/credential-version":"8""#)
    );
}
