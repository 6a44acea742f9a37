//! Running the operator: health and readiness probes, Prometheus metrics, leader election
//! (hand-over on shutdown, stopping when the Lease is lost) and a clean exit on SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentWorkflow, AgentWorkflowSpec, AgentWorkflowStage, SkillCard,
};
use agentic_integration_tests::{
    CONVERGE, apply, env, events_about, eventually, has_condition, http_get, llm_gateway,
    loopback_proxy::LoopbackProxy, operator_binary, operator_command, push, registry, run_options,
    stop_cleanly, wait_agent_ready, wait_for, wait_for_sandbox, wait_phase, write_skill,
};
use agentic_oci::{RegistryClient, RegistryOptions};
use agentic_operator::caches::{FinishedRunsWatched, InitialList, LIVE_RUNS, finished_runs_of};
use agentic_operator::context::{Context, RunDefaults, SandboxBackend, Settings};
use agentic_operator::controllers::{self, Readiness, Scope};
use agentic_operator::metrics::Metrics;
use agentic_operator::operator::{self, LEASE_NAME, LeaderElection, RunOptions};
use agentic_operator::server;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{oneshot, watch};

const LOOPBACK_ANY_PORT: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

fn inline_card(name: &str) -> SkillCard {
    serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
        "metadata": {"name": name},
        "spec": {"inline": format!("---\nname: {name}\ndescription: A test rule.\n---\nFollow it.\n")},
    }))
    .expect("a SkillCard")
}

fn image_card(name: &str, image: &str, sub_path: Option<&str>) -> SkillCard {
    serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
        "metadata": {"name": name},
        "spec": {"image": image, "subPath": sub_path},
    }))
    .expect("a SkillCard")
}

async fn wait_ready_card(cards: &Api<SkillCard>, name: &str) {
    wait_for(cards, name, "Ready", |c: &SkillCard| {
        c.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "True", "SkillValid"))
    })
    .await;
}

