//! A run's pod as the watch cache keeps it: its metadata and status, not its spec.

use agentic_core::sandbox::{CREDENTIAL_SECRET_ANNOTATION, CREDENTIAL_VERSION_ANNOTATION};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::Deserialize;

/// A Pod read without its spec. The AgentRun controller reads a pod's metadata (its owner,
/// its credential proxy's annotations) and status (phase, container states) only, and the spec
/// (containers, env, the skills' volumes) is most of a pod's bytes: decoded into a `Pod`
/// and then dropped, it still cost every pod event its decoding, and every cached pod the
/// 1.4 kB of an empty `Option<PodSpec>` (a `Pod` takes 2.4 kB before any of its strings).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SandboxPod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodStatus>,
}

/// The annotations of a run's pod that the operator reads from its cache: the Secret its
/// credential proxy mounts, with the version the kubelet was last told of. The skills it
/// mounts are read once, from the API server, when a run adopts its pod.
const READ_ANNOTATIONS: [&str; 2] = [CREDENTIAL_SECRET_ANNOTATION, CREDENTIAL_VERSION_ANNOTATION];

impl SandboxPod {
    /// Drops, before the pod is cached, what no reader of the cache looks at: its labels (the
    /// watch selects by them, nothing reads them back) and every annotation but
    /// [`READ_ANNOTATIONS`] (the skills manifest, params and pinned skills it carries for its
    /// own files and for an adoption, the trace context, whatever admission webhooks add). A
    /// map with one entry costs a whole B-tree node, so a pod with none is cheaper by far
    /// than one with a few.
    pub fn forget_unread(&mut self) {
        self.metadata.labels = None;
        if let Some(annotations) = self.metadata.annotations.as_mut() {
            annotations.retain(|key, _| READ_ANNOTATIONS.contains(&key.as_str()));
            if annotations.is_empty() {
                self.metadata.annotations = None;
            }
        }
    }

    /// The pod as the judgement of a run's outcome takes it, without a spec.
    pub fn to_pod(&self) -> Pod {
        Pod {
            metadata: self.metadata.clone(),
            spec: None,
            status: self.status.clone(),
        }
    }
}

impl Resource for SandboxPod {
    const API_VERSION: &'static str = Pod::API_VERSION;
    const GROUP: &'static str = Pod::GROUP;
    const KIND: &'static str = Pod::KIND;
    const VERSION: &'static str = Pod::VERSION;
    const URL_PATH_SEGMENT: &'static str = Pod::URL_PATH_SEGMENT;
    type Scope = NamespaceResourceScope;
}

impl Metadata for SandboxPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use agentic_core::sandbox::{
        PARAMS_ANNOTATION, PINNED_SKILLS_ANNOTATION, RUN_LABEL, SKILLS_MANIFEST_ANNOTATION,
        credential_secret, pinned_skills,
    };

    use super::*;

    #[test]
    fn a_pod_is_read_without_its_spec_and_keeps_its_metadata_and_status() {
        let pod: SandboxPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "run-1", "namespace": "ns", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "agent", "image": "harness:1"}]},
            "status": {"phase": "Running"},
        }))
        .expect("a pod");
        let pod = pod.to_pod();
        assert_eq!(pod.metadata.name.as_deref(), Some("run-1"));
        assert_eq!(pod.metadata.annotations.unwrap()["a"], "b");
        assert!(pod.spec.is_none());
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
        assert!(std::mem::size_of::<SandboxPod>() * 2 < std::mem::size_of::<Pod>());
    }

    fn pod(annotations: serde_json::Value) -> SandboxPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "run-1",
                "namespace": "ns",
                "labels": {RUN_LABEL: "run-1", "app.kubernetes.io/managed-by": "agentic-operator"},
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
                    "name": "run-1", "uid": "u1", "controller": true}],
            },
            "status": {"phase": "Running"},
        }))
        .expect("a pod")
    }

    #[test]
    fn a_cached_pod_keeps_the_annotations_the_operator_reads_and_no_labels() {
        let mut cached = pod(serde_json::json!({
            PINNED_SKILLS_ANNOTATION: r#"[{"name": "review", "image": "registry.example/skills@sha256:0123"}]"#,
            CREDENTIAL_SECRET_ANNOTATION: "llm-key",
            CREDENTIAL_VERSION_ANNOTATION: "42",
            SKILLS_MANIFEST_ANNOTATION: "{\"skills\": []}",
            PARAMS_ANNOTATION: "{}",
            "opentelemetry.io/trace-context": "{}",
            "sidecar.istio.io/status": "{\"containers\": [\"istio-proxy\"]}",
        }));
        let whole = cached.clone();
        cached.forget_unread();
        assert_eq!(cached.metadata.labels, None);
        let kept: Vec<&str> = cached
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(key, _)| key.as_str())
            .collect();
        assert_eq!(
            kept,
            [CREDENTIAL_SECRET_ANNOTATION, CREDENTIAL_VERSION_ANNOTATION]
        );
        // The skills it mounts are the server's copy's to tell, for an adoption.
        assert_eq!(pinned_skills(&whole.metadata).len(), 1);
        assert!(pinned_skills(&cached.metadata).is_empty());
        // What the run's pass reads of its pod is the same as from the whole pod.
        assert_eq!(
            credential_secret(&cached.metadata, cached.status.as_ref()),
            Some("llm-key")
        );
        assert_eq!(
            cached.metadata.owner_references,
            whole.metadata.owner_references
        );
        assert_eq!(cached.status, whole.status);
    }

    #[test]
    fn a_cached_pod_without_those_annotations_has_none() {
        let mut cached = pod(serde_json::json!({"opentelemetry.io/trace-context": "{}"}));
        cached.forget_unread();
        assert_eq!(cached.metadata.annotations, None);
    }
}
