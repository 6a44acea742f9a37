use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, NodeCondition, NodeSpec,
    NodeStatus, Taint,
};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::sandbox::SkillSource;
use agentic_api::SkillType;

const DIGEST_A: &str = "registry.example/skills/a@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DIGEST_B: &str = "registry.example/skills/b@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a time"))
}

fn skill(name: &str, source: SkillSource, pull_secrets: &[&str]) -> MountedSkill {
    MountedSkill {
        name: name.into(),
        description: String::new(),
        skill_type: SkillType::Skill,
        skill_card: name.into(),
        source,
        sub_path: None,
        pull_secrets: pull_secrets.iter().map(|s| (*s).to_string()).collect(),
        verification: None,
    }
}

fn image(name: &str, reference: &str, pull_secrets: &[&str]) -> MountedSkill {
    skill(
        name,
        SkillSource::Image {
            reference: reference.into(),
        },
        pull_secrets,
    )
}

fn images() -> SkillImages {
    SkillImages::of(&[
        image("one", DIGEST_B, &["regcred"]),
        // Two skills of one image: one volume, as a run mounts them.
        image("two", DIGEST_A, &[]),
        image("three", DIGEST_A, &["other", "regcred"]),
        skill(
            "inline",
            SkillSource::Inline {
                config_map: "inline-skill".into(),
            },
            &["not-an-image"],
        ),
    ])
}

fn settings(per_agent: usize, per_cluster: usize) -> PrefetchSettings {
    PrefetchSettings {
        nodes: NodeSelection::All,
        image: "registry.example/agentic-operator:1".into(),
        priority_class: Some("background".into()),
        per_agent,
        per_cluster,
    }
}

fn owner() -> PrefetchOwner<'static> {
    PrefetchOwner {
        name: "coder",
        namespace: "team",
        owner: OwnerReference {
            api_version: "konveyor.io/v1alpha1".into(),
            kind: "Agent".into(),
            name: "coder".into(),
            uid: "agent-uid".into(),
            controller: Some(true),
            ..Default::default()
        },
    }
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("pool".into(), "agents".into())])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn nodes(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("node-{i}")).collect()
}

/// A pod as the plan for `node` builds it, created at `created`, in `phase`.
fn pod_on(node: &str, created: i64, phase: &str, attempt: u32) -> (ObjectMeta, PodStatus) {
    let images = images();
    let name = prefetch_pod_name("coder", node, &images.set_hash());
    let mut pod = build_prefetch_pod(
        &settings(1, 1),
        &owner(),
        &images,
        &images.set_hash(),
        node,
        name,
        attempt,
    );
    pod.metadata.creation_timestamp = Some(at(created));
    let status = PodStatus {
        phase: Some(phase.into()),
        ..Default::default()
    };
    (pod.metadata, status)
}

fn observed(pods: &[(ObjectMeta, PodStatus)]) -> Vec<ObservedPod<'_>> {
    pods.iter()
        .map(|(metadata, status)| ObservedPod {
            metadata,
            status: Some(status),
        })
        .collect()
}

fn created_nodes(plan: &PrefetchPlan) -> Vec<String> {
    plan.create
        .iter()
        .map(|pod| {
            pod.metadata.annotations.as_ref().expect("annotations")[PREFETCH_NODE_ANNOTATION]
                .clone()
        })
        .collect()
}

#[test]
fn the_digest_set_is_each_image_once_and_its_name_follows_the_references_only() {
    let images = images();
    assert_eq!(images.references, [DIGEST_A, DIGEST_B]);
    assert_eq!(images.pull_secrets, ["other", "regcred"]);
    let reordered = SkillImages::of(&[image("x", DIGEST_A, &[]), image("y", DIGEST_B, &[])]);
    assert_eq!(reordered.set_hash(), images.set_hash());
    let other = SkillImages::of(&[image("x", DIGEST_A, &[])]);
    assert_ne!(other.set_hash(), images.set_hash());
    assert!(SkillImages::of(&[]).is_empty());
}

