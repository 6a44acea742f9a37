//! One watch per kind and scope, shared by every controller that follows the kind.
//!
//! Each [`SharedWatch`] lists and watches its kind once, keeps the only cache of it, and hands
//! every change to its subscribers as an `Arc` of the one decoded object. Before, each
//! controller opened its own watches: an AgentRun event was sent by the API server, and
//! decoded here, three times (the AgentRun controller's own watch, its queue trigger, the
//! AgentWorkflowRun controller's), an Agent or SkillCard event three times, a Secret's twice.
//!
//! The watch owns what kube-runtime's controllers did for their own watches: the short
//! retry backoff ([`WatchBackoff`]), the report of a failing watch into [`WatchHealth`], and
//! the end on shutdown. Subscribers get unbounded channels, so a busy controller never holds
//! back the cache or the other controllers. A controller whose reconciles are all busy stops
//! draining its triggers until one ends, so a channel can hold an event per object in a
//! burst: what it holds is the cache's own copy of each object (the reflector stores a
//! clone of what it decodes), so a backlog costs pointers, not a second copy of each object.

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};

use agentic_api::{AgentRun, AgentRunPhase, DEFAULT_SKILLS_LABEL, SkillCollection};
use agentic_core::sandbox::RUN_LABEL;
use backon::BackoffBuilder as _;
use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::utils::Backoff;
use kube::{Api, Client};

use super::pipeline::{KindScope, Reconciled};
pub(super) use super::support::Stop;
use super::support::api_for;
use super::watch_health::WatchHealth;
use crate::caches::{
    Caches, Diverted, FinishedRunCache, FinishedRunsWatched, Guarded, Index, Indexed, InitialList,
    KindCache, KindStore, LAST_APPLIED, Maintained, PrefetchCaches, SandboxPod, SecretMeta,
    finished_runs_of, sandbox_resource,
};
use crate::context::{Context, SandboxBackend};
use crate::error::Chain;
use crate::shards::ShardFilter;
use agentic_core::prefetch::PREFETCH_LABEL;
use k8s_openapi::api::core::v1::{Node, Pod};

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

/// The watches of one scope (a namespace, or all): one per kind, whichever controllers
/// follow it. A kind's controller subscribes to what it follows through the kind's
/// [`Subscriptions`] ([`Watches::of`] for a kind the operator reconciles, the fields for the
/// objects around them); [`Watches::start`] then starts them.
pub(super) struct Watches {
    client: Client,
    /// The client of the namespaced kinds' watches: [`Watches::client`], or one that asks
    /// the API server for this replica's shards only.
    namespaced_client: Client,
    namespace: Option<String>,
    /// How every watch of this scope gets the objects that exist when it starts.
    initial_list: InitialList,
    /// The kinds the operator reconciles, in the order their controllers first asked: each
    /// is watched once its own controller or another kind's subscribes.
    kinds: Vec<(TypeId, Box<dyn KindWatch>)>,
    /// The Secrets users name (pull secrets, source secrets, Gateway credentials); not the
    /// ACP Secret the operator creates for each run, which no controller follows: it was one
    /// watch event and one cached object per run.
    pub secrets: SharedWatch<SecretMeta>,
    /// The sandboxes' pods and Sandboxes are cached as well as watched: a run reads its
    /// sandbox from the cache. It reads a pod's metadata and status and a Sandbox's metadata
    /// only, so neither spec is kept: the pod template (containers, env, the skills' volumes)
    /// is most of their bytes, once per run. A pod's spec is not even decoded
    /// ([`SandboxPod`]), and only the annotations the operator reads back are kept
    /// ([`SandboxPod::forget_unread`]).
    pub pods: SharedWatch<SandboxPod>,
    /// With the agent-sandbox backend only.
    pub sandboxes: Option<SharedWatch<DynamicObject>>,
    /// Watching some namespaces only: the cluster-wide default collections live in another.
    pub default_collections: Option<SharedWatch<Guarded<SkillCollection>>>,
    /// With skill prefetch on: the nodes and the prefetch pods.
    pub prefetch: Option<PrefetchWatches>,
    /// With the work split across replicas: the shards whose namespaces' objects are
    /// cached and handed on; the others' are dropped as they arrive.
    shards: Option<ShardFilter>,
    /// The finished runs, kept out of the runs' cache, once the AgentRun controller asked
    /// for them.
    finished_runs: Option<FinishedRunCache>,
    /// How the finished runs are watched.
    finished_runs_watched: FinishedRunsWatched,
    /// With [`FinishedRunsWatched::Apart`]: the watch of each finished phase, and the live
    /// runs' watch, whose subscribers hear of the runs that leave it and which lists first.
    finished_runs_apart: Option<FinishedRunWatches>,
}

/// The watches of the finished runs apart from the live ones'.
struct FinishedRunWatches {
    phases: Vec<SharedWatch<Guarded<AgentRun>>>,
    live: Subscriptions<Guarded<AgentRun>>,
}

/// How the watches list, and what they ask the API server for.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// How each watch gets the objects that exist when it starts.
    pub initial_list: InitialList,
    /// The KEP-5866 shard selector of this replica's shards, for the namespaced kinds
    /// watched across every namespace (`--shard-watch=server`), once the API server was
    /// seen to filter by it.
    pub shard_selector: Option<String>,
    /// How the finished runs are watched: apart from the live ones where the API server
    /// selects runs by phase.
    pub finished_runs: FinishedRunsWatched,
}

/// The watches of skill prefetch: the cluster's nodes, and the pods labelled
/// [`PREFETCH_LABEL`] (not a run's pods: those carry the run label), cached without their
/// spec, with the indexes the Agent's pass reads them by.
pub(super) struct PrefetchWatches {
    pub nodes: SharedWatch<Node>,
    pub pods: SharedWatch<Guarded<Pod>>,
    caches: PrefetchCaches,
}

