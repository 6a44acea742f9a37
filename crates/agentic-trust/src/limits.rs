//! What one verification may read. Every limit is checked before the bytes it guards are
//! read (by `Content-Length` or a descriptor's `size`, and again while reading), and each
//! error names its limit.

/// A signature manifest (the legacy `sha256-<hex>.sig` tag, a referrer) or a referrers index.
pub const MAX_SIGNATURE_MANIFEST_BYTES: u64 = 256 * 1024;

/// Signatures looked at per layout: layers of the `.sig` manifest, bundle referrers listed
/// by the referrers API or its fallback tag. cosign appends a layer per signing, so a key
/// rotation adds one; more than this is refused rather than read.
pub const MAX_SIGNATURES: usize = 64;

/// One simple-signing payload (the blob a legacy signature signs).
pub const MAX_PAYLOAD_BYTES: u64 = 16 * 1024;

/// One Sigstore bundle (the layer of a bundle referrer): the DSSE envelope, the certificate
/// chain and the transparency-log entries.
pub const MAX_BUNDLE_BYTES: u64 = 128 * 1024;

/// Certificates from a keyless signature's leaf up to the trust root, both included.
pub const MAX_CHAIN_LENGTH: usize = 5;

/// Descriptors a referrers index may list, signatures or not; the rest is never parsed.
pub const MAX_REFERRERS: usize = 256;

/// Bytes of one annotation value (a signature, a certificate chain, a Rekor bundle).
pub const MAX_ANNOTATION_BYTES: usize = 32 * 1024;

/// A git commit object read for its signature.
pub const MAX_COMMIT_BYTES: usize = 1024 * 1024;

/// Entries of an allowed-signers list.
pub const MAX_ALLOWED_SIGNERS: usize = 1024;

/// Certificate authorities one trust root may hold.
pub const MAX_TRUST_ROOT_CERTIFICATES: usize = 64;

/// Armored OpenPGP public keys one policy may list (`gitSigners.gpgKeys`).
pub const MAX_GPG_KEYS: usize = 32;

/// One armored OpenPGP public key: a key with its subkeys and self-signatures; keys with
/// many third-party certifications are larger and should be exported with
/// `gpg --export-options export-minimal`.
pub const MAX_GPG_KEY_BYTES: usize = 64 * 1024;
