use k8s_openapi::api::core::v1::{ContainerState, PodCondition};

use super::*;
use crate::reasons::ErrorReason;
use crate::sandbox::test_pods::{at, pod, running, waiting};

fn terminated(exit_code: i32, reason: &str, message: Option<&str>, started: i64) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            reason: Some(reason.into()),
            message: message.map(Into::into),
            started_at: Some(at(started)),
            finished_at: Some(at(started + 60)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status(phase: Option<AgentRunPhase>, start: Option<i64>) -> AgentRunStatus {
    AgentRunStatus {
        phase,
        sandbox_name: Some("fix-123".into()),
        start_time: start.map(at),
        ..Default::default()
    }
}

fn created() -> AgentRunStatus {
    status(Some(AgentRunPhase::Pending), None)
}

fn started_at(second: i64) -> AgentRunStatus {
    status(Some(AgentRunPhase::Running), Some(second))
}

#[test]
fn no_pod_before_the_start_is_pending() {
    let outcome = run_outcome(None, true, &created());
    assert_eq!(
        (outcome.phase, outcome.reason, outcome.message.as_str()),
        (
            AgentRunPhase::Pending,
            AgentRunReason::SandboxCreating,
            "sandbox fix-123 exists; waiting for its pod"
        )
    );
    let outcome = run_outcome(None, false, &status(None, None));
    assert_eq!(
        (outcome.phase, outcome.reason, outcome.message.as_str()),
        (
            AgentRunPhase::Pending,
            AgentRunReason::SandboxCreating,
            "waiting for sandbox fix-123 to be created"
        )
    );
}

#[test]
fn waiting_container_is_pending_with_its_reason() {
    let image_pull = pod(
        "Pending",
        Some(waiting("ImagePullBackOff", Some("Back-off pulling image"))),
    );
    let outcome = run_outcome(Some(&image_pull), true, &created());
    assert_eq!(outcome.phase, AgentRunPhase::Pending);
    assert_eq!(outcome.reason, AgentRunReason::PodPending);
    assert_eq!(
        outcome.message,
        "the agent container of pod fix-123 is waiting: ImagePullBackOff: Back-off pulling image"
    );
    assert_eq!(outcome.start_time, None);

    let mut unschedulable = pod("Pending", None);
    if let Some(s) = unschedulable.status.as_mut() {
        s.conditions = Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some("0/3 nodes are available".into()),
            ..Default::default()
        }]);
    }
    let outcome = run_outcome(Some(&unschedulable), true, &created());
    assert_eq!(outcome.reason, AgentRunReason::PodPending);
    assert_eq!(
        outcome.message,
        "pod fix-123 cannot be scheduled: 0/3 nodes are available"
    );

    let fresh = pod("Pending", None);
    assert_eq!(
        run_outcome(Some(&fresh), true, &created()).message,
        "waiting for the agent container of pod fix-123 to start"
    );
}

#[test]
fn running_container_is_running_with_its_start() {
    let outcome = run_outcome(Some(&pod("Running", Some(running(100)))), true, &created());
    assert_eq!(
        outcome,
        RunOutcome {
            phase: AgentRunPhase::Running,
            reason: AgentRunReason::AgentRunning,
            message: "the agent is running in pod fix-123".into(),
            start_time: Some(at(100)),
            completion_time: None,
            listening: false,
            termination_data: None,
            credential_isolation: None,
        }
    );
    // Still the same container on the next pass.
    let outcome = run_outcome(
        Some(&pod("Running", Some(running(100)))),
        true,
        &started_at(100),
    );
    assert_eq!(outcome.phase, AgentRunPhase::Running);
}

#[test]
fn exit_zero_succeeds() {
    let done = pod("Succeeded", Some(terminated(0, "Completed", None, 100)));
    assert_eq!(
        run_outcome(Some(&done), true, &started_at(100)),
        RunOutcome {
            phase: AgentRunPhase::Succeeded,
            reason: AgentRunReason::AgentSucceeded,
            message: "the agent exited with code 0 (Completed)".into(),
            start_time: Some(at(100)),
            completion_time: Some(at(160)),
            listening: false,
            termination_data: None,
            credential_isolation: None,
        }
    );
}

