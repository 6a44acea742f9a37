//! Signatures of images, in both layouts cosign writes: the legacy `sha256-<hex>.sig` tag of
//! simple-signing layers, and Sigstore bundles attached as OCI referrers (found through the
//! referrers API, or its `sha256-<hex>` fallback tag on registries without it).

use agentic_oci::{
    ArtifactLimit, ArtifactRequest, OciError, RegistryAuth, RegistryClient, ResolvedImage,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

use crate::keyless::{BundleLogEntry, Signed, verify_bundle_keyless, verify_legacy_keyless};
use crate::limits::{
    MAX_ANNOTATION_BYTES, MAX_BUNDLE_BYTES, MAX_CHAIN_LENGTH, MAX_PAYLOAD_BYTES, MAX_REFERRERS,
    MAX_SIGNATURE_MANIFEST_BYTES, MAX_SIGNATURES,
};
use crate::refusal::{Refusal, RefusalReason};
use crate::{ImageVerdict, Layout, Requirement, Signer, Verified};

pub(crate) const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub(crate) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
const REKOR_BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
pub(crate) const COSIGN_SIGNATURE_TYPE: &str = "cosign container image signature";
/// The Sigstore bundle versions read: v0.1 and v0.2 by their parameter, v0.3 by both of its
/// names (cosign writes the second).
const BUNDLE_MEDIA_TYPES: [&str; 4] = [
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json",
];
/// The protobuf name of the only message digest a message-signature bundle may carry.
const SHA2_256: &str = "SHA2_256";
const DSSE_IN_TOTO: &str = "application/vnd.in-toto+json";
const IN_TOTO_STATEMENT: &str = "https://in-toto.io/Statement/v1";
const COSIGN_SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";

/// Verifies the signatures of `image` (pinned: its `digest` is what must be signed) against
/// `requirement`, reading them with `client` as `auth`.
///
/// The legacy tag is read first; the referrers (API, else the fallback tag) only when it
/// holds no signature that counts. A signature counts only when it verifies under the
/// requirement *and* what it signs names exactly `image.digest` (for the legacy layout also
/// `image`'s repository, so a signature copied from another repository never counts).
///
/// Never panics and never returns an error: a registry that cannot be read is
/// [`ImageVerdict::Unavailable`] (keep the previous verdict), content over a limit is
/// [`ImageVerdict::Invalid`] naming the limit.
pub async fn verify_image(
    client: &RegistryClient,
    auth: &RegistryAuth,
    image: &ResolvedImage,
    requirement: &Requirement,
) -> ImageVerdict {
    let mut reader = Reader {
        client,
        auth,
        image,
        requirement,
        refusals: Vec::new(),
        found: 0,
    };
    let outcome = async {
        if let Some(verified) = reader.legacy_tag().await? {
            return Ok(Some(verified));
        }
        reader.referrers().await
    }
    .await;
    match outcome {
        Ok(Some(verified)) => ImageVerdict::Verified(verified),
        Ok(None) if reader.found == 0 && reader.refusals.is_empty() => ImageVerdict::Unsigned,
        Ok(None) => ImageVerdict::Invalid(Refusal::all(reader.refusals)),
        Err(SignatureReadError::Unavailable(why)) => ImageVerdict::Unavailable { why },
        Err(SignatureReadError::Refused(refusal)) => {
            reader.refusals.push(refusal);
            ImageVerdict::Invalid(Refusal::all(reader.refusals))
        }
    }
}

/// Lists the signatures attached to `image` in both layouts, as the registry holds them,
/// without checking any: what `skill inspect` shows. The same limits as [`verify_image`]
/// apply; the error says why the registry could not be read or what it holds is refused.
pub async fn attached_signatures(
    client: &RegistryClient,
    auth: &RegistryAuth,
    image: &ResolvedImage,
) -> Result<Vec<AttachedSignature>, SignatureReadError> {
    let nothing_required = Requirement::default();
    let reader = Reader {
        client,
        auth,
        image,
        requirement: &nothing_required,
        refusals: Vec::new(),
        found: 0,
    };
    let listed = async {
        let mut attached = Vec::new();
        if let Some((_, manifest)) = reader.legacy_manifest().await? {
            for layer in manifest.layers {
                if layer.media_type != SIMPLE_SIGNING {
                    continue;
                }
                let kind = if layer.annotations.contains_key(CERTIFICATE_ANNOTATION) {
                    SignatureKind::Certificate
                } else {
                    SignatureKind::Key
                };
                attached.push(AttachedSignature {
                    layout: Layout::Tag,
                    digest: layer.digest,
                    kind,
                });
            }
        }
        if let Some((layout, bundles)) = reader.bundle_referrers().await? {
            attached.extend(bundles.into_iter().map(|entry| AttachedSignature {
                layout,
                digest: entry.digest,
                kind: SignatureKind::Bundle,
            }));
        }
        Ok(attached)
    };
    listed.await
}

/// A signature attached to an image, before any check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedSignature {
    pub layout: Layout,
    /// `sha256:…` of the simple-signing layer (legacy tag) or the referrer manifest (bundles),
    /// as [`Verified::signature_digest`] names it.
    pub digest: String,
    pub kind: SignatureKind,
}

