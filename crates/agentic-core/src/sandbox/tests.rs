use agentic_api::{
    AgentRunSpec, AgentSpec, CredentialRef, GatewayModel, GatewaySpec, SkillCard, SkillCardSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use super::*;
use crate::names::label_value;
use crate::params::RunParams;

const JAVA_IMAGE: &str =
    "ghcr.io/acme/java@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const STYLE_IMAGE: &str =
    "ghcr.io/acme/style@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

fn run_named(name: &str) -> AgentRun {
    let mut run = AgentRun::new(
        name,
        AgentRunSpec {
            agent_ref: "migrator".into(),
            instructions: Some("Move the app to Quarkus.".into()),
            ..Default::default()
        },
    );
    run.metadata.namespace = Some("team-a".into());
    run.metadata.uid = Some(RUN_UID.into());
    run
}

/// The UID of the fixture's run, also in [`owner`].
const RUN_UID: &str = "5f0c-uid";

fn agent() -> Agent {
    Agent::new(
        "migrator",
        AgentSpec {
            image: "ghcr.io/acme/harness:1.0".into(),
            prompt: Some("You migrate Java apps.".into()),
            skill_delivery: "native".into(),
            ..Default::default()
        },
    )
}

fn gateway(credential: Option<CredentialRef>) -> Gateway {
    Gateway::new(
        "llm",
        GatewaySpec {
            provider: "openai".into(),
            endpoint: Some("https://llm.example.com/v1".into()),
            credential_ref: credential,
            model: GatewayModel {
                name: "gpt-5".into(),
                context_window: 200_000,
                tier: None,
            },
        },
    )
}

pub(super) fn keyed_credential() -> Option<CredentialRef> {
    Some(CredentialRef {
        secret_name: "llm-key".into(),
        key: Some("api-key".into()),
    })
}

pub(super) fn java() -> MountedSkill {
    MountedSkill {
        name: "java".into(),
        description: "Java migration know-how".into(),
        skill_type: SkillType::Skill,
        skill_card: "java-card".into(),
        source: SkillSource::Image {
            reference: JAVA_IMAGE.into(),
        },
        sub_path: Some("skills/java".into()),
        pull_secrets: vec!["regcred".into()],
        verification: None,
    }
}

fn style() -> MountedSkill {
    MountedSkill {
        name: "style".into(),
        description: "House style".into(),
        skill_type: SkillType::Rule,
        skill_card: "style-card".into(),
        source: SkillSource::Image {
            reference: STYLE_IMAGE.into(),
        },
        sub_path: None,
        pull_secrets: vec!["regcred".into(), "another".into()],
        verification: None,
    }
}

pub(super) fn notes() -> MountedSkill {
    MountedSkill {
        name: "always-test".into(),
        description: "Always run the tests".into(),
        skill_type: SkillType::Rule,
        skill_card: "notes-card".into(),
        source: SkillSource::Inline {
            config_map: "notes-card-skill".into(),
        },
        sub_path: None,
        pull_secrets: vec![],
        verification: None,
    }
}

fn params() -> RunParams {
    RunParams {
        agent: BTreeMap::from([
            ("depth".to_string(), json!(3)),
            ("dry_run".to_string(), json!(false)),
            ("target".to_string(), json!("quarkus")),
        ]),
        prompt: "You migrate Java apps.".into(),
        instructions: "Move the app to Quarkus.".into(),
        ..RunParams::default()
    }
}

fn owner(name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "konveyor.io/v1alpha1".into(),
        kind: "AgentRun".into(),
        name: name.into(),
        uid: RUN_UID.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub(super) struct Fixture {
    pub(super) run: AgentRun,
    pub(super) agent: Agent,
    pub(super) gateway: Gateway,
    pub(super) skills: Vec<MountedSkill>,
    pub(super) fetcher: Option<SkillFetcher>,
}

impl Fixture {
    pub(super) fn new() -> Self {
        Fixture {
            run: run_named("fix-123"),
            agent: agent(),
            gateway: gateway(keyed_credential()),
            // Deliberately unsorted: the inputs sort them.
            skills: vec![style(), java(), notes()],
            fetcher: None,
        }
    }

    /// The inputs of the fixture's run, delivered natively with [`params`], or why there
    /// are none.
    fn try_inputs(&self) -> Result<SandboxInputs<'_>, Error> {
        self.try_inputs_with(SkillDeliveryMode::Native, params())
    }

    fn try_inputs_with(
        &self,
        delivery: SkillDeliveryMode,
        params: RunParams,
    ) -> Result<SandboxInputs<'_>, Error> {
        SandboxInputs::new(
            &self.run,
            &self.agent,
            &self.gateway,
            self.skills.clone(),
            delivery,
            params,
            self.fetcher.as_ref(),
        )
    }

    pub(super) fn inputs(&self) -> SandboxInputs<'_> {
        self.try_inputs().expect("valid inputs")
    }

    pub(super) fn pod_spec(&self) -> Value {
        serde_json::to_value(build_pod_spec(&self.inputs())).expect("serializes")
    }
}

pub(super) fn container(spec: &Value) -> &Value {
    &spec["containers"][0]
}

