//! ADR 0017's two-container shape (`Agent.spec.runtime`, ADR 0011) on the test node, with the
//! real goose as the runtime: the goose test image is both the harness (`agent`, its
//! `GOOSE_HARNESS_MODEL=runtime` mode, an ACP client over HTTP) and the runtime
//! (`goose-harness runtime`, which execs `goose serve` on loopback), each under its own user
//! id. goose's model is the scripted endpoint on this machine, reached through the
//! `credential-proxy` sidecar.
//!
//! - goose runs in the `runtime` container: the harness drives one ACP session on
//!   `127.0.0.1:4001` to `end_turn`, and goose loads the mounted skill (the model receives the
//!   skill's body as the tool's result).
//! - The runtime cannot read the harness's credentials: the run's `GIT_TOKEN` (a Secret, in
//!   the harness's `env`), its file mount of that Secret, the ACP key and the model key are
//!   nowhere in the runtime's `/proc/1/environ` or in any file under its directories and
//!   mounts; the harness's mount points do not exist there; every process it sees is its own
//!   user's. The same probes find the token and the ACP key in the harness.
//! - `/workspace` is shared: a file the harness wrote group-writable, the runtime appends to,
//!   and the harness reads both lines back.
//!
//! Needs `GOOSE_BIN`, as `goose_node` does.

use std::io::Read as _;

use agentic_api::{AgentRun, AgentRunPhase, AgentRunSpec, AgentRuntime, FileMount};
use agentic_fixtures::key_secret;
use agentic_integration_tests::{agent_log, apply, env_var, log_values, meta, wait_finished};
use agentic_operator::context::SandboxBackend;
use base64::Engine as _;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, Pod, Secret, SecretKeySelector};
use kube::Api;

use super::credential_proxy_node::{
    GooseBehindTheProxy, count, fresh_key, goose_behind_the_proxy, is_chat_turn,
};

const STARTUP_DEADLINE_SECONDS: i32 = 300;
const ACTIVE_DEADLINE_SECONDS: i64 = 300;
/// The skill's body, which goose's `load_skill` returns to the model.
const SKILL_BODY: &str = "Use records where a class only carries data.";

/// The one value of the log line `prefix`, base64-decoded.
fn decoded(log: &str, prefix: &str) -> Vec<u8> {
    let values = log_values(log, prefix);
    assert_eq!(values.len(), 1, "one {prefix:?} line: {log}");
    base64::engine::general_purpose::STANDARD
        .decode(values[0].trim())
        .expect("base64")
}

/// The one value of the log line `prefix`.
fn value<'a>(log: &'a str, prefix: &str) -> &'a str {
    let values = log_values(log, prefix);
    assert_eq!(values.len(), 1, "one {prefix:?} line: {log}");
    values[0].trim()
}