#[test]
fn the_pod_mounts_the_images_as_runs_do_and_is_restricted_and_pinned() {
    let images = images();
    let pod = build_prefetch_pod(
        &settings(1, 1),
        &owner(),
        &images,
        &images.set_hash(),
        "node-7",
        "coder-prefetch-x".into(),
        1,
    );
    let spec = pod.spec.expect("a spec");
    let volumes = spec.volumes.expect("volumes");
    let references: Vec<_> = volumes
        .iter()
        .map(|v| {
            let image = v.image.as_ref().expect("an image volume");
            assert_eq!(image.pull_policy.as_deref(), Some("IfNotPresent"));
            image.reference.clone().expect("a reference")
        })
        .collect();
    assert_eq!(references, [DIGEST_A, DIGEST_B]);
    let secrets: Vec<_> = spec
        .image_pull_secrets
        .expect("pull secrets")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(secrets, ["other", "regcred"]);
    let terms = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution)
        .expect("required node affinity")
        .node_selector_terms;
    let fields = terms[0].match_fields.as_ref().expect("match fields");
    assert_eq!(fields[0].key, "metadata.name");
    assert_eq!(
        fields[0].values.as_deref(),
        Some(&["node-7".to_string()][..])
    );
    assert!(spec.node_name.is_none(), "the scheduler places it");
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.priority_class_name.as_deref(), Some("background"));
    let pod_security = spec.security_context.expect("pod security");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security.seccomp_profile.expect("seccomp").type_,
        "RuntimeDefault"
    );
    let [container] = &spec.containers[..] else {
        panic!("one container: {:?}", spec.containers);
    };
    assert_eq!(
        container.image.as_deref(),
        Some("registry.example/agentic-operator:1")
    );
    assert_eq!(
        container.args.as_deref(),
        Some(&["--version".to_string()][..])
    );
    assert_eq!(container.volume_mounts.as_ref().expect("mounts").len(), 2);
    let security = container.security_context.as_ref().expect("security");
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security.capabilities.as_ref().and_then(|c| c.drop.clone()),
        Some(vec!["ALL".to_string()])
    );
    let requests = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .expect("requests");
    assert_eq!(requests["cpu"].0, "10m");
    let labels = pod.metadata.labels.expect("labels");
    assert_eq!(labels[PREFETCH_LABEL], "coder");
    assert_eq!(labels[PREFETCH_SET_LABEL], images.set_hash());
    assert!(
        !labels.contains_key(crate::sandbox::RUN_LABEL),
        "never counted as a run"
    );
    assert_eq!(
        pod.metadata.owner_references.expect("owner")[0].uid,
        "agent-uid"
    );
}

#[test]
fn only_nodes_runs_can_land_on_that_the_setting_selects_are_chosen() {
    let mut cordoned = node("cordoned");
    cordoned.spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..Default::default()
    });
    let mut tainted = node("tainted");
    tainted.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let mut preferring = node("preferring");
    preferring.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: "dedicated".into(),
            effect: "PreferNoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let mut not_ready = node("not-ready");
    not_ready.status = None;
    let mut other_pool = node("other-pool");
    other_pool.metadata.labels = Some(BTreeMap::from([("pool".into(), "builds".into())]));
    let all = [
        node("b"),
        node("a"),
        cordoned,
        tainted,
        preferring,
        not_ready,
        other_pool,
    ];
    assert_eq!(
        selected_nodes(&all, &NodeSelection::All),
        ["a", "b", "other-pool", "preferring"]
    );
    let agents = NodeSelection::parse("pool=agents")
        .expect("a selector")
        .expect("not off");
    assert_eq!(selected_nodes(&all, &agents), ["a", "b", "preferring"]);
}

#[test]
fn the_setting_reads_all_off_and_label_selectors() {
    assert_eq!(NodeSelection::parse("all"), Ok(Some(NodeSelection::All)));
    assert_eq!(NodeSelection::parse("off"), Ok(None));
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    };
    let selector =
        LabelSelector::parse("pool in (agents, ci),!gpu,zone!=z3,kubernetes.io/os=linux")
            .expect("a selector");
    assert!(selector.matches(&labels(&[("pool", "ci"), ("kubernetes.io/os", "linux")])));
    assert!(!selector.matches(&labels(&[
        ("pool", "ci"),
        ("kubernetes.io/os", "linux"),
        ("gpu", "1")
    ])));
    assert!(!selector.matches(&labels(&[("pool", "web"), ("kubernetes.io/os", "linux")])));
    assert!(!selector.matches(&labels(&[
        ("pool", "ci"),
        ("kubernetes.io/os", "linux"),
        ("zone", "z3")
    ])));
    let notin = LabelSelector::parse("pool notin (web),fast").expect("a selector");
    assert!(notin.matches(&labels(&[("fast", "")])));
    assert!(!notin.matches(&labels(&[("fast", ""), ("pool", "web")])));
    let error = NodeSelection::parse("pool in agents").expect_err("no parentheses");
    assert!(
        error.contains("--skill-prefetch") && error.contains("pool in agents"),
        "{error}"
    );
    assert!(NodeSelection::parse(" , ").is_err());
}

