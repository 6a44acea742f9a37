//! Everything a run's sandbox needs, built purely from the objects the controller read.
//!
//! The contract harness images code against (paths, environment, ports) is documented in
//! `docs/pod-contract.md`; the constants below are its single source in code.
//!
//! Objects per run, all owned by the AgentRun and labelled [`MANAGED_BY_LABEL`] and
//! [`RUN_LABEL`]:
//!
//! | object | name | built by |
//! |--------|------|----------|
//! | Secret with the ACP key | `<sandbox>-acp-key` | [`build_acp_secret`] |
//! | the sandbox: a Pod, or an agent-sandbox `Sandbox` | `<sandbox>` | [`build_pod`], [`build_sandbox`] |
//!
//! plus, per SkillCard with `spec.inline`, a ConfigMap owned by the SkillCard
//! ([`build_inline_skill_config_map`]). `<sandbox>` is [`sandbox_name`] of the run's name.
//!
//! The skills manifest and `params.json` travel as annotations of the pod
//! ([`SKILLS_MANIFEST_ANNOTATION`], [`PARAMS_ANNOTATION`]), which a `downwardAPI` volume turns
//! into files: no object of their own, so one write less per run. Both are data that whoever
//! may read the run's pods may read anyway (the run's spec, the Agent's skills).

use std::collections::{BTreeMap, BTreeSet};

use agentic_api::{Agent, AgentRun, Gateway, PinnedSkill, SkillType, SkillVerification};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Error;
use crate::git::{GitAuthor, git_author};
use crate::names::sandbox_name;
use crate::params::RunParams;

mod credentials;
mod events;
mod files;
mod lifecycle;
mod objects;
mod outcome;
mod pod;
mod rotation;
mod runtime;
mod telemetry;

pub use credentials::{
    CONDITION_CREDENTIAL_ISOLATION, CREDENTIAL_DIR, CREDENTIAL_FILE, CREDENTIAL_PROXY_CONTAINER,
    CREDENTIAL_PROXY_PORT, CredentialIsolation, CredentialProxy, CredentialProxyMode, Exposure,
    IsolationReason, PLACEHOLDER_KEY, ProxyPlan, agent_credential_isolation, credential_isolation,
};
pub use events::run_events;
pub use files::{
    FileMountSources, FileSourceKind, RESERVED_DIRS, SERVICE_ACCOUNT_DIR, SourceLookup,
    file_mount_source, file_mount_sources,
};
pub use lifecycle::{
    Enforced, FATAL_WAITING_REASONS, Limits, TtlDefaults, admit, admit_in_namespace, cancelled,
    end_revoked, enforce, startup_deadline, stops_sandbox, time_to_live,
};
pub use objects::{
    SANDBOX_API_VERSION, SANDBOX_KIND, build_acp_secret, build_acp_service,
    build_inline_skill_config_map, build_pod, build_sandbox,
};
pub use outcome::{
    CONDITION_ACP_READY, CONDITION_COMPLETED, CONDITION_SUCCEEDED, EXIT_LIMIT_REACHED,
    EXIT_REFUSED, MAX_TERMINATION_DATA_BYTES, MAX_TERMINATION_MESSAGE_BYTES, RunOutcome,
    run_outcome, succeeded_reason,
};
pub use pod::build_pod_spec;
pub use rotation::{
    CREDENTIAL_SECRET_ANNOTATION, CREDENTIAL_VERSION_ANNOTATION, CredentialRefresh,
    credential_refresh, credential_secret,
};
pub use runtime::{RUNTIME_ACP_PORT, RUNTIME_CONTAINER, RUNTIME_HOME};
pub use telemetry::{
    RUN_NAME_ATTRIBUTE, RUN_UID_ATTRIBUTE, TraceReceiver, otlp_token, run_of_token,
};

