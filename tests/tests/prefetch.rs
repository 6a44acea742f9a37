//! Skill prefetch on a real API server and registry, without a kubelet: fake Node objects
//! (labelled for this test, so nothing else in the shared cluster is selected), the prefetch
//! pods the operator creates for a Ready Agent, their shape and caps, the kubelet's part
//! played by patching their status, the deletion when the digest set changes, and nothing
//! at all with prefetch off. Pulling for real is in tests/tests/node.rs.

use std::collections::BTreeSet;

use agentic_api::{Agent, ObjectRef, SkillCard};
use agentic_core::prefetch::{
    NodeSelection, PREFETCH_LABEL, PREFETCH_NODE_ANNOTATION, PREFETCH_SET_LABEL, PrefetchSettings,
};
use agentic_core::sandbox::RUN_LABEL;
use agentic_integration_tests::{
    Operator, apply, condition, env, eventually, has_condition, image_card, llm_agent_spec, push,
    ready_agent, registry, scenario, wait_for, write_skill,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const OPERATOR_IMAGE: &str = "registry.invalid/agentic-operator:test";

/// A Ready, untainted node labelled `prefetch-test=<ns>`, schedulable unless `cordoned`.
async fn node(client: &Client, ns: &str, name: &str, cordoned: bool) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let name = format!("{ns}-{name}");
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"prefetch-test": ns}},
        "spec": {"unschedulable": cordoned},
    }))
    .expect("a node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create the node");
    let ready = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake",
        "lastHeartbeatTime": "2026-12-05T00:00:00Z", "lastTransitionTime": "2026-12-05T00:00:00Z",
    }]}});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .expect("the node is Ready");
    // What the node lifecycle controller (not running here) does once a node is Ready: the
    // API server's TaintNodesByCondition gave it the not-ready taint at creation.
    let untainted = json!({"spec": {"taints": null}});
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&untainted))
        .await
        .expect("the node's not-ready taint is lifted");
    name
}

async fn delete_nodes(client: &Client, names: &[String]) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}

/// The prefetch pods in `ns`.
async fn prefetch_pods(pods: &Api<Pod>) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(PREFETCH_LABEL))
        .await
        .expect("list prefetch pods")
        .items
}

/// The node each pod is for.
fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .map(|p| p.annotations()[PREFETCH_NODE_ANNOTATION].clone())
        .collect()
}

