//! Layers built here, byte by byte where tools would refuse to write them.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;
use tar::{EntryType, Header};

use super::*;

const SKILL: &[u8] = b"---\nname: demo\ndescription: A demo skill.\n---\n# Demo\n";

/// One tar entry; the path is written verbatim, `..` and leading `/` included.
enum Item<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
    Fifo(&'a str),
    /// A PAX header with these records, for the entry that follows.
    Pax(&'a [(&'a str, &'a str)]),
    /// A global PAX header with this body, written verbatim.
    GlobalPax(&'a [u8]),
}

fn raw_header(path: &str, kind: EntryType, size: u64) -> Header {
    let mut header = Header::new_ustar();
    let name = &mut header.as_old_mut().name;
    assert!(path.len() < name.len(), "test paths fit the header");
    name[..path.len()].copy_from_slice(path.as_bytes());
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o644);
    header
}

fn with_link(mut header: Header, target: &str) -> Header {
    let link = &mut header.as_old_mut().linkname;
    link[..target.len()].copy_from_slice(target.as_bytes());
    header
}

fn tar(items: &[Item<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for item in items {
        let (mut header, data): (Header, Vec<u8>) = match item {
            Item::File(path, content) => (
                raw_header(path, EntryType::Regular, content.len() as u64),
                content.to_vec(),
            ),
            Item::Dir(path) => (raw_header(path, EntryType::Directory, 0), Vec::new()),
            Item::Symlink(path, target) => (
                with_link(raw_header(path, EntryType::Symlink, 0), target),
                Vec::new(),
            ),
            Item::Hardlink(path, target) => (
                with_link(raw_header(path, EntryType::Link, 0), target),
                Vec::new(),
            ),
            Item::Fifo(path) => (raw_header(path, EntryType::Fifo, 0), Vec::new()),
            Item::Pax(records) => {
                let data = pax_records(records);
                (
                    raw_header("PaxHeader", EntryType::XHeader, data.len() as u64),
                    data,
                )
            }
            Item::GlobalPax(data) => (
                raw_header("GlobalHead", EntryType::XGlobalHeader, data.len() as u64),
                data.to_vec(),
            ),
        };
        header.set_cksum();
        builder.append(&header, data.as_slice()).unwrap();
    }
    builder.into_inner().unwrap()
}

/// PAX records, each "<length> <key>=<value>\n" with the length counting itself.
fn pax_records(records: &[(&str, &str)]) -> Vec<u8> {
    let mut data = Vec::new();
    for (key, value) in records {
        let body = format!(" {key}={value}\n");
        let mut length = body.len() + 1;
        while format!("{length}{body}").len() != length {
            length += 1;
        }
        data.extend_from_slice(format!("{length}{body}").as_bytes());
    }
    data
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn blob(bytes: &[u8]) -> LayerBlob {
    let digest = crate::pack::sha256_digest(bytes);
    LayerBlob {
        name: format!("test@{digest}"),
        digest,
        size: bytes.len() as u64,
    }
}

fn locate_with(
    layers: &[Vec<u8>],
    sub_path: Option<&str>,
    limits: Limits,
) -> Result<Located, OciError> {
    let mut locator = SkillLocator::new(sub_path, limits);
    for layer in layers {
        locator.apply_layer(layer.as_slice(), &blob(layer))?;
    }
    locator.finish()
}

fn locate(layers: &[Vec<u8>], sub_path: Option<&str>) -> Result<Located, OciError> {
    locate_with(layers, sub_path, Limits::default())
}

#[track_caller]
fn assert_reason(result: Result<Located, OciError>, reason: &str, mentions: &str) {
    match result {
        Ok(located) => panic!("expected {reason}, found {}", located.path),
        Err(error) => {
            assert_eq!(error.reason(), reason, "{error}");
            assert!(
                error.to_string().contains(mentions),
                "{error:?} should mention {mentions:?}"
            );
        }
    }
}

#[test]
fn finds_skill_md_at_the_root_of_gzip_and_plain_layers() {
    let layer = tar(&[
        Item::Dir("./"),
        Item::File("./SKILL.md", SKILL),
        Item::Dir("./references/"),
        Item::File("./references/guide.md", b"guide"),
    ]);
    for bytes in [gzip(&layer), layer] {
        let located = locate(&[bytes], None).unwrap();
        assert_eq!(located.path, "SKILL.md");
        assert_eq!(located.skill_md, SKILL);
        assert!(located.skill_dirs.is_empty());
    }
}

#[test]
fn multi_skill_images_need_a_sub_path() {
    let layer = gzip(&tar(&[
        Item::Dir("beta/"),
        Item::File("beta/SKILL.md", b"beta"),
        Item::Dir("alpha/"),
        Item::File("alpha/SKILL.md", b"alpha"),
        Item::File("alpha/references/more.md", b"more"),
        Item::File("notes/readme.md", b"not a skill"),
    ]));
    assert_reason(
        locate(std::slice::from_ref(&layer), None),
        "SubPathRequired",
        "alpha, beta",
    );

    let alpha = locate(std::slice::from_ref(&layer), Some("alpha")).unwrap();
    assert_eq!(
        (alpha.path.as_str(), alpha.skill_md.as_slice()),
        ("alpha/SKILL.md", &b"alpha"[..])
    );
    assert_eq!(alpha.skill_dirs, ["alpha", "beta"]);

    assert_reason(
        locate(std::slice::from_ref(&layer), Some("gamma")),
        "SkillNotFound",
        "alpha, beta",
    );
    assert_reason(
        locate(&[layer], Some("notes")),
        "SkillNotFound",
        "notes/SKILL.md",
    );
}

#[test]
fn skill_directory_lists_stay_bounded_in_images_with_many_skills() {
    let paths: Vec<String> = (0..2_000)
        .map(|n| format!("skill-{n:04}/SKILL.md"))
        .collect();
    let items: Vec<Item<'_>> = paths.iter().map(|path| Item::File(path, SKILL)).collect();
    let layer = tar(&items);

    let error = locate(std::slice::from_ref(&layer), None).unwrap_err();
    let OciError::SubPathRequired { directories, total } = &error else {
        panic!("expected SubPathRequired, got {error}");
    };
    assert_eq!((directories.len(), *total), (MAX_LISTED_DIRECTORIES, 2_000));
    assert!(error.to_string().len() < 1024, "{error}");

    let error = locate(std::slice::from_ref(&layer), Some("missing")).unwrap_err();
    assert_eq!(error.reason(), "SkillNotFound", "{error}");
    assert!(
        error.to_string().contains("2000 skill directories"),
        "{error}"
    );
    assert!(error.to_string().len() < 1024, "{error}");

    let found = locate(std::slice::from_ref(&layer), Some("skill-0001")).unwrap();
    assert_eq!(
        (found.skill_dirs.len(), found.skill_dir_count),
        (MAX_LISTED_DIRECTORIES, 2_000)
    );
    assert_eq!(found.skill_dirs[0], "skill-0000");
}

#[test]
fn nested_sub_paths_are_found_with_implicit_parents() {
    let layer = tar(&[Item::File("skills/team/demo/SKILL.md", SKILL)]);
    let located = locate(&[layer], Some("skills/team/demo")).unwrap();
    assert_eq!(located.path, "skills/team/demo/SKILL.md");
}

#[test]
fn an_image_without_skill_md_is_skill_not_found() {
    let layer = tar(&[Item::File("README.md", b"hello")]);
    assert_reason(
        locate(&[layer], None),
        "SkillNotFound",
        "no SKILL.md at its root",
    );
}

#[test]
fn paths_escaping_the_root_are_refused_anywhere_in_the_image() {
    for path in ["../etc/passwd", "a/../../x", "docs/.."] {
        let layer = tar(&[Item::File("SKILL.md", SKILL), Item::File(path, b"x")]);
        assert_reason(locate(&[layer], None), "UnsafeImageContent", "..");
    }
    let absolute = tar(&[Item::File("/SKILL.md", SKILL)]);
    assert_reason(locate(&[absolute], None), "UnsafeImageContent", "absolute");
}

#[test]
fn symlinks_at_or_along_the_skill_path_are_refused() {
    let link_file = tar(&[Item::Symlink("SKILL.md", "/etc/passwd")]);
    assert_reason(locate(&[link_file], None), "UnsafeImageContent", "symlink");

    // The link lives in a lower layer; an upper layer writes "through" it.
    let lower = tar(&[Item::Symlink("team", "/etc")]);
    let upper = tar(&[Item::File("team/demo/SKILL.md", SKILL)]);
    assert_reason(
        locate(&[lower, upper], Some("team/demo")),
        "UnsafeImageContent",
        "team is a symlink",
    );

    // Inside the skill, agents would follow them out of it.
    let inside = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::Symlink("scripts/python", "/usr/bin/python3"),
    ]);
    assert_reason(
        locate(&[inside], None),
        "LinkInSkill",
        "scripts/python is a symlink inside the skill (the image root)",
    );

    // Outside the skill a subPath chose, nobody mounts them.
    let elsewhere = tar(&[
        Item::File("demo/SKILL.md", SKILL),
        Item::Symlink("tools/python", "/usr/bin/python3"),
    ]);
    assert!(locate(&[elsewhere], Some("demo")).is_ok());
}

#[test]
fn hardlinks_are_refused_at_the_skill_path_and_when_they_escape() {
    let linked = tar(&[
        Item::File("other.md", SKILL),
        Item::Hardlink("SKILL.md", "other.md"),
    ]);
    assert_reason(locate(&[linked], None), "UnsafeImageContent", "hardlink");

    let escaping = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::Hardlink("x", "../../etc/shadow"),
    ]);
    assert_reason(locate(&[escaping], None), "UnsafeImageContent", "..");

    let inside = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::File("a.md", b"a"),
        Item::Hardlink("b.md", "a.md"),
    ]);
    assert_reason(
        locate(&[inside], None),
        "LinkInSkill",
        "b.md is a hardlink inside the skill",
    );

    // A link from outside the skill to a file inside it changes nothing the skill holds.
    let from_outside = tar(&[
        Item::File("demo/SKILL.md", SKILL),
        Item::Hardlink("copy.md", "demo/SKILL.md"),
    ]);
    assert!(locate(&[from_outside], Some("demo")).is_ok());
}

