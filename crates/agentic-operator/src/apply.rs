//! Server-side apply with the operator's single field manager.

use agentic_api::AgentRunPhase;
use agentic_core::owners::is_controlled_by;
use agentic_core::sandbox::{TtlDefaults, time_to_live};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use crate::context::FIELD_MANAGER;
use crate::error::{Error, Result};

fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Creates are recorded under the same field manager as the applies.
fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// Applies `status` to the status subresource of `name`. Callers compare first, so that an
/// unchanged status is never written.
pub async fn apply_status<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(name, &params(), &Patch::Apply(&patch))
        .await?;
    Ok(())
}

/// Applies a whole object the operator owns (ConfigMaps, Secrets, Pods, Sandboxes).
pub async fn apply_object<K>(api: &Api<K>, name: &str, object: &impl Serialize) -> Result<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    let value = serde_json::to_value(object).map_err(|source| Error::Serialize {
        what: "object",
        source,
    })?;
    Ok(api.patch(name, &params(), &Patch::Apply(&value)).await?)
}

/// Applies the annotation `key: value` to the pod `name` with `uid`, a pod made by another
/// writer (agent-sandbox's controller) or by this operator's create: under the operator's
/// field manager and without force, so that the operator owns that annotation alone and
/// never takes a field another manager holds (a conflict comes back as an error). The UID
/// in the body is a precondition: a pod replaced under the name is not written.
pub async fn annotate_pod(
    api: &Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
    uid: &str,
    key: &str,
    value: &str,
) -> Result<()> {
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": uid, "annotations": {key: value}},
    });
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// How often an object blocked by a foreign object holding one of its names checks again,
/// besides the watches that usually bring it back sooner.
pub const NAME_TAKEN_RETRY: std::time::Duration = std::time::Duration::from_secs(15);

/// An object the caller does not control, holding the name of one of the caller's objects.
pub struct NameTaken {
    pub kind: &'static str,
    pub name: String,
}

/// What the owner-checked creates and applies below send and read back through an [`Api`].
pub trait OwnedObject: Resource + Clone + DeserializeOwned + Serialize + Debug {}

impl<K: Resource + Clone + DeserializeOwned + Serialize + Debug> OwnedObject for K {}

