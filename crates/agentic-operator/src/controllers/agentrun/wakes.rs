//! What wakes an AgentRun: the mappers of its controller's watches, from a changed Agent,
//! Secret, run, trust policy, pod or Sandbox to the runs it concerns. Each asks an index of
//! the run cache kept as the watch changes ([`RunIndexes`]), or of the pod cache
//! ([`ProxiedPods`]), never a scan of a cache: the objects a mapper visits are the runs it
//! may wake, however many finished runs are cached (with 30,000 runs cached, a scan per
//! event stalled a restarted operator for minutes).

use std::sync::Arc;

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, CONDITION_READY, ClusterSkillTrustPolicy, SkillTrustPolicy,
    TrustPolicy,
};
use agentic_core::conditions::find_condition;
use agentic_core::names::sandbox_name;
use agentic_core::owners::{controlling_run, controlling_sandbox};
use agentic_core::reasons::AgentRunReason;
use agentic_core::sandbox::{FileSourceKind, credential_secret, file_mount_source};
use agentic_core::trust::may_cancel;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::super::support::{MEMBERS, cached, cached_named, guard_ref, member_if, related};
use super::super::watches::{SharedWatch, Subscriptions};
use crate::caches::{Guarded, Index, SandboxPod, SecretMeta, valid};

/// A run the AgentRun controller reconciles.
type RunKey = ObjectRef<Guarded<AgentRun>>;

/// The indexes of the run cache the mappers ask. Only unfinished runs are in any of them.
pub(in crate::controllers) struct RunIndexes {
    waiting_on_agent: Index<AgentRun>,
    waiting_on_secret: Index<AgentRun>,
    queued: Index<AgentRun>,
    live: Index<AgentRun>,
    by_sandbox: Index<AgentRun>,
}

impl RunIndexes {
    /// The indexes, kept up to date by the runs' watch.
    pub fn kept_by(runs: &Subscriptions<Guarded<AgentRun>>) -> Self {
        Self {
            waiting_on_agent: runs.index(waiting_on_agent),
            waiting_on_secret: runs.index(waiting_on_secret),
            queued: runs.index(queued),
            live: runs.index(live),
            by_sandbox: runs.index(sandbox_of),
        }
    }

    /// The indexes of exactly `runs`, as a watch that has listed them keeps them.
    #[cfg(test)]
    pub fn of(runs: &[Arc<Guarded<AgentRun>>]) -> Self {
        let indexes = Self {
            waiting_on_agent: Index::new(waiting_on_agent),
            waiting_on_secret: Index::new(waiting_on_secret),
            queued: Index::new(queued),
            live: Index::new(live),
            by_sandbox: Index::new(sandbox_of),
        };
        for index in indexes.all() {
            index.relisted(runs);
        }
        indexes
    }

    #[cfg(test)]
    fn all(&self) -> [&Index<AgentRun>; 5] {
        [
            &self.waiting_on_agent,
            &self.waiting_on_secret,
            &self.queued,
            &self.live,
            &self.by_sandbox,
        ]
    }

    /// How many runs the lookups have visited, over every index.
    #[cfg(test)]
    pub fn visited(&self) -> usize {
        self.all().iter().map(|index| index.visited()).sum()
    }
}

/// The live sandbox pods whose credential proxy mounts a Secret, by that Secret's name
/// ([`proxied_secret`]), and the pod cache they are read back from.
pub(in crate::controllers) struct ProxiedPods {
    pods: Store<SandboxPod>,
    by_secret: Index<SandboxPod>,
}

impl ProxiedPods {
    /// The index, kept up to date by the pods' watch.
    pub fn kept_by(pods: &SharedWatch<SandboxPod>) -> Self {
        let subscriptions = pods.subscriptions();
        Self {
            pods: subscriptions.store(),
            by_secret: subscriptions.index(proxied_secret),
        }
    }

