//! Skill usage from goose's own OpenTelemetry, on the test node: goose (the test image of
//! `goose_node`) runs in a real pod with the `OTEL_*` variables the operator gives it and a
//! scripted model that loads two of the run's three skills (one twice) and a name the run
//! did not mount; the operator's receiver, on this machine's address on the node's bridge,
//! takes goose's spans with the run's bearer, and the run's status records exactly those
//! loads within seconds of the run's end.
//!
//! The operator forwards the run's trace to Jaeger, the user's collector here: read back
//! through Jaeger's query API, the run is one trace holding the operator's spans and
//! goose's, the loads name the skills with their pinned digests, and no message content is
//! anywhere in it.
//!
//! Needs `GOOSE_BIN` ([`agentic_integration_tests::goose_bin`]) and `JAEGER_BIN`
//! (`hack/install-jaeger.sh`).

use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase, AgentSpec, ObjectRef, SkillCard};
use agentic_core::sandbox::TraceReceiver;
use agentic_core::trace::RunTrace;
use agentic_integration_tests::trace_json::{
    attribute, attribute_keys, hex, named, spans, spans_of_service,
};
use agentic_integration_tests::{
    agent_log, apply, events_about, goose_bin, goose_run, image_card, llm_agent_spec, node_env,
    push, ready_agent, run_options, run_trace_in, stop_cleanly, wait_finished, write_skill,
};
use agentic_operator::operator::{self, BackendChoice, RunOptions};
use agentic_operator::otlp::{Limits, OtlpOptions};
use agentic_testenv::{Jaeger, push_goose_image};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

/// What the pod may take to pull goose's image and run; the wait below is derived from them.
const STARTUP_DEADLINE_SECONDS: i32 = 300;
const ACTIVE_DEADLINE_SECONDS: i64 = 120;
/// How soon after the run's end its status shows the loads: the receiver wakes the run's
/// pass at most every 2 s (`otlp::usage::WRITE_INTERVAL`), goose exports before it exits.
const RECORDED_WITHIN: Duration = Duration::from_secs(5);
/// goose's `service.name` (it sets none from `OTEL_SERVICE_NAME` here: the pod gets none).
const GOOSE_SERVICE: &str = "goose";
/// The operator's `service.name` (`traces::SERVICE_NAME`).
const OPERATOR_SERVICE: &str = "agentic-operator";