#[test]
fn device_nodes_are_refused() {
    let layer = tar(&[Item::File("SKILL.md", SKILL), Item::Fifo("pipe")]);
    assert_reason(locate(&[layer], None), "UnsafeImageContent", "pipe");
}

#[test]
fn skill_md_over_one_mebibyte_is_invalid_and_not_kept() {
    let limit = usize::try_from(agentic_skill::MAX_SKILL_MD_BYTES).unwrap();
    let exactly = vec![b'a'; limit];
    let located = locate(&[tar(&[Item::File("SKILL.md", &exactly)])], None).unwrap();
    assert_eq!(located.skill_md.len(), limit);

    let over = vec![b'a'; limit + 1];
    assert_reason(
        locate(&[tar(&[Item::File("SKILL.md", &over)])], None),
        "InvalidSkill",
        "1048577 bytes",
    );
}

/// 200 MiB of zeros inside a tar entry, as a multi-member gzip stream of about 200 KiB.
/// Built from one compressed mebibyte repeated, so the test never holds the 200 MiB either.
fn gzip_bomb() -> Vec<u8> {
    const MIB: usize = 1024 * 1024;
    let mut first = raw_header("bomb.bin", EntryType::Regular, 200 * MIB as u64);
    first.set_cksum();
    let mut head = first.as_bytes().to_vec();
    head.resize(head.len() + MIB, 0);
    let mut bomb = gzip(&head);
    let zeros = gzip(&vec![0; MIB]);
    for _ in 1..202 {
        bomb.extend_from_slice(&zeros);
    }
    bomb
}

