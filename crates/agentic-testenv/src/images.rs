//! The test node's images, built here from local files and pushed to the test registry: no
//! image ever comes from another registry.
//!
//! - `pause`: the pod sandbox image containerd starts for every pod (our static `pause`).
//! - `busybox`: Debian's static busybox with a link for each applet, `sh` by default.
//! - `agentic-stub-agent`: busybox plus `hack/stub-agent/stub-agent.sh` as entrypoint, running as
//!   65532: an agent harness stand-in that reports what its sandbox gives it.
//! - `agentic-operator` (on request, [`push_operator_image`]): a build of the operator and the
//!   shared libraries it links, running as 65532: what the init container of a git skill runs.
//! - `agentic-testenv/goose` (on request, [`push_goose_image`]): upstream's goose run by a
//!   test harness against a scripted endpoint in the same container (`goose` module).
//!
//! Layers are reproducible (sorted entries, owned by root, fixed modes and times), so the same
//! inputs always give the same digests.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::{Compression, GzBuilder};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

mod goose;
pub use goose::push_goose_image;

/// Environment variable naming the static busybox the test images are built from; defaults
/// to [`DEFAULT_BUSYBOX`].
pub const BUSYBOX_ENV: &str = "AGENTIC_BUSYBOX";
/// Where Debian's `busybox-static` package puts it (`hack/install-node-packages.sh`).
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";

