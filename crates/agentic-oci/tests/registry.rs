//! Round trips through a real registry (CNCF distribution, started by agentic-testenv).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentic_oci::{
    DockerConfig, OciError, PackedImage, RegistryAuth, RegistryClient, RegistryOptions,
    ResolvedImage, SkillCache, fetch_skill, pack_skills, push_image, resolve_digest,
};
use agentic_testenv::Registry;
use flate2::read::GzDecoder;
use oci_client::client::{ClientConfig, ClientProtocol};
use support::{one_layer_image, sha256};

const ANONYMOUS: RegistryAuth = RegistryAuth::Anonymous;

fn options(registry_addr: &str) -> RegistryOptions {
    RegistryOptions {
        insecure_registries: vec![registry_addr.to_string()],
        ..RegistryOptions::default()
    }
}

/// A registry of the test's own (it stops when dropped), its address, and options that reach
/// it over plain HTTP.
async fn insecure_registry() -> (Registry, String, RegistryOptions) {
    let registry = Registry::start().await.unwrap();
    let addr = registry.addr();
    let opts = options(&addr);
    (registry, addr, opts)
}

fn write_skill(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: The {name} skill, for registry tests.\n---\n# {name}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("references/notes.md"),
        format!("notes of {name}\n"),
    )
    .unwrap();
    dir
}

/// An image whose single layer is `tar`, packed without any validation.
fn hand_made_image(tar: &[u8]) -> PackedImage {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(tar).unwrap();
    let layer = encoder.finish().unwrap();
    one_layer_image(layer, sha256(tar))
}

fn tar_with(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, kind, content, link) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        header.set_size(content.len() as u64);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
        }
        builder.append_data(&mut header, path, *content).unwrap();
    }
    builder.into_inner().unwrap()
}

/// A registry client of oci-client's own, speaking plain HTTP to `registry_addr`.
fn plain_client(registry_addr: &str) -> oci_client::Client {
    oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![registry_addr.to_string()]),
        ..ClientConfig::default()
    })
}

/// `127.0.0.1:<port>` where nobody listens: the port was free a moment ago and the listener
/// that held it is gone.
fn closed_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

/// Reads a manifest and a blob back with a plain registry client.
async fn pull_raw(registry_addr: &str, reference: &str, blob_digest: &str) -> (Vec<u8>, Vec<u8>) {
    let client = plain_client(registry_addr);
    let reference: oci_client::Reference = reference.parse().unwrap();
    let anonymous = oci_client::secrets::RegistryAuth::Anonymous;
    let (manifest, _) = client
        .pull_manifest_raw(&reference, &anonymous, &[agentic_oci::MANIFEST_MEDIA_TYPE])
        .await
        .unwrap();
    let mut blob = Vec::new();
    client
        .pull_blob(&reference, blob_digest, &mut blob)
        .await
        .unwrap();
    (manifest.to_vec(), blob)
}

