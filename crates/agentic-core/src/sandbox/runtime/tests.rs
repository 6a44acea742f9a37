use agentic_api::{AgentRuntime, FileMount};
use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, EnvVarSource, SecretEnvSource};
use serde_json::{Value, json};

use super::super::tests::{Fixture, container, env_var, proxied_pod_spec, receiver};
use super::super::{TraceReceiver, build_pod_spec};

fn goose() -> AgentRuntime {
    AgentRuntime {
        image: None,
        command: vec![
            "goose".into(),
            "serve".into(),
            "--port".into(),
            "$(KONVEYOR_RUNTIME_ACP_PORT)".into(),
        ],
        harness_user: 1001,
        runtime_user: 1002,
        group: 0,
    }
}

fn two_box() -> Fixture {
    let mut fixture = Fixture::new();
    fixture.agent.spec.runtime = Some(goose());
    fixture
}

fn runtime(spec: &Value) -> &Value {
    let init = spec["initContainers"].as_array().expect("init containers");
    init.last().expect("the runtime sidecar")
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|item| item[key].as_str().expect("a name").to_string())
        .collect()
}

fn mount_of<'a>(container: &'a Value, path: &str) -> Option<&'a Value> {
    container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"] == path)
}

#[test]
fn without_a_runtime_the_pod_keeps_konveyors_single_container() {
    let spec = Fixture::new().pod_spec();
    assert_eq!(spec.get("initContainers"), None);
    assert_eq!(spec["securityContext"].get("fsGroup"), None);
    let agent = container(&spec);
    assert_eq!(agent["securityContext"].get("runAsUser"), None);
    assert_eq!(agent["securityContext"].get("runAsNonRoot"), None);
    assert!(!names(&agent["env"], "name").contains(&"KONVEYOR_RUNTIME_ACP_PORT".to_string()));
}

