//! Keyless signatures under a throwaway trust root made here (a Fulcio-like CA and leaf
//! certificates with the OIDC issuer extension, a Rekor key signing entry timestamps), and
//! hostile signature manifests; all pushed by hand to the test registry.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::ops::Deref;

use agentic_oci::ResolvedImage;
use agentic_trust::{
    Identity, ImageVerdict, Keyless, Layout, MAX_BUNDLE_BYTES, Pattern, PublicKey, Requirement,
    Signer, TrustRoot,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType, SigningKey as _,
};
use sha2::{Digest as _, Sha256};
use support::{SignatureRegistry, expect_invalid, sha256, sig_tag};
use x509_parser::prelude::{FromDer as _, X509Certificate};

const OIDC_ISSUER: &str = "https://issuer.example";
const SUBJECT: &str = "dev@example.com";
/// 2026-01-01T12:00:00Z: inside the leaf's one-day validity.
const SIGNED_AT: i64 = 1_767_268_800;

fn public_key_pem(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        lines.join("\n")
    )
}

/// A Fulcio-like certificate authority.
struct Authority {
    pem: String,
    der: Vec<u8>,
    /// Its DER SubjectPublicKeyInfo: what its leaves' SCTs hash.
    key_spki: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

fn authority(name: &str) -> Authority {
    let key = KeyPair::generate().expect("a CA key");
    let cert = authority_params(name, true)
        .self_signed(&key)
        .expect("a self-signed CA");
    Authority {
        pem: cert.pem(),
        der: cert.der().to_vec(),
        key_spki: key.subject_public_key_info(),
        issuer: Issuer::new(authority_params(name, true), key),
    }
}

/// An intermediate issued by `parent`; `is_ca: false` leaves out the CA basic constraint.
fn intermediate(parent: &Authority, name: &str, is_ca: bool) -> Authority {
    let key = KeyPair::generate().expect("an intermediate key");
    let cert = authority_params(name, is_ca)
        .signed_by(&key, &parent.issuer)
        .expect("a signed intermediate");
    Authority {
        pem: cert.pem(),
        der: cert.der().to_vec(),
        key_spki: key.subject_public_key_info(),
        issuer: Issuer::new(authority_params(name, is_ca), key),
    }
}

fn authority_params(name: &str, is_ca: bool) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = if is_ca {
        IsCa::Ca(BasicConstraints::Unconstrained)
    } else {
        IsCa::ExplicitNoCa
    };
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    params
}

/// A short-lived signing certificate naming `subject` from `issuer`, valid on 2026-01-01.
fn leaf(authority: &Authority, issuer: &str, subject: &str) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("a leaf key");
    let cert = leaf_params(issuer, subject)
        .signed_by(&key, &authority.issuer)
        .expect("a signed leaf");
    (cert.pem(), key)
}

/// The parameters of a leaf from `leaf`, with a fixed serial so that the same parameters
/// with one more extension give the same TBS otherwise (what an SCT signs).
fn leaf_params(issuer: &str, subject: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
    params.serial_number = Some(rcgen::SerialNumber::from(0x5eed_u64));
    params.subject_alt_names = vec![SanType::Rfc822Name(
        subject.to_string().try_into().expect("an IA5 email"),
    )];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Fulcio's issuer extension holds a DER UTF8String.
    let mut utf8 = vec![0x0c, u8::try_from(issuer.len()).expect("a short issuer")];
    utf8.extend_from_slice(issuer.as_bytes());
    params.custom_extensions = vec![CustomExtension::from_oid_content(
        &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
        utf8,
    )];
    params.not_before = rcgen::date_time_ymd(2026, 1, 1);
    params.not_after = rcgen::date_time_ymd(2026, 1, 2);
    params
}

/// A keyless signature's parts, to be altered by each case before it is pushed.
struct Signature {
    payload: Vec<u8>,
    signature: Vec<u8>,
    certificate: String,
    body: Vec<u8>,
    integrated_time: i64,
    log_id: String,
    /// Signs the canonical SET payload.
    rekor: KeyPair,
    tamper_after_set: Option<i64>,
}

impl Signature {
    fn new(
        image: &ResolvedImage,
        leaf: &(String, KeyPair),
        rekor: KeyPair,
        rekor_id: &str,
    ) -> Self {
        let payload = serde_json::json!({"critical": {"identity": {"docker-reference": format!("{}/{}", image.registry, image.repository)}, "image": {"docker-manifest-digest": image.digest}, "type": "cosign container image signature"}, "optional": null}).to_string().into_bytes();
        let signature = leaf.1.sign(&payload).expect("the leaf signs");
        let body = hashedrekord(&payload, &signature, &leaf.0);
        Signature {
            payload,
            signature,
            certificate: leaf.0.clone(),
            body,
            integrated_time: SIGNED_AT,
            log_id: rekor_id.to_string(),
            rekor,
            tamper_after_set: None,
        }
    }

