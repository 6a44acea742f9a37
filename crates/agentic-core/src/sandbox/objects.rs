//! The objects around the sandbox's pod spec, and the sandbox itself for both backends.

use std::collections::BTreeMap;

use agentic_api::SkillCard;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::{
    ACP_PORT, ACP_PORT_NAME, ACP_SECRET_KEY, MANAGED_BY, MANAGED_BY_LABEL, PARAMS_KEY,
    SKILL_CARD_LABEL, SKILL_FILE, SKILLS_MANIFEST_KEY, SandboxInputs, SkillSource, build_pod_spec,
    name_and_namespace,
};
use crate::Error;
use crate::names::{
    acp_secret_name, inline_skill_config_map_name, label_value, run_config_map_name,
};

/// The `apiVersion` of the agent-sandbox `Sandbox` (the version its CRD stores).
pub const SANDBOX_API_VERSION: &str = "agents.x-k8s.io/v1beta1";
/// The kind of the agent-sandbox sandbox.
pub const SANDBOX_KIND: &str = "Sandbox";

/// The run's ConfigMap, `<sandbox>-config`, with two keys, each mounted read-only as a file:
///
/// - `konveyor-skills.json` at `/opt/skills/.konveyor-skills.json`, the skills manifest:
///   `{"skills": [...], "rules": [...]}` with one entry per mounted skill, sorted by name:
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
/// - `params.json` at `/run/konveyor/params.json`: `{"workflow": {...}, "agent": {...},
///   "execution": {...}}`, see [`resolve_run`](crate::params::resolve_run); keys sorted.
///
/// Both are pretty-printed JSON with a final newline, byte-identical for identical inputs.
pub fn build_run_config_map(inputs: &SandboxInputs, owner: OwnerReference) -> ConfigMap {
    let skills: Vec<Value> = inputs
        .skills()
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
    let manifest = json!({ "skills": skills, "rules": inputs.rules() });
    let params = json!({
        "workflow": inputs.params.workflow,
        "agent": inputs.params.agent,
        "execution": inputs.params.execution.to_json(),
    });
    ConfigMap {
        metadata: run_object_metadata(inputs, run_config_map_name(inputs.sandbox_name()), owner),
        data: Some(BTreeMap::from([
            (SKILLS_MANIFEST_KEY.to_string(), pretty(&manifest)),
            (PARAMS_KEY.to_string(), pretty(&params)),
        ])),
        ..Default::default()
    }
}

/// The run's Secret, `<sandbox>-acp-key`, holding `random_key` under `secret-key`; the agent
/// gets it as `KONVEYOR_ACP_SECRET_KEY`. The controller supplies the random key and should
/// create this Secret only once: it is immutable, so a second key is rejected rather than
/// rotated under a running agent.
pub fn build_acp_secret(
    inputs: &SandboxInputs,
    random_key: String,
    owner: OwnerReference,
) -> Secret {
    Secret {
        metadata: run_object_metadata(inputs, acp_secret_name(inputs.sandbox_name()), owner),
        type_: Some("Opaque".to_string()),
        immutable: Some(true),
        data: Some(BTreeMap::from([(
            ACP_SECRET_KEY.to_string(),
            ByteString(random_key.into_bytes()),
        )])),
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

/// The sandbox as a bare Pod (the `pod` backend), named `<sandbox>` and owned by the run.
pub fn build_pod(inputs: &SandboxInputs, owner: OwnerReference) -> Pod {
    Pod {
        metadata: run_object_metadata(inputs, inputs.sandbox_name().to_string(), owner),
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
/// `spec.podTemplate` carries the run's labels and [`build_pod_spec`], and `spec.service:
/// true` asks for a headless Service (selecting the pod) so clients reach the ACP port at
/// `<sandbox>.<namespace>.svc`.
///
/// The agent-sandbox controller (v0.5.3) names the Pod and the Service it creates exactly
/// like the Sandbox, copies the template's labels to the Pod (adding its own
/// `agents.x-k8s.io/sandbox-name-hash`), and makes the Sandbox the Pod's controller owner.
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
    let metadata = serialize(
        "Sandbox metadata",
        serde_json::to_value(run_object_metadata(
            inputs,
            inputs.sandbox_name().to_string(),
            owner,
        )),
    )?;
    Ok(json!({
        "apiVersion": SANDBOX_API_VERSION,
        "kind": SANDBOX_KIND,
        "metadata": metadata,
        "spec": {
            "podTemplate": {
                "metadata": { "labels": inputs.labels() },
                "spec": pod_spec,
            },
            "service": true,
        },
    }))
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
