//! Runs on a real node (kubelet, containerd, runc): the run's pod is scheduled, pulls the
//! stub agent and the skill images, mounts them, and the agent's exit decides the run. The
//! stub agent (`hack/stub-agent`) prints what it sees; these tests read its log.

use std::collections::BTreeMap;
use std::path::Path;

use agentic_api::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, ExecutionLimits, ExecutionMode, FileMount,
    GitConfig, ObjectRef, RunExecution, RunParam, SecretRef, SkillCard, SkillCardSpec,
    SkillCollection, SkillCollectionSpec, SkillType,
};
use agentic_integration_tests::{
    Operator, agent_log, apply, condition, env_var, files_below, has_condition, llm_agent_spec,
    log_values, meta, migrator_params, node_env, node_scenario, operator_binary, push, ready_agent,
    stub_agent, wait_for, wait_for_sandbox, wait_phase, write_skill,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::{GitFile, GitServer, push_operator_image};
use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The SHA-256 of every file under `dir`, keyed by its path relative to `root`.
fn hashes(root: &Path, dir: &Path, into: &mut BTreeMap<String, String>) {
    use sha2::Digest as _;
    let prefix = dir.strip_prefix(root).expect("under root");
    for relative in files_below(dir) {
        let bytes = std::fs::read(dir.join(&relative)).expect("read skill file");
        into.insert(
            prefix.join(relative).display().to_string(),
            hex::encode(sha2::Sha256::digest(&bytes)),
        );
    }
}

/// A Gateway and an Agent running the stub agent with `cards`; waits until it is Ready.
async fn agent(client: &Client, ns: &str, name: &str, image: &str, cards: &[&str]) {
    let spec = AgentSpec {
        prompt: Some("You migrate Java code.".into()),
        skill_cards: cards
            .iter()
            .map(|card| ObjectRef {
                name: (*card).into(),
            })
            .collect(),
        params: migrator_params(),
        ..llm_agent_spec(image)
    };
    ready_agent(client, ns, name, spec).await;
}

fn run(name: &str, agent: &str, env: &[(&str, &str)]) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: agent.into(),
            params: vec![RunParam {
                name: "target".into(),
                value: "21".into(),
            }],
            env: env
                .iter()
                .map(|(name, value)| env_var(name, value))
                .collect(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// The SHA-256 the stub agent printed for each skill file, keyed by its path under
/// `/opt/skills` (the skills manifest left out).
fn printed_hashes(log: &str) -> BTreeMap<String, String> {
    log_values(log, "skill-sha256: ")
        .into_iter()
        .filter_map(|line| {
            let (hash, path) = line.split_once("  ")?;
            Some((path.to_string(), hash.to_string()))
        })
        .filter(|(path, _)| path != ".konveyor-skills.json")
        .collect()
}

/// The file the stub agent printed as base64.
fn printed_file(log: &str, path: &str) -> Vec<u8> {
    let prefix = format!("file-base64: {path} ");
    let encoded = log_values(log, &prefix)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("the agent printed no {path}:\n{log}"));
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64")
}

fn reason(run: &AgentRun, type_: &str) -> (String, String) {
    let conditions = &run.status.as_ref().expect("status").conditions;
    let condition = condition(conditions, type_).unwrap_or_else(|| panic!("no {type_}: {run:#?}"));
    (condition.reason.clone(), condition.message.clone())
}

#[tokio::test]
async fn the_pod_sees_every_skill_byte_for_byte_read_only() {
    let (ns, client, operator) = node_scenario("node-skills", SandboxBackend::AgentSandbox).await;

    // A whole-image skill with a reference file, and one skill picked by subPath from a
    // two-skill image; bytes that a lossy copy would change.
    let java_dir = tempfile::tempdir().expect("tempdir");
    let java = write_skill(java_dir.path(), "java-upgrade", "Upgrade Java projects.");
    std::fs::create_dir_all(java.join("references")).expect("mkdir");
    std::fs::write(
        java.join("references/removed-apis.md"),
        "# Removed APIs\r\n\tjava.security.acl — gone in 14  \n\u{1F600}\n",
    )
    .expect("write reference");
    let java_image = push(std::slice::from_ref(&java), &format!("{ns}/java:1")).await;
    let multi = tempfile::tempdir().expect("tempdir");
    let quarkus = write_skill(multi.path(), "quarkus-config", "Configure Quarkus.");
    let maven = write_skill(multi.path(), "maven-deps", "Fix Maven dependencies.");
    let multi_image = push(&[quarkus.clone(), maven], &format!("{ns}/multi:1")).await;
    let inline_text =
        "---\nname: no-system-out\ndescription: Log, never print.\n---\nUse a logger.\n";

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let tag = |pinned: &str| pinned.split('@').next().expect("tag").to_string();
    for (name, spec) in [
        (
            "java",
            SkillCardSpec {
                image: Some(tag(&java_image)),
                ..SkillCardSpec::default()
            },
        ),
        (
            "quarkus",
            SkillCardSpec {
                image: Some(tag(&multi_image)),
                sub_path: Some("quarkus-config".into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
        ),
        (
            "logging",
            SkillCardSpec {
                inline: Some(inline_text.into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
        ),
    ] {
        apply(
            &cards,
            &SkillCard {
                metadata: meta(name),
                spec,
                status: None,
            },
        )
        .await;
    }
    agent(
        &client,
        &ns,
        "migrator",
        &stub_agent().await,
        &["java", "quarkus", "logging"],
    )
    .await;

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("upgrade", "migrator", &[])).await;
    let done = wait_phase(&runs, "upgrade", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;

    let mut expected = BTreeMap::new();
    hashes(java_dir.path(), &java, &mut expected);
    hashes(multi.path(), &quarkus, &mut expected);
    expected.insert(
        "no-system-out/SKILL.md".into(),
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            inline_text.as_bytes(),
        )),
    );
    let seen = printed_hashes(&log);
    assert_eq!(
        seen, expected,
        "files under /opt/skills, by SHA-256:\n{log}"
    );

    // Read-only: the image volumes and the inline skill's ConfigMap refuse writes.
    let refusals = log_values(&log, "write-skill: ");
    assert_eq!(refusals.len(), 3, "{log}");
    for refusal in &refusals {
        assert!(refusal.contains("refused: "), "{refusal}\n{log}");
    }
    for skill in ["java-upgrade", "quarkus-config"] {
        assert!(
            refusals
                .iter()
                .any(|line| line.starts_with(skill) && line.contains("Read-only file system")),
            "{skill} is mounted read-only:\n{log}"
        );
    }
    assert!(
        log_values(&log, "write-opt-skills: ")
            .first()
            .is_some_and(|line| line.starts_with("refused")),
        "{log}"
    );

    let manifest: Value =
        serde_json::from_slice(&printed_file(&log, "/opt/skills/.konveyor-skills.json"))
            .expect("the skills manifest is JSON");
    assert_eq!(
        manifest["rules"],
        json!(["no-system-out", "quarkus-config"])
    );
    let skills: Vec<(&str, &str, &str)> = manifest["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| {
            (
                skill["name"].as_str().unwrap_or_default(),
                skill["type"].as_str().unwrap_or_default(),
                skill["sourcePath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        skills,
        [
            ("java-upgrade", "skill", "/opt/skills/java-upgrade"),
            ("no-system-out", "rule", "/opt/skills/no-system-out"),
            ("quarkus-config", "rule", "/opt/skills/quarkus-config"),
        ]
    );
    let params: Value = serde_json::from_slice(&printed_file(&log, "/run/konveyor/params.json"))
        .expect("params.json is JSON");
    assert_eq!(
        params,
        json!({
            "workflow": {},
            "agent": {"dry_run": false, "target": 21},
            "execution": {"mode": "auto"},
        })
    );
    assert_eq!(
        log_values(&log, "KONVEYOR_RULES="),
        ["no-system-out,quarkus-config"],
        "{log}"
    );
    assert_eq!(log_values(&log, "HARNESS_SKILL_MODE="), ["native"], "{log}");
    operator.stop().await;
}

#[tokio::test]
async fn konveyor_rules_is_set_and_empty_without_rules() {
    let (ns, client, operator) = node_scenario("node-norules", SandboxBackend::Pod).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(dir.path(), "plan", "Plan the work.");
    let image = push(&[skill], &format!("{ns}/plan:1")).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("plan"),
            spec: SkillCardSpec {
                image: Some(image),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    agent(&client, &ns, "planner", &stub_agent().await, &["plan"]).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("plan", "planner", &[])).await;
    let done = wait_phase(&runs, "plan", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    assert_eq!(
        log_values(&log, "KONVEYOR_RULES="),
        [""],
        "set and empty:\n{log}"
    );
    assert_eq!(
        log_values(&log, "skill-file: "),
        [".konveyor-skills.json", "plan/SKILL.md"],
        "{log}"
    );
    operator.stop().await;
}

/// Exit 0 is Succeeded; a non-zero exit is Failed with the agent's termination message;
/// exit 2 is `LimitReached`, exit 3 `Refused`, and a JSON object as the termination message
/// becomes `status.terminationData`. Konveyor's `Succeeded` and `ACPReady` conditions,
/// `secretKeyRef` and `duration` come with them.
async fn outcomes_follow_the_agent_exit(backend: SandboxBackend, prefix: &str) {
    let (ns, client, operator) = node_scenario(prefix, backend).await;
    agent(&client, &ns, "stub", &stub_agent().await, &[]).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let report = r#"{"turns":30,"usage":{"cost":"1.25"}}"#;
    apply(&runs, &run("passes", "stub", &[])).await;
    for (name, env) in [
        (
            "fails",
            [
                ("STUB_EXIT_CODE", "7"),
                ("STUB_TERMINATION_MESSAGE", "3 tests failed in module core"),
            ],
        ),
        (
            "limit",
            [
                ("STUB_EXIT_CODE", "2"),
                ("STUB_TERMINATION_MESSAGE", report),
            ],
        ),
        (
            "refuses",
            [
                ("STUB_EXIT_CODE", "3"),
                ("STUB_TERMINATION_MESSAGE", "will not delete the tests"),
            ],
        ),
        (
            "listing",
            [
                ("STUB_EXIT_CODE", "1"),
                ("STUB_TERMINATION_MESSAGE", "[\"not\", \"an object\"]"),
            ],
        ),
        (
            "working",
            [("STUB_SLEEP_SECONDS", "120"), ("STUB_LISTEN_PORT", "4000")],
        ),
    ] {
        apply(&runs, &run(name, "stub", &env)).await;
    }

    // While the agent works in a Ready sandbox, its ACP endpoint is Listening.
    let listening = wait_for(
        &runs,
        "working",
        "ACPReady=True Listening",
        |r: &AgentRun| {
            r.status
                .as_ref()
                .is_some_and(|s| has_condition(&s.conditions, "ACPReady", "True", "Listening"))
        },
    )
    .await;
    assert_eq!(
        listening.status.as_ref().and_then(|s| s.phase),
        Some(AgentRunPhase::Running)
    );
    runs.patch(
        "working",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .expect("cancel");

    // JSON that is not an object stays text, in the condition message.
    let listing = wait_phase(&runs, "listing", AgentRunPhase::Failed).await;
    let (listing_reason, message) = reason(&listing, "Ready");
    assert_eq!(listing_reason, "AgentFailed", "{listing:#?}");
    assert!(message.contains(r#"["not", "an object"]"#), "{message}");
    assert_eq!(
        listing
            .status
            .as_ref()
            .and_then(|s| s.termination_data.clone()),
        None
    );

    let passed = wait_phase(&runs, "passes", AgentRunPhase::Succeeded).await;
    assert_eq!(reason(&passed, "Ready").0, "AgentSucceeded", "{passed:#?}");
    assert_eq!(reason(&passed, "Succeeded").0, "Succeeded", "{passed:#?}");
    assert_eq!(reason(&passed, "ACPReady").0, "Finished", "{passed:#?}");
    let status = passed.status.as_ref().expect("status");
    assert!(status.completion_time.is_some());
    assert!(status.duration.is_some_and(|d| d >= 0), "{status:#?}");
    let sandbox = status.sandbox_name.clone().expect("sandbox");
    assert_eq!(
        status.secret_key_ref.as_ref().map(|r| r.name.clone()),
        Some(format!("{sandbox}-acp-key"))
    );
    let succeeded = condition(&status.conditions, "Succeeded").expect("Succeeded");
    assert_eq!(succeeded.status, "True");

    let failed = wait_phase(&runs, "fails", AgentRunPhase::Failed).await;
    let (ready_reason, message) = reason(&failed, "Ready");
    assert_eq!(ready_reason, "AgentFailed", "{failed:#?}");
    assert_eq!(reason(&failed, "Succeeded").0, "Failed", "{failed:#?}");
    assert!(message.contains('7'), "names the exit code: {message}");
    assert!(
        message.contains("3 tests failed in module core"),
        "carries the termination message: {message}"
    );

    let limit = wait_phase(&runs, "limit", AgentRunPhase::Failed).await;
    assert_eq!(reason(&limit, "Succeeded").0, "LimitReached", "{limit:#?}");
    assert_eq!(reason(&limit, "Ready").0, "LimitReached", "{limit:#?}");
    let data = limit
        .status
        .as_ref()
        .and_then(|s| s.termination_data.clone())
        .map(Value::Object);
    assert_eq!(
        data,
        Some(json!({"turns": 30, "usage": {"cost": "1.25"}})),
        "{limit:#?}"
    );

    let refused = wait_phase(&runs, "refuses", AgentRunPhase::Failed).await;
    let (refused_reason, message) = reason(&refused, "Succeeded");
    assert_eq!(refused_reason, "Refused", "{refused:#?}");
    assert!(message.contains("will not delete the tests"), "{message}");
    let condition = condition(
        &refused.status.as_ref().expect("status").conditions,
        "Succeeded",
    )
    .expect("Succeeded");
    assert_eq!(condition.status, "False");
    wait_phase(&runs, "working", AgentRunPhase::Failed).await;
    operator.stop().await;
}

#[tokio::test]
async fn sandbox_runs_end_from_the_agent_exit() {
    outcomes_follow_the_agent_exit(SandboxBackend::AgentSandbox, "node-exit-sandbox").await;
}

#[tokio::test]
async fn pod_runs_end_from_the_agent_exit() {
    outcomes_follow_the_agent_exit(SandboxBackend::Pod, "node-exit-pod").await;
}

/// What Konveyor's harnesses read: params.json in three sections, the prompt and instructions
/// with `$(agent.x)` and `$(workflow.x)` substituted, the file mounts (read-only), and the git
/// author. A reference without a value and a file mount over `/workspace` fail the run.
#[tokio::test]
async fn the_pod_sees_params_prompt_file_mounts_and_git_author() {
    let (ns, client, operator) = node_scenario("node-contract", SandboxBackend::Pod).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(
        &secrets,
        &Secret {
            metadata: meta("app-creds"),
            string_data: Some(BTreeMap::from([
                ("token".into(), "t0ken-\u{e9}".into()),
                ("unused".into(), "not projected".into()),
            ])),
            ..Secret::default()
        },
    )
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    apply(
        &config_maps,
        &ConfigMap {
            metadata: meta("tool"),
            data: Some(BTreeMap::from([(
                "tool.yaml".into(),
                "retries: 3\n".into(),
            )])),
            ..ConfigMap::default()
        },
    )
    .await;
    let spec = AgentSpec {
        prompt: Some(
            "Target Java $(agent.target), dry run $(agent.dry_run), literal $$(agent.target)."
                .into(),
        ),
        params: migrator_params(),
        execution: Some(ExecutionLimits {
            max_turns: Some(40),
            max_cost: Some("10.00".into()),
        }),
        git_config: Some(GitConfig {
            user_name: Some("Agent Bot".into()),
            user_email: Some("agent@example.com".into()),
        }),
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(&client, &ns, "migrator", spec).await;

    let mut contract = run(
        "contract",
        "migrator",
        &[
            (
                "STUB_PRINT_FILES",
                "/etc/app/token.txt /home/agent/.tool.yaml",
            ),
            ("STUB_PROBE_DIRS", "/etc/app"),
        ],
    );
    contract.spec.instructions = Some("Ticket $(workflow.ticket), stage $(workflow.stage).".into());
    contract.spec.workflow_params = json!({"ticket": "MIG-7", "stage": 2}).as_object().cloned();
    contract.spec.execution = Some(RunExecution {
        mode: Some(ExecutionMode::Approve),
        max_turns: Some(5),
        ..RunExecution::default()
    });
    contract.spec.git_config = Some(GitConfig {
        user_name: Some("Run Bot".into()),
        user_email: Some("run-bot@example.com".into()),
    });
    contract.spec.file_mounts = vec![
        FileMount {
            mount_path: "/etc/app/".into(),
            secret_name: Some("app-creds".into()),
            items: vec![KeyToPath {
                key: "token".into(),
                path: "token.txt".into(),
                mode: None,
            }],
            ..FileMount::default()
        },
        FileMount {
            mount_path: "/home/agent/.tool.yaml".into(),
            config_map_name: Some("tool".into()),
            sub_path: Some("tool.yaml".into()),
            ..FileMount::default()
        },
    ];
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &contract).await;

    let mut unresolved = run("unresolved", "migrator", &[]);
    unresolved.spec.instructions = Some("Fix $(agent.ghost) for $(workflow.ticket)".into());
    apply(&runs, &unresolved).await;
    let mut over_workspace = run("over-workspace", "migrator", &[]);
    over_workspace.spec.file_mounts = vec![FileMount {
        mount_path: "/workspace/./src/".into(),
        secret_name: Some("app-creds".into()),
        ..FileMount::default()
    }];
    apply(&runs, &over_workspace).await;

    let done = wait_phase(&runs, "contract", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    let params: Value = serde_json::from_slice(&printed_file(&log, "/run/konveyor/params.json"))
        .expect("params.json is JSON");
    assert_eq!(
        params,
        json!({
            "workflow": {"ticket": "MIG-7", "stage": 2},
            "agent": {"target": 21, "dry_run": false},
            "execution": {"mode": "approve", "maxTurns": 5, "maxCost": "10.00"},
        }),
        "{log}"
    );
    assert_eq!(
        log_values(&log, "KONVEYOR_PROMPT="),
        ["Target Java 21, dry run false, literal $(agent.target)."],
        "{log}"
    );
    assert_eq!(
        log_values(&log, "KONVEYOR_INSTRUCTIONS="),
        ["Ticket MIG-7, stage 2."],
        "{log}"
    );
    assert_eq!(
        log_values(&log, "KONVEYOR_GIT_AUTHOR_NAME="),
        ["Run Bot"],
        "{log}"
    );
    assert_eq!(
        log_values(&log, "KONVEYOR_GIT_AUTHOR_EMAIL="),
        ["run-bot@example.com"],
        "{log}"
    );
    assert_eq!(
        printed_file(&log, "/etc/app/token.txt"),
        "t0ken-\u{e9}".as_bytes(),
        "{log}"
    );
    assert_eq!(
        printed_file(&log, "/home/agent/.tool.yaml"),
        b"retries: 3\n",
        "{log}"
    );
    let probe = log_values(&log, "write-dir: /etc/app ");
    assert!(
        probe.first().is_some_and(
            |line| line.starts_with("refused") && line.contains("Read-only file system")
        ),
        "the Secret is mounted read-only:\n{log}"
    );

    let failed = wait_phase(&runs, "unresolved", AgentRunPhase::Failed).await;
    let (why, message) = reason(&failed, "Ready");
    assert_eq!(why, "InvalidParams", "{failed:#?}");
    assert!(
        message.contains("$(agent.ghost)") && message.contains("$(workflow.ticket)"),
        "names every unresolved reference: {message}"
    );
    assert_eq!(reason(&failed, "Succeeded").0, "InvalidParams");
    let failed = wait_phase(&runs, "over-workspace", AgentRunPhase::Failed).await;
    let (why, message) = reason(&failed, "Ready");
    assert_eq!(why, "InvalidFileMounts", "{failed:#?}");
    assert!(message.contains("/workspace/src"), "{message}");
    operator.stop().await;
}

/// Skill directories with nested folders: two real skills from the shared corpus when it is
/// there (`../shared/skills-corpus`), else two written here with the same shape.
fn nested_skills(scratch: &Path) -> Vec<std::path::PathBuf> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/skills-corpus/konveyor");
    let real: Vec<_> = ["javaee-to-quarkus", "plan"]
        .iter()
        .map(|name| corpus.join(name))
        .collect();
    if real.iter().all(|dir| dir.join("SKILL.md").is_file()) {
        return real;
    }
    ["javaee-to-quarkus", "plan"]
        .iter()
        .map(|name| {
            let dir = write_skill(scratch, name, "A skill with modules and references.");
            for (file, text) in [
                ("modules/lifecycle.md", "# Lifecycle\n"),
                ("references/pattern-map.md", "| from | to |\n|---|---|\n"),
            ] {
                let path = dir.join(file);
                std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                std::fs::write(path, text).expect("write");
            }
            dir
        })
        .collect()
}

#[tokio::test]
async fn every_file_of_a_multi_skill_image_stays_reachable() {
    let (ns, client, operator) = node_scenario("node-corpus", SandboxBackend::Pod).await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let dirs = nested_skills(scratch.path());
    let image = push(&dirs, &format!("{ns}/konveyor:1")).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let mut expected = BTreeMap::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        hashes(dir.parent().expect("parent"), dir, &mut expected);
        apply(
            &cards,
            &SkillCard {
                metadata: meta(&name),
                spec: SkillCardSpec {
                    image: Some(image.split('@').next().expect("tag").to_string()),
                    sub_path: Some(name.clone()),
                    ..SkillCardSpec::default()
                },
                status: None,
            },
        )
        .await;
    }
    agent(
        &client,
        &ns,
        "migrator",
        &stub_agent().await,
        &["javaee-to-quarkus", "plan"],
    )
    .await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("migrate", "migrator", &[])).await;
    let done = wait_phase(&runs, "migrate", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    let seen = printed_hashes(&log);
    assert!(expected.len() > 4, "nested files to compare: {expected:?}");
    assert_eq!(seen, expected, "every file, byte for byte:\n{log}");
    operator.stop().await;
}

/// A SkillCollection of 30 skills from one image: the run's pod has one image volume, and
/// every skill's directory (its own `subPath` of that volume) holds its bytes.
#[tokio::test]
async fn a_thirty_skill_collection_mounts_one_image_volume() {
    const SKILLS: usize = 30;
    let (ns, client, operator) = node_scenario("node-collection", SandboxBackend::Pod).await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut expected = BTreeMap::new();
    let dirs: Vec<_> = (0..SKILLS)
        .map(|i| {
            let name = format!("skill-{i:02}");
            let dir = write_skill(scratch.path(), &name, "One of thirty.");
            // A file of its own per skill: a mount of the wrong subPath shows.
            std::fs::write(dir.join("which.txt"), format!("{name}\n")).expect("write");
            hashes(scratch.path(), &dir, &mut expected);
            dir
        })
        .collect();
    let image = push(&dirs, &format!("{ns}/thirty:1")).await;
    let collections: Api<SkillCollection> = Api::namespaced(client.clone(), &ns);
    apply(
        &collections,
        &SkillCollection {
            metadata: meta("thirty"),
            spec: SkillCollectionSpec {
                image: Some(image.split('@').next().expect("tag").to_string()),
                ..SkillCollectionSpec::default()
            },
            status: None,
        },
    )
    .await;
    let spec = AgentSpec {
        skill_collections: vec![ObjectRef {
            name: "thirty".into(),
        }],
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(&client, &ns, "migrator", spec).await;

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let mut thirty = run("thirty", "migrator", &[]);
    thirty.spec.params.clear();
    apply(&runs, &thirty).await;
    let done = wait_phase(&runs, "thirty", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &done).await;
    assert_eq!(expected.len(), 2 * SKILLS);
    assert_eq!(
        printed_hashes(&log),
        expected,
        "every file, byte for byte:\n{log}"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod_name = done
        .status
        .as_ref()
        .and_then(|status| status.sandbox_name.clone())
        .expect("the run names its pod");
    let spec = pods
        .get(&pod_name)
        .await
        .expect("the run's pod")
        .spec
        .expect("a spec");
    let image_volumes: Vec<String> = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|volume| volume.image.and_then(|image| image.reference))
        .collect();
    // The pushed `host/repo:tag@sha256:...`, pinned as `host/repo@sha256:...`.
    let (tagged, digest) = image.split_once('@').expect("pinned");
    let repository = tagged.rsplit_once(':').expect("a tag").0;
    assert_eq!(image_volumes, [format!("{repository}@{digest}")]);
    let skill_mounts = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .filter(|mount| mount.mount_path.starts_with("/opt/skills/skill-"))
        .inspect(|mount| assert_eq!(mount.read_only, Some(true), "{mount:?}"))
        .count();
    assert_eq!(skill_mounts, SKILLS);
    operator.stop().await;
}

#[tokio::test]
async fn the_pod_sees_the_pinned_commit_of_a_git_skill_fetched_with_its_secret() {
    let env = node_env().await;
    let registry = env.registry_addr().expect("the node's registry");
    let operator_image = push_operator_image(&registry, operator_binary())
        .await
        .expect("the operator image is pushed");
    // The init container fetches from inside the pod: the server listens on this machine's
    // address on the node's bridge, which only this machine and its pods reach.
    let host = env.node_host_address().expect("the node's bridge address");
    let server = GitServer::start_on(host, Some(("reader", "s3cret")))
        .await
        .expect("git server");
    server.create_repo("skills.git").unwrap();
    let guide = b"Upgrade one module at a time.\n".to_vec();
    let script = b"#!/bin/sh\necho upgrading\n".to_vec();
    let skill_md = b"---\nname: upgrade\ndescription: Upgrades Java modules.\n---\n# Upgrade\n";
    let pinned = server
        .commit(
            "skills.git",
            "release",
            &[
                ("skills/upgrade/SKILL.md", GitFile::File(skill_md.to_vec())),
                (
                    "skills/upgrade/references/guide.md",
                    GitFile::File(guide.clone()),
                ),
                (
                    "skills/upgrade/scripts/run.sh",
                    GitFile::Executable(script.clone()),
                ),
                ("README.md", GitFile::File(b"Not a skill.\n".to_vec())),
            ],
        )
        .unwrap();

    let ns = env.namespace("node-git").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_with_operator_image(
        client.clone(),
        &ns,
        SandboxBackend::AgentSandbox,
        vec![server.http_host()],
        &operator_image,
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(
        &secrets,
        &Secret {
            metadata: meta("git-creds"),
            string_data: Some(BTreeMap::from([
                ("username".into(), "reader".into()),
                ("password".into(), "s3cret".into()),
            ])),
            ..Secret::default()
        },
    )
    .await;
    let url = server.http_url("skills.git");
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("upgrade-card"),
            spec: SkillCardSpec {
                source: Some(url.clone()),
                git_ref: Some("release".into()),
                sub_path: Some("skills/upgrade".into()),
                source_secret: Some(SecretRef {
                    name: "git-creds".into(),
                }),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    let pin = format!("{url}@{pinned}");
    wait_for(&cards, "upgrade-card", "Ready at the commit", |card| {
        card.status.as_ref().is_some_and(|status| {
            status.resolved_source.as_deref() == Some(pin.as_str())
                && has_condition(&status.conditions, "Ready", "True", "SkillValid")
        })
    })
    .await;
    agent(
        &client,
        &ns,
        "migrator",
        &stub_agent().await,
        &["upgrade-card"],
    )
    .await;

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("git-run", "migrator", &[])).await;
    let started = wait_for_sandbox(&runs, "git-run").await;
    assert_eq!(started.status.expect("status").skills[0].image, pin);
    // The branch moves once the run has pinned its commit: the pod must still see the
    // commit that was validated, never the branch's new head.
    server
        .commit(
            "skills.git",
            "release",
            &[(
                "skills/upgrade/SKILL.md",
                GitFile::File(b"---\nname: upgrade\ndescription: Moved.\n---\n".to_vec()),
            )],
        )
        .unwrap();
    let finished = wait_phase(&runs, "git-run", AgentRunPhase::Succeeded).await;
    let log = agent_log(&client, &ns, &finished).await;

    use sha2::Digest as _;
    let sha = |bytes: &[u8]| hex::encode(sha2::Sha256::digest(bytes));
    let expected = BTreeMap::from([
        ("upgrade/SKILL.md".to_string(), sha(skill_md)),
        ("upgrade/references/guide.md".to_string(), sha(&guide)),
        ("upgrade/scripts/run.sh".to_string(), sha(&script)),
    ]);
    assert_eq!(printed_hashes(&log), expected, "{log}");
    let refusals = log_values(&log, "write-skill: upgrade ");
    assert!(
        refusals.len() == 1
            && refusals[0].starts_with("refused")
            && refusals[0].contains("Read-only file system"),
        "the git skill is mounted read-only:\n{log}"
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_skill_fetch_whose_image_cannot_be_pulled_fails_the_run_naming_the_init_container() {
    let env = node_env().await;
    let registry = env.registry_addr().expect("the node's registry");
    let server = GitServer::start().await.expect("git server");
    server.create_repo("skills.git").unwrap();
    server
        .commit(
            "skills.git",
            "main",
            &[(
                "SKILL.md",
                GitFile::File(b"---\nname: upgrade\ndescription: Upgrades.\n---\n".to_vec()),
            )],
        )
        .unwrap();
    let ns = env.namespace("node-git-pull").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_with_operator_image(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        Vec::new(),
        &format!("{registry}/agentic-testenv/no-such-operator:1"),
    );
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &SkillCard {
            metadata: meta("upgrade-card"),
            spec: SkillCardSpec {
                source: Some(server.git_url("skills.git")),
                git_ref: Some("main".into()),
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;
    agent(
        &client,
        &ns,
        "migrator",
        &stub_agent().await,
        &["upgrade-card"],
    )
    .await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("no-fetch", "migrator", &[])).await;
    let failed = wait_phase(&runs, "no-fetch", AgentRunPhase::Failed).await;
    let (reason, message) = reason(&failed, "Ready");
    assert_eq!(reason, "StartupFailed", "{message}");
    assert!(
        message.contains("init container skill-fetch-0 of pod no-fetch")
            && message.contains("ImagePullBackOff"),
        "{message}"
    );
    operator.stop().await;
}

#[tokio::test]
async fn agentrun_start_follow_prints_the_agents_log_and_exits_with_the_outcome() {
    use std::process::Command;
    let (ns, client, operator) = node_scenario("node-cli", SandboxBackend::Pod).await;
    agent(&client, &ns, "migrator", &stub_agent().await, &[]).await;
    let kubeconfig = node_env().await.kubeconfig_path().to_path_buf();
    let namespace = ns.clone();
    let start = move |name: &str| {
        let out = Command::new(operator_binary())
            .args([
                "agentrun", "start", "migrator", "-n", &namespace, "--name", name,
            ])
            .args(["--param", "target=21", "--follow"])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("agentic-operator runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = tokio::task::spawn_blocking(move || start("followed"))
        .await
        .expect("the command ran");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.starts_with("agentrun/followed created\n"), "{out}");
    assert!(out.contains("stub-agent: done\n"), "{out}");
    assert!(err.contains("agentrun/followed Succeeded"), "{err}");
    let runs: Api<AgentRun> = Api::namespaced(client, &ns);
    let run = runs.get("followed").await.expect("the run");
    assert_eq!(run.spec.params[0].value, "21");
    operator.stop().await;
}
