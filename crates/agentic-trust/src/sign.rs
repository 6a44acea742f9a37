//! Signing images as `cosign sign --key` does in its legacy layout, so that `cosign verify`
//! and [`verify_image`](crate::verify_image) accept what `skill push --sign` pushes.
//!
//! The `sha256-<hex>.sig` tag of the image's repository holds an OCI manifest with one layer
//! per signature: a simple-signing payload naming the repository and the digest, with the
//! base64 ECDSA signature of its bytes in the `dev.cosignproject.cosign/signature`
//! annotation. Signing appends a layer to what the tag holds; the signatures already there
//! are kept byte for byte.

use agentic_oci::{
    ArtifactLimit, ArtifactRequest, Blob, OciError, RegistryAuth, RegistryClient, ResolvedImage,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use der::Encode as _;
use der::asn1::{AnyRef, BitStringRef, ObjectIdentifier};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

use crate::image::{COSIGN_SIGNATURE_TYPE, SIGNATURE_ANNOTATION, SIMPLE_SIGNING};
use crate::keys::KeyError;
use crate::keys::pem_blocks;
use crate::limits::{MAX_SIGNATURE_MANIFEST_BYTES, MAX_SIGNATURES};
use crate::{PublicKey, TrustError};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// What go-containerregistry writes for an image built from nothing: cosign's config time.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// id-ecPublicKey and prime256v1 (RFC 5480): the algorithm of a P-256 key's
/// SubjectPublicKeyInfo.
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");

/// The PEM labels of a key `cosign generate-key-pair` writes (the second from cosign
/// before 2.0).
const COSIGN_KEY_LABELS: [&str; 2] = [
    "ENCRYPTED SIGSTORE PRIVATE KEY",
    "ENCRYPTED COSIGN PRIVATE KEY",
];
/// Bounds on the scrypt cost an encrypted key may ask for: cosign writes N = 2^16, r = 8,
/// p = 1 (64 MiB, a fraction of a second); a key file asking for more is refused rather
/// than allowed to take the machine's memory.
const MAX_SCRYPT_LOG_N: u8 = 20;
const MAX_SCRYPT_R: u32 = 32;
const MAX_SCRYPT_P: u32 = 16;

/// An ECDSA P-256 private key that signs images: what `cosign generate-key-pair` makes.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    public: PublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Reads a private key PEM: cosign's encrypted key (`ENCRYPTED SIGSTORE PRIVATE KEY`,
    /// scrypt and NaCl secretbox, opened with `password`) or an unencrypted PKCS#8 key
    /// (`PRIVATE KEY`, as `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`
    /// writes). `name` says where it came from, for errors.
    pub fn from_pem(
        pem: &str,
        name: &str,
        password: Option<&str>,
    ) -> Result<SigningKey, TrustError> {
        let invalid = |message: String| TrustError::InvalidKey {
            name: name.to_string(),
            message,
        };
        let blocks = pem_blocks(pem.as_bytes(), name)?;
        let [block] = blocks.as_slice() else {
            return Err(invalid(format!(
                "holds {} PEM blocks, not one private key",
                blocks.len()
            )));
        };
        let pkcs8 = match block.label.as_str() {
            "PRIVATE KEY" => Zeroizing::new(block.contents.clone()),
            label if COSIGN_KEY_LABELS.contains(&label) => {
                let password = password.ok_or_else(|| {
                    invalid("is encrypted: set COSIGN_PASSWORD to its password".to_string())
                })?;
                decrypt_cosign_key(&block.contents, password).map_err(invalid)?
            }
            "EC PRIVATE KEY" => {
                return Err(invalid(
                    "is a SEC1 EC PRIVATE KEY; convert it to PKCS#8 (`openssl pkcs8 -topk8 -nocrypt`)"
                        .to_string(),
                ));
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err(invalid(
                    "is an encrypted PKCS#8 key, which is not supported; decrypt it (`openssl pkcs8 -topk8 -nocrypt`) or import it with `cosign import-key-pair`"
                        .to_string(),
                ));
            }
            other => {
                return Err(invalid(format!(
                    "the PEM block is a {other:?}, not a PRIVATE KEY or a cosign key"
                )));
            }
        };
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|rejected| {
            invalid(format!(
                "not an ECDSA P-256 PKCS#8 key with its public key ({rejected})"
            ))
        })?;
        let public = p256_spki(pair.public_key().as_ref())
            .and_then(|spki| PublicKey::from_spki_der(&spki))
            .map_err(|error| invalid(error.to_string()))?;
        Ok(SigningKey { pair, public })
    }

    /// The public key whose signatures these are (its fingerprint names the signer).
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// The ASN.1 DER ECDSA signature of SHA-256 of `message`, as cosign writes it.
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|signature| signature.as_ref().to_vec())
            .map_err(|_| "the system random source failed while signing".to_string())
    }
}

