//! The SkillCard controller's real pass against the fake API server.

use agentic_api::SkillCard;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::reconcile;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready};

/// An inline SkillCard named `name` whose SKILL.md names `skill`.
pub(crate) fn inline_card(name: &str, skill: &str) -> SkillCard {
    object(json!({
        "metadata": {"name": name, "uid": format!("uid-card-{name}")},
        "spec": {"inline": format!(
            "---\nname: {skill}\ndescription: Does {skill} things when asked to.\n---\n# {skill}\n"
        )},
    }))
}

#[tokio::test]
async fn a_valid_inline_card_is_ready_with_its_frontmatter_and_config_map() {
    let api = FakeApi::default();
    api.put(&inline_card("pdf", "pdf-tools"));
    pass::<SkillCard, _>(&api, &context(&api), "pdf", reconcile)
        .await
        .expect("a pass");
    let card: SkillCard = api.get(NS, "pdf").expect("the card");
    let status = card.status.expect("a status");
    assert_eq!(
        ready(&status.conditions),
        ("True".into(), "SkillValid".into())
    );
    assert_eq!(status.skill.expect("frontmatter").name, "pdf-tools");
    let config_maps = api.names::<ConfigMap>(NS);
    assert_eq!(config_maps.len(), 1, "{config_maps:?}");
    let config_map: ConfigMap = api.get(NS, &config_maps[0]).expect("the ConfigMap");
    let owner = &config_map.metadata.owner_references.expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("SkillCard", "pdf")
    );
}

#[tokio::test]
async fn an_invalid_inline_card_is_not_ready_and_mounts_nothing() {
    let api = FakeApi::default();
    api.put(&inline_card("bad", "Not_A_Name"));
    pass::<SkillCard, _>(&api, &context(&api), "bad", reconcile)
        .await
        .expect("a pass");
    let card: SkillCard = api.get(NS, "bad").expect("the card");
    let (status, reason) = ready(&card.status.expect("a status").conditions);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InvalidSkill")
    );
    assert!(api.names::<ConfigMap>(NS).is_empty());
}

#[tokio::test]
async fn a_settled_card_writes_nothing() {
    let api = FakeApi::default();
    api.put(&inline_card("pdf", "pdf-tools"));
    let ctx = context(&api);
    pass::<SkillCard, _>(&api, &ctx, "pdf", reconcile)
        .await
        .expect("a pass");
    api.clear_requests();
    pass::<SkillCard, _>(&api, &ctx, "pdf", reconcile)
        .await
        .expect("a pass");
    // The ConfigMap is read and found as it should be; nothing is written again.
    let writes = api.writes();
    assert!(writes.is_empty(), "{writes:?}");
}

#[tokio::test]
async fn an_inline_card_goose_would_read_cut_short_has_its_own_reason() {
    let api = FakeApi::default();
    let card: SkillCard = object(json!({
        "metadata": {"name": "cut", "uid": "uid-card-cut"},
        "spec": {"inline": "---\nname: pdf-tools\ndescription: Splits --- and merges PDFs when asked to.\n---\n# PDF\n"},
    }));
    api.put(&card);
    pass::<SkillCard, _>(&api, &context(&api), "cut", reconcile)
        .await
        .expect("a pass");
    let card: SkillCard = api.get(NS, "cut").expect("the card");
    let status = card.status.expect("a status");
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "GooseIncompatible".into())
    );
    let message = &agentic_core::conditions::find_condition(&status.conditions, "Ready")
        .expect("Ready")
        .message;
    assert!(message.contains("goose"), "{message}");
    assert!(api.names::<ConfigMap>(NS).is_empty());
}
