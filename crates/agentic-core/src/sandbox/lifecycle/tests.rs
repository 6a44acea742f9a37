use agentic_api::AgentRunStatus;
use k8s_openapi::api::core::v1::ContainerState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::sandbox::run_outcome;
use crate::sandbox::test_pods::{self, at};

/// The sandbox pod, Running once its agent container runs, else Pending.
fn pod(state: Option<ContainerState>) -> Pod {
    let phase = if state.as_ref().is_some_and(|s| s.running.is_some()) {
        "Running"
    } else {
        "Pending"
    };
    test_pods::pod(phase, state)
}

fn waiting(reason: &str, message: &str) -> Option<ContainerState> {
    Some(test_pods::waiting(reason, Some(message)))
}

fn running(since: i64) -> Option<ContainerState> {
    Some(test_pods::running(since))
}

fn pending_status() -> AgentRunStatus {
    AgentRunStatus {
        phase: Some(AgentRunPhase::Pending),
        sandbox_name: Some("fix-123".into()),
        ..Default::default()
    }
}

/// The enforced outcome for `pod`, sandbox created at second 1000, at second `now`.
fn enforced(pod: &Pod, limits: Limits, now: i64) -> Enforced {
    let observed = run_outcome(Some(pod), true, &pending_status());
    enforce(observed, Some(pod), Some(&at(1000)), &limits, &at(now))
}

const TEN_MINUTES: Limits = Limits {
    cancel: false,
    startup_deadline: Some(600),
    active_deadline: None,
};

#[test]
fn the_startup_deadline_of_the_run_wins_over_the_operator_default() {
    assert_eq!(startup_deadline(Some(30), 600), Some(30));
    assert_eq!(
        startup_deadline(Some(0), 600),
        Some(600),
        "0 means the default"
    );
    assert_eq!(startup_deadline(None, 600), Some(600));
    assert_eq!(
        startup_deadline(None, 0),
        None,
        "a 0 default is no deadline"
    );
    assert_eq!(startup_deadline(Some(-5), 0), None);
}

#[test]
fn fatal_waiting_reasons_fail_the_run_at_once_with_the_kubelets_words() {
    for reason in FATAL_WAITING_REASONS {
        let pod = pod(waiting(reason, "it cannot work"));
        let result = enforced(&pod, TEN_MINUTES, 1001);
        assert_eq!(result.outcome.phase, AgentRunPhase::Failed, "{reason}");
        assert_eq!(
            result.outcome.reason,
            AgentRunReason::StartupFailed,
            "{reason}"
        );
        assert_eq!(
            result.outcome.message,
            format!("the agent container of pod fix-123 cannot start: {reason}: it cannot work")
        );
        assert_eq!(result.recheck_after, None);
    }
}

#[test]
fn an_init_container_that_cannot_start_fails_the_run_naming_it() {
    let mut pod = pod(waiting("PodInitializing", ""));
    pod.status.as_mut().unwrap().init_container_statuses = Some(vec![ContainerStatus {
        name: "skill-fetch-0".into(),
        state: waiting("ImagePullBackOff", "Back-off pulling image \"operator:1\""),
        ..Default::default()
    }]);
    let result = enforced(&pod, TEN_MINUTES, 1001);
    assert_eq!(result.outcome.phase, AgentRunPhase::Failed);
    assert_eq!(result.outcome.reason, AgentRunReason::StartupFailed);
    assert_eq!(
        result.outcome.message,
        "init container skill-fetch-0 of pod fix-123 cannot start: ImagePullBackOff: \
         Back-off pulling image \"operator:1\""
    );

    // A first failed pull of the init container's image waits for the kubelet's retry.
    pod.status
        .as_mut()
        .unwrap()
        .init_container_statuses
        .as_mut()
        .unwrap()[0]
        .state = waiting("ErrImagePull", "connection reset");
    let result = enforced(&pod, TEN_MINUTES, 1001);
    assert_eq!(result.outcome.phase, AgentRunPhase::Pending);
}

#[test]
fn a_first_failed_pull_waits_for_the_kubelets_retry() {
    let pod = pod(waiting("ErrImagePull", "connection reset"));
    let result = enforced(&pod, TEN_MINUTES, 1010);
    assert_eq!(result.outcome.phase, AgentRunPhase::Pending);
    assert_eq!(result.outcome.reason, AgentRunReason::PodPending);
    assert_eq!(result.recheck_after, Some(Duration::from_secs(590)));
}

