//! A run is one trace. Its trace id and the id of its root span are derived from the run's
//! UID, so every pass, every restart of the operator and every replica names the same trace
//! without storing anything: the operator's own spans for the run, the
//! `opentelemetry.io/trace-context` annotation its sandbox carries (agent-sandbox parents its
//! spans to it), and the agent runtime's spans re-parented when they are forwarded.

use agentic_api::{AgentRun, AgentRunPhase, AgentRunStatus, CONDITION_COMPLETED, PinnedSkill};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::{Digest, Sha256};

use crate::pin::Pin;

/// The annotation agent-sandbox reads a Sandbox's trace parent from: a JSON object of W3C
/// trace-context headers, `{"traceparent":"00-<trace id>-<span id>-01"}`.
pub const TRACE_CONTEXT_ANNOTATION: &str = "opentelemetry.io/trace-context";

/// Keeps derived ids apart from any other use of a hash of the UID.
const DOMAIN: &[u8] = b"agentic-operator/agentrun-trace/v1\0";

/// The trace of one run: its id and its root span's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunTrace {
    trace_id: [u8; 16],
    root_span_id: [u8; 8],
}

impl RunTrace {
    /// The trace of the run with this UID: the first 16 bytes of a SHA-256 of the UID are the
    /// trace id, the next 8 the root span's id. A UID is unique per object ever created, so
    /// a run deleted and created again under its name gets another trace.
    pub fn of_run(uid: &str) -> RunTrace {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(uid.as_bytes())
            .finalize();
        let mut trace_id = [0; 16];
        let mut root_span_id = [0; 8];
        trace_id.copy_from_slice(&digest[..16]);
        root_span_id.copy_from_slice(&digest[16..24]);
        // All-zero ids are invalid in W3C trace context; a hash lands there with probability
        // 2^-128 (2^-64), but a fixed bit costs nothing and makes it impossible.
        trace_id[15] |= 1;
        root_span_id[7] |= 1;
        RunTrace {
            trace_id,
            root_span_id,
        }
    }

    /// The trace id's 16 bytes.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The run's root span's 8 bytes: the parent of the operator's spans and of the agent's
    /// root spans.
    pub fn root_span_id(&self) -> [u8; 8] {
        self.root_span_id
    }

    /// The trace id as 32 lowercase hex digits, as trace backends show and query it.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The W3C `traceparent` naming the run's root span, sampled:
    /// `00-<trace id>-<root span id>-01`.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace_id), hex(&self.root_span_id))
    }

    /// The value of [`TRACE_CONTEXT_ANNOTATION`]: `{"traceparent":"…"}`.
    pub fn trace_context_annotation(&self) -> String {
        serde_json::json!({ "traceparent": self.traceparent() }).to_string()
    }

    /// The id of the operator's span `step` of this run: derived, so a pass that emits it
    /// again (after a restart, say) names the same span rather than a second one.
    pub fn span_id(&self, step: &str) -> [u8; 8] {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(self.trace_id)
            .chain_update(step.as_bytes())
            .finalize();
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        id[7] |= 1;
        id
    }
}

/// One of the operator's spans of a run, from what its status records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpan {
    pub name: String,
    pub span_id: [u8; 8],
    /// `None` for the run's root span.
    pub parent_span_id: Option<[u8; 8]>,
    /// Nanoseconds since the Unix epoch.
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Vec<(&'static str, String)>,
    /// The span ended in failure (a Failed run).
    pub failed: bool,
}