/// Where skills are mounted, one directory per skill: `/opt/skills/<name>`.
pub const SKILLS_DIR: &str = "/opt/skills";
/// The manifest of every mounted skill and the rule names.
pub const SKILLS_MANIFEST_PATH: &str = "/opt/skills/.konveyor-skills.json";
/// The run's params, typed, with defaults applied.
pub const PARAMS_PATH: &str = "/run/konveyor/params.json";
/// Writable scratch space for the agent (an emptyDir).
pub const WORKSPACE_DIR: &str = "/workspace";
/// Writable temporary files (an emptyDir).
pub const TMP_DIR: &str = "/tmp";
/// The container that runs the agent.
pub const AGENT_CONTAINER: &str = "agent";
/// Prefix of the init containers that fetch git skills, numbered like the skill volumes:
/// `skill-fetch-<index>`.
pub const SKILL_FETCH_CONTAINER_PREFIX: &str = "skill-fetch-";
/// The port the harness serves the Agent Client Protocol on.
pub const ACP_PORT: i32 = 4000;
/// The name of [`ACP_PORT`].
pub const ACP_PORT_NAME: &str = "acp";
/// The key of the ACP Secret holding the random key.
pub const ACP_SECRET_KEY: &str = "secret-key";
/// The key of the ACP Secret holding the run's bearer for the operator's trace receiver,
/// `<namespace>/<run>/<random>`: the receiver finds the run by the first two parts and checks
/// the whole against this key.
pub const OTLP_TOKEN_KEY: &str = "otlp-token";
/// The file of the run's `downwardAPI` volume holding the skills manifest.
pub const SKILLS_MANIFEST_KEY: &str = "konveyor-skills.json";
/// The file of the run's `downwardAPI` volume holding the params.
pub const PARAMS_KEY: &str = "params.json";
/// The pod annotation holding the skills manifest, the file at [`SKILLS_MANIFEST_PATH`].
pub const SKILLS_MANIFEST_ANNOTATION: &str = "konveyor.io/skills-manifest";
/// The pod annotation holding the params, the file at [`PARAMS_PATH`].
pub const PARAMS_ANNOTATION: &str = "konveyor.io/params";
/// Annotation on the sandbox recording the skills pinned at creation (the run's
/// `status.skills`, as JSON), so a restarted operator reports exactly what the sandbox mounts.
pub const PINNED_SKILLS_ANNOTATION: &str = "konveyor.io/pinned-skills";
/// The API server's limit on the annotations of one object, keys and values together
/// (`TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// What the operator leaves of [`MAX_ANNOTATIONS_BYTES`] for annotations others add to the
/// run's pod (agent-sandbox's list of the keys it propagated, an admission webhook's).
pub const ANNOTATIONS_LEFT_FOR_OTHERS_BYTES: usize = 4 * 1024;
/// The key of an inline skill's ConfigMap holding SKILL.md.
pub const SKILL_FILE: &str = "SKILL.md";

/// Label naming the operator on everything it creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "agentic-operator";
/// Label naming the run on every object created for it, the sandbox's pod included; its
/// value is [`label_value`](crate::names::label_value) of the run's name.
pub const RUN_LABEL: &str = "konveyor.io/agentrun";
/// Label naming the SkillCard on its inline ConfigMap.
pub const SKILL_CARD_LABEL: &str = "konveyor.io/skillcard";

