//! The four controllers and how they are wired to watches.

pub mod agent;
pub mod agentrun;
pub mod gateway;
pub mod skillcard;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentic_api::{Agent, AgentRun, Gateway, SkillCard};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::DynamicObject;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;

use crate::context::{Context, SandboxBackend};
use crate::error::Error;

/// Label every object the operator creates for a run carries, naming the run.
pub use agentic_core::sandbox::RUN_LABEL;

/// Which namespaces the controllers watch.
#[derive(Clone, Debug)]
pub enum Scope {
    All,
    Namespaces(Vec<String>),
}

/// Turns true once every watch has completed its first list.
#[derive(Default)]
pub struct Readiness(AtomicBool);

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
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

/// Runs an inner reconcile on an object that deserialized; one that did not is reported once
/// and left alone, so a malformed object never stops the watch for the others.
async fn guarded<K, F, Fut>(
    obj: Arc<Guarded<K>>,
    ctx: Arc<Context>,
    kind: &'static str,
    inner: F,
) -> Result<Action, Error>
where
    K: Clone,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    match &obj.0 {
        Ok(k) => inner(Arc::new(k.clone()), ctx).await,
        Err(invalid) => {
            ctx.metrics.failed(kind, "MalformedObject");
            tracing::warn!(
                kind,
                namespace = invalid.metadata.namespace.as_deref().unwrap_or_default(),
                name = invalid.metadata.name.as_deref().unwrap_or_default(),
                error = %invalid.error,
                "skipping an object that does not match the API schema"
            );
            Ok(Action::await_change())
        }
    }
}

