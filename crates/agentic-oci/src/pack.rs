//! Packing skill directories into a reproducible OCI image.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use agentic_skill::SkillVerdict;
use flate2::{Compression, GzBuilder};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::{Limits, OciError};

/// Media type of the image manifest a packed image is pushed with.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of the image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of the single gzip tar layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Annotation (manifest) and label (config) listing the skills in the image, comma-separated.
pub const SKILLS_ANNOTATION: &str = "io.konveyor.agentic.skills";
const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The platform written in the image config. Skill content does not depend on the CPU, and a
/// plain image manifest (no index) is unpacked by containerd and CRI-O on every node
/// architecture: containerd compares the config's platform only for manifests chosen from an
/// index, CRI-O only warns. `amd64` is what the field must say to be a valid image config.
const CONFIG_ARCHITECTURE: &str = "amd64";
const CONFIG_OS: &str = "linux";

/// Modes in the layer: everything world-readable, executables stay executable.
const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;
const EXECUTABLE_MODE: u32 = 0o755;

/// A packed skill image: one layer, its config and manifest, ready to push.
///
/// The same directories always give the same bytes and so the same manifest digest:
/// entries are sorted, owned by root, with fixed modes and timestamps, and gzip carries no
/// name or time.
#[derive(Clone, PartialEq, Eq)]
pub struct PackedImage {
    /// The skill names, in the order the directories were given.
    pub skills: Vec<String>,
    /// The gzip-compressed tar layer.
    pub layer: Vec<u8>,
    /// `sha256:…` of [`PackedImage::layer`].
    pub layer_digest: String,
    /// `sha256:…` of the uncompressed tar (the config's `rootfs.diff_ids` entry).
    pub diff_id: String,
    /// The image config JSON.
    pub config: Vec<u8>,
    /// `sha256:…` of [`PackedImage::config`].
    pub config_digest: String,
    /// The image manifest JSON.
    pub manifest: Vec<u8>,
    /// `sha256:…` of [`PackedImage::manifest`]: the image digest.
    pub manifest_digest: String,
}

impl std::fmt::Debug for PackedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedImage")
            .field("skills", &self.skills)
            .field("layer_bytes", &self.layer.len())
            .field("manifest_digest", &self.manifest_digest)
            .finish_non_exhaustive()
    }
}

/// One entry of the layer, in archive order.
struct SourceEntry {
    archive_path: String,
    source: PathBuf,
    kind: SourceKind,
}

enum SourceKind {
    Directory,
    File { executable: bool, size: u64 },
}

/// Packs skill directories into an image: one directory puts its skill at the image root,
/// several put each skill in a top-level directory named after it (its frontmatter `name`)
/// for SkillCards to pick with `subPath`.
///
/// Every skill is validated first and packing is refused, with every problem listed, when one
/// is invalid, when two share a name, or when a directory holds symlinks or special files (a
/// path given as argument may itself be a symlink to a directory). The content must fit the
/// default [`Limits`], which is what the operator reads.
pub fn pack_skills(dirs: &[PathBuf]) -> Result<PackedImage, OciError> {
    if dirs.is_empty() {
        return Err(OciError::InvalidSkillSource {
            path: String::new(),
            message: "no skill directory given".to_string(),
        });
    }
    let skills = validate_skills(dirs)?;

    let mut entries = Vec::new();
    for (name, dir) in &skills {
        let prefix = if skills.len() == 1 {
            String::new()
        } else {
            entries.push(SourceEntry {
                archive_path: name.clone(),
                source: dir.clone(),
                kind: SourceKind::Directory,
            });
            format!("{name}/")
        };
        collect_entries(dir, &prefix, &mut entries)?;
    }
    check_limits(&entries)?;

    let tar = write_tar(&entries)?;
    let diff_id = sha256_digest(&tar);
    let layer = gzip(&tar)?;
    let layer_digest = sha256_digest(&layer);

    let names: Vec<String> = skills.into_iter().map(|(name, _)| name).collect();
    let listed = names.join(",");
    let config = serde_json::to_vec(&json!({
        "architecture": CONFIG_ARCHITECTURE,
        "os": CONFIG_OS,
        "config": { "Labels": { SKILLS_ANNOTATION: listed, TITLE_ANNOTATION: listed } },
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
    }))
    .map_err(internal)?;
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": { "mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len() },
        "layers": [{ "mediaType": LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer.len() }],
        "annotations": { SKILLS_ANNOTATION: listed, TITLE_ANNOTATION: listed },
    }))
    .map_err(internal)?;
    let manifest_digest = sha256_digest(&manifest);

    Ok(PackedImage {
        skills: names,
        layer,
        layer_digest,
        diff_id,
        config,
        config_digest,
        manifest,
        manifest_digest,
    })
}

