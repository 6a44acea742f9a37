//! The controllers and how they are wired to watches.

pub mod agent;
pub mod agentrun;
pub mod agentworkflow;
pub mod agentworkflowrun;
pub mod gateway;
mod pipeline;
mod sandbox_pod;
pub mod skillcard;
pub mod skillcollection;
mod sweep;
pub mod watch_health;
mod watches;

use std::collections::BTreeMap;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentic_api::{
    Agent, AgentRun, AgentWorkflow, AgentWorkflowRun, CONDITION_READY, ConditionStatus,
    DEFAULT_SKILLS_LABEL, Gateway, SkillCard, SkillCollection,
};
use agentic_core::conditions::find_condition;
use agentic_core::owners::controlling_run;
use agentic_core::sandbox::REASON_QUEUED;
use agentic_core::skills::Lookup;
use backon::BackoffBuilder as _;
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DynamicObject, ObjectMeta};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;

use crate::context::{Context, SandboxBackend};
use crate::error::Error;
use crate::metrics::Metrics;
use pipeline::{Policy, Stop, start};
use sandbox_pod::SandboxPod;
use watches::SharedWatch;

pub use pipeline::{Pass, REASON_MALFORMED_OBJECT, REASON_RECONCILE_FAILED, Reconciled};

/// Label every object the operator creates for a run carries, naming the run.
pub use agentic_core::sandbox::RUN_LABEL;
/// How many orphans one pass of the orphan sweep examines at most.
pub use sweep::MAX_CANDIDATES_PER_PASS;

/// Which namespaces the controllers watch.
#[derive(Clone, Debug)]
pub enum Scope {
    All,
    Namespaces(Vec<String>),
}

/// What `/readyz` reports: ready once every watch has completed its first list, and also
/// while the replica waits for leadership. A standby replica is healthy and must count as
/// available, or a rolling update would wait forever for a new pod that cannot lead before
/// the old one goes.
#[derive(Default)]
pub struct Readiness {
    listed: AtomicBool,
    standby: AtomicBool,
    missing_crds: std::sync::Mutex<Vec<String>>,
    /// The failures of the controllers' watches.
    pub watches: Arc<watch_health::WatchHealth>,
}

impl Readiness {
    /// Ready: the CRDs are installed, and the watches have listed and none has been failing
    /// for [`watch_health::UNREADY_AFTER`] (or this replica waits for leadership).
    pub fn is_ready(&self) -> bool {
        self.missing_crds().is_empty()
            && (self.standby.load(Ordering::Relaxed)
                || (self.listed.load(Ordering::Relaxed) && self.broken_watches().is_empty()))
    }

    /// The controllers whose watches have been failing for [`watch_health::UNREADY_AFTER`].
    pub fn broken_watches(&self) -> Vec<watch_health::BrokenWatch> {
        self.watches
            .broken(watch_health::UNREADY_AFTER, Instant::now())
    }

    /// The CRDs (`plural.group`) the controllers need that the API server does not serve.
    pub fn missing_crds(&self) -> Vec<String> {
        self.missing_crds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub fn set_missing_crds(&self, missing: Vec<String>) {
        *self
            .missing_crds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = missing;
    }

    /// Whether this replica is waiting for leadership rather than reconciling.
    pub fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Relaxed)
    }

    /// Marks the replica as waiting for leadership (true) or leading (false).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Relaxed);
    }
}

fn api_for<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

type Guarded<K> = DeserializeGuard<K>;

/// Secrets are watched for their names and versions only (kube asks for metadata alone for
/// a `PartialObjectMeta`): a Secret's data never reaches the operator through a watch (a pass
/// reads the one it needs), and a namespace's many large Secrets (Helm releases,
/// certificates) cost a few hundred bytes of event each; a change of data still changes the
/// version, which triggers the pass.
type SecretMeta = PartialObjectMeta<Secret>;

/// An object a reference names, as read: `None` when absent, `Some(Err(error))` with the
/// deserialization error when it does not deserialize.
type Read<K> = Option<Result<K, String>>;

