//! The one error type of this crate.

use agentic_api::ParamType;

use crate::reasons::ErrorReason;

/// Why an Agent, an AgentRun or one of their sandbox objects cannot be built as asked.
///
/// Every variant has a stable CamelCase [`reason`](Error::reason), fit for a condition's
/// `reason`, and a message (its `Display`) written for the user who owns the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A run sets a param the Agent does not declare.
    #[error("param {name:?} is not declared by the Agent")]
    UnknownParam {
        /// The param as the run names it.
        name: String,
    },

    /// A run sets the same param more than once.
    #[error("param {name:?} is set more than once")]
    DuplicateParam {
        /// The repeated name.
        name: String,
    },

    /// A required param is not set by the run.
    #[error("param {name:?} is required but not set")]
    MissingParam {
        /// The declared name.
        name: String,
    },

    /// A run's value does not parse as the param's declared type.
    #[error("param {name:?} must be {}, got {value:?}", expectation(*expected))]
    InvalidParamValue {
        /// The declared name.
        name: String,
        /// The value as the run gives it.
        value: String,
        /// The declared type.
        expected: ParamType,
    },

    /// An Agent's declared default does not parse as the param's declared type.
    #[error("param {name:?} has default {value:?}, which is not {}", expectation(*expected))]
    InvalidParamDefault {
        /// The declared name.
        name: String,
        /// The default as declared.
        value: String,
        /// The declared type.
        expected: ParamType,
    },

    /// `spec.prompt` or `spec.instructions` references a param that has no value.
    #[error(
        "{field} references {reference}, which {}",
        if reference.starts_with("$(workflow.") { "spec.workflowParams does not set" } else { "is not a param the Agent declares" }
    )]
    UnresolvedReference {
        /// Where the reference is: `spec.prompt` (the Agent's) or `spec.instructions`.
        field: &'static str,
        /// The reference as written, `$(agent.<name>)` or `$(workflow.<name>)`.
        reference: String,
    },

    /// The run's or the Agent's `spec.gitConfig` cannot be used as a commit author.
    #[error("{field}: {problem}")]
    InvalidGitConfig {
        /// Which object's field: `AgentRun spec.gitConfig` or `Agent spec.gitConfig`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },

    /// The run's `spec.fileMounts` cannot be mounted; every problem, in the mounts' order.
    #[error("spec.fileMounts: {}", .0.join("; "))]
    InvalidFileMounts(Vec<String>),

    /// Every param problem found at once; each item is one of the param variants above.
    #[error("{}", join_messages(.0))]
    InvalidParams(Vec<Error>),

    /// SkillCards an Agent references do not exist.
    #[error("{} not found", name_list("SkillCard", .0))]
    MissingSkillCards(Vec<String>),

    /// SkillCards an Agent references exist but cannot be used yet.
    #[error("{}", not_ready_list("SkillCard", .0))]
    SkillCardsNotReady(Vec<(String, String)>),

    /// Two SkillCards of one Agent provide skills with the same frontmatter name, so both
    /// would mount at the same path.
    #[error(
        "skill {skill:?} is provided by both {} and {}; skill names must be unique within an Agent",
        card_source(first_card, first_collection.as_deref()),
        card_source(second_card, second_collection.as_deref())
    )]
    DuplicateSkillName {
        /// The frontmatter name both cards declare.
        skill: String,
        /// The card listed first (`spec.skillCards` before the collections).
        first_card: String,
        /// The SkillCollection that lists the first card, if one does.
        first_collection: Option<String>,
        /// The card listed later.
        second_card: String,
        /// The SkillCollection that lists the second card, if one does.
        second_collection: Option<String>,
    },

    /// SkillCollections an Agent references do not exist.
    #[error("{} not found", name_list("SkillCollection", .0))]
    MissingSkillCollections(Vec<String>),

    /// SkillCollections an Agent references exist but are not Ready.
    #[error("{}", not_ready_list("SkillCollection", .0))]
    SkillCollectionsNotReady(Vec<(String, String)>),

    /// A SkillCollection's image holds no skill.
    #[error("image {image} holds no SKILL.md at its root and no top-level directory with one")]
    NoSkills {
        /// The image, pinned by digest.
        image: String,
    },

    /// A SkillCollection holds more skills than one collection may.
    #[error("the collection holds {count} skills, more than the {max} one collection may hold")]
    TooManySkills {
        /// How many skills it holds.
        count: usize,
        /// [`crate::collections::MAX_COLLECTION_SKILLS`].
        max: usize,
    },

    /// Two skills of one SkillCollection would get the same SkillCard name.
    #[error(
        "skills {first:?} and {second:?} of the collection would both be SkillCard {card:?}; rename one"
    )]
    DuplicateSkillCardName {
        /// The SkillCard name.
        card: String,
        /// The first skill (directory, entry or referenced card).
        first: String,
        /// The second.
        second: String,
    },

    /// A skill name that is not a safe directory name under `/opt/skills`.
    #[error(
        "skill {name:?} from SkillCard {skill_card:?} is not a valid skill name (1 to 64 of a-z, 0-9 and inner '-')"
    )]
    InvalidSkillName {
        /// The name as found.
        name: String,
        /// The card it comes from.
        skill_card: String,
    },

    /// A SkillCard without `spec.inline` was asked for its inline ConfigMap.
    #[error("SkillCard {skill_card:?} has no spec.inline")]
    MissingInlineSkill {
        /// The card's name.
        skill_card: String,
    },

    /// A run has git skills, and the operator was not told its own image, which their init
    /// containers run.
    #[error(
        "git skill(s) {} are fetched by an init container running the operator's own image; start the operator with --operator-image (env AGENTIC_OPERATOR_IMAGE)",
        .skills.join(", ")
    )]
    OperatorImageNotSet {
        /// Names of the git skills.
        skills: Vec<String>,
    },

    /// Gateways an Agent references do not exist.
    #[error("{} not found", name_list("Gateway", .0))]
    GatewayNotFound(Vec<String>),

    /// Gateways an Agent references exist but are not Ready.
    #[error("{}", not_ready_list("Gateway", .0))]
    GatewayNotReady(Vec<(String, String)>),

    /// The Agent lists no gateway, so a run has no LLM endpoint.
    #[error(
        "the Agent lists no gateways; set spec.gateway to a Gateway, or add one to the Agent's spec.gateways"
    )]
    NoGateway,

    /// The Agent lists several gateways and the run does not pick one.
    #[error(
        "the Agent lists several gateways ({}); set spec.gateway to one of them",
        quoted(.choices)
    )]
    GatewayRequired {
        /// The Agent's gateways, in spec order.
        choices: Vec<String>,
    },

    /// The run asks for a gateway the Agent does not list.
    #[error(
        "gateway {requested:?} is not one of the Agent's gateways ({})",
        quoted(.allowed)
    )]
    GatewayNotAllowed {
        /// The run's `spec.gateway`.
        requested: String,
        /// The Agent's gateways, in spec order.
        allowed: Vec<String>,
    },

    /// The run's Agent does not exist.
    #[error("Agent {name:?} not found")]
    AgentNotFound {
        /// The run's `spec.agentRef`.
        name: String,
    },

    /// The run's Agent exists but is not Ready for its current spec.
    #[error("Agent {name:?} is not ready: {detail}")]
    AgentNotReady {
        /// The Agent's name.
        name: String,
        /// What is missing.
        detail: String,
    },

    /// The run's `spec.env` sets names the operator reserves.
    #[error(
        "spec.env sets {}, reserved for the operator (names starting with KONVEYOR_, and HARNESS_SKILL_MODE)",
        quoted(.names)
    )]
    ReservedEnvName {
        /// The offending names, in spec order.
        names: Vec<String>,
    },

    /// The run's `spec.env` sets the same name twice.
    #[error("spec.env sets {} more than once", quoted(.names))]
    DuplicateEnvName {
        /// The repeated names, in spec order.
        names: Vec<String>,
    },

    /// The skills manifest, params and pinned skills a run's sandbox carries as annotations
    /// would not fit what an object's annotations may hold.
    #[error(
        "AgentRun {run:?}: its skills manifest, params.json and pinned skills take {bytes} bytes as annotations of its sandbox, over the {limit} bytes allowed (the API server's {} bytes for all of an object's annotations, less {} left for others' annotations); give the Agent fewer skills or shorter descriptions, or the run shorter params",
        crate::sandbox::MAX_ANNOTATIONS_BYTES,
        crate::sandbox::ANNOTATIONS_LEFT_FOR_OTHERS_BYTES
    )]
    AnnotationsTooLarge {
        /// The run's name.
        run: String,
        /// The annotations' keys and values, in bytes.
        bytes: usize,
        /// What the operator allows.
        limit: usize,
    },

    /// An object lacks metadata the API server always sets (name or namespace).
    #[error("{kind} has no {field}")]
    MissingMetadata {
        /// The kind of the object.
        kind: &'static str,
        /// The missing field, for example `metadata.namespace`.
        field: &'static str,
    },

    /// Turning a built object into JSON failed.
    #[error("cannot serialize {what}: {message}")]
    Serialization {
        /// What was being serialized.
        what: &'static str,
        /// The serializer's message.
        message: String,
    },
}

