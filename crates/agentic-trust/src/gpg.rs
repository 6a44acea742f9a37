//! OpenPGP (GPG) signatures of git commits, as `git commit -S` with `gpg.format=openpgp`
//! (git's default) makes them: a detached signature over the commit without its `gpgsig`
//! header.

use std::time::SystemTime;

use pgp::composed::{Deserializable as _, DetachedSignature, SignedPublicKey};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{KeyFlags, Signature, SignatureType};
use pgp::types::{KeyDetails as _, SignedUser, Tag};

use crate::TrustError;
use crate::limits::{MAX_GPG_KEY_BYTES, MAX_GPG_KEYS};
use crate::refusal::{Refusal, RefusalReason};
use crate::verdict::CommitVerdict;

/// Armored OpenPGP public keys (`gpg --armor --export <key>`) whose signatures count. A
/// signature by the primary key or by one of its signing subkeys counts; a revoked or expired
/// key (or subkey) does not.
#[derive(Debug, Clone, Default)]
pub struct GpgKeys {
    keys: Vec<SignedPublicKey>,
}

impl GpgKeys {
    /// Adds the key of one `-----BEGIN PGP PUBLIC KEY BLOCK-----`; `name` says where it came
    /// from, for errors. Its self-signatures must verify.
    pub fn add(&mut self, armored: &str, name: &str) -> Result<(), TrustError> {
        let invalid = |message: String| TrustError::InvalidKey {
            name: name.to_string(),
            message,
        };
        if self.keys.len() == MAX_GPG_KEYS {
            return Err(invalid(format!(
                "more than {MAX_GPG_KEYS} GPG keys (MAX_GPG_KEYS)"
            )));
        }
        if armored.len() > MAX_GPG_KEY_BYTES {
            return Err(invalid(format!(
                "the key is {} bytes, over the limit of {MAX_GPG_KEY_BYTES} (MAX_GPG_KEY_BYTES)",
                armored.len()
            )));
        }
        let (key, _) = SignedPublicKey::from_string(armored.trim())
            .map_err(|error| invalid(format!("not an armored OpenPGP public key: {error}")))?;
        key.verify_bindings().map_err(|error| {
            invalid(format!("the key's self-signatures do not verify: {error}"))
        })?;
        self.keys.push(key);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The upper-case hex fingerprint of the primary key, as `gpg --fingerprint` shows it
/// (without spaces): what a verdict names as the signer.
fn fingerprint_of(key: &SignedPublicKey) -> String {
    format!("{:X}", key.primary_key.fingerprint())
}

/// Verifies `armored` (the `gpgsig` header's value) over `signed` (the commit without that
/// header) with `keys`, judging expiry at `now`.
pub(crate) fn verify(
    keys: &GpgKeys,
    armored: &str,
    signed: &[u8],
    now: SystemTime,
) -> CommitVerdict {
    let invalid =
        |reason: RefusalReason, why: String| CommitVerdict::Invalid(Refusal::new(reason, why));
    let signature = match DetachedSignature::from_string(&format!("{}\n", armored.trim_end())) {
        Ok((signature, _)) => signature.signature,
        Err(error) => {
            return invalid(
                RefusalReason::Malformed,
                format!("the commit's signature is not an OpenPGP signature: {error}"),
            );
        }
    };
    if !matches!(
        signature.typ(),
        Some(SignatureType::Binary | SignatureType::Text)
    ) {
        return invalid(
            RefusalReason::Malformed,
            format!(
                "the OpenPGP signature is of type {:?}, not a signature over data",
                signature.typ()
            ),
        );
    }
    // GnuPG (so `git verify-commit`) refuses these digests as too weak.
    if let Some(weak @ (HashAlgorithm::Md5 | HashAlgorithm::Ripemd160)) = signature.hash_alg() {
        return invalid(
            RefusalReason::KeyNotUsable,
            format!("the OpenPGP signature uses the {weak} digest, which is too weak to count"),
        );
    }
    let issuer = issuer_of(&signature);
    let Some((key, subkey)) = keys
        .keys
        .iter()
        .find_map(|key| signing_key_of(key, &signature))
    else {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!("the signing key {issuer} is not among the allowed GPG keys"),
        );
    };
    let fingerprint = fingerprint_of(key);
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    if let Some(why) = refusal(key, subkey, now) {
        return invalid(
            RefusalReason::KeyNotUsable,
            format!("the GPG key {fingerprint} {why}"),
        );
    }
    let verified = match subkey {
        Some(subkey) => signature.verify(&subkey.key, signed),
        None => signature.verify(&key.primary_key, signed),
    };
    if let Err(error) = verified {
        return invalid(
            RefusalReason::SignatureMismatch,
            format!("the signature does not verify: {error}"),
        );
    }
    CommitVerdict::Verified {
        principal: key
            .details
            .users
            .first()
            .map(|user| String::from_utf8_lossy(user.id.id()).into_owned())
            .unwrap_or_default(),
        fingerprint,
    }
}

/// How the signature names its key: the issuer fingerprint, else the key id.
fn issuer_of(signature: &Signature) -> String {
    if let Some(fingerprint) = signature.issuer_fingerprint().first() {
        return format!("{fingerprint:X}");
    }
    signature.issuer_key_id().first().map_or_else(
        || "(unnamed)".to_string(),
        |id| hex::encode_upper(id.as_ref()),
    )
}

/// The key of `key` (the primary, or a subkey) that the signature names as its issuer.
fn signing_key_of<'k>(
    key: &'k SignedPublicKey,
    signature: &Signature,
) -> Option<(
    &'k SignedPublicKey,
    Option<&'k pgp::composed::SignedPublicSubKey>,
)> {
    let names = |candidate: &dyn pgp::types::KeyDetails| {
        let fingerprint = candidate.fingerprint();
        let key_id = candidate.legacy_key_id();
        signature.issuer_fingerprint().contains(&&fingerprint)
            || signature.issuer_key_id().contains(&&key_id)
    };
    if names(&key.primary_key) {
        return Some((key, None));
    }
    key.public_subkeys
        .iter()
        .find(|subkey| names(&subkey.key))
        .map(|subkey| (key, Some(subkey)))
}