#[test]
fn a_pull_the_kubelet_holds_back_for_its_own_rate_limit_waits() {
    let held_back = pod(waiting(
        "ImagePullBackOff",
        "Back-off pulling image \"registry.test/skills/a@sha256:00\": ErrImagePull: pull QPS exceeded",
    ));
    let result = enforced(&held_back, TEN_MINUTES, 1010);
    assert_eq!(result.outcome.phase, AgentRunPhase::Pending);
    assert_eq!(result.outcome.reason, AgentRunReason::PodPending);
    // A pull that really failed still ends the run at once.
    let refused = pod(waiting(
        "ImagePullBackOff",
        "unauthorized: authentication required",
    ));
    let result = enforced(&refused, TEN_MINUTES, 1010);
    assert_eq!(result.outcome.reason, AgentRunReason::StartupFailed);
}

#[test]
fn a_pod_that_does_not_start_in_time_fails_naming_what_the_kubelet_said() {
    let slow = pod(waiting("ContainerCreating", "pulling a large image"));
    let before = enforced(&slow, TEN_MINUTES, 1599);
    assert_eq!(before.outcome.phase, AgentRunPhase::Pending);
    assert_eq!(before.recheck_after, Some(Duration::from_secs(1)));

    let after = enforced(&slow, TEN_MINUTES, 1600);
    assert_eq!(after.outcome.phase, AgentRunPhase::Failed);
    assert_eq!(
        after.outcome.reason,
        AgentRunReason::StartupDeadlineExceeded
    );
    assert_eq!(
        after.outcome.message,
        "the agent did not start within the startup deadline of 600s: the agent container of pod fix-123 is waiting: ContainerCreating: pulling a large image"
    );
    assert_eq!(after.recheck_after, None);
    assert!(stops_sandbox(after.outcome.reason.as_str()));
}

#[test]
fn without_a_deadline_a_slow_pod_waits() {
    let slow = pod(waiting("ContainerCreating", ""));
    let result = enforced(&slow, Limits::default(), 999_999);
    assert_eq!(result.outcome.phase, AgentRunPhase::Pending);
    assert_eq!(result.recheck_after, None);
}

#[test]
fn a_running_agent_stops_at_the_run_deadline_counted_from_its_start() {
    let limits = Limits {
        active_deadline: Some(60),
        ..TEN_MINUTES
    };
    let started = pod(running(1500));
    let before = enforced(&started, limits, 1559);
    assert_eq!(before.outcome.phase, AgentRunPhase::Running);
    assert_eq!(before.recheck_after, Some(Duration::from_secs(1)));

    let after = enforced(&started, limits, 1560);
    assert_eq!(after.outcome.phase, AgentRunPhase::Failed);
    assert_eq!(after.outcome.reason, AgentRunReason::DeadlineExceeded);
    assert_eq!(
        after.outcome.message,
        "the agent ran past spec.activeDeadlineSeconds (60s); pod fix-123 is stopped"
    );
    assert!(stops_sandbox(after.outcome.reason.as_str()));

    // Not yet started: the run deadline does not count, however late it is.
    let waiting = pod(waiting("ContainerCreating", ""));
    let result = enforced(
        &waiting,
        Limits {
            startup_deadline: None,
            ..limits
        },
        99_999,
    );
    assert_eq!(result.outcome.phase, AgentRunPhase::Pending);
}

#[test]
fn a_running_agent_is_past_the_startup_deadline() {
    let started = pod(running(1500));
    let result = enforced(&started, TEN_MINUTES, 5000);
    assert_eq!(result.outcome.phase, AgentRunPhase::Running);
    assert_eq!(result.recheck_after, None);
}

#[test]
fn only_runs_the_operator_ended_lose_their_sandbox() {
    assert!(stops_sandbox("StartupFailed"));
    assert!(stops_sandbox("Cancelled"));
    assert!(stops_sandbox("DeadlineExceeded"));
    assert!(!stops_sandbox("AgentFailed"));
    assert!(!stops_sandbox("PodFailed"));
}

#[test]
fn a_revoked_skill_ends_a_pending_or_running_run_and_stops_its_sandbox() {
    let why = "skill \"pdf\" (r/pdf@sha256:ab) is revoked by ClusterSkillTrustPolicy/p, whose action is Cancel";
    for state in [waiting("ContainerCreating", ""), running(1500)] {
        let live = pod(state);
        let result = end_revoked(
            enforced(&live, TEN_MINUTES, 1501),
            Some(why.into()),
            Some(&live),
        );
        assert_eq!(result.outcome.phase, AgentRunPhase::Failed);
        assert_eq!(result.outcome.reason, AgentRunReason::SkillRevoked);
        assert_eq!(
            result.outcome.message,
            format!("cancelled: {why}; pod fix-123 is stopped")
        );
        assert_eq!(result.recheck_after, None);
        assert!(stops_sandbox(result.outcome.reason.as_str()));
    }
}

