//! Skill usage from goose's own OpenTelemetry, on the test node: goose (the test image of
//! `goose_node`) runs in a real pod with the `OTEL_*` variables the operator gives it and a
//! scripted model that loads two of the run's three skills (one twice) and a name the run
//! did not mount; the operator's receiver, on this machine's address on the node's bridge,
//! takes goose's spans with the run's bearer, and the run's status records exactly those
//! loads within seconds of the run's end.
//!
//! Needs `GOOSE_BIN` ([`agentic_integration_tests::goose_bin`]).

use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase, AgentSpec, ObjectRef, SkillCard, SkillCardSpec};
use agentic_core::sandbox::TraceReceiver;
use agentic_integration_tests::{
    agent_log, apply, events_about, goose_bin, goose_run, llm_agent_spec, meta, node_env,
    ready_agent, run_options, stop_cleanly, wait_finished,
};
use agentic_operator::operator::{self, BackendChoice, RunOptions};
use agentic_operator::otlp::{Limits, OtlpOptions};
use agentic_testenv::push_goose_image;
use kube::Api;
use serde_json::json;
use tokio::sync::watch;

/// What the pod may take to pull goose's image and run; the wait below is derived from them.
const STARTUP_DEADLINE_SECONDS: i32 = 300;
const ACTIVE_DEADLINE_SECONDS: i64 = 120;
/// How soon after the run's end its status shows the loads: the receiver wakes the run's
/// pass at most every 2 s (`otlp::usage::WRITE_INTERVAL`), goose exports before it exits.
const RECORDED_WITHIN: Duration = Duration::from_secs(5);

fn inline_skill(name: &str, description: &str) -> SkillCardSpec {
    SkillCardSpec {
        inline: Some(format!(
            "---\nname: {name}\ndescription: {description}\n---\n# {name}\nFollow it.\n"
        )),
        ..SkillCardSpec::default()
    }
}

#[tokio::test]
async fn goose_reports_its_skill_loads_and_the_status_records_exactly_those() {
    let env = node_env().await;
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

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let skills = [
        ("alpha", "Refactor with care."),
        ("beta", "Write the tests first."),
        ("gamma", "Never loaded."),
    ];
    for (name, description) in skills {
        apply(
            &cards,
            &SkillCard {
                metadata: meta(name),
                spec: inline_skill(name, description),
                status: None,
            },
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

    // The scripted model loads alpha twice, beta once, and a skill the run did not mount.
    let loads = ["alpha", "beta", "alpha", "baked-in"];
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
        [("alpha", Some(2)), ("beta", Some(1)), ("gamma", None)],
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
    stop_cleanly(stop, started).await;
}
