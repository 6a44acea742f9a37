//! The chart's tenancy policies (`tenancy.*` values) on the real API server: rendered by
//! helm, applied as they would be installed, and enforced by kube-apiserver's
//! ValidatingAdmissionPolicy plugin. Each rule gets objects it must let through and objects
//! it must refuse with a message naming the object, the field and the chart value.
//!
//! The policies are cluster-scoped, so their bindings select only the namespaces this test
//! labels; other tests sharing the control plane are not affected.

use std::time::{Duration, Instant};

use agentic_api::{Agent, AgentRun, Gateway, SkillCard};
use agentic_integration_tests::env;
use agentic_integration_tests::support;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde_json::{Value, json};
use support::{helm_template, parse_yaml_stream, run_ok};

const SELECTOR_LABEL: &str = "agentic-test/tenancy";

/// Renders the tenancy policies for `release` and applies them, bound to the namespaces
/// labelled `SELECTOR_LABEL=<release>`.
async fn install_policies(client: &Client, release: &str) {
    let values = json!({
        "agentImages": ["ghcr.io/acme", "registry.local:5000"],
        "skillImages": ["ghcr.io/skills"],
        "secretNamePrefixes": ["agent-"],
        "namespaceSelector": {"matchLabels": {SELECTOR_LABEL: release}},
    });
    let rendered = run_ok(helm_template(release, "default").args([
        "--show-only",
        "templates/tenancy-policy.yaml",
        "--set-json",
        &format!("tenancy={values}"),
    ]));
    let objects = parse_yaml_stream(&rendered, "templates/tenancy-policy.yaml");
    let apply = PatchParams::apply("tenancy-test").force();
    let (mut policies, mut bindings) = (0, 0);
    for object in objects {
        let name = support::meta(&object, "name").to_owned();
        match support::kind(&object) {
            "ValidatingAdmissionPolicy" => {
                let policy: ValidatingAdmissionPolicy =
                    serde_json::from_value(object).expect("the chart renders a valid policy");
                Api::<ValidatingAdmissionPolicy>::all(client.clone())
                    .patch(&name, &apply, &Patch::Apply(&policy))
                    .await
                    .unwrap_or_else(|e| panic!("the API server accepts policy {name}: {e}"));
                policies += 1;
            }
            "ValidatingAdmissionPolicyBinding" => {
                let binding: ValidatingAdmissionPolicyBinding =
                    serde_json::from_value(object).expect("the chart renders a valid binding");
                Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                    .patch(&name, &apply, &Patch::Apply(&binding))
                    .await
                    .unwrap_or_else(|e| panic!("the API server accepts binding {name}: {e}"));
                bindings += 1;
            }
            other => panic!("the tenancy template renders only policies, found {other}"),
        }
    }
    assert_eq!(
        (policies, bindings),
        (3, 3),
        "one policy and binding per list"
    );
}

async fn label_namespace(client: &Client, namespace: &str, release: &str) {
    let patch = json!({"metadata": {"labels": {SELECTOR_LABEL: release}}});
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the test namespace can be labelled");
}

/// A raw object of one of our kinds, created with a dry run: admission runs in full and
/// nothing is stored, so one name serves every case.
async fn dry_create<K: Resource<DynamicType = ()>>(
    client: &Client,
    namespace: &str,
    spec: Value,
) -> Result<(), kube::Error> {
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1",
        "kind": K::kind(&()),
        "metadata": {"name": "probe"},
        "spec": spec,
    }))
    .expect("a valid DynamicObject");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&params, &object).await.map(|_| ())
}

#[track_caller]
fn assert_refused(result: Result<(), kube::Error>, mentions: &[&str]) {
    match result {
        Ok(()) => panic!("expected the policy to refuse an object mentioning {mentions:?}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            for text in mentions {
                assert!(
                    status.message.contains(text),
                    "{:?} should mention {text:?}",
                    status.message
                );
            }
        }
        Err(other) => panic!("expected a refusal from the API server, got {other}"),
    }
}

#[track_caller]
fn assert_allowed(result: Result<(), kube::Error>, what: &str) {
    if let Err(error) = result {
        panic!("{what} must be allowed: {error}");
    }
}

fn agent(image: &str) -> Value {
    json!({"image": image, "gateways": [{"ref": "llm"}]})
}

fn run_with_env(env: Value, env_from: Value) -> Value {
    json!({"agentRef": "agent", "env": env, "envFrom": env_from})
}

