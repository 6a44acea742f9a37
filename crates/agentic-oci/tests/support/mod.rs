//! What the registry tests of this crate build images with, bypassing `pack_skills`.

use agentic_oci::PackedImage;
use sha2::{Digest as _, Sha256};

/// The `sha256:<hex>` digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The image of one gzip `layer` whose uncompressed tar has the digest `diff_id`: its config
/// and manifest, made by hand so that nothing validates the layer.
pub fn one_layer_image(layer: Vec<u8>, diff_id: String) -> PackedImage {
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .expect("a JSON config");
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": agentic_oci::MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": agentic_oci::CONFIG_MEDIA_TYPE, "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": agentic_oci::LAYER_MEDIA_TYPE, "digest": sha256(&layer), "size": layer.len()}],
    }))
    .expect("a JSON manifest");
    PackedImage {
        skills: Vec::new(),
        layer_digest: sha256(&layer),
        diff_id,
        config_digest: sha256(&config),
        manifest_digest: sha256(&manifest),
        layer,
        config,
        manifest,
    }
}
