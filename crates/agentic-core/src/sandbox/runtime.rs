//! Konveyor's ADR 0017 shape, behind the Agent's `spec.runtime` (our ADR 0011): the agent
//! runtime (goose) in a container of its own, `runtime`, under another user id than the
//! harness (the `agent` container). The two share `/workspace` and the skills and talk ACP on
//! loopback, the runtime serving on [`RUNTIME_ACP_PORT`]. Everything secret the harness holds
//! (the ACP key, the run's `env`, `envFrom` and `fileMounts`, its own `/tmp` and root
//! filesystem) stays out of the runtime: other containers, another user, and no shared
//! process namespace.
//!
//! The runtime is a native sidecar (an init container with `restartPolicy: Always`): started
//! before the harness, which may connect at once, and stopped once the harness has exited, so
//! the pod finishes and the run still follows the `agent` container.

use agentic_api::AgentRuntime;
use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Volume};

use super::pod::{
    RUN_FILES_VOLUME, WORKSPACE_VOLUME, model_environment, mount, skill_environment, skill_mounts,
    unprivileged, value,
};
use super::{
    SKILLS_MANIFEST_KEY, SKILLS_MANIFEST_PATH, SandboxInputs, TMP_DIR, WORKSPACE_DIR, env,
};

/// The runtime's container.
pub const RUNTIME_CONTAINER: &str = "runtime";
/// The loopback port the runtime serves ACP on, for the harness: where Konveyor's harness
/// reaches goose (its ADR 0008, kept by its ADR 0017 across containers), beside the harness's
/// own [`ACP_PORT`](super::ACP_PORT).
pub const RUNTIME_ACP_PORT: u16 = 4001;
/// The runtime's `$HOME`, an emptyDir of its own (caches, goose's configuration).
pub const RUNTIME_HOME: &str = "/home/runtime";
/// The runtime's own `/tmp`: the harness's `/tmp` is not shared.
const RUNTIME_TMP_VOLUME: &str = "runtime-tmp";
const RUNTIME_HOME_VOLUME: &str = "runtime-home";

/// The `runtime` native sidecar: the Agent's `spec.runtime` command, from its image (else the
/// harness's), as `runAsUser: runtimeUser` in `group`. It gets the skills, the model's
/// variables and the trace exporter's, `/workspace`, a `/tmp` and `$HOME` of its own; not the
/// ACP key, the prompt, the git author, params.json or anything of the run's own.
pub(super) fn runtime_container(inputs: &SandboxInputs, runtime: &AgentRuntime) -> Container {
    let mut vars = skill_environment(inputs);
    let (model, sources) = model_environment(inputs);
    vars.extend(model);
    vars.push(value(env::RUNTIME_ACP_PORT, &RUNTIME_ACP_PORT.to_string()));
    vars.push(value("HOME", RUNTIME_HOME));
    vars.extend(super::telemetry::telemetry_env(inputs));
    let mut mounts = vec![
        mount(WORKSPACE_VOLUME, WORKSPACE_DIR, false, None),
        mount(RUNTIME_TMP_VOLUME, TMP_DIR, false, None),
        mount(RUNTIME_HOME_VOLUME, RUNTIME_HOME, false, None),
        mount(
            RUN_FILES_VOLUME,
            SKILLS_MANIFEST_PATH,
            true,
            Some(SKILLS_MANIFEST_KEY),
        ),
    ];
    mounts.extend(skill_mounts(inputs));
    Container {
        name: RUNTIME_CONTAINER.to_string(),
        image: Some(
            runtime
                .image
                .clone()
                .unwrap_or_else(|| inputs.agent().spec.image.clone()),
        ),
        command: Some(runtime.command.clone()),
        restart_policy: Some("Always".to_string()),
        env: Some(vars),
        env_from: (!sources.is_empty()).then_some(sources),
        volume_mounts: Some(mounts),
        security_context: Some(unprivileged(Some((runtime.runtime_user, runtime.group)))),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    }
}

/// The runtime's own `/tmp` and `$HOME`.
pub(super) fn runtime_volumes() -> [Volume; 2] {
    [RUNTIME_TMP_VOLUME, RUNTIME_HOME_VOLUME].map(|name| Volume {
        name: name.to_string(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests;