/// Creates `object` unless an object of its name exists, and returns the object as created.
/// One the caller (the owner with `uid`) controls, made by an earlier pass, is left as it is
/// and returned; any other is never touched and comes back as [`NameTaken`].
pub async fn create_owned<K>(
    api: &Api<K>,
    object: &K,
    kind: &'static str,
    uid: &str,
) -> Result<Result<K, NameTaken>>
where
    K: OwnedObject,
{
    let name = object.meta().name.clone().unwrap_or_default();
    match api.create(&post_params(), object).await {
        Ok(created) => Ok(Ok(created)),
        Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(&name).await? {
            Some(existing) if is_controlled_by(existing.meta(), uid) => Ok(Ok(existing)),
            Some(_) => Ok(Err(NameTaken { kind, name })),
            // Deleted since the create: the retry creates it.
            None => Err(kube::Error::Api(status).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Creates `object`, or applies it over the object of its name when the caller (the owner
/// with `uid`) controls that one, so a later pass can bring it up to date. Any other object of
/// the name is never touched and comes back as [`NameTaken`]. Reads first: for objects that
/// usually exist already.
pub async fn apply_owned<K>(
    api: &Api<K>,
    object: K,
    kind: &'static str,
    uid: &str,
) -> Result<Result<(), NameTaken>>
where
    K: OwnedObject,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let existing = api.get_opt(&name).await?;
    apply_owned_after_read(api, existing.as_ref(), object, kind, uid).await
}

/// [`apply_owned`] for a caller that has just read the object of `object`'s name: `existing`
/// is what that read returned, so the pass sends no second GET. The same rule holds: only an
/// object the owner with `uid` controls is written over, pinned to the version read (one
/// replaced since fails with a conflict), and one created since fails the create.
pub async fn apply_owned_after_read<K>(
    api: &Api<K>,
    existing: Option<&K>,
    object: K,
    kind: &'static str,
    uid: &str,
) -> Result<Result<(), NameTaken>>
where
    K: OwnedObject,
{
    match existing {
        None => Ok(create_owned(api, &object, kind, uid).await?.map(drop)),
        Some(existing) => apply_over(api, existing, object, kind, uid).await,
    }
}

/// Applies `object` over `existing` when the owner with `uid` controls it; else [`NameTaken`].
async fn apply_over<K>(
    api: &Api<K>,
    existing: &K,
    mut object: K,
    kind: &'static str,
    uid: &str,
) -> Result<Result<(), NameTaken>>
where
    K: OwnedObject,
{
    let name = object.meta().name.clone().unwrap_or_default();
    if !is_controlled_by(existing.meta(), uid) {
        return Ok(Err(NameTaken { kind, name }));
    }
    // A settled object is left alone: a pass that finds nothing new sends no write.
    if holds(existing, &object) {
        return Ok(Ok(()));
    }
    // Pinned to the version just checked: if the object is replaced in between, the apply
    // fails with a conflict instead of taking the replacement over.
    object
        .meta_mut()
        .resource_version
        .clone_from(&existing.meta().resource_version);
    apply_object(api, &name, &object).await?;
    Ok(Ok(()))
}

/// Whether `existing` already holds every field `desired` sets, as set: what an apply of
/// `desired` would change nothing of. Fields others set (more labels, fields the API server
/// defaults) do not count; a list counts whole.
fn holds<K: serde::Serialize>(existing: &K, desired: &K) -> bool {
    match (
        serde_json::to_value(existing),
        serde_json::to_value(desired),
    ) {
        (Ok(existing), Ok(desired)) => agentic_core::applied::holds(&existing, &desired),
        _ => false,
    }
}

/// A kind whose objects are deleted some time after they finish: AgentRuns and
/// AgentWorkflowRuns.
pub trait Expiring:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Debug
{
    type Status;
    /// `spec.ttlSecondsAfterFinished`.
    fn ttl_seconds_after_finished(&self) -> Option<i32>;
    /// The phase and the completion time `status` records.
    fn finished(status: &Self::Status) -> (Option<AgentRunPhase>, Option<&Time>);
}

/// What a pass over `object`, a finished run of `kind` in `namespace` whose status is
/// `status`, does with its time to live (its own, or the operator's `defaults`): deletes it
/// once the time is over, else looks again a second after it runs out (never, when it is
/// kept for good). What the run owns goes with it. The UID precondition spares a new object
/// of the same name, and one already gone is not an error.
pub async fn expire_finished<K: Expiring>(
    client: &Client,
    namespace: &str,
    object: &K,
    kind: &'static str,
    status: &K::Status,
    defaults: TtlDefaults,
) -> Result<Action> {
    let (phase, completion_time) = K::finished(status);
    let ttl = object.ttl_seconds_after_finished();
    match time_to_live(phase, completion_time, ttl, defaults, &crate::now()) {
        Some(left) if left.is_zero() => {
            let api: Api<K> = Api::namespaced(client.clone(), namespace);
            delete_expired(&api, object, kind).await?;
            Ok(Action::await_change())
        }
        // A second of slack so the pass lands after the time runs out.
        Some(left) => Ok(Action::requeue(left + std::time::Duration::from_secs(1))),
        None => Ok(Action::await_change()),
    }
}

async fn delete_expired<K>(api: &Api<K>, object: &K, kind: &'static str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: object.meta().uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&object.name_any(), &params).await {
        Ok(_) => {
            tracing::info!(
                kind,
                namespace = object.namespace().unwrap_or_default(),
                name = %object.name_any(),
                "deleted a finished run whose time to live is over"
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::holds;

    fn config_map(labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("skill".into()),
                labels: Some(map(labels)),
                ..ObjectMeta::default()
            },
            data: Some(map(data)),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn an_object_holds_what_it_was_applied_with_and_what_others_added() {
        let desired = config_map(&[("app", "op")], &[("SKILL.md", "v1")]);
        let mut existing = config_map(&[("app", "op"), ("team", "x")], &[("SKILL.md", "v1")]);
        existing.metadata.resource_version = Some("7".into());
        assert!(holds(&existing, &desired));
    }

    #[test]
    fn a_changed_or_missing_field_is_applied_again() {
        let desired = config_map(&[("app", "op")], &[("SKILL.md", "v2")]);
        assert!(!holds(
            &config_map(&[("app", "op")], &[("SKILL.md", "v1")]),
            &desired
        ));
        assert!(!holds(&config_map(&[], &[("SKILL.md", "v2")]), &desired));
        assert!(!holds(&config_map(&[("app", "op")], &[]), &desired));
    }
}