/// Environment variables the operator sets; a run's `spec.env` may not set these, nor any
/// other name starting with [`RESERVED_ENV_PREFIX`] but the [`WORKFLOW_ENV`] names.
pub mod env {
    /// Always `/opt/skills`.
    pub const SKILLS_DIR: &str = "KONVEYOR_SKILLS_DIR";
    /// `native` or `inject`.
    pub const SKILL_MODE: &str = "HARNESS_SKILL_MODE";
    /// Rule names, sorted, comma-separated; empty when there are none.
    pub const RULES: &str = "KONVEYOR_RULES";
    /// The Agent's `spec.prompt`; empty when unset.
    pub const PROMPT: &str = "KONVEYOR_PROMPT";
    /// The run's `spec.instructions`; empty when unset.
    pub const INSTRUCTIONS: &str = "KONVEYOR_INSTRUCTIONS";
    /// The Gateway's `spec.provider`.
    pub const LLM_PROVIDER: &str = "KONVEYOR_LLM_PROVIDER";
    /// The Gateway's `spec.endpoint`; empty when unset.
    pub const LLM_ENDPOINT: &str = "KONVEYOR_LLM_ENDPOINT";
    /// The Gateway's `spec.model.name`.
    pub const LLM_MODEL: &str = "KONVEYOR_LLM_MODEL";
    /// The API key, from the Gateway's Secret key; set only when the Gateway names a key.
    pub const LLM_API_KEY: &str = "KONVEYOR_LLM_API_KEY";
    /// The per-run ACP key.
    pub const ACP_SECRET_KEY: &str = "KONVEYOR_ACP_SECRET_KEY";
    /// With the Agent's `spec.runtime`, in both containers: the loopback port the runtime
    /// serves ACP on.
    pub const RUNTIME_ACP_PORT: &str = "KONVEYOR_RUNTIME_ACP_PORT";
    /// The commit author's name from `spec.gitConfig`; empty when none is set.
    pub const GIT_AUTHOR_NAME: &str = "KONVEYOR_GIT_AUTHOR_NAME";
    /// The commit author's email from `spec.gitConfig`; empty when none is set.
    pub const GIT_AUTHOR_EMAIL: &str = "KONVEYOR_GIT_AUTHOR_EMAIL";
    /// The run's bearer for the trace receiver (from the ACP Secret's `otlp-token`); set, with
    /// the `OTEL_*` variables below, only when the operator has a receiver address.
    pub const OTLP_TOKEN: &str = "KONVEYOR_OTLP_TOKEN";
    /// The pod's own name (downward API), for `OTEL_RESOURCE_ATTRIBUTES`.
    pub const POD_NAME: &str = "KONVEYOR_POD_NAME";
    /// The receiver's base URL.
    pub const OTEL_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
    /// Always `http/protobuf`.
    pub const OTEL_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
    /// `Authorization=Bearer%20$(KONVEYOR_OTLP_TOKEN)`.
    pub const OTEL_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
    /// `k8s.namespace.name`, `k8s.pod.name`, `konveyor.agentrun.name` and `.uid`.
    pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
    /// `true` unless the Agent's `spec.captureMessageContent` or the operator turns it off.
    pub const OTEL_CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
}

/// Prefix of the environment variable names the operator reserves.
pub const RESERVED_ENV_PREFIX: &str = "KONVEYOR_";

/// Variables with the reserved prefix that a run's `spec.env` may set after all: the
/// workflow controller writes them into each stage's run (the workflow's guide, the stage's
/// 1-based number, and how many stages there are). The operator sets no value of its own
/// for them, so a run that sets them, stage or not, passes them to the agent as written.
pub const WORKFLOW_ENV: [&str; 3] = [
    "KONVEYOR_WORKFLOW_GUIDE",
    "KONVEYOR_WORKFLOW_STAGE",
    "KONVEYOR_WORKFLOW_STAGE_COUNT",
];

/// One skill as a sandbox mounts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountedSkill {
    /// Frontmatter name; mounted at `/opt/skills/<name>`.
    pub name: String,
    /// Frontmatter description.
    pub description: String,
    /// `skill` or `rule`.
    pub skill_type: SkillType,
    /// The SkillCard it comes from.
    pub skill_card: String,
    /// Where the files come from.
    pub source: SkillSource,
    /// Directory inside the image that holds the skill; image skills only (a git skill's
    /// directory is in its [`SkillSource::Git`]).
    pub sub_path: Option<String>,
    /// Secrets with registry credentials for the image; the pod lists them as
    /// `imagePullSecrets` so the kubelet can pull the image volume.
    pub pull_secrets: Vec<String>,
    /// The card's `status.verification` when the run pinned the skill: what the run's
    /// `status.skills` records, so that a later revocation finds the runs it reaches.
    pub verification: Option<SkillVerification>,
}

