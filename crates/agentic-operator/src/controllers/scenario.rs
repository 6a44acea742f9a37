//! What the fast scenario tests of every kind share: an operator context on the fake API
//! server ([`super::fake_api`]), a pass of a kind's real controller through the real
//! wrapper, and reading conditions back. A scenario stores the objects a pass reads, runs
//! the pass, and asserts what the API server then holds and what was written.

use std::sync::Arc;
use std::time::Duration;

use agentic_api::CONDITION_READY;
use agentic_core::conditions::find_condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;

use super::fake_api::FakeApi;
use super::pipeline::{Reconcile, Reconciled, guarded};
use crate::caches::{Caches, Guarded, KindCache, SecretMeta};
use crate::context::{Context, RunDefaults, SandboxBackend, Settings};
use crate::error::Result;
use crate::metrics::Metrics;

/// The namespace every scenario plays in.
pub const NS: &str = "team";

/// The writer of a cache that has listed `objects`, as a watch leaves it, for a scenario to
/// change them later.
pub fn listed_writer<K>(objects: Vec<K>) -> Writer<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let mut writer = Writer::<K>::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    writer
}

/// A store holding `objects`, listed, as a watch leaves it.
pub fn store_of<K>(objects: Vec<K>) -> Store<Guarded<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    listed_writer(
        objects
            .into_iter()
            .map(|object| Guarded(Ok(object)))
            .collect(),
    )
    .as_reader()
}

/// The metadata of the Secret `name` of the scenario's namespace at `version`, as the
/// Secret watch caches it.
pub fn secret_meta(name: &str, version: &str) -> SecretMeta {
    use kube::core::PartialObjectMetaExt as _;
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        resource_version: Some(version.into()),
        ..Default::default()
    }
    .into_response_partial::<k8s_openapi::api::core::v1::Secret>()
}

/// Watch caches holding these kinds' caches and no sandbox: the passes read any other kind
/// through the API.
pub fn caches_with(kinds: Vec<Arc<dyn KindCache>>) -> Caches {
    let pods = Writer::default().as_reader();
    kinds
        .into_iter()
        .fold(Caches::new(pods, None), Caches::with_kind)
}

/// An operator context whose client talks to `api`, with the `pod` sandbox backend and the
/// default settings.
pub fn context(api: &FakeApi) -> Arc<Context> {
    context_on(api.client())
}

/// [`context`] with any client.
pub fn context_on(client: kube::Client) -> Arc<Context> {
    context_with(client, agentic_oci::RegistryOptions::default())
}

/// [`context`] whose registry client reads `registry` (`host:port`) over plain HTTP, as
/// `--insecure-registry` makes it.
pub fn context_reading(api: &FakeApi, registry: &str) -> Arc<Context> {
    let options = agentic_oci::RegistryOptions {
        insecure_registries: vec![registry.to_string()],
        ..agentic_oci::RegistryOptions::default()
    };
    context_with(api.client(), options)
}

fn context_with(client: kube::Client, registry: agentic_oci::RegistryOptions) -> Arc<Context> {
    let settings = Settings {
        registry: agentic_oci::RegistryClient::new(registry).expect("a registry client"),
        git: agentic_git::GitOptions::default(),
        sandbox_backend: SandboxBackend::Pod,
        tag_refresh_interval: Duration::from_secs(300),
        run_defaults: RunDefaults::default(),
        reconcile_concurrency: 4,
        default_skills_namespace: None,
        skill_fetcher: None,
        credential_proxy: agentic_core::sandbox::CredentialProxy::default(),
        skill_prefetch: None,
        trace_receiver: None,
        // Policy stores a scenario leaves unlisted never list: not a wait worth the
        // operator's.
        trust_policy_list_wait: Duration::from_millis(100),
        trace_export: None,
    };
    Arc::new(Context::new(client, settings, Arc::new(Metrics::default())))
}

/// An object of kind `K` from its manifest (apiVersion and kind are added).
pub fn object<K: serde::de::DeserializeOwned + kube::Resource<DynamicType = ()>>(
    manifest: serde_json::Value,
) -> K {
    let mut manifest = manifest;
    manifest["apiVersion"] = K::api_version(&()).into();
    manifest["kind"] = K::kind(&()).into();
    if manifest["metadata"]["namespace"].is_null() {
        manifest["metadata"]["namespace"] = NS.into();
    }
    manifest["metadata"]["generation"] = 1.into();
    serde_json::from_value(manifest).expect("a manifest of its kind")
}

/// One pass of the controller of `K` over the object `name` as the API server holds it,
/// through the wrapper every controller runs (status write and Events included).
pub async fn pass<K, R>(
    api: &FakeApi,
    ctx: &Arc<Context>,
    name: &str,
    reconcile: R,
) -> Result<Action>
where
    K: Reconciled,
    R: Reconcile<K>,
{
    let object: K = api.get(NS, name).expect("the object the pass is about");
    guarded(Arc::new(Guarded(Ok(object))), Arc::clone(ctx), reconcile).await
}

/// The `Ready` condition's status and reason, from `conditions`.
pub fn ready(conditions: &[Condition]) -> (String, String) {
    let ready = find_condition(conditions, CONDITION_READY).expect("a Ready condition");
    (ready.status.clone(), ready.reason.clone())
}

/// The `Ready` condition's message, from `conditions`.
pub fn ready_message(conditions: &[Condition]) -> &str {
    &find_condition(conditions, CONDITION_READY)
        .expect("a Ready condition")
        .message
}

/// The status of the `K` named `name` once one pass of its controller is over.
pub async fn status_after_pass<K, R>(
    api: &FakeApi,
    ctx: &Arc<Context>,
    name: &str,
    reconcile: R,
) -> K::Status
where
    K: Reconciled,
    R: Reconcile<K>,
{
    pass::<K, R>(api, ctx, name, reconcile)
        .await
        .expect("a pass");
    let object: K = api.get(NS, name).expect("the object");
    object.status().cloned().expect("a status")
}
