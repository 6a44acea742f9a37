//! Skill prefetch: which pods have the kubelets pull a Ready Agent's skill images before its
//! first run needs them, decided from what the Agent controller read.
//!
//! One pod per selected node and digest set ([`prefetch_pod_name`]), owned by the Agent so
//! that it is collected with it. It mounts the Agent's image volumes as a run's pod does
//! (same references, `pullPolicy: IfNotPresent`, the same `imagePullSecrets`), so the kubelet
//! pulls them on its own path, with the run's pull secrets, mirrors and policies, and its
//! one container, from the operator's own image, exits at once. It is pinned to its node by
//! node affinity on `metadata.name`, as a DaemonSet's pods are, not by `nodeName`: the
//! scheduler then accounts for its requests, respects its (low) priority so runs go first,
//! and a full node keeps it Pending instead of the kubelet rejecting it.
//!
//! A succeeded pod is kept, as the record that its node holds the set: an Agent whose images
//! are present costs a cache lookup per pass and no write. It is deleted when the set
//! changes (its name no longer matches) or the node leaves the selection. A failed one is
//! kept too, for its backoff, and then replaced under the same name with the attempt
//! counted up. The pods carry [`PREFETCH_LABEL`], never a run's label: the run census, the
//! orphan sweep and the concurrency caps never see them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentic_api::ConditionStatus;
use k8s_openapi::api::core::v1::{Affinity, PodSecurityContext};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerState, ImageVolumeSource, LocalObjectReference, Node,
    NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, PodStatus,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::names::{label_value, prefetch_pod_name, short_hash};
use crate::reasons::AgentReason;
use crate::sandbox::{MANAGED_BY, MANAGED_BY_LABEL, MountedSkill, SkillSource};

/// The Agent condition reporting how many selected nodes hold its skill images.
pub const CONDITION_SKILLS_PREFETCHED: &str = "SkillsPrefetched";
/// Label on every prefetch pod, naming its Agent ([`label_value`] of the name); the
/// operator's prefetch pod watch selects on it.
pub const PREFETCH_LABEL: &str = "konveyor.io/skill-prefetch";
/// Label naming the digest set a prefetch pod pulls (a hash of its references).
pub const PREFETCH_SET_LABEL: &str = "konveyor.io/skill-prefetch-set";
/// Annotation naming the node a prefetch pod is pinned to (a node name can be longer than a
/// label value).
pub const PREFETCH_NODE_ANNOTATION: &str = "konveyor.io/skill-prefetch-node";
/// Annotation counting the attempts at this node and set, for the backoff.
pub const PREFETCH_ATTEMPT_ANNOTATION: &str = "konveyor.io/skill-prefetch-attempt";
/// The prefetch pod's container.
pub const PREFETCH_CONTAINER: &str = "prefetch";
/// Where the prefetch container mounts the image volumes: `/skills/<index>`.
const MOUNT_DIR: &str = "/skills";
/// What the container runs: the operator binary printing its version, which needs nothing
/// the image does not have and exits at once.
const NO_OP_ARGS: [&str; 1] = ["--version"];
/// How long a prefetch pod may take from its creation to its end before it counts as
/// failed: scheduling plus pulling every image of the set. It is also the pod's
/// `activeDeadlineSeconds`, so the kubelet stops it too.
pub const PREFETCH_DEADLINE: Duration = Duration::from_secs(600);
/// The wait before the first retry of a failed prefetch on a node; it doubles per attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(30);
/// The longest wait between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How many failed nodes the condition names; it counts the rest.
const NAMED_FAILURES: usize = 10;
/// Container waiting reasons that mean the kubelet cannot pull: reported as failures while
/// the kubelet retries with its own backoff, until the deadline ends the pod.
const PULL_FAILURES: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
];

/// Which nodes the operator prefetches skill images onto (`--skill-prefetch`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelection {
    /// Every node a run can land on.
    All,
    /// Those of them whose labels match.
    Matching(LabelSelector),
}

