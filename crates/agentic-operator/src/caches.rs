//! The watch caches the controllers keep, one set per watched scope, and the shapes the
//! objects are cached in. Below both the context and the controllers: it names no
//! controller, and no kind the operator reconciles but in the shape of the finished runs
//! kept out of the run cache ([`FinishedRunCache`]), so a pass and the context can read it
//! without importing each other.

mod finished_runs;
mod guarded;
mod index;
mod initial_list;
mod sandbox_pod;

use std::any::Any;
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::Resource;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;

pub use finished_runs::{
    Diverted, FinishedRunCache, FinishedRunsWatched, LIVE_RUNS, RunName, finished_runs_of,
};
pub use guarded::Guarded;
pub use index::{Index, Indexed, Maintained};
pub use initial_list::InitialList;
pub use sandbox_pod::SandboxPod;

/// The annotation `kubectl apply` keeps a copy of the applied object in: the whole spec again.
/// Not cached (`controllers::watches::forget_unread_metadata`).
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Secrets are watched for their names and versions only (kube asks for metadata alone for
/// a `PartialObjectMeta`): a Secret's data never reaches the operator through a watch (a pass
/// reads the one it needs), and a namespace's many large Secrets (Helm releases,
/// certificates) cost a few hundred bytes of event each; a change of data still changes the
/// version, which triggers the pass.
pub type SecretMeta = PartialObjectMeta<Secret>;

/// The agent-sandbox `Sandbox` kind.
pub fn sandbox_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"),
        "sandboxes",
    )
}

/// The watch caches of one namespace (or of all): one per kind the operator reconciles, and
/// the sandboxes (Pods labelled with the run label, agent-sandbox Sandboxes) the AgentRun
/// controller follows. A kind's cache is there because its controller is wired; it is read
/// back by the kind's type ([`Caches::of`]), so adding a kind adds no field here.
#[derive(Clone)]
pub struct Caches {
    kinds: Vec<Arc<dyn KindCache>>,
    pub pods: Store<SandboxPod>,
    /// With the agent-sandbox backend only.
    pub sandboxes: Option<Store<DynamicObject>>,
    /// The metadata of the Secrets users name, when they are watched: whether a Secret
    /// changed, by its resourceVersion, without reading it.
    pub secrets: Option<Store<SecretMeta>>,
    /// With skill prefetch on: the nodes and the prefetch pods.
    pub prefetch: Option<PrefetchCaches>,
    /// The finished runs, kept out of the run cache, when the AgentRun controller runs.
    pub finished_runs: Option<FinishedRunCache>,
}

/// What an Agent's prefetch pass reads: the nodes, and the prefetch pods (without their
/// spec) by the Agent that controls them and by whether they are still pulling.
#[derive(Clone)]
pub struct PrefetchCaches {
    pub nodes: Store<Node>,
    pub pods: Store<Guarded<Pod>>,
    /// The pods under the name of the Agent that controls them.
    pub by_agent: Index<Pod>,
    /// The pods not finished yet, under [`PULLING`].
    pub pulling: Index<Pod>,
}

/// The key of [`PrefetchCaches::pulling`].
pub const PULLING: &str = "pulling";

impl PrefetchCaches {
    /// The keys of a prefetch pod in [`PrefetchCaches::by_agent`]: the name of the Agent that
    /// controls it.
    pub fn controlling_agent(pod: &Pod) -> Vec<String> {
        agentic_core::owners::controller_of(&pod.metadata)
            .filter(|owner| owner.kind == <agentic_api::Agent as Resource>::kind(&()))
            .map(|owner| vec![owner.name.clone()])
            .unwrap_or_default()
    }

    /// The keys of a prefetch pod in [`PrefetchCaches::pulling`]: [`PULLING`] until it ends.
    pub fn pulling(pod: &Pod) -> Vec<String> {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let ended = matches!(phase, Some("Succeeded" | "Failed"));
        if ended || pod.metadata.deletion_timestamp.is_some() {
            Vec::new()
        } else {
            vec![PULLING.to_string()]
        }
    }
}

impl Caches {
    /// The caches of the sandboxes, and no kind's yet.
    pub fn new(pods: Store<SandboxPod>, sandboxes: Option<Store<DynamicObject>>) -> Self {
        Self {
            kinds: Vec::new(),
            pods,
            sandboxes,
            secrets: None,
            prefetch: None,
            finished_runs: None,
        }
    }