#[test]
fn non_zero_exit_fails_with_code_and_termination_message() {
    let done = pod(
        "Failed",
        Some(terminated(1, "Error", Some("tests failed: 2 of 40\n"), 100)),
    );
    let outcome = run_outcome(Some(&done), true, &started_at(100));
    assert_eq!(outcome.phase, AgentRunPhase::Failed);
    assert_eq!(outcome.reason, AgentRunReason::AgentFailed);
    assert_eq!(
        outcome.message,
        "the agent exited with code 1 (Error): tests failed: 2 of 40"
    );
    assert_eq!(outcome.termination_data, None);
    assert_eq!(outcome.completion_time, Some(at(160)));

    let oom = pod("Failed", Some(terminated(137, "OOMKilled", None, 100)));
    assert_eq!(
        run_outcome(Some(&oom), true, &started_at(100)).message,
        "the agent exited with code 137 (OOMKilled)"
    );
}

#[test]
fn a_fast_agent_finishes_even_if_never_seen_running() {
    let done = pod("Succeeded", Some(terminated(0, "Completed", None, 100)));
    let outcome = run_outcome(Some(&done), true, &created());
    assert_eq!(outcome.phase, AgentRunPhase::Succeeded);
    assert_eq!(outcome.start_time, Some(at(100)));
}

#[test]
fn evicted_pod_fails_with_the_pods_reason() {
    let mut evicted = pod("Failed", None);
    if let Some(s) = evicted.status.as_mut() {
        s.reason = Some("Evicted".into());
        s.message = Some("The node was low on resource: memory.".into());
    }
    let outcome = run_outcome(Some(&evicted), true, &created());
    assert_eq!(outcome.phase, AgentRunPhase::Failed);
    assert_eq!(outcome.reason, AgentRunReason::PodFailed);
    assert_eq!(
        outcome.message,
        "pod fix-123 failed before the agent finished: Evicted: The node was low on resource: memory."
    );
}

#[test]
fn a_failed_skill_fetch_fails_the_run_with_what_it_said() {
    let mut failed = pod("Failed", Some(waiting("PodInitializing", None)));
    let fetch = |name: &str, state: ContainerState| ContainerStatus {
        name: name.into(),
        state: Some(state),
        ..Default::default()
    };
    if let Some(s) = failed.status.as_mut() {
        s.init_container_statuses = Some(vec![
            fetch("skill-fetch-0", terminated(0, "Completed", None, 90)),
            fetch(
                "skill-fetch-1",
                terminated(
                    1,
                    "Error",
                    Some("error: the repository has no commit 0123\n"),
                    95,
                ),
            ),
        ]);
    }
    let outcome = run_outcome(Some(&failed), true, &created());
    assert_eq!(outcome.phase, AgentRunPhase::Failed);
    assert_eq!(outcome.reason, AgentRunReason::SkillFetchFailed);
    assert_eq!(
        outcome.message,
        "pod fix-123: init container skill-fetch-1 fetching a git skill exited 1: error: the repository has no commit 0123"
    );
}

#[test]
fn sandbox_gone_after_the_start_is_lost() {
    let outcome = run_outcome(None, false, &started_at(100));
    assert_eq!(
        (outcome.phase, outcome.reason),
        (AgentRunPhase::Failed, AgentRunReason::SandboxLost)
    );
    assert_eq!(
        outcome.message,
        "sandbox fix-123 was deleted while the agent was running"
    );

    let outcome = run_outcome(None, true, &started_at(100));
    assert_eq!(outcome.reason, AgentRunReason::SandboxLost);
    assert_eq!(
        outcome.message,
        "the pod of sandbox fix-123 disappeared while the agent was running"
    );

    // The Sandbox is gone and its pod is being garbage collected.
    let outcome = run_outcome(
        Some(&pod("Running", Some(running(100)))),
        false,
        &started_at(100),
    );
    assert_eq!(outcome.reason, AgentRunReason::SandboxLost);

    // Running recorded without a start time still counts as started.
    let outcome = run_outcome(None, true, &status(Some(AgentRunPhase::Running), None));
    assert_eq!(outcome.reason, AgentRunReason::SandboxLost);
}