    /// The `dev.sigstore.cosign/bundle` annotation: the SET over the canonical entry.
    fn rekor_bundle(&self) -> String {
        let body = STANDARD.encode(&self.body);
        let set = signed_entry_timestamp(&self.rekor, &body, self.integrated_time, &self.log_id);
        serde_json::json!({
            "SignedEntryTimestamp": STANDARD.encode(set),
            "Payload": {
                "body": body,
                "integratedTime": self.tamper_after_set.unwrap_or(self.integrated_time),
                "logIndex": 7,
                "logID": self.log_id,
            }
        })
        .to_string()
    }
}

/// Rekor's SET: its signature over the canonical JSON of the entry at log index 7.
fn signed_entry_timestamp(
    rekor: &KeyPair,
    body_base64: &str,
    integrated_time: i64,
    log_id: &str,
) -> Vec<u8> {
    let canonical = format!(
        "{{\"body\":\"{body_base64}\",\"integratedTime\":{integrated_time},\"logID\":\"{log_id}\",\"logIndex\":7}}"
    );
    rekor.sign(canonical.as_bytes()).expect("Rekor signs")
}

fn hashedrekord(payload: &[u8], signature: &[u8], certificate_pem: &str) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hex::encode(Sha256::digest(payload))}},
            "signature": {"content": STANDARD.encode(signature), "publicKey": {"content": STANDARD.encode(certificate_pem)}}
        }
    })
    .to_string()
    .into_bytes()
}

/// The test registry, and what these tests push to it by hand.
struct Env(SignatureRegistry);

impl Deref for Env {
    type Target = SignatureRegistry;
    fn deref(&self) -> &SignatureRegistry {
        &self.0
    }
}

impl Env {
    async fn start() -> Env {
        Env(SignatureRegistry::start().await)
    }

    /// An image (an empty config and one small layer) at `repository:v1`, pinned.
    async fn push_image(&self, repository: &str, content: &str) -> ResolvedImage {
        let config = self.put_blob(repository, b"{}").await;
        let layer = self.put_blob(repository, content.as_bytes()).await;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": content.len()}],
        });
        let digest = self.put_manifest(repository, "v1", &manifest).await;
        ResolvedImage::from_pinned(&format!("{}/{repository}@{digest}", self.registry.addr()))
            .expect("pinned")
    }

    /// The legacy `.sig` manifest of `image` with one simple-signing layer per signature.
    async fn push_signatures(&self, image: &ResolvedImage, signatures: &[&Signature]) {
        let config = self.put_blob(&image.repository, b"{}").await;
        let mut layers = Vec::new();
        for signature in signatures {
            let payload = self.put_blob(&image.repository, &signature.payload).await;
            layers.push(serde_json::json!({
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "digest": payload,
                "size": signature.payload.len(),
                "annotations": {
                    "dev.cosignproject.cosign/signature": STANDARD.encode(&signature.signature),
                    "dev.sigstore.cosign/certificate": signature.certificate,
                    "dev.sigstore.cosign/chain": "",
                    "dev.sigstore.cosign/bundle": signature.rekor_bundle(),
                }
            }));
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
            "layers": layers,
        });
        self.put_manifest(&image.repository, &sig_tag(image), &manifest)
            .await;
    }

    /// `bundle` attached to `image` as a referrer of `media_type`, listed by the referrers
    /// fallback tag (the test registry has no referrers API); its descriptor claims
    /// `declared_size` bytes, or the true size.
    async fn push_bundle_bytes(
        &self,
        image: &ResolvedImage,
        bundle: &[u8],
        media_type: &str,
        declared_size: Option<usize>,
    ) {
        let repository = &image.repository;
        let config = self.put_blob(repository, b"{}").await;
        let blob = self.put_blob(repository, bundle).await;
        let referrer = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": media_type,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config, "size": 2},
            "layers": [{"mediaType": media_type, "digest": blob, "size": declared_size.unwrap_or(bundle.len())}],
            "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": image.digest, "size": 1},
        });
        let bytes = serde_json::to_vec(&referrer).expect("JSON");
        let digest = self
            .put_manifest_bytes(repository, &sha256(&bytes), &bytes)
            .await;
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": media_type, "digest": digest, "size": bytes.len()}],
        });
        self.put_manifest(repository, &image.digest.replace(':', "-"), &index)
            .await;
    }

    async fn push_bundle(&self, image: &ResolvedImage, bundle: &BundleParts) {
        let bytes = serde_json::to_vec(&bundle.to_json()).expect("JSON");
        self.push_bundle_bytes(image, &bytes, bundle.media_type, None)
            .await;
    }

    /// Pushes a new image named `name`, `bundle_for` it as its only signature, and verifies it.
    async fn verify_bundled(
        &self,
        name: &str,
        requirement: &Requirement,
        bundle_for: impl FnOnce(&ResolvedImage) -> BundleParts,
    ) -> ImageVerdict {
        let image = self.push_image("skills/bundles", name).await;
        self.push_bundle(&image, &bundle_for(&image)).await;
        self.verify(&image, requirement).await
    }
}