#[test]
fn the_runtime_is_a_native_sidecar_under_its_own_user_sharing_the_workspace_and_skills() {
    let spec = two_box().pod_spec();
    assert_eq!(names(&spec["containers"], "name"), ["agent"]);
    let runtime = runtime(&spec);
    assert_eq!(runtime["name"], "runtime");
    assert_eq!(runtime["restartPolicy"], "Always");
    assert_eq!(runtime["image"], "ghcr.io/acme/harness:1.0");
    assert_eq!(
        runtime["command"],
        json!(["goose", "serve", "--port", "$(KONVEYOR_RUNTIME_ACP_PORT)"])
    );
    assert_eq!(runtime.get("ports"), None, "loopback only");
    let restricted = |user: i64| {
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
               "runAsUser": user, "runAsGroup": 0, "runAsNonRoot": true})
    };
    assert_eq!(runtime["securityContext"], restricted(1002));
    let agent = container(&spec);
    assert_eq!(agent["securityContext"], restricted(1001));
    assert_eq!(spec["securityContext"]["fsGroup"], 0);
    assert_eq!(spec.get("shareProcessNamespace"), None);

    // One /workspace, each its own /tmp; the runtime's $HOME is its own emptyDir.
    let workspace = json!({"name": "workspace", "mountPath": "/workspace"});
    assert_eq!(mount_of(agent, "/workspace"), Some(&workspace));
    assert_eq!(mount_of(runtime, "/workspace"), Some(&workspace));
    assert_eq!(mount_of(agent, "/tmp").expect("tmp")["name"], "tmp");
    assert_eq!(
        mount_of(runtime, "/tmp").expect("tmp")["name"],
        "runtime-tmp"
    );
    assert_eq!(
        mount_of(runtime, "/home/runtime").expect("home")["name"],
        "runtime-home"
    );
    let volumes = spec["volumes"].as_array().expect("volumes");
    for name in ["runtime-tmp", "runtime-home"] {
        let volume = volumes.iter().find(|v| v["name"] == name).expect(name);
        assert_eq!(volume["emptyDir"], json!({}), "{name}");
    }

    // The skills and their manifest exactly as the harness mounts them, read-only.
    let skills = |c: &Value| -> Vec<Value> {
        c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter(|m| {
                m["mountPath"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/opt/skills/"))
            })
            .cloned()
            .collect()
    };
    assert_eq!(skills(runtime).len(), 4, "three skills and the manifest");
    assert_eq!(skills(runtime), skills(agent));
    assert!(skills(runtime).iter().all(|m| m["readOnly"] == true));

    let env = |c: &Value, name: &str| -> Option<Value> {
        c["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|v| v["name"] == name)
            .map(|v| v["value"].clone())
    };
    for c in [agent, runtime] {
        assert_eq!(env(c, "KONVEYOR_RUNTIME_ACP_PORT"), Some(json!("4001")));
    }
    assert_eq!(env(runtime, "HOME"), Some(json!("/home/runtime")));
    assert_eq!(env(runtime, "KONVEYOR_RULES"), env(agent, "KONVEYOR_RULES"));
    assert_eq!(
        env(runtime, "KONVEYOR_LLM_ENDPOINT"),
        Some(json!("https://llm.example.com/v1"))
    );
}

#[test]
fn the_runtime_holds_none_of_the_harness_credentials() {
    let mut fixture = two_box();
    fixture.run.spec.env = vec![
        env_var("LOG_LEVEL"),
        EnvVar {
            name: "GIT_TOKEN".into(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                    name: "git".into(),
                    key: "token".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
        },
    ];
    fixture.run.spec.env_from = vec![EnvFromSource {
        secret_ref: Some(SecretEnvSource {
            name: "more-creds".into(),
            ..Default::default()
        }),
        ..Default::default()
    }];
    fixture.run.spec.file_mounts = vec![FileMount {
        mount_path: "/home/harness/.git-credentials".into(),
        secret_name: Some("git".into()),
        ..Default::default()
    }];
    let spec = proxied_pod_spec(&fixture);
    let runtime = runtime(&spec);
    let env = names(&runtime["env"], "name");
    for absent in [
        "KONVEYOR_ACP_SECRET_KEY",
        "KONVEYOR_PROMPT",
        "KONVEYOR_INSTRUCTIONS",
        "KONVEYOR_GIT_AUTHOR_NAME",
        "LOG_LEVEL",
        "GIT_TOKEN",
    ] {
        assert!(!env.contains(&absent.to_string()), "{absent} in {env:?}");
    }
    let key = runtime["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|v| v["name"] == "KONVEYOR_LLM_API_KEY")
        .expect("the key variable");
    assert_eq!(key["value"], "konveyor-credential-proxy-placeholder");
    assert_eq!(runtime.get("envFrom"), None);
    assert!(!runtime.to_string().contains("secretKeyRef"), "{runtime:#}");

    // No Secret volume, no params, no run file mount, not the harness's /tmp.
    let volumes = spec["volumes"].as_array().expect("volumes");
    let mounted = names(&runtime["volumeMounts"], "name");
    for name in &mounted {
        let volume = volumes
            .iter()
            .find(|v| v["name"] == *name)
            .expect("a volume");
        assert_eq!(volume.get("secret"), None, "{name}");
    }
    for absent in ["tmp", "file-0", "gateway-credential"] {
        assert!(!mounted.contains(&absent.to_string()), "{absent}");
    }
    assert_eq!(mount_of(runtime, "/run/konveyor/params.json"), None);
    let agent = container(&spec);
    assert!(mount_of(agent, "/home/harness/.git-credentials").is_some());
    assert!(names(&agent["env"], "name").contains(&"GIT_TOKEN".to_string()));
}

#[test]
fn the_runtime_without_the_proxy_gets_the_key_as_the_agent_does_and_exports_traces() {
    let mut fixture = two_box();
    fixture.agent.spec.runtime = Some(AgentRuntime {
        image: Some("ghcr.io/acme/goose:1.52".into()),
        harness_user: 2000,
        runtime_user: 2001,
        group: 3000,
        ..goose()
    });
    let receiver: TraceReceiver = receiver(true);
    let inputs = fixture.inputs().with_trace_receiver(Some(&receiver));
    let spec = serde_json::to_value(build_pod_spec(&inputs)).expect("serializes");
    let runtime = runtime(&spec);
    assert_eq!(runtime["image"], "ghcr.io/acme/goose:1.52");
    assert_eq!(runtime["securityContext"]["runAsUser"], 2001);
    assert_eq!(runtime["securityContext"]["runAsGroup"], 3000);
    assert_eq!(container(&spec)["securityContext"]["runAsUser"], 2000);
    assert_eq!(spec["securityContext"]["fsGroup"], 3000);
    let var = |name: &str| {
        runtime["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
    };
    // Konveyor's shape for the key: the runtime talks to the model, so it has what the
    // harness has (the run's CredentialIsolation condition says so).
    assert_eq!(
        var("KONVEYOR_LLM_API_KEY").expect("key")["valueFrom"],
        json!({"secretKeyRef": {"name": "llm-key", "key": "api-key"}})
    );
    // goose exports the skill loads: the runtime reports with the run's bearer.
    assert_eq!(
        var("KONVEYOR_OTLP_TOKEN").expect("token")["valueFrom"]["secretKeyRef"]["key"],
        "otlp-token"
    );
    assert!(var("OTEL_EXPORTER_OTLP_HEADERS").is_some());
}
