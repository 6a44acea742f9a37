//! Skill provenance, verified offline: cosign signatures of skill images and SSH signatures
//! of git commits. No Kubernetes client; registry reads go through `agentic-oci`'s
//! [`RegistryClient`](agentic_oci::RegistryClient).
//!
//! # Images
//!
//! [`verify_image`] takes an image pinned by digest and a [`Requirement`] (cosign public keys
//! — several, for rotation — or keyless identities under a [`TrustRoot`]) and returns a
//! [`ImageVerdict`]:
//!
//! - [`ImageVerdict::Verified`]: who signed ([`Signer`]: the key's fingerprint, or the
//!   certificate's issuer and subject), the digest of the signature read, and its [`Layout`];
//! - [`ImageVerdict::Unsigned`]: no signature in either layout;
//! - [`ImageVerdict::Invalid`]: signatures exist but none counts (wrong key, over another digest,
//!   copied from another repository, a forged log entry, over a limit), and why;
//! - [`ImageVerdict::Unavailable`]: the registry could not be read; keep the previous verdict.
//!
//! Both layouts cosign writes are read: the legacy `sha256-<hex>.sig` tag (simple-signing
//! payloads, whose `critical.image.docker-manifest-digest` must be the pinned digest and
//! `critical.identity.docker-reference` the image's repository), and Sigstore bundles (v0.3,
//! a DSSE envelope of cosign's `https://sigstore.dev/cosign/sign/v1` in-toto statement)
//! attached as OCI referrers, found with the referrers API or, on registries without it,
//! its `sha256-<hex>` fallback tag. A referrer counts only if its own `subject` is the pinned
//! digest. A bundle's statement must name the image's repository when its subject names
//! one; one that names none, and a message signature, bind to the digest alone, which
//! [`Requirement::repository_bound`] refuses.
//!
//! [`VerificationCache`] keeps verdicts by repository, digest and requirement identity
//! (e.g. a policy's UID and generation), one verification for all concurrent lookups.
//!
//! # Keyless, offline
//!
//! A keyless signature (legacy layout) counts when: the signature verifies with its
//! certificate's key; the certificate chains (at most [`MAX_CHAIN_LENGTH`] certificates,
//! the path checked by `rustls-webpki`: signatures, validity, basic constraints and path
//! length, key usage, name constraints, critical extensions) to a certificate authority of
//! the trust root and is for code signing; the Rekor signed entry timestamp verifies with a
//! Rekor key of the trust root (the one whose SPKI digest is the entry's log id, within the
//! window [`TrustRoot::from_trusted_root_json`] gives it); the logged `hashedrekord` entry is
//! this signature (payload hash, signature and certificate compared: sigstore-rs#285's
//! verifier skipped that, so a valid SET of another entry would pass); every certificate
//! was valid at the logged time; and the certificate's issuer and subject match an accepted
//! [`Identity`]. Nothing is fetched from any Sigstore service.
//!
//! Sigstore bundles (v0.1 to v0.3) are checked the same way: a DSSE envelope must be logged
//! as a `dsse` entry of its statement, a message signature (over the image manifest, whose
//! digest must be the pinned one) as a `hashedrekord`; the bundle's inclusion promise is the
//! SET. When the trust root names CT log keys, the certificate must also carry an embedded
//! SCT of one of those logs verifying over its precertificate (RFC 6962); with none, SCTs
//! are not required. Keys may be ECDSA P-256/P-384, Ed25519 or RSA (PKCS#1 v1.5, SHA-256).
//!
//! # Git
//!
//! [`verify_commit`] checks a raw commit object's `gpgsig` signature against
//! [`CommitSigners`]: an SSH signature (SSHSIG, namespace `git`) against [`AllowedSigners`],
//! git's `gpg.ssh.allowedSignersFile` format, or an OpenPGP signature against [`GpgKeys`]
//! (armored public keys; revoked and expired keys refused), chosen by the signature's armor.
//!
//! # Limits
//!
//! | limit | value | guards |
//! |---|---|---|
//! | [`MAX_SIGNATURE_MANIFEST_BYTES`] | 256 KiB | a `.sig` manifest, a referrer, a referrers index |
//! | [`MAX_SIGNATURES`] | 64 | signatures per layout, envelope signatures |
//! | [`MAX_REFERRERS`] | 256 | descriptors of a referrers index |
//! | [`MAX_PAYLOAD_BYTES`] | 16 KiB | a simple-signing payload |
//! | [`MAX_BUNDLE_BYTES`] | 128 KiB | a Sigstore bundle |
//! | [`MAX_ANNOTATION_BYTES`] | 32 KiB | a signature, certificate, chain or Rekor bundle annotation |
//! | [`MAX_CHAIN_LENGTH`] | 5 | certificates from the leaf to the trust root |
//! | [`MAX_TRUST_ROOT_CERTIFICATES`] | 64 | certificate authorities of a trust root |
//! | [`MAX_COMMIT_BYTES`] | 1 MiB | a commit object |
//! | [`MAX_ALLOWED_SIGNERS`] | 1024 | lines of an allowed-signers list |
//! | [`MAX_GPG_KEYS`] | 32 | armored OpenPGP keys of one policy |
//! | [`MAX_GPG_KEY_BYTES`] | 64 KiB | one armored OpenPGP key |
//!
//! Sizes are checked before reading (a descriptor's `size`, `Content-Length`) and while
//! reading. Referrers are never followed recursively and a referrer listed twice is read
//! once, so a looping index ends.

