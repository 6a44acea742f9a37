//! The SkillCollection controller's real pass over SkillCards the real SkillCard pass made
//! Ready, against the fake API server.

use agentic_api::{SkillCard, SkillCollection};
use serde_json::json;

use super::reconcile;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready};
use crate::controllers::skillcard;
use crate::controllers::skillcard::scenarios::inline_card;

fn collection(cards: &[&str]) -> SkillCollection {
    let skills: Vec<_> = cards
        .iter()
        .map(|card| json!({"name": card, "skillCardRef": card}))
        .collect();
    object(json!({
        "metadata": {"name": "docs", "uid": "uid-col"},
        "spec": {"skills": skills},
    }))
}

#[tokio::test]
async fn a_collection_is_ready_once_every_card_it_lists_is() {
    let api = FakeApi::default();
    let ctx = context(&api);
    api.put(&inline_card("pdf", "pdf-tools"));
    api.put(&inline_card("xlsx", "xlsx-tools"));
    pass::<SkillCard, _>(&api, &ctx, "pdf", skillcard::reconcile)
        .await
        .expect("a card pass");
    api.put(&collection(&["pdf", "xlsx"]));
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    let status = api
        .get::<SkillCollection>(NS, "docs")
        .expect("the collection")
        .status;
    assert_eq!(ready(&status.expect("a status").conditions).0, "False");
    pass::<SkillCard, _>(&api, &ctx, "xlsx", skillcard::reconcile)
        .await
        .expect("a card pass");
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    let status = api
        .get::<SkillCollection>(NS, "docs")
        .expect("the collection")
        .status;
    let status = status.expect("a status");
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "AllSkillsResolved".into())
    );
}
