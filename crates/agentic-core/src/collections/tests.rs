use agentic_api::{SkillCardStatus, SkillCollectionSpec, SkillFrontmatter};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::reasons::SkillCardReason;

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
    assert_eq!(none.expect_err("no skills").reason().as_str(), "NoSkills");
    let many: Vec<String> = (0..=MAX_COLLECTION_SKILLS)
        .map(|i| format!("s{i}"))
        .collect();
    let error =
        plan_image(&c, &owner(), PINNED, &ImageSkills::Directories(many)).expect_err("too many");
    assert_eq!(error.reason().as_str(), "TooManySkills");
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
    assert_eq!(error.reason().as_str(), "DuplicateSkillCardName");
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
    assert_eq!(reason, SkillCollectionReason::SkillsNotReady);
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
    assert_eq!(reason, SkillCollectionReason::AllSkillsResolved);
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn image_collection(image: &str) -> SkillCollection {
    let mut c = collection(SkillCollectionSpec {
        image: Some(image.into()),
        ..SkillCollectionSpec::default()
    });
    c.metadata.generation = Some(1);
    c
}

fn listed(directories: &[&str]) -> Option<Fetched<ImageListing>> {
    Some(Fetched::Read(ImageListing {
        pinned: PINNED.into(),
        skills: ImageSkills::Directories(
            directories
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
        ),
    }))
}

/// The generated card `name` as the collection would write it, Ready at its generation.
fn generated_ready(planned: &Planned, name: &str, skill: &str) -> SkillCard {
    let Planned::Cards { plan, .. } = planned else {
        panic!("a plan");
    };
    let mut card = plan
        .generated
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .expect("a generated card")
        .clone();
    card.metadata.uid = Some(format!("uid-{name}"));
    card.metadata.generation = Some(1);
    card.status = ready_card(name, skill).status;
    card.status.as_mut().expect("a status").resolved_image = Some(format!("{PINNED}-{name}"));
    card
}

