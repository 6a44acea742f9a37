//! The `trust.agentic-operator.io/v1alpha1` API, our extension beside Konveyor's kinds: who
//! must have signed the skills a cluster (`ClusterSkillTrustPolicy`) or a namespace
//! (`SkillTrustPolicy`) mounts, and which digests, commits and keys are revoked.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::AgentRunPhase;

/// The API group of the trust policy kinds: ours, never `konveyor.io`, whose kinds stay
/// byte-compatible with Konveyor.
pub const TRUST_GROUP: &str = "trust.agentic-operator.io";

/// The most runs a policy's `status.blastRadius` lists; `status.affectedRuns` counts them all.
/// It keeps the status far below the API server's object size limit.
pub const MAX_BLAST_RADIUS_ENTRIES: usize = 100;

/// The pattern of a revoked digest: `sha256:` and 64 lowercase hex digits.
pub const REVOKED_DIGEST_PATTERN: &str = "^sha256:[0-9a-f]{64}$";
/// The pattern of a revoked git commit: the full 40 (SHA-1) or 64 (SHA-256) hex digits.
pub const REVOKED_COMMIT_PATTERN: &str = "^([0-9a-f]{40}|[0-9a-f]{64})$";

/// The pattern of a revoked key, in its canonical form: a cosign key fingerprint, an SSH
/// fingerprint, a GPG fingerprint, or a certificate identity `<issuer URL> <subject>`.
pub const REVOKED_KEY_PATTERN: &str = "^(sha256:[0-9a-f]{64}|SHA256:[A-Za-z0-9+/]{43}|[0-9A-F]{40}|[0-9A-F]{64}|https?://[^ ]+ [^ ]+)$";