/// Reads the `K` named `name` in `namespace` for a reference. An object that does not
/// deserialize as `K` is not an error of the pass: the referrer reports it as not Ready, and
/// its own controller raises a Warning event on it.
async fn read_reference<K>(client: &Client, namespace: &str, name: &str) -> Result<Read<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<Guarded<K>> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .get_opt(name)
        .await?
        .map(|guarded| guarded.0.map_err(|invalid| invalid.error)))
}

/// What a read reference is, for the pure checks in `agentic-core`.
fn lookup<K>(read: &Read<K>) -> Lookup<'_, K> {
    match read {
        None => Lookup::Missing,
        Some(Ok(object)) => Lookup::Found(object),
        Some(Err(error)) => Lookup::Malformed(error),
    }
}

/// The key of a guarded object, from the key of the object it wraps.
fn guard_ref<K: Resource<DynamicType = ()>>(r: ObjectRef<K>) -> ObjectRef<Guarded<K>> {
    let named = ObjectRef::new(&r.name);
    match &r.namespace {
        Some(ns) => named.within(ns),
        None => named,
    }
}

/// The namespace of an object of `kind` handed to its reconcile; every stored namespaced
/// object has one, so its absence is [`Error::MissingMetadata`].
fn namespace_of<K: Resource>(object: &K, kind: &'static str) -> Result<String, Error> {
    object.namespace().ok_or_else(|| Error::MissingMetadata {
        kind,
        name: object.name_any(),
        field: "metadata.namespace",
    })
}

/// The objects of a cache's state that deserialized, borrowed: a watch event is mapped
/// without copying the cache (a pod event of a busy namespace used to clone every run).
fn valid<K>(state: &[Arc<Guarded<K>>]) -> Vec<&K> {
    state.iter().filter_map(|g| g.0.as_ref().ok()).collect()
}

/// What a watch maps a changed object to: the valid objects in `store` that `select` picks
/// for the changed object's namespace and name, as keys of the guarded objects the
/// controller reconciles. Objects that did not deserialize are never picked.
fn related<K, C>(
    store: &Store<Guarded<K>>,
    changed: &C,
    select: impl FnOnce(Vec<&K>, &str, &str) -> Vec<ObjectRef<K>>,
) -> Vec<ObjectRef<Guarded<K>>>
where
    K: Resource<DynamicType = ()> + Clone,
    C: Resource,
{
    let namespace = changed.namespace().unwrap_or_default();
    let state = store.state();
    select(valid(&state), &namespace, &changed.name_any())
        .into_iter()
        .map(guard_ref)
        .collect()
}

/// How soon a watch retries after an error: 100 ms, doubling up to 1 s, with jitter.
/// kube-runtime's default grows to 30 s and resets only after two minutes without errors,
/// so after an API server outage (and the `410 Gone` of every watch once it is back) the
/// watches stayed down for minutes after the server had returned.
struct WatchBackoff {
    builder: backon::ExponentialBuilder,
    delays: backon::ExponentialBackoff,
}

impl WatchBackoff {
    fn new() -> Self {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(1))
            .with_factor(2.0)
            .with_jitter()
            // Never give up: an exhausted backoff would end the controller's stream.
            .without_max_times();
        Self {
            delays: builder.build(),
            builder,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.delays.next()
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.delays = self.builder.build();
    }
}

/// The controllers of one namespace (or of all), ready to be driven.
pub struct Controllers {
    /// Run the controllers until shutdown.
    pub runs: Vec<BoxFuture<'static, ()>>,
    /// Finish when each watch has listed once (true), or stopped before it did (false).
    pub listed: Vec<BoxFuture<'static, bool>>,
    /// The watch caches of the five kinds, for counting objects.
    pub caches: Caches,
}

/// The watch caches of the seven kinds in one namespace (or in all), and of the sandboxes
/// (Pods labelled [`RUN_LABEL`], agent-sandbox Sandboxes) the AgentRun controller follows.
#[derive(Clone)]
pub struct Caches {
    skill_cards: Store<Guarded<SkillCard>>,
    skill_collections: Store<Guarded<SkillCollection>>,
    gateways: Store<Guarded<Gateway>>,
    agents: Store<Guarded<Agent>>,
    workflows: Store<Guarded<AgentWorkflow>>,
    workflow_runs: Store<Guarded<AgentWorkflowRun>>,
    agent_runs: Store<Guarded<AgentRun>>,
    pods: Store<SandboxPod>,
    /// With the agent-sandbox backend only.
    sandboxes: Option<Store<DynamicObject>>,
}