fn layer_paths(layer: &[u8]) -> Vec<String> {
    let mut tar = Vec::new();
    GzDecoder::new(layer).read_to_end(&mut tar).unwrap();
    tar::Archive::new(tar.as_slice())
        .entries()
        .unwrap()
        .map(|entry| {
            entry
                .unwrap()
                .path()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[tokio::test]
async fn one_skill_round_trips_with_a_stable_digest() {
    let (_registry, addr, opts) = insecure_registry().await;
    let root = tempfile::tempdir().unwrap();
    let dir = write_skill(root.path(), "demo");

    let image = pack_skills(std::slice::from_ref(&dir)).unwrap();
    let pushed = push_image(&image, &format!("{addr}/skills/demo:v1"), &ANONYMOUS, &opts)
        .await
        .unwrap();
    assert_eq!(
        pushed,
        format!("{addr}/skills/demo:v1@{}", image.manifest_digest)
    );

    // Packing and pushing the same directory again lands on the same digest.
    let again = pack_skills(&[dir]).unwrap();
    let pushed_again = push_image(&again, &format!("{addr}/skills/demo:v2"), &ANONYMOUS, &opts)
        .await
        .unwrap();
    assert_eq!(
        pushed_again,
        format!("{addr}/skills/demo:v2@{}", image.manifest_digest)
    );

    let (manifest, layer) = pull_raw(
        &addr,
        &format!("{addr}/skills/demo:v1"),
        &image.layer_digest,
    )
    .await;
    assert_eq!(
        manifest, image.manifest,
        "the registry serves the exact manifest bytes"
    );
    assert_eq!(layer, image.layer);
    assert!(layer_paths(&layer).contains(&"SKILL.md".to_string()));

    let by_tag = resolve_digest(&format!("{addr}/skills/demo:v1"), &ANONYMOUS, &opts)
        .await
        .unwrap();
    assert_eq!(by_tag.digest, image.manifest_digest);
    assert_eq!(
        by_tag.repository_with_digest,
        format!("{addr}/skills/demo@{}", image.manifest_digest)
    );
    let by_digest = resolve_digest(&by_tag.repository_with_digest, &ANONYMOUS, &opts)
        .await
        .unwrap();
    assert_eq!(by_digest, by_tag);
    assert_eq!(ResolvedImage::from_pinned(&pushed).unwrap(), by_tag);

    let skill = fetch_skill(&by_tag, None, &ANONYMOUS, &opts).await.unwrap();
    assert_eq!(skill.path, "SKILL.md");
    assert!(skill.report.is_valid());
    assert_eq!(skill.report.frontmatter.as_ref().unwrap().name, "demo");
    assert_eq!(
        skill.skill_md,
        std::fs::read(root.path().join("demo/SKILL.md")).unwrap()
    );
}

/// Uses the Konveyor skills of the shared corpus when present (their `modules/` and
/// `references/` must stay reachable), look-alikes otherwise.
#[tokio::test]
async fn multi_skill_images_are_read_by_sub_path() {
    let (_registry, addr, opts) = insecure_registry().await;
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/skills-corpus/konveyor");
    let fixture = tempfile::tempdir().unwrap();
    let (dirs, names) = if corpus.join("javaee-to-quarkus/modules").is_dir()
        && corpus.join("plan/references").is_dir()
    {
        (
            vec![corpus.join("javaee-to-quarkus"), corpus.join("plan")],
            ["javaee-to-quarkus", "plan"],
        )
    } else {
        let dirs = vec![
            write_skill(fixture.path(), "alpha"),
            write_skill(fixture.path(), "beta"),
        ];
        (dirs, ["alpha", "beta"])
    };
    let image = pack_skills(&dirs).unwrap();
    let pushed = push_image(
        &image,
        &format!("{addr}/skills/bundle:1"),
        &ANONYMOUS,
        &opts,
    )
    .await
    .unwrap();
    let resolved = resolve_digest(&pushed, &ANONYMOUS, &opts).await.unwrap();

    let (_, layer) = pull_raw(&addr, &pushed, &image.layer_digest).await;
    let paths = layer_paths(&layer);
    for (dir, name) in dirs.iter().zip(names) {
        for folder in ["modules", "references"] {
            for file in std::fs::read_dir(dir.join(folder)).into_iter().flatten() {
                let expected = format!(
                    "{name}/{folder}/{}",
                    file.unwrap().file_name().to_string_lossy()
                );
                assert!(
                    paths.contains(&expected),
                    "{expected} missing from {paths:?}"
                );
            }
        }
        let skill = fetch_skill(&resolved, Some(name), &ANONYMOUS, &opts)
            .await
            .unwrap();
        assert_eq!(skill.path, format!("{name}/SKILL.md"));
        assert_eq!(skill.skill_md, std::fs::read(dir.join("SKILL.md")).unwrap());
        assert_eq!(skill.skill_dirs, names);
    }

    let error = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        OciError::SubPathRequired {
            directories: names.iter().map(std::string::ToString::to_string).collect(),
            total: names.len(),
        }
    );
    let error = fetch_skill(&resolved, Some("missing"), &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "SkillNotFound", "{error}");
}

#[tokio::test]
async fn bad_content_is_reported_by_reason() {
    let (_registry, addr, opts) = insecure_registry().await;

    let invalid = hand_made_image(&tar_with(&[(
        "SKILL.md",
        tar::EntryType::Regular,
        b"---\nname: Not_A_Name\n---\nbody\n",
        None,
    )]));
    let pushed = push_image(
        &invalid,
        &format!("{addr}/bad/invalid:1"),
        &ANONYMOUS,
        &opts,
    )
    .await
    .unwrap();
    let resolved = ResolvedImage::from_pinned(&pushed).unwrap();
    let error = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "InvalidSkill", "{error}");
    let text = error.to_string();
    assert!(
        text.contains("name") && text.contains("description"),
        "every problem is listed: {text}"
    );

    let linked = hand_made_image(&tar_with(&[
        (
            "real.md",
            tar::EntryType::Regular,
            b"---\nname: x\ndescription: y\n---\n",
            None,
        ),
        ("SKILL.md", tar::EntryType::Symlink, b"", Some("real.md")),
    ]));
    let pushed = push_image(&linked, &format!("{addr}/bad/linked:1"), &ANONYMOUS, &opts)
        .await
        .unwrap();
    let resolved = ResolvedImage::from_pinned(&pushed).unwrap();
    let error = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "UnsafeImageContent", "{error}");

    let small = RegistryOptions {
        limits: agentic_oci::Limits {
            max_layer_bytes: 16,
            ..agentic_oci::Limits::default()
        },
        ..opts.clone()
    };
    let error = fetch_skill(&resolved, None, &ANONYMOUS, &small)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "ImageTooLarge", "{error}");
}