/// The desired state of a SkillTrustPolicy.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "trust.agentic-operator.io",
    version = "v1alpha1",
    kind = "SkillTrustPolicy",
    doc = "A SkillTrustPolicy says who must have signed the skills of its namespace's SkillCards that it selects, and which digests, commits and keys are revoked there. It adds to the cluster's ClusterSkillTrustPolicies and can never relax them: every policy that selects a skill must be satisfied. An agentic-operator extension, not part of the Konveyor API.",
    namespaced,
    status = "SkillTrustPolicyStatus",
    shortname = "stp",
    category = "agentic-trust",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(
        name = "Affected",
        type_ = "integer",
        json_path = ".status.affectedRuns"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SkillTrustPolicySpec {
    #[serde(flatten)]
    pub policy: TrustPolicy,
}

/// The desired state of a ClusterSkillTrustPolicy.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "trust.agentic-operator.io",
    version = "v1alpha1",
    kind = "ClusterSkillTrustPolicy",
    doc = "A ClusterSkillTrustPolicy says who must have signed the skills of every namespace's SkillCards that it selects, and which digests, commits and keys are revoked everywhere. Namespaced SkillTrustPolicies can only add to it. An agentic-operator extension, not part of the Konveyor API.",
    status = "SkillTrustPolicyStatus",
    shortname = "cstp",
    category = "agentic-trust",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(
        name = "Affected",
        type_ = "integer",
        json_path = ".status.affectedRuns"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSkillTrustPolicySpec {
    #[serde(flatten)]
    pub policy: TrustPolicy,
}

/// What a trust policy selects and requires; the same for both kinds.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrustPolicy {
    /// Image repositories whose skills this policy requires signatures for, matched against
    /// the repository a SkillCard pins (`status.resolvedImage` without `@sha256:...`), for
    /// example `registry.example/skills/java`. `*` matches any characters but `/`, `**` any
    /// characters including `/`: `registry.example/skills/**` selects every repository under
    /// `skills/`. Both sides are compared in canonical form: the registry host in lower case
    /// without port 443; `index.docker.io`, `registry-1.docker.io` and a name without a
    /// registry are `docker.io`, and a Docker Hub name of one component gets `library/`
    /// (`alpine` is `docker.io/library/alpine`). Paths are compared as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub images: Vec<String>,

    /// Git repository URLs whose skills this policy requires signed commits for, matched
    /// against a SkillCard's `spec.source` with the wildcards of `images`, for example
    /// `https://git.example/acme/**`. Both sides are compared in canonical form: scheme and
    /// host in lower case, the scheme's default port (443, 80, 9418) dropped, no trailing `/`
    /// or `.git`. Paths keep their case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub sources: Vec<String>,

    /// `Enforce` (default): a selected skill without a valid signature is not Ready. `Warn`:
    /// it stays Ready, with `Verified=False` and a Warning Event. A namespaced `Warn` policy
    /// never softens a cluster `Enforce` one: each policy is judged on its own.
    #[serde(default)]
    pub mode: TrustMode,

    /// What happens to a skill no trust policy selects, in this policy's scope (every
    /// namespace for a ClusterSkillTrustPolicy, its own for a SkillTrustPolicy). `Allow`
    /// (default): it is used as without trust policies. `Deny`: a SkillCard that no policy's
    /// `images` or `sources` select, inline skills included (nothing signs them), is
    /// `Ready=False` with reason `NotSelected`, so no skill reaches a run unchecked.
    #[serde(default)]
    pub unselected: UnselectedSkills,

    /// What a revocation does to runs that mounted the revoked skill. `Block` (default): its
    /// SkillCards turn `Ready=False` (reason `Revoked`), so Agents using them are not Ready
    /// and no new run starts; running runs go on. `Cancel`: the same, and every unfinished
    /// run in the policy's scope that mounted a revoked digest or commit, or a skill signed by
    /// a revoked key, ends as a cancelled run does: phase `Failed`, reason `SkillRevoked`,
    /// its sandbox deleted so its pod stops. Finished runs keep their outcome.
    #[serde(default)]
    pub action: RevocationAction,

    /// Which image signatures bind to the repository they were made for. Every signature
    /// must be over the pinned digest. The legacy layout (cosign's `sha256-<hex>.sig` tag)
    /// always names a repository, and it must be this one. A Sigstore bundle's DSSE statement
    /// must name this repository when its subject names one; one whose subject names none, and
    /// a bundle's message signature (over the manifest, which names no repository), bind to
    /// the digest alone. `Digest` (default): those count too, so a signed image copied with its
    /// bundle into another repository this policy selects verifies there. `Repository`: only
    /// signatures that name this repository count.
    #[serde(default)]
    pub signature_binding: SignatureBinding,

    /// Cosign public keys; an image is verified when a cosign signature of its exact digest,
    /// bound as `signatureBinding` says, verifies with any one of them. List several to
    /// rotate keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub keys: Vec<KeySource>,

    /// Keyless (Fulcio certificate) signers; an image is verified when a signature's
    /// certificate chains to `trustRoot.fulcioCertificates`, names one of these identities,
    /// and its Rekor entry's signed timestamp verifies with `trustRoot.rekorKeys`. Checked
    /// offline: the operator calls no Sigstore service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub keyless: Vec<KeylessIdentity>,

    /// The certificates and keys keyless signatures are checked against. Required with
    /// `keyless`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_root: Option<TrustRoot>,

    /// Who may sign the commits of selected git skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_signers: Option<GitSigners>,

    /// Digests, commits and keys no skill in this policy's scope may use, whichever
    /// repository or URL it comes from: every namespace for a ClusterSkillTrustPolicy, its
    /// own for a SkillTrustPolicy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Revocations>,
}

/// Whether a failed verification blocks a skill.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TrustMode {
    /// Not Ready without a valid signature.
    #[default]
    Enforce,
    /// Ready, with `Verified=False` and a Warning Event.
    Warn,
}

/// What an image signature must be bound to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SignatureBinding {
    /// The pinned digest; the repository too whenever the signature names one.
    #[default]
    Digest,
    /// The pinned digest and this repository: digest-only signatures do not count.
    Repository,
}

/// What happens to skills no trust policy selects.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UnselectedSkills {
    /// Used as without trust policies.
    #[default]
    Allow,
    /// Not Ready (reason `NotSelected`).
    Deny,
}

/// What a revocation does to running runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RevocationAction {
    /// Block new runs; running runs go on.
    #[default]
    Block,
    /// Block new runs and cancel the unfinished ones that mounted a revoked skill (reason
    /// `SkillRevoked`).
    Cancel,
}