#[test]
fn a_ready_agent_gets_one_pod_per_node_up_to_its_cap() {
    let plan = plan_prefetch(
        &settings(2, 10),
        &owner(),
        &images(),
        &nodes(3),
        &[],
        0,
        &at(1000),
    );
    assert_eq!(created_nodes(&plan).len(), 2);
    let report = plan.report.expect("a report");
    assert_eq!(
        (
            report.selected,
            report.pulling,
            report.queued,
            report.holding
        ),
        (3, 2, 1, 0)
    );
    let (status, reason, message) = report.condition();
    assert_eq!(
        (status, reason),
        (ConditionStatus::False, AgentReason::SkillPrefetchInProgress)
    );
    assert!(
        message.contains("0 of 3 selected node(s) hold the 2 skill image(s)"),
        "{message}"
    );
    assert!(plan.delete.is_empty());
    let names: BTreeSet<_> = plan
        .create
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), 2, "one name per node");
}

#[test]
fn the_cluster_cap_counts_every_agents_pods() {
    let plan = plan_prefetch(
        &settings(5, 4),
        &owner(),
        &images(),
        &nodes(3),
        &[],
        3,
        &at(1000),
    );
    assert_eq!(plan.create.len(), 1);
    assert_eq!(plan.report.expect("report").queued, 2);
    assert!(plan.recheck.is_some(), "a queued node is looked at again");
    let full = plan_prefetch(
        &settings(5, 4),
        &owner(),
        &images(),
        &nodes(3),
        &[],
        4,
        &at(1000),
    );
    assert!(full.create.is_empty());
}

#[test]
fn succeeded_pods_are_the_record_and_cost_nothing_more() {
    let pods: Vec<_> = nodes(3)
        .iter()
        .map(|n| pod_on(n, 900, "Succeeded", 1))
        .collect();
    let plan = plan_prefetch(
        &settings(2, 10),
        &owner(),
        &images(),
        &nodes(3),
        &observed(&pods),
        0,
        &at(1000),
    );
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(plan.recheck, None, "nothing to wait for");
    let (status, reason, message) = plan.report.expect("report").condition();
    assert_eq!(
        (status, reason),
        (ConditionStatus::True, AgentReason::SkillImagesPresent)
    );
    assert!(message.starts_with("3 of 3"), "{message}");
}

#[test]
fn a_changed_set_or_a_node_gone_deletes_the_old_pods() {
    let mut stale = pod_on("node-0", 900, "Succeeded", 1);
    stale.0.name = Some(prefetch_pod_name("coder", "node-0", "an-older-set"));
    let gone = pod_on("node-9", 900, "Succeeded", 1);
    let kept = pod_on("node-1", 900, "Succeeded", 1);
    let pods = [stale.clone(), gone.clone(), kept];
    let plan = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &images(),
        &nodes(2),
        &observed(&pods),
        0,
        &at(1000),
    );
    let mut deleted = plan.delete.clone();
    deleted.sort();
    let mut expected = vec![stale.0.name.expect("name"), gone.0.name.expect("name")];
    expected.sort();
    assert_eq!(deleted, expected);
    assert_eq!(created_nodes(&plan), ["node-0"]);
}

#[test]
fn an_agent_with_nothing_to_prefetch_deletes_its_pods_and_reports_nothing() {
    let pods = [pod_on("node-0", 900, "Succeeded", 1)];
    let plan = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &SkillImages::default(),
        &nodes(2),
        &observed(&pods),
        0,
        &at(1000),
    );
    assert_eq!(plan.delete.len(), 1);
    assert!(plan.create.is_empty());
    assert_eq!(plan.report, None);
}

