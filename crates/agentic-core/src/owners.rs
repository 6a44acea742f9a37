//! Who controls an object, read from its controller ownerReference.
//!
//! The operator writes an object for a run only when it creates it, or when the object's
//! controller is that run: an object someone else made under the same name is never
//! changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

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
}