#[tokio::test]
async fn tenancy_policies_refuse_images_and_secrets_outside_the_allowlists() {
    let env = env().await;
    let client = env.client();
    let tenant = env.namespace("tenancy").await.expect("a namespace");
    let outside = env.namespace("tenancy-outside").await.expect("a namespace");
    let release = tenant.clone();

    // Written before the policy exists, and outside what it allows.
    let agents: Api<Agent> = Api::namespaced(client.clone(), &tenant);
    let legacy: Agent = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
        "metadata": {"name": "legacy"},
        "spec": agent("docker.io/someone/harness:v1"),
    }))
    .unwrap();
    agents
        .create(&PostParams::default(), &legacy)
        .await
        .expect("no policy yet");

    label_namespace(&client, &tenant, &release).await;
    install_policies(&client, &release).await;

    // The API server loads new policies asynchronously, each on its own: wait until each of
    // the three refuses (on a busy machine one can be enforced seconds before another).
    let started = Instant::now();
    let refused = |result: Result<(), kube::Error>| result.is_err();
    loop {
        let agent_images =
            refused(dry_create::<Agent>(&client, &tenant, agent("evil.example/harness:v1")).await);
        let skill_images = refused(
            dry_create::<SkillCard>(
                &client,
                &tenant,
                json!({"image": "evil.example/skills/java:v1", "type": "skill"}),
            )
            .await,
        );
        let secret_refs = refused(
            dry_create::<AgentRun>(
                &client,
                &tenant,
                run_with_env(json!([]), json!([{"secretRef": {"name": "evil-creds"}}])),
            )
            .await,
        );
        if agent_images && skill_images && secret_refs {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the policies are not all enforced within a minute: agent images {agent_images}, \
             skill images {skill_images}, secret references {secret_refs}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Agent images: a repository prefix ends at a path segment; a host allows only its port.
    for allowed in [
        "ghcr.io/acme/harness:v1",
        "ghcr.io/acme/team/harness@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ghcr.io/acme:v2",
        "registry.local:5000/harness:v1",
    ] {
        assert_allowed(
            dry_create::<Agent>(&client, &tenant, agent(allowed)).await,
            allowed,
        );
    }
    for refused in [
        "ghcr.io/acme-evil/harness:v1",
        "ghcr.io/other/harness:v1",
        "registry.local:5001/harness:v1",
        "registry.local.evil.example/harness:v1",
        "busybox",
    ] {
        assert_refused(
            dry_create::<Agent>(&client, &tenant, agent(refused)).await,
            &[
                "is forbidden: ValidatingAdmissionPolicy",
                "denied request: ",
                &format!("Agent {tenant}/probe: spec.image {refused}"),
                "tenancy.agentImages",
            ],
        );
    }

    // Skill images, on SkillCards; an inline card names no image.
    assert_allowed(
        dry_create::<SkillCard>(
            &client,
            &tenant,
            json!({"image": "ghcr.io/skills/java:v1", "type": "skill"}),
        )
        .await,
        "a skill from the allowed repository",
    );
    assert_allowed(
        dry_create::<SkillCard>(
            &client,
            &tenant,
            json!({"type": "rule", "inline": "---\nname: r\ndescription: A rule.\n---\nBe brief.\n"}),
        )
        .await,
        "an inline skill",
    );
    assert_refused(
        dry_create::<SkillCard>(
            &client,
            &tenant,
            json!({"image": "ghcr.io/skillz/java:v1", "type": "skill"}),
        )
        .await,
        &[
            &format!("SkillCard {tenant}/probe: skill image(s) ghcr.io/skillz/java:v1"),
            "tenancy.skillImages",
        ],
    );

    // Secrets: every place a run, Gateway or SkillCard can name one.
    let secret_env = |name: &str| json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}}]);
    assert_allowed(
        dry_create::<AgentRun>(
            &client,
            &tenant,
            run_with_env(
                secret_env("agent-token"),
                json!([{"secretRef": {"name": "agent-env"}}, {"configMapRef": {"name": "any-config"}}]),
            ),
        )
        .await,
        "Secrets with the allowed prefix, and ConfigMaps",
    );
    assert_refused(
        dry_create::<AgentRun>(
            &client,
            &tenant,
            run_with_env(
                secret_env("db-password"),
                json!([{"secretRef": {"name": "admin-creds"}}]),
            ),
        )
        .await,
        &[
            &format!("AgentRun {tenant}/probe: Secret(s) \"db-password\", \"admin-creds\""),
            "tenancy.secretNamePrefixes",
        ],
    );
    assert_refused(
        dry_create::<Gateway>(
            &client,
            &tenant,
            json!({"provider": "openai", "credentialRef": {"secretName": "root-key"}, "model": {"name": "m", "contextWindow": 128_000}}),
        )
        .await,
        &["Gateway", "\"root-key\""],
    );
    assert_refused(
        dry_create::<SkillCard>(
            &client,
            &tenant,
            json!({"image": "ghcr.io/skills/java:v1", "type": "skill", "pullSecrets": [{"name": "regcred"}]}),
        )
        .await,
        &["SkillCard", "\"regcred\""],
    );
    assert_refused(
        dry_create::<SkillCard>(
            &client,
            &tenant,
            json!({"source": "https://git.example/skills.git", "type": "skill", "sourceSecret": {"name": "git-creds"}}),
        )
        .await,
        &["SkillCard", "\"git-creds\""],
    );

    // Namespaces the binding does not select are left alone.
    assert_allowed(
        dry_create::<Agent>(&client, &outside, agent("evil.example/harness:v1")).await,
        "an Agent in a namespace the binding does not select",
    );

    // An object written before the policy keeps working: its labels can change, its spec
    // only into something allowed.
    let labels = json!({"metadata": {"labels": {"team": "a"}}});
    agents
        .patch("legacy", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("metadata of an object written before the policy stays editable");
    let spec = json!({"spec": {"prompt": "changed"}});
    let changed = agents
        .patch("legacy", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .map(|_| ());
    assert_refused(changed, &["spec.image docker.io/someone/harness:v1"]);
}