#[tokio::test]
async fn goose_reports_its_skill_loads_and_the_status_and_the_users_collector_get_them() {
    let env = node_env().await;
    let jaeger = Jaeger::start().await.expect("starting jaeger (JAEGER_BIN)");
    let registry = env.registry_addr().expect("the node's registry");
    let goose_image = push_goose_image(
        &registry,
        &goose_bin(),
        std::path::Path::new(env!("CARGO_BIN_EXE_goose-fake-llm")),
    )
    .await
    .expect("the goose image is pushed");
    // The receiver listens on this machine's address on the node's bridge, which the pod
    // reaches, and nowhere else.
    let host = env.node_host_address().expect("the node's bridge address");
    let ns = env.namespace("skill-usage").await.expect("namespace");
    let client = env.client();
    let (stop, shutdown) = watch::channel(false);
    let bind = std::net::SocketAddr::from((host, 0));
    // The port is the OS's choice: bound first, then advertised.
    let probe = std::net::TcpListener::bind(bind).expect("a free port on the bridge address");
    let port = probe.local_addr().expect("an address").port();
    drop(probe);
    let started = operator::start(
        client.clone(),
        RunOptions {
            insecure_registries: vec![registry.clone()],
            sandbox_backend: BackendChoice::Pod,
            trace_collector: Some(jaeger.otlp_endpoint()),
            otlp: Some(OtlpOptions {
                bind: (host, port).into(),
                receiver: TraceReceiver {
                    endpoint: format!("http://{host}:{port}"),
                    capture_content: true,
                },
                limits: Limits::default(),
            }),
            ..run_options(&ns)
        },
        shutdown,
    )
    .await
    .expect("the operator starts");

    // Image skills: their loads carry the pinned digest as their source. beta has a
    // supporting file the model loads too.
    let scratch = tempfile::tempdir().expect("tempdir");
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let skills = [
        ("alpha", "Refactor with care."),
        ("beta", "Write the tests first."),
        ("gamma", "Never loaded."),
    ];
    for (name, description) in skills {
        let dir = write_skill(scratch.path(), name, description);
        if name == "beta" {
            std::fs::create_dir_all(dir.join("references")).expect("mkdir");
            std::fs::write(dir.join("references/guide.md"), "Red, green, refactor.\n")
                .expect("write");
        }
        let pushed = push(&[dir], &format!("{ns}/{name}:1")).await;
        apply(
            &cards,
            &image_card(name, pushed.split('@').next().expect("tagged")),
        )
        .await;
    }
    let spec = AgentSpec {
        skill_cards: skills
            .iter()
            .map(|(name, _)| ObjectRef {
                name: (*name).into(),
            })
            .collect(),
        ..llm_agent_spec(goose_image)
    };
    ready_agent(&client, &ns, "coder", spec).await;

    // The scripted model loads alpha twice, beta and its supporting file, and a skill the
    // run did not mount.
    let loads = [
        "alpha",
        "beta",
        "alpha",
        "beta/references/guide.md",
        "baked-in",
    ];
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &goose_run(
            "usage-run",
            "coder",
            "Use your skills.",
            &loads,
            (STARTUP_DEADLINE_SECONDS, ACTIVE_DEADLINE_SECONDS),
        ),
    )
    .await;
    let finished = wait_finished(
        &runs,
        "usage-run",
        STARTUP_DEADLINE_SECONDS,
        ACTIVE_DEADLINE_SECONDS,
    )
    .await;
    let ended = tokio::time::Instant::now();
    let log = agent_log(&client, &ns, &finished).await;
    assert_eq!(
        finished.status.as_ref().and_then(|s| s.phase),
        Some(AgentRunPhase::Succeeded),
        "{finished:#?}\n{log}"
    );

    let recorded = loop {
        let run = runs.get("usage-run").await.expect("the run");
        let status = run.status.clone().expect("a status");
        if !status.unmounted_skill_loads.is_empty()
            && status.skills.iter().filter(|s| s.loads.is_some()).count() == 2
        {
            break status;
        }
        assert!(
            ended.elapsed() < RECORDED_WITHIN,
            "the loads were not recorded within {RECORDED_WITHIN:?} of the run's end: {status:#?}\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let counted: Vec<(&str, Option<i64>)> = recorded
        .skills
        .iter()
        .map(|skill| (skill.name.as_str(), skill.loads))
        .collect();
    assert_eq!(
        counted,
        [("alpha", Some(2)), ("beta", Some(2)), ("gamma", None)],
        "{recorded:#?}"
    );
    assert!(
        recorded.skills[..2]
            .iter()
            .all(|s| s.first_loaded_at.is_some())
    );
    assert!(recorded.skills[2].first_loaded_at.is_none());
    assert_eq!(
        serde_json::to_value(&recorded.unmounted_skill_loads).expect("JSON"),
        json!([{"name": "baked-in", "count": 1}])
    );
    let events = events_about(&client, &ns, "AgentRun", "usage-run").await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("UnmountedSkillLoaded")),
        "{events:#?}"
    );

    let trace = RunTrace::of_run(&finished.uid().expect("uid"));
    let trace_id = trace.trace_id_hex();
    // goose exported its spans before it exited, so before the run ended, and the receiver
    // queued them for the collector before answering: they precede the root span.
    let stored = run_trace_in(&jaeger, "usage-run", &trace).await;
    let all = spans(&stored);
    assert!(
        all.iter().all(|span| span["traceId"] == trace_id.as_str()),
        "{stored:#}"
    );

    // The operator's spans: the run's root, each skill's resolution, the sandbox, the agent.
    let operator_spans = spans_of_service(&stored, OPERATOR_SERVICE);
    let root = named(&operator_spans, "AgentRun usage-run");
    assert_eq!(root["spanId"], hex(&trace.root_span_id()).as_str());
    for name in [
        "skill alpha",
        "skill beta",
        "skill gamma",
        "sandbox create",
        "agent start",
        "agent run",
    ] {
        assert_eq!(
            named(&operator_spans, name)["parentSpanId"],
            root["spanId"],
            "{name}"
        );
    }

    // goose's spans, every one of them in the run's trace: goose starts traces of its own
    // (it ignores TRACEPARENT), and none of them reached the collector as such.
    let goose_spans = spans_of_service(&stored, GOOSE_SERVICE);
    assert!(!goose_spans.is_empty(), "no span of goose's in {stored:#}");
    let goose_traces = jaeger
        .traces_of_service(GOOSE_SERVICE)
        .await
        .expect("query")
        .expect("goose's traces");
    let goose_trace_ids: std::collections::BTreeSet<&str> = spans(&goose_traces)
        .iter()
        .filter_map(|span| span["traceId"].as_str())
        .collect();
    assert_eq!(
        goose_trace_ids,
        [trace_id.as_str()].into(),
        "goose's spans are all in the run's trace"
    );

    // Its loads, named with the skill each loaded and, for a mounted skill, its pinned
    // source; the file goose loaded as the skill's resource.
    let pinned = |name: &str| {
        let skill = recorded
            .skills
            .iter()
            .find(|skill| skill.name == name)
            .expect("a pinned skill");
        assert!(skill.image.contains("@sha256:"), "{skill:?}");
        format!("oci://{}", skill.image)
    };
    let mut load_spans: Vec<(Option<&str>, Option<&str>, Option<&str>)> = goose_spans
        .iter()
        .filter(|span| attribute(span, "gen_ai.tool.name") == Some("load_skill"))
        .map(|span| {
            (
                attribute(span, "gen_ai.skill.name"),
                attribute(span, "gen_ai.skill.resource.name"),
                attribute(span, "gen_ai.skill.source.uri"),
            )
        })
        .collect();
    load_spans.sort_unstable();
    let (alpha, beta) = (pinned("alpha"), pinned("beta"));
    assert_eq!(
        load_spans,
        [
            (Some("alpha"), None, Some(alpha.as_str())),
            (Some("alpha"), None, Some(alpha.as_str())),
            (Some("baked-in"), None, None),
            (Some("beta"), None, Some(beta.as_str())),
            (
                Some("beta"),
                Some("references/guide.md"),
                Some(beta.as_str())
            ),
        ],
        "{stored:#}"
    );

    // No message content anywhere, though goose sent it (the content switch is on).
    let keys = attribute_keys(&stored);
    for content in [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ] {
        assert!(
            !keys.iter().any(|key| key == content),
            "{content} in {stored:#}"
        );
    }
    assert!(
        !keys
            .iter()
            .any(|key| agentic_otlp::is_content_attribute(key)),
        "{keys:?}"
    );
    stop_cleanly(stop, started).await;
}
