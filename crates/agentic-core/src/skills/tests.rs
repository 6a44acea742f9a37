use agentic_api::{
    AgentSpec, AgentStatus, GatewayModel, GatewaySpec, GatewayStatus, SecretRef, SkillCardSpec,
    SkillCardStatus, SkillVerification, VerificationState,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn ready_condition(status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(2),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

fn frontmatter(name: &str) -> SkillFrontmatter {
    SkillFrontmatter {
        name: name.into(),
        description: format!("{name} things"),
        ..Default::default()
    }
}

/// A Ready image SkillCard `card` providing skill `skill`.
fn image_card(card: &str, skill: &str) -> SkillCard {
    let mut c = SkillCard::new(
        card,
        SkillCardSpec {
            image: Some(format!("ghcr.io/acme/{card}:1")),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some("ns".into());
    c.metadata.generation = Some(2);
    c.status = Some(SkillCardStatus {
        resolved_image: Some(format!("ghcr.io/acme/{card}@{DIGEST}")),
        skill: Some(frontmatter(skill)),
        observed_generation: Some(2),
        conditions: vec![ready_condition("True", "Valid", "")],
        ..Default::default()
    });
    c
}

/// A Ready inline SkillCard `card` providing skill `skill`.
fn inline_card(card: &str, skill: &str) -> SkillCard {
    let mut c = image_card(card, skill);
    c.spec.image = None;
    c.spec.inline = Some(format!("---\nname: {skill}\ndescription: d\n---\n"));
    if let Some(status) = c.status.as_mut() {
        status.resolved_image = None;
    }
    c
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A Ready git SkillCard `card` providing skill `skill`, pinned to [`COMMIT`].
fn git_card(card: &str, skill: &str) -> SkillCard {
    let mut c = image_card(card, skill);
    c.spec.image = None;
    c.spec.source = Some("https://example.com/skills.git".into());
    c.spec.git_ref = Some("main".into());
    c.spec.sub_path = Some("skills/x".into());
    if let Some(status) = c.status.as_mut() {
        status.resolved_image = None;
        status.resolved_source = Some(format!("https://example.com/skills.git@{COMMIT}"));
    }
    c
}

/// A card of the Agent's own `spec.skillCards`.
fn own<'a>(name: &'a str, card: Lookup<'a, SkillCard>) -> CardRef<'a> {
    CardRef {
        name,
        collection: None,
        card,
    }
}

fn resolve(cards: &[(&str, Option<&SkillCard>)]) -> Result<ResolvedSkills, Error> {
    let cards: Vec<CardRef> = cards
        .iter()
        .map(|(name, card)| own(name, Lookup::from(*card)))
        .collect();
    resolve_skills(&cards)
}

#[test]
fn skills_are_sorted_by_name_and_rules_listed() {
    let java = image_card("java-card", "java");
    let mut rules = inline_card("rules-card", "always-test");
    rules.spec.skill_type = SkillType::Rule;
    let mut style = image_card("style-card", "style");
    style.spec.skill_type = SkillType::Rule;
    let resolved = resolve(&[
        ("style-card", Some(&style)),
        ("java-card", Some(&java)),
        ("rules-card", Some(&rules)),
    ])
    .expect("usable");
    assert_eq!(
        resolved.skills,
        vec![
            AgentSkill {
                name: "always-test".into(),
                skill_card: "rules-card".into(),
                collection: None,
                namespace: None,
                origin: SkillOrigin::Agent,
                image: None,
                skill_type: SkillType::Rule,
            },
            AgentSkill {
                name: "java".into(),
                skill_card: "java-card".into(),
                collection: None,
                namespace: None,
                origin: SkillOrigin::Agent,
                image: Some(format!("ghcr.io/acme/java-card@{DIGEST}")),
                skill_type: SkillType::Skill,
            },
            AgentSkill {
                name: "style".into(),
                skill_card: "style-card".into(),
                collection: None,
                namespace: None,
                origin: SkillOrigin::Agent,
                image: Some(format!("ghcr.io/acme/style-card@{DIGEST}")),
                skill_type: SkillType::Rule,
            },
        ]
    );
    assert_eq!(resolved.rules, ["always-test", "style"]);
}

#[test]
fn no_cards_is_an_empty_skill_set() {
    let resolved = resolve(&[]).expect("empty is fine");
    assert!(resolved.skills.is_empty() && resolved.rules.is_empty());
}

#[test]
fn every_missing_card_is_named() {
    let java = image_card("java-card", "java");
    let error =
        resolve(&[("a", None), ("java-card", Some(&java)), ("b", None)]).expect_err("missing");
    assert_eq!(
        error,
        Error::MissingSkillCards(vec!["a".into(), "b".into()])
    );
    assert_eq!(error.reason().as_str(), "SkillCardNotFound");
    assert_eq!(error.to_string(), r#"SkillCards "a", "b" not found"#);
}

#[test]
fn missing_cards_are_reported_before_unready_ones() {
    let mut broken = image_card("broken", "x");
    broken.status = None;
    let error = resolve(&[("broken", Some(&broken)), ("gone", None)]).expect_err("missing");
    assert_eq!(error.reason().as_str(), "SkillCardNotFound");
}

/// The error serde gives for a SkillCard whose status holds a time without an offset.
const BAD_TIME: &str = "invalid value: string \"2026-01-01T00:00:00\", expected a timestamp";

#[test]
fn a_malformed_card_is_not_ready_with_its_error() {
    let java = image_card("java-card", "java");
    let error = resolve_skills(&[
        own("java-card", Lookup::Found(&java)),
        own("odd", Lookup::Malformed(BAD_TIME)),
    ])
    .expect_err("malformed");
    assert_eq!(error.reason().as_str(), "SkillCardNotReady");
    assert_eq!(
        error.to_string(),
        format!(
            "SkillCard \"odd\" is not ready: it does not match the schema this operator reads ({BAD_TIME}); fix or replace it"
        )
    );

    // Missing cards still come first.
    let error = resolve_skills(&[
        own("odd", Lookup::Malformed(BAD_TIME)),
        own("gone", Lookup::Missing),
    ])
    .expect_err("missing");
    assert_eq!(error, Error::MissingSkillCards(vec!["gone".into()]));
}

#[test]
fn malformed_gateways_and_agents_are_not_ready() {
    let error = resolve_gateways(&[("llm", Lookup::<Gateway>::Malformed(BAD_TIME))])
        .expect_err("malformed");
    assert_eq!(error.reason().as_str(), "GatewayNotReady");
    assert!(error.to_string().contains(BAD_TIME), "{error}");

    let error = check_agent("migrator", Lookup::Malformed(BAD_TIME)).expect_err("malformed");
    assert_eq!(error.reason().as_str(), "AgentNotReady");
    assert!(
        error
            .to_string()
            .starts_with("Agent \"migrator\" is not ready: it does not match"),
        "{error}"
    );
}

#[test]
fn unusable_cards_say_why() {
    let mut no_status = image_card("no-status", "a");
    no_status.status = None;

    let mut invalid = image_card("invalid", "b");
    if let Some(s) = invalid.status.as_mut() {
        s.conditions = vec![ready_condition("False", "InvalidSkill", "name: too long")];
    }

    let mut stale = image_card("stale", "c");
    stale.metadata.generation = Some(3);

    let mut no_skill = image_card("no-skill", "d");
    if let Some(s) = no_skill.status.as_mut() {
        s.skill = None;
    }

    let mut no_image = image_card("no-image", "e");
    if let Some(s) = no_image.status.as_mut() {
        s.resolved_image = None;
    }

    let mut tag_only = image_card("tag-only", "f");
    if let Some(s) = tag_only.status.as_mut() {
        s.resolved_image = Some("ghcr.io/acme/f:1".into());
    }

    let mut git = git_card("git", "g");
    if let Some(s) = git.status.as_mut() {
        s.resolved_source = None;
    }

    let mut git_branch = git_card("git-branch", "i");
    if let Some(s) = git_branch.status.as_mut() {
        s.resolved_source = Some("https://example.com/skills.git@main".into());
    }

    let good = image_card("good", "h");
    let error = resolve(&[
        ("no-status", Some(&no_status)),
        ("invalid", Some(&invalid)),
        ("good", Some(&good)),
        ("stale", Some(&stale)),
        ("no-skill", Some(&no_skill)),
        ("no-image", Some(&no_image)),
        ("tag-only", Some(&tag_only)),
        ("git", Some(&git)),
        ("git-branch", Some(&git_branch)),
    ])
    .expect_err("not ready");
    assert_eq!(error.reason().as_str(), "SkillCardNotReady");
    assert_eq!(
        error,
        Error::SkillCardsNotReady(vec![
            ("no-status".into(), "it has no Ready condition yet".into()),
            (
                "invalid".into(),
                "Ready is False (InvalidSkill: name: too long)".into()
            ),
            (
                "stale".into(),
                "its status describes generation 2, its spec is at generation 3".into()
            ),
            (
                "no-skill".into(),
                "its status has no validated skill".into()
            ),
            ("no-image".into(), "its status has no resolved image".into()),
            (
                "tag-only".into(),
                "status.resolvedImage \"ghcr.io/acme/f:1\" is not pinned by digest".into()
            ),
            ("git".into(), "its status has no resolved source".into()),
            (
                "git-branch".into(),
                "status.resolvedSource \"https://example.com/skills.git@main\" is not pinned to a commit (<url>@<40 hex digits>)".into()
            ),
        ])
    );
}

#[test]
fn duplicate_names_name_both_cards() {
    let a = image_card("java-a", "java");
    let b = inline_card("java-b", "java");
    let error = resolve(&[("java-a", Some(&a)), ("java-b", Some(&b))]).expect_err("duplicate");
    assert_eq!(
        error,
        Error::DuplicateSkillName {
            skill: "java".into(),
            first_card: "java-a".into(),
            first_collection: None,
            second_card: "java-b".into(),
            second_collection: None,
        }
    );
    assert_eq!(error.reason().as_str(), "DuplicateSkillName");
    assert_eq!(
        error.to_string(),
        r#"skill "java" is provided by both SkillCard "java-a" and SkillCard "java-b"; skill names must be unique within an Agent"#
    );
}

#[test]
fn mounted_skill_follows_the_agent_pin_and_the_card() {
    let mut card = image_card("java-card", "java");
    card.spec.sub_path = Some("skills/java".into());
    card.spec.pull_secrets = Some(vec![SecretRef {
        name: "regcred".into(),
    }]);
    let resolved = resolve(&[("java-card", Some(&card))]).expect("usable");
    let mounted = MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&card))
        .expect("mountable");
    assert_eq!(
        mounted,
        MountedSkill {
            name: "java".into(),
            description: "java things".into(),
            skill_type: SkillType::Skill,
            skill_card: "java-card".into(),
            source: SkillSource::Image {
                reference: format!("ghcr.io/acme/java-card@{DIGEST}")
            },
            sub_path: Some("skills/java".into()),
            pull_secrets: vec!["regcred".into()],
            verification: None,
        }
    );

    let inline = inline_card("notes-card", "notes");
    let resolved = resolve(&[("notes-card", Some(&inline))]).expect("usable");
    let mounted = MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&inline))
        .expect("mountable");
    assert_eq!(
        mounted.source,
        SkillSource::Inline {
            config_map: "notes-card-skill".into()
        }
    );
    assert_eq!(mounted.sub_path, None);
}

/// A run records how each skill it mounts stood against the trust policies: the card's
/// `status.verification` at the moment the run pinned it, read from the card itself.
#[test]
fn mounted_skill_records_the_cards_verification() {
    let mut card = image_card("java-card", "java");
    let verification = SkillVerification {
        state: VerificationState::Verified,
        signer: Some("sha256:feed".into()),
        signers: vec!["sha256:feed".into()],
        signature_digest: Some(format!("sha256:{}", "5".repeat(64))),
        layout: Some("tag".into()),
        policies: vec!["ClusterSkillTrustPolicy/skills".into()],
    };
    if let Some(status) = card.status.as_mut() {
        status.verification = Some(verification.clone());
    }
    let resolved = resolve(&[("java-card", Some(&card))]).expect("usable");
    let mounted = MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&card))
        .expect("mountable");
    assert_eq!(mounted.pinned().verification, Some(Box::new(verification)));

    // No policy selected the card: nothing is recorded.
    let plain = image_card("plain-card", "plain");
    let resolved = resolve(&[("plain-card", Some(&plain))]).expect("usable");
    let mounted = MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&plain))
        .expect("mountable");
    assert_eq!(mounted.pinned().verification, None);
}

