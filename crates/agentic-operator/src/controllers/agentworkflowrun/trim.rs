//! What the operator keeps of a finished workflow run: a platform keeps them for days, and
//! all that is still read of one is who it is, whether it finished, and when it expires.

use agentic_api::{AgentWorkflowRun, AgentWorkflowRunSpec, AgentWorkflowRunStatus};

/// Trims a finished workflow run, before it is cached, to what its readers still need:
///
/// - its metadata: the controller's key (the stages' runs wake it by their owner reference),
///   the orphan sweep's UIDs, the shard filter's namespace, the UID precondition of its
///   deletion. (`kubectl apply`'s copy of the object is gone already: the watch drops it from
///   every object it caches, [`forget_unread_metadata`](crate::controllers::watches::forget_unread_metadata).)
/// - `spec.ttlSecondsAfterFinished`, `status.phase` and `status.completionTime`: its expiry
///   (`apply::expire_finished`); the phase is also what the census counts it by and what
///   keeps it out of the runs waiting on their workflow.
///
/// The snapshot of the workflow (stages, guide, params), the conditions and the rest of the
/// spec go: the finished pass reads none of them, and writes nothing but the deletion.
pub(super) fn trim_finished(run: &mut AgentWorkflowRun) {
    // Every field named, so that a new one is kept or dropped here on purpose.
    let AgentWorkflowRunSpec {
        workflow_ref: _,
        gateway: _,
        params: _,
        env: _,
        env_from: _,
        file_mounts: _,
        ttl_seconds_after_finished,
        cancel: _,
    } = std::mem::take(&mut run.spec);
    run.spec.ttl_seconds_after_finished = ttl_seconds_after_finished;
    if let Some(status) = run.status.take() {
        let AgentWorkflowRunStatus {
            phase,
            completion_time,
            observed_generation: _,
            current_stage: _,
            stages: _,
            guide: _,
            params: _,
            start_time: _,
            conditions: _,
        } = status;
        run.status = Some(AgentWorkflowRunStatus {
            phase,
            completion_time,
            ..AgentWorkflowRunStatus::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentic_api::{AgentRunPhase, AgentWorkflowRun, AgentWorkflowRunSpec};
    use serde_json::json;

    use crate::controllers::agentworkflowrun::scenarios::{
        large_workflow_run as workflow_run, served,
    };
    use crate::controllers::agentworkflowrun::waits_on_workflow;
    use crate::controllers::scenario::object;
    use crate::controllers::watches::{forget_unread_metadata, trim_for_cache};

    /// `run` as its watch caches it.
    fn cached(run: &AgentWorkflowRun) -> AgentWorkflowRun {
        let mut cached = run.clone();
        forget_unread_metadata(&mut cached.metadata);
        trim_for_cache(&mut cached);
        cached
    }

    fn bytes(run: &AgentWorkflowRun) -> usize {
        served(run).to_string().len()
    }

    #[test]
    fn a_finished_run_is_cached_with_what_its_readers_read_and_nothing_else() {
        for phase in [AgentRunPhase::Succeeded, AgentRunPhase::Failed] {
            let whole = workflow_run(phase.as_str(), 3);
            let mut expected = AgentWorkflowRun::new(
                "nightly",
                AgentWorkflowRunSpec {
                    ttl_seconds_after_finished: Some(3600),
                    ..AgentWorkflowRunSpec::default()
                },
            );
            expected.metadata = whole.metadata.clone();
            expected.metadata.annotations = Some(BTreeMap::from([(
                "team.example/ticket".to_string(),
                "OPS-1".to_string(),
            )]));
            let status = whole.status.clone().expect("a status");
            expected.status = Some(agentic_api::AgentWorkflowRunStatus {
                phase: Some(phase),
                completion_time: status.completion_time,
                ..Default::default()
            });
            assert_eq!(served(&cached(&whole)), served(&expected));
        }
    }

    #[test]
    fn a_finished_runs_cached_size_does_not_grow_with_its_stages_and_params() {
        let few = workflow_run("Succeeded", 1);
        let many = workflow_run("Succeeded", 50);
        assert!(bytes(&many) > 100_000, "{} bytes whole", bytes(&many));
        assert_eq!(bytes(&cached(&many)), bytes(&cached(&few)));
        assert!(
            bytes(&cached(&many)) < 600,
            "{} bytes cached",
            bytes(&cached(&many))
        );
    }

    #[test]
    fn a_live_run_is_cached_whole_but_kubectls_copy() {
        for phase in ["Pending", "Running"] {
            let live = workflow_run(phase, 3);
            let mut whole = live.clone();
            forget_unread_metadata(&mut whole.metadata);
            assert_ne!(
                served(&whole),
                served(&live),
                "the fixture has kubectl's copy"
            );
            assert_eq!(served(&cached(&live)), served(&whole), "{phase}");
        }
        let unstarted: AgentWorkflowRun = object(json!({
            "metadata": {"name": "fresh"}, "spec": {"workflowRef": "flow", "params": [{"name": "p", "value": "v"}]},
        }));
        assert_eq!(served(&cached(&unstarted)), served(&unstarted));
    }

    #[test]
    fn a_finished_run_cached_trimmed_waits_on_no_workflow() {
        let cancelled_before_it_started: AgentWorkflowRun = object(json!({
            "metadata": {"name": "cancelled"},
            "spec": {"workflowRef": "flow", "cancel": true},
            "status": {"phase": "Failed", "completionTime": "2026-12-01T11:00:00Z"},
        }));
        for run in [
            cached(&workflow_run("Succeeded", 3)),
            cached(&cancelled_before_it_started),
            cancelled_before_it_started,
        ] {
            assert!(!waits_on_workflow(&run), "{run:?}");
        }
    }
}