/// Key text (PEM, an allowed-signers file or an armored GPG key), given inline or read from a
/// key of a Secret or ConfigMap.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("[has(self.pem), has(self.secretKeyRef), has(self.configMapKeyRef)].filter(x, x).size() == 1").message("set exactly one of pem, secretKeyRef and configMapKeyRef")
)]
#[serde(rename_all = "camelCase")]
pub struct KeySource {
    /// The text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 65536))]
    pub pem: Option<String>,

    /// A key of a Secret holding the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeyRef>,

    /// A key of a ConfigMap holding the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeyRef>,
}

/// One key of a Secret or ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// Name of the Secret or ConfigMap.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::OBJECT_NAME_PATTERN))]
    pub name: String,

    /// The key holding the text.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,

    /// Namespace of the Secret or ConfigMap. A SkillTrustPolicy may only read its own
    /// namespace (leave this empty); a ClusterSkillTrustPolicy must name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// A certificate identity a keyless signature may carry: its OIDC issuer and subject, each
/// exact or a regular expression (RE2 syntax, matched against the whole value).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("has(self.issuer) != has(self.issuerRegExp)").message("set exactly one of issuer and issuerRegExp"),
    validation = Rule::new("has(self.subject) != has(self.subjectRegExp)").message("set exactly one of subject and subjectRegExp")
)]
#[serde(rename_all = "camelCase")]
pub struct KeylessIdentity {
    /// The exact OIDC issuer, for example `https://token.actions.githubusercontent.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub issuer: Option<String>,

    /// A regular expression the whole issuer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub issuer_reg_exp: Option<String>,

    /// The exact subject (the certificate's e-mail or URI), for example
    /// `https://github.com/acme/skills/.github/workflows/release.yml@refs/heads/main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject: Option<String>,

    /// A regular expression the whole subject must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject_reg_exp: Option<String>,
}

/// The Sigstore trust root keyless signatures are checked against, supplied by the
/// administrator: nothing is fetched from a Sigstore service. Either Sigstore's
/// `trusted_root.json` (`trustedRoot`), or the PEM lists (`fulcioCertificates` and
/// `rekorKeys`, optionally `ctLogKeys`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new("has(self.trustedRoot) ? !has(self.fulcioCertificates) && !has(self.rekorKeys) && !has(self.ctLogKeys) : has(self.fulcioCertificates) && has(self.rekorKeys)").message("set either trustedRoot, or fulcioCertificates and rekorKeys (and optionally ctLogKeys)")
)]
#[serde(rename_all = "camelCase")]
pub struct TrustRoot {
    /// Sigstore's `trusted_root.json` (for the public-good instance, the one its TUF
    /// repository publishes): Fulcio certificate authorities, Rekor keys and CT log keys,
    /// each counting only within its `validFor` window, so a retired key or authority
    /// still verifies what was signed in its time and nothing after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root: Option<KeySource>,

    /// Fulcio CA certificates (root and intermediates) signing certificates chain to, each
    /// within its own validity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub fulcio_certificates: Vec<KeySource>,

    /// Rekor public keys; a signature's Rekor signed entry timestamp must verify with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub rekor_keys: Vec<KeySource>,

    /// Certificate Transparency log public keys; a certificate's embedded SCT must verify
    /// with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub ct_log_keys: Vec<KeySource>,
}

/// Who may sign the commits of git skills.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSigners {
    /// An SSH allowed-signers file, in the format of git's `gpg.ssh.allowedSignersFile`
    /// (`<principals> [options] <key type> <key>` per line, at most 1024); a commit signed
    /// with `gpg.format=ssh` is verified when its signature (namespace `git`) verifies with
    /// one of its keys, within that line's `namespaces`, `valid-after` and `valid-before`
    /// (checked against the committer time). The signer is the key's `SHA256:` fingerprint,
    /// as `ssh-keygen -lf` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_signers: Option<KeySource>,

    /// Armored GPG public keys (`gpg --armor --export <key>`, at most 64 KiB each); a commit
    /// signed with GPG is verified when its signature verifies with one of them or one of
    /// their signing subkeys, neither revoked nor expired. The signer is the primary key's
    /// fingerprint, upper-case hex without spaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub gpg_keys: Vec<KeySource>,
}