struct Root {
    authority: Authority,
    rekor_der: Vec<u8>,
    rekor_id: String,
    rekor_pem: String,
}

fn root() -> (Root, KeyPair) {
    let authority = authority("test fulcio");
    let rekor = KeyPair::generate().expect("a Rekor key");
    let rekor_der = rekor.subject_public_key_info();
    let rekor_pem = public_key_pem(&rekor_der);
    let rekor_id = hex::encode(Sha256::digest(&rekor_der));
    (
        Root {
            authority,
            rekor_der,
            rekor_id,
            rekor_pem,
        },
        rekor,
    )
}

fn rekor_copy(root: &Root, rekor: &KeyPair) -> KeyPair {
    let copy = KeyPair::try_from(rekor.serialize_der()).expect("the Rekor key copies");
    assert_eq!(copy.subject_public_key_info(), root.rekor_der);
    copy
}

fn requirement(root: &Root, subject: Pattern) -> Requirement {
    requirement_with_ct_logs(root, subject, "")
}

/// A keyless requirement whose trust root also names the CT logs of `ct_log_keys` (PEM).
fn requirement_with_ct_logs(root: &Root, subject: Pattern, ct_log_keys: &str) -> Requirement {
    Requirement::keyless(Keyless {
        identities: vec![Identity {
            issuer: Pattern::Exact(OIDC_ISSUER.to_string()),
            subject,
        }],
        trust_root: TrustRoot::from_pem(&root.authority.pem, &root.rekor_pem, ct_log_keys)
            .expect("the trust root reads"),
    })
}

#[tokio::test]
async fn keyless_signatures_under_a_throwaway_trust_root() {
    let env = Env::start().await;
    let (root, rekor) = root();
    let exact = requirement(&root, Pattern::Exact(SUBJECT.to_string()));
    let signer = Signer::Identity {
        issuer: OIDC_ISSUER.to_string(),
        subject: SUBJECT.to_string(),
    };

    // A good signature, verified at the logged time although the certificate expired since.
    let image = env.push_image("skills/keyless", "good").await;
    let leaf_cert = leaf(&root.authority, OIDC_ISSUER, SUBJECT);
    let good = Signature::new(
        &image,
        &leaf_cert,
        rekor_copy(&root, &rekor),
        &root.rekor_id,
    );
    env.push_signatures(&image, &[&good]).await;
    let verdict = env.verify(&image, &exact).await;
    assert!(
        matches!(&verdict, ImageVerdict::Verified(v) if v.signer == signer && v.layout == Layout::Tag),
        "{verdict:?}"
    );
    let pattern = requirement(
        &root,
        Pattern::regex(r".*@example\.com", "subject").expect("a regex"),
    );
    assert!(matches!(
        env.verify(&image, &pattern).await,
        ImageVerdict::Verified(_)
    ));

    // Another identity is refused, exact or by pattern.
    let other = requirement(&root, Pattern::Exact("ops@example.com".to_string()));
    expect_invalid(
        env.verify(&image, &other).await,
        "match none of the accepted identities",
    );
    let partial = requirement(&root, Pattern::regex("dev", "subject").expect("a regex"));
    expect_invalid(
        env.verify(&image, &partial).await,
        "match none of the accepted identities",
    );

    // A forged timestamp: the integrated time changed after Rekor signed the entry.
    let forged_time = env.push_image("skills/keyless", "forged-time").await;
    let mut forged = Signature::new(
        &forged_time,
        &leaf_cert,
        rekor_copy(&root, &rekor),
        &root.rekor_id,
    );
    forged.tamper_after_set = Some(SIGNED_AT + 60);
    env.push_signatures(&forged_time, &[&forged]).await;
    expect_invalid(
        env.verify(&forged_time, &exact).await,
        "signed entry timestamp does not verify",
    );

    // A SET made by a key that is not the trust root's, claiming its log id.
    let rogue_log = env.push_image("skills/keyless", "rogue-log").await;
    let rogue = Signature::new(
        &rogue_log,
        &leaf_cert,
        KeyPair::generate().expect("a key"),
        &root.rekor_id,
    );
    env.push_signatures(&rogue_log, &[&rogue]).await;
    expect_invalid(
        env.verify(&rogue_log, &exact).await,
        "signed entry timestamp does not verify",
    );

    // A genuine SET of another entry (sigstore-rs#285): the logged body is another signature.
    let lifted = env.push_image("skills/keyless", "lifted").await;
    let mut entry = Signature::new(
        &lifted,
        &leaf_cert,
        rekor_copy(&root, &rekor),
        &root.rekor_id,
    );
    let other_signature = leaf_cert.1.sign(b"something else").expect("the leaf signs");
    entry.body = hashedrekord(&entry.payload, &other_signature, &leaf_cert.0);
    env.push_signatures(&lifted, &[&entry]).await;
    expect_invalid(env.verify(&lifted, &exact).await, "logs another signature");

    // Logged after the certificate expired.
    let late = env.push_image("skills/keyless", "late").await;
    let mut after = Signature::new(&late, &leaf_cert, rekor_copy(&root, &rekor), &root.rekor_id);
    after.integrated_time = SIGNED_AT + 2 * 86_400;
    env.push_signatures(&late, &[&after]).await;
    expect_invalid(
        env.verify(&late, &exact).await,
        "not valid at the logged time",
    );

    // A certificate from another authority.
    let stranger = env.push_image("skills/keyless", "stranger").await;
    let foreign = leaf(&authority("another fulcio"), OIDC_ISSUER, SUBJECT);
    let foreign_signature = Signature::new(
        &stranger,
        &foreign,
        rekor_copy(&root, &rekor),
        &root.rekor_id,
    );
    env.push_signatures(&stranger, &[&foreign_signature]).await;
    expect_invalid(
        env.verify(&stranger, &exact).await,
        "does not chain to a certificate authority",
    );

    // Keys alone never accept a keyless signature.
    let key = PublicKey::from_pem(&root.rekor_pem, "rekor").expect("a key");
    expect_invalid(
        env.verify(&image, &Requirement::keys(vec![key])).await,
        "not signed by any",
    );
}

