//! Finding `SKILL.md` in a stack of image layers: streaming, bounded, with OCI whiteouts.
//!
//! Only the paths that can matter are remembered: top-level entries, `X/SKILL.md`, and the
//! `subPath` with its ancestors. Everything else is checked for safety and skipped. The one
//! file content kept in memory is the `SKILL.md` being looked for, unless the locator
//! [collects](SkillLocator::collecting) the skill's files for `skill pull`: then every file of
//! the skill directory is kept too, within [`Limits::max_uncompressed_bytes`].
//!
//! The archive is parsed in raw mode (extension records are handled here, with their own size
//! caps) and with the same precedence rules as Go's `archive/tar`, which containerd and CRI-O
//! use to unpack, so that what is validated here is what a pod gets to see.

use std::collections::BTreeMap;
use std::io::{self, Cursor, Read};

use flate2::read::MultiGzDecoder;
use sha2::{Digest, Sha256};
use tar::EntryType;

use crate::OciError;
use crate::limits::{Limits, MAX_LISTED_DIRECTORIES, MAX_PATH_BYTES, MAX_PAX_HEADER_BYTES};

/// The file every skill directory holds.
const SKILL_FILE: &str = agentic_skill::SKILL_FILE;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A layer blob as its manifest describes it.
#[derive(Debug, Clone)]
pub(crate) struct LayerBlob {
    /// How errors name the blob, e.g. `registry/repo@sha256:…`.
    pub name: String,
    /// `sha256:<hex>` of the compressed bytes.
    pub digest: String,
    /// Size of the compressed bytes.
    pub size: u64,
}

/// What [`SkillLocator::finish`] found.
#[derive(Debug)]
pub(crate) struct Located {
    /// Path of the `SKILL.md` inside the image.
    pub path: String,
    pub skill_md: Vec<u8>,
    /// Top-level directories holding a `SKILL.md`, sorted, at most [`MAX_LISTED_DIRECTORIES`].
    pub skill_dirs: Vec<String>,
    /// How many there are.
    pub skill_dir_count: usize,
    /// Every regular file of the skill directory when [collecting](SkillLocator::collecting),
    /// sorted by path; empty otherwise.
    pub files: Vec<SkillFile>,
}

/// One file of a skill, as `skill pull` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Relative to the skill directory, `/`-separated, normalized (no `.` or `..`).
    pub path: String,
    pub bytes: Vec<u8>,
    /// Any execute bit set in the tar header.
    pub executable: bool,
}

/// The skills an image holds, as [`SkillLocator::listing`] found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listing {
    /// A `SKILL.md` at the image root: the image is one skill.
    pub root: bool,
    /// Otherwise, the top-level directories holding a `SKILL.md`, sorted.
    pub directories: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    File,
    Symlink,
    Hardlink,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Directory => "a directory",
            Kind::File => "a regular file",
            Kind::Symlink => "a symlink",
            Kind::Hardlink => "a hardlink",
        }
    }
}

#[derive(Debug)]
enum Content {
    Skipped,
    Kept(Vec<u8>),
    Oversized(u64),
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    /// 1-based index of the layer that added the entry; whiteouts only hide lower layers.
    layer: usize,
    content: Content,
    executable: bool,
}

/// Why reading an archive stopped.
enum Stop {
    /// The bytes are not a readable tar (or gzip) stream, or a reader below failed.
    Io(io::Error),
    /// The content was read and judged.
    Verdict(OciError),
}

impl From<OciError> for Stop {
    fn from(error: OciError) -> Self {
        Stop::Verdict(error)
    }
}

/// Applies layers bottom to top and answers where the skill is.
#[derive(Debug)]
pub(crate) struct SkillLocator {
    sub_path: Option<String>,
    target: String,
    /// Keep every file of the skill directory, not only its `SKILL.md`.
    collect: bool,
    limits: Limits,
    layers: usize,
    entries: u64,
    uncompressed: u64,
    tree: BTreeMap<String, Node>,
}

