//! goose, the agent runtime Konveyor's harness runs, in a real pod on the test node: the
//! run's agent container is the goose test image (`agentic_testenv::push_goose_image`), whose
//! harness (`hack/goose-harness/harness.sh`) lays the skills out as `docs/pod-contract.md`
//! recommends and runs `goose run` against a scripted endpoint on 127.0.0.1 in the same
//! container (`tests/goose-fake-llm`), which prints every request goose made to the pod log.
//!
//! So what goose itself read from `/opt/skills` is checked, not what a stub prints: its
//! system prompt lists exactly the Agent's Ready skills with their validated descriptions, and
//! its `load_skill` tool returns a skill and its supporting files from the read-only mounts.
//!
//! Needs `GOOSE_BIN` (`hack/install-goose.sh`), which `make test` sets; without it the test
//! fails rather than checking nothing.

use std::collections::BTreeMap;

use agentic_api::{
    AgentRun, AgentRunPhase, AgentSpec, ObjectRef, SkillCard, SkillCardSpec, SkillType,
};
use agentic_integration_tests::{
    Operator, agent_log, apply, condition, goose_bin, goose_run, has_condition, llm_agent_spec,
    meta, node_env, operator_binary, push, ready_agent, wait_finished, wait_for, write_skill,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::{GitFile, GitServer, push_goose_image, push_operator_image};
use kube::Api;
use serde_json::Value;

/// The skills goose 1.52 brings along in its binary. It lists them after the ones it finds on
/// disk (a skill on disk with the same name replaces one); a goose upgrade that adds or drops
/// one fails here, by name.
const GOOSE_BUILTIN_SKILLS: [&str; 2] = ["goose-doc-guide", "web-search"];
/// The line that opens the skill list in goose's system prompt (its `skills` extension).
const SKILLS_HEADER: &str = "You have these skills at your disposal, when it is clear they can \
                             help you solve a problem or you are asked to use them:";
/// How the log marks a request goose made (the harness prints them after goose exits).
const REQUEST_PREFIX: &str = "fake-llm-request: ";
/// The run's deadlines: the image pull (goose is about 100 MB compressed) and goose's few
/// seconds of work fit well inside them, and the wait below is derived from them.
const STARTUP_DEADLINE_SECONDS: i32 = 300;
const ACTIVE_DEADLINE_SECONDS: i64 = 120;

/// The skills goose's system prompt lists, name to description (`• <name> - <description>`
/// under [`SKILLS_HEADER`], up to the first blank line).
fn listed_skills(system_prompt: &str) -> BTreeMap<String, String> {
    let (_, list) = system_prompt
        .split_once(SKILLS_HEADER)
        .unwrap_or_else(|| panic!("goose's system prompt lists no skills:\n{system_prompt}"));
    list.trim_start_matches('\n')
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(|line| {
            let entry = line
                .strip_prefix("• ")
                .unwrap_or_else(|| panic!("not a skill line: {line:?}"));
            let (name, description) = entry
                .split_once(" - ")
                .unwrap_or_else(|| panic!("a skill line without ' - ': {line:?}"));
            (name.to_owned(), description.to_owned())
        })
        .collect()
}

/// The chat requests goose made, in order, from the pod log.
fn chat_requests(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| line.strip_prefix(REQUEST_PREFIX))
        .map(|json| serde_json::from_str::<Value>(json).expect("a recorded request is JSON"))
        .filter(|request| {
            request["path"]
                .as_str()
                .is_some_and(|path| path.ends_with("/chat/completions"))
        })
        .map(|request| request["body"].clone())
        .collect()
}

fn system_prompt(request: &Value) -> &str {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("the first message is not a system prompt: {request:#}"))
}

/// The text of the tool result answering the call `call_<index>` (the fake endpoint's ids).
fn tool_result(request: &Value, index: usize) -> &str {
    let id = format!("call_{index}");
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|message| message["role"] == "tool" && message["tool_call_id"] == id.as_str())
        .and_then(|message| message["content"].as_str())
        .unwrap_or_else(|| panic!("no text result for {id}: {request:#}"))
}