/// The operator's spans that a status write from `old` to `new` completes, on the run's
/// trace, each at the transition that ends it: the skills' pins (each skill's resolution and
/// verification, as mounted) and the sandbox's creation when the sandbox is recorded, the
/// agent's start when `startTime` is set, and the agent's run and the run's root span, with
/// the outcome, when the run finishes. `now` is when the write happened. Times come from the
/// run: its creation, `startTime`, `completionTime`.
pub fn run_spans(
    run: &AgentRun,
    old: &AgentRunStatus,
    new: &AgentRunStatus,
    now: &Time,
) -> Vec<RunSpan> {
    let (Some(uid), Some(created)) = (
        run.metadata.uid.as_deref(),
        &run.metadata.creation_timestamp,
    ) else {
        return Vec::new();
    };
    let trace = RunTrace::of_run(uid);
    let root = trace.root_span_id();
    let child = |name: String, step: &str, start: &Time, end: &Time, attributes| RunSpan {
        name,
        span_id: trace.span_id(step),
        parent_span_id: Some(root),
        start_unix_nano: unix_nano(start),
        end_unix_nano: unix_nano(end),
        attributes,
        failed: false,
    };
    let mut spans = Vec::new();
    if old.sandbox_name.is_none()
        && let Some(sandbox) = &new.sandbox_name
    {
        for skill in &new.skills {
            let mut attributes = vec![
                ("gen_ai.skill.name", skill.name.clone()),
                ("konveyor.skill.pin", skill.image.clone()),
            ];
            if let Some(uri) = skill_source_uri(skill) {
                attributes.push(("gen_ai.skill.source.uri", uri));
            }
            if let Some(verification) = &skill.verification {
                attributes.push((
                    "konveyor.skill.verification",
                    verification.state.as_str().to_string(),
                ));
            }
            spans.push(child(
                format!("skill {}", skill.name),
                &format!("skill/{}", skill.name),
                created,
                now,
                attributes,
            ));
        }
        spans.push(child(
            "sandbox create".to_string(),
            "sandbox",
            created,
            now,
            vec![("konveyor.sandbox.name", sandbox.clone())],
        ));
    }
    if old.start_time.is_none()
        && let Some(started) = &new.start_time
    {
        spans.push(child(
            "agent start".to_string(),
            "agent-start",
            created,
            started,
            Vec::new(),
        ));
    }
    if old.completion_time.is_none()
        && let (Some(completed), Some(phase)) = (&new.completion_time, new.phase)
        && phase.is_finished()
    {
        let failed = phase == AgentRunPhase::Failed;
        if let Some(started) = &new.start_time {
            spans.push(RunSpan {
                failed,
                ..child(
                    "agent run".to_string(),
                    "agent-run",
                    started,
                    completed,
                    Vec::new(),
                )
            });
        }
        let reason = new
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_COMPLETED)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        spans.push(RunSpan {
            name: format!(
                "AgentRun {}",
                run.metadata.name.as_deref().unwrap_or_default()
            ),
            span_id: root,
            parent_span_id: None,
            start_unix_nano: unix_nano(created),
            end_unix_nano: unix_nano(completed),
            attributes: vec![
                (
                    "k8s.namespace.name",
                    run.metadata.namespace.clone().unwrap_or_default(),
                ),
                (
                    "konveyor.agentrun.name",
                    run.metadata.name.clone().unwrap_or_default(),
                ),
                ("konveyor.agentrun.uid", uid.to_string()),
                ("konveyor.agentrun.phase", phase.as_str().to_string()),
                ("konveyor.agentrun.reason", reason),
            ],
            failed,
        });
    }
    spans
}

/// Nanoseconds since the Unix epoch; 0 for a time before it, which no run has.
fn unix_nano(time: &Time) -> u64 {
    u64::try_from(time.0.as_nanosecond()).unwrap_or(0)
}