#[test]
fn pod_spec_top_level() {
    let spec = Fixture::new().pod_spec();
    let keys: Vec<&String> = spec.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "automountServiceAccountToken",
            "containers",
            "enableServiceLinks",
            "imagePullSecrets",
            "restartPolicy",
            "securityContext",
            "volumes"
        ]
    );
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["enableServiceLinks"], false);
    assert_eq!(
        spec["imagePullSecrets"],
        json!([{"name": "another"}, {"name": "regcred"}]),
        "sorted, without repeats"
    );
    assert_eq!(
        spec["securityContext"],
        json!({"seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(spec["containers"].as_array().map(Vec::len), Some(1));
}

#[test]
fn no_pull_secrets_means_no_field() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![notes()];
    assert!(fixture.pod_spec().get("imagePullSecrets").is_none());
}

#[test]
fn agent_container_basics() {
    let spec = Fixture::new().pod_spec();
    let agent = container(&spec);
    assert_eq!(agent["name"], "agent");
    assert_eq!(agent["image"], "ghcr.io/acme/harness:1.0");
    assert_eq!(
        agent["ports"],
        json!([{"name": "acp", "containerPort": 4000, "protocol": "TCP"}])
    );
    assert_eq!(
        agent["readinessProbe"],
        json!({"tcpSocket": {"port": "acp"}, "periodSeconds": 5})
    );
    assert_eq!(
        agent["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
    );
    assert!(
        agent["securityContext"].get("runAsNonRoot").is_none(),
        "harness images may run as root"
    );
    assert_eq!(agent["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert!(
        agent.get("envFrom").is_none(),
        "keyed credential: no envFrom"
    );
}

#[test]
fn volumes_one_per_skill_sorted_by_name() {
    let spec = Fixture::new().pod_spec();
    assert_eq!(
        spec["volumes"],
        json!([
            {"name": "workspace", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "konveyor-run", "downwardAPI": {
                "items": [
                    {"path": "konveyor-skills.json", "fieldRef": {
                        "fieldPath": "metadata.annotations['konveyor.io/skills-manifest']"}},
                    {"path": "params.json", "fieldRef": {
                        "fieldPath": "metadata.annotations['konveyor.io/params']"}}
                ]
            }},
            {"name": "skill-0", "configMap": {
                "name": "notes-card-skill",
                "items": [{"key": "SKILL.md", "path": "SKILL.md"}]
            }},
            {"name": "skill-1", "image": {"reference": JAVA_IMAGE, "pullPolicy": "IfNotPresent"}},
            {"name": "skill-2", "image": {"reference": STYLE_IMAGE, "pullPolicy": "IfNotPresent"}},
        ])
    );
}

#[test]
fn mounts_are_read_only_except_scratch() {
    let spec = Fixture::new().pod_spec();
    assert_eq!(
        container(&spec)["volumeMounts"],
        json!([
            {"name": "workspace", "mountPath": "/workspace"},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "konveyor-run", "mountPath": "/opt/skills/.konveyor-skills.json",
             "readOnly": true, "subPath": "konveyor-skills.json"},
            {"name": "konveyor-run", "mountPath": "/run/konveyor/params.json",
             "readOnly": true, "subPath": "params.json"},
            {"name": "skill-0", "mountPath": "/opt/skills/always-test", "readOnly": true},
            {"name": "skill-1", "mountPath": "/opt/skills/java", "readOnly": true,
             "subPath": "skills/java"},
            {"name": "skill-2", "mountPath": "/opt/skills/style", "readOnly": true},
        ])
    );
}

/// A skill of `reference` at `sub_path`, as a collection's SkillCard pins it.
fn image_skill(name: &str, reference: &str, sub_path: Option<&str>) -> MountedSkill {
    MountedSkill {
        name: name.into(),
        description: format!("{name} know-how"),
        skill_type: SkillType::Skill,
        skill_card: format!("{name}-card"),
        source: SkillSource::Image {
            reference: reference.into(),
        },
        sub_path: sub_path.map(str::to_string),
        pull_secrets: vec![],
        verification: None,
    }
}

#[test]
fn skills_of_one_image_share_its_volume_through_sub_paths() {
    let mut fixture = Fixture::new();
    fixture.fetcher = Some(fetcher());
    // Sorted: always-test 0, java 1, kotlin 2, style 3, upgrade 4 (git), whole-java 5.
    fixture.skills = vec![
        image_skill("whole-java", JAVA_IMAGE, None),
        style(),
        git_skill(None),
        image_skill("kotlin", JAVA_IMAGE, Some("skills/kotlin")),
        java(),
        notes(),
    ];
    let spec = fixture.pod_spec();
    let volumes: Vec<&Value> = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v["name"].as_str().is_some_and(|n| n.starts_with("skill-")))
        .collect();
    assert_eq!(
        volumes,
        [
            &json!({"name": "skill-0", "configMap": {
                "name": "notes-card-skill",
                "items": [{"key": "SKILL.md", "path": "SKILL.md"}]
            }}),
            &json!({"name": "skill-1", "image": {"reference": JAVA_IMAGE, "pullPolicy": "IfNotPresent"}}),
            &json!({"name": "skill-3", "image": {"reference": STYLE_IMAGE, "pullPolicy": "IfNotPresent"}}),
            &json!({"name": "skill-4-tmp", "emptyDir": {}}),
            &json!({"name": "skill-4", "emptyDir": {}}),
        ],
        "one volume per image, named after its first skill"
    );
    let mounts: Vec<&Value> = container(&spec)["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .filter(|m| m["name"].as_str().is_some_and(|n| n.starts_with("skill-")))
        .collect();
    assert_eq!(
        mounts,
        [
            &json!({"name": "skill-0", "mountPath": "/opt/skills/always-test", "readOnly": true}),
            &json!({"name": "skill-1", "mountPath": "/opt/skills/java", "readOnly": true,
                    "subPath": "skills/java"}),
            &json!({"name": "skill-1", "mountPath": "/opt/skills/kotlin", "readOnly": true,
                    "subPath": "skills/kotlin"}),
            &json!({"name": "skill-3", "mountPath": "/opt/skills/style", "readOnly": true}),
            &json!({"name": "skill-4", "mountPath": "/opt/skills/upgrade", "readOnly": true}),
            &json!({"name": "skill-1", "mountPath": "/opt/skills/whole-java", "readOnly": true}),
        ]
    );
    // The git skill's init container still fills the volume numbered by its skill.
    assert_eq!(spec["initContainers"][0]["name"], "skill-fetch-4");
    assert_eq!(
        spec["initContainers"][0]["volumeMounts"][0],
        json!({"name": "skill-4", "mountPath": "/skill"})
    );
}

#[test]
fn a_thirty_skill_collection_is_one_image_volume() {
    let mut fixture = Fixture::new();
    fixture.skills = (0..30)
        .map(|i| {
            let name = format!("skill-{i:02}");
            image_skill(&name, JAVA_IMAGE, Some(&name))
        })
        .collect();
    let spec = fixture.pod_spec();
    let images: Vec<&Value> = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v.get("image").is_some())
        .collect();
    assert_eq!(
        images,
        [
            &json!({"name": "skill-0", "image": {"reference": JAVA_IMAGE, "pullPolicy": "IfNotPresent"}})
        ]
    );
    let skill_mounts: Vec<(&str, &str)> = container(&spec)["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .filter(|m| m["name"] == "skill-0")
        .inspect(|m| assert_eq!(m["readOnly"], true, "{m}"))
        .map(|m| {
            (
                m["mountPath"].as_str().unwrap_or_default(),
                m["subPath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let names: Vec<String> = (0..30).map(|i| format!("skill-{i:02}")).collect();
    let paths: Vec<String> = names.iter().map(|n| format!("/opt/skills/{n}")).collect();
    let expected: Vec<(&str, &str)> = paths
        .iter()
        .zip(&names)
        .map(|(path, name)| (path.as_str(), name.as_str()))
        .collect();
    assert_eq!(skill_mounts, expected);
}

#[test]
fn file_mounts_are_read_only_volumes_after_the_skills() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![java()];
    fixture.run.spec.file_mounts = vec![
        agentic_api::FileMount {
            mount_path: "/etc/app//".into(),
            secret_name: Some("app-creds".into()),
            items: vec![k8s_openapi::api::core::v1::KeyToPath {
                key: "token".into(),
                path: "token.txt".into(),
                mode: None,
            }],
            ..Default::default()
        },
        agentic_api::FileMount {
            mount_path: "/home/agent/.tool.yaml".into(),
            config_map_name: Some("tool".into()),
            sub_path: Some("tool.yaml".into()),
            ..Default::default()
        },
    ];
    let spec = fixture.pod_spec();
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert_eq!(
        &volumes[4..],
        [
            json!({"name": "file-0", "secret": {"secretName": "app-creds",
                   "items": [{"key": "token", "path": "token.txt"}]}}),
            json!({"name": "file-1", "configMap": {"name": "tool"}}),
        ]
    );
    let mounts = container(&spec)["volumeMounts"]
        .as_array()
        .expect("mounts")
        .clone();
    assert_eq!(
        &mounts[5..],
        [
            json!({"name": "file-0", "mountPath": "/etc/app", "readOnly": true}),
            json!({"name": "file-1", "mountPath": "/home/agent/.tool.yaml", "readOnly": true,
                   "subPath": "tool.yaml"}),
        ]
    );

    fixture.run.spec.file_mounts[1].mount_path = "/opt/skills/java/extra".into();
    assert_eq!(
        inputs_error(&fixture).reason().as_str(),
        "InvalidFileMounts"
    );
}

#[test]
fn env_with_a_keyed_credential() {
    let spec = Fixture::new().pod_spec();
    assert_eq!(
        container(&spec)["env"],
        json!([
            {"name": "KONVEYOR_SKILLS_DIR", "value": "/opt/skills"},
            {"name": "HARNESS_SKILL_MODE", "value": "native"},
            {"name": "KONVEYOR_RULES", "value": "always-test,style"},
            {"name": "KONVEYOR_PROMPT", "value": "You migrate Java apps."},
            {"name": "KONVEYOR_INSTRUCTIONS", "value": "Move the app to Quarkus."},
            {"name": "KONVEYOR_LLM_PROVIDER", "value": "openai"},
            {"name": "KONVEYOR_LLM_ENDPOINT", "value": "https://llm.example.com/v1"},
            {"name": "KONVEYOR_LLM_MODEL", "value": "gpt-5"},
            {"name": "KONVEYOR_LLM_API_KEY",
             "valueFrom": {"secretKeyRef": {"name": "llm-key", "key": "api-key"}}},
            {"name": "KONVEYOR_ACP_SECRET_KEY",
             "valueFrom": {"secretKeyRef": {"name": "fix-123-acp-key", "key": "secret-key"}}},
            {"name": "KONVEYOR_GIT_AUTHOR_NAME", "value": ""},
            {"name": "KONVEYOR_GIT_AUTHOR_EMAIL", "value": ""},
        ])
    );
}

#[test]
fn env_without_rules_prompt_instructions_or_endpoint_keeps_the_names() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![java()];
    fixture.agent.spec.prompt = None;
    fixture.run.spec.instructions = None;
    fixture.gateway.spec.endpoint = None;
    fixture.gateway.spec.credential_ref = None;
    let inputs = fixture
        .try_inputs_with(SkillDeliveryMode::Inject, RunParams::default())
        .expect("valid");
    let spec = serde_json::to_value(build_pod_spec(&inputs)).expect("serializes");
    let env = &container(&spec)["env"];
    let value_of = |name: &str| {
        env.as_array()
            .and_then(|vars| vars.iter().find(|v| v["name"] == name))
            .map(|v| v["value"].clone())
    };
    assert_eq!(
        value_of("KONVEYOR_RULES"),
        Some(json!("")),
        "present and empty"
    );
    assert_eq!(value_of("KONVEYOR_PROMPT"), Some(json!("")));
    assert_eq!(value_of("KONVEYOR_INSTRUCTIONS"), Some(json!("")));
    assert_eq!(value_of("KONVEYOR_LLM_ENDPOINT"), Some(json!("")));
    assert_eq!(value_of("HARNESS_SKILL_MODE"), Some(json!("inject")));
    assert_eq!(
        value_of("KONVEYOR_LLM_API_KEY"),
        None,
        "no credential, no key"
    );
    assert!(container(&spec).get("envFrom").is_none());
}

#[test]
fn whole_secret_credential_comes_through_env_from() {
    let mut fixture = Fixture::new();
    fixture.gateway.spec.credential_ref = Some(CredentialRef {
        secret_name: "llm-env".into(),
        key: None,
    });
    let spec = fixture.pod_spec();
    let agent = container(&spec);
    assert_eq!(
        agent["envFrom"],
        json!([{"secretRef": {"name": "llm-env"}}])
    );
    let names: Vec<&str> = agent["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(!names.contains(&"KONVEYOR_LLM_API_KEY"));
}

#[test]
fn run_env_comes_after_the_operators() {
    let mut fixture = Fixture::new();
    fixture.gateway.spec.credential_ref = Some(CredentialRef {
        secret_name: "llm-env".into(),
        key: None,
    });
    fixture.run.spec.env = vec![
        EnvVar {
            name: "LOG_LEVEL".into(),
            value: Some("debug".into()),
            value_from: None,
        },
        EnvVar {
            name: "FROM_CM".into(),
            value: None,
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: "settings".into(),
                    key: "x".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
        },
    ];
    fixture.run.spec.env_from = vec![EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource {
            name: "extra".into(),
            optional: Some(true),
        }),
        prefix: Some("EXTRA_".into()),
        ..Default::default()
    }];
    let spec = fixture.pod_spec();
    let agent = container(&spec);
    let names: Vec<&str> = agent["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names.len(), 13);
    assert_eq!(names[0], "KONVEYOR_SKILLS_DIR");
    assert_eq!(names[8], "KONVEYOR_ACP_SECRET_KEY");
    assert_eq!(names[10], "KONVEYOR_GIT_AUTHOR_EMAIL");
    assert_eq!(&names[11..], ["LOG_LEVEL", "FROM_CM"]);
    assert_eq!(
        agent["env"][12]["valueFrom"],
        json!({"configMapKeyRef": {"name": "settings", "key": "x"}})
    );
    assert_eq!(
        agent["envFrom"],
        json!([
            {"secretRef": {"name": "llm-env"}},
            {"configMapRef": {"name": "extra", "optional": true}, "prefix": "EXTRA_"}
        ])
    );
}

#[test]
fn the_git_author_comes_from_the_run_else_the_agent() {
    let mut fixture = Fixture::new();
    fixture.agent.spec.git_config = Some(agentic_api::GitConfig {
        user_name: Some("Agent Bot".into()),
        user_email: Some("agent@example.com".into()),
    });
    let value_of = |fixture: &Fixture, name: &str| {
        container(&fixture.pod_spec())["env"]
            .as_array()
            .and_then(|vars| vars.iter().find(|v| v["name"] == name))
            .map(|v| v["value"].clone())
    };
    assert_eq!(
        value_of(&fixture, "KONVEYOR_GIT_AUTHOR_NAME"),
        Some(json!("Agent Bot"))
    );
    fixture.run.spec.git_config = Some(agentic_api::GitConfig {
        user_name: Some("Run Bot".into()),
        user_email: Some("run@example.com".into()),
    });
    assert_eq!(
        value_of(&fixture, "KONVEYOR_GIT_AUTHOR_NAME"),
        Some(json!("Run Bot"))
    );
    assert_eq!(
        value_of(&fixture, "KONVEYOR_GIT_AUTHOR_EMAIL"),
        Some(json!("run@example.com"))
    );
    fixture.run.spec.git_config = Some(agentic_api::GitConfig {
        user_name: Some("Run <Bot>".into()),
        user_email: Some("run@example.com".into()),
    });
    assert_eq!(inputs_error(&fixture).reason().as_str(), "InvalidGitConfig");
}

pub(super) fn env_var(name: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some("x".into()),
        value_from: None,
    }
}

fn inputs_error(fixture: &Fixture) -> Error {
    fixture.try_inputs().expect_err("invalid inputs")
}

#[test]
fn run_env_may_not_override_the_contract() {
    let mut fixture = Fixture::new();
    fixture.run.spec.env = vec![
        env_var("OK"),
        env_var("KONVEYOR_PROMPT"),
        env_var("HARNESS_SKILL_MODE"),
        env_var("KONVEYOR_FUTURE"),
    ];
    let error = inputs_error(&fixture);
    assert_eq!(
        error,
        Error::ReservedEnvName {
            names: vec![
                "KONVEYOR_PROMPT".into(),
                "HARNESS_SKILL_MODE".into(),
                "KONVEYOR_FUTURE".into()
            ]
        }
    );
    assert_eq!(error.reason().as_str(), "ReservedEnvName");
}

#[test]
fn the_workflow_variables_pass_through_as_written() {
    let mut fixture = Fixture::new();
    fixture.run.spec.env = vec![
        env_var("KONVEYOR_WORKFLOW_GUIDE"),
        env_var("KONVEYOR_WORKFLOW_STAGE"),
        env_var("KONVEYOR_WORKFLOW_STAGE_COUNT"),
    ];
    let spec = fixture.pod_spec();
    let names: Vec<&str> = container(&spec)["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(
        &names[names.len() - 3..],
        [
            "KONVEYOR_WORKFLOW_GUIDE",
            "KONVEYOR_WORKFLOW_STAGE",
            "KONVEYOR_WORKFLOW_STAGE_COUNT"
        ]
    );
    // Only those three: a look-alike is still reserved, and repeats are still refused.
    fixture.run.spec.env = vec![env_var("KONVEYOR_WORKFLOW_STAGES")];
    assert_eq!(inputs_error(&fixture).reason().as_str(), "ReservedEnvName");
    fixture.run.spec.env = vec![
        env_var("KONVEYOR_WORKFLOW_STAGE"),
        env_var("KONVEYOR_WORKFLOW_STAGE"),
    ];
    assert_eq!(inputs_error(&fixture).reason().as_str(), "DuplicateEnvName");
}

#[test]
fn run_env_may_not_repeat_a_name() {
    let mut fixture = Fixture::new();
    fixture.run.spec.env = vec![env_var("A"), env_var("B"), env_var("A"), env_var("A")];
    let error = inputs_error(&fixture);
    assert_eq!(
        error,
        Error::DuplicateEnvName {
            names: vec!["A".into()]
        }
    );
    assert_eq!(error.to_string(), r#"spec.env sets "A" more than once"#);
}

#[test]
fn skill_names_must_be_safe_directories() {
    for bad in [
        "",
        "../etc",
        "a/b",
        ".hidden",
        "Upper",
        "-lead",
        "trail-",
        &"a".repeat(65),
    ] {
        let mut fixture = Fixture::new();
        let mut skill = java();
        skill.name = bad.to_string();
        fixture.skills = vec![skill];
        assert_eq!(
            inputs_error(&fixture),
            Error::InvalidSkillName {
                name: bad.to_string(),
                skill_card: "java-card".into()
            }
        );
    }
    let mut fixture = Fixture::new();
    let mut skill = java();
    skill.name = "a".repeat(64);
    fixture.skills = vec![skill];
    assert!(fixture.try_inputs().is_ok());
}

#[test]
fn two_skills_of_one_name_are_refused_naming_both_cards() {
    let mut fixture = Fixture::new();
    let mut other = notes();
    other.name = "java".into();
    fixture.skills = vec![java(), other];
    assert_eq!(
        inputs_error(&fixture),
        Error::DuplicateSkillName {
            skill: "java".into(),
            first_card: "java-card".into(),
            first_collection: None,
            second_card: "notes-card".into(),
            second_collection: None,
        }
    );
}

#[test]
fn run_without_namespace_is_refused() {
    let mut fixture = Fixture::new();
    fixture.run.metadata.namespace = None;
    assert_eq!(
        inputs_error(&fixture),
        Error::MissingMetadata {
            kind: "AgentRun",
            field: "metadata.namespace"
        }
    );
}

/// The pod's annotations, which its `downwardAPI` volume makes files.
fn pod_annotations(inputs: &SandboxInputs) -> BTreeMap<String, String> {
    build_pod(inputs, owner("fix-123"))
        .metadata
        .annotations
        .expect("annotations")
}

#[test]
fn the_pod_carries_the_manifest_and_params_as_annotations() {
    let fixture = Fixture::new();
    let annotations = pod_annotations(&fixture.inputs());
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        [
            "konveyor.io/params",
            "konveyor.io/pinned-skills",
            "konveyor.io/skills-manifest",
            "opentelemetry.io/trace-context"
        ]
    );

    let manifest = &annotations["konveyor.io/skills-manifest"];
    assert!(
        manifest.ends_with("}\n"),
        "pretty JSON with a final newline"
    );
    assert!(
        manifest.contains("\n  \"skills\": ["),
        "indented: {manifest}"
    );
    let manifest: Value = serde_json::from_str(manifest).expect("JSON");
    assert_eq!(
        manifest,
        json!({
            "skills": [
                {"name": "always-test", "description": "Always run the tests", "type": "rule",
                 "source": "inline:notes-card", "sourcePath": "/opt/skills/always-test"},
                {"name": "java", "description": "Java migration know-how", "type": "skill",
                 "source": JAVA_IMAGE, "sourcePath": "/opt/skills/java"},
                {"name": "style", "description": "House style", "type": "rule",
                 "source": STYLE_IMAGE, "sourcePath": "/opt/skills/style"},
            ],
            "rules": ["always-test", "style"]
        })
    );

    assert_eq!(
        annotations["konveyor.io/params"],
        "{\n  \"agent\": {\n    \"depth\": 3,\n    \"dry_run\": false,\n    \"target\": \"quarkus\"\n  },\n  \"execution\": {\n    \"mode\": \"auto\"\n  },\n  \"workflow\": {}\n}\n"
    );
    let pinned: Vec<PinnedSkill> =
        serde_json::from_str(&annotations["konveyor.io/pinned-skills"]).expect("JSON");
    assert_eq!(pinned, fixture.inputs().pinned_skills());
}

#[test]
fn empty_skills_and_params_are_still_files() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![];
    let inputs = fixture
        .try_inputs_with(SkillDeliveryMode::Native, RunParams::default())
        .expect("valid");
    let annotations = pod_annotations(&inputs);
    let params: Value = serde_json::from_str(&annotations[PARAMS_ANNOTATION]).expect("JSON");
    assert_eq!(
        params,
        json!({"workflow": {}, "agent": {}, "execution": {"mode": "auto"}})
    );
    let manifest: Value =
        serde_json::from_str(&annotations[SKILLS_MANIFEST_ANNOTATION]).expect("JSON");
    assert_eq!(manifest, json!({"skills": [], "rules": []}));
}

/// `count` image skills of one image, each with a description of `description_len`.
fn many_skills(count: usize, description_len: usize) -> Vec<MountedSkill> {
    (0..count)
        .map(|i| MountedSkill {
            description: "d".repeat(description_len),
            ..image_skill(&format!("skill-{i:03}"), JAVA_IMAGE, Some("skills/x"))
        })
        .collect()
}

#[test]
fn annotations_over_the_limit_refuse_the_run_with_size_and_limit() {
    let mut fixture = Fixture::new();
    // 256 skills with 1024-character descriptions: the manifest alone is over 256 KiB.
    fixture.skills = many_skills(256, 1024);
    let error = inputs_error(&fixture);
    assert_eq!(error.reason().as_str(), "AnnotationsTooLarge");
    let Error::AnnotationsTooLarge { run, bytes, limit } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(run, "fix-123");
    assert_eq!(*limit, 256 * 1024 - 4096);
    assert!(*bytes > 256 * 1024, "{bytes}");
    let message = error.to_string();
    for part in [
        "AgentRun \"fix-123\"",
        &format!("{bytes} bytes"),
        "over the 258048 bytes allowed",
        "262144 bytes for all of an object's annotations",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
}

#[test]
fn annotations_just_under_the_limit_are_accepted_and_counted_as_built() {
    let mut fixture = Fixture::new();
    // Grow the descriptions until the run is refused; the last size accepted must be what
    // the pod's annotations really take, and within the limit.
    let mut description_len = 1;
    let mut accepted = 0;
    loop {
        fixture.skills = many_skills(100, description_len);
        let result = fixture.try_inputs();
        match result {
            Ok(inputs) => {
                accepted = pod_annotations(&inputs)
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum();
                description_len += 64;
            }
            Err(Error::AnnotationsTooLarge { bytes, limit, .. }) => {
                assert!(bytes > limit);
                assert!(
                    accepted <= limit && accepted > limit - 100 * 64 * 2,
                    "{accepted}"
                );
                break;
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[test]
fn acp_secret_is_immutable_and_keyed() {
    let fixture = Fixture::new();
    let secret = build_acp_secret(
        &fixture.inputs(),
        "s3cr3t".into(),
        "t0k3n",
        owner("fix-123"),
    );
    assert_eq!(secret.metadata.name.as_deref(), Some("fix-123-acp-key"));
    assert_eq!(secret.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        secret.metadata.owner_references,
        Some(vec![owner("fix-123")])
    );
    assert_eq!(secret.metadata.labels, Some(fixture.inputs().labels()));
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    assert_eq!(secret.immutable, Some(true));
    let data = secret.data.expect("data");
    assert_eq!(data.len(), 2);
    assert_eq!(data["secret-key"].0, b"s3cr3t");
    // The receiver finds the run from its bearer, then checks the whole bearer.
    assert_eq!(data["otlp-token"].0, b"team-a/fix-123/t0k3n");
    assert!(secret.string_data.is_none());
}

#[test]
fn inline_skill_config_map() {
    let mut card = SkillCard::new(
        "notes-card",
        SkillCardSpec {
            inline: Some("---\nname: always-test\ndescription: d\n---\nBody\n".into()),
            ..Default::default()
        },
    );
    card.metadata.namespace = Some("team-a".into());
    let card_owner = OwnerReference {
        kind: "SkillCard".into(),
        ..owner("notes-card")
    };
    let config_map = build_inline_skill_config_map(&card, card_owner.clone()).expect("inline");
    assert_eq!(
        config_map.metadata.name.as_deref(),
        Some("notes-card-skill")
    );
    assert_eq!(config_map.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        config_map.metadata.owner_references,
        Some(vec![card_owner.clone()])
    );
    assert_eq!(
        config_map.metadata.labels,
        Some(BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".into(),
                "agentic-operator".into()
            ),
            ("konveyor.io/skillcard".into(), "notes-card".into()),
        ]))
    );
    assert_eq!(
        config_map.data,
        Some(BTreeMap::from([(
            "SKILL.md".into(),
            "---\nname: always-test\ndescription: d\n---\nBody\n".into()
        )]))
    );

    card.spec.inline = None;
    card.spec.image = Some("ghcr.io/acme/notes:1".into());
    let error = build_inline_skill_config_map(&card, card_owner).expect_err("not inline");
    assert_eq!(error.reason().as_str(), "MissingInlineSkill");
    assert_eq!(
        error.to_string(),
        r#"SkillCard "notes-card" has no spec.inline"#
    );
}

#[test]
fn pod_backend() {
    let fixture = Fixture::new();
    let inputs = fixture.inputs();
    let pod = build_pod(&inputs, owner("fix-123"));
    assert_eq!(pod.metadata.name.as_deref(), Some("fix-123"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(pod.metadata.owner_references, Some(vec![owner("fix-123")]));
    assert_eq!(pod.metadata.labels, Some(inputs.labels()));
    // The manifest, the params, the pinned skills and the trace context.
    assert_eq!(pod.metadata.annotations.map(|a| a.len()), Some(4));
    assert_eq!(pod.spec, Some(build_pod_spec(&inputs)));
}

#[test]
fn pod_backend_service_reaches_the_acp_port() {
    let fixture = Fixture::new();
    let inputs = fixture.inputs();
    let service = build_acp_service(&inputs, owner("fix-123"));
    let pod = build_pod(&inputs, owner("fix-123"));
    assert_eq!(
        service.metadata,
        ObjectMeta {
            annotations: None,
            ..pod.metadata.clone()
        },
        "named, labelled and owned as the pod"
    );
    assert_eq!(
        serde_json::to_value(service.spec).expect("serializes"),
        json!({
            "clusterIP": "None",
            "selector": {
                "app.kubernetes.io/managed-by": "agentic-operator",
                "konveyor.io/agentrun": "fix-123"
            },
            "ports": [{"name": "acp", "port": 4000, "targetPort": 4000, "protocol": "TCP"}]
        })
    );
    // The selector picks the pod, and the target is the port the agent container names.
    let selector = inputs.labels();
    let pod_labels = pod.metadata.labels.expect("labels");
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    let spec = serde_json::to_value(build_pod_spec(&inputs)).expect("serializes");
    assert_eq!(
        container(&spec)["ports"],
        json!([{"name": "acp", "containerPort": 4000, "protocol": "TCP"}])
    );
}

#[test]
fn sandbox_backend() {
    let fixture = Fixture::new();
    let inputs = fixture.inputs();
    let sandbox = build_sandbox(&inputs, owner("fix-123")).expect("serializes");
    let pod_spec: Value = serde_json::to_value(build_pod_spec(&inputs)).expect("serializes");
    let pod_annotations = pod_annotations(&inputs);
    assert_eq!(
        sandbox,
        json!({
            "apiVersion": "agents.x-k8s.io/v1beta1",
            "kind": "Sandbox",
            "metadata": {
                "name": "fix-123",
                "namespace": "team-a",
                "labels": {
                    "app.kubernetes.io/managed-by": "agentic-operator",
                    "konveyor.io/agentrun": "fix-123"
                },
                "ownerReferences": [{
                    "apiVersion": "konveyor.io/v1alpha1",
                    "kind": "AgentRun",
                    "name": "fix-123",
                    "uid": "5f0c-uid",
                    "controller": true,
                    "blockOwnerDeletion": true
                }],
                "annotations": {
                    "konveyor.io/pinned-skills": pod_annotations["konveyor.io/pinned-skills"],
                    "opentelemetry.io/trace-context":
                        pod_annotations["opentelemetry.io/trace-context"]
                }
            },
            "spec": {
                "podTemplate": {
                    "metadata": {
                        "labels": {
                            "app.kubernetes.io/managed-by": "agentic-operator",
                            "konveyor.io/agentrun": "fix-123"
                        },
                        "annotations": {
                            "konveyor.io/params": pod_annotations["konveyor.io/params"],
                            "konveyor.io/skills-manifest":
                                pod_annotations["konveyor.io/skills-manifest"]
                        }
                    },
                    "spec": pod_spec
                },
                "service": true
            }
        })
    );
    // Round-trips into the PodSpec type: nothing was lost in the JSON.
    let back: PodSpec =
        serde_json::from_value(sandbox["spec"]["podTemplate"]["spec"].clone()).expect("PodSpec");
    assert_eq!(back, build_pod_spec(&inputs));
}

#[test]
fn awkward_run_names_give_valid_object_names() {
    let mut fixture = Fixture::new();
    let long = format!("{}.{}", "release-2024".repeat(10), "z".repeat(100));
    fixture.run = run_named(&long);
    let inputs = fixture.inputs();
    let sandbox = inputs.sandbox_name().to_string();
    assert!(crate::names::is_dns1035_label(&sandbox), "{sandbox}");
    assert_eq!(sandbox, sandbox_name(&long));

    let pod = build_pod(&inputs, owner(&long));
    assert_eq!(pod.metadata.name.as_deref(), Some(sandbox.as_str()));
    let labels = pod.metadata.labels.expect("labels");
    assert_eq!(labels[RUN_LABEL], label_value(&long));
    assert!(labels[RUN_LABEL].len() <= 63);

    let spec = serde_json::to_value(build_pod_spec(&inputs)).expect("serializes");
    assert_eq!(
        container(&spec)["env"][9]["valueFrom"]["secretKeyRef"]["name"],
        format!("{sandbox}-acp-key")
    );
}

#[test]
fn builds_are_deterministic() {
    let fixture = Fixture::new();
    let first = build_sandbox(&fixture.inputs(), owner("fix-123")).expect("serializes");
    let second = build_sandbox(&fixture.inputs(), owner("fix-123")).expect("serializes");
    assert_eq!(first.to_string(), second.to_string());
    let mut reversed = Fixture::new();
    reversed.skills.reverse();
    assert_eq!(
        build_pod(&fixture.inputs(), owner("fix-123")),
        build_pod(&reversed.inputs(), owner("fix-123")),
        "skill order in the input does not matter"
    );
}

#[test]
fn pinned_skills_record_images_and_config_maps() {
    let fixture = Fixture::new();
    assert_eq!(
        fixture.inputs().pinned_skills(),
        vec![
            PinnedSkill {
                name: "always-test".into(),
                image: "configmap:notes-card-skill".into(),
                skill_type: SkillType::Rule,
                verification: None,
                ..PinnedSkill::default()
            },
            PinnedSkill {
                name: "java".into(),
                image: JAVA_IMAGE.into(),
                skill_type: SkillType::Skill,
                verification: None,
                ..PinnedSkill::default()
            },
            PinnedSkill {
                name: "style".into(),
                image: STYLE_IMAGE.into(),
                skill_type: SkillType::Rule,
                verification: None,
                ..PinnedSkill::default()
            },
        ]
    );
    assert_eq!(fixture.inputs().rules(), ["always-test", "style"]);
}

const GIT_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn git_skill(secret: Option<&str>) -> MountedSkill {
    MountedSkill {
        name: "upgrade".into(),
        description: "Upgrade guide from git".into(),
        skill_type: SkillType::Skill,
        skill_card: "upgrade-card".into(),
        source: SkillSource::Git {
            url: "https://git.example.com/acme/skills.git".into(),
            commit: GIT_COMMIT.into(),
            sub_path: Some("skills/upgrade".into()),
            secret: secret.map(str::to_string),
        },
        sub_path: None,
        pull_secrets: vec![],
        verification: None,
    }
}

fn fetcher() -> SkillFetcher {
    SkillFetcher {
        image: "ghcr.io/acme/agentic-operator:0.9".into(),
        insecure_git_hosts: vec!["git.internal:8080".into()],
    }
}

#[test]
fn a_git_skill_is_fetched_by_an_init_container_into_a_read_only_empty_dir() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![notes(), git_skill(Some("git-creds"))];
    fixture.fetcher = Some(fetcher());
    let spec = fixture.pod_spec();

    // Sorted: always-test is skill-0, upgrade skill-1.
    let init = &spec["initContainers"];
    assert_eq!(init.as_array().map(Vec::len), Some(1), "{init}");
    let fetch = &init[0];
    assert_eq!(fetch["name"], "skill-fetch-1");
    assert_eq!(fetch["image"], "ghcr.io/acme/agentic-operator:0.9");
    assert_eq!(
        fetch["args"],
        json!([
            "skill",
            "fetch",
            "--url=https://git.example.com/acme/skills.git",
            format!("--commit={GIT_COMMIT}"),
            "--sub-path=skills/upgrade",
            "--insecure-git-host=git.internal:8080",
            "--credentials-dir=/run/konveyor/git-credentials",
            "/skill"
        ])
    );
    assert_eq!(
        fetch["volumeMounts"],
        json!([
            {"name": "skill-1", "mountPath": "/skill"},
            {"name": "skill-1-tmp", "mountPath": "/tmp"},
            {"name": "skill-1-credentials", "mountPath": "/run/konveyor/git-credentials", "readOnly": true}
        ])
    );
    assert_eq!(fetch["env"], json!([{"name": "TMPDIR", "value": "/tmp"}]));
    assert_eq!(
        fetch["securityContext"],
        json!({
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}
        })
    );

    let volumes = spec["volumes"].as_array().expect("volumes");
    let volume = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}: {volumes:?}"))
    };
    assert_eq!(
        volume("skill-1"),
        &json!({"name": "skill-1", "emptyDir": {}})
    );
    assert_eq!(
        volume("skill-1-tmp"),
        &json!({"name": "skill-1-tmp", "emptyDir": {}})
    );
    assert_eq!(
        volume("skill-1-credentials"),
        &json!({"name": "skill-1-credentials", "secret": {
            "secretName": "git-creds",
            "items": [
                {"key": "username", "path": "username"},
                {"key": "password", "path": "password"}
            ]
        }})
    );

    // The agent sees the fetched directory read-only, and nothing of the Secret.
    let agent = container(&spec);
    let mounts = agent["volumeMounts"].as_array().expect("mounts");
    assert!(
        mounts.contains(
            &json!({"name": "skill-1", "mountPath": "/opt/skills/upgrade", "readOnly": true})
        ),
        "{mounts:?}"
    );
    assert!(
        mounts
            .iter()
            .all(|m| m["name"] != "skill-1-credentials" && m["name"] != "skill-1-tmp"),
        "{mounts:?}"
    );
    let agent_text = agent.to_string();
    assert!(!agent_text.contains("git-creds"), "{agent_text}");
    assert!(!agent_text.contains("git-credentials"), "{agent_text}");
}

#[test]
fn a_public_git_skill_mounts_no_secret_and_other_skills_no_init_container() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![git_skill(None)];
    fixture.fetcher = Some(SkillFetcher {
        insecure_git_hosts: vec![],
        ..fetcher()
    });
    let spec = fixture.pod_spec();
    let fetch = &spec["initContainers"][0];
    let args = fetch["args"].as_array().expect("args");
    assert!(
        args.iter().all(|a| !a
            .as_str()
            .unwrap_or_default()
            .starts_with("--credentials-dir")
            && !a
                .as_str()
                .unwrap_or_default()
                .starts_with("--insecure-git-host")),
        "{args:?}"
    );
    assert_eq!(fetch["volumeMounts"].as_array().map(Vec::len), Some(2));
    assert!(!spec["volumes"].to_string().contains("secret"));

    // Image and inline skills need no init container, even with a fetcher.
    let mut fixture = Fixture::new();
    fixture.fetcher = Some(fetcher());
    assert!(fixture.pod_spec().get("initContainers").is_none());
}

#[test]
fn a_git_skill_pins_its_commit_in_status_and_manifest() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![git_skill(None)];
    fixture.fetcher = Some(fetcher());
    let pinned = fixture.inputs().pinned_skills();
    assert_eq!(
        pinned[0].image,
        format!("https://git.example.com/acme/skills.git@{GIT_COMMIT}")
    );
    let manifest = &pod_annotations(&fixture.inputs())[SKILLS_MANIFEST_ANNOTATION];
    assert!(
        manifest.contains(&format!(
            "\"source\": \"https://git.example.com/acme/skills.git@{GIT_COMMIT}\""
        )),
        "{manifest}"
    );
}