/// Where a mounted skill's files come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillSource {
    /// An OCI image, pinned by digest (`repository@sha256:...`), mounted as an image volume.
    Image {
        /// The pinned reference.
        reference: String,
    },
    /// A ConfigMap owned by the SkillCard, with `SKILL.md` under key [`SKILL_FILE`].
    Inline {
        /// The ConfigMap's name.
        config_map: String,
    },
    /// A git repository at one commit, fetched by an init container into an emptyDir.
    Git {
        /// The repository URL the SkillCard controller validated.
        url: String,
        /// The full commit id it validated.
        commit: String,
        /// The skill's directory in the repository (`spec.subPath`).
        sub_path: Option<String>,
        /// The Secret with `username` and `password` (`spec.sourceSecret`), mounted into the
        /// init container only.
        secret: Option<String>,
    },
}

impl SkillSource {
    /// What a run pins: the image by digest, `configmap:<name>`, or `<url>@<commit>`.
    pub fn pin(&self) -> String {
        match self {
            SkillSource::Image { reference } => reference.clone(),
            SkillSource::Inline { config_map } => format!("configmap:{config_map}"),
            SkillSource::Git { url, commit, .. } => format!("{url}@{commit}"),
        }
    }
}

/// How a harness hands skills to its agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkillDeliveryMode {
    /// The agent runtime discovers the skills under `/opt/skills` itself.
    Native,
    /// The harness puts every skill into the prompt.
    Inject,
}

impl SkillDeliveryMode {
    /// The value of `HARNESS_SKILL_MODE` and of the Agent's `status.deliveryMode`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkillDeliveryMode::Native => "native",
            SkillDeliveryMode::Inject => "inject",
        }
    }
}

/// What the init containers of git skills run: the operator's own image, whose binary has
/// the hidden `skill fetch` subcommand, and the git hosts it may reach over plain http://.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillFetcher {
    /// The operator's image (`--operator-image`).
    pub image: String,
    /// The operator's `--insecure-git-host` entries.
    pub insecure_git_hosts: Vec<String>,
}

impl MountedSkill {
    /// The mount point, `/opt/skills/<name>`.
    pub fn mount_path(&self) -> String {
        format!("{SKILLS_DIR}/{}", self.name)
    }

    /// The skill as the run's status records it: image skills by their pinned image, inline
    /// skills as `configmap:<name>`, git skills as `<url>@<commit>`.
    pub fn pinned(&self) -> PinnedSkill {
        PinnedSkill {
            name: self.name.clone(),
            image: self.source.pin(),
            skill_type: self.skill_type,
            verification: self.verification.clone().map(Box::new),
            loads: None,
            first_loaded_at: None,
        }
    }
}

/// The skills a sandbox mounts, from its [`PINNED_SKILLS_ANNOTATION`]; none when it has no
/// readable annotation.
pub fn pinned_skills(metadata: &ObjectMeta) -> Vec<PinnedSkill> {
    metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PINNED_SKILLS_ANNOTATION))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The checked inputs of every sandbox builder. Build it with [`SandboxInputs::new`].
#[derive(Clone, Debug)]
pub struct SandboxInputs<'a> {
    run: &'a AgentRun,
    run_name: &'a str,
    namespace: &'a str,
    sandbox_name: String,
    agent: &'a Agent,
    gateway: &'a Gateway,
    skills: Vec<MountedSkill>,
    delivery_mode: SkillDeliveryMode,
    params: RunParams,
    git_author: Option<GitAuthor>,
    file_mounts: Vec<files::CheckedMount>,
    fetcher: Option<&'a SkillFetcher>,
    credential_isolation: CredentialIsolation,
    trace_receiver: Option<&'a TraceReceiver>,
    annotations: RunAnnotations,
}

