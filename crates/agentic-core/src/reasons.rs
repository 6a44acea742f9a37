//! The reason vocabulary: for each kind, every reason its conditions can carry.
//!
//! A reason is spelled once, where it arises: a `REASON_*` constant (here for the reasons the
//! controllers decide, in the module of the rule otherwise) or an arm of an error's
//! `reason()`. [`VOCABULARY`] gathers them per kind, and [`RECONCILE_ERRORS`] the reasons of
//! failed passes that label `agentic_reconcile_errors_total` and the `ReconcileFailed`
//! Event. Each table is what its section of `docs/conditions.md` documents: a test here
//! fails when a section and its table differ, and `tests/tests/reasons.rs` when the code
//! writes a reason no table lists, or a table lists one no code writes.

use crate::{collections, gateway, sandbox, skills, trust, workflow};

/// A SkillCard's content is valid.
pub const REASON_SKILL_VALID: &str = "SkillValid";
/// A SkillCard's `Ready` is Unknown: its registry or git server is being asked.
pub const REASON_VALIDATING: &str = "Validating";
/// A SkillCard's registry answered with the tag's digest.
pub const REASON_DIGEST_RESOLVED: &str = "DigestResolved";
/// A git SkillCard's server answered with the ref's commit.
pub const REASON_REF_RESOLVED: &str = "RefResolved";
/// A git SkillCard follows the repository's default branch (no `spec.ref`).
pub const REASON_DEFAULT_BRANCH: &str = "DefaultBranch";
/// A git SkillCard names its ref.
pub const REASON_REF_SET: &str = "RefSet";
/// A SkillCard's pull secret is not a docker config.
pub const REASON_INVALID_PULL_SECRET: &str = "InvalidPullSecret";
/// A SkillCard's pull secret does not exist.
pub const REASON_PULL_SECRET_NOT_FOUND: &str = "PullSecretNotFound";
/// A git SkillCard's `spec.sourceSecret` does not exist.
pub const REASON_SOURCE_SECRET_NOT_FOUND: &str = "SourceSecretNotFound";
/// A git SkillCard's `spec.sourceSecret` holds no usable credential.
pub const REASON_INVALID_SOURCE_SECRET: &str = "InvalidSourceSecret";
/// A registry did not answer (a condition reason, and a reconcile error).
pub const REASON_REGISTRY_UNAVAILABLE: &str = "RegistryUnavailable";
/// An Agent is Ready.
pub const REASON_AGENT_READY: &str = "AgentReady";
/// An Agent's `spec.skillDelivery` is one the operator knows.
pub const REASON_KNOWN_SKILL_DELIVERY: &str = "KnownSkillDelivery";
/// The Gateway a run uses does not exist.
pub const REASON_GATEWAY_NOT_FOUND: &str = "GatewayNotFound";
/// The Gateway a run uses is not Ready.
pub const REASON_GATEWAY_NOT_READY: &str = "GatewayNotReady";

/// The reasons of one kind's conditions.
#[derive(Debug)]
pub struct Vocabulary {
    /// The kind, as `docs/conditions.md` titles its section.
    pub kind: &'static str,
    /// Every reason its conditions can carry.
    pub reasons: &'static [&'static str],
}

