//! Whether a run that has no sandbox yet may start, from what its pass read: the object that
//! holds its sandbox's name, its Agent, the Gateway and SkillCards the Agent names, and its
//! file mounts' sources. The answer is a [`StartPlan`]: wait (or fail) and why, adopt the
//! sandbox an earlier pass created, or create one from checked [`SandboxInputs`]. The slot
//! under a cap is not decided here: it is counted under the admission lock, when the sandbox
//! is created.

use std::collections::BTreeMap;

use agentic_api::{Agent, AgentRun, Gateway, PinnedSkill, SkillCard};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Error;
use crate::conditions::is_ready;
use crate::owners::is_controlled_by;
use crate::params::resolve_run;
use crate::pin::Pin;
use crate::reasons::{AgentRunReason, ErrorReason};
use crate::sandbox::{
    CredentialIsolation, CredentialProxy, CredentialProxyMode, Exposure, FileMountSources,
    MountedSkill, RunOutcome, SandboxInputs, SkillFetcher, SourceLookup, cancelled,
    file_mount_sources, pinned_skills,
};
use crate::skills::{
    Lookup, check_agent, malformed_detail, resolve_skill_delivery, select_gateway,
};
use crate::trust::{OutcomesByPin, PinnedSource, Policies, judge};

/// A file mount's source as gathered: its kind (`Secret`, `ConfigMap`) and name.
pub type SourceKey = (&'static str, String);

/// What a run's start is decided from, as its pass read it.
pub struct StartInputs<'a> {
    pub run: &'a AgentRun,
    /// The run's UID: a sandbox it controls is its own.
    pub run_uid: &'a str,
    /// The kind of object the sandbox is (`Pod` or `Sandbox`), for messages.
    pub sandbox_kind: &'static str,
    /// The object holding the sandbox's name, if any.
    pub sandbox: Option<&'a ObjectMeta>,
    /// The Agent `spec.agentRef` names.
    pub agent: Lookup<'a, Agent>,
    /// The Gateway the run uses ([`gateway_to_read`]); `Missing` when none can be named.
    pub gateway: Lookup<'a, Gateway>,
    /// The SkillCard of each of the Agent's `status.skills`, in that order.
    pub cards: Vec<Lookup<'a, SkillCard>>,
    /// The keys of the file mounts' sources; a source not listed was not found.
    pub file_sources: &'a BTreeMap<SourceKey, SourceLookup>,
    /// Where git skills are fetched from (the operator's image), when configured.
    pub fetcher: Option<&'a SkillFetcher>,
    /// `--credential-proxy` and the image the proxy runs from.
    pub credential_proxy: &'a CredentialProxy,
    /// Where the agent exports its traces (the operator's receiver), when configured.
    pub trace_receiver: Option<&'a crate::sandbox::TraceReceiver>,
    /// The trust policies of the run's namespace and of the cluster, whose revocations hold
    /// the run whatever namespace a skill's card lives in; or why they cannot be known.
    pub policies: Result<&'a Policies, &'a str>,
    /// The outcome of each of those policies' requirements on each cluster-wide default
    /// skill, by pin ([`Policies::selecting`]'s order): such a card is judged under the
    /// default-skills namespace's policies, and the run's own must admit it too.
    pub default_signatures: &'a OutcomesByPin,
}

/// What a run without a sandbox does in this pass.
#[derive(Debug)]
pub enum StartPlan<'a> {
    /// It cannot start (yet), or it ends before it starts: why.
    Blocked(RunOutcome),
    /// Its sandbox exists from an earlier pass (the operator stopped before the status was
    /// written): it is adopted, never rebuilt, with the skills its annotation pins.
    Adopt(Vec<PinnedSkill>),
    /// Its sandbox is to be created from these inputs, once admitted under the caps.
    Create(Box<SandboxInputs<'a>>),
}

/// The Gateway a run of `agent` uses, for the pass to read: the one the run names among the
/// Agent's, or the Agent's first; `None` when the run names none it may use (the plan says
/// why).
pub fn gateway_to_read(run: &AgentRun, agent: &Agent) -> Option<String> {
    select_gateway(&agent.spec.gateways, run.spec.gateway.as_deref()).ok()
}

/// Whether a Gateway read from a watch cache can be taken as it is: a Gateway the Agent lists
/// is covered by the Agent's `Ready`; one the run names itself must be Ready.
pub fn gateway_usable(agent: &Agent, gateway: &Gateway) -> bool {
    !agent.spec.gateways.is_empty() || gateway_ready(gateway)
}

fn gateway_ready(gateway: &Gateway) -> bool {
    gateway
        .status
        .as_ref()
        .is_some_and(|status| is_ready(&status.conditions))
}

