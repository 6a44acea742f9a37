//! What the registry-backed tests share: the test registry, the client `verify_image` reads
//! it with, and a raw HTTP client that pushes what cosign would never write.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use agentic_oci::{RegistryAuth, RegistryClient, RegistryOptions, ResolvedImage};
use agentic_testenv::Registry;
use agentic_trust::{ImageVerdict, Requirement, verify_image};
use sha2::{Digest as _, Sha256};

pub struct SignatureRegistry {
    pub registry: Registry,
    pub client: RegistryClient,
    http: reqwest::Client,
}

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The tag of an image's signatures in cosign's legacy layout.
pub fn sig_tag(image: &ResolvedImage) -> String {
    format!("{}.sig", image.digest.replace(':', "-"))
}

pub fn expect_invalid(verdict: ImageVerdict, expected: &str) {
    match verdict {
        ImageVerdict::Invalid(why) => {
            assert!(
                why.message.contains(expected),
                "expected {expected:?} in {why:?}"
            );
        }
        other => panic!("expected Invalid ({expected}), got {other:?}"),
    }
}

impl SignatureRegistry {
    pub async fn start() -> SignatureRegistry {
        let registry = Registry::start().await.expect("the test registry starts");
        let client = RegistryClient::new(RegistryOptions {
            insecure_registries: vec![registry.addr()],
            ..RegistryOptions::default()
        })
        .expect("a registry client");
        SignatureRegistry {
            registry,
            client,
            http: reqwest::Client::new(),
        }
    }

    pub async fn verify(&self, image: &ResolvedImage, requirement: &Requirement) -> ImageVerdict {
        verify_image(&self.client, &RegistryAuth::Anonymous, image, requirement).await
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/v2/{path}", self.registry.addr())
    }

    pub async fn get_manifest(&self, repository: &str, reference: &str) -> Vec<u8> {
        let response = self
            .http
            .get(self.url(&format!("{repository}/manifests/{reference}")))
            .header(
                "Accept",
                "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json",
            )
            .send()
            .await
            .expect("the registry answers");
        assert!(
            response.status().is_success(),
            "GET manifest {repository}:{reference}: {}",
            response.status()
        );
        response.bytes().await.expect("a manifest body").to_vec()
    }

    /// Pushes `manifest` to `repository:reference`; returns its digest.
    pub async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        manifest: &serde_json::Value,
    ) -> String {
        let bytes = serde_json::to_vec(manifest).expect("JSON");
        self.put_manifest_bytes(repository, reference, &bytes).await
    }

    /// Pushes the manifest `bytes` unchanged (its media type read from them); returns its
    /// digest.
    pub async fn put_manifest_bytes(
        &self,
        repository: &str,
        reference: &str,
        bytes: &[u8],
    ) -> String {
        let media_type = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|value| value["mediaType"].as_str().map(str::to_string))
            .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".to_string());
        let response = self
            .http
            .put(self.url(&format!("{repository}/manifests/{reference}")))
            .header("Content-Type", media_type)
            .body(bytes.to_vec())
            .send()
            .await
            .expect("the registry answers");
        assert!(
            response.status().is_success(),
            "PUT manifest {repository}:{reference}: {} {}",
            response.status(),
            response.text().await.unwrap_or_default()
        );
        sha256(bytes)
    }

    pub async fn get_blob(&self, repository: &str, digest: &str) -> Vec<u8> {
        let response = self
            .http
            .get(self.url(&format!("{repository}/blobs/{digest}")))
            .send()
            .await
            .expect("the registry answers");
        assert!(
            response.status().is_success(),
            "GET blob {digest}: {}",
            response.status()
        );
        response.bytes().await.expect("a blob").to_vec()
    }

    /// Uploads `blob` to `repository` in one monolithic upload; returns its digest.
    pub async fn put_blob(&self, repository: &str, blob: &[u8]) -> String {
        let digest = sha256(blob);
        let started = self
            .http
            .post(self.url(&format!("{repository}/blobs/uploads/")))
            .send()
            .await
            .expect("the registry answers");
        assert_eq!(started.status().as_u16(), 202, "starting an upload");
        let location = started
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .expect("an upload location")
            .to_string();
        let location = if location.starts_with("http") {
            location
        } else {
            format!("http://{}{location}", self.registry.addr())
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let done = self
            .http
            .put(format!("{location}{separator}digest={digest}"))
            .header("Content-Type", "application/octet-stream")
            .body(blob.to_vec())
            .send()
            .await
            .expect("the registry answers");
        assert!(
            done.status().is_success(),
            "finishing an upload: {}",
            done.status()
        );
        digest
    }
}
