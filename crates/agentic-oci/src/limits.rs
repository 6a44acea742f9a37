//! Bounds on what reading an image may cost.

/// Bounds on the work and memory spent reading one skill image.
///
/// Layers are streamed, never held whole: memory stays around the size of one network chunk,
/// one tar header and the `SKILL.md` being looked for (at most
/// [`agentic_skill::MAX_SKILL_MD_BYTES`]), plus one small record per top-level entry. These
/// limits bound the rest: how much is downloaded, decompressed and parsed. An image over a
/// limit fails with [`OciError::ImageTooLarge`](crate::OciError::ImageTooLarge) naming it.
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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_layers: 32,
            max_layer_bytes: 64 * 1024 * 1024,
            max_uncompressed_bytes: 256 * 1024 * 1024,
            max_entries: 100_000,
            max_index_manifests: 16,
        }
    }
}

/// Longest entry path accepted (Linux `PATH_MAX`), also the cap on GNU long-name records.
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// Largest PAX extended header accepted; real ones carry a few paths and attributes.
pub(crate) const MAX_PAX_HEADER_BYTES: u64 = 64 * 1024;

/// Skill directory names kept in [`OciError::SubPathRequired`](crate::OciError) and
/// [`SkillContent::skill_dirs`](crate::SkillContent): an image may hold thousands.
pub const MAX_LISTED_DIRECTORIES: usize = 32;

/// Longest message kept from a registry's answer (error bodies, causes).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;

/// Largest manifest or index read, checked against `Content-Length` before reading and while
/// reading. Distribution refuses to store larger ones too.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
