//! The goose test image: upstream's goose binary (`hack/install-goose.sh`, from the npm
//! registry), the glibc libraries it links, Debian's static busybox for a shell, the CA
//! bundle goose's HTTP client needs to start, the scripted endpoint `goose-fake-llm`
//! (`tests/goose-fake-llm`) and `hack/goose-harness/harness.sh` as entrypoint, running as
//! 65532.
//!
//! goose is about 300 MB, and compressing it takes seconds: its layer is built once per
//! goose binary, keyed by the binary's SHA-256, and kept under the tools cache
//! (`${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/goose-image/<sha256>/`). The tools
//! that build it (`sha256sum`, `gzip`) are far faster than this crate's unoptimized debug
//! build of the same algorithms would be.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::{
    BUSYBOX_ENV, CA_BUNDLE, DEFAULT_BUSYBOX, Layer, NON_ROOT_USER, PATH_ENV, busybox_layer,
    push_image, read, registry_client, root_layer, run_tool, stripped,
};
use crate::error::{Error, Result};

const HARNESS_SCRIPT: &str = include_str!("../../../../hack/goose-harness/harness.sh");
const GOOSE_REPOSITORY: &str = "agentic-testenv/goose:test";
const GOOSE_PATH: &str = "usr/local/bin/goose";
const FAKE_LLM_PATH: &str = "usr/local/bin/goose-fake-llm";
const HARNESS_PATH: &str = "usr/local/bin/goose-harness";
/// Where the goose layer is cached, under the tools cache.
const CACHE_SUBDIR: &str = "goose-image";
/// The cached layer's files: the compressed layer, its digest and the digest of the tar.
const CACHED_LAYER: &str = "layer.tar.gz";
const CACHED_DIGEST: &str = "digest";
const CACHED_DIFF_ID: &str = "diff-id";

/// Builds the goose test image from `goose` (upstream's binary) and `fake_llm` (a build of
/// `goose-fake-llm` for this machine), pushes it to the plain-HTTP registry at `registry`
/// (`host:port`) and returns the reference pinned by digest.
pub async fn push_goose_image(registry: &str, goose: &Path, fake_llm: &Path) -> Result<String> {
    let busybox_path = std::env::var_os(BUSYBOX_ENV)
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_BUSYBOX), PathBuf::from);
    let busybox = busybox_layer(&busybox_path)?;
    let goose_layer = cached_goose_layer(goose)?;
    let harness = harness_layer(goose, fake_llm)?;
    push_image(
        &registry_client(),
        format!("{registry}/{GOOSE_REPOSITORY}"),
        &[&busybox, &goose_layer, &harness],
        json!({
            "Env": [PATH_ENV],
            "Entrypoint": [format!("/{HARNESS_PATH}")],
            "User": NON_ROOT_USER,
        }),
    )
    .await
}

/// The libraries of goose and of the endpoint, the CA bundle, the endpoint stripped of its
/// debug information, and the harness.
fn harness_layer(goose: &Path, fake_llm: &Path) -> Result<Layer> {
    let files = vec![
        (FAKE_LLM_PATH.to_owned(), stripped(fake_llm)?, 0o755),
        (
            HARNESS_PATH.to_owned(),
            HARNESS_SCRIPT.as_bytes().to_vec(),
            0o755,
        ),
        // goose's HTTP client will not start without trust roots, even for http://.
        (
            CA_BUNDLE.trim_start_matches('/').to_owned(),
            read(Path::new(CA_BUNDLE))?,
            0o644,
        ),
    ];
    // The pod mounts /workspace and /tmp; the directories exist for a run outside one too.
    root_layer(files, &[goose, fake_llm], &["tmp", "workspace"])
}

/// The layer holding `usr/local/bin/goose`, from the cache when this binary's layer was
/// built before.
fn cached_goose_layer(goose: &Path) -> Result<Layer> {
    let binary_sha256 = sha256sum(goose)?;
    let dir = cache_dir().join(&binary_sha256);
    if !dir.join(CACHED_DIFF_ID).is_file() {
        build_goose_layer(goose, &dir)?;
    }
    let text = |name: &str| -> Result<String> {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map(|text| text.trim().to_owned())
            .map_err(Error::io("reading", path))
    };
    Ok(Layer {
        blob: read(&dir.join(CACHED_LAYER))?,
        digest: text(CACHED_DIGEST)?,
        diff_id: text(CACHED_DIFF_ID)?,
    })
}

