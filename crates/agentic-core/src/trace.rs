//! A run is one trace. Its trace id and the id of its root span are derived from the run's
//! UID, so every pass, every restart of the operator and every replica names the same trace
//! without storing anything: the operator's own spans for the run, the
//! `opentelemetry.io/trace-context` annotation its sandbox carries (agent-sandbox parents its
//! spans to it), and the agent runtime's spans re-parented when they are forwarded.

use agentic_api::PinnedSkill;
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
}
