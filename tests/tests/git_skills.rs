//! Git SkillCards (`spec.source`) against a real git server (`git daemon`, `git
//! http-backend`) and API server: resolved to a commit, validated, pinned, re-resolved.

use std::collections::BTreeMap;

use agentic_api::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, DeliveryMode, ObjectRef, SecretRef,
    SkillCard, SkillCardSpec,
};
use agentic_integration_tests::{
    Operator, apply, condition, env, has_condition, llm_agent_spec, ready_agent, wait_for,
    wait_for_sandbox, wait_phase,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::{GitFile, GitServer};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

fn skill_md(name: &str, description: &str) -> GitFile {
    GitFile::File(
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n").into_bytes(),
    )
}

fn card(name: &str, source: &str, git_ref: Option<&str>, sub_path: Option<&str>) -> SkillCard {
    SkillCard {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec: SkillCardSpec {
            source: Some(source.to_string()),
            git_ref: git_ref.map(str::to_string),
            sub_path: sub_path.map(str::to_string),
            ..SkillCardSpec::default()
        },
        status: None,
    }
}

/// A fresh namespace and the controllers watching it, with `insecure` as the git hosts
/// reachable over plain http://.
async fn git_scenario(prefix: &str, insecure: Vec<String>) -> (String, Client, Operator) {
    let env = env().await;
    let ns = env.namespace(prefix).await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, insecure);
    (ns, client, operator)
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

fn resolved(card: &SkillCard) -> Option<&str> {
    card.status
        .as_ref()
        .and_then(|s| s.resolved_source.as_deref())
}

#[tokio::test]
async fn a_branch_is_pinned_moved_and_survives_its_deletion() {
    let server = GitServer::start().await.expect("git server");
    server.create_repo("skills.git").unwrap();
    let first = server
        .commit(
            "skills.git",
            "release",
            &[("SKILL.md", skill_md("demo", "First."))],
        )
        .unwrap();
    let (ns, client, operator) = git_scenario("git-branch", Vec::new()).await;
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let url = server.git_url("skills.git");
    apply(&api, &card("demo", &url, Some("release"), None)).await;

    let ready = ready_reason(&api, "demo", "True", "SkillValid").await;
    let status = ready.status.as_ref().unwrap();
    assert_eq!(resolved(&ready), Some(format!("{url}@{first}").as_str()));
    assert_eq!(status.delivery_mode, Some(DeliveryMode::Source));
    assert_eq!(status.skill.as_ref().unwrap().description, "First.");
    assert!(has_condition(
        &status.conditions,
        "SourceReachable",
        "True",
        "RefResolved"
    ));
    assert!(has_condition(
        &status.conditions,
        "MovingRef",
        "False",
        "RefSet"
    ));
    assert!(status.resolved_image.is_none());

    // The branch moves: the next refresh pins the new commit.
    let second = server
        .commit(
            "skills.git",
            "release",
            &[("SKILL.md", skill_md("demo", "Second."))],
        )
        .unwrap();
    let moved = wait_for(&api, "demo", "the new commit pinned", |c: &SkillCard| {
        resolved(c) == Some(format!("{url}@{second}").as_str())
    })
    .await;
    assert_eq!(moved.status.unwrap().skill.unwrap().description, "Second.");

    // The branch is deleted: the card stays Ready on what it pinned and says why.
    server.delete_branch("skills.git", "release").unwrap();
    let stale = wait_for(
        &api,
        "demo",
        "SourceReachable=False RefNotFound",
        |c: &SkillCard| {
            c.status.as_ref().is_some_and(|s| {
                has_condition(&s.conditions, "SourceReachable", "False", "RefNotFound")
            })
        },
    )
    .await;
    let status = stale.status.as_ref().unwrap();
    assert!(
        has_condition(&status.conditions, "Ready", "True", "SkillValid"),
        "{status:?}"
    );
    assert_eq!(resolved(&stale), Some(format!("{url}@{second}").as_str()));
    operator.stop().await;
}

#[tokio::test]
async fn the_default_branch_is_a_moving_ref_and_verdicts_name_their_reason() {
    let server = GitServer::start().await.expect("git server");
    server.create_repo("many.git").unwrap();
    let commit = server
        .commit(
            "many.git",
            "main",
            &[
                ("skills/alpha/SKILL.md", skill_md("alpha", "Alpha.")),
                (
                    "skills/broken/SKILL.md",
                    GitFile::File(b"no frontmatter here".to_vec()),
                ),
                ("skills/linked", GitFile::Symlink("alpha".into())),
            ],
        )
        .unwrap();
    let (ns, client, operator) = git_scenario("git-verdicts", Vec::new()).await;
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let url = server.git_url("many.git");

    apply(&api, &card("alpha", &url, None, Some("skills/alpha"))).await;
    let alpha = ready_reason(&api, "alpha", "True", "SkillValid").await;
    assert_eq!(resolved(&alpha), Some(format!("{url}@{commit}").as_str()));
    let moving = condition(&alpha.status.as_ref().unwrap().conditions, "MovingRef").unwrap();
    assert_eq!(
        (moving.status.as_str(), moving.reason.as_str()),
        ("True", "DefaultBranch")
    );

    // A full commit id pins it for good.
    apply(
        &api,
        &card("pinned", &url, Some(&commit), Some("skills/alpha")),
    )
    .await;
    let pinned = ready_reason(&api, "pinned", "True", "SkillValid").await;
    assert_eq!(resolved(&pinned), Some(format!("{url}@{commit}").as_str()));

    for (name, git_ref, sub_path, reason) in [
        ("broken", None, Some("skills/broken"), "InvalidSkill"),
        ("missing", None, Some("skills/none"), "SkillNotFound"),
        ("linked", None, Some("skills/linked"), "UnsafeSourceContent"),
        (
            "no-branch",
            Some("nope"),
            Some("skills/alpha"),
            "RefNotFound",
        ),
        ("root", None, None, "SkillNotFound"),
    ] {
        apply(&api, &card(name, &url, git_ref, sub_path)).await;
        let refused = ready_reason(&api, name, "False", reason).await;
        assert!(resolved(&refused).is_none(), "{name}");
    }

    // Nothing listens on a port just freed: unavailable, never validated, not Ready.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    apply(
        &api,
        &card(
            "dead",
            &format!("git://127.0.0.1:{port}/x.git"),
            Some("main"),
            None,
        ),
    )
    .await;
    let dead = ready_reason(&api, "dead", "False", "SourceUnavailable").await;
    let reachable =
        condition(&dead.status.as_ref().unwrap().conditions, "SourceReachable").unwrap();
    assert_eq!(reachable.status, "False");
    assert!(
        reachable.message.contains("operator's log"),
        "{}",
        reachable.message
    );
    operator.stop().await;
}

