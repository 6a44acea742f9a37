//! What reading a skill image from its registry comes to, as a [`Fetched`] outcome: shared by
//! SkillCards and SkillCollections, whose reads fail the same ways and say so in the same
//! words. And when a pass of either kind looks again.

use std::time::Duration;

use agentic_core::cards::{Fetched, Finding, Next};
use agentic_core::reasons::SkillCardReason;
use agentic_oci::OciError;
use agentic_skill::SkillVerdict;
use kube::runtime::controller::Action;

use crate::apply::NAME_TAKEN_RETRY;

/// How often a card fails closed because the trust policies are not known looks again (its
/// pass waited for their list already).
const TRUST_POLICIES_RETRY: Duration = Duration::from_secs(10);
use crate::error::{Error, Result};

/// The registry of `spec.image`, or the outcome refusing a reference that names none.
pub(in crate::controllers) fn registry_of<T>(image: &str) -> Result<String, Fetched<T>> {
    agentic_oci::image_registry(image)
        .map_err(|e| Fetched::Refused(Finding::new(oci_reason(&e), format!("spec.image: {e}"))))
}

/// The reason a card (or, through `SkillCollectionReason::for_collection`, a collection)
/// writes for a registry error: the error's own word (`OciError::reason`) where the card has
/// it. No arm is a catch-all, so a new variant does not compile until it is given a reason.
pub(in crate::controllers) fn oci_reason(error: &OciError) -> SkillCardReason {
    use SkillCardReason as R;
    match error {
        OciError::InvalidReference { .. } => R::InvalidReference,
        OciError::InvalidSubPath { .. } => R::InvalidSubPath,
        OciError::ImageNotFound { .. } => R::ImageNotFound,
        OciError::Unauthorized { .. } => R::Unauthorized,
        // Transient: a read reports these as an outage (`registry_answer`), whose reason is
        // `RegistryUnavailable`. `Internal` is a failure of the operator's own client (a
        // closed semaphore, a header it could not build), `Io` of a local file read, which
        // only the command line's `skill push` and docker config file reading do.
        OciError::RegistryUnavailable { .. } | OciError::Internal { .. } | OciError::Io { .. } => {
            R::RegistryUnavailable
        }
        OciError::RegistryError { .. } => R::RegistryError,
        // A docker config that does not parse: for a card, one of its pull Secrets.
        OciError::InvalidCredentials { .. } => R::InvalidPullSecret,
        OciError::DigestMismatch { .. } => R::DigestMismatch,
        OciError::SubPathRequired { .. } => R::SubPathRequired,
        OciError::Skill(verdict) => verdict_reason(verdict),
        OciError::NestedSkillFile { .. } => R::NestedSkillFile,
        OciError::LinkInSkill { .. } => R::LinkInSkill,
        // A card without `spec.subPath` on an image with too many skill directories.
        OciError::TooManySkills { .. } => R::TooManySkills,
        OciError::UnsafeImageContent { .. } => R::UnsafeImageContent,
        OciError::ImageTooLarge { .. } => R::ImageTooLarge,
        OciError::InvalidImage { .. } => R::InvalidImage,
        // Only `skill push` packs a local directory; the skill it refuses is not valid.
        OciError::InvalidSkillSource { .. } => R::InvalidSkill,
    }
}

/// The reason of a verdict on a `SKILL.md`, wherever it was read from.
pub(in crate::controllers) fn verdict_reason(verdict: &SkillVerdict) -> SkillCardReason {
    match verdict {
        SkillVerdict::SkillNotFound { .. } => SkillCardReason::SkillNotFound,
        SkillVerdict::InvalidSkill { .. } => SkillCardReason::InvalidSkill,
        SkillVerdict::GooseIncompatible { .. } => SkillCardReason::GooseIncompatible,
    }
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
                SkillCardReason::RegistryUnavailable,
                format!("registry {registry} did not answer; the operator's log has the cause"),
            ))
        }
        Err(e) => {
            let message = match field {
                Some(field) => format!("{field}: {e}"),
                None => e.to_string(),
            };
            Fetched::Rejected(Finding::new(oci_reason(&e), message))
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
        Next::TrustPoliciesUnavailable => Ok(Action::requeue(TRUST_POLICIES_RETRY)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing_error() -> OciError {
        OciError::TooManySkills {
            count: 300,
            max: 256,
        }
    }

    /// A card without `spec.subPath` on an image of more skill directories than one image
    /// may: its own reason, the word the error has always written.
    #[test]
    fn too_many_skills_lands_on_a_card_as_too_many_skills() {
        let reader = Reader {
            namespace: "ns",
            name: "card",
        };
        let answer: Fetched<()> = registry_answer(Err(listing_error()), "r.example", &reader, None);
        let Fetched::Rejected(finding) = answer else {
            panic!("a verdict on the content: {answer:?}");
        };
        assert_eq!(finding.reason, SkillCardReason::TooManySkills);
        assert_eq!(finding.reason.as_str(), listing_error().reason());
    }

    /// The typed reasons keep the words the errors name themselves wherever the card has
    /// them; the others are the card reasons that describe them.
    #[test]
    fn registry_errors_keep_their_words() {
        let message = || "m".to_string();
        let errors = [
            OciError::InvalidReference {
                reference: "r".into(),
                message: message(),
            },
            OciError::ImageNotFound {
                image: "i".into(),
                message: message(),
            },
            OciError::RegistryError {
                image: "i".into(),
                message: message(),
            },
            OciError::UnsafeImageContent { message: message() },
            OciError::Skill(SkillVerdict::GooseIncompatible {
                path: "SKILL.md".into(),
                summary: message(),
            }),
            listing_error(),
        ];
        for error in &errors {
            assert_eq!(oci_reason(error).as_str(), error.reason());
        }
        let credentials = OciError::InvalidCredentials {
            source_name: "ns/secret".into(),
            message: message(),
        };
        assert_eq!(oci_reason(&credentials), SkillCardReason::InvalidPullSecret);
        let internal = OciError::Internal { message: message() };
        assert_eq!(oci_reason(&internal), SkillCardReason::RegistryUnavailable);
    }
}
