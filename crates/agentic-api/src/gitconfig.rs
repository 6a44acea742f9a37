//! The git identity a run's agent commits with.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// What `userName` may hold: no control characters, no `<` or `>`.
pub const GIT_USER_NAME_PATTERN: &str = r"^[^<>\x00-\x1F\x7F-\x9F]+$";
/// What `userEmail` must look like: one `@` between two parts without spaces, control
/// characters, `<` or `>`.
pub const GIT_USER_EMAIL_PATTERN: &str =
    r"^[^@<>\s\x00-\x1F\x7F-\x9F]+@[^@<>\s\x00-\x1F\x7F-\x9F]+$";
/// The longest `userName`, in characters.
pub const MAX_GIT_USER_NAME: usize = 128;
/// The longest `userEmail`, in characters.
pub const MAX_GIT_USER_EMAIL: usize = 254;

/// The author of the agent's commits (git's `user.name` and `user.email`), given to the
/// sandbox as `KONVEYOR_GIT_AUTHOR_NAME` and `KONVEYOR_GIT_AUTHOR_EMAIL`. Only authorship:
/// push credentials are not part of it. Set both fields or neither; a run's `gitConfig`
/// replaces the Agent's as a whole, and an empty one counts as unset.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("has(self.userName) == has(self.userEmail)").message("set both userName and userEmail, or neither")
)]
#[serde(rename_all = "camelCase")]
pub struct GitConfig {
    /// The commit author's name: at most 128 characters, no control characters, `<` or `>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = GIT_USER_NAME_PATTERN))]
    pub user_name: Option<String>,

    /// The commit author's email address, at most 254 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 254), regex(pattern = GIT_USER_EMAIL_PATTERN))]
    pub user_email: Option<String>,
}