/// What an attached signature claims to be, before any check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureKind {
    /// A legacy signature without a certificate: made with a key.
    Key,
    /// A legacy signature carrying a Fulcio certificate: keyless.
    Certificate,
    /// A Sigstore bundle (key or keyless; read only when verified).
    Bundle,
}

/// Why reading an image's signatures stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureReadError {
    /// The registry could not be read: the verdict is unknown.
    #[error("{0}")]
    Unavailable(String),
    /// What the registry holds is refused (over a limit, not what it claims to be).
    #[error("{0}")]
    Refused(Refusal),
}

/// Reading stopped early.
type Stop = SignatureReadError;

impl From<OciError> for Stop {
    fn from(error: OciError) -> Stop {
        let reason = match &error {
            OciError::ImageTooLarge { .. } => RefusalReason::OverLimit,
            OciError::DigestMismatch { .. } => RefusalReason::OtherContent,
            OciError::InvalidImage { .. } | OciError::InvalidReference { .. } => {
                RefusalReason::Malformed
            }
            other => return Stop::Unavailable(other.to_string()),
        };
        Stop::Refused(Refusal::new(reason, error.to_string()))
    }
}

struct Reader<'a> {
    client: &'a RegistryClient,
    auth: &'a RegistryAuth,
    image: &'a ResolvedImage,
    requirement: &'a Requirement,
    /// Why each signature found did not count, for [`ImageVerdict::Invalid`].
    refusals: Vec<Refusal>,
    /// Signatures found, counted or not.
    found: usize,
}

/// The signature of a simple-signing layer and its keyless material, from its annotations.
struct SignatureParts<'a> {
    signature: Vec<u8>,
    certificate: Option<&'a str>,
    chain: Option<&'a str>,
    rekor_bundle: Option<&'a str>,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Vec<Descriptor>,
    subject: Option<Descriptor>,
}

#[derive(Deserialize, Clone)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    #[serde(rename = "artifactType", default)]
    artifact_type: Option<String>,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

