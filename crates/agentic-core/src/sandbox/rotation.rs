//! Key rotation for a running sandbox: the credential proxy reads the Gateway's key from its
//! Secret volume at every request, and the kubelet rewrites that volume when it syncs the pod.
//! Left alone it does so at its periodic sync (`syncFrequency`, a minute by default, plus
//! jitter); an annotation change is a change of the pod for the kubelet, whose sync then
//! mounts the Secret's volumes again at once. So the operator writes the Secret's
//! `resourceVersion` into an annotation of each live pod whose proxy mounts it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::SandboxInputs;

/// The sandbox pod's annotation naming the Secret its credential proxy mounts, set when the
/// pod is made: a change of that Secret finds its pods by it (their cache keeps no spec).
pub const CREDENTIAL_SECRET_ANNOTATION: &str = "konveyor.io/credential-secret";
/// The sandbox pod's annotation holding the `resourceVersion` of that Secret the operator
/// last saw; written by the operator alone, never by whoever created the pod.
pub const CREDENTIAL_VERSION_ANNOTATION: &str = "konveyor.io/credential-version";

/// The annotation a sandbox pod is made with when its credential proxy mounts a Secret.
pub(super) fn credential_secret_annotation(inputs: &SandboxInputs) -> BTreeMap<String, String> {
    inputs
        .credential_isolation()
        .proxy()
        .map(|plan| {
            (
                CREDENTIAL_SECRET_ANNOTATION.to_string(),
                plan.secret_name.clone(),
            )
        })
        .into_iter()
        .collect()
}

/// The Secret the credential proxy of the pod with `metadata` and `status` mounts, while its
/// kubelet still updates the pod's volumes: none for a pod without a proxy, one that has
/// ended, or one being deleted.
pub fn credential_secret<'a>(
    metadata: &'a ObjectMeta,
    status: Option<&PodStatus>,
) -> Option<&'a str> {
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || metadata.deletion_timestamp.is_some() {
        return None;
    }
    metadata
        .annotations
        .as_ref()?
        .get(CREDENTIAL_SECRET_ANNOTATION)
        .map(String::as_str)
}

/// The annotation to write on a run's pod so that its kubelet mounts the Secret anew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRefresh {
    /// The pod, by name and UID (a pod replaced in between is not written).
    pub pod: String,
    pub uid: String,
    /// The Secret's `resourceVersion`, the value of [`CREDENTIAL_VERSION_ANNOTATION`].
    pub version: String,
}

/// What a live run's pod needs for its proxy to get the Secret's current key: `None` unless
/// the pod's proxy mounts a Secret ([`credential_secret`]), that Secret exists with
/// `secret_version` (its `resourceVersion`),
/// and the pod's [`CREDENTIAL_VERSION_ANNOTATION`] says another version. A pod made before
/// the operator saw the Secret carries none, so it is written once after it starts too: the
/// annotation records what the operator told the kubelet, not what it mounted first.
pub fn credential_refresh(pod: &Pod, secret_version: Option<&str>) -> Option<CredentialRefresh> {
    let metadata = &pod.metadata;
    credential_secret(metadata, pod.status.as_ref())?;
    let version = secret_version?;
    let written = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREDENTIAL_VERSION_ANNOTATION));
    if written.is_some_and(|written| written == version) {
        return None;
    }
    Some(CredentialRefresh {
        pod: metadata.name.clone()?,
        uid: metadata.uid.clone()?,
        version: version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::{Value, json};

    fn pod(annotations: Value, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "run-1", "uid": "u1", "annotations": annotations},
            "status": {"phase": phase},
        }))
        .expect("a pod")
    }

    #[test]
    fn a_proxied_pod_is_given_the_secrets_version_once() {
        let proxied = pod(json!({CREDENTIAL_SECRET_ANNOTATION: "llm-key"}), "Running");
        assert_eq!(
            credential_secret(&proxied.metadata, proxied.status.as_ref()),
            Some("llm-key")
        );
        assert_eq!(
            credential_refresh(&proxied, Some("41")),
            Some(CredentialRefresh {
                pod: "run-1".into(),
                uid: "u1".into(),
                version: "41".into(),
            })
        );
        let told = pod(
            json!({CREDENTIAL_SECRET_ANNOTATION: "llm-key", CREDENTIAL_VERSION_ANNOTATION: "41"}),
            "Running",
        );
        assert_eq!(credential_refresh(&told, Some("41")), None);
        let rotated = credential_refresh(&told, Some("57")).expect("a new version");
        assert_eq!(rotated.version, "57");
        // A pod still starting mounts the Secret soon, but is told all the same.
        let pending = pod(json!({CREDENTIAL_SECRET_ANNOTATION: "llm-key"}), "Pending");
        assert!(credential_refresh(&pending, Some("41")).is_some());
    }

    #[test]
    fn a_pod_without_a_proxy_a_secret_or_a_future_is_left_alone() {
        let unproxied = pod(json!({"konveyor.io/pinned-skills": "[]"}), "Running");
        assert_eq!(
            credential_secret(&unproxied.metadata, unproxied.status.as_ref()),
            None
        );
        assert_eq!(credential_refresh(&unproxied, Some("41")), None);
        let proxied = json!({CREDENTIAL_SECRET_ANNOTATION: "llm-key"});
        assert_eq!(
            credential_refresh(&pod(proxied.clone(), "Running"), None),
            None
        );
        let mut going = pod(proxied.clone(), "Running");
        going.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        for ended in [
            pod(proxied.clone(), "Succeeded"),
            pod(proxied, "Failed"),
            going,
        ] {
            assert_eq!(
                credential_secret(&ended.metadata, ended.status.as_ref()),
                None
            );
            assert_eq!(credential_refresh(&ended, Some("41")), None);
        }
    }
}