impl PrefetchWatches {
    /// `cluster` lists the nodes, `namespaced` the pods.
    fn new(
        cluster: &Client,
        namespaced: &Client,
        namespace: Option<&str>,
        config: &impl Fn() -> watcher::Config,
    ) -> Self {
        let nodes = SharedWatch::new("Node", Api::all(cluster.clone()), config()).trimmed(
            |node: &mut Node| {
                // The images and volumes a node reports are most of its bytes; whether runs
                // can land on it needs none of them.
                if let Some(status) = node.status.as_mut() {
                    status.images = None;
                    status.volumes_attached = None;
                    status.volumes_in_use = None;
                }
            },
        );
        let pods = SharedWatch::new(
            "Pod",
            api_for(namespaced, namespace),
            config().labels(PREFETCH_LABEL),
        )
        .trimmed(|pod: &mut Guarded<Pod>| {
            if let Ok(pod) = &mut pod.0 {
                pod.spec = None;
            }
        });
        let subscriptions = pods.subscriptions();
        let caches = PrefetchCaches {
            nodes: nodes.store(),
            pods: pods.store(),
            by_agent: subscriptions.index(PrefetchCaches::controlling_agent),
            pulling: subscriptions.index(PrefetchCaches::pulling),
        };
        Self {
            nodes,
            pods,
            caches,
        }
    }
}

impl Watches {
    /// The watches of `namespace` (`None`: of every namespace), not started yet.
    pub fn new(ctx: &Context, namespace: Option<&str>, options: &WatchOptions) -> Self {
        let client: &Client = &ctx.client;
        let initial_list = options.initial_list;
        let all = || initial_list.config();
        // The namespaced kinds' watches of every namespace ask the API server for this
        // replica's shards only, when it was seen to filter by them.
        let namespaced = match (&options.shard_selector, namespace) {
            (Some(selector), None) => crate::shards::selector::selecting(client, selector),
            _ => client.clone(),
        };
        let client = &namespaced;
        let not_runs = format!("!{RUN_LABEL}");
        let sandboxes = (ctx.settings.sandbox_backend == SandboxBackend::AgentSandbox).then(|| {
            let resource = sandbox_resource();
            let api = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            // A cached Sandbox is read for its name, owner and age: its spec (the pod
            // template), labels and annotations (the pinned skills an adoption reads from
            // the API server) are dropped.
            SharedWatch::<DynamicObject>::with_type("Sandbox", api, all(), resource).trimmed(
                |sandbox| {
                    sandbox.data = serde_json::Value::Null;
                    sandbox.metadata.labels = None;
                    sandbox.metadata.annotations = None;
                },
            )
        });
        let shards = ctx.shards().cloned();
        // Watching another namespace, or a shard without it: the defaults' own watch.
        let defaults_elsewhere = |defaults: &str| match namespace {
            Some(watched) => watched != defaults,
            None => shards
                .as_ref()
                .is_some_and(|shards| !shards.keeps(Some(defaults))),
        };
        let default_collections = match &ctx.settings.default_skills_namespace {
            Some(defaults) if defaults_elsewhere(defaults) => Some(SharedWatch::new(
                "SkillCollection",
                // Another shard's namespace: not to be filtered by this replica's shards.
                Api::<Guarded<SkillCollection>>::namespaced(ctx.client.clone(), defaults),
                all().labels(&format!("{DEFAULT_SKILLS_LABEL}=true")),
            )),
            _ => None,
        };
        let prefetch = ctx
            .settings
            .skill_prefetch
            .is_some()
            .then(|| PrefetchWatches::new(&ctx.client, client, namespace, &all));
        Self {
            prefetch,
            client: ctx.client.clone(),
            namespaced_client: namespaced.clone(),
            namespace: namespace.map(str::to_string),
            initial_list,
            kinds: Vec::new(),
            secrets: SharedWatch::new(
                "Secret",
                api_for(client, namespace),
                all().labels(&not_runs),
            ),
            pods: SharedWatch::new("Pod", api_for(client, namespace), all().labels(RUN_LABEL))
                .trimmed(SandboxPod::forget_unread),
            sandboxes,
            default_collections,
            shards,
            finished_runs: None,
            finished_runs_watched: options.finished_runs,
            finished_runs_apart: None,
        }
    }

    /// Keeps the finished runs in `finished_runs` instead of the runs' cache (`runs` is the
    /// runs' watch), for every reader of this scope's caches: filled by a watch of each
    /// finished phase with [`FinishedRunsWatched::Apart`], else by the runs' watch, which
    /// diverts them.
    pub fn keep_finished_runs(
        &mut self,
        runs: &Subscriptions<Guarded<AgentRun>>,
        finished_runs: FinishedRunCache,
    ) {
        match self.finished_runs_watched {
            FinishedRunsWatched::Apart => {
                let phases = [AgentRunPhase::Succeeded, AgentRunPhase::Failed]
                    .into_iter()
                    .map(|phase| {
                        let api = self.api_of::<AgentRun>();
                        let config = self.initial_list.config().fields(&finished_runs_of(phase));
                        let watch = SharedWatch::new(KIND_FINISHED_RUN, api, config);
                        watch
                            .subscriptions()
                            .divert(finished_runs.feed(Some(phase)));
                        watch
                    })
                    .collect();
                self.finished_runs_apart = Some(FinishedRunWatches {
                    phases,
                    live: runs.clone(),
                });
            }
            FinishedRunsWatched::WithTheLive => runs.divert(finished_runs.feed(None)),
        }
        self.finished_runs = Some(finished_runs);
    }