#[test]
fn a_replacement_pod_is_lost_not_followed() {
    let fresh = pod("Pending", Some(waiting("ContainerCreating", None)));
    let outcome = run_outcome(Some(&fresh), true, &started_at(100));
    assert_eq!(
        (outcome.phase, outcome.reason),
        (AgentRunPhase::Failed, AgentRunReason::SandboxLost)
    );
    assert_eq!(
        outcome.message,
        "pod fix-123 was replaced after the agent started; the run does not start over"
    );

    let restarted = pod("Running", Some(running(200)));
    assert_eq!(
        run_outcome(Some(&restarted), true, &started_at(100)).reason,
        AgentRunReason::SandboxLost
    );

    let finished_elsewhere = pod("Succeeded", Some(terminated(0, "Completed", None, 200)));
    assert_eq!(
        run_outcome(Some(&finished_elsewhere), true, &started_at(100)).reason,
        AgentRunReason::SandboxLost
    );
}

#[test]
fn apply_writes_phase_times_and_both_conditions() {
    let mut run_status = created();
    let outcome = run_outcome(Some(&pod("Running", Some(running(100)))), true, &run_status);
    assert!(outcome.apply(&mut run_status, Some(1), at(105)));
    assert_eq!(run_status.phase, Some(AgentRunPhase::Running));
    assert_eq!(run_status.observed_generation, Some(1));
    assert_eq!(run_status.start_time, Some(at(100)));
    assert_eq!(run_status.completion_time, None);
    let ready = crate::conditions::find_condition(&run_status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AgentRunning")
    );
    let completed =
        crate::conditions::find_condition(&run_status.conditions, "Completed").expect("Completed");
    assert_eq!(
        (completed.status.as_str(), completed.reason.as_str()),
        ("False", "AgentRunning")
    );

    // The same observation later changes nothing.
    let before = serde_json::to_string(&run_status).expect("serializes");
    let again = run_outcome(Some(&pod("Running", Some(running(100)))), true, &run_status);
    assert!(!again.apply(&mut run_status, Some(1), at(500)));
    assert_eq!(
        serde_json::to_string(&run_status).expect("serializes"),
        before
    );

    // The agent finishes.
    let done = pod("Failed", Some(terminated(1, "Error", Some("boom"), 100)));
    let outcome = run_outcome(Some(&done), true, &run_status);
    assert!(outcome.apply(&mut run_status, Some(1), at(700)));
    assert_eq!(run_status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(run_status.start_time, Some(at(100)));
    assert_eq!(
        run_status.completion_time,
        Some(at(160)),
        "the agent's finish, not now"
    );
    let ready = crate::conditions::find_condition(&run_status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "AgentFailed")
    );
    assert_eq!(ready.last_transition_time, at(700));
    let completed =
        crate::conditions::find_condition(&run_status.conditions, "Completed").expect("Completed");
    assert_eq!(
        (completed.status.as_str(), completed.message.as_str()),
        ("True", "the agent exited with code 1 (Error): boom")
    );

    // Finished is final.
    let frozen = run_status.clone();
    assert!(!run_outcome(None, false, &run_status).apply(&mut run_status, Some(2), at(900)));
    assert_eq!(run_status, frozen);
}