impl SkillLocator {
    /// `sub_path` must already be checked by [`validate_sub_path`].
    pub(crate) fn new(sub_path: Option<&str>, limits: Limits) -> Self {
        let target = match sub_path {
            Some(sub_path) => format!("{sub_path}/{SKILL_FILE}"),
            None => SKILL_FILE.to_string(),
        };
        SkillLocator {
            sub_path: sub_path.map(str::to_string),
            target,
            collect: false,
            limits,
            layers: 0,
            entries: 0,
            uncompressed: 0,
            tree: BTreeMap::new(),
        }
    }

    /// Keeps the content of every regular file in the skill directory, for
    /// [`Located::files`]; symlinks and hardlinks in it are then refused.
    pub(crate) fn collecting(mut self) -> Self {
        self.collect = true;
        self
    }

    /// `path` relative to the skill directory, when it is inside it.
    fn in_skill_dir<'p>(&self, path: &'p str) -> Option<&'p str> {
        match &self.sub_path {
            None => Some(path),
            Some(sub_path) => path.strip_prefix(sub_path.as_str())?.strip_prefix('/'),
        }
    }

    /// Reads one layer (gzip or plain tar, told apart by its first bytes) from `source`,
    /// verifying its size and digest, and applies it on top of the layers before it.
    pub(crate) fn apply_layer(
        &mut self,
        source: impl Read,
        blob: &LayerBlob,
    ) -> Result<(), OciError> {
        self.layers += 1;
        if self.layers > self.limits.max_layers {
            return Err(OciError::too_large(format!(
                "more than {} layers (Limits::max_layers)",
                self.limits.max_layers
            )));
        }
        if blob.size > self.limits.max_layer_bytes {
            return Err(OciError::too_large(format!(
                "layer {} is {} bytes compressed, over the limit of {} (Limits::max_layer_bytes)",
                blob.digest, blob.size, self.limits.max_layer_bytes
            )));
        }
        let layer = self.layers;
        let budget = self
            .limits
            .max_uncompressed_bytes
            .saturating_sub(self.uncompressed);
        let mut compressed = VerifyingReader::new(source, blob);

        let (outcome, used) = match decompress(&mut compressed, blob) {
            Ok(decoded) => {
                let mut uncompressed = BudgetReader::new(decoded, budget);
                let outcome = match self.read_archive(&mut uncompressed, layer) {
                    Err(Stop::Io(_)) if uncompressed.exceeded => {
                        Err(Stop::Verdict(OciError::too_large(format!(
                            "layers decompress to more than {} bytes (Limits::max_uncompressed_bytes)",
                            self.limits.max_uncompressed_bytes
                        ))))
                    }
                    other => other,
                };
                (outcome, uncompressed.used)
            }
            Err(stop) => (Err(stop), 0),
        };

        // Read the blob to its end even when its content is already judged: the digest must
        // cover every byte, and a verdict on bytes corrupted in transit must not stand.
        let drained = io::copy(&mut compressed, &mut io::sink());
        if let Some(failure) = compressed.failure.take() {
            return Err(failure);
        }
        if let Err(error) = drained {
            return Err(OciError::invalid_image(format!(
                "cannot read layer {}: {error}",
                blob.digest
            )));
        }
        compressed.verify()?;

        match outcome {
            Ok(()) => {
                self.uncompressed += used;
                Ok(())
            }
            Err(Stop::Verdict(error)) => Err(error),
            Err(Stop::Io(error)) => Err(OciError::invalid_image(format!(
                "layer {} is not a readable tar archive: {error}",
                blob.digest
            ))),
        }
    }

    fn read_archive(&mut self, reader: impl Read, layer: usize) -> Result<(), Stop> {
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries().map_err(Stop::Io)?.raw(true);
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Option<Vec<u8>> = None;
        for entry in entries {
            let mut entry = entry.map_err(Stop::Io)?;
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Err(OciError::too_large(format!(
                    "more than {} tar entries (Limits::max_entries)",
                    self.limits.max_entries
                ))
                .into());
            }
            match entry.header().entry_type() {
                EntryType::GNULongName => {
                    long_name = Some(read_record(
                        &mut entry,
                        MAX_PATH_BYTES as u64,
                        "GNU long name",
                    )?);
                    continue;
                }
                EntryType::GNULongLink => {
                    long_link = Some(read_record(
                        &mut entry,
                        MAX_PATH_BYTES as u64,
                        "GNU long link",
                    )?);
                    continue;
                }
                EntryType::XHeader => {
                    pax = Some(read_record(&mut entry, MAX_PAX_HEADER_BYTES, "PAX header")?);
                    continue;
                }
                // Global PAX records name no entry and runtimes ignore them, but Go's reader
                // (containerd's) still parses them and fails the layer when they are malformed.
                EntryType::XGlobalHeader => {
                    let records =
                        read_record(&mut entry, MAX_PAX_HEADER_BYTES, "PAX global header")?;
                    for record in tar::PaxExtensions::new(&records) {
                        let record = record
                            .map_err(|_| OciError::unsafe_content("malformed PAX global header"))?;
                        check_pax_number(record.key_bytes(), record.value_bytes())?;
                    }
                    continue;
                }
                _ => {}
            }

            // Same precedence as Go's archive/tar: PAX records over GNU records over the header.
            let mut path = match long_name.take() {
                Some(name) => trim_nul(name),
                None => entry.header().path_bytes().into_owned(),
            };
            let mut link = match long_link.take() {
                Some(link) => Some(trim_nul(link)),
                None => entry
                    .header()
                    .link_name_bytes()
                    .map(|link| link.into_owned()),
            };
            if let Some(records) = pax.take() {
                let header_size = entry.header().entry_size().map_err(Stop::Io)?;
                for record in tar::PaxExtensions::new(&records) {
                    let record = record.map_err(|_| {
                        OciError::unsafe_content(format!(
                            "malformed PAX header before {:?}",
                            String::from_utf8_lossy(&path)
                        ))
                    })?;
                    match record.key_bytes() {
                        b"path" => path = record.value_bytes().to_vec(),
                        b"linkpath" => link = Some(record.value_bytes().to_vec()),
                        // Go sizes the entry by this record; a disagreement would make the
                        // runtime see a different archive than the one checked here.
                        b"size"
                            if record.value().ok().and_then(|v| v.parse::<u64>().ok())
                                != Some(header_size) =>
                        {
                            return Err(OciError::unsafe_content(format!(
                                "PAX size of {:?} disagrees with its tar header",
                                String::from_utf8_lossy(&path)
                            ))
                            .into());
                        }
                        // PAX sparse files carry their real name in these records.
                        key if key.starts_with(b"GNU.sparse.") => {
                            return Err(OciError::invalid_image(format!(
                                "{:?} is a sparse file, which is not supported",
                                String::from_utf8_lossy(&path)
                            ))
                            .into());
                        }
                        key => check_pax_number(key, record.value_bytes())?,
                    }
                }
            }
            self.apply_entry(&mut entry, &path, link.as_deref(), layer)?;
        }
        if long_name.is_some() || long_link.is_some() || pax.is_some() {
            return Err(OciError::unsafe_content(
                "extension header at the end of a layer describes no entry",
            )
            .into());
        }
        check_end_of_archive(archive.into_inner())
    }

    fn apply_entry(
        &mut self,
        entry: &mut tar::Entry<'_, impl Read>,
        raw_path: &[u8],
        raw_link: Option<&[u8]>,
        layer: usize,
    ) -> Result<(), Stop> {
        let Some(path) = normalize_entry_path(raw_path)? else {
            // The image root itself (`./`).
            return Ok(());
        };
        let (parent, name) = match path.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => ("", path.as_str()),
        };
        if let Some(hidden) = name.strip_prefix(".wh.") {
            if hidden == ".wh..opq" {
                self.remove_lower_descendants(parent, layer);
            } else if !hidden.starts_with(".wh.") {
                let target = join(parent, hidden);
                // The spec hides only lower layers, but containerd's non-overlay unpacker also
                // removes what the same layer wrote before: refuse rather than guess.
                if self.has_entries_of_layer(&target, layer) {
                    return Err(OciError::unsafe_content(format!(
                        "whiteout of {target} follows an entry for it in the same layer"
                    ))
                    .into());
                }
                self.remove_lower(&target, layer);
            }
            // Other `.wh..wh.` names are AUFS bookkeeping that runtimes skip.
            return Ok(());
        }

        let type_flag = entry.header().as_old().linkflag[0];
        let kind = match entry.header().entry_type() {
            // A pre-POSIX regular entry whose name ends in '/' is a directory to Go's reader.
            EntryType::Regular if type_flag == 0 && raw_path.ends_with(b"/") => Kind::Directory,
            EntryType::Regular | EntryType::Continuous => Kind::File,
            EntryType::Directory => Kind::Directory,
            EntryType::Symlink => Kind::Symlink,
            EntryType::Link => {
                let target = raw_link.unwrap_or_default();
                if normalize_entry_path(target)?.is_none() {
                    return Err(
                        OciError::unsafe_content(format!("hardlink {path} has no target")).into(),
                    );
                }
                Kind::Hardlink
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                return Err(
                    OciError::unsafe_content(format!("{path} is a device node or FIFO")).into(),
                );
            }
            EntryType::GNUSparse => {
                return Err(OciError::invalid_image(format!(
                    "{path} is a GNU sparse file, which is not supported"
                ))
                .into());
            }
            other => {
                return Err(OciError::invalid_image(format!(
                    "{path} has the unsupported tar entry type {:?}",
                    char::from(other.as_byte())
                ))
                .into());
            }
        };

        if !self.is_tracked(&path) {
            return Ok(());
        }
        let content = if kind == Kind::File && path == self.target {
            read_skill_md(entry)?
        } else if self.collect && kind == Kind::File && self.in_skill_dir(&path).is_some() {
            // Bounded by the uncompressed budget of the reader below.
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(Stop::Io)?;
            Content::Kept(bytes)
        } else {
            Content::Skipped
        };
        let executable = entry.header().mode().is_ok_and(|mode| mode & 0o111 != 0);
        // An entry replaces whatever lower layers had at its path; only a directory over a
        // directory merges with what lies below.
        if kind != Kind::Directory {
            self.remove_lower_descendants(&path, layer);
        }
        self.tree.insert(
            path,
            Node {
                kind,
                layer,
                content,
                executable,
            },
        );
        Ok(())
    }

    /// Whether `path` can decide the answer: top-level entries, `X/SKILL.md`, and the
    /// `subPath` with its ancestors and its `SKILL.md`.
    fn is_tracked(&self, path: &str) -> bool {
        if self.collect && self.in_skill_dir(path).is_some() {
            return true;
        }
        match path.split_once('/') {
            None => true,
            Some((_, rest)) if rest == SKILL_FILE => true,
            Some(_) => {
                path == self.target
                    || self.sub_path.as_deref().is_some_and(|sub_path| {
                        sub_path == path
                            || sub_path
                                .strip_prefix(path)
                                .is_some_and(|rest| rest.starts_with('/'))
                    })
            }
        }
    }

    /// Whether `layer` itself put anything at or under `path`.
    fn has_entries_of_layer(&self, path: &str, layer: usize) -> bool {
        let under = format!("{path}/");
        self.tree.get(path).is_some_and(|node| node.layer == layer)
            || self
                .tree
                .range(under.clone()..)
                .take_while(|(candidate, _)| candidate.starts_with(&under))
                .any(|(_, node)| node.layer == layer)
    }

    /// Removes `path` and everything under it, as far as layers below `layer` put them there.
    fn remove_lower(&mut self, path: &str, layer: usize) {
        if self.tree.get(path).is_some_and(|node| node.layer < layer) {
            self.tree.remove(path);
        }
        self.remove_lower_descendants(path, layer);
    }

    /// Removes what layers below `layer` put under `dir` (`""` is the image root).
    fn remove_lower_descendants(&mut self, dir: &str, layer: usize) {
        let doomed: Vec<String> = if dir.is_empty() {
            self.tree
                .iter()
                .filter(|(_, node)| node.layer < layer)
                .map(|(path, _)| path.clone())
                .collect()
        } else {
            let start = format!("{dir}/");
            self.tree
                .range(start.clone()..)
                .take_while(|(path, _)| path.starts_with(&start))
                .filter(|(_, node)| node.layer < layer)
                .map(|(path, _)| path.clone())
                .collect()
        };
        for path in doomed {
            self.tree.remove(&path);
        }
    }

    /// Top-level directories holding a `SKILL.md` after all layers, sorted, all of them.
    fn skill_directories(&self) -> Vec<String> {
        self.tree
            .iter()
            .filter_map(|(path, node)| {
                let dir = path.strip_suffix(SKILL_FILE)?.strip_suffix('/')?;
                let is_dir = |path: &str| {
                    self.tree
                        .get(path)
                        .is_none_or(|node| node.kind == Kind::Directory)
                };
                (!dir.contains('/') && node.kind != Kind::Directory && is_dir(dir))
                    .then(|| dir.to_string())
            })
            .collect()
    }

    /// Where the skills of the image are after all layers, for a locator made without a
    /// `subPath`: a `SKILL.md` at the root makes the image one skill; otherwise every
    /// top-level directory holding a `SKILL.md` is one. Whether each is valid is for the
    /// reader of that skill to say.
    pub(crate) fn listing(&self) -> Listing {
        let root = self
            .tree
            .get(SKILL_FILE)
            .is_some_and(|node| node.kind != Kind::Directory);
        Listing {
            root,
            directories: if root {
                Vec::new()
            } else {
                self.skill_directories()
            },
        }
    }

    /// The skill after all layers: its `SKILL.md` bytes and the skill directories present.
    pub(crate) fn finish(mut self) -> Result<Located, OciError> {
        let mut skill_dirs = self.skill_directories();
        let files = if self.collect {
            self.take_files()?
        } else {
            Vec::new()
        };

        if let Some(sub_path) = &self.sub_path {
            let mut ancestor = String::new();
            for segment in sub_path.split('/') {
                if !ancestor.is_empty() {
                    ancestor.push('/');
                }
                ancestor.push_str(segment);
                match self.tree.get(&ancestor).map(|node| node.kind) {
                    None | Some(Kind::Directory) => {}
                    Some(Kind::Symlink) => {
                        return Err(OciError::unsafe_content(format!(
                            "{ancestor} is a symlink; the path to SKILL.md must consist of real directories"
                        )));
                    }
                    Some(kind) => {
                        return Err(OciError::SkillNotFound {
                            path: self.target.clone(),
                            message: format!("{ancestor} is {}, not a directory", kind.describe()),
                        });
                    }
                }
            }
        }

        let target = self.target;
        let Some(node) = self.tree.remove(&target) else {
            if self.sub_path.is_none() && !skill_dirs.is_empty() {
                return Err(OciError::sub_path_required(skill_dirs));
            }
            let message = match &self.sub_path {
                Some(_) if skill_dirs.is_empty() => "the image holds no SKILL.md there".to_string(),
                Some(_) => match OciError::sub_path_required(skill_dirs) {
                    OciError::SubPathRequired { directories, total } => format!(
                        "the image's {total} skill directories are: {}{}",
                        directories.join(", "),
                        if total > directories.len() {
                            ", …"
                        } else {
                            ""
                        }
                    ),
                    _ => unreachable!("sub_path_required builds SubPathRequired"),
                },
                None => {
                    "the image has no SKILL.md at its root and no top-level directory holding one"
                        .to_string()
                }
            };
            return Err(OciError::SkillNotFound {
                path: target,
                message,
            });
        };
        let skill_dir_count = skill_dirs.len();
        skill_dirs.truncate(MAX_LISTED_DIRECTORIES);
        match (node.kind, node.content) {
            (Kind::File, Content::Kept(skill_md)) => Ok(Located {
                skill_md,
                path: target,
                skill_dirs,
                skill_dir_count,
                files,
            }),
            (Kind::File, Content::Oversized(size)) => Err(OciError::InvalidSkill {
                summary: format!(
                    "{SKILL_FILE} is {size} bytes, over the limit of {} bytes",
                    agentic_skill::MAX_SKILL_MD_BYTES
                ),
                path: target,
            }),
            (kind @ (Kind::Symlink | Kind::Hardlink), _) => Err(OciError::unsafe_content(format!(
                "{target} is {}; it must be a regular file",
                kind.describe()
            ))),
            (kind, _) => Err(OciError::SkillNotFound {
                message: format!("it is {}, not a regular file", kind.describe()),
                path: target,
            }),
        }
    }
}

