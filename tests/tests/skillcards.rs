//! SkillCard reconciliation against a real API server and registry: every reason reached
//! for real.

use agentic_api::{SkillCard, SkillCardSpec, SkillType};
use agentic_integration_tests::{
    Operator, apply, condition, env, has_condition, push, push_to, registry, scenario, wait_for,
    write_skill,
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
    let (ns, client, operator) = scenario("skc-image", SandboxBackend::Pod).await;
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let tmp = tempfile::tempdir().expect("tempdir");

    // One skill at the image root.
    let single = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let pushed = push(&[single], "skills/java:1").await;
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
    assert!(
        has_condition(&conditions, "RegistryReachable", "True", "DigestResolved"),
        "the registry answered: {conditions:#?}"
    );
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
    let conditions = offline.status.expect("status").conditions;
    assert!(has_condition(
        &conditions,
        "RegistryReachable",
        "False",
        "RegistryUnavailable"
    ));
    // How the connection failed stays in the operator's log: a status would let card authors
    // probe which ports the operator reaches.
    let message = &condition(&conditions, "RegistryReachable")
        .expect("RegistryReachable")
        .message;
    assert_eq!(
        message,
        "registry 127.0.0.1:1 did not answer; the operator's log has the cause"
    );

    operator.stop().await;
}

#[tokio::test]
async fn inline_skills_get_a_config_map_and_invalid_ones_say_why() {
    let (ns, client, operator) = scenario("skc-inline", SandboxBackend::Pod).await;
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
    let listed = maps
        .list(&kube::api::ListParams::default())
        .await
        .expect("list");
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
                // Plain http:// to a host not listed with --insecure-git-host: refused
                // before anything is sent (tests/tests/git_skills.rs has the git verdicts).
                source: Some("http://example.invalid/skills.git".into()),
                ..SkillCardSpec::default()
            },
        ),
    )
    .await;
    ready_reason(&api, "from-git", "False", "InvalidSource").await;

    operator.stop().await;
}

#[tokio::test]
async fn a_moved_tag_revalidates_and_an_outage_keeps_a_valid_card_ready() {
    let env = env().await;
    let ns = env.namespace("skc-tags").await.expect("namespace");
    let client = env.client();
    // A registry of this test's own, so it can be stopped.
    let own = agentic_testenv::Registry::start().await.expect("registry");
    let addr = own.addr();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![addr.clone()]);
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);

    let v1 = tempfile::tempdir().expect("tempdir");
    let first = push_to(
        &addr,
        &[write_skill(v1.path(), "moving", "First version.")],
        "skills/moving:stable",
    )
    .await;
    apply(
        &api,
        &card("moving", image(&format!("{addr}/skills/moving:stable"))),
    )
    .await;
    ready_reason(&api, "moving", "True", "SkillValid").await;

    // The tag moves: the next refresh (every 2s in these tests) pins and validates the new digest.
    let v2 = tempfile::tempdir().expect("tempdir");
    let second = push_to(
        &addr,
        &[write_skill(v2.path(), "moving", "Second version.")],
        "skills/moving:stable",
    )
    .await;
    assert_ne!(first, second);
    let new_digest = second.rsplit_once('@').expect("pinned").1.to_string();
    let moved = wait_for(&api, "moving", "the new digest", |c: &SkillCard| {
        c.status.as_ref().is_some_and(|s| {
            s.resolved_image
                .as_deref()
                .is_some_and(|r| r.ends_with(&new_digest))
                && s.skill
                    .as_ref()
                    .is_some_and(|k| k.description == "Second version.")
        })
    })
    .await;
    let pinned = moved.status.and_then(|s| s.resolved_image).expect("pinned");

    // The registry goes away: the card stays Ready on what it validated, and says so.
    drop(own);
    let during = wait_for(
        &api,
        "moving",
        "RegistryReachable=False",
        |c: &SkillCard| {
            c.status.as_ref().is_some_and(|s| {
                has_condition(
                    &s.conditions,
                    "RegistryReachable",
                    "False",
                    "RegistryUnavailable",
                )
            })
        },
    )
    .await;
    let status = during.status.expect("status");
    assert!(
        has_condition(&status.conditions, "Ready", "True", "SkillValid"),
        "{status:#?}"
    );
    assert_eq!(status.resolved_image.as_deref(), Some(pinned.as_str()));
    operator.stop().await;
}