/// Decides a run's start, in Konveyor's order: `spec.cancel`; the object holding the
/// sandbox's name (another's: the name is taken; the run's own: adopted); the Agent, Ready;
/// the run's params; its Gateway; each skill against its card as it is now, and against the
/// revocations of the run's trust policies; the sandbox's inputs checked; the file mounts' sources (missing: wait, lacking a key: fail).
pub fn plan_start<'a>(inputs: &StartInputs<'a>) -> StartPlan<'a> {
    decide(inputs).unwrap_or_else(StartPlan::Blocked)
}

/// [`plan_start`], with why the run is held as the error, so the checks read in order.
fn decide<'a>(inputs: &StartInputs<'a>) -> Result<StartPlan<'a>, RunOutcome> {
    let run = inputs.run;
    if run.spec.cancel == Some(true) {
        return Err(cancelled(None));
    }
    if let Some(sandbox) = inputs.sandbox {
        if !is_controlled_by(sandbox, inputs.run_uid) {
            let name = sandbox.name.as_deref().unwrap_or_default();
            return Err(RunOutcome::name_taken(inputs.sandbox_kind, name));
        }
        return Ok(StartPlan::Adopt(pinned_skills(sandbox)));
    }
    let agent = check_agent(&run.spec.agent_ref, inputs.agent)
        .map_err(|e| pending(&e, "spec.agentRef: "))?;
    let params = resolve_run(&agent.spec, &run.spec).map_err(|e| failed(&e, "spec.params: "))?;
    let gateway = usable_gateway(run, agent, inputs.gateway)?;
    let skills = mounted_skills(agent, &inputs.cards).map_err(|e| pending(&e, ""))?;
    let none = Policies::default();
    let policies = match inputs.policies {
        Ok(policies) => policies,
        Err(_) if skills.is_empty() => &none,
        // Fail-closed: a revocation not known yet must not be mounted past.
        Err(why) => {
            let message =
                format!("the trust policies cannot be known, so no skill is mounted yet: {why}");
            return Err(RunOutcome::pending(AgentRunReason::SkillBlocked, message));
        }
    };
    if let Some(why) = revoked_skill(policies, &skills) {
        return Err(RunOutcome::pending(AgentRunReason::SkillBlocked, why));
    }
    if let Some(why) = default_not_admitted(agent, policies, inputs.default_signatures, inputs.run)
    {
        return Err(RunOutcome::pending(AgentRunReason::SkillBlocked, why));
    }
    let delivery = resolve_skill_delivery(&agent.spec.skill_delivery);
    let proxy = inputs.credential_proxy.for_agent(&agent.spec);
    let sandbox = SandboxInputs::new(
        run,
        agent,
        gateway,
        skills,
        delivery.mode,
        params,
        inputs.fetcher,
    )
    .map(|sandbox| sandbox.with_trace_receiver(inputs.trace_receiver))
    .map_err(|e| match e {
        // The operator's configuration, not the run, is missing: restarted with the flag,
        // it reconciles every run again and this one starts.
        Error::OperatorImageNotSet { .. } => pending(&e, ""),
        _ => failed(&e, ""),
    })?
    .with_credential_proxy(&proxy);
    if proxy.mode == CredentialProxyMode::Required
        && let CredentialIsolation::Exposed(why) = sandbox.credential_isolation()
    {
        return Err(isolation_required(
            *why,
            sandbox.credential_isolation().clone(),
        ));
    }
    let sources = file_mount_sources(sandbox.namespace(), &run.spec.file_mounts, |kind, name| {
        inputs
            .file_sources
            .get(&(kind.as_str(), name.to_string()))
            .cloned()
            .unwrap_or(SourceLookup::NotFound)
    });
    match sources {
        FileMountSources::Ready => Ok(StartPlan::Create(Box::new(sandbox))),
        FileMountSources::Wait { reason, message } => Err(RunOutcome::pending(reason, message)),
        FileMountSources::Invalid(e) => Err(failed(&e, "")),
    }
}

/// Why a run may not mount one of `skills`: a policy revokes its digest or commit, or a key
/// its card verified it with. A card of the run's namespace that a policy revokes is not Ready
/// already; a cluster-wide default's card lives under another namespace's policies, so the
/// run's own are checked here for every skill.
fn revoked_skill(policies: &Policies, skills: &[MountedSkill]) -> Option<String> {
    skills.iter().find_map(|skill| {
        let pin = skill.source.pin();
        let pinned = Pin::parse(&pin);
        let by = policies
            .revoking_content(&PinnedSource::of(pinned.as_ref()))
            .or_else(|| policies.revoking_any_signer(skill.verification.as_ref()?))?;
        Some(format!(
            "skill {:?} ({pin}) is revoked by {}; the run waits until the revocation is lifted or its Agent no longer names the skill",
            skill.name, by.id
        ))
    })
}