impl SkillLocator {
    /// The regular files of the skill directory after all layers (the `SKILL.md` stays for
    /// [`SkillLocator::finish`]). A symlink or hardlink in it is refused: written to disk it
    /// could point anywhere.
    fn take_files(&mut self) -> Result<Vec<SkillFile>, OciError> {
        let mut files = Vec::new();
        let paths: Vec<String> = self
            .tree
            .keys()
            .filter(|path| self.in_skill_dir(path).is_some())
            .cloned()
            .collect();
        for path in paths {
            let Some(relative) = self.in_skill_dir(&path).map(str::to_string) else {
                continue;
            };
            let target = path == self.target;
            let Some(node) = self.tree.get_mut(&path) else {
                continue;
            };
            match (node.kind, &mut node.content) {
                (Kind::Directory, _) => {}
                (Kind::File, Content::Kept(bytes)) => files.push(SkillFile {
                    path: relative,
                    // The SKILL.md is judged by `finish`, which needs its bytes.
                    bytes: if target {
                        bytes.clone()
                    } else {
                        std::mem::take(bytes)
                    },
                    executable: node.executable,
                }),
                // An oversized SKILL.md: `finish` says so.
                (Kind::File, _) => {}
                (kind @ (Kind::Symlink | Kind::Hardlink), _) => {
                    return Err(OciError::unsafe_content(format!(
                        "{path} is {}; a pulled skill holds regular files only",
                        kind.describe()
                    )));
                }
            }
        }
        Ok(files)
    }
}