#[tokio::test]
async fn hostile_signature_manifests_are_refused_within_their_limits() {
    let env = Env::start().await;
    let (root, rekor) = root();
    let requirement = requirement(&root, Pattern::Exact(SUBJECT.to_string()));
    let leaf_cert = leaf(&root.authority, OIDC_ISSUER, SUBJECT);

    // A signature manifest larger than its limit: refused from Content-Length.
    let huge = env.push_image("skills/hostile", "huge").await;
    let config = env.put_blob("skills/hostile", b"{}").await;
    let padding = "x".repeat(300 * 1024);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
        "layers": [],
        "annotations": {"padding": padding},
    });
    env.put_manifest("skills/hostile", &sig_tag(&huge), &manifest)
        .await;
    expect_invalid(
        env.verify(&huge, &requirement).await,
        "MAX_SIGNATURE_MANIFEST_BYTES",
    );

    // Thousands of signatures: refused by count before any payload is read.
    let many = env.push_image("skills/hostile", "many").await;
    let signature = Signature::new(&many, &leaf_cert, rekor_copy(&root, &rekor), &root.rekor_id);
    let payload = env.put_blob("skills/hostile", &signature.payload).await;
    let layer = serde_json::json!({"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": payload, "size": signature.payload.len()});
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
        "layers": vec![layer; 1500],
    });
    env.put_manifest("skills/hostile", &sig_tag(&many), &manifest)
        .await;
    let before = env.client.stats().requests;
    expect_invalid(env.verify(&many, &requirement).await, "MAX_SIGNATURES");
    let spent = env.client.stats().requests - before;
    assert!(
        spent <= 3,
        "the count is refused before reading payloads: {spent} requests"
    );

    // A referrers loop: the fallback tag lists one referrer 200 times, and that referrer's
    // own fallback tag lists it again. Each is read once and nothing is followed further.
    let looped = env.push_image("skills/hostile", "looped").await;
    let bundle = env
        .put_blob("skills/hostile", b"{\"not\": \"a bundle\"}")
        .await;
    let referrer = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config, "size": 2},
        "layers": [{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "digest": bundle, "size": 19}],
        "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": looped.digest, "size": 1},
    });
    let referrer_digest = env
        .put_manifest("skills/hostile", "referrer", &referrer)
        .await;
    let entry = serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json", "digest": referrer_digest, "size": serde_json::to_vec(&referrer).expect("JSON").len()});
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": vec![entry; 200],
    });
    env.put_manifest("skills/hostile", &looped.digest.replace(':', "-"), &index)
        .await;
    env.put_manifest("skills/hostile", &referrer_digest.replace(':', "-"), &index)
        .await;
    let before = env.client.stats().requests;
    expect_invalid(
        env.verify(&looped, &requirement).await,
        "is not a Sigstore bundle",
    );
    let spent = env.client.stats().requests - before;
    // The .sig tag, the referrers API, the fallback tag, the referrer and its bundle (each
    // with its authorization at most once per repository).
    assert!(
        spent <= 8,
        "one read per distinct referrer: {spent} requests"
    );

    // More referrers than the limit: refused before any is read.
    let crowded = env.push_image("skills/hostile", "crowded").await;
    let crowd = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": vec![serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": referrer_digest, "size": 10}); 1000],
    });
    env.put_manifest("skills/hostile", &crowded.digest.replace(':', "-"), &crowd)
        .await;
    expect_invalid(env.verify(&crowded, &requirement).await, "MAX_REFERRERS");
}

