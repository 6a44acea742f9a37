//! The objects around the sandbox's pod spec, and the sandbox itself for both backends.

use std::collections::BTreeMap;

use agentic_api::{PinnedSkill, SkillCard, SkillType};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::rotation::credential_secret_annotation;
use super::telemetry::otlp_token;
use super::{
    ACP_PORT, ACP_PORT_NAME, ACP_SECRET_KEY, ANNOTATIONS_LEFT_FOR_OTHERS_BYTES, MANAGED_BY,
    MANAGED_BY_LABEL, MAX_ANNOTATIONS_BYTES, MountedSkill, OTLP_TOKEN_KEY, PARAMS_ANNOTATION,
    PINNED_SKILLS_ANNOTATION, RunAnnotations, SKILL_CARD_LABEL, SKILL_FILE,
    SKILLS_MANIFEST_ANNOTATION, SandboxInputs, SkillSource, build_pod_spec, name_and_namespace,
};
use crate::Error;
use crate::names::{acp_secret_name, inline_skill_config_map_name, label_value};
use crate::params::RunParams;
use crate::trace::TRACE_CONTEXT_ANNOTATION;

/// The `apiVersion` of the agent-sandbox `Sandbox` (the version its CRD stores).
pub const SANDBOX_API_VERSION: &str = "agents.x-k8s.io/v1beta1";
/// The kind of the agent-sandbox sandbox.
pub const SANDBOX_KIND: &str = "Sandbox";

/// The annotations of a run's sandbox, after checking that they fit.
///
/// The pod's (the `downwardAPI` volume makes each a read-only file):
///
/// - [`SKILLS_MANIFEST_ANNOTATION`](super::SKILLS_MANIFEST_ANNOTATION), the file
///   `/opt/skills/.konveyor-skills.json`: `{"skills": [...], "rules": [...]}` with one entry
///   per mounted skill, sorted by name:
///   - `name`: the frontmatter name,
///   - `description`: the frontmatter description,
///   - `type`: `skill` or `rule`,
///   - `source`: where it came from: the image pinned by digest (`repo@sha256:...`) for
///     image skills, `inline:<skillcard>` for skills written inline in a SkillCard,
///     `<url>@<commit>` for git skills,
///   - `sourcePath`: the directory holding its `SKILL.md` inside the sandbox,
///     `/opt/skills/<name>`;
///
///   and `rules` lists the names of the `rule` skills, sorted.
/// - [`PARAMS_ANNOTATION`](super::PARAMS_ANNOTATION), the file `/run/konveyor/params.json`:
///   `{"workflow": {...}, "agent": {...}, "execution": {...}}`, see
///   [`resolve_run`](crate::params::resolve_run); keys sorted.
///
/// Both are pretty-printed JSON with a final newline, byte-identical for identical inputs.
/// The sandbox's: [`PINNED_SKILLS_ANNOTATION`](super::PINNED_SKILLS_ANNOTATION), the skills as
/// the run's `status.skills` records them.
///
/// All three are counted against what the operator allows of an object's annotations on
/// both backends (with agent-sandbox the pinned skills sit on the Sandbox, not its pod), so
/// that a run does not start on one backend and fail on the other.
pub(super) fn run_annotations(
    run_name: &str,
    skills: &[MountedSkill],
    params: &RunParams,
) -> Result<RunAnnotations, Error> {
    let entries: Vec<Value> = skills
        .iter()
        .map(|skill| {
            let source = match &skill.source {
                SkillSource::Image { reference } => reference.clone(),
                SkillSource::Inline { .. } => format!("inline:{}", skill.skill_card),
                SkillSource::Git { .. } => skill.source.pin(),
            };
            json!({
                "name": skill.name,
                "description": skill.description,
                "type": skill.skill_type.as_str(),
                "source": source,
                "sourcePath": skill.mount_path(),
            })
        })
        .collect();
    let rules: Vec<&str> = skills
        .iter()
        .filter(|s| s.skill_type == SkillType::Rule)
        .map(|s| s.name.as_str())
        .collect();
    let manifest = json!({ "skills": entries, "rules": rules });
    let params = json!({
        "workflow": params.workflow,
        "agent": params.agent,
        "execution": params.execution.to_json(),
    });
    let pinned: Vec<PinnedSkill> = skills.iter().map(MountedSkill::pinned).collect();
    let pinned = serde_json::to_string(&pinned).map_err(|e| Error::Serialization {
        what: "pinned skills",
        message: e.to_string(),
    })?;
    let annotations = RunAnnotations {
        files: BTreeMap::from([
            (SKILLS_MANIFEST_ANNOTATION.to_string(), pretty(&manifest)),
            (PARAMS_ANNOTATION.to_string(), pretty(&params)),
        ]),
        pinned: BTreeMap::from([(PINNED_SKILLS_ANNOTATION.to_string(), pinned)]),
    };
    let bytes: usize = annotations
        .files
        .iter()
        .chain(&annotations.pinned)
        .map(|(key, value)| key.len() + value.len())
        .sum();
    let limit = MAX_ANNOTATIONS_BYTES - ANNOTATIONS_LEFT_FOR_OTHERS_BYTES;
    if bytes > limit {
        return Err(Error::AnnotationsTooLarge {
            run: run_name.to_string(),
            bytes,
            limit,
        });
    }
    Ok(annotations)
}

