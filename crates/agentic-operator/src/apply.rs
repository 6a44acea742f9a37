//! Server-side apply with the operator's single field manager.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use crate::context::FIELD_MANAGER;
use crate::error::{Error, Result};

fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
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