/// Writes the goose layer and its digests into `dir`: built beside it and renamed into place,
/// so an interrupted build never leaves a half-written layer that looks finished.
fn build_goose_layer(goose: &Path, dir: &Path) -> Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    let scratch = tempfile::Builder::new()
        .prefix(".building-")
        .tempdir_in(parent)
        .map_err(Error::io("creating a directory in", parent))?;
    let tar_path = scratch.path().join("layer.tar");
    write_goose_tar(goose, &tar_path)?;
    let gzip_path = scratch.path().join(CACHED_LAYER);
    let gzip_file = std::fs::File::create(&gzip_path).map_err(Error::io("creating", &gzip_path))?;
    // -n: no name or time in the header, so the same binary always gives the same digest.
    let status = Command::new("gzip")
        .args(["-1", "-n", "-c"])
        .arg(&tar_path)
        .stdout(gzip_file)
        .status()
        .map_err(Error::io("running", "gzip"))?;
    if !status.success() {
        return Err(Error::UnexpectedResponse(format!(
            "gzip of {} exited with {status}",
            tar_path.display()
        )));
    }
    let digest = format!("sha256:{}", sha256sum(&gzip_path)?);
    let diff_id = format!("sha256:{}", sha256sum(&tar_path)?);
    std::fs::remove_file(&tar_path).map_err(Error::io("removing", &tar_path))?;
    for (name, value) in [(CACHED_DIGEST, digest), (CACHED_DIFF_ID, diff_id)] {
        let path = scratch.path().join(name);
        std::fs::write(&path, value).map_err(Error::io("writing", path))?;
    }
    let built = scratch.keep();
    match std::fs::rename(&built, dir) {
        Ok(()) => Ok(()),
        // Another process cached the same binary first: its layer is as good as ours.
        Err(_) if dir.join(CACHED_DIFF_ID).is_file() => {
            std::fs::remove_dir_all(&built).map_err(Error::io("removing", &built))
        }
        Err(error) => Err(Error::Io {
            action: "renaming into place",
            path: dir.to_owned(),
            source: error,
        }),
    }
}

/// A tar of `usr/`, `usr/local/`, `usr/local/bin/` and the goose binary, with the same fixed
/// owners, modes and times as every other test layer, streamed to `path`.
fn write_goose_tar(goose: &Path, path: &Path) -> Result<()> {
    let failed = |error: std::io::Error| Error::Io {
        action: "writing the goose layer",
        path: path.to_owned(),
        source: error,
    };
    let file = std::fs::File::create(path).map_err(Error::io("creating", path))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    let header = |entry_type: tar::EntryType, mode: u32, size: u64| {
        let mut header = tar::Header::new_ustar();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(entry_type);
        header.set_mode(mode);
        header.set_size(size);
        header
    };
    for dir in ["usr/", "usr/local/", "usr/local/bin/"] {
        tar.append_data(
            &mut header(tar::EntryType::Directory, 0o755, 0),
            dir,
            std::io::empty(),
        )
        .map_err(failed)?;
    }
    let binary = std::fs::File::open(goose).map_err(Error::io("opening", goose))?;
    let size = binary
        .metadata()
        .map_err(Error::io("reading the size of", goose))?
        .len();
    tar.append_data(
        &mut header(tar::EntryType::Regular, 0o755, size),
        GOOSE_PATH,
        binary,
    )
    .map_err(failed)?;
    tar.into_inner()
        .and_then(|mut writer| std::io::Write::flush(&mut writer))
        .map_err(failed)
}

/// The SHA-256 of `path` in hex, from `sha256sum`.
fn sha256sum(path: &Path) -> Result<String> {
    let output = run_tool(Command::new("sha256sum").arg("--").arg(path))?;
    output
        .split_whitespace()
        .next()
        .filter(|hash| hash.len() == 64 && hash.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .map(str::to_owned)
        .ok_or_else(|| {
            Error::UnexpectedResponse(format!(
                "sha256sum printed no hash for {}: {output:?}",
                path.display()
            ))
        })
}

/// `${AGENTIC_CACHE_DIR:-$HOME/.cache/agentic-operator}/goose-image`, where the repository's
/// scripts keep the tools.
fn cache_dir() -> PathBuf {
    let root = std::env::var_os("AGENTIC_CACHE_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(
            || {
                let home =
                    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
                home.join(".cache/agentic-operator")
            },
            PathBuf::from,
        );
    root.join(CACHE_SUBDIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_goose_layer_is_reproducible_and_holds_the_binary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let binary = dir.path().join("goose");
        std::fs::write(&binary, b"#!/bin/sh\necho goose\n").expect("write");
        let (first, second) = (dir.path().join("one"), dir.path().join("two"));
        build_goose_layer(&binary, &first).expect("a layer builds");
        build_goose_layer(&binary, &second).expect("a layer builds again");
        for name in [CACHED_LAYER, CACHED_DIGEST, CACHED_DIFF_ID] {
            assert_eq!(
                std::fs::read(first.join(name)).expect("read"),
                std::fs::read(second.join(name)).expect("read"),
                "{name} differs between two builds"
            );
        }

        let blob = std::fs::read(first.join(CACHED_LAYER)).expect("read");
        let digest = std::fs::read_to_string(first.join(CACHED_DIGEST)).expect("read");
        assert_eq!(digest, super::super::sha256_digest(&blob));
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(blob.as_slice()));
        let mut paths = Vec::new();
        for entry in archive.entries().expect("a tar") {
            let mut entry = entry.expect("an entry");
            assert_eq!(entry.header().mtime().expect("mtime"), 0);
            let path = entry.path().expect("a path").display().to_string();
            if path == GOOSE_PATH {
                assert_eq!(entry.header().mode().expect("mode"), 0o755);
                let mut contents = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut contents).expect("read");
                assert_eq!(contents, b"#!/bin/sh\necho goose\n");
            }
            paths.push(path);
        }
        assert_eq!(
            paths,
            [
                "usr/",
                "usr/local/",
                "usr/local/bin/",
                "usr/local/bin/goose"
            ]
        );
    }
}
