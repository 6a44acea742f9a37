//! Indexes of a watch's cache: the objects of a namespace by a name each one refers to (the
//! runs by the Agent they wait on, the Agents by the SkillCards they list, the live sandbox
//! pods by the Secret their credential proxy mounts), kept as the watch changes. A watch
//! mapper asks an index for the objects a changed object concerns instead of
//! scanning the cache: with 100,000 runs cached, a scan per event made the first list after a
//! restart cost N² and stalled the operator for minutes.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::api::ObjectMeta;

use super::{Guarded, SandboxPod};

/// The names of the `K`s of each namespace under each key their `keys` function gives. An
/// object with no key costs nothing: indexes over runs give keys to unfinished runs only, so
/// a cache of finished runs holds no index entry.
pub struct Index<K> {
    keys: fn(&K) -> Vec<String>,
    entries: Arc<RwLock<Entries>>,
    /// How many names lookups have handed out: what a mapper visits, for the tests that keep
    /// it independent of the number of cached objects.
    visited: Arc<AtomicUsize>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self {
            keys: self.keys,
            entries: Arc::clone(&self.entries),
            visited: Arc::clone(&self.visited),
        }
    }
}

/// An object's namespace (empty for a cluster-scoped one) and name.
type Named = (String, String);

/// The names under one key. Most keys name one object (a run's sandbox, the Secret of one
/// pod's proxy), and a B-tree set of one name costs a whole node, about 300 bytes for each
/// live run.
#[derive(Debug)]
enum Names {
    One(String),
    Many(BTreeSet<String>),
}

impl Names {
    fn insert(&mut self, name: String) {
        match self {
            Self::One(one) if *one == name => {}
            Self::One(one) => {
                let one = std::mem::take(one);
                *self = Self::Many(BTreeSet::from([one, name]));
            }
            Self::Many(names) => {
                names.insert(name);
            }
        }
    }

