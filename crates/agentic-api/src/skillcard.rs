use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of the SkillCard.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "konveyor.io",
    version = "v1alpha1",
    kind = "SkillCard",
    doc = "A SkillCard declares one agent skill: a folder with a SKILL.md (YAML frontmatter and Markdown, the agentskills.io format), taken from an OCI image, from inline text, or from git. The operator resolves the image to a digest, reads and validates SKILL.md, and reports Ready only for valid content. Agents reference SkillCards by name.",
    namespaced,
    status = "SkillCardStatus",
    shortname = "skc",
    category = "konveyor",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Skill", type_ = "string", json_path = ".status.skill.name"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("[has(self.image), has(self.inline), has(self.source)].filter(x, x).size() == 1").message("exactly one of spec.image, spec.inline or spec.source must be set"),
    validation = Rule::new("!has(self.subPath) || has(self.image) || has(self.source)").message("spec.subPath is only allowed with spec.image or spec.source"),
    validation = Rule::new("!has(self.ref) || has(self.source)").message("spec.ref is only allowed with spec.source"),
    validation = Rule::new("!has(self.pullSecrets) || size(self.pullSecrets) == 0 || has(self.image)").message("spec.pullSecrets is only allowed with spec.image"),
    validation = Rule::new("!has(self.sourceSecret) || has(self.source)").message("spec.sourceSecret is only allowed with spec.source")
)]
#[serde(rename_all = "camelCase")]
pub struct SkillCardSpec {
    /// OCI image that holds the skill, for example `ghcr.io/acme/skills/java:1.2` or a
    /// reference pinned by digest. The operator resolves tags to a digest and pins every
    /// sandbox to the digest it validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,

    /// Relative directory inside the image (or git repository) that holds one skill, for
    /// images that carry several. Its last segment must equal the skill's frontmatter name.
    /// No leading `/` and no `..` segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(
        validation = Rule::new("!self.startsWith('/')").message("spec.subPath must be relative: it must not start with '/'"),
        validation = Rule::new("!self.matches('(^|/)[.][.](/|$)')").message("spec.subPath must not contain '..' segments (Konveyor's schema takes them, but a path out of the image or repository can never hold the skill)")
    )]
    pub sub_path: Option<String>,

    /// The full SKILL.md text (frontmatter and body), for small skills without an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1_048_576))]
    pub inline: Option<String>,

    /// Git repository URL that holds the skill: `https://`, `git://`, or `http://` for hosts
    /// the operator lists with `--insecure-git-host`. No credentials in the URL: use
    /// `sourceSecret`. The operator resolves `ref` to a commit, reads SKILL.md from that
    /// commit (at the root or at `subPath`), validates it, and pins the commit in
    /// `status.resolvedSource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub source: Option<String>,

    /// Git branch, tag or full 40-character commit id to take from `source`; a branch wins
    /// over a tag of the same name. Empty: the repository's default branch (the `MovingRef`
    /// condition says so). Branches and tags are resolved again every tag refresh interval.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub git_ref: Option<String>,

    /// Human-friendly name for user interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// Version label of the skill, informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Short description for user interfaces. The agent sees the frontmatter description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// `skill` (default): the agent loads it on demand. `rule`: always in the agent's prompt;
    /// its name is listed in the sandbox's `KONVEYOR_RULES`.
    #[serde(default, rename = "type")]
    pub skill_type: SkillType,

    /// Free-form labels for search and grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub tags: Option<Vec<String>>,

    /// Our extension: a Secret in this namespace with HTTP basic credentials for `source`,
    /// like a Secret of type `kubernetes.io/basic-auth`: keys `username` and `password` (for
    /// a token, the token as `password` and any `username`). Never shown in status, events or
    /// logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_secret: Option<SecretRef>,

    /// Secrets of type `kubernetes.io/dockerconfigjson` in this namespace with credentials for
    /// the image's registry, like a pod's `imagePullSecrets`. They are used to read the image;
    /// their contents never appear in status, events or logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub pull_secrets: Option<Vec<SecretRef>>,
}

/// How the agent uses a skill.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillType {
    /// Loaded on demand by the agent.
    #[default]
    Skill,
    /// Always in the agent's prompt.
    Rule,
}

impl SkillType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skill => "skill",
            Self::Rule => "rule",
        }
    }
}

/// A reference to a Secret in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// Where a SkillCard's content comes from, as the operator delivers it to sandboxes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    /// Mounted from the OCI image, pinned by digest.
    Image,
    /// Mounted from a ConfigMap the operator writes from `spec.inline`.
    Inline,
    /// Taken from git at the commit pinned in `status.resolvedSource`.
    Source,
}

/// The observed state of a SkillCard.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SkillCardStatus {
    /// The validated image as `repository@sha256:...`. Sandboxes mount exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<String>,

    /// The validated git source as `<url>@<commit>`, the commit in full. Sandboxes get exactly
    /// this commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<String>,

    /// The validated SKILL.md frontmatter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<SkillFrontmatter>,

    /// Size in bytes of the validated SKILL.md's body (after the frontmatter): what a
    /// `type: rule` skill adds to every prompt. (An agentic-operator extension of the Konveyor
    /// API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<i64>,

    /// How sandboxes receive this skill: `image`, `inline` or `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_mode: Option<DeliveryMode>,

    /// Who signed what this card pins, when a trust policy
    /// (`trust.agentic-operator.io`) selects it. (An agentic-operator extension of the
    /// Konveyor API.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::SkillVerification>,

    /// The agentic-operator extension fields the spec set when the operator last read it
    /// (field path to its value as JSON): how it notices an update that removed them, as
    /// Konveyor's Hub and console do. (An agentic-operator extension of the Konveyor API.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extension_fields: BTreeMap<String, String>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` tells whether the skill is valid and usable; `RegistryReachable` (images) and
    /// `SourceReachable` (git) tell whether the last check reached the registry or git
    /// server; `MovingRef` (git) whether the card follows the default branch; `Verified`
    /// (our extension, only when a trust policy selects the card) whether what it pins is
    /// signed as the policies require; `ExtensionsKept` (only when an update removed
    /// `pullSecrets` or `sourceSecret`: False, naming them, until the spec changes again).
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// The frontmatter of a validated SKILL.md.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillFrontmatter {
    /// The skill's name; sandboxes mount it at `/opt/skills/<name>`.
    pub name: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// License of the skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Environment requirements of the skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Tools the skill may use, from the frontmatter's `allowed-tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<String>,
    /// Extra string properties from the frontmatter's `metadata`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}
