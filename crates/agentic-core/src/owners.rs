//! Who controls an object, read from its controller ownerReference.
//!
//! The operator writes an object for a run only when it creates it, or when the object's
//! controller is that run: an object someone else made under the same name is never
//! changed. The same references map a changed Pod or Sandbox back to its run by the run's
//! full name, which the [`RUN_LABEL`](crate::sandbox::RUN_LABEL) value is not once a name
//! passes 63 characters.

use agentic_api::GROUP;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::sandbox::{SANDBOX_API_VERSION, SANDBOX_KIND};

/// The kind of the runs that control sandboxes.
const RUN_KIND: &str = "AgentRun";
/// The kind of the collections that control the SkillCards they generate.
const COLLECTION_KIND: &str = "SkillCollection";

/// The ownerReference with `controller: true`; the API server allows at most one.
pub fn controller_of(metadata: &ObjectMeta) -> Option<&OwnerReference> {
    metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether the object with `uid` is the controller of the object with `metadata`.
pub fn is_controlled_by(metadata: &ObjectMeta, uid: &str) -> bool {
    controller_of(metadata).is_some_and(|o| o.uid == uid)
}

/// The name of the AgentRun controlling the object, in the object's namespace: the pod of
/// the `pod` backend, a `Sandbox`, and the run's ConfigMap and Secret.
pub fn controlling_run(metadata: &ObjectMeta) -> Option<&str> {
    controller_of(metadata)
        .filter(|o| o.kind == RUN_KIND && group_of(&o.api_version) == GROUP)
        .map(|o| o.name.as_str())
}

/// The name of the SkillCollection controlling the object, in the object's namespace: the
/// SkillCards it generated.
pub fn controlling_collection(metadata: &ObjectMeta) -> Option<&str> {
    controller_of(metadata)
        .filter(|o| o.kind == COLLECTION_KIND && group_of(&o.api_version) == GROUP)
        .map(|o| o.name.as_str())
}

/// The name of the agent-sandbox `Sandbox` controlling the object: the pod agent-sandbox
/// creates for it.
pub fn controlling_sandbox(metadata: &ObjectMeta) -> Option<&str> {
    controller_of(metadata)
        .filter(|o| {
            o.kind == SANDBOX_KIND && group_of(&o.api_version) == group_of(SANDBOX_API_VERSION)
        })
        .map(|o| o.name.as_str())
}

/// The group of an `apiVersion`: `konveyor.io` of `konveyor.io/v1alpha1`, `""` for `v1`.
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(
        api_version: &str,
        kind: &str,
        name: &str,
        controller: Option<bool>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-of-{name}"),
            controller,
            block_owner_deletion: None,
        }
    }

    fn owned_by(references: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(references),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_controller_reference_controls() {
        let run = reference("konveyor.io/v1alpha1", "AgentRun", "app", Some(true));
        let other = reference("v1", "ConfigMap", "admin", None);
        let meta = owned_by(vec![other.clone(), run.clone()]);
        assert_eq!(controller_of(&meta), Some(&run));
        assert!(is_controlled_by(&meta, "uid-of-app"));
        assert!(
            !is_controlled_by(&meta, "uid-of-admin"),
            "an owner that is not the controller"
        );

        let not_controller = owned_by(vec![reference(
            "konveyor.io/v1alpha1",
            "AgentRun",
            "app",
            Some(false),
        )]);
        assert!(!is_controlled_by(&not_controller, "uid-of-app"));
        assert!(!is_controlled_by(&ObjectMeta::default(), "uid-of-app"));
        assert!(
            !is_controlled_by(&ObjectMeta::default(), ""),
            "no references, empty uid"
        );
    }

    #[test]
    fn the_controlling_run_is_named_in_full() {
        let long = "a".repeat(200);
        let meta = owned_by(vec![reference(
            "konveyor.io/v1alpha1",
            "AgentRun",
            &long,
            Some(true),
        )]);
        assert_eq!(controlling_run(&meta), Some(long.as_str()));
        assert_eq!(controlling_sandbox(&meta), None);

        // Same kind, another group: not ours.
        let foreign = owned_by(vec![reference(
            "example.com/v1",
            "AgentRun",
            "app",
            Some(true),
        )]);
        assert_eq!(controlling_run(&foreign), None);
    }

    #[test]
    fn the_controlling_sandbox_is_an_agent_sandbox_sandbox() {
        let pod = owned_by(vec![reference(
            "agents.x-k8s.io/v1alpha1",
            "Sandbox",
            "sbx",
            Some(true),
        )]);
        assert_eq!(controlling_sandbox(&pod), Some("sbx"));
        assert_eq!(controlling_run(&pod), None);
        let other = owned_by(vec![reference(
            "example.com/v1",
            "Sandbox",
            "sbx",
            Some(true),
        )]);
        assert_eq!(controlling_sandbox(&other), None);
    }

    #[test]
    fn the_controlling_collection_is_a_konveyor_skill_collection() {
        let card = owned_by(vec![reference(
            "konveyor.io/v1alpha1",
            "SkillCollection",
            "bundle",
            Some(true),
        )]);
        assert_eq!(controlling_collection(&card), Some("bundle"));
        assert_eq!(controlling_run(&card), None);
        let owner_only = owned_by(vec![reference(
            "konveyor.io/v1alpha1",
            "SkillCollection",
            "bundle",
            None,
        )]);
        assert_eq!(controlling_collection(&owner_only), None);
    }

    #[test]
    fn groups_of_api_versions() {
        assert_eq!(group_of("konveyor.io/v1alpha1"), "konveyor.io");
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of(SANDBOX_API_VERSION), "agents.x-k8s.io");
    }
}
