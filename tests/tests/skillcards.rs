//! SkillCard reconciliation against a real API server and registry: every reason reached
//! for real.

use agentic_api::{SkillCard, SkillCardSpec, SkillType};
use agentic_integration_tests::{
    Operator, apply, env, has_condition, push, registry, wait_for, write_skill,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ObjectMeta;

fn card(name: &str, spec: SkillCardSpec) -> SkillCard {
    SkillCard {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

fn image(reference: &str) -> SkillCardSpec {
    SkillCardSpec {
        image: Some(reference.to_string()),
        ..SkillCardSpec::default()
    }
}

async fn ready_reason(api: &Api<SkillCard>, name: &str, status: &str, reason: &str) -> SkillCard {
    wait_for(
        api,
        name,
        &format!("Ready={status} reason {reason}"),
        |c: &SkillCard| {
            c.status
                .as_ref()
                .is_some_and(|s| has_condition(&s.conditions, "Ready", status, reason))
        },
    )
    .await
}

#[tokio::test]
async fn image_skills_are_resolved_read_and_validated() {
    let env = env().await;
    let ns = env.namespace("skc-image").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let tmp = tempfile::tempdir().expect("tempdir");

    // One skill at the image root.
    let single = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let pushed = push(&[single.clone()], "skills/java:1").await;
    let digest = pushed.rsplit_once('@').expect("pinned").1.to_string();
    apply(
        &api,
        &card("java", image(&pushed.replace(&format!("@{digest}"), ""))),
    )
    .await;
    let ready = ready_reason(&api, "java", "True", "SkillValid").await;
    let status = ready.status.expect("status");
    let skill = status.skill.expect("frontmatter in status");
    assert_eq!(skill.name, "java-upgrade");
    assert_eq!(skill.description, "Upgrade Java projects.");
    let resolved = status.resolved_image.expect("resolvedImage");
    assert!(
        resolved.ends_with(&format!("/skills/java@{digest}")),
        "{resolved}"
    );
    assert!(has_condition(
        &status.conditions,
        "RegistryReachable",
        "True",
        "DigestResolved"
    ));

    // A multi-skill image: subPath chooses; without it the card lists the directories.
    let multi = tempfile::tempdir().expect("tempdir");
    let a = write_skill(multi.path(), "quarkus-config", "Configure Quarkus.");
    let b = write_skill(multi.path(), "maven-deps", "Fix Maven dependencies.");
    let pushed = push(&[a, b], "skills/multi:1").await;
    let tag = pushed.split('@').next().expect("tag").to_string();
    apply(
        &api,
        &card(
            "quarkus",
            SkillCardSpec {
                sub_path: Some("quarkus-config".into()),
                skill_type: SkillType::Rule,
                ..image(&tag)
            },
        ),
    )
    .await;
    let quarkus = ready_reason(&api, "quarkus", "True", "SkillValid").await;
    assert_eq!(
        quarkus
            .status
            .and_then(|s| s.skill)
            .map(|s| s.name)
            .as_deref(),
        Some("quarkus-config")
    );

    apply(&api, &card("needs-subpath", image(&tag))).await;
    let c = ready_reason(&api, "needs-subpath", "False", "SubPathRequired").await;
    let conditions = c.status.expect("status").conditions;
    let message = &agentic_integration_tests::condition(&conditions, "Ready")
        .expect("Ready")
        .message;
    assert!(
        message.contains("maven-deps") && message.contains("quarkus-config"),
        "{message}"
    );

    apply(
        &api,
        &card(
            "nowhere",
            SkillCardSpec {
                sub_path: Some("no-such-skill".into()),
                ..image(&tag)
            },
        ),
    )
    .await;
    ready_reason(&api, "nowhere", "False", "SkillNotFound").await;

    let registry = registry().await;
    apply(
        &api,
        &card("missing", image(&format!("{registry}/skills/absent:1"))),
    )
    .await;
    ready_reason(&api, "missing", "False", "ImageNotFound").await;

    // Nothing listens on port 1: the registry is unreachable and the card never was valid.
    apply(&api, &card("offline", image("127.0.0.1:1/skills/java:1"))).await;
    let offline = ready_reason(&api, "offline", "False", "RegistryUnavailable").await;
    assert!(has_condition(
        &offline.status.expect("status").conditions,
        "RegistryReachable",
        "False",
        "RegistryUnavailable"
    ));

    operator.stop().await;
}

#[tokio::test]
async fn inline_skills_get_a_config_map_and_invalid_ones_say_why() {
    let env = env().await;
    let ns = env.namespace("skc-inline").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![]);
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);

    let text =
        "---\nname: no-system-out\ndescription: Never print with System.out.\n---\nUse a logger.\n";
    apply(
        &api,
        &card(
            "rule",
            SkillCardSpec {
                inline: Some(text.into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
        ),
    )
    .await;
    let ready = ready_reason(&api, "rule", "True", "SkillValid").await;
    let status = ready.status.expect("status");
    assert_eq!(
        status.delivery_mode,
        Some(agentic_api::DeliveryMode::Inline)
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let listed = maps.list(&Default::default()).await.expect("list");
    let inline = listed
        .items
        .iter()
        .find(|m| {
            m.data
                .as_ref()
                .and_then(|d| d.get("SKILL.md"))
                .map(String::as_str)
                == Some(text)
        })
        .expect("a ConfigMap carries the inline SKILL.md");
    let owner = &inline.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("SkillCard", "rule")
    );

    apply(
        &api,
        &card(
            "broken",
            SkillCardSpec {
                inline: Some("---\nname: Bad_Name\n---\n".into()),
                ..SkillCardSpec::default()
            },
        ),
    )
    .await;
    let broken = ready_reason(&api, "broken", "False", "InvalidSkill").await;
    let conditions = broken.status.expect("status").conditions;
    let message = agentic_integration_tests::condition(&conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(
        message.contains("name") && message.contains("description"),
        "every problem is listed: {message}"
    );

    apply(
        &api,
        &card(
            "from-git",
            SkillCardSpec {
                source: Some("https://example.invalid/skills.git".into()),
                ..SkillCardSpec::default()
            },
        ),
    )
    .await;
    ready_reason(&api, "from-git", "False", "SourceNotSupported").await;

    operator.stop().await;
}