#[derive(Deserialize)]
struct EncryptedKey {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    salt: String,
}

#[derive(Deserialize)]
struct ScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

/// The DER SubjectPublicKeyInfo of the P-256 key whose uncompressed point is `point`.
fn p256_spki(point: &[u8]) -> Result<Vec<u8>, KeyError> {
    let unencodable = |error: der::Error| KeyError::Unencodable(error.to_string());
    spki::SubjectPublicKeyInfoRef {
        algorithm: spki::AlgorithmIdentifierRef {
            oid: EC_PUBLIC_KEY,
            parameters: Some(AnyRef::from(&P256)),
        },
        subject_public_key: BitStringRef::from_bytes(point).map_err(unencodable)?,
    }
    .to_der()
    .map_err(unencodable)
}

/// Opens cosign's encrypted key envelope: the PKCS#8 DER sealed with NaCl secretbox under a
/// 32-byte scrypt key of the password.
fn decrypt_cosign_key(envelope: &[u8], password: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    use crypto_secretbox::aead::{Aead as _, KeyInit as _};
    let envelope: EncryptedKey = serde_json::from_slice(envelope)
        .map_err(|error| format!("not a cosign encrypted key: {error}"))?;
    if envelope.kdf.name != "scrypt" || envelope.cipher.name != "nacl/secretbox" {
        return Err(format!(
            "encrypted with {} and {}; only scrypt and nacl/secretbox are supported",
            envelope.kdf.name, envelope.cipher.name
        ));
    }
    let params = &envelope.kdf.params;
    let log_n = match params.n.checked_ilog2() {
        Some(log_n) if params.n.is_power_of_two() && log_n <= u32::from(MAX_SCRYPT_LOG_N) => {
            u8::try_from(log_n).map_err(|_| "scrypt N out of range".to_string())?
        }
        _ => {
            return Err(format!(
                "scrypt N = {} is not a power of two up to 2^{MAX_SCRYPT_LOG_N}",
                params.n
            ));
        }
    };
    if params.r > MAX_SCRYPT_R || params.p > MAX_SCRYPT_P {
        return Err(format!(
            "scrypt r = {}, p = {} exceed r <= {MAX_SCRYPT_R}, p <= {MAX_SCRYPT_P}",
            params.r, params.p
        ));
    }
    let decode = |field: &str, text: &str| {
        STANDARD
            .decode(text)
            .map_err(|error| format!("{field} is not base64: {error}"))
    };
    let salt = decode("kdf.salt", &envelope.kdf.salt)?;
    let nonce = decode("cipher.nonce", &envelope.cipher.nonce)?;
    let ciphertext = decode("ciphertext", &envelope.ciphertext)?;
    if nonce.len() != 24 {
        return Err(format!("cipher.nonce is {} bytes, not 24", nonce.len()));
    }
    let scrypt_params = scrypt::Params::new(log_n, params.r, params.p, 32)
        .map_err(|error| format!("invalid scrypt parameters: {error}"))?;
    let mut key = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(password.as_bytes(), &salt, &scrypt_params, key.as_mut())
        .map_err(|error| format!("scrypt: {error}"))?;
    let cipher =
        crypto_secretbox::XSalsa20Poly1305::new(crypto_secretbox::Key::from_slice(key.as_ref()));
    cipher
        .decrypt(
            crypto_secretbox::Nonce::from_slice(&nonce),
            ciphertext.as_slice(),
        )
        .map(Zeroizing::new)
        .map_err(|_| {
            "cannot be decrypted: wrong COSIGN_PASSWORD, or the file is damaged".to_string()
        })
}

/// A signature [`sign_image`] pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// `host/repository:sha256-<hex>.sig`, where it was pushed.
    pub tag: String,
    /// `sha256:…` of its simple-signing payload (the layer): what
    /// [`Verified::signature_digest`](crate::Verified::signature_digest) names.
    pub signature_digest: String,
    /// Signatures the tag holds now, this one included.
    pub signatures: usize,
}

/// Why [`sign_image`] pushed nothing.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The registry could not be read or written.
    #[error(transparent)]
    Registry(#[from] OciError),
    /// What the signature tag holds, or would hold, is refused.
    #[error("{tag}: {message}")]
    Refused { tag: String, message: String },
}

/// The simple-signing payload cosign signs: field names and order as cosign writes them.
#[derive(Serialize)]
struct Payload<'a> {
    critical: Critical<'a>,
    optional: Option<()>,
}

#[derive(Serialize)]
struct Critical<'a> {
    identity: Identity<'a>,
    image: PayloadImage<'a>,
    #[serde(rename = "type")]
    signature_type: &'a str,
}