    /// The namespace watched (`None`: every namespace).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether the watches see part of the namespaces only: another replica serves the
    /// others (`--shards`).
    pub fn sharded(&self) -> bool {
        self.shards.is_some()
    }

    /// The watch of the `K`s of this scope (every cluster-scoped `K`), opened by the first
    /// controller that follows them.
    pub fn of<K: Reconciled>(&mut self) -> Subscriptions<Guarded<K>> {
        let key = TypeId::of::<K>();
        let opened = self
            .kinds
            .iter()
            .find(|(kind, _)| *kind == key)
            .and_then(|(_, watch)| watch.subscriptions().downcast().ok());
        if let Some(subscriptions) = opened {
            return *subscriptions;
        }
        let api = self.api_of::<K>();
        let config = match (self.finished_runs_watched, K::LIVE_FIELDS) {
            (FinishedRunsWatched::Apart, Some(live)) => self.initial_list.config().fields(live),
            _ => self.initial_list.config(),
        };
        let watch = SharedWatch::new(K::KIND, api, config)
            .settling(|object| object.0.as_ref().is_ok_and(K::settled))
            .trimmed(|object: &mut Guarded<K>| {
                if let Ok(object) = &mut object.0 {
                    trim_for_cache(object);
                }
            });
        let subscriptions = watch.subscriptions();
        // What was under the key was not the kind's watch, which cannot be: replaced whole,
        // never watched twice.
        self.kinds.retain(|(kind, _)| *kind != key);
        self.kinds.push((key, Box::new(watch)));
        subscriptions
    }

    /// What the watches of the `K`s of this scope ask the API server.
    fn api_of<K: Reconciled>(&self) -> Api<Guarded<K>> {
        <K::Scope as KindScope<K>>::watch_api(
            &self.client,
            &self.namespaced_client,
            self.namespace.as_deref(),
        )
    }

    /// The caches the watches keep.
    pub fn caches(&self) -> Caches {
        let caches = Caches::new(
            self.pods.store(),
            self.sandboxes.as_ref().map(SharedWatch::store),
        )
        .with_secrets(self.secrets.store())
        .with_prefetch(self.prefetch.as_ref().map(|p| p.caches.clone()))
        .with_finished_runs(self.finished_runs.clone());
        self.kinds
            .iter()
            .fold(caches, |caches, (_, watch)| caches.with_kind(watch.cache()))
    }

    /// Starts every watch, once every subscription is made: the futures that run them, and
    /// those that finish when each has listed once (true) or stopped before it did (false).
    pub fn start(
        self,
        health: &Arc<WatchHealth>,
        stop: &impl Fn() -> Stop,
    ) -> (Vec<BoxFuture<'static, ()>>, Vec<BoxFuture<'static, bool>>) {
        let shards = &self.shards;
        // The finished runs' watches start once the live runs have listed, and /readyz does
        // not wait for them: a restart over many finished runs serves the live ones first.
        let mut after_the_live = Vec::new();
        if let Some(FinishedRunWatches { phases, live }) = self.finished_runs_apart {
            for watch in phases {
                let live_listed = live.listed();
                let (run, _listed) = watch
                    .telling_deletes_to(&live)
                    .sharded(shards.clone())
                    .start(health.clone(), stop());
                after_the_live.push(
                    async move {
                        if live_listed.wait().await {
                            run.await;
                        }
                    }
                    .boxed(),
                );
            }
        }
        let mut started: Vec<Started> = self
            .kinds
            .into_iter()
            .map(|(_, watch)| watch.start(health.clone(), stop(), shards.clone()))
            .collect();
        started.push(
            self.secrets
                .sharded(shards.clone())
                .start(health.clone(), stop()),
        );
        started.push(
            self.pods
                .sharded(shards.clone())
                .start(health.clone(), stop()),
        );
        if let Some(sandboxes) = self.sandboxes {
            started.push(
                sandboxes
                    .sharded(shards.clone())
                    .start(health.clone(), stop()),
            );
        }
        // The default-skills namespace's own watch: read by every shard's Agents.
        if let Some(defaults) = self.default_collections {
            started.push(defaults.start(health.clone(), stop()));
        }
        if let Some(prefetch) = self.prefetch {
            started.push(prefetch.nodes.start(health.clone(), stop()));
            started.push(
                prefetch
                    .pods
                    .sharded(shards.clone())
                    .start(health.clone(), stop()),
            );
        }
        let (mut runs, listed): (Vec<_>, Vec<_>) = started.into_iter().unzip();
        runs.extend(after_the_live);
        (runs, listed)
    }
}

/// What every cached object drops before it is cached: its managedFields (one entry per
/// field manager, the creator's and ours for status, a large share of an object's bytes) and
/// `kubectl apply`'s copy of the object it applied (the whole spec again). No reader looks at
/// either, and no write sends a cached object back: writes are server-side applies and
/// patches of the fields they change.
pub(crate) fn forget_unread_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// `object` as the cache of its kind keeps it: without what no reader looks at
/// ([`Reconciled::forget_unread`]), and trimmed once settled (a finished workflow run:
/// [`Reconciled::trim_settled`]), whole while it may still change.
pub(super) fn trim_for_cache<K: Reconciled>(object: &mut K) {
    object.forget_unread();
    if object.settled() {
        object.trim_settled();
    }
}

/// What `/readyz` and the logs call the watches of the finished runs.
const KIND_FINISHED_RUN: &str = "AgentRun (finished)";

/// `store`, as the cache of the `K`s.
pub(super) fn kind_cache<K: Reconciled>(store: Store<Guarded<K>>) -> Arc<dyn KindCache> {
    Arc::new(KindStore {
        kind: K::KIND,
        store,
        phase: K::phase,
    })
}