/// A skill of `name` with a valid frontmatter, as tar content.
fn skill_md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n").into_bytes()
}

#[tokio::test]
async fn what_would_change_the_agents_skill_set_keeps_a_skill_from_being_read() {
    let (_registry, addr, opts) = insecure_registry().await;
    let client = RegistryClient::new(opts.clone()).unwrap();
    let (demo, other, root) = (skill_md("demo"), skill_md("other"), skill_md("root"));
    let push = async |tar: Vec<u8>, tag: &str| {
        let pushed = push_image(
            &hand_made_image(&tar),
            &format!("{addr}/skill-set/{tag}:1"),
            &ANONYMOUS,
            &opts,
        )
        .await
        .unwrap();
        ResolvedImage::from_pinned(&pushed).unwrap()
    };

    // A whole image whose skill carries another SKILL.md deeper down.
    let nested = push(
        tar_with(&[
            ("SKILL.md", tar::EntryType::Regular, &root, None),
            (
                "references/old/SKILL.md",
                tar::EntryType::Regular,
                &demo,
                None,
            ),
        ]),
        "nested",
    )
    .await;
    let error = client
        .fetch_skill(&nested, None, &ANONYMOUS)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        OciError::NestedSkillFile {
            path: "references/old/SKILL.md".into(),
            root: "the image root".into(),
        }
    );
    // A collection of it reads its root skill, so it is refused the same way.
    let listing = client.list_skills(&nested, &ANONYMOUS).await.unwrap();
    assert!(listing.root);

    // A multi-skill image: one skill links out of itself, the other is clean.
    let linked = push(
        tar_with(&[
            ("demo/SKILL.md", tar::EntryType::Regular, &demo, None),
            (
                "demo/scripts/tool",
                tar::EntryType::Symlink,
                b"",
                Some("/usr/bin/env"),
            ),
            ("other/SKILL.md", tar::EntryType::Regular, &other, None),
            (
                "other/copy.md",
                tar::EntryType::Link,
                b"",
                Some("demo/SKILL.md"),
            ),
        ]),
        "linked",
    )
    .await;
    let listing = client.list_skills(&linked, &ANONYMOUS).await.unwrap();
    assert_eq!(listing.directories, ["demo", "other"]);
    let mut verdicts = Vec::new();
    for directory in &listing.directories {
        verdicts.push(
            client
                .fetch_skill(&linked, Some(directory), &ANONYMOUS)
                .await
                .map(|skill| skill.path)
                .map_err(|error| (error.reason(), error.to_string())),
        );
    }
    let [
        Err((demo_reason, demo_message)),
        Err((other_reason, other_message)),
    ] = &verdicts[..]
    else {
        panic!("both skills hold a link: {verdicts:?}");
    };
    assert_eq!(
        (*demo_reason, *other_reason),
        ("LinkInSkill", "LinkInSkill")
    );
    assert!(
        demo_message.starts_with("demo/scripts/tool is a symlink inside the skill (demo)"),
        "{demo_message}"
    );
    assert!(
        other_message.starts_with("other/copy.md is a hardlink inside the skill (other)"),
        "{other_message}"
    );

    // `skill pull` refuses them too.
    let error = client
        .pull_skill(&linked, Some("demo"), &ANONYMOUS)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "LinkInSkill", "{error}");
}

