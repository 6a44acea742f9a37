//! Rotation: a live run whose credential proxy mounts a Secret has that Secret's version
//! written on its pod when it changes, so that the pod's kubelet syncs the pod and rewrites
//! the Secret's volume at once rather than at its periodic sync; the proxy reads the key
//! file at every request. Gather (the pod the judge read, the Secret's version from the
//! watch cache, no API read) → decide (`agentic_core::sandbox::credential_refresh`, pure) →
//! apply (one annotation, only when it differs).

use agentic_core::sandbox::{CREDENTIAL_VERSION_ANNOTATION, credential_refresh, credential_secret};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::reflector::ObjectRef;

use crate::apply::annotate_pod;
use crate::context::Context;
use crate::error::{Chain, Error, Result};

/// Tells the kubelet of `pod`, a live run's pod in `namespace`, of a new version of the
/// Secret its credential proxy mounts. A conflict (another manager holds the annotation, or
/// the pod was replaced) is logged and left: the kubelet's periodic sync still brings the
/// key, later.
pub(super) async fn pass_on(ctx: &Context, namespace: &str, pod: Option<&Pod>) -> Result<()> {
    let Some(pod) = pod else {
        return Ok(());
    };
    let version = credential_secret(&pod.metadata, pod.status.as_ref())
        .and_then(|secret| secret_version(ctx, namespace, secret));
    let Some(refresh) = credential_refresh(pod, version.as_deref()) else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    match annotate_pod(
        &pods,
        &refresh.pod,
        &refresh.uid,
        CREDENTIAL_VERSION_ANNOTATION,
        &refresh.version,
    )
    .await
    {
        Err(Error::Kube(error)) if matches!(&error, kube::Error::Api(status) if matches!(status.code, 404 | 409)) =>
        {
            tracing::warn!(
                namespace,
                pod = refresh.pod,
                error = %Chain(&error),
                "cannot write the credential version on the pod; its kubelet picks up the Secret at its next periodic sync"
            );
            Ok(())
        }
        other => other,
    }
}

/// The `resourceVersion` of the Secret `name` in `namespace`, from the watch cache of the
/// Secrets' metadata.
fn secret_version(ctx: &Context, namespace: &str, name: &str) -> Option<String> {
    ctx.caches(namespace)?
        .secrets?
        .get(&ObjectRef::new(name).within(namespace))?
        .metadata
        .resource_version
        .clone()
}