const BUNDLE_V03: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
const BUNDLE_V01: &str = "application/vnd.dev.sigstore.bundle+json;version=0.1";
const IN_TOTO: &str = "application/vnd.in-toto+json";

fn der_of(pem: &str) -> Vec<u8> {
    x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .expect("a PEM certificate")
        .1
        .contents
}

/// cosign's signing statement over `digest`; like cosign v3's, its subject names no
/// repository.
fn statement(digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    serde_json::json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"digest": {"sha256": hex}}],
        "predicateType": "https://sigstore.dev/cosign/sign/v1",
        "predicate": {},
    })
    .to_string()
    .into_bytes()
}

/// DSSE's pre-authentication encoding of an in-toto `payload`: what the key signs.
fn pae(payload: &[u8]) -> Vec<u8> {
    let mut encoded = format!("DSSEv1 {} {IN_TOTO} {} ", IN_TOTO.len(), payload.len()).into_bytes();
    encoded.extend_from_slice(payload);
    encoded
}

/// Rekor's `dsse` entry of an envelope of `statement` with one signature.
fn dsse_entry(statement: &[u8], signature: &[u8], certificate_pem: &str) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hex::encode(Sha256::digest(b"the envelope"))},
            "payloadHash": {"algorithm": "sha256", "value": hex::encode(Sha256::digest(statement))},
            "signatures": [{"signature": STANDARD.encode(signature), "verifier": STANDARD.encode(certificate_pem)}],
        }
    })
    .to_string()
    .into_bytes()
}

/// What a bundle signs.
enum Content {
    /// A DSSE envelope of this in-toto statement.
    Statement(Vec<u8>),
    /// A message signature over these image-manifest bytes.
    Manifest(Vec<u8>),
}

/// A keyless bundle's parts, altered by each case before it is written.
struct BundleParts {
    media_type: &'static str,
    content: Content,
    signature: Vec<u8>,
    /// DER, the leaf first: one is written as v0.3's `certificate`, more as a chain.
    certificates: Vec<Vec<u8>>,
    body: Vec<u8>,
    integrated_time: i64,
    rekor_id: String,
    rekor: KeyPair,
    inclusion_promise: bool,
}

impl BundleParts {
    /// A v0.3 DSSE bundle of cosign's statement over `image`, signed by `leaf`.
    fn dsse(image: &ResolvedImage, leaf: &(String, KeyPair), root: &Root, rekor: &KeyPair) -> Self {
        Self::dsse_of(statement(&image.digest), leaf, root, rekor)
    }

    fn dsse_of(statement: Vec<u8>, leaf: &(String, KeyPair), root: &Root, rekor: &KeyPair) -> Self {
        let signature = leaf.1.sign(&pae(&statement)).expect("the leaf signs");
        let body = dsse_entry(&statement, &signature, &leaf.0);
        let content = Content::Statement(statement);
        Self::signed(BUNDLE_V03, content, signature, body, leaf, root, rekor)
    }

    /// A v0.1 message-signature bundle over the image manifest `manifest`.
    fn message(manifest: Vec<u8>, leaf: &(String, KeyPair), root: &Root, rekor: &KeyPair) -> Self {
        let signature = leaf.1.sign(&manifest).expect("the leaf signs");
        let body = hashedrekord(&manifest, &signature, &leaf.0);
        let content = Content::Manifest(manifest);
        Self::signed(BUNDLE_V01, content, signature, body, leaf, root, rekor)
    }