/// Plays the kubelet: the pod's container started and exited 0.
async fn succeed(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {
        "phase": "Succeeded",
        "containerStatuses": [{
            "name": "prefetch", "image": OPERATOR_IMAGE, "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {
                "exitCode": 0, "reason": "Completed",
                "startedAt": "2026-12-05T00:00:03Z", "finishedAt": "2026-12-05T00:00:03Z",
            }},
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch the pod's status");
}

/// Pushes a one-skill image per name; returns the SkillCards' names.
async fn image_cards(client: &Client, ns: &str, names: &[&str]) -> Vec<String> {
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    let tmp = tempfile::tempdir().expect("tempdir");
    for name in names {
        let dir = write_skill(tmp.path(), name, "A skill to prefetch.");
        let pushed = push(&[dir], &format!("{ns}/{name}:1")).await;
        let tag = pushed.split('@').next().expect("a tag");
        apply(&cards, &image_card(name, tag)).await;
    }
    names.iter().map(|n| (*n).to_string()).collect()
}

fn settings(ns: &str) -> PrefetchSettings {
    PrefetchSettings {
        nodes: NodeSelection::parse(&format!("prefetch-test={ns}"))
            .expect("a selector")
            .expect("not off"),
        image: OPERATOR_IMAGE.into(),
        priority_class: None,
        per_agent: 2,
        per_cluster: 10,
    }
}

fn prefetched(agent: &Agent, status: &str, reason: &str) -> bool {
    agent
        .status
        .as_ref()
        .is_some_and(|s| has_condition(&s.conditions, "SkillsPrefetched", status, reason))
}

#[tokio::test]
async fn a_ready_agent_prefetches_its_images_onto_the_selected_nodes_within_the_caps() {
    let env = env().await;
    let ns = env.namespace("prefetch").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start_prefetching(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
        settings(&ns),
    );
    let nodes = vec![
        node(&client, &ns, "a", false).await,
        node(&client, &ns, "b", false).await,
        node(&client, &ns, "c", false).await,
    ];
    let cordoned = node(&client, &ns, "cordoned", true).await;

    let cards = image_cards(&client, &ns, &["alpha", "beta"]).await;
    let mut spec = llm_agent_spec("harness.invalid/agent:1");
    spec.skill_cards = cards
        .iter()
        .map(|name| ObjectRef { name: name.clone() })
        .collect();
    let agent = ready_agent(&client, &ns, "coder", spec).await;
    let images: BTreeSet<String> = agent
        .status
        .as_ref()
        .expect("status")
        .skills
        .iter()
        .filter_map(|s| s.image.clone())
        .collect();
    assert_eq!(images.len(), 2, "{images:?}");

    // Two of the three selected nodes at once (the Agent's cap), never the cordoned one.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    wait_for(&agents, "coder", "prefetch in progress", |a| {
        prefetched(a, "False", "SkillPrefetchInProgress")
    })
    .await;
    let first = eventually("two prefetch pods", || async {
        let found = prefetch_pods(&pods).await;
        (found.len() == 2).then_some(found)
    })
    .await;
    assert!(!nodes_of(&first).contains(&cordoned));
    for pod in &first {
        assert!(!pod.labels().contains_key(RUN_LABEL), "never a run's pod");
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Agent", "coder")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = pod.spec.as_ref().expect("a spec");
        let mounted: BTreeSet<String> = spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.image.as_ref()?.reference.clone())
            .collect();
        assert_eq!(mounted, images, "the Agent's pinned images, each once");
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.node_name, None, "placed by the scheduler");
        let node = &pod.annotations()[PREFETCH_NODE_ANNOTATION];
        let term = &spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required node affinity")
            .node_selector_terms[0];
        assert_eq!(
            term.match_fields.as_ref().expect("fields")[0].values,
            Some(vec![node.clone()])
        );
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(OPERATOR_IMAGE));
        let security = container.security_context.as_ref().expect("security");
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
    }

    // As they succeed, the third node gets its pod; then every node holds the set.
    for pod in &first {
        succeed(&pods, &pod.name_any()).await;
    }
    let all = eventually("a pod per selected node", || async {
        let found = prefetch_pods(&pods).await;
        (found.len() == 3).then_some(found)
    })
    .await;
    let expected: BTreeSet<String> = nodes.iter().cloned().collect();
    assert_eq!(nodes_of(&all), expected);
    for pod in &all {
        if !first.iter().any(|f| f.name_any() == pod.name_any()) {
            succeed(&pods, &pod.name_any()).await;
        }
    }
    let done = wait_for(&agents, "coder", "every node holds the images", |a| {
        prefetched(a, "True", "SkillImagesPresent")
    })
    .await;
    let message = &condition(
        &done.status.as_ref().expect("status").conditions,
        "SkillsPrefetched",
    )
    .expect("the condition")
    .message;
    assert!(
        message.starts_with("3 of 3 selected node(s) hold the 2 skill image(s)"),
        "{message}"
    );
    let set = all[0].labels()[PREFETCH_SET_LABEL].clone();

    // A changed skill set: the old set's pods go, the new set's come.
    let mut agent = agents.get("coder").await.expect("the Agent");
    agent.spec.skill_cards.truncate(1);
    agent.metadata.managed_fields = None;
    agent.metadata.resource_version = None;
    apply(&agents, &agent).await;
    let renewed = eventually("pods of the new set only", || async {
        let found = prefetch_pods(&pods).await;
        let sets: BTreeSet<&String> = found
            .iter()
            .map(|p| &p.labels()[PREFETCH_SET_LABEL])
            .collect();
        (found.len() == 2 && !sets.contains(&set)).then_some(found)
    })
    .await;
    for pod in &renewed {
        let mounted = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .map_or(0, Vec::len);
        assert_eq!(mounted, 1, "one image left");
    }

    operator.stop().await;
    delete_nodes(&client, &nodes).await;
    delete_nodes(&client, &[cordoned]).await;
}

#[tokio::test]
async fn with_prefetch_off_there_are_no_prefetch_pods_and_no_condition() {
    let (ns, client, operator) = scenario("prefetch-off", SandboxBackend::Pod).await;
    let nodes = vec![node(&client, &ns, "a", false).await];
    let cards = image_cards(&client, &ns, &["gamma"]).await;
    let mut spec = llm_agent_spec("harness.invalid/agent:1");
    spec.skill_cards = vec![ObjectRef {
        name: cards[0].clone(),
    }];
    let agent = ready_agent(&client, &ns, "coder", spec).await;
    assert!(
        condition(
            &agent.status.expect("status").conditions,
            "SkillsPrefetched"
        )
        .is_none()
    );
    // A pass creates its prefetch pods before it writes the status that says Ready: had
    // prefetch been on, they would exist now.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert!(prefetch_pods(&pods).await.is_empty());
    operator.stop().await;
    delete_nodes(&client, &nodes).await;
}