/// The annotations a run's sandbox carries, built once by [`SandboxInputs::new`].
#[derive(Clone, Debug)]
struct RunAnnotations {
    /// [`SKILLS_MANIFEST_ANNOTATION`] and [`PARAMS_ANNOTATION`]: the pod's, whose
    /// `downwardAPI` volume reads them.
    files: BTreeMap<String, String>,
    /// [`PINNED_SKILLS_ANNOTATION`]: the sandbox's (the pod's, with the `pod` backend).
    pinned: BTreeMap<String, String>,
}

impl<'a> SandboxInputs<'a> {
    /// Checks the inputs once so every builder is infallible: the run has a name and a
    /// namespace, its `spec.env` neither repeats a name nor sets a reserved one, its (or else the
    /// Agent's) `spec.gitConfig` is a usable commit author, its `spec.fileMounts` stay clear of
    /// the contract's directories, every skill
    /// name is a safe directory name, no two skills share a name, and the annotations that
    /// carry the skills manifest, the params and the pinned skills fit an object's
    /// annotations ([`Error::AnnotationsTooLarge`]). `skills` may come in any order; `params`
    /// come from [`resolve_run`](crate::params::resolve_run). Git skills need a `fetcher`:
    /// without one they are [`Error::OperatorImageNotSet`].
    pub fn new(
        run: &'a AgentRun,
        agent: &'a Agent,
        gateway: &'a Gateway,
        mut skills: Vec<MountedSkill>,
        delivery_mode: SkillDeliveryMode,
        params: RunParams,
        fetcher: Option<&'a SkillFetcher>,
    ) -> Result<Self, Error> {
        let (run_name, namespace) = name_and_namespace(&run.metadata, "AgentRun")?;
        check_run_env(run)?;
        let git_author = git_author(agent.spec.git_config.as_ref(), run.spec.git_config.as_ref())?;
        let file_mounts = files::check_file_mounts(&run.spec.file_mounts)?;
        for skill in &skills {
            if !is_skill_name(&skill.name) {
                return Err(Error::InvalidSkillName {
                    name: skill.name.clone(),
                    skill_card: skill.skill_card.clone(),
                });
            }
        }
        let git_skills: Vec<String> = skills
            .iter()
            .filter(|s| matches!(s.source, SkillSource::Git { .. }))
            .map(|s| s.name.clone())
            .collect();
        if fetcher.is_none() && !git_skills.is_empty() {
            return Err(Error::OperatorImageNotSet { skills: git_skills });
        }
        // Stable sort: of two skills with one name, the first given is the "first" card.
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(pair) = skills.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(Error::DuplicateSkillName {
                skill: pair[0].name.clone(),
                first_card: pair[0].skill_card.clone(),
                first_collection: None,
                second_card: pair[1].skill_card.clone(),
                second_collection: None,
            });
        }
        let annotations = objects::run_annotations(run_name, &skills, &params)?;
        Ok(SandboxInputs {
            run,
            run_name,
            namespace,
            sandbox_name: sandbox_name(run_name),
            agent,
            gateway,
            skills,
            delivery_mode,
            params,
            git_author,
            file_mounts,
            fetcher,
            credential_isolation: credential_isolation(
                &gateway.spec,
                &CredentialProxy {
                    mode: CredentialProxyMode::Off,
                    image: None,
                },
            ),
            trace_receiver: None,
            annotations,
        })
    }

    /// The inputs with the Gateway's key kept from the agent where `proxy` can
    /// ([`credential_isolation`]); without this call the key goes to the agent as in
    /// Konveyor.
    #[must_use]
    pub fn with_credential_proxy(mut self, proxy: &CredentialProxy) -> Self {
        self.credential_isolation = credential_isolation(&self.gateway.spec, proxy);
        self
    }

    /// What the sandbox does with the Gateway's key.
    pub fn credential_isolation(&self) -> &CredentialIsolation {
        &self.credential_isolation
    }

    /// These inputs with the operator's trace receiver: the agent container then gets the
    /// `OTEL_*` variables that send its traces there (see `docs/pod-contract.md`).
    #[must_use]
    pub fn with_trace_receiver(mut self, receiver: Option<&'a TraceReceiver>) -> Self {
        self.trace_receiver = receiver;
        self
    }

    /// The run.
    pub fn run(&self) -> &'a AgentRun {
        self.run
    }

    /// The run's Agent.
    pub fn agent(&self) -> &'a Agent {
        self.agent
    }

    /// The run's namespace, where every sandbox object lives.
    pub fn namespace(&self) -> &'a str {
        self.namespace
    }

    /// The sandbox's name: [`sandbox_name`] of the run's name.
    pub fn sandbox_name(&self) -> &str {
        &self.sandbox_name
    }

    /// The skills, sorted by name.
    pub fn skills(&self) -> &[MountedSkill] {
        &self.skills
    }

    /// Names of the `type: rule` skills, sorted.
    pub fn rules(&self) -> Vec<&str> {
        self.skills
            .iter()
            .filter(|s| s.skill_type == SkillType::Rule)
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The skills as the run's `status.skills` records them, sorted by name.
    pub fn pinned_skills(&self) -> Vec<PinnedSkill> {
        self.skills.iter().map(MountedSkill::pinned).collect()
    }

    /// The run's trace, from its UID; `None` for a run the API server has not stored (no
    /// UID), which no controller sees.
    pub fn trace(&self) -> Option<crate::trace::RunTrace> {
        self.run
            .metadata
            .uid
            .as_deref()
            .map(crate::trace::RunTrace::of_run)
    }

    /// Labels of every object created for the run, and of the sandbox's pod.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
            (
                RUN_LABEL.to_string(),
                crate::names::label_value(self.run_name),
            ),
        ])
    }
}