    /// The live pods of `namespace` whose proxy mounts the Secret `secret`.
    fn mounting(&self, namespace: &str, secret: &str) -> Vec<Arc<SandboxPod>> {
        self.by_secret
            .get(namespace, secret)
            .into_iter()
            .filter_map(|pod| self.pods.get(&ObjectRef::new(&pod).within(namespace)))
            .collect()
    }
}

/// The mappers of the AgentRun controller's watches.
pub(in crate::controllers) struct Wakes {
    runs: Store<Guarded<AgentRun>>,
    indexes: RunIndexes,
    proxied: ProxiedPods,
    /// Whether runs queue on their namespace (a namespace cap) rather than their Agent.
    namespace_cap: bool,
}

impl Wakes {
    pub fn new(
        runs: Store<Guarded<AgentRun>>,
        indexes: RunIndexes,
        proxied: ProxiedPods,
        namespace_cap: bool,
    ) -> Self {
        Self {
            runs,
            indexes,
            proxied,
            namespace_cap,
        }
    }

    /// The mapper of a watch of `C`s: `wake` on each changed object.
    pub fn on<C: 'static>(
        wakes: &Arc<Self>,
        wake: fn(&Self, &C) -> Vec<RunKey>,
    ) -> impl Fn(Arc<C>) -> Vec<RunKey> + Send + Sync + 'static {
        let wakes = Arc::clone(wakes);
        move |changed| wake(&wakes, changed.as_ref())
    }

    /// An Agent created, changed or deleted: the runs waiting to start on it.
    pub fn agent_changed(&self, agent: &Guarded<Agent>) -> Vec<RunKey> {
        related(
            &self.runs,
            agent,
            |ns, name| self.indexes.waiting_on_agent.get(ns, name),
            |runs, ns, name| runs_waiting_on_agent(runs, ns, name),
        )
    }

    /// A Secret created, changed or deleted: the runs waiting to start whose file mounts
    /// read it, and the live runs whose credential proxy mounts it (their pass tells their
    /// pod's kubelet, which then rewrites the Secret's volume at once).
    pub fn secret_changed(&self, secret: &SecretMeta) -> Vec<RunKey> {
        let mut woken = related(
            &self.runs,
            secret,
            |ns, name| self.indexes.waiting_on_secret.get(ns, name),
            |runs, ns, name| runs_waiting_on_secret(runs, ns, name),
        );
        let namespace = secret.namespace().unwrap_or_default();
        for pod in self.proxied.mounting(&namespace, &secret.name_any()) {
            woken.extend(self.pod_changed(&pod));
        }
        woken
    }

    /// A run changed by a watch event (not listed): when it has finished, the runs queued
    /// behind it, for the slot it frees. No other change of a run frees one; nor does a
    /// listed run, finished or not: after a (re)list every run gets its own pass anyway.
    pub fn run_changed(&self, run: &Guarded<AgentRun>) -> Vec<RunKey> {
        match &run.0 {
            Ok(run) if is_finished(run) => self.queued_behind(run),
            _ => Vec::new(),
        }
    }

    /// A run deleted: the runs queued behind it.
    pub fn run_deleted(&self, run: &Guarded<AgentRun>) -> Vec<RunKey> {
        match &run.0 {
            Ok(run) => self.queued_behind(run),
            Err(_) => Vec::new(),
        }
    }

    /// The runs queued on `run`'s Agent, or on its namespace under the namespace cap.
    fn queued_behind(&self, run: &AgentRun) -> Vec<RunKey> {
        let agent = (!self.namespace_cap).then_some(run.spec.agent_ref.as_str());
        related(
            &self.runs,
            run,
            |ns, _| self.indexes.queued.get(ns, agent.unwrap_or(MEMBERS)),
            |runs, ns, _| runs_queued(runs, ns, agent),
        )
    }

    /// A cluster trust policy changed: the live runs of every namespace it may cancel.
    pub fn cluster_policy_changed(&self, policy: &Guarded<ClusterSkillTrustPolicy>) -> Vec<RunKey> {
        match &policy.0 {
            Ok(policy) => {
                runs_a_policy_may_cancel(&self.runs, &self.indexes.live, &policy.spec.policy, None)
            }
            Err(_) => Vec::new(),
        }
    }

    /// A namespace's trust policy changed: the live runs of its namespace it may cancel.
    pub fn policy_changed(&self, policy: &Guarded<SkillTrustPolicy>) -> Vec<RunKey> {
        match &policy.0 {
            Ok(policy) => runs_a_policy_may_cancel(
                &self.runs,
                &self.indexes.live,
                &policy.spec.policy,
                Some(policy.metadata.namespace.as_deref().unwrap_or_default()),
            ),
            Err(_) => Vec::new(),
        }
    }

    /// A sandbox pod changed: its run. A pod of the `pod` backend names its run as its
    /// controller; one of agent-sandbox names its Sandbox, whose run the index finds by the
    /// Sandbox's name.
    pub fn pod_changed(&self, pod: &SandboxPod) -> Vec<RunKey> {
        if let (Some(run), Some(namespace)) = (controlling_run(pod.meta()), &pod.metadata.namespace)
        {
            return vec![guard_ref(ObjectRef::new(run).within(namespace))];
        }
        let Some(sandbox) = controlling_sandbox(pod.meta()) else {
            return Vec::new();
        };
        related(
            &self.runs,
            pod,
            |ns, _| self.indexes.by_sandbox.get(ns, sandbox),
            |runs, ns, _| runs_of_pod(runs, ns, pod.meta()),
        )
    }
}