/// Every kind's reasons, in the order of `docs/conditions.md`.
pub const VOCABULARY: &[Vocabulary] = &[
    Vocabulary {
        kind: "SkillCard",
        reasons: &[
            REASON_SKILL_VALID,
            REASON_VALIDATING,
            REASON_DIGEST_RESOLVED,
            REASON_REF_RESOLVED,
            REASON_DEFAULT_BRANCH,
            REASON_REF_SET,
            REASON_INVALID_PULL_SECRET,
            REASON_PULL_SECRET_NOT_FOUND,
            REASON_SOURCE_SECRET_NOT_FOUND,
            REASON_INVALID_SOURCE_SECRET,
            REASON_REGISTRY_UNAVAILABLE,
            sandbox::REASON_OBJECT_NAME_TAKEN,
            // From the registry, git and SKILL.md errors.
            "DigestMismatch",
            "ImageNotFound",
            "ImageTooLarge",
            "InvalidImage",
            "InvalidRef",
            "InvalidReference",
            "GooseIncompatible",
            "InvalidSkill",
            "InvalidSource",
            "InvalidSubPath",
            "LinkInSkill",
            "NestedSkillFile",
            "RefNotFound",
            "RegistryError",
            "RepositoryNotFound",
            "RepositoryTooLarge",
            "SkillNotFound",
            "SourceUnavailable",
            "SubPathRequired",
            "Unauthorized",
            "UnsafeImageContent",
            "UnsafeSourceContent",
            // Trust policies: `Ready` and `Verified`.
            trust::REASON_REVOKED,
            trust::REASON_UNVERIFIED,
            trust::REASON_VERIFICATION_UNAVAILABLE,
            trust::REASON_SIGNATURE_VERIFIED,
            trust::REASON_NEW_PIN_REFUSED,
            trust::REASON_UNSIGNED,
            trust::REASON_SIGNATURE_INVALID,
        ],
    },
    Vocabulary {
        kind: "SkillCollection",
        reasons: &[
            collections::REASON_ALL_SKILLS_RESOLVED,
            collections::REASON_SKILLS_NOT_READY,
            REASON_REGISTRY_UNAVAILABLE,
            sandbox::REASON_OBJECT_NAME_TAKEN,
            "DigestMismatch",
            "DuplicateSkillCardName",
            "ImageNotFound",
            "ImageTooLarge",
            "InvalidImage",
            "InvalidReference",
            "GooseIncompatible",
            "InvalidSkill",
            "LinkInSkill",
            "NestedSkillFile",
            "NoSkills",
            "TooManySkills",
            "Unauthorized",
            "UnsafeImageContent",
        ],
    },
    Vocabulary {
        kind: "Gateway",
        reasons: &[
            gateway::REASON_CONNECTION_VERIFIED,
            gateway::REASON_VERIFICATION_SKIPPED,
            gateway::REASON_UNAUTHORIZED,
            gateway::REASON_ENDPOINT_UNREACHABLE,
            gateway::REASON_UNEXPECTED_STATUS,
            gateway::REASON_TLS_FAILURE,
            gateway::REASON_INVALID_ENDPOINT,
            gateway::REASON_INVALID_CREDENTIAL,
            gateway::REASON_SECRET_NOT_FOUND,
            gateway::REASON_SECRET_KEY_NOT_FOUND,
        ],
    },
    Vocabulary {
        kind: "Agent",
        reasons: &[
            REASON_AGENT_READY,
            REASON_KNOWN_SKILL_DELIVERY,
            skills::REASON_HARNESS_MAY_IGNORE_INJECT,
            REASON_GATEWAY_NOT_FOUND,
            REASON_GATEWAY_NOT_READY,
            skills::REASON_UNKNOWN_SKILL_DELIVERY,
            skills::REASON_GATEWAYS_LISTED,
            skills::REASON_NO_GATEWAYS_LISTED,
            skills::REASON_DEFAULT_SKILLS_APPLIED,
            skills::REASON_DEFAULT_SKILLS_SHADOWED,
            skills::REASON_DEFAULT_SKILLS_SKIPPED,
            skills::REASON_DUPLICATE_DEFAULT_SKILL,
            skills::REASON_RULES_FIT,
            skills::REASON_RULES_EXCEED_CONTEXT,
            "DuplicateSkillName",
            "InvalidSkillName",
            "SkillCardNotFound",
            "SkillCardNotReady",
            "SkillCollectionNotFound",
            "SkillCollectionNotReady",
        ],
    },
    Vocabulary {
        kind: "AgentRun",
        reasons: &[
            sandbox::REASON_SANDBOX_CREATING,
            sandbox::REASON_POD_PENDING,
            sandbox::REASON_AGENT_RUNNING,
            sandbox::REASON_AGENT_SUCCEEDED,
            sandbox::REASON_AGENT_FAILED,
            sandbox::REASON_LIMIT_REACHED,
            sandbox::REASON_REFUSED,
            sandbox::REASON_POD_FAILED,
            sandbox::REASON_SKILL_FETCH_FAILED,
            sandbox::REASON_SANDBOX_LOST,
            sandbox::REASON_STARTUP_FAILED,
            sandbox::REASON_STARTUP_DEADLINE_EXCEEDED,
            sandbox::REASON_DEADLINE_EXCEEDED,
            sandbox::REASON_QUEUED,
            sandbox::REASON_CANCELLED,
            sandbox::REASON_OBJECT_NAME_TAKEN,
            sandbox::REASON_SUCCEEDED,
            sandbox::REASON_FAILED,
            sandbox::REASON_RUNNING,
            sandbox::REASON_LISTENING,
            sandbox::REASON_NOT_LISTENING,
            sandbox::REASON_FINISHED,
            REASON_GATEWAY_NOT_FOUND,
            REASON_GATEWAY_NOT_READY,
            sandbox::REASON_FILE_MOUNT_SOURCE_NOT_FOUND,
            sandbox::REASON_FILE_MOUNT_SOURCE_UNAVAILABLE,
            "AgentNotFound",
            "AgentNotReady",
            "AnnotationsTooLarge",
            "DuplicateEnvName",
            "DuplicateParam",
            "GatewayNotAllowed",
            "GatewayRequired",
            "InvalidFileMounts",
            "InvalidGitConfig",
            "InvalidParamDefault",
            "InvalidParamValue",
            "InvalidParams",
            "MissingParam",
            "NoGateway",
            "OperatorImageNotSet",
            "ReservedEnvName",
            "SkillCardNotFound",
            "SkillCardNotReady",
            "UnknownParam",
            "UnresolvedReference",
        ],
    },
    Vocabulary {
        kind: "AgentWorkflow",
        reasons: &[
            workflow::REASON_ALL_AGENTS_READY,
            workflow::REASON_AGENTS_NOT_READY,
            "InvalidParams",
        ],
    },
    Vocabulary {
        kind: "AgentWorkflowRun",
        reasons: &[
            workflow::REASON_WORKFLOW_NOT_FOUND,
            workflow::REASON_WORKFLOW_NOT_READY,
            workflow::REASON_STAGE_RUNNING,
            workflow::REASON_STAGE_SUCCEEDED,
            workflow::REASON_STAGE_FAILED,
            workflow::REASON_AGENT_RUN_DELETED,
            sandbox::REASON_SUCCEEDED,
            sandbox::REASON_CANCELLED,
            sandbox::REASON_OBJECT_NAME_TAKEN,
            "AgentNotFound",
            "AgentNotReady",
            "InvalidParams",
        ],
    },
];