#[test]
fn mounted_skill_refuses_a_card_that_moved_on() {
    let card = image_card("java-card", "java");
    let pinned = resolve(&[("java-card", Some(&card))])
        .expect("usable")
        .skills
        .remove(0);

    let mut new_image = card.clone();
    if let Some(s) = new_image.status.as_mut() {
        s.resolved_image = Some(format!("ghcr.io/acme/java-card@sha256:{}", "f".repeat(64)));
    }
    let mut renamed = card.clone();
    if let Some(s) = renamed.status.as_mut() {
        s.skill = Some(frontmatter("kotlin"));
    }
    for changed in [new_image, renamed] {
        let error =
            MountedSkill::from_agent_skill(&pinned, Lookup::Found(&changed)).expect_err("changed");
        assert_eq!(
            error,
            Error::SkillCardsNotReady(vec![(
                "java-card".into(),
                "it changed since the Agent resolved it; waiting for the Agent".into()
            )])
        );
    }

    let mut stale = card.clone();
    stale.metadata.generation = Some(5);
    assert_eq!(
        MountedSkill::from_agent_skill(&pinned, Lookup::Found(&stale))
            .map_err(|e| e.reason().as_str()),
        Err("SkillCardNotReady")
    );
}

#[test]
fn mounted_skill_of_a_gone_or_malformed_card() {
    let card = image_card("java-card", "java");
    let pinned = resolve(&[("java-card", Some(&card))])
        .expect("usable")
        .skills
        .remove(0);
    assert_eq!(
        MountedSkill::from_agent_skill(&pinned, Lookup::Missing),
        Err(Error::MissingSkillCards(vec!["java-card".into()]))
    );
    assert_eq!(
        MountedSkill::from_agent_skill(&pinned, Lookup::Malformed(BAD_TIME)),
        Err(Error::SkillCardsNotReady(vec![(
            "java-card".into(),
            malformed_detail(BAD_TIME)
        )]))
    );
}

