//! Finding `SKILL.md` in a stack of image layers: streaming, bounded, with OCI whiteouts.
//!
//! Only what can decide the answer is remembered, within bounds that do not grow with the
//! length of names or the number of entries below the top level (see [`Limits`]): a
//! fixed-size record per top-level entry and its `X/SKILL.md`, keyed by a digest of the name;
//! the names of the first skill directories in sorted order; the `subPath` with its
//! ancestors; and the first entry below the skill's root that would change the agent's skill
//! set. Everything else is checked for safety and skipped. The one file content kept in
//! memory is the `SKILL.md` being looked for, unless the locator
//! [collects](SkillLocator::collecting) the skill's files for `skill pull`: then every file of
//! the skill directory is kept too, within [`Limits::max_uncompressed_bytes`].
//!
//! The archive is parsed in raw mode (extension records are handled here, with their own size
//! caps) and with the same precedence rules as Go's `archive/tar`, which containerd and CRI-O
//! use to unpack, so that what is validated here is what a pod gets to see.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Cursor, Read};

use agentic_skill::SkillVerdict;
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
    /// Top-level directories holding a `SKILL.md`, sorted, at most [`MAX_LISTED_DIRECTORIES`]
    /// (the first ones, unless upper layers deleted some of those kept).
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
    layer: u32,
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
    layers: u32,
    entries: u64,
    uncompressed: u64,
    /// The `subPath`, its ancestors and the `SKILL.md` looked for, by path; when collecting,
    /// the skill directory's entries too.
    tree: BTreeMap<String, Node>,
    /// Every top-level entry and `X/SKILL.md`, in fixed-size records.
    top: TopLevel,
    /// The first entry below the skill's root that would change the agent's skill set, in
    /// any layer (an upper layer deleting it does not make it acceptable).
    intruder: Option<Intruder>,
    /// The layer whose root opaque whiteout was applied: lower entries are already gone.
    root_opaqued_in: u32,
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
            top: TopLevel::new(limits.max_skills.max(MAX_LISTED_DIRECTORIES)),
            intruder: None,
            root_opaqued_in: 0,
        }
    }

    /// Keeps the content of every regular file in the skill directory, for
    /// [`Located::files`].
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
        // Layers are numbered in a u32 to keep the per-entry records small.
        if self.layers as usize >= self.limits.max_layers || self.layers == u32::MAX {
            return Err(OciError::too_large(format!(
                "more than {} layers (Limits::max_layers)",
                self.limits.max_layers
            )));
        }
        self.layers += 1;
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
                // Past the archive's end too: containerd reads every layer to its end (it
                // checks the layer's uncompressed digest), and so meets gzip's checksum. A
                // layer whose stream is corrupt after the skill's bytes would not mount.
                let archive = self.read_archive(&mut uncompressed, layer).and_then(|()| {
                    io::copy(&mut uncompressed, &mut io::sink())
                        .map(drop)
                        .map_err(Stop::Io)
                });
                let outcome = match archive {
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

    fn read_archive(&mut self, reader: impl Read, layer: u32) -> Result<(), Stop> {
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
                    .map(std::borrow::Cow::into_owned),
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
        layer: u32,
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
                if parent.is_empty() {
                    // Everything lower is gone after the first one in this layer.
                    if self.root_opaqued_in == layer {
                        return Ok(());
                    }
                    self.root_opaqued_in = layer;
                }
                self.remove_lower_descendants(parent, &TopPath::of(parent), layer);
            } else if hidden.is_empty() {
                return Err(
                    OciError::unsafe_content(format!("whiteout {path} names no file")).into(),
                );
            } else if !hidden.starts_with(".wh.") {
                let target = join(parent, hidden);
                let at = TopPath::of(&target);
                // The spec hides only lower layers, but containerd's non-overlay unpacker also
                // removes what the same layer wrote before: refuse rather than guess.
                if self.has_entries_of_layer(&target, &at, layer) {
                    return Err(OciError::unsafe_content(format!(
                        "whiteout of {target} follows an entry for it in the same layer"
                    ))
                    .into());
                }
                self.remove_lower(&target, &at, layer);
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

        self.note_intruder(&path, name, kind);
        self.top.add(&TopPath::of(&path), kind, layer);
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
            self.remove_lower_tree_descendants(&path, layer);
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

    /// Whether `path` goes into the tree: the `subPath` with its ancestors and its
    /// `SKILL.md` (the image's `SKILL.md` without one), and what is collected.
    fn is_tracked(&self, path: &str) -> bool {
        path == self.target
            || (self.collect && self.in_skill_dir(path).is_some())
            || self.sub_path.as_deref().is_some_and(|sub_path| {
                sub_path == path
                    || sub_path
                        .strip_prefix(path)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }

    /// Remembers `path` when it is the first entry below the skill's root that would change
    /// which skills the agent loads. In any layer: skill images never need one only to delete
    /// it above, and keeping the first one costs one path whatever the image holds.
    fn note_intruder(&mut self, path: &str, name: &str, kind: Kind) {
        if self.intruder.is_some() {
            return;
        }
        let Some(relative) = self.in_skill_dir(path) else {
            return;
        };
        self.intruder = match kind {
            Kind::Symlink | Kind::Hardlink => Some(Intruder::Link(path.to_string(), kind)),
            Kind::File if name == SKILL_FILE && relative != SKILL_FILE => {
                Some(Intruder::NestedSkillFile(path.to_string()))
            }
            _ => None,
        };
    }

    /// Whether `layer` itself put anything at or under `path` (`at` is where it sits in the
    /// top-level records).
    fn has_entries_of_layer(&self, path: &str, at: &TopPath<'_>, layer: u32) -> bool {
        let under = format!("{path}/");
        self.top.has_entries_of_layer(at, layer)
            || self.tree.get(path).is_some_and(|node| node.layer == layer)
            || self
                .tree
                .range(under.clone()..)
                .take_while(|(candidate, _)| candidate.starts_with(&under))
                .any(|(_, node)| node.layer == layer)
    }

    /// Removes `path` and everything under it, as far as layers below `layer` put them there.
    fn remove_lower(&mut self, path: &str, at: &TopPath<'_>, layer: u32) {
        if self.tree.get(path).is_some_and(|node| node.layer < layer) {
            self.tree.remove(path);
        }
        self.remove_lower_tree_descendants(path, layer);
        self.top.remove_lower(at, layer);
    }

    /// Removes what layers below `layer` put under `dir` (`""` is the image root).
    fn remove_lower_descendants(&mut self, dir: &str, at: &TopPath<'_>, layer: u32) {
        self.remove_lower_tree_descendants(dir, layer);
        self.top.remove_lower_descendants(at, layer);
    }

    /// Removes from the tree what layers below `layer` put under `dir`.
    fn remove_lower_tree_descendants(&mut self, dir: &str, layer: u32) {
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

    /// Where the skills of the image are after all layers, for a locator made without a
    /// `subPath`: a `SKILL.md` at the root makes the image one skill; otherwise every
    /// top-level directory holding a `SKILL.md` is one, and more than
    /// [`Limits::max_skills`] is [`OciError::TooManySkills`]. Whether each is valid is for
    /// the reader of that skill to say.
    pub(crate) fn listing(&self) -> Result<Listing, OciError> {
        if self.top.is_root_skill() {
            return Ok(Listing {
                root: true,
                directories: Vec::new(),
            });
        }
        let (directories, count) = self.top.skill_directories();
        let max = self.limits.max_skills;
        if count > max {
            return Err(OciError::TooManySkills { count, max });
        }
        if directories.len() < count {
            // Names past the kept ones were let go while lower layers held more skill
            // directories than that; upper layers deleted some since.
            return Err(OciError::too_large(format!(
                "its layers add more than {max} skill directories before upper layers delete some (Limits::max_skills)"
            )));
        }
        Ok(Listing {
            root: false,
            directories,
        })
    }

    /// The skill after all layers: its `SKILL.md` bytes and the skill directories present.
    pub(crate) fn finish(mut self) -> Result<Located, OciError> {
        self.check_path_to_skill()?;
        let (mut skill_dirs, skill_dir_count) = self.top.skill_directories();
        let Some(node) = self.tree.remove(&self.target) else {
            return Err(self.not_found(skill_dirs, skill_dir_count));
        };
        let target = &self.target;
        let skill_md = match (node.kind, node.content) {
            (Kind::File, Content::Kept(skill_md)) => Ok(skill_md),
            (Kind::File, Content::Oversized(size)) => {
                Err(OciError::Skill(SkillVerdict::InvalidSkill {
                    summary: format!(
                        "{SKILL_FILE} is {size} bytes, over the limit of {} bytes",
                        agentic_skill::MAX_SKILL_MD_BYTES
                    ),
                    path: target.clone(),
                }))
            }
            (kind @ (Kind::Symlink | Kind::Hardlink), _) => {
                return Err(OciError::unsafe_content(format!(
                    "{target} is {}; it must be a regular file",
                    kind.describe()
                )));
            }
            (kind, _) => {
                return Err(OciError::Skill(SkillVerdict::SkillNotFound {
                    message: format!("it is {}, not a regular file", kind.describe()),
                    path: target.clone(),
                }));
            }
        };
        if let Some(intruder) = self.intruder.take() {
            return Err(intruder.into_error(self.sub_path.as_deref()));
        }
        let skill_md = skill_md?;
        let files = if self.collect {
            self.take_files(&skill_md, node.executable)
        } else {
            Vec::new()
        };
        skill_dirs.truncate(MAX_LISTED_DIRECTORIES);
        Ok(Located {
            path: self.target,
            skill_md,
            skill_dirs,
            skill_dir_count,
            files,
        })
    }

    /// Refuses a `subPath` that goes through something other than directories.
    fn check_path_to_skill(&self) -> Result<(), OciError> {
        let Some(sub_path) = &self.sub_path else {
            return Ok(());
        };
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
                    return Err(OciError::Skill(SkillVerdict::SkillNotFound {
                        path: self.target.clone(),
                        message: format!("{ancestor} is {}, not a directory", kind.describe()),
                    }));
                }
            }
        }
        Ok(())
    }

    /// Why there is no `SKILL.md` at the target, given the image's skill directories (the
    /// first names kept, and how many there are).
    fn not_found(&self, skill_dirs: Vec<String>, total: usize) -> OciError {
        let message = match &self.sub_path {
            None if total > 0 => return OciError::sub_path_required(skill_dirs, total),
            None => "the image has no SKILL.md at its root and no top-level directory holding one"
                .to_string(),
            Some(_) if total == 0 => "the image holds no SKILL.md there".to_string(),
            Some(_) => {
                let listed = skill_dirs.len().min(MAX_LISTED_DIRECTORIES);
                format!(
                    "the image's {total} skill directories are: {}{}",
                    skill_dirs[..listed].join(", "),
                    if total > listed { ", …" } else { "" }
                )
            }
        };
        OciError::Skill(SkillVerdict::SkillNotFound {
            path: self.target.clone(),
            message,
        })
    }

    /// The regular files of the skill directory after all layers, its `SKILL.md` (already
    /// taken from the tree) among them, sorted by path. Links cannot be among them: the first
    /// one in the skill directory refused the image before.
    fn take_files(&mut self, skill_md: &[u8], executable: bool) -> Vec<SkillFile> {
        let mut files = vec![SkillFile {
            path: SKILL_FILE.to_string(),
            bytes: skill_md.to_vec(),
            executable,
        }];
        for (path, node) in std::mem::take(&mut self.tree) {
            let Some(relative) = self.in_skill_dir(&path) else {
                continue;
            };
            if let (Kind::File, Content::Kept(bytes)) = (node.kind, node.content) {
                files.push(SkillFile {
                    path: relative.to_string(),
                    bytes,
                    executable: node.executable,
                });
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }
}

/// A digest of a top-level name: a record costs the same whatever the length of its name.
type NameKey = [u8; 16];

fn name_key(name: &str) -> NameKey {
    let digest = Sha256::digest(name.as_bytes());
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Where an entry path sits among the top-level records.
#[derive(Debug)]
enum TopPath<'p> {
    /// The image root.
    Root,
    /// A top-level entry.
    Entry { name: &'p str, key: NameKey },
    /// `SKILL.md` inside a top-level entry.
    SkillMd { dir: &'p str, key: NameKey },
    /// Anything deeper, which no record covers.
    Deeper,
}

impl<'p> TopPath<'p> {
    fn of(path: &'p str) -> Self {
        match path.split_once('/') {
            _ if path.is_empty() => TopPath::Root,
            None => TopPath::Entry {
                name: path,
                key: name_key(path),
            },
            Some((dir, SKILL_FILE)) => TopPath::SkillMd {
                dir,
                key: name_key(dir),
            },
            Some(_) => TopPath::Deeper,
        }
    }
}

/// An entry in a record: what it is and which layer put it there.
#[derive(Debug, Clone, Copy)]
struct Slot {
    kind: Kind,
    layer: u32,
}

/// A top-level name `X`: the entry `X` and the entry `X/SKILL.md`, when there are such.
#[derive(Debug, Default, Clone, Copy)]
struct TopRecord {
    entry: Option<Slot>,
    skill_md: Option<Slot>,
}

impl TopRecord {
    /// `X` is a directory (or only implied by its content) with a `SKILL.md` that is not.
    fn is_skill_dir(&self) -> bool {
        self.skill_md
            .is_some_and(|slot| slot.kind != Kind::Directory)
            && self.entry.is_none_or(|slot| slot.kind == Kind::Directory)
    }

    fn is_empty(&self) -> bool {
        self.entry.is_none() && self.skill_md.is_none()
    }
}

/// The image's top level as the layers applied so far left it, in memory that does not grow
/// with the length of names: one [`TopRecord`] per top-level name, keyed by a digest of the
/// name (at most [`Limits::max_entries`] of them), and the names of the first skill
/// directories in sorted order.
#[derive(Debug)]
struct TopLevel {
    records: HashMap<NameKey, TopRecord>,
    /// The smallest names of top-level directories given a `SKILL.md` (not a directory), at
    /// most `capacity`. A name whose `SKILL.md` goes leaves; one let go to make room for a
    /// smaller name does not come back, and then fewer names than skill directories remain.
    names: BTreeSet<String>,
    capacity: usize,
}

impl TopLevel {
    fn new(capacity: usize) -> Self {
        TopLevel {
            records: HashMap::new(),
            names: BTreeSet::new(),
            capacity,
        }
    }

    /// An entry of `layer` at `at`. It replaces what lower layers had under it; only a
    /// directory over a directory merges with what lies below.
    fn add(&mut self, at: &TopPath<'_>, kind: Kind, layer: u32) {
        let slot = Some(Slot { kind, layer });
        match *at {
            TopPath::Entry { name, key } => {
                let record = self.records.entry(key).or_default();
                record.entry = slot;
                if kind != Kind::Directory
                    && record
                        .skill_md
                        .take_if(|skill_md| skill_md.layer < layer)
                        .is_some()
                {
                    self.names.remove(name);
                }
            }
            TopPath::SkillMd { dir, key } => {
                self.records.entry(key).or_default().skill_md = slot;
                if kind == Kind::Directory {
                    self.names.remove(dir);
                } else {
                    self.keep_name(dir);
                }
            }
            TopPath::Root | TopPath::Deeper => {}
        }
    }

    /// Keeps `name` if it is among the `capacity` smallest.
    fn keep_name(&mut self, name: &str) {
        let full = self.names.len() >= self.capacity;
        if self.names.contains(name)
            || (full
                && self
                    .names
                    .last()
                    .is_none_or(|largest| largest.as_str() < name))
        {
            return;
        }
        self.names.insert(name.to_string());
        if self.names.len() > self.capacity {
            self.names.pop_last();
        }
    }

    fn has_entries_of_layer(&self, at: &TopPath<'_>, layer: u32) -> bool {
        let of_layer = |slot: Option<Slot>| slot.is_some_and(|slot| slot.layer == layer);
        match at {
            TopPath::Entry { key, .. } => self
                .records
                .get(key)
                .is_some_and(|record| of_layer(record.entry) || of_layer(record.skill_md)),
            TopPath::SkillMd { key, .. } => self
                .records
                .get(key)
                .is_some_and(|record| of_layer(record.skill_md)),
            TopPath::Root | TopPath::Deeper => false,
        }
    }

    /// A whiteout of `at` in `layer`: what lower layers put at or under it goes.
    fn remove_lower(&mut self, at: &TopPath<'_>, layer: u32) {
        let (name, key, whole) = match *at {
            TopPath::Entry { name, key } => (name, key, true),
            TopPath::SkillMd { dir, key } => (dir, key, false),
            TopPath::Root | TopPath::Deeper => return,
        };
        let Some(record) = self.records.get_mut(&key) else {
            return;
        };
        if whole {
            record.entry.take_if(|entry| entry.layer < layer);
        }
        if record
            .skill_md
            .take_if(|skill_md| skill_md.layer < layer)
            .is_some()
        {
            self.names.remove(name);
        }
        if record.is_empty() {
            self.records.remove(&key);
        }
    }

    /// What lower layers put under the directory `at` goes (an opaque whiteout, or an entry
    /// that is not a directory replacing it).
    fn remove_lower_descendants(&mut self, at: &TopPath<'_>, layer: u32) {
        match *at {
            TopPath::Root => {
                self.records.retain(|_, record| {
                    record.entry.take_if(|entry| entry.layer < layer);
                    record.skill_md.take_if(|skill_md| skill_md.layer < layer);
                    !record.is_empty()
                });
                let records = &self.records;
                self.names.retain(|name| {
                    records
                        .get(&name_key(name))
                        .is_some_and(|record| record.skill_md.is_some())
                });
            }
            // Under a top-level directory only its `SKILL.md` is recorded: what a whiteout of
            // that file removes.
            TopPath::Entry { name, key } => {
                self.remove_lower(&TopPath::SkillMd { dir: name, key }, layer);
            }
            TopPath::SkillMd { .. } | TopPath::Deeper => {}
        }
    }

    /// A `SKILL.md` at the image root (not a directory).
    fn is_root_skill(&self) -> bool {
        self.records
            .get(&name_key(SKILL_FILE))
            .and_then(|record| record.entry)
            .is_some_and(|entry| entry.kind != Kind::Directory)
    }

    /// The names kept of the top-level skill directories, sorted, and how many there are.
    fn skill_directories(&self) -> (Vec<String>, usize) {
        let count = self
            .records
            .values()
            .filter(|record| record.is_skill_dir())
            .count();
        let names = self
            .names
            .iter()
            .filter(|name| {
                self.records
                    .get(&name_key(name))
                    .is_some_and(TopRecord::is_skill_dir)
            })
            .cloned()
            .collect();
        (names, count)
    }
}

/// The first entry below a skill's root that would change which skills the agent loads.
#[derive(Debug)]
enum Intruder {
    /// A `SKILL.md` below the root: agents register every `SKILL.md` they find (goose at
    /// any depth, the first found winning a name), so it would be a skill nobody validated.
    NestedSkillFile(String),
    /// A symlink or hardlink: agents follow links, out of the mounted skill too.
    Link(String, Kind),
}

impl Intruder {
    fn into_error(self, sub_path: Option<&str>) -> OciError {
        let root = sub_path.unwrap_or("the image root");
        match self {
            Intruder::NestedSkillFile(path) => OciError::NestedSkillFile {
                path,
                root: root.to_string(),
            },
            Intruder::Link(path, kind) => OciError::LinkInSkill {
                path,
                kind: kind.describe().to_string(),
                root: root.to_string(),
            },
        }
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
