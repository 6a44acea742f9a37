use agentic_api::SkillVerification;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;
use crate::conditions::find_condition;

const OLD_PIN: &str = "registry.example/skills/pdf@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW_PIN: &str = "registry.example/skills/pdf@sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// A status Ready on `pin`, at generation 1.
fn ready_on(pin: &str) -> SkillCardStatus {
    let mut status = SkillCardStatus {
        observed_generation: Some(1),
        resolved_image: Some(pin.to_string()),
        ..Default::default()
    };
    Conditions::<SkillCardReason>::new(&mut status.conditions, Some(1), now()).set(
        CONDITION_READY,
        ConditionStatus::True,
        SkillCardReason::SkillValid,
        "valid",
    );
    status
}

/// `ready_on(pin)`, verified by a policy.
fn verified_on(pin: &str) -> SkillCardStatus {
    let mut status = ready_on(pin);
    status.verification = Some(SkillVerification {
        state: VerificationState::Verified,
        signer: Some("SHA256:key".into()),
        ..Default::default()
    });
    Conditions::<SkillCardReason>::new(&mut status.conditions, Some(1), now()).set(
        CONDITION_VERIFIED,
        ConditionStatus::True,
        SkillCardReason::SignatureVerified,
        "signed",
    );
    status
}

fn unknown() -> TrustEvidence {
    TrustEvidence {
        policies: Err("the trust policies have not been listed".into()),
        outcomes: OutcomesByPin::new(),
    }
}

fn condition<'a>(status: &'a SkillCardStatus, name: &str) -> Option<&'a Condition> {
    find_condition(&status.conditions, name)
}

fn reason_of(status: &SkillCardStatus, name: &str) -> Option<(String, String)> {
    condition(status, name).map(|c| (c.status.clone(), c.reason.clone()))
}

#[test]
fn the_pins_checked_are_the_new_one_and_the_one_the_card_was_ready_on() {
    assert_eq!(
        pins_to_check(Some(NEW_PIN), &verified_on(OLD_PIN)),
        [NEW_PIN, OLD_PIN].map(|pin| Pin::parse(pin).expect("a pin"))
    );
    assert_eq!(
        pins_to_check(Some(OLD_PIN), &verified_on(OLD_PIN)),
        [Pin::parse(OLD_PIN).expect("a pin")]
    );
    assert_eq!(
        pins_to_check(None, &SkillCardStatus::default()),
        Vec::<Pin>::new()
    );
}

#[test]
fn without_the_policies_a_tag_moved_to_new_bytes_keeps_the_verified_pin() {
    let old = verified_on(OLD_PIN);
    let kept = decide_trust(ready_on(NEW_PIN), &old, &unknown(), Some(1), &now());
    assert_eq!(kept.resolved_image.as_deref(), Some(OLD_PIN));
    assert_eq!(
        reason_of(&kept, CONDITION_READY),
        Some(("True".into(), "SkillValid".into()))
    );
    let verified = condition(&kept, CONDITION_VERIFIED).unwrap();
    assert_eq!(verified.reason, "NewPinRefused");
    assert!(
        verified.message.contains(NEW_PIN) && verified.message.contains("cannot be known"),
        "{}",
        verified.message
    );
}

#[test]
fn without_the_policies_a_card_ready_on_its_pin_stays_ready_and_says_why() {
    let old = ready_on(OLD_PIN);
    let kept = decide_trust(ready_on(OLD_PIN), &old, &unknown(), Some(1), &now());
    assert_eq!(kept.resolved_image.as_deref(), Some(OLD_PIN));
    assert_eq!(
        reason_of(&kept, CONDITION_READY),
        Some(("True".into(), "SkillValid".into()))
    );
    assert_eq!(
        reason_of(&kept, CONDITION_VERIFIED),
        Some(("Unknown".into(), "TrustPoliciesUnavailable".into()))
    );
}

#[test]
fn without_the_policies_nothing_new_is_admitted() {
    // A card never Ready, and a card Ready on unverified bytes whose tag moved.
    for old in [SkillCardStatus::default(), ready_on(OLD_PIN)] {
        let held = decide_trust(ready_on(NEW_PIN), &old, &unknown(), Some(1), &now());
        assert_eq!(
            reason_of(&held, CONDITION_READY),
            Some(("False".into(), "TrustPoliciesUnavailable".into())),
            "{old:?}"
        );
    }
    // New inline content (a new generation) likewise.
    let mut inline = ready_on(OLD_PIN);
    inline.resolved_image = None;
    let mut decided = inline.clone();
    decided.observed_generation = Some(2);
    let held = decide_trust(decided, &inline, &unknown(), Some(2), &now());
    assert_eq!(
        reason_of(&held, CONDITION_READY),
        Some(("False".into(), "TrustPoliciesUnavailable".into()))
    );
}

#[test]
fn with_no_policy_in_force_a_card_reads_as_before_trust_policies() {
    let evidence = TrustEvidence {
        policies: Ok(Policies::default()),
        outcomes: OutcomesByPin::new(),
    };
    let decided = decide_trust(
        ready_on(NEW_PIN),
        &verified_on(OLD_PIN),
        &evidence,
        Some(1),
        &now(),
    );
    assert_eq!(decided.resolved_image.as_deref(), Some(NEW_PIN));
    assert!(condition(&decided, CONDITION_VERIFIED).is_none());
    assert!(decided.verification.is_none());
}