#[tokio::test]
async fn http_sources_need_an_insecure_host_and_the_right_credentials() {
    let server = GitServer::start_with_basic_auth("bot", "s3cret")
        .await
        .expect("git server");
    server.create_repo("private.git").unwrap();
    let commit = server
        .commit(
            "private.git",
            "main",
            &[("SKILL.md", skill_md("private", "Private."))],
        )
        .unwrap();
    let url = server.http_url("private.git");

    // Without --insecure-git-host, plain http is refused before anything is sent.
    let (ns, client, operator) = git_scenario("git-http-refused", Vec::new()).await;
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(&api, &card("plain", &url, Some("main"), None)).await;
    ready_reason(&api, "plain", "False", "InvalidSource").await;
    operator.stop().await;

    let (ns, client, operator) = git_scenario("git-http", vec![server.http_host()]).await;
    let api: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(&api, &card("anonymous", &url, Some("main"), None)).await;
    ready_reason(&api, "anonymous", "False", "Unauthorized").await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for (name, password) in [("wrong", "guess"), ("right", "s3cret")] {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/basic-auth".into()),
            data: Some(BTreeMap::from([
                ("username".to_string(), ByteString(b"bot".to_vec())),
                (
                    "password".to_string(),
                    ByteString(password.as_bytes().to_vec()),
                ),
            ])),
            ..Secret::default()
        };
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("secret");
        let mut with_secret = card(&format!("with-{name}"), &url, Some("main"), None);
        with_secret.spec.source_secret = Some(SecretRef {
            name: name.to_string(),
        });
        apply(&api, &with_secret).await;
    }
    let refused = ready_reason(&api, "with-wrong", "False", "Unauthorized").await;
    let ready = ready_reason(&api, "with-right", "True", "SkillValid").await;
    assert_eq!(resolved(&ready), Some(format!("{url}@{commit}").as_str()));
    for card in [&refused, &ready] {
        let text = serde_json::to_string(&card.status).unwrap();
        assert!(
            !text.contains("s3cret") && !text.contains("guess"),
            "{text}"
        );
    }

    let mut missing = card("no-secret", &url, Some("main"), None);
    missing.spec.source_secret = Some(SecretRef {
        name: "absent".into(),
    });
    apply(&api, &missing).await;
    ready_reason(&api, "no-secret", "False", "SourceSecretNotFound").await;
    operator.stop().await;
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

/// The spec of the Agent `migrator`, whose one skill is the SkillCard `card`.
fn git_agent_spec(card: &str) -> AgentSpec {
    AgentSpec {
        skill_cards: vec![ObjectRef {
            name: card.to_string(),
        }],
        ..llm_agent_spec("harness.invalid/agent:1")
    }
}