#[derive(Serialize)]
struct Identity<'a> {
    #[serde(rename = "docker-reference")]
    docker_reference: &'a str,
}

#[derive(Serialize)]
struct PayloadImage<'a> {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: &'a str,
}

/// A signature manifest, read and written: the layers are kept as they were read.
#[derive(Serialize, Deserialize)]
struct SignatureManifest {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType", default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    config: Option<Layer>,
    #[serde(default)]
    layers: Vec<Layer>,
    /// An index has these; a signature manifest never does.
    #[serde(default, skip_serializing)]
    manifests: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone)]
struct Layer {
    #[serde(rename = "mediaType")]
    media_type: String,
    size: u64,
    digest: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
    /// Whatever else a descriptor carries (`urls`, `artifactType`…), kept.
    #[serde(flatten)]
    other: BTreeMap<String, serde_json::Value>,
}

/// go-containerregistry's config of an image of uncompressed layers, as cosign writes it.
#[derive(Serialize)]
struct Config<'a> {
    architecture: &'a str,
    created: &'a str,
    history: Vec<History<'a>>,
    os: &'a str,
    rootfs: RootFs<'a>,
    config: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct History<'a> {
    created: &'a str,
}

#[derive(Serialize)]
struct RootFs<'a> {
    #[serde(rename = "type")]
    fs_type: &'a str,
    diff_ids: Vec<&'a str>,
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Signs `image` (its digest, in its repository) with `key` and pushes the signature to the
/// image's `sha256-<hex>.sig` tag, appended to the signatures already there; pushes through
/// `client` as `auth`.
///
/// Refused, with nothing pushed, when the tag holds something else than a signature
/// manifest, or when the signatures would pass [`MAX_SIGNATURES`] or the manifest
/// [`MAX_SIGNATURE_MANIFEST_BYTES`] (verifiers would refuse the tag whole). Two signers at
/// once may each write the tag from what they read: one signature is then lost, as with
/// cosign; sign again.
pub async fn sign_image(
    client: &RegistryClient,
    auth: &RegistryAuth,
    image: &ResolvedImage,
    key: &SigningKey,
) -> Result<Signature, SignError> {
    let hex = image
        .digest
        .strip_prefix("sha256:")
        .ok_or_else(|| SignError::Refused {
            tag: image.repository_with_digest.clone(),
            message: "only sha256 digests can be signed".to_string(),
        })?;
    let tag_name = format!("sha256-{hex}.sig");
    let tag = format!("{}/{}:{tag_name}", image.registry, image.repository);
    let refused = |message: String| SignError::Refused {
        tag: tag.clone(),
        message,
    };

    let repository = format!("{}/{}", image.registry, image.repository);
    let payload = serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: &repository,
            },
            image: PayloadImage {
                docker_manifest_digest: &image.digest,
            },
            signature_type: COSIGN_SIGNATURE_TYPE,
        },
        optional: None,
    })
    .map_err(|error| refused(format!("the payload: {error}")))?;
    let signature = key.sign(&payload).map_err(&refused)?;
    let payload_digest = sha256(&payload);

    let existing = client
        .fetch_artifact(
            image,
            ArtifactRequest::Manifest(&tag_name),
            ArtifactLimit {
                max_bytes: MAX_SIGNATURE_MANIFEST_BYTES,
                name: "MAX_SIGNATURE_MANIFEST_BYTES",
            },
            auth,
        )
        .await?;
    let mut layers = match existing {
        Some(artifact) => existing_layers(&artifact.bytes).map_err(&refused)?,
        None => Vec::new(),
    };
    if layers.len() >= MAX_SIGNATURES {
        return Err(refused(format!(
            "holds {} signatures already; verifiers read at most {MAX_SIGNATURES} (MAX_SIGNATURES)",
            layers.len()
        )));
    }
    layers.push(Layer {
        media_type: SIMPLE_SIGNING.to_string(),
        size: payload.len() as u64,
        digest: payload_digest.clone(),
        annotations: BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            STANDARD.encode(&signature),
        )]),
        other: BTreeMap::new(),
    });

    let config = serde_json::to_vec(&Config {
        architecture: "",
        created: ZERO_TIME,
        history: layers
            .iter()
            .map(|_| History { created: ZERO_TIME })
            .collect(),
        os: "",
        rootfs: RootFs {
            fs_type: "layers",
            diff_ids: layers.iter().map(|layer| layer.digest.as_str()).collect(),
        },
        config: BTreeMap::new(),
    })
    .map_err(|error| refused(format!("the config: {error}")))?;
    let config_digest = sha256(&config);
    let signatures = layers.len();
    let manifest = serde_json::to_vec(&SignatureManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.to_string()),
        config: Some(Layer {
            media_type: OCI_CONFIG.to_string(),
            size: config.len() as u64,
            digest: config_digest.clone(),
            annotations: BTreeMap::new(),
            other: BTreeMap::new(),
        }),
        layers,
        manifests: None,
    })
    .map_err(|error| refused(format!("the manifest: {error}")))?;
    if manifest.len() as u64 > MAX_SIGNATURE_MANIFEST_BYTES {
        return Err(refused(format!(
            "the signature manifest would be {} bytes, over the {MAX_SIGNATURE_MANIFEST_BYTES} verifiers read (MAX_SIGNATURE_MANIFEST_BYTES)",
            manifest.len()
        )));
    }
    let blobs = [
        Blob {
            bytes: &payload,
            digest: &payload_digest,
        },
        Blob {
            bytes: &config,
            digest: &config_digest,
        },
    ];
    client
        .push_manifest(&tag, &blobs, &manifest, OCI_MANIFEST, auth)
        .await?;
    Ok(Signature {
        tag,
        signature_digest: payload_digest,
        signatures,
    })
}