#[test]
fn git_skills_without_the_operator_image_are_refused_naming_the_flag() {
    let mut fixture = Fixture::new();
    fixture.skills = vec![java(), git_skill(None)];
    let error = inputs_error(&fixture);
    assert_eq!(error.reason().as_str(), "OperatorImageNotSet");
    let message = error.to_string();
    assert!(
        message.contains("upgrade") && message.contains("--operator-image"),
        "{message}"
    );
}

#[test]
fn the_sandbox_carries_the_runs_trace_context_for_agent_sandbox() {
    let fixture = Fixture::new();
    let inputs = fixture.inputs();
    let sandbox = build_sandbox(&inputs, owner("fix-123")).expect("serializes");
    let annotation = sandbox["metadata"]["annotations"]["opentelemetry.io/trace-context"]
        .as_str()
        .expect("the Sandbox's trace context");
    let context: Value = serde_json::from_str(annotation).expect("a JSON object");
    let traceparent = context["traceparent"].as_str().expect("traceparent");
    let trace = crate::trace::RunTrace::of_run(RUN_UID);
    assert_eq!(
        traceparent,
        format!(
            "00-{}-{}-01",
            trace.trace_id_hex(),
            traceparent.split('-').nth(2).expect("a span id")
        )
    );
    // The same on the pod of the `pod` backend; the pod template's annotations are files
    // only: agent-sandbox reads the Sandbox's.
    assert_eq!(
        pod_annotations(&inputs)["opentelemetry.io/trace-context"],
        annotation
    );
    assert!(
        sandbox["spec"]["podTemplate"]["metadata"]["annotations"]
            .get("opentelemetry.io/trace-context")
            .is_none()
    );

    // Another run (another UID) is another trace.
    let mut other = Fixture::new();
    other.run.metadata.uid = Some("another-uid".into());
    let other_inputs = other.inputs();
    let other_sandbox = build_sandbox(&other_inputs, owner("fix-123")).expect("serializes");
    assert_ne!(
        other_sandbox["metadata"]["annotations"]["opentelemetry.io/trace-context"],
        sandbox["metadata"]["annotations"]["opentelemetry.io/trace-context"]
    );
}

