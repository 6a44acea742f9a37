//! The pipeline every controller runs, as code.
//!
//! A kind's pass reads what its object names (dereference), computes the next status with the
//! pure rules of `agentic-core` (decide), creates or updates the objects that status needs
//! (apply), and hands the status back as a [`Pass`]. It never writes its own status. What
//! every pass shares is here, once: [`guarded`] times and counts the pass, raises the Events
//! of the status change and then writes the status in one server-side apply (only when it
//! changed), forgets the object's backoff on success, and raises a Warning Event on failure;
//! [`run_controller`] runs a kind's controller under the common policy.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use agentic_api::{CONDITION_READY, ConditionStatus};
use agentic_core::conditions::find_condition;
use agentic_core::events::StatusEvent;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::PartialObjectMetaExt;
use kube::core::object::HasStatus;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::support::{Stop, namespace_of};
use crate::apply::apply_status;
use agentic_core::reasons::{EventReason, ReconcileErrorReason};

use crate::caches::Guarded;
use crate::context::Context;
use crate::error::{Chain, Error, Result};

/// Where the objects of a kind of this scope are watched and their status written: a
/// namespaced kind's in the watched namespace (or all) and the object's own, a cluster
/// kind's in the cluster.
pub trait KindScope<K>: Sized {
    /// The API a watch of the `K`s in `namespace` (`None`: every namespace) lists from:
    /// through `namespaced` for a namespaced kind (it may select this replica's shards),
    /// `cluster` otherwise.
    fn watch_api(
        cluster: &kube::Client,
        namespaced: &kube::Client,
        namespace: Option<&str>,
    ) -> Api<Guarded<K>>;
    /// The API `object`'s status is written through.
    fn status_api(client: &kube::Client, object: &K, kind: &'static str) -> Result<Api<K>>;
}

impl<K> KindScope<K> for k8s_openapi::NamespaceResourceScope
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    fn watch_api(
        _: &kube::Client,
        client: &kube::Client,
        namespace: Option<&str>,
    ) -> Api<Guarded<K>> {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }

    fn status_api(client: &kube::Client, object: &K, kind: &'static str) -> Result<Api<K>> {
        let namespace = namespace_of(object, kind)?;
        Ok(Api::namespaced(client.clone(), &namespace))
    }
}

impl<K> KindScope<K> for k8s_openapi::ClusterResourceScope
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>,
{
    /// Every scope watches the whole cluster's: they apply in every namespace.
    fn watch_api(client: &kube::Client, _: &kube::Client, _: Option<&str>) -> Api<Guarded<K>> {
        Api::all(client.clone())
    }

    fn status_api(client: &kube::Client, _: &K, _: &'static str) -> Result<Api<K>> {
        Ok(Api::all(client.clone()))
    }
}

/// A kind the operator reconciles, as the pipeline sees it.
pub trait Reconciled:
    Resource<Scope: KindScope<Self>, DynamicType = ()>
    + HasStatus<Status: Serialize + PartialEq + Clone + Default + Send + Sync + 'static>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The kind's name in metrics, logs and Events.
    const KIND: &'static str;

    /// The Events that announce the change from `old` to `new`, raised in this order.
    fn events(old: &Self::Status, new: &Self::Status) -> Vec<StatusEvent>;

    /// The phase `agentic_objects` counts the object in ([`ready_phase`] for a kind with a
    /// `Ready` condition).
    fn phase(&self) -> &'static str;

    /// What the kind records once `new` is written (runs: the metrics of their transitions).
    fn written(&self, _ctx: &Context, _old: &Self::Status, _new: &Self::Status) {}

    /// The field selector of the objects not finished, for a kind whose finished objects
    /// are watched apart where the API server selects them ([`FinishedRunsWatched`]); `None`:
    /// one watch of every object.
    ///
    /// [`FinishedRunsWatched`]: crate::caches::FinishedRunsWatched
    const LIVE_FIELDS: Option<&'static str> = None;

    /// Whether the object's passes only keep time (a finished workflow run's expiry): after a list,
    /// its pass comes after those of the objects that may still change. A settled object's
    /// status is never written again.
    fn settled(&self) -> bool {
        false
    }

    /// Drops from every object what no reader of the kind's cache looks at, before it is
    /// cached (runs: their labels). Nothing by default. Only status is ever written back
    /// from a cached object, so what is dropped here is never lost on the server.
    fn forget_unread(&mut self) {}

    /// Drops from a settled object what no reader of the cache needs, before it is cached:
    /// for a kind whose settled objects are many, kept for days and read for little
    /// (finished workflow runs). Nothing by default. Its passes then see the trimmed object,
    /// which they may never write back: a settled object's status is not written again.
    fn trim_settled(&mut self) {}

    /// Records in `new` the extension fields the object's spec sets and reports those an
    /// update removed since `old` recorded them ([`agentic_core::extensions`]), returning
    /// the Warning Event of a removal. Kinds without extension fields record nothing.
    fn extensions(
        &self,
        _old: &Self::Status,
        _new: &mut Self::Status,
        _now: &Time,
    ) -> Option<StatusEvent> {
        None
    }
}

