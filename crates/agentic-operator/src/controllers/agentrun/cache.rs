//! What the operator keeps of a finished run in its cache. A platform keeps finished runs
//! for days (their time to live, audits), so the cache holds many more finished runs than
//! live ones, and a finished run is read for little: its time to live and expiry (spec
//! `ttlSecondsAfterFinished`, status phase and completion time), the sandbox the operator
//! stops (status `sandboxName` and `Ready` reason), the workflow run that owns it (owner
//! references), the census (phase, `Ready` reason) and the trust policies' blast radius
//! (status `skills`), and the workflow run that waits for it (its `Ready` condition, whose
//! message a failed stage quotes). What the run asked of its sandbox (instructions, params,
//! env, file mounts), the agent's termination data, its other conditions and its start are
//! not, and are most of its bytes.

use agentic_api::{AgentRun, AgentRunSpec, CONDITION_READY};

use super::wakes::is_finished;

/// `run`, trimmed to what a finished run is read for; a run still going is left whole.
pub(super) fn trim_finished(run: &mut AgentRun) {
    if !is_finished(run) {
        return;
    }
    run.metadata.annotations = None;
    run.spec = AgentRunSpec {
        agent_ref: std::mem::take(&mut run.spec.agent_ref),
        ttl_seconds_after_finished: run.spec.ttl_seconds_after_finished,
        cancel: run.spec.cancel,
        ..AgentRunSpec::default()
    };
    if let Some(status) = &mut run.status {
        status.termination_data = None;
        status.start_time = None;
        status.duration = None;
        status.secret_key_ref = None;
        status.conditions.retain(|c| c.type_ == CONDITION_READY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::scenario::object;
    use serde_json::{Value, json};

    fn run(status: Value) -> AgentRun {
        object(json!({
            "metadata": {
                "name": "r",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "ownerReferences": [{
                    "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflowRun",
                    "name": "w", "uid": "u", "controller": true
                }],
            },
            "spec": {
                "agentRef": "coder", "instructions": "Upgrade to Java 21.",
                "params": [{"name": "branch", "value": "main"}],
                "ttlSecondsAfterFinished": 60, "cancel": true,
            },
            "status": status,
        }))
    }

    #[test]
    fn a_finished_run_keeps_what_its_readers_read_and_nothing_else() {
        let status = json!({
            "phase": "Succeeded", "sandboxName": "r", "completionTime": "2026-01-01T00:00:00Z",
            "skills": [{"name": "s", "image": "r.example/s@sha256:ab"}],
            "terminationData": {"summary": "a long report"},
            "startTime": "2025-12-31T23:59:00Z", "duration": 60,
            "secretKeyRef": {"name": "r-acp-key"},
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "Succeeded", "message": "done",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }, {
                "type": "Succeeded", "status": "True", "reason": "Succeeded", "message": "done",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }, {
                "type": "ACPReady", "status": "False", "reason": "Finished", "message": "done",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }],
        });
        let mut trimmed = run(status);
        trim_finished(&mut trimmed);
        assert_eq!(trimmed.metadata.annotations, None);
        assert_eq!(
            trimmed.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        assert_eq!(trimmed.spec.agent_ref, "coder");
        assert_eq!(trimmed.spec.ttl_seconds_after_finished, Some(60));
        assert_eq!(trimmed.spec.cancel, Some(true));
        assert_eq!(trimmed.spec.instructions, None);
        assert!(trimmed.spec.params.is_empty());
        let status = trimmed.status.expect("a status");
        assert_eq!(status.termination_data, None);
        assert_eq!(status.sandbox_name.as_deref(), Some("r"));
        assert_eq!(status.skills.len(), 1);
        assert!(status.completion_time.is_some());
        assert_eq!(
            (status.start_time, status.duration, status.secret_key_ref),
            (None, None, None)
        );
        let kept: Vec<(&str, &str)> = status
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(kept, [("Ready", "done")]);
    }

    #[test]
    fn a_run_still_going_is_kept_whole() {
        let going = run(json!({"phase": "Running", "sandboxName": "r"}));
        let mut kept = going.clone();
        trim_finished(&mut kept);
        assert_eq!(
            serde_json::to_value(kept).expect("json"),
            serde_json::to_value(going).expect("json")
        );
    }
}
