use agentic_api::SkillCardSpec;
use k8s_openapi::jiff::Timestamp;

use super::*;

const PINNED: &str = "registry.test/skills/pdf@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn card(spec: SkillCardSpec) -> SkillCard {
    let mut card = SkillCard::new("pdf", spec);
    card.metadata.namespace = Some("team".into());
    card.metadata.uid = Some("uid-card".into());
    card.metadata.generation = Some(2);
    card
}

fn image_card(image: &str) -> SkillCard {
    card(SkillCardSpec {
        image: Some(image.into()),
        ..SkillCardSpec::default()
    })
}

fn git_card(git_ref: Option<&str>) -> SkillCard {
    card(SkillCardSpec {
        source: Some("https://git.test/skills.git".into()),
        git_ref: git_ref.map(str::to_string),
        ..SkillCardSpec::default()
    })
}

fn inline_card() -> SkillCard {
    card(SkillCardSpec {
        inline: Some("---\nname: pdf-tools\ndescription: d\n---\n# PDF\n".into()),
        ..SkillCardSpec::default()
    })
}

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "konveyor.io/v1alpha1".into(),
        kind: "SkillCard".into(),
        name: "pdf".into(),
        uid: "uid-card".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn skill(pinned: Option<&str>) -> ValidSkill {
    ValidSkill {
        frontmatter: SkillFrontmatter {
            name: "pdf-tools".into(),
            description: "d".into(),
            ..SkillFrontmatter::default()
        },
        pinned: pinned.map(str::to_string),
        body_bytes: Some(7),
    }
}

fn inputs(card: &SkillCard, skill: Fetched<ValidSkill>) -> CardInputs<'_> {
    CardInputs {
        card,
        owner: owner(),
        skill,
        config_map: None,
    }
}

fn condition<'a>(status: &'a SkillCardStatus, type_: &str) -> (&'a str, &'a str) {
    let condition = find_condition(&status.conditions, type_).expect("the condition");
    (condition.status.as_str(), condition.reason.as_str())
}

fn finding(reason: SkillCardReason) -> Finding {
    Finding::new(reason, format!("{reason} happened"))
}

#[test]
fn a_valid_image_is_ready_pinned_by_digest_and_its_registry_reachable() {
    let card = image_card("registry.test/skills/pdf:1");
    let decision = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(PINNED)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    let status = &decision.status;
    assert_eq!(condition(status, CONDITION_READY), ("True", "SkillValid"));
    assert_eq!(
        condition(status, CONDITION_REGISTRY_REACHABLE),
        ("True", "DigestResolved")
    );
    assert_eq!(status.resolved_image.as_deref(), Some(PINNED));
    assert_eq!(status.resolved_source, None);
    assert_eq!(status.delivery_mode, Some(DeliveryMode::Image));
    assert_eq!(status.body_bytes, Some(7));
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(decision.config_map, None);
    assert_eq!(decision.next, Next::Refresh);
}

#[test]
fn a_valid_git_skill_is_pinned_to_its_commit_and_says_whether_its_ref_moves() {
    let pinned = format!("https://git.test/skills.git@{COMMIT}");
    for (git_ref, moving) in [
        (None, ("True", "DefaultBranch")),
        (Some("v1"), ("False", "RefSet")),
    ] {
        let card = git_card(git_ref);
        let decision = decide_card(
            &inputs(&card, Fetched::Read(skill(Some(&pinned)))),
            &SkillCardStatus::default(),
            &at(10),
        );
        let status = &decision.status;
        assert_eq!(status.resolved_source.as_deref(), Some(pinned.as_str()));
        assert_eq!(status.resolved_image, None);
        assert_eq!(
            condition(status, CONDITION_SOURCE_REACHABLE),
            ("True", "RefResolved")
        );
        assert_eq!(condition(status, CONDITION_MOVING_REF), moving);
        let ready = find_condition(&status.conditions, CONDITION_READY).expect("Ready");
        assert!(ready.message.ends_with(&pinned), "{}", ready.message);
    }
}

#[test]
fn a_refusal_of_the_card_says_nothing_about_its_registry() {
    let card = image_card("registry.test/skills/pdf:1");
    let decision = decide_card(
        &inputs(
            &card,
            Fetched::Refused(finding(SkillCardReason::PullSecretNotFound)),
        ),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        condition(&decision.status, CONDITION_READY),
        ("False", "PullSecretNotFound")
    );
    assert!(find_condition(&decision.status.conditions, CONDITION_REGISTRY_REACHABLE).is_none());
    assert_eq!(decision.status.delivery_mode, Some(DeliveryMode::Image));
}

