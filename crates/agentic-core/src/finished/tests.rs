use super::*;
use serde_json::{Value, json};

fn run(name: &str, spec: Value, status: Value) -> AgentRun {
    serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
        "spec": spec,
        "status": status,
    }))
    .expect("an AgentRun")
}

fn ready(reason: &str) -> Value {
    json!([{
        "type": "Ready", "status": "False", "reason": reason, "message": "ended",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }])
}

/// A run that ended with `phase` and `reason` at 2026-01-01T00:00:00Z, having mounted `skill`.
fn ended(name: &str, phase: &str, reason: &str, skill: &str, spec: Value) -> AgentRun {
    run(
        name,
        spec,
        json!({
            "phase": phase, "sandboxName": format!("{name}-sandbox"),
            "completionTime": "2026-01-01T00:00:00Z",
            "skills": [{"name": skill, "image": format!("r.example/{skill}@sha256:ab"),
                        "loads": 3, "firstLoadedAt": "2025-12-31T23:59:00Z"}],
            "conditions": ready(reason),
        }),
    )
}

const COMPLETED: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn coder() -> Value {
    json!({"agentRef": "coder"})
}

#[test]
fn a_finished_run_is_kept_as_what_its_readers_read() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    let spec = json!({"agentRef": "coder", "ttlSecondsAfterFinished": 60});
    assert_eq!(
        runs.keep(&ended("a", "Succeeded", "AgentSucceeded", "s", spec)),
        Kept::Scheduled
    );
    let kept = runs.get("team", "a").expect("kept");
    assert_eq!(&*kept.uid, "uid-a");
    assert_eq!(kept.phase, AgentRunPhase::Succeeded);
    assert_eq!(
        kept.reason,
        ReadyReason::Known(AgentRunReason::AgentSucceeded)
    );
    assert_eq!(kept.expires_at, Some(COMPLETED + 60));
    assert_eq!(kept.sandbox_to_stop, None);
    assert_eq!(kept.skills.len(), 1);
    assert_eq!(kept.skills[0].image, "r.example/s@sha256:ab");
    assert_eq!(
        (kept.skills[0].loads, &kept.skills[0].first_loaded_at),
        (None, &None)
    );
}

#[test]
fn a_run_still_going_or_without_a_status_is_not_kept() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    let going = run(
        "b",
        coder(),
        json!({"phase": "Running", "sandboxName": "b"}),
    );
    assert_eq!(runs.keep(&going), Kept::NotFinished);
    assert_eq!(
        runs.keep(&run("c", coder(), Value::Null)),
        Kept::NotFinished
    );
    assert!(runs.is_empty());
}

#[test]
fn an_unknown_reason_is_kept_as_written() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    runs.keep(&ended("a", "Failed", "SomethingElse", "s", coder()));
    assert_eq!(
        runs.get("team", "a").expect("kept").reason.as_str(),
        "SomethingElse"
    );
}

#[test]
fn a_run_the_operator_ended_has_its_sandbox_stopped_once() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    let cancelled = ended("a", "Failed", "Cancelled", "s", coder());
    assert_eq!(runs.keep(&cancelled), Kept::StopSandbox);
    assert_eq!(
        runs.get("team", "a")
            .and_then(|r| r.sandbox_to_stop.as_deref()),
        Some("a-sandbox")
    );
    runs.sandbox_stopped("team", "a");
    // A later event of the same run (its loads written) does not ask again.
    assert_eq!(runs.keep(&cancelled), Kept::Scheduled);
    assert_eq!(runs.get("team", "a").expect("kept").sandbox_to_stop, None);
    // After a restart (a new store) it is asked again: the sandbox may still exist.
    let mut restarted = FinishedRuns::new(TtlDefaults::default());
    assert_eq!(restarted.keep(&cancelled), Kept::StopSandbox);
}

#[test]
fn the_operators_time_to_live_applies_unless_the_run_sets_one_and_not_to_stage_runs() {
    let defaults = TtlDefaults {
        after_succeeded: Some(100),
        after_failed: Some(200),
    };
    let mut runs = FinishedRuns::new(defaults);
    runs.keep(&ended("ok", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.keep(&ended("bad", "Failed", "AgentFailed", "s", coder()));
    let own = json!({"agentRef": "coder", "ttlSecondsAfterFinished": 5});
    runs.keep(&ended("own", "Failed", "AgentFailed", "s", own));
    let mut stage = ended("stage", "Succeeded", "AgentSucceeded", "s", coder());
    stage.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflowRun",
            "name": "w", "uid": "u", "controller": true
        }))
        .expect("an owner"),
    ]);
    runs.keep(&stage);
    let expiry = |name| runs.get("team", name).expect("kept").expires_at;
    assert_eq!(expiry("ok"), Some(COMPLETED + 100));
    assert_eq!(expiry("bad"), Some(COMPLETED + 200));
    assert_eq!(expiry("own"), Some(COMPLETED + 5));
    assert_eq!(expiry("stage"), None);
}

