//! AgentRun reconciliation on a real API server and registry: from SkillCard to the sandbox
//! and its pod spec, with both sandbox backends, restart idempotency and an idle cluster.
//! No kubelet runs in this binary: the few cases that need a pod's status at a chosen moment
//! play its part. Real pods running to their outcome are in tests/tests/node.rs.

use std::collections::BTreeMap;
use std::time::Duration;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, Gateway, ObjectRef, RunParam,
    SkillCard, SkillCardSpec, SkillType,
};
use agentic_integration_tests::{
    Operator, apply, condition, has_condition, kubelet, llm_agent_spec, llm_gateway, meta,
    migrator_params, push, ready_agent, registry, scenario, wait_agent_ready, wait_for,
    wait_for_sandbox, wait_phase, write_skill,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// What a run's Agent was built from.
struct Fixture {
    /// The pinned image of the `java-upgrade` skill.
    java_image: String,
}

/// A Gateway, an image skill, an image skill chosen by subPath (a rule), an inline rule and
/// an Agent with typed params; waits until the Agent is Ready.
async fn fixture(client: &Client, ns: &str) -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let java = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let java_pushed = push(&[java], &format!("{ns}/java:1")).await;
    let multi = tempfile::tempdir().expect("tempdir");
    let quarkus = write_skill(multi.path(), "quarkus-config", "Configure Quarkus.");
    let maven = write_skill(multi.path(), "maven-deps", "Fix Maven dependencies.");
    let multi_pushed = push(&[quarkus, maven], &format!("{ns}/multi:1")).await;

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    let image_card = |name: &str, image: &str, sub_path: Option<&str>, skill_type| SkillCard {
        metadata: meta(name),
        spec: SkillCardSpec {
            image: Some(image.split('@').next().expect("tag").to_string()),
            sub_path: sub_path.map(str::to_string),
            skill_type,
            ..SkillCardSpec::default()
        },
        status: None,
    };
    apply(
        &cards,
        &image_card("java", &java_pushed, None, SkillType::Skill),
    )
    .await;
    apply(
        &cards,
        &image_card(
            "quarkus",
            &multi_pushed,
            Some("quarkus-config"),
            SkillType::Rule,
        ),
    )
    .await;
    apply(
        &cards,
        &SkillCard {
            metadata: meta("logging"),
            spec: SkillCardSpec {
                inline: Some("---\nname: no-system-out\ndescription: Log, never print.\n---\nUse a logger.\n".into()),
                skill_type: SkillType::Rule,
                ..SkillCardSpec::default()
            },
            status: None,
        },
    )
    .await;

    let spec = AgentSpec {
        prompt: Some("You migrate Java code.".into()),
        skill_cards: ["java", "quarkus", "logging"]
            .into_iter()
            .map(|name| ObjectRef { name: name.into() })
            .collect(),
        params: migrator_params(),
        ..llm_agent_spec("harness.invalid/agent:1")
    };
    ready_agent(client, ns, "migrator", spec).await;
    Fixture {
        java_image: java_pushed
            .rsplit_once('@')
            .map(|(tagged, digest)| {
                let repo = tagged.rsplit_once(':').map_or(tagged, |(repo, _)| repo);
                format!("{repo}@{digest}")
            })
            .expect("pinned"),
    }
}

fn run(name: &str, params: &[(&str, &str)], gateway: Option<&str>) -> AgentRun {
    AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: "migrator".into(),
            gateway: gateway.map(str::to_string),
            params: params
                .iter()
                .map(|(n, v)| RunParam {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            instructions: Some("Upgrade to Java 21.".into()),
            env: vec![k8s_openapi::api::core::v1::EnvVar {
                name: "EXTRA".into(),
                value: Some("1".into()),
                ..Default::default()
            }],
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

fn env_of(pod: &Pod) -> BTreeMap<String, Value> {
    let container = &pod.spec.as_ref().expect("spec").containers[0];
    container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), serde_json::to_value(e).expect("env json")))
        .collect()
}