/// `Ready` or `NotReady`, from an object's `Ready` condition (none yet: `NotReady`).
pub(super) fn ready_phase(conditions: Option<&[Condition]>) -> &'static str {
    let ready = conditions
        .and_then(|c| find_condition(c, CONDITION_READY))
        .is_some_and(|c| c.status == ConditionStatus::True.as_str());
    if ready { "Ready" } else { "NotReady" }
}

/// What a pass hands back: the status it computed and what comes next.
pub struct Pass<S> {
    /// The next status: a function of what the pass read, so a pass that finds nothing new
    /// writes nothing.
    pub status: S,
    /// When to look again without a watch event; or the failure to back off from, once the
    /// status that reports it is written (a registry that does not answer).
    pub next: Result<Action>,
}

impl<S> Pass<S> {
    /// A pass that ends with `status` and looks again as `action` says.
    pub fn then(status: S, action: Action) -> Self {
        Self {
            status,
            next: Ok(action),
        }
    }
}

/// A kind's pass: the object, the operator's context, and the status it starts from.
pub trait Reconcile<K: Reconciled>:
    Fn(Arc<K>, Arc<Context>, K::Status) -> Self::Future + Send + Sync + Copy + 'static
{
    type Future: Future<Output = Result<Pass<K::Status>>> + Send + 'static;
}

impl<K, F, Fut> Reconcile<K> for F
where
    K: Reconciled,
    F: Fn(Arc<K>, Arc<Context>, K::Status) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<Pass<K::Status>>> + Send + 'static,
{
    type Future = Fut;
}

/// One pass over `object`, and the status step every pass ends with: when the status
/// changed, its Events and then one server-side apply. Events go first: a pass that stops
/// in between raises them again rather than losing them. The pass starts from the status
/// this process wrote last when the watch cache does not show it yet
/// ([`crate::written`]).
async fn pass<K: Reconciled>(
    object: Arc<K>,
    ctx: &Arc<Context>,
    reconcile: impl Reconcile<K>,
) -> Result<Action> {
    let cached = object.status().cloned().unwrap_or_default();
    let old = if object.settled() {
        // Nothing writes a settled object's status again, so its cache shows the last status
        // written, though trimmed ([`Reconciled::trim_settled`]) and then never equal to the
        // one remembered, which would be kept for nothing.
        ctx.written.forget(K::KIND, object.as_ref());
        cached.clone()
    } else {
        ctx.written
            .current(K::KIND, object.as_ref(), cached.clone())
    };
    // The object the pass sees carries the status it starts from: code that reads the
    // object's own status (a workflow run's next stage) must agree with `old`.
    let object = if old == cached {
        object
    } else {
        let mut ahead = K::clone(&object);
        *ahead.status_mut() = Some(old.clone());
        Arc::new(ahead)
    };
    let Pass { mut status, next } =
        reconcile(Arc::clone(&object), Arc::clone(ctx), old.clone()).await?;
    let dropped = object.extensions(&old, &mut status, &crate::now());
    if status != old {
        for event in K::events(&old, &status).into_iter().chain(dropped) {
            let type_ = if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            ctx.publish_transition(object.as_ref(), type_, &event.reason, event.note)
                .await;
        }
        let api = <K::Scope as KindScope<K>>::status_api(&ctx.client, object.as_ref(), K::KIND)?;
        apply_status(&api, &object.name_any(), &status).await?;
        ctx.written
            .remember(K::KIND, object.as_ref(), status.clone());
        object.written(ctx, &old, &status);
    }
    next
}