/// Checks a SkillCard `subPath`: the rules every source shares
/// ([`agentic_skill::check_sub_path`]), and no OCI whiteout names.
pub(crate) fn validate_sub_path(sub_path: &str) -> Result<(), OciError> {
    let invalid = |message: String| OciError::InvalidSubPath {
        sub_path: sub_path.to_string(),
        message,
    };
    agentic_skill::check_sub_path(sub_path).map_err(invalid)?;
    if sub_path
        .split('/')
        .any(|segment| segment.starts_with(".wh."))
    {
        return Err(invalid("'.wh.' names are OCI whiteouts".to_string()));
    }
    Ok(())
}

/// Image-relative form of an entry path: `./` prefixes and `.` segments dropped, trailing
/// slashes removed. `None` is the root itself. Absolute paths and `..` segments are refused:
/// image builders never produce them, and runtimes disagree on what they would mean.
fn normalize_entry_path(raw: &[u8]) -> Result<Option<String>, OciError> {
    let text = String::from_utf8_lossy(raw);
    // Runtimes take paths as bytes: a lossy decoding could make two different files one.
    if std::str::from_utf8(raw).is_err() {
        return Err(OciError::unsafe_content(format!(
            "entry path {text:?} is not valid UTF-8"
        )));
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(OciError::unsafe_content(format!(
            "entry path {:?}… is longer than {MAX_PATH_BYTES} bytes",
            text.chars().take(64).collect::<String>()
        )));
    }
    if raw.contains(&0) {
        return Err(OciError::unsafe_content(format!(
            "entry path {text:?} contains a NUL byte"
        )));
    }
    if text.starts_with('/') {
        return Err(OciError::unsafe_content(format!(
            "entry path {text:?} is absolute"
        )));
    }
    let mut segments = Vec::new();
    for segment in text.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                return Err(OciError::unsafe_content(format!(
                    "entry path {text:?} contains '..' and could escape the image root"
                )));
            }
            segment => segments.push(segment),
        }
    }
    Ok((!segments.is_empty()).then(|| segments.join("/")))
}

