//! Why a signature that exists does not count: a stable reason and a message naming the
//! signature, the field and the limit. Messages never hold key material, only fingerprints,
//! digests and names.

/// The stable reason of a [`Refusal`]: what a caller may branch on, count or report.
/// Every one of them makes a card's `Verified` condition `SignatureInvalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// A signature, payload, bundle, certificate, statement or log entry that cannot be read.
    Malformed,
    /// Over a limit of [`crate::limits`] (the message names it).
    OverLimit,
    /// The signature does not verify with any accepted key, or with its certificate's key.
    SignatureMismatch,
    /// It signs another digest, or names another repository.
    OtherContent,
    /// It binds to the digest alone, and the requirement asks that it name the repository.
    NotRepositoryBound,
    /// Its certificate does not chain to the trust root, was not valid when logged, or
    /// lacks a valid signed certificate timestamp of the trust root's CT logs.
    UntrustedCertificate,
    /// Its certificate names no accepted issuer and subject.
    IdentityMismatch,
    /// Its transparency-log entry is missing, does not verify, or is of another signature.
    LogEntryInvalid,
    /// The signing key is revoked, expired or not for signing, or the signature uses a hash
    /// algorithm git refuses.
    KeyNotUsable,
}

impl RefusalReason {
    /// The reason as one word.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "Malformed",
            Self::OverLimit => "OverLimit",
            Self::SignatureMismatch => "SignatureMismatch",
            Self::OtherContent => "OtherContent",
            Self::NotRepositoryBound => "NotRepositoryBound",
            Self::UntrustedCertificate => "UntrustedCertificate",
            Self::IdentityMismatch => "IdentityMismatch",
            Self::LogEntryInvalid => "LogEntryInvalid",
            Self::KeyNotUsable => "KeyNotUsable",
        }
    }
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signature that does not count: why, as a [`RefusalReason`] and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub reason: RefusalReason,
    pub message: String,
}

impl Refusal {
    pub fn new(reason: RefusalReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// One refusal for all of `refusals` (each signature's), their messages joined: its
    /// reason is the first's, the one found first in the order signatures are read.
    pub(crate) fn all(refusals: Vec<Refusal>) -> Self {
        let reason = refusals
            .first()
            .map_or(RefusalReason::Malformed, |first| first.reason);
        let messages: Vec<String> = refusals.into_iter().map(|r| r.message).collect();
        Self::new(reason, messages.join("; "))
    }

    /// The same refusal, its message after `context` (the signature or field it is about).
    #[must_use]
    pub fn within(self, context: &str) -> Self {
        Self {
            reason: self.reason,
            message: format!("{context}: {}", self.message),
        }
    }
}