impl NodeSelection {
    /// Parses `--skill-prefetch`: `all`, `off` (`None`), or a label selector
    /// (`pool=agents`, `tier in (a,b)`, `!gpu`, comma-separated, all must hold).
    pub fn parse(value: &str) -> Result<Option<Self>, String> {
        match value.trim() {
            "all" => Ok(Some(Self::All)),
            "off" => Ok(None),
            selector => LabelSelector::parse(selector).map(|s| Some(Self::Matching(s))),
        }
    }

    fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::All => true,
            Self::Matching(selector) => selector.matches(labels),
        }
    }
}

/// A label selector in the syntax of `kubectl -l`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl LabelSelector {
    /// Parses `selector`; an error names the requirement it cannot read.
    pub fn parse(selector: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_requirements(selector) {
            let part = part.trim();
            let bad = || {
                format!(
                    "--skill-prefetch: cannot read {part:?} as a label requirement (key=value, key!=value, key in (a,b), key notin (a,b), key, !key), nor is the value all or off"
                )
            };
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::DoesNotExist(label_key(key).ok_or_else(bad)?)
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(label_key(key).ok_or_else(bad)?, value.trim().to_string())
            } else if let Some((key, value)) =
                part.split_once("==").or_else(|| part.split_once('='))
            {
                Requirement::Equals(label_key(key).ok_or_else(bad)?, value.trim().to_string())
            } else if let Some((key, values)) = part.split_once(" notin ") {
                Requirement::NotIn(
                    label_key(key).ok_or_else(bad)?,
                    value_set(values).ok_or_else(bad)?,
                )
            } else if let Some((key, values)) = part.split_once(" in ") {
                Requirement::In(
                    label_key(key).ok_or_else(bad)?,
                    value_set(values).ok_or_else(bad)?,
                )
            } else {
                Requirement::Exists(label_key(part).ok_or_else(bad)?)
            };
            requirements.push(requirement);
        }
        if requirements.is_empty() {
            return Err("--skill-prefetch: empty; give all, off or a label selector".to_string());
        }
        Ok(Self(requirements))
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => labels.get(key) == Some(value),
            Requirement::NotEquals(key, value) => labels.get(key) != Some(value),
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => !labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        })
    }
}

/// The comma-separated parts of a selector, commas inside `( )` kept.
fn split_requirements(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (index, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&selector[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// A label key as written, or `None` when it is empty or holds a character no key has.
fn label_key(key: &str) -> Option<String> {
    let key = key.trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    valid.then(|| key.to_string())
}

/// `(a, b)` as a set.
fn value_set(values: &str) -> Option<BTreeSet<String>> {
    let inner = values.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

/// How the operator prefetches, from its command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefetchSettings {
    /// The nodes it prefetches onto.
    pub nodes: NodeSelection,
    /// The operator's own image (`--operator-image`), which the pods run.
    pub image: String,
    /// A PriorityClass for the pods (`--skill-prefetch-priority-class`); none: the default.
    pub priority_class: Option<String>,
    /// The most nodes one Agent prefetches onto at once.
    pub per_agent: usize,
    /// The most prefetch pods in flight in the whole cluster at once.
    pub per_cluster: usize,
}

/// The image skills of an Agent, as its runs mount them: the digest set to prefetch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillImages {
    /// The references pinned by digest, sorted, each once (a run mounts one volume per
    /// reference).
    references: Vec<String>,
    /// The pull secrets of the skills that bring them, sorted, each once.
    pull_secrets: Vec<String>,
}

impl SkillImages {
    /// The images of `skills` (inline and git skills have none).
    pub fn of(skills: &[MountedSkill]) -> Self {
        let mut references = BTreeSet::new();
        let mut pull_secrets = BTreeSet::new();
        for skill in skills {
            if let SkillSource::Image { reference } = &skill.source {
                references.insert(reference.clone());
                pull_secrets.extend(skill.pull_secrets.iter().cloned());
            }
        }
        Self {
            references: references.into_iter().collect(),
            pull_secrets: pull_secrets.into_iter().collect(),
        }
    }

    /// Whether there is nothing to prefetch.
    pub fn is_empty(&self) -> bool {
        self.references.is_empty()
    }

    /// The digest set's name: a hash of its references, a label value.
    pub fn set_hash(&self) -> String {
        short_hash(&self.references.join("\n"))
    }
}

/// The Agent the pods are for.
#[derive(Clone, Debug)]
pub struct PrefetchOwner<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The controller ownerReference to the Agent.
    pub owner: OwnerReference,
}

/// A prefetch pod as read: its metadata and status (the cache keeps no spec).
#[derive(Clone, Copy, Debug)]
pub struct ObservedPod<'a> {
    pub metadata: &'a ObjectMeta,
    pub status: Option<&'a PodStatus>,
}