fn gateway(name: &str, ready: &str, observed: Option<i64>) -> Gateway {
    let mut g = Gateway::new(
        name,
        GatewaySpec {
            provider: "openai".into(),
            model: GatewayModel {
                name: "gpt".into(),
                context_window: 1000,
                tier: None,
            },
            ..Default::default()
        },
    );
    g.metadata.generation = Some(2);
    g.status = Some(GatewayStatus {
        observed_generation: observed,
        conditions: vec![ready_condition(
            ready,
            "SecretMissing",
            "secret llm not found",
        )],
        ..GatewayStatus::default()
    });
    g
}

#[test]
fn gateways_must_exist_and_be_ready() {
    let good = gateway("good", "True", Some(2));
    let bad = gateway("bad", "False", Some(2));
    let stale = gateway("stale", "True", Some(1));
    assert_eq!(resolve_gateways(&[("good", Lookup::Found(&good))]), Ok(()));
    assert_eq!(resolve_gateways::<&str>(&[]), Ok(()));

    let error = resolve_gateways(&[
        ("x", Lookup::Missing),
        ("good", Lookup::Found(&good)),
        ("y", Lookup::Missing),
    ])
    .expect_err("missing");
    assert_eq!(error, Error::GatewayNotFound(vec!["x".into(), "y".into()]));
    assert_eq!(error.reason().as_str(), "GatewayNotFound");

    let error = resolve_gateways(&[
        ("bad".to_string(), Lookup::Found(&bad)),
        ("good".to_string(), Lookup::Found(&good)),
        ("stale".to_string(), Lookup::Found(&stale)),
    ])
    .expect_err("not ready");
    assert_eq!(error.reason().as_str(), "GatewayNotReady");
    assert_eq!(
        error.to_string(),
        "Gateway \"bad\" is not ready: Ready is False (SecretMissing: secret llm not found); \
         Gateway \"stale\" is not ready: its status describes generation 1, its spec is at generation 2"
    );
}

