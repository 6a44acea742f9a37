//! The operator's OTLP trace receiver on the real control plane: a run's agent reports its
//! skill loads with its own bearer and the run's status records them; a missing or wrong
//! bearer, another run's name, an oversized body, too many spans, a flood and a run that
//! finished are refused, and none of them writes anything.

use std::net::SocketAddr;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase, ObjectRef, SkillCard};
use agentic_core::names::{acp_secret_name, sandbox_name};
use agentic_core::sandbox::{OTLP_TOKEN_KEY, TraceReceiver};
use agentic_fixtures::{load_skill_span, otlp_string as string};
use agentic_integration_tests::{
    agent_run, apply, env, events_about, eventually, kubelet, llm_agent_spec, ready_agent,
    run_options, stop_cleanly, wait_for, wait_for_sandbox, wait_phase,
};
use agentic_operator::operator::{self, RunOptions};
use agentic_operator::otlp::{Limits, OtlpOptions};
use agentic_otlp::ExportTraceServiceRequest;
use agentic_otlp::resource::v1::Resource;
use agentic_otlp::trace::v1::{ResourceSpans, ScopeSpans, Span};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::{Api, Client};
use prost::Message;
use serde_json::json;
use tokio::sync::watch;

/// Small limits, so that each refusal takes a few requests.
const LIMITS: Limits = Limits {
    max_body_bytes: 64 * 1024,
    max_decoded_bytes: 256 * 1024,
    max_spans: 8,
    requests_per_second: 2,
    finished_grace: Duration::from_secs(1),
};

/// goose's span of a `load_skill` call naming `skill`, with the prompt it answered.
fn load_span(skill: &str) -> Span {
    let mut span = load_skill_span(vec![7; 16], rand_id(), skill);
    span.attributes
        .push(string("gen_ai.input.messages", "the user's secret prompt"));
    span
}

fn rand_id() -> Vec<u8> {
    rand::random::<[u8; 8]>().to_vec()
}

/// A request of `spans`, whose resource claims to be the run `claimed`: the receiver must go
/// by the bearer, not by this.
fn request(spans: Vec<Span>, claimed: &str) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    string("konveyor.agentrun.name", claimed),
                    string("k8s.pod.name", claimed),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// Posts `body` to the receiver; the status code and body of the answer.
async fn post(
    addr: SocketAddr,
    bearer: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client");
    let mut request = client
        .post(format!("http://{addr}/v1/traces"))
        .header("content-type", content_type)
        .body(body);
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    let response = request.send().await.expect("the receiver answers");
    let code = response.status().as_u16();
    (code, response.text().await.expect("a body"))
}

async fn protobuf(
    addr: SocketAddr,
    bearer: Option<&str>,
    request: &ExportTraceServiceRequest,
) -> (u16, String) {
    post(
        addr,
        bearer,
        "application/x-protobuf",
        request.encode_to_vec(),
    )
    .await
}

/// The bearer in the run's Secret.
async fn bearer_of(client: &Client, ns: &str, run: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets
        .get(&acp_secret_name(&sandbox_name(run)))
        .await
        .expect("the run's Secret");
    String::from_utf8(secret.data.expect("data")[OTLP_TOKEN_KEY].0.clone()).expect("UTF-8")
}