#[test]
fn failures_before_the_sandbox_complete_now() {
    let mut run_status = AgentRunStatus::default();
    let outcome = RunOutcome::failed(
        ErrorReason::InvalidParams,
        "param \"x\" is required but not set",
    );
    assert!(outcome.apply(&mut run_status, Some(1), at(50)));
    assert_eq!(run_status.phase, Some(AgentRunPhase::Failed));
    assert_eq!(run_status.start_time, None);
    assert_eq!(run_status.completion_time, Some(at(50)));

    let mut waiting_status = AgentRunStatus::default();
    assert!(
        RunOutcome::pending(ErrorReason::AgentNotReady, "waiting").apply(
            &mut waiting_status,
            Some(1),
            at(50)
        )
    );
    assert_eq!(waiting_status.phase, Some(AgentRunPhase::Pending));
    assert_eq!(waiting_status.completion_time, None);
    assert!(
        !RunOutcome::pending(ErrorReason::AgentNotReady, "waiting").apply(
            &mut waiting_status,
            Some(1),
            at(80)
        )
    );
}

#[test]
fn a_taken_name_keeps_the_run_pending_naming_kind_and_object() {
    let outcome = RunOutcome::name_taken("ConfigMap", "app-config");
    assert_eq!(outcome.phase, AgentRunPhase::Pending);
    assert_eq!(outcome.reason, AgentRunReason::ObjectNameTaken);
    assert!(
        outcome
            .message
            .starts_with("ConfigMap app-config exists and is not controlled by this run"),
        "{}",
        outcome.message
    );
}

#[test]
fn exit_two_is_limit_reached_and_three_refused() {
    for (code, reason) in [
        (2, AgentRunReason::LimitReached),
        (3, AgentRunReason::Refused),
        (4, AgentRunReason::AgentFailed),
    ] {
        let done = pod("Failed", Some(terminated(code, "Error", None, 100)));
        let outcome = run_outcome(Some(&done), true, &started_at(100));
        assert_eq!(
            (outcome.phase, outcome.reason),
            (AgentRunPhase::Failed, reason),
            "exit {code}"
        );
        assert_eq!(
            outcome.message,
            format!("the agent exited with code {code} (Error)")
        );
    }
}

#[test]
fn a_json_object_termination_message_becomes_termination_data() {
    let report = r#"{"usage": {"cost": "1.25", "currency": "USD"}, "turns": 7}"#;
    let done = pod("Failed", Some(terminated(2, "Error", Some(report), 100)));
    let outcome = run_outcome(Some(&done), true, &started_at(100));
    assert_eq!(
        outcome.termination_data.map(|data| Value::Object(*data)),
        Some(serde_json::json!({"usage": {"cost": "1.25", "currency": "USD"}, "turns": 7}))
    );
    assert_eq!(
        outcome.message,
        "the agent exited with code 2 (Error); its termination message is in status.terminationData"
    );

    // JSON that is not an object, broken JSON and text stay in the message.
    for text in ["[1, 2]", "42", "\"done\"", "{\"cut\":", "plain words"] {
        let done = pod("Failed", Some(terminated(1, "Error", Some(text), 100)));
        let outcome = run_outcome(Some(&done), true, &started_at(100));
        assert_eq!(outcome.termination_data, None, "{text}");
        assert_eq!(
            outcome.message,
            format!("the agent exited with code 1 (Error): {text}")
        );
    }

    // An object over the limit is not kept, and the message is bounded.
    let big = format!(
        "{{\"log\": \"{}\"}}",
        "é".repeat(MAX_TERMINATION_DATA_BYTES)
    );
    let done = pod("Failed", Some(terminated(1, "Error", Some(&big), 100)));
    let outcome = run_outcome(Some(&done), true, &started_at(100));
    assert_eq!(outcome.termination_data, None);
    let prefix = "the agent exited with code 1 (Error): ";
    assert!(outcome.message.starts_with(prefix));
    assert!(outcome.message.ends_with(" [cut]"), "{}", outcome.message);
    assert!(outcome.message.len() <= prefix.len() + MAX_TERMINATION_MESSAGE_BYTES + " [cut]".len());
}

fn condition_of<'a>(status: &'a AgentRunStatus, type_: &str) -> (&'a str, &'a str) {
    let c = crate::conditions::find_condition(&status.conditions, type_)
        .unwrap_or_else(|| panic!("no {type_}"));
    (c.status.as_str(), c.reason.as_str())
}