#[test]
fn decompression_bombs_stop_at_the_uncompressed_limit() {
    let bomb = gzip_bomb();
    assert!(
        bomb.len() < 512 * 1024,
        "the bomb is small: {} bytes",
        bomb.len()
    );
    let limits = Limits {
        max_uncompressed_bytes: 8 * 1024 * 1024,
        ..Limits::default()
    };
    assert_reason(
        locate_with(&[bomb], None, limits),
        "ImageTooLarge",
        "max_uncompressed_bytes",
    );
}

#[test]
fn the_uncompressed_limit_counts_all_layers_together() {
    let layer = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::File("data.bin", &[7; 6000]),
    ]);
    let limits = Limits {
        max_uncompressed_bytes: layer.len() as u64 + 1000,
        ..Limits::default()
    };
    assert!(locate_with(std::slice::from_ref(&layer), None, limits).is_ok());
    assert_reason(
        locate_with(&[layer.clone(), layer], None, limits),
        "ImageTooLarge",
        "max_uncompressed_bytes",
    );
}

#[test]
fn too_many_entries_layers_or_compressed_bytes_are_refused() {
    let names: Vec<String> = (0..50).map(|index| format!("file-{index}")).collect();
    let mut items = vec![Item::File("SKILL.md", SKILL)];
    items.extend(names.iter().map(|name| Item::File(name, b"x")));
    let many = tar(&items);
    let few_entries = Limits {
        max_entries: 20,
        ..Limits::default()
    };
    assert_reason(
        locate_with(std::slice::from_ref(&many), None, few_entries),
        "ImageTooLarge",
        "max_entries",
    );

    let small = tar(&[Item::File("SKILL.md", SKILL)]);
    let two_layers = Limits {
        max_layers: 2,
        ..Limits::default()
    };
    assert_reason(
        locate_with(
            &[small.clone(), small.clone(), small.clone()],
            None,
            two_layers,
        ),
        "ImageTooLarge",
        "max_layers",
    );

    let tiny_layers = Limits {
        max_layer_bytes: 1024,
        ..Limits::default()
    };
    assert_reason(
        locate_with(&[many], None, tiny_layers),
        "ImageTooLarge",
        "max_layer_bytes",
    );
}

#[test]
fn whiteouts_delete_from_lower_layers() {
    let lower = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::File("alpha/SKILL.md", b"alpha"),
    ]);
    let delete_root = tar(&[Item::File(".wh.SKILL.md", b"")]);
    assert_reason(
        locate(&[lower.clone(), delete_root.clone()], None),
        "SubPathRequired",
        "alpha",
    );

    let delete_dir = tar(&[Item::File(".wh.alpha", b"")]);
    assert_reason(
        locate(&[lower.clone(), delete_dir], Some("alpha")),
        "SkillNotFound",
        "alpha/SKILL.md",
    );

    // A later layer can bring the file back.
    let only_root = tar(&[Item::File("SKILL.md", SKILL)]);
    let restore = tar(&[Item::File("SKILL.md", b"restored")]);
    let located = locate(&[only_root, delete_root.clone(), restore.clone()], None).unwrap();
    assert_eq!(located.skill_md, b"restored");

    // alpha/SKILL.md stays below the restored root skill.
    assert_reason(
        locate(&[lower, delete_root, restore], None),
        "NestedSkillFile",
        "alpha/SKILL.md",
    );
}

