//! Skill prefetch on the real node: the prefetch pod's kubelet pulls an Agent's skill
//! images, the Agent reports them present, and its first run finds them on the node.

use std::collections::BTreeSet;

use agentic_api::{Agent, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, ObjectRef, SkillCard};
use agentic_core::prefetch::{NodeSelection, PREFETCH_LABEL, PrefetchSettings};
use agentic_integration_tests::{
    Operator, apply, events_about, has_condition, image_card, llm_agent_spec, meta, node_env,
    operator_binary, push, ready_agent, registry, stub_agent, wait_for, wait_phase, write_skill,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::push_operator_image;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

/// The repositories (`host/repo`, no tag or digest) the kubelet pulled for `pod`, from the
/// pod's `Pulling` Events.
async fn pulled(client: &kube::Client, ns: &str, pod: &str) -> BTreeSet<String> {
    events_about(client, ns, "Pod", pod)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Pulling"))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test]
async fn a_prefetch_pulls_the_skill_images_and_the_first_run_finds_them_present() {
    const IMAGES: usize = 3;
    let env = node_env().await;
    let ns = env.namespace("node-prefetch").await.expect("namespace");
    let client = env.client();
    let operator_image = push_operator_image(&registry().await, operator_binary())
        .await
        .expect("the operator image is pushed");
    let operator = Operator::start_prefetching(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
        PrefetchSettings {
            nodes: NodeSelection::All,
            image: operator_image,
            priority_class: None,
            per_agent: 5,
            per_cluster: 20,
        },
    );

    let scratch = tempfile::tempdir().expect("tempdir");
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let mut repositories = Vec::new();
    for i in 0..IMAGES {
        let name = format!("prefetched-{i}");
        let dir = write_skill(scratch.path(), &name, "A skill pulled before the run.");
        let pushed = push(&[dir], &format!("{ns}/{name}:1")).await;
        let tagged = pushed.split('@').next().expect("a tag").to_string();
        repositories.push(tagged.rsplit_once(':').expect("a tag").0.to_string());
        apply(&cards, &image_card(&name, &tagged)).await;
    }
    let spec = AgentSpec {
        skill_cards: (0..IMAGES)
            .map(|i| ObjectRef {
                name: format!("prefetched-{i}"),
            })
            .collect(),
        ..llm_agent_spec(stub_agent().await)
    };
    ready_agent(&client, &ns, "migrator", spec).await;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    wait_for(&agents, "migrator", "its images on the node", |a| {
        a.status.as_ref().is_some_and(|s| {
            has_condition(
                &s.conditions,
                "SkillsPrefetched",
                "True",
                "SkillImagesPresent",
            )
        })
    })
    .await;

    // The prefetch pod's kubelet pulled every skill image.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let prefetch = pods
        .list(&ListParams::default().labels(PREFETCH_LABEL))
        .await
        .expect("list")
        .items;
    assert_eq!(prefetch.len(), 1, "one node, one pod");
    let pulls = pulled(&client, &ns, &prefetch[0].name_any()).await;
    for repository in &repositories {
        assert!(
            pulls.iter().any(|note| note.contains(repository.as_str())),
            "the prefetch pod pulled {repository}: {pulls:?}"
        );
    }

    // The first run pulls none of them: they are on the node already.
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let run = AgentRun {
        metadata: meta("first"),
        spec: AgentRunSpec {
            agent_ref: "migrator".into(),
            ..AgentRunSpec::default()
        },
        status: None,
    };
    apply(&runs, &run).await;
    let done = wait_phase(&runs, "first", AgentRunPhase::Succeeded).await;
    let sandbox = done
        .status
        .and_then(|s| s.sandbox_name)
        .expect("the run names its pod");
    let pulls = pulled(&client, &ns, &sandbox).await;
    for repository in &repositories {
        assert!(
            !pulls.iter().any(|note| note.contains(repository.as_str())),
            "the run pulled {repository} again: {pulls:?}"
        );
    }
    operator.stop().await;
}