/// Whether the watch behind `store` has listed, so that what it lacks is absent.
fn listed<K>(store: &Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// Reads a reference like [`read_reference`], from the watch cache of its namespace when the
/// object there deserializes and is `usable`; anything else (not cached, not watched, not
/// usable yet) is read from the API server, so that a cache a moment behind never turns a
/// run away. A usable object a moment old is what an earlier pass would have read.
async fn read_cached<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    store: impl Fn(&Caches) -> &Store<Guarded<K>>,
    usable: impl Fn(&K) -> bool,
) -> Result<Read<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + 'static,
{
    if let Some(caches) = ctx.caches(namespace) {
        let key = guard_ref(ObjectRef::<K>::new(name).within(namespace));
        if let Some(cached) = store(&caches).get(&key)
            && let Ok(object) = &cached.0
            && usable(object)
        {
            return Ok(Some(Ok(object.clone())));
        }
    }
    read_reference(&ctx.client, namespace, name).await
}

/// Starts every controller for one namespace (or all), and the shared watches they follow;
/// they run until `shutdown` turns true.
pub fn controllers(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    health: &Arc<watch_health::WatchHealth>,
    shutdown: watch::Receiver<bool>,
) -> Controllers {
    let client = ctx.client.clone();
    let stop = move || -> Stop {
        let mut rx = shutdown.clone();
        Box::pin(async move {
            let _ = rx.wait_for(|stop| *stop).await;
        })
    };
    let all = watcher::Config::default;
    // Every controller but SkillCard's reconciles at most this many objects at once. A
    // SkillCard's pass waits for a registry or git server, whose reads are bounded per
    // registry already (`agentic-oci`): a bound here would let one slow registry's cards
    // hold every slot.
    let bounded = ctx.settings.reconcile_concurrency;
    let mut runs: Vec<BoxFuture<'static, ()>> = Vec::new();

    // One watch per kind in this scope, whichever controllers follow it.
    // The Secrets users name (pull secrets, source secrets, Gateway credentials); not the ACP
    // Secret the operator creates for each run, which no controller follows: it was one
    // watch event and one cached object per run.
    let not_runs = format!("!{RUN_LABEL}");
    let mut secrets = SharedWatch::new(
        "Secret",
        api_for::<SecretMeta>(&client, namespace),
        all().labels(&not_runs),
    );
    let mut skill_cards = SharedWatch::new(skillcard::KIND, api_for(&client, namespace), all());
    let mut skill_collections =
        SharedWatch::new(skillcollection::KIND, api_for(&client, namespace), all());
    let mut gateways = SharedWatch::new(gateway::KIND, api_for(&client, namespace), all());
    let mut agents = SharedWatch::new(agent::KIND, api_for(&client, namespace), all());
    let mut workflows = SharedWatch::new(agentworkflow::KIND, api_for(&client, namespace), all());
    let mut workflow_runs =
        SharedWatch::new(agentworkflowrun::KIND, api_for(&client, namespace), all());
    let mut agent_runs = SharedWatch::new(agentrun::KIND, api_for(&client, namespace), all());
    // The sandboxes' pods and Sandboxes are cached as well as watched: a run reads its
    // sandbox from the cache (see `agentrun::observe_sandbox`). It reads a pod's metadata and
    // status and a Sandbox's metadata only, so neither spec is kept: the pod template
    // (containers, env, the skills' volumes) is most of their bytes, once per run. A pod's
    // spec is not even decoded (`SandboxPod`).
    let mut pods = SharedWatch::new(
        "Pod",
        api_for::<SandboxPod>(&client, namespace),
        all().labels(RUN_LABEL),
    );
    let mut sandboxes = (ctx.settings.sandbox_backend == SandboxBackend::AgentSandbox).then(|| {
        let resource = agentrun::sandbox_resource();
        let api = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        SharedWatch::<DynamicObject>::with_type("Sandbox", api, all(), resource)
            .trimmed(|sandbox| sandbox.data = serde_json::Value::Null)
    });
    // Watching some namespaces only: the cluster-wide defaults live in another one.
    let mut default_collections = match (namespace, &ctx.settings.default_skills_namespace) {
        (Some(watched), Some(defaults)) if watched != defaults => Some(SharedWatch::new(
            skillcollection::KIND,
            Api::<Guarded<SkillCollection>>::namespaced(client.clone(), defaults),
            all().labels(&format!("{DEFAULT_SKILLS_LABEL}=true")),
        )),
        _ => None,
    };
    let caches = Caches {
        skill_cards: skill_cards.store(),
        skill_collections: skill_collections.store(),
        gateways: gateways.store(),
        agents: agents.store(),
        workflows: workflows.store(),
        workflow_runs: workflow_runs.store(),
        agent_runs: agent_runs.store(),
        pods: pods.store(),
        sandboxes: sandboxes.as_ref().map(SharedWatch::store),
    };

    // SkillCard: re-read when a pull secret changes.
    let store = caches.skill_cards.clone();
    let cards = Controller::for_shared_stream(skill_cards.applied(), store.clone())
        .watches_shared_stream(secrets.touched(), move |secret: Arc<SecretMeta>| {
            related(&store, secret.as_ref(), |cards, ns, name| {
                cards
                    .into_iter()
                    .filter(|c| c.namespace().as_deref() == Some(ns))
                    .filter(|c| c.spec.pull_secrets.iter().flatten().any(|s| s.name == name))
                    .map(ObjectRef::from_obj)
                    .collect()
            })
        });
    runs.push(start(
        cards,
        caches.skill_cards.clone(),
        Policy {
            reconcile: skillcard::reconcile,
            error_policy: skillcard::error_policy,
            concurrency: 0,
        },
        ctx.clone(),
        &stop,
    ));

    // SkillCollection: follows the SkillCards it generated or references.
    let store = caches.skill_collections.clone();
    let collections = Controller::for_shared_stream(skill_collections.applied(), store.clone())
        .watches_shared_stream(
            skill_cards.touched(),
            move |card: Arc<Guarded<SkillCard>>| {
                let Ok(card) = &card.0 else {
                    return Vec::new();
                };
                related(&store, card, |collections, ns, _| {
                    skillcollection::collections_of_card(collections, ns, card)
                })
            },
        );
    runs.push(start(
        collections,
        caches.skill_collections.clone(),
        Policy {
            reconcile: skillcollection::reconcile,
            error_policy: skillcollection::error_policy,
            concurrency: bounded,
        },
        ctx.clone(),
        &stop,
    ));

    // Gateway: re-checked when its Secret appears or changes.
    let store = caches.gateways.clone();
    let gateway_controller = Controller::for_shared_stream(gateways.applied(), store.clone())
        .watches_shared_stream(secrets.touched(), move |secret: Arc<SecretMeta>| {
            related(&store, secret.as_ref(), |gateways, ns, secret| {
                gateway::gateways_using_secret(gateways, ns, secret)
            })
        });
    runs.push(start(
        gateway_controller,
        caches.gateways.clone(),
        Policy {
            reconcile: gateway::reconcile,
            error_policy: gateway::error_policy,
            concurrency: bounded,
        },
        ctx.clone(),
        &stop,
    ));

    // Agent: follows its SkillCards, SkillCollections (the defaults too) and Gateways.
    let agents_of_collection = {
        let store = caches.agents.clone();
        let cluster_defaults = ctx.settings.default_skills_namespace.clone();
        move |collection: Arc<Guarded<SkillCollection>>| {
            let Ok(collection) = &collection.0 else {
                return Vec::new();
            };
            let state = store.state();
            agent::agents_of_collection(valid(&state), collection, cluster_defaults.as_deref())
                .into_iter()
                .map(guard_ref)
                .collect::<Vec<_>>()
        }
    };
    let mut agent_controller =
        Controller::for_shared_stream(agents.applied(), caches.agents.clone())
            .watches_shared_stream(skill_collections.touched(), agents_of_collection.clone());
    if let Some(defaults) = &mut default_collections {
        agent_controller =
            agent_controller.watches_shared_stream(defaults.touched(), agents_of_collection);
    }
    let card_store = caches.agents.clone();
    let gateway_store = caches.agents.clone();
    let agent_controller = agent_controller
        .watches_shared_stream(
            skill_cards.touched(),
            move |card: Arc<Guarded<SkillCard>>| {
                related(&card_store, card.as_ref(), |agents, ns, card| {
                    agent::agents_referencing(agents, ns, agent::Reference::SkillCard, card)
                })
            },
        )
        .watches_shared_stream(gateways.touched(), move |gateway: Arc<Guarded<Gateway>>| {
            related(&gateway_store, gateway.as_ref(), |agents, ns, gateway| {
                agent::agents_referencing(agents, ns, agent::Reference::Gateway, gateway)
            })
        });
    runs.push(start(
        agent_controller,
        caches.agents.clone(),
        Policy {
            reconcile: agent::reconcile,
            error_policy: agent::error_policy,
            concurrency: bounded,
        },
        ctx.clone(),
        &stop,
    ));

    // AgentWorkflow: Ready when its stages' Agents are.
    let store = caches.workflows.clone();
    let workflow_controller = Controller::for_shared_stream(workflows.applied(), store.clone())
        .watches_shared_stream(agents.touched(), move |agent: Arc<Guarded<Agent>>| {
            related(&store, agent.as_ref(), |workflows, ns, agent| {
                agentworkflow::workflows_of_agent(workflows, ns, agent)
            })
        });
    runs.push(start(
        workflow_controller,
        caches.workflows.clone(),
        Policy {
            reconcile: agentworkflow::reconcile,
            error_policy: agentworkflow::error_policy,
            concurrency: bounded,
        },
        ctx.clone(),
        &stop,
    ));

    // AgentWorkflowRun: starts when its workflow turns Ready, follows its stages' runs.
    let store = caches.workflow_runs.clone();
    let workflow_run_controller =
        Controller::for_shared_stream(workflow_runs.applied(), store.clone())
            .owns_shared_stream(agent_runs.touched())
            .watches_shared_stream(
                workflows.touched(),
                move |workflow: Arc<Guarded<AgentWorkflow>>| {
                    related(&store, workflow.as_ref(), |runs, ns, workflow| {
                        agentworkflowrun::runs_waiting_on_workflow(runs, ns, workflow)
                    })
                },
            );
    runs.push(start(
        workflow_run_controller,
        caches.workflow_runs.clone(),
        Policy {
            reconcile: agentworkflowrun::reconcile,
            error_policy: agentworkflowrun::error_policy,
            concurrency: bounded,
        },
        ctx.clone(),
        &stop,
    ));

    // AgentRun: starts when its Agent turns Ready, follows its sandbox and pod.
    let agent_store = caches.agent_runs.clone();
    let pod_store = caches.agent_runs.clone();
    let namespace_cap = ctx
        .settings
        .run_defaults
        .max_concurrent_runs_per_namespace
        .is_some();
    let queued_behind = {
        let store = caches.agent_runs.clone();
        move |run: &AgentRun| {
            let agent = (!namespace_cap).then_some(run.spec.agent_ref.as_str());
            related(&store, run, |runs, ns, _| {
                agentrun::runs_queued(runs, ns, agent)
            })
        }
    };
    let freed_by_deletion = queued_behind.clone();
    let mut run_controller =
        Controller::for_shared_stream(agent_runs.applied(), caches.agent_runs.clone())
            .watches_shared_stream(agents.touched(), move |agent: Arc<Guarded<Agent>>| {
                related(&agent_store, agent.as_ref(), |runs, ns, agent| {
                    agentrun::runs_waiting_on_agent(runs, ns, agent)
                })
            })
            // A run that finishes or goes frees a slot for the runs queued on its Agent, or on
            // its namespace under the namespace cap. No other change of a run does, and each
            // wake-up looks through the namespace's runs: not once per run event.
            .watches_shared_stream(
                agent_runs.applied(),
                move |changed: Arc<Guarded<AgentRun>>| match &changed.0 {
                    Ok(run) if agentrun::is_finished(run) => queued_behind(run),
                    _ => Vec::new(),
                },
            )
            .watches_shared_stream(agent_runs.deleted(), move |gone: Arc<Guarded<AgentRun>>| {
                match &gone.0 {
                    Ok(run) => freed_by_deletion(run),
                    Err(_) => Vec::new(),
                }
            })
            .watches_shared_stream(pods.touched(), move |pod: Arc<SandboxPod>| {
                // A pod of the `pod` backend names its run as its controller: no need to look
                // through the runs (a pod event per run made that quadratic).
                if let (Some(run), Some(namespace)) =
                    (controlling_run(pod.meta()), &pod.metadata.namespace)
                {
                    return vec![guard_ref(ObjectRef::new(run).within(namespace))];
                }
                related(&pod_store, pod.as_ref(), |runs, ns, _| {
                    agentrun::runs_of_pod(runs, ns, pod.meta())
                })
            });
    if let Some(sandboxes) = &mut sandboxes {
        run_controller = run_controller.watches_shared_stream_with(
            sandboxes.touched(),
            |sandbox: Arc<DynamicObject>| owning_runs(sandbox.meta()),
            agentrun::sandbox_resource(),
        );
    }
    ctx.register_caches(namespace, caches.clone());
    runs.push(start(
        run_controller,
        caches.agent_runs.clone(),
        Policy {
            reconcile: agentrun::reconcile,
            error_policy: agentrun::error_policy,
            concurrency: bounded,
        },
        ctx,
        &stop,
    ));

    // Every subscription is made: the watches can start.
    let mut listed: Vec<BoxFuture<'static, bool>> = Vec::new();
    let mut watch = |run: BoxFuture<'static, ()>, ready: BoxFuture<'static, bool>| {
        runs.push(run);
        listed.push(ready);
    };
    macro_rules! start_watch {
        ($shared:expr) => {{
            let shared = $shared;
            let ready = Box::pin(wait_ready(shared.store()));
            watch(shared.run(health.clone(), stop()), ready);
        }};
    }
    start_watch!(secrets);
    start_watch!(skill_cards);
    start_watch!(skill_collections);
    start_watch!(gateways);
    start_watch!(agents);
    start_watch!(workflows);
    start_watch!(workflow_runs);
    start_watch!(agent_runs);
    start_watch!(pods);
    if let Some(sandboxes) = sandboxes {
        start_watch!(sandboxes);
    }
    if let Some(defaults) = default_collections {
        start_watch!(defaults);
    }

    Controllers {
        runs,
        listed,
        caches,
    }
}