#[test]
fn a_whiteout_after_an_entry_of_its_own_layer_is_refused() {
    let lower = tar(&[Item::File("alpha/SKILL.md", b"alpha")]);
    let before = tar(&[
        Item::File(".wh.alpha", b""),
        Item::File("alpha/SKILL.md", b"new"),
    ]);
    assert_eq!(
        locate(&[lower.clone(), before], Some("alpha"))
            .unwrap()
            .skill_md,
        b"new",
        "a whiteout first only hides lower layers"
    );
    let after = tar(&[
        Item::File("alpha/SKILL.md", b"new"),
        Item::File(".wh.alpha", b""),
    ]);
    assert_reason(
        locate(&[lower, after], Some("alpha")),
        "UnsafeImageContent",
        "same layer",
    );
}

#[test]
fn opaque_directories_hide_lower_content_but_not_their_own_layer() {
    let lower = tar(&[
        Item::File("alpha/SKILL.md", b"alpha"),
        Item::File("beta/SKILL.md", b"beta"),
        Item::File("team/demo/SKILL.md", b"old"),
    ]);
    let upper = tar(&[
        Item::Dir("alpha/"),
        Item::File("alpha/.wh..wh..opq", b""),
        Item::File("alpha/notes.md", b"no skill here anymore"),
        Item::File("team/.wh..wh..opq", b""),
        Item::File("team/demo/SKILL.md", b"new"),
    ]);
    let located = locate(&[lower.clone(), upper.clone()], Some("beta")).unwrap();
    assert_eq!(located.skill_dirs, ["beta"]);
    let team = locate(&[lower.clone(), upper.clone()], Some("team/demo")).unwrap();
    assert_eq!(
        team.skill_md, b"new",
        "the opaque marker spares entries of its own layer"
    );
    assert_reason(
        locate(&[lower, upper], Some("alpha")),
        "SkillNotFound",
        "alpha/SKILL.md",
    );

    let root_opaque = tar(&[Item::File(".wh..wh..opq", b""), Item::File("readme", b"x")]);
    let lower = tar(&[Item::File("SKILL.md", SKILL)]);
    assert_reason(
        locate(&[lower, root_opaque], None),
        "SkillNotFound",
        "SKILL.md",
    );
}

#[test]
fn an_upper_file_replaces_a_lower_directory() {
    let lower = tar(&[Item::File("alpha/SKILL.md", b"alpha")]);
    let upper = tar(&[Item::File("alpha", b"now a file")]);
    assert_reason(
        locate(&[lower, upper], Some("alpha")),
        "SkillNotFound",
        "alpha is a regular file",
    );
}

#[test]
fn pax_and_gnu_names_win_as_in_go() {
    let pax_named = tar(&[
        Item::Pax(&[("path", "SKILL.md")]),
        Item::File("decoy.md", SKILL),
    ]);
    assert_eq!(locate(&[pax_named], None).unwrap().skill_md, SKILL);

    let pax_escape = tar(&[
        Item::Pax(&[("path", "../../outside")]),
        Item::File("fine.md", b"x"),
        Item::File("SKILL.md", SKILL),
    ]);
    assert_reason(locate(&[pax_escape], None), "UnsafeImageContent", "..");

    let sparse = tar(&[
        Item::Pax(&[("GNU.sparse.name", "SKILL.md"), ("GNU.sparse.major", "1")]),
        Item::File("GNUSparseFile.0/decoy", SKILL),
    ]);
    assert_reason(locate(&[sparse], None), "InvalidImage", "sparse");

    let size_lie = tar(&[
        Item::Pax(&[("size", "99999")]),
        Item::File("SKILL.md", SKILL),
    ]);
    assert_reason(locate(&[size_lie], None), "UnsafeImageContent", "PAX size");

    // Long names as the tar crate writes them (GNU records).
    let deep = format!("{}/demo", "d".repeat(120));
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = Header::new_gnu();
    header.set_size(SKILL.len() as u64);
    builder
        .append_data(&mut header, format!("{deep}/SKILL.md"), SKILL)
        .unwrap();
    let layer = builder.into_inner().unwrap();
    assert_eq!(locate(&[layer], Some(&deep)).unwrap().skill_md, SKILL);
}

#[test]
fn non_utf8_paths_are_refused_rather_than_decoded_lossily() {
    // `demo\xff` would decode to `demo\u{fffd}`, which a second directory can really be named.
    let mut header = Header::new_ustar();
    let path = b"demo\xff/SKILL.md";
    header.as_old_mut().name[..path.len()].copy_from_slice(path);
    header.set_entry_type(EntryType::Regular);
    header.set_size(SKILL.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, SKILL).unwrap();
    let layer = builder.into_inner().unwrap();
    assert_reason(
        locate(&[layer], Some("demo\u{fffd}")),
        "UnsafeImageContent",
        "not valid UTF-8",
    );
}