/// Refuses the PAX records Go's reader parses as numbers when they do not parse: containerd
/// would fail the layer that this reader accepted.
fn check_pax_number(key: &[u8], value: &[u8]) -> Result<(), Stop> {
    let valid = match key {
        b"size" | b"uid" | b"gid" => std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .is_some(),
        b"mtime" | b"atime" | b"ctime" => std::str::from_utf8(value).ok().is_some_and(|v| {
            let (seconds, fraction) = v.split_once('.').unwrap_or((v, ""));
            seconds.parse::<i64>().is_ok() && fraction.bytes().all(|b| b.is_ascii_digit())
        }),
        _ => true,
    };
    if valid {
        Ok(())
    } else {
        Err(OciError::unsafe_content(format!(
            "PAX record {}={:?} is not a number",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(value)
        ))
        .into())
    }
}

/// What follows the zero block that ended the archive. Go's reader, which containerd
/// unpacks with, ends only at two zero blocks (or at the end of the stream right after one)
/// and fails the layer when data follows a lone zero block, where this reader stopped early.
fn check_end_of_archive(mut rest: impl Read) -> Result<(), Stop> {
    let mut block = [0u8; 512];
    let mut filled = 0;
    while filled < block.len() {
        match rest.read(&mut block[filled..]).map_err(Stop::Io)? {
            0 => break,
            n => filled += n,
        }
    }
    if filled == 0 || (filled == block.len() && block.iter().all(|&b| b == 0)) {
        return Ok(());
    }
    Err(OciError::unsafe_content(
        "data follows a single zero block, which Go's tar reader (containerd) refuses",
    )
    .into())
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

fn trim_nul(mut bytes: Vec<u8>) -> Vec<u8> {
    if let Some(end) = bytes.iter().position(|&byte| byte == 0) {
        bytes.truncate(end);
    }
    bytes
}

/// Reads an extension record (long name, PAX header) of at most `max` bytes.
fn read_record(
    entry: &mut tar::Entry<'_, impl Read>,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, Stop> {
    let size = entry.header().entry_size().map_err(Stop::Io)?;
    if size > max {
        return Err(OciError::unsafe_content(format!(
            "{what} record of {size} bytes, over the limit of {max}"
        ))
        .into());
    }
    let mut record = Vec::new();
    entry.take(max).read_to_end(&mut record).map_err(Stop::Io)?;
    Ok(record)
}

fn read_skill_md(entry: &mut tar::Entry<'_, impl Read>) -> Result<Content, Stop> {
    let size = entry.header().entry_size().map_err(Stop::Io)?;
    let max = agentic_skill::MAX_SKILL_MD_BYTES;
    if size > max {
        return Ok(Content::Oversized(size));
    }
    let mut bytes = Vec::new();
    entry.take(max).read_to_end(&mut bytes).map_err(Stop::Io)?;
    Ok(Content::Kept(bytes))
}

/// Picks the decoder from the first bytes of the blob (media types are advisory).
fn decompress<'a, R: Read + 'a>(
    mut compressed: R,
    blob: &LayerBlob,
) -> Result<Box<dyn Read + 'a>, Stop> {
    let mut magic = Vec::with_capacity(ZSTD_MAGIC.len());
    (&mut compressed)
        .take(ZSTD_MAGIC.len() as u64)
        .read_to_end(&mut magic)
        .map_err(Stop::Io)?;
    if magic == ZSTD_MAGIC {
        return Err(OciError::invalid_image(format!(
            "layer {} is zstd-compressed; skill images use gzip or plain tar layers",
            blob.digest
        ))
        .into());
    }
    let is_gzip = magic.starts_with(&GZIP_MAGIC);
    let stream = Cursor::new(magic).chain(compressed);
    Ok(if is_gzip {
        Box::new(MultiGzDecoder::new(stream))
    } else {
        Box::new(stream)
    })
}