/// Polls `GET addr path` until `accept` takes the answer; panics with the last one.
async fn until_http(addr: SocketAddr, path: &str, accept: impl Fn(u16, &str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        match http_get(addr, path).await {
            Ok((code, body)) if accept(code, &body) => return body,
            answer => last = Some(answer),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("GET {addr}{path}: timed out; last answer: {last:?}");
}

/// The samples of a Prometheus text exposition: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The value of `series` in `metrics`; panics listing the samples when it is missing.
fn sample(metrics: &BTreeMap<String, f64>, series: &str) -> f64 {
    *metrics
        .get(series)
        .unwrap_or_else(|| panic!("no sample {series}; samples: {metrics:#?}"))
}

async fn lease_holder(client: &Client, namespace: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(LEASE_NAME)
        .await
        .expect("get Lease")
        .and_then(|lease| lease.spec)
        .and_then(|spec| spec.holder_identity)
}

async fn wait_lease_holder(client: &Client, namespace: &str, want: Option<&str>) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let holder = lease_holder(client, namespace).await;
        if holder.as_deref() == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Lease holder is {holder:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn probes_report_liveness_at_once_and_readiness_after_the_watches_list() {
    let env = env().await;
    let ns = env.namespace("ops-probes").await.expect("namespace");
    let readiness = Arc::new(Readiness::default());
    let (stop, shutdown) = watch::channel(false);
    let addr = server::spawn(
        LOOPBACK_ANY_PORT.into(),
        server::health_router(readiness.clone()),
        shutdown.clone(),
    )
    .await
    .expect("bind the health server");

    // Before the controllers start, the process is alive but not ready.
    assert_eq!(
        http_get(addr, "/healthz").await.expect("GET /healthz"),
        (200, "ok".to_owned())
    );
    let (code, body) = http_get(addr, "/readyz").await.expect("GET /readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("have not listed"), "{body}");

    let settings = Settings {
        registry: RegistryClient::new(RegistryOptions::default()).expect("registry client"),
        git: agentic_git::GitOptions::default(),
        sandbox_backend: SandboxBackend::Pod,
        tag_refresh_interval: Duration::from_secs(60),
        run_defaults: RunDefaults::default(),
        reconcile_concurrency: agentic_operator::context::DEFAULT_RECONCILE_CONCURRENCY,
        default_skills_namespace: None,
        skill_fetcher: None,
        credential_proxy: agentic_core::sandbox::CredentialProxy::default(),
        skill_prefetch: None,
        trace_receiver: None,
        trust_policy_list_wait: agentic_operator::context::TRUST_POLICY_LIST_WAIT,
        trace_export: None,
    };
    let ctx = Arc::new(Context::new(
        env.client(),
        settings,
        Arc::new(Metrics::default()),
    ));
    let controllers = tokio::spawn(controllers::run_until_shutdown(
        ctx,
        Scope::Namespaces(vec![ns]),
        readiness.clone(),
        shutdown,
    ));
    let body = until_http(addr, "/readyz", |code, _| code == 200).await;
    assert_eq!(body, "ok");
    assert!(readiness.is_ready());

    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(30), controllers)
        .await
        .expect("the controllers stop within 30s")
        .expect("the controllers do not panic");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while http_get(addr, "/healthz").await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the health server still answers after shutdown"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kubernetes 1.36 streams initial lists (`WatchList`, on by default since 1.34): the operator
/// asks once at start and every watch then streams, here for a namespace and for the
/// cluster. Every other test of this binary runs its operator that way; an API server that
/// refuses is covered by the probe's unit tests.
#[tokio::test]
async fn the_api_server_is_found_to_stream_initial_lists() {
    let env = env().await;
    let ns = env.namespace("ops-list").await.expect("namespace");
    let client = env.client();
    assert_eq!(
        InitialList::probe(&client, Some(&ns)).await,
        InitialList::Streaming
    );
    assert_eq!(
        InitialList::probe(&client, None).await,
        InitialList::Streaming
    );
}

/// The AgentRun CRD declares `status.phase` selectable, so the operator watches the finished
/// runs apart from the live ones (every other test of this binary runs its operator that way;
/// the one watch of every run, for a CRD without the field, runs in the controllers'
/// scenarios). What that relies on, as the API server does it: the live runs' selector
/// leaves the finished out of a list, each finished phase lists alone, and a live run that
/// finishes leaves the live runs' watch with a delete.
#[tokio::test]
async fn the_api_server_selects_runs_by_phase_so_finished_runs_are_watched_apart() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{ListParams, WatchEvent, WatchParams};

    let env = env().await;
    let ns = env.namespace("ops-phase").await.expect("namespace");
    let client = env.client();
    assert_eq!(
        FinishedRunsWatched::probe(&client, Some(&ns)).await,
        FinishedRunsWatched::Apart
    );
    assert_eq!(
        FinishedRunsWatched::probe(&client, None).await,
        FinishedRunsWatched::Apart
    );
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    for name in ["live", "done", "ending"] {
        let run: AgentRun = serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
            "metadata": {"name": name},
            "spec": {"agentRef": "absent"},
        }))
        .expect("an AgentRun");
        apply(&runs, &run).await;
    }
    let set_phase = |name: &'static str, phase: &'static str| {
        let runs = runs.clone();
        async move {
            runs.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .expect("a status patch");
        }
    };
    set_phase("done", "Succeeded").await;
    set_phase("ending", "Running").await;
    let names = |selector: String| {
        let runs = runs.clone();
        async move {
            let mut names: Vec<String> = runs
                .list_metadata(&ListParams::default().fields(&selector))
                .await
                .expect("a list by phase")
                .items
                .into_iter()
                .filter_map(|run| run.metadata.name)
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(names(LIVE_RUNS.to_string()).await, ["ending", "live"]);
    assert_eq!(
        names(finished_runs_of(AgentRunPhase::Succeeded)).await,
        ["done"]
    );
    assert!(
        names(finished_runs_of(AgentRunPhase::Failed))
            .await
            .is_empty()
    );

    // A streamed list of the live runs, then `ending` fails: it leaves with a delete.
    let params = WatchParams {
        field_selector: Some(LIVE_RUNS.to_string()),
        bookmarks: true,
        send_initial_events: true,
        ..WatchParams::default()
    };
    let mut events = runs.watch(&params, "0").await.expect("a watch").boxed();
    let mut listed = Vec::new();
    let mut failed = false;
    let left = tokio::time::timeout(CONVERGE, async {
        while let Some(event) = events.try_next().await.expect("a watch event") {
            match event {
                WatchEvent::Added(run) => listed.push(run.metadata.name.unwrap_or_default()),
                WatchEvent::Bookmark(_) if !failed => {
                    failed = true;
                    set_phase("ending", "Failed").await;
                }
                WatchEvent::Deleted(run) => return run.metadata.name,
                _ => {}
            }
        }
        None
    })
    .await
    .expect("the live runs' watch hears of the run that failed in time");
    listed.sort();
    assert_eq!(listed, ["ending", "live"], "the live runs listed");
    assert_eq!(left.as_deref(), Some("ending"));
    assert_eq!(
        names(finished_runs_of(AgentRunPhase::Failed)).await,
        ["ending"]
    );
}

/// An operator watching several namespaces is ready once their watches have listed, and
/// stops. Before, `/readyz` waited on the watch caches' own readiness, which kube-runtime
/// signals to the last waiter only: with the kind's controller, `/readyz` and the finished
/// runs' watches waiting on one cache, some never woke, and with several namespaces the
/// operator stayed unready (and its finished runs' watches never started) for good.
#[tokio::test]
async fn an_operator_watching_several_namespaces_is_ready_and_stops() {
    let env = env().await;
    let mut namespaces = Vec::new();
    for i in 0..6 {
        namespaces.push(
            env.namespace(&format!("ops-many-{i}"))
                .await
                .expect("namespace"),
        );
    }
    let operator = agentic_integration_tests::Operator::start_watching(
        env.client(),
        namespaces,
        SandboxBackend::Pod,
        Vec::new(),
        None,
    );
    eventually("the operator watching six namespaces is ready", || {
        let ready = operator.readiness.is_ready();
        async move { ready.then_some(()) }
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn readiness_stays_unavailable_while_the_watches_cannot_list() {
    let env = env().await;
    let ns = env.namespace("ops-unready").await.expect("namespace");
    // A ServiceAccount without a single binding: every list is forbidden.
    let mut config = env.kube_config();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:nobody"));
    let client = Client::try_from(config).expect("an impersonating client");
    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(client, run_options(&ns), shutdown)
        .await
        .expect("the operator starts");

    // The watchers retry within this time; none of them gets a list.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (code, _) = http_get(started.health_addr, "/healthz")
        .await
        .expect("GET /healthz");
    assert_eq!(code, 200);
    let (code, body) = http_get(started.health_addr, "/readyz")
        .await
        .expect("GET /readyz");
    assert_eq!(code, 503, "{body}");

    stop_cleanly(stop, started).await;
}

#[tokio::test]
async fn metrics_count_reconciles_errors_registry_reads_cache_hits_and_objects() {
    let env = env().await;
    let ns = env.namespace("ops-metrics").await.expect("namespace");
    let client = env.client();
    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(
        client.clone(),
        RunOptions {
            insecure_registries: vec![registry().await, "127.0.0.1:1".to_owned()],
            ..run_options(&ns)
        },
        shutdown,
    )
    .await
    .expect("the operator starts");

    let tmp = tempfile::tempdir().expect("tempdir");
    let quarkus = write_skill(tmp.path(), "quarkus-config", "Configure Quarkus.");
    let maven = write_skill(tmp.path(), "maven-deps", "Fix Maven dependencies.");
    let pushed = push(&[quarkus, maven], &format!("{ns}/multi:1")).await;
    let image = pushed.split('@').next().expect("tagged reference");
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    // The first card reads the image; the second is answered from the digest cache.
    apply(&cards, &image_card("first", image, Some("quarkus-config"))).await;
    wait_ready_card(&cards, "first").await;
    apply(&cards, &image_card("second", image, Some("quarkus-config"))).await;
    wait_ready_card(&cards, "second").await;
    apply(&cards, &inline_card("inline")).await;
    wait_ready_card(&cards, "inline").await;
    // Nothing listens on port 1: the registry is unavailable, and the pass fails.
    apply(&cards, &image_card("unreachable", "127.0.0.1:1/x:1", None)).await;
    wait_for(
        &cards,
        "unreachable",
        "RegistryUnavailable",
        |c: &SkillCard| {
            c.status.as_ref().is_some_and(|s| {
                has_condition(&s.conditions, "Ready", "False", "RegistryUnavailable")
            })
        },
    )
    .await;

    // A workflow whose stage's Agent does not exist: counted NotReady.
    let workflows: Api<AgentWorkflow> = Api::namespaced(client.clone(), &ns);
    apply(
        &workflows,
        &AgentWorkflow::new(
            "orphaned",
            AgentWorkflowSpec {
                stages: vec![AgentWorkflowStage {
                    name: "plan".into(),
                    agent_ref: "no-such-agent".into(),
                    instructions: None,
                    execution: None,
                }],
                ..AgentWorkflowSpec::default()
            },
        ),
    )
    .await;

    let text = until_http(started.metrics_addr, "/metrics", |code, body| {
        let metrics = samples(body);
        code == 200
            && metrics.get(r#"agentic_objects{kind="SkillCard",phase="Ready"}"#) == Some(&3.0)
            && metrics.get(r#"agentic_objects{kind="SkillCard",phase="NotReady"}"#) == Some(&1.0)
            && metrics.get(r#"agentic_objects{kind="AgentWorkflow",phase="NotReady"}"#)
                == Some(&1.0)
    })
    .await;
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics text ends with # EOF"
    );
    assert!(text.contains("# TYPE agentic_reconciles counter"), "{text}");
    assert!(
        text.contains("# TYPE agentic_reconcile_duration_seconds histogram"),
        "{text}"
    );
    let metrics = samples(&text);
    let reconciles = sample(
        &metrics,
        r#"agentic_reconciles_total{kind="SkillCard",result="ok"}"#,
    );
    assert!(reconciles >= 3.0, "{reconciles}");
    let failed = sample(
        &metrics,
        r#"agentic_reconciles_total{kind="SkillCard",result="error"}"#,
    );
    assert!(
        failed >= 1.0,
        "the unreachable card's pass failed: {failed}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"agentic_reconciles_total{kind="AgentRun",result="error"}"#
        ),
        0.0,
        "every kind's series is there before its first pass"
    );
    assert_eq!(
        sample(&metrics, "agentic_leader"),
        1.0,
        "no election: it leads"
    );
    assert_eq!(
        sample(
            &metrics,
            &format!(
                r#"agentic_build_info{{version="{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    let registry_requests = |registry: &str, outcome: &str| {
        sample(
            &metrics,
            &format!(
                r#"agentic_registry_request_duration_seconds_count{{registry="{registry}",outcome="{outcome}"}}"#
            ),
        )
    };
    assert!(registry_requests(&registry().await, "ok") >= 2.0);
    assert!(registry_requests("127.0.0.1:1", "error") >= 1.0);

    // A failed pass raises a Warning on the object, without the cause (hosts and ports stay
    // in the operator's log).
    let failure = eventually("the failed pass's Warning event", || async {
        events_about(&client, &ns, "SkillCard", "unreachable")
            .await
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ReconcileFailed")
                    && e.note.as_deref().is_some_and(|n| {
                        n.contains("(RegistryUnavailable)") && n.contains("retried with backoff")
                    })
            })
    })
    .await;
    assert_eq!(failure.type_.as_deref(), Some("Warning"));
    // The pass fails again with backoff: each repeat counts on that one Event's series,
    // which the API server accepts as a patch of it.
    let repeated = eventually("the failed pass's Warning counted again", || async {
        let failures: Vec<_> = events_about(&client, &ns, "SkillCard", "unreachable")
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("ReconcileFailed"))
            .collect();
        assert_eq!(
            failures.len(),
            1,
            "one Event for the repeats: {failures:#?}"
        );
        failures
            .into_iter()
            .find(|e| e.series.as_ref().is_some_and(|series| series.count >= 2))
    })
    .await;
    assert_eq!(repeated.metadata.name, failure.metadata.name);
    assert!(
        !failure
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("127.0.0.1"),
        "{failure:?}"
    );
    assert!(
        sample(
            &metrics,
            r#"agentic_reconcile_duration_seconds_count{kind="SkillCard"}"#
        ) >= 3.0
    );
    assert!(
        sample(
            &metrics,
            r#"agentic_reconcile_duration_seconds_bucket{le="+Inf",kind="SkillCard"}"#
        ) >= 3.0
    );
    assert!(
        sample(
            &metrics,
            r#"agentic_reconcile_errors_total{kind="SkillCard",reason="RegistryUnavailable"}"#
        ) >= 1.0
    );
    assert!(sample(&metrics, "agentic_registry_requests_total") >= 2.0);
    assert_eq!(sample(&metrics, "agentic_skill_cache_misses_total"), 1.0);
    assert!(sample(&metrics, "agentic_skill_cache_hits_total") >= 1.0);

    // The census follows deletions too, which no reconcile sees.
    cards
        .delete("inline", &DeleteParams::default())
        .await
        .expect("delete");
    until_http(started.metrics_addr, "/metrics", |_, body| {
        samples(body).get(r#"agentic_objects{kind="SkillCard",phase="Ready"}"#) == Some(&2.0)
    })
    .await;

    stop_cleanly(stop, started).await;
}

/// Plays the kubelet for the pod `name`: its agent container started `start` seconds after
/// `created` and ran for `ran` seconds, then exited 0 (with `ran`: `None`, it still runs).
async fn agent_ran(pods: &Api<Pod>, name: &str, created: &Timestamp, start: i64, ran: Option<i64>) {
    let started = created
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(start))
        .expect("a time");
    let state = match ran {
        None => json!({"running": {"startedAt": started.to_string()}}),
        Some(ran) => {
            let finished = started
                .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(ran))
                .expect("a time");
            json!({"terminated": {
                "exitCode": 0, "reason": "Completed",
                "startedAt": started.to_string(), "finishedAt": finished.to_string(),
            }})
        }
    };
    let status = json!({"status": {
        "phase": if ran.is_some() { "Succeeded" } else { "Running" },
        "containerStatuses": [{
            "name": "agent", "image": "harness.invalid/agent:1", "imageID": "",
            "ready": ran.is_none(), "restartCount": 0, "state": state,
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch pod status");
}

#[tokio::test]
async fn metrics_time_each_run_to_its_start_and_its_end_once() {
    let env = env().await;
    let ns = env.namespace("ops-run-metrics").await.expect("namespace");
    let client = env.client();
    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(client.clone(), run_options(&ns), shutdown)
        .await
        .expect("the operator starts");

    llm_gateway(&client, &ns).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    apply(
        &agents,
        &serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
            "metadata": {"name": "bare"},
            "spec": {"image": "harness.invalid/agent:1", "gateways": [{"ref": "llm"}]},
        }))
        .expect("an Agent"),
    )
    .await;
    wait_agent_ready(&agents, "bare").await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
            "metadata": {"name": "timed"},
            "spec": {"agentRef": "bare"},
        }))
        .expect("an AgentRun"),
    )
    .await;
    let run = wait_for_sandbox(&runs, "timed").await;
    let created = run
        .metadata
        .creation_timestamp
        .clone()
        .expect("a creation time")
        .0;
    let sandbox = run.status.and_then(|s| s.sandbox_name).expect("a sandbox");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_for(&pods, &sandbox, "the sandbox pod", |_: &Pod| true).await;
    // The agent started 3 s after the run was created, and ran for 42 s.
    agent_ran(&pods, &sandbox, &created, 3, None).await;
    wait_phase(&runs, "timed", AgentRunPhase::Running).await;
    agent_ran(&pods, &sandbox, &created, 3, Some(42)).await;
    wait_phase(&runs, "timed", AgentRunPhase::Succeeded).await;

    let text = until_http(started.metrics_addr, "/metrics", |code, body| {
        code == 200
            && samples(body).get(r#"agentic_run_duration_seconds_count{outcome="Succeeded"}"#)
                == Some(&1.0)
    })
    .await;
    assert!(
        text.contains("# TYPE agentic_run_start_seconds histogram"),
        "{text}"
    );
    let metrics = samples(&text);
    assert_eq!(sample(&metrics, "agentic_run_start_seconds_count"), 1.0);
    assert_eq!(sample(&metrics, "agentic_run_start_seconds_sum"), 3.0);
    assert_eq!(
        sample(&metrics, r#"agentic_run_start_seconds_bucket{le="2.0"}"#),
        0.0
    );
    assert_eq!(
        sample(&metrics, r#"agentic_run_start_seconds_bucket{le="4.0"}"#),
        1.0
    );
    assert_eq!(
        sample(
            &metrics,
            r#"agentic_run_duration_seconds_sum{outcome="Succeeded"}"#
        ),
        42.0
    );
    assert_eq!(
        sample(
            &metrics,
            r#"agentic_run_duration_seconds_bucket{le="32.0",outcome="Succeeded"}"#
        ),
        0.0
    );
    assert_eq!(
        sample(
            &metrics,
            r#"agentic_run_duration_seconds_bucket{le="64.0",outcome="Succeeded"}"#
        ),
        1.0
    );
    stop_cleanly(stop, started).await;

    // A restarted operator starts from the written status: the finished run is not
    // observed again.
    let (stop, shutdown) = watch::channel(false);
    let restarted = operator::start(client.clone(), run_options(&ns), shutdown)
        .await
        .expect("the operator starts again");
    // Counted by the census once the watch has listed, which also hands the run to its
    // reconcile.
    let counted = r#"agentic_objects{kind="AgentRun",phase="Succeeded"}"#;
    until_http(restarted.metrics_addr, "/metrics", |code, body| {
        code == 200 && samples(body).get(counted) == Some(&1.0)
    })
    .await;
    // One more census interval, for the reconcile of the finished run to have happened.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, text) = http_get(restarted.metrics_addr, "/metrics")
        .await
        .expect("GET /metrics");
    let metrics = samples(&text);
    assert_eq!(sample(&metrics, "agentic_run_start_seconds_count"), 0.0);
    assert!(
        !metrics.contains_key(r#"agentic_run_duration_seconds_count{outcome="Succeeded"}"#),
        "{text}"
    );
    stop_cleanly(stop, restarted).await;
}

/// A replica started through the library with a short Lease, so hand-overs take seconds.
async fn replica(
    client: &Client,
    ns: &str,
    identity: &str,
) -> (operator::Started, watch::Sender<bool>) {
    let (stop, shutdown) = watch::channel(false);
    let election = LeaderElection {
        lease_duration: Duration::from_secs(4),
        renew_before_expiry: Duration::from_secs(2),
        ..LeaderElection::new(ns, Some(identity.to_owned()))
    };
    let started = operator::start(
        client.clone(),
        RunOptions {
            leader_election: Some(election),
            ..run_options(ns)
        },
        shutdown,
    )
    .await
    .unwrap_or_else(|e| panic!("replica {identity} starts: {e:#}"));
    (started, stop)
}

async fn skill_card_reconciles(metrics_addr: SocketAddr) -> f64 {
    let (_, body) = http_get(metrics_addr, "/metrics")
        .await
        .expect("GET /metrics");
    let samples = samples(&body);
    ["ok", "error"]
        .iter()
        .filter_map(|result| {
            samples
                .get(&format!(
                    r#"agentic_reconciles_total{{kind="SkillCard",result="{result}"}}"#
                ))
                .copied()
        })
        .sum()
}

#[tokio::test]
async fn one_replica_leads_hands_over_on_shutdown_and_stops_when_its_lease_is_taken() {
    let env = env().await;
    let ns = env.namespace("ops-leader").await.expect("namespace");
    let client = env.client();
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);

    let (a, stop_a) = replica(&client, &ns, "replica-a").await;
    wait_lease_holder(&client, &ns, Some("replica-a")).await;
    // Kept to the end: dropping a shutdown sender stops the replica.
    let (b, _stop_b) = replica(&client, &ns, "replica-b").await;
    until_http(a.health_addr, "/readyz", |code, body| {
        code == 200 && body == "ok"
    })
    .await;
    // The standby is ready too: a rolling update must be able to count it as available.
    let (code, body) = http_get(b.health_addr, "/readyz").await.expect("readyz");
    assert_eq!(
        (code, body.as_str()),
        (200, "standby: waiting for leadership")
    );

    apply(&cards, &inline_card("first")).await;
    wait_ready_card(&cards, "first").await;
    assert!(skill_card_reconciles(a.metrics_addr).await >= 1.0);
    assert_eq!(
        skill_card_reconciles(b.metrics_addr).await,
        0.0,
        "the standby does not reconcile"
    );

    // A stops: it releases the Lease on the way out, and B takes over.
    let _ = stop_a.send(true);
    tokio::time::timeout(Duration::from_secs(10), a.finished())
        .await
        .expect("the leader stops within 10s")
        .expect("the leader stops cleanly");
    assert_ne!(
        lease_holder(&client, &ns).await.as_deref(),
        Some("replica-a"),
        "the Lease is released on shutdown"
    );
    wait_lease_holder(&client, &ns, Some("replica-b")).await;
    until_http(b.health_addr, "/readyz", |code, body| {
        code == 200 && body == "ok"
    })
    .await;
    apply(&cards, &inline_card("second")).await;
    wait_ready_card(&cards, "second").await;
    assert!(skill_card_reconciles(b.metrics_addr).await >= 1.0);

    // Someone else takes the Lease from B (as after a long pause of B): B must stop.
    let taken = json!({"spec": {
        "holderIdentity": "intruder",
        "renewTime": MicroTime(Timestamp::now()),
        "leaseDurationSeconds": 3600,
    }});
    Api::<Lease>::namespaced(client.clone(), &ns)
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&taken))
        .await
        .expect("take the Lease");
    let outcome = tokio::time::timeout(Duration::from_secs(20), b.finished())
        .await
        .expect("a replica that lost its Lease stops within 20s");
    let error = outcome.expect_err("losing the Lease is an error, so the pod restarts");
    assert!(format!("{error:#}").contains("lost the Lease"), "{error:#}");
    apply(&cards, &inline_card("third")).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let third = cards.get("third").await.expect("get");
    assert!(
        third.status.is_none(),
        "nobody reconciles after the Lease was lost: {:?}",
        third.status
    );
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_before_a_standby_takes_over() {
    let env = env().await;
    let ns = env.namespace("ops-cutoff").await.expect("namespace");
    let client = env.client();
    let proxy = LoopbackProxy::start(env.apiserver_addr()).await;
    let behind_proxy =
        Client::try_from(env.kube_config_via(proxy.addr)).expect("a client through the proxy");

    let (a, _stop_a) = replica(&behind_proxy, &ns, "replica-a").await;
    wait_lease_holder(&client, &ns, Some("replica-a")).await;
    let (_b, _stop_b) = replica(&client, &ns, "replica-b").await;

    proxy.cut();
    let a_stopped = tokio::spawn(async move {
        let outcome = a.finished().await;
        (tokio::time::Instant::now(), outcome)
    });
    wait_lease_holder(&client, &ns, Some("replica-b")).await;
    let b_leads = tokio::time::Instant::now();
    let (stopped_at, outcome) = tokio::time::timeout(Duration::from_secs(20), a_stopped)
        .await
        .expect("the cut-off leader stops")
        .expect("its task does not panic");
    let error = outcome.expect_err("a leader that stops for lack of renewal exits with an error");
    assert!(
        format!("{error:#}").contains("no renewal confirmed"),
        "{error:#}"
    );
    assert!(
        stopped_at <= b_leads,
        "the cut-off leader stopped {:?} after the standby took over",
        stopped_at - b_leads
    );
}

/// A running `agentic-operator run` process, killed if the test ends early.
struct Process {
    child: tokio::process::Child,
    health: SocketAddr,
    metrics: SocketAddr,
    /// Every line it printed, for failure messages.
    output: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts the binary against the test control plane, with leader election in `ns`, and
    /// waits until it reports where it serves probes and metrics.
    async fn start(ns: &str, identity: &str) -> Self {
        let env = env().await;
        let mut child = operator_command(operator_binary(), env, ns)
            .args(["--leader-elect", "--log-format", "json"])
            .env("POD_NAMESPACE", ns)
            .env("POD_NAME", identity)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start agentic-operator");
        let output = Arc::new(Mutex::new(Vec::new()));
        let (addrs_tx, addrs_rx) = oneshot::channel();
        let mut addrs_tx = Some(addrs_tx);
        let stdout = child.stdout.take().expect("stdout");
        let lines = output.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(addrs) = serving_addrs(&line)
                    && let Some(tx) = addrs_tx.take()
                {
                    let _ = tx.send(addrs);
                }
                lines.lock().expect("output lock").push(line);
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let lines = output.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                lines.lock().expect("output lock").push(line);
            }
        });
        let Ok(Ok((health, metrics))) = tokio::time::timeout(CONVERGE, addrs_rx).await else {
            panic!(
                "agentic-operator never reported its addresses; output:\n{}",
                output.lock().expect("output lock").join("\n")
            );
        };
        Self {
            child,
            health,
            metrics,
            output,
        }
    }

    /// Sends SIGTERM and returns the exit code, within `limit`.
    async fn terminate(mut self, limit: Duration) -> Option<i32> {
        let pid = self.child.id().expect("the process runs");
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("wait").code(),
            Err(elapsed) => panic!(
                "agentic-operator did not exit within {limit:?} of SIGTERM ({elapsed}); output:\n{}",
                self.output.lock().expect("output lock").join("\n")
            ),
        }
    }
}