#[tokio::test]
async fn a_run_goes_from_skills_to_a_pod_to_succeeded() {
    let (ns, client, operator) = scenario("run-pod", SandboxBackend::Pod).await;
    let fixture = fixture(&client, &ns).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("7.upgrade.1", &[("target", "21")], None))
        .await
        .name_any();

    let pending = wait_for_sandbox(&runs, "7.upgrade.1").await;
    let status = pending.status.expect("status");
    let sandbox = status.sandbox_name.clone().expect("sandbox name");
    assert!(
        agentic_core::names::is_dns1035_label(&sandbox),
        "{sandbox} is a DNS-1035 label"
    );
    let pinned: Vec<(&str, &str)> = status
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.image.as_str()))
        .collect();
    assert_eq!(pinned.len(), 3, "{pinned:?}");
    assert!(
        pinned.contains(&("java-upgrade", fixture.java_image.as_str())),
        "{pinned:?}"
    );

    // The pod spec, field by field.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = pods.get(&sandbox).await.expect("the sandbox pod exists");
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("AgentRun", "7.upgrade.1")
    );
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.automount_service_account_token, Some(false));
    let container = &spec.containers[0];
    assert_eq!(container.name, "agent");
    assert_eq!(container.image.as_deref(), Some("harness.invalid/agent:1"));
    let port = &container.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (port.container_port, port.name.as_deref()),
        (4000, Some("acp"))
    );
    assert!(
        container
            .readiness_probe
            .as_ref()
            .and_then(|p| p.tcp_socket.as_ref())
            .is_some()
    );

    let volumes = spec.volumes.clone().expect("volumes");
    let mounts = container.volume_mounts.clone().expect("mounts");
    let mount_at = |path: &str| {
        mounts
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("no mount at {path}: {mounts:#?}"))
    };
    let volume = |name: &str| volumes.iter().find(|v| v.name == name).expect("volume");
    let java = mount_at("/opt/skills/java-upgrade");
    assert_eq!(java.read_only, Some(true));
    let java_volume = volume(&java.name).image.clone().expect("image volume");
    assert_eq!(
        java_volume.reference.as_deref(),
        Some(fixture.java_image.as_str())
    );
    let quarkus = mount_at("/opt/skills/quarkus-config");
    assert_eq!(quarkus.read_only, Some(true));
    assert_eq!(quarkus.sub_path.as_deref(), Some("quarkus-config"));
    let quarkus_ref = volume(&quarkus.name)
        .image
        .clone()
        .expect("image")
        .reference
        .expect("reference");
    assert!(
        quarkus_ref.contains("@sha256:"),
        "pinned by digest: {quarkus_ref}"
    );
    let inline = mount_at("/opt/skills/no-system-out");
    assert_eq!(inline.read_only, Some(true));
    assert!(
        volume(&inline.name).config_map.is_some(),
        "inline skills come from a ConfigMap"
    );
    assert_eq!(
        mount_at("/opt/skills/.konveyor-skills.json").read_only,
        Some(true)
    );
    assert_eq!(mount_at("/run/konveyor/params.json").read_only, Some(true));
    assert!(volume(&mount_at("/workspace").name).empty_dir.is_some());
    assert!(volume(&mount_at("/tmp").name).empty_dir.is_some());

    let env_vars = env_of(&pod);
    let value = |name: &str| env_vars.get(name).and_then(|v| v.get("value")).cloned();
    assert_eq!(
        value("KONVEYOR_RULES"),
        Some(json!("no-system-out,quarkus-config"))
    );
    assert_eq!(value("HARNESS_SKILL_MODE"), Some(json!("native")));
    assert_eq!(value("KONVEYOR_SKILLS_DIR"), Some(json!("/opt/skills")));
    assert_eq!(
        value("KONVEYOR_PROMPT"),
        Some(json!("You migrate Java code."))
    );
    assert_eq!(
        value("KONVEYOR_INSTRUCTIONS"),
        Some(json!("Upgrade to Java 21."))
    );
    assert_eq!(value("KONVEYOR_LLM_PROVIDER"), Some(json!("openai")));
    assert_eq!(value("KONVEYOR_LLM_MODEL"), Some(json!("gpt-test")));
    assert_eq!(
        env_vars["KONVEYOR_LLM_API_KEY"]["valueFrom"]["secretKeyRef"],
        json!({"name": "llm-key", "key": "apiKey"})
    );
    let acp = &env_vars["KONVEYOR_ACP_SECRET_KEY"]["valueFrom"]["secretKeyRef"];
    assert_eq!(acp["key"], "secret-key");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let acp_secret = secrets
        .get(acp["name"].as_str().expect("name"))
        .await
        .expect("ACP secret");
    assert!(!acp_secret.data.expect("data")["secret-key"].0.is_empty());
    let names: Vec<&String> = env_vars.keys().collect();
    assert!(
        names.contains(&&"EXTRA".to_string()),
        "the run's own env is there too"
    );

    // The pod's own annotations, the files of its downwardAPI volume: typed params with
    // defaults, and the skills manifest. No ConfigMap is made for the run.
    let files = volume(&mount_at("/run/konveyor/params.json").name)
        .downward_api
        .clone()
        .expect("a downwardAPI volume")
        .items
        .expect("items");
    let field_paths: Vec<(&str, &str)> = files
        .iter()
        .map(|f| {
            (
                f.path.as_str(),
                f.field_ref.as_ref().expect("fieldRef").field_path.as_str(),
            )
        })
        .collect();
    assert_eq!(
        field_paths,
        [
            (
                "konveyor-skills.json",
                "metadata.annotations['konveyor.io/skills-manifest']"
            ),
            ("params.json", "metadata.annotations['konveyor.io/params']"),
        ]
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let run_maps = maps
        .list(&ListParams::default().labels("konveyor.io/agentrun"))
        .await
        .expect("list")
        .items;
    assert!(run_maps.is_empty(), "{run_maps:#?}");
    let data = pod.annotations();
    let params: Value = serde_json::from_str(&data["konveyor.io/params"]).expect("params json");
    assert_eq!(
        params,
        json!({
            "workflow": {},
            "agent": {"target": 21, "dry_run": false},
            "execution": {"mode": "auto"},
        })
    );
    let manifest: Value =
        serde_json::from_str(&data["konveyor.io/skills-manifest"]).expect("manifest");
    assert_eq!(
        manifest["rules"],
        json!(["no-system-out", "quarkus-config"])
    );
    let listed: Vec<&str> = manifest["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(listed, ["java-upgrade", "no-system-out", "quarkus-config"]);
    // What the pod then sees and how its exit ends the run: tests/tests/node.rs, on a node.
    operator.stop().await;
}

#[tokio::test]
async fn invalid_runs_fail_with_the_param_or_gateway_named() {
    let (ns, client, operator) = scenario("run-invalid", SandboxBackend::Pod).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);

    // Before the Agent exists the run waits.
    apply(&runs, &run("early", &[("target", "8")], None)).await;
    let early = wait_for(&runs, "early", "AgentNotFound", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| {
            s.phase == Some(AgentRunPhase::Pending)
                && has_condition(&s.conditions, "Ready", "False", "AgentNotFound")
        })
    })
    .await;
    assert!(early.status.expect("status").sandbox_name.is_none());

    fixture(&client, &ns).await;
    // The watch on Agents starts the waiting run.
    wait_for_sandbox(&runs, "early").await;

    apply(
        &runs,
        &run("bad-params", &[("target", "soon"), ("colour", "red")], None),
    )
    .await;
    let failed = wait_phase(&runs, "bad-params", AgentRunPhase::Failed).await;
    let message = condition(&failed.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(
        message.contains("target") && message.contains("colour"),
        "{message}"
    );

    apply(&runs, &run("missing-param", &[], None)).await;
    let failed = wait_phase(&runs, "missing-param", AgentRunPhase::Failed).await;
    let message = condition(&failed.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(message.contains("target"), "{message}");

    apply(
        &runs,
        &run("other-gateway", &[("target", "8")], Some("elsewhere")),
    )
    .await;
    let failed = wait_phase(&runs, "other-gateway", AgentRunPhase::Failed).await;
    let ready = condition(&failed.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .clone();
    assert_eq!(ready.reason, "GatewayNotAllowed");
    assert!(ready.message.contains("elsewhere"), "{}", ready.message);

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let count = pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .len();
    assert_eq!(count, 1, "only the valid run got a sandbox");
    operator.stop().await;
}

/// The pod's exit deciding a run is proved on a real node (tests/tests/node.rs); a sandbox
/// deleted under a running agent is timing a kubelet cannot be asked for, so this test plays
/// the kubelet.
#[tokio::test]
async fn agent_sandbox_backend_runs_and_a_lost_sandbox_fails_the_run() {
    let (ns, client, operator) = scenario("run-sandbox", SandboxBackend::AgentSandbox).await;
    fixture(&client, &ns).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &agentic_operator::controllers::agentrun::sandbox_resource(),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    apply(&runs, &run("lost", &[("target", "17")], None)).await;
    let run = wait_for_sandbox(&runs, "lost").await;
    let sandbox_name = run.status.expect("status").sandbox_name.expect("name");
    let sandbox = sandboxes
        .get(&sandbox_name)
        .await
        .expect("a Sandbox object");
    assert_eq!(sandbox.data["spec"]["service"], json!(true));
    let template = &sandbox.data["spec"]["podTemplate"]["spec"];
    assert_eq!(template["restartPolicy"], "Never");
    // The agent-sandbox controller creates the pod; the kubelet's part is ours.
    let pod = wait_for(&pods, &sandbox_name, "the sandbox pod", |_: &Pod| true).await;
    // It copies the template's annotations to the pod, whose downwardAPI volume reads the
    // skills manifest and params from them.
    let template_annotations = &sandbox.data["spec"]["podTemplate"]["metadata"]["annotations"];
    for key in ["konveyor.io/skills-manifest", "konveyor.io/params"] {
        assert_eq!(
            pod.annotations().get(key).map(String::as_str),
            template_annotations[key].as_str(),
            "{key} on the pod as in the Sandbox's template"
        );
        assert!(
            pod.annotations()
                .get(key)
                .is_some_and(|v| v.starts_with('{'))
        );
    }
    let params: Value =
        serde_json::from_str(&pod.annotations()["konveyor.io/params"]).expect("params json");
    assert_eq!(params["agent"]["target"], json!(17));
    kubelet(&pods, &sandbox_name, None).await;
    wait_phase(&runs, "lost", AgentRunPhase::Running).await;
    sandboxes
        .delete(&sandbox_name, &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    let lost = wait_phase(&runs, "lost", AgentRunPhase::Failed).await;
    assert!(has_condition(
        &lost.status.expect("status").conditions,
        "Completed",
        "True",
        "SandboxLost"
    ));
    operator.stop().await;
}

#[tokio::test]
async fn a_restarted_operator_adopts_the_sandbox_and_an_idle_cluster_sees_no_writes() {
    let (ns, client, operator) = scenario("run-restart", SandboxBackend::Pod).await;
    fixture(&client, &ns).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("again", &[("target", "11")], None)).await;
    let first = wait_for_sandbox(&runs, "again").await;
    let first_status = first.status.expect("status");
    operator.stop().await;

    // The operator dies after creating the sandbox and before recording it.
    runs.patch_status(
        "again",
        &PatchParams::apply(agentic_operator::context::FIELD_MANAGER).force(),
        &Patch::Apply(
            json!({"apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "status": {}}),
        ),
    )
    .await
    .expect("clear status");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let acp_before = secrets
        .list(&ListParams::default().labels("konveyor.io/agentrun"))
        .await
        .expect("list")
        .items;

    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );
    let adopted = wait_for(&runs, "again", "the sandbox adopted", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| s.sandbox_name.is_some())
    })
    .await;
    let adopted_status = adopted.status.expect("status");
    assert_eq!(adopted_status.sandbox_name, first_status.sandbox_name);
    assert_eq!(
        adopted_status.skills, first_status.skills,
        "the same pinned skills"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert_eq!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .len(),
        1
    );
    let acp_after = secrets
        .list(&ListParams::default().labels("konveyor.io/agentrun"))
        .await
        .expect("list")
        .items;
    assert_eq!(
        acp_before
            .iter()
            .map(|s| s.data.clone())
            .collect::<Vec<_>>(),
        acp_after.iter().map(|s| s.data.clone()).collect::<Vec<_>>(),
        "the ACP key is never rotated"
    );

    // Idle: every object converged; tag refreshes (every 2s here) keep reconciling, and
    // nothing is written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let versions = resource_versions(&client, &ns).await;
    let reconciles_before = reconcile_count(&operator);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        resource_versions(&client, &ns).await,
        versions,
        "an idle cluster sees no writes"
    );
    assert!(
        reconcile_count(&operator) > reconciles_before,
        "the operator kept reconciling while idle"
    );
    operator.stop().await;
}

