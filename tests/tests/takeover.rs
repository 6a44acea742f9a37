//! What a run may touch and what it follows: objects someone else made under the names of a
//! run's objects are never changed, references to objects the operator cannot read are
//! reported instead of retried, and a run with a name past 63 characters follows its pod.
//! No kubelet runs here, so the tests play its part and write the pod's status.

use std::collections::BTreeMap;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentSpec, Gateway, GatewayModel, GatewaySpec, ObjectRef,
    SkillCard, SkillCardSpec,
};
use agentic_integration_tests::{
    agent_run, apply, condition, has_condition, kubelet, meta, scenario, wait_agent_ready,
    wait_for, wait_for_sandbox, wait_phase,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// An inline SkillCard `notes`, a Gateway without credentials and the Agent `coder` using
/// both; waits until the Agent is Ready.
async fn fixture(client: &Client, ns: &str) {
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("notes"),
            spec: SkillCardSpec {
                inline: Some(
                    "---\nname: notes\ndescription: Keep notes.\n---\nWrite it down.\n".into(),
                ),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), ns);
    apply(
        &gateways,
        &Gateway {
            metadata: meta("llm"),
            spec: GatewaySpec {
                provider: "openai".into(),
                endpoint: None,
                credential_ref: None,
                model: GatewayModel {
                    name: "gpt-test".into(),
                    context_window: 8_000,
                    tier: None,
                },
            },
            status: None,
        },
    )
    .await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), ns);
    apply(
        &agents,
        &Agent {
            metadata: meta("coder"),
            spec: AgentSpec {
                image: "harness.invalid/agent:1".into(),
                gateways: vec![ObjectRef { name: "llm".into() }],
                skill_cards: vec![ObjectRef {
                    name: "notes".into(),
                }],
                skill_delivery: "inject".into(),
                ..AgentSpec::default()
            },
            status: None,
        },
    )
    .await;
    wait_agent_ready(&agents, "coder").await;
}

/// Waits until the run `name` is blocked by an object it does not control, and returns the
/// message.
async fn wait_name_taken(runs: &Api<AgentRun>, name: &str) -> String {
    let blocked = wait_for(runs, name, "ObjectNameTaken", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| {
            s.sandbox_name.is_none()
                && has_condition(&s.conditions, "Ready", "False", "ObjectNameTaken")
        })
    })
    .await;
    condition(&blocked.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone()
}

#[tokio::test]
async fn a_run_never_takes_over_a_secret_of_its_name_and_leaves_config_maps_alone() {
    let (ns, client, operator) = scenario("takeover", SandboxBackend::Pod).await;
    fixture(&client, &ns).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // The admin's ConfigMap is named like the ConfigMap a run of `app` had before its files
    // moved to its pod's annotations: nothing of the run's.
    let admin_map = maps
        .create(
            &kube::api::PostParams::default(),
            &ConfigMap {
                metadata: meta("app-config"),
                data: Some(BTreeMap::from([("admin".to_string(), "yes".to_string())])),
                ..ConfigMap::default()
            },
        )
        .await
        .expect("create the admin's ConfigMap");
    // And a Secret named like the ACP key Secret of run `tool`.
    let admin_secret = secrets
        .create(
            &kube::api::PostParams::default(),
            &Secret {
                metadata: meta("tool-acp-key"),
                string_data: Some(BTreeMap::from([(
                    "secret-key".to_string(),
                    "known-to-the-admin".to_string(),
                )])),
                ..Secret::default()
            },
        )
        .await
        .expect("create the admin's Secret");

    apply(&runs, &agent_run("app", "coder")).await;
    apply(&runs, &agent_run("tool", "coder")).await;
    wait_for_sandbox(&runs, "app").await;
    let message = wait_name_taken(&runs, "tool").await;
    assert!(message.contains("Secret tool-acp-key"), "{message}");

    let map = maps.get("app-config").await.expect("the admin's ConfigMap");
    assert_eq!(
        map.resource_version(),
        admin_map.resource_version(),
        "the admin's ConfigMap was not written: {map:#?}"
    );
    assert!(map.owner_references().is_empty(), "{map:#?}");
    let secret = secrets
        .get("tool-acp-key")
        .await
        .expect("the admin's Secret");
    assert_eq!(secret.resource_version(), admin_secret.resource_version());
    assert!(secret.owner_references().is_empty(), "{secret:#?}");
    let sandboxes: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(sandboxes, ["app"], "the blocked run `tool` got no sandbox");
    operator.stop().await;
}

