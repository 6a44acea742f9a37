//! A run is one trace, seen through a real trace backend: the operator's spans and its
//! agent's (sent to the operator's receiver as goose sends them), with Jaeger (JAEGER_BIN, from
//! `hack/install-jaeger.sh`, which `make test` sets) as the user's collector, read back
//! through its HTTP query API.

use agentic_api::{AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, ObjectRef, SkillCard};
use agentic_core::names::{acp_secret_name, sandbox_name};
use agentic_core::sandbox::{OTLP_TOKEN_KEY, TraceReceiver};
use agentic_core::trace::RunTrace;
use agentic_integration_tests::trace_json::{attribute, attribute_keys, hex, named, spans};
use agentic_integration_tests::{
    apply, env, image_card, kubelet, llm_agent_spec, meta, push, ready_agent, registry,
    run_options, run_trace_in, stop_cleanly, wait_for_sandbox, wait_phase, write_skill,
};
use agentic_operator::operator::{self, RunOptions};
use agentic_operator::otlp::{Limits, OtlpOptions};
use agentic_testenv::Jaeger;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::watch;

#[tokio::test]
async fn jaeger_stores_what_it_is_sent_under_the_runs_trace_id() {
    let jaeger = Jaeger::start().await.expect("starting jaeger (JAEGER_BIN)");
    let trace = RunTrace::of_run("0b7f3c9e-0000-4000-8000-000000000001");
    assert_eq!(
        jaeger.trace(&trace.trace_id_hex()).await.expect("query"),
        None,
        "an empty backend has no trace"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    let request = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "probe"}}]},
        "scopeSpans": [{"scope": {}, "spans": [{
            "traceId": trace.trace_id_hex(),
            "spanId": "00f067aa0ba902b7",
            "name": "probe",
            "kind": 1,
            "startTimeUnixNano": now.to_string(),
            "endTimeUnixNano": (now + 1_000).to_string(),
            "attributes": [{"key": "probe.key", "value": {"stringValue": "probe-value"}}],
        }]}],
    }]});
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(format!("{}/v1/traces", jaeger.otlp_endpoint()))
        .json(&request)
        .send()
        .await
        .expect("OTLP/HTTP export");
    assert!(response.status().is_success(), "{response:?}");

    let stored = jaeger
        .trace(&trace.trace_id_hex())
        .await
        .expect("query")
        .expect("the trace, once its export was answered");
    let stored_spans = spans(&stored);
    assert_eq!(stored_spans.len(), 1, "{stored}");
    assert_eq!(attribute(stored_spans[0], "probe.key"), Some("probe-value"));
}