/// A Sandbox changed: the AgentRuns that own it (its controller reference names one).
pub(in crate::controllers) fn sandbox_changed(sandbox: Arc<DynamicObject>) -> Vec<RunKey> {
    owning_runs(sandbox.meta())
}

/// The AgentRuns that own `sandbox` (its controller reference names one), as keys of the
/// guarded runs the AgentRun controller reconciles.
fn owning_runs(sandbox: &ObjectMeta) -> Vec<RunKey> {
    let Some(namespace) = &sandbox.namespace else {
        return Vec::new();
    };
    let api_version = AgentRun::api_version(&());
    let kind = AgentRun::kind(&());
    sandbox
        .owner_references
        .iter()
        .flatten()
        .filter(|owner| owner.api_version == api_version && owner.kind == kind)
        .map(|owner| ObjectRef::new(&owner.name).within(namespace))
        .collect()
}

/// The runs waiting to start on the Agent `name` in `namespace`: every run of it without a
/// sandbox yet, whatever it waits for (the Agent to exist or turn Ready, a slot).
pub fn runs_waiting_on_agent<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<AgentRun>> {
    unstarted_in(runs, namespace, |r| r.spec.agent_ref == name)
}

/// The runs in `namespace` without a sandbox yet that `waits_on` picks.
fn unstarted_in<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    namespace: &str,
    waits_on: impl Fn(&AgentRun) -> bool,
) -> Vec<ObjectRef<AgentRun>> {
    runs.into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .filter(|r| unstarted(r))
        .filter(|r| waits_on(r))
        .map(ObjectRef::from_obj)
        .collect()
}

/// The runs in `namespace` not started yet whose file mounts read the Secret `name`: a
/// run waiting for that Secret starts once it appears.
pub fn runs_waiting_on_secret<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<AgentRun>> {
    unstarted_in(runs, namespace, |r| {
        r.spec.file_mounts.iter().any(|mount| {
            file_mount_source(mount)
                .is_some_and(|(kind, source)| kind == FileSourceKind::Secret && source == name)
        })
    })
}

