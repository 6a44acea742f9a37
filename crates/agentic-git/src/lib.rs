//! Skills from git: what a SkillCard with `spec.source` needs, without a Kubernetes client.
//!
//! - [`SourceUrl::parse`] decides whether the operator fetches from a URL at all:
//!   `https://`, `git://`, and `http://` only for hosts listed as insecure.
//! - [`resolve`] turns `spec.ref` (branch, tag, full ref name, full commit id; empty for the
//!   default branch) into a commit id by listing the server's refs, fetching nothing.
//! - [`fetch_commit`] fetches exactly one commit, depth 1, into a scratch repository;
//!   [`Fetched::skill`] finds and validates the skill in its tree, and
//!   [`Fetched::write_skill`] writes its files out. [`validate_commit`] does both for the
//!   controller, and [`SkillCache`] keeps its lasting verdicts.
//! - [`Fetched::raw_commit`] hands over the commit object, checked against the pinned id,
//!   for its signature; [`ValidatedSkill::commit_object`] and [`SkillCache::commit_object`]
//!   keep it, so checking a signature after validating costs no second fetch.
//!
//! Every failure is a [`GitError`] with a stable [`GitError::reason`]. Every network step
//! has a timeout ([`GitOptions`]), every fetch and skill directory a size bound
//! ([`Limits`]). The calls block: run them on a blocking thread.
//!
//! # Choices worth knowing
//!
//! - Built on `gix` with its blocking client: `git://` on a socket of our own with read and
//!   write timeouts, HTTP(S) through reqwest with the process-wide rustls provider.
//!   Repositories are opened isolated: no system or user git configuration, credential
//!   helpers, prompts or URL rewrites take part.
//! - Commits are fetched by id (protocol v2 lets a client want any object), so what is read
//!   is the pinned commit even when the branch has moved since; the objects are checked
//!   against their ids as they are indexed.
//! - Symlinks are refused at `SKILL.md` and along the `subPath`, as in images. Inside the
//!   skill, symlinks ([`GitError::LinkInSkill`]) and `SKILL.md` files below its root
//!   ([`GitError::NestedSkillFile`]) are refused too, as in images: goose follows links out
//!   of the mounted skill and registers every `SKILL.md` it finds as a skill of its own. Submodules are left out:
//!   nothing is written for them, so goose never sees them.

mod cache;
mod error;
mod limits;
mod refs;
mod remote;
mod source;
mod tree;

pub use cache::{SkillCache, ValidatedSkill, validate_commit};
pub use error::{GitError, MAX_LISTED_DIRECTORIES};
pub use limits::{GitOptions, Limits, MAX_COMMIT_BYTES};
pub use refs::{RefKind, Resolved};
pub use remote::{fetch_commit, resolve};
pub use source::{GitAuth, SourceUrl};
pub use tree::{Fetched, SkillEntry, SkillEntryKind, SkillTree};