impl Reader<'_> {
    async fn fetch(
        &self,
        request: ArtifactRequest<'_>,
        max_bytes: u64,
        name: &str,
    ) -> Result<Option<Vec<u8>>, Stop> {
        let limit = ArtifactLimit { max_bytes, name };
        Ok(self
            .client
            .fetch_artifact(self.image, request, limit, self.auth)
            .await?
            .map(|artifact| artifact.bytes))
    }

    /// The hex of the pinned digest: the name of both signature tags.
    fn digest_tag(&self) -> Result<String, Stop> {
        self.image
            .digest
            .strip_prefix("sha256:")
            .map(|hex| format!("sha256-{hex}"))
            .ok_or_else(|| {
                Stop::Refused(Refusal::new(
                    RefusalReason::Malformed,
                    format!(
                        "{}: only sha256 digests can be verified",
                        self.image.repository_with_digest
                    ),
                ))
            })
    }

    fn parse_manifest(&self, bytes: &[u8], what: &str) -> Result<Manifest, Stop> {
        serde_json::from_slice(bytes).map_err(|error| {
            Stop::Refused(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "{what} of {} is not a manifest: {error}",
                    self.image.repository_with_digest
                ),
            ))
        })
    }

    /// The manifest of the legacy `sha256-<hex>.sig` tag and the tag's name, when it exists.
    async fn legacy_manifest(&self) -> Result<Option<(String, Manifest)>, Stop> {
        let tag = format!("{}.sig", self.digest_tag()?);
        let Some(bytes) = self
            .fetch(
                ArtifactRequest::Manifest(&tag),
                MAX_SIGNATURE_MANIFEST_BYTES,
                "MAX_SIGNATURE_MANIFEST_BYTES",
            )
            .await?
        else {
            return Ok(None);
        };
        let manifest = self.parse_manifest(&bytes, &format!("the signature tag {tag}"))?;
        if manifest.layers.len() > MAX_SIGNATURES {
            return Err(Stop::Refused(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the signature tag {tag} holds {} signatures, over the limit of {MAX_SIGNATURES} (MAX_SIGNATURES)",
                    manifest.layers.len()
                ),
            )));
        }
        Ok(Some((tag, manifest)))
    }

    /// What is over a limit or malformed in one layout (or one signature of it) has nothing
    /// usable: it is a refusal, and verification goes on, so that anyone who can push a tag
    /// cannot turn a valid signature of the other layout into a refusal. Only an unreadable
    /// registry stops it.
    fn unusable<T>(&mut self, result: Result<T, Stop>, what: &str) -> Result<Option<T>, Stop> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(Stop::Refused(refusal)) => {
                self.found += 1;
                self.refusals.push(refusal.within(what));
                Ok(None)
            }
            Err(unavailable) => Err(unavailable),
        }
    }

    /// The legacy layout: one manifest at `sha256-<hex>.sig`, a layer per signature.
    async fn legacy_tag(&mut self) -> Result<Option<Verified>, Stop> {
        let listed = self.legacy_manifest().await;
        let Some(Some((tag, manifest))) = self.unusable(listed, "the signature tag")? else {
            return Ok(None);
        };
        for layer in &manifest.layers {
            if layer.media_type != SIMPLE_SIGNING {
                continue;
            }
            self.found += 1;
            if !is_sha256_digest(&layer.digest) {
                self.refusals.push(Refusal::new(
                    RefusalReason::Malformed,
                    format!(
                        "a signature of {tag} names the malformed digest {:?}",
                        layer.digest
                    ),
                ));
                continue;
            }
            let checked = self.legacy_signature(layer).await;
            let what = format!("signature {} ({tag})", layer.digest);
            let Some(checked) = self.unusable(checked, &what)? else {
                continue;
            };
            match checked {
                Ok(signer) => {
                    return Ok(Some(Verified {
                        signer,
                        signature_digest: layer.digest.clone(),
                        layout: Layout::Tag,
                    }));
                }
                Err(why) => self
                    .refusals
                    .push(why.within(&format!("signature {} ({tag})", layer.digest))),
            }
        }
        Ok(None)
    }

    /// One simple-signing layer: `Ok(Err(why))` when it does not count.
    async fn legacy_signature(&self, layer: &Descriptor) -> Result<Result<Signer, Refusal>, Stop> {
        if layer.size > MAX_PAYLOAD_BYTES {
            return Ok(Err(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the payload is {} bytes, over the limit of {MAX_PAYLOAD_BYTES} (MAX_PAYLOAD_BYTES)",
                    layer.size
                ),
            )));
        }
        let annotation = |key: &str| -> Result<Option<&str>, Refusal> {
            match layer.annotations.get(key) {
                Some(value) if value.len() > MAX_ANNOTATION_BYTES => Err(Refusal::new(
                    RefusalReason::OverLimit,
                    format!(
                        "annotation {key} is {} bytes, over the limit of {MAX_ANNOTATION_BYTES} (MAX_ANNOTATION_BYTES)",
                        value.len()
                    ),
                )),
                other => Ok(other.map(String::as_str)),
            }
        };
        let read = || -> Result<SignatureParts<'_>, Refusal> {
            let signature = annotation(SIGNATURE_ANNOTATION)?.ok_or_else(|| {
                Refusal::new(
                    RefusalReason::Malformed,
                    format!("no {SIGNATURE_ANNOTATION} annotation"),
                )
            })?;
            let signature = STANDARD.decode(signature.trim()).map_err(|error| {
                Refusal::new(
                    RefusalReason::Malformed,
                    format!("the signature is not base64: {error}"),
                )
            })?;
            Ok(SignatureParts {
                signature,
                certificate: annotation(CERTIFICATE_ANNOTATION)?,
                chain: annotation(CHAIN_ANNOTATION)?,
                rekor_bundle: annotation(REKOR_BUNDLE_ANNOTATION)?,
            })
        };
        let parts = match read() {
            Ok(parts) => parts,
            Err(why) => return Ok(Err(why)),
        };
        let Some(payload) = self
            .fetch(
                ArtifactRequest::Blob(&layer.digest),
                MAX_PAYLOAD_BYTES,
                "MAX_PAYLOAD_BYTES",
            )
            .await?
        else {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                "its payload blob is missing",
            )));
        };
        let signer = match self.check_signature(
            &payload,
            &parts.signature,
            parts.certificate,
            parts.chain,
            parts.rekor_bundle,
        ) {
            Ok(signer) => signer,
            Err(why) => return Ok(Err(why)),
        };
        Ok(check_simple_signing(&payload, self.image).map(|()| signer))
    }

    /// The accepted key that made `signature` over `message`, if any.
    fn key_signer(&self, message: &[u8], signature: &[u8]) -> Option<Signer> {
        self.requirement
            .keys
            .iter()
            .find(|key| key.verifies(message, signature))
            .map(|key| Signer::Key {
                fingerprint: key.fingerprint().to_string(),
            })
    }

    fn no_accepted_key(&self) -> Refusal {
        Refusal::new(
            RefusalReason::SignatureMismatch,
            format!(
                "not signed by any of the {} accepted keys",
                self.requirement.keys.len()
            ),
        )
    }

    /// Who made a legacy `signature` over `message`, under the requirement's keys or keyless
    /// identities.
    fn check_signature(
        &self,
        message: &[u8],
        signature: &[u8],
        certificate: Option<&str>,
        chain: Option<&str>,
        rekor_bundle: Option<&str>,
    ) -> Result<Signer, Refusal> {
        if let Some(signer) = self.key_signer(message, signature) {
            return Ok(signer);
        }
        match (&self.requirement.keyless, certificate) {
            (Some(keyless), Some(certificate)) => verify_legacy_keyless(
                keyless,
                message,
                signature,
                certificate,
                chain,
                rekor_bundle,
            ),
            _ => Err(self.no_accepted_key()),
        }
    }

    /// The bundle referrers of the image, each listed once, and where they were listed: the
    /// referrers API, else its fallback tag.
    async fn bundle_referrers(&self) -> Result<Option<(Layout, Vec<Descriptor>)>, Stop> {
        let (bytes, layout) = match self
            .fetch(
                ArtifactRequest::Referrers(&self.image.digest),
                MAX_SIGNATURE_MANIFEST_BYTES,
                "MAX_SIGNATURE_MANIFEST_BYTES",
            )
            .await?
        {
            Some(bytes) => (bytes, Layout::Referrers),
            None => {
                let tag = self.digest_tag()?;
                match self
                    .fetch(
                        ArtifactRequest::Manifest(&tag),
                        MAX_SIGNATURE_MANIFEST_BYTES,
                        "MAX_SIGNATURE_MANIFEST_BYTES",
                    )
                    .await?
                {
                    Some(bytes) => (bytes, Layout::ReferrersTag),
                    None => return Ok(None),
                }
            }
        };
        let index = self.parse_manifest(&bytes, "the referrers index")?;
        if index.manifests.len() > MAX_REFERRERS {
            return Err(Stop::Refused(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the referrers index of {} lists {} manifests, over the limit of {MAX_REFERRERS} (MAX_REFERRERS)",
                    self.image.repository_with_digest,
                    index.manifests.len()
                ),
            )));
        }
        let mut bundles: Vec<Descriptor> = index
            .manifests
            .into_iter()
            .filter(|entry| {
                entry
                    .artifact_type
                    .as_deref()
                    .is_some_and(|kind| BUNDLE_MEDIA_TYPES.contains(&kind))
            })
            .collect();
        // A digest is put into a request path: one that is not `sha256:<hex>` is refused
        // before any use.
        if let Some(malformed) = bundles
            .iter()
            .find(|entry| !is_sha256_digest(&entry.digest))
        {
            return Err(Stop::Refused(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "the referrers index of {} lists the malformed digest {:?}",
                    self.image.repository_with_digest, malformed.digest
                ),
            )));
        }
        // The same referrer listed again is read once: a looping or padded index costs
        // nothing more.
        bundles.sort_by(|a, b| a.digest.cmp(&b.digest));
        bundles.dedup_by(|a, b| a.digest == b.digest);
        if bundles.len() > MAX_SIGNATURES {
            return Err(Stop::Refused(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "{} lists {} signature bundles, over the limit of {MAX_SIGNATURES} (MAX_SIGNATURES)",
                    self.image.repository_with_digest,
                    bundles.len()
                ),
            )));
        }
        Ok(Some((layout, bundles)))
    }

    /// Sigstore bundles attached as referrers.
    async fn referrers(&mut self) -> Result<Option<Verified>, Stop> {
        let listed = self.bundle_referrers().await;
        let Some(Some((layout, bundles))) = self.unusable(listed, "the referrers")? else {
            return Ok(None);
        };
        for entry in &bundles {
            self.found += 1;
            let checked = self.bundle_referrer(entry).await;
            let what = format!("signature bundle {}", entry.digest);
            let Some(checked) = self.unusable(checked, &what)? else {
                continue;
            };
            match checked {
                Ok(signer) => {
                    return Ok(Some(Verified {
                        signer,
                        signature_digest: entry.digest.clone(),
                        layout,
                    }));
                }
                Err(why) => self
                    .refusals
                    .push(why.within(&format!("signature bundle {}", entry.digest))),
            }
        }
        Ok(None)
    }

    /// One referrer manifest holding a bundle: `Ok(Err(why))` when it does not count.
    async fn bundle_referrer(&self, entry: &Descriptor) -> Result<Result<Signer, Refusal>, Stop> {
        if entry.size > MAX_SIGNATURE_MANIFEST_BYTES {
            return Ok(Err(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the referrer manifest is {} bytes, over the limit of {MAX_SIGNATURE_MANIFEST_BYTES} (MAX_SIGNATURE_MANIFEST_BYTES)",
                    entry.size
                ),
            )));
        }
        let Some(bytes) = self
            .fetch(
                ArtifactRequest::Manifest(&entry.digest),
                MAX_SIGNATURE_MANIFEST_BYTES,
                "MAX_SIGNATURE_MANIFEST_BYTES",
            )
            .await?
        else {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                "the referrer manifest is missing",
            )));
        };
        let manifest = self.parse_manifest(&bytes, "a referrer")?;
        // The fallback tag is a plain tag anyone who can push may rewrite: only the
        // referrer's own `subject` ties it to this image.
        if manifest
            .subject
            .as_ref()
            .map(|subject| subject.digest.as_str())
            != Some(self.image.digest.as_str())
        {
            return Ok(Err(Refusal::new(
                RefusalReason::OtherContent,
                format!("it refers to another manifest than {}", self.image.digest),
            )));
        }
        let [layer] = manifest.layers.as_slice() else {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "it holds {} layers, not the one bundle",
                    manifest.layers.len()
                ),
            )));
        };
        if !BUNDLE_MEDIA_TYPES.contains(&layer.media_type.as_str()) {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                format!("its layer is a {:?}, not a bundle", layer.media_type),
            )));
        }
        if !is_sha256_digest(&layer.digest) {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                format!("its layer names the malformed digest {:?}", layer.digest),
            )));
        }
        if layer.size > MAX_BUNDLE_BYTES {
            return Ok(Err(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the bundle is {} bytes, over the limit of {MAX_BUNDLE_BYTES} (MAX_BUNDLE_BYTES)",
                    layer.size
                ),
            )));
        }
        let Some(bytes) = self
            .fetch(
                ArtifactRequest::Blob(&layer.digest),
                MAX_BUNDLE_BYTES,
                "MAX_BUNDLE_BYTES",
            )
            .await?
        else {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                "its bundle blob is missing",
            )));
        };
        let bundle: Bundle = match serde_json::from_slice(&bytes) {
            Ok(bundle) => bundle,
            Err(error) => {
                return Ok(Err(Refusal::new(
                    RefusalReason::Malformed,
                    format!("the bundle is not a Sigstore bundle: {error}"),
                )));
            }
        };
        if !BUNDLE_MEDIA_TYPES.contains(&bundle.media_type.as_str()) {
            return Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "the bundle's media type {:?} is not a Sigstore bundle version this verifier reads",
                    bundle.media_type
                ),
            )));
        }
        match (&bundle.dsse_envelope, &bundle.message_signature) {
            (Some(envelope), None) => {
                Ok(self.check_envelope(envelope, &bundle.verification_material))
            }
            (None, Some(message)) => {
                // A message signature signs the image manifest itself: its bytes are read
                // (by digest, so they are the pinned bytes) to check the signature over them.
                let Some(manifest) = self
                    .fetch(
                        ArtifactRequest::Manifest(&self.image.digest),
                        MAX_SIGNATURE_MANIFEST_BYTES,
                        "MAX_SIGNATURE_MANIFEST_BYTES",
                    )
                    .await?
                else {
                    return Ok(Err(Refusal::new(
                        RefusalReason::Malformed,
                        "the signed image manifest is missing",
                    )));
                };
                Ok(self.check_message_signature(message, &manifest, &bundle.verification_material))
            }
            _ => Ok(Err(Refusal::new(
                RefusalReason::Malformed,
                "the bundle holds neither exactly one DSSE envelope nor one message signature",
            ))),
        }
    }

    /// A DSSE envelope of an in-toto statement naming the digest.
    fn check_envelope(
        &self,
        envelope: &Envelope,
        material: &VerificationMaterial,
    ) -> Result<Signer, Refusal> {
        if envelope.payload_type != DSSE_IN_TOTO {
            return Err(Refusal::new(
                RefusalReason::Malformed,
                format!(
                    "the envelope's payload is a {:?}, not an in-toto statement",
                    envelope.payload_type
                ),
            ));
        }
        let payload = STANDARD.decode(&envelope.payload).map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the envelope's payload is not base64: {error}"),
            )
        })?;
        let encoded = pre_authentication_encoding(&envelope.payload_type, &payload);
        if envelope.signatures.len() > MAX_SIGNATURES {
            return Err(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the envelope holds {} signatures, over the limit of {MAX_SIGNATURES} (MAX_SIGNATURES)",
                    envelope.signatures.len()
                ),
            ));
        }
        let mut last_refusal =
            Refusal::new(RefusalReason::Malformed, "the envelope holds no signature");
        for signature in &envelope.signatures {
            let Ok(raw) = STANDARD.decode(&signature.sig) else {
                last_refusal = Refusal::new(
                    RefusalReason::Malformed,
                    "a signature of the envelope is not base64",
                );
                continue;
            };
            let signed = Signed::Envelope {
                statement: &payload,
                encoded: &encoded,
                signature: &raw,
            };
            match self.bundle_signer(&signed, material) {
                Ok(signer) => {
                    check_statement(&payload, self.image, self.requirement.repository_bound)?;
                    return Ok(signer);
                }
                Err(why) => last_refusal = why,
            }
        }
        Err(last_refusal)
    }

    /// A message signature over the image manifest `manifest` (read by the pinned digest).
    fn check_message_signature(
        &self,
        message: &MessageSignature,
        manifest: &[u8],
        material: &VerificationMaterial,
    ) -> Result<Signer, Refusal> {
        if self.requirement.repository_bound {
            return Err(Refusal::new(
                RefusalReason::NotRepositoryBound,
                "the bundle's message signature is over the image manifest, which names no \
                 repository, and the policy requires signatures bound to their repository",
            ));
        }
        let digest = &message.message_digest;
        let signed_digest = STANDARD.decode(&digest.digest).map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the message digest is not base64: {error}"),
            )
        })?;
        let pinned = Sha256::digest(manifest);
        if digest.algorithm != SHA2_256 || signed_digest != pinned.as_slice() {
            return Err(Refusal::new(
                RefusalReason::OtherContent,
                format!(
                    "the message signature is over {} {}, not the pinned {}",
                    digest.algorithm,
                    hex::encode(&signed_digest),
                    self.image.digest
                ),
            ));
        }
        let signature = STANDARD.decode(&message.signature).map_err(|error| {
            Refusal::new(
                RefusalReason::Malformed,
                format!("the message signature is not base64: {error}"),
            )
        })?;
        let signed = Signed::Message {
            message: manifest,
            signature: &signature,
        };
        self.bundle_signer(&signed, material)
    }

    /// Who made a bundle's signature: an accepted key, else a keyless certificate of the
    /// bundle's verification material.
    fn bundle_signer(
        &self,
        signed: &Signed<'_>,
        material: &VerificationMaterial,
    ) -> Result<Signer, Refusal> {
        if let Some(signer) = self.key_signer(signed.bytes(), signed.signature()) {
            return Ok(signer);
        }
        let Some(keyless) = &self.requirement.keyless else {
            return Err(self.no_accepted_key());
        };
        let certificates = material.certificates()?;
        if certificates.is_empty() {
            return Err(self.no_accepted_key());
        }
        verify_bundle_keyless(keyless, signed, &certificates, &material.tlog_entries)
    }
}