#[test]
fn expiries_come_due_in_time_order_once_and_again_when_retried() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    for (name, ttl) in [("late", 30), ("early", 10), ("mid", 20), ("kept", -1)] {
        let spec = if ttl < 0 {
            coder()
        } else {
            json!({"agentRef": "coder", "ttlSecondsAfterFinished": ttl})
        };
        runs.keep(&ended(name, "Succeeded", "AgentSucceeded", "s", spec));
    }
    assert_eq!(runs.next_expiry(), Some(COMPLETED + 10));
    assert!(runs.take_expired(COMPLETED + 9).is_empty());
    let names = |due: Vec<(String, String)>| -> Vec<String> {
        due.into_iter().map(|(_, name)| name).collect()
    };
    assert_eq!(names(runs.take_expired(COMPLETED + 20)), ["early", "mid"]);
    assert_eq!(runs.next_expiry(), Some(COMPLETED + 30));
    // Taken once: a pass that failed schedules it again.
    assert!(runs.take_expired(COMPLETED + 20).is_empty());
    runs.retry_expiry("team", "mid", COMPLETED + 25);
    assert_eq!(names(runs.take_expired(COMPLETED + 40)), ["mid", "late"]);
    assert_eq!(runs.next_expiry(), None);
    // A run forgotten is never due, nor retried.
    runs.retry_expiry("team", "gone", COMPLETED);
    assert!(runs.take_expired(i64::MAX).is_empty());
}

#[test]
fn a_run_forgotten_leaves_no_expiry_and_no_shared_skills_behind() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    let spec = json!({"agentRef": "coder", "ttlSecondsAfterFinished": 10});
    runs.keep(&ended(
        "a",
        "Succeeded",
        "AgentSucceeded",
        "s",
        spec.clone(),
    ));
    runs.keep(&ended("b", "Succeeded", "AgentSucceeded", "s", spec));
    let (a, b) = (
        runs.get("team", "a").expect("a"),
        runs.get("team", "b").expect("b"),
    );
    assert!(Arc::ptr_eq(&a.skills, &b.skills), "one list for both");
    assert_eq!(runs.skills.len(), 1);
    assert!(runs.forget("team", "a"));
    assert_eq!(runs.skills.len(), 1, "b still holds it");
    assert!(runs.forget("team", "b"));
    assert!(!runs.forget("team", "b"));
    assert!(runs.is_empty());
    assert!(runs.skills.is_empty());
    assert_eq!(runs.next_expiry(), None);
}

#[test]
fn a_list_forgets_the_runs_it_no_longer_shows() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    runs.keep(&ended("a", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.keep(&ended("b", "Failed", "AgentFailed", "t", coder()));
    let started = runs.listing();
    runs.keep(&ended("b", "Failed", "AgentFailed", "t", coder()));
    runs.keep(&ended("c", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.listed(started, None);
    let mut names: Vec<&str> = runs.iter().map(|(_, name, _)| name).collect();
    names.sort_unstable();
    assert_eq!(names, ["b", "c"]);
}

#[test]
fn a_list_of_one_phase_forgets_only_runs_of_that_phase() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    runs.keep(&ended("a", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.keep(&ended("b", "Failed", "AgentFailed", "t", coder()));
    runs.keep(&ended("c", "Succeeded", "AgentSucceeded", "s", coder()));
    // The Succeeded runs' watch lists again and shows `c` only; the Failed runs' watch,
    // listing on its own, has not shown `b` since, and `b` stays.
    let started = runs.listing();
    runs.keep(&ended("c", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.listed(started, Some(AgentRunPhase::Succeeded));
    let mut names: Vec<&str> = runs.iter().map(|(_, name, _)| name).collect();
    names.sort_unstable();
    assert_eq!(names, ["b", "c"]);
}

#[test]
fn the_census_counts_by_phase_and_reason() {
    let mut runs = FinishedRuns::new(TtlDefaults::default());
    runs.keep(&ended("a", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.keep(&ended("b", "Succeeded", "AgentSucceeded", "s", coder()));
    runs.keep(&ended("c", "Failed", "Cancelled", "s", coder()));
    let counts: Vec<((&str, &str), i64)> = runs.counts().into_iter().collect();
    assert_eq!(
        counts,
        [
            (("Failed", "Cancelled"), 1),
            (("Succeeded", "AgentSucceeded"), 2),
        ]
    );
}

/// The entry itself stays a few machine words (its strings and skills are on the heap, the
/// skills shared): the point of keeping it instead of the run, whose typed object alone
/// is 936 bytes.
#[test]
fn an_entry_is_a_fraction_of_a_run() {
    assert!(
        std::mem::size_of::<FinishedRun>() <= 128,
        "{} bytes",
        std::mem::size_of::<FinishedRun>()
    );
    assert!(std::mem::size_of::<AgentRun>() > 4 * std::mem::size_of::<FinishedRun>());
}
