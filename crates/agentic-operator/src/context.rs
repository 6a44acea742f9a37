//! What every controller shares: the client, the registry and skill cache, events, metrics,
//! and per-object backoff.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentic_core::conditions::truncate;
use agentic_core::reasons::EventReason;
use agentic_core::sandbox::TtlDefaults;
use agentic_oci::{RegistryClient, SkillCache};
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Reporter};
use kube::{Resource, ResourceExt};

use crate::backoff::{Backoff, ObjectKey};
use crate::caches::Caches;
use crate::error::{Chain, Error};
use crate::metrics::Metrics;
use crate::recorder::{Publish, Series, SeriesKey};
use crate::written::WrittenStatuses;

/// The one field manager for every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "agentic-operator";

/// Which object creates a run's sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxBackend {
    /// An `agents.x-k8s.io/v1beta1` Sandbox, run by the agent-sandbox controller.
    AgentSandbox,
    /// A plain Pod.
    Pod,
}

/// Settings of the controllers that come from the command line.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Connections, authorizations and request counts shared by every registry read.
    pub registry: RegistryClient,
    /// How git servers are reached (insecure hosts, timeouts, limits).
    pub git: agentic_git::GitOptions,
    pub sandbox_backend: SandboxBackend,
    /// How often image tags are resolved again to notice a new digest.
    pub tag_refresh_interval: Duration,
    /// What runs get when they do not set their own limits.
    pub run_defaults: RunDefaults,
    /// The most objects of one kind reconciled at once (SkillCards aside); 0 for no bound.
    pub reconcile_concurrency: u16,
    /// The namespace whose SkillCollections labelled `konveyor.io/default-skills: "true"`
    /// apply to every Agent of the cluster.
    pub default_skills_namespace: Option<String>,
    /// What fetches git skills into sandboxes: the operator's own image; `None` without
    /// `--operator-image`, and runs with git skills wait.
    pub skill_fetcher: Option<agentic_core::sandbox::SkillFetcher>,
    /// `--credential-proxy`, and the operator's image the proxy runs from.
    pub credential_proxy: agentic_core::sandbox::CredentialProxy,
    /// How Ready Agents' skill images are pulled onto the nodes before their first run;
    /// `None` with `--skill-prefetch=off` or without `--operator-image`.
    pub skill_prefetch: Option<agentic_core::prefetch::PrefetchSettings>,
    /// The operator's trace receiver as sandboxes reach it (`--otlp-advertised-address`);
    /// None: agents get no `OTEL_*` variables.
    pub trace_receiver: Option<agentic_core::sandbox::TraceReceiver>,
    /// How long a pass that judges trust waits for the trust-policy watches' first list
    /// before it fails closed ([`TRUST_POLICY_LIST_WAIT`]).
    pub trust_policy_list_wait: Duration,
    /// Where runs' traces go (`--trace-collector`); `None`: nowhere.
    pub trace_export: Option<Arc<crate::traces::TraceExport>>,
}

/// At start the cards' watch may list before the trust policies'; a card judged before they
/// are known would be judged as if there were none. A pass waits this long for them.
pub const TRUST_POLICY_LIST_WAIT: Duration = Duration::from_secs(5);

/// The operator's defaults for the lifecycle of runs, from the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunDefaults {
    /// Seconds a run's agent may take to start when the run does not say; 0 for no limit.
    pub startup_deadline_seconds: u64,
    /// How long finished runs without `spec.ttlSecondsAfterFinished` are kept.
    pub ttl: TtlDefaults,
    /// The most runs active at once in one namespace, whatever their Agent; `None` for no
    /// limit.
    pub max_concurrent_runs_per_namespace: Option<u32>,
    /// How often objects labelled for runs that no longer exist are looked for and deleted
    /// (besides once at start); `None` never.
    pub orphan_sweep_interval: Option<Duration>,
}