/// The runs a change to the trust policy `policy` may cancel: none unless it may cancel at
/// all ([`may_cancel`]: a change that leaves a policy without `Cancel` or without
/// revocations cannot make a run cancelled), else the runs with a sandbox that have not
/// finished, in `namespace` (`None`: every namespace, for a cluster policy). Runs without a
/// sandbox mount nothing yet; the revoked card keeps them from starting.
pub(in crate::controllers) fn runs_a_policy_may_cancel(
    runs: &Store<Guarded<AgentRun>>,
    live: &Index<AgentRun>,
    policy: &TrustPolicy,
    namespace: Option<&str>,
) -> Vec<RunKey> {
    if !may_cancel(policy) {
        return Vec::new();
    }
    let candidates = match namespace {
        Some(namespace) => cached(runs, namespace, live.get(namespace, MEMBERS)),
        None => cached_named(runs, live.everywhere(MEMBERS)),
    };
    valid(&candidates)
        .into_iter()
        .filter(|r| namespace.is_none_or(|ns| r.namespace().as_deref() == Some(ns)))
        .filter(|r| is_live(r))
        .map(|r| guard_ref(ObjectRef::from_obj(r)))
        .collect()
}

/// The keys of the index of runs waiting to start by the Agent they wait on.
fn waiting_on_agent(run: &AgentRun) -> Vec<String> {
    if unstarted(run) {
        vec![run.spec.agent_ref.clone()]
    } else {
        Vec::new()
    }
}

/// The keys of the index of runs waiting to start by the Secrets their file mounts read.
fn waiting_on_secret(run: &AgentRun) -> Vec<String> {
    if !unstarted(run) {
        return Vec::new();
    }
    run.spec
        .file_mounts
        .iter()
        .filter_map(file_mount_source)
        .filter(|(kind, _)| *kind == FileSourceKind::Secret)
        .map(|(_, source)| source.to_string())
        .collect()
}

/// The keys of the index of queued runs: their Agent's name, and [`MEMBERS`] for the
/// namespace's queue under a namespace cap.
fn queued(run: &AgentRun) -> Vec<String> {
    if is_queued(run) {
        vec![run.spec.agent_ref.clone(), MEMBERS.to_string()]
    } else {
        Vec::new()
    }
}

/// The keys of the index of live runs ([`is_live`]).
pub(in crate::controllers) fn live(run: &AgentRun) -> Vec<String> {
    member_if(is_live(run))
}

/// The keys of the index of live sandbox pods by the Secret their credential proxy mounts
/// (its annotation, the cache keeping no spec): none for a pod that has ended or is going,
/// whose volumes no kubelet updates any more.
fn proxied_secret(pod: &SandboxPod) -> Vec<String> {
    credential_secret(&pod.metadata, pod.status.as_ref())
        .map(str::to_string)
        .into_iter()
        .collect()
}

/// The keys of the index of unfinished runs by their sandbox's name: a finished run no
/// longer follows its pods.
fn sandbox_of(run: &AgentRun) -> Vec<String> {
    if is_finished(run) {
        Vec::new()
    } else {
        vec![sandbox_name(&run.name_any())]
    }
}

/// Whether the run has a sandbox and has not finished: what a revocation may cancel.
fn is_live(run: &AgentRun) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| s.sandbox_name.is_some())
        && !is_finished(run)
}

/// Whether the run has not finished and has no sandbox yet: what an Agent, a Secret or a
/// free slot may start.
fn unstarted(run: &AgentRun) -> bool {
    run.status.as_ref().is_none_or(|s| s.sandbox_name.is_none()) && !is_finished(run)
}

/// Whether the run waits for a slot under a cap (reason `Queued`, no sandbox yet).
fn is_queued(run: &AgentRun) -> bool {
    run.status.as_ref().is_some_and(|s| {
        s.sandbox_name.is_none()
            && find_condition(&s.conditions, CONDITION_READY)
                .is_some_and(|c| c.reason == AgentRunReason::Queued.as_str())
    })
}