/// A started watch: the future that runs it, and the one that finishes when it has listed
/// once (true) or stopped before it did (false).
type Started = (BoxFuture<'static, ()>, BoxFuture<'static, bool>);

/// The watch of a kind the operator reconciles, whichever kind it is: what [`Watches`] needs
/// to hand out its subscriptions, keep its cache and start it.
trait KindWatch: Send {
    /// Its [`Subscriptions`], to be taken back as the kind's.
    fn subscriptions(&self) -> Box<dyn Any>;
    /// Its cache, as the census counts it and the passes read it.
    fn cache(&self) -> Arc<dyn KindCache>;
    /// Starts it, keeping the objects of `shards` only when there are shards.
    fn start(
        self: Box<Self>,
        health: Arc<WatchHealth>,
        stop: Stop,
        shards: Option<ShardFilter>,
    ) -> Started;
}

impl<K: Reconciled> KindWatch for SharedWatch<Guarded<K>> {
    fn subscriptions(&self) -> Box<dyn Any> {
        Box::new(SharedWatch::subscriptions(self))
    }

    fn cache(&self) -> Arc<dyn KindCache> {
        kind_cache(self.store())
    }

    fn start(
        self: Box<Self>,
        health: Arc<WatchHealth>,
        stop: Stop,
        shards: Option<ShardFilter>,
    ) -> Started {
        SharedWatch::start(self.sharded(shards), health, stop)
    }
}

/// Whether a watch has listed once, for any number of waiters.
///
/// Not the store's own `wait_until_ready`: kube-runtime keeps that as a oneshot channel that
/// wakes only the waiter that polled it last, so with several waiters on one store (the
/// kind's controller, `/readyz`, the finished runs' watches, the orphan sweep) all but one
/// could wait forever. With several namespaces watched that left `/readyz` at 503 for good.
#[derive(Clone)]
pub(super) struct Listed(tokio::sync::watch::Receiver<bool>);

impl Listed {
    /// True once the watch has listed; false when it stopped before that.
    pub async fn wait(mut self) -> bool {
        self.0.wait_for(|listed| *listed).await.is_ok()
    }
}

/// The watch of one kind in one scope, its cache, and who follows it.
pub(super) struct SharedWatch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// What `/readyz` and the logs call it: the kind it watches.
    kind: &'static str,
    events: BoxStream<'static, watcher::Result<watcher::Event<K>>>,
    writer: Writer<K>,
    dyntype: K::DynamicType,
    /// Who follows it, shared with its [`Subscriptions`] until it starts.
    subscribed: Arc<Mutex<Subscribed<K>>>,
    /// Turned true once it has listed; dropped (so false for good) if it stops before.
    listed: tokio::sync::watch::Sender<bool>,
    /// The objects whose passes only keep time (a finished run's expiry): after a list they
    /// are handed on after the others, so that a restart over many finished runs reaches
    /// the live ones first.
    settled: fn(&K) -> bool,
}

/// The subscribers of a watch, by what they follow.
struct Subscribed<K> {
    /// Subscribers to created and changed objects: controllers of the kind itself.
    applied: Vec<UnboundedSender<Arc<K>>>,
    /// Subscribers to created, changed and deleted objects: controllers of related kinds.
    touched: Vec<UnboundedSender<Arc<K>>>,
    /// Subscribers to deleted objects only.
    deleted: Vec<UnboundedSender<Arc<K>>>,
    /// Subscribers to objects created or changed after the first list, not to those listed:
    /// what a change frees (a finished run, a slot) every listed object's own pass sees.
    changed: Vec<UnboundedSender<Arc<K>>>,
    /// The indexes of the cache, kept up to date before any subscriber hears of a change.
    indexes: Vec<Arc<dyn Maintained<K>>>,
    /// Where the objects kept out of the cache go, if any are ([`Subscriptions::divert`]).
    diverted: Option<Arc<dyn Diverted<K>>>,
}

impl<K> Default for Subscribed<K> {
    fn default() -> Self {
        Self {
            applied: Vec::new(),
            touched: Vec::new(),
            deleted: Vec::new(),
            changed: Vec::new(),
            indexes: Vec::new(),
            diverted: None,
        }
    }
}

/// A watch's cache, and the subscriptions to its changes, for the controllers being wired
/// before it starts.
pub(super) struct Subscriptions<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    subscribed: Arc<Mutex<Subscribed<K>>>,
    listed: Listed,
}

impl<K> Clone for Subscriptions<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            subscribed: Arc::clone(&self.subscribed),
            listed: self.listed.clone(),
        }
    }
}

