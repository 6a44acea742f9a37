use agentic_api::{SkillCardStatus, SkillCollectionSpec, SkillFrontmatter};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;

const PINNED: &str = "registry.test/skills/bundle@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "konveyor.io/v1alpha1".into(),
        kind: "SkillCollection".into(),
        name: "bundle".into(),
        uid: "uid-1".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn collection(spec: SkillCollectionSpec) -> SkillCollection {
    let mut c = SkillCollection::new("bundle", spec);
    c.metadata.namespace = Some("ns".into());
    c
}

fn entry(name: &str) -> SkillCollectionSkill {
    SkillCollectionSkill {
        name: name.into(),
        ..SkillCollectionSkill::default()
    }
}

fn ready_card(name: &str, skill: &str) -> SkillCard {
    let mut card = SkillCard::new(
        name,
        SkillCardSpec {
            image: Some(PINNED.into()),
            ..SkillCardSpec::default()
        },
    );
    card.metadata.generation = Some(1);
    card.status = Some(SkillCardStatus {
        resolved_image: Some(PINNED.into()),
        skill: Some(SkillFrontmatter {
            name: skill.into(),
            description: "d".into(),
            ..SkillFrontmatter::default()
        }),
        observed_generation: Some(1),
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "SkillValid".into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }],
        ..SkillCardStatus::default()
    });
    card
}

#[test]
fn an_image_collection_generates_one_pinned_owned_card_per_directory() {
    let c = collection(SkillCollectionSpec {
        image: Some("registry.test/skills/bundle:1".into()),
        skill_type: Some(SkillType::Rule),
        ..SkillCollectionSpec::default()
    });
    let plan = plan_image(
        &c,
        &owner(),
        PINNED,
        &ImageSkills::Directories(vec!["maven".into(), "quarkus".into()]),
    )
    .expect("plan");
    assert!(plan.referenced.is_empty());
    assert_eq!(plan.card_names(), ["bundle-maven", "bundle-quarkus"]);
    let card = &plan.generated[0];
    assert_eq!(card.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(
        card.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SKILL_COLLECTION_LABEL)),
        Some(&"bundle".to_string())
    );
    assert_eq!(card.metadata.owner_references, Some(vec![owner()]));
    assert_eq!(card.spec.image.as_deref(), Some(PINNED));
    assert_eq!(card.spec.sub_path.as_deref(), Some("maven"));
    assert_eq!(card.spec.skill_type, SkillType::Rule);
}

#[test]
fn a_root_skill_is_named_by_its_frontmatter_and_has_no_sub_path() {
    let c = collection(SkillCollectionSpec {
        image: Some("registry.test/skills/one:1".into()),
        ..SkillCollectionSpec::default()
    });
    let plan = plan_image(
        &c,
        &owner(),
        PINNED,
        &ImageSkills::Root {
            name: "solo".into(),
        },
    )
    .expect("plan");
    assert_eq!(plan.card_names(), ["bundle-solo"]);
    assert_eq!(plan.generated[0].spec.sub_path, None);
    assert_eq!(plan.generated[0].spec.skill_type, SkillType::Skill);
}

#[test]
fn an_image_without_skills_and_one_with_too_many_are_refused() {
    let c = collection(SkillCollectionSpec::default());
    let none = plan_image(&c, &owner(), PINNED, &ImageSkills::Directories(vec![]));
    assert_eq!(none.expect_err("no skills").reason(), "NoSkills");
    let many: Vec<String> = (0..=MAX_COLLECTION_SKILLS)
        .map(|i| format!("s{i}"))
        .collect();
    let error =
        plan_image(&c, &owner(), PINNED, &ImageSkills::Directories(many)).expect_err("too many");
    assert_eq!(error.reason(), "TooManySkills");
    assert!(error.to_string().contains("257"), "{error}");
}