#[test]
fn agent_must_exist_and_be_ready_for_its_generation() {
    let mut agent = Agent::new(
        "migrator",
        AgentSpec {
            image: "ghcr.io/acme/harness:1".into(),
            ..Default::default()
        },
    );
    assert_eq!(
        check_agent("migrator", Lookup::Missing).err(),
        Some(Error::AgentNotFound {
            name: "migrator".into()
        })
    );
    assert_eq!(
        check_agent("migrator", Lookup::Found(&agent))
            .err()
            .map(|e| e.to_string()),
        Some("Agent \"migrator\" is not ready: it has no Ready condition yet".to_string())
    );
    agent.metadata.generation = Some(2);
    agent.status = Some(AgentStatus {
        observed_generation: Some(2),
        conditions: vec![ready_condition("True", "Resolved", "")],
        ..Default::default()
    });
    let checked = check_agent("migrator", Lookup::Found(&agent)).expect("ready");
    assert!(std::ptr::eq(checked, &raw const agent));
    agent.metadata.generation = Some(3);
    assert_eq!(
        check_agent("migrator", Lookup::Found(&agent))
            .err()
            .map(|e| e.reason().as_str()),
        Some("AgentNotReady")
    );
}

#[test]
fn skill_delivery_falls_back_to_inject() {
    assert_eq!(
        resolve_skill_delivery("native"),
        SkillDelivery {
            mode: SkillDeliveryMode::Native,
            unknown: None
        }
    );
    assert_eq!(
        resolve_skill_delivery("inject"),
        SkillDelivery {
            mode: SkillDeliveryMode::Inject,
            unknown: None
        }
    );
    for value in ["Native", "mcp", "", " native"] {
        let delivery = resolve_skill_delivery(value);
        assert_eq!(delivery.mode, SkillDeliveryMode::Inject, "{value:?}");
        assert_eq!(delivery.unknown.as_deref(), Some(value));
    }
    assert_eq!(resolve_skill_delivery("native").fallback_message(), None);
    assert_eq!(
        resolve_skill_delivery("mcp").fallback_message().as_deref(),
        Some("spec.skillDelivery \"mcp\" is not a known mode (native, inject); runs use inject")
    );
    assert_eq!(SkillDeliveryMode::Native.as_str(), "native");
    assert_eq!(SkillDeliveryMode::Inject.as_str(), "inject");
}

