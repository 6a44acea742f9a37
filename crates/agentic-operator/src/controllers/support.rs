//! What every kind's pass and wiring use to read the objects it follows: the API of a scope,
//! reads of references (from the watch caches when they can serve them), and the mapping
//! of a changed object to the objects a controller reconciles. It imports no kind.

use std::sync::Arc;

use agentic_core::skills::Lookup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};

use crate::caches::{Guarded, Index, valid};
use crate::context::Context;
use crate::error::Error;

/// A future that completes when the operator shuts down.
pub(super) type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>;

/// The API of `K` in `namespace`, or in every namespace.
pub(super) fn api_for<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// An object a reference names, as read: `None` when absent, `Some(Err(error))` with the
/// deserialization error when it does not deserialize.
pub(super) type Read<K> = Option<Result<K, String>>;

/// Reads the `K` named `name` in `namespace` for a reference. An object that does not
/// deserialize as `K` is not an error of the pass: the referrer reports it as not Ready, and
/// its own controller raises a Warning event on it.
pub(super) async fn read_reference<K>(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Read<K>, Error>
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

/// Reads a reference like [`read_reference`], from the watch cache of its namespace when the
/// object there deserializes and is `usable`; anything else (not cached, not watched, not
/// usable yet) is read from the API server, so that a cache a moment behind never turns a
/// run away. A usable object a moment old is what an earlier pass would have read.
pub(super) async fn read_cached<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    usable: impl Fn(&K) -> bool,
) -> Result<Read<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    if let Some(store) = ctx.caches(namespace).and_then(|caches| caches.of::<K>()) {
        let key = guard_ref(ObjectRef::<K>::new(name).within(namespace));
        if let Some(cached) = store.get(&key)
            && let Ok(object) = &cached.0
            && usable(object)
        {
            return Ok(Some(Ok(object.clone())));
        }
    }
    read_reference(&ctx.client, namespace, name).await
}

/// The `K` named `name` in `namespace` as its watch cache holds it, once that cache has
/// listed: `Some(None)` when it is absent there. `None` when no listed cache of this scope
/// holds the kind, and only a read can tell.
pub(super) fn listed_view<K>(ctx: &Context, namespace: &str, name: &str) -> Option<Read<K>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let store = ctx.caches(namespace)?.of::<K>()?;
    if !crate::caches::listed(&store) {
        return None;
    }
    let key = guard_ref(ObjectRef::<K>::new(name).within(namespace));
    Some(
        store
            .get(&key)
            .map(|cached| cached.0.clone().map_err(|invalid| invalid.error)),
    )
}

/// What a read reference is, for the pure checks in `agentic-core`.
#[allow(clippy::ref_option)] // A `Read` is what the gather step holds.
pub(super) fn lookup<K>(read: &Read<K>) -> Lookup<'_, K> {
    match read {
        None => Lookup::Missing,
        Some(Ok(object)) => Lookup::Found(object),
        Some(Err(error)) => Lookup::Malformed(error),
    }
}

/// The key of a guarded object, from the key of the object it wraps.
pub(super) fn guard_ref<K: Resource<DynamicType = ()>>(r: ObjectRef<K>) -> ObjectRef<Guarded<K>> {
    let named = ObjectRef::new(&r.name);
    match &r.namespace {
        Some(ns) => named.within(ns),
        None => named,
    }
}

/// The namespace of an object of `kind` handed to its reconcile; every stored namespaced
/// object has one, so its absence is [`Error::MissingMetadata`].
pub(super) fn namespace_of<K: Resource>(object: &K, kind: &'static str) -> Result<String, Error> {
    object.namespace().ok_or_else(|| Error::MissingMetadata {
        kind,
        name: object.name_any(),
        field: "metadata.namespace",
    })
}

/// The controller ownerReference naming `object`, for the objects its pass creates; every
/// stored object has a UID, so its absence is [`Error::MissingMetadata`].
pub(super) fn owner_of<K: Resource<DynamicType = ()>>(
    object: &K,
    kind: &'static str,
) -> Result<OwnerReference, Error> {
    object
        .controller_owner_ref(&())
        .ok_or_else(|| Error::MissingMetadata {
            kind,
            name: object.name_any(),
            field: "metadata.uid",
        })
}

/// The one key of an index that holds the objects a predicate holds for ([`member_if`]). No
/// object is named by the empty string, so it is never an object's name too.
pub(super) const MEMBERS: &str = "";

/// The keys of an object in an index of the objects a predicate holds for: [`MEMBERS`] when
/// `holds`, else none.
pub(super) fn member_if(holds: bool) -> Vec<String> {
    if holds {
        vec![MEMBERS.to_string()]
    } else {
        Vec::new()
    }
}

/// The objects of `store` named `names` in `namespace` that are cached.
pub(super) fn cached<K>(
    store: &Store<Guarded<K>>,
    namespace: &str,
    names: impl IntoIterator<Item = String>,
) -> Vec<Arc<Guarded<K>>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    names
        .into_iter()
        .filter_map(|name| store.get(&ObjectRef::new(&name).within(namespace)))
        .collect()
}

/// The objects of `store` named `named` (namespace and name, as
/// [`Index::everywhere`](crate::caches::Index::everywhere) gives them) that are cached.
pub(super) fn cached_named<K>(
    store: &Store<Guarded<K>>,
    named: impl IntoIterator<Item = (String, String)>,
) -> Vec<Arc<Guarded<K>>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    named
        .into_iter()
        .filter_map(|(namespace, name)| store.get(&ObjectRef::new(&name).within(&namespace)))
        .collect()
}

/// What a watch maps a changed object to: of the objects `candidates` names in the changed
/// object's namespace (an index's answer, never the whole cache), the valid ones `select`
/// picks for the changed object's namespace and name, as keys of the guarded objects the
/// controller reconciles.
pub(super) fn related<K, C>(
    store: &Store<Guarded<K>>,
    changed: &C,
    candidates: impl FnOnce(&str, &str) -> Vec<String>,
    select: impl FnOnce(Vec<&K>, &str, &str) -> Vec<ObjectRef<K>>,
) -> Vec<ObjectRef<Guarded<K>>>
where
    K: Resource<DynamicType = ()> + Clone,
    C: Resource,
{
    let namespace = changed.namespace().unwrap_or_default();
    let name = changed.name_any();
    let found = cached(store, &namespace, candidates(&namespace, &name));
    select(valid(&found), &namespace, &name)
        .into_iter()
        .map(guard_ref)
        .collect()
}

/// A watch's mapper that takes each changed `C` to the objects of `store` that `index` lists
/// under its name and `select` picks ([`related`]).
pub(super) fn relate<K, C>(
    store: Store<Guarded<K>>,
    index: Index<K>,
    select: impl Fn(Vec<&K>, &str, &str) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
) -> impl Fn(Arc<C>) -> Vec<ObjectRef<Guarded<K>>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    C: Resource,
{
    move |changed| {
        related(
            &store,
            changed.as_ref(),
            |namespace, name| index.get(namespace, name),
            &select,
        )
    }
}
