//! Bounds on what reading an image may cost.

/// Bounds on the work and memory spent reading one skill image.
///
/// Layers are streamed, never held whole. What a read keeps does not grow with the length of
/// entry names or the number of entries below the top level:
///
/// - the `SKILL.md` being looked for, at most [`agentic_skill::MAX_SKILL_MD_BYTES`];
/// - one fixed-size record per top-level entry (a digest of its name, never the name), at
///   most [`TOP_LEVEL_RECORD_BYTES`] each, so at most `max_entries` of them;
/// - the names of the first skill directories in sorted order, at most
///   `max(max_skills, MAX_LISTED_DIRECTORIES)` of them;
/// - the entries along the `subPath` and the first entry found below the skill's root that
///   would change the agent's skill set (a nested `SKILL.md`, a link);
/// - the decoder's window and one network chunk per layer being read;
/// - the manifest being read (at most [`MAX_MANIFEST_BYTES`]) and, for an index, the index:
///   at most [`MAX_DESCRIPTORS`] descriptors of each are parsed, the rest only counted.
///
/// [`Limits::memory_bound`] adds these up. These limits also bound the work: how much is
/// downloaded, decompressed and parsed. An image over a limit fails with
/// [`OciError::ImageTooLarge`](crate::OciError::ImageTooLarge) naming it.
///
/// The total uncompressed bound also stops decompression bombs: decompression ends as soon as
/// it is crossed, whatever the compression ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Layers in one image manifest. Default 32.
    pub max_layers: usize,
    /// Compressed bytes of any one layer, checked against its descriptor before downloading
    /// and while streaming. Default 64 MiB.
    pub max_layer_bytes: u64,
    /// Uncompressed tar bytes over all layers together. Default 256 MiB.
    pub max_uncompressed_bytes: u64,
    /// Tar headers over all layers together (files, directories, links, whiteouts, extension
    /// headers). Default 100 000.
    pub max_entries: u64,
    /// Platform manifests of one image index, each read and validated. Default 16.
    pub max_index_manifests: usize,
    /// Skill directories one image may list for a SkillCollection, each of which becomes a
    /// SkillCard; more is [`OciError::TooManySkills`](crate::OciError::TooManySkills).
    /// Default 256, the most skills one collection may hold. Reading one skill (with or
    /// without a `subPath`) only counts them.
    pub max_skills: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_layers: 32,
            max_layer_bytes: 64 * 1024 * 1024,
            max_uncompressed_bytes: 256 * 1024 * 1024,
            max_entries: 100_000,
            max_index_manifests: 16,
            max_skills: 256,
        }
    }
}

impl Limits {
    /// The most memory one read of an image keeps within these limits, in bytes, whatever
    /// the image holds: the sum of what [`Limits`] lists. With the defaults, about 32 MiB,
    /// 12 MiB of it for the largest manifests a registry may serve.
    pub fn memory_bound(&self) -> u64 {
        let path = MAX_PATH_BYTES as u64;
        let entries = self.max_entries.saturating_mul(TOP_LEVEL_RECORD_BYTES);
        let names = (self.max_skills.max(MAX_LISTED_DIRECTORIES) as u64)
            .saturating_mul(path + NAME_OVERHEAD_BYTES);
        // The entries along a subPath: every prefix of it, each with a tree node. Segments
        // take two bytes at least, so the prefixes add up to a quarter of a path squared.
        let sub_path = path * path / 4 + (path / 2) * NAME_OVERHEAD_BYTES;
        // The SKILL.md and the path of the first entry that changes the skill set.
        let skill = agentic_skill::MAX_SKILL_MD_BYTES + 2 * path;
        // The parsed index, and a platform manifest's body beside its parsed form; parsed
        // strings are at most as long as the JSON that held them.
        let manifests = 3 * MAX_MANIFEST_BYTES + 2 * MAX_DESCRIPTORS as u64 * DESCRIPTOR_BYTES;
        entries
            .saturating_add(names)
            .saturating_add(sub_path)
            .saturating_add(skill)
            .saturating_add(STREAM_BYTES)
            .saturating_add(manifests)
    }
}

/// Most descriptors parsed from a manifest's `layers` or an index's `manifests`: far more
/// than [`Limits`] let through, few enough that a 4 MiB manifest of tiny descriptors parses
/// into a few hundred KiB instead of tens of MiB. The rest are only counted.
pub const MAX_DESCRIPTORS: usize = 1024;

/// One parsed descriptor without its strings, with room for its list's growth.
const DESCRIPTOR_BYTES: u64 = 256;

/// What one top-level entry costs at most while an image is read: its record (a 16-byte
/// digest of the name and two small slots) in a hash table that may be twice as large as
/// its contents after growing, plus the table growing into a new one.
pub const TOP_LEVEL_RECORD_BYTES: u64 = 128;

/// Allocation and tree-node overhead of one name kept by a read, on top of its bytes.
const NAME_OVERHEAD_BYTES: u64 = 128;

/// The buffers of streaming one layer: the network chunks in flight, the gzip window and
/// tables, the tar parser's blocks and one extension record (a long name or PAX header).
const STREAM_BYTES: u64 = 1024 * 1024;

/// Longest entry path accepted (Linux `PATH_MAX`), also the cap on GNU long-name records.
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// Largest PAX extended header accepted; real ones carry a few paths and attributes.
pub(crate) const MAX_PAX_HEADER_BYTES: u64 = 64 * 1024;

/// Skill directory names kept in [`OciError::SubPathRequired`](crate::OciError) and
/// [`SkillContent::skill_dirs`](crate::SkillContent), as in the errors of git skills: an
/// image may hold thousands.
pub use agentic_skill::MAX_LISTED_DIRECTORIES;

/// Largest manifest or index read, checked against `Content-Length` before reading and while
/// reading. Distribution refuses to store larger ones too.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
