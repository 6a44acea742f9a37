//! The pure middle of the reconcilers: the controllers read objects from the API server,
//! call these functions, and apply what they return. Nothing here talks to a server, reads
//! a clock or draws random numbers, so the same inputs always give byte-identical outputs.
//!
//! - [`agent`]: an Agent's status, from what it names as read.
//! - [`applied`]: whether an apply would change an object as stored.
//! - [`cards`]: a SkillCard's status and inline ConfigMap, from what reading its skill
//!   came to.
//! - [`collections`]: a SkillCollection's SkillCards, generated and referenced, and its
//!   readiness.
//! - [`conditions`]: the one writer of status conditions, which change only when something
//!   changed.
//! - [`params`]: a run's string params typed against the Agent's declarations, and its
//!   whole params.json.
//! - [`git`]: the author of a run's commits.
//! - [`pin`]: what a skill is pinned to (an image digest, a git commit), parsed once.
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
//! - [`prefetch`]: which pods pull a Ready Agent's skill images onto the nodes before its
//!   first run, and its `SkillsPrefetched` condition.
//! - [`shard`]: which shard a namespace belongs to, and how replicas share the shards.
//! - [`start`]: whether a run without a sandbox waits, adopts the sandbox an earlier pass
//!   created, or has one created, from what its pass read.
//! - [`trace`]: a run's trace id, root span and W3C trace context, and a skill's source
//!   URI as trace attributes name it.
//! - [`finished`]: what the operator keeps of a finished run, and when each expires.
//! - [`trust`]: which trust policies apply to a skill, the `Verified` verdict on its pin,
//!   the pin a card keeps when its tag moves, and the runs a revocation reaches.
//! - [`events`]: the Events a status change raises.
//! - [`reasons`]: the reason vocabulary, one enum per kind, that `docs/conditions.md`
//!   documents (a test keeps the two in step). Errors carry their reason in
//!   [`Error::reason`]; run outcomes in [`sandbox::RunOutcome::reason`].

pub mod agent;
pub mod applied;
pub mod cards;
pub mod collections;
pub mod conditions;
mod error;
pub mod events;
pub mod extensions;
pub mod finished;
pub mod gateway;
pub mod git;
pub mod names;
pub mod owners;
pub mod params;
pub mod pin;
pub mod prefetch;
pub mod reasons;
pub mod sandbox;
pub mod shard;
pub mod skills;
pub mod start;
pub mod substitution;
pub mod sweep;
pub mod trace;
pub mod trust;
pub mod usage;
pub mod workflow;

pub use error::Error;
