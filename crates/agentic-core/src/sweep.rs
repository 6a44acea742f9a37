//! The orphan sweep's decision: which of the objects labelled for a run (the sandbox, its
//! pod, its Service and Secret, the ConfigMap of a run an earlier version started) belong to
//! a run that no longer exists.
//!
//! Normally the garbage collector deletes them with their run through the controller
//! ownerReference; the sweep is for clusters (or moments) where it did not: a run deleted
//! with `--cascade=orphan`, a garbage collector that is off or behind, or a run deleted and
//! recreated under the same name. An object is an orphan only when all of these hold:
//!
//! - it carries [`RUN_LABEL`]: without it the object was never the operator's;
//! - it is not being deleted already;
//! - its controller ownerReference is a `konveyor.io` AgentRun. The operator sets that
//!   reference in the request that creates the object, so an object of ours never exists
//!   without it; an object with another controller (agent-sandbox's Sandbox for the pod it
//!   made, or anyone else's) or with none (someone copied our labels, or removed the
//!   reference) is not ours to delete;
//! - no run of that name exists in the object's namespace, or the one that exists has
//!   another UID than the reference names (the run was deleted and recreated).
//!
//! Konveyor's Hub adds one more kind of object: for each AgentRun and AgentWorkflowRun it
//! starts, a token Secret (`agentic-run-*`) without our label, owned (not controlled) by the
//! run, in some versions through a group-less `apiVersion: v1alpha1` that the garbage
//! collector cannot resolve, so that nothing ever deletes it. [`owned_verdict`] judges those:
//! an orphan once every owner it names is a run of ours that no longer exists.

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::GROUP;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::owners::{controller_of, controlling_run};
use crate::sandbox::RUN_LABEL;

/// The runs that exist: their UID by namespace and name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Runs(BTreeMap<(String, String), String>);

impl Runs {
    /// The runs of these objects' metadata; one without a namespace, name or UID is left
    /// out (the API server never stores such a run).
    pub fn from_metadata<'a>(runs: impl IntoIterator<Item = &'a ObjectMeta>) -> Self {
        Self(
            runs.into_iter()
                .filter_map(|m| {
                    Some((
                        (m.namespace.clone()?, m.name.clone()?),
                        m.uid.clone().filter(|uid| !uid.is_empty())?,
                    ))
                })
                .collect(),
        )
    }

    /// Adds the run `namespace/name` with `uid` (one without a UID is left out).
    pub fn insert(&mut self, namespace: &str, name: &str, uid: &str) {
        if !uid.is_empty() {
            self.0
                .insert((namespace.to_string(), name.to_string()), uid.to_string());
        }
    }

    /// The UID of the run `name` in `namespace`, when it exists.
    pub fn uid(&self, namespace: &str, name: &str) -> Option<&str> {
        self.0
            .get(&(namespace.to_string(), name.to_string()))
            .map(String::as_str)
    }

    /// The UIDs of the runs.
    pub fn uids(&self) -> impl Iterator<Item = &str> {
        self.0.values().map(String::as_str)
    }
}

/// Why an object is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// It lacks [`RUN_LABEL`].
    NotLabelled,
    /// It has a deletion timestamp: it is going already.
    BeingDeleted,
    /// Its controller is not an AgentRun (agent-sandbox's Sandbox, or anyone's).
    ForeignController,
    /// It has no controller at all.
    NoController,
    /// The run controlling it exists, with the UID its reference names.
    RunExists,
    /// It carries [`RUN_LABEL`]: [`verdict`] judges it, not [`owned_verdict`].
    Labelled,
    /// Not every one of its owners is a run of this API (or it has none).
    NoRunOwner,
}

/// What the sweep does with one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep(Kept),
    /// Delete it: the run `run` it belongs to is gone (`replaced_by` is `None`), or was
    /// recreated as another object with the UID `replaced_by`.
    Orphan {
        run: String,
        replaced_by: Option<String>,
    },
}

impl Verdict {
    pub fn is_orphan(&self) -> bool {
        matches!(self, Self::Orphan { .. })
    }
}