const STUB_AGENT_SCRIPT: &str = include_str!("../../../hack/stub-agent/stub-agent.sh");
/// Where each image goes in the test registry. The stub agent's is the one the sample Agent
/// (`config/samples/agent.yaml`) and `hack/kind-e2e.sh` name.
const PAUSE_REPOSITORY: &str = "agentic-testenv/pause:test";
const BUSYBOX_REPOSITORY: &str = "agentic-testenv/busybox:test";
const STUB_AGENT_REPOSITORY: &str = "agentic-stub-agent:v1";
const OPERATOR_REPOSITORY: &str = "agentic-testenv/agentic-operator:test";
const OPERATOR_PATH: &str = "usr/local/bin/agentic-operator";
/// Debian's CA bundle (`ca-certificates`), where distroless has it too.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The numeric non-root user the stub agent and the operator image run as.
const NON_ROOT_USER: &str = "65532:65532";
const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The images the test node runs, each pinned by digest (`host:port/repository:tag@sha256:…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestImages {
    /// The pod sandbox ("pause") image containerd is configured with.
    pub pause: String,
    /// busybox; its default command is `sh`.
    pub busybox: String,
    /// The stub agent harness (`hack/stub-agent`); see its script for what it prints and the
    /// `STUB_*` variables it obeys.
    pub stub_agent: String,
}

impl TestImages {
    /// Builds the three images and pushes them to the plain-HTTP registry at `registry`
    /// (`host:port`).
    pub(crate) async fn push(registry: &str, pause_binary: &Path) -> Result<TestImages> {
        let busybox_path = std::env::var_os(BUSYBOX_ENV)
            .filter(|value| !value.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_BUSYBOX), PathBuf::from);
        let busybox = busybox_layer(&busybox_path)?;
        let pause = Layer::build(vec![Entry::file("pause", read(pause_binary)?, 0o755)])?;
        let stub = Layer::build(vec![
            Entry::dir("usr"),
            Entry::dir("usr/local"),
            Entry::dir("usr/local/bin"),
            Entry::file(
                "usr/local/bin/stub-agent",
                STUB_AGENT_SCRIPT.as_bytes().to_vec(),
                0o755,
            ),
        ])?;

        let client = registry_client();
        let reference = |repository: &str| format!("{registry}/{repository}");
        let pause = push_image(
            &client,
            reference(PAUSE_REPOSITORY),
            &[&pause],
            json!({ "Entrypoint": ["/pause"] }),
        )
        .await?;
        let busybox_image = push_image(
            &client,
            reference(BUSYBOX_REPOSITORY),
            &[&busybox],
            json!({ "Env": [PATH_ENV], "Cmd": ["sh"] }),
        )
        .await?;
        let stub_agent = push_image(
            &client,
            reference(STUB_AGENT_REPOSITORY),
            &[&busybox, &stub],
            json!({
                "Env": [PATH_ENV],
                "Entrypoint": ["/usr/local/bin/stub-agent"],
                // Runs under the restricted Pod Security Standard: a numeric non-root user.
                "User": NON_ROOT_USER,
            }),
        )
        .await?;
        Ok(TestImages {
            pause,
            busybox: busybox_image,
            stub_agent,
        })
    }
}

/// A client of the plain-HTTP test registry.
fn registry_client() -> Client {
    // oci-client builds its HTTP client with rustls, which needs a process-wide provider
    // even for plain HTTP; one may already be installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

/// Builds an image of the operator from `binary` (a build of `agentic-operator` for this
/// machine) and pushes it to the plain-HTTP registry at `registry` (`host:port`); returns
/// the reference pinned by digest. The binary goes in stripped of its debug information,
/// with the shared libraries `ldd` finds for it at the paths the dynamic loader looks in
/// and the host's CA bundle: no base image is needed, and none is fetched.
pub async fn push_operator_image(registry: &str, binary: &Path) -> Result<String> {
    let files = vec![
        (OPERATOR_PATH.to_owned(), stripped(binary)?, 0o755),
        // Like the shipped image's base (distroless), which has the CA bundle: the HTTP
        // client of git fetches will not start without trust roots, even for http://.
        (
            CA_BUNDLE.trim_start_matches('/').to_owned(),
            read(Path::new(CA_BUNDLE))?,
            0o644,
        ),
    ];
    let layer = root_layer(files, &[binary], &["tmp"])?;
    push_image(
        &registry_client(),
        format!("{registry}/{OPERATOR_REPOSITORY}"),
        &[&layer],
        json!({
            "Env": [PATH_ENV],
            "Entrypoint": [format!("/{OPERATOR_PATH}")],
            "User": NON_ROOT_USER,
        }),
    )
    .await
}

/// `binary` stripped of its debug information, as an image carries it.
fn stripped(binary: &Path) -> Result<Vec<u8>> {
    let scratch = tempfile::Builder::new()
        .prefix("agentic-image-strip-")
        .tempdir()
        .map_err(Error::io("creating a directory in", std::env::temp_dir()))?;
    let output = scratch.path().join("stripped");
    run_tool(
        Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&output)
            .arg(binary),
    )?;
    read(&output)
}

/// A layer of a base-less image: `files` (path without the leading `/`, contents, mode),
/// the shared libraries every one of `binaries` needs at the paths the dynamic loader looks
/// in, and the directories that hold them plus `dirs`.
fn root_layer(
    mut files: Vec<(String, Vec<u8>, u32)>,
    binaries: &[&Path],
    dirs: &[&str],
) -> Result<Layer> {
    let mut libraries = Vec::new();
    for binary in binaries {
        libraries.extend(shared_libraries(binary)?);
    }
    libraries.sort();
    libraries.dedup();
    for library in libraries {
        let contents = read(Path::new(&library))?;
        files.push((library.trim_start_matches('/').to_owned(), contents, 0o755));
    }
    let mut all_dirs: std::collections::BTreeSet<String> =
        dirs.iter().map(|dir| (*dir).to_owned()).collect();
    for (path, _, _) in &files {
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|dir| !dir.as_os_str().is_empty()) {
            all_dirs.insert(dir.to_string_lossy().into_owned());
            parent = dir.parent();
        }
    }
    let mut entries: Vec<Entry> = all_dirs.iter().map(|dir| Entry::dir(dir)).collect();
    entries.extend(
        files
            .into_iter()
            .map(|(path, contents, mode)| Entry::file(&path, contents, mode)),
    );
    Layer::build(entries)
}

/// The absolute paths of the shared libraries and the dynamic loader `binary` needs, as
/// `ldd` prints them (`libc.so.6 => /lib/…/libc.so.6 (0x…)`, `/lib64/ld-linux-….so.2 (0x…)`).
fn shared_libraries(binary: &Path) -> Result<Vec<String>> {
    Ok(ldd_paths(&run_tool(Command::new("ldd").arg(binary))?))
}

/// The absolute paths in `ldd`'s listing; the vDSO, which has none, is left out.
fn ldd_paths(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let path = line.split_once("=>").map_or(line, |(_, path)| path);
            path.split_whitespace()
                .next()
                .filter(|path| path.starts_with('/'))
                .map(str::to_owned)
        })
        .collect()
}

/// Runs a tool to completion and returns its standard output; a failure names the tool and
/// carries its standard error.
fn run_tool(command: &mut Command) -> Result<String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(Error::io("running", &program))?;
    if !output.status.success() {
        return Err(Error::UnexpectedResponse(format!(
            "{program} exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `/bin/busybox` and one symlink to it per applet, at the paths busybox itself lists.
fn busybox_layer(busybox: &Path) -> Result<Layer> {
    let binary = read(busybox)?;
    let output = Command::new(busybox)
        .arg("--list-full")
        .output()
        .map_err(Error::io("running", busybox))?;
    if !output.status.success() {
        return Err(Error::UnexpectedResponse(format!(
            "{} --list-full exited with {}",
            busybox.display(),
            output.status
        )));
    }
    let applets = String::from_utf8_lossy(&output.stdout);
    let mut entries = vec![Entry::dir("bin"), Entry::file("bin/busybox", binary, 0o755)];
    for dir in ["sbin", "usr", "usr/bin", "usr/sbin", "tmp"] {
        entries.push(Entry::dir(dir));
    }
    for applet in applets.lines().map(str::trim) {
        if !applet.is_empty() && applet != "bin/busybox" {
            entries.push(Entry::symlink(applet, "/bin/busybox"));
        }
    }
    Layer::build(entries)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(Error::io("reading", path))
}

enum EntryKind {
    Dir,
    File { contents: Vec<u8>, mode: u32 },
    Symlink { target: String },
}

struct Entry {
    path: String,
    kind: EntryKind,
}

impl Entry {
    fn dir(path: &str) -> Entry {
        Entry {
            path: path.to_owned(),
            kind: EntryKind::Dir,
        }
    }

    fn file(path: &str, contents: Vec<u8>, mode: u32) -> Entry {
        Entry {
            path: path.to_owned(),
            kind: EntryKind::File { contents, mode },
        }
    }

    fn symlink(path: &str, target: &str) -> Entry {
        Entry {
            path: path.to_owned(),
            kind: EntryKind::Symlink {
                target: target.to_owned(),
            },
        }
    }
}

/// One gzip tar layer with the digests an image needs.
struct Layer {
    blob: Vec<u8>,
    digest: String,
    diff_id: String,
}

impl Layer {
    fn build(mut entries: Vec<Entry>) -> Result<Layer> {
        let failed =
            |error: std::io::Error| Error::UnexpectedResponse(format!("writing a layer: {error}"));
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let mut tar = tar::Builder::new(Vec::new());
        for entry in &entries {
            let mut header = tar::Header::new_ustar();
            header.set_mtime(0);
            header.set_uid(0);
            header.set_gid(0);
            match &entry.kind {
                EntryKind::Dir => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(0o755);
                    header.set_size(0);
                    tar.append_data(&mut header, format!("{}/", entry.path), std::io::empty())
                        .map_err(failed)?;
                }
                EntryKind::File { contents, mode } => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(*mode);
                    header.set_size(contents.len() as u64);
                    tar.append_data(&mut header, &entry.path, contents.as_slice())
                        .map_err(failed)?;
                }
                EntryKind::Symlink { target } => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    tar.append_link(&mut header, &entry.path, target)
                        .map_err(failed)?;
                }
            }
        }
        let tar = tar.into_inner().map_err(failed)?;
        let mut gzip = GzBuilder::new().write(Vec::new(), Compression::fast());
        gzip.write_all(&tar).map_err(failed)?;
        let blob = gzip.finish().map_err(failed)?;
        Ok(Layer {
            digest: sha256_digest(&blob),
            diff_id: sha256_digest(&tar),
            blob,
        })
    }
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The architecture an image config names for this machine, in OCI's (Go's) spelling.
fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

async fn push_image(
    client: &Client,
    reference: String,
    layers: &[&Layer],
    runtime_config: serde_json::Value,
) -> Result<String> {
    let failed = |error: oci_client::errors::OciDistributionError| {
        Error::UnexpectedResponse(format!("pushing {reference}: {error}"))
    };
    let parsed: Reference = reference
        .parse()
        .map_err(|error| Error::UnexpectedResponse(format!("parsing {reference}: {error}")))?;
    client
        .store_auth_if_needed(parsed.resolve_registry(), &RegistryAuth::Anonymous)
        .await;
    let config = serde_json::to_vec(&json!({
        "architecture": oci_architecture(),
        "os": "linux",
        "config": runtime_config,
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|layer| layer.diff_id.as_str()).collect::<Vec<_>>(),
        },
    }))
    .map_err(|error| Error::UnexpectedResponse(format!("encoding an image config: {error}")))?;
    let config_digest = sha256_digest(&config);
    for layer in layers {
        client
            .push_blob(&parsed, layer.blob.clone(), &layer.digest)
            .await
            .map_err(failed)?;
    }
    let config_size = config.len();
    client
        .push_blob(&parsed, config, &config_digest)
        .await
        .map_err(failed)?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": { "mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config_size },
        "layers": layers.iter().map(|layer| json!({
            "mediaType": LAYER_MEDIA_TYPE,
            "digest": layer.digest,
            "size": layer.blob.len(),
        })).collect::<Vec<_>>(),
    }))
    .map_err(|error| Error::UnexpectedResponse(format!("encoding a manifest: {error}")))?;
    let manifest_digest = sha256_digest(&manifest);
    client
        .push_manifest_raw(
            &parsed,
            manifest,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(failed)?;
    Ok(format!("{reference}@{manifest_digest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_paths_are_the_libraries_and_the_loader() {
        let listing = "\tlinux-vdso.so.1 (0x00007ffd)\n\
             \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007fc3)\n\
             \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fc4)\n\
             \t/lib64/ld-linux-x86-64.so.2 (0x00007fc5)\n";
        assert_eq!(
            ldd_paths(listing),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
            ]
        );
    }

    #[test]
    fn layers_are_reproducible_and_sorted() {
        let build = || {
            Layer::build(vec![
                Entry::file("b", b"two".to_vec(), 0o644),
                Entry::dir("a"),
                Entry::symlink("a/link", "/b"),
            ])
            .expect("a layer builds")
        };
        let (first, second) = (build(), build());
        assert_eq!(first.digest, second.digest);
        assert_eq!(first.diff_id, second.diff_id);

        let tar = flate2::read::GzDecoder::new(first.blob.as_slice());
        let mut archive = tar::Archive::new(tar);
        let paths: Vec<String> = archive
            .entries()
            .expect("the layer is a tar")
            .map(|entry| {
                let entry = entry.expect("entries read");
                assert_eq!(entry.header().mtime().expect("mtime"), 0);
                entry.path().expect("a path").display().to_string()
            })
            .collect();
        assert_eq!(paths, ["a/", "a/link", "b"]);
    }
}