/// Why the primary key (or `subkey`) may not sign at `now` (seconds since the epoch): revoked,
/// expired, or a subkey not bound for signing.
fn refusal(
    key: &SignedPublicKey,
    subkey: Option<&pgp::composed::SignedPublicSubKey>,
    now: u64,
) -> Option<String> {
    let primary = &key.primary_key;
    if key
        .details
        .revocation_signatures
        .iter()
        .any(|revocation| revocation.verify_key(primary).is_ok())
    {
        return Some("is revoked".to_string());
    }
    let self_signature = key_self_signature(key);
    if expired(self_signature, primary.created_at().as_secs(), now) {
        return Some("has expired".to_string());
    }
    let Some(subkey) = subkey else {
        // Signed by the primary key: its self-signature must allow signing (without any key
        // flags, as old keys have, the algorithm decides, as GnuPG does).
        let flags = self_signature.map(Signature::key_flags).unwrap_or_default();
        return (flags != KeyFlags::default() && !flags.sign())
            .then(|| "has a primary key that is not allowed to sign".to_string());
    };
    let verified = |signature: &&Signature| {
        signature
            .verify_subkey_binding(primary, &subkey.key)
            .is_ok()
    };
    let id = format!("{:X}", subkey.key.fingerprint());
    if subkey
        .signatures
        .iter()
        .filter(|s| s.typ() == Some(SignatureType::SubkeyRevocation))
        .any(|s| verified(&s))
    {
        return Some(format!("has its signing subkey {id} revoked"));
    }
    let binding = latest(
        subkey
            .signatures
            .iter()
            .filter(|s| s.typ() == Some(SignatureType::SubkeyBinding))
            .filter(verified),
    );
    match binding {
        None => Some(format!("has no valid binding for subkey {id}")),
        Some(binding) if !binding.key_flags().sign() => {
            Some(format!("has subkey {id}, which is not bound for signing"))
        }
        Some(_) if expired(binding, subkey.key.created_at().as_secs(), now) => {
            Some(format!("has its signing subkey {id} expired"))
        }
        Some(_) => None,
    }
}

/// The self-signature that states the primary key's properties (expiry, flags), as GnuPG
/// takes it: the latest certification that verifies of the primary user id (the one whose
/// such certification says primary, else the first) that is not revoked; without one, the
/// latest direct-key signature that verifies. A revocation never counts as the latest, so a
/// later revocation of another user id cannot lift an expiry.
fn key_self_signature(key: &SignedPublicKey) -> Option<&Signature> {
    let primary = &key.primary_key;
    let certified: Vec<&Signature> = key
        .details
        .users
        .iter()
        .filter_map(|user: &SignedUser| {
            let newest = latest(user.signatures.iter().filter(|signature| {
                signature
                    .verify_certification(primary, Tag::UserId, &user.id)
                    .is_ok()
            }))?;
            (newest.typ() != Some(SignatureType::CertRevocation)).then_some(newest)
        })
        .collect();
    certified
        .iter()
        .find(|signature| signature.is_primary())
        .or(certified.first())
        .copied()
        .or_else(|| {
            latest(
                key.details
                    .direct_signatures
                    .iter()
                    .filter(|signature| signature.verify_key(primary).is_ok()),
            )
        })
}

fn latest<'s>(signatures: impl Iterator<Item = &'s Signature>) -> Option<&'s Signature> {
    signatures.max_by_key(|signature| signature.created().map(pgp::types::Timestamp::as_secs))
}

/// Whether the key created at `created` has expired at `now`, by the key expiration time of
/// its latest self-signature (none, or zero, means it never expires).
fn expired<'s>(self_signature: impl Into<Option<&'s Signature>>, created: u32, now: u64) -> bool {
    self_signature
        .into()
        .and_then(Signature::key_expiration_time)
        .map(pgp::types::Duration::as_secs)
        .filter(|&lifetime| lifetime > 0)
        .is_some_and(|lifetime| u64::from(created) + u64::from(lifetime) <= now)
}