mod cache;
mod git;
mod gpg;
mod image;
mod keyless;
mod keys;
mod limits;
mod refusal;
mod requirement;
mod sign;
mod verdict;

pub use cache::{
    CacheKey, DEFAULT_CACHE_ENTRIES, MaterialDigest, UNVERIFIED_TTL, VerificationCache,
};
pub use git::{AllowedSigners, CommitSigners, SignerLineError, verify_commit};
pub use gpg::GpgKeys;
pub use image::{
    AttachedSignature, SignatureKind, SignatureReadError, attached_signatures, verify_image,
};
pub use keys::{KeyError, PublicKey};
pub use limits::{
    MAX_ALLOWED_SIGNERS, MAX_ANNOTATION_BYTES, MAX_BUNDLE_BYTES, MAX_CHAIN_LENGTH,
    MAX_COMMIT_BYTES, MAX_GPG_KEY_BYTES, MAX_GPG_KEYS, MAX_PAYLOAD_BYTES, MAX_REFERRERS,
    MAX_SIGNATURE_MANIFEST_BYTES, MAX_SIGNATURES, MAX_TRUST_ROOT_CERTIFICATES,
};
pub use refusal::{Refusal, RefusalReason};
pub use requirement::{Identity, Keyless, MAX_PATTERN_BYTES, Pattern, Requirement, TrustRoot};
pub use sign::{SignError, Signature, SigningKey, sign_image};
pub use verdict::CommitVerdict;

/// The outcome of [`verify_image`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageVerdict {
    Verified(Verified),
    /// No signature in either layout.
    Unsigned,
    /// Signatures exist, none counts: why (each signature's, the first's reason).
    Invalid(Refusal),
    /// The registry could not be read: the caller keeps its previous verdict.
    Unavailable {
        why: String,
    },
}

/// A signature that counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub signer: Signer,
    /// `sha256:…` of what was read: the simple-signing layer (legacy tag), or the referrer
    /// manifest (bundles); for a commit ([`Layout::Commit`]), its id.
    pub signature_digest: String,
    pub layout: Layout,
}

/// Who signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// A cosign key, by `sha256:<hex>` of its DER SubjectPublicKeyInfo; an SSH key by its
    /// `SHA256:<base64>` fingerprint; a GPG key by its primary key's upper-case hex
    /// fingerprint.
    Key { fingerprint: String },
    /// A keyless certificate's OIDC issuer and subject.
    Identity { issuer: String, subject: String },
}

/// Where the signature was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The legacy `sha256-<hex>.sig` tag.
    Tag,
    /// A referrer listed by the registry's referrers API.
    Referrers,
    /// A referrer listed by the `sha256-<hex>` fallback tag (registries without the API).
    ReferrersTag,
    /// The `gpgsig` header of a git commit.
    Commit,
}

/// Input that cannot make a [`Requirement`] or [`AllowedSigners`]: a key, certificate,
/// pattern or allowed-signers line, named with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    #[error("{name}: {message}")]
    InvalidKey { name: String, message: String },
    #[error("{field}: invalid pattern: {message}")]
    InvalidPattern { field: String, message: String },
    #[error("{name}, line {line}: {error}")]
    InvalidAllowedSigners {
        name: String,
        line: usize,
        error: git::SignerLineError,
    },
}