/// Whether `digest` is `sha256:` and 64 lower-case hex digits, the only digests signatures
/// are read by.
fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// DSSE's signed bytes: `DSSEv1 <len(type)> <type> <len(payload)> <payload>`.
fn pre_authentication_encoding(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut signed = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    signed.extend_from_slice(payload);
    signed
}

/// A Sigstore bundle (protobuf JSON: camelCase names, bytes in base64).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    verification_material: VerificationMaterial,
    dsse_envelope: Option<Envelope>,
    message_signature: Option<MessageSignature>,
}

/// The signer's certificate (v0.3's `certificate`, or the leaf first of
/// `x509CertificateChain`) and the transparency-log entries. A `publicKey` hint is not read:
/// keys come from the requirement.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct VerificationMaterial {
    certificate: Option<RawBytes>,
    x509_certificate_chain: Option<CertificateChain>,
    #[serde(default)]
    tlog_entries: Vec<BundleLogEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct CertificateChain {
    #[serde(default)]
    certificates: Vec<RawBytes>,
}

impl VerificationMaterial {
    /// The DER certificates, the signer's first; none for a key-signed bundle.
    fn certificates(&self) -> Result<Vec<Vec<u8>>, Refusal> {
        let encoded: Vec<&RawBytes> = match (&self.certificate, &self.x509_certificate_chain) {
            (Some(leaf), None) => vec![leaf],
            (None, Some(chain)) => chain.certificates.iter().collect(),
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => {
                return Err(Refusal::new(
                    RefusalReason::Malformed,
                    "the bundle holds both a certificate and a certificate chain",
                ));
            }
        };
        if encoded.len() > MAX_CHAIN_LENGTH {
            return Err(Refusal::new(
                RefusalReason::OverLimit,
                format!(
                    "the bundle's certificate chain holds {} certificates, over the limit of {MAX_CHAIN_LENGTH} (MAX_CHAIN_LENGTH)",
                    encoded.len()
                ),
            ));
        }
        encoded
            .iter()
            .map(|certificate| {
                STANDARD.decode(&certificate.raw_bytes).map_err(|error| {
                    Refusal::new(
                        RefusalReason::Malformed,
                        format!("a certificate of the bundle is not base64: {error}"),
                    )
                })
            })
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSignature {
    message_digest: MessageDigest,
    signature: String,
}

#[derive(Deserialize)]
struct MessageDigest {
    algorithm: String,
    digest: String,
}

#[derive(Deserialize)]
struct Envelope {
    payload: String,
    #[serde(rename = "payloadType")]
    payload_type: String,
    #[serde(default)]
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

#[derive(Deserialize)]
struct Statement {
    #[serde(rename = "_type")]
    statement_type: String,
    #[serde(rename = "predicateType")]
    predicate_type: String,
    subject: Vec<StatementSubject>,
}

#[derive(Deserialize)]
struct StatementSubject {
    /// The image the signature is for (cosign writes its repository); may be empty.
    #[serde(default)]
    name: String,
    digest: BTreeMap<String, String>,
}

/// The statement must be cosign's signing predicate over exactly `image`'s digest; when it
/// names a repository, `image`'s (a statement copied with its image into another repository
/// does not count there); when `repository_bound`, it must name one.
fn check_statement(
    payload: &[u8],
    image: &ResolvedImage,
    repository_bound: bool,
) -> Result<(), Refusal> {
    let digest = image.digest.as_str();
    let statement: Statement = serde_json::from_slice(payload).map_err(|error| {
        Refusal::new(
            RefusalReason::Malformed,
            format!("the signed statement is not an in-toto statement: {error}"),
        )
    })?;
    if statement.statement_type != IN_TOTO_STATEMENT
        || statement.predicate_type != COSIGN_SIGN_PREDICATE
    {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            format!(
                "the signed statement is a {:?} of {:?}, not a cosign signature",
                statement.statement_type, statement.predicate_type
            ),
        ));
    }
    let (algorithm, hex) = digest.split_once(':').unwrap_or(("", digest));
    let [subject] = statement.subject.as_slice() else {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            format!(
                "the signed statement names {} subjects, not the one image",
                statement.subject.len()
            ),
        ));
    };
    match subject.digest.get(algorithm) {
        Some(signed) if signed == hex => {}
        Some(signed) => {
            return Err(Refusal::new(
                RefusalReason::OtherContent,
                format!("the signature is over {algorithm}:{signed}, not the pinned {digest}"),
            ));
        }
        None => {
            return Err(Refusal::new(
                RefusalReason::Malformed,
                format!("the signed statement names no {algorithm} digest"),
            ));
        }
    }
    if subject.name.is_empty() {
        return if repository_bound {
            Err(Refusal::new(
                RefusalReason::NotRepositoryBound,
                "the signed statement names no repository, and the policy requires \
                 signatures bound to their repository",
            ))
        } else {
            Ok(())
        };
    }
    if same_repository(repository_of(&subject.name), image) {
        Ok(())
    } else {
        Err(Refusal::new(
            RefusalReason::OtherContent,
            format!(
                "the signed statement is for {:?}, not {}/{} (copied from another repository)",
                subject.name, image.registry, image.repository
            ),
        ))
    }
}