fn agent_run(name: &str) -> AgentRun {
    AgentRun {
        metadata: named(name),
        spec: AgentRunSpec {
            agent_ref: "migrator".into(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

#[tokio::test]
async fn a_run_fetches_its_git_skill_at_the_pinned_commit_with_the_secret_in_the_init_container_only()
 {
    let server = GitServer::start_with_basic_auth("reader", "s3cret")
        .await
        .expect("git server");
    server.create_repo("private.git").unwrap();
    let pinned = server
        .commit(
            "private.git",
            "release",
            &[("skills/upgrade/SKILL.md", skill_md("upgrade", "Pinned."))],
        )
        .unwrap();
    let env = env().await;
    let ns = env.namespace("git-run").await.expect("namespace");
    let client = env.client();
    let insecure = vec![server.http_host()];
    let operator_image = "registry.invalid/agentic-operator:test";
    let operator = Operator::start_with_operator_image(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        insecure,
        operator_image,
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: named("git-creds"),
                data: Some(BTreeMap::from([
                    ("username".into(), ByteString(b"reader".to_vec())),
                    ("password".into(), ByteString(b"s3cret".to_vec())),
                ])),
                ..Secret::default()
            },
        )
        .await
        .expect("secret");
    let url = server.http_url("private.git");
    let mut private = card(
        "upgrade-card",
        &url,
        Some("release"),
        Some("skills/upgrade"),
    );
    private.spec.source_secret = Some(SecretRef {
        name: "git-creds".into(),
    });
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(&cards, &private).await;
    ready_reason(&cards, "upgrade-card", "True", "SkillValid").await;
    let agent = ready_agent(&client, &ns, "migrator", git_agent_spec("upgrade-card")).await;
    let pin = format!("{url}@{pinned}");
    assert_eq!(
        agent.status.unwrap().skills[0].image.as_deref(),
        Some(pin.as_str())
    );

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &agent_run("first")).await;
    let run = wait_for_sandbox(&runs, "first").await;
    let status = run.status.expect("status");
    assert_eq!(status.skills[0].image, pin);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods
        .get(status.sandbox_name.as_deref().expect("sandbox"))
        .await
        .expect("pod");
    let spec = pod.spec.expect("spec");
    let init = spec.init_containers.expect("init containers");
    // The fetch, then the credential proxy (the Gateway `llm` has a keyed bearer endpoint).
    let names: Vec<&str> = init.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["skill-fetch-0", "credential-proxy"]);
    assert_eq!(init[0].image.as_deref(), Some(operator_image));
    let args = init[0].args.clone().expect("args");
    assert!(args.contains(&format!("--commit={pinned}")), "{args:?}");
    assert!(args.contains(&format!("--url={url}")), "{args:?}");
    assert!(
        args.contains(&format!("--insecure-git-host={}", server.http_host())),
        "{args:?}"
    );
    let agent_container = serde_json::to_string(&spec.containers[0]).unwrap();
    assert!(!agent_container.contains("git-creds"), "{agent_container}");
    assert!(
        agent_container
            .contains(r#""mountPath":"/opt/skills/upgrade","name":"skill-0","readOnly":true"#),
        "{agent_container}"
    );
    let volumes = serde_json::to_string(&spec.volumes).unwrap();
    assert!(volumes.contains(r#""secretName":"git-creds""#), "{volumes}");
    operator.stop().await;
}

#[tokio::test]
async fn without_the_operator_image_a_run_with_a_git_skill_waits_naming_the_flag() {
    let server = GitServer::start().await.expect("git server");
    server.create_repo("skills.git").unwrap();
    server
        .commit(
            "skills.git",
            "main",
            &[("SKILL.md", skill_md("upgrade", "Public."))],
        )
        .unwrap();
    let (ns, client, operator) = git_scenario("git-no-image", Vec::new()).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &card(
            "upgrade-card",
            &server.git_url("skills.git"),
            Some("main"),
            None,
        ),
    )
    .await;
    ready_reason(&cards, "upgrade-card", "True", "SkillValid").await;
    ready_agent(&client, &ns, "migrator", git_agent_spec("upgrade-card")).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &agent_run("waiting")).await;
    let run = wait_for(&runs, "waiting", "OperatorImageNotSet", |r: &AgentRun| {
        r.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "False", "OperatorImageNotSet"))
    })
    .await;
    let status = run.status.expect("status");
    assert_eq!(status.phase, Some(AgentRunPhase::Pending));
    assert!(status.sandbox_name.is_none());
    let message = &condition(&status.conditions, "Ready").unwrap().message;
    assert!(message.contains("--operator-image"), "{message}");
    // Still waiting, not failed, on the next look.
    let run = wait_phase(&runs, "waiting", AgentRunPhase::Pending).await;
    assert!(run.status.unwrap().sandbox_name.is_none());
    operator.stop().await;
}