/// The decision on the collection `c` controlled by `owner()`, at `second`.
fn decide(
    c: &SkillCollection,
    planned: Planned,
    cards: &[(String, Lookup<'_, SkillCard>)],
    old: &SkillCollectionStatus,
    second: i64,
) -> CollectionDecision {
    decide_collection(c, &owner().uid, planned, cards, old, &at(second))
}

fn message_of(status: &SkillCollectionStatus) -> &str {
    &find_condition(&status.conditions, CONDITION_READY)
        .expect("Ready")
        .message
}

fn ready_of(status: &SkillCollectionStatus) -> (&str, &str) {
    let ready = find_condition(&status.conditions, CONDITION_READY).expect("Ready");
    (ready.status.as_str(), ready.reason.as_str())
}

#[test]
fn a_listed_image_plans_its_cards_pinned_and_a_refused_one_plans_none() {
    let c = image_collection("registry.test/skills/bundle:1");
    match plan_collection(&c, &owner(), listed(&["pdf", "xlsx"])) {
        Planned::Cards {
            plan,
            resolved_image,
        } => {
            assert_eq!(plan.card_names(), ["bundle-pdf", "bundle-xlsx"]);
            assert_eq!(resolved_image.as_deref(), Some(PINNED));
        }
        other => panic!("{other:?}"),
    }
    let none = plan_collection(&c, &owner(), listed(&[]));
    assert!(
        matches!(&none, Planned::Refused(f) if f.reason.as_str() == "NoSkills"),
        "{none:?}"
    );
    let gone = Some(Fetched::Rejected(Finding::new(
        SkillCardReason::ImageNotFound,
        "no such image",
    )));
    assert!(matches!(
        plan_collection(&c, &owner(), gone),
        Planned::Refused(f) if f.reason == SkillCollectionReason::ImageNotFound
    ));
    let down = Some(Fetched::Unavailable(Finding::new(
        SkillCardReason::RegistryUnavailable,
        "down",
    )));
    assert!(matches!(
        plan_collection(&c, &owner(), down),
        Planned::Unavailable(_)
    ));
}

#[test]
fn new_cards_are_applied_and_waited_for_and_a_tag_is_listed_again() {
    let c = image_collection("registry.test/skills/bundle:1");
    let planned = plan_collection(&c, &owner(), listed(&["pdf"]));
    let decision = decide(&c, planned, &[], &SkillCollectionStatus::default(), 10);
    assert_eq!(decision.apply.len(), 1);
    assert!(decision.prune.is_empty());
    assert_eq!(decision.status.resolved_skills, ["bundle-pdf"]);
    assert_eq!(decision.status.resolved_image.as_deref(), Some(PINNED));
    assert_eq!(
        ready_of(&decision.status),
        ("False", SkillCollectionReason::SkillsNotReady.as_str())
    );
    let message = message_of(&decision.status);
    assert!(message.contains("no Ready condition yet"), "{message}");
    assert_eq!(decision.next, Next::Refresh);
}

#[test]
fn ready_cards_it_controls_make_it_ready_and_unlisted_ones_are_pruned() {
    let c = image_collection(PINNED);
    let planned = plan_collection(&c, &owner(), listed(&["pdf"]));
    let pdf = generated_ready(&planned, "bundle-pdf", "pdf");
    let old_plan = plan_collection(&c, &owner(), listed(&["old"]));
    let old = generated_ready(&old_plan, "bundle-old", "old");
    let cards = [
        ("bundle-old".to_string(), Lookup::Found(&old)),
        ("bundle-pdf".to_string(), Lookup::Found(&pdf)),
    ];
    let decision = decide(&c, planned, &cards, &SkillCollectionStatus::default(), 10);
    assert_eq!(
        ready_of(&decision.status),
        ("True", SkillCollectionReason::AllSkillsResolved.as_str())
    );
    assert_eq!(decision.prune, ["bundle-old"]);
    assert_eq!(decision.status.resolved_skills, ["bundle-pdf"]);
    // Pinned by digest: nothing to list again.
    assert_eq!(decision.next, Next::AwaitChange);
}

#[test]
fn a_card_whose_spec_the_apply_changes_waits_for_its_next_generation() {
    let c = image_collection("registry.test/skills/bundle:1");
    let planned = plan_collection(&c, &owner(), listed(&["pdf"]));
    let mut stale = generated_ready(&planned, "bundle-pdf", "pdf");
    stale.spec.image = Some("registry.test/skills/bundle@sha256:older".into());
    let cards = [("bundle-pdf".to_string(), Lookup::Found(&stale))];
    let decision = decide(&c, planned, &cards, &SkillCollectionStatus::default(), 10);
    assert_eq!(decision.apply.len(), 1);
    assert_eq!(
        ready_of(&decision.status),
        ("False", SkillCollectionReason::SkillsNotReady.as_str())
    );
    let message = message_of(&decision.status);
    assert!(message.contains("its spec is at generation 2"), "{message}");
}

#[test]
fn a_name_another_card_holds_is_left_alone_and_named() {
    let c = image_collection("registry.test/skills/bundle:1");
    let planned = plan_collection(&c, &owner(), listed(&["pdf", "xlsx"]));
    let theirs = ready_card("bundle-pdf", "pdf");
    let cards = [("bundle-pdf".to_string(), Lookup::Found(&theirs))];
    let decision = decide(&c, planned, &cards, &SkillCollectionStatus::default(), 10);
    let applied: Vec<_> = decision
        .apply
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(applied, ["bundle-xlsx"]);
    assert!(decision.prune.is_empty());
    assert_eq!(decision.status.resolved_skills, ["bundle-xlsx"]);
    assert_eq!(
        ready_of(&decision.status),
        ("False", SkillCollectionReason::ObjectNameTaken.as_str())
    );
    assert_eq!(decision.next, Next::NameTaken);
}

#[test]
fn an_outage_keeps_a_ready_collection_ready_and_writes_nothing() {
    let c = image_collection("registry.test/skills/bundle:1");
    let planned = plan_collection(&c, &owner(), listed(&["pdf"]));
    let pdf = generated_ready(&planned, "bundle-pdf", "pdf");
    let cards = [("bundle-pdf".to_string(), Lookup::Found(&pdf))];
    let ready = decide(&c, planned, &cards, &SkillCollectionStatus::default(), 10);
    assert_eq!(
        ready_of(&ready.status),
        ("True", SkillCollectionReason::AllSkillsResolved.as_str())
    );

    let down = Some(Fetched::Unavailable(Finding::new(
        SkillCardReason::RegistryUnavailable,
        "down",
    )));
    let outage = plan_collection(&c, &owner(), down.clone());
    let kept = decide(&c, outage, &cards, &ready.status, 20);
    assert_eq!(kept.status, ready.status);
    assert!(kept.apply.is_empty() && kept.prune.is_empty());
    assert_eq!(kept.next, Next::Unavailable);

    let fresh = decide(
        &c,
        plan_collection(&c, &owner(), down),
        &cards,
        &SkillCollectionStatus::default(),
        20,
    );
    assert_eq!(
        ready_of(&fresh.status),
        ("False", SkillCollectionReason::RegistryUnavailable.as_str())
    );
    assert!(fresh.apply.is_empty() && fresh.prune.is_empty());
}

#[test]
fn a_refused_image_clears_what_it_listed_and_deletes_nothing() {
    let c = image_collection("registry.test/skills/bundle:1");
    let planned = plan_collection(&c, &owner(), listed(&["pdf"]));
    let pdf = generated_ready(&planned, "bundle-pdf", "pdf");
    let cards = [("bundle-pdf".to_string(), Lookup::Found(&pdf))];
    let ready = decide(&c, planned, &cards, &SkillCollectionStatus::default(), 10);
    let gone = Some(Fetched::Rejected(Finding::new(
        SkillCardReason::ImageNotFound,
        "no such image",
    )));
    let refused = decide(
        &c,
        plan_collection(&c, &owner(), gone),
        &cards,
        &ready.status,
        20,
    );
    assert_eq!(ready_of(&refused.status), ("False", "ImageNotFound"));
    assert!(refused.status.resolved_skills.is_empty());
    assert_eq!(refused.status.resolved_image, None);
    assert!(refused.apply.is_empty() && refused.prune.is_empty());
}

#[test]
fn only_a_cluster_default_collections_cards_carry_the_hubs_read_only_label() {
    let managed_by = |planned: &Planned| match planned {
        Planned::Cards { plan, .. } => plan
            .generated
            .iter()
            .map(|card| {
                card.metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(MANAGED_BY_LABEL).cloned())
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let mut default = image_collection("registry.test/skills/bundle:1");
    default.metadata.labels = Some([(DEFAULT_SKILLS_LABEL.to_string(), "true".to_string())].into());
    let cases = [
        // In the default-skills namespace and labelled: the operator installs its cards.
        (&default, Some("ns"), Some(DEFAULTS_MANAGER)),
        // A namespace default, or no cluster defaults at all: the namespace's own.
        (&default, Some("platform"), None),
        (&default, None, None),
    ];
    for (c, cluster_defaults, want) in cases {
        let mut planned = plan_collection(c, &owner(), listed(&["pdf", "xlsx"]));
        label_cluster_defaults(&mut planned, c, cluster_defaults);
        assert_eq!(
            managed_by(&planned),
            [want.map(str::to_string), want.map(str::to_string)],
            "{cluster_defaults:?}"
        );
    }
    let unlabelled = image_collection("registry.test/skills/bundle:1");
    let mut planned = plan_collection(&unlabelled, &owner(), listed(&["pdf"]));
    label_cluster_defaults(&mut planned, &unlabelled, Some("ns"));
    assert_eq!(managed_by(&planned), [None]);
    // The collection's own label stays: the console lists the cards by it.
    let Planned::Cards { plan, .. } = &planned else {
        unreachable!()
    };
    assert_eq!(
        plan.generated[0].metadata.labels.as_ref().unwrap()[SKILL_COLLECTION_LABEL],
        "bundle"
    );
}
