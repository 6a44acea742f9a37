//! An OCI registry in memory on 127.0.0.1, for the fast tests of the passes that read one:
//! it serves the images and cosign signatures it was given, by tag and by digest, and
//! records every request, so that a test can count what a pass asked of the registry. It
//! takes no push and has no referrers API (404, as a registry without it answers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_oci::PackedImage;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::Response;
use base64::Engine as _;
use rcgen::SigningKey as _;
use serde_json::json;
use sha2::{Digest as _, Sha256};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

#[derive(Default)]
struct Content {
    /// `<repository>/manifests/<tag or digest>` and `<repository>/blobs/<digest>`: the media
    /// type and the bytes.
    by_path: HashMap<String, (String, Vec<u8>)>,
    /// `METHOD /v2/...` of every request, in order.
    requests: Vec<String>,
}

/// The registry; the server stops when it is dropped.
pub struct FakeRegistry {
    addr: String,
    content: Arc<Mutex<Content>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl FakeRegistry {
    pub async fn start() -> FakeRegistry {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address").to_string();
        let content = Arc::new(Mutex::new(Content::default()));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&content));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeRegistry {
            addr,
            content,
            server,
        }
    }

    /// `127.0.0.1:<port>`, as image references name it.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn content(&self) -> std::sync::MutexGuard<'_, Content> {
        self.content.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, repository: &str, path: &str, media_type: &str, bytes: Vec<u8>) {
        self.content().by_path.insert(
            format!("{repository}/{path}"),
            (media_type.to_string(), bytes),
        );
    }

    /// Serves `image` as `repository:tag` (moving the tag if it named another image); its
    /// digest.
    pub fn push(&self, repository: &str, tag: &str, image: &PackedImage) -> String {
        let blob = "application/octet-stream";
        self.put(
            repository,
            &format!("blobs/{}", image.layer_digest),
            blob,
            image.layer.clone(),
        );
        self.put(
            repository,
            &format!("blobs/{}", image.config_digest),
            blob,
            image.config.clone(),
        );
        for reference in [tag, image.manifest_digest.as_str()] {
            self.put(
                repository,
                &format!("manifests/{reference}"),
                OCI_MANIFEST,
                image.manifest.clone(),
            );
        }
        image.manifest_digest.clone()
    }

    /// Signs `repository@digest` with `key` as `cosign sign --key` does in the legacy layout:
    /// a simple-signing payload naming the digest and the repository, its ECDSA signature
    /// in the layer's annotation, the manifest at the tag `sha256-<hex>.sig`.
    pub fn sign(&self, repository: &str, digest: &str, key: &rcgen::KeyPair) {
        let payload = json!({
            "critical": {
                "identity": {"docker-reference": format!("{}/{repository}", self.addr)},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": null,
        })
        .to_string()
        .into_bytes();
        let signature = key.sign(&payload).expect("an ECDSA signature");
        let config = b"{}".to_vec();
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256(&config),
                "size": config.len(),
            },
            "layers": [{
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "digest": sha256(&payload),
                "size": payload.len(),
                "annotations": {
                    "dev.cosignproject.cosign/signature":
                        base64::engine::general_purpose::STANDARD.encode(signature),
                },
            }],
        })
        .to_string()
        .into_bytes();
        let blob = "application/octet-stream";
        self.put(
            repository,
            &format!("blobs/{}", sha256(&payload)),
            blob,
            payload,
        );
        self.put(
            repository,
            &format!("blobs/{}", sha256(&config)),
            blob,
            config,
        );
        let tag = format!("{}.sig", digest.replace(':', "-"));
        self.put(
            repository,
            &format!("manifests/{tag}"),
            OCI_MANIFEST,
            manifest,
        );
    }

    /// Every request so far, as `METHOD /v2/...`.
    pub fn requests(&self) -> Vec<String> {
        self.content().requests.clone()
    }

    /// The requests so far for the signatures of `digest`: its `.sig` tag, the blobs that
    /// tag's manifest names, its referrers and their fallback tag.
    pub fn signature_requests(&self, digest: &str) -> Vec<String> {
        let hex = digest.trim_start_matches("sha256:");
        let content = self.content();
        let sig_blobs: Vec<String> = content
            .by_path
            .iter()
            .filter(|(path, _)| path.ends_with(&format!("manifests/sha256-{hex}.sig")))
            .filter_map(|(_, (_, manifest))| serde_json::from_slice(manifest).ok())
            .flat_map(|manifest: serde_json::Value| {
                manifest["layers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|layer| layer["digest"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .collect();
        content
            .requests
            .iter()
            .filter(|request| {
                request.contains(&format!("sha256-{hex}"))
                    || request.contains(&format!("/referrers/{digest}"))
                    || sig_blobs.iter().any(|blob| request.ends_with(blob))
            })
            .cloned()
            .collect()
    }
}

async fn answer(State(content): State<Arc<Mutex<Content>>>, method: Method, uri: Uri) -> Response {
    let mut content = content.lock().unwrap_or_else(PoisonError::into_inner);
    let path = uri.path().to_string();
    content.requests.push(format!("{method} {path}"));
    let found = match path.strip_prefix("/v2/") {
        Some("") => Some(("application/json".to_string(), b"{}".to_vec())),
        Some(rest) => content.by_path.get(rest).cloned(),
        None => None,
    };
    let Some((media_type, bytes)) = found else {
        let body = json!({"errors": [{"code": "NAME_UNKNOWN", "message": path}]});
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .expect("a response");
    };
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, media_type)
        .header(header::CONTENT_LENGTH, bytes.len())
        .header("Docker-Content-Digest", sha256(&bytes));
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from(bytes)
    };
    response.body(body).expect("a response")
}