/// Runs a pass on an object that deserialized, timed and counted by result, its backoff
/// forgotten when it succeeds and a Warning event on the object when it fails (the error
/// policy then logs the cause and backs off). One that did not deserialize is reported (a
/// Warning event on it, a log line, the error metric) once per change and left alone, so a
/// malformed object never stops the watch for the others.
pub(super) async fn guarded<K: Reconciled>(
    obj: Arc<Guarded<K>>,
    ctx: Arc<Context>,
    reconcile: impl Reconcile<K>,
) -> Result<Action> {
    let kind = K::KIND;
    match &obj.0 {
        Ok(k) => {
            let object = Arc::new(k.clone());
            let started = Instant::now();
            let result = pass(Arc::clone(&object), &ctx, reconcile).await;
            ctx.metrics
                .reconciled(kind, started.elapsed(), result.is_ok());
            match &result {
                Ok(_) => ctx.succeeded(kind, object.as_ref()),
                Err(error) => {
                    // The cause stays in the operator's log: it can name hosts and ports the
                    // object's author should not learn about.
                    let note = format!(
                        "reconciling {kind} {} failed ({}); it is retried with backoff, and the operator's log has the cause",
                        object.name_any(),
                        error.reason()
                    );
                    ctx.publish(
                        object.as_ref(),
                        EventType::Warning,
                        EventReason::ReconcileFailed,
                        note,
                    )
                    .await;
                }
            }
            result
        }
        Err(invalid) => {
            ctx.metrics
                .failed(kind, ReconcileErrorReason::MalformedObject);
            let name = invalid.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(
                kind,
                namespace = invalid.metadata.namespace.as_deref().unwrap_or_default(),
                name,
                error = %invalid.error,
                "skipping an object that does not match the API schema"
            );
            let note = format!(
                "{kind} {name} does not match the schema this operator reads and is ignored until it is fixed: {}",
                invalid.error
            );
            let object = invalid.metadata.clone().into_request_partial::<K>();
            ctx.publish(
                &object,
                EventType::Warning,
                EventReason::MalformedObject,
                note,
            )
            .await;
            Ok(Action::await_change())
        }
    }
}

/// The error policy of a kind, for guarded objects: one that did not deserialize waits for
/// a change (its pass reported it).
fn guarded_error_policy<K: Clone>(
    obj: Arc<Guarded<K>>,
    error: &Error,
    ctx: Arc<Context>,
    inner: impl FnOnce(Arc<K>, &Error, Arc<Context>) -> Action,
) -> Action {
    match &obj.0 {
        Ok(k) => inner(Arc::new(k.clone()), error, ctx),
        Err(_) => Action::await_change(),
    }
}

/// The error policy of most kinds: [`Context::backoff`], doubling with every consecutive
/// failure.
pub(super) fn backoff<K: Reconciled>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoff(K::KIND, object.as_ref(), error)
}

/// The error policy of the kinds that read a registry or a git server: asked again at least
/// once per tag refresh interval, as the growing backoff (up to minutes) alone kept them
/// stale long after the server was back.
pub(super) fn backoff_within_tag_refresh<K: Reconciled>(
    object: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let cap = ctx.settings.tag_refresh_interval;
    ctx.backoff_at_most(K::KIND, object.as_ref(), error, cap)
}

/// How a kind's controller runs: its pass, its error policy, and how many objects it
/// reconciles at once (0: no bound).
pub(super) struct Policy<R, E> {
    pub reconcile: R,
    pub error_policy: E,
    pub concurrency: u16,
}

