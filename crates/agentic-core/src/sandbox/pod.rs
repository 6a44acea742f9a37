//! The sandbox's pod spec: one `agent` container with the contract of `docs/pod-contract.md`,
//! after one `skill-fetch-<index>` init container per git skill, where the Gateway's key
//! is kept from the agent the `credential-proxy` native sidecar, and with the Agent's
//! `spec.runtime` the `runtime` native sidecar (ADR 0011, [`super::runtime`]).

use std::collections::HashMap;

use agentic_api::CredentialRef;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource,
    ImageVolumeSource, KeyToPath, LocalObjectReference, ObjectFieldSelector, PodSecurityContext,
    PodSpec, Probe, SeccompProfile, SecretEnvSource, SecretKeySelector, SecretVolumeSource,
    SecurityContext, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::credentials::{
    CREDENTIAL_DIR, CREDENTIAL_FILE, CREDENTIAL_PROXY_CONTAINER, CREDENTIAL_PROXY_PORT,
    PLACEHOLDER_KEY, ProxyPlan,
};
use super::runtime::{RUNTIME_ACP_PORT, runtime_container, runtime_volumes};
use super::{
    ACP_PORT, ACP_PORT_NAME, ACP_SECRET_KEY, AGENT_CONTAINER, MountedSkill, PARAMS_ANNOTATION,
    PARAMS_KEY, PARAMS_PATH, SKILL_FETCH_CONTAINER_PREFIX, SKILL_FILE, SKILLS_DIR,
    SKILLS_MANIFEST_ANNOTATION, SKILLS_MANIFEST_KEY, SKILLS_MANIFEST_PATH, SandboxInputs,
    SkillFetcher, SkillSource, TMP_DIR, WORKSPACE_DIR, env,
};
use crate::gateway::AuthStyle;
use crate::names::acp_secret_name;

pub(super) const WORKSPACE_VOLUME: &str = "workspace";
const TMP_VOLUME: &str = "tmp";
/// The `downwardAPI` volume of the skills manifest and the params.
pub(super) const RUN_FILES_VOLUME: &str = "konveyor-run";
/// Where a skill-fetch init container writes the skill (its emptyDir).
const FETCH_DEST_DIR: &str = "/skill";
/// Where a skill-fetch init container finds its credentials (the Secret's volume).
const FETCH_CREDENTIALS_DIR: &str = "/run/konveyor/git-credentials";
/// The Gateway's Secret, mounted into the credential proxy only.
const CREDENTIAL_VOLUME: &str = "gateway-credential";
/// The skill-fetch init container's scratch repository (an emptyDir: the root fs is
/// read-only).
const FETCH_TMP_DIR: &str = "/tmp";