#[tokio::test]
async fn goose_in_its_own_container_shares_the_workspace_but_not_the_harness_credentials() {
    let (model_key, git_token) = (fresh_key("model"), fresh_key("git"));
    let runtime = AgentRuntime {
        image: None,
        command: vec!["/usr/local/bin/goose-harness".into(), "runtime".into()],
        harness_user: 1001,
        runtime_user: 1002,
        group: 0,
    };
    let GooseBehindTheProxy {
        model,
        operator,
        ns,
        client,
    } = goose_behind_the_proxy(
        "twobox",
        SandboxBackend::Pod,
        &model_key,
        SKILL_BODY,
        Some(runtime),
    )
    .await;
    std::fs::write(&model.release, b"").expect("the model holds no answer");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(&secrets, &key_secret("git-token", &git_token)).await;

    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    apply(
        &runs,
        &AgentRun {
            metadata: meta("twobox"),
            spec: AgentRunSpec {
                agent_ref: "migrator".into(),
                instructions: Some("Upgrade the service to Java 21.".into()),
                env: vec![
                    env_var("GOOSE_HARNESS_MODEL", "runtime"),
                    EnvVar {
                        name: "GIT_TOKEN".into(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            secret_key_ref: Some(SecretKeySelector {
                                name: "git-token".into(),
                                key: "apiKey".into(),
                                optional: None,
                            }),
                            ..EnvVarSource::default()
                        }),
                    },
                ],
                file_mounts: vec![FileMount {
                    mount_path: "/etc/harness-credentials".into(),
                    secret_name: Some("git-token".into()),
                    ..FileMount::default()
                }],
                startup_deadline_seconds: Some(STARTUP_DEADLINE_SECONDS),
                active_deadline_seconds: Some(ACTIVE_DEADLINE_SECONDS),
                ..AgentRunSpec::default()
            },
            status: None,
        },
    )
    .await;
    let finished = wait_finished(
        &runs,
        "twobox",
        STARTUP_DEADLINE_SECONDS,
        ACTIVE_DEADLINE_SECONDS,
    )
    .await;
    let harness = agent_log(&client, &ns, &finished).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let sandbox = finished
        .status
        .as_ref()
        .and_then(|s| s.sandbox_name.clone())
        .expect("the run names its sandbox");
    let runtime = pods
        .logs(
            &sandbox,
            &kube::api::LogParams {
                container: Some("runtime".into()),
                ..kube::api::LogParams::default()
            },
        )
        .await
        .expect("the runtime's log");
    let status = finished.status.as_ref().expect("status");
    assert_eq!(
        status.phase,
        Some(AgentRunPhase::Succeeded),
        "{status:#?}\n{harness}\n{runtime}"
    );

    // goose ran in the runtime container and answered the harness's session over ACP.
    assert_eq!(
        value(&harness, "harness-acp-stop: "),
        "end_turn",
        "{harness}"
    );
    assert!(
        value(&harness, "harness-acp-updates: ").contains("tool_call"),
        "{harness}"
    );
    let requests = model.requests();
    assert!(
        requests
            .iter()
            .any(|r| is_chat_turn(r) && r["body"].to_string().contains(SKILL_BODY)),
        "goose loaded the skill mounted into its container: {requests:#?}"
    );
    assert!(
        requests
            .iter()
            .filter(|r| is_chat_turn(r))
            .all(|r| r["authorization"] == format!("Bearer {model_key}")),
        "{requests:#?}"
    );

    // Two users of one group.
    assert_eq!(value(&harness, "harness-id: "), "1001:0");
    assert_eq!(value(&runtime, "runtime-id: "), "1002:0");
    assert_eq!(value(&runtime, "runtime-processes: "), "1002", "{runtime}");
    let missing = value(&runtime, "runtime-harness-files: ");
    assert_eq!(
        missing.matches("No such file or directory").count(),
        2,
        "the harness's mounts are not in the runtime: {missing}"
    );

    // The runtime holds none of the harness's credentials; the same probes find them in the
    // harness.
    let acp_secret = secrets
        .get(&format!("{sandbox}-acp-key"))
        .await
        .expect("the run's ACP Secret");
    let acp_key =
        String::from_utf8(acp_secret.data.expect("data")["secret-key"].0.clone()).expect("UTF-8");
    let harness_environ = decoded(&harness, "harness-environ: ");
    assert_eq!(count(&harness_environ, &git_token), 1);
    assert_eq!(count(&harness_environ, &acp_key), 1);
    let runtime_environ = decoded(&runtime, "runtime-environ: ");
    for expected in ["HOME=/home/runtime", "KONVEYOR_RUNTIME_ACP_PORT=4001"] {
        assert_eq!(count(&runtime_environ, expected), 1, "{expected}");
    }
    let mut files = Vec::new();
    flate2::read::GzDecoder::new(&decoded(&runtime, "runtime-mounts: ")[..])
        .read_to_end(&mut files)
        .expect("a gzipped tar");
    let names: Vec<String> = tar::Archive::new(&files[..])
        .entries()
        .expect("entries")
        .map(|entry| {
            let entry = entry.expect("an entry");
            entry.path().expect("a path").display().to_string()
        })
        .collect();
    for expected in [
        "workspace/shared.txt",
        "opt/skills/java-upgrade/SKILL.md",
        "home/runtime/.agents/skills/java-upgrade",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
    }
    for (what, secret) in [
        ("the git token", &git_token),
        ("the ACP key", &acp_key),
        ("the model key", &model_key),
    ] {
        assert_eq!(
            count(&runtime_environ, secret),
            0,
            "{what} in its environment"
        );
        assert_eq!(
            count(&files, secret),
            0,
            "{what} in a file of the runtime's"
        );
        assert_eq!(count(runtime.as_bytes(), secret), 0, "{what} in its log");
    }

    // One /workspace: the runtime appended to the harness's group-writable file.
    assert_eq!(
        decoded(&harness, "harness-shared: "),
        b"from the harness\nfrom the runtime\n"
    );
    operator.stop().await;
}