/// The run's Secret, `<sandbox>-acp-key`, holding `random_key` under `secret-key` (the agent
/// gets it as `KONVEYOR_ACP_SECRET_KEY`) and the run's bearer for the trace receiver under
/// `otlp-token` ([`otlp_token`] of `random_token`): one Secret, so the bearer costs no write
/// of its own. The controller supplies both random values and should create this Secret
/// only once: it is immutable, so a second key is rejected rather than rotated under a
/// running agent.
pub fn build_acp_secret(
    inputs: &SandboxInputs,
    random_key: String,
    random_token: &str,
    owner: OwnerReference,
) -> Secret {
    let token = otlp_token(inputs.namespace(), inputs.run_name, random_token);
    Secret {
        metadata: run_object_metadata(inputs, acp_secret_name(inputs.sandbox_name()), owner),
        type_: Some("Opaque".to_string()),
        immutable: Some(true),
        data: Some(BTreeMap::from([
            (
                ACP_SECRET_KEY.to_string(),
                ByteString(random_key.into_bytes()),
            ),
            (OTLP_TOKEN_KEY.to_string(), ByteString(token.into_bytes())),
        ])),
        ..Default::default()
    }
}

/// The ConfigMap of a SkillCard with `spec.inline`, owned by it, in its namespace:
/// `<skillcard>-skill` with `spec.inline` under key `SKILL.md`. Sandboxes mount it read-only
/// at `/opt/skills/<name>`.
pub fn build_inline_skill_config_map(
    card: &SkillCard,
    owner: OwnerReference,
) -> Result<ConfigMap, Error> {
    let (name, namespace) = name_and_namespace(&card.metadata, "SkillCard")?;
    let inline = card
        .spec
        .inline
        .clone()
        .ok_or_else(|| Error::MissingInlineSkill {
            skill_card: name.to_string(),
        })?;
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(inline_skill_config_map_name(name)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
                (SKILL_CARD_LABEL.to_string(), label_value(name)),
            ])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(SKILL_FILE.to_string(), inline)])),
        ..Default::default()
    })
}

/// The sandbox as a bare Pod (the `pod` backend), named `<sandbox>` and owned by the run,
/// annotated with the skills manifest, the params, the pinned skills, the run's trace
/// context and the Secret its credential proxy mounts.
pub fn build_pod(inputs: &SandboxInputs, owner: OwnerReference) -> Pod {
    let mut metadata = run_object_metadata(inputs, inputs.sandbox_name().to_string(), owner);
    let mut annotations = sandbox_annotations(inputs);
    annotations.extend(pod_annotations(inputs));
    metadata.annotations = Some(annotations);
    Pod {
        metadata,
        spec: Some(build_pod_spec(inputs)),
        ..Default::default()
    }
}