impl<K: Reconciled, R> Policy<R, fn(Arc<K>, &Error, Arc<Context>) -> Action> {
    /// The policy of most kinds: [`backoff`] after a failed pass, and at most the configured
    /// `reconcile_concurrency` passes at once.
    pub(super) fn backing_off(reconcile: R, ctx: &Context) -> Self {
        Policy {
            reconcile,
            error_policy: backoff,
            concurrency: ctx.settings.reconcile_concurrency,
        }
    }
}

/// Runs `controller` of the kind `K` under the operator's common policy: graceful shutdown
/// on `stop`, at most `policy.concurrency` reconciles at once, each pass through
/// [`guarded`], and a log line for what its stream reports. Finishes when the controller
/// stops (see [`drive`]). The shared watches it follows own their backoff and the report of
/// their failures ([`super::watches::SharedWatch`]).
pub(super) fn run_controller<K, R, E>(
    controller: Controller<Guarded<K>>,
    cache: Store<Guarded<K>>,
    policy: Policy<R, E>,
    ctx: Arc<Context>,
    stop: &impl Fn() -> Stop,
) -> BoxFuture<'static, ()>
where
    K: Reconciled,
    R: Reconcile<K>,
    E: Fn(Arc<K>, &Error, Arc<Context>) -> Action + Send + Sync + Copy + 'static,
{
    let Policy {
        reconcile,
        error_policy,
        concurrency,
    } = policy;
    // Zero from the start, so that rate() sees the first pass.
    ctx.metrics.precreate_kind(K::KIND);
    let stream = controller
        .with_config(controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(stop())
        .run(
            move |obj, ctx| guarded(obj, ctx, reconcile),
            move |obj, e, ctx| guarded_error_policy(obj, e, ctx, error_policy),
            ctx,
        )
        .for_each(move |result| {
            if let Err(error) = result {
                // A failed pass was logged, and raised as an Event, where it failed; what
                // is left (an object gone before its pass) is routine.
                tracing::debug!(kind = K::KIND, error = %Chain(&error), "controller event");
            }
            futures::future::ready(())
        });
    Box::pin(drive(stream, cache, stop()))
}

/// Drives one controller until it ends. kube-runtime holds a controller's work queue until its
/// watch has listed once, and its graceful shutdown waits for that queue, so a controller
/// whose watch never listed (forbidden, or the API server unreachable) would never stop.
/// Such a controller has nothing in flight: on shutdown it is dropped instead.
async fn drive<K>(
    controller: impl Future<Output = ()>,
    cache: Store<K>,
    shutdown: impl Future<Output = ()>,
) where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let never_listed = async {
        shutdown.await;
        if cache.wait_until_ready().now_or_never().is_none() {
            return;
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = controller => {}
        () = never_listed => tracing::warn!("stopping a controller whose watch never listed"),
    }
}

/// The pipeline against a fake API server (a `tower` service that records each request), as
/// controller-rs tests its reconciler: what a pass writes, in what order, and what it does
/// not write, without a control plane.
#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use agentic_api::{
        AgentWorkflow, AgentWorkflowSpec, AgentWorkflowStatus, CONDITION_READY, ConditionStatus,
    };
    use agentic_core::conditions::Conditions;
    use agentic_core::reasons::AgentWorkflowReason;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use kube::Client;

    use super::*;
    use crate::context::FIELD_MANAGER;

    type Requests = Arc<Mutex<Vec<(String, String)>>>;

    /// A client of a fake API server that records each request as `METHOD path` and its
    /// body, answers a POST with what it was sent, and anything else with `object`.
    fn fake_api(object: &AgentWorkflow) -> (Client, Requests) {
        let requests = Requests::default();
        let recorded = Arc::clone(&requests);
        let object = serde_json::to_vec(object).expect("serializable");
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let recorded = Arc::clone(&recorded);
            let object = object.clone();
            async move {
                let line = format!("{} {}", request.method(), request.uri().path());
                let post = request.method() == http::Method::POST;
                let body = request.into_body().collect().await?.to_bytes();
                recorded
                    .lock()
                    .expect("not poisoned")
                    .push((line, String::from_utf8_lossy(&body).into_owned()));
                let answer = if post { body } else { Bytes::from(object) };
                Ok::<_, tower::BoxError>(http::Response::new(Full::new(answer)))
            }
        });
        (Client::new(service, "ns"), requests)
    }

    fn context(client: Client) -> Arc<Context> {
        crate::controllers::scenario::context_on(client)
    }

    fn workflow(status: Option<AgentWorkflowStatus>) -> AgentWorkflow {
        let mut workflow = AgentWorkflow::new("wf", AgentWorkflowSpec::default());
        workflow.metadata.namespace = Some("ns".into());
        workflow.metadata.generation = Some(1);
        workflow.status = status;
        workflow
    }

    const STATUS_PATH: &str =
        "PATCH /apis/konveyor.io/v1alpha1/namespaces/ns/agentworkflows/wf/status";
    const EVENTS_PATH: &str = "POST /apis/events.k8s.io/v1/namespaces/ns/events";

    /// A pass that finds the workflow Ready.
    async fn ready(
        _: Arc<AgentWorkflow>,
        _: Arc<Context>,
        mut status: AgentWorkflowStatus,
    ) -> Result<Pass<AgentWorkflowStatus>> {
        status.observed_generation = Some(1);
        let at = Time(Timestamp::from_second(1_800_000_000).expect("a time"));
        Conditions::<AgentWorkflowReason>::new(&mut status.conditions, Some(1), at).set(
            CONDITION_READY,
            ConditionStatus::True,
            AgentWorkflowReason::AllAgentsReady,
            "every stage's Agent is Ready",
        );
        Ok(Pass::then(status, Action::await_change()))
    }

    /// A pass that finds the workflow Ready and then fails, as a card whose registry does
    /// not answer does after reporting it.
    async fn ready_then_failed(
        object: Arc<AgentWorkflow>,
        ctx: Arc<Context>,
        status: AgentWorkflowStatus,
    ) -> Result<Pass<AgentWorkflowStatus>> {
        let Pass { status, .. } = ready(object, ctx, status).await?;
        Ok(Pass {
            status,
            next: Err(Error::RegistryUnavailable("AgentWorkflow ns/wf".into())),
        })
    }

    fn lines(requests: &Requests) -> Vec<String> {
        let requests = requests.lock().expect("not poisoned");
        requests.iter().map(|(line, _)| line.clone()).collect()
    }

    #[tokio::test]
    async fn a_changed_status_is_announced_first_and_then_written_once() {
        let object = workflow(None);
        let (client, requests) = fake_api(&object);
        let ctx = context(client);
        let action = pass(Arc::new(object), &ctx, ready).await.expect("a pass");
        assert_eq!(action, Action::await_change());
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH]);
        let requests = requests.lock().expect("not poisoned");
        // A transition's Event is posted whole, and once.
        let event: k8s_openapi::api::events::v1::Event =
            serde_json::from_str(&requests[0].1).expect("an Event");
        assert_eq!(event.reason.as_deref(), Some("AllAgentsReady"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.action.as_deref(), Some("Reconcile"));
        assert_eq!(event.reporting_controller.as_deref(), Some(FIELD_MANAGER));
        assert!(event.reporting_instance.is_some() && event.event_time.is_some());
        assert!(event.series.is_none());
        let regarding = event.regarding.expect("regarding");
        let name = regarding.name.clone().expect("a name");
        assert_eq!(regarding.kind.as_deref(), Some("AgentWorkflow"));
        assert_eq!(event.metadata.generate_name, Some(format!("{name}-")));
        assert_eq!(event.metadata.namespace, regarding.namespace);
        assert!(
            requests[1].1.contains("\"status\":\"True\""),
            "{}",
            requests[1].1
        );
    }

    #[tokio::test]
    async fn a_pass_that_finds_nothing_new_writes_nothing() {
        let first = workflow(None);
        let (client, _) = fake_api(&first);
        let Pass { status, .. } = ready(
            Arc::new(first),
            context(client),
            AgentWorkflowStatus::default(),
        )
        .await
        .expect("a pass");
        let settled = workflow(Some(status));
        let (client, requests) = fake_api(&settled);
        pass(Arc::new(settled), &context(client), ready)
            .await
            .expect("a pass");
        assert_eq!(lines(&requests), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_pass_starts_from_the_status_it_wrote_while_the_cache_is_behind() {
        let object = workflow(None);
        let (client, requests) = fake_api(&object);
        let ctx = context(client);
        pass(Arc::new(object.clone()), &ctx, ready)
            .await
            .expect("a pass");
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH]);
        // The cache still shows the workflow without a status: the next pass starts from the
        // status written, finds nothing new, and neither writes nor announces it again.
        pass(Arc::new(object.clone()), &ctx, ready)
            .await
            .expect("a pass");
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH]);
        // Once the cache shows it, the cache is the source again.
        let Pass { status, .. } = ready(
            Arc::new(object),
            Arc::clone(&ctx),
            AgentWorkflowStatus::default(),
        )
        .await
        .expect("a pass");
        pass(Arc::new(workflow(Some(status))), &ctx, ready)
            .await
            .expect("a pass");
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH]);
    }

    /// A pass that computes from the object's own status, as a workflow run's does.
    async fn from_object(
        object: Arc<AgentWorkflow>,
        _: Arc<Context>,
        _: AgentWorkflowStatus,
    ) -> Result<Pass<AgentWorkflowStatus>> {
        let status = object.status.clone().unwrap_or_default();
        Ok(Pass::then(status, Action::await_change()))
    }

    #[tokio::test]
    async fn the_object_a_pass_sees_carries_the_status_it_wrote_while_the_cache_is_behind() {
        let object = workflow(None);
        let (client, requests) = fake_api(&object);
        let ctx = context(client);
        pass(Arc::new(object.clone()), &ctx, ready)
            .await
            .expect("a pass");
        // Computed from a status-less object, the pass would write an empty status back.
        pass(Arc::new(object), &ctx, from_object)
            .await
            .expect("a pass");
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH]);
    }

    #[tokio::test]
    async fn a_failed_pass_writes_the_status_that_reports_it_and_raises_a_warning() {
        let object = workflow(None);
        let (client, requests) = fake_api(&object);
        let result = guarded(
            Arc::new(Guarded(Ok(object))),
            context(client),
            ready_then_failed,
        )
        .await;
        assert!(
            matches!(result, Err(Error::RegistryUnavailable(_))),
            "{result:?}"
        );
        assert_eq!(lines(&requests), [EVENTS_PATH, STATUS_PATH, EVENTS_PATH]);
        let requests = requests.lock().expect("not poisoned");
        assert!(
            requests[2]
                .1
                .contains(EventReason::ReconcileFailed.as_str()),
            "{}",
            requests[2].1
        );
    }

    #[tokio::test]
    async fn a_malformed_object_is_reported_once_and_never_reconciled() {
        let malformed: Guarded<AgentWorkflow> = serde_json::from_value(serde_json::json!({
            "apiVersion": "konveyor.io/v1alpha1",
            "kind": "AgentWorkflow",
            "metadata": {"name": "wf", "namespace": "ns"},
            "spec": {"stages": "not a list"},
        }))
        .expect("a guard holds what does not deserialize");
        assert!(malformed.0.is_err());
        let (client, requests) = fake_api(&workflow(None));
        let action = guarded(Arc::new(malformed), context(client), ready)
            .await
            .expect("not an error of the pass");
        assert_eq!(action, Action::await_change());
        assert_eq!(lines(&requests), [EVENTS_PATH]);
        let requests = requests.lock().expect("not poisoned");
        assert!(
            requests[0]
                .1
                .contains(EventReason::MalformedObject.as_str()),
            "{}",
            requests[0].1
        );
    }
}
