//! The SkillCard controller's real pass against the fake API server.

use std::time::Duration;

use agentic_api::{DeliveryMode, SkillCard, SkillCardStatus};
use agentic_core::conditions::find_condition;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Action;
use serde_json::json;

use super::reconcile;
use crate::apply::NAME_TAKEN_RETRY;
use crate::controllers::fake_api::FakeApi;
use crate::controllers::scenario::{NS, context, object, pass, ready, ready_message};

/// An inline SkillCard named `name` whose SKILL.md names `skill`.
pub(crate) fn inline_card(name: &str, skill: &str) -> SkillCard {
    object(json!({
        "metadata": {"name": name, "uid": format!("uid-card-{name}")},
        "spec": {"inline": format!(
            "---\nname: {skill}\ndescription: Does {skill} things when asked to.\n---\n# {skill}\n"
        )},
    }))
}

fn card_status(api: &FakeApi, name: &str) -> SkillCardStatus {
    let card: SkillCard = api.get(NS, name).expect("the card");
    card.status.expect("a status")
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
async fn a_pass_of_an_inline_card_reads_its_config_map_once() {
    let api = FakeApi::default();
    api.put(&inline_card("pdf", "pdf-tools"));
    let ctx = context(&api);
    let config_map_path = "/api/v1/namespaces/team/configmaps/pdf-skill";
    let config_map_reads = |api: &FakeApi| {
        let reads = api.reads();
        let count = reads.iter().filter(|path| *path == config_map_path).count();
        (count, reads)
    };
    // The first pass finds no ConfigMap and creates it; the second finds it settled. Each
    // reads it in gather only: the apply writes over what gather read.
    for (pass_number, created) in [(1, true), (2, false)] {
        api.clear_requests();
        pass::<SkillCard, _>(&api, &ctx, "pdf", reconcile)
            .await
            .expect("a pass");
        let (count, reads) = config_map_reads(&api);
        assert_eq!(count, 1, "pass {pass_number}: {reads:?}");
        let creates = api
            .writes()
            .iter()
            .filter(|w| w.path == "/api/v1/namespaces/team/configmaps")
            .count();
        assert_eq!(creates, usize::from(created), "pass {pass_number}");
    }
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

#[tokio::test]
async fn an_inline_card_whose_config_map_name_is_taken_leaves_it_alone_and_retries() {
    let api = FakeApi::default();
    api.put(&inline_card("pdf", "pdf-tools"));
    let theirs: ConfigMap = object(json!({
        "metadata": {"name": "pdf-skill"},
        "data": {"SKILL.md": "someone else's"},
    }));
    api.put(&theirs);
    let action = pass::<SkillCard, _>(&api, &context(&api), "pdf", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::requeue(NAME_TAKEN_RETRY));
    let card: SkillCard = api.get(NS, "pdf").expect("the card");
    let status = card.status.expect("a status");
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "ObjectNameTaken".into())
    );
    assert_eq!(status.skill, None);
    let config_map: ConfigMap = api.get(NS, "pdf-skill").expect("their ConfigMap");
    assert_eq!(config_map.data, theirs.data);
    assert_eq!(config_map.metadata.owner_references, None);
    let writes = api.writes();
    assert!(
        writes.iter().all(|w| !w.path.contains("/configmaps")),
        "{writes:?}"
    );
}

#[tokio::test]
async fn an_image_card_is_marked_validating_before_its_pull_secret_is_found_missing() {
    let api = FakeApi::default();
    let card: SkillCard = object(json!({
        "metadata": {"name": "pdf", "uid": "uid-card-pdf"},
        "spec": {"image": "registry.test/skills/pdf:1", "pullSecrets": [{"name": "creds"}]},
    }));
    api.put(&card);
    let action = pass::<SkillCard, _>(&api, &context(&api), "pdf", reconcile)
        .await
        .expect("a pass");
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    let status = card_status(&api, "pdf");
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "PullSecretNotFound".into())
    );
    // The registry was not asked, so nothing is said about it.
    assert!(find_condition(&status.conditions, "RegistryReachable").is_none());
    let writes: Vec<(String, String)> = api
        .writes()
        .into_iter()
        .map(|w| (w.method.to_string(), w.path))
        .collect();
    let status_path = "/apis/konveyor.io/v1alpha1/namespaces/team/skillcards/pdf/status";
    let events_path = "/apis/events.k8s.io/v1/namespaces/team/events";
    assert_eq!(
        writes,
        [
            ("PATCH".into(), status_path.into()),
            ("POST".into(), events_path.into()),
            ("PATCH".into(), status_path.into()),
        ]
    );
    let first = &api.writes()[0].body;
    assert!(first.contains("Validating"), "{first}");
}

#[tokio::test]
async fn a_git_card_whose_source_secret_is_missing_is_refused_and_says_its_ref_moves() {
    let api = FakeApi::default();
    let card: SkillCard = object(json!({
        "metadata": {"name": "review", "uid": "uid-card-review"},
        "spec": {"source": "https://git.test/skills.git", "sourceSecret": {"name": "token"}},
    }));
    api.put(&card);
    pass::<SkillCard, _>(&api, &context(&api), "review", reconcile)
        .await
        .expect("a pass");
    let status = card_status(&api, "review");
    assert_eq!(
        ready(&status.conditions),
        ("False".into(), "SourceSecretNotFound".into())
    );
    let moving = find_condition(&status.conditions, "MovingRef").expect("MovingRef");
    assert_eq!(
        (moving.status.as_str(), moving.reason.as_str()),
        ("True", "DefaultBranch")
    );
    assert_eq!(status.delivery_mode, Some(DeliveryMode::Source));
}

#[tokio::test]
async fn an_image_reference_that_names_no_registry_is_refused_without_asking_one() {
    let api = FakeApi::default();
    let card: SkillCard = object(json!({
        "metadata": {"name": "pdf", "uid": "uid-card-pdf"},
        "spec": {"image": "Not A Reference"},
    }));
    api.put(&card);
    pass::<SkillCard, _>(&api, &context(&api), "pdf", reconcile)
        .await
        .expect("a pass");
    let status = card_status(&api, "pdf");
    assert_eq!(ready(&status.conditions).0, "False");
    let message = ready_message(&status.conditions);
    assert!(message.starts_with("spec.image: "), "{message}");
    assert!(find_condition(&status.conditions, "RegistryReachable").is_none());
}

/// Each git error lands as the word it names itself, but for `Io`: a failure of the
/// operator's own fetch, transient, written as the outage `git_answer` reports it as.
#[test]
fn git_errors_land_as_their_words_and_io_as_an_unavailable_source() {
    use agentic_core::reasons::SkillCardReason;
    use agentic_git::GitError;
    let message = || "m".to_string();
    let errors = [
        GitError::RefNotFound {
            source_url: "u".into(),
            message: message(),
        },
        GitError::UnsafeContent { message: message() },
        GitError::TooLarge { message: message() },
        GitError::SourceUnavailable {
            source_url: "u".into(),
            message: message(),
        },
    ];
    for error in &errors {
        assert_eq!(super::git_reason(error).as_str(), error.reason());
    }
    let io = GitError::Io {
        path: "p".into(),
        message: message(),
    };
    assert!(io.is_transient());
    assert_eq!(super::git_reason(&io), SkillCardReason::SourceUnavailable);
}