/// The AgentRuns that own `sandbox` (its controller reference names one), as keys of the
/// guarded runs the AgentRun controller reconciles.
fn owning_runs(sandbox: &ObjectMeta) -> Vec<ObjectRef<Guarded<AgentRun>>> {
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

/// True once the watch behind `store` has listed; false when it stopped before that.
async fn wait_ready<K>(store: kube::runtime::reflector::Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.wait_until_ready().await.is_ok()
}

/// Runs the controllers for `scope` until `shutdown` turns true, marking `readiness` once
/// every watch has listed. In-flight reconciles finish before this returns.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    readiness: Arc<Readiness>,
    shutdown: watch::Receiver<bool>,
) {
    let namespaces: Vec<Option<String>> = match scope {
        Scope::All => vec![None],
        Scope::Namespaces(list) => list.into_iter().map(Some).collect(),
    };
    let mut runs = Vec::new();
    let mut listed = Vec::new();
    let mut caches = Vec::new();
    let mut sweep_scopes = Vec::new();
    for ns in &namespaces {
        let started = controllers(
            ctx.clone(),
            ns.as_deref(),
            &readiness.watches,
            shutdown.clone(),
        );
        runs.extend(started.runs);
        listed.extend(started.listed);
        sweep_scopes.push((ns.clone(), started.caches.agent_runs.clone()));
        caches.push(started.caches);
    }
    let mark_ready = async move {
        let listed = futures::future::join_all(listed).await;
        if listed.into_iter().all(|listed| listed) {
            readiness.listed.store(true, Ordering::Relaxed);
            tracing::info!("every watch has listed; ready");
        }
    };
    let run_all = futures::future::join_all(runs);
    let sweep = sweep::sweep(
        ctx.clone(),
        sweep_scopes,
        ctx.settings.run_defaults.orphan_sweep_interval,
        shutdown.clone(),
    );
    tokio::join!(
        mark_ready,
        run_all,
        sweep,
        census(&ctx.metrics, &caches, shutdown)
    );
}

