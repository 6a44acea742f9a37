//! What a commit's signature check found, shared by the SSH (`git`) and OpenPGP (`gpg`)
//! checks; its own module so that neither of them depends on the other for it.

/// What [`verify_commit`](crate::verify_commit) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitVerdict {
    /// Signed by an allowed signer.
    Verified {
        /// SSH: the principals field of the allowed-signers line that matched. GPG: the
        /// key's first user id.
        principal: String,
        /// SSH: `SHA256:<base64>`, as `ssh-keygen -lf` prints it. GPG: the primary key's
        /// fingerprint in upper-case hex, as `gpg --fingerprint` shows it without spaces.
        fingerprint: String,
    },
    /// The commit carries no signature.
    Unsigned,
    /// A signature that does not count, and why.
    Invalid(crate::Refusal),
}

impl CommitVerdict {
    /// The verdict in the terms of image verdicts, for one cache and one mapping to a
    /// card's status: the signer is the key's fingerprint, the layout [`Layout::Commit`].
    ///
    /// [`Layout::Commit`]: crate::Layout::Commit
    pub fn into_verdict(self, commit: &str) -> crate::ImageVerdict {
        match self {
            CommitVerdict::Verified { fingerprint, .. } => {
                crate::ImageVerdict::Verified(crate::Verified {
                    signer: crate::Signer::Key { fingerprint },
                    signature_digest: commit.to_string(),
                    layout: crate::Layout::Commit,
                })
            }
            CommitVerdict::Unsigned => crate::ImageVerdict::Unsigned,
            CommitVerdict::Invalid(refusal) => crate::ImageVerdict::Invalid(refusal),
        }
    }
}
