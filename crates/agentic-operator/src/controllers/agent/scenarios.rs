//! The Agent controller's real pass, over SkillCards the real SkillCard pass made Ready,
//! against the fake API server; and its watch mappers.

use agentic_api::{Agent, SkillCard};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::{Reference, agents_referencing, reconcile};
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready, status_after_pass};
use crate::controllers::skillcard;
use crate::controllers::skillcard::scenarios::inline_card;

fn agent(name: &str, cards: &[&str]) -> Agent {
    let cards: Vec<_> = cards.iter().map(|c| json!({"ref": c})).collect();
    object(json!({
        "metadata": {"name": name},
        "spec": {"image": "registry.test/harness:1", "skillCards": cards},
    }))
}

/// Stores the cards and makes them Ready through the SkillCard controller's own pass.
async fn ready_cards(api: &FakeApi, cards: &[(&str, &str)]) {
    let ctx = context(api);
    for (name, skill) in cards {
        api.put(&inline_card(name, skill));
        pass::<SkillCard, _>(api, &ctx, name, skillcard::reconcile)
            .await
            .expect("a card pass");
    }
}

#[tokio::test]
async fn an_agent_whose_cards_are_ready_is_ready_and_lists_its_skills() {
    let api = FakeApi::default();
    ready_cards(&api, &[("pdf", "pdf-tools"), ("xlsx", "xlsx-tools")]).await;
    api.put(&agent("coder", &["pdf", "xlsx"]));
    let status = status_after_pass::<Agent, _>(&api, &context(&api), "coder", reconcile).await;
    assert_eq!(ready(&status.conditions).0, "True");
    let names: Vec<_> = status.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pdf-tools", "xlsx-tools"]);
}

#[tokio::test]
async fn two_cards_with_one_frontmatter_name_keep_the_agent_from_ready() {
    let api = FakeApi::default();
    ready_cards(&api, &[("pdf", "pdf-tools"), ("pdf-copy", "pdf-tools")]).await;
    api.put(&agent("coder", &["pdf", "pdf-copy"]));
    let status = status_after_pass::<Agent, _>(&api, &context(&api), "coder", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "DuplicateSkillName".into())
    );
}

#[tokio::test]
async fn a_missing_card_keeps_the_agent_from_ready_until_it_is_made() {
    let api = FakeApi::default();
    api.put(&agent("coder", &["pdf"]));
    let ctx = context(&api);
    let status = status_after_pass::<Agent, _>(&api, &ctx, "coder", reconcile).await;
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SkillCardNotFound".into())
    );
    ready_cards(&api, &[("pdf", "pdf-tools")]).await;
    let status = status_after_pass::<Agent, _>(&api, &ctx, "coder", reconcile).await;
    assert_eq!(ready(&status.conditions).0, "True");
}

#[test]
fn a_changed_card_brings_back_the_agents_of_its_namespace_that_name_it() {
    let here = agent("coder", &["pdf"]);
    let other_card = agent("writer", &["docx"]);
    let mut elsewhere = agent("coder", &["pdf"]);
    elsewhere.metadata.namespace = Some("other".into());
    let agents = vec![&here, &other_card, &elsewhere];
    let picked = agents_referencing(agents, NS, Reference::SkillCard, "pdf");
    assert_eq!(picked, [ObjectRef::new("coder").within(NS)]);
}

#[tokio::test]
async fn an_agent_asking_for_inject_is_told_konveyors_harness_ignores_it() {
    let api = FakeApi::default();
    ready_cards(&api, &[("pdf", "pdf-tools")]).await;
    let mut inject = agent("coder", &["pdf"]);
    inject.spec.skill_delivery = "inject".into();
    api.put(&inject);
    let status = status_after_pass::<Agent, _>(&api, &context(&api), "coder", reconcile).await;
    assert_eq!(ready(&status.conditions).0, "True");
    let delivery = agentic_core::conditions::find_condition(
        &status.conditions,
        agentic_core::skills::CONDITION_SKILL_DELIVERY_RESOLVED,
    )
    .expect("the delivery condition");
    assert_eq!(
        (delivery.status.as_str(), delivery.reason.as_str()),
        ("True", "HarnessMayIgnoreInject")
    );
    assert!(delivery.message.contains("Konveyor's harness ignores"));
}