fn refs(names: &[&str]) -> Vec<ObjectRef> {
    names
        .iter()
        .map(|n| ObjectRef { name: (*n).into() })
        .collect()
}

#[test]
fn gateway_selection() {
    assert_eq!(select_gateway(&refs(&["only"]), None), Ok("only".into()));
    assert_eq!(
        select_gateway(&refs(&["a", "b"]), Some("b")),
        Ok("b".into())
    );
    assert_eq!(
        select_gateway(&refs(&["only"]), Some("only")),
        Ok("only".into())
    );

    let error = select_gateway(&refs(&[]), None).expect_err("none");
    assert_eq!(
        (error.reason().as_str(), error.to_string().as_str()),
        (
            "NoGateway",
            "the Agent lists no gateways; set spec.gateway to a Gateway, or add one to the Agent's spec.gateways"
        )
    );
    assert_eq!(
        select_gateway(&refs(&[]), Some("x")),
        Ok("x".into()),
        "a gateway-less Agent runs on the run's Gateway"
    );
    assert_eq!(
        gateway_configured(&refs(&[])),
        (
            ConditionStatus::False,
            AgentReason::NoGatewaysListed,
            "spec.gateways is empty: every run must name a Gateway in spec.gateway".to_string()
        )
    );
    assert_eq!(
        gateway_configured(&refs(&["a", "b"])),
        (
            ConditionStatus::True,
            AgentReason::GatewaysListed,
            "runs may use gateway(s) \"a\", \"b\"".to_string()
        )
    );

    let error = select_gateway(&refs(&["a", "b"]), None).expect_err("ambiguous");
    assert_eq!(error.reason().as_str(), "GatewayRequired");
    assert_eq!(
        error.to_string(),
        r#"the Agent lists several gateways ("a", "b"); set spec.gateway to one of them"#
    );

    let error = select_gateway(&refs(&["a", "b"]), Some("c")).expect_err("not listed");
    assert_eq!(error.reason().as_str(), "GatewayNotAllowed");
    assert_eq!(
        error.to_string(),
        r#"gateway "c" is not one of the Agent's gateways ("a", "b")"#
    );
}