impl<K> Subscriptions<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// The cache the watch fills.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Whether the watch has listed.
    pub fn listed(&self) -> Listed {
        self.listed.clone()
    }

    /// The objects created or changed, for the controller of the kind: a deleted object has
    /// nothing left to reconcile.
    pub fn applied(&self) -> UnboundedReceiver<Arc<K>> {
        self.subscribe(|subscribed| &mut subscribed.applied)
    }

    /// The objects created, changed or deleted, for the controllers of the kinds that
    /// depend on this one: a deleted Secret or pod changes what its dependants are.
    pub fn touched(&self) -> UnboundedReceiver<Arc<K>> {
        self.subscribe(|subscribed| &mut subscribed.touched)
    }

    /// The objects deleted: what frees what they held (a run's slot under a cap).
    pub fn deleted(&self) -> UnboundedReceiver<Arc<K>> {
        self.subscribe(|subscribed| &mut subscribed.deleted)
    }

    /// The objects created or changed by watch events, never those of a list (the first, or
    /// a relist): for what a change frees rather than what an object is.
    pub fn changed(&self) -> UnboundedReceiver<Arc<K>> {
        self.subscribe(|subscribed| &mut subscribed.changed)
    }

    /// Keeps `index` up to date with the cache from the watch's first list on.
    pub fn maintain(&self, index: Arc<dyn Maintained<K>>) {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .indexes
            .push(index);
    }

    /// Keeps the objects `diverted` takes out of the cache: one listed is left out of the
    /// list, one changed into one it takes leaves the cache as if deleted (so that what it
    /// held is freed: a finished run's slot), and no controller of the kind is handed
    /// either.
    pub fn divert(&self, diverted: Arc<dyn Diverted<K>>) {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .diverted = Some(diverted);
    }

    fn subscribe(
        &self,
        list: impl FnOnce(&mut Subscribed<K>) -> &mut Vec<UnboundedSender<Arc<K>>>,
    ) -> UnboundedReceiver<Arc<K>> {
        let (sender, receiver) = unbounded();
        let mut subscribed = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list(&mut subscribed).push(sender);
        receiver
    }
}

impl<C> Subscriptions<C>
where
    C: Indexed + Resource + Clone + 'static,
    C::DynamicType: Eq + Hash + Clone,
    C::Object: 'static,
{
    /// An index of the cached objects under the names `keys` gives each, kept by this watch.
    pub fn index(&self, keys: fn(&C::Object) -> Vec<String>) -> Index<C::Object> {
        let index = Index::new(keys);
        self.maintain(Arc::new(index.clone()));
        index
    }
}

impl<K> SharedWatch<K>
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    /// The watch of the `K`s `api` can see that `config` selects, cached without what no
    /// reader looks at ([`forget_unread_metadata`]).
    pub fn new(kind: &'static str, api: kube::Api<K>, config: watcher::Config) -> Self {
        Self::with_type(kind, api, config, Default::default())
    }
}

impl<K> SharedWatch<K>
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// [`SharedWatch::new`] for a kind known at run time (agent-sandbox's `Sandbox`).
    pub fn with_type(
        kind: &'static str,
        api: kube::Api<K>,
        config: watcher::Config,
        dyntype: K::DynamicType,
    ) -> Self {
        let events = watcher(api, config)
            .backoff(WatchBackoff::new())
            .modify(|object| forget_unread_metadata(object.meta_mut()))
            .boxed();
        Self {
            kind,
            events,
            writer: Writer::new(dyntype.clone()),
            dyntype,
            subscribed: Arc::default(),
            listed: tokio::sync::watch::Sender::new(false),
            settled: |_| false,
        }
    }

    /// The watch, handing what leaves its cache (an object deleted, or diverted once
    /// changed) to the subscribers of `other`'s deletes too: for a second watch of the same
    /// kind that selects what leaves `other`'s selection (a finished phase of the runs), so
    /// that what a finished run frees is heard once it is kept where it goes.
    fn telling_deletes_to(self, other: &Subscriptions<K>) -> Self {
        let (touched, deleted) = {
            let other = other
                .subscribed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (other.touched.clone(), other.deleted.clone())
        };
        let mut mine = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        mine.touched.extend(touched);
        mine.deleted.extend(deleted);
        drop(mine);
        self
    }

    /// The watch, handing on the objects `settled` picks after the others when it lists.
    pub fn settling(mut self, settled: fn(&K) -> bool) -> Self {
        self.settled = settled;
        self
    }

    /// The watch with `trim` applied to each object before it is cached and handed on:
    /// for the fields no reader of the kind needs.
    pub fn trimmed(mut self, mut trim: impl FnMut(&mut K) + Send + 'static) -> Self {
        self.events = self.events.modify(move |object| trim(object)).boxed();
        self
    }

    /// The watch without the objects of namespaces outside `shards`, dropped before they
    /// are cached or handed on (the API server cannot select namespaces by shard, so every
    /// event still arrives and is decoded); cluster-scoped objects pass. `None`: all pass.
    pub fn sharded(mut self, shards: Option<ShardFilter>) -> Self {
        if let Some(shards) = shards {
            self.events = self
                .events
                .filter(move |event| std::future::ready(kept(&shards, event)))
                .boxed();
        }
        self
    }

    /// The cache this watch fills.
    pub fn store(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// See [`Subscriptions::touched`].
    pub fn touched(&self) -> UnboundedReceiver<Arc<K>> {
        self.subscriptions().touched()
    }

    /// Its cache and the subscriptions to its changes.
    pub fn subscriptions(&self) -> Subscriptions<K> {
        Subscriptions {
            store: self.store(),
            subscribed: Arc::clone(&self.subscribed),
            listed: Listed(self.listed.subscribe()),
        }
    }

    /// Starts the watch: the future that runs it until `shutdown` and then closes the
    /// subscribers' channels, and the one that finishes once it has listed.
    pub fn start(self, health: Arc<WatchHealth>, shutdown: Stop) -> Started {
        let ready = Box::pin(Listed(self.listed.subscribe()).wait());
        (self.run(health, shutdown), ready)
    }

    fn run(self, health: Arc<WatchHealth>, shutdown: Stop) -> BoxFuture<'static, ()> {
        let Self {
            kind,
            events,
            mut writer,
            dyntype,
            subscribed,
            listed,
            settled,
        } = self;
        let mut subscribed =
            std::mem::take(&mut *subscribed.lock().unwrap_or_else(PoisonError::into_inner));
        let cache = writer.as_reader();
        let mut events = match subscribed.diverted.clone() {
            Some(diverted) => events
                .filter_map(move |event| std::future::ready(divert(diverted.as_ref(), event)))
                .boxed(),
            None => events,
        };
        async move {
            let watching = async {
                while let Some(event) = events.next().await {
                    match event {
                        Ok(event) => {
                            let list_ended = matches!(event, watcher::Event::InitDone);
                            let before = cached_before(&event, &cache, &dyntype);
                            writer.apply_watcher_event(&event);
                            let changed = Changed { event, before };
                            fan_out(changed, &cache, &dyntype, settled, &mut subscribed);
                            if list_ended {
                                listed.send_replace(true);
                            }
                        }
                        Err(error) if expired(&error) => {
                            tracing::debug!(kind, "watch expired; relisting");
                        }
                        Err(error) => {
                            let error = Chain(&error).to_string();
                            tracing::warn!(kind, error, "watch failed; retrying");
                            health.failed(kind, error, Instant::now());
                        }
                    }
                }
            };
            tokio::select! {
                () = watching => {}
                () = shutdown => {}
            }
        }
        .boxed()
    }
}