/// A tar stream without its two closing zero blocks.
fn unterminated(items: &[Item<'_>]) -> Vec<u8> {
    let mut bytes = tar(items);
    bytes.truncate(bytes.len() - 1024);
    bytes
}

#[test]
fn entries_after_a_lone_zero_block_are_refused_as_go_refuses_them() {
    let mut hidden = unterminated(&[Item::File("README.md", b"hello")]);
    hidden.extend_from_slice(&[0; 512]);
    hidden.extend_from_slice(&tar(&[Item::File("SKILL.md", SKILL)]));
    assert_reason(
        locate(&[hidden], None),
        "UnsafeImageContent",
        "single zero block",
    );

    let mut truncated = unterminated(&[Item::File("SKILL.md", SKILL)]);
    truncated.extend_from_slice(&[0; 512 + 100]);
    assert_reason(
        locate(&[truncated], None),
        "UnsafeImageContent",
        "single zero block",
    );

    // One zero block and then the end of the stream, or no zero block at all, ends the
    // archive for Go's reader too.
    let mut one_block = unterminated(&[Item::File("SKILL.md", SKILL)]);
    one_block.extend_from_slice(&[0; 512]);
    assert_eq!(locate(&[one_block], None).unwrap().skill_md, SKILL);
    let bare = unterminated(&[Item::File("SKILL.md", SKILL)]);
    assert_eq!(locate(&[bare], None).unwrap().skill_md, SKILL);
    // Anything after two zero blocks is ignored by both readers.
    let mut padded = tar(&[Item::File("SKILL.md", SKILL)]);
    padded.extend_from_slice(b"trailing bytes after the end of the archive");
    assert_eq!(locate(&[padded], None).unwrap().skill_md, SKILL);
}

#[test]
fn global_pax_headers_must_parse_as_they_must_for_go() {
    let fine = pax_records(&[("comment", "built by hand"), ("mtime", "1700000000.5")]);
    let accepted = tar(&[Item::GlobalPax(&fine), Item::File("SKILL.md", SKILL)]);
    assert_eq!(locate(&[accepted], None).unwrap().skill_md, SKILL);

    let huge = pax_records(&[("comment", &"x".repeat(70 * 1024))]);
    let refused = tar(&[Item::GlobalPax(&huge), Item::File("SKILL.md", SKILL)]);
    assert_reason(
        locate(&[refused], None),
        "UnsafeImageContent",
        "PAX global header",
    );

    let malformed = tar(&[
        Item::GlobalPax(b"99 comment=length disagrees\n"),
        Item::File("SKILL.md", SKILL),
    ]);
    assert_reason(
        locate(&[malformed], None),
        "UnsafeImageContent",
        "malformed PAX global header",
    );

    let not_a_time = pax_records(&[("mtime", "yesterday")]);
    let refused = tar(&[Item::GlobalPax(&not_a_time), Item::File("SKILL.md", SKILL)]);
    assert_reason(locate(&[refused], None), "UnsafeImageContent", "mtime");
}

#[test]
fn numeric_pax_records_must_parse() {
    let layer = tar(&[Item::Pax(&[("uid", "root")]), Item::File("SKILL.md", SKILL)]);
    assert_reason(locate(&[layer], None), "UnsafeImageContent", "uid");
}

#[test]
fn blobs_must_match_their_digest_and_size() {
    let layer = gzip(&tar(&[Item::File("SKILL.md", SKILL)]));
    let mut locator = SkillLocator::new(None, Limits::default());
    let mut wrong_digest = blob(&layer);
    wrong_digest.digest = crate::pack::sha256_digest(b"something else");
    let error = locator
        .apply_layer(layer.as_slice(), &wrong_digest)
        .unwrap_err();
    assert_eq!(error.reason(), "DigestMismatch", "{error}");
    let actual = crate::pack::sha256_digest(&layer);
    assert!(
        error.to_string().contains(&format!(
            "expected {} ({} bytes), got {actual}",
            wrong_digest.digest,
            layer.len()
        )),
        "{error}"
    );

    let mut locator = SkillLocator::new(None, Limits::default());
    let mut short = blob(&layer);
    short.size -= 1;
    let error = locator.apply_layer(layer.as_slice(), &short).unwrap_err();
    assert_eq!(error.reason(), "DigestMismatch", "{error}");
    assert!(error.to_string().contains("got more than"), "{error}");

    let mut locator = SkillLocator::new(None, Limits::default());
    let truncated = &layer[..layer.len() - 10];
    let mut long = blob(&layer);
    long.digest = crate::pack::sha256_digest(truncated);
    let error = locator.apply_layer(truncated, &long).unwrap_err();
    assert_eq!(error.reason(), "DigestMismatch", "{error}");
}

#[test]
fn a_gzip_stream_whose_checksum_fails_after_the_archive_is_an_invalid_image() {
    let mut layer = gzip(&tar(&[Item::File("SKILL.md", SKILL)]));
    // The CRC-32 of gzip's trailer: every tar byte reads, only the end of the stream fails.
    let crc = layer.len() - 8;
    layer[crc] ^= 0xff;
    assert_reason(
        locate(&[layer], None),
        "InvalidImage",
        "not a readable tar archive",
    );
}

#[test]
fn corrupt_and_zstd_layers_are_invalid_images() {
    let mut corrupt = gzip(&tar(&[Item::File("SKILL.md", SKILL)]));
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    corrupt[middle + 1] ^= 0xff;
    assert_reason(
        locate(&[corrupt], None),
        "InvalidImage",
        "not a readable tar archive",
    );

    let zstd = [&ZSTD_MAGIC[..], b"rest of a frame"].concat();
    assert_reason(locate(&[zstd], None), "InvalidImage", "zstd");
}

#[test]
fn sub_paths_must_be_plain_relative_paths() {
    for good in ["demo", "skills/demo", "a.b/c-d"] {
        assert!(validate_sub_path(good).is_ok(), "{good}");
    }
    for bad in [
        "", "/demo", "demo/", "a//b", "./demo", "a/../b", "..", ".wh.demo",
    ] {
        let error = validate_sub_path(bad).unwrap_err();
        assert_eq!(error.reason(), "InvalidSubPath", "{bad}");
    }
}

fn listing_with(layers: &[Vec<u8>], limits: Limits) -> Result<Listing, OciError> {
    let mut locator = SkillLocator::new(None, limits);
    for layer in layers {
        locator
            .apply_layer(layer.as_slice(), &blob(layer))
            .expect("layer reads");
    }
    locator.listing()
}

fn listing(layers: &[Vec<u8>]) -> Listing {
    listing_with(layers, Limits::default()).expect("listed")
}

#[test]
fn listing_names_every_skill_directory_past_the_listed_bound() {
    let names: Vec<String> = (0..MAX_LISTED_DIRECTORIES + 3)
        .map(|i| format!("skill-{i:03}"))
        .collect();
    let paths: Vec<String> = names.iter().map(|n| format!("{n}/SKILL.md")).collect();
    let mut items: Vec<Item<'_>> = paths.iter().map(|p| Item::File(p, SKILL)).collect();
    items.push(Item::File("docs/README.md", b"not a skill"));
    items.push(Item::File("deep/er/SKILL.md", SKILL));
    let found = listing(&[tar(&items)]);
    assert!(!found.root);
    assert_eq!(found.directories, names);
}

#[test]
fn listing_of_an_image_with_a_root_skill_is_that_one_skill() {
    let found = listing(&[tar(&[
        Item::File("SKILL.md", SKILL),
        Item::File("nested/SKILL.md", SKILL),
    ])]);
    assert!(found.root);
    assert!(found.directories.is_empty());
}

#[test]
fn listing_follows_whiteouts_of_upper_layers() {
    let lower = tar(&[
        Item::File("a/SKILL.md", SKILL),
        Item::File("b/SKILL.md", SKILL),
    ]);
    let upper = tar(&[Item::File(".wh.a", b""), Item::File("c/SKILL.md", SKILL)]);
    let found = listing(&[lower, upper]);
    assert_eq!(found.directories, vec!["b".to_string(), "c".to_string()]);
}

fn collect(layers: &[Vec<u8>], sub_path: Option<&str>) -> Result<Located, OciError> {
    let mut locator = SkillLocator::new(sub_path, Limits::default()).collecting();
    for layer in layers {
        locator.apply_layer(layer.as_slice(), &blob(layer))?;
    }
    locator.finish()
}

fn file_list(located: &Located) -> Vec<(&str, &[u8])> {
    located
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.bytes.as_slice()))
        .collect()
}

