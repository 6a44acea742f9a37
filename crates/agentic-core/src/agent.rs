//! An Agent's status, decided from what it names as read: its skill set (with the
//! default-skills collections that apply to it), its gateways (and whether its runs' keys
//! stay out of their agent containers), and the skill delivery it asks for.

use agentic_api::{Agent, AgentStatus, CONDITION_READY, ConditionStatus, Gateway, GatewaySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::Error;
use crate::conditions::Conditions;
use crate::reasons::AgentReason;
use crate::sandbox::{CONDITION_CREDENTIAL_ISOLATION, CredentialProxy, agent_credential_isolation};
use crate::skills::{
    CONDITION_DEFAULT_SKILLS, CONDITION_GATEWAY_CONFIGURED, CONDITION_RULES_FIT_CONTEXT,
    CONDITION_SKILL_DELIVERY_RESOLVED as CONDITION_SKILL_DELIVERY, DefaultCollection, Lookup,
    ResolvedSkills, SkillDeliveryMode, apply_defaults, gateway_configured, resolve_gateways,
    resolve_skill_delivery, rules_fit,
};

/// What an Agent names, as its pass read it.
pub struct AgentInputs<'a> {
    /// Each of `spec.gateways`, by name.
    pub gateways: Vec<(&'a str, Lookup<'a, Gateway>)>,
    /// Its own skill set resolved, or why it cannot be.
    pub skills: Result<ResolvedSkills, Error>,
    /// The default-skills collections that apply to it (none when it opted out or its own
    /// skills do not resolve).
    pub defaults: Vec<DefaultCollection<'a>>,
    /// The operator's credential proxy (`--credential-proxy`, `--operator-image`).
    pub credential_proxy: &'a CredentialProxy,
}

/// The Agent's next status, from what it names (`Ready`, the skill delivery, its gateways,
/// whether their keys stay out of its runs' agent containers, its default skills and whether
/// its rules fit its models' context windows), its old status and the time.
pub fn decide_agent(
    agent: &Agent,
    inputs: AgentInputs<'_>,
    old: AgentStatus,
    now: &Time,
) -> AgentStatus {
    let AgentInputs {
        gateways: gateway_refs,
        skills,
        defaults,
        credential_proxy,
    } = inputs;
    let delivery = resolve_skill_delivery(&agent.spec.skill_delivery);
    let generation = agent.metadata.generation;
    let mut new = old;
    new.observed_generation = generation;
    new.delivery_mode = Some(delivery.mode.as_str().to_string());
    let (skills, defaults) = match skills {
        Ok(resolved) if agent.spec.default_skills != Some(false) => {
            let (merged, report) = apply_defaults(resolved, &defaults);
            (Ok(merged), report.condition())
        }
        other => (other, None),
    };
    let read_gateways: Vec<(&str, &GatewaySpec)> = gateway_refs
        .iter()
        .filter_map(|(name, g)| match g {
            Lookup::Found(g) => Some((*name, &g.spec)),
            _ => None,
        })
        .collect();
    let isolation =
        agent_credential_isolation(&read_gateways, &credential_proxy.for_agent(&agent.spec));
    let mut rules = None;
    let ready = match (skills, resolve_gateways(&gateway_refs)) {
        (Ok(resolved), Ok(())) => {
            let windows: Vec<i64> = read_gateways
                .iter()
                .map(|(_, spec)| spec.model.context_window)
                .collect();
            rules = rules_fit(&resolved.rules, resolved.rule_body_bytes, &windows);
            let message = format!(
                "{} skill(s) and {} gateway(s) are ready",
                resolved.skills.len(),
                agent.spec.gateways.len()
            );
            new.skills = resolved.skills;
            new.rules = resolved.rules;
            (ConditionStatus::True, AgentReason::AgentReady, message)
        }
        (Err(e), _) | (Ok(_), Err(e)) => {
            new.skills.clear();
            new.rules.clear();
            (ConditionStatus::False, e.reason().into(), e.to_string())
        }
    };
    let truth = |holds: bool| {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    };
    let mut conditions =
        Conditions::<AgentReason>::new(&mut new.conditions, generation, now.clone());
    // Sets the condition `type_`, or removes it for `None`.
    let mut put = |type_: &str, condition: Option<(ConditionStatus, AgentReason, &str)>| {
        match condition {
            Some((status, reason, message)) => conditions.set(type_, status, reason, message),
            None => conditions.remove(type_),
        };
    };
    put(CONDITION_READY, Some((ready.0, ready.1, &ready.2)));
    let delivery_message = match &delivery.unknown {
        Some(value) => delivery.fallback_message().unwrap_or_else(|| value.clone()),
        None => format!("runs use skill delivery {}", delivery.mode.as_str()),
    };
    put(
        CONDITION_SKILL_DELIVERY,
        Some(match &delivery.unknown {
            Some(_) => (
                ConditionStatus::False,
                AgentReason::UnknownSkillDelivery,
                &delivery_message,
            ),
            None if delivery.mode == SkillDeliveryMode::Inject => (
                ConditionStatus::True,
                AgentReason::HarnessMayIgnoreInject,
                crate::skills::HARNESS_MAY_IGNORE_INJECT,
            ),
            None => (
                ConditionStatus::True,
                AgentReason::KnownSkillDelivery,
                &delivery_message,
            ),
        }),
    );
    let (status, reason, message) = gateway_configured(&agent.spec.gateways);
    put(
        CONDITION_GATEWAY_CONFIGURED,
        Some((status, reason, &message)),
    );
    put(
        CONDITION_CREDENTIAL_ISOLATION,
        isolation
            .as_ref()
            .map(|(status, reason, message)| (*status, *reason, message.as_str())),
    );
    put(
        CONDITION_DEFAULT_SKILLS,
        defaults
            .as_ref()
            .map(|(applied, reason, message)| (truth(*applied), *reason, message.as_str())),
    );
    put(
        CONDITION_RULES_FIT_CONTEXT,
        rules
            .as_ref()
            .map(|(fits, reason, message)| (truth(*fits), *reason, message.as_str())),
    );
    new
}

#[cfg(test)]
mod tests;
