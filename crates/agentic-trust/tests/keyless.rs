//! Keyless signatures under a throwaway trust root made here (a Fulcio-like CA and leaf
//! certificates with the OIDC issuer extension, a Rekor key signing entry timestamps), and
//! hostile signature manifests; all pushed by hand to the test registry.

mod support;

use std::ops::Deref;

use agentic_oci::ResolvedImage;
use agentic_trust::{
    Identity, Keyless, Layout, Pattern, PublicKey, Requirement, Signer, TrustRoot, Verdict,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType, SigningKey as _,
};
use sha2::{Digest as _, Sha256};
use support::{SignatureRegistry, expect_invalid, sig_tag};

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
    issuer: Issuer<'static, KeyPair>,
}

fn authority(name: &str) -> Authority {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let cert = params.self_signed(&key).expect("a self-signed CA");
    Authority {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// A short-lived signing certificate naming `subject` from `issuer`, valid on 2026-01-01.
fn leaf(authority: &Authority, issuer: &str, subject: &str) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("a leaf key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
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
    let cert = params
        .signed_by(&key, &authority.issuer)
        .expect("a signed leaf");
    (cert.pem(), key)
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
        let canonical = format!(
            "{{\"body\":\"{body}\",\"integratedTime\":{},\"logID\":\"{}\",\"logIndex\":7}}",
            self.integrated_time, self.log_id
        );
        let set = self.rekor.sign(canonical.as_bytes()).expect("Rekor signs");
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
    Requirement::keyless(Keyless {
        identities: vec![Identity {
            issuer: Pattern::Exact(OIDC_ISSUER.to_string()),
            subject,
        }],
        trust_root: TrustRoot::from_pem(&root.authority.pem, &root.rekor_pem, "")
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
        matches!(&verdict, Verdict::Verified(v) if v.signer == signer && v.layout == Layout::Tag),
        "{verdict:?}"
    );
    let pattern = requirement(
        &root,
        Pattern::regex(r".*@example\.com", "subject").expect("a regex"),
    );
    assert!(matches!(
        env.verify(&image, &pattern).await,
        Verdict::Verified(_)
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
        "the bundle holds no DSSE envelope",
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