fn guarded_error_policy<K, F>(
    obj: Arc<Guarded<K>>,
    error: &Error,
    ctx: Arc<Context>,
    inner: F,
) -> Action
where
    K: Clone,
    F: FnOnce(Arc<K>, &Error, Arc<Context>) -> Action,
{
    match &obj.0 {
        Ok(k) => inner(Arc::new(k.clone()), error, ctx),
        Err(_) => Action::await_change(),
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

fn valid<K: Clone>(store: &[Arc<Guarded<K>>]) -> Vec<K> {
    store
        .iter()
        .filter_map(|g| g.0.as_ref().ok().cloned())
        .collect()
}

fn log_result<K: Resource, E: std::fmt::Debug>(
    kind: &'static str,
    result: Result<(ObjectRef<K>, Action), E>,
) {
    if let Err(e) = result {
        tracing::debug!(kind, error = ?e, "controller event");
    }
}

/// Starts every controller for one namespace (or all) and returns futures that run them until
/// `shutdown` turns true, plus futures that finish when each watch has listed once.
pub fn controllers(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    shutdown: watch::Receiver<bool>,
) -> (Vec<BoxFuture<'static, ()>>, Vec<BoxFuture<'static, ()>>) {
    let client = ctx.client.clone();
    let stop = move || {
        let mut rx = shutdown.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let config = watcher::Config::default();
    let mut runs: Vec<BoxFuture<'static, ()>> = Vec::new();
    let mut ready: Vec<BoxFuture<'static, ()>> = Vec::new();

    // SkillCard: re-read when a pull secret changes.
    let cards = Controller::new(
        api_for::<Guarded<SkillCard>>(&client, namespace),
        config.clone(),
    );
    let store = cards.store();
    ready.push(Box::pin(wait_ready(store.clone())));
    let cards = cards
        .watches(
            api_for::<Secret>(&client, namespace),
            config.clone(),
            move |secret| {
                let ns = secret.namespace().unwrap_or_default();
                let name = secret.name_any();
                valid(&store.state())
                    .iter()
                    .filter(|c| c.namespace().as_deref() == Some(ns.as_str()))
                    .filter(|c| c.spec.pull_secrets.iter().flatten().any(|s| s.name == name))
                    .map(|c| guard_ref(ObjectRef::from_obj(c)))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stop())
        .run(
            |obj, ctx| guarded(obj, ctx, skillcard::KIND, skillcard::reconcile),
            |obj, e, ctx| guarded_error_policy(obj, e, ctx, skillcard::error_policy),
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(skillcard::KIND, r) });
    runs.push(Box::pin(cards));

    // Gateway: re-checked when its Secret appears or changes.
    let gateways = Controller::new(
        api_for::<Guarded<Gateway>>(&client, namespace),
        config.clone(),
    );
    let store = gateways.store();
    ready.push(Box::pin(wait_ready(store.clone())));
    let gateways = gateways
        .watches(
            api_for::<Secret>(&client, namespace),
            config.clone(),
            move |secret| {
                let ns = secret.namespace().unwrap_or_default();
                gateway::gateways_using_secret(&valid(&store.state()), &ns, &secret.name_any())
                    .into_iter()
                    .map(guard_ref)
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stop())
        .run(
            |obj, ctx| guarded(obj, ctx, gateway::KIND, gateway::reconcile),
            |obj, e, ctx| guarded_error_policy(obj, e, ctx, gateway::error_policy),
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(gateway::KIND, r) });
    runs.push(Box::pin(gateways));

    // Agent: follows its SkillCards and Gateways through watches.
    let agents = Controller::new(
        api_for::<Guarded<Agent>>(&client, namespace),
        config.clone(),
    );
    let store = agents.store();
    ready.push(Box::pin(wait_ready(store.clone())));
    let card_store = store.clone();
    let agents = agents
        .watches(
            api_for::<Guarded<SkillCard>>(&client, namespace),
            config.clone(),
            move |card| {
                let ns = card.namespace().unwrap_or_default();
                agent::agents_using_skill_card(&valid(&card_store.state()), &ns, &card.name_any())
                    .into_iter()
                    .map(guard_ref)
                    .collect::<Vec<_>>()
            },
        )
        .watches(
            api_for::<Guarded<Gateway>>(&client, namespace),
            config.clone(),
            move |gw| {
                let ns = gw.namespace().unwrap_or_default();
                agent::agents_using_gateway(&valid(&store.state()), &ns, &gw.name_any())
                    .into_iter()
                    .map(guard_ref)
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stop())
        .run(
            |obj, ctx| guarded(obj, ctx, agent::KIND, agent::reconcile),
            |obj, e, ctx| guarded_error_policy(obj, e, ctx, agent::error_policy),
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(agent::KIND, r) });
    runs.push(Box::pin(agents));

    // AgentRun: starts when its Agent turns Ready, follows its sandbox and pod.
    let agent_runs = Controller::new(
        api_for::<Guarded<AgentRun>>(&client, namespace),
        config.clone(),
    );
    let store = agent_runs.store();
    ready.push(Box::pin(wait_ready(store.clone())));
    let pod_config = watcher::Config::default().labels(RUN_LABEL);
    let mut agent_runs = agent_runs
        .watches(
            api_for::<Guarded<Agent>>(&client, namespace),
            config.clone(),
            move |agent| {
                let ns = agent.namespace().unwrap_or_default();
                agentrun::runs_waiting_on_agent(&valid(&store.state()), &ns, &agent.name_any())
                    .into_iter()
                    .map(guard_ref)
                    .collect::<Vec<_>>()
            },
        )
        .watches(api_for::<Pod>(&client, namespace), pod_config, |pod| {
            let ns = pod.namespace().unwrap_or_default();
            pod.labels()
                .get(RUN_LABEL)
                .map(|run| ObjectRef::<Guarded<AgentRun>>::new(run).within(&ns))
        });
    if ctx.settings.sandbox_backend == SandboxBackend::AgentSandbox {
        let resource = agentrun::sandbox_resource();
        let sandboxes: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        agent_runs = agent_runs.owns_with(sandboxes, resource, config.clone());
    }
    let agent_runs = agent_runs
        .graceful_shutdown_on(stop())
        .run(
            |obj, ctx| guarded(obj, ctx, agentrun::KIND, agentrun::reconcile),
            |obj, e, ctx| guarded_error_policy(obj, e, ctx, agentrun::error_policy),
            ctx,
        )
        .for_each(|r| async move { log_result(agentrun::KIND, r) });
    runs.push(Box::pin(agent_runs));

    (runs, ready)
}

async fn wait_ready<K>(store: kube::runtime::reflector::Store<K>)
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let _ = store.wait_until_ready().await;
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
    let mut ready = Vec::new();
    for ns in &namespaces {
        let (r, w) = controllers(ctx.clone(), ns.as_deref(), shutdown.clone());
        runs.extend(r);
        ready.extend(w);
    }
    let mark_ready = async move {
        futures::future::join_all(ready).await;
        readiness.0.store(true, Ordering::Relaxed);
        tracing::info!("every watch has listed; ready");
    };
    let run_all = futures::future::join_all(runs);
    tokio::join!(mark_ready, run_all);
}