impl Error {
    /// The reason of a condition that reports this error, of an Event and a metric label.
    pub fn reason(&self) -> ErrorReason {
        match self {
            Error::UnknownParam { .. } => ErrorReason::UnknownParam,
            Error::DuplicateParam { .. } => ErrorReason::DuplicateParam,
            Error::MissingParam { .. } => ErrorReason::MissingParam,
            Error::InvalidParamValue { .. } => ErrorReason::InvalidParamValue,
            Error::InvalidParamDefault { .. } => ErrorReason::InvalidParamDefault,
            Error::UnresolvedReference { .. } => ErrorReason::UnresolvedReference,
            Error::InvalidParams(_) => ErrorReason::InvalidParams,
            Error::InvalidGitConfig { .. } => ErrorReason::InvalidGitConfig,
            Error::InvalidFileMounts(_) => ErrorReason::InvalidFileMounts,
            Error::MissingSkillCards(_) => ErrorReason::SkillCardNotFound,
            Error::SkillCardsNotReady(_) => ErrorReason::SkillCardNotReady,
            Error::DuplicateSkillName { .. } => ErrorReason::DuplicateSkillName,
            Error::MissingSkillCollections(_) => ErrorReason::SkillCollectionNotFound,
            Error::SkillCollectionsNotReady(_) => ErrorReason::SkillCollectionNotReady,
            Error::NoSkills { .. } => ErrorReason::NoSkills,
            Error::TooManySkills { .. } => ErrorReason::TooManySkills,
            Error::DuplicateSkillCardName { .. } => ErrorReason::DuplicateSkillCardName,
            Error::InvalidSkillName { .. } => ErrorReason::InvalidSkillName,
            Error::MissingInlineSkill { .. } => ErrorReason::MissingInlineSkill,
            Error::OperatorImageNotSet { .. } => ErrorReason::OperatorImageNotSet,
            Error::GatewayNotFound(_) => ErrorReason::GatewayNotFound,
            Error::GatewayNotReady(_) => ErrorReason::GatewayNotReady,
            Error::NoGateway => ErrorReason::NoGateway,
            Error::GatewayRequired { .. } => ErrorReason::GatewayRequired,
            Error::GatewayNotAllowed { .. } => ErrorReason::GatewayNotAllowed,
            Error::AgentNotFound { .. } => ErrorReason::AgentNotFound,
            Error::AgentNotReady { .. } => ErrorReason::AgentNotReady,
            Error::ReservedEnvName { .. } => ErrorReason::ReservedEnvName,
            Error::DuplicateEnvName { .. } => ErrorReason::DuplicateEnvName,
            Error::AnnotationsTooLarge { .. } => ErrorReason::AnnotationsTooLarge,
            Error::MissingMetadata { .. } => ErrorReason::MissingMetadata,
            Error::Serialization { .. } => ErrorReason::SerializationFailed,
        }
    }
}

