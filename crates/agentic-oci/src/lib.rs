//! Skill images: packing skill directories into reproducible OCI images, pushing them, and
//! reading `SKILL.md` back from registries the way the SkillCard controller needs it.
//!
//! - [`pack_skills`] and [`push_image`] are behind `agentic-operator skill push`.
//! - [`resolve_digest`] pins a reference; [`fetch_skill`] (or [`SkillCache::fetch_skill`])
//!   streams the image's layers within [`Limits`] and returns the validated `SKILL.md`.
//! - [`RegistryAuth`] comes from pull secrets ([`DockerConfig`]) or the user's docker config.
//!
//! Every failure is an [`OciError`] with a stable [`OciError::reason`].

mod auth;
mod cache;
mod error;
mod layers;
mod limits;
mod pack;
mod registry;

pub use auth::{DockerConfig, RegistryAuth};
pub use cache::{CacheStats, SkillCache};
pub use error::OciError;
pub use limits::Limits;
pub use pack::{
    CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, PackedImage, SKILLS_ANNOTATION,
    pack_skills,
};
pub use registry::{
    RegistryOptions, RegistryStats, ResolvedImage, SkillContent, fetch_skill, image_registry,
    push_image, registry_stats, resolve_digest,
};