/// What an Agent's prefetch pass does, and what it found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrefetchPlan {
    /// The pods to delete, by name, before the creations: a replaced pod keeps its name.
    pub delete: Vec<String>,
    /// The pods to create.
    pub create: Vec<Pod>,
    /// How far the prefetch is; `None` when the Agent has nothing to prefetch.
    pub report: Option<PrefetchReport>,
    /// When to look again without a watch event: a pod's deadline or a retry's backoff.
    pub recheck: Option<Duration>,
}

/// How far an Agent's prefetch is, for its `SkillsPrefetched` condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefetchReport {
    /// How many images the set holds.
    pub images: usize,
    /// The nodes selected.
    pub selected: usize,
    /// Those that hold the set.
    pub holding: usize,
    /// Those with a pod pulling now.
    pub pulling: usize,
    /// Those waiting for a slot under the caps.
    pub queued: usize,
    /// Those whose last attempt failed, each with why, sorted by node.
    pub failed: Vec<(String, String)>,
}

impl PrefetchReport {
    /// The `SkillsPrefetched` condition: True once every selected node holds the set;
    /// otherwise False, with how many do and which failed. Never a reason for the Agent not
    /// to be Ready: a run on a node without the images pulls them itself.
    pub fn condition(&self) -> (ConditionStatus, AgentReason, String) {
        let held = format!(
            "{} of {} selected node(s) hold the {} skill image(s)",
            self.holding, self.selected, self.images
        );
        if self.selected == 0 {
            return (
                ConditionStatus::False,
                AgentReason::NoPrefetchNodes,
                "no node is selected for prefetch: none is schedulable, Ready and untainted and matches --skill-prefetch".to_string(),
            );
        }
        if !self.failed.is_empty() {
            let mut named: Vec<String> = self
                .failed
                .iter()
                .take(NAMED_FAILURES)
                .map(|(node, why)| format!("{node} ({why})"))
                .collect();
            if self.failed.len() > NAMED_FAILURES {
                named.push(format!("and {} more", self.failed.len() - NAMED_FAILURES));
            }
            return (
                ConditionStatus::False,
                AgentReason::SkillPrefetchFailed,
                format!("{held}; failed on {}", named.join(", ")),
            );
        }
        if self.holding == self.selected {
            return (ConditionStatus::True, AgentReason::SkillImagesPresent, held);
        }
        (
            ConditionStatus::False,
            AgentReason::SkillPrefetchInProgress,
            format!(
                "{held}; pulling on {}, {} waiting",
                self.pulling, self.queued
            ),
        )
    }
}

/// Whether a run of an Agent can land on `node`, as the sandbox pod is built (no node
/// selector, affinity or tolerations): schedulable, Ready, not being deleted and without a
/// `NoSchedule` or `NoExecute` taint.
pub fn runs_can_land(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = spec.and_then(|s| s.taints.as_ref()).is_some_and(|t| {
        t.iter()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
    });
    ready
        && !tainted
        && spec.and_then(|s| s.unschedulable) != Some(true)
        && node.metadata.deletion_timestamp.is_none()
}

