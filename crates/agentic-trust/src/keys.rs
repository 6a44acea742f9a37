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
const RSA: &str = "1.2.840.113549.1.1.1";
/// The RSA sizes ring verifies: smaller keys are breakable, larger ones cost too much.
const MIN_RSA_BITS: usize = 2048;
const MAX_RSA_BITS: usize = 8192;

/// Why bytes are not a public key this verifier checks signatures with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a SubjectPublicKeyInfo: {0}")]
    NotSpki(String),
    #[error("trailing bytes after the SubjectPublicKeyInfo")]
    TrailingBytes,
    #[error("ECDSA on curve {0:?} is not supported (P-256 and P-384 are)")]
    UnsupportedCurve(String),
    #[error(
        "an RSA key of {bits} bits (RSA keys of {MIN_RSA_BITS} to {MAX_RSA_BITS} bits are supported)"
    )]
    RsaSize { bits: usize },
    #[error("key algorithm {0} is not supported (ECDSA P-256, P-384, Ed25519 and RSA are)")]
    UnsupportedAlgorithm(String),
    /// A key this crate made could not be encoded (an invariant of the encoder).
    #[error("the key cannot be encoded: {0}")]
    Unencodable(String),
}

/// A public key that signatures are checked with: ECDSA P-256 (what `cosign generate-key-pair`
/// makes, and Fulcio and Rekor use), ECDSA P-384, Ed25519, or RSA of 2048 to 8192 bits with
/// PKCS#1 v1.5 and SHA-256 (what cosign signs with an imported RSA key; it never writes PSS).
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
    RsaPkcs1Sha256,
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
        PublicKey::from_spki_der(&block.contents).map_err(|error| invalid(error.to_string()))
    }

    /// Reads a DER SubjectPublicKeyInfo.
    pub(crate) fn from_spki_der(der: &[u8]) -> Result<PublicKey, KeyError> {
        let (rest, spki) = SubjectPublicKeyInfo::from_der(der)
            .map_err(|error| KeyError::NotSpki(error.to_string()))?;
        if !rest.is_empty() {
            return Err(KeyError::TrailingBytes);
        }
        PublicKey::from_spki(&spki, der)
    }

    /// The key of a parsed SPKI whose DER encoding is `der`.
    pub(crate) fn from_spki(
        spki: &SubjectPublicKeyInfo<'_>,
        der: &[u8],
    ) -> Result<PublicKey, KeyError> {
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
                    other => return Err(KeyError::UnsupportedCurve(other.to_string())),
                }
            }
            ED25519 => KeyAlgorithm::Ed25519,
            RSA => {
                let bits = match spki.parsed() {
                    Ok(x509_parser::public_key::PublicKey::RSA(rsa)) => modulus_bits(rsa.modulus),
                    _ => 0,
                };
                if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
                    return Err(KeyError::RsaSize { bits });
                }
                KeyAlgorithm::RsaPkcs1Sha256
            }
            other => return Err(KeyError::UnsupportedAlgorithm(other.to_string())),
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

    /// The TLS `(HashAlgorithm, SignatureAlgorithm)` pair (RFC 5246 §7.4.1.4.1) a signature
    /// by this key is made with, as a certificate-transparency log names it in an SCT.
    pub(crate) fn tls_algorithms(&self) -> (u8, u8) {
        match self.algorithm {
            KeyAlgorithm::EcdsaP256 => (4, 3),
            KeyAlgorithm::EcdsaP384 => (5, 3),
            KeyAlgorithm::Ed25519 => (8, 7),
            KeyAlgorithm::RsaPkcs1Sha256 => (4, 1),
        }
    }

    /// Whether `signature` (ASN.1 DER for ECDSA, as cosign writes it) signs `message`, with
    /// the key's own hash (SHA-384 for P-384, SHA-256 for P-256 and RSA).
    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithm: &'static dyn VerificationAlgorithm = match self.algorithm {
            KeyAlgorithm::EcdsaP256 => &signature::ECDSA_P256_SHA256_ASN1,
            KeyAlgorithm::EcdsaP384 => &signature::ECDSA_P384_SHA384_ASN1,
            KeyAlgorithm::Ed25519 => &signature::ED25519,
            KeyAlgorithm::RsaPkcs1Sha256 => &signature::RSA_PKCS1_2048_8192_SHA256,
        };
        UnparsedPublicKey::new(algorithm, &self.key)
            .verify(message, signature)
            .is_ok()
    }
}

/// Bits of a big-endian RSA modulus, leading zero bytes and bits not counted.
fn modulus_bits(modulus: &[u8]) -> usize {
    let significant = modulus
        .iter()
        .position(|byte| *byte != 0)
        .map_or(&[][..], |first| &modulus[first..]);
    match significant.first() {
        Some(top) => significant.len() * 8 - top.leading_zeros() as usize,
        None => 0,
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
            PublicKey::from_spki_der(&block.contents).map_err(|error| TrustError::InvalidKey {
                name: format!("{name} (block {})", index + 1),
                message: error.to_string(),
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