/// The Service of a `pod`-backend sandbox, `<sandbox>` in the run's namespace and owned by
/// the run, so that ACP clients reach the agent at `<sandbox>.<namespace>.svc:4000` as they
/// do with the agent-sandbox backend, whose controller makes the same headless Service for a
/// Sandbox. Headless (`clusterIP: None`): the name resolves to the pod's address once the
/// pod is ready. It selects the pod by the run's labels and names the ACP port, which
/// agent-sandbox's Service leaves out, so `kubectl port-forward svc/<sandbox> 4000` works.
pub fn build_acp_service(inputs: &SandboxInputs, owner: OwnerReference) -> Service {
    Service {
        metadata: run_object_metadata(inputs, inputs.sandbox_name().to_string(), owner),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(inputs.labels()),
            ports: Some(vec![ServicePort {
                name: Some(ACP_PORT_NAME.to_string()),
                port: ACP_PORT,
                target_port: Some(IntOrString::Int(ACP_PORT)),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The sandbox as an agent-sandbox `agents.x-k8s.io/v1beta1` `Sandbox`, owned by the run:
/// `spec.podTemplate` carries the run's labels, the annotations of the skills manifest, the
/// params and the Secret the credential proxy mounts, and [`build_pod_spec`]; the Sandbox itself carries the pinned skills and the
/// run's trace context ([`TRACE_CONTEXT_ANNOTATION`]); and
/// `spec.service: true` asks for a headless Service (selecting the pod) so clients reach the
/// ACP port at `<sandbox>.<namespace>.svc`.
///
/// The agent-sandbox controller (v0.5.6) names the Pod and the Service it creates exactly
/// like the Sandbox, copies the template's labels and annotations to the Pod (but any under
/// `agents.x-k8s.io/`, adding its own `agents.x-k8s.io/sandbox-name-hash` label and the list
/// of the annotations it propagated), and makes the Sandbox the Pod's controller owner.
/// A run controller therefore finds its pod as `<sandbox>` in the run's namespace, and can
/// watch pods by the [`RUN_LABEL`](super::RUN_LABEL) label. Only a pod adopted from a warm
/// pool has another name (recorded in the Sandbox's `agents.x-k8s.io/pod-name`
/// annotation); the operator uses no warm pools. If the pod is deleted, agent-sandbox
/// creates a new one of the same name; [`run_outcome`](super::run_outcome) reports that as
/// `SandboxLost` instead of following the new pod.
pub fn build_sandbox(inputs: &SandboxInputs, owner: OwnerReference) -> Result<Value, Error> {
    let serialize = |what, value: Result<Value, serde_json::Error>| {
        value.map_err(|e| Error::Serialization {
            what,
            message: e.to_string(),
        })
    };
    let pod_spec = serialize(
        "Sandbox pod template",
        serde_json::to_value(build_pod_spec(inputs)),
    )?;
    let mut metadata = run_object_metadata(inputs, inputs.sandbox_name().to_string(), owner);
    metadata.annotations = Some(sandbox_annotations(inputs));
    let metadata = serialize("Sandbox metadata", serde_json::to_value(metadata))?;
    Ok(json!({
        "apiVersion": SANDBOX_API_VERSION,
        "kind": SANDBOX_KIND,
        "metadata": metadata,
        "spec": {
            "podTemplate": {
                "metadata": {
                    "labels": inputs.labels(),
                    "annotations": pod_annotations(inputs),
                },
                "spec": pod_spec,
            },
            "service": true,
        },
    }))
}

/// The pod's annotations (the Sandbox's pod template's): the files of its `downwardAPI`
/// volume, and the Secret its credential proxy mounts, whose changes the operator passes on
/// to the kubelet ([`super::rotation`]).
fn pod_annotations(inputs: &SandboxInputs) -> BTreeMap<String, String> {
    let mut annotations = inputs.annotations.files.clone();
    annotations.extend(credential_secret_annotation(inputs));
    annotations
}

/// The sandbox's own annotations (the Pod's, with the `pod` backend): the pinned skills,
/// and the run's trace context, which agent-sandbox parents its spans to.
fn sandbox_annotations(inputs: &SandboxInputs) -> BTreeMap<String, String> {
    let mut annotations = inputs.annotations.pinned.clone();
    if let Some(trace) = inputs.trace() {
        annotations.insert(
            TRACE_CONTEXT_ANNOTATION.to_string(),
            trace.trace_context_annotation(),
        );
    }
    annotations
}

fn run_object_metadata(inputs: &SandboxInputs, name: String, owner: OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(inputs.namespace().to_string()),
        labels: Some(inputs.labels()),
        owner_references: Some(vec![owner]),
        ..Default::default()
    }
}

/// Indented JSON with a final newline. `Display` with `#` cannot fail, unlike
/// `to_string_pretty`.
fn pretty(value: &Value) -> String {
    format!("{value:#}\n")
}