/// `event` as the cache takes it once `diverted` has kept what it takes: a listed object
/// it keeps is left out of the list (`None`), a changed one it keeps leaves the cache as a
/// delete; a delete, and a change to an object it does not keep, are passed on for it to
/// forget too.
fn divert<K>(
    diverted: &dyn Diverted<K>,
    event: watcher::Result<watcher::Event<K>>,
) -> Option<watcher::Result<watcher::Event<K>>> {
    let event = match event {
        Ok(event) => event,
        Err(error) => return Some(Err(error)),
    };
    let event = match event {
        watcher::Event::Init => {
            diverted.listing();
            watcher::Event::Init
        }
        watcher::Event::InitApply(object) if diverted.keep(&object) => return None,
        watcher::Event::InitDone => {
            diverted.listed();
            watcher::Event::InitDone
        }
        watcher::Event::Apply(object) if diverted.keep(&object) => watcher::Event::Delete(object),
        watcher::Event::Apply(object) => {
            diverted.forget(&object);
            watcher::Event::Apply(object)
        }
        watcher::Event::Delete(object) => {
            diverted.forget(&object);
            watcher::Event::Delete(object)
        }
        listed @ watcher::Event::InitApply(_) => listed,
    };
    Some(Ok(event))
}

/// Whether `shards` keeps the object of a watch event; the events without one (the start and
/// end of a list, errors) are kept.
fn kept<K: Resource>(shards: &ShardFilter, event: &watcher::Result<watcher::Event<K>>) -> bool {
    match event {
        Ok(
            watcher::Event::Apply(object)
            | watcher::Event::InitApply(object)
            | watcher::Event::Delete(object),
        ) => shards.keeps(object.meta().namespace.as_deref()),
        _ => true,
    }
}

/// A watch event, and what the cache held of its object before it: the indexes take an
/// object out from under the keys it gave then.
struct Changed<K> {
    event: watcher::Event<K>,
    before: Option<Arc<K>>,
}

/// What `cache` holds of the object of `event`, before it takes the event (nothing for the
/// events of a list, which the cache takes whole at its end).
fn cached_before<K>(
    event: &watcher::Event<K>,
    cache: &Store<K>,
    dyntype: &K::DynamicType,
) -> Option<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    match event {
        watcher::Event::Apply(object) | watcher::Event::Delete(object) => cache.get(
            &reflector::ObjectRef::from_obj_with(object, dyntype.clone()),
        ),
        _ => None,
    }
}

/// Hands the objects of one event, already applied to `cache`, to the subscribers that want
/// them; a subscriber whose controller has stopped is dropped. A created or changed object
/// is handed on as the cache holds it; a listed one when the list is complete, which is
/// when the cache takes the list, the `settled` ones last.
fn fan_out<K>(
    Changed { event, before }: Changed<K>,
    cache: &Store<K>,
    dyntype: &K::DynamicType,
    settled: fn(&K) -> bool,
    subscribers: &mut Subscribed<K>,
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    match event {
        watcher::Event::Init | watcher::Event::InitApply(_) => {}
        watcher::Event::InitDone => {
            let listed = cache.state();
            for index in &subscribers.indexes {
                index.relisted(&listed);
            }
            let (last, first): (Vec<_>, Vec<_>) = listed.iter().partition(|object| settled(object));
            for object in first.into_iter().chain(last) {
                subscribers.applied_or_touched(object);
            }
        }
        watcher::Event::Apply(object) => {
            let key = reflector::ObjectRef::from_obj_with(&object, dyntype.clone());
            let object = cache.get(&key).unwrap_or_else(|| Arc::new(object));
            for index in &subscribers.indexes {
                index.applied(before.as_deref(), &object);
            }
            subscribers.applied_or_touched(&object);
            subscribers.changed.retain(sender(&object));
        }
        watcher::Event::Delete(object) => {
            if let Some(before) = &before {
                for index in &subscribers.indexes {
                    index.deleted(before);
                }
            }
            let object = Arc::new(object);
            let send = sender(&object);
            subscribers.touched.retain(&send);
            subscribers.deleted.retain(send);
        }
    }
}

impl<K> Subscribed<K> {
    fn applied_or_touched(&mut self, object: &Arc<K>) {
        let send = sender(object);
        self.touched.retain(&send);
        self.applied.retain(send);
    }
}

/// Sends `object` to a subscriber; false when its controller has stopped.
fn sender<K>(object: &Arc<K>) -> impl Fn(&UnboundedSender<Arc<K>>) -> bool + '_ {
    |subscriber| subscriber.unbounded_send(Arc::clone(object)).is_ok()
}