#[test]
fn collecting_keeps_every_file_of_the_skill_directory_after_whiteouts() {
    let lower = tar(&[
        Item::Dir("demo/"),
        Item::File("demo/SKILL.md", SKILL),
        Item::File("demo/scripts/run.sh", b"#!/bin/sh\necho old\n"),
        Item::File("demo/gone.txt", b"removed above"),
        Item::File("other/SKILL.md", b"not this skill"),
        Item::File("other/data.bin", b"\x00\x01"),
    ]);
    let upper = tar(&[
        Item::File("demo/.wh.gone.txt", b""),
        Item::File("demo/scripts/run.sh", b"#!/bin/sh\necho new\n"),
        Item::File("demo/references/guide.md", b"# Guide\n"),
    ]);
    let located = collect(&[gzip(&lower), upper], Some("demo")).expect("collected");
    assert_eq!(
        file_list(&located),
        [
            ("SKILL.md", SKILL),
            ("references/guide.md", &b"# Guide\n"[..]),
            ("scripts/run.sh", &b"#!/bin/sh\necho new\n"[..]),
        ]
    );
    assert_eq!(located.skill_md, SKILL, "finish still reads the SKILL.md");

    // Without collecting, only the SKILL.md is kept.
    assert!(
        locate(&[gzip(&lower)], Some("demo"))
            .expect("located")
            .files
            .is_empty()
    );

    // An image-root skill: every file of the image.
    let root = tar(&[Item::File("SKILL.md", SKILL), Item::File("a/b.txt", b"b")]);
    let located = collect(&[root], None).expect("collected");
    assert_eq!(
        file_list(&located),
        [("SKILL.md", SKILL), ("a/b.txt", &b"b"[..])]
    );
}

#[test]
fn collecting_refuses_links_in_the_skill_directory() {
    for link in [
        Item::Symlink("demo/escape", "../../etc/passwd"),
        Item::Hardlink("demo/copy", "demo/SKILL.md"),
    ] {
        let layer = tar(&[Item::File("demo/SKILL.md", SKILL), link]);
        assert_reason(
            collect(std::slice::from_ref(&layer), Some("demo")),
            "LinkInSkill",
            "only regular files and directories",
        );
        // Reading the skill for a SkillCard refuses them the same way.
        assert_reason(
            locate(&[layer], Some("demo")),
            "LinkInSkill",
            "inside the skill (demo)",
        );
    }
}