/// The names of the nodes prefetch goes to: those runs can land on that `selection`
/// selects, sorted.
pub fn selected_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    selection: &NodeSelection,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let mut names: Vec<String> = nodes
        .into_iter()
        .filter(|node| runs_can_land(node))
        .filter(|node| selection.selects(node.metadata.labels.as_ref().unwrap_or(&empty)))
        .filter_map(|node| node.metadata.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Where one prefetch pod is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodProgress {
    /// Not finished yet, within its deadline.
    Pulling,
    /// Its container ran: the node holds the set.
    Succeeded,
    /// It failed, or is past its deadline; why, and since when (seconds since the epoch).
    Failed { why: String, since: i64 },
}

/// Where the prefetch pod `pod` is at `now`.
pub fn pod_progress(pod: ObservedPod<'_>, now: &Time) -> PodProgress {
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now.0.as_second(), |t| t.0.as_second());
    let deadline = deadline_of(pod, now);
    let status = pod.status;
    let state = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == PREFETCH_CONTAINER))
        .and_then(|c| c.state.as_ref());
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => PodProgress::Succeeded,
        Some("Failed") => {
            let terminated = state.and_then(|s| s.terminated.as_ref());
            let why = status
                .and_then(|s| s.message.clone().or_else(|| s.reason.clone()))
                .or_else(|| {
                    terminated.map(|t| {
                        t.message
                            .clone()
                            .or_else(|| t.reason.clone())
                            .unwrap_or_else(|| format!("exit code {}", t.exit_code))
                    })
                })
                .unwrap_or_else(|| "the pod failed".to_string());
            let since = terminated
                .and_then(|t| t.finished_at.as_ref())
                .map_or(created, |t| t.0.as_second());
            PodProgress::Failed { why, since }
        }
        _ if now.0.as_second() >= deadline => PodProgress::Failed {
            why: format!(
                "did not finish within {} s{}",
                PREFETCH_DEADLINE.as_secs(),
                pull_failure(state)
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ),
            since: deadline,
        },
        _ => match pull_failure(state) {
            Some(why) => PodProgress::Failed {
                why,
                since: now.0.as_second(),
            },
            None => PodProgress::Pulling,
        },
    }
}

/// Why the kubelet cannot pull, from a container's waiting state, if that is the reason.
fn pull_failure(state: Option<&ContainerState>) -> Option<String> {
    let waiting = state?.waiting.as_ref()?;
    let reason = waiting.reason.as_deref()?;
    PULL_FAILURES
        .contains(&reason)
        .then(|| match &waiting.message {
            Some(message) => format!("{reason}: {message}"),
            None => reason.to_string(),
        })
}

/// How long a prefetch pod took to pull, for the metric: from its creation to its
/// container's start (the kubelet starts it once every image volume is pulled and mounted).
/// `None` before it started.
pub fn pull_seconds(pod: ObservedPod<'_>) -> Option<i64> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0.as_second();
    let state = pod
        .status?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == PREFETCH_CONTAINER)?
        .state
        .as_ref()?;
    let started = state
        .terminated
        .as_ref()
        .and_then(|t| t.started_at.as_ref())
        .or_else(|| state.running.as_ref().and_then(|r| r.started_at.as_ref()))?;
    Some(started.0.as_second().saturating_sub(created).max(0))
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// The wait after the `attempt`th failure: [`FIRST_BACKOFF`] doubled per earlier attempt, at
/// most [`MAX_BACKOFF`].
pub fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

/// The attempt a prefetch pod records; 1 when it records none.
fn attempt_of(metadata: &ObjectMeta) -> u32 {
    metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PREFETCH_ATTEMPT_ANNOTATION))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1)
}

