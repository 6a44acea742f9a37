//! Public keys: cosign's PEM keys, the Rekor and Fulcio keys of a trust root, certificate keys.

use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use sha2::{Digest as _, Sha256};
use x509_parser::prelude::FromDer as _;
use x509_parser::x509::SubjectPublicKeyInfo;

use crate::TrustError;

const EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
const P256: &str = "1.2.840.10045.3.1.7";
const P384: &str = "1.3.132.0.34";
const ED25519: &str = "1.3.101.112";

/// A public key that signatures are checked with: ECDSA P-256 (what `cosign generate-key-pair`
/// makes, and Fulcio and Rekor use), ECDSA P-384 or Ed25519. RSA keys are refused.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    algorithm: KeyAlgorithm,
    /// The key bits of the SPKI (an uncompressed point for ECDSA).
    key: Vec<u8>,
    fingerprint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyAlgorithm {
    EcdsaP256,
    EcdsaP384,
    Ed25519,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey")
            .field("algorithm", &self.algorithm)
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl PublicKey {
    /// Reads one `-----BEGIN PUBLIC KEY-----` PEM block (a DER SubjectPublicKeyInfo), as
    /// `cosign generate-key-pair` writes `cosign.pub`. `name` says where it came from, for
    /// errors.
    pub fn from_pem(pem: &str, name: &str) -> Result<PublicKey, TrustError> {
        let invalid = |message: String| TrustError::InvalidKey {
            name: name.to_string(),
            message,
        };
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .map_err(|error| invalid(format!("not a PEM block: {error}")))?;
        if block.label != "PUBLIC KEY" {
            return Err(invalid(format!(
                "the PEM block is a {:?}, not a PUBLIC KEY",
                block.label
            )));
        }
        PublicKey::from_spki_der(&block.contents).map_err(invalid)
    }

    /// Reads a DER SubjectPublicKeyInfo.
    pub(crate) fn from_spki_der(der: &[u8]) -> Result<PublicKey, String> {
        let (rest, spki) = SubjectPublicKeyInfo::from_der(der)
            .map_err(|error| format!("not a SubjectPublicKeyInfo: {error}"))?;
        if !rest.is_empty() {
            return Err("trailing bytes after the SubjectPublicKeyInfo".to_string());
        }
        PublicKey::from_spki(&spki, der)
    }

    /// The key of a parsed SPKI whose DER encoding is `der`.
    pub(crate) fn from_spki(
        spki: &SubjectPublicKeyInfo<'_>,
        der: &[u8],
    ) -> Result<PublicKey, String> {
        let oid = spki.algorithm.algorithm.to_id_string();
        let algorithm = match oid.as_str() {
            EC_PUBLIC_KEY => {
                let curve = spki
                    .algorithm
                    .parameters
                    .as_ref()
                    .and_then(|parameters| parameters.as_oid().ok())
                    .map(|curve| curve.to_id_string())
                    .unwrap_or_default();
                match curve.as_str() {
                    P256 => KeyAlgorithm::EcdsaP256,
                    P384 => KeyAlgorithm::EcdsaP384,
                    other => {
                        return Err(format!(
                            "ECDSA on curve {other:?} is not supported (P-256 and P-384 are)"
                        ));
                    }
                }
            }
            ED25519 => KeyAlgorithm::Ed25519,
            other => {
                return Err(format!(
                    "key algorithm {other} is not supported (ECDSA P-256, P-384 and Ed25519 are)"
                ));
            }
        };
        Ok(PublicKey {
            algorithm,
            key: spki.subject_public_key.data.to_vec(),
            fingerprint: format!("sha256:{}", hex::encode(Sha256::digest(der))),
        })
    }

    /// `sha256:<hex>` of the DER SubjectPublicKeyInfo: what statuses name the key by
    /// (`openssl pkey -pubin -outform DER | sha256sum` prints the same hex).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether `signature` (ASN.1 DER for ECDSA, as cosign writes it) signs `message`, with
    /// the key's own hash (SHA-256 for P-256, SHA-384 for P-384).
    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithm: &'static dyn VerificationAlgorithm = match self.algorithm {
            KeyAlgorithm::EcdsaP256 => &signature::ECDSA_P256_SHA256_ASN1,
            KeyAlgorithm::EcdsaP384 => &signature::ECDSA_P384_SHA384_ASN1,
            KeyAlgorithm::Ed25519 => &signature::ED25519,
        };
        UnparsedPublicKey::new(algorithm, &self.key)
            .verify(message, signature)
            .is_ok()
    }
}

/// Every `PUBLIC KEY` block of `pem`, in order (a Rekor or CT log key list may hold several).
pub(crate) fn keys_from_pem_list(pem: &str, name: &str) -> Result<Vec<PublicKey>, TrustError> {
    let blocks = pem_blocks(pem.as_bytes(), name)?;
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            if block.label != "PUBLIC KEY" {
                return Err(TrustError::InvalidKey {
                    name: format!("{name} (block {})", index + 1),
                    message: format!("the PEM block is a {:?}, not a PUBLIC KEY", block.label),
                });
            }
            PublicKey::from_spki_der(&block.contents).map_err(|message| TrustError::InvalidKey {
                name: format!("{name} (block {})", index + 1),
                message,
            })
        })
        .collect()
}

/// The PEM blocks of `bytes`; none at all is an error.
pub(crate) fn pem_blocks(
    bytes: &[u8],
    name: &str,
) -> Result<Vec<x509_parser::pem::Pem>, TrustError> {
    let mut blocks = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(bytes) {
        blocks.push(block.map_err(|error| TrustError::InvalidKey {
            name: name.to_string(),
            message: format!("unreadable PEM: {error}"),
        })?);
    }
    if blocks.is_empty() {
        return Err(TrustError::InvalidKey {
            name: name.to_string(),
            message: "no PEM block found".to_string(),
        });
    }
    Ok(blocks)
}