async fn push_index(
    registry_addr: &str,
    reference: &str,
    entries: &[(&str, &str, &str)],
) -> String {
    let manifests: Vec<serde_json::Value> = entries
        .iter()
        .map(|(digest, os, architecture)| {
            serde_json::json!({
                "mediaType": agentic_oci::MANIFEST_MEDIA_TYPE,
                "digest": digest,
                // The registry checks that the manifest exists, not its size.
                "size": 1,
                "platform": {"os": os, "architecture": architecture},
            })
        })
        .collect();
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests,
    }))
    .unwrap();
    let client = plain_client(registry_addr);
    client
        .push_manifest_raw(
            &reference.parse().unwrap(),
            index.clone(),
            http::HeaderValue::from_static("application/vnd.oci.image.index.v1+json"),
        )
        .await
        .unwrap();
    sha256(&index)
}

/// What reading the root skill of an index of `entries`, pushed as `reference`, fails with.
async fn index_skill_error(
    registry_addr: &str,
    reference: &str,
    entries: &[(&str, &str, &str)],
    opts: &RegistryOptions,
) -> OciError {
    push_index(registry_addr, reference, entries).await;
    let resolved = resolve_digest(reference, &ANONYMOUS, opts).await.unwrap();
    fetch_skill(&resolved, None, &ANONYMOUS, opts)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn image_indexes_are_valid_only_when_every_platform_manifest_is() {
    let (_registry, addr, opts) = insecure_registry().await;
    let root = tempfile::tempdir().unwrap();
    let good = pack_skills(&[write_skill(root.path(), "demo")]).unwrap();
    let other = pack_skills(&[write_skill(root.path(), "other")]).unwrap();
    let bad = hand_made_image(&tar_with(&[(
        "README.md",
        tar::EntryType::Regular,
        b"no skill",
        None,
    )]));
    for (image, tag) in [(&good, "good"), (&other, "other"), (&bad, "bad")] {
        push_image(
            image,
            &format!("{addr}/multi/demo:{tag}"),
            &ANONYMOUS,
            &opts,
        )
        .await
        .unwrap();
    }
    let (good, other, bad) = (
        good.manifest_digest.as_str(),
        other.manifest_digest.as_str(),
        bad.manifest_digest.as_str(),
    );

    let reference = format!("{addr}/multi/demo:index");
    let index_digest = push_index(
        &addr,
        &reference,
        &[
            (good, "linux", "amd64"),
            (good, "linux", "arm64"),
            (bad, "unknown", "unknown"),
        ],
    )
    .await;
    let resolved = resolve_digest(&reference, &ANONYMOUS, &opts).await.unwrap();
    assert_eq!(
        resolved.digest, index_digest,
        "pods pin the index; each node picks its platform"
    );
    let skill = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
        .await
        .unwrap();
    assert_eq!(skill.report.frontmatter.unwrap().name, "demo");

    // A node of any listed platform may pull its manifest: one bad platform spoils the image.
    let error = index_skill_error(
        &addr,
        &format!("{addr}/multi/demo:bad-arm64"),
        &[(good, "linux", "amd64"), (bad, "linux", "arm64")],
        &opts,
    )
    .await;
    assert_eq!(error.reason(), "SkillNotFound", "{error}");
    assert!(error.to_string().contains("linux/arm64"), "{error}");

    // Platforms must agree on the skill, or a card's status would be true on some nodes only.
    let error = index_skill_error(
        &addr,
        &format!("{addr}/multi/demo:disagree"),
        &[(good, "linux", "amd64"), (other, "linux", "s390x")],
        &opts,
    )
    .await;
    assert_eq!(error.reason(), "InvalidImage", "{error}");
    assert!(
        error.to_string().contains("linux/s390x") && error.to_string().contains("linux/amd64"),
        "{error}"
    );
}

#[tokio::test]
async fn registry_failures_are_reported_by_reason() {
    let (_registry, addr, opts) = insecure_registry().await;
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[write_skill(root.path(), "demo")]).unwrap();
    let client = RegistryClient::new(opts.clone()).unwrap();
    client
        .push_image(&image, &format!("{addr}/skills/demo:v1"), &ANONYMOUS)
        .await
        .unwrap();
    let stats = client.stats();
    assert!(
        stats.requests >= 3 && stats.failed_requests == 0,
        "blobs and manifest are counted: {stats:?}"
    );

    for missing in [
        format!("{addr}/skills/demo:no-such-tag"),
        format!("{addr}/no/such-repo:v1"),
        format!("{addr}/skills/demo@sha256:{}", "0".repeat(64)),
    ] {
        let error = resolve_digest(&missing, &ANONYMOUS, &opts)
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "ImageNotFound", "{missing}: {error}");
        assert!(!error.is_transient());
    }
    let gone = ResolvedImage::from_pinned(&format!("{addr}/skills/gone@sha256:{}", "1".repeat(64)))
        .unwrap();
    let error = fetch_skill(&gone, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "ImageNotFound", "{error}");

    let error = resolve_digest("Not A Reference!", &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "InvalidReference", "{error}");

    let closed = closed_port();
    let error = resolve_digest(
        &format!("{closed}/skills/demo:v1"),
        &ANONYMOUS,
        &options(&closed),
    )
    .await
    .unwrap_err();
    assert_eq!(error.reason(), "RegistryUnavailable", "{error}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn the_cache_fetches_each_digest_and_sub_path_once() {
    let (_registry, addr, opts) = insecure_registry().await;
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[
        write_skill(root.path(), "alpha"),
        write_skill(root.path(), "beta"),
    ])
    .unwrap();
    let pushed = push_image(
        &image,
        &format!("{addr}/skills/cached:1"),
        &ANONYMOUS,
        &opts,
    )
    .await
    .unwrap();
    let resolved = ResolvedImage::from_pinned(&pushed).unwrap();

    let cache = Arc::new(SkillCache::new(16));
    let client = RegistryClient::new(opts.clone()).unwrap();
    let fetches = (0..8).map(|_| {
        let (cache, resolved, client) = (cache.clone(), resolved.clone(), client.clone());
        tokio::spawn(async move {
            cache
                .fetch_skill(&resolved, Some("alpha"), &ANONYMOUS, &client)
                .await
        })
    });
    let results = futures::future::join_all(fetches).await;
    let first = results[0].as_ref().unwrap().as_ref().unwrap().clone();
    for result in &results {
        assert!(
            Arc::ptr_eq(result.as_ref().unwrap().as_ref().unwrap(), &first),
            "one shared fetch"
        );
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.entries), (1, 7, 1));

    // A content verdict is kept; it comes from the cache the second time.
    for _ in 0..2 {
        let error = cache
            .fetch_skill(&resolved, None, &ANONYMOUS, &client)
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "SubPathRequired");
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.entries), (2, 8, 2));

    // A transient failure is not kept: the next request tries again.
    let closed = closed_port();
    let unreachable =
        ResolvedImage::from_pinned(&format!("{closed}/skills/x@{}", image.manifest_digest))
            .unwrap();
    let to_closed = RegistryClient::new(options(&closed)).unwrap();
    for _ in 0..2 {
        let error = cache
            .fetch_skill(&unreachable, Some("other"), &ANONYMOUS, &to_closed)
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "RegistryUnavailable");
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.entries), (4, 2));
}