pub(super) fn proxied_pod_spec(fixture: &Fixture) -> Value {
    let proxy = CredentialProxy {
        mode: CredentialProxyMode::Preferred,
        image: Some("registry.example.com/agentic-operator:1".into()),
    };
    let inputs = fixture.inputs().with_credential_proxy(&proxy);
    serde_json::to_value(build_pod_spec(&inputs)).expect("serializes")
}

#[test]
fn a_proxied_key_is_mounted_into_the_sidecar_only_and_the_agent_gets_a_placeholder() {
    let spec = proxied_pod_spec(&Fixture::new());
    let agent = container(&spec);
    let env = agent["env"].as_array().expect("env");
    let value_of = |name: &str| {
        env.iter()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        value_of("KONVEYOR_LLM_ENDPOINT"),
        json!({"name": "KONVEYOR_LLM_ENDPOINT", "value": "http://127.0.0.1:4100/v1"})
    );
    assert_eq!(
        value_of("KONVEYOR_LLM_API_KEY"),
        json!({"name": "KONVEYOR_LLM_API_KEY", "value": PLACEHOLDER_KEY})
    );
    // Nothing of the agent container names the Gateway's Secret.
    let agent_text = agent.to_string();
    assert!(!agent_text.contains("llm-key"), "{agent_text}");
    assert!(agent.get("envFrom").is_none());

    let sidecars = spec["initContainers"].as_array().expect("init containers");
    assert_eq!(sidecars.len(), 1);
    assert_eq!(
        sidecars[0],
        json!({
            "name": "credential-proxy",
            "image": "registry.example.com/agentic-operator:1",
            "args": [
                "credential-proxy",
                "--listen=127.0.0.1:4100",
                "--upstream=https://llm.example.com/v1",
                "--auth=bearer",
                "--key-file=/run/konveyor/gateway-credential/api-key",
            ],
            "restartPolicy": "Always",
            "volumeMounts": [
                {"name": "gateway-credential", "mountPath": "/run/konveyor/gateway-credential", "readOnly": true}
            ],
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": true,
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "terminationMessagePolicy": "FallbackToLogsOnError",
        })
    );
    let volumes = spec["volumes"].as_array().expect("volumes");
    let secret_volumes: Vec<&Value> = volumes
        .iter()
        .filter(|v| v.get("secret").is_some())
        .collect();
    assert_eq!(
        secret_volumes,
        [&json!({"name": "gateway-credential", "secret": {
            "secretName": "llm-key",
            "items": [{"key": "api-key", "path": "api-key"}],
        }})]
    );
    let agent_mounts = agent["volumeMounts"].as_array().expect("mounts");
    assert!(
        agent_mounts
            .iter()
            .all(|m| m["name"] != "gateway-credential"),
        "{agent_mounts:?}"
    );
}