#[test]
fn a_failed_prefetch_is_reported_and_retried_after_its_backoff_with_the_attempt_counted() {
    let (metadata, mut status) = pod_on("node-0", 900, "Failed", 2);
    status.container_statuses = Some(vec![ContainerStatus {
        name: PREFETCH_CONTAINER.into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 1,
                reason: Some("Error".into()),
                finished_at: Some(at(950)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let pods = [(metadata, status)];
    // Attempt 2 waits twice the first backoff from its end.
    let retry_at = 950 + seconds(FIRST_BACKOFF) * 2;
    let early = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &images(),
        &nodes(1),
        &observed(&pods),
        0,
        &at(retry_at - 1),
    );
    assert!(early.create.is_empty() && early.delete.is_empty());
    assert_eq!(early.recheck, Some(Duration::from_secs(1)));
    let (status, reason, message) = early.report.expect("report").condition();
    assert_eq!(
        (status, reason),
        (ConditionStatus::False, AgentReason::SkillPrefetchFailed)
    );
    assert!(message.contains("failed on node-0 (Error)"), "{message}");

    let due = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &images(),
        &nodes(1),
        &observed(&pods),
        0,
        &at(retry_at),
    );
    let name = pods[0].0.name.clone().expect("name");
    assert_eq!(
        due.delete,
        std::slice::from_ref(&name),
        "replaced under its own name"
    );
    assert_eq!(due.create[0].metadata.name.as_ref(), Some(&name));
    assert_eq!(
        due.create[0]
            .metadata
            .annotations
            .as_ref()
            .expect("annotations")[PREFETCH_ATTEMPT_ANNOTATION],
        "3"
    );
    assert!(due.report.expect("report").failed.is_empty());
}

#[test]
fn a_pull_failure_is_reported_while_the_kubelet_retries_and_the_deadline_ends_it() {
    let (metadata, mut status) = pod_on("node-0", 1000, "Pending", 1);
    status.container_statuses = Some(vec![ContainerStatus {
        name: PREFETCH_CONTAINER.into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ImagePullBackOff".into()),
                message: Some("unauthorized".into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let pods = [(metadata, status)];
    let pulling = plan_prefetch(
        &settings(1, 10),
        &owner(),
        &images(),
        &nodes(2),
        &observed(&pods),
        1,
        &at(1100),
    );
    assert_eq!(pulling.report.as_ref().map(|r| r.queued), Some(1));
    let report = pulling.report.clone().expect("report");
    assert_eq!(
        report.failed,
        [(
            "node-0".to_string(),
            "ImagePullBackOff: unauthorized".to_string()
        )]
    );
    assert!(
        pulling.delete.is_empty(),
        "the kubelet retries within the deadline"
    );
    assert!(pulling.create.is_empty(), "it holds the Agent's one slot");
    let deadline = 1000 + seconds(PREFETCH_DEADLINE);
    // The queued node is looked at again sooner than the deadline.
    assert_eq!(pulling.recheck, Some(FIRST_BACKOFF));
    let alone = plan_prefetch(
        &settings(1, 10),
        &owner(),
        &images(),
        &nodes(1),
        &observed(&pods),
        1,
        &at(1100),
    );
    assert_eq!(
        alone.recheck,
        Some(Duration::from_secs(
            u64::try_from(deadline - 1100).expect("positive")
        ))
    );

    let past = plan_prefetch(
        &settings(1, 10),
        &owner(),
        &images(),
        &nodes(1),
        &observed(&pods),
        0,
        &at(deadline + seconds(FIRST_BACKOFF)),
    );
    assert_eq!(
        past.delete.len(),
        1,
        "replaced after the deadline and one backoff"
    );
    assert_eq!(past.create.len(), 1);
}

#[test]
fn a_pod_being_deleted_waits_for_its_successor() {
    let (mut metadata, status) = pod_on("node-0", 900, "Failed", 1);
    metadata.deletion_timestamp = Some(at(990));
    let pods = [(metadata, status)];
    let plan = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &images(),
        &nodes(1),
        &observed(&pods),
        0,
        &at(1000),
    );
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(plan.report.expect("report").queued, 1);
}

#[test]
fn no_selected_node_is_reported() {
    let plan = plan_prefetch(
        &settings(5, 10),
        &owner(),
        &images(),
        &[],
        &[],
        0,
        &at(1000),
    );
    let (status, reason, _) = plan.report.expect("report").condition();
    assert_eq!(
        (status, reason),
        (ConditionStatus::False, AgentReason::NoPrefetchNodes)
    );
}

#[test]
fn the_pull_time_runs_from_creation_to_the_containers_start() {
    let (metadata, mut status) = pod_on("node-0", 1000, "Succeeded", 1);
    assert_eq!(
        pull_seconds(ObservedPod {
            metadata: &metadata,
            status: Some(&status)
        }),
        None
    );
    status.container_statuses = Some(vec![ContainerStatus {
        name: PREFETCH_CONTAINER.into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                started_at: Some(at(1012)),
                finished_at: Some(at(1012)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    assert_eq!(
        pull_seconds(ObservedPod {
            metadata: &metadata,
            status: Some(&status)
        }),
        Some(12)
    );
}

#[test]
fn backoff_doubles_up_to_its_bound() {
    assert_eq!(backoff(1), FIRST_BACKOFF);
    assert_eq!(backoff(2), FIRST_BACKOFF * 2);
    assert_eq!(backoff(40), MAX_BACKOFF);
}

#[test]
fn pod_names_are_labels_per_agent_node_and_set() {
    let long = "A.very.long.agent.name.that.keeps.going.and.going.well.past.sixty-three";
    let name = prefetch_pod_name(long, "node-1", "set");
    assert!(crate::names::is_dns1035_label(&name), "{name}");
    assert_ne!(name, prefetch_pod_name(long, "node-2", "set"));
    assert_ne!(name, prefetch_pod_name(long, "node-1", "other"));
    assert!(crate::names::is_dns1035_label(&prefetch_pod_name(
        "1st", "n", "s"
    )));
}
