//! The status of a trust policy: the generation it describes, its blast radius (the runs
//! that mounted a skill it revokes or did not verify) and whether its keys could be read.

use agentic_api::{AffectedRun, CONDITION_READY, ConditionStatus, SkillTrustPolicyStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::Conditions;
use crate::reasons::SkillTrustPolicyReason;

/// The status of a policy at generation `generation`, from the one it had (`old`): its
/// blast radius as [`super::blast_radius`] counted it, and `Ready` from `keys`, the
/// outcome of reading every key, certificate, Secret and ConfigMap it names (`Err` says
/// which could not be read or parsed, and why).
pub fn policy_status(
    old: &SkillTrustPolicyStatus,
    generation: Option<i64>,
    keys: Result<(), String>,
    (affected_runs, blast_radius): (i64, Vec<AffectedRun>),
    now: Time,
) -> SkillTrustPolicyStatus {
    let mut status = SkillTrustPolicyStatus {
        observed_generation: generation,
        affected_runs,
        blast_radius,
        conditions: old.conditions.clone(),
    };
    let mut conditions =
        Conditions::<SkillTrustPolicyReason>::new(&mut status.conditions, generation, now);
    match keys {
        Ok(()) => conditions.set(
            CONDITION_READY,
            ConditionStatus::True,
            SkillTrustPolicyReason::KeysRead,
            "every key, certificate, Secret and ConfigMap the policy names was read and parsed",
        ),
        Err(why) => conditions.set(
            CONDITION_READY,
            ConditionStatus::False,
            SkillTrustPolicyReason::KeyUnreadable,
            &why,
        ),
    };
    status
}

#[cfg(test)]
mod tests {
    use agentic_api::AgentRunPhase;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::conditions::find_condition;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("a time"))
    }

    fn affected(name: &str) -> AffectedRun {
        AffectedRun {
            namespace: "team".into(),
            name: name.into(),
            phase: Some(AgentRunPhase::Running),
            skill: "pdf".into(),
            image: "registry.example/skills/pdf@sha256:00".into(),
            reason: "Revoked".into(),
        }
    }

    #[test]
    fn the_status_carries_the_blast_radius_and_the_generation() {
        let status = policy_status(
            &SkillTrustPolicyStatus::default(),
            Some(3),
            Ok(()),
            (2, vec![affected("a"), affected("b")]),
            at(1),
        );
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.affected_runs, 2);
        assert_eq!(status.blast_radius, [affected("a"), affected("b")]);
        let ready = find_condition(&status.conditions, CONDITION_READY).expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "KeysRead")
        );
        assert_eq!(ready.observed_generation, Some(3));
    }

    #[test]
    fn an_unreadable_key_turns_ready_false_with_why() {
        let why = "SkillTrustPolicy/team/p: Secret team/keys has no key \"cosign.pub\"";
        let status = policy_status(
            &SkillTrustPolicyStatus::default(),
            Some(1),
            Err(why.into()),
            (0, Vec::new()),
            at(1),
        );
        let ready = find_condition(&status.conditions, CONDITION_READY).expect("Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason, "KeyUnreadable");
        assert_eq!(ready.message, why);
    }

    #[test]
    fn a_status_computed_again_from_the_same_inputs_is_identical() {
        let first = policy_status(
            &SkillTrustPolicyStatus::default(),
            Some(1),
            Ok(()),
            (1, vec![affected("a")]),
            at(1),
        );
        let again = policy_status(&first, Some(1), Ok(()), (1, vec![affected("a")]), at(99));
        assert_eq!(again, first);
    }
}
