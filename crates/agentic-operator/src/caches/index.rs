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

/// Namespace → key → names. Which keys an object is under is not kept beside them: it is
/// what the index's function gives the object the cache held before the change, so
/// taking an object out costs no second map of every object's keys.
#[derive(Default)]
struct Entries(HashMap<String, HashMap<String, Names>>);

impl Entries {
    /// `name` of `namespace` under `keys` (sorted, without repeats) no more.
    fn remove(&mut self, (namespace, name): (&str, &str), keys: &[String]) {
        let Some(in_namespace) = self.0.get_mut(namespace) else {
            return;
        };
        for key in keys {
            if let Some(names) = in_namespace.get_mut(key)
                && !names.remove(name)
            {
                in_namespace.remove(key);
            }
        }
        if in_namespace.is_empty() {
            self.0.remove(namespace);
        }
    }

    /// `name` of `namespace` under `keys` (sorted, without repeats) too.
    fn insert(&mut self, (namespace, name): (&str, &str), keys: Vec<String>) {
        if keys.is_empty() {
            return;
        }
        let in_namespace = self.0.entry(namespace.to_string()).or_default();
        for key in keys {
            match in_namespace.get_mut(&key) {
                Some(names) => names.insert(name.to_string()),
                None => {
                    in_namespace.insert(key, Names::One(name.to_string()));
                }
            }
        }
    }
}

