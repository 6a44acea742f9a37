//! A card's status once its pin is judged by the trust policies: the status its pass decided
//! from the skill ([`super::decide_card`]), with the `Verified` condition and
//! `status.verification`, `Ready=False` when trust forbids the pin, or the previous verified
//! pin kept when the tag or branch moved to bytes that do not verify. When the policies
//! cannot be known the card fails closed: nothing new is pinned or admitted.

use agentic_api::{CONDITION_READY, ConditionStatus, SkillCardStatus, VerificationState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{CardDecision, CardInputs, Next, decide_card};
use crate::conditions::{Conditions, is_ready};
use crate::pin::Pin;
use crate::reasons::SkillCardReason;
use crate::trust::{
    CONDITION_VERIFIED, OutcomesByPin, PinChoice, PinnedSource, Policies, Verdict, apply_to_card,
    choose_pin, judge, judge_unpinned, keep_previous_pin, ready_pin,
};

/// What a card's trust is decided from, as its pass read it.
#[derive(Clone, Debug)]
pub struct TrustEvidence {
    /// The policies in force for the card's namespace, or why they cannot be known.
    pub policies: Result<Policies, String>,
    /// For each pin the pass may keep ([`pins_to_check`]), the outcome of each selecting
    /// policy's requirement, in the order of [`Policies::selecting`].
    pub outcomes: OutcomesByPin,
}

/// The pins whose signatures a card's pass checks: the one its skill read pinned now
/// (`read`), and the one the card was Ready on before, which it keeps when the new one does
/// not verify or its server did not answer.
pub fn pins_to_check(read: Option<&str>, old: &SkillCardStatus) -> Vec<Pin> {
    let mut pins: Vec<Pin> = read.and_then(Pin::parse).into_iter().collect();
    if let Some(previous) = ready_pin(old).and_then(Pin::parse)
        && !pins.contains(&previous)
    {
        pins.push(previous);
    }
    pins
}

/// A card's status and ConfigMap, decided from its skill ([`decide_card`]) and judged by the
/// trust policies ([`decide_trust`]); until the policies are known the card is looked at
/// again soon.
pub fn decide_trusted_card(
    inputs: &CardInputs<'_>,
    evidence: &TrustEvidence,
    old: &SkillCardStatus,
    now: &Time,
) -> CardDecision {
    let mut decision = decide_card(inputs, old, now);
    let generation = inputs.card.metadata.generation;
    decision.status = decide_trust(decision.status, old, evidence, generation, now);
    if evidence.policies.is_err() && decision.next != Next::Unavailable {
        decision.next = Next::TrustPoliciesUnavailable;
    }
    decision
}

/// The card's status once trust is applied to `decided`, the status its pass decided from
/// the skill: with the policies known, the verdict on the pin it is Ready on (a tag moved to
/// bytes that do not verify keeps the previous verified pin); without them, fail-closed
/// ([`policies_unknown`]).
pub fn decide_trust(
    mut decided: SkillCardStatus,
    old: &SkillCardStatus,
    evidence: &TrustEvidence,
    generation: Option<i64>,
    now: &Time,
) -> SkillCardStatus {
    let policies = match &evidence.policies {
        Ok(policies) => policies,
        Err(why) => return policies_unknown(decided, old, why, generation, now),
    };
    let Some(pin) = ready_pin(&decided).map(str::to_string) else {
        // No pin (an inline skill): only `unselected: Deny` can hold it back.
        let verdict = judge_unpinned(policies, &decided);
        apply_to_card(&mut decided, verdict.as_ref(), generation, now);
        return decided;
    };
    let verdict = verdict_on(policies, &pin, evidence);
    let previous_pin = old
        .verification
        .as_ref()
        .and(ready_pin(old))
        .filter(|previous| *previous != pin);
    let previous = match previous_pin {
        Some(previous) if verdict.as_ref().is_some_and(|v| !v.usable()) => {
            verdict_on(policies, previous, evidence)
        }
        _ => None,
    };
    match choose_pin(&pin, verdict.as_ref(), previous_pin, previous.as_ref()) {
        PinChoice::KeepPrevious { message } => keep_previous_pin(old, &message, generation, now),
        PinChoice::Adopt => {
            apply_to_card(&mut decided, verdict.as_ref(), generation, now);
            decided
        }
    }
}

/// The verdict on the pin a status records as `recorded`, parsed once here.
fn verdict_on(policies: &Policies, recorded: &str, evidence: &TrustEvidence) -> Option<Verdict> {
    let pin = Pin::parse(recorded);
    let outcomes = pin
        .as_ref()
        .and_then(|pin| evidence.outcomes.get(pin))
        .map_or(&[][..], Vec::as_slice);
    judge(policies, &PinnedSource::of(pin.as_ref()), outcomes)
}

/// The card's status when the trust policies cannot be known (`why`): a card Ready on this
/// content before stays Ready on it, a card whose tag moved keeps its verified pin, and
/// anything else is not admitted; `Verified` says why.
fn policies_unknown(
    mut decided: SkillCardStatus,
    old: &SkillCardStatus,
    why: &str,
    generation: Option<i64>,
    now: &Time,
) -> SkillCardStatus {
    if !is_ready(&decided.conditions) {
        return decided;
    }
    let message =
        format!("the trust policies cannot be known, so nothing new is pinned or admitted: {why}");
    let pin = ready_pin(&decided).map(str::to_string);
    // Inline content has no pin: it is the same only at the generation it was admitted at.
    let admitted_before = is_ready(&old.conditions)
        && ready_pin(old) == pin.as_deref()
        && (pin.is_some() || old.observed_generation == generation);
    if admitted_before {
        Conditions::<SkillCardReason>::new(&mut decided.conditions, generation, now.clone()).set(
            CONDITION_VERIFIED,
            ConditionStatus::Unknown,
            SkillCardReason::TrustPoliciesUnavailable,
            &message,
        );
        return decided;
    }
    let verified_before = old
        .verification
        .as_ref()
        .is_some_and(|v| v.state == VerificationState::Verified);
    if let (true, Some(previous), Some(pin)) = (verified_before, ready_pin(old), &pin) {
        let refused = format!("kept {previous}; refused {pin}: {message}");
        return keep_previous_pin(old, &refused, generation, now);
    }
    let mut conditions =
        Conditions::<SkillCardReason>::new(&mut decided.conditions, generation, now.clone());
    for (condition, status) in [
        (CONDITION_VERIFIED, ConditionStatus::Unknown),
        (CONDITION_READY, ConditionStatus::False),
    ] {
        conditions.set(
            condition,
            status,
            SkillCardReason::TrustPoliciesUnavailable,
            &message,
        );
    }
    decided
}

#[cfg(test)]
mod tests;