fn ready_collection(name: &str, cards: &[&str]) -> SkillCollection {
    let mut c = SkillCollection::new(name, agentic_api::SkillCollectionSpec::default());
    c.metadata.generation = Some(2);
    c.status = Some(agentic_api::SkillCollectionStatus {
        resolved_skills: cards.iter().map(std::string::ToString::to_string).collect(),
        observed_generation: Some(2),
        conditions: vec![ready_condition("True", "AllSkillsResolved", "")],
        ..Default::default()
    });
    c
}

#[test]
fn collections_give_their_cards_and_missing_or_unready_ones_are_named() {
    let bundle = ready_collection("bundle", &["bundle-a", "bundle-b"]);
    let collections = [("bundle", Lookup::Found(&bundle))];
    assert_eq!(
        collection_cards(&collections).expect("ready"),
        vec![(
            "bundle",
            &["bundle-a".to_string(), "bundle-b".to_string()][..]
        )]
    );

    let mut stale = ready_collection("stale", &["x"]);
    stale.metadata.generation = Some(3);
    let mut failing = ready_collection("failing", &[]);
    if let Some(status) = failing.status.as_mut() {
        status.conditions = vec![ready_condition("False", "SkillsNotReady", "1 of 1")];
    }
    let error = collection_cards(&[
        ("stale", Lookup::Found(&stale)),
        ("failing", Lookup::Found(&failing)),
    ])
    .expect_err("not ready");
    assert_eq!(error.reason().as_str(), "SkillCollectionNotReady");
    let text = error.to_string();
    assert!(
        text.contains(r#"SkillCollection "stale" is not ready: its status describes generation 2"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"SkillCollection "failing" is not ready: Ready is False (SkillsNotReady: 1 of 1)"#
        ),
        "{text}"
    );

    let error = collection_cards(&[
        ("failing", Lookup::Found(&failing)),
        ("gone", Lookup::<SkillCollection>::Missing),
    ])
    .expect_err("missing");
    assert_eq!(error, Error::MissingSkillCollections(vec!["gone".into()]));
    assert_eq!(error.reason().as_str(), "SkillCollectionNotFound");
}

#[test]
fn collection_skills_join_the_agents_and_duplicates_name_both_sources() {
    let own_card = image_card("java-card", "java");
    let from_bundle = image_card("bundle-maven", "maven");
    let clash = image_card("bundle-java", "java");
    let resolved = resolve_skills(&[
        own("java-card", Lookup::Found(&own_card)),
        CardRef {
            name: "bundle-maven",
            collection: Some("bundle"),
            card: Lookup::Found(&from_bundle),
        },
        // The same card listed by a second collection counts once.
        CardRef {
            name: "bundle-maven",
            collection: Some("other"),
            card: Lookup::Found(&from_bundle),
        },
    ])
    .expect("usable");
    assert_eq!(resolved.skills.len(), 2);
    assert_eq!(resolved.skills[1].collection.as_deref(), Some("bundle"));
    assert_eq!(resolved.skills[0].collection, None);

    let error = resolve_skills(&[
        own("java-card", Lookup::Found(&own_card)),
        CardRef {
            name: "bundle-java",
            collection: Some("bundle"),
            card: Lookup::Found(&clash),
        },
    ])
    .expect_err("duplicate");
    assert_eq!(error.reason().as_str(), "DuplicateSkillName");
    assert_eq!(
        error.to_string(),
        r#"skill "java" is provided by both SkillCard "java-card" and SkillCard "bundle-java" of SkillCollection "bundle"; skill names must be unique within an Agent"#
    );
}

