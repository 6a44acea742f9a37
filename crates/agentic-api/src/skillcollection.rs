use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::SkillType;

/// Label on every SkillCard a SkillCollection generated, naming the collection (shortened
/// with a hash when the collection's name is not a valid label value).
pub const SKILL_COLLECTION_LABEL: &str = "konveyor.io/skillcollection";

/// Label that makes a SkillCollection a default for Agents: with the value `"true"`, its
/// skills go to every Agent of its namespace, and to every Agent of the cluster when it is in
/// the operator's `--default-skills-namespace`.
pub const DEFAULT_SKILLS_LABEL: &str = "konveyor.io/default-skills";

/// Label naming who manages an object. Konveyor's Hub refuses console edits and deletes
/// (409) of the objects whose value is [`DEFAULTS_MANAGER`]: the defaults an operator
/// installs and re-applies, so that a change there would be undone.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The [`MANAGED_BY_LABEL`] value of the defaults an operator installs: the SkillCards the
/// operator generates for the cluster's default-skills SkillCollections.
pub const DEFAULTS_MANAGER: &str = "agentic-controller-defaults";

/// The desired state of the SkillCollection.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "SkillCollection",
    doc = "A SkillCollection is a group of skills an Agent can use at once: either one OCI image holding several skills, which the operator lists through the registry API and turns into one SkillCard per skill, or an explicit list of SkillCards, images and git sources. It is Ready when every one of its SkillCards is Ready.",
    namespaced,
    status = "SkillCollectionStatus",
    shortname = "scol",
    category = "konveyor",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        priority = "1"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.image) != has(self.skills)").message("set exactly one of spec.image or spec.skills")
)]
#[serde(rename_all = "camelCase")]
pub struct SkillCollectionSpec {
    /// Version label of the collection, informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// `skill` (default) or `rule`: how the agent uses every skill listed from `image`.
    /// Entries of `skills` carry their own `type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub skill_type: Option<SkillType>,

    /// OCI image holding one or more skills: a `SKILL.md` at its root, or one top-level
    /// directory with a `SKILL.md` per skill. The operator resolves it to a digest, lists the
    /// skills through the registry API and owns one SkillCard per skill, named
    /// `<collection>-<directory>`, pinned to that digest with `subPath` set. Tags are listed
    /// again every tag refresh; SkillCards of skills gone from the image are deleted. Read
    /// without credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,

    /// An explicit list of skills. A `skillCardRef` entry uses that SkillCard as it is; an
    /// `image` or `source` entry gets a SkillCard owned by the collection, named
    /// `<collection>-<name>`. At most 256 entries, the most skills one collection holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub skills: Option<Vec<SkillCollectionSkill>>,
}

/// One skill of a SkillCollection: exactly one of `skillCardRef`, `image` or `source`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("[has(self.skillCardRef), has(self.image), has(self.source)].filter(x, x).size() == 1").message("exactly one of skillCardRef, image or source must be set")
)]
#[serde(rename_all = "camelCase")]
pub struct SkillCollectionSkill {
    /// Name of this entry within the collection; a generated SkillCard is named
    /// `<collection>-<name>`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Name of a SkillCard in this namespace. The collection uses it and never changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub skill_card_ref: Option<String>,

    /// OCI image holding the skill (with `subPath` for one skill of several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,

    /// Git repository URL holding the skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub source: Option<String>,

    /// Git branch, tag or commit of `source`; ignored for the other kinds of entry.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub git_ref: Option<String>,

    /// Directory of the skill inside `image` or `source`; ignored with `skillCardRef`. No
    /// leading `/` and no `..` segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(
        validation = Rule::new("!self.startsWith('/')").message("subPath must be relative: it must not start with '/'"),
        validation = Rule::new("!self.matches('(^|/)[.][.](/|$)')").message("subPath must not contain '..' segments (Konveyor's schema takes them, but a path out of the image or repository can never hold the skill)")
    )]
    pub sub_path: Option<String>,

    /// `skill` (default) or `rule` for a generated SkillCard; a `skillCardRef` keeps the
    /// card's own type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub skill_type: Option<SkillType>,
}

/// The observed state of a SkillCollection.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SkillCollectionStatus {
    /// Names of the collection's SkillCards, sorted: the ones it generated and the ones its
    /// `skillCardRef` entries name. Agents listing the collection get exactly these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub resolved_skills: Vec<String>,

    /// The image the skills were listed from, as `repository@sha256:...`. (An
    /// agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<String>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` tells whether every skill of the collection is Ready; its message names the
    /// ones that are not, with their reasons.
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