/// The probe and metrics addresses from the JSON log line announcing them.
fn serving_addrs(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let log: Value = serde_json::from_str(line).ok()?;
    if log["message"] != "serving probes and metrics" {
        return None;
    }
    Some((
        log["health"].as_str()?.parse().ok()?,
        log["metrics"].as_str()?.parse().ok()?,
    ))
}

#[tokio::test]
async fn the_binary_hands_the_lease_over_on_sigterm_and_exits_0() {
    let env = env().await;
    let ns = env.namespace("ops-binary").await.expect("namespace");
    let client = env.client();
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);

    let a = Process::start(&ns, "binary-a").await;
    wait_lease_holder(&client, &ns, Some("binary-a")).await;
    let b = Process::start(&ns, "binary-b").await;
    assert_eq!(
        http_get(b.health, "/readyz").await.expect("readyz"),
        (200, "standby: waiting for leadership".to_owned())
    );
    assert_eq!(
        http_get(a.health, "/healthz").await.expect("healthz"),
        (200, "ok".to_owned())
    );
    until_http(a.health, "/readyz", |code, body| {
        code == 200 && body == "ok"
    })
    .await;
    apply(&cards, &inline_card("first")).await;
    wait_ready_card(&cards, "first").await;
    assert!(skill_card_reconciles(a.metrics).await >= 1.0);
    assert_eq!(
        skill_card_reconciles(b.metrics).await,
        0.0,
        "the standby does not reconcile"
    );

    let code = a.terminate(Duration::from_secs(10)).await;
    assert_eq!(code, Some(0), "SIGTERM is a clean shutdown");
    assert_ne!(
        lease_holder(&client, &ns).await.as_deref(),
        Some("binary-a"),
        "the Lease is released on the way out"
    );
    // B was waiting for A's Lease to expire (15s at most); then it reconciles.
    wait_lease_holder(&client, &ns, Some("binary-b")).await;
    apply(&cards, &inline_card("second")).await;
    wait_ready_card(&cards, "second").await;
    assert!(skill_card_reconciles(b.metrics).await >= 1.0);

    let code = b.terminate(Duration::from_secs(10)).await;
    assert_eq!(code, Some(0));
    wait_lease_holder(&client, &ns, None).await;
}