#[test]
fn a_skill_md_below_the_skill_root_is_refused_at_any_depth() {
    let whole = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::File("references/deep/er/SKILL.md", SKILL),
    ]);
    assert_reason(
        locate(&[whole], None),
        "NestedSkillFile",
        "references/deep/er/SKILL.md is a SKILL.md below the skill's root (the image root)",
    );

    let sub_path = tar(&[
        Item::File("team/demo/SKILL.md", SKILL),
        Item::File("team/demo/x/SKILL.md", SKILL),
        Item::File("team/other/SKILL.md", SKILL),
    ]);
    assert_reason(
        locate(std::slice::from_ref(&sub_path), Some("team/demo")),
        "NestedSkillFile",
        "team/demo/x/SKILL.md is a SKILL.md below the skill's root (team/demo)",
    );
    // A sibling skill is not below this one.
    assert!(locate(&[sub_path], Some("team/other")).is_ok());

    // Only a file registers: a directory of that name is not a skill.
    let directory = tar(&[Item::File("SKILL.md", SKILL), Item::Dir("docs/SKILL.md/")]);
    assert!(locate(&[directory], None).is_ok());

    // A PAX record names the entry, as it does for the runtime.
    let renamed = tar(&[
        Item::File("demo/SKILL.md", SKILL),
        Item::Pax(&[("path", "demo/refs/SKILL.md")]),
        Item::File("demo/refs/notes.md", b"x"),
    ]);
    assert_reason(
        locate(&[renamed], Some("demo")),
        "NestedSkillFile",
        "demo/refs/SKILL.md",
    );
}

#[test]
fn what_changes_the_skill_set_is_refused_in_any_layer() {
    let skill = tar(&[Item::File("demo/SKILL.md", SKILL)]);
    let added = tar(&[Item::Symlink("demo/escape", "/")]);
    assert_reason(
        locate(&[skill.clone(), added.clone()], Some("demo")),
        "LinkInSkill",
        "demo/escape is a symlink",
    );
    // Deleted again above: still refused, skill images never need one.
    let deleted = tar(&[Item::File("demo/.wh.escape", b"")]);
    assert_reason(
        locate(&[skill.clone(), added, deleted], Some("demo")),
        "LinkInSkill",
        "demo/escape",
    );
    let nested = tar(&[Item::File("demo/old/SKILL.md", SKILL)]);
    let opaque = tar(&[Item::File("demo/old/.wh..wh..opq", b"")]);
    assert_reason(
        locate(&[skill.clone(), nested, opaque], Some("demo")),
        "NestedSkillFile",
        "demo/old/SKILL.md",
    );

    // The first one found is named, whichever kind it is.
    let both = tar(&[
        Item::File("SKILL.md", SKILL),
        Item::Hardlink("b.md", "SKILL.md"),
        Item::File("x/SKILL.md", SKILL),
    ]);
    assert_reason(locate(&[both], None), "LinkInSkill", "b.md");

    // In a multi-skill image read without subPath the image root is no skill: the verdict
    // stays SubPathRequired.
    let multi = tar(&[
        Item::File("a/SKILL.md", SKILL),
        Item::File("b/SKILL.md", SKILL),
        Item::Symlink("b/link", "/"),
    ]);
    assert_reason(locate(&[multi], None), "SubPathRequired", "a, b");
}

#[test]
fn a_whiteout_must_name_a_file() {
    let lower = tar(&[Item::File("SKILL.md", SKILL)]);
    let upper = tar(&[Item::File(".wh.", b"")]);
    assert_reason(
        locate(&[lower, upper], None),
        "UnsafeImageContent",
        "names no file",
    );
}