#[test]
fn a_rejection_by_the_registry_clears_what_was_pinned_and_says_it_answered() {
    let card = image_card("registry.test/skills/pdf:1");
    let valid = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(PINNED)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    let decision = decide_card(
        &inputs(
            &card,
            Fetched::Rejected(finding(SkillCardReason::ImageNotFound)),
        ),
        &valid.status,
        &at(20),
    );
    let status = &decision.status;
    assert_eq!(
        condition(status, CONDITION_READY),
        ("False", "ImageNotFound")
    );
    assert_eq!(
        condition(status, CONDITION_REGISTRY_REACHABLE),
        ("True", "DigestResolved")
    );
    assert_eq!((&status.skill, &status.resolved_image), (&None, &None));
    assert_eq!(decision.next, Next::Refresh);
}

#[test]
fn an_outage_keeps_content_validated_at_this_generation_and_is_retried() {
    let card = image_card("registry.test/skills/pdf:1");
    let valid = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(PINNED)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    let decision = decide_card(
        &inputs(
            &card,
            Fetched::Unavailable(finding(SkillCardReason::RegistryUnavailable)),
        ),
        &valid.status,
        &at(20),
    );
    let status = &decision.status;
    assert_eq!(condition(status, CONDITION_READY), ("True", "SkillValid"));
    assert_eq!(
        condition(status, CONDITION_REGISTRY_REACHABLE),
        ("False", "RegistryUnavailable")
    );
    assert_eq!(status.resolved_image.as_deref(), Some(PINNED));
    assert_eq!(decision.next, Next::Unavailable);
}

#[test]
fn an_outage_before_any_validation_of_this_generation_is_not_ready() {
    let card = image_card("registry.test/skills/pdf:1");
    let valid = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(PINNED)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    let mut edited = card.clone();
    edited.metadata.generation = Some(3);
    let decision = decide_card(
        &inputs(
            &edited,
            Fetched::Unavailable(finding(SkillCardReason::RegistryUnavailable)),
        ),
        &valid.status,
        &at(20),
    );
    assert_eq!(
        condition(&decision.status, CONDITION_READY),
        ("False", "RegistryUnavailable")
    );
    assert_eq!(decision.next, Next::Unavailable);
}

#[test]
fn a_deleted_ref_keeps_the_pinned_commit_only_once_validated() {
    let card = git_card(Some("main"));
    let pinned = format!("https://git.test/skills.git@{COMMIT}");
    let gone = Fetched::RefGone(finding(SkillCardReason::RefNotFound));
    let fresh = decide_card(
        &inputs(&card, gone.clone()),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        condition(&fresh.status, CONDITION_READY),
        ("False", "RefNotFound")
    );
    assert_eq!(
        condition(&fresh.status, CONDITION_SOURCE_REACHABLE),
        ("True", "RefResolved")
    );

    let valid = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(&pinned)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    let kept = decide_card(&inputs(&card, gone), &valid.status, &at(20));
    assert_eq!(
        condition(&kept.status, CONDITION_READY),
        ("True", "SkillValid")
    );
    let reachable =
        find_condition(&kept.status.conditions, CONDITION_SOURCE_REACHABLE).expect("reachable");
    assert_eq!(reachable.reason, "RefNotFound");
    assert!(
        reachable
            .message
            .ends_with("sandboxes keep the pinned commit")
    );
    assert_eq!(
        kept.status.resolved_source.as_deref(),
        Some(pinned.as_str())
    );
    // Not an outage: nothing to back off from.
    assert_eq!(kept.next, Next::Refresh);
}

#[test]
fn a_valid_inline_skill_wants_its_config_map_owned_by_the_card() {
    let card = inline_card();
    let decision = decide_card(
        &inputs(&card, Fetched::Read(skill(None))),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        condition(&decision.status, CONDITION_READY),
        ("True", "SkillValid")
    );
    assert_eq!(decision.status.delivery_mode, Some(DeliveryMode::Inline));
    let config_map = decision.config_map.expect("a ConfigMap");
    assert_eq!(config_map.metadata.name, config_map_name(&card));
    assert_eq!(config_map.metadata.owner_references, Some(vec![owner()]));
    assert_eq!(decision.next, Next::AwaitChange);
}