/// The pod of either backend names the Secret its proxy mounts, for the operator to find
/// it by when that Secret changes; a pod without a proxy names none.
#[test]
fn a_proxied_pod_of_either_backend_names_the_secret_its_proxy_mounts() {
    let fixture = Fixture::new();
    let proxy = CredentialProxy {
        mode: CredentialProxyMode::Preferred,
        image: Some("registry.example.com/agentic-operator:1".into()),
    };
    let proxied = fixture.inputs().with_credential_proxy(&proxy);
    let pod = build_pod(&proxied, owner("fix-123"));
    assert_eq!(credential_secret(&pod.metadata, None), Some("llm-key"));
    let annotations = pod.metadata.annotations.as_ref().expect("annotations");
    assert!(!annotations.contains_key(CREDENTIAL_VERSION_ANNOTATION));
    let sandbox = build_sandbox(&proxied, owner("fix-123")).expect("serializes");
    assert_eq!(
        sandbox["spec"]["podTemplate"]["metadata"]["annotations"][CREDENTIAL_SECRET_ANNOTATION],
        "llm-key"
    );
    // Written by the operator on the pod alone: never in what agent-sandbox copies.
    assert!(sandbox.to_string().contains(CREDENTIAL_SECRET_ANNOTATION));
    assert!(!sandbox.to_string().contains(CREDENTIAL_VERSION_ANNOTATION));

    let unproxied = fixture.inputs();
    let pod = build_pod(&unproxied, owner("fix-123"));
    assert_eq!(credential_secret(&pod.metadata, None), None);
    let sandbox = build_sandbox(&unproxied, owner("fix-123")).expect("serializes");
    assert!(!sandbox.to_string().contains(CREDENTIAL_SECRET_ANNOTATION));
}