/// The status is a function of the world, not of the pass that computed it: the pass that
/// creates the sandbox judges the pod it just created, exactly as every later pass does, so a
/// run is written once when its sandbox is created and then only when something changes.
#[tokio::test]
async fn a_run_is_written_once_when_its_sandbox_is_created_and_not_again_until_it_changes() {
    let (ns, client, operator) = scenario("run-once", SandboxBackend::Pod).await;
    fixture(&client, &ns).await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);

    // Every version of the run, from a watch started before the run exists.
    let versions = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = versions.clone();
    let watch = kube::runtime::watcher(runs.clone(), kube::runtime::watcher::Config::default());
    let watching = tokio::spawn(async move {
        use futures::StreamExt;
        let mut watch = std::pin::pin!(watch);
        while let Some(event) = watch.next().await {
            if let Ok(kube::runtime::watcher::Event::Apply(run)) = event {
                seen.lock().expect("lock").push(run);
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    apply(&runs, &run("once", &[("target", "11")], None)).await;
    let created = wait_for_sandbox(&runs, "once").await;
    let name = created
        .status
        .as_ref()
        .and_then(|s| s.sandbox_name.clone())
        .expect("sandbox");

    // Forced passes: the pod's watch brings the run back each time it is touched.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let before = reconcile_count(&operator);
    for i in 0..3 {
        pods.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test/touch": i.to_string()}}})),
        )
        .await
        .expect("touch the pod");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(
        reconcile_count(&operator) >= before + 3,
        "the touched pod brought the run back"
    );
    // And a restarted operator reconciles every run again.
    operator.stop().await;
    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );
    let restarted = reconcile_count(&operator);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while reconcile_count(&operator) == restarted && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        reconcile_count(&operator) > restarted,
        "the run was reconciled"
    );
    operator.stop().await;
    watching.abort();

    let versions = versions.lock().expect("lock").clone();
    let statuses: Vec<_> = versions
        .iter()
        .filter(|r| r.status.is_some())
        .map(|r| {
            let status = r.status.clone().expect("status");
            let ready = condition(&status.conditions, "Ready")
                .map(|c| (c.reason.clone(), c.message.clone()));
            (r.resource_version(), ready)
        })
        .collect();
    assert_eq!(
        statuses.len(),
        1,
        "one status write, from the pass that created the sandbox: {statuses:#?}"
    );
    let (_, ready) = &statuses[0];
    assert_eq!(
        ready.as_ref().map(|(reason, _)| reason.as_str()),
        Some("PodPending"),
        "the first status already judges the pod: {ready:?}"
    );
    assert_eq!(
        runs.get("once").await.expect("run").resource_version(),
        statuses[0].0,
        "nothing wrote the run since"
    );
}

fn reconcile_count(operator: &Operator) -> u64 {
    operator
        .metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("agentic_reconciles_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn resource_versions(client: &Client, ns: &str) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    macro_rules! collect {
        ($kind:ty) => {
            let api: Api<$kind> = Api::namespaced(client.clone(), ns);
            for o in api.list(&ListParams::default()).await.expect("list").items {
                versions.insert(
                    format!("{}/{}", stringify!($kind), o.name_any()),
                    o.resource_version().unwrap_or_default(),
                );
            }
        };
    }
    collect!(SkillCard);
    collect!(Agent);
    collect!(AgentRun);
    collect!(Gateway);
    collect!(ConfigMap);
    collect!(Pod);
    versions
}

#[tokio::test]
async fn a_run_never_adopts_a_sandbox_it_does_not_own() {
    let (ns, client, operator) = scenario("run-foreign", SandboxBackend::Pod).await;
    fixture(&client, &ns).await;

    // A pod under the run's sandbox name, left by something else (say, a deleted run).
    let name = agentic_core::names::sandbox_name("reused");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"konveyor.io/agentrun": "reused"}},
        "spec": {"containers": [{"name": "old", "image": "old.invalid/agent:0"}]},
    }))
    .expect("pod");
    pods.create(&kube::api::PostParams::default(), &foreign)
        .await
        .expect("create foreign pod");

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(&runs, &run("reused", &[("target", "11")], None)).await;
    let blocked = wait_for(&runs, "reused", "ObjectNameTaken", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| {
            s.sandbox_name.is_none()
                && has_condition(&s.conditions, "Ready", "False", "ObjectNameTaken")
        })
    })
    .await;
    assert!(
        blocked.status.expect("status").skills.is_empty(),
        "nothing adopted"
    );

    // Once the foreign pod is gone the run creates its own.
    pods.delete(&name, &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    wait_for(&runs, "reused", "its own sandbox", |r: &AgentRun| {
        r.status
            .as_ref()
            .is_some_and(|s| s.sandbox_name.as_deref() == Some(name.as_str()))
    })
    .await;
    let pod = pods.get(&name).await.expect("pod");
    assert_eq!(pod.spec.expect("spec").containers[0].name, "agent");
    operator.stop().await;
}

