//! Agent and Gateway reconciliation against a real API server: readiness follows the
//! referenced objects through watches, duplicates and unknown delivery modes are reported.

use std::collections::BTreeMap;

use agentic_api::{
    Agent, AgentSpec, CredentialRef, Gateway, GatewayModel, GatewaySpec, ObjectRef, SkillCard,
    SkillCardSpec, SkillType,
};
use agentic_integration_tests::{
    LLM_KEY, apply, condition, has_condition, llm_server, meta, scenario, wait_for,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

pub fn inline_card(name: &str, skill: &str, skill_type: SkillType) -> SkillCard {
    SkillCard {
        metadata: meta(name),
        spec: SkillCardSpec {
            inline: Some(format!(
                "---\nname: {skill}\ndescription: The {skill} skill.\n---\nBody.\n"
            )),
            skill_type,
            ..SkillCardSpec::default()
        },
        status: None,
    }
}

fn gateway(name: &str, secret: &str, key: Option<&str>) -> Gateway {
    Gateway {
        metadata: meta(name),
        spec: GatewaySpec {
            provider: "openai".into(),
            endpoint: Some(format!("{}/openai", llm_server())),
            credential_ref: Some(CredentialRef {
                secret_name: secret.into(),
                key: key.map(str::to_string),
            }),
            model: GatewayModel {
                name: "gpt-test".into(),
                context_window: 128_000,
                tier: None,
            },
        },
        status: None,
    }
}

fn agent(name: &str, cards: &[&str], gateways: &[&str], delivery: &str) -> Agent {
    Agent {
        metadata: meta(name),
        spec: AgentSpec {
            image: "harness.invalid/agent:1".into(),
            prompt: Some("You migrate code.".into()),
            gateways: gateways
                .iter()
                .map(|g| ObjectRef {
                    name: g.to_string(),
                })
                .collect(),
            skill_cards: cards
                .iter()
                .map(|c| ObjectRef {
                    name: c.to_string(),
                })
                .collect(),
            params: vec![],
            skill_delivery: delivery.into(),
            ..AgentSpec::default()
        },
        status: None,
    }
}

fn secret(name: &str, key: &str) -> Secret {
    Secret {
        metadata: meta(name),
        string_data: Some(BTreeMap::from([(key.to_string(), LLM_KEY.to_string())])),
        ..Secret::default()
    }
}

fn ready(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    status: &str,
    reason: &str,
) -> bool {
    has_condition(conditions, "Ready", status, reason)
}

#[tokio::test]
async fn gateway_turns_ready_when_its_secret_appears() {
    let (ns, client, operator) = scenario("gw", SandboxBackend::Pod).await;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    apply(&gateways, &gateway("llm", "llm-key", Some("apiKey"))).await;
    wait_for(&gateways, "llm", "SecretNotFound", |g: &Gateway| {
        g.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "False", "SecretNotFound"))
    })
    .await;

    apply(&secrets, &secret("llm-key", "wrong")).await;
    wait_for(&gateways, "llm", "SecretKeyNotFound", |g: &Gateway| {
        g.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "False", "SecretKeyNotFound"))
    })
    .await;

    // Fixing the Secret alone, without touching the Gateway, makes it Ready once the endpoint
    // answers with the key.
    secrets
        .delete("llm-key", &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    apply(&secrets, &secret("llm-key", "apiKey")).await;
    wait_for(&gateways, "llm", "Ready", |g: &Gateway| {
        g.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "True", "ConnectionVerified"))
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn agent_readiness_follows_its_skills_and_rejects_duplicate_names() {
    let (ns, client, operator) = scenario("agent", SandboxBackend::Pod).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    // References that do not exist yet are listed by name.
    apply(
        &agents,
        &agent(
            "migrator",
            &["java", "logging", "style"],
            &["llm"],
            "native",
        ),
    )
    .await;
    let waiting = wait_for(&agents, "migrator", "SkillCardNotFound", |a: &Agent| {
        a.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "False", "SkillCardNotFound"))
    })
    .await;
    let conditions = waiting.status.expect("status").conditions;
    let message = &condition(&conditions, "Ready").expect("Ready").message;
    for name in ["java", "logging", "style"] {
        assert!(message.contains(name), "{message}");
    }

    apply(
        &cards,
        &inline_card("java", "java-upgrade", SkillType::Skill),
    )
    .await;
    apply(
        &cards,
        &inline_card("logging", "no-system-out", SkillType::Rule),
    )
    .await;
    apply(&cards, &inline_card("style", "code-style", SkillType::Rule)).await;
    apply(&secrets, &secret("llm-key", "apiKey")).await;
    apply(&gateways, &gateway("llm", "llm-key", Some("apiKey"))).await;

    // Watches, not polling: the Agent turns Ready as its references do.
    let ready_agent = wait_for(&agents, "migrator", "Ready", |a: &Agent| {
        a.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "True", "AgentReady"))
    })
    .await;
    let status = ready_agent.status.expect("status");
    let names: Vec<&str> = status.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["code-style", "java-upgrade", "no-system-out"],
        "sorted by name"
    );
    assert_eq!(status.rules, ["code-style", "no-system-out"]);
    assert_eq!(status.delivery_mode.as_deref(), Some("native"));

    // A second card with a frontmatter name already taken.
    apply(
        &cards,
        &inline_card("java-copy", "java-upgrade", SkillType::Skill),
    )
    .await;
    apply(
        &agents,
        &agent(
            "migrator",
            &["java", "logging", "style", "java-copy"],
            &["llm"],
            "native",
        ),
    )
    .await;
    let dup = wait_for(&agents, "migrator", "DuplicateSkillName", |a: &Agent| {
        a.status
            .as_ref()
            .is_some_and(|s| ready(&s.conditions, "False", "DuplicateSkillName"))
    })
    .await;
    let message = condition(&dup.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(
        message.contains("java-upgrade")
            && message.contains("java")
            && message.contains("java-copy"),
        "names the skill and both SkillCards: {message}"
    );
    operator.stop().await;
}

#[tokio::test]
async fn unknown_skill_delivery_falls_back_to_inject_with_a_warning() {
    let (ns, client, operator) = scenario("delivery", SandboxBackend::Pod).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);

    apply(
        &cards,
        &inline_card("java", "java-upgrade", SkillType::Skill),
    )
    .await;
    apply(&agents, &agent("odd", &["java"], &[], "telepathy")).await;
    let odd = wait_for(&agents, "odd", "fallback to inject", |a: &Agent| {
        a.status.as_ref().is_some_and(|s| {
            s.delivery_mode.as_deref() == Some("inject")
                && has_condition(
                    &s.conditions,
                    "SkillDeliveryResolved",
                    "False",
                    "UnknownSkillDelivery",
                )
                && ready(&s.conditions, "True", "AgentReady")
        })
    })
    .await;
    let message = condition(
        &odd.status.expect("status").conditions,
        "SkillDeliveryResolved",
    )
    .expect("condition")
    .message
    .clone();
    assert!(message.contains("telepathy"), "{message}");

    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let deadline = tokio::time::Instant::now() + agentic_integration_tests::CONVERGE;
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        let warned = list.items.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("UnknownSkillDelivery")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("odd")
        });
        if warned {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Warning event for the unknown mode"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    operator.stop().await;
}
