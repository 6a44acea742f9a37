//! Signatures made by cosign (COSIGN_BIN, from `hack/install-cosign.sh`) in the test
//! registry, verified by `verify_image`; hostile signature manifests pushed by hand.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentic_oci::{RegistryAuth, RegistryClient, RegistryOptions, ResolvedImage};
use agentic_trust::{ImageVerdict, Layout, PublicKey, Requirement, Signer, verify_image};
use base64::Engine as _;
use support::{SignatureRegistry, expect_invalid, sha256, sig_tag};

const ANONYMOUS: RegistryAuth = RegistryAuth::Anonymous;
const PASSWORD: &str = "test-only-password";

/// The test registry, with cosign and a scratch directory for its keys.
struct Env {
    test_registry: SignatureRegistry,
    dir: tempfile::TempDir,
    cosign: PathBuf,
}

impl Deref for Env {
    type Target = SignatureRegistry;
    fn deref(&self) -> &SignatureRegistry {
        &self.test_registry
    }
}

impl Env {
    async fn start() -> Env {
        let cosign = PathBuf::from(
            std::env::var("COSIGN_BIN").expect("COSIGN_BIN (hack/install-cosign.sh | tail -n1)"),
        );
        Env {
            test_registry: SignatureRegistry::start().await,
            dir: tempfile::tempdir().expect("a scratch directory"),
            cosign,
        }
    }