const USER: &str = "skill-pusher";
const PASSWORD: &str = "correct horse battery staple";

/// A registry that requires HTTP Basic credentials.
async fn auth_registry() -> Registry {
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    Registry::start_with_htpasswd(&format!("{USER}:{hash}\n"))
        .await
        .unwrap()
}

#[tokio::test]
async fn credentials_come_from_pull_secrets() {
    let registry = auth_registry().await;
    let addr = registry.addr();
    let opts = options(&addr);
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[write_skill(root.path(), "private")]).unwrap();
    let reference = format!("{addr}/team/private:v1");

    let error = push_image(&image, &reference, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");

    let encoded = base64_user_password(USER, PASSWORD);
    let unrelated = DockerConfig::parse(
        br#"{"auths": {"elsewhere.example": {"auth": "eDp5"}}}"#,
        "ns/other",
    )
    .unwrap();
    let wrong = DockerConfig::parse(
        format!(
            r#"{{"auths": {{"http://{addr}": {{"username": "{USER}", "password": "nope"}}}}}}"#
        )
        .as_bytes(),
        "ns/wrong",
    )
    .unwrap();
    let right = DockerConfig::parse(
        format!(r#"{{"auths": {{"{addr}": {{"auth": "{encoded}"}}}}}}"#).as_bytes(),
        "ns/right",
    )
    .unwrap();

    let auth = RegistryAuth::from_docker_configs([&unrelated, &right], &addr);
    let pushed = push_image(&image, &reference, &auth, &opts).await.unwrap();
    assert!(pushed.ends_with(&image.manifest_digest));

    let error = resolve_digest(&reference, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");
    assert!(!error.is_transient());

    // The first secret with an entry for the registry wins, even with wrong credentials.
    let wrong_first = RegistryAuth::from_docker_configs([&wrong, &right], &addr);
    let error = resolve_digest(&reference, &wrong_first, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");
    assert!(!format!("{error} {error:?} {wrong_first:?}").contains("nope"));

    let resolved = resolve_digest(&reference, &auth, &opts).await.unwrap();
    assert_eq!(resolved.digest, image.manifest_digest);
    let error = fetch_skill(&resolved, None, &ANONYMOUS, &opts)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");
    let skill = fetch_skill(&resolved, None, &auth, &opts).await.unwrap();
    assert_eq!(skill.report.frontmatter.unwrap().name, "private");
}

fn base64_user_password(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

#[tokio::test]
async fn one_client_authorizes_each_repository_and_credentials_once() {
    let registry = auth_registry().await;
    let addr = registry.addr();
    let client = RegistryClient::new(options(&addr)).unwrap();
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[write_skill(root.path(), "shared")]).unwrap();
    let reference = format!("{addr}/team/shared:v1");
    let auth = RegistryAuth::Basic {
        username: USER.to_string(),
        password: PASSWORD.to_string(),
    };
    client.push_image(&image, &reference, &auth).await.unwrap();
    let pushed = client.stats();

    let resolved = client.resolve_digest(&reference, &auth).await.unwrap();
    let first = client.stats();
    assert_eq!(
        first.requests - pushed.requests,
        2,
        "the authorization and the HEAD: {first:?}"
    );
    client.resolve_digest(&reference, &auth).await.unwrap();
    let second = client.stats();
    assert_eq!(
        second.requests - first.requests,
        1,
        "the authorization is reused: {second:?}"
    );
    let skill = client.fetch_skill(&resolved, None, &auth).await.unwrap();
    assert_eq!(skill.report.frontmatter.unwrap().name, "shared");

    // What one set of credentials obtained never serves another, through the same client.
    let wrong = RegistryAuth::Basic {
        username: USER.to_string(),
        password: "nope".to_string(),
    };
    for other in [&ANONYMOUS, &wrong] {
        let error = client.resolve_digest(&reference, other).await.unwrap_err();
        assert_eq!(error.reason(), "Unauthorized", "{other:?}: {error}");
        let error = client
            .fetch_skill(&resolved, None, other)
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "Unauthorized", "{other:?}: {error}");
    }
    client.fetch_skill(&resolved, None, &auth).await.unwrap();
}