fn expectation(expected: ParamType) -> &'static str {
    match expected {
        ParamType::String => "a string",
        ParamType::Number => {
            "a finite number as Go's strconv reads it (for example 3, +5, 2.5, 1e3 or 0x1p4)"
        }
        ParamType::Boolean => {
            "a boolean as Go's strconv reads it (true, false, 1, 0, t, f, T, F, TRUE, FALSE, True or False)"
        }
    }
}

fn join_messages(errors: &[Error]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `SkillCard "a"` or `SkillCards "a", "b"`.
fn name_list(kind: &str, names: &[String]) -> String {
    let plural = if names.len() == 1 { "" } else { "s" };
    format!("{kind}{plural} {}", quoted(names))
}

/// `SkillCard "a"`, or `SkillCard "a" of SkillCollection "c"`.
fn card_source(card: &str, collection: Option<&str>) -> String {
    match collection {
        Some(collection) => format!("SkillCard {card:?} of SkillCollection {collection:?}"),
        None => format!("SkillCard {card:?}"),
    }
}

fn not_ready_list(kind: &str, items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(name, why)| format!("{kind} {name:?} is not ready: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variants whose reason is not their own name keep the words users match on.
    #[test]
    fn renamed_variants_keep_their_reasons() {
        let samples = [
            (Error::MissingSkillCards(vec![]), "SkillCardNotFound"),
            (Error::SkillCardsNotReady(vec![]), "SkillCardNotReady"),
            (
                Error::MissingSkillCollections(vec![]),
                "SkillCollectionNotFound",
            ),
            (
                Error::SkillCollectionsNotReady(vec![]),
                "SkillCollectionNotReady",
            ),
            (
                Error::Serialization {
                    what: "x",
                    message: String::new(),
                },
                "SerializationFailed",
            ),
        ];
        for (error, reason) in samples {
            assert_eq!(error.reason().as_str(), reason, "{error:?}");
        }
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(
            Error::MissingSkillCards(vec!["a".into()]).to_string(),
            r#"SkillCard "a" not found"#
        );
        assert_eq!(
            Error::GatewayNotFound(vec!["a".into(), "b".into()]).to_string(),
            r#"Gateways "a", "b" not found"#
        );
        assert_eq!(
            Error::SkillCardsNotReady(vec![
                ("a".into(), "no resolved image".into()),
                ("b".into(), "Ready is False".into())
            ])
            .to_string(),
            r#"SkillCard "a" is not ready: no resolved image; SkillCard "b" is not ready: Ready is False"#
        );
    }
}
