//! What reading a skill image from its registry comes to, as a [`Fetched`] outcome: shared by
//! SkillCards and SkillCollections, whose reads fail the same ways and say so in the same
//! words. And when a pass of either kind looks again.

use std::time::Duration;

use agentic_core::cards::{Fetched, Finding, Next};
use agentic_core::reasons::REASON_REGISTRY_UNAVAILABLE;
use agentic_oci::OciError;
use kube::runtime::controller::Action;

use crate::apply::NAME_TAKEN_RETRY;
use crate::error::{Error, Result};

/// The registry of `spec.image`, or the outcome refusing a reference that names none.
pub(in crate::controllers) fn registry_of<T>(image: &str) -> Result<String, Fetched<T>> {
    agentic_oci::image_registry(image)
        .map_err(|e| Fetched::Refused(Finding::new(e.reason(), format!("spec.image: {e}"))))
}

/// The object a read is for, in the operator's log.
pub(in crate::controllers) struct Reader<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

/// What the registry's `answer` comes to. Which way a connection failed (refused, reset, a
/// TLS handshake) stays in the operator's log: in a status any author of a card could read,
/// it would turn the operator into a port scanner of every address it reaches. `field`
/// prefixes the message of a refusal with the field it is about.
pub(in crate::controllers) fn registry_answer<T>(
    answer: Result<T, OciError>,
    registry: &str,
    reader: &Reader<'_>,
    field: Option<&str>,
) -> Fetched<T> {
    match answer {
        Ok(read) => Fetched::Read(read),
        Err(e) if e.is_transient() => {
            tracing::warn!(
                namespace = reader.namespace,
                name = reader.name,
                %registry,
                error = %crate::error::Chain(&e),
                "registry unreachable"
            );
            Fetched::Unavailable(Finding::new(
                REASON_REGISTRY_UNAVAILABLE,
                format!("registry {registry} did not answer; the operator's log has the cause"),
            ))
        }
        Err(e) => {
            let message = match field {
                Some(field) => format!("{field}: {e}"),
                None => e.to_string(),
            };
            Fetched::Rejected(Finding::new(e.reason(), message))
        }
    }
}

/// The action a pass of either kind ends with: `unavailable` is the error it backs off from
/// when its server did not answer.
pub(in crate::controllers) fn action(
    next: Next,
    refresh: Duration,
    unavailable: impl FnOnce() -> Error,
) -> Result<Action> {
    match next {
        Next::AwaitChange => Ok(Action::await_change()),
        Next::Refresh => Ok(Action::requeue(refresh)),
        Next::NameTaken => Ok(Action::requeue(NAME_TAKEN_RETRY)),
        Next::Unavailable => Err(unavailable()),
    }
}