#[test]
fn a_revocation_leaves_an_unrevoked_or_finished_run_as_it_is() {
    let live = pod(running(1500));
    let unrevoked = enforced(&live, TEN_MINUTES, 1501);
    assert_eq!(end_revoked(unrevoked.clone(), None, Some(&live)), unrevoked);
    let past_deadline = Limits {
        active_deadline: Some(10),
        ..TEN_MINUTES
    };
    let ended = enforced(&live, past_deadline, 1600);
    assert_eq!(ended.outcome.reason, AgentRunReason::DeadlineExceeded);
    assert_eq!(
        end_revoked(ended.clone(), Some("revoked".into()), Some(&live)),
        ended,
        "the outcome the same pass reached stands"
    );
}

#[test]
fn cancel_stops_a_pending_or_running_run() {
    let cancel = Limits {
        cancel: true,
        ..TEN_MINUTES
    };
    for state in [waiting("ContainerCreating", ""), running(1500)] {
        let result = enforced(&pod(state), cancel, 1501);
        assert_eq!(result.outcome.phase, AgentRunPhase::Failed);
        assert_eq!(result.outcome.reason, AgentRunReason::Cancelled);
        assert_eq!(
            result.outcome.message,
            "cancelled: spec.cancel is true; pod fix-123 is stopped"
        );
        assert!(stops_sandbox(result.outcome.reason.as_str()));
    }
    assert_eq!(
        cancelled(None).message,
        "cancelled: spec.cancel is true",
        "a run without a pod"
    );
}

#[test]
fn an_agent_that_already_exited_keeps_its_outcome_when_cancelled() {
    let mut done = pod(None);
    if let Some(status) = done.status.as_mut() {
        status.phase = Some("Succeeded".into());
    }
    let observed = run_outcome(Some(&done), true, &pending_status());
    let cancel = Limits {
        cancel: true,
        ..TEN_MINUTES
    };
    let result = enforce(observed, Some(&done), Some(&at(1000)), &cancel, &at(1001));
    assert_eq!(result.outcome.phase, AgentRunPhase::Succeeded);
    assert_eq!(result.outcome.reason, AgentRunReason::AgentSucceeded);
}

#[test]
fn a_finished_run_lives_its_ttl_from_its_completion_time() {
    let defaults = TtlDefaults {
        after_succeeded: Some(3600),
        after_failed: None,
    };
    let done = Some(&at(1000));
    let ttl = |phase, spec, now| time_to_live(Some(phase), done, spec, defaults, &at(now));
    assert_eq!(
        ttl(AgentRunPhase::Succeeded, None, 1600),
        Some(Duration::from_secs(3000)),
        "the operator's default for its outcome"
    );
    assert_eq!(ttl(AgentRunPhase::Failed, None, 1600), None, "kept forever");
    assert_eq!(
        ttl(AgentRunPhase::Failed, Some(60), 1030),
        Some(Duration::from_secs(30)),
        "the run's own TTL wins"
    );
    assert_eq!(
        ttl(AgentRunPhase::Succeeded, Some(60), 1060),
        Some(Duration::ZERO)
    );
    assert_eq!(
        ttl(AgentRunPhase::Succeeded, Some(0), 1000),
        Some(Duration::ZERO)
    );
    assert_eq!(
        ttl(AgentRunPhase::Running, Some(0), 5000),
        None,
        "not finished"
    );
    assert_eq!(
        time_to_live(
            Some(AgentRunPhase::Failed),
            None,
            Some(0),
            defaults,
            &at(5000)
        ),
        None,
        "no completion time"
    );
}

fn queued_run(
    name: &str,
    agent: &str,
    created: i64,
    sandbox: bool,
    phase: Option<AgentRunPhase>,
) -> AgentRun {
    AgentRun {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Some(at(created)),
            ..Default::default()
        },
        spec: agentic_api::AgentRunSpec {
            agent_ref: agent.into(),
            ..Default::default()
        },
        status: Some(AgentRunStatus {
            phase,
            sandbox_name: sandbox.then(|| name.to_string()),
            ..Default::default()
        }),
    }
}