#[test]
fn the_sidecar_follows_the_git_skills_init_containers_and_speaks_anthropic_where_asked() {
    let mut fixture = Fixture::new();
    fixture.gateway.spec.provider = "anthropic".into();
    fixture.gateway.spec.endpoint = Some("http://claude.models.svc:8080".into());
    fixture.skills = vec![MountedSkill {
        source: SkillSource::Git {
            url: "https://git.example.com/skills.git".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            sub_path: None,
            secret: None,
        },
        sub_path: None,
        ..java()
    }];
    fixture.fetcher = Some(SkillFetcher {
        image: "registry.example.com/agentic-operator:1".into(),
        insecure_git_hosts: vec![],
    });
    let spec = proxied_pod_spec(&fixture);
    let names: Vec<&str> = spec["initContainers"]
        .as_array()
        .expect("init containers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["skill-fetch-0", "credential-proxy"]);
    let args = &spec["initContainers"][1]["args"];
    assert_eq!(args[2], "--upstream=http://claude.models.svc:8080");
    assert_eq!(args[3], "--auth=anthropic");
    let endpoint = container(&spec)["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|v| v["name"] == "KONVEYOR_LLM_ENDPOINT")
        .cloned();
    assert_eq!(
        endpoint,
        Some(json!({"name": "KONVEYOR_LLM_ENDPOINT", "value": "http://127.0.0.1:4100"}))
    );
}

/// The agent's env with the operator's trace receiver, named by the value of each variable
/// (`value`, or what `valueFrom` reads).
fn telemetry_env(fixture: &Fixture, receiver: &TraceReceiver) -> Vec<(String, Value)> {
    let spec = serde_json::to_value(build_pod_spec(
        &fixture.inputs().with_trace_receiver(Some(receiver)),
    ))
    .expect("serializes");
    container(&spec)["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|var| {
            let value = var
                .get("value")
                .or_else(|| var.get("valueFrom"))
                .cloned()
                .unwrap_or_default();
            (var["name"].as_str().expect("a name").to_owned(), value)
        })
        .collect()
}

pub(super) fn receiver(capture_content: bool) -> TraceReceiver {
    TraceReceiver {
        endpoint: "http://agentic-operator-otlp.operators.svc:4318".into(),
        capture_content,
    }
}

#[test]
fn a_receiver_gives_the_agent_the_otel_exporter_env_without_the_token_in_the_spec() {
    let mut fixture = Fixture::new();
    fixture.run.metadata.uid = Some("5f0c-uid".into());
    fixture.run.spec.env = vec![env_var("LOG_LEVEL")];
    let env = telemetry_env(&fixture, &receiver(true));
    let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
    let start = names
        .iter()
        .position(|name| *name == "KONVEYOR_OTLP_TOKEN")
        .expect("the token variable");
    // After the contract's variables, before the run's own.
    assert_eq!(names[start - 1], "KONVEYOR_GIT_AUTHOR_EMAIL");
    assert_eq!(names.last(), Some(&"LOG_LEVEL"));
    assert_eq!(
        env[start..env.len() - 1],
        [
            (
                "KONVEYOR_OTLP_TOKEN".to_owned(),
                json!({"secretKeyRef": {"name": "fix-123-acp-key", "key": "otlp-token"}})
            ),
            (
                "KONVEYOR_POD_NAME".to_owned(),
                json!({"fieldRef": {"fieldPath": "metadata.name"}})
            ),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
                json!("http://agentic-operator-otlp.operators.svc:4318")
            ),
            (
                "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
                json!("http/protobuf")
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                json!("Authorization=Bearer%20$(KONVEYOR_OTLP_TOKEN)")
            ),
            (
                "OTEL_RESOURCE_ATTRIBUTES".to_owned(),
                json!(
                    "k8s.namespace.name=team-a,k8s.pod.name=$(KONVEYOR_POD_NAME),konveyor.agentrun.name=fix-123,konveyor.agentrun.uid=5f0c-uid"
                )
            ),
            (
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT".to_owned(),
                json!("true")
            ),
        ]
    );
}