#[tokio::test]
async fn private_images_need_the_pull_secret_and_never_leak_it() {
    use base64::Engine as _;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    const USER: &str = "skills-reader";
    const PASSWORD: &str = "s3cret-password-never-logged";
    let env = env().await;
    let ns = env.namespace("skc-private").await.expect("namespace");
    let client = env.client();
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let private = agentic_testenv::Registry::start_with_htpasswd(&format!("{USER}:{hash}\n"))
        .await
        .expect("registry");
    let addr = private.addr();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let docker_config = format!(r#"{{"auths":{{"{addr}":{{"auth":"{basic}"}}}}}}"#);

    let tmp = tempfile::tempdir().expect("tempdir");
    let image_ = agentic_oci::pack_skills(&[write_skill(tmp.path(), "private-skill", "Private.")])
        .expect("pack");
    let options = agentic_oci::RegistryOptions {
        insecure_registries: vec![addr.clone()],
        ..agentic_oci::RegistryOptions::default()
    };
    let config =
        agentic_oci::DockerConfig::parse(docker_config.as_bytes(), "test").expect("config");
    let auth = agentic_oci::RegistryAuth::from_docker_configs([&config], &addr);
    let reference = format!("{addr}/team/private:1");
    agentic_oci::push_image(&image_, &reference, &auth, &options)
        .await
        .expect("push");

    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![addr.clone()]);
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let with_secret = |secret: &str| SkillCardSpec {
        pull_secrets: Some(vec![agentic_api::SecretRef {
            name: secret.into(),
        }]),
        ..image(&reference)
    };

    apply(&api, &card("anonymous", image(&reference))).await;
    ready_reason(&api, "anonymous", "False", "Unauthorized").await;

    apply(&api, &card("named", with_secret("registry-creds"))).await;
    ready_reason(&api, "named", "False", "PullSecretNotFound").await;

    // The Secret appears: the watch on Secrets brings the card back, and it turns Ready.
    apply(
        &secrets,
        &Secret {
            metadata: ObjectMeta {
                name: Some("registry-creds".into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some(std::collections::BTreeMap::from([(
                ".dockerconfigjson".to_string(),
                ByteString(docker_config.clone().into_bytes()),
            )])),
            ..Secret::default()
        },
    )
    .await;
    let ready = ready_reason(&api, "named", "True", "SkillValid").await;
    assert_eq!(
        ready
            .status
            .and_then(|s| s.skill)
            .map(|s| s.name)
            .as_deref(),
        Some("private-skill")
    );

    // Nothing the operator wrote carries the credentials.
    let statuses = serde_json::to_string(
        &api.list(&kube::api::ListParams::default())
            .await
            .expect("list")
            .items,
    )
    .expect("json");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let events = serde_json::to_string(
        &events
            .list(&kube::api::ListParams::default())
            .await
            .expect("events")
            .items,
    )
    .expect("json");
    for text in [statuses, events] {
        assert!(
            !text.contains(PASSWORD) && !text.contains(&basic),
            "credentials leaked"
        );
    }
    operator.stop().await;
}

/// The most a card may take to see its registry again once the registry is back: one tag
/// refresh (2 s in these tests) and a pass. The per-object error backoff grows to minutes; it
/// must not push the next check past the refresh interval.
const REGISTRY_RECOVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test]
async fn after_a_registry_outage_cards_recover_within_a_tag_refresh() {
    let env = env().await;
    let ns = env.namespace("skc-recover").await.expect("namespace");
    let client = env.client();
    let mut own = agentic_testenv::Registry::start().await.expect("registry");
    let addr = own.addr();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![addr.clone()]);
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let dir = tempfile::tempdir().expect("tempdir");
    push_to(
        &addr,
        &[write_skill(dir.path(), "steady", "Always there.")],
        "skills/steady:1",
    )
    .await;
    apply(
        &api,
        &card("steady", image(&format!("{addr}/skills/steady:1"))),
    )
    .await;
    ready_reason(&api, "steady", "True", "SkillValid").await;

    // Long enough for five or six failed checks: the uncapped backoff reaches 32 s.
    own.restart(std::time::Duration::from_secs(35))
        .await
        .expect("the registry comes back");
    let back = std::time::Instant::now();
    wait_for(&api, "steady", "RegistryReachable=True", |c: &SkillCard| {
        c.status.as_ref().is_some_and(|s| {
            has_condition(&s.conditions, "RegistryReachable", "True", "DigestResolved")
        })
    })
    .await;
    let took = back.elapsed();
    assert!(
        took < REGISTRY_RECOVERY,
        "the card saw its registry {took:?} after it was back (at most {REGISTRY_RECOVERY:?})"
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_hung_registry_shows_as_validating_rather_than_as_no_status() {
    // A registry that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let hung = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let env = env().await;
    let ns = env.namespace("card-hung").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![addr.clone()]);
    let api: Api<SkillCard> = Api::namespaced(client, &ns);
    let reference = format!("{addr}/hung/skill:v1");
    let started = std::time::Instant::now();
    apply(&api, &card("hung", image(&reference))).await;

    let checking = ready_reason(&api, "hung", "Unknown", "Validating").await;
    // Before the read's own deadlines (30 s per read, 60 s per image) could end it: the
    // Validating mark is written before the read, not after it gives up.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let ready = condition(&checking.status.as_ref().unwrap().conditions, "Ready").unwrap();
    assert_eq!(
        ready.message,
        format!("reading the skill from image {reference}")
    );
    assert_eq!(ready.observed_generation, checking.metadata.generation);
    // Closing the connections ends the read, which a graceful stop waits for.
    hung.abort();
    let _ = hung.await;
    operator.stop().await;
}