impl Default for RunDefaults {
    fn default() -> Self {
        Self {
            startup_deadline_seconds: DEFAULT_STARTUP_DEADLINE_SECONDS,
            ttl: TtlDefaults::default(),
            max_concurrent_runs_per_namespace: None,
            orphan_sweep_interval: Some(DEFAULT_ORPHAN_SWEEP_INTERVAL),
        }
    }
}

/// Ten minutes: enough for a large harness image on a slow registry, short enough that a
/// run stuck unschedulable fails within the hour someone waits for it.
pub const DEFAULT_STARTUP_DEADLINE_SECONDS: u64 = 600;

/// Five minutes: the garbage collector normally deletes a run's objects with it, so the
/// sweep is a backstop, and a pass costs a few metadata-only lists.
pub const DEFAULT_ORPHAN_SWEEP_INTERVAL: Duration = Duration::from_secs(300);

/// How many objects of one kind are reconciled at once by default (`--reconcile-concurrency`).
/// A pass mostly waits for the API server: 32 keep it busy (16 left it idle between
/// requests, see docs/performance.md) without crowding out its other clients, and bound the
/// memory of passes in flight.
pub const DEFAULT_RECONCILE_CONCURRENCY: u16 = 32;

/// Shared state of all controllers.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub skills: SkillCache,
    /// Tag resolutions, shared by the SkillCards that name the same reference.
    pub resolutions: agentic_oci::Resolutions,
    /// Verdicts on git skills by repository, commit and subPath.
    pub git_skills: agentic_git::SkillCache,
    pub metrics: Arc<Metrics>,
    /// The Events that can repeat (a pass failing again and again), for their series.
    series: std::sync::Mutex<Series>,
    /// Who the Events come from.
    reporter: Reporter,
    backoff: Backoff,
    /// What each kind keeps between its passes, by type: the kinds own their state's types,
    /// so the context names none of them.
    kind_states: std::sync::Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// The controllers' watch caches, by the namespace they watch (`None`: every namespace).
    caches: std::sync::RwLock<Vec<(Option<String>, Caches)>>,
    /// The statuses this process wrote that the watch caches do not show yet.
    pub written: WrittenStatuses,
    /// The shards this replica serves, when the work is split (`--shards`); `None`: every
    /// namespace.
    shards: Option<crate::shards::ShardFilter>,
}

/// The Events API rejects notes over 1 kB.
const MAX_EVENT_NOTE_BYTES: usize = 1000;
/// The `action` of every Event the operator posts.
const EVENT_ACTION: &str = "Reconcile";
/// Skills (digest and subPath) kept validated in memory; each entry holds one SKILL.md.
const SKILL_CACHE_ENTRIES: usize = 4096;