#[test]
fn defaults_are_best_effort_own_skills_win_and_duplicates_are_left_out() {
    let own_card = image_card("java-card", "java");
    let explicit = resolve_skills(&[own("java-card", Lookup::Found(&own_card))]).expect("own");

    let house = ready_collection("house", &["house-java", "house-style", "house-broken"]);
    let shadowed = image_card("house-java", "java");
    let style = image_card("house-style", "style");
    let mut broken = image_card("house-broken", "broken");
    broken.status = None;
    let mut failing = ready_collection("failing", &["f-x"]);
    if let Some(status) = failing.status.as_mut() {
        status.conditions = vec![ready_condition("False", "SkillsNotReady", "1 of 1")];
    }
    let cluster = ready_collection("platform", &["p-style", "p-audit", "p-inline"]);
    let other_style = image_card("p-style", "style");
    let audit = image_card("p-audit", "audit");
    let inline = inline_card("p-inline", "inline-rule");
    let defaults = [
        DefaultCollection {
            namespace: "ns",
            name: "house",
            scope: DefaultScope::Namespace,
            collection: Lookup::Found(&house),
            cards: vec![
                ("house-java", Lookup::Found(&shadowed)),
                ("house-style", Lookup::Found(&style)),
                ("house-broken", Lookup::Found(&broken)),
            ],
        },
        DefaultCollection {
            namespace: "ns",
            name: "failing",
            scope: DefaultScope::Namespace,
            collection: Lookup::Found(&failing),
            cards: vec![],
        },
        DefaultCollection {
            namespace: "platform-skills",
            name: "platform",
            scope: DefaultScope::Cluster,
            collection: Lookup::Found(&cluster),
            cards: vec![
                ("p-style", Lookup::Found(&other_style)),
                ("p-audit", Lookup::Found(&audit)),
                ("p-inline", Lookup::Found(&inline)),
            ],
        },
    ];
    let (merged, report) = apply_defaults(explicit, &defaults);
    let skills: Vec<(&str, &str, Option<&str>, SkillOrigin)> = merged
        .skills
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.skill_card.as_str(),
                s.namespace.as_deref(),
                s.origin,
            )
        })
        .collect();
    assert_eq!(
        skills,
        [
            (
                "audit",
                "p-audit",
                Some("platform-skills"),
                SkillOrigin::ClusterDefault
            ),
            ("java", "java-card", None, SkillOrigin::Agent),
        ],
        "own java wins, both styles are left out, audit is added"
    );
    assert_eq!(
        report.applied,
        ["audit (SkillCard platform-skills/p-audit)"]
    );
    assert_eq!(
        report.shadowed,
        ["java (SkillCard house-java replaced by SkillCard java-card)"]
    );
    assert_eq!(
        report.conflicts,
        ["style (SkillCard house-style and SkillCard platform-skills/p-style)"]
    );
    assert_eq!(report.skipped.len(), 3, "{:?}", report.skipped);
    assert!(report.skipped[0].starts_with(
        "SkillCard ns/house-broken of SkillCollection ns/house (it has no Ready condition yet"
    ));
    assert!(
        report.skipped[1].starts_with("SkillCollection ns/failing (Ready is False (SkillsNotReady")
    );
    assert!(report.skipped[2].contains("an inline skill cannot be mounted in another namespace"));
    let (ready, reason, message) = report.condition().expect("a condition");
    assert!(!ready);
    assert_eq!(reason, AgentReason::DefaultSkillsSkipped);
    assert!(message.starts_with("applied: audit"), "{message}");

    // Only a shadowed default: True, and says so.
    let only = [DefaultCollection {
        cards: vec![("house-java", Lookup::Found(&shadowed))],
        ..defaults[0].clone()
    }];
    let explicit = resolve_skills(&[own("java-card", Lookup::Found(&own_card))]).expect("own");
    let (_, report) = apply_defaults(explicit.clone(), &only);
    assert_eq!(
        report.condition().map(|(ready, reason, _)| (ready, reason)),
        Some((true, AgentReason::DefaultSkillsShadowed))
    );
    // No defaults: no condition, the skill set unchanged.
    let (same, report) = apply_defaults(explicit.clone(), &[]);
    assert_eq!(same, explicit);
    assert_eq!(report.condition(), None);
}