/// A watch the API server ended with 410 Gone: it no longer holds the version the watch
/// resumed from (etcd compacted it, or an upgrade replaced a CRD's storage). The watcher
/// relists at once, as every client must from time to time: routine, not a failure to warn
/// about or to count against the watch's health.
fn expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn a_cached_object_keeps_no_managed_fields_and_no_copy_of_what_kubectl_applied() {
        let mut meta = ObjectMeta {
            name: Some("run-1".into()),
            labels: Some([("team".to_string(), "a".to_string())].into()),
            annotations: Some(
                [
                    (LAST_APPLIED.to_string(), r#"{"spec":{}}"#.to_string()),
                    ("team.example/ticket".to_string(), "OPS-1".to_string()),
                ]
                .into(),
            ),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            ..ObjectMeta::default()
        };
        forget_unread_metadata(&mut meta);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(
            meta.annotations,
            Some([("team.example/ticket".to_string(), "OPS-1".to_string())].into())
        );
        assert_eq!(
            meta.labels,
            Some([("team".to_string(), "a".to_string())].into())
        );

        let mut applied_only = ObjectMeta {
            annotations: Some([(LAST_APPLIED.to_string(), "{}".to_string())].into()),
            ..ObjectMeta::default()
        };
        forget_unread_metadata(&mut applied_only);
        assert_eq!(applied_only.annotations, None);
    }

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn names(receiver: &mut UnboundedReceiver<Arc<ConfigMap>>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(object) = receiver.try_recv() {
            names.push(object.metadata.name.clone().unwrap_or_default());
        }
        names
    }

    #[test]
    fn a_sharded_watch_drops_other_shards_objects_and_keeps_the_lists_bounds() {
        use agentic_core::shard::Shards;
        let shards = Shards::new(2);
        let owned = ShardFilter::new(shards, [0].into());
        let in_namespace = |namespace: &str| ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        for namespace in ["team-a", "team-b", "platform", "default"] {
            let ours = shards.of(namespace) == 0;
            for event in [
                watcher::Event::Apply(in_namespace(namespace)),
                watcher::Event::InitApply(in_namespace(namespace)),
                watcher::Event::Delete(in_namespace(namespace)),
            ] {
                assert_eq!(kept(&owned, &Ok(event)), ours, "{namespace}");
            }
        }
        let cluster_scoped = ConfigMap::default();
        assert!(kept(&owned, &Ok(watcher::Event::Apply(cluster_scoped))));
        assert!(kept::<ConfigMap>(&owned, &Ok(watcher::Event::Init)));
        assert!(kept::<ConfigMap>(&owned, &Ok(watcher::Event::InitDone)));
    }

    #[test]
    fn an_expired_watch_is_routine_and_other_watch_errors_are_not() {
        let status = |code| {
            kube::core::Status::failure("too old resource version: 555 (556)", "Expired")
                .with_code(code)
                .boxed()
        };
        assert!(expired(&watcher::Error::WatchError(status(410))));
        assert!(!expired(&watcher::Error::WatchError(status(500))));
        assert!(!expired(&watcher::Error::WatchError(status(403))));
        assert!(!expired(&watcher::Error::NoResourceVersion));
    }

    /// A ConfigMap named `settled-…` is settled.
    fn settled(map: &ConfigMap) -> bool {
        map.metadata
            .name
            .as_deref()
            .is_some_and(|name| name.starts_with("settled"))
    }

    #[test]
    fn after_a_list_the_settled_objects_are_handed_on_last() {
        let (applied_tx, mut applied_rx) = unbounded();
        let mut writer = Writer::default();
        let mut subscribers = Subscribed {
            applied: vec![applied_tx],
            ..Subscribed::default()
        };
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(config_map("settled-a")),
            watcher::Event::InitApply(config_map("live-b")),
            watcher::Event::InitApply(config_map("settled-c")),
            watcher::Event::InitApply(config_map("live-d")),
            watcher::Event::InitDone,
        ] {
            deliver(event, &mut writer, &mut subscribers);
        }
        let handed = names(&mut applied_rx);
        assert_eq!(handed.len(), 4);
        assert!(
            handed[..2].iter().all(|name| name.starts_with("live")),
            "{handed:?}"
        );
    }

    /// Applies `event` to the cache as the watch does, then hands it on.
    fn deliver(
        event: watcher::Event<ConfigMap>,
        writer: &mut Writer<ConfigMap>,
        subscribers: &mut Subscribed<ConfigMap>,
    ) {
        let cache = writer.as_reader();
        let before = cached_before(&event, &cache, &());
        writer.apply_watcher_event(&event);
        fan_out(Changed { event, before }, &cache, &(), settled, subscribers);
    }

    /// [`deliver`] to subscribers of applied objects only.
    fn deliver_to_applied(
        event: watcher::Event<ConfigMap>,
        writer: &mut Writer<ConfigMap>,
        applied: Vec<UnboundedSender<Arc<ConfigMap>>>,
    ) -> Subscribed<ConfigMap> {
        let mut subscribers = Subscribed {
            applied,
            ..Subscribed::default()
        };
        deliver(event, writer, &mut subscribers);
        subscribers
    }

    /// Keeps the ConfigMaps named `done-…` out of the cache, and what it was told.
    #[derive(Default)]
    struct KeepsDone(Mutex<Vec<String>>);

    impl KeepsDone {
        fn heard(&self, what: String) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(what);
        }

        /// What it heard so far, in order.
        fn told(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    impl Diverted<ConfigMap> for KeepsDone {
        fn keep(&self, object: &ConfigMap) -> bool {
            let name = object.metadata.name.clone().unwrap_or_default();
            let kept = name.starts_with("done");
            if kept {
                self.heard(format!("keep {name}"));
            }
            kept
        }
        fn listing(&self) {
            self.heard("listing".into());
        }
        fn listed(&self) {
            self.heard("listed".into());
        }
        fn forget(&self, object: &ConfigMap) {
            self.heard(format!(
                "forget {}",
                object.metadata.name.clone().unwrap_or_default()
            ));
        }
    }

    #[test]
    fn a_diverted_object_stays_out_of_the_cache_and_of_the_kinds_controller() {
        let diverted = KeepsDone::default();
        let (applied_tx, mut applied_rx) = unbounded();
        let (deleted_tx, mut deleted_rx) = unbounded();
        let mut subscribers = Subscribed {
            applied: vec![applied_tx],
            deleted: vec![deleted_tx],
            ..Subscribed::default()
        };
        let mut writer = Writer::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(config_map("done-listed")),
            watcher::Event::InitApply(config_map("live")),
            watcher::Event::InitDone,
            // A live object that ends: out of the cache, heard of as deleted.
            watcher::Event::Apply(config_map("live")),
            watcher::Event::Apply(config_map("done-now")),
            watcher::Event::Delete(config_map("done-listed")),
        ] {
            if let Some(Ok(event)) = divert(&diverted, Ok(event)) {
                deliver(event, &mut writer, &mut subscribers);
            }
        }
        let cached: Vec<String> = writer
            .as_reader()
            .state()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(cached, ["live"]);
        assert_eq!(names(&mut applied_rx), ["live", "live"]);
        assert_eq!(names(&mut deleted_rx), ["done-now", "done-listed"]);
        let heard = diverted.told();
        assert_eq!(
            heard,
            [
                "listing",
                "keep done-listed",
                "listed",
                "forget live",
                "keep done-now",
                "forget done-listed"
            ]
        );
    }

    /// A watch of ConfigMaps that never reaches an API server: only its subscriptions and
    /// hand-offs are used.
    fn unwatched() -> SharedWatch<ConfigMap> {
        let never = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, tower::BoxError>("not called".into())
        });
        let api = Api::namespaced(Client::new(never, "ns"), "ns");
        SharedWatch::new("ConfigMap", api, watcher::Config::default())
    }

    #[tokio::test]
    async fn a_second_watch_tells_the_firsts_followers_of_what_it_takes_in_once_kept() {
        // The live objects' watch, followed by a controller of the kind and by others.
        let live = unwatched();
        let followed = live.subscriptions();
        let mut applied = followed.applied();
        let mut touched = followed.touched();
        let mut deleted = followed.deleted();
        // The finished objects' watch, which keeps them all apart.
        let finished = unwatched();
        let kept = Arc::new(KeepsDone::default());
        finished.subscriptions().divert(kept.clone());
        let finished = finished.telling_deletes_to(&followed);
        let mut subscribers = std::mem::take(
            &mut *finished
                .subscribed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let diverted = subscribers.diverted.clone().expect("a diversion");
        let mut writer = Writer::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(config_map("done-listed")),
            watcher::Event::InitDone,
            watcher::Event::Apply(config_map("done-now")),
        ] {
            if let Some(Ok(event)) = divert(diverted.as_ref(), Ok(event)) {
                deliver(event, &mut writer, &mut subscribers);
            }
        }
        // Listed: kept, nobody told. Finished now: kept first, then the followers hear.
        assert!(writer.as_reader().state().is_empty());
        assert_eq!(names(&mut touched), ["done-now"]);
        assert_eq!(names(&mut deleted), ["done-now"]);
        assert!(names(&mut applied).is_empty(), "not the kind's controller");
        let heard = kept.told();
        assert_eq!(
            heard,
            ["listing", "keep done-listed", "listed", "keep done-now"]
        );
    }

    #[test]
    fn each_subscriber_gets_what_it_follows() {
        let (applied_tx, mut applied_rx) = unbounded();
        let (touched_tx, mut touched_rx) = unbounded();
        let (deleted_tx, mut deleted_rx) = unbounded();
        let mut subscribers = Subscribed {
            applied: vec![applied_tx],
            touched: vec![touched_tx],
            deleted: vec![deleted_tx],
            ..Subscribed::default()
        };
        let mut writer = Writer::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(config_map("listed")),
            watcher::Event::InitDone,
            watcher::Event::Apply(config_map("changed")),
            watcher::Event::Delete(config_map("deleted")),
        ] {
            deliver(event, &mut writer, &mut subscribers);
        }
        assert_eq!(names(&mut applied_rx), ["listed", "changed"]);
        assert_eq!(names(&mut touched_rx), ["listed", "changed", "deleted"]);
        assert_eq!(names(&mut deleted_rx), ["deleted"]);
    }

    #[test]
    fn a_subscriber_gets_the_cached_object_itself_not_a_copy() {
        let (applied_tx, mut applied_rx) = unbounded();
        let mut writer = Writer::default();
        deliver_to_applied(
            watcher::Event::Apply(config_map("a")),
            &mut writer,
            vec![applied_tx],
        );
        let handed = applied_rx.try_recv().expect("an object");
        let cached = writer
            .as_reader()
            .get(&reflector::ObjectRef::new("a").within("ns"))
            .expect("cached");
        assert!(Arc::ptr_eq(&handed, &cached));
    }

    #[test]
    fn a_subscriber_that_stopped_is_dropped_and_the_others_still_get_events() {
        let (gone, _) = unbounded();
        let (kept, mut kept_rx) = unbounded();
        let subscribers = deliver_to_applied(
            watcher::Event::Apply(config_map("a")),
            &mut Writer::default(),
            vec![gone, kept],
        );
        assert_eq!(subscribers.applied.len(), 1);
        assert_eq!(names(&mut kept_rx), ["a"]);
    }
}