    /// A bundle of `content` signed by `leaf` alone, logged at [`SIGNED_AT`] with an
    /// inclusion promise.
    fn signed(
        media_type: &'static str,
        content: Content,
        signature: Vec<u8>,
        body: Vec<u8>,
        leaf: &(String, KeyPair),
        root: &Root,
        rekor: &KeyPair,
    ) -> Self {
        BundleParts {
            media_type,
            body,
            content,
            signature,
            certificates: vec![der_of(&leaf.0)],
            integrated_time: SIGNED_AT,
            rekor_id: root.rekor_id.clone(),
            rekor: rekor_copy(root, rekor),
            inclusion_promise: true,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let body = STANDARD.encode(&self.body);
        let mut entry = serde_json::json!({
            "logIndex": "7",
            "logId": {"keyId": STANDARD.encode(hex::decode(&self.rekor_id).expect("a hex log id"))},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": self.integrated_time.to_string(),
            "canonicalizedBody": body,
        });
        if self.inclusion_promise {
            let set =
                signed_entry_timestamp(&self.rekor, &body, self.integrated_time, &self.rekor_id);
            entry["inclusionPromise"] =
                serde_json::json!({"signedEntryTimestamp": STANDARD.encode(set)});
        }
        let raw = |der: &Vec<u8>| serde_json::json!({"rawBytes": STANDARD.encode(der)});
        let mut material = serde_json::json!({"tlogEntries": [entry]});
        match self.certificates.as_slice() {
            [leaf] => material["certificate"] = raw(leaf),
            chain => {
                material["x509CertificateChain"] =
                    serde_json::json!({"certificates": chain.iter().map(raw).collect::<Vec<_>>()});
            }
        }
        let mut bundle =
            serde_json::json!({"mediaType": self.media_type, "verificationMaterial": material});
        match &self.content {
            Content::Statement(statement) => {
                bundle["dsseEnvelope"] = serde_json::json!({
                    "payload": STANDARD.encode(statement),
                    "payloadType": IN_TOTO,
                    "signatures": [{"sig": STANDARD.encode(&self.signature), "keyid": ""}],
                });
            }
            Content::Manifest(manifest) => {
                bundle["messageSignature"] = serde_json::json!({
                    "messageDigest": {"algorithm": "SHA2_256", "digest": STANDARD.encode(Sha256::digest(manifest))},
                    "signature": STANDARD.encode(&self.signature),
                });
            }
        }
        bundle
    }
}

#[tokio::test]
async fn keyless_bundles_verify_offline_and_refuse_forgeries() {
    let env = Env::start().await;
    let (root, rekor) = root();
    let exact = requirement(&root, Pattern::Exact(SUBJECT.to_string()));
    let signer = Signer::Identity {
        issuer: OIDC_ISSUER.to_string(),
        subject: SUBJECT.to_string(),
    };
    let leaf_cert = leaf(&root.authority, OIDC_ISSUER, SUBJECT);
    let is_verified = |verdict: &ImageVerdict| matches!(verdict, ImageVerdict::Verified(v) if v.signer == signer && v.layout == Layout::ReferrersTag);

    // A v0.3 DSSE bundle of cosign's statement over the image, logged as a dsse entry.
    let verdict = env
        .verify_bundled("dsse", &exact, |image| {
            BundleParts::dsse(image, &leaf_cert, &root, &rekor)
        })
        .await;
    assert!(is_verified(&verdict), "{verdict:?}");

    // A v0.1 message signature over the image manifest itself, logged as a hashedrekord.
    let signed_manifest = env.push_image("skills/bundles", "message").await;
    let manifest = env
        .get_manifest("skills/bundles", &signed_manifest.digest)
        .await;
    env.push_bundle(
        &signed_manifest,
        &BundleParts::message(manifest.clone(), &leaf_cert, &root, &rekor),
    )
    .await;
    let verdict = env.verify(&signed_manifest, &exact).await;
    assert!(is_verified(&verdict), "{verdict:?}");
    // A key never accepts a keyless bundle.
    let key = PublicKey::from_pem(&root.rekor_pem, "rekor").expect("a key");
    expect_invalid(
        env.verify(&signed_manifest, &Requirement::keys(vec![key]))
            .await,
        "not signed by any of the 1 accepted keys",
    );

    // Through an intermediate CA, sent in the bundle's certificate chain.
    let intermediate_ca = intermediate(&root.authority, "test fulcio intermediate", true);
    let via_intermediate = leaf(&intermediate_ca, OIDC_ISSUER, SUBJECT);
    let verdict = env
        .verify_bundled("intermediate", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &via_intermediate, &root, &rekor);
            parts.certificates.push(intermediate_ca.der.clone());
            parts
        })
        .await;
    assert!(is_verified(&verdict), "{verdict:?}");

    // The same chain, but the intermediate is not marked a certificate authority.
    let not_a_ca = intermediate(&root.authority, "not a CA", false);
    let under_not_a_ca = leaf(&not_a_ca, OIDC_ISSUER, SUBJECT);
    let verdict = env
        .verify_bundled("intermediate-not-ca", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &under_not_a_ca, &root, &rekor);
            parts.certificates.push(not_a_ca.der.clone());
            parts
        })
        .await;
    expect_invalid(verdict, "is not a certificate authority");

    // A certificate for another identity, all else genuine.
    let mallory = leaf(&root.authority, OIDC_ISSUER, "mallory@example.com");
    let verdict = env
        .verify_bundled("other-identity", &exact, |image| {
            BundleParts::dsse(image, &mallory, &root, &rekor)
        })
        .await;
    expect_invalid(verdict, "match none of the accepted identities");

    // A genuine SET over a log entry of another signature by the same certificate.
    let verdict = env
        .verify_bundled("other-entry", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &leaf_cert, &root, &rekor);
            let other = leaf_cert.1.sign(b"something else").expect("the leaf signs");
            parts.body = dsse_entry(&statement(&image.digest), &other, &leaf_cert.0);
            parts
        })
        .await;
    expect_invalid(verdict, "logs another signature");

    // An entry of another kind than the envelope's: a hashedrekord of the statement.
    let verdict = env
        .verify_bundled("other-kind", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &leaf_cert, &root, &rekor);
            parts.body = hashedrekord(&statement(&image.digest), &parts.signature, &leaf_cert.0);
            parts
        })
        .await;
    expect_invalid(verdict, "not the dsse entry");

    // A statement, signed and logged, over another digest.
    let elsewhere = env.push_image("skills/bundles", "elsewhere").await;
    let verdict = env
        .verify_bundled("other-digest", &exact, |_| {
            BundleParts::dsse_of(statement(&elsewhere.digest), &leaf_cert, &root, &rekor)
        })
        .await;
    expect_invalid(verdict, "not the pinned");

    // A message signature, signed and logged, over another image's manifest.
    let verdict = env
        .verify_bundled("other-manifest", &exact, |_| {
            BundleParts::message(manifest.clone(), &leaf_cert, &root, &rekor)
        })
        .await;
    expect_invalid(verdict, "the message signature is over SHA2_256");

    // Logged after the certificate expired.
    let verdict = env
        .verify_bundled("expired", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &leaf_cert, &root, &rekor);
            parts.integrated_time = SIGNED_AT + 2 * 86_400;
            parts
        })
        .await;
    expect_invalid(verdict, "not valid at the logged time");

    // No inclusion promise: nothing offline proves when it was signed.
    let verdict = env
        .verify_bundled("no-promise", &exact, |image| {
            let mut parts = BundleParts::dsse(image, &leaf_cert, &root, &rekor);
            parts.inclusion_promise = false;
            parts
        })
        .await;
    expect_invalid(verdict, "no inclusion promise");
}