/// The sandbox's pod spec.
///
/// - `restartPolicy: Never`: a run is one attempt; its outcome is the agent's exit code.
/// - `automountServiceAccountToken: false` and `enableServiceLinks: false`: the agent gets no
///   Kubernetes credentials and no environment variables for the namespace's Services.
/// - Security: seccomp `RuntimeDefault`, no privilege escalation, every capability dropped.
///   `runAsNonRoot` is *not* set, because common harness images run as root and would then
///   fail to start; the root filesystem stays writable for the same reason.
/// - `terminationMessagePolicy: FallbackToLogsOnError`, so a failed run reports the end of
///   the agent's log when it writes no termination message.
/// - The skills manifest and params are files of one `downwardAPI` volume, `konveyor-run`,
///   read from the pod's own annotations: the kubelet reads no other object for them.
/// - Skills from one image digest (a SkillCollection's, or several cards' `subPath`s of one
///   image) share one image volume, each mounted read-only through its own `subPath`.
/// - `imagePullSecrets`: the skills' pull secrets, sorted, so the kubelet can pull the skill
///   images it mounts.
/// - Per git skill, an init container `skill-fetch-<index>` from the operator's image runs
///   `agentic-operator skill fetch` for the pinned commit into the skill's emptyDir, which
///   the agent mounts read-only. Only that init container mounts the card's
///   `spec.sourceSecret`; it runs as non-root with a read-only root filesystem.
/// - Where the Gateway's key is kept from the agent ([`SandboxInputs::credential_isolation`]),
///   the native sidecar `credential-proxy` from the operator's image, the only container that
///   mounts the Gateway's Secret; the agent gets its loopback address and a placeholder key.
/// - With the Agent's `spec.runtime`, the native sidecar `runtime` (ADR 0011): the agent
///   runtime under its own user id, sharing `/workspace` and the skills, not the harness's
///   credentials; both run as non-root in one group, which owns the volumes (`fsGroup`).
pub fn build_pod_spec(inputs: &SandboxInputs) -> PodSpec {
    let mut pull_secrets: Vec<&str> = inputs
        .skills()
        .iter()
        .flat_map(|s| s.pull_secrets.iter().map(String::as_str))
        .collect();
    pull_secrets.sort_unstable();
    pull_secrets.dedup();
    let mut init_containers = fetch_containers(inputs);
    if let Some(plan) = inputs.credential_isolation().proxy() {
        init_containers.push(proxy_container(plan));
    }
    let runtime = inputs.agent.spec.runtime.as_ref();
    if let Some(runtime) = runtime {
        init_containers.push(runtime_container(inputs, runtime));
    }
    PodSpec {
        init_containers: (!init_containers.is_empty()).then_some(init_containers),
        containers: vec![agent_container(inputs)],
        volumes: Some(volumes(inputs)),
        restart_policy: Some("Never".to_string()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        image_pull_secrets: (!pull_secrets.is_empty()).then(|| {
            pull_secrets
                .into_iter()
                .map(|name| LocalObjectReference {
                    name: name.to_string(),
                })
                .collect()
        }),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                ..Default::default()
            }),
            fs_group: runtime.map(|r| r.group),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn agent_container(inputs: &SandboxInputs) -> Container {
    let (env, env_from) = environment(inputs);
    Container {
        name: AGENT_CONTAINER.to_string(),
        image: Some(inputs.agent.spec.image.clone()),
        env: Some(env),
        env_from: (!env_from.is_empty()).then_some(env_from),
        ports: Some(vec![ContainerPort {
            name: Some(ACP_PORT_NAME.to_string()),
            container_port: ACP_PORT,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String(ACP_PORT_NAME.to_string()),
                ..Default::default()
            }),
            period_seconds: Some(5),
            ..Default::default()
        }),
        volume_mounts: Some(volume_mounts(inputs)),
        security_context: Some(unprivileged(
            inputs
                .agent
                .spec
                .runtime
                .as_ref()
                .map(|r| (r.harness_user, r.group)),
        )),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    }
}

/// One init container per git skill, in skill order, each writing its skill into the
/// skill's volume.
fn fetch_containers(inputs: &SandboxInputs) -> Vec<Container> {
    let Some(fetcher) = inputs.fetcher else {
        // SandboxInputs::new refuses git skills without a fetcher.
        return Vec::new();
    };
    inputs
        .skills()
        .iter()
        .enumerate()
        .filter_map(|(index, skill)| match &skill.source {
            SkillSource::Git {
                url,
                commit,
                sub_path,
                secret,
            } => Some(fetch_container(
                fetcher,
                index,
                url,
                commit,
                sub_path.as_deref(),
                secret.is_some(),
            )),
            SkillSource::Image { .. } | SkillSource::Inline { .. } => None,
        })
        .collect()
}

