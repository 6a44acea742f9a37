use std::io::Read as _;
use std::path::Path;

use flate2::read::GzDecoder;
use serde_json::Value;

use super::*;
use crate::layers::{LayerBlob, SkillLocator};

fn write_skill(root: &Path, dir_name: &str, name: &str) -> PathBuf {
    let dir = root.join(dir_name);
    fs::create_dir_all(dir.join("references")).unwrap();
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill, for tests.\n---\n# {name}\nSee references/guide.md.\n"),
    )
    .unwrap();
    fs::write(dir.join("references/guide.md"), "# Guide\n").unwrap();
    fs::write(dir.join("scripts/run.sh"), "#!/bin/sh\necho run\n").unwrap();
    fs::set_permissions(
        dir.join("scripts/run.sh"),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    dir
}

#[derive(Debug, PartialEq, Eq)]
struct LayerEntry {
    path: String,
    kind: tar::EntryType,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    content: Vec<u8>,
}

fn layer_entries(image: &PackedImage) -> Vec<LayerEntry> {
    let mut tar_bytes = Vec::new();
    GzDecoder::new(image.layer.as_slice())
        .read_to_end(&mut tar_bytes)
        .unwrap();
    assert_eq!(
        sha256_digest(&tar_bytes),
        image.diff_id,
        "diff_id is the digest of the uncompressed tar"
    );
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let header = entry.header();
            let mut layer_entry = LayerEntry {
                path: entry.path().unwrap().to_string_lossy().into_owned(),
                kind: header.entry_type(),
                mode: header.mode().unwrap(),
                uid: header.uid().unwrap(),
                gid: header.gid().unwrap(),
                mtime: header.mtime().unwrap(),
                content: Vec::new(),
            };
            entry.read_to_end(&mut layer_entry.content).unwrap();
            layer_entry
        })
        .collect()
}

fn locate(image: &PackedImage, sub_path: Option<&str>) -> Result<crate::layers::Located, OciError> {
    let mut locator = SkillLocator::new(sub_path, Limits::default());
    let blob = LayerBlob {
        name: "packed".into(),
        digest: image.layer_digest.clone(),
        size: image.layer.len() as u64,
    };
    locator.apply_layer(image.layer.as_slice(), &blob)?;
    locator.finish()
}