/// An SCT list extension with one SCT by `log` over the precertificate `tbs` of a leaf
/// issued by the CA whose SubjectPublicKeyInfo is `issuer_spki` (RFC 6962 §3.2).
fn sct_extension(log: &KeyPair, issuer_spki: &[u8], tbs: &[u8]) -> CustomExtension {
    let timestamp = u64::try_from(SIGNED_AT * 1000).expect("a positive time");
    let mut signed = vec![0, 0];
    signed.extend_from_slice(&timestamp.to_be_bytes());
    signed.extend_from_slice(&[0, 1]);
    signed.extend_from_slice(&Sha256::digest(issuer_spki));
    signed.extend_from_slice(&u32::try_from(tbs.len()).expect("a small TBS").to_be_bytes()[1..]);
    signed.extend_from_slice(tbs);
    signed.extend_from_slice(&[0, 0]);
    let signature = log.sign(&signed).expect("the CT log signs");
    let mut sct = vec![0];
    sct.extend_from_slice(&Sha256::digest(log.subject_public_key_info()));
    sct.extend_from_slice(&timestamp.to_be_bytes());
    sct.extend_from_slice(&[0, 0, 4, 3]);
    sct.extend_from_slice(
        &u16::try_from(signature.len())
            .expect("a short signature")
            .to_be_bytes(),
    );
    sct.extend_from_slice(&signature);
    let length = |bytes: &[u8]| {
        u16::try_from(bytes.len())
            .expect("a short SCT")
            .to_be_bytes()
    };
    let mut list = Vec::new();
    list.extend_from_slice(&length(&sct));
    list.extend_from_slice(&sct);
    let mut tls = length(&list).to_vec();
    tls.extend_from_slice(&list);
    // The extension's value is a DER OCTET STRING of the TLS-encoded list.
    let mut content = vec![0x04];
    match u8::try_from(tls.len()) {
        Ok(short) if short < 0x80 => content.push(short),
        Ok(long) => content.extend_from_slice(&[0x81, long]),
        Err(error) => panic!("an SCT list under 256 bytes: {error}"),
    }
    content.extend_from_slice(&tls);
    CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2], content)
}