    /// These caches with the Secrets' metadata.
    #[must_use]
    pub fn with_secrets(mut self, secrets: Store<SecretMeta>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// These caches with the prefetch pass's.
    #[must_use]
    pub fn with_prefetch(mut self, prefetch: Option<PrefetchCaches>) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// These caches with the finished runs kept out of the run cache.
    #[must_use]
    pub fn with_finished_runs(mut self, finished_runs: Option<FinishedRunCache>) -> Self {
        self.finished_runs = finished_runs;
        self
    }

    /// These caches with `cache` among the kinds'.
    #[must_use]
    pub fn with_kind(mut self, cache: Arc<dyn KindCache>) -> Self {
        self.kinds.push(cache);
        self
    }

    /// The cache of the `K`s, when a controller of this scope watches them.
    pub fn of<K>(&self) -> Option<Store<Guarded<K>>>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        self.kinds
            .iter()
            .find_map(|cache| cache.as_any().downcast_ref::<KindStore<K>>())
            .map(|cache| cache.store.clone())
    }

    /// The `K`s in their cache; none when no controller of this scope watches them.
    pub fn state_of<K>(&self) -> Vec<Arc<Guarded<K>>>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        self.of::<K>()
            .map(|store| store.state())
            .unwrap_or_default()
    }

    /// The caches of the kinds, for counting their objects.
    pub fn kinds(&self) -> impl Iterator<Item = &dyn KindCache> {
        self.kinds.iter().map(AsRef::as_ref)
    }
}

/// The cache of a kind the operator reconciles, whichever kind it is: read back as the
/// kind's store ([`Caches::of`]) and counted by the census.
pub trait KindCache: Send + Sync {
    /// The kind, as metrics name it.
    fn kind(&self) -> &'static str;
    /// Each cached object that deserialized, by namespace and name, with its phase for
    /// `agentic_objects`.
    fn phases(&self) -> Vec<(ObjectKey, &'static str)>;
    /// The cache itself, to be taken back as the kind's [`KindStore`].
    fn as_any(&self) -> &dyn Any;
}

/// An object's namespace (none for a cluster-scoped one) and name.
pub type ObjectKey = (Option<String>, String);

/// The cache of the `K`s and how the census counts one.
pub struct KindStore<K: Resource<DynamicType = ()> + Clone + 'static> {
    pub kind: &'static str,
    pub store: Store<Guarded<K>>,
    /// The phase `agentic_objects` counts an object in.
    pub phase: fn(&K) -> &'static str,
}

impl<K> KindCache for KindStore<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn phases(&self) -> Vec<(ObjectKey, &'static str)> {
        valid(&self.store.state())
            .into_iter()
            .map(|object| {
                let meta = object.meta();
                let key = (
                    meta.namespace.clone(),
                    meta.name.clone().unwrap_or_default(),
                );
                (key, (self.phase)(object))
            })
            .collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Whether the watch behind `store` has listed, so that what it lacks is absent.
///
/// Looks with a no-op waker, which replaces the one an awaiter of `wait_until_ready` left
/// there (kube-runtime keeps a single one): nothing in the operator awaits the stores'
/// readiness. Waiters look again (the trust-policy wait) or wait on the
/// watch's own signal (`/readyz`, the sweep, the finished runs' watches).
pub fn listed<K>(store: &Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// The objects of a cache's state that deserialized, borrowed: a watch event is mapped
/// without copying the cache (a pod event of a busy namespace used to clone every run).
pub fn valid<K>(state: &[Arc<Guarded<K>>]) -> Vec<&K> {
    state.iter().filter_map(|g| g.0.as_ref().ok()).collect()
}

/// A client of an API server that answers every request with `status` and `body`: for the
/// probes' tests.
#[cfg(test)]
fn answering(status: u16, body: &'static str) -> kube::Client {
    let service = tower::service_fn(move |_: http::Request<kube::client::Body>| async move {
        let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
        *response.status_mut() = http::StatusCode::from_u16(status).expect("a valid status code");
        Ok::<_, tower::BoxError>(response)
    });
    kube::Client::new(service, "default")
}