/// Decides an Agent's prefetch pass: for each selected node (sorted), keep the pod of the
/// current set, create it when missing and the caps allow (`per_agent` pods of this Agent
/// pulling at once, `per_cluster` in the cluster, `cluster_pulling` of which are pulling
/// now, this Agent's among them), replace a failed one once its backoff has passed; delete
/// every other pod of the Agent (another set, a node no longer selected). With no `images`
/// (the Agent is not Ready, or has no image skills) every pod goes and nothing is reported.
pub fn plan_prefetch(
    settings: &PrefetchSettings,
    owner: &PrefetchOwner<'_>,
    images: &SkillImages,
    nodes: &[String],
    pods: &[ObservedPod<'_>],
    cluster_pulling: usize,
    now: &Time,
) -> PrefetchPlan {
    let mut plan = PrefetchPlan::default();
    let set = images.set_hash();
    let wanted: BTreeMap<String, &String> = if images.is_empty() {
        BTreeMap::new()
    } else {
        nodes
            .iter()
            .map(|node| (prefetch_pod_name(owner.name, node, &set), node))
            .collect()
    };
    let mut found: BTreeMap<&String, ObservedPod<'_>> = BTreeMap::new();
    for pod in pods {
        let Some(name) = pod.metadata.name.as_ref() else {
            continue;
        };
        if wanted.contains_key(name) {
            found.insert(name, *pod);
        } else {
            plan.delete.push(name.clone());
        }
    }
    if images.is_empty() {
        return plan;
    }
    let mut report = PrefetchReport {
        images: images.references.len(),
        selected: nodes.len(),
        ..PrefetchReport::default()
    };
    let mut rechecks = Vec::new();
    // (node, attempt) of the pods to create once the pulling ones are counted.
    let mut to_start: Vec<(&String, u32)> = Vec::new();
    for (name, node) in &wanted {
        let Some(pod) = found.get(name) else {
            to_start.push((node, 1));
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            // Replaced by an earlier pass; its successor comes once it is gone.
            report.queued += 1;
            continue;
        }
        match pod_progress(*pod, now) {
            PodProgress::Succeeded => report.holding += 1,
            PodProgress::Pulling => {
                report.pulling += 1;
                rechecks.push(deadline_of(*pod, now));
            }
            PodProgress::Failed { why, since } => {
                report.failed.push(((*node).clone(), why));
                let failed = pod.status.and_then(|s| s.phase.as_deref()) == Some("Failed");
                if !failed && now.0.as_second() < deadline_of(*pod, now) {
                    // The kubelet is still retrying its pull; the deadline ends it.
                    report.pulling += 1;
                    rechecks.push(deadline_of(*pod, now));
                    continue;
                }
                let attempt = attempt_of(pod.metadata);
                let retry_at = since.saturating_add(seconds(backoff(attempt)));
                if now.0.as_second() >= retry_at {
                    to_start.push((node, attempt.saturating_add(1)));
                } else {
                    rechecks.push(retry_at);
                }
            }
        }
    }
    let agent_slots = settings.per_agent.saturating_sub(report.pulling);
    let cluster_slots = settings.per_cluster.saturating_sub(cluster_pulling);
    let slots = agent_slots.min(cluster_slots);
    for (index, (node, attempt)) in to_start.into_iter().enumerate() {
        if index >= slots {
            report.queued += 1;
            continue;
        }
        let name = prefetch_pod_name(owner.name, node, &set);
        if attempt > 1 {
            plan.delete.push(name.clone());
            // Counted as pulling again: its failure is history once it is replaced.
            report.failed.retain(|(failed, _)| failed != node);
        }
        report.pulling += 1;
        rechecks.push(now.0.as_second().saturating_add(seconds(PREFETCH_DEADLINE)));
        plan.create.push(build_prefetch_pod(
            settings, owner, images, &set, node, name, attempt,
        ));
    }
    // A queued node waits for a slot: a pod ending frees one and wakes the Agent, but one
    // under the cluster's cap may be another Agent's, so look again after the first backoff.
    if report.queued > 0 {
        rechecks.push(now.0.as_second().saturating_add(seconds(FIRST_BACKOFF)));
    }
    plan.recheck = rechecks.into_iter().min().map(|at| {
        let wait = at.saturating_sub(now.0.as_second()).max(1);
        Duration::from_secs(u64::try_from(wait).unwrap_or(1))
    });
    plan.report = Some(report);
    plan
}

fn deadline_of(pod: ObservedPod<'_>, now: &Time) -> i64 {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map_or(now.0.as_second(), |t| t.0.as_second())
        .saturating_add(seconds(PREFETCH_DEADLINE))
}

/// The prefetch pod for `node`: the Agent's image volumes with its skills' pull secrets, one
/// container from the operator's image that prints its version, restricted Pod Security, no
/// service-account token, small requests, the configured PriorityClass, pinned to the node
/// by node affinity.
pub fn build_prefetch_pod(
    settings: &PrefetchSettings,
    owner: &PrefetchOwner<'_>,
    images: &SkillImages,
    set: &str,
    node: &str,
    name: String,
    attempt: u32,
) -> Pod {
    let volumes: Vec<Volume> = images
        .references
        .iter()
        .enumerate()
        .map(|(index, reference)| Volume {
            name: format!("skill-{index}"),
            image: Some(ImageVolumeSource {
                reference: Some(reference.clone()),
                pull_policy: Some("IfNotPresent".to_string()),
            }),
            ..Default::default()
        })
        .collect();
    let mounts = volumes
        .iter()
        .enumerate()
        .map(|(index, volume)| VolumeMount {
            name: volume.name.clone(),
            mount_path: format!("{MOUNT_DIR}/{index}"),
            read_only: Some(true),
            ..Default::default()
        })
        .collect();
    let quantity = |q: &str| Quantity(q.to_string());
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(owner.namespace.to_string()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
                (PREFETCH_LABEL.to_string(), label_value(owner.name)),
                (PREFETCH_SET_LABEL.to_string(), set.to_string()),
            ])),
            annotations: Some(BTreeMap::from([
                (PREFETCH_NODE_ANNOTATION.to_string(), node.to_string()),
                (PREFETCH_ATTEMPT_ANNOTATION.to_string(), attempt.to_string()),
            ])),
            owner_references: Some(vec![owner.owner.clone()]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_fields: Some(vec![NodeSelectorRequirement {
                                key: "metadata.name".to_string(),
                                operator: "In".to_string(),
                                values: Some(vec![node.to_string()]),
                            }]),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: PREFETCH_CONTAINER.to_string(),
                image: Some(settings.image.clone()),
                args: Some(NO_OP_ARGS.iter().map(|a| (*a).to_string()).collect()),
                volume_mounts: Some(mounts),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), quantity("10m")),
                        ("memory".to_string(), quantity("16Mi")),
                    ])),
                    limits: Some(BTreeMap::from([("memory".to_string(), quantity("32Mi"))])),
                    ..Default::default()
                }),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".to_string()]),
                        ..Default::default()
                    }),
                    read_only_root_filesystem: Some(true),
                    run_as_non_root: Some(true),
                    ..Default::default()
                }),
                termination_message_policy: Some("FallbackToLogsOnError".to_string()),
                ..Default::default()
            }],
            volumes: Some(volumes),
            image_pull_secrets: (!images.pull_secrets.is_empty()).then(|| {
                images
                    .pull_secrets
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect()
            }),
            restart_policy: Some("Never".to_string()),
            active_deadline_seconds: Some(seconds(PREFETCH_DEADLINE)),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(0),
            priority_class_name: settings.priority_class.clone(),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;