/// Why the run's namespace does not admit one of the Agent's cluster-wide default skills:
/// its policies' verdict on the pin (a signature they require and do not find, a revocation)
/// forbids it. The card's own verdict was given under the default-skills namespace's
/// policies; a skill of the run's namespace was judged under these already.
fn default_not_admitted(
    agent: &Agent,
    policies: &Policies,
    signatures: &OutcomesByPin,
    run: &AgentRun,
) -> Option<String> {
    let pinned = agent.status.as_ref().map_or(&[][..], |s| &s.skills[..]);
    pinned
        .iter()
        .filter(|skill| skill.namespace.is_some())
        .find_map(|skill| {
            let pin = skill.image.as_deref()?;
            let pinned = Pin::parse(pin);
            let outcomes = pinned
                .as_ref()
                .and_then(|pinned| signatures.get(pinned))
                .map_or(&[][..], Vec::as_slice);
            let verdict = judge(policies, &PinnedSource::of(pinned.as_ref()), outcomes)?;
            let (_, why) = verdict.blocked?;
            Some(format!(
                "skill {:?} ({pin}), a cluster-wide default, is not admitted by the trust policies of namespace {}: {why}",
                skill.name,
                run.metadata.namespace.as_deref().unwrap_or_default()
            ))
        })
}

/// A run whose Agent (or else the operator) requires the credential proxy and whose key would
/// reach its agent, for `why`: it waits for the operator's image, which a restart with the
/// flag brings; any other reason is the Gateway's, and the run fails.
fn isolation_required(why: Exposure, isolation: CredentialIsolation) -> RunOutcome {
    let (_, _, detail) = isolation.condition::<AgentRunReason>();
    let message = format!(
        "the credential proxy is required (the operator's --credential-proxy, or else the Agent's spec.credentialProxy) and {detail}; the run does not start"
    );
    let outcome = if why == Exposure::OperatorImageNotSet {
        RunOutcome::pending(AgentRunReason::CredentialIsolationRequired, message)
    } else {
        RunOutcome::failed(AgentRunReason::CredentialIsolationRequired, message)
    };
    outcome.with_credential_isolation(isolation)
}

/// The run waits: `error`, after the field it is about.
fn pending(error: &Error, field: &str) -> RunOutcome {
    RunOutcome::pending(error.reason(), format!("{field}{error}"))
}

/// The run fails: `error`, after the field it is about.
fn failed(error: &Error, field: &str) -> RunOutcome {
    RunOutcome::failed(error.reason(), format!("{field}{error}"))
}

/// The Gateway the run uses, as read; or why the run waits for it (or fails: it names one
/// its Agent does not list).
fn usable_gateway<'a>(
    run: &AgentRun,
    agent: &Agent,
    read: Lookup<'a, Gateway>,
) -> Result<&'a Gateway, RunOutcome> {
    let name = select_gateway(&agent.spec.gateways, run.spec.gateway.as_deref())
        .map_err(|e| RunOutcome::failed(e.reason(), format!("spec.gateway: {e}")))?;
    match read {
        Lookup::Found(gateway) if gateway_usable(agent, gateway) => Ok(gateway),
        Lookup::Found(_) => Err(RunOutcome::pending(
            ErrorReason::GatewayNotReady,
            format!("Gateway {name:?} is not Ready"),
        )),
        Lookup::Missing => Err(RunOutcome::pending(
            ErrorReason::GatewayNotFound,
            format!("Gateway {name:?} not found"),
        )),
        Lookup::Malformed(error) => {
            let e = Error::GatewayNotReady(vec![(name, malformed_detail(error))]);
            Err(RunOutcome::pending(e.reason(), e.to_string()))
        }
    }
}

/// The skills the Agent pinned, each checked against its SkillCard as it is now. A card the
/// Agent's status is ahead of or behind makes the run wait: the Agent's next pass catches up
/// and its watch brings the run back.
fn mounted_skills(
    agent: &Agent,
    cards: &[Lookup<'_, SkillCard>],
) -> Result<Vec<MountedSkill>, Error> {
    let pinned = agent.status.as_ref().map_or(&[][..], |s| &s.skills[..]);
    pinned
        .iter()
        .enumerate()
        .map(|(index, skill)| {
            let card = cards.get(index).copied().unwrap_or(Lookup::Missing);
            MountedSkill::from_agent_skill(skill, card)
        })
        .collect()
}

#[cfg(test)]
mod tests;