#[test]
fn an_inline_config_map_name_held_by_another_object_is_left_alone() {
    let card = inline_card();
    let mut read = inputs(&card, Fetched::Read(skill(None)));
    read.config_map = Some(ObjectMeta {
        name: config_map_name(&card),
        ..ObjectMeta::default()
    });
    let decision = decide_card(&read, &SkillCardStatus::default(), &at(10));
    assert_eq!(
        condition(&decision.status, CONDITION_READY),
        ("False", "ObjectNameTaken")
    );
    assert_eq!(decision.config_map, None);
    assert_eq!(decision.status.skill, None);
    assert_eq!(decision.next, Next::NameTaken);

    // Its own ConfigMap is no obstacle.
    read.config_map = Some(ObjectMeta {
        owner_references: Some(vec![owner()]),
        ..ObjectMeta::default()
    });
    let decision = decide_card(&read, &SkillCardStatus::default(), &at(10));
    assert!(decision.config_map.is_some());
}

#[test]
fn a_card_with_no_source_is_refused() {
    let card = card(SkillCardSpec::default());
    let decision = decide_card(
        &inputs(&card, no_skill_source()),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        condition(&decision.status, CONDITION_READY),
        ("False", "NoSkillSource")
    );
    assert_eq!(decision.status.delivery_mode, None);
    assert_eq!(decision.next, Next::AwaitChange);
}

#[test]
fn a_pass_that_reads_the_same_decides_the_same_status() {
    let card = image_card("registry.test/skills/pdf:1");
    let read = inputs(&card, Fetched::Read(skill(Some(PINNED))));
    let first = decide_card(&read, &SkillCardStatus::default(), &at(10));
    let second = decide_card(&read, &first.status, &at(99));
    assert_eq!(second.status, first.status);
}

#[test]
fn validating_marks_only_a_generation_ready_says_nothing_about() {
    let card = image_card("registry.test/skills/pdf:1");
    let mark = validating(&card, &SkillCardStatus::default(), &at(10)).expect("a mark");
    assert_eq!(condition(&mark, CONDITION_READY), ("Unknown", "Validating"));
    let valid = decide_card(
        &inputs(&card, Fetched::Read(skill(Some(PINNED)))),
        &mark,
        &at(11),
    );
    assert_eq!(validating(&card, &valid.status, &at(12)), None);
    assert_eq!(
        validating(&inline_card(), &SkillCardStatus::default(), &at(10)),
        None
    );
}

#[test]
fn only_a_pin_that_cannot_move_reuses_what_this_generation_validated() {
    let by_digest = image_card(PINNED);
    let valid = decide_card(
        &inputs(&by_digest, Fetched::Read(skill(Some(PINNED)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        pinned_skill(&by_digest, &valid.status),
        Some(skill(Some(PINNED)))
    );
    let by_tag = image_card("registry.test/skills/pdf:1");
    assert_eq!(pinned_skill(&by_tag, &valid.status), None);
    let mut edited = by_digest.clone();
    edited.metadata.generation = Some(3);
    assert_eq!(pinned_skill(&edited, &valid.status), None);

    let pinned = format!("https://git.test/skills.git@{COMMIT}");
    let by_commit = git_card(Some(COMMIT));
    let valid = decide_card(
        &inputs(&by_commit, Fetched::Read(skill(Some(&pinned)))),
        &SkillCardStatus::default(),
        &at(10),
    );
    assert_eq!(
        pinned_skill(&by_commit, &valid.status),
        Some(skill(Some(&pinned)))
    );
    assert_eq!(pinned_skill(&git_card(Some("main")), &valid.status), None);
}

#[test]
fn an_outcome_read_on_keeps_any_outcome_but_a_read() {
    let refused: Fetched<u8> = Fetched::Refused(finding(SkillCardReason::InvalidPullSecret));
    assert_eq!(
        refused.and_then(|n| Fetched::Read(u32::from(n))),
        Fetched::Refused(finding(SkillCardReason::InvalidPullSecret))
    );
    assert_eq!(
        Fetched::Read(1u8).and_then(|n| Fetched::Read(u32::from(n) + 1)),
        Fetched::Read(2u32)
    );
}