    /// Takes `name` out; false when no name is left.
    fn remove(&mut self, name: &str) -> bool {
        match self {
            Self::One(one) => one.as_str() != name,
            Self::Many(names) => {
                names.remove(name);
                if names.len() > 1 {
                    return true;
                }
                match names.pop_first() {
                    Some(last) => {
                        *self = Self::One(last);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    /// In name order.
    fn iter(&self) -> impl Iterator<Item = &String> {
        let (one, many) = match self {
            Self::One(one) => (Some(one), None),
            Self::Many(names) => (None, Some(names.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[derive(Default)]
struct Entries {
    /// Namespace → key → names.
    by_key: HashMap<String, HashMap<String, Names>>,
    /// The keys each indexed object is under, to take it out when it changes or goes.
    keys_of: HashMap<Named, Vec<String>>,
}

impl Entries {
    fn remove(&mut self, named: &Named) {
        let Some(keys) = self.keys_of.remove(named) else {
            return;
        };
        let (namespace, name) = named;
        if let Some(in_namespace) = self.by_key.get_mut(namespace) {
            for key in keys {
                if let Some(names) = in_namespace.get_mut(&key)
                    && !names.remove(name)
                {
                    in_namespace.remove(&key);
                }
            }
            if in_namespace.is_empty() {
                self.by_key.remove(namespace);
            }
        }
    }

    fn insert(&mut self, named: Named, mut keys: Vec<String>) {
        self.remove(&named);
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            return;
        }
        let (namespace, name) = &named;
        let in_namespace = self.by_key.entry(namespace.clone()).or_default();
        for key in &keys {
            match in_namespace.get_mut(key) {
                Some(names) => names.insert(name.clone()),
                None => {
                    in_namespace.insert(key.clone(), Names::One(name.clone()));
                }
            }
        }
        self.keys_of.insert(named, keys);
    }
}

fn named(meta: &ObjectMeta) -> Named {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl<K> Index<K> {
    /// An empty index of the keys `keys` gives each object.
    pub fn new(keys: fn(&K) -> Vec<String>) -> Self {
        Self {
            keys,
            entries: Arc::default(),
            visited: Arc::default(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The names of the objects of `namespace` under `key`, in name order.
    pub fn get(&self, namespace: &str, key: &str) -> Vec<String> {
        let names: Vec<String> = self
            .read()
            .by_key
            .get(namespace)
            .and_then(|in_namespace| in_namespace.get(key))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default();
        self.visited.fetch_add(names.len(), Ordering::Relaxed);
        names
    }

    /// The objects of every namespace under `key`, by namespace and name, in that order.
    pub fn everywhere(&self, key: &str) -> Vec<Named> {
        let mut named: Vec<Named> = self
            .read()
            .by_key
            .iter()
            .filter_map(|(namespace, in_namespace)| Some((namespace, in_namespace.get(key)?)))
            .flat_map(|(namespace, names)| {
                names.iter().map(|name| (namespace.clone(), name.clone()))
            })
            .collect();
        named.sort_unstable();
        self.visited.fetch_add(named.len(), Ordering::Relaxed);
        named
    }

    /// How many names the lookups have handed out so far.
    pub fn visited(&self) -> usize {
        self.visited.load(Ordering::Relaxed)
    }

    /// How many objects are under at least one key.
    pub fn len(&self) -> usize {
        self.read().keys_of.len()
    }

    /// Whether no object is under a key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A cached object an index keys: its metadata, and the object its keys are read from when
/// it has one (a kind's object that did not deserialize has none, and no key).
pub trait Indexed {
    type Object;
    fn metadata(&self) -> &ObjectMeta;
    fn object(&self) -> Option<&Self::Object>;
}

impl<K: Resource> Indexed for Guarded<K> {
    type Object = K;

    fn metadata(&self) -> &ObjectMeta {
        self.meta()
    }

    fn object(&self) -> Option<&K> {
        self.0.as_ref().ok()
    }
}

impl Indexed for SandboxPod {
    type Object = SandboxPod;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn object(&self) -> Option<&SandboxPod> {
        Some(self)
    }
}

impl<K> Index<K> {
    /// `object`, created or changed: under the keys it gives now, and no others.
    pub fn applied<C: Indexed<Object = K>>(&self, object: &C) {
        let keys = object.object().map(self.keys).unwrap_or_default();
        self.write().insert(named(object.metadata()), keys);
    }

    /// `object`, deleted: under no key.
    pub fn deleted<C: Indexed<Object = K>>(&self, object: &C) {
        self.write().remove(&named(object.metadata()));
    }

    /// The index of exactly `objects`, as a watch holds them after it has listed.
    pub fn relisted<C: Indexed<Object = K>>(&self, objects: &[Arc<C>]) {
        let mut rebuilt = Entries::default();
        for object in objects {
            if let Some(valid) = object.object() {
                rebuilt.insert(named(object.metadata()), (self.keys)(valid));
            }
        }
        *self.write() = rebuilt;
    }
}

/// What a watch keeps up to date as its cache changes, whatever the index's key type.
pub trait Maintained<C>: Send + Sync {
    fn applied(&self, object: &C);
    fn deleted(&self, object: &C);
    fn relisted(&self, objects: &[Arc<C>]);
}

impl<C> Maintained<C> for Index<C::Object>
where
    C: Indexed,
    C::Object: 'static,
{
    fn applied(&self, object: &C) {
        Index::applied(self, object);
    }

    fn deleted(&self, object: &C) {
        Index::deleted(self, object);
    }

    fn relisted(&self, objects: &[Arc<C>]) {
        Index::relisted(self, objects);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    /// A ConfigMap keyed by the values of its data.
    fn config_map(namespace: &str, name: &str, refers_to: &[&str]) -> Guarded<ConfigMap> {
        Guarded(Ok(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            data: Some(
                refers_to
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (i.to_string(), (*r).to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }))
    }

    fn references(map: &ConfigMap) -> Vec<String> {
        map.data.iter().flatten().map(|(_, v)| v.clone()).collect()
    }

    #[test]
    fn an_object_is_found_under_the_keys_it_gives_now_and_only_those() {
        let index = Index::new(references);
        index.applied(&config_map("a", "x", &["one", "two"]));
        index.applied(&config_map("a", "y", &["two"]));
        index.applied(&config_map("b", "z", &["two"]));
        assert_eq!(index.get("a", "two"), ["x", "y"]);
        assert_eq!(index.get("a", "one"), ["x"]);
        assert_eq!(index.get("b", "one"), Vec::<String>::new());
        assert_eq!(
            index.everywhere("two"),
            [("a", "x"), ("a", "y"), ("b", "z")]
                .map(|(namespace, name)| (namespace.to_string(), name.to_string()))
        );

        index.applied(&config_map("a", "x", &["three"]));
        assert_eq!(index.get("a", "one"), Vec::<String>::new());
        assert_eq!(index.get("a", "two"), ["y"]);
        assert_eq!(index.get("a", "three"), ["x"]);

        index.deleted(&config_map("a", "y", &[]));
        assert_eq!(index.get("a", "two"), Vec::<String>::new());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn an_object_without_keys_or_that_did_not_deserialize_holds_no_entry() {
        let index = Index::new(references);
        index.applied(&config_map("a", "x", &[]));
        assert!(index.is_empty());
        index.applied(&config_map("a", "x", &["one"]));
        let mut malformed = config_map("a", "x", &[]);
        malformed.0 = Err(serde_json::from_str::<Guarded<ConfigMap>>(
            r#"{"metadata":{"name":"x","namespace":"a"},"data":7}"#,
        )
        .expect("a guard")
        .0
        .expect_err("malformed"));
        index.applied(&malformed);
        assert!(index.is_empty());
        assert!(index.read().by_key.is_empty());
    }

    #[test]
    fn a_key_goes_from_one_name_to_many_and_back_in_name_order() {
        let index = Index::new(references);
        index.applied(&config_map("a", "m", &["k"]));
        assert!(matches!(index.read().by_key["a"]["k"], Names::One(_)));
        index.applied(&config_map("a", "z", &["k"]));
        index.applied(&config_map("a", "b", &["k"]));
        assert_eq!(index.get("a", "k"), ["b", "m", "z"]);
        index.deleted(&config_map("a", "m", &[]));
        assert_eq!(index.get("a", "k"), ["b", "z"]);
        index.deleted(&config_map("a", "z", &[]));
        assert_eq!(index.get("a", "k"), ["b"]);
        assert!(matches!(index.read().by_key["a"]["k"], Names::One(_)));
        index.applied(&config_map("a", "b", &["k"]));
        assert_eq!(index.get("a", "k"), ["b"]);
        index.deleted(&config_map("a", "b", &[]));
        assert!(index.read().by_key.is_empty());
    }

    #[test]
    fn a_relist_keeps_exactly_what_was_listed() {
        let index = Index::new(references);
        index.applied(&config_map("a", "gone", &["one"]));
        index.relisted(&[Arc::new(config_map("a", "kept", &["one"]))]);
        assert_eq!(index.get("a", "one"), ["kept"]);
        assert_eq!(index.len(), 1);
    }
}
