//! The pure middle of the reconcilers: the controllers read objects from the API server,
//! call these functions, and apply what they return. Nothing here talks to a server, reads
//! a clock or draws random numbers, so the same inputs always give byte-identical outputs.
//!
//! - [`collections`]: a SkillCollection's SkillCards, generated and referenced, and its
//!   readiness.
//! - [`conditions`]: status conditions that change only when something changed.
//! - [`params`]: a run's string params typed against the Agent's declarations, and its
//!   whole params.json.
//! - [`git`]: the author of a run's commits.
//! - [`substitution`]: `$(agent.<name>)` and `$(workflow.<name>)` in prompts and instructions.
//! - [`skills`]: an Agent's skills, gateways and skill delivery; a run's gateway.
//! - [`gateway`]: the check of a Gateway's endpoint and what its answer means.
//! - [`names`]: names and label values of the objects created for runs and SkillCards.
//! - [`owners`]: who controls an object, from its controller ownerReference.
//! - [`workflow`]: an AgentWorkflow's readiness, and each step of an AgentWorkflowRun (its
//!   snapshot, its stages' AgentRuns, its outcome).
//! - [`sandbox`]: a run's sandbox (pod spec, Pod or agent-sandbox `Sandbox`, ConfigMaps,
//!   Secret), the run's outcome read back from its pod, and its lifecycle (admission under an
//!   Agent's cap, deadlines, cancellation, time to live).
//!
//! # Reasons
//!
//! Every condition reason this crate produces, in one place. Errors carry theirs in
//! [`Error::reason`]; run outcomes in [`sandbox::RunOutcome::reason`].
//!
//! | reason | from | meaning |
//! |--------|------|---------|
//! | `UnknownParam` | [`Error::UnknownParam`] | a run sets a param the Agent does not declare |
//! | `DuplicateParam` | [`Error::DuplicateParam`] | a param is set (or declared) twice |
//! | `MissingParam` | [`Error::MissingParam`] | a required param is not set |
//! | `InvalidParamValue` | [`Error::InvalidParamValue`] | a value does not parse as its type |
//! | `InvalidParamDefault` | [`Error::InvalidParamDefault`] | a default does not parse as its type |
//! | `UnresolvedReference` | [`Error::UnresolvedReference`] | a prompt or instructions reference `$(agent.x)` or `$(workflow.x)` without a value |
//! | `InvalidParams` | [`Error::InvalidParams`] | all of the above, listed at once |
//! | `InvalidGitConfig` | [`Error::InvalidGitConfig`] | the run's (or else the Agent's) `spec.gitConfig` is not a usable commit author |
//! | `InvalidFileMounts` | [`Error::InvalidFileMounts`] | a run's `spec.fileMounts` path is not absolute, repeats, or is, lies inside or contains a directory the operator mounts |
//! | `SkillCardNotFound` | [`Error::MissingSkillCards`] | referenced SkillCards do not exist |
//! | `SkillCardNotReady` | [`Error::SkillCardsNotReady`] | referenced SkillCards are not usable yet |
//! | `DuplicateSkillName` | [`Error::DuplicateSkillName`] | two SkillCards provide one skill name |
//! | `SkillCollectionNotFound` | [`Error::MissingSkillCollections`] | referenced SkillCollections do not exist |
//! | `SkillCollectionNotReady` | [`Error::SkillCollectionsNotReady`] | referenced SkillCollections are not Ready |
//! | `NoSkills` | [`Error::NoSkills`] | a SkillCollection's image holds no skill |
//! | `TooManySkills` | [`Error::TooManySkills`] | a SkillCollection holds more than [`collections::MAX_COLLECTION_SKILLS`] skills |
//! | `DuplicateSkillCardName` | [`Error::DuplicateSkillCardName`] | two skills of a SkillCollection would get one SkillCard name |
//! | `AllSkillsResolved` | [`collections::REASON_ALL_SKILLS_RESOLVED`] | every SkillCard of a SkillCollection is Ready |
//! | `SkillsNotReady` | [`collections::REASON_SKILLS_NOT_READY`] | SkillCards of a SkillCollection are missing or not Ready |
//! | `DefaultSkillsApplied` | [`skills::REASON_DEFAULT_SKILLS_APPLIED`] | every default skill is in the Agent's skill set |
//! | `DefaultSkillsShadowed` | [`skills::REASON_DEFAULT_SKILLS_SHADOWED`] | some default skills are replaced by the Agent's own of that name |
//! | `DefaultSkillsSkipped` | [`skills::REASON_DEFAULT_SKILLS_SKIPPED`] | some default skills are left out: not Ready or not mountable |
//! | `DuplicateDefaultSkill` | [`skills::REASON_DUPLICATE_DEFAULT_SKILL`] | two default skills share a name; both are left out |
//! | `RulesFit` | [`skills::REASON_RULES_FIT`] | an Agent's rules fit their share of the smallest context window |
//! | `RulesExceedContext` | [`skills::REASON_RULES_EXCEED_CONTEXT`] | an Agent's rules take more than their share of the smallest context window |
//! | `InvalidSkillName` | [`Error::InvalidSkillName`] | a skill name is not a safe directory name |
//! | `MissingInlineSkill` | [`Error::MissingInlineSkill`] | a SkillCard has no `spec.inline` |
//! | `OperatorImageNotSet` | [`Error::OperatorImageNotSet`] | a run has git skills and the operator has no `--operator-image` for their init containers |
//! | `GatewayNotFound` | [`Error::GatewayNotFound`] | referenced Gateways do not exist |
//! | `GatewayNotReady` | [`Error::GatewayNotReady`] | referenced Gateways are not Ready |
//! | `NoGateway` | [`Error::NoGateway`] | the Agent lists no gateway |
//! | `GatewayRequired` | [`Error::GatewayRequired`] | several gateways and the run picks none |
//! | `GatewayNotAllowed` | [`Error::GatewayNotAllowed`] | the run picks a gateway the Agent does not list |
//! | `AgentNotFound` | [`Error::AgentNotFound`] | the run's Agent does not exist |
//! | `AgentNotReady` | [`Error::AgentNotReady`] | the run's Agent is not Ready |
//! | `ReservedEnvName` | [`Error::ReservedEnvName`] | the run's env sets an operator variable |
//! | `DuplicateEnvName` | [`Error::DuplicateEnvName`] | the run's env repeats a name |
//! | `MissingMetadata` | [`Error::MissingMetadata`] | an object has no name or namespace |
//! | `SerializationFailed` | [`Error::Serialization`] | a built object could not become JSON |
//! | `UnknownSkillDelivery` | [`skills::REASON_UNKNOWN_SKILL_DELIVERY`] | `spec.skillDelivery` is unknown; runs use `inject` |
//! | `SandboxCreating` | [`sandbox::REASON_SANDBOX_CREATING`] | run Pending: no pod yet |
//! | `PodPending` | [`sandbox::REASON_POD_PENDING`] | run Pending: the agent container has not started |
//! | `AgentRunning` | [`sandbox::REASON_AGENT_RUNNING`] | run Running |
//! | `AgentSucceeded` | [`sandbox::REASON_AGENT_SUCCEEDED`] | run Succeeded: the agent exited 0 |
//! | `AgentFailed` | [`sandbox::REASON_AGENT_FAILED`] | run Failed: the agent exited non-zero (not 2 or 3) |
//! | `LimitReached` | [`sandbox::REASON_LIMIT_REACHED`] | run Failed: the agent exited 2, an execution limit was reached |
//! | `Refused` | [`sandbox::REASON_REFUSED`] | run Failed: the agent exited 3, it refused the task |
//! | `Succeeded`, `Failed`, `Running` | [`sandbox::succeeded_reason`] | Konveyor's names on the `Succeeded` condition for `AgentSucceeded`, `AgentFailed`, `AgentRunning` |
//! | `Listening`, `NotListening`, `Finished` | [`sandbox::REASON_LISTENING`], [`sandbox::REASON_NOT_LISTENING`], [`sandbox::REASON_FINISHED`] | the run's `ACPReady` condition |
//! | `PodFailed` | [`sandbox::REASON_POD_FAILED`] | run Failed: the pod failed first (eviction) |
//! | `SkillFetchFailed` | [`sandbox::REASON_SKILL_FETCH_FAILED`] | run Failed: an init container fetching a git skill failed |
//! | `SandboxLost` | [`sandbox::REASON_SANDBOX_LOST`] | run Failed: sandbox or pod gone or replaced after the start |
//! | `StartupFailed` | [`sandbox::REASON_STARTUP_FAILED`] | run Failed: the kubelet cannot start the agent container |
//! | `StartupDeadlineExceeded` | [`sandbox::REASON_STARTUP_DEADLINE_EXCEEDED`] | run Failed: the agent did not start within the startup deadline |
//! | `Queued` | [`sandbox::REASON_QUEUED`] | run Pending: its Agent's `spec.maxConcurrentRuns` runs are active |
//! | `DeadlineExceeded` | [`sandbox::REASON_DEADLINE_EXCEEDED`] | run Failed: the agent ran past `spec.activeDeadlineSeconds` |
//! | `Cancelled` | [`sandbox::REASON_CANCELLED`] | run Failed: `spec.cancel` is true |
//! | `ConnectionVerified` | [`gateway::REASON_CONNECTION_VERIFIED`] | Gateway Ready: its endpoint answered the check with its credential |
//! | `VerificationSkipped` | [`gateway::REASON_VERIFICATION_SKIPPED`] | Gateway Ready unchecked: cloud-signed provider, no endpoint, or a keyless credential |
//! | `Unauthorized` | [`gateway::REASON_UNAUTHORIZED`] | Gateway not Ready: the endpoint answered 401 or 403 |
//! | `EndpointUnreachable` | [`gateway::REASON_ENDPOINT_UNREACHABLE`] | Gateway check: no connection, or no answer in time |
//! | `UnexpectedStatus` | [`gateway::REASON_UNEXPECTED_STATUS`] | Gateway check: an answer other than 2xx, 401, 403 |
//! | `TLSFailure` | [`gateway::REASON_TLS_FAILURE`] | Gateway check: the TLS handshake failed |
//! | `InvalidEndpoint` | [`gateway::REASON_INVALID_ENDPOINT`] | Gateway not Ready: `spec.endpoint` cannot be checked |
//! | `InvalidCredential` | [`gateway::REASON_INVALID_CREDENTIAL`] | Gateway not Ready: the key cannot go in a header |
//! | `SecretNotFound` | [`gateway::REASON_SECRET_NOT_FOUND`] | Gateway not Ready: its credential Secret does not exist |
//! | `SecretKeyNotFound` | [`gateway::REASON_SECRET_KEY_NOT_FOUND`] | Gateway not Ready: the Secret lacks `spec.credentialRef.key` |
//! | `AllAgentsReady` | [`workflow::REASON_ALL_AGENTS_READY`] | AgentWorkflow Ready: every stage's Agent is Ready |
//! | `AgentsNotReady` | [`workflow::REASON_AGENTS_NOT_READY`] | AgentWorkflow not Ready: a stage's Agent is missing or not Ready |
//! | `WorkflowNotFound` | [`workflow::REASON_WORKFLOW_NOT_FOUND`] | workflow run Pending: its AgentWorkflow does not exist |
//! | `WorkflowNotReady` | [`workflow::REASON_WORKFLOW_NOT_READY`] | workflow run Pending: its AgentWorkflow is not Ready |
//! | `StageRunning` | [`workflow::REASON_STAGE_RUNNING`] | workflow run Running: the current stage's run is on its way |
//! | `StageSucceeded` | [`workflow::REASON_STAGE_SUCCEEDED`] | workflow run Running: a stage succeeded, the next starts |
//! | `StageFailed` | [`workflow::REASON_STAGE_FAILED`] | workflow run Failed: a stage's run failed |
//! | `AgentRunDeleted` | [`workflow::REASON_AGENT_RUN_DELETED`] | workflow run Failed: a stage's run was deleted before it finished |
//! | `ObjectNameTaken` | [`sandbox::REASON_OBJECT_NAME_TAKEN`] | run Pending, inline SkillCard not Ready, or workflow run Failed: an object it does not control holds the name of one of its objects |

pub mod collections;
pub mod conditions;
mod error;
pub mod events;
pub mod gateway;
pub mod git;
pub mod names;
pub mod owners;
pub mod params;
pub mod sandbox;
pub mod skills;
pub mod substitution;
pub mod sweep;
pub mod workflow;

pub use error::Error;