#[test]
fn same_content_gives_the_same_digest_whatever_the_file_metadata() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let a = write_skill(first.path(), "demo", "demo");
    let b = write_skill(second.path(), "demo", "demo");
    // Different times, owners' permission bits and creation order on disk.
    fs::set_permissions(
        b.join("references/guide.md"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    fs::set_permissions(b.join("scripts/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(b.join("references"), fs::Permissions::from_mode(0o700)).unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(b.join("SKILL.md"))
        .unwrap()
        .set_modified(old)
        .unwrap();

    let packed_a = pack_skills(std::slice::from_ref(&a)).unwrap();
    assert_eq!(
        packed_a,
        pack_skills(std::slice::from_ref(&a)).unwrap(),
        "packing twice"
    );
    let packed_b = pack_skills(std::slice::from_ref(&b)).unwrap();
    assert_eq!(packed_a.manifest_digest, packed_b.manifest_digest);
    assert_eq!(packed_a.layer, packed_b.layer);

    // Content and the executable bit do count.
    fs::write(b.join("references/guide.md"), "# Guide, edited\n").unwrap();
    assert_ne!(
        pack_skills(std::slice::from_ref(&b))
            .unwrap()
            .manifest_digest,
        packed_a.manifest_digest
    );
    fs::write(b.join("references/guide.md"), "# Guide\n").unwrap();
    fs::set_permissions(b.join("scripts/run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
    assert_ne!(
        pack_skills(&[b]).unwrap().manifest_digest,
        packed_a.manifest_digest
    );
}

#[test]
fn one_skill_sits_at_the_root_owned_by_root_with_fixed_modes() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_skill(root.path(), "demo", "demo");
    let image = pack_skills(&[dir]).unwrap();
    let entries = layer_entries(&image);
    let summary: Vec<(&str, tar::EntryType, u32)> = entries
        .iter()
        .map(|entry| (entry.path.trim_end_matches('/'), entry.kind, entry.mode))
        .collect();
    assert_eq!(
        summary,
        [
            ("SKILL.md", tar::EntryType::Regular, 0o644),
            ("references", tar::EntryType::Directory, 0o755),
            ("references/guide.md", tar::EntryType::Regular, 0o644),
            ("scripts", tar::EntryType::Directory, 0o755),
            ("scripts/run.sh", tar::EntryType::Regular, 0o755),
        ]
    );
    for entry in &entries {
        assert_eq!(
            (entry.uid, entry.gid, entry.mtime),
            (0, 0, 0),
            "{}",
            entry.path
        );
    }
    assert_eq!(entries[2].content, b"# Guide\n");
    assert_eq!(image.skills, ["demo"]);

    let located = locate(&image, None).unwrap();
    assert!(located.skill_md.starts_with(b"---\nname: demo\n"));
}

#[test]
fn the_gzip_header_carries_no_name_or_time() {
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[write_skill(root.path(), "demo", "demo")]).unwrap();
    let decoder = GzDecoder::new(image.layer.as_slice());
    let header = decoder.header().unwrap();
    assert_eq!(header.mtime(), 0);
    assert_eq!(header.filename(), None);
    assert_eq!(header.operating_system(), 255);
}

#[test]
fn config_and_manifest_describe_a_mountable_image() {
    let root = tempfile::tempdir().unwrap();
    let image = pack_skills(&[write_skill(root.path(), "demo", "demo")]).unwrap();
    let config: Value = serde_json::from_slice(&image.config).unwrap();
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(config["rootfs"]["diff_ids"][0], image.diff_id.as_str());
    assert_eq!(config["config"]["Labels"][SKILLS_ANNOTATION], "demo");
    assert!(config.get("created").is_none(), "no timestamps");

    let manifest: Value = serde_json::from_slice(&image.manifest).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
    assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
    assert_eq!(manifest["config"]["digest"], image.config_digest.as_str());
    assert_eq!(manifest["config"]["size"], image.config.len());
    assert_eq!(manifest["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
    assert_eq!(manifest["layers"][0]["digest"], image.layer_digest.as_str());
    assert_eq!(manifest["layers"][0]["size"], image.layer.len());
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.title"],
        "demo"
    );
    assert_eq!(image.manifest_digest, sha256_digest(&image.manifest));
    assert_eq!(image.config_digest, sha256_digest(&image.config));
    assert_eq!(image.layer_digest, sha256_digest(&image.layer));
}

#[test]
fn several_skills_get_a_directory_each() {
    let root = tempfile::tempdir().unwrap();
    let beta = write_skill(root.path(), "beta", "beta");
    let alpha = write_skill(root.path(), "alpha", "alpha");
    let image = pack_skills(&[beta, alpha]).unwrap();
    assert_eq!(image.skills, ["beta", "alpha"]);
    let paths: Vec<String> = layer_entries(&image)
        .into_iter()
        .map(|entry| entry.path.trim_end_matches('/').to_string())
        .collect();
    assert!(
        paths.starts_with(&["beta".to_string(), "beta/SKILL.md".to_string()]),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"alpha/references/guide.md".to_string()),
        "{paths:?}"
    );
    assert!(!paths.contains(&"SKILL.md".to_string()));

    let error = locate(&image, None).unwrap_err();
    assert_eq!(
        error,
        OciError::SubPathRequired {
            directories: vec!["alpha".into(), "beta".into()],
            total: 2,
        }
    );
    let alpha = locate(&image, Some("alpha")).unwrap();
    assert!(alpha.skill_md.starts_with(b"---\nname: alpha\n"));
}

#[test]
fn invalid_skills_are_refused_with_every_problem() {
    let root = tempfile::tempdir().unwrap();
    let good = write_skill(root.path(), "good", "good");
    let misnamed = write_skill(root.path(), "misnamed", "other-name");
    let broken = root.path().join("broken");
    fs::create_dir(&broken).unwrap();
    fs::write(
        broken.join("SKILL.md"),
        "---\nname: broken\n---\nno description\n",
    )
    .unwrap();
    let error = pack_skills(&[good, misnamed, broken]).unwrap_err();
    assert_eq!(error.reason(), "InvalidSkill");
    let text = error.to_string();
    assert!(
        text.contains("misnamed") && text.contains("broken"),
        "{text}"
    );
    assert!(text.contains("other-name"), "{text}");
    assert!(text.contains("description"), "{text}");
}

#[test]
fn duplicate_names_symlinks_and_special_files_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let one = write_skill(root.path(), "one/demo", "demo");
    let two = write_skill(root.path(), "two/demo", "demo");
    let error = pack_skills(&[one.clone(), two]).unwrap_err();
    assert_eq!(error.reason(), "InvalidSkillSource");
    assert!(error.to_string().contains("\"demo\""), "{error}");

    // Validation refuses links and nested SKILL.md files before packing starts.
    std::os::unix::fs::symlink("/etc/passwd", one.join("references/passwd")).unwrap();
    let error = pack_skills(std::slice::from_ref(&one)).unwrap_err();
    assert_eq!(error.reason(), "InvalidSkill");
    assert!(
        error
            .to_string()
            .contains("'references/passwd' is a symlink"),
        "{error}"
    );
    fs::remove_file(one.join("references/passwd")).unwrap();
    fs::create_dir_all(one.join("references/inner")).unwrap();
    fs::write(
        one.join("references/inner/SKILL.md"),
        "---\nname: inner\n---\n",
    )
    .unwrap();
    let error = pack_skills(std::slice::from_ref(&one)).unwrap_err();
    assert_eq!(error.reason(), "InvalidSkill");
    assert!(
        error.to_string().contains("below the skill's root"),
        "{error}"
    );
    fs::remove_dir_all(one.join("references/inner")).unwrap();

    let _socket = std::os::unix::net::UnixListener::bind(one.join("scripts/agent.sock")).unwrap();
    let error = pack_skills(&[one]).unwrap_err();
    assert_eq!(error.reason(), "InvalidSkillSource");
    assert!(error.to_string().contains("agent.sock"), "{error}");

    let file = root.path().join("file");
    fs::write(&file, "x").unwrap();
    assert_eq!(
        pack_skills(&[file]).unwrap_err().reason(),
        "InvalidSkillSource"
    );
    assert_eq!(pack_skills(&[]).unwrap_err().reason(), "InvalidSkillSource");
}

/// The Konveyor skills reference `modules/` and `references/` files; a packed image must keep
/// them next to SKILL.md. Uses the shared corpus when present, a look-alike otherwise.
#[test]
fn supporting_folders_stay_next_to_skill_md() {
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/skills-corpus/konveyor");
    let fixture = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> =
        if corpus.join("javaee-to-quarkus/modules").is_dir() && corpus.join("plan").is_dir() {
            vec![corpus.join("javaee-to-quarkus"), corpus.join("plan")]
        } else {
            let quarkus = write_skill(fixture.path(), "javaee-to-quarkus", "javaee-to-quarkus");
            fs::create_dir(quarkus.join("modules")).unwrap();
            fs::write(quarkus.join("modules/lifecycle.md"), "# Lifecycle\n").unwrap();
            vec![quarkus, write_skill(fixture.path(), "plan", "plan")]
        };
    let image = pack_skills(&dirs).unwrap();
    let packed: Vec<String> = layer_entries(&image)
        .into_iter()
        .filter(|entry| entry.kind == tar::EntryType::Regular)
        .map(|entry| entry.path)
        .collect();
    for (dir, name) in dirs.iter().zip(["javaee-to-quarkus", "plan"]) {
        for folder in ["modules", "references"] {
            let Ok(files) = fs::read_dir(dir.join(folder)) else {
                continue;
            };
            for file in files {
                let file_name = file.unwrap().file_name().into_string().unwrap();
                let expected = format!("{name}/{folder}/{file_name}");
                assert!(
                    packed.contains(&expected),
                    "{expected} missing from {packed:?}"
                );
            }
        }
        let located = locate(&image, Some(name)).unwrap();
        assert_eq!(located.skill_md, fs::read(dir.join("SKILL.md")).unwrap());
    }
    assert!(
        packed
            .iter()
            .any(|path| path.starts_with("javaee-to-quarkus/modules/"))
    );
    assert!(
        packed
            .iter()
            .any(|path| path.starts_with("plan/references/"))
    );
}