/// Whether the run has finished (its phase is `Succeeded` or `Failed`), and so no longer
/// holds a slot under a cap.
pub fn is_finished(run: &AgentRun) -> bool {
    run.status
        .as_ref()
        .and_then(|status| status.phase)
        .is_some_and(AgentRunPhase::is_finished)
}

/// The runs in `namespace` queued for a slot (reason `Queued`), of the Agent `agent` or
/// (`None`) of any: what a run that finishes or goes may let start. No other run needs
/// waking then, and waking every run without a sandbox on each run event made a burst of N
/// runs cost N² passes.
pub fn runs_queued<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    namespace: &str,
    agent: Option<&str>,
) -> Vec<ObjectRef<AgentRun>> {
    runs.into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .filter(|r| agent.is_none_or(|name| r.spec.agent_ref == name))
        .filter(|r| is_queued(r))
        .map(ObjectRef::from_obj)
        .collect()
}

/// The run a sandbox pod in `namespace` belongs to, by ownerReference: the run controlling
/// it (the `pod` backend), or the run of the Sandbox controlling it (agent-sandbox). Never
/// by its run label, whose value is shortened for run names over 63 characters.
pub fn runs_of_pod<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    namespace: &str,
    pod: &ObjectMeta,
) -> Vec<ObjectRef<AgentRun>> {
    if let Some(run) = controlling_run(pod) {
        return vec![ObjectRef::new(run).within(namespace)];
    }
    let Some(sandbox) = controlling_sandbox(pod) else {
        return Vec::new();
    };
    runs.into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .filter(|r| sandbox_name(&r.name_any()) == sandbox)
        .map(ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::scenario::{NS, listed_writer, object, store_of};
    use agentic_core::sandbox::{CREDENTIAL_SECRET_ANNOTATION, SANDBOX_API_VERSION, SANDBOX_KIND};
    use serde_json::{Value, json};

    fn run(name: &str, spec: Value, status: Value) -> AgentRun {
        object(json!({"metadata": {"name": name}, "spec": spec, "status": status}))
    }

    fn finished(name: &str) -> AgentRun {
        run(
            name,
            json!({"agentRef": "coder"}),
            json!({"phase": "Succeeded", "sandboxName": sandbox_name(name)}),
        )
    }

    /// The runs that something may wake, whatever else is cached.
    fn wakeable() -> Vec<AgentRun> {
        vec![
            run("waiting", json!({"agentRef": "coder"}), Value::Null),
            run(
                "mounting",
                json!({"agentRef": "coder", "fileMounts": [
                    {"mountPath": "/creds", "secretName": "creds"}
                ]}),
                Value::Null,
            ),
            run(
                "queued",
                json!({"agentRef": "coder"}),
                json!({"phase": "Pending", "conditions": [{
                    "type": "Ready", "status": "False", "reason": "Queued", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"
                }]}),
            ),
            run(
                "live",
                json!({"agentRef": "coder"}),
                json!({"phase": "Running", "sandboxName": sandbox_name("live")}),
            ),
            run(
                "proxied",
                json!({"agentRef": "coder"}),
                json!({"phase": "Running", "sandboxName": sandbox_name("proxied")}),
            ),
        ]
    }

    /// The pod of the `pod` backend of the run `run`, in `phase`, its proxy mounting `secret`.
    fn run_pod(run: &str, phase: &str, secret: Option<&str>) -> SandboxPod {
        let annotations = secret.map(|s| json!({CREDENTIAL_SECRET_ANNOTATION: s}));
        serde_json::from_value(json!({
            "metadata": {
                "name": sandbox_name(run),
                "namespace": NS,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "name": run,
                    "uid": "u", "controller": true
                }]
            },
            "status": {"phase": phase},
        }))
        .expect("a pod")
    }

    fn pod_of_sandbox(sandbox: &str) -> SandboxPod {
        SandboxPod {
            metadata: serde_json::from_value(json!({
                "name": format!("{sandbox}-pod"),
                "namespace": NS,
                "ownerReferences": [{
                    "apiVersion": SANDBOX_API_VERSION, "kind": SANDBOX_KIND, "name": sandbox,
                    "uid": "u", "controller": true
                }]
            }))
            .expect("metadata"),
            status: None,
        }
    }

    fn names(keys: Vec<RunKey>) -> Vec<String> {
        let mut names: Vec<String> = keys.into_iter().map(|key| key.name).collect();
        names.sort();
        names
    }

    /// Every mapper over a cache of `finished` finished runs beside [`wakeable`], each with
    /// a pod whose proxy mounted the Secret `creds`: what each woke, and how many runs and
    /// pods the lookups visited in all.
    fn wake_all(finished_runs: usize, namespace_cap: bool) -> (Vec<Vec<String>>, usize) {
        let mut runs = wakeable();
        let mut pods = vec![
            run_pod("live", "Running", None),
            run_pod("proxied", "Running", Some("creds")),
        ];
        for i in 0..finished_runs {
            let name = format!("done-{i}");
            pods.push(run_pod(&name, "Succeeded", Some("creds")));
            runs.push(finished(&name));
        }
        let store = store_of(runs);
        let indexes = RunIndexes::of(&store.state());
        let pods = listed_writer(pods).as_reader();
        let by_secret = Index::new(proxied_secret);
        by_secret.relisted(&pods.state());
        let proxied = ProxiedPods { pods, by_secret };
        let wakes = Wakes::new(store, indexes, proxied, namespace_cap);
        let agent: Agent =
            object(json!({"metadata": {"name": "coder"}, "spec": {"image": "harness:1"}}));
        let secret: SecretMeta =
            serde_json::from_value(json!({"metadata": {"name": "creds", "namespace": NS}}))
                .expect("metadata");
        let cancelling: ClusterSkillTrustPolicy = object(json!({
            "metadata": {"name": "p"},
            "spec": {"action": "Cancel", "revoked": {"digests": ["sha256:ab"]}}
        }));
        let done = Guarded(Ok(finished("done-0")));
        let woken = vec![
            wakes.agent_changed(&Guarded(Ok(agent))),
            wakes.secret_changed(&secret),
            wakes.run_changed(&done),
            wakes.run_deleted(&done),
            wakes.cluster_policy_changed(&Guarded(Ok(cancelling))),
            wakes.pod_changed(&pod_of_sandbox(&sandbox_name("live"))),
        ];
        (
            woken.into_iter().map(names).collect(),
            wakes.indexes.visited() + wakes.proxied.by_secret.visited(),
        )
    }

    #[test]
    fn each_mapper_wakes_the_runs_it_concerns() {
        let (woken, _) = wake_all(3, false);
        assert_eq!(
            woken,
            [
                vec!["mounting", "queued", "waiting"],
                vec!["mounting", "proxied"],
                vec!["queued"],
                vec!["queued"],
                vec!["live", "proxied"],
                vec!["live"],
            ]
        );
    }

    /// With 100 times more finished runs cached, the mappers visit exactly as many runs: the
    /// work of an event does not grow with the cache (it did: a scan per event made the list
    /// after a restart over 30,000 runs cost minutes).
    #[test]
    fn what_a_mapper_visits_does_not_grow_with_the_finished_runs_cached() {
        for namespace_cap in [false, true] {
            let (few_woken, few_visited) = wake_all(100, namespace_cap);
            let (many_woken, many_visited) = wake_all(10_000, namespace_cap);
            assert_eq!(few_woken, many_woken);
            assert_eq!(few_visited, many_visited, "namespace cap: {namespace_cap}");
            let woken: usize = many_woken.iter().map(Vec::len).sum();
            assert!(
                many_visited <= woken + 1,
                "visited {many_visited} runs to wake {woken}"
            );
        }
    }
}