fn fetch_container(
    fetcher: &SkillFetcher,
    index: usize,
    url: &str,
    commit: &str,
    sub_path: Option<&str>,
    with_secret: bool,
) -> Container {
    let mut args = vec![
        "skill".to_string(),
        "fetch".to_string(),
        format!("--url={url}"),
        format!("--commit={commit}"),
    ];
    if let Some(sub_path) = sub_path {
        args.push(format!("--sub-path={sub_path}"));
    }
    for host in &fetcher.insecure_git_hosts {
        args.push(format!("--insecure-git-host={host}"));
    }
    let mut mounts = vec![
        mount(&skill_volume_name(index), FETCH_DEST_DIR, false, None),
        mount(&fetch_tmp_volume_name(index), FETCH_TMP_DIR, false, None),
    ];
    if with_secret {
        args.push(format!("--credentials-dir={FETCH_CREDENTIALS_DIR}"));
        mounts.push(mount(
            &fetch_secret_volume_name(index),
            FETCH_CREDENTIALS_DIR,
            true,
            None,
        ));
    }
    args.push(FETCH_DEST_DIR.to_string());
    Container {
        name: format!("{SKILL_FETCH_CONTAINER_PREFIX}{index}"),
        image: Some(fetcher.image.clone()),
        args: Some(args),
        env: Some(vec![value("TMPDIR", FETCH_TMP_DIR)]),
        volume_mounts: Some(mounts),
        security_context: Some(restricted_non_root()),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    }
}

/// The native sidecar (an init container that keeps running) that adds the Gateway's key:
/// the only container that mounts the Gateway's Secret. It runs the operator's image as
/// non-root with a read-only root filesystem, and listens on loopback only.
fn proxy_container(plan: &ProxyPlan) -> Container {
    let auth = match plan.auth {
        AuthStyle::Bearer => "bearer",
        AuthStyle::Anthropic => "anthropic",
    };
    Container {
        name: CREDENTIAL_PROXY_CONTAINER.to_string(),
        image: Some(plan.image.clone()),
        args: Some(vec![
            "credential-proxy".to_string(),
            format!("--listen=127.0.0.1:{CREDENTIAL_PROXY_PORT}"),
            format!("--upstream={}", plan.upstream),
            format!("--auth={auth}"),
            format!("--key-file={CREDENTIAL_DIR}/{CREDENTIAL_FILE}"),
        ]),
        restart_policy: Some("Always".to_string()),
        volume_mounts: Some(vec![mount(CREDENTIAL_VOLUME, CREDENTIAL_DIR, true, None)]),
        security_context: Some(restricted_non_root()),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    }
}

/// No privilege escalation, no capabilities; with `identity` (user id, group id), that
/// non-root user and group, else the image's user.
pub(super) fn unprivileged(identity: Option<(i64, i64)>) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        run_as_user: identity.map(|(user, _)| user),
        run_as_group: identity.map(|(_, group)| group),
        run_as_non_root: identity.map(|_| true),
        ..Default::default()
    }
}

/// The security context of the operator's own containers in the pod: non-root, read-only
/// root filesystem, no privilege escalation, no capabilities, seccomp `RuntimeDefault`.
fn restricted_non_root() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The operator's variables first, then the run's own. `env` wins over `envFrom` in
/// Kubernetes, so a Gateway Secret imported whole cannot override the contract.
fn environment(inputs: &SandboxInputs) -> (Vec<EnvVar>, Vec<EnvFromSource>) {
    let mut vars = skill_environment(inputs);
    vars.push(value(env::PROMPT, &inputs.params.prompt));
    vars.push(value(env::INSTRUCTIONS, &inputs.params.instructions));
    let (model, mut sources) = model_environment(inputs);
    vars.extend(model);
    vars.push(secret_key(
        env::ACP_SECRET_KEY,
        &acp_secret_name(inputs.sandbox_name()),
        ACP_SECRET_KEY,
    ));
    if inputs.agent.spec.runtime.is_some() {
        vars.push(value(env::RUNTIME_ACP_PORT, &RUNTIME_ACP_PORT.to_string()));
    }
    let author = inputs.git_author.as_ref();
    vars.push(value(
        env::GIT_AUTHOR_NAME,
        author.map(|a| a.name.as_str()).unwrap_or_default(),
    ));
    vars.push(value(
        env::GIT_AUTHOR_EMAIL,
        author.map(|a| a.email.as_str()).unwrap_or_default(),
    ));
    vars.extend(super::telemetry::telemetry_env(inputs));
    vars.extend(inputs.run.spec.env.iter().cloned());
    sources.extend(inputs.run.spec.env_from.iter().cloned());
    (vars, sources)
}