/// Counts, hashes and bounds the compressed bytes of one blob.
struct VerifyingReader<'b, R> {
    inner: R,
    blob: &'b LayerBlob,
    hasher: Sha256,
    read: u64,
    /// Set when the source failed or sent more than the descriptor's size; it explains the
    /// I/O error the readers above will see.
    failure: Option<OciError>,
}

impl<'b, R: Read> VerifyingReader<'b, R> {
    fn new(inner: R, blob: &'b LayerBlob) -> Self {
        VerifyingReader {
            inner,
            blob,
            hasher: Sha256::new(),
            read: 0,
            failure: None,
        }
    }

    fn mismatch(&self, actual: String) -> OciError {
        OciError::DigestMismatch {
            reference: self.blob.name.clone(),
            expected: format!("{} ({} bytes)", self.blob.digest, self.blob.size),
            actual,
        }
    }

    fn verify(&mut self) -> Result<(), OciError> {
        if self.read != self.blob.size {
            return Err(self.mismatch(format!("{} bytes", self.read)));
        }
        let actual = format!("sha256:{}", hex::encode(self.hasher.clone().finalize()));
        if actual != self.blob.digest {
            return Err(self.mismatch(actual));
        }
        Ok(())
    }
}

impl<R: Read> Read for VerifyingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failure.is_some() {
            return Err(io::Error::other("layer stream already failed"));
        }
        let count = match self.inner.read(buf) {
            Ok(count) => count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => return Err(error),
            Err(error) => {
                self.failure = Some(OciError::RegistryUnavailable {
                    image: self.blob.name.clone(),
                    message: format!("reading the layer failed: {error}"),
                });
                return Err(error);
            }
        };
        self.read += count as u64;
        if self.read > self.blob.size {
            self.failure = Some(self.mismatch(format!("more than {} bytes", self.blob.size)));
            return Err(io::Error::other("layer longer than its descriptor"));
        }
        self.hasher.update(&buf[..count]);
        Ok(count)
    }
}

/// Bounds the uncompressed bytes handed to the tar parser.
struct BudgetReader<R> {
    inner: R,
    remaining: u64,
    used: u64,
    exceeded: bool,
}

impl<R: Read> BudgetReader<R> {
    fn new(inner: R, budget: u64) -> Self {
        BudgetReader {
            inner,
            remaining: budget,
            used: 0,
            exceeded: false,
        }
    }
}

impl<R: Read> Read for BudgetReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Ask for one byte more than the budget so that crossing it is noticed.
        let allowed = usize::try_from(self.remaining.saturating_add(1)).unwrap_or(usize::MAX);
        let window = buf.len().min(allowed);
        let count = self.inner.read(&mut buf[..window])?;
        if count as u64 > self.remaining {
            self.exceeded = true;
            return Err(io::Error::other("uncompressed size limit reached"));
        }
        self.remaining -= count as u64;
        self.used += count as u64;
        Ok(count)
    }
}

#[cfg(test)]
mod tests;