#[test]
fn runs_over_the_cap_wait_in_creation_order() {
    let pending = Some(AgentRunPhase::Pending);
    let runs = vec![
        queued_run("active-1", "a", 10, true, Some(AgentRunPhase::Running)),
        queued_run("done", "a", 11, true, Some(AgentRunPhase::Succeeded)),
        queued_run("other-agent", "b", 12, true, Some(AgentRunPhase::Running)),
        queued_run("wait-b", "a", 20, false, pending),
        queued_run("wait-a", "a", 20, false, pending),
        queued_run("wait-c", "a", 30, false, None),
    ];
    let by_name = |name: &str| {
        runs.iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .expect("run")
    };
    // One slot left: the earliest waiting run takes it; names break the tie of a second.
    assert_eq!(admit(by_name("wait-a"), Some(2), &runs), Ok(()));
    let queued = admit(by_name("wait-b"), Some(2), &runs).expect_err("queued");
    assert_eq!(queued.phase, AgentRunPhase::Pending);
    assert_eq!(queued.reason, AgentRunReason::Queued);
    assert_eq!(
        queued.message,
        "number 1 in the queue of Agent a: it runs at most 2 at once (spec.maxConcurrentRuns) and 1 are active"
    );
    let last = admit(by_name("wait-c"), Some(2), &runs).expect_err("queued");
    assert!(
        last.message.starts_with("number 2 in the queue"),
        "{}",
        last.message
    );
    // No cap, or room for all.
    assert_eq!(admit(by_name("wait-c"), None, &runs), Ok(()));
    assert_eq!(admit(by_name("wait-c"), Some(4), &runs), Ok(()));
}

#[test]
fn the_namespace_cap_counts_every_agent_and_skips_runs_their_agent_holds_back() {
    let pending = Some(AgentRunPhase::Pending);
    let runs = vec![
        queued_run("a-1", "a", 10, true, Some(AgentRunPhase::Running)),
        queued_run("a-2", "a", 11, false, pending),
        queued_run("b-1", "b", 12, true, Some(AgentRunPhase::Running)),
        queued_run("b-2", "b", 13, false, pending),
        queued_run("c-1", "c", 14, false, pending),
        queued_run("c-2", "c", 15, false, None),
    ];
    let by_name = |name: &str| {
        runs.iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .expect("run")
    };
    // Agent a runs one at a time: a-2 waits for it and keeps no place in the namespace queue.
    let caps =
        std::collections::BTreeMap::from([("a".to_string(), Some(1)), ("b".to_string(), None)]);
    assert!(admit(by_name("a-2"), Some(1), &runs).is_err());
    assert_eq!(admit_in_namespace(by_name("b-2"), 3, &runs, &caps), Ok(()));
    let second = admit_in_namespace(by_name("c-1"), 3, &runs, &caps).expect_err("queued");
    assert_eq!(second.reason, AgentRunReason::Queued);
    assert!(
        second
            .message
            .starts_with("number 1 in the queue of namespace"),
        "b-2 was first: {}",
        second.message
    );
    assert!(second.message.contains("at most 3") && second.message.contains("2 are active"));
    let third = admit_in_namespace(by_name("c-2"), 3, &runs, &caps).expect_err("queued");
    assert!(
        third.message.starts_with("number 2 in the queue"),
        "{}",
        third.message
    );
    // A cap the active runs already fill admits nobody, not even the first in line.
    assert!(admit_in_namespace(by_name("b-2"), 2, &runs, &caps).is_err());
    assert_eq!(admit_in_namespace(by_name("c-2"), 6, &runs, &caps), Ok(()));
}

#[test]
fn cancelled_and_finished_runs_hold_no_place() {
    let mut cancelled = queued_run("first", "a", 1, false, Some(AgentRunPhase::Pending));
    cancelled.spec.cancel = Some(true);
    let runs = vec![
        cancelled,
        queued_run("failed", "a", 2, false, Some(AgentRunPhase::Failed)),
        queued_run("me", "a", 3, false, None),
    ];
    assert_eq!(admit(&runs[2], Some(1), &runs), Ok(()));
}

#[test]
fn a_full_cap_queues_even_the_first_waiting_run() {
    let runs = vec![
        queued_run("a1", "a", 1, true, Some(AgentRunPhase::Pending)),
        queued_run("a2", "a", 2, true, Some(AgentRunPhase::Running)),
        queued_run("me", "a", 3, false, None),
    ];
    let queued = admit(&runs[2], Some(2), &runs).expect_err("queued");
    assert!(
        queued.message.starts_with("number 1 in the queue"),
        "{}",
        queued.message
    );
    assert!(
        queued.message.ends_with("and 2 are active"),
        "{}",
        queued.message
    );
}