#[test]
fn without_the_proxy_the_key_goes_to_the_agent_as_in_konveyor() {
    let mut fixture = Fixture::new();
    fixture.gateway.spec.provider = "gcp-vertex-ai".into();
    let spec = proxied_pod_spec(&fixture);
    assert!(spec.get("initContainers").is_none());
    let agent_text = container(&spec).to_string();
    assert!(
        agent_text.contains("\"secretKeyRef\":{\"key\":\"api-key\",\"name\":\"llm-key\"}"),
        "{agent_text}"
    );
}

#[test]
fn message_content_export_follows_the_agent_else_the_operator() {
    let captures = |fixture: &Fixture, default: bool| {
        telemetry_env(fixture, &receiver(default))
            .iter()
            .any(|(name, _)| name == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    };
    let mut fixture = Fixture::new();
    assert!(captures(&fixture, true));
    assert!(!captures(&fixture, false));
    fixture.agent.spec.capture_message_content = Some(false);
    assert!(!captures(&fixture, true));
    fixture.agent.spec.capture_message_content = Some(true);
    assert!(captures(&fixture, false));
}

#[test]
fn without_a_receiver_the_agent_gets_no_otel_env() {
    let spec = Fixture::new().pod_spec();
    let env = container(&spec)["env"].as_array().expect("env").clone();
    assert!(
        env.iter().all(|var| {
            let name = var["name"].as_str().unwrap_or_default();
            !name.starts_with("OTEL_") && name != "KONVEYOR_OTLP_TOKEN"
        }),
        "{env:?}"
    );
}
