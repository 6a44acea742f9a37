//! The operator's error type: what can stop a reconcile pass.

use agentic_core::reasons::{ErrorReason, ReconcileErrorReason};

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

    /// The git server could not be reached; already reported in the object's conditions.
    #[error("git server unavailable: {0}")]
    SourceUnavailable(String),

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

    /// The HTTP client that checks Gateway endpoints could not be built.
    #[error("building the HTTP client: {0}")]
    HttpClient(String),

    /// An object arrived without metadata every stored object has (namespace, uid).
    #[error("{kind} {name} has no {field}")]
    MissingMetadata {
        kind: &'static str,
        name: String,
        field: &'static str,
    },
}

impl Error {
    /// The reason of the failed pass, for metrics, events and logs.
    pub fn reason(&self) -> ReconcileErrorReason {
        match self {
            Self::Kube(kube::Error::Api(_)) => ReconcileErrorReason::ApiError,
            Self::Kube(_) => ReconcileErrorReason::ApiUnavailable,
            Self::RegistryUnavailable(_) => ReconcileErrorReason::RegistryUnavailable,
            Self::SourceUnavailable(_) => ReconcileErrorReason::SourceUnavailable,
            Self::Serialize { .. } => ErrorReason::SerializationFailed.into(),
            Self::MissingMetadata { .. } => ErrorReason::MissingMetadata.into(),
            Self::HttpClient(_) => ReconcileErrorReason::HttpClientFailed,
            Self::Build(e) => e.reason().into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shows an error with its causes, `outer: cause: root cause`, for logs: a log line is often
/// all an operator has, and the outer message alone ("error trying to connect") hides why.
/// A cause that the text so far already contains is not repeated, since many errors print
/// their source in their own message.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let message = error.to_string();
            if !text.contains(&message) {
                text.push_str(": ");
                text.push_str(&message);
            }
            cause = error.source();
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::Chain;

    /// An error with a message and an optional cause.
    #[derive(Debug)]
    struct Layer(String, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn every_cause_shows_once() {
        let root = Layer("connection refused (os error 111)".into(), None);
        let connect = Layer("error trying to connect".into(), Some(Box::new(root)));
        let wrapper = Layer(
            "HTTP request failed: error trying to connect".into(),
            Some(Box::new(connect)),
        );
        assert_eq!(
            Chain(&wrapper).to_string(),
            "HTTP request failed: error trying to connect: connection refused (os error 111)"
        );
        assert_eq!(Chain(&Layer("alone".into(), None)).to_string(), "alone");
    }
}