/// Decides one object, given the runs that exist.
pub fn verdict(object: &ObjectMeta, runs: &Runs) -> Verdict {
    let labelled = object
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(RUN_LABEL));
    if !labelled {
        return Verdict::Keep(Kept::NotLabelled);
    }
    if object.deletion_timestamp.is_some() {
        return Verdict::Keep(Kept::BeingDeleted);
    }
    let Some(controller) = controller_of(object) else {
        return Verdict::Keep(Kept::NoController);
    };
    let Some(run) = controlling_run(object) else {
        return Verdict::Keep(Kept::ForeignController);
    };
    let namespace = object.namespace.as_deref().unwrap_or_default();
    match runs.uid(namespace, run) {
        Some(uid) if uid == controller.uid => Verdict::Keep(Kept::RunExists),
        other => Verdict::Orphan {
            run: run.to_string(),
            replaced_by: other.map(str::to_string),
        },
    }
}

/// The kinds of the runs a Secret may belong to without our label: Konveyor's Hub creates a
/// token Secret (`agentic-run-*`) for each AgentRun and AgentWorkflowRun it starts, and
/// points its ownerReference at the run.
const RUN_KINDS: [&str; 2] = ["AgentRun", "AgentWorkflowRun"];

/// Whether `reference` names a run of this API: an AgentRun or AgentWorkflowRun of
/// `konveyor.io`, or of no group at all (`apiVersion: v1alpha1`), as versions of Konveyor's
/// Hub write it. The garbage collector cannot resolve a group-less reference and so never
/// deletes what it owns; the sweep does.
pub fn names_a_run(reference: &OwnerReference) -> bool {
    let group = reference
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    RUN_KINDS.contains(&reference.kind.as_str()) && (group.is_empty() || group == GROUP)
}

/// What the sweep does with an object that is not labelled for a run but names runs as its
/// owners (Konveyor's Hub's token Secrets), given the UIDs of the runs and workflow runs
/// that exist. It is an orphan only when every one of its owners is such a run and none of
/// them exists: an object with any other owner is left to that owner (and the garbage
/// collector), a labelled one to [`verdict`].
pub fn owned_verdict(object: &ObjectMeta, live: &BTreeSet<String>) -> Verdict {
    let labelled = object
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(RUN_LABEL));
    if labelled {
        return Verdict::Keep(Kept::Labelled);
    }
    if object.deletion_timestamp.is_some() {
        return Verdict::Keep(Kept::BeingDeleted);
    }
    let owners = object.owner_references.as_deref().unwrap_or_default();
    let Some(first) = owners.first() else {
        return Verdict::Keep(Kept::NoRunOwner);
    };
    if !owners.iter().all(names_a_run) {
        return Verdict::Keep(Kept::NoRunOwner);
    }
    if owners.iter().any(|owner| live.contains(&owner.uid)) {
        return Verdict::Keep(Kept::RunExists);
    }
    Verdict::Orphan {
        run: first.name.clone(),
        replaced_by: None,
    }
}

