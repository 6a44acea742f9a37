//! The `konveyor.io/v1alpha1` API: SkillCard, SkillCollection, Agent, AgentRun, Gateway,
//! AgentWorkflow and AgentWorkflowRun.
//!
//! Field names follow the Konveyor agentic platform so that its manifests apply unchanged.
//! The doc comments on the types below are what `kubectl explain` shows users.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys across columns, which this lint
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

mod agent;
mod agentrun;
mod agentworkflow;
mod agentworkflowrun;
mod condition;
mod descriptions;
mod execution;
mod filemount;
mod gateway;
mod gitconfig;
mod skillcard;
mod skillcollection;
mod trustpolicy;

pub use agent::{
    Agent, AgentParam, AgentRuntime, AgentSkill, AgentSpec, AgentStatus, CredentialProxyMode,
    ObjectRef, ParamType, SkillOrigin,
};
pub use agentrun::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentRunStatus, PinnedSkill, RunParam,
    UnmountedSkillLoad,
};
pub use agentworkflow::{
    AgentWorkflow, AgentWorkflowSpec, AgentWorkflowStage, AgentWorkflowStatus, STAGE_NAME_PATTERN,
};
pub use agentworkflowrun::{
    AgentWorkflowRun, AgentWorkflowRunSpec, AgentWorkflowRunStageStatus, AgentWorkflowRunStatus,
    WORKFLOW_RUN_SPEC_IMMUTABLE_MESSAGE, WORKFLOW_RUN_SPEC_IMMUTABLE_RULE,
};
pub use condition::{CONDITION_COMPLETED, CONDITION_READY, ConditionStatus};
pub use execution::{ExecutionLimits, ExecutionMode, MAX_COST_PATTERN, RunExecution};
pub use filemount::FileMount;
pub use gateway::{CredentialRef, Gateway, GatewayModel, GatewaySpec, GatewayStatus};
pub use gitconfig::{
    GIT_USER_EMAIL_PATTERN, GIT_USER_NAME_PATTERN, GitConfig, MAX_GIT_USER_EMAIL, MAX_GIT_USER_NAME,
};
pub use skillcard::{
    DeliveryMode, SecretRef, SkillCard, SkillCardSpec, SkillCardStatus, SkillFrontmatter, SkillType,
};
pub use skillcollection::{
    DEFAULT_SKILLS_LABEL, DEFAULTS_MANAGER, MANAGED_BY_LABEL, SKILL_COLLECTION_LABEL,
    SkillCollection, SkillCollectionSkill, SkillCollectionSpec, SkillCollectionStatus,
};

pub use trustpolicy::{
    AffectedRun, ClusterSkillTrustPolicy, ClusterSkillTrustPolicySpec, GitSigners, KeyRef,
    KeySource, KeylessIdentity, MAX_BLAST_RADIUS_ENTRIES, REVOKED_COMMIT_PATTERN,
    REVOKED_DIGEST_PATTERN, REVOKED_KEY_PATTERN, RevocationAction, Revocations, SignatureBinding,
    SkillTrustPolicy, SkillTrustPolicySpec, SkillTrustPolicyStatus, SkillVerification, TRUST_GROUP,
    TrustMode, TrustPolicy, TrustRoot, UnselectedSkills, VerificationState,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The API group of every kind in this crate.
pub const GROUP: &str = "konveyor.io";
/// The API version of every kind in this crate.
pub const VERSION: &str = "v1alpha1";

/// What a reference to another object must look like: a DNS-1123 subdomain, the name rule of
/// ConfigMaps, Secrets and custom resources. References go into request paths, so `/`, `..`
/// and the like are refused by the schema rather than sent to the API server.
pub const OBJECT_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Every CustomResourceDefinition of this API, in a stable order, with descriptions unwrapped
/// for `kubectl explain`, `name` optional (default `""`) in env's ConfigMap and Secret
/// references, and Konveyor's default `Pending` on `status.phase`.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        SkillCard::crd(),
        Agent::crd(),
        AgentRun::crd(),
        Gateway::crd(),
        SkillCollection::crd(),
        AgentWorkflow::crd(),
        AgentWorkflowRun::crd(),
    ];
    crds.iter_mut().for_each(descriptions::unwrap_crd);
    crds.iter_mut()
        .for_each(descriptions::optional_reference_names);
    crds.iter_mut().for_each(descriptions::pending_status_phase);
    crds
}

/// The CustomResourceDefinitions of our extension group [`TRUST_GROUP`], apart from
/// [`crds`]: those are Konveyor's kinds, all namespaced in `konveyor.io`.
pub fn trust_crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![ClusterSkillTrustPolicy::crd(), SkillTrustPolicy::crd()];
    crds.iter_mut().for_each(descriptions::unwrap_crd);
    crds
}

/// Every `konveyor.io` CRD as one multi-document YAML stream, as committed in
/// `config/crd/bases/konveyor.io.yaml`.
pub fn crds_yaml() -> Result<String, serde_json::Error> {
    to_yaml_stream(crds())
}

/// Every trust policy CRD as one multi-document YAML stream, as committed in
/// `config/crd/bases/trust.agentic-operator.io.yaml`.
pub fn trust_crds_yaml() -> Result<String, serde_json::Error> {
    to_yaml_stream(trust_crds())
}

fn to_yaml_stream(crds: Vec<CustomResourceDefinition>) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&yaml::to_yaml(&serde_json::to_value(&crd)?));
    }
    Ok(out)
}

/// The schema of a field holding any JSON object, kept as written
/// (`x-kubernetes-preserve-unknown-fields`).
pub(crate) fn any_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

mod yaml;

#[cfg(test)]
mod tests;