impl Context {
    pub fn new(client: Client, settings: Settings, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            series: std::sync::Mutex::default(),
            reporter,
            skills: SkillCache::new(SKILL_CACHE_ENTRIES),
            resolutions: agentic_oci::Resolutions::default(),
            git_skills: agentic_git::SkillCache::new(SKILL_CACHE_ENTRIES),
            client,
            settings,
            metrics,
            backoff: Backoff::default(),
            kind_states: std::sync::Mutex::default(),
            caches: std::sync::RwLock::default(),
            written: WrittenStatuses::default(),
            shards: None,
        }
    }

    /// This context, serving the namespaces of the shards `filter` keeps only.
    #[must_use]
    pub fn with_shards(mut self, filter: crate::shards::ShardFilter) -> Self {
        self.shards = Some(filter).filter(|filter| !filter.is_everything());
        self
    }

    /// The shards served, when this replica serves part of the namespaces.
    pub fn shards(&self) -> Option<&crate::shards::ShardFilter> {
        self.shards.as_ref()
    }

    /// Whether the objects of `namespace` are this replica's to reconcile.
    pub fn serves(&self, namespace: &str) -> bool {
        self.shards
            .as_ref()
            .is_none_or(|filter| filter.keeps(Some(namespace)))
    }

    /// The state a kind keeps between passes: one `T` per context, made on first use.
    pub fn kind_state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut states = self
            .kind_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = states
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()));
        match Arc::clone(entry).downcast::<T>() {
            Ok(state) => state,
            // The entry of `T`'s TypeId is always a `T`; were it not, a fresh one keeps this
            // total rather than a panic.
            Err(_) => {
                let state = Arc::new(T::default());
                *entry = state.clone();
                state
            }
        }
    }

    /// Keeps the watch caches of the controllers of `namespace` (`None`: of every namespace)
    /// for [`Context::caches`].
    pub fn register_caches(&self, namespace: Option<&str>, caches: Caches) {
        self.caches
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((namespace.map(str::to_string), caches));
    }

    /// The watch caches that hold the objects of `namespace`, if it is watched.
    pub fn caches(&self, namespace: &str) -> Option<Caches> {
        self.caches
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(watched, _)| watched.as_deref().is_none_or(|w| w == namespace))
            .map(|(_, caches)| caches.clone())
    }

    /// The watch caches of every namespace, when the operator watches them all (not with
    /// `--namespaces`) and serves them all (not a replica serving some shards).
    pub fn caches_of_every_namespace(&self) -> Option<Caches> {
        if self.shards.is_some() {
            return None;
        }
        self.caches
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(watched, _)| watched.is_none())
            .map(|(_, caches)| caches.clone())
    }

    /// Publishes an event about `obj` that can repeat, such as a pass failing again: a
    /// repeat within six minutes counts on the first Event's `series` instead of posting
    /// another (see [`crate::recorder`]). Failing to publish is logged, never fatal.
    pub async fn publish<K>(&self, obj: &K, type_: EventType, reason: EventReason, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = self.event(obj, type_, reason.as_str(), &note);
        let Some(regarding) = event.regarding.as_ref() else {
            return;
        };
        let key = SeriesKey::new(regarding, reason.as_str(), type_ == EventType::Warning);
        let namespace = regarding.namespace.clone().unwrap_or_default();
        let api: Api<events::Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = std::time::Instant::now();
        let decision = self.series().observe(&key, now);
        if let Publish::Repeat { name, count } = decision {
            let series = serde_json::json!({"series": {
                "count": count,
                "lastObservedTime": MicroTime(k8s_openapi::jiff::Timestamp::now()),
            }});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                .await
            {
                Ok(_) => {
                    self.series().posted(key, name, count, now);
                    return;
                }
                // The Event expired on the server (an hour by default): start a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => self.series().forget(&key),
                Err(e) => {
                    event_failed(obj, &e);
                    return;
                }
            }
        }
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => {
                if let Some(name) = created.metadata.name {
                    self.series().posted(key, name, 1, now);
                }
            }
            Err(e) => event_failed(obj, &e),
        }
    }

    fn series(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes an event about `obj` that a change of its status raises: posted once, and
    /// not remembered for repeats, which a transition does not have. Failing to publish is
    /// logged, never fatal.
    pub async fn publish_transition<K>(&self, obj: &K, type_: EventType, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = self.event(obj, type_, reason, &note);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<events::Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            event_failed(obj, &e);
        }
    }

    /// A new `events.k8s.io/v1` Event about `obj`, named by the server after it.
    fn event<K>(&self, obj: &K, type_: EventType, reason: &str, note: &str) -> events::Event
    where
        K: Resource<DynamicType = ()>,
    {
        let regarding = obj.object_ref(&());
        let namespace = regarding.namespace.clone().unwrap_or_default();
        let controller = &self.reporter.controller;
        events::Event {
            metadata: ObjectMeta {
                // A '-', not kube's recorder's '.': a generated name's prefix must itself be
                // a DNS subdomain but for a trailing dash.
                generate_name: Some(format!("{}-", obj.name_any())),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            action: Some(EVENT_ACTION.to_string()),
            reason: Some(reason.to_string()),
            note: Some(truncate(note, MAX_EVENT_NOTE_BYTES).to_string()),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            regarding: Some(regarding),
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| controller.clone()),
            ),
            ..events::Event::default()
        }
    }

    /// The delay before the next attempt for an object whose reconcile failed: doubles with
    /// every consecutive failure, up to five minutes.
    pub fn backoff<K: Resource>(&self, kind: &'static str, obj: &K, error: &Error) -> Action {
        self.backoff_at_most(kind, obj, error, Duration::MAX)
    }

    /// Like [`Context::backoff`], waiting no longer than `cap` whatever the failure count.
    pub fn backoff_at_most<K: Resource>(
        &self,
        kind: &'static str,
        obj: &K,
        error: &Error,
        cap: Duration,
    ) -> Action {
        Action::requeue(self.failed(kind, obj, error, cap))
    }

    /// Counts and logs a failed pass over `obj`: how long to wait before the next, doubling
    /// with every consecutive failure up to `cap`.
    pub fn failed<K: Resource>(
        &self,
        kind: &'static str,
        obj: &K,
        error: &Error,
        cap: Duration,
    ) -> Duration {
        self.metrics.failed(kind, error.reason());
        let delay = self.backoff.failed(key_of(kind, obj)).min(cap);
        tracing::warn!(
            kind,
            namespace = obj.meta().namespace.as_deref().unwrap_or_default(),
            name = obj.meta().name.as_deref().unwrap_or_default(),
            reason = %error.reason(),
            error = %Chain(error),
            retry_in = ?delay,
            "reconcile failed"
        );
        delay
    }

    /// Forgets an object's failures after a successful pass.
    pub fn succeeded<K: Resource>(&self, kind: &'static str, obj: &K) {
        self.backoff.reset(&key_of(kind, obj));
    }
}