/// An object's namespace (empty for a cluster-scoped one) and name.
fn named(meta: &ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
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
            .0
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
            .0
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
    #[cfg(test)]
    fn len(&self) -> usize {
        let entries = self.read();
        let named: BTreeSet<(&String, &String)> = entries
            .0
            .iter()
            .flat_map(|(namespace, in_namespace)| {
                in_namespace
                    .values()
                    .flat_map(Names::iter)
                    .map(move |name| (namespace, name))
            })
            .collect();
        named.len()
    }

    /// Whether no object is under a key.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.read().0.is_empty()
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
    /// The keys `object` is under: those its valid object gives, sorted, without repeats.
    fn keys_of<C: Indexed<Object = K>>(&self, object: &C) -> Vec<String> {
        let mut keys = object.object().map(self.keys).unwrap_or_default();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// `object`, created or changed from `before` (as the cache held it, if it did): under
    /// the keys it gives now, and no others.
    pub fn applied<C: Indexed<Object = K>>(&self, before: Option<&C>, object: &C) {
        let old = before
            .map(|before| self.keys_of(before))
            .unwrap_or_default();
        let new = self.keys_of(object);
        if old == new {
            return;
        }
        let mut entries = self.write();
        if let Some(before) = before {
            entries.remove(named(before.metadata()), &old);
        }
        entries.insert(named(object.metadata()), new);
    }

    /// An object deleted, as the cache held it: under no key.
    pub fn deleted<C: Indexed<Object = K>>(&self, before: &C) {
        let keys = self.keys_of(before);
        if !keys.is_empty() {
            self.write().remove(named(before.metadata()), &keys);
        }
    }

    /// The index of exactly `objects`, as a watch holds them after it has listed.
    pub fn relisted<C: Indexed<Object = K>>(&self, objects: &[Arc<C>]) {
        let mut rebuilt = Entries::default();
        for object in objects {
            rebuilt.insert(named(object.metadata()), self.keys_of(object.as_ref()));
        }
        *self.write() = rebuilt;
    }
}

/// What a watch keeps up to date as its cache changes, whatever the index's key type.
pub trait Maintained<C>: Send + Sync {
    fn applied(&self, before: Option<&C>, object: &C);
    fn deleted(&self, before: &C);
    fn relisted(&self, objects: &[Arc<C>]);
}

impl<C> Maintained<C> for Index<C::Object>
where
    C: Indexed,
    C::Object: 'static,
{
    fn applied(&self, before: Option<&C>, object: &C) {
        Index::applied(self, before, object);
    }

    fn deleted(&self, before: &C) {
        Index::deleted(self, before);
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

    /// An index kept as a watch keeps it: each change handed over with what its cache held
    /// of the object before.
    struct Watched {
        index: Index<ConfigMap>,
        cache: HashMap<Named, Guarded<ConfigMap>>,
    }

    impl Watched {
        fn new() -> Self {
            Self {
                index: Index::new(references),
                cache: HashMap::new(),
            }
        }

        fn apply(&mut self, object: Guarded<ConfigMap>) {
            let (namespace, name) = named(object.metadata());
            let key = (namespace.to_string(), name.to_string());
            self.index.applied(self.cache.get(&key), &object);
            self.cache.insert(key, object);
        }

        fn delete(&mut self, namespace: &str, name: &str) {
            let before = self
                .cache
                .remove(&(namespace.to_string(), name.to_string()))
                .expect("cached");
            self.index.deleted(&before);
        }
    }

    #[test]
    fn an_object_is_found_under_the_keys_it_gives_now_and_only_those() {
        let mut watched = Watched::new();
        watched.apply(config_map("a", "x", &["one", "two"]));
        watched.apply(config_map("a", "y", &["two"]));
        watched.apply(config_map("b", "z", &["two"]));
        let index = &watched.index;
        assert_eq!(index.get("a", "two"), ["x", "y"]);
        assert_eq!(index.get("a", "one"), ["x"]);
        assert_eq!(index.get("b", "one"), Vec::<String>::new());
        assert_eq!(
            index.everywhere("two"),
            [("a", "x"), ("a", "y"), ("b", "z")]
                .map(|(namespace, name)| (namespace.to_string(), name.to_string()))
        );

        watched.apply(config_map("a", "x", &["three", "three"]));
        let index = &watched.index;
        assert_eq!(index.get("a", "one"), Vec::<String>::new());
        assert_eq!(index.get("a", "two"), ["y"]);
        assert_eq!(index.get("a", "three"), ["x"]);

        watched.delete("a", "y");
        assert_eq!(watched.index.get("a", "two"), Vec::<String>::new());
        assert_eq!(watched.index.len(), 2);
        watched.delete("a", "x");
        watched.delete("b", "z");
        assert!(watched.index.is_empty());
    }

    #[test]
    fn an_object_without_keys_or_that_did_not_deserialize_holds_no_entry() {
        let mut watched = Watched::new();
        watched.apply(config_map("a", "x", &[]));
        assert!(watched.index.is_empty());
        watched.apply(config_map("a", "x", &["one"]));
        let mut malformed = config_map("a", "x", &[]);
        malformed.0 = Err(serde_json::from_str::<Guarded<ConfigMap>>(
            r#"{"metadata":{"name":"x","namespace":"a"},"data":7}"#,
        )
        .expect("a guard")
        .0
        .expect_err("malformed"));
        watched.apply(malformed);
        assert!(watched.index.is_empty());
        watched.delete("a", "x");
        assert!(watched.index.is_empty());
    }

    #[test]
    fn a_key_goes_from_one_name_to_many_and_back_in_name_order() {
        let mut watched = Watched::new();
        watched.apply(config_map("a", "m", &["k"]));
        assert!(matches!(watched.index.read().0["a"]["k"], Names::One(_)));
        watched.apply(config_map("a", "z", &["k"]));
        watched.apply(config_map("a", "b", &["k"]));
        assert_eq!(watched.index.get("a", "k"), ["b", "m", "z"]);
        watched.delete("a", "m");
        assert_eq!(watched.index.get("a", "k"), ["b", "z"]);
        watched.delete("a", "z");
        assert_eq!(watched.index.get("a", "k"), ["b"]);
        assert!(matches!(watched.index.read().0["a"]["k"], Names::One(_)));
        watched.apply(config_map("a", "b", &["k"]));
        assert_eq!(watched.index.get("a", "k"), ["b"]);
        watched.delete("a", "b");
        assert!(watched.index.is_empty());
    }

    #[test]
    fn a_relist_keeps_exactly_what_was_listed() {
        let mut watched = Watched::new();
        watched.apply(config_map("a", "gone", &["one"]));
        watched
            .index
            .relisted(&[Arc::new(config_map("a", "kept", &["one"]))]);
        assert_eq!(watched.index.get("a", "one"), ["kept"]);
        assert_eq!(watched.index.len(), 1);
    }
}