/// The Agent Skills limit on a skill name.
const MAX_SKILL_NAME_LEN: usize = 64;

/// Whether `name` is safe as a directory under `/opt/skills`: the Agent Skills name rule,
/// 1 to 64 characters of `a-z`, `0-9` and `-`, not starting or ending with `-`.
fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SKILL_NAME_LEN
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A run's own environment must not override the contract or repeat a name (server-side
/// apply rejects a list-map with a repeated key).
fn check_run_env(run: &AgentRun) -> Result<(), Error> {
    let reserved: Vec<String> = run
        .spec
        .env
        .iter()
        .filter(|e| e.name.starts_with(RESERVED_ENV_PREFIX) || e.name == env::SKILL_MODE)
        .filter(|e| !WORKFLOW_ENV.contains(&e.name.as_str()))
        .map(|e| e.name.clone())
        .collect();
    if !reserved.is_empty() {
        return Err(Error::ReservedEnvName { names: reserved });
    }
    let mut seen = BTreeSet::new();
    let mut repeated = Vec::new();
    for var in &run.spec.env {
        if !seen.insert(var.name.as_str()) && !repeated.contains(&var.name) {
            repeated.push(var.name.clone());
        }
    }
    if repeated.is_empty() {
        Ok(())
    } else {
        Err(Error::DuplicateEnvName { names: repeated })
    }
}

/// The name and namespace of an object of `kind`; the API server sets both on every
/// namespaced object, so a missing one is [`Error::MissingMetadata`].
fn name_and_namespace<'a>(
    metadata: &'a ObjectMeta,
    kind: &'static str,
) -> Result<(&'a str, &'a str), Error> {
    let missing = |field| Error::MissingMetadata { kind, field };
    let name = metadata.name.as_deref().ok_or(missing("metadata.name"))?;
    let namespace = metadata
        .namespace
        .as_deref()
        .ok_or(missing("metadata.namespace"))?;
    Ok((name, namespace))
}

#[cfg(test)]
mod test_pods;
#[cfg(test)]
mod tests;