/// Where a pinned skill came from, as `gen_ai.skill.source.uri` names it: the image as
/// `oci://<repository>@sha256:<hex>`, a git skill as `<url>@<commit>`. An inline skill has
/// no source outside the cluster: `None`.
pub fn skill_source_uri(skill: &PinnedSkill) -> Option<String> {
    match Pin::image(&skill.image).or_else(|| Pin::git(&skill.image))? {
        Pin::Image { repository, digest } => Some(format!("oci://{repository}@{digest}")),
        Pin::Git { url, commit } => Some(format!("{url}@{commit}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6f1c2a54-3b1e-4f7e-9d55-0a8c1b2d3e4f";

    #[test]
    fn a_run_names_the_same_trace_every_time_and_another_run_another() {
        assert_eq!(RunTrace::of_run(UID), RunTrace::of_run(UID));
        let other = RunTrace::of_run("6f1c2a54-3b1e-4f7e-9d55-0a8c1b2d3e40");
        assert_ne!(other.trace_id(), RunTrace::of_run(UID).trace_id());
        assert_ne!(other.root_span_id(), RunTrace::of_run(UID).root_span_id());
    }

    #[test]
    fn the_traceparent_is_w3c_version_00_sampled_with_the_root_span_as_parent() {
        let trace = RunTrace::of_run(UID);
        let traceparent = trace.traceparent();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], trace.trace_id_hex());
        assert_eq!(parts[1].len(), 32);
        assert_eq!(parts[2].len(), 16);
        assert_eq!(parts[3], "01");
        for part in &parts[1..3] {
            assert!(
                part.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{part} is lowercase hex"
            );
            assert!(part.bytes().any(|b| b != b'0'), "{part} is not all zeros");
        }
        let span_bytes: Vec<u8> = (0..8)
            .map(|i| u8::from_str_radix(&parts[2][2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        assert_eq!(span_bytes, trace.root_span_id());
    }

    #[test]
    fn the_annotation_is_the_json_object_agent_sandbox_reads() {
        let trace = RunTrace::of_run(UID);
        let value: serde_json::Value =
            serde_json::from_str(&trace.trace_context_annotation()).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({ "traceparent": trace.traceparent() })
        );
    }

    fn pinned(image: &str) -> PinnedSkill {
        PinnedSkill {
            name: "pdf".into(),
            image: image.into(),
            ..PinnedSkill::default()
        }
    }

    #[test]
    fn a_skill_source_is_its_digest_or_its_commit_and_an_inline_skill_has_none() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            skill_source_uri(&pinned(&format!("r.example:5000/skills/pdf@{digest}"))),
            Some(format!("oci://r.example:5000/skills/pdf@{digest}"))
        );
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let git = format!("https://git.example/skills.git@{commit}");
        assert_eq!(skill_source_uri(&pinned(&git)), Some(git.clone()));
        assert_eq!(skill_source_uri(&pinned("configmap:pdf-skill")), None);
        // Unpinned text is never passed off as a source.
        assert_eq!(skill_source_uri(&pinned("r.example/skills/pdf:1")), None);
    }

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + second).expect("a time"))
    }

    fn run() -> AgentRun {
        let mut run = AgentRun::new("fix-1", agentic_api::AgentRunSpec::default());
        run.metadata.namespace = Some("team-a".into());
        run.metadata.uid = Some(UID.into());
        run.metadata.creation_timestamp = Some(at(0));
        run
    }

    fn skills() -> Vec<PinnedSkill> {
        let digest = format!("sha256:{}", "ab".repeat(32));
        vec![
            PinnedSkill {
                name: "java".into(),
                image: format!("r.example/skills/java@{digest}"),
                verification: Some(Box::new(agentic_api::SkillVerification {
                    state: agentic_api::VerificationState::Verified,
                    ..Default::default()
                })),
                ..PinnedSkill::default()
            },
            pinned("configmap:notes-skill"),
        ]
    }

    fn value<'a>(span: &'a RunSpan, key: &str) -> Option<&'a str> {
        span.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn creating_the_sandbox_completes_a_span_per_pinned_skill_and_the_sandboxs() {
        let run = run();
        let trace = RunTrace::of_run(UID);
        let old = AgentRunStatus::default();
        let new = AgentRunStatus {
            sandbox_name: Some("fix-1".into()),
            skills: skills(),
            ..AgentRunStatus::default()
        };
        let spans = run_spans(&run, &old, &new, &at(3));
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["skill java", "skill pdf", "sandbox create"]);
        for span in &spans {
            assert_eq!(span.parent_span_id, Some(trace.root_span_id()));
            assert_eq!(span.start_unix_nano, 1_800_000_000 * 1_000_000_000);
            assert_eq!(span.end_unix_nano, 1_800_000_003 * 1_000_000_000);
            assert!(!span.failed);
        }
        let java = &spans[0];
        assert_eq!(
            value(java, "gen_ai.skill.source.uri"),
            Some(format!("oci://r.example/skills/java@sha256:{}", "ab".repeat(32)).as_str())
        );
        assert_eq!(value(java, "konveyor.skill.verification"), Some("Verified"));
        assert_eq!(value(&spans[1], "gen_ai.skill.source.uri"), None);
        assert_eq!(value(&spans[2], "konveyor.sandbox.name"), Some("fix-1"));
        // Distinct, derived ids: the same pass again names the same spans.
        let ids: std::collections::BTreeSet<[u8; 8]> = spans.iter().map(|s| s.span_id).collect();
        assert_eq!(ids.len(), spans.len());
        assert!(!ids.contains(&trace.root_span_id()));
        assert_eq!(run_spans(&run, &old, &new, &at(3)), spans);
        // A write that changes nothing of this completes nothing.
        assert_eq!(run_spans(&run, &new, &new, &at(4)), Vec::new());
    }

    #[test]
    fn the_runs_end_completes_the_agents_run_and_the_root_span_with_the_outcome() {
        let run = run();
        let trace = RunTrace::of_run(UID);
        let running = AgentRunStatus {
            sandbox_name: Some("fix-1".into()),
            start_time: Some(at(5)),
            phase: Some(AgentRunPhase::Running),
            ..AgentRunStatus::default()
        };
        let pending = AgentRunStatus {
            start_time: None,
            ..running.clone()
        };
        let started = run_spans(&run, &pending, &running, &at(5));
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].name, "agent start");
        assert_eq!(started[0].end_unix_nano, 1_800_000_005 * 1_000_000_000);

        let failed = AgentRunStatus {
            phase: Some(AgentRunPhase::Failed),
            completion_time: Some(at(9)),
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: CONDITION_COMPLETED.into(),
                status: "True".into(),
                reason: "AgentFailed".into(),
                message: String::new(),
                last_transition_time: at(9),
                observed_generation: None,
            }],
            ..running.clone()
        };
        let spans = run_spans(&run, &running, &failed, &at(9));
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["agent run", "AgentRun fix-1"]);
        assert!(spans.iter().all(|s| s.failed));
        let root = &spans[1];
        assert_eq!(root.span_id, trace.root_span_id());
        assert_eq!(root.parent_span_id, None);
        assert_eq!(root.start_unix_nano, 1_800_000_000 * 1_000_000_000);
        assert_eq!(root.end_unix_nano, 1_800_000_009 * 1_000_000_000);
        assert_eq!(value(root, "konveyor.agentrun.phase"), Some("Failed"));
        assert_eq!(value(root, "konveyor.agentrun.reason"), Some("AgentFailed"));
        assert_eq!(value(root, "k8s.namespace.name"), Some("team-a"));
        assert_eq!(spans[0].start_unix_nano, 1_800_000_005 * 1_000_000_000);
    }

    #[test]
    fn a_run_the_api_server_has_not_stored_has_no_trace() {
        let mut run = run();
        run.metadata.uid = None;
        let new = AgentRunStatus {
            sandbox_name: Some("fix-1".into()),
            ..AgentRunStatus::default()
        };
        assert_eq!(
            run_spans(&run, &AgentRunStatus::default(), &new, &at(1)),
            Vec::new()
        );
    }
}
