use agentic_api::AgentSpec;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::conditions::find_condition;
use crate::sandbox::CredentialProxyMode;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("a time"))
}

/// An Agent naming the Gateway `llm`.
fn agent() -> Agent {
    let spec: AgentSpec = serde_json::from_value(json!({
        "image": "registry.test/harness:1",
        "gateways": [{"ref": "llm"}],
    }))
    .expect("an Agent spec");
    let mut agent = Agent::new("coder", spec);
    agent.metadata.generation = Some(3);
    agent
}

/// The Gateway `llm`, Ready at generation 1.
fn gateway() -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "llm", "namespace": "ns", "generation": 1},
        "spec": {"provider": "openai", "endpoint": "http://llm.test",
                 "model": {"name": "m", "contextWindow": 128_000}},
        "status": {"observedGeneration": 1, "conditions": [{
            "type": "Ready", "status": "True", "reason": "GatewayReady", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }))
    .expect("a Gateway")
}

fn no_skills() -> Result<ResolvedSkills, Error> {
    Ok(ResolvedSkills {
        skills: Vec::new(),
        rules: Vec::new(),
        rule_body_bytes: 0,
    })
}

fn ready(status: &AgentStatus) -> (&str, &str) {
    let ready = find_condition(&status.conditions, CONDITION_READY).expect("a Ready condition");
    (ready.status.as_str(), ready.reason.as_str())
}

#[test]
fn an_agent_whose_gateway_is_ready_is_ready_and_says_how_skills_are_delivered() {
    let (agent, gateway) = (agent(), gateway());
    let inputs = AgentInputs {
        gateways: vec![("llm", Lookup::Found(&gateway))],
        skills: no_skills(),
        defaults: Vec::new(),
        credential_proxy: &CredentialProxy::default(),
    };
    let status = decide_agent(&agent, inputs, AgentStatus::default(), &at(10));
    assert_eq!(ready(&status), ("True", "AgentReady"));
    assert_eq!(status.observed_generation, Some(3));
    assert!(find_condition(&status.conditions, CONDITION_SKILL_DELIVERY).is_some());
    assert!(find_condition(&status.conditions, CONDITION_GATEWAY_CONFIGURED).is_some());
    // Nothing read about default skills or rules: no condition about them.
    assert!(find_condition(&status.conditions, CONDITION_DEFAULT_SKILLS).is_none());
}

#[test]
fn a_missing_gateway_makes_the_agent_not_ready_and_deciding_again_changes_nothing() {
    let agent = agent();
    let decide = |old: AgentStatus, now: Time| {
        let inputs = AgentInputs {
            gateways: vec![("llm", Lookup::Missing)],
            skills: no_skills(),
            defaults: Vec::new(),
            credential_proxy: &CredentialProxy::default(),
        };
        decide_agent(&agent, inputs, old, &now)
    };
    let first = decide(AgentStatus::default(), at(10));
    assert_eq!(ready(&first), ("False", "GatewayNotFound"));
    let again = decide(first.clone(), at(20));
    assert_eq!(
        again, first,
        "the same inputs decide the same status, times included"
    );
}

#[test]
fn a_cloud_signed_gateway_makes_the_agent_say_its_runs_get_the_key_and_its_setting_counts() {
    let mut gateway = gateway();
    gateway.spec.provider = "aws-bedrock".into();
    gateway.spec.credential_ref = Some(agentic_api::CredentialRef {
        secret_name: "llm-key".into(),
        key: Some("api-key".into()),
    });
    let operator = CredentialProxy {
        mode: CredentialProxyMode::Preferred,
        image: Some("registry.test/operator:1".into()),
    };
    let decide = |agent: &Agent| {
        let inputs = AgentInputs {
            gateways: vec![("llm", Lookup::Found(&gateway))],
            skills: no_skills(),
            defaults: Vec::new(),
            credential_proxy: &operator,
        };
        decide_agent(agent, inputs, AgentStatus::default(), &at(10))
    };
    let mut agent = agent();
    let status = decide(&agent);
    let isolation = find_condition(&status.conditions, CONDITION_CREDENTIAL_ISOLATION)
        .expect("a CredentialIsolation condition");
    assert_eq!(
        (isolation.status.as_str(), isolation.reason.as_str()),
        ("False", "CloudSignedProvider")
    );
    assert!(
        !isolation.message.contains("do not start"),
        "{}",
        isolation.message
    );
    // Advisory: the Agent stays Ready, its runs decide for themselves.
    assert_eq!(ready(&status), ("True", "AgentReady"));

    agent.spec.credential_proxy = Some(CredentialProxyMode::Required);
    let status = decide(&agent);
    let isolation = find_condition(&status.conditions, CONDITION_CREDENTIAL_ISOLATION)
        .expect("a CredentialIsolation condition");
    assert!(
        isolation.message.contains("do not start"),
        "{}",
        isolation.message
    );
}

#[test]
fn an_agent_whose_gateway_was_not_read_says_nothing_of_isolation() {
    let agent = agent();
    let inputs = AgentInputs {
        gateways: vec![("llm", Lookup::Missing)],
        skills: no_skills(),
        defaults: Vec::new(),
        credential_proxy: &CredentialProxy::default(),
    };
    let status = decide_agent(&agent, inputs, AgentStatus::default(), &at(10));
    assert!(find_condition(&status.conditions, CONDITION_CREDENTIAL_ISOLATION).is_none());
}