/// What may no longer be used, whoever signed it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revocations {
    /// Image digests, `sha256:` and 64 hex digits: a SkillCard pinned to one is
    /// `Ready=False` with reason `Revoked`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096))]
    #[schemars(inner(regex(pattern = REVOKED_DIGEST_PATTERN)))]
    pub digests: Vec<String>,

    /// Full git commit ids: a git SkillCard pinned to one is `Ready=False` with reason
    /// `Revoked`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096))]
    #[schemars(inner(regex(pattern = REVOKED_COMMIT_PATTERN)))]
    pub commits: Vec<String>,

    /// Signing keys, as a SkillCard's `status.verification.signers` names them, in one
    /// canonical form each: a cosign key's `sha256:` and 64 lower-case hex digits, an SSH
    /// key's `SHA256:` and 43 base64 characters (as `ssh-keygen -lf` prints it, without
    /// padding), a GPG primary key's fingerprint as 40 (or 64) upper-case hex digits without
    /// spaces, or a certificate identity `<issuer> <subject>` (issuer an `https://` or
    /// `http://` URL). Anything else is refused when the policy is written, so a mistyped
    /// key cannot silently revoke nothing. A signature by one of them no longer counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    #[schemars(inner(length(max = 2048), regex(pattern = REVOKED_KEY_PATTERN)))]
    pub keys: Vec<String>,
}

/// The observed state of a trust policy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SkillTrustPolicyStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// How many runs, live and finished, mounted a skill this policy revokes or does not
    /// verify (read from the runs' `status.skills`), or are held before their start
    /// (`SkillBlocked`) by a skill of their Agent's it revokes or does not verify. Runs that
    /// were deleted are no longer counted. A ClusterSkillTrustPolicy's status is written only by an operator that
    /// watches every namespace.
    #[serde(default)]
    pub affected_runs: i64,

    /// The runs counted in `affectedRuns`, one entry per affected skill of a run, at most
    /// 100: live runs first, then by namespace, name and skill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub blast_radius: Vec<AffectedRun>,

    /// `Ready`: whether every key, certificate and referenced Secret or ConfigMap of the
    /// policy could be read and parsed (reason `KeysRead`), or which one could not and why
    /// (`KeyUnreadable`). Checked when the policy changes and again every few minutes; the
    /// cards the policy selects say `VerificationUnavailable` meanwhile.
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// A run that mounted a skill a policy revokes or does not verify.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AffectedRun {
    /// Namespace of the AgentRun.
    pub namespace: String,
    /// Name of the AgentRun.
    pub name: String,
    /// The run's phase when the policy looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,
    /// Frontmatter name of the skill.
    pub skill: String,
    /// What the run mounted, as its `status.skills[].image` says; for a run held before its
    /// start, what it would mount, as its Agent's `status.skills[].image` says.
    pub image: String,
    /// `Revoked` or `Unverified`.
    pub reason: String,
}

/// How a mounted or pinned skill stands against the trust policies that select it (an
/// agentic-operator extension of the Konveyor status).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillVerification {
    /// `Verified`, `Unverified` (a `Warn` policy let it through) or `Revoked`.
    pub state: VerificationState,

    /// Who signed what is pinned, for the first selecting policy: a `sha256:` key
    /// fingerprint, an SSH `SHA256:` fingerprint, a GPG key fingerprint, or a certificate
    /// identity `<issuer> <subject>`. Kept for compatibility; `signers` lists them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,

    /// Every signer whose signature verified, one per selecting policy that each found (in
    /// the forms of `signer`, without repeats). A revocation of any of them reaches the card
    /// and the runs that mounted it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,

    /// Digest of the signature that verified (the signature manifest or bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_digest: Option<String>,

    /// Where the signature was found: `tag` (cosign's `sha256-<digest>.sig`), `referrers`
    /// (an OCI referrer or Sigstore bundle), or `commit` (a signed git commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,

    /// The policies that select the skill, as `ClusterSkillTrustPolicy/<name>` or
    /// `SkillTrustPolicy/<namespace>/<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
}

/// Where a skill stands against its trust policies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum VerificationState {
    /// Every selecting policy's signature requirement is met.
    #[default]
    Verified,
    /// A `Warn` policy's requirement is not met; the skill is used anyway.
    Unverified,
    /// Its digest, commit or signing key is revoked.
    Revoked,
}

impl VerificationState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "Verified",
            Self::Unverified => "Unverified",
            Self::Revoked => "Revoked",
        }
    }
}