/// The orphans among `objects`, in their order.
pub fn orphans<'a>(objects: &'a [ObjectMeta], runs: &Runs) -> Vec<&'a ObjectMeta> {
    objects
        .iter()
        .filter(|object| verdict(object, runs).is_orphan())
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    use super::*;

    fn run(namespace: &str, name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// An object in `team` labelled for `label` (unless `None`) with these references.
    fn object(name: &str, label: Option<&str>, references: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("team".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-of-{name}")),
            labels: label.map(|run| [(RUN_LABEL.to_string(), run.to_string())].into()),
            owner_references: Some(references),
            ..Default::default()
        }
    }

    fn owned_by_run(name: &str, run: &str, uid: &str) -> ObjectMeta {
        object(
            name,
            Some(run),
            vec![reference("konveyor.io/v1alpha1", "AgentRun", run, uid)],
        )
    }

    #[test]
    fn an_object_of_a_run_that_is_gone_is_an_orphan() {
        let runs = Runs::from_metadata(&[run("team", "other", "u-other")]);
        assert_eq!(
            verdict(&owned_by_run("fix-sandbox", "fix", "u-fix"), &runs),
            Verdict::Orphan {
                run: "fix".into(),
                replaced_by: None
            }
        );
    }

    #[test]
    fn a_run_added_by_name_counts_as_existing() {
        let mut runs = Runs::default();
        runs.insert("team", "fix", "u-fix");
        runs.insert("team", "no-uid", "");
        assert_eq!(runs.uid("team", "fix"), Some("u-fix"));
        assert_eq!(runs.uids().collect::<Vec<_>>(), ["u-fix"]);
        assert_eq!(runs.uid("team", "no-uid"), None);
        assert_eq!(
            verdict(&owned_by_run("fix-sandbox", "fix", "u-fix"), &runs),
            Verdict::Keep(Kept::RunExists)
        );
    }

    #[test]
    fn an_object_of_an_existing_run_is_kept() {
        let runs = Runs::from_metadata(&[run("team", "fix", "u-fix")]);
        assert_eq!(
            verdict(&owned_by_run("fix-sandbox", "fix", "u-fix"), &runs),
            Verdict::Keep(Kept::RunExists)
        );
    }

    #[test]
    fn an_object_of_a_recreated_run_is_an_orphan() {
        // Same name, new object: the old run's objects are not the new run's.
        let runs = Runs::from_metadata(&[run("team", "fix", "u-new")]);
        assert_eq!(
            verdict(&owned_by_run("fix-sandbox", "fix", "u-old"), &runs),
            Verdict::Orphan {
                run: "fix".into(),
                replaced_by: Some("u-new".into())
            }
        );
    }

    #[test]
    fn a_run_of_the_same_name_elsewhere_does_not_count() {
        let runs = Runs::from_metadata(&[run("other-team", "fix", "u-fix")]);
        assert!(verdict(&owned_by_run("fix-sandbox", "fix", "u-fix"), &runs).is_orphan());
    }

    #[test]
    fn unlabelled_objects_are_never_touched() {
        let mut unlabelled = owned_by_run("fix-sandbox", "fix", "u-fix");
        unlabelled.labels = Some([("app".to_string(), "x".to_string())].into());
        assert_eq!(
            verdict(&unlabelled, &Runs::default()),
            Verdict::Keep(Kept::NotLabelled)
        );
        unlabelled.labels = None;
        assert_eq!(
            verdict(&unlabelled, &Runs::default()),
            Verdict::Keep(Kept::NotLabelled)
        );
    }

    #[test]
    fn objects_another_controller_owns_are_never_touched() {
        // agent-sandbox's pod of a Sandbox carries the run label too.
        let sandbox_pod = object(
            "fix-sandbox",
            Some("fix"),
            vec![reference(
                "agents.x-k8s.io/v1beta1",
                "Sandbox",
                "fix-sandbox",
                "u-s",
            )],
        );
        assert_eq!(
            verdict(&sandbox_pod, &Runs::default()),
            Verdict::Keep(Kept::ForeignController)
        );
        // An AgentRun of another group is not ours.
        let lookalike = object(
            "cm",
            Some("fix"),
            vec![reference("example.com/v1", "AgentRun", "fix", "u-fix")],
        );
        assert_eq!(
            verdict(&lookalike, &Runs::default()),
            Verdict::Keep(Kept::ForeignController)
        );
        // A run that owns without controlling is not the controller: whoever controls it
        // decides.
        let mut shared = object(
            "cm",
            Some("fix"),
            vec![
                OwnerReference {
                    controller: None,
                    ..reference("konveyor.io/v1alpha1", "AgentRun", "fix", "u-fix")
                },
                reference("apps/v1", "Deployment", "web", "u-web"),
            ],
        );
        assert_eq!(
            verdict(&shared, &Runs::default()),
            Verdict::Keep(Kept::ForeignController)
        );
        shared.owner_references.as_mut().unwrap().pop();
        assert_eq!(
            verdict(&shared, &Runs::default()),
            Verdict::Keep(Kept::NoController),
            "owned but not controlled by the run"
        );
    }

    #[test]
    fn labelled_objects_without_a_controller_are_kept() {
        let copied = object("cm", Some("fix"), Vec::new());
        assert_eq!(
            verdict(&copied, &Runs::default()),
            Verdict::Keep(Kept::NoController)
        );
    }

    #[test]
    fn objects_being_deleted_are_left_to_finish() {
        let mut going = owned_by_run("fix-sandbox", "fix", "u-fix");
        going.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(
            verdict(&going, &Runs::default()),
            Verdict::Keep(Kept::BeingDeleted)
        );
    }

    #[test]
    fn a_long_run_name_is_matched_in_full_not_by_its_label() {
        // The label value of a name over 63 characters is shortened; the reference is not.
        let long = "r".repeat(200);
        let mut object = owned_by_run("cm", &crate::names::label_value(&long), "u-long");
        object.owner_references = Some(vec![reference(
            "konveyor.io/v1alpha1",
            "AgentRun",
            &long,
            "u-long",
        )]);
        let runs = Runs::from_metadata(&[run("team", &long, "u-long")]);
        assert_eq!(verdict(&object, &runs), Verdict::Keep(Kept::RunExists));
    }

    /// A token Secret as Konveyor's Hub makes it: no label, owned (not controlled) by the run.
    fn token_secret(api_version: &str, kind: &str, run: &str, uid: &str) -> ObjectMeta {
        object(
            "agentic-run-x7k2p",
            None,
            vec![OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..reference(api_version, kind, run, uid)
            }],
        )
    }

    #[test]
    fn a_hub_token_secret_goes_with_its_run_group_less_or_not() {
        let live: BTreeSet<String> = ["u-live".to_string()].into();
        for api_version in ["v1alpha1", "konveyor.io/v1alpha1"] {
            for kind in ["AgentRun", "AgentWorkflowRun"] {
                assert_eq!(
                    owned_verdict(&token_secret(api_version, kind, "gone", "u-gone"), &live),
                    Verdict::Orphan {
                        run: "gone".into(),
                        replaced_by: None
                    },
                    "{api_version} {kind}"
                );
                assert_eq!(
                    owned_verdict(&token_secret(api_version, kind, "live", "u-live"), &live),
                    Verdict::Keep(Kept::RunExists),
                    "{api_version} {kind}"
                );
            }
        }
    }

    #[test]
    fn a_secret_owned_by_anything_else_is_left_alone() {
        let none = BTreeSet::new();
        // Another group's AgentRun, another kind, no owner at all.
        for (api_version, kind) in [
            ("example.com/v1alpha1", "AgentRun"),
            ("v1alpha1", "Agent"),
            ("apps/v1", "Deployment"),
        ] {
            assert_eq!(
                owned_verdict(&token_secret(api_version, kind, "gone", "u-gone"), &none),
                Verdict::Keep(Kept::NoRunOwner),
                "{api_version} {kind}"
            );
        }
        assert_eq!(
            owned_verdict(&object("s", None, Vec::new()), &none),
            Verdict::Keep(Kept::NoRunOwner)
        );
        // A run and something else: the other owner keeps it.
        let mut shared = token_secret("v1alpha1", "AgentRun", "gone", "u-gone");
        shared.owner_references.as_mut().unwrap().push(reference(
            "apps/v1",
            "Deployment",
            "web",
            "u-web",
        ));
        assert_eq!(
            owned_verdict(&shared, &none),
            Verdict::Keep(Kept::NoRunOwner)
        );
        // Two runs, one alive.
        let mut two = token_secret("v1alpha1", "AgentRun", "gone", "u-gone");
        two.owner_references.as_mut().unwrap().push(reference(
            "konveyor.io/v1alpha1",
            "AgentWorkflowRun",
            "flow",
            "u-flow",
        ));
        assert!(owned_verdict(&two, &none).is_orphan());
        assert_eq!(
            owned_verdict(&two, &["u-flow".to_string()].into()),
            Verdict::Keep(Kept::RunExists)
        );
    }

    #[test]
    fn labelled_and_departing_secrets_are_not_judged_by_their_owners() {
        let none = BTreeSet::new();
        assert_eq!(
            owned_verdict(&owned_by_run("fix-acp-key", "fix", "u-fix"), &none),
            Verdict::Keep(Kept::Labelled)
        );
        let mut going = token_secret("v1alpha1", "AgentRun", "gone", "u-gone");
        going.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(
            owned_verdict(&going, &none),
            Verdict::Keep(Kept::BeingDeleted)
        );
    }

    #[test]
    fn orphans_picks_exactly_the_orphans() {
        let runs = Runs::from_metadata(&[run("team", "live", "u-live")]);
        let objects = vec![
            owned_by_run("live-config", "live", "u-live"),
            owned_by_run("gone-config", "gone", "u-gone"),
            object("mine", None, Vec::new()),
            owned_by_run("old-live-config", "live", "u-before"),
        ];
        let names: Vec<_> = orphans(&objects, &runs)
            .into_iter()
            .map(|o| o.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["gone-config", "old-live-config"]);
    }

    #[test]
    fn runs_without_identity_are_left_out() {
        let mut no_uid = run("team", "fix", "");
        let runs = Runs::from_metadata([&no_uid]);
        assert_eq!(runs.uid("team", "fix"), None);
        no_uid.uid = Some("u".into());
        no_uid.namespace = None;
        assert_eq!(Runs::from_metadata([&no_uid]), Runs::default());
    }
}