#[test]
fn rule_bodies_are_summed_and_compared_with_a_quarter_of_the_smallest_window() {
    let mut rule = image_card("rule-card", "house-rules");
    rule.spec.skill_type = SkillType::Rule;
    if let Some(status) = rule.status.as_mut() {
        status.body_bytes = Some(3000);
    }
    let mut plain = image_card("plain-card", "java");
    if let Some(status) = plain.status.as_mut() {
        status.body_bytes = Some(90_000);
    }
    let resolved =
        resolve(&[("rule-card", Some(&rule)), ("plain-card", Some(&plain))]).expect("usable");
    assert_eq!(resolved.rule_body_bytes, 3000, "only rules count");

    // 3000 bytes are 1000 tokens; a quarter of 4000 is 1000: fits, one more byte does not.
    let (fits, reason, message) =
        rules_fit(&resolved.rules, 3000, &[128_000, 4000, 0, -1]).expect("a verdict");
    assert!(fits);
    assert_eq!(reason, AgentReason::RulesFit);
    assert!(message.contains("about 1000 tokens"), "{message}");
    assert!(message.contains("(4000 tokens) is 1000"), "{message}");
    let (fits, reason, _) = rules_fit(&resolved.rules, 3001, &[4000]).expect("a verdict");
    assert!(!fits);
    assert_eq!(reason, AgentReason::RulesExceedContext);

    assert_eq!(rules_fit(&[], 99_999, &[4000]), None, "no rules");
    assert_eq!(rules_fit(&resolved.rules, 3000, &[0]), None, "no window");
}

#[test]
fn a_git_card_is_pinned_to_its_commit_and_mounted_from_it() {
    let mut card = git_card("upgrade-card", "upgrade");
    card.spec.source_secret = Some(SecretRef {
        name: "git-creds".into(),
    });
    let resolved = resolve(&[("upgrade-card", Some(&card))]).expect("usable");
    let pin = format!("https://example.com/skills.git@{COMMIT}");
    assert_eq!(resolved.skills[0].image.as_deref(), Some(pin.as_str()));
    let mounted = MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&card))
        .expect("mountable");
    assert_eq!(
        mounted.source,
        SkillSource::Git {
            url: "https://example.com/skills.git".into(),
            commit: COMMIT.into(),
            sub_path: Some("skills/x".into()),
            secret: Some("git-creds".into()),
        }
    );
    assert_eq!(
        mounted.sub_path, None,
        "the fetcher, not the mount, uses it"
    );
    assert_eq!(mounted.pinned().image, pin);

    // The branch moved and the card followed: the run waits for the Agent, never mounts a
    // commit its Agent did not pin.
    let mut moved = card.clone();
    if let Some(s) = moved.status.as_mut() {
        s.resolved_source = Some(format!("https://example.com/skills.git@{}", "f".repeat(40)));
    }
    assert_eq!(
        MountedSkill::from_agent_skill(&resolved.skills[0], Lookup::Found(&moved))
            .map_err(|e| e.reason().as_str()),
        Err("SkillCardNotReady")
    );
}

#[test]
fn a_cluster_default_git_skill_needs_no_secret_of_its_namespace() {
    let explicit = resolve_skills(&[]).expect("no skills");
    let cluster = ready_collection("platform", &["p-public", "p-private"]);
    let public = git_card("p-public", "public");
    let mut private = git_card("p-private", "private");
    private.spec.source_secret = Some(SecretRef {
        name: "git-creds".into(),
    });
    let defaults = [DefaultCollection {
        namespace: "platform-skills",
        name: "platform",
        scope: DefaultScope::Cluster,
        collection: Lookup::Found(&cluster),
        cards: vec![
            ("p-public", Lookup::Found(&public)),
            ("p-private", Lookup::Found(&private)),
        ],
    }];
    let (merged, report) = apply_defaults(explicit, &defaults);
    let names: Vec<&str> = merged.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["public"]);
    assert_eq!(
        merged.skills[0].image,
        Some(format!("https://example.com/skills.git@{COMMIT}"))
    );
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(
        report.skipped[0].contains("p-private")
            && report.skipped[0].contains("spec.sourceSecret cannot be used in another namespace"),
        "{:?}",
        report.skipped
    );
}
