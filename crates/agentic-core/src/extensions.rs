//! Noticing that a client which does not know our spec fields dropped them.
//!
//! Konveyor's Hub (and so its console) edits an object by reading it into Konveyor's Go type,
//! setting `spec` from the request and sending the whole object back: every spec field only
//! this operator has (an Agent's `skillDelivery`, `maxConcurrentRuns`, `defaultSkills`, `runtime`, a
//! SkillCard's `pullSecrets`, `sourceSecret`) is dropped, without an error. The operator cannot
//! tell such an edit from a deliberate one, so it keeps nothing back; it says what went.
//!
//! Each pass records the extension fields the spec sets (to a value other than unset's) in
//! the object's `status.extensionFields`. Status survives such an edit (an update of the
//! object never changes its status) and a restart of the operator (it lives in the API
//! server, not in the operator's memory). A field recorded and no longer set is reported:
//! the `ExtensionsKept` condition turns False naming each field and the value it had, with a
//! Warning Event. The condition stays until the spec changes again (a new generation), and is
//! removed then, so an object that never lost a field never carries it.

use std::collections::BTreeMap;

use agentic_api::{AgentSpec, ConditionStatus, SkillCardSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use crate::conditions::{Conditions, find_condition};
use crate::events::StatusEvent;
use crate::reasons::Reason;

/// The condition that reports extension fields a spec update removed; present only then.
pub const CONDITION_EXTENSIONS_KEPT: &str = "ExtensionsKept";

/// The extension fields a spec sets: each field's path (`spec.skillDelivery`) and its value
/// as JSON text.
pub type Extensions = BTreeMap<String, String>;

/// A value as JSON text (every API type serializes).
macro_rules! json {
    ($value:expr) => {
        serde_json::to_value($value)
            .unwrap_or(Value::Null)
            .to_string()
    };
}

/// An Agent's extension fields that are set to something other than what unset means.
pub fn of_agent(spec: &AgentSpec) -> Extensions {
    let mut fields = Extensions::new();
    if spec.skill_delivery != "native" {
        fields.insert("spec.skillDelivery".into(), json!(&spec.skill_delivery));
    }
    if let Some(max) = spec.max_concurrent_runs {
        fields.insert("spec.maxConcurrentRuns".into(), json!(max));
    }
    if spec.default_skills == Some(false) {
        fields.insert("spec.defaultSkills".into(), json!(false));
    }
    if let Some(capture) = spec.capture_message_content {
        fields.insert("spec.captureMessageContent".into(), json!(capture));
    }
    if let Some(runtime) = &spec.runtime {
        // Dropped, the runs would quietly go back to one container that holds everything.
        fields.insert("spec.runtime".into(), json!(runtime));
    }
    if let Some(mode) = spec.credential_proxy {
        fields.insert("spec.credentialProxy".into(), json!(mode));
    }
    fields
}

/// A SkillCard's extension fields that are set.
pub fn of_skill_card(spec: &SkillCardSpec) -> Extensions {
    let mut fields = Extensions::new();
    if let Some(secrets) = spec.pull_secrets.as_ref().filter(|s| !s.is_empty()) {
        fields.insert("spec.pullSecrets".into(), json!(secrets));
    }
    if let Some(secret) = &spec.source_secret {
        fields.insert("spec.sourceSecret".into(), json!(secret));
    }
    fields
}

/// What a pass records and reports about the extension fields of an object at
/// `generation`: `seen` is what the status it starts from recorded, `now` what the spec
/// sets, `old` the status's conditions and `conditions` the ones the pass writes (the
/// `ExtensionsKept` condition is set, carried over or removed there). Returns what to record
/// and the Warning Event when fields were removed.
pub fn judge<R: Reason>(
    seen: &Extensions,
    now: Extensions,
    old: &[Condition],
    conditions: &mut Vec<Condition>,
    generation: Option<i64>,
    time: &Time,
    reason: R,
) -> (Extensions, Option<StatusEvent>) {
    let removed: Vec<String> = seen
        .iter()
        .filter(|(field, _)| !now.contains_key(*field))
        .map(|(field, value)| format!("{field} (was {value})"))
        .collect();
    if !removed.is_empty() {
        let message = format!(
            "{} removed by the update to generation {}: agentic-operator extension field(s) a client that does not know them (Konveyor's Hub and console replace the spec with Konveyor's type) drops; the object now behaves as if they were never set. Set them again if that was not intended",
            removed.join(", "),
            generation.unwrap_or_default()
        );
        Conditions::<R>::new(conditions, generation, time.clone()).set(
            CONDITION_EXTENSIONS_KEPT,
            ConditionStatus::False,
            reason,
            &message,
        );
        let event = StatusEvent {
            warning: true,
            reason: reason.as_str().to_string(),
            note: message,
        };
        return (now, Some(event));
    }
    match find_condition(old, CONDITION_EXTENSIONS_KEPT) {
        // Reported at this generation: kept until the spec changes again.
        Some(kept) if kept.observed_generation == generation => {
            if find_condition(conditions, CONDITION_EXTENSIONS_KEPT).is_none() {
                conditions.push(kept.clone());
            }
        }
        _ => {
            Conditions::<R>::new(conditions, generation, time.clone())
                .remove(CONDITION_EXTENSIONS_KEPT);
        }
    }
    (now, None)
}

#[cfg(test)]
mod tests {
    use agentic_api::SecretRef;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::reasons::AgentReason;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("a time"))
    }

    fn agent(delivery: &str, max: Option<i32>, defaults: Option<bool>) -> AgentSpec {
        AgentSpec {
            skill_delivery: delivery.into(),
            max_concurrent_runs: max,
            default_skills: defaults,
            ..AgentSpec::default()
        }
    }

    #[test]
    fn only_values_unset_does_not_mean_are_recorded() {
        assert!(of_agent(&agent("native", None, None)).is_empty());
        assert!(of_agent(&agent("native", None, Some(true))).is_empty());
        let off = AgentSpec {
            credential_proxy: Some(agentic_api::CredentialProxyMode::Off),
            ..agent("native", None, None)
        };
        assert_eq!(
            of_agent(&off),
            Extensions::from([("spec.credentialProxy".into(), "\"off\"".into())])
        );
        assert_eq!(
            of_agent(&agent("inject", Some(2), Some(false))),
            Extensions::from([
                ("spec.defaultSkills".into(), "false".into()),
                ("spec.maxConcurrentRuns".into(), "2".into()),
                ("spec.skillDelivery".into(), "\"inject\"".into()),
            ])
        );
        let card = SkillCardSpec {
            pull_secrets: Some(vec![SecretRef {
                name: "regcred".into(),
            }]),
            source_secret: Some(SecretRef { name: "git".into() }),
            ..SkillCardSpec::default()
        };
        assert_eq!(
            of_skill_card(&card),
            Extensions::from([
                ("spec.pullSecrets".into(), r#"[{"name":"regcred"}]"#.into()),
                ("spec.sourceSecret".into(), r#"{"name":"git"}"#.into()),
            ])
        );
        assert!(of_skill_card(&SkillCardSpec::default()).is_empty());
    }

    #[test]
    fn the_runtime_container_is_recorded_as_set() {
        let spec = AgentSpec {
            runtime: Some(agentic_api::AgentRuntime {
                image: None,
                command: vec!["goose".into()],
                harness_user: 1001,
                runtime_user: 1002,
                group: 0,
            }),
            ..agent("native", None, None)
        };
        assert_eq!(
            of_agent(&spec),
            Extensions::from([(
                "spec.runtime".into(),
                r#"{"command":["goose"],"group":0,"harnessUser":1001,"runtimeUser":1002}"#.into()
            )])
        );
    }

    /// One pass: the record and conditions it writes, and its Event.
    fn pass(
        seen: &Extensions,
        spec: &AgentSpec,
        old: &[Condition],
        generation: i64,
    ) -> (Extensions, Vec<Condition>, Option<StatusEvent>) {
        let mut conditions = old.to_vec();
        let (record, event) = judge(
            seen,
            of_agent(spec),
            old,
            &mut conditions,
            Some(generation),
            &at(generation),
            AgentReason::ExtensionFieldsDropped,
        );
        (record, conditions, event)
    }

    #[test]
    fn a_removed_field_is_named_until_the_spec_changes_again() {
        let set = agent("inject", Some(2), None);
        let (seen, conditions, event) = pass(&Extensions::new(), &set, &[], 1);
        assert!(event.is_none() && conditions.is_empty(), "nothing lost yet");

        // A Konveyor-typed PUT: both fields go, skillDelivery back to its default.
        let dropped = agent("native", None, None);
        let (record, conditions, event) = pass(&seen, &dropped, &[], 2);
        assert!(record.is_empty());
        let event = event.expect("a Warning Event");
        assert!(event.warning);
        assert_eq!(event.reason, "ExtensionFieldsDropped");
        for field in [
            "spec.skillDelivery (was \"inject\")",
            "spec.maxConcurrentRuns (was 2)",
        ] {
            assert!(event.note.contains(field), "{field} in {}", event.note);
        }
        let kept = find_condition(&conditions, CONDITION_EXTENSIONS_KEPT).expect("condition");
        assert_eq!(kept.status, "False");
        assert_eq!(kept.message, event.note);

        // Later passes at that generation keep it (even one whose conditions start empty),
        // and raise nothing more.
        let (_, again, event) = pass(&record, &dropped, &conditions, 2);
        assert!(event.is_none());
        assert_eq!(again, conditions);
        let mut fresh = Vec::new();
        judge(
            &record,
            of_agent(&dropped),
            &conditions,
            &mut fresh,
            Some(2),
            &at(3),
            AgentReason::ExtensionFieldsDropped,
        );
        assert_eq!(fresh, conditions);

        // The next spec change clears it.
        let (_, cleared, event) = pass(&record, &dropped, &conditions, 3);
        assert!(event.is_none());
        assert!(find_condition(&cleared, CONDITION_EXTENSIONS_KEPT).is_none());
    }

    #[test]
    fn a_changed_value_is_not_a_removal() {
        let (seen, _, _) = pass(&Extensions::new(), &agent("native", Some(2), None), &[], 1);
        let (record, conditions, event) = pass(&seen, &agent("native", Some(5), None), &[], 2);
        assert!(event.is_none() && conditions.is_empty());
        assert_eq!(record["spec.maxConcurrentRuns"], "5");
    }
}