/// The reasons of a failed pass: the `reason` label of `agentic_reconcile_errors_total` and
/// the reason in the note of a `ReconcileFailed` Event (the operator's errors).
pub const RECONCILE_ERRORS: &[&str] = &[
    "ApiError",
    "ApiUnavailable",
    REASON_REGISTRY_UNAVAILABLE,
    "SourceUnavailable",
    "SerializationFailed",
    "MissingMetadata",
    "HttpClientFailed",
    "MalformedObject",
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The backquoted CamelCase words of the `reason` column of each `## Kind` section's
    /// tables (its `###` subsections included), and of the "Reconcile errors" section's text.
    fn documented() -> BTreeMap<String, BTreeSet<String>> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/conditions.md");
        let text = std::fs::read_to_string(path).expect("docs/conditions.md");
        let mut sections: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut section = String::new();
        let mut column = None;
        for line in text.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                section = heading.trim().to_string();
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let words = if section == "Reconcile errors" {
                line
            } else if !line.starts_with('|') {
                column = None;
                continue;
            } else if let Some(index) = cells.iter().position(|cell| *cell == "reason") {
                column = Some(index);
                continue;
            } else {
                match column.and_then(|index| cells.get(index)) {
                    Some(cell) => cell,
                    None => continue,
                }
            };
            let reasons = words.split('`').skip(1).step_by(2).filter(|word| {
                word.len() > 1
                    && word.starts_with(|c: char| c.is_ascii_uppercase())
                    && word.chars().all(|c| c.is_ascii_alphanumeric())
                    && word.chars().any(|c| c.is_ascii_lowercase())
            });
            sections
                .entry(section.clone())
                .or_default()
                .extend(reasons.map(str::to_owned));
        }
        sections
    }

    fn set(reasons: &[&str]) -> BTreeSet<String> {
        reasons.iter().map(|r| (*r).to_owned()).collect()
    }

    #[test]
    fn each_section_of_the_docs_lists_exactly_its_kinds_reasons() {
        let documented = documented();
        for vocabulary in VOCABULARY {
            let table = set(vocabulary.reasons);
            assert_eq!(
                table.len(),
                vocabulary.reasons.len(),
                "{} lists a reason twice",
                vocabulary.kind
            );
            let section = documented.get(vocabulary.kind).cloned().unwrap_or_default();
            let undocumented: Vec<_> = table.difference(&section).collect();
            let unknown: Vec<_> = section.difference(&table).collect();
            assert!(
                undocumented.is_empty() && unknown.is_empty(),
                "{}: not in its section of docs/conditions.md: {undocumented:?}; documented but not in its table: {unknown:?}",
                vocabulary.kind
            );
        }
        let errors = documented
            .get("Reconcile errors")
            .cloned()
            .unwrap_or_default();
        let listed = set(RECONCILE_ERRORS);
        assert!(
            listed.is_subset(&errors),
            "reconcile errors not documented: {:?}",
            listed.difference(&errors).collect::<Vec<_>>()
        );
    }
}
