//! Files from a Secret or a ConfigMap mounted into a run's sandbox.

use k8s_openapi::api::core::v1::KeyToPath;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// A Secret or a ConfigMap of the run's namespace, mounted read-only into the agent container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("has(self.secretName) != has(self.configMapName)").message("set exactly one of secretName and configMapName")
)]
#[serde(rename_all = "camelCase")]
pub struct FileMount {
    /// Absolute path in the agent container. It may not be, lie inside or contain
    /// `/opt/skills`, `/run/konveyor`, `/workspace`, `/tmp` or the service-account token's
    /// `/var/run/secrets/kubernetes.io/serviceaccount` (the run fails with reason
    /// `InvalidFileMounts`); `.`, `..`, repeated and trailing slashes are resolved first.
    #[schemars(length(min = 1, max = 4096))]
    pub mount_path: String,

    /// Name of the Secret to mount; exactly one of `secretName` and `configMapName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub secret_name: Option<String>,

    /// Name of the ConfigMap to mount; exactly one of `secretName` and `configMapName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub config_map_name: Option<String>,

    /// A relative path inside the volume to mount instead of its root, for example one key
    /// as a single file: a key, or an `items[].path` when `items` is set. Empty means unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub sub_path: Option<String>,

    /// Which keys to project and where, as in a Secret or ConfigMap volume; unset: every key
    /// becomes a file named like it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub items: Vec<KeyToPath>,
}