#[tokio::test]
async fn a_run_reports_its_own_loads_and_every_refusal_writes_nothing() {
    let env = env().await;
    let ns = env.namespace("otlp").await.expect("namespace");
    let client = env.client();
    let (stop, shutdown) = watch::channel(false);
    let started = operator::start(
        client.clone(),
        RunOptions {
            otlp: Some(OtlpOptions {
                bind: ([127, 0, 0, 1], 0).into(),
                receiver: TraceReceiver {
                    endpoint: "http://receiver.example:4318".into(),
                    capture_content: true,
                },
                limits: LIMITS,
            }),
            ..run_options(&ns)
        },
        shutdown,
    )
    .await
    .expect("the operator starts");
    let addr = started.otlp_addr.expect("the receiver listens");

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let card: SkillCard = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
        "metadata": {"name": "notes"},
        "spec": {"inline": "---\nname: notes\ndescription: Take notes.\n---\nWrite them down.\n"},
    }))
    .expect("a SkillCard");
    apply(&cards, &card).await;
    let mut spec = llm_agent_spec("harness.example/agent:1");
    spec.skill_cards = vec![ObjectRef {
        name: "notes".into(),
    }];
    ready_agent(&client, &ns, "coder", spec).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    for name in ["reporter", "bystander", "finisher"] {
        apply(&runs, &agent_run(name, "coder")).await;
        wait_for_sandbox(&runs, name).await;
    }
    let reporter = bearer_of(&client, &ns, "reporter").await;
    let bystander = bearer_of(&client, &ns, "bystander").await;
    let finisher = bearer_of(&client, &ns, "finisher").await;
    assert!(
        reporter.starts_with(&format!("{ns}/reporter/")),
        "{reporter}"
    );
    let random = reporter.rsplit('/').next().expect("the random part");

    // The agent's pod env names the receiver and reads the bearer from the Secret.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods
        .get(&sandbox_name("reporter"))
        .await
        .expect("the sandbox pod");
    let env_of_agent =
        serde_json::to_string(&pod.spec.expect("a spec").containers[0].env).expect("serializes");
    assert!(
        env_of_agent.contains("http://receiver.example:4318"),
        "{env_of_agent}"
    );
    assert!(
        !env_of_agent.contains(random),
        "the bearer is never in the pod spec"
    );

    let loads = request(vec![load_span("notes"), load_span("baked-in")], "bystander");
    // No bearer, a made-up one, the reporter's secret under another run's name, a run that
    // does not exist.
    let (code, body) = protobuf(addr, None, &loads).await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("bearer"), "{body}");
    for wrong in [
        "nonsense".to_owned(),
        format!("{ns}/bystander/{random}"),
        format!("{ns}/nobody/{random}"),
        format!("{reporter}x"),
    ] {
        let (code, body) = protobuf(addr, Some(&wrong), &loads).await;
        assert_eq!(code, 401, "{wrong}: {body}");
    }

    // The reporter's own bearer: its loads count for it, whatever its resource claims.
    let (code, body) = protobuf(addr, Some(&reporter), &loads).await;
    assert_eq!(code, 200, "{body}");
    // The same over OTLP/JSON.
    let json_body =
        serde_json::to_vec(&request(vec![load_span("baked-in")], "bystander")).expect("JSON");
    let (code, body) = post(addr, Some(&reporter), "application/json", json_body).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, "{}");

    // Over the body limit, and over the span limit.
    let padding = "x".repeat(LIMITS.max_body_bytes);
    let mut oversized = request(vec![load_span("notes")], "reporter");
    oversized.resource_spans[0].scope_spans[0].spans[0].name = padding;
    let (code, body) = protobuf(addr, Some(&reporter), &oversized).await;
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("bytes"), "{body}");
    let crowded = request(
        (0..=LIMITS.max_spans).map(|_| load_span("notes")).collect(),
        "reporter",
    );
    let (code, body) = protobuf(addr, Some(&reporter), &crowded).await;
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("spans"), "{body}");

    // A flood: the budget refills at 2 requests a second from a burst of 4, so a stream of
    // requests meets a 429 well before 200 of them.
    let empty = request(Vec::new(), "reporter");
    let mut refused = None;
    for _ in 0..200 {
        let (code, body) = protobuf(addr, Some(&reporter), &empty).await;
        if code == 429 {
            refused = Some(body);
            break;
        }
        assert_eq!(code, 200, "{body}");
    }
    let refused = refused.expect("a flood is refused");
    assert!(refused.contains("requests per second"), "{refused}");

    // The accepted reports, once each: 1 load of the mounted skill, 2 of an unmounted name.
    let recorded = wait_for(&runs, "reporter", "the loads recorded", |run: &AgentRun| {
        run.status
            .as_ref()
            .is_some_and(|s| !s.unmounted_skill_loads.is_empty())
    })
    .await;
    let status = recorded.status.expect("a status");
    assert_eq!(status.skills.len(), 1);
    assert_eq!(status.skills[0].name, "notes");
    assert_eq!(status.skills[0].loads, Some(1));
    assert!(status.skills[0].first_loaded_at.is_some());
    assert_eq!(
        serde_json::to_value(&status.unmounted_skill_loads).expect("JSON"),
        json!([{"name": "baked-in", "count": 2}])
    );
    let warned = eventually("the UnmountedSkillLoaded Event", || {
        let client = client.clone();
        let ns = ns.clone();
        async move {
            events_about(&client, &ns, "AgentRun", "reporter")
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("UnmountedSkillLoaded"))
        }
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(warned.note.unwrap_or_default().contains("baked-in"));

    // The run the requests claimed to be, and whose name a wrong bearer used: untouched.
    let untouched = runs
        .get("bystander")
        .await
        .expect("the bystander")
        .status
        .expect("a status");
    assert!(untouched.unmounted_skill_loads.is_empty(), "{untouched:?}");
    assert!(
        untouched.skills.iter().all(|s| s.loads.is_none()),
        "{untouched:?}"
    );
    let (code, _) = protobuf(addr, Some(&bystander), &empty).await;
    assert_eq!(code, 200, "the bystander's own bearer works");

    // A run that finished longer than the grace ago is refused.
    kubelet(&pods, &sandbox_name("finisher"), Some(0)).await;
    wait_phase(&runs, "finisher", AgentRunPhase::Succeeded).await;
    tokio::time::sleep(LIMITS.finished_grace + Duration::from_secs(2)).await;
    let (code, body) = protobuf(addr, Some(&finisher), &loads).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("finished"), "{body}");
    let finished = runs
        .get("finisher")
        .await
        .expect("the finisher")
        .status
        .expect("a status");
    assert!(finished.unmounted_skill_loads.is_empty(), "{finished:?}");

    stop_cleanly(stop, started).await;
}