/// The layers of the manifest a `.sig` tag holds, kept as they are; anything but an image
/// manifest is refused rather than overwritten.
fn existing_layers(bytes: &[u8]) -> Result<Vec<Layer>, String> {
    let manifest: SignatureManifest = serde_json::from_slice(bytes).map_err(|error| {
        format!("holds something else than a signature manifest ({error}); not replaced")
    })?;
    let media_type = manifest.media_type.as_deref().unwrap_or(OCI_MANIFEST);
    if manifest.manifests.is_some()
        || manifest.config.is_none()
        || ![OCI_MANIFEST, DOCKER_MANIFEST].contains(&media_type)
    {
        return Err(format!(
            "holds a {media_type} that is not a signature manifest; not replaced"
        ));
    }
    Ok(manifest.layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pkcs8_key_signs_what_its_public_key_verifies() {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).expect("a key");
        let pem = pem_of("PRIVATE KEY", pkcs8.as_ref());
        let key = SigningKey::from_pem(&pem, "key.pem", None).expect("the key reads");
        let signature = key.sign(b"payload").expect("signed");
        assert!(key.public_key().verifies(b"payload", &signature));
        assert!(!key.public_key().verifies(b"another payload", &signature));
        // The same SubjectPublicKeyInfo as another encoder writes for it.
        let other = rcgen::KeyPair::try_from(pkcs8.as_ref()).expect("rcgen reads the key");
        let expected = PublicKey::from_pem(&other.public_key_pem(), "rcgen").expect("a key");
        assert_eq!(key.public_key().fingerprint(), expected.fingerprint());
    }

    #[test]
    fn keys_that_cannot_sign_are_named_with_why() {
        let cases = [
            ("not a pem at all", "no PEM block"),
            (&pem_of("EC PRIVATE KEY", b"x") as &str, "openssl pkcs8"),
            (&pem_of("ENCRYPTED PRIVATE KEY", b"x"), "not supported"),
            (&pem_of("PUBLIC KEY", b"x"), "not a PRIVATE KEY"),
            (&pem_of("PRIVATE KEY", b"x"), "ECDSA P-256"),
            (
                &pem_of("ENCRYPTED SIGSTORE PRIVATE KEY", b"{}"),
                "COSIGN_PASSWORD",
            ),
        ];
        for (pem, expected) in cases {
            let error = SigningKey::from_pem(pem, "k.pem", None).expect_err(expected);
            let text = error.to_string();
            assert!(
                text.starts_with("k.pem: ") && text.contains(expected),
                "{text}"
            );
        }
    }

    #[test]
    fn an_encrypted_key_asking_for_too_much_memory_is_refused_before_scrypt() {
        let envelope = serde_json::json!({
            "kdf": {"name": "scrypt", "params": {"N": 1u64 << 30, "r": 8, "p": 1}, "salt": "AAAA"},
            "cipher": {"name": "nacl/secretbox", "nonce": STANDARD.encode([0u8; 24])},
            "ciphertext": "AAAA",
        });
        let why =
            decrypt_cosign_key(envelope.to_string().as_bytes(), "pw").expect_err("too costly");
        assert!(why.contains("2^20"), "{why}");
    }

    #[test]
    fn an_index_at_the_signature_tag_is_not_overwritten() {
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [],
        });
        let why = existing_layers(index.to_string().as_bytes())
            .err()
            .expect("refused");
        assert!(why.contains("not replaced"), "{why}");
    }

    fn pem_of(label: &str, der: &[u8]) -> String {
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            STANDARD.encode(der)
        )
    }
}
