//! Skill images: packing skill directories into reproducible OCI images, pushing them, and
//! reading `SKILL.md` back from registries the way the SkillCard controller needs it.
//!
//! - [`pack_skills`] and [`push_image`] are behind `agentic-operator skill push`.
//! - [`resolve_digest`] pins a reference; [`fetch_skill`] (or [`SkillCache::fetch_skill`])
//!   streams the image's layers within [`Limits`] and returns the validated `SKILL.md`.
//! - [`list_skills`] lists the skill directories of a multi-skill image, for SkillCollections.
//! - [`RegistryAuth`] comes from pull secrets ([`DockerConfig`]) or the user's docker config.
//!
//! Every failure is an [`OciError`] with a stable [`OciError::reason`].
//!
//! # Choices worth knowing
//!
//! - Packed images are a plain OCI image manifest (no index) whose config says
//!   `linux/amd64`: containerd checks a config's platform only for manifests picked from an
//!   index and CRI-O only warns, so the image mounts as an image volume on every node.
//! - Reading an index reads every platform manifest it lists (attestations, `unknown/unknown`,
//!   aside): the image is valid only if the skill is valid, and the same, on every platform a
//!   node may pull, so the verdict does not depend on where the operator or the pod runs.
//!   [`resolve_digest`] still pins the index.
//! - Entry paths that are absolute or contain `..` make the whole image
//!   [`OciError::UnsafeImageContent`]; `./` prefixes are normalised away. Symlinks and
//!   hardlinks are refused at `SKILL.md` and along the `subPath`, and inside the skill
//!   ([`OciError::LinkInSkill`]), as is a `SKILL.md` below the skill's root
//!   ([`OciError::NestedSkillFile`]): either would change which skills an agent loads. Outside
//!   the skill of a `subPath` read they are allowed. Device nodes and FIFOs are refused
//!   anywhere.
//! - Memory stays within [`Limits::memory_bound`], whatever the number and length of the
//!   image's entries: names are kept for the top level only, as fixed-size digests, plus the
//!   first few in sorted order.
//! - Credentials match registries the way docker matches `auths` keys (`host`,
//!   `https://host`, `host/v1/`…); credential helpers are not run. Manifests are read whole up
//!   to [`MAX_MANIFEST_BYTES`]; layers are always streamed. Every manifest and layer is
//!   verified against its digest before it is used.
//! - Content is cached by registry, repository and digest: a digest validated in one
//!   repository proves nothing about another.

mod auth;
mod cache;
mod error;
mod layers;
mod limits;
mod pack;
mod reference;
mod registry;
mod resolutions;

pub use auth::{DockerConfig, RegistryAuth};
pub use cache::{CacheStats, DEFAULT_CACHE_BYTES, SkillCache};
pub use error::OciError;
pub use layers::SkillFile;
pub use limits::{
    Limits, MAX_DESCRIPTORS, MAX_LISTED_DIRECTORIES, MAX_MANIFEST_BYTES, TOP_LEVEL_RECORD_BYTES,
};
pub use pack::{
    CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, PackedImage, SKILLS_ANNOTATION,
    pack_skills,
};
pub use registry::{
    Artifact, ArtifactLimit, ArtifactRequest, Blob, RegistryClient, RegistryObserver,
    RegistryOptions, RegistryRequest, RegistryStats, ResolvedImage, SkillContent, SkillListing,
    fetch_skill, image_registry, list_skills, pull_skill, push_image, resolve_digest,
};
pub use resolutions::Resolutions;