#[test]
fn directories_that_would_share_a_card_name_are_reported() {
    // Two names that differ only in case sanitize alike but keep distinct hashes; a name
    // repeated verbatim is the collision left.
    let c = collection(SkillCollectionSpec::default());
    let plan = plan_image(
        &c,
        &owner(),
        PINNED,
        &ImageSkills::Directories(vec!["Java".into(), "java".into()]),
    )
    .expect("distinct names");
    assert_eq!(plan.generated.len(), 2);
    let clash = collection(SkillCollectionSpec {
        skills: Some(vec![
            SkillCollectionSkill {
                image: Some("r.test/a:1".into()),
                ..entry("x")
            },
            SkillCollectionSkill {
                skill_card_ref: Some("bundle-x".into()),
                ..entry("y")
            },
        ]),
        ..SkillCollectionSpec::default()
    });
    let error = plan_entries(&clash, &owner()).expect_err("collision");
    assert_eq!(error.reason(), "DuplicateSkillCardName");
    assert!(error.to_string().contains("bundle-x"), "{error}");
}

#[test]
fn entries_reference_cards_and_generate_the_others_with_only_their_fields() {
    let c = collection(SkillCollectionSpec {
        skills: Some(vec![
            SkillCollectionSkill {
                skill_card_ref: Some("existing".into()),
                skill_type: Some(SkillType::Rule),
                ..entry("existing")
            },
            SkillCollectionSkill {
                image: Some("r.test/skills/multi:2".into()),
                sub_path: Some("plan".into()),
                git_ref: Some("main".into()),
                skill_type: Some(SkillType::Rule),
                ..entry("plan")
            },
            SkillCollectionSkill {
                source: Some("https://git.test/skills.git".into()),
                git_ref: Some("v1".into()),
                sub_path: Some("review".into()),
                ..entry("review")
            },
        ]),
        ..SkillCollectionSpec::default()
    });
    let plan = plan_entries(&c, &owner()).expect("plan");
    assert_eq!(plan.referenced, ["existing"]);
    assert_eq!(
        plan.card_names(),
        ["bundle-plan", "bundle-review", "existing"]
    );
    let image = &plan.generated[0].spec;
    assert_eq!(image.image.as_deref(), Some("r.test/skills/multi:2"));
    assert_eq!(image.sub_path.as_deref(), Some("plan"));
    assert_eq!(image.git_ref, None, "ref is only for git sources");
    assert_eq!(image.skill_type, SkillType::Rule);
    let git = &plan.generated[1].spec;
    assert_eq!(git.source.as_deref(), Some("https://git.test/skills.git"));
    assert_eq!(git.git_ref.as_deref(), Some("v1"));
    assert_eq!(git.sub_path.as_deref(), Some("review"));
    assert_eq!(git.image, None);
}

#[test]
fn readiness_names_every_card_that_is_not_ready_with_its_reason() {
    let good = ready_card("bundle-a", "a");
    let mut bad = ready_card("bundle-b", "b");
    if let Some(status) = bad.status.as_mut() {
        status.conditions[0].status = "False".into();
        status.conditions[0].reason = "InvalidSkill".into();
        status.conditions[0].message = "name is missing".into();
    }
    let (ready, reason, message) = readiness(&[
        ("bundle-a", Lookup::Found(&good)),
        ("bundle-b", Lookup::Found(&bad)),
        ("gone", Lookup::Missing),
    ]);
    assert!(!ready);
    assert_eq!(reason, REASON_SKILLS_NOT_READY);
    assert!(
        message.starts_with("2 of 3 skill(s) are not Ready"),
        "{message}"
    );
    assert!(
        message.contains(r#"SkillCard "bundle-b": Ready is False (InvalidSkill: name is missing)"#),
        "{message}"
    );
    assert!(
        message.contains(r#"SkillCard "gone" not found"#),
        "{message}"
    );
    assert!(!message.contains("bundle-a"), "{message}");

    let (ready, reason, _) = readiness(&[("bundle-a", Lookup::Found(&good))]);
    assert!(ready);
    assert_eq!(reason, REASON_ALL_SKILLS_RESOLVED);
}