#[tokio::test]
async fn a_run_is_one_trace_in_the_users_collector() {
    let jaeger = Jaeger::start().await.expect("starting jaeger (JAEGER_BIN)");
    let env = env().await;
    let ns = env.namespace("trace-run").await.expect("namespace");
    let client = env.client();
    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(
        client.clone(),
        RunOptions {
            insecure_registries: vec![registry().await],
            trace_collector: Some(jaeger.otlp_endpoint()),
            otlp: Some(OtlpOptions {
                bind: ([127, 0, 0, 1], 0).into(),
                receiver: TraceReceiver {
                    endpoint: "http://receiver.example:4318".into(),
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

    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let pushed = push(&[skill], &format!("{ns}/java:1")).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &image_card("java", pushed.split('@').next().expect("tagged")),
    )
    .await;
    let spec = AgentSpec {
        skill_cards: vec![ObjectRef {
            name: "java".into(),
        }],
        ..llm_agent_spec("harness.invalid/agent:1")
    };
    ready_agent(&client, &ns, "migrator", spec).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &AgentRun {
            metadata: meta("traced"),
            spec: AgentRunSpec {
                agent_ref: "migrator".into(),
                instructions: Some("Upgrade to Java 21.".into()),
                ..AgentRunSpec::default()
            },
            status: None,
        },
    )
    .await;
    let run = wait_for_sandbox(&runs, "traced").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let sandbox = run
        .status
        .as_ref()
        .and_then(|s| s.sandbox_name.clone())
        .expect("a sandbox");
    kubelet(&pods, &sandbox, None).await;
    wait_phase(&runs, "traced", AgentRunPhase::Running).await;
    // The agent reports as goose does: traces of its own (it ignores TRACEPARENT), a
    // skill load named only in the tool's arguments, and message content everywhere.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets
        .get(&acp_secret_name(&sandbox_name("traced")))
        .await
        .expect("the run's Secret");
    let bearer =
        String::from_utf8(secret.data.expect("data")[OTLP_TOKEN_KEY].0.clone()).expect("UTF-8");
    let receiver = started.otlp_addr.expect("the receiver listens");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let answer = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(format!("http://{receiver}/v1/traces"))
        .bearer_auth(&bearer)
        .json(&goose_request())
        .send()
        .await
        .expect("the receiver answers");
    assert!(answer.status().is_success(), "{answer:?}");
    kubelet(&pods, &sandbox, Some(0)).await;
    let run = wait_phase(&runs, "traced", AgentRunPhase::Succeeded).await;
    let pinned = &run.status.as_ref().expect("status").skills[0];

    let trace = RunTrace::of_run(&run.uid().expect("uid"));
    // The sandbox names the same trace, for agent-sandbox to parent its spans to.
    let pod = pods.get(&sandbox).await.expect("the sandbox pod");
    let context: Value = serde_json::from_str(
        pod.annotations()
            .get("opentelemetry.io/trace-context")
            .expect("the trace-context annotation"),
    )
    .expect("JSON");
    assert_eq!(context["traceparent"], trace.traceparent());

    let stored = run_trace_in(&jaeger, "traced", &trace).await;
    let all = spans(&stored);
    let root = named(&all, "AgentRun traced");
    let root_id = hex(&trace.root_span_id());
    assert_eq!(root["spanId"], root_id.as_str());
    assert_eq!(root["parentSpanId"].as_str().unwrap_or_default(), "");
    assert_eq!(
        attribute(root, "konveyor.agentrun.phase"),
        Some("Succeeded")
    );
    for name in [
        "skill java-upgrade",
        "sandbox create",
        "agent start",
        "agent run",
    ] {
        let span = named(&all, name);
        assert_eq!(span["parentSpanId"], root_id.as_str(), "{name}");
        assert_eq!(span["traceId"], trace.trace_id_hex().as_str(), "{name}");
    }
    let skill = named(&all, "skill java-upgrade");
    assert_eq!(attribute(skill, "gen_ai.skill.name"), Some("java-upgrade"));
    assert_eq!(
        attribute(skill, "gen_ai.skill.source.uri").map(str::to_owned),
        Some(format!("oci://{}", pinned.image)),
        "the pinned digest"
    );
    assert!(pinned.image.contains("@sha256:"), "{}", pinned.image);

    // goose's spans, in the run's trace: its roots under the run's root span, its children
    // under their own parents, the load named with the pinned source.
    for name in ["invoke_agent goose", "chat gpt", "execute_tool load_skill"] {
        named(&all, name);
    }
    assert_eq!(
        named(&all, "invoke_agent goose")["parentSpanId"],
        root_id.as_str()
    );
    assert_eq!(named(&all, "chat gpt")["parentSpanId"], root_id.as_str());
    let load = named(&all, "execute_tool load_skill");
    assert_eq!(load["parentSpanId"], GOOSE_ROOT);
    assert_eq!(attribute(load, "gen_ai.skill.name"), Some("java-upgrade"));
    assert_eq!(
        attribute(load, "gen_ai.skill.source.uri").map(str::to_owned),
        Some(format!("oci://{}", pinned.image))
    );
    for key in attribute_keys(&stored) {
        assert!(
            !agentic_otlp::is_content_attribute(&key),
            "{key} in {stored}"
        );
    }
    stop_cleanly(stop, started).await;
}

/// goose's root span id in [`goose_request`].
const GOOSE_ROOT: &str = "1111111111111111";

/// A request shaped like goose 1.52's: two traces of its own (it ignores TRACEPARENT), an
/// agent span with a `load_skill` call under it, and a chat span, with message content.
fn goose_request() -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    let span = |trace: &str, id: &str, parent: &str, name: &str, attributes: Value| {
        json!({
            "traceId": trace, "spanId": id, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": now.to_string(),
            "endTimeUnixNano": (now + 1_000_000).to_string(),
            "attributes": attributes,
        })
    };
    let text = |key: &str, value: &str| json!({"key": key, "value": {"stringValue": value}});
    json!({"resourceSpans": [{
        "resource": {"attributes": [text("service.name", "goose")]},
        "scopeSpans": [{"scope": {"name": "goose"}, "spans": [
            span("a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", GOOSE_ROOT, "", "invoke_agent goose", json!([
                text("gen_ai.operation.name", "invoke_agent"),
                text("gen_ai.input.messages", "the user's prompt"),
            ])),
            span("a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "2222222222222222", GOOSE_ROOT,
                "execute_tool load_skill", json!([
                    text("gen_ai.operation.name", "execute_tool"),
                    text("gen_ai.tool.name", "load_skill"),
                    text("gen_ai.tool.call.arguments", r#"{"name":"java-upgrade"}"#),
                    text("gen_ai.tool.call.result", "the skill's body"),
                ])),
            span("b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2", "3333333333333333", "", "chat gpt", json!([
                text("gen_ai.operation.name", "chat"),
                text("gen_ai.output.messages", "the model's reply"),
                text("gen_ai.system_instructions", "the system prompt"),
            ])),
        ]}],
    }]})
}