/// Validates every directory and returns `(name, dir)` pairs; all problems in one error.
fn validate_skills(dirs: &[PathBuf]) -> Result<Vec<(String, PathBuf)>, OciError> {
    let mut skills: Vec<(String, PathBuf)> = Vec::new();
    let mut invalid = Vec::new();
    for dir in dirs {
        let shown = dir.display().to_string();
        let metadata = fs::metadata(dir).map_err(|error| OciError::Io {
            path: shown.clone(),
            message: error.to_string(),
        })?;
        if !metadata.is_dir() {
            return Err(OciError::InvalidSkillSource {
                path: shown,
                message: "not a directory".to_string(),
            });
        }
        let report =
            agentic_skill::validate_path(dir).map_err(|error| OciError::InvalidSkillSource {
                path: shown.clone(),
                message: error.to_string(),
            })?;
        match (&report.frontmatter, report.is_valid()) {
            (Some(frontmatter), true) => {
                let name = frontmatter.name.clone();
                if let Some((_, first)) = skills.iter().find(|(existing, _)| *existing == name) {
                    return Err(OciError::InvalidSkillSource {
                        path: shown,
                        message: format!(
                            "skill name {name:?} is also the name of {}",
                            first.display()
                        ),
                    });
                }
                skills.push((name, dir.clone()));
            }
            _ => invalid.push((shown, report.summary())),
        }
    }
    if !invalid.is_empty() {
        let path = invalid
            .iter()
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let summary = invalid
            .iter()
            .map(|(path, summary)| format!("{path}: {summary}"))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(OciError::Skill(SkillVerdict::InvalidSkill {
            path,
            summary,
        }));
    }
    Ok(skills)
}

/// Appends the entries under `dir`, parents before children, siblings sorted by name.
fn collect_entries(
    dir: &Path,
    prefix: &str,
    entries: &mut Vec<SourceEntry>,
) -> Result<(), OciError> {
    let io_error = |path: &Path, error: std::io::Error| OciError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    };
    let mut children = fs::read_dir(dir)
        .map_err(|error| io_error(dir, error))?
        .map(|child| child.map(|child| child.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| io_error(dir, error))?;
    children.sort();
    for path in children {
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            return Err(OciError::InvalidSkillSource {
                path: path.display().to_string(),
                message: "file names must be UTF-8".to_string(),
            });
        };
        let archive_path = format!("{prefix}{name}");
        let metadata = fs::symlink_metadata(&path).map_err(|error| io_error(&path, error))?;
        let file_type = metadata.file_type();
        if file_type.is_symlink() {
            return Err(OciError::InvalidSkillSource {
                path: path.display().to_string(),
                message: "symlinks cannot be packed: the operator refuses them in skill images; copy the target instead"
                    .to_string(),
            });
        }
        if file_type.is_dir() {
            entries.push(SourceEntry {
                archive_path: archive_path.clone(),
                source: path.clone(),
                kind: SourceKind::Directory,
            });
            collect_entries(&path, &format!("{archive_path}/"), entries)?;
        } else if file_type.is_file() {
            entries.push(SourceEntry {
                archive_path,
                kind: SourceKind::File {
                    executable: metadata.permissions().mode() & 0o111 != 0,
                    size: metadata.len(),
                },
                source: path,
            });
        } else {
            return Err(OciError::InvalidSkillSource {
                path: path.display().to_string(),
                message: "only regular files and directories can be packed (this is a socket, FIFO or device)"
                    .to_string(),
            });
        }
    }
    Ok(())
}

/// Refuses content the operator would refuse to read with its default limits.
fn check_limits(entries: &[SourceEntry]) -> Result<(), OciError> {
    let limits = Limits::default();
    // Long names take an extra header; counting two per entry keeps the estimate on the safe side.
    let headers = entries.len() as u64 * 2;
    if headers > limits.max_entries {
        return Err(OciError::too_large(format!(
            "{} files and directories; the operator reads at most {} tar entries",
            entries.len(),
            limits.max_entries
        )));
    }
    let content: u64 = entries
        .iter()
        .map(|entry| match entry.kind {
            SourceKind::File { size, .. } => size.div_ceil(512) * 512 + 1024,
            SourceKind::Directory => 1024,
        })
        .sum();
    if content > limits.max_uncompressed_bytes {
        return Err(OciError::too_large(format!(
            "the layer would be about {content} bytes; the operator reads at most {}",
            limits.max_uncompressed_bytes
        )));
    }
    Ok(())
}

fn write_tar(entries: &[SourceEntry]) -> Result<Vec<u8>, OciError> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        let write_error = |error: std::io::Error| OciError::InvalidSkillSource {
            path: entry.source.display().to_string(),
            message: format!("cannot be archived: {error}"),
        };
        match entry.kind {
            SourceKind::Directory => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(DIR_MODE);
                header.set_size(0);
                builder
                    .append_data(
                        &mut header,
                        format!("{}/", entry.archive_path),
                        std::io::empty(),
                    )
                    .map_err(write_error)?;
            }
            SourceKind::File { executable, .. } => {
                let content = fs::read(&entry.source).map_err(|error| OciError::Io {
                    path: entry.source.display().to_string(),
                    message: error.to_string(),
                })?;
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(if executable {
                    EXECUTABLE_MODE
                } else {
                    FILE_MODE
                });
                header.set_size(content.len() as u64);
                builder
                    .append_data(&mut header, &entry.archive_path, content.as_slice())
                    .map_err(write_error)?;
            }
        }
    }
    builder.into_inner().map_err(internal)
}

/// Gzip with a fixed header: no file name, time zero, "unknown" OS, fixed level.
fn gzip(bytes: &[u8]) -> Result<Vec<u8>, OciError> {
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), Compression::default());
    encoder.write_all(bytes).map_err(internal)?;
    encoder.finish().map_err(internal)
}

pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn internal(error: impl std::fmt::Display) -> OciError {
    OciError::Internal {
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests;
