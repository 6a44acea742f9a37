//! The SkillCollection controller's real pass over SkillCards the real SkillCard pass made
//! Ready, against the fake API server.

use std::time::Duration;

use agentic_api::{SKILL_COLLECTION_LABEL, SkillCard, SkillCollection, SkillCollectionStatus};
use kube::runtime::controller::Action;
use serde_json::json;

use super::reconcile;
use crate::apply::NAME_TAKEN_RETRY;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready, ready_message};
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

/// A collection of `spec.skills` entries: `image` entries generate cards, `skillCardRef`
/// entries name existing ones.
fn collection_of(entries: serde_json::Value) -> SkillCollection {
    object(json!({
        "metadata": {"name": "docs", "uid": "uid-col"},
        "spec": {"skills": entries},
    }))
}

fn collection_status(api: &FakeApi) -> SkillCollectionStatus {
    let collection: SkillCollection = api.get(NS, "docs").expect("the collection");
    collection.status.expect("a status")
}

const PINNED: &str = "registry.test/skills/pdf@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn an_entry_generates_a_card_the_collection_owns_and_waits_for() {
    let api = FakeApi::default();
    api.put(&collection_of(json!([{"name": "pdf", "image": PINNED}])));
    let action = pass::<SkillCollection, _>(&api, &context(&api), "docs", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::await_change());
    let card: SkillCard = api.get(NS, "docs-pdf").expect("the generated card");
    assert_eq!(card.spec.image.as_deref(), Some(PINNED));
    let owner = &card.metadata.owner_references.expect("an owner")[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        ("uid-col", Some(true))
    );
    let labels = card.metadata.labels.expect("labels");
    assert_eq!(labels[SKILL_COLLECTION_LABEL], "docs");
    let status = collection_status(&api);
    assert_eq!(status.resolved_skills, ["docs-pdf"]);
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SkillsNotReady".into())
    );
    let message = ready_message(&status.conditions);
    assert!(message.contains("no Ready condition yet"), "{message}");
}

#[tokio::test]
async fn a_card_the_collection_no_longer_lists_is_deleted_and_others_are_not() {
    let api = FakeApi::default();
    let ctx = context(&api);
    api.put(&collection_of(json!([
        {"name": "pdf", "image": PINNED},
        {"name": "xlsx", "image": PINNED},
    ])));
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    // A card with the collection's label that another owner controls.
    let mut foreign = inline_card("docs-other", "other");
    foreign.metadata.labels =
        Some([(SKILL_COLLECTION_LABEL.to_string(), "docs".to_string())].into());
    api.put(&foreign);
    api.put(&collection_of(json!([{"name": "pdf", "image": PINNED}])));
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    assert_eq!(api.names::<SkillCard>(NS), ["docs-other", "docs-pdf"]);
    let status = collection_status(&api);
    assert_eq!(status.resolved_skills, ["docs-pdf"]);
}

#[tokio::test]
async fn a_generated_name_another_card_holds_is_left_alone_and_retried() {
    let api = FakeApi::default();
    api.put(&inline_card("docs-pdf", "pdf-tools"));
    api.put(&collection_of(json!([
        {"name": "pdf", "image": PINNED},
        {"name": "xlsx", "image": PINNED},
    ])));
    let action = pass::<SkillCollection, _>(&api, &context(&api), "docs", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::requeue(NAME_TAKEN_RETRY));
    let theirs: SkillCard = api.get(NS, "docs-pdf").expect("their card");
    assert!(theirs.spec.inline.is_some() && theirs.spec.image.is_none());
    assert!(api.get::<SkillCard>(NS, "docs-xlsx").is_some());
    let status = collection_status(&api);
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "ObjectNameTaken".into())
    );
    assert_eq!(status.resolved_skills, ["docs-xlsx"]);
}

#[tokio::test]
async fn an_image_reference_that_names_no_registry_is_refused_and_writes_no_card() {
    let api = FakeApi::default();
    api.put(&object::<SkillCollection>(json!({
        "metadata": {"name": "docs", "uid": "uid-col"},
        "spec": {"image": "Not A Reference"},
    })));
    let action = pass::<SkillCollection, _>(&api, &context(&api), "docs", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    assert!(api.names::<SkillCard>(NS).is_empty());
    let status = collection_status(&api);
    assert_eq!(ready(&status.conditions).0, "False");
    let message = ready_message(&status.conditions);
    assert!(message.starts_with("spec.image: "), "{message}");
    assert!(status.resolved_skills.is_empty());
}

#[tokio::test]
async fn a_settled_collection_writes_nothing() {
    let api = FakeApi::default();
    let ctx = context(&api);
    api.put(&inline_card("pdf", "pdf-tools"));
    pass::<SkillCard, _>(&api, &ctx, "pdf", skillcard::reconcile)
        .await
        .expect("a card pass");
    api.put(&collection_of(json!([
        {"name": "xlsx", "image": PINNED},
        {"name": "pdf", "skillCardRef": "pdf"},
    ])));
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    api.clear_requests();
    pass::<SkillCollection, _>(&api, &ctx, "docs", reconcile)
        .await
        .expect("a pass");
    // The generated card is read and found as it should be; nothing is written again.
    let writes = api.writes();
    assert!(writes.is_empty(), "{writes:?}");
    assert_eq!(
        collection_status(&api).resolved_skills,
        ["docs-xlsx", "pdf"]
    );
}

#[test]
fn a_changed_card_brings_back_the_collections_that_control_or_name_it() {
    let naming = collection(&["pdf"]);
    let mut controlling = collection(&[]);
    controlling.metadata.name = Some("generated".into());
    let mut card = inline_card("pdf", "pdf-tools");
    card.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCollection",
            "name": "generated", "uid": "uid-gen", "controller": true,
        }))
        .expect("an owner reference"),
    ]);
    let mut unrelated = collection(&["xlsx"]);
    unrelated.metadata.name = Some("sheets".into());
    let mut elsewhere = collection(&["pdf"]);
    elsewhere.metadata.namespace = Some("elsewhere".into());
    let picked =
        super::collections_of_card([&naming, &controlling, &unrelated, &elsewhere], NS, &card);
    let names: Vec<_> = picked.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["docs", "generated"]);
}