fn ready_pod(since: i64, ready: bool) -> Pod {
    let mut p = pod("Running", Some(running(since)));
    if let Some(s) = p.status.as_mut() {
        s.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        }]);
    }
    p
}

#[test]
fn konveyor_conditions_follow_the_run() {
    let mut run_status = created();
    assert!(
        RunOutcome::pending(AgentRunReason::PodPending, "waiting").apply(
            &mut run_status,
            Some(1),
            at(90)
        )
    );
    assert_eq!(
        condition_of(&run_status, "Succeeded"),
        ("Unknown", "PodPending")
    );
    assert_eq!(
        condition_of(&run_status, "ACPReady"),
        ("False", "NotListening")
    );
    assert_eq!(
        run_status.secret_key_ref.as_ref().map(|r| r.name.as_str()),
        Some("fix-123-acp-key")
    );

    // Running, the readiness probe not passing yet.
    let outcome = run_outcome(Some(&ready_pod(100, false)), true, &run_status);
    assert!(outcome.apply(&mut run_status, Some(1), at(101)));
    assert_eq!(
        condition_of(&run_status, "Succeeded"),
        ("Unknown", "Running")
    );
    assert_eq!(
        condition_of(&run_status, "ACPReady"),
        ("False", "NotListening")
    );

    // Listening.
    let outcome = run_outcome(Some(&ready_pod(100, true)), true, &run_status);
    assert!(outcome.listening);
    assert!(outcome.apply(&mut run_status, Some(1), at(105)));
    assert_eq!(condition_of(&run_status, "ACPReady"), ("True", "Listening"));
    assert_eq!(run_status.duration, None);
    let before = run_status.clone();
    let again = run_outcome(Some(&ready_pod(100, true)), true, &run_status);
    assert!(!again.apply(&mut run_status, Some(1), at(200)), "no write");
    assert_eq!(run_status, before);

    // The agent stops at its limit with a report.
    let done = pod(
        "Failed",
        Some(terminated(2, "Error", Some(r#"{"turns": 30}"#), 100)),
    );
    let outcome = run_outcome(Some(&done), true, &run_status);
    assert!(outcome.apply(&mut run_status, Some(1), at(900)));
    assert_eq!(
        condition_of(&run_status, "Succeeded"),
        ("False", "LimitReached")
    );
    assert_eq!(
        condition_of(&run_status, "Ready"),
        ("False", "LimitReached")
    );
    assert_eq!(condition_of(&run_status, "ACPReady"), ("False", "Finished"));
    assert_eq!(run_status.duration, Some(60), "finish minus start");
    assert_eq!(
        run_status.termination_data.clone().map(Value::Object),
        Some(serde_json::json!({"turns": 30}))
    );
}

#[test]
fn succeeded_uses_konveyor_reasons_where_it_has_them() {
    let mut ok = started_at(100);
    let done = pod("Succeeded", Some(terminated(0, "Completed", None, 100)));
    assert!(run_outcome(Some(&done), true, &ok).apply(&mut ok, Some(1), at(300)));
    assert_eq!(condition_of(&ok, "Succeeded"), ("True", "Succeeded"));
    assert_eq!(condition_of(&ok, "Ready"), ("False", "AgentSucceeded"));

    let mut failed = started_at(100);
    let done = pod("Failed", Some(terminated(1, "Error", None, 100)));
    assert!(run_outcome(Some(&done), true, &failed).apply(&mut failed, Some(1), at(300)));
    assert_eq!(condition_of(&failed, "Succeeded"), ("False", "Failed"));

    let mut invalid = AgentRunStatus::default();
    assert!(RunOutcome::failed(ErrorReason::InvalidParams, "bad").apply(
        &mut invalid,
        Some(1),
        at(5)
    ));
    assert_eq!(
        condition_of(&invalid, "Succeeded"),
        ("False", "InvalidParams")
    );
    assert_eq!(condition_of(&invalid, "ACPReady"), ("False", "Finished"));
    assert_eq!(invalid.duration, None, "never started");
    assert_eq!(invalid.secret_key_ref, None, "no sandbox");
}
