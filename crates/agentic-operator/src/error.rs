//! The operator's error type: what can stop a reconcile pass.

/// An error that ends a reconcile pass early; the object is retried with per-object
/// exponential backoff. Findings about the user's objects (invalid skills, missing references)
/// are not errors: they are reported in conditions and the pass succeeds.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),

    /// The registry could not be reached; already reported in the object's conditions.
    #[error("registry unavailable: {0}")]
    RegistryUnavailable(String),

    /// An object could not be turned into JSON for the API server.
    #[error("serializing {what}: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },

    /// A built object could not be turned into JSON.
    #[error(transparent)]
    Build(#[from] agentic_core::Error),

    /// An object arrived without metadata every stored object has (namespace, uid).
    #[error("{kind} {name} has no {field}")]
    MissingMetadata {
        kind: &'static str,
        name: String,
        field: &'static str,
    },
}

impl Error {
    /// A stable CamelCase word for metrics, events and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Kube(kube::Error::Api(_)) => "ApiError",
            Self::Kube(_) => "ApiUnavailable",
            Self::RegistryUnavailable(_) => "RegistryUnavailable",
            Self::Serialize { .. } => "SerializationFailed",
            Self::MissingMetadata { .. } => "MissingMetadata",
            Self::Build(e) => e.reason(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