/// Where the skills are, how they are delivered, and which are rules.
pub(super) fn skill_environment(inputs: &SandboxInputs) -> Vec<EnvVar> {
    vec![
        value(env::SKILLS_DIR, SKILLS_DIR),
        value(env::SKILL_MODE, inputs.delivery_mode.as_str()),
        value(env::RULES, &inputs.rules().join(",")),
    ]
}

/// The Gateway: provider, endpoint (the proxy's, where it adds the key), model and key (a
/// placeholder behind the proxy; the whole Secret as `envFrom` when no key is named).
pub(super) fn model_environment(inputs: &SandboxInputs) -> (Vec<EnvVar>, Vec<EnvFromSource>) {
    let gateway = &inputs.gateway.spec;
    let mut vars = vec![value(env::LLM_PROVIDER, &gateway.provider)];
    let proxy = inputs.credential_isolation().proxy();
    match proxy {
        Some(plan) => vars.push(value(env::LLM_ENDPOINT, &plan.agent_endpoint())),
        None => vars.push(value(
            env::LLM_ENDPOINT,
            gateway.endpoint.as_deref().unwrap_or_default(),
        )),
    }
    vars.push(value(env::LLM_MODEL, &gateway.model.name));
    let mut sources = Vec::new();
    match &gateway.credential_ref {
        // The proxy adds the key; the agent gets a worthless stand-in.
        Some(_) if proxy.is_some() => vars.push(value(env::LLM_API_KEY, PLACEHOLDER_KEY)),
        Some(CredentialRef {
            secret_name,
            key: Some(key),
        }) => vars.push(secret_key(env::LLM_API_KEY, secret_name, key)),
        Some(CredentialRef {
            secret_name,
            key: None,
        }) => sources.push(EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret_name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        None => {}
    }
    (vars, sources)
}

pub(super) fn value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

fn secret_key(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

/// Volume of the skill at `index` in the sorted skill list. Skill names can be 64
/// characters, too long for a volume name, so volumes are numbered.
fn skill_volume_name(index: usize) -> String {
    format!("skill-{index}")
}

/// The index of the skill whose volume the skill at each index mounts: its own, except that
/// image skills pinned to one reference share the volume of the first of them. The kubelet
/// pulls and mounts an image volume once per volume, so a collection's skills from one image
/// (each a `subPath` of it) cost one mount, not one each.
fn volume_owners(skills: &[MountedSkill]) -> Vec<usize> {
    let mut first_by_reference: HashMap<&str, usize> = HashMap::new();
    skills
        .iter()
        .enumerate()
        .map(|(index, skill)| match &skill.source {
            SkillSource::Image { reference } => *first_by_reference
                .entry(reference.as_str())
                .or_insert(index),
            SkillSource::Inline { .. } | SkillSource::Git { .. } => index,
        })
        .collect()
}

/// The scratch space of the init container fetching the git skill at `index`.
fn fetch_tmp_volume_name(index: usize) -> String {
    format!("skill-{index}-tmp")
}

/// The `spec.sourceSecret` of the git skill at `index`.
fn fetch_secret_volume_name(index: usize) -> String {
    format!("skill-{index}-credentials")
}

fn volumes(inputs: &SandboxInputs) -> Vec<Volume> {
    let mut volumes = vec![
        Volume {
            name: WORKSPACE_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        Volume {
            name: TMP_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        Volume {
            name: RUN_FILES_VOLUME.to_string(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![
                    annotation_file(SKILLS_MANIFEST_KEY, SKILLS_MANIFEST_ANNOTATION),
                    annotation_file(PARAMS_KEY, PARAMS_ANNOTATION),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    let owners = volume_owners(inputs.skills());
    for (index, skill) in inputs.skills().iter().enumerate() {
        if owners[index] != index {
            // Mounted from the volume of an earlier skill of the same image.
            continue;
        }
        let name = skill_volume_name(index);
        if let SkillSource::Git { secret, .. } = &skill.source {
            volumes.push(Volume {
                name: fetch_tmp_volume_name(index),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            });
            if let Some(secret) = secret {
                volumes.push(Volume {
                    name: fetch_secret_volume_name(index),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(secret.clone()),
                        items: Some(vec![key_to_path("username"), key_to_path("password")]),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
        volumes.push(match &skill.source {
            SkillSource::Image { reference } => Volume {
                name,
                image: Some(ImageVolumeSource {
                    reference: Some(reference.clone()),
                    pull_policy: Some("IfNotPresent".to_string()),
                }),
                ..Default::default()
            },
            SkillSource::Inline { config_map } => Volume {
                name,
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map.clone(),
                    items: Some(vec![key_to_path(SKILL_FILE)]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            SkillSource::Git { .. } => Volume {
                name,
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
        });
    }
    for (index, checked) in inputs.file_mounts.iter().enumerate() {
        volumes.push(super::files::volume(index, checked));
    }
    if inputs.agent.spec.runtime.is_some() {
        volumes.extend(runtime_volumes());
    }
    if let Some(plan) = inputs.credential_isolation().proxy() {
        volumes.push(Volume {
            name: CREDENTIAL_VOLUME.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(plan.secret_name.clone()),
                items: Some(vec![KeyToPath {
                    key: plan.secret_key.clone(),
                    path: CREDENTIAL_FILE.to_string(),
                    mode: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    volumes
}

/// The file `path` of the pod's annotation `annotation`.
fn annotation_file(path: &str, annotation: &str) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.to_string(),
        field_ref: Some(ObjectFieldSelector {
            field_path: format!("metadata.annotations['{annotation}']"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn key_to_path(key: &str) -> KeyToPath {
    KeyToPath {
        key: key.to_string(),
        path: key.to_string(),
        mode: None,
    }
}

fn volume_mounts(inputs: &SandboxInputs) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount(WORKSPACE_VOLUME, WORKSPACE_DIR, false, None),
        mount(TMP_VOLUME, TMP_DIR, false, None),
        mount(
            RUN_FILES_VOLUME,
            SKILLS_MANIFEST_PATH,
            true,
            Some(SKILLS_MANIFEST_KEY),
        ),
        mount(RUN_FILES_VOLUME, PARAMS_PATH, true, Some(PARAMS_KEY)),
    ];
    mounts.extend(skill_mounts(inputs));
    for (index, checked) in inputs.file_mounts.iter().enumerate() {
        mounts.push(super::files::volume_mount(index, checked));
    }
    mounts
}

/// Each skill's directory, read-only, from its volume (shared by the skills of one image).
pub(super) fn skill_mounts(inputs: &SandboxInputs) -> Vec<VolumeMount> {
    let owners = volume_owners(inputs.skills());
    inputs
        .skills()
        .iter()
        .zip(owners)
        .map(|(skill, owner)| {
            mount(
                &skill_volume_name(owner),
                &skill.mount_path(),
                true,
                skill.sub_path.as_deref(),
            )
        })
        .collect()
}

pub(super) fn mount(
    volume: &str,
    path: &str,
    read_only: bool,
    sub_path: Option<&str>,
) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        sub_path: sub_path.map(str::to_string),
        ..Default::default()
    }
}