#[tokio::test]
async fn a_malformed_skill_card_is_reported_on_the_agent_and_the_run_without_retries() {
    let (ns, client, operator) = scenario("malformed", SandboxBackend::Pod).await;
    fixture(&client, &ns).await;

    // The card's status as another writer left it: the CRD's schema accepts the time (the
    // API server's date-time check lets any character stand for the decimal point), the
    // operator's types do not.
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let mut card = serde_json::to_value(cards.get("notes").await.expect("card")).expect("json");
    card["status"]["conditions"][0]["lastTransitionTime"] = json!(MALFORMED_TIME);
    // Untyped, since the typed API could not read the answer.
    let untyped: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::erase::<SkillCard>(&()));
    untyped
        .patch_status(
            "notes",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": card["status"]})),
        )
        .await
        .expect("the API server accepts the status");
    let read = cards.get("notes").await;
    assert!(
        read.is_err(),
        "the operator's types refuse the card, or this test proves nothing: {read:?}"
    );

    // The Agent says why it is not Ready, naming the card and the deserialization error
    // (which quotes the part of the time it could not parse).
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let agent = wait_for(&agents, "coder", "SkillCardNotReady", |a: &Agent| {
        a.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "False", "SkillCardNotReady"))
    })
    .await;
    let message = condition(&agent.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(
        message.contains("SkillCard \"notes\"")
            && message.contains("does not match the schema")
            && message.contains("x5Z"),
        "{message}"
    );

    // A run of the Agent waits with the reason in its status.
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &agent_run("blocked", "coder")).await;
    let blocked = wait_for(&runs, "blocked", "AgentNotReady", |r: &AgentRun| {
        r.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "False", "AgentNotReady"))
    })
    .await;
    let message = condition(&blocked.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(message.contains("does not match the schema"), "{message}");

    // A Warning event on the card itself.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let warned = wait_for_event(&events, "SkillCard", "notes", "MalformedObject").await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(
        warned.note.as_deref().unwrap_or_default().contains("x5Z"),
        "{warned:#?}"
    );

    // Reported, not retried: no pass failed on the card.
    let failed: Vec<String> = operator
        .metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("agentic_reconcile_errors_total{"))
        .filter(|l| l.contains(r#"kind="Agent""#) || l.contains(r#"kind="AgentRun""#))
        .map(str::to_string)
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    operator.stop().await;
}

/// A `lastTransitionTime` the API server's date-time format accepts and an RFC 3339 parser
/// refuses: `x` where the decimal point belongs.
const MALFORMED_TIME: &str = "2026-01-01T00:00:00x5Z";

/// Waits for an event with `reason` about the `kind` object `name`.
async fn wait_for_event(events: &Api<Event>, kind: &str, name: &str, reason: &str) -> Event {
    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    loop {
        let found = events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    })
            });
        if let Some(event) = found {
            return event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} event about {kind} {name}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_run_named_past_63_characters_follows_its_pod() {
    let name = format!(
        "a-run-whose-name-is-longer-than-a-label-value-may-be-{}",
        "x".repeat(20)
    );
    assert!(name.len() > 63);
    for backend in [SandboxBackend::Pod, SandboxBackend::AgentSandbox] {
        let (ns, client, operator) = scenario("long-run-name", backend).await;
        fixture(&client, &ns).await;
        let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
        apply(&runs, &agent_run(&name, "coder")).await;
        let sandbox = wait_for_sandbox(&runs, &name)
            .await
            .status
            .and_then(|s| s.sandbox_name)
            .expect("sandbox name");
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        wait_for(&pods, &sandbox, "the sandbox pod", |_: &Pod| true).await;

        kubelet(&pods, &sandbox, None).await;
        wait_phase(&runs, &name, AgentRunPhase::Running).await;
        kubelet(&pods, &sandbox, Some(0)).await;
        wait_phase(&runs, &name, AgentRunPhase::Succeeded).await;
        operator.stop().await;
    }
}

#[tokio::test]
async fn an_inline_skill_card_never_takes_over_a_config_map_of_its_name() {
    let (ns, client, operator) = scenario("takeover-card", SandboxBackend::Pod).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let foreign = apply(
        &config_maps,
        &ConfigMap {
            metadata: meta("docs-skill"),
            data: Some(BTreeMap::from([("owner".into(), "the admin".into())])),
            ..ConfigMap::default()
        },
    )
    .await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("docs"),
            spec: SkillCardSpec {
                inline: Some("---\nname: docs\ndescription: Read the docs.\n---\nRead.\n".into()),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    let blocked = wait_for(&cards, "docs", "ObjectNameTaken", |card: &SkillCard| {
        card.status.as_ref().is_some_and(|status| {
            has_condition(&status.conditions, "Ready", "False", "ObjectNameTaken")
        })
    })
    .await;
    let conditions = blocked.status.expect("status").conditions;
    let message = &condition(&conditions, "Ready").expect("Ready").message;
    assert!(message.contains("ConfigMap docs-skill"), "{message}");
    let after = config_maps.get("docs-skill").await.expect("still there");
    assert_eq!(
        after.resource_version(),
        foreign.resource_version(),
        "untouched"
    );
    assert!(after.owner_references().is_empty(), "{after:#?}");
    assert_eq!(after.data, foreign.data);

    // Once the name is free, the card makes and controls its own.
    config_maps
        .delete("docs-skill", &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    wait_for(&cards, "docs", "Ready", |card: &SkillCard| {
        card.status
            .as_ref()
            .is_some_and(|status| has_condition(&status.conditions, "Ready", "True", "SkillValid"))
    })
    .await;
    let own = config_maps.get("docs-skill").await.expect("the card's own");
    assert_eq!(own.owner_references()[0].kind, "SkillCard");
    operator.stop().await;
}
