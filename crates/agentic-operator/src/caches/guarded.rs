//! [`Guarded`]: an object that may not have deserialized, so one malformed object cannot stop
//! a watch or a list. Written here rather than taken from kube (docs/adr/0013): kube's
//! `DeserializeGuard` first builds a `serde_value` tree of every object it decodes, clones
//! it, and decodes the object from the clone, for every event of every watch; here the
//! object's JSON text is kept as it arrived and decoded once.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::core::error_boundary::InvalidObject;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A cached object of a kind the operator reconciles: one that does not deserialize is kept
/// as its error and its metadata, so its name, namespace and owner are still known.
#[derive(Clone, Debug)]
pub struct Guarded<K>(pub Result<K, InvalidObject>);

impl<'de, K> Deserialize<'de> for Guarded<K>
where
    K: DeserializeOwned + Resource,
{
    fn deserialize<D>(deserializer: D) -> Result<Self, D::Error>
    where
        D: Deserializer<'de>,
    {
        // The object's text, as the API server sent it: an error decoding `K` must leave
        // something to read the metadata from, and a copy of the text is one allocation.
        let text = Box::<RawValue>::deserialize(deserializer)?;
        match serde_json::from_str::<K>(text.get()) {
            Ok(object) => Ok(Self(Ok(object))),
            Err(error) => {
                let PartialObjectMeta { metadata, .. } =
                    serde_json::from_str::<PartialObjectMeta<K>>(text.get())
                        .map_err(D::Error::custom)?;
                Ok(Self(Err(InvalidObject {
                    error: error.to_string(),
                    metadata,
                })))
            }
        }
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0
            .as_ref()
            .map_or_else(|invalid| &invalid.metadata, K::meta)
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0
            .as_mut()
            .map_or_else(|invalid| &mut invalid.metadata, K::meta_mut)
    }
}

#[cfg(test)]
mod tests {
    use agentic_api::AgentRun;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectList;
    use kube::core::WatchEvent;
    use serde_json::json;

    use super::*;

    fn run(name: &str, spec: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "konveyor.io/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}")},
            "spec": spec,
        })
    }

    #[test]
    fn a_valid_object_decodes_whole() {
        let text = run("ok", json!({"agentRef": "fixer"})).to_string();
        let guarded: Guarded<AgentRun> = serde_json::from_str(&text).unwrap();
        let decoded = guarded.0.unwrap();
        assert_eq!(decoded.metadata.name.as_deref(), Some("ok"));
        assert_eq!(decoded.spec.agent_ref, "fixer");
    }

    #[test]
    fn a_malformed_object_keeps_its_metadata_and_the_error() {
        let text = run("bad", json!({"agentRef": {"name": "fixer"}})).to_string();
        let guarded: Guarded<AgentRun> = serde_json::from_str(&text).unwrap();
        assert_eq!(guarded.meta().name.as_deref(), Some("bad"));
        assert_eq!(guarded.meta().namespace.as_deref(), Some("team-a"));
        let invalid = guarded.0.unwrap_err();
        assert!(invalid.error.contains("invalid type"), "{}", invalid.error);
    }

    #[test]
    fn one_malformed_item_does_not_fail_a_list_or_a_watch_event() {
        // kube decodes lists and watch lines from their text: the guard is decoded inside
        // them, not at the top.
        let list = json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRunList", "metadata": {},
            "items": [
                run("ok", json!({"agentRef": "fixer"})),
                run("bad", json!({"agentRef": 7})),
            ],
        })
        .to_string();
        let list: ObjectList<Guarded<AgentRun>> = serde_json::from_str(&list).unwrap();
        let valid: Vec<bool> = list.items.iter().map(|item| item.0.is_ok()).collect();
        assert_eq!(valid, [true, false]);

        // The API server writes the type before the object (Go marshals the fields in order),
        // which lets the object be read straight from the line; `json!` would sort the keys.
        let line = format!(
            r#"{{"type":"MODIFIED","object":{}}}"#,
            run("bad", json!([]))
        );
        let event: WatchEvent<Guarded<AgentRun>> = serde_json::from_str(&line).unwrap();
        let WatchEvent::Modified(object) = event else {
            panic!("not a modification: {event:?}");
        };
        assert_eq!(object.meta().name.as_deref(), Some("bad"));
        assert!(object.0.is_err());
    }

    #[test]
    fn an_object_without_readable_metadata_is_an_error_of_the_whole() {
        let text = json!({"metadata": "none", "spec": {"containers": 1}}).to_string();
        assert!(serde_json::from_str::<Guarded<Pod>>(&text).is_err());
    }
}