#[tokio::test]
async fn goose_lists_exactly_the_ready_skills_and_loads_them_from_the_read_only_mounts() {
    let env = node_env().await;
    let registry = env.registry_addr().expect("the node's registry");
    let started = std::time::Instant::now();
    let goose_image = push_goose_image(
        &registry,
        &goose_bin(),
        std::path::Path::new(env!("CARGO_BIN_EXE_goose-fake-llm")),
    )
    .await
    .expect("the goose image is pushed");
    eprintln!("goose image built and pushed in {:?}", started.elapsed());
    let operator_image = push_operator_image(&registry, operator_binary())
        .await
        .expect("the operator image is pushed");
    // The git skill's init container fetches from inside the pod: the server listens on this
    // machine's address on the node's bridge.
    let host = env.node_host_address().expect("the node's bridge address");
    let server = GitServer::start_on(host, None).await.expect("git server");

    let ns = env.namespace("goose").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_with_operator_image(
        client.clone(),
        &ns,
        SandboxBackend::AgentSandbox,
        vec![registry.clone(), server.http_host()],
        &operator_image,
    );

    // An image skill with a supporting file; from a two-skill image, one skill by subPath
    // and one rule by subPath; an inline skill and an inline rule; a git skill with a
    // supporting file.
    let java_dir = tempfile::tempdir().expect("tempdir");
    let java = write_skill(
        java_dir.path(),
        "java-upgrade",
        "Upgrade Java projects to records, sealed classes and without the APIs removed since 11.",
    );
    let removed_apis = "# Removed APIs\n\n- java.security.acl: gone in 14\n- Nashorn: gone in 15\n";
    std::fs::create_dir_all(java.join("references")).expect("mkdir");
    std::fs::write(java.join("references/removed-apis.md"), removed_apis).expect("write");
    let java_image = push(std::slice::from_ref(&java), &format!("{ns}/java:1")).await;
    let multi = tempfile::tempdir().expect("tempdir");
    let quarkus = write_skill(multi.path(), "quarkus-config", "Configure Quarkus.");
    let maven = write_skill(
        multi.path(),
        "maven-deps",
        "Keep Maven dependencies pinned.",
    );
    let multi_image = push(&[quarkus, maven], &format!("{ns}/multi:1")).await;
    let tag = |pinned: &str| pinned.split('@').next().expect("tag").to_string();
    let guide = "Upgrade one module at a time, tests green in between.\n";
    server.create_repo("skills.git").expect("a repository");
    server
        .commit(
            "skills.git",
            "main",
            &[
                (
                    "skills/module-upgrade/SKILL.md",
                    GitFile::File(
                        b"---\nname: module-upgrade\ndescription: Upgrade a multi-module build.\n\
                          ---\n# Module upgrade\n"
                            .to_vec(),
                    ),
                ),
                (
                    "skills/module-upgrade/references/guide.md",
                    GitFile::File(guide.as_bytes().to_vec()),
                ),
            ],
        )
        .expect("a commit");
    let no_system_out = "---\nname: no-system-out\ndescription: Log, never print.\n---\n\
                         Use a logger, never System.out.\n";
    let house_style = "---\nname: house-style\ndescription: The house style.\n---\n\
                       Indent with four spaces; no wildcard imports.\n";

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let specs = [
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
                ..SkillCardSpec::default()
            },
        ),
        (
            "maven",
            SkillCardSpec {
                image: Some(tag(&multi_image)),
                sub_path: Some("maven-deps".into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
        ),
        (
            "logging",
            SkillCardSpec {
                inline: Some(no_system_out.into()),
                ..SkillCardSpec::default()
            },
        ),
        (
            "style",
            SkillCardSpec {
                inline: Some(house_style.into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
        ),
        (
            "modules",
            SkillCardSpec {
                source: Some(server.http_url("skills.git")),
                git_ref: Some("main".into()),
                sub_path: Some("skills/module-upgrade".into()),
                ..SkillCardSpec::default()
            },
        ),
    ];
    for (name, spec) in &specs {
        apply(
            &cards,
            &SkillCard {
                metadata: meta(name),
                spec: spec.clone(),
                status: None,
            },
        )
        .await;
    }
    // What the operator validated: each Ready card's frontmatter name and description.
    let mut validated_skills = BTreeMap::new();
    let mut rules = Vec::new();
    for (name, spec) in &specs {
        let card = wait_for(&cards, name, "Ready", |card: &SkillCard| {
            card.status.as_ref().is_some_and(|status| {
                has_condition(&status.conditions, "Ready", "True", "SkillValid")
            })
        })
        .await;
        let skill = card
            .status
            .and_then(|status| status.skill)
            .expect("a Ready card has its frontmatter");
        match spec.skill_type {
            SkillType::Rule => rules.push(skill.name),
            SkillType::Skill => {
                validated_skills.insert(skill.name, skill.description);
            }
        }
    }

    let spec = AgentSpec {
        prompt: Some("You migrate Java code.".into()),
        skill_cards: specs
            .iter()
            .map(|(name, _)| ObjectRef {
                name: (*name).into(),
            })
            .collect(),
        ..llm_agent_spec(goose_image)
    };
    ready_agent(&client, &ns, "migrator", spec).await;

    // The scripted model loads the image skill, its supporting file, then the git skill's.
    let loads = [
        "java-upgrade",
        "java-upgrade/references/removed-apis.md",
        "module-upgrade/references/guide.md",
    ];
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &goose_run(
            "goose-run",
            "migrator",
            "Upgrade the service to Java 21.",
            &loads,
            (STARTUP_DEADLINE_SECONDS, ACTIVE_DEADLINE_SECONDS),
        ),
    )
    .await;
    let finished = wait_finished(
        &runs,
        "goose-run",
        STARTUP_DEADLINE_SECONDS,
        ACTIVE_DEADLINE_SECONDS,
    )
    .await;
    let log = agent_log(&client, &ns, &finished).await;
    let status = finished.status.as_ref().expect("status");
    assert_eq!(
        status.phase,
        Some(AgentRunPhase::Succeeded),
        "the run did not succeed: {status:#?}\n{log}"
    );
    let ready = condition(&status.conditions, "Ready").expect("a Ready condition");
    assert_eq!(ready.reason, "AgentSucceeded", "{status:#?}");

    // Every linked skill is a read-only mount.
    let writes: Vec<&str> = log
        .lines()
        .filter_map(|line| line.strip_prefix("skill-write: "))
        .collect();
    let expected_writes: Vec<String> = validated_skills
        .keys()
        .map(|name| format!("{name} refused"))
        .collect();
    assert_eq!(writes, expected_writes, "{log}");

    // goose names the session in a request without tools, beside its turns, which offer its
    // load_skill tool: one per load and the last one for the final answer.
    let (turns, titles): (Vec<Value>, Vec<Value>) = chat_requests(&log)
        .into_iter()
        .partition(|request| request.get("tools").is_some());
    assert_eq!(titles.len(), 1, "{log}");
    assert_eq!(turns.len(), loads.len() + 1, "{log}");
    let last = &turns[loads.len()];
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, ["load_skill"]);

    // The system prompt lists exactly the Agent's Ready skills, with the descriptions the
    // operator validated, besides goose's own; rules are not skills to goose.
    let prompt = system_prompt(&turns[0]);
    let mut listed = listed_skills(prompt);
    let builtins: Vec<String> = GOOSE_BUILTIN_SKILLS
        .iter()
        .filter_map(|name| listed.remove_entry(*name).map(|(name, _)| name))
        .collect();
    assert_eq!(builtins, GOOSE_BUILTIN_SKILLS, "{prompt}");
    assert_eq!(listed, validated_skills, "{prompt}");
    // Rules reach goose as text in its system prompt, each SKILL.md whole.
    for (rule, text) in [("maven-deps", None), ("house-style", Some(house_style))] {
        assert!(rules.iter().any(|name| name == rule), "{rules:?}");
        assert!(
            prompt.contains(&format!("Rule {rule}, always in force:")),
            "{prompt}"
        );
        if let Some(text) = text {
            assert!(prompt.contains(text.trim_end()), "{prompt}");
        }
    }

    // load_skill returns the skill from /opt/skills, naming its supporting file there, then
    // each supporting file's content.
    let skill = tool_result(last, 0);
    assert!(
        skill.starts_with("# Loaded Skill: java-upgrade (skill)"),
        "{skill}"
    );
    assert!(
        skill.contains("Skill directory: /opt/skills/java-upgrade"),
        "{skill}"
    );
    assert!(
        skill.contains("/opt/skills/java-upgrade/references/removed-apis.md"),
        "{skill}"
    );
    for (index, content) in [(1, removed_apis), (2, guide)] {
        let loaded = tool_result(last, index);
        assert!(
            loaded.starts_with(&format!("# Loaded: {}", loads[index])),
            "{loaded}"
        );
        assert!(loaded.contains(content), "{loaded}");
    }
    operator.stop().await;
}
