//! A run's pod as the watch cache keeps it: its metadata and status, not its spec.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::Deserialize;

/// A Pod read without its spec. The AgentRun controller reads a pod's metadata (its owner,
/// the pinned skills annotation) and status (phase, container states) only, and the spec
/// (containers, env, the skills' volumes) is most of a pod's bytes: decoded into a `Pod`
/// and then dropped, it still cost every pod event its decoding, and every cached pod the
/// 1.4 kB of an empty `Option<PodSpec>` (a `Pod` takes 2.4 kB before any of its strings).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SandboxPod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodStatus>,
}

impl SandboxPod {
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
}
