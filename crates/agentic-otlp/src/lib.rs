//! OTLP/HTTP trace requests from an agent runtime, as the operator's receiver takes them:
//!
//! 1. [`decode`] an `ExportTraceServiceRequest` from a body (`application/x-protobuf` or
//!    `application/json`, optionally gzip), bounded in decoded size;
//! 2. [`skill_loads`] reads what the run's agent loaded (the OpenTelemetry GenAI conventions'
//!    `execute_tool` spans of the `load_skill` tool), with the span ids kept so a forwarder can
//!    annotate those spans;
//! 3. [`scrub`] removes message content (prompts, replies, tool arguments and results) from
//!    every attribute list of the request, before anything else sees it.
//!
//! 4. [`into_run_trace`] moves a scrubbed request into its run's trace and sets the skill
//!    attributes on its loads, before it is forwarded to the user's collector.
//!
//! [`take_skill_loads`] does 2 then 3, the order the receiver needs: the skill's name is
//! read out of the tool arguments that scrubbing removes.
//!
//! No server, no Kubernetes client: everything here is a function of its input.

mod decode;
#[cfg(test)]
mod fixtures;
mod run_trace;
mod scrub;
mod skills;

pub use decode::{DecodeError, Encoding, decode, span_count};
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
pub use opentelemetry_proto::tonic::{common, resource, trace};
pub use run_trace::{MountedSource, RunTraceIds, into_run_trace};
pub use scrub::{CONTENT_ATTRIBUTES, is_content_attribute, scrub};
pub use skills::{SkillLoad, skill_loads};

/// The skill loads of `request`, then `request` scrubbed of message content ([`scrub`]).
pub fn take_skill_loads(request: &mut ExportTraceServiceRequest) -> Vec<SkillLoad> {
    let loads = skill_loads(request);
    scrub(request);
    loads
}