/// A leaf naming `subject`, carrying an SCT by `log` over the precertificate of a leaf that
/// names `logged_subject` (the same certificate, when they are equal).
fn leaf_with_sct(
    authority: &Authority,
    subject: &str,
    log: &KeyPair,
    logged_subject: &str,
) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("a leaf key");
    let precertificate = leaf_params(OIDC_ISSUER, logged_subject)
        .signed_by(&key, &authority.issuer)
        .expect("a precertificate");
    let (_, parsed) = X509Certificate::from_der(precertificate.der()).expect("X.509");
    let tbs = parsed.tbs_certificate.as_ref().to_vec();
    let mut params = leaf_params(OIDC_ISSUER, subject);
    params
        .custom_extensions
        .push(sct_extension(log, &authority.key_spki, &tbs));
    let cert = params
        .signed_by(&key, &authority.issuer)
        .expect("a signed leaf");
    (cert.pem(), key)
}

#[tokio::test]
async fn signed_certificate_timestamps_from_the_trust_roots_ct_logs() {
    let env = Env::start().await;
    let (root, rekor) = root();
    let ct_log = KeyPair::generate().expect("a CT log key");
    let ct_pem = public_key_pem(&ct_log.subject_public_key_info());
    let with_ct = requirement_with_ct_logs(&root, Pattern::Exact(SUBJECT.to_string()), &ct_pem);
    let without_ct = requirement(&root, Pattern::Exact(SUBJECT.to_string()));

    // An SCT of the trust root's CT log over this certificate.
    let logged = leaf_with_sct(&root.authority, SUBJECT, &ct_log, SUBJECT);
    let verdict = env
        .verify_bundled("sct", &with_ct, |image| {
            BundleParts::dsse(image, &logged, &root, &rekor)
        })
        .await;
    assert!(matches!(verdict, ImageVerdict::Verified(_)), "{verdict:?}");

    // No SCT: refused when the trust root names CT logs, not required when it names none.
    let unlogged = leaf(&root.authority, OIDC_ISSUER, SUBJECT);
    let image = env.push_image("skills/bundles", "no-sct").await;
    env.push_bundle(&image, &BundleParts::dsse(&image, &unlogged, &root, &rekor))
        .await;
    expect_invalid(
        env.verify(&image, &with_ct).await,
        "carries no signed certificate timestamp",
    );
    assert!(matches!(
        env.verify(&image, &without_ct).await,
        ImageVerdict::Verified(_)
    ));

    // An SCT from a log the trust root does not name.
    let unknown_log = KeyPair::generate().expect("another CT log key");
    let unknown_id = hex::encode(Sha256::digest(unknown_log.subject_public_key_info()));
    let elsewhere = leaf_with_sct(&root.authority, SUBJECT, &unknown_log, SUBJECT);
    let verdict = env
        .verify_bundled("unknown-log", &with_ct, |image| {
            BundleParts::dsse(image, &elsewhere, &root, &rekor)
        })
        .await;
    expect_invalid(
        verdict,
        &format!("CT log {unknown_id} is not in the trust root"),
    );

    // The trust root's log signed another certificate (another subject), not this one.
    let transplanted = leaf_with_sct(&root.authority, SUBJECT, &ct_log, "other@example.com");
    let verdict = env
        .verify_bundled("other-certificate", &with_ct, |image| {
            BundleParts::dsse(image, &transplanted, &root, &rekor)
        })
        .await;
    expect_invalid(verdict, "does not verify over this certificate");
}

#[tokio::test]
async fn oversize_bundles_are_refused_before_reading() {
    let env = Env::start().await;
    let (root, _) = root();
    let requirement = requirement(&root, Pattern::Exact(SUBJECT.to_string()));
    let oversize = vec![b' '; usize::try_from(MAX_BUNDLE_BYTES).expect("a small limit") + 1];

    // Its descriptor says it is over the limit: refused before the blob is requested, so it
    // costs one request less than a small bundle found the same way and read.
    let small = env.push_image("skills/hostile-bundles", "small").await;
    env.push_bundle_bytes(&small, b"{}", BUNDLE_V03, None).await;
    // The client's first look at the registry costs extra requests; measure after it.
    env.verify(&small, &requirement).await;
    let before = env.client.stats().requests;
    expect_invalid(
        env.verify(&small, &requirement).await,
        "not a Sigstore bundle",
    );
    let reading = env.client.stats().requests - before;
    let honest = env.push_image("skills/hostile-bundles", "honest").await;
    env.push_bundle_bytes(&honest, &oversize, BUNDLE_V03, None)
        .await;
    let before = env.client.stats().requests;
    expect_invalid(env.verify(&honest, &requirement).await, "MAX_BUNDLE_BYTES");
    let spent = env.client.stats().requests - before;
    assert_eq!(spent + 1, reading, "the oversize bundle is never requested");

    // Its descriptor understates its size: refused from the registry's Content-Length.
    let lying = env.push_image("skills/hostile-bundles", "lying").await;
    env.push_bundle_bytes(&lying, &oversize, BUNDLE_V03, Some(100))
        .await;
    expect_invalid(env.verify(&lying, &requirement).await, "MAX_BUNDLE_BYTES");
}