fn key_of<K: Resource>(kind: &'static str, obj: &K) -> ObjectKey {
    let meta = obj.meta();
    (
        kind,
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn event_failed<K: Resource>(obj: &K, error: &kube::Error) {
    tracing::warn!(
        namespace = obj.meta().namespace.as_deref().unwrap_or_default(),
        name = obj.meta().name.as_deref().unwrap_or_default(),
        error = %Chain(error),
        "publishing event failed"
    );
}

#[cfg(test)]
mod tests {
    use agentic_api::{AgentRun, AgentRunSpec};
    use http::Method;

    use super::*;
    use crate::controllers::fake_api::FakeApi;
    use crate::controllers::scenario::context_on;

    fn run(name: &str) -> AgentRun {
        let mut run = AgentRun::new(name, AgentRunSpec::default());
        run.metadata.namespace = Some("ns".into());
        run.metadata.uid = Some(format!("uid-{name}"));
        run
    }

    #[tokio::test]
    async fn a_repeated_failure_counts_on_its_first_event_and_another_reason_posts_anew() {
        let api = FakeApi::default();
        let ctx = context_on(api.client());
        let failing = run("r");
        for attempt in 0..3 {
            let note = format!("attempt {attempt}: the Agent is not there");
            ctx.publish(
                &failing,
                EventType::Warning,
                EventReason::ReconcileFailed,
                note,
            )
            .await;
        }
        ctx.publish(
            &run("other"),
            EventType::Warning,
            EventReason::ReconcileFailed,
            "not there".into(),
        )
        .await;

        let writes: Vec<(Method, String)> = api
            .writes()
            .into_iter()
            .map(|write| (write.method, write.path))
            .collect();
        let events = "/apis/events.k8s.io/v1/namespaces/ns/events";
        let names = api.names::<events::Event>("ns");
        assert_eq!(names.len(), 2, "one Event per object: {names:?}");
        let first = names
            .iter()
            .find(|name| name.starts_with("r-"))
            .expect("the failing run's Event");
        assert_eq!(
            writes,
            [
                (Method::POST, events.to_string()),
                (Method::PATCH, format!("{events}/{first}")),
                (Method::PATCH, format!("{events}/{first}")),
                (Method::POST, events.to_string()),
            ]
        );
        let event: events::Event = api.get("ns", first).expect("the Event");
        let series = event.series.expect("a series");
        assert_eq!(series.count, 3);
        assert_eq!(
            event.note.as_deref(),
            Some("attempt 0: the Agent is not there")
        );
    }
}