/// The repository of a reference, without its `@digest` or `:tag` (a `:` before the last
/// `/` is a port).
fn repository_of(reference: &str) -> &str {
    let name = reference
        .split_once('@')
        .map_or(reference, |(name, _)| name);
    match name.rfind(':') {
        Some(colon) if !name[colon..].contains('/') => &name[..colon],
        _ => name,
    }
}

#[derive(Deserialize)]
struct SimpleSigning {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    #[serde(rename = "type")]
    signature_type: String,
    image: CriticalImage,
    identity: CriticalIdentity,
}

#[derive(Deserialize)]
struct CriticalImage {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

#[derive(Deserialize)]
struct CriticalIdentity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

/// What a simple-signing payload claims must be this image: its digest and its repository.
fn check_simple_signing(payload: &[u8], image: &ResolvedImage) -> Result<(), Refusal> {
    let signed: SimpleSigning = serde_json::from_slice(payload).map_err(|error| {
        Refusal::new(
            RefusalReason::Malformed,
            format!("the payload is not a simple-signing payload: {error}"),
        )
    })?;
    let critical = signed.critical;
    if critical.signature_type != COSIGN_SIGNATURE_TYPE {
        return Err(Refusal::new(
            RefusalReason::Malformed,
            format!(
                "the payload's type is {:?}, not {COSIGN_SIGNATURE_TYPE:?}",
                critical.signature_type
            ),
        ));
    }
    if critical.image.docker_manifest_digest != image.digest {
        return Err(Refusal::new(
            RefusalReason::OtherContent,
            format!(
                "the signature is over {}, not the pinned {}",
                critical.image.docker_manifest_digest, image.digest
            ),
        ));
    }
    if !same_repository(&critical.identity.docker_reference, image) {
        return Err(Refusal::new(
            RefusalReason::OtherContent,
            format!(
                "the signature is for repository {:?}, not {}/{} (copied from another repository)",
                critical.identity.docker_reference, image.registry, image.repository
            ),
        ));
    }
    Ok(())
}

/// Whether cosign's `docker-reference` (the repository, without tag or digest) names the
/// image's repository; Docker Hub goes by two host names.
fn same_repository(reference: &str, image: &ResolvedImage) -> bool {
    let ours = format!("{}/{}", image.registry, image.repository);
    let docker_hub = |name: &str| {
        name.strip_prefix("index.docker.io/")
            .or_else(|| name.strip_prefix("docker.io/"))
            .map_or_else(|| name.to_string(), |path| format!("docker.io/{path}"))
    };
    docker_hub(reference) == docker_hub(&ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> ResolvedImage {
        ResolvedImage::from_pinned(&format!(
            "127.0.0.1:5000/skills/a@sha256:{}",
            "a".repeat(64)
        ))
        .expect("a pinned reference")
    }

    fn payload(reference: &str, digest: &str) -> Vec<u8> {
        serde_json::json!({"critical": {"identity": {"docker-reference": reference}, "image": {"docker-manifest-digest": digest}, "type": COSIGN_SIGNATURE_TYPE}, "optional": null}).to_string().into_bytes()
    }

    #[test]
    fn a_payload_must_name_the_pinned_digest_and_repository() {
        let image = image();
        let ok = payload("127.0.0.1:5000/skills/a", &image.digest);
        assert_eq!(check_simple_signing(&ok, &image), Ok(()));
        let other_digest = payload(
            "127.0.0.1:5000/skills/a",
            &format!("sha256:{}", "b".repeat(64)),
        );
        let why = check_simple_signing(&other_digest, &image).expect_err("another digest");
        assert_eq!(why.reason, RefusalReason::OtherContent, "{why}");
        assert!(why.message.contains("not the pinned"), "{why}");
        let copied = payload("127.0.0.1:5000/skills/b", &image.digest);
        let why = check_simple_signing(&copied, &image).expect_err("another repository");
        assert_eq!(why.reason, RefusalReason::OtherContent, "{why}");
        assert!(
            why.message.contains("copied from another repository"),
            "{why}"
        );
    }

    #[test]
    fn docker_hub_is_one_repository_under_both_names() {
        let image =
            ResolvedImage::from_pinned(&format!("docker.io/library/x@sha256:{}", "a".repeat(64)))
                .expect("a pinned reference");
        assert!(same_repository("index.docker.io/library/x", &image));
        assert!(!same_repository("index.docker.io/library/y", &image));
    }

    fn statement(kind: &str, name: Option<&str>, hex: &str) -> Vec<u8> {
        let mut subject = serde_json::json!({"digest": {"sha256": hex}});
        if let Some(name) = name {
            subject["name"] = name.into();
        }
        serde_json::json!({"_type": IN_TOTO_STATEMENT, "predicateType": kind, "subject": [subject], "predicate": {}}).to_string().into_bytes()
    }

    #[test]
    fn a_statement_must_be_cosigns_over_the_digest() {
        let image = image();
        let hex = "a".repeat(64);
        assert_eq!(
            check_statement(&statement(COSIGN_SIGN_PREDICATE, None, &hex), &image, false),
            Ok(())
        );
        assert!(
            check_statement(
                &statement(COSIGN_SIGN_PREDICATE, None, &"d".repeat(64)),
                &image,
                false
            )
            .is_err()
        );
        assert!(
            check_statement(
                &statement("https://slsa.dev/provenance/v1", None, &hex),
                &image,
                false
            )
            .is_err()
        );
    }

    #[test]
    fn a_statement_naming_a_repository_binds_to_it() {
        let image = image();
        let hex = "a".repeat(64);
        let check = |name: Option<&str>, bound: bool| {
            check_statement(&statement(COSIGN_SIGN_PREDICATE, name, &hex), &image, bound)
        };
        for ours in [
            "127.0.0.1:5000/skills/a",
            "127.0.0.1:5000/skills/a:v1",
            &format!("127.0.0.1:5000/skills/a@sha256:{hex}"),
        ] {
            assert_eq!(check(Some(ours), false), Ok(()), "{ours}");
            assert_eq!(check(Some(ours), true), Ok(()), "{ours}");
        }
        for other in [
            "127.0.0.1:5000/skills/b",
            "other.example/skills/a",
            "127.0.0.1:5001/skills/a:v1",
        ] {
            let why = check(Some(other), false).expect_err(other);
            assert_eq!(why.reason, RefusalReason::OtherContent, "{why}");
            assert!(
                why.message.contains("copied from another repository"),
                "{why}"
            );
        }
        // Naming no repository binds to the digest alone, which a bound policy refuses.
        assert_eq!(check(None, false), Ok(()));
        assert_eq!(check(Some(""), false), Ok(()));
        let why = check(None, true).expect_err("digest-only");
        assert_eq!(why.reason, RefusalReason::NotRepositoryBound, "{why}");
        assert!(why.message.contains("names no repository"), "{why}");
    }

    #[test]
    fn only_sha256_digests_are_read() {
        assert!(is_sha256_digest(&format!("sha256:{}", "0a".repeat(32))));
        for malformed in [
            format!("sha256:{}", "0A".repeat(32)),
            format!("sha256:{}", "a".repeat(63)),
            format!("sha512:{}", "a".repeat(64)),
            format!("sha256:../../{}", "a".repeat(58)),
            "sha256:".to_string(),
            String::new(),
        ] {
            assert!(!is_sha256_digest(&malformed), "{malformed}");
        }
    }

    #[test]
    fn the_dsse_encoding_counts_bytes() {
        assert_eq!(
            pre_authentication_encoding("t", b"ab"),
            b"DSSEv1 1 t 2 ab".to_vec()
        );
    }
}