/// `count` top-level skill directories whose names are `length` bytes long, each written as
/// a directory and its `SKILL.md` (GNU long names past 100 bytes).
fn many_skill_directories(count: usize, length: usize) -> (Vec<u8>, Vec<String>) {
    let names: Vec<String> = (0..count)
        .map(|n| format!("{n:06}{}", "x".repeat(length - 6)))
        .collect();
    let mut builder = tar::Builder::new(Vec::new());
    for name in &names {
        let mut dir = Header::new_gnu();
        dir.set_entry_type(EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        builder
            .append_data(&mut dir, format!("{name}/"), std::io::empty())
            .unwrap();
        let mut file = Header::new_gnu();
        file.set_mode(0o644);
        file.set_size(SKILL.len() as u64);
        builder
            .append_data(&mut file, format!("{name}/SKILL.md"), SKILL)
            .unwrap();
    }
    (builder.into_inner().unwrap(), names)
}

#[test]
fn top_level_names_are_kept_as_digests_and_a_few_names() {
    let (layer, names) = many_skill_directories(1_000, 3_000);
    let mut locator = SkillLocator::new(None, Limits::default());
    locator
        .apply_layer(layer.as_slice(), &blob(&layer))
        .unwrap();

    // One record per top-level name, no path in the tree, the smallest names only.
    assert_eq!(locator.top.records.len(), 1_000);
    assert!(locator.tree.is_empty());
    let capacity = Limits::default().max_skills;
    assert_eq!(locator.top.names.len(), capacity);
    assert_eq!(
        locator.top.names.iter().collect::<Vec<_>>(),
        names[..capacity].iter().collect::<Vec<_>>()
    );

    let error = locator.finish().unwrap_err();
    let OciError::SubPathRequired { directories, total } = &error else {
        panic!("expected SubPathRequired, got {error}");
    };
    assert_eq!(*total, 1_000);
    assert_eq!(directories[..], names[..MAX_LISTED_DIRECTORIES]);

    // With a subPath, the same image keeps no more.
    let mut locator = SkillLocator::new(Some(&names[7]), Limits::default());
    locator
        .apply_layer(layer.as_slice(), &blob(&layer))
        .unwrap();
    assert_eq!(locator.top.names.len(), capacity);
    assert_eq!(locator.tree.len(), 2, "the subPath and its SKILL.md");
    let located = locator.finish().unwrap();
    assert_eq!(located.skill_dir_count, 1_000);
}

#[test]
fn a_listing_holds_at_most_max_skills() {
    let (layer, _) = many_skill_directories(300, 10);
    let error = listing_with(std::slice::from_ref(&layer), Limits::default()).unwrap_err();
    assert_eq!(
        error,
        OciError::TooManySkills {
            count: 300,
            max: 256
        }
    );
    assert!(error.to_string().contains("Limits::max_skills"), "{error}");

    let roomy = Limits {
        max_skills: 300,
        ..Limits::default()
    };
    assert_eq!(
        listing_with(&[layer], roomy).unwrap().directories.len(),
        300
    );
}

#[test]
fn a_listing_that_lost_names_to_deleted_ones_says_so() {
    // 40 skill directories keep the 32 smallest names; the upper layer deletes 36 of the
    // 40, those 32 among them, so the 4 left have no name kept.
    let (lower, names) = many_skill_directories(40, 10);
    let whiteouts: Vec<String> = names[..36].iter().map(|n| format!(".wh.{n}")).collect();
    let upper = tar(&whiteouts
        .iter()
        .map(|path| Item::File(path, b""))
        .collect::<Vec<_>>());
    let limits = Limits {
        max_skills: 4,
        ..Limits::default()
    };
    let error = listing_with(&[lower.clone(), upper.clone()], limits).unwrap_err();
    assert_eq!(error.reason(), "ImageTooLarge", "{error}");
    assert!(
        error
            .to_string()
            .contains("before upper layers delete some"),
        "{error}"
    );

    // The count stays exact.
    assert_reason(
        locate_with(&[lower, upper], None, limits),
        "SubPathRequired",
        "(and 4 more)",
    );
}

#[test]
fn top_level_records_follow_whiteouts_and_replacements() {
    let lower = tar(&[
        Item::File("a/SKILL.md", SKILL),
        Item::File("b/SKILL.md", SKILL),
        Item::File("c/SKILL.md", SKILL),
        Item::File("d/SKILL.md", SKILL),
    ]);
    let upper = tar(&[
        Item::File("e/SKILL.md", SKILL),
        Item::File(".wh..wh..opq", b""),
        Item::File(".wh..wh..opq", b""),
        Item::File("f/SKILL.md", SKILL),
    ]);
    assert_eq!(
        listing(&[lower.clone(), upper]).directories,
        ["e", "f"],
        "a root opaque whiteout spares its own layer"
    );

    let upper = tar(&[
        Item::File("a", b"now a file"),
        Item::File("b/.wh.SKILL.md", b""),
        Item::Dir("c/"),
        Item::File("c/.wh..wh..opq", b""),
        Item::Dir("d/SKILL.md/"),
    ]);
    assert!(
        listing(&[lower.clone(), upper.clone()])
            .directories
            .is_empty()
    );
    let mut locator = SkillLocator::new(None, Limits::default());
    for layer in [&lower, &upper] {
        locator.apply_layer(layer.as_slice(), &blob(layer)).unwrap();
    }
    assert!(locator.top.names.is_empty(), "no name outlives its skill");

    let same_layer = tar(&[
        Item::File("a/SKILL.md", b"new"),
        Item::File("a/.wh.SKILL.md", b""),
    ]);
    assert_reason(
        locate(&[lower, same_layer], None),
        "UnsafeImageContent",
        "whiteout of a/SKILL.md follows an entry for it in the same layer",
    );
}

#[test]
fn the_memory_bound_adds_up_what_a_read_keeps() {
    let defaults = Limits::default();
    let bound = defaults.memory_bound();
    assert!(
        bound
            >= defaults.max_entries * crate::TOP_LEVEL_RECORD_BYTES
                + agentic_skill::MAX_SKILL_MD_BYTES,
        "{bound}"
    );
    assert!(bound < 32 * 1024 * 1024, "the documented 32 MiB: {bound}");
    let more_entries = Limits {
        max_entries: defaults.max_entries * 2,
        ..defaults
    };
    assert_eq!(
        more_entries.memory_bound() - bound,
        defaults.max_entries * crate::TOP_LEVEL_RECORD_BYTES
    );
}