/// An Agent that lists no gateways is Ready with `GatewayConfigured` False; its runs must
/// name a Gateway, and get a sandbox once that Gateway exists and is Ready.
#[tokio::test]
async fn a_gateway_less_agent_runs_on_the_gateway_its_run_names() {
    let (ns, client, operator) = scenario("run-gwless", SandboxBackend::Pod).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    apply(
        &agents,
        &Agent {
            metadata: meta("bare"),
            spec: AgentSpec {
                image: "ghcr.io/acme/harness:1.0".into(),
                skill_delivery: "native".into(),
                ..AgentSpec::default()
            },
            status: None,
        },
    )
    .await;
    let agent = wait_agent_ready(&agents, "bare").await;
    let conditions = &agent.status.as_ref().expect("status").conditions;
    assert!(
        has_condition(conditions, "GatewayConfigured", "False", "NoGatewaysListed"),
        "{conditions:#?}"
    );

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let run = |name: &str, gateway: Option<&str>| AgentRun {
        metadata: meta(name),
        spec: AgentRunSpec {
            agent_ref: "bare".into(),
            gateway: gateway.map(Into::into),
            ..AgentRunSpec::default()
        },
        status: None,
    };
    apply(&runs, &run("unnamed", None)).await;
    apply(&runs, &run("named", Some("llm"))).await;
    let failed = wait_phase(&runs, "unnamed", AgentRunPhase::Failed).await;
    let conditions = &failed.status.as_ref().expect("status").conditions;
    assert!(
        has_condition(conditions, "Ready", "False", "NoGateway"),
        "{conditions:#?}"
    );
    wait_for(&runs, "named", "waiting for its Gateway", |r: &AgentRun| {
        r.status.as_ref().is_some_and(|s| {
            has_condition(&s.conditions, "Ready", "False", "GatewayNotFound")
                && has_condition(&s.conditions, "Succeeded", "Unknown", "GatewayNotFound")
        })
    })
    .await;
    llm_gateway(&client, &ns).await;
    let started = wait_for_sandbox(&runs, "named").await;
    assert_eq!(
        started.status.as_ref().and_then(|s| s.phase),
        Some(AgentRunPhase::Pending),
        "{started:#?}"
    );
    operator.stop().await;
}