/// How often `agentic_objects` is recounted from the watch caches. Reconciles do not see
/// deletions, so the count follows the caches rather than the reconcile passes.
const CENSUS_INTERVAL: Duration = Duration::from_secs(5);

/// Keeps `agentic_objects` up to date until `shutdown` turns true.
async fn census(metrics: &Metrics, caches: &[Caches], mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(CENSUS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => count_objects(metrics, caches),
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// Counts the objects in the caches by kind and phase: `Ready`/`NotReady` from the Ready
/// condition, or the AgentRun phase (`Pending` until the first status). Objects that do not
/// match the API schema are left out; `agentic_reconcile_errors_total` counts them.
fn count_objects(metrics: &Metrics, caches: &[Caches]) {
    fn tally<K: Clone>(
        states: impl Iterator<Item = Vec<Arc<Guarded<K>>>>,
        phase: impl Fn(&K) -> &'static str,
    ) -> Vec<(String, i64)> {
        let mut counts: BTreeMap<&'static str, i64> = BTreeMap::new();
        for state in states {
            for obj in valid(&state) {
                *counts.entry(phase(obj)).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|(phase, n)| (phase.to_string(), n))
            .collect()
    }
    let skill_cards = tally(caches.iter().map(|c| c.skill_cards.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let skill_collections = tally(caches.iter().map(|c| c.skill_collections.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let gateways = tally(caches.iter().map(|c| c.gateways.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let agents = tally(caches.iter().map(|c| c.agents.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let workflows = tally(caches.iter().map(|c| c.workflows.state()), |o| {
        ready_phase(o.status.as_ref().map(|s| s.conditions.as_slice()))
    });
    let workflow_runs = tally(caches.iter().map(|c| c.workflow_runs.state()), |o| {
        o.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    });
    let agent_runs = tally(caches.iter().map(|c| c.agent_runs.state()), |o| {
        o.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .as_str()
    });
    metrics.set_objects(skillcard::KIND, &skill_cards);
    metrics.set_objects(skillcollection::KIND, &skill_collections);
    metrics.set_objects(gateway::KIND, &gateways);
    metrics.set_objects(agent::KIND, &agents);
    metrics.set_objects(agentworkflow::KIND, &workflows);
    metrics.set_objects(agentworkflowrun::KIND, &workflow_runs);
    metrics.set_objects(agentrun::KIND, &agent_runs);

    let mut by_reason: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut queued: BTreeMap<(String, String), i64> = BTreeMap::new();
    let states: Vec<_> = caches.iter().map(|c| c.agent_runs.state()).collect();
    for run in states.iter().flat_map(|state| valid(state)) {
        let status = run.status.clone().unwrap_or_default();
        let phase = status.phase.unwrap_or_default().as_str().to_string();
        let reason = find_condition(&status.conditions, CONDITION_READY)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        if reason == REASON_QUEUED {
            *queued
                .entry((
                    run.namespace().unwrap_or_default(),
                    run.spec.agent_ref.clone(),
                ))
                .or_default() += 1;
        }
        *by_reason.entry((phase, reason)).or_default() += 1;
    }
    metrics.set_runs(
        &by_reason.into_iter().collect::<Vec<_>>(),
        &queued.into_iter().collect::<Vec<_>>(),
    );
}

fn ready_phase(conditions: Option<&[Condition]>) -> &'static str {
    let ready = conditions
        .and_then(|c| find_condition(c, CONDITION_READY))
        .is_some_and(|c| c.status == ConditionStatus::True.as_str());
    if ready { "Ready" } else { "NotReady" }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn the_metrics_precreate_the_series_of_every_controller() {
        let controllers = BTreeSet::from([
            super::agent::KIND,
            super::agentrun::KIND,
            super::agentworkflow::KIND,
            super::agentworkflowrun::KIND,
            super::gateway::KIND,
            super::skillcard::KIND,
            super::skillcollection::KIND,
        ]);
        assert_eq!(controllers, BTreeSet::from(crate::metrics::KINDS));
    }
}