    /// Pushes a one-skill image whose content depends on `variant`, to `repository:tag`.
    async fn push_skill(&self, repository: &str, tag: &str, variant: &str) -> ResolvedImage {
        let dir = self.dir.path().join("skills").join(variant).join("demo");
        std::fs::create_dir_all(&dir).expect("a skill directory");
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: demo\ndescription: The demo skill, variant {variant}.\n---\n# demo\n"
            ),
        )
        .expect("SKILL.md written");
        let packed = agentic_oci::pack_skills(&[dir]).expect("the skill packs");
        let pinned = self
            .client
            .push_image(
                &packed,
                &format!("{}/{repository}:{tag}", self.registry.addr()),
                &ANONYMOUS,
            )
            .await
            .expect("the image is pushed");
        ResolvedImage::from_pinned(&pinned).expect("a pinned reference")
    }

    fn cosign(&self, args: &[&str]) -> std::process::Output {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).expect("a home for cosign");
        Command::new(&self.cosign)
            .args(args)
            .current_dir(self.dir.path())
            .env("COSIGN_PASSWORD", PASSWORD)
            .env("HOME", &home)
            .env("TUF_ROOT", home.join("tuf"))
            // Anything but the loopback registry goes to a closed loopback port: the tests
            // must never reach a Sigstore service.
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .output()
            .expect("cosign runs")
    }

    /// A new cosign key pair: the private key's path and the public key.
    fn key_pair(&self, name: &str) -> (PathBuf, PublicKey, String) {
        let dir = self.dir.path().join("keys").join(name);
        std::fs::create_dir_all(&dir).expect("a key directory");
        let prefix = dir.join("cosign");
        let out = self.cosign(&[
            "generate-key-pair",
            "--output-key-prefix",
            prefix.to_str().expect("a UTF-8 path"),
        ]);
        assert!(
            out.status.success(),
            "cosign generate-key-pair: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pem = std::fs::read_to_string(dir.join("cosign.pub")).expect("cosign.pub");
        let key = PublicKey::from_pem(&pem, name).expect("cosign's public key reads");
        (dir.join("cosign.key"), key, pem)
    }

    /// Signs `image` by digest with cosign, in the legacy tag layout or as a bundle referrer.
    fn sign(&self, key: &Path, image: &ResolvedImage, bundle: bool) {
        let out = self.cosign(&[
            "sign",
            "--key",
            key.to_str().expect("a UTF-8 path"),
            "--tlog-upload=false",
            "--use-signing-config=false",
            &format!("--new-bundle-format={bundle}"),
            "--allow-http-registry",
            "--yes",
            &image.repository_with_digest,
        ]);
        assert!(
            out.status.success(),
            "cosign sign: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Copies the manifest at `from_repository:from` (its config and layers too) to
    /// `to_repository:to`, byte for byte.
    async fn copy_manifest(
        &self,
        from_repository: &str,
        from: &str,
        to_repository: &str,
        to: &str,
    ) {
        let manifest = self.get_manifest(from_repository, from).await;
        let parsed: serde_json::Value = serde_json::from_slice(&manifest).expect("a JSON manifest");
        let mut digests = vec![parsed["config"]["digest"].clone()];
        digests.extend(
            parsed["layers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|layer| layer["digest"].clone()),
        );
        for digest in digests.iter().filter_map(|digest| digest.as_str()) {
            let blob = self.get_blob(from_repository, digest).await;
            self.put_blob(to_repository, &blob).await;
        }
        self.put_manifest_bytes(to_repository, to, &manifest).await;
    }
}

impl Env {
    /// An RSA key of `bits` made by openssl: the private key's path and the public key's PEM.
    fn rsa_key(&self, name: &str, bits: u32) -> (PathBuf, String) {
        let dir = self.dir.path().join("keys").join(name);
        std::fs::create_dir_all(&dir).expect("a key directory");
        let private = dir.join("rsa.pem");
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let path = private.to_str().expect("a UTF-8 path");
        openssl(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            &format!("rsa_keygen_bits:{bits}"),
            "-out",
            path,
        ]);
        let public = openssl(&["pkey", "-in", path, "-pubout"]);
        (private, String::from_utf8(public).expect("a PEM"))
    }

    /// `private` (an RSA key in PEM) imported as a cosign key: its path.
    fn import_key(&self, private: &Path) -> PathBuf {
        let prefix = private.with_file_name("cosign");
        let out = self.cosign(&[
            "import-key-pair",
            "--key",
            private.to_str().expect("a UTF-8 path"),
            "--output-key-prefix",
            prefix.to_str().expect("a UTF-8 path"),
        ]);
        assert!(
            out.status.success(),
            "cosign import-key-pair: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        prefix.with_extension("key")
    }
}

fn fingerprint_of(pem: &str) -> String {
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("a base64 PEM body");
    sha256(&der)
}

#[tokio::test]
async fn cosign_signatures_in_the_tag_layout() {
    let env = Env::start().await;
    let (key_a, public_a, pem_a) = env.key_pair("a");
    let (key_b, public_b, pem_b) = env.key_pair("b");
    let signed = env.push_skill("skills/demo", "v1", "signed").await;
    env.sign(&key_a, &signed, false);

    // Signed with A, A required: who signed and where the signature was.
    let verdict = env
        .verify(&signed, &Requirement::keys(vec![public_a.clone()]))
        .await;
    let ImageVerdict::Verified(verified) = verdict else {
        panic!("expected Verified, got {verdict:?}");
    };
    assert_eq!(
        verified.signer,
        Signer::Key {
            fingerprint: fingerprint_of(&pem_a)
        }
    );
    assert_eq!(verified.layout, Layout::Tag);
    let sig_manifest: serde_json::Value =
        serde_json::from_slice(&env.get_manifest("skills/demo", &sig_tag(&signed)).await)
            .expect("JSON");
    assert_eq!(
        verified.signature_digest,
        sig_manifest["layers"][0]["digest"]
            .as_str()
            .expect("a layer digest")
    );

    // Wrong key.
    expect_invalid(
        env.verify(&signed, &Requirement::keys(vec![public_b.clone()]))
            .await,
        "not signed by any of the 1 accepted keys",
    );

    // Rotation: either of two keys counts, and each image names the key that signed it.
    let rotated = Requirement::keys(vec![public_b.clone(), public_a.clone()]);
    let verdict = env.verify(&signed, &rotated).await;
    assert!(
        matches!(&verdict, ImageVerdict::Verified(v) if v.signer == Signer::Key { fingerprint: fingerprint_of(&pem_a) }),
        "{verdict:?}"
    );
    let newer = env.push_skill("skills/demo", "v2", "newer").await;
    env.sign(&key_b, &newer, false);
    let verdict = env.verify(&newer, &rotated).await;
    assert!(
        matches!(&verdict, ImageVerdict::Verified(v) if v.signer == Signer::Key { fingerprint: fingerprint_of(&pem_b) }),
        "{verdict:?}"
    );

    // Unsigned.
    let unsigned = env.push_skill("skills/demo", "v3", "unsigned").await;
    assert_eq!(
        env.verify(&unsigned, &rotated).await,
        ImageVerdict::Unsigned
    );

    // A valid signature of `signed` placed as the signature of `unsigned`: over another digest.
    env.copy_manifest(
        "skills/demo",
        &sig_tag(&signed),
        "skills/demo",
        &sig_tag(&unsigned),
    )
    .await;
    expect_invalid(
        env.verify(&unsigned, &rotated).await,
        &format!("not the pinned {}", unsigned.digest),
    );

    // The same image and its valid signature copied to another repository.
    env.copy_manifest("skills/demo", &signed.digest, "skills/copy", "v1")
        .await;
    env.copy_manifest(
        "skills/demo",
        &sig_tag(&signed),
        "skills/copy",
        &sig_tag(&signed),
    )
    .await;
    let copied = ResolvedImage::from_pinned(&format!(
        "{}/skills/copy@{}",
        env.registry.addr(),
        signed.digest
    ))
    .expect("pinned");
    expect_invalid(
        env.verify(&copied, &rotated).await,
        "copied from another repository",
    );
}

#[tokio::test]
async fn a_moved_tag_is_verified_at_its_new_digest() {
    let env = Env::start().await;
    let (key, public, _) = env.key_pair("a");
    let requirement = Requirement::keys(vec![public]);
    let first = env.push_skill("skills/moving", "stable", "first").await;
    env.sign(&key, &first, false);
    assert!(matches!(
        env.verify(&first, &requirement).await,
        ImageVerdict::Verified(_)
    ));

    // The tag moves to an unsigned image: what it names now is unsigned, the old digest
    // keeps its signature.
    env.push_skill("skills/moving", "stable", "second").await;
    let moved = env
        .client
        .resolve_digest(
            &format!("{}/skills/moving:stable", env.registry.addr()),
            &ANONYMOUS,
        )
        .await
        .expect("the tag resolves");
    assert_ne!(moved.digest, first.digest);
    assert_eq!(
        env.verify(&moved, &requirement).await,
        ImageVerdict::Unsigned
    );
    assert!(matches!(
        env.verify(&first, &requirement).await,
        ImageVerdict::Verified(_)
    ));
}

#[tokio::test]
async fn cosign_bundles_as_referrers() {
    let env = Env::start().await;
    let (key_a, public_a, pem_a) = env.key_pair("a");
    let (_, public_b, _) = env.key_pair("b");
    let image = env.push_skill("skills/bundled", "v1", "bundled").await;
    env.sign(&key_a, &image, true);

    let verdict = env
        .verify(&image, &Requirement::keys(vec![public_a.clone()]))
        .await;
    let ImageVerdict::Verified(verified) = verdict else {
        panic!("expected Verified, got {verdict:?}");
    };
    assert_eq!(
        verified.signer,
        Signer::Key {
            fingerprint: fingerprint_of(&pem_a)
        }
    );
    // Debian's registry has no referrers API: cosign wrote the fallback tag.
    assert_eq!(verified.layout, Layout::ReferrersTag);
    let index: serde_json::Value = serde_json::from_slice(
        &env.get_manifest("skills/bundled", &image.digest.replace(':', "-"))
            .await,
    )
    .expect("the fallback index");
    assert_eq!(
        verified.signature_digest,
        index["manifests"][0]["digest"]
            .as_str()
            .expect("a referrer")
    );

    expect_invalid(
        env.verify(&image, &Requirement::keys(vec![public_b])).await,
        "not signed by any of the 1 accepted keys",
    );

    // Anyone who can push may stuff the legacy `.sig` tag past its limits: that layout has
    // nothing usable, and the valid bundle still verifies.
    let config = env.put_blob("skills/bundled", b"{}").await;
    let stuffed = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
        "layers": vec![serde_json::json!({"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": config, "size": 2}); 100],
    });
    env.put_manifest("skills/bundled", &sig_tag(&image), &stuffed)
        .await;
    let verdict = env
        .verify(&image, &Requirement::keys(vec![public_a.clone()]))
        .await;
    assert!(
        matches!(&verdict, ImageVerdict::Verified(v) if v.layout == Layout::ReferrersTag),
        "{verdict:?}"
    );

    // cosign's statement binds the digest only: a policy that requires the repository
    // refuses it.
    let bound = Requirement {
        repository_bound: true,
        ..Requirement::keys(vec![public_a])
    };
    expect_invalid(env.verify(&image, &bound).await, "names no repository");
}

#[tokio::test]
async fn an_unreachable_registry_is_unavailable() {
    let env = Env::start().await;
    let (_, public, _) = env.key_pair("a");
    // A loopback port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = closed.local_addr().expect("its address");
    drop(closed);
    let image =
        ResolvedImage::from_pinned(&format!("{addr}/skills/demo@sha256:{}", "a".repeat(64)))
            .expect("pinned");
    let client = RegistryClient::new(RegistryOptions {
        insecure_registries: vec![addr.to_string()],
        ..RegistryOptions::default()
    })
    .expect("a client");
    let verdict = verify_image(
        &client,
        &ANONYMOUS,
        &image,
        &Requirement::keys(vec![public]),
    )
    .await;
    assert!(
        matches!(verdict, ImageVerdict::Unavailable { .. }),
        "{verdict:?}"
    );
}

#[tokio::test]
async fn cosign_signatures_with_rsa_keys() {
    let env = Env::start().await;
    let (private, pem) = env.rsa_key("rsa", 2048);
    let key = env.import_key(&private);
    let public = PublicKey::from_pem(&pem, "rsa").expect("an RSA public key reads");
    let (_, other_pem) = env.rsa_key("other", 3072);
    let other = PublicKey::from_pem(&other_pem, "other").expect("a 3072-bit key reads");
    let signer = Signer::Key {
        fingerprint: fingerprint_of(&pem),
    };

    // cosign signs with an RSA key in PKCS#1 v1.5, in both layouts.
    for (repository, bundle, layout) in [
        ("skills/rsa-tag", false, Layout::Tag),
        ("skills/rsa-bundle", true, Layout::ReferrersTag),
    ] {
        let image = env.push_skill(repository, "v1", repository).await;
        env.sign(&key, &image, bundle);
        let verdict = env
            .verify(&image, &Requirement::keys(vec![public.clone()]))
            .await;
        assert!(
            matches!(&verdict, ImageVerdict::Verified(v) if v.signer == signer && v.layout == layout),
            "{repository}: {verdict:?}"
        );
        expect_invalid(
            env.verify(&image, &Requirement::keys(vec![other.clone()]))
                .await,
            "not signed by any of the 1 accepted keys",
        );
    }

    // Keys too small to be safe are refused when the policy is read, naming their size.
    let (_, weak_pem) = env.rsa_key("weak", 1024);
    let error = PublicKey::from_pem(&weak_pem, "weak").expect_err("a 1024-bit key");
    assert!(error.to_string().contains("1024 bits"), "{error}");
    assert!(error.to_string().starts_with("weak: "), "{error}");
}
