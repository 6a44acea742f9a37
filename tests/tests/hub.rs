//! Konveyor's Hub (`konveyor/tackle2-hub`, `internal/api/agentic.go`) against our CRDs and
//! operator: each of its routes re-enacted as the requests it sends to the API server, with
//! the objects as Konveyor's Go types carry them.
//!
//! What the Hub does, and so what this file does:
//!
//! - create: decodes the request into Konveyor's type (fields it does not know are lost),
//!   sets the namespace and, for Agents and AgentWorkflows, the label
//!   `konveyor.io/managed: "true"`, and creates the object;
//! - list: Agents and AgentWorkflows by that label, the other kinds all;
//! - update: GET into Konveyor's type, refuses (409) an object labelled
//!   `app.kubernetes.io/managed-by: agentic-controller-defaults` (not for Gateways), sets
//!   `spec` from the request and sends the whole object back (a PUT): every spec field only
//!   we have is dropped;
//! - delete: the same refusal, then DELETE;
//! - run and workflow-run creation: a token Secret `agentic-run-*`, the run with `envFrom`
//!   that Secret and `HUB_BASE_URL`, then the Secret's ownerReference set to the run, in some
//!   Hub versions without the group (`apiVersion: v1alpha1`);
//! - the ACP relay: reads `status.sandboxName` and `status.secretKeyRef` (the key under
//!   `secret-key`) and dials `ws://<sandbox>.<namespace>.svc:4000/acp`. This control plane
//!   has no node and no cluster DNS: here the relay's inputs and the Service it dials are
//!   checked for both backends; the connection through that Service to a listening agent is
//!   `tests/tests/parity_node.rs`'s (`acp_reaches_*_through_its_service`), on the real node.
//!
//! "Konveyor's type" is the spec cut down to Konveyor's fields, from
//! `tests/konveyor-fields.yaml` (the facts the parity test uses).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentic_api::{AgentRun, DEFAULTS_MANAGER, MANAGED_BY_LABEL, SKILL_COLLECTION_LABEL};
use agentic_core::applied::holds;
use agentic_core::names::collection_skill_card_name;
use agentic_integration_tests::support;
use agentic_integration_tests::{
    Operator, env, events_about, eventually, llm_gateway, push, registry, scenario,
    wait_for_sandbox, wait_gone, write_skill,
};
use agentic_operator::context::SandboxBackend;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The label the Hub puts on the Agents and AgentWorkflows it creates, and lists them by.
const HUB_MANAGED_LABEL: &str = "konveyor.io/managed";
/// The `apiVersion` older Hubs write into a token Secret's ownerReference: no group.
const GROUP_LESS: &str = "v1alpha1";
const GROUPED: &str = "konveyor.io/v1alpha1";

/// Konveyor's spec fields of each kind (`spec.x`, `spec.list[].y`).
fn konveyor_fields() -> BTreeMap<String, BTreeSet<String>> {
    let facts = support::read_yaml_file("tests/konveyor-fields.yaml");
    let mut fields: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for field in facts[0]["fields"].as_array().expect("fields") {
        let kind = field["kind"].as_str().expect("kind");
        let path = field["path"].as_str().expect("path");
        fields.entry(kind.into()).or_default().insert(path.into());
    }
    // Konveyor's, left out of the facts file: the Kubernetes shapes of env and envFrom, and
    // the fields of the Param and ExecutionSpec types it records on Agent and AgentRun only.
    for (kind, path) in [
        ("AgentRun", "spec.env"),
        ("AgentRun", "spec.envFrom"),
        ("AgentWorkflowRun", "spec.env"),
        ("AgentWorkflowRun", "spec.envFrom"),
        ("AgentWorkflow", "spec.params[].description"),
        ("AgentWorkflow", "spec.stages[].execution.askUser"),
    ] {
        fields.entry(kind.into()).or_default().insert(path.into());
    }
    fields
}

/// `value` at `path` as Konveyor's Go type decodes it: what it has no field for is gone.
fn project(value: &Value, path: &str, known: &BTreeSet<String>) -> Option<Value> {
    let deeper = known
        .iter()
        .any(|k| k.starts_with(&format!("{path}.")) || k.starts_with(&format!("{path}[]")));
    if !deeper {
        return known.contains(path).then(|| value.clone());
    }
    Some(match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), project(v, &format!("{path}.{k}"), known)?)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter_map(|v| project(v, &format!("{path}[]"), known))
                .collect(),
        ),
        other => other.clone(),
    })
}

/// Konveyor's Hub, talking to the API server in one namespace.
struct Hub {
    client: Client,
    ns: String,
    fields: BTreeMap<String, BTreeSet<String>>,
    /// The `apiVersion` of the token Secrets' ownerReferences.
    owner_api_version: &'static str,
}

impl Hub {
    fn new(client: &Client, ns: &str) -> Self {
        Self {
            client: client.clone(),
            ns: ns.to_string(),
            fields: konveyor_fields(),
            owner_api_version: GROUP_LESS,
        }
    }

    fn api(&self, kind: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: "konveyor.io".into(),
            version: "v1alpha1".into(),
            api_version: GROUPED.into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        };
        Api::namespaced_with(self.client.clone(), &self.ns, &resource)
    }

    /// `object` decoded into Konveyor's type `kind`: its metadata whole, its spec cut down.
    fn konveyor(&self, kind: &str, object: &Value) -> Value {
        let known = &self.fields[kind];
        let mut typed = json!({
            "apiVersion": GROUPED, "kind": kind,
            "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
        });
        if let Some(spec) = object.get("spec") {
            typed["spec"] = project(spec, "spec", known).unwrap_or(json!({}));
        }
        typed
    }

    /// POST /agentic/<kind>.
    async fn create(&self, kind: &str, request: Value) -> Value {
        let mut object = self.konveyor(kind, &request);
        if matches!(kind, "Agent" | "AgentWorkflow") {
            object["metadata"]["labels"][HUB_MANAGED_LABEL] = json!("true");
        }
        object["metadata"]["namespace"] = json!(self.ns);
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        let created = self
            .api(kind)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("the Hub creates the {kind}: {e}"));
        self.konveyor(kind, &serde_json::to_value(created).expect("json"))
    }

    /// GET /agentic/<kind> (Agents and AgentWorkflows: only the Hub's).
    async fn list(&self, kind: &str) -> Vec<String> {
        let params = if matches!(kind, "Agent" | "AgentWorkflow") {
            ListParams::default().labels(&format!("{HUB_MANAGED_LABEL}=true"))
        } else {
            ListParams::default()
        };
        let mut names: Vec<String> = self
            .api(kind)
            .list(&params)
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect();
        names.sort();
        names
    }

    /// GET /agentic/<kind>/<name>.
    async fn get(&self, kind: &str, name: &str) -> Value {
        let object = self.api(kind).get(name).await.expect("get");
        self.konveyor(kind, &serde_json::to_value(object).expect("json"))
    }

    /// The Hub's refusal of what the operator installs: 409.
    #[allow(clippy::unused_self)] // One of the Hub's checks, called as they are.
    fn operator_managed(&self, kind: &str, object: &Value) -> Result<(), u16> {
        let installed = object["metadata"]["labels"][MANAGED_BY_LABEL] == json!(DEFAULTS_MANAGER);
        if installed && kind != "Gateway" {
            return Err(409);
        }
        Ok(())
    }

    /// PUT /agentic/<kind>/<name>: the object read into Konveyor's type, its spec replaced
    /// by the request's (itself decoded into Konveyor's type), sent back whole.
    async fn update(&self, kind: &str, name: &str, request: &Value) -> Result<(), u16> {
        let mut current = self.get(kind, name).await;
        self.operator_managed(kind, &current)?;
        current["spec"] = self.konveyor(kind, request)["spec"].clone();
        let object: DynamicObject = serde_json::from_value(current).expect("an object");
        self.api(kind)
            .replace(name, &PostParams::default(), &object)
            .await
            .map(drop)
            .map_err(|e| match e {
                kube::Error::Api(status) => status.code,
                other => panic!("PUT {kind} {name}: {other}"),
            })
    }

    /// DELETE /agentic/<kind>/<name>.
    async fn delete(&self, kind: &str, name: &str) -> Result<(), u16> {
        let current = self.get(kind, name).await;
        self.operator_managed(kind, &current)?;
        self.api(kind)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        Ok(())
    }

    /// POST /agentic/<runs>: the token Secret, the run pointing at it, then the Secret's
    /// ownerReference. Returns the run and the Secret's name.
    async fn create_run(&self, kind: &str, request: Value) -> (Value, String) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let token: Secret = serde_json::from_value(json!({
            "metadata": {"generateName": "agentic-run-"},
            "stringData": {"HUB_TOKEN_ID": "7", "HUB_TOKEN": "hub-token-of-the-run"},
        }))
        .expect("a Secret");
        let mut token = secrets
            .create(&PostParams::default(), &token)
            .await
            .expect("the token Secret");
        let secret = token.metadata.name.clone().expect("a generated name");
        let mut request = self.konveyor(kind, &request);
        let spec = request["spec"].as_object_mut().expect("a spec");
        spec.entry("envFrom")
            .or_insert(json!([]))
            .as_array_mut()
            .expect("envFrom")
            .push(json!({"secretRef": {"name": secret}}));
        spec.entry("env")
            .or_insert(json!([]))
            .as_array_mut()
            .expect("env")
            .push(json!({"name": "HUB_BASE_URL", "value": "http://hub.invalid"}));
        request["metadata"]["namespace"] = json!(self.ns);
        let run: DynamicObject = serde_json::from_value(request).expect("a run");
        let run = self
            .api(kind)
            .create(&PostParams::default(), &run)
            .await
            .unwrap_or_else(|e| panic!("the Hub creates the {kind}: {e}"));
        token.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": self.owner_api_version, "kind": kind,
                "name": run.metadata.name, "uid": run.metadata.uid,
            }))
            .expect("an ownerReference"),
        ]);
        secrets
            .replace(&secret, &PostParams::default(), &token)
            .await
            .expect("the token Secret's owner");
        (serde_json::to_value(run).expect("json"), secret)
    }
}

/// A skill's SKILL.md as inline text.
fn inline_skill(name: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\nDo {name}.\n")
}

/// Waits until the operator has reported on generation `generation` of `kind` `name`.
async fn observed(hub: &Hub, kind: &str, name: &str, generation: i64) -> Value {
    eventually(
        &format!("{kind} {name} observed at {generation}"),
        || async move {
            let object = hub.api(kind).get(name).await.expect("get");
            let object = serde_json::to_value(object).expect("json");
            (object["status"]["observedGeneration"] == json!(generation)).then_some(object)
        },
    )
    .await
}

#[tokio::test]
async fn every_editable_kind_goes_through_the_hubs_routes() {
    let (ns, client, operator) = scenario("hub-routes", SandboxBackend::Pod).await;
    let hub = Hub::new(&client, &ns);
    llm_gateway(&client, &ns).await;

    // What the console sends: Konveyor's fields only.
    let requests = [
        (
            "SkillCard",
            json!({"metadata": {"name": "review"}, "spec": {"inline": inline_skill("review"), "description": "Reviews."}}),
            json!({"inline": inline_skill("review"), "description": "Reviews code."}),
        ),
        (
            "SkillCollection",
            json!({"metadata": {"name": "team"}, "spec": {"skills": [{"name": "review", "skillCardRef": "review"}]}}),
            json!({"skills": [{"name": "review", "skillCardRef": "review"}], "version": "2"}),
        ),
        (
            "Gateway",
            json!({"metadata": {"name": "second"}, "spec": {
                "provider": "openai", "endpoint": agentic_integration_tests::llm_server(),
                "model": {"name": "gpt-5", "contextWindow": 128_000},
                "credentialRef": {"secretName": "llm-key", "key": "api-key"},
            }}),
            json!({
                "provider": "openai", "endpoint": agentic_integration_tests::llm_server(),
                "model": {"name": "gpt-5", "contextWindow": 64000},
                "credentialRef": {"secretName": "llm-key", "key": "api-key"},
            }),
        ),
        (
            "Agent",
            json!({"metadata": {"name": "migrator"}, "spec": {
                "image": "harness.invalid/agent:1", "prompt": "Migrate.",
                "gateways": [{"ref": "llm"}], "skillCards": [{"ref": "review"}],
                "skillCollections": [{"ref": "team"}],
            }}),
            json!({
                "image": "harness.invalid/agent:2", "prompt": "Migrate carefully.",
                "gateways": [{"ref": "llm"}], "skillCards": [{"ref": "review"}],
            }),
        ),
        (
            "AgentWorkflow",
            json!({"metadata": {"name": "migration"}, "spec": {
                "guide": "Plan, then do.", "stages": [{"name": "plan", "agentRef": "migrator"}],
            }}),
            json!({
                "guide": "Plan, then do, then check.",
                "stages": [{"name": "plan", "agentRef": "migrator"}, {"name": "do", "agentRef": "migrator"}],
            }),
        ),
    ];

    // An Agent applied with kubectl, without the Hub's label: the console does not list it.
    hub.api("Agent")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": GROUPED, "kind": "Agent",
                "metadata": {"name": "by-kubectl"},
                "spec": {"image": "harness.invalid/agent:1", "gateways": [{"ref": "llm"}]},
            }))
            .expect("an Agent"),
        )
        .await
        .expect("create");

    for (kind, request, _) in &requests {
        let name = request["metadata"]["name"].as_str().expect("name");
        let created = hub.create(kind, request.clone()).await;
        assert!(
            holds(&created["spec"], &request["spec"]),
            "{kind}: created as sent: {created:#}"
        );
        let listed = hub.list(kind).await;
        assert!(listed.contains(&name.to_string()), "{kind}: {listed:?}");
        assert!(
            !listed.contains(&"by-kubectl".to_string()),
            "{kind}: {listed:?}"
        );
        // The operator reconciles what the Hub created.
        observed(&hub, kind, name, 1).await;
    }

    for (kind, request, edited) in &requests {
        let name = request["metadata"]["name"].as_str().expect("name");
        // The console GETs, edits the spec and PUTs it back.
        let mut put = hub.get(kind, name).await;
        put["spec"] = edited.clone();
        hub.update(kind, name, &put)
            .await
            .unwrap_or_else(|code| panic!("PUT {kind}: {code}"));
        let stored = observed(&hub, kind, name, 2).await;
        assert!(
            holds(&stored["spec"], edited),
            "{kind}: the edit is stored: {stored:#}"
        );
        assert_eq!(
            stored["metadata"]["labels"][HUB_MANAGED_LABEL],
            if matches!(*kind, "Agent" | "AgentWorkflow") {
                json!("true")
            } else {
                Value::Null
            },
            "{kind}: the PUT keeps the metadata"
        );
    }

    // The inline card's edit reached its status: the operator read the new spec.
    let card = hub.get("SkillCard", "review").await;
    assert_eq!(card["spec"]["description"], "Reviews code.");

    for (kind, request, _) in requests.iter().rev() {
        let name = request["metadata"]["name"].as_str().expect("name");
        hub.delete(kind, name).await.expect("DELETE");
        wait_gone(&hub.api(kind), name, kind).await;
        assert!(!hub.list(kind).await.contains(&name.to_string()), "{kind}");
    }
    operator.stop().await;
}

/// The Events about `kind` `name` with `reason`, by note.
async fn event_notes(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    reason: &str,
) -> Vec<String> {
    events_about(client, ns, kind, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

/// Waits for the `ExtensionsKept` condition of `kind` `name` to be False, and returns its
/// message.
async fn dropped_message(hub: &Hub, kind: &str, name: &str) -> String {
    eventually(
        &format!("{kind} {name} reporting dropped fields"),
        || async move {
            let object =
                serde_json::to_value(hub.api(kind).get(name).await.expect("get")).expect("json");
            object["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["type"] == "ExtensionsKept"
                        && c["status"] == "False"
                        && c["reason"] == "ExtensionFieldsDropped"
                })
                .map(|c| c["message"].as_str().unwrap_or_default().to_string())
        },
    )
    .await
}

#[tokio::test]
async fn a_console_edit_loses_no_extension_without_a_word() {
    let env = env().await;
    let ns = env.namespace("hub-extensions").await.expect("namespace");
    let client = env.client();
    let hub = &Hub::new(&client, &ns);
    llm_gateway(&client, &ns).await;
    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );

    // Set with kubectl: our extensions.
    let extended = [
        (
            "Agent",
            "migrator",
            json!({
                "image": "harness.invalid/agent:1", "gateways": [{"ref": "llm"}],
                "skillDelivery": "inject", "maxConcurrentRuns": 2, "defaultSkills": false,
            }),
            vec![
                "spec.skillDelivery (was \"inject\")",
                "spec.maxConcurrentRuns (was 2)",
                "spec.defaultSkills (was false)",
            ],
        ),
        (
            "SkillCard",
            "private",
            json!({
                "image": format!("{}/{ns}/private:1", registry().await),
                "pullSecrets": [{"name": "regcred"}],
            }),
            vec![r#"spec.pullSecrets (was [{"name":"regcred"}])"#],
        ),
    ];
    for (kind, name, spec, _) in &extended {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": GROUPED, "kind": kind, "metadata": {"name": name}, "spec": spec,
        }))
        .expect("an object");
        hub.api(kind)
            .create(&PostParams::default(), &object)
            .await
            .expect("create");
        // The operator has recorded them.
        eventually(
            &format!("{kind} {name}'s extensions recorded"),
            || async move {
                let object = serde_json::to_value(hub.api(kind).get(name).await.expect("get"))
                    .expect("json");
                object["status"]["extensionFields"]
                    .as_object()
                    .is_some_and(|fields| !fields.is_empty())
                    .then_some(())
            },
        )
        .await;
    }

    // A console edit: Konveyor's type has none of them.
    for (kind, name, _, fields) in &extended {
        let put = hub.get(kind, name).await;
        hub.update(kind, name, &put).await.expect("PUT");
        let stored =
            serde_json::to_value(hub.api(kind).get(name).await.expect("get")).expect("json");
        for field in ["pullSecrets", "maxConcurrentRuns", "defaultSkills"] {
            assert!(
                stored["spec"].get(field).is_none(),
                "{kind}: the PUT dropped {field}"
            );
        }
        let message = dropped_message(hub, kind, name).await;
        for field in fields {
            assert!(message.contains(field), "{kind}: {field} in {message}");
        }
        let (client, ns) = (&client, &ns);
        let notes = eventually("the Warning Event", || async move {
            let notes = event_notes(client, ns, kind, name, "ExtensionFieldsDropped").await;
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        assert!(notes.iter().any(|n| n == &message), "{notes:?}");
    }
    assert_eq!(
        hub.api("Agent").get("migrator").await.expect("get").data["spec"]["skillDelivery"],
        "native",
        "skillDelivery went back to its default"
    );

    // Set again, then dropped by a console edit while the operator is down: what it
    // recorded is in the status, not in its memory.
    operator.stop().await;
    let agents: &Api<agentic_api::Agent> = &Api::namespaced(client.clone(), &ns);
    let mut agent = agents.get("migrator").await.expect("get");
    agent.spec.max_concurrent_runs = Some(3);
    agents
        .replace("migrator", &PostParams::default(), &agent)
        .await
        .expect("set it again");
    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );
    let generation = agents
        .get("migrator")
        .await
        .expect("get")
        .metadata
        .generation;
    eventually("the cap recorded", || async move {
        let agent = agents.get("migrator").await.expect("get");
        let status = agent.status?;
        (status.observed_generation == generation
            && status
                .extension_fields
                .contains_key("spec.maxConcurrentRuns"))
        .then_some(())
    })
    .await;
    operator.stop().await;
    let put = hub.get("Agent", "migrator").await;
    hub.update("Agent", "migrator", &put).await.expect("PUT");
    let operator = Operator::start(
        client.clone(),
        &ns,
        SandboxBackend::Pod,
        vec![registry().await],
    );
    let message = eventually("the drop reported after the restart", || async move {
        let message = dropped_message(hub, "Agent", "migrator").await;
        message
            .contains("spec.maxConcurrentRuns (was 3)")
            .then_some(message)
    })
    .await;
    assert!(!message.contains("skillDelivery"), "{message}");

    // Kinds without extension fields lose nothing: what is stored is what was sent.
    let gateway = hub.get("Gateway", "llm").await;
    hub.update("Gateway", "llm", &gateway).await.expect("PUT");
    let stored = hub.api("Gateway").get("llm").await.expect("get");
    assert_eq!(
        serde_json::to_value(&stored).expect("json")["spec"],
        gateway["spec"]
    );
    operator.stop().await;
}

/// Waits until the operator's counter of deleted orphan Secrets is `want`.
async fn secrets_swept(operator: &Operator, want: u64) {
    let line = &format!(r#"agentic_orphans_deleted_total{{kind="Secret"}} {want}"#);
    eventually(line, || async move {
        operator
            .metrics
            .encode()
            .lines()
            .any(|l| l == line.as_str())
            .then_some(())
    })
    .await;
}

/// The names of the Hub's token Secrets in `ns`.
async fn token_secrets(client: &Client, ns: &str) -> Vec<String> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|name| name.starts_with("agentic-run-"))
        .collect()
}

#[tokio::test]
async fn a_hundred_hub_runs_deleted_leave_no_token_secret_after_one_sweep() {
    let env = env().await;
    let ns = env.namespace("hub-tokens").await.expect("namespace");
    let client = env.client();
    let mut hub = Hub::new(&client, &ns);

    // Runs of an Agent and a workflow that do not exist: they wait and make nothing. Older
    // Hubs write the owner without its group, newer ones with it.
    let mut runs = Vec::new();
    for i in 0..100 {
        hub.owner_api_version = if i % 2 == 0 { GROUP_LESS } else { GROUPED };
        let (kind, spec) = if i % 10 == 0 {
            ("AgentWorkflowRun", json!({"workflowRef": "absent"}))
        } else {
            ("AgentRun", json!({"agentRef": "absent"}))
        };
        let name = format!("run-{i:03}");
        hub.create_run(kind, json!({"metadata": {"name": name}, "spec": spec}))
            .await;
        runs.push((kind, name));
    }
    // One that stays, and a Secret a run owns together with something else.
    hub.owner_api_version = GROUP_LESS;
    let (_, live) = hub
        .create_run(
            "AgentRun",
            json!({"metadata": {"name": "live"}, "spec": {"agentRef": "absent"}}),
        )
        .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let shared: Secret = serde_json::from_value(json!({
        "metadata": {"name": "shared", "ownerReferences": [
            {"apiVersion": GROUP_LESS, "kind": "AgentRun", "name": "run-001",
             "uid": "0b7e9a52-1111-4111-8111-111111111111"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
             "uid": "5d0c6f1e-2222-4222-8222-222222222222"},
        ]},
    }))
    .expect("a Secret");
    secrets
        .create(&PostParams::default(), &shared)
        .await
        .expect("create");
    assert_eq!(token_secrets(&client, &ns).await.len(), 101);

    for (kind, name) in &runs {
        hub.api(kind)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete the run");
    }
    for (kind, name) in &runs {
        wait_gone(&hub.api(kind), name, "the run").await;
    }
    // No garbage collector here, and none would follow a group-less reference anyway.
    assert_eq!(token_secrets(&client, &ns).await.len(), 101);

    // An hour between passes: only the pass at start runs.
    let operator =
        Operator::sweeping(&client, &ns, SandboxBackend::Pod, Duration::from_secs(3600)).await;
    secrets_swept(&operator, 100).await;
    assert_eq!(token_secrets(&client, &ns).await, [live]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        secrets.get_opt("shared").await.expect("get").is_some(),
        "a Secret with another owner is left to it"
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_run_deleted_while_the_operator_runs_takes_its_token_at_the_next_pass() {
    let env = env().await;
    let ns = env.namespace("hub-token-ttl").await.expect("namespace");
    let client = env.client();
    let hub = Hub::new(&client, &ns);
    let operator =
        Operator::sweeping(&client, &ns, SandboxBackend::Pod, Duration::from_secs(1)).await;
    let (_, token) = hub
        .create_run(
            "AgentRun",
            json!({"metadata": {"name": "brief"}, "spec": {"agentRef": "absent"}}),
        )
        .await;
    // Passes while the run exists keep its token.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        token_secrets(&client, &ns).await,
        std::slice::from_ref(&token)
    );
    hub.api("AgentRun")
        .delete("brief", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(
        &Api::<Secret>::namespaced(client.clone(), &ns),
        &token,
        "the token",
    )
    .await;
    secrets_swept(&operator, 1).await;
    operator.stop().await;
}

/// Generated SkillCards of `collection` in `ns`, by name.
async fn cards_of(hub: &Hub, collection: &str) -> BTreeMap<String, Value> {
    hub.api("SkillCard")
        .list(&ListParams::default().labels(&format!("{SKILL_COLLECTION_LABEL}={collection}")))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.clone().expect("name"),
                serde_json::to_value(c).expect("json"),
            )
        })
        .collect()
}

#[tokio::test]
async fn collections_generate_the_cards_konveyors_console_lists() {
    let env = env().await;
    let client = env.client();
    let ns = env.namespace("hub-collections").await.expect("namespace");
    let defaults = env.namespace("hub-defaults").await.expect("namespace");
    let hub = &Hub::new(&client, &ns);
    let tmp = tempfile::tempdir().expect("tempdir");
    let pdf = write_skill(tmp.path(), "pdf", "Read PDFs.");
    let xlsx = write_skill(tmp.path(), "xlsx", "Read spreadsheets.");
    let image = push(&[pdf, xlsx], &format!("{ns}/office:1")).await;
    let operator = Operator::start_watching(
        client.clone(),
        vec![ns.clone(), defaults.clone()],
        SandboxBackend::Pod,
        vec![registry().await],
        Some(defaults.clone()),
    );

    // Two collections whose cards would share a name: `team` lists the skill `x-pdf`,
    // `team-x` holds `pdf`; both make `team-x-pdf`. `team` is there first.
    let team = hub
        .create(
            "SkillCollection",
            json!({"metadata": {"name": "team"}, "spec": {"skills": [
                {"name": "x-pdf", "image": image.clone(), "subPath": "pdf"},
            ]}}),
        )
        .await;
    let first = eventually("team's card", || async move {
        hub.api("SkillCard")
            .get_opt("team-x-pdf")
            .await
            .expect("get")
    })
    .await;

    let long = format!("office-{}", "a".repeat(240));
    for name in ["office", long.as_str(), "team-x"] {
        hub.create(
            "SkillCollection",
            json!({"metadata": {"name": name}, "spec": {"image": image.clone()}}),
        )
        .await;
    }

    // `<collection>-<skill>`, labelled with and controlled by the collection.
    let office = hub.get("SkillCollection", "office").await;
    let cards = eventually("the office cards", || async move {
        let cards = cards_of(hub, "office").await;
        (cards.len() == 2).then_some(cards)
    })
    .await;
    assert_eq!(
        cards.keys().collect::<Vec<_>>(),
        ["office-pdf", "office-xlsx"]
    );
    for card in cards.values() {
        let owners = card["metadata"]["ownerReferences"]
            .as_array()
            .expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0]["apiVersion"], GROUPED);
        assert_eq!(owners[0]["kind"], "SkillCollection");
        assert_eq!(owners[0]["name"], "office");
        assert_eq!(owners[0]["uid"], office["metadata"]["uid"]);
        assert_eq!(owners[0]["controller"], true);
        assert!(card["metadata"]["labels"].get(MANAGED_BY_LABEL).is_none());
    }
    let listed = hub.list("SkillCard").await;
    assert!(listed.contains(&"office-pdf".to_string()), "{listed:?}");

    // Too long for `<collection>-<skill>`: a shortened name with a hash of the whole, the
    // same on every pass and after a restart.
    let label = &agentic_core::names::label_value(&long);
    let expected: BTreeSet<String> = ["pdf", "xlsx"]
        .iter()
        .map(|skill| collection_skill_card_name(&long, skill))
        .collect();
    let long_cards = eventually("the long collection's cards", || async move {
        let cards = cards_of(hub, label).await;
        (cards.len() == 2).then_some(cards)
    })
    .await;
    assert_eq!(
        long_cards.keys().cloned().collect::<BTreeSet<_>>(),
        expected
    );
    for name in &expected {
        assert!(
            name.len() <= 253 && name.starts_with("office-aaaa"),
            "{name}"
        );
    }

    // Never adopted: the other collection's card is left as it was.
    eventually("the taken name reported", || async move {
        let mine = hub.api("SkillCollection").get("team-x").await.expect("get");
        let mine = serde_json::to_value(mine).expect("json");
        mine["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| {
                c["type"] == "Ready"
                    && c["reason"] == "ObjectNameTaken"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("team-x-pdf"))
            })
            .then_some(())
    })
    .await;
    let kept = hub.api("SkillCard").get("team-x-pdf").await.expect("get");
    assert_eq!(
        kept.metadata.owner_references,
        first.metadata.owner_references
    );
    assert_eq!(
        kept.metadata.owner_references.as_ref().expect("owner")[0].uid,
        team["metadata"]["uid"].as_str().expect("uid")
    );
    assert_eq!(kept.metadata.labels, first.metadata.labels);
    assert_eq!(kept.data["spec"], first.data["spec"]);
    assert!(
        hub.api("SkillCard")
            .get_opt("team-x-xlsx")
            .await
            .expect("get")
            .is_some()
    );

    operator.stop().await;
    let operator = Operator::start_watching(
        client.clone(),
        vec![ns.clone(), defaults.clone()],
        SandboxBackend::Pod,
        vec![registry().await],
        Some(defaults.clone()),
    );

    // A cluster default: its cards are the operator's, and the Hub refuses to edit them.
    let default_hub = &Hub::new(&client, &defaults);
    default_hub
        .create(
            "SkillCollection",
            json!({"metadata": {"name": "house", "labels": {"konveyor.io/default-skills": "true"}},
                   "spec": {"image": image.clone()}}),
        )
        .await;
    let house = eventually("the default cards", || async move {
        let cards = cards_of(default_hub, "house").await;
        (cards.len() == 2).then_some(cards)
    })
    .await;
    for (name, card) in &house {
        assert_eq!(
            card["metadata"]["labels"][MANAGED_BY_LABEL], DEFAULTS_MANAGER,
            "{name}"
        );
        assert_eq!(default_hub.update("SkillCard", name, card).await, Err(409));
        assert_eq!(default_hub.delete("SkillCard", name).await, Err(409));
    }
    // The restart renamed nothing.
    assert_eq!(
        cards_of(hub, label)
            .await
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>(),
        expected
    );
    operator.stop().await;
}

/// The run's sandbox pod (`pod` backend) or the pod agent-sandbox made for its Sandbox.
async fn sandbox_pod(client: &Client, ns: &str, sandbox: &str) -> Pod {
    let pods: &Api<Pod> = &Api::namespaced(client.clone(), ns);
    eventually(&format!("pod {sandbox}"), || async move {
        pods.get_opt(sandbox).await.expect("get")
    })
    .await
}

async fn acp_through_the_service(backend: SandboxBackend, prefix: &str) {
    let (ns, client, operator) = scenario(prefix, backend).await;
    let hub = Hub::new(&client, &ns);
    agentic_integration_tests::ready_agent(
        &client,
        &ns,
        "migrator",
        agentic_integration_tests::llm_agent_spec("harness.invalid/agent:1"),
    )
    .await;
    let (_, token) = hub
        .create_run(
            "AgentRun",
            json!({"metadata": {"name": "chat"}, "spec": {"agentRef": "migrator", "instructions": "Hi."}}),
        )
        .await;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let run = wait_for_sandbox(&runs, "chat").await;
    let status = run.status.expect("status");

    // What the relay reads: the sandbox's name and the Secret holding the ACP key.
    let sandbox = status.sandbox_name.expect("status.sandboxName");
    let key_secret = status.secret_key_ref.expect("status.secretKeyRef").name;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let key = secrets.get(&key_secret).await.expect("the ACP key Secret");
    assert!(
        key.data
            .as_ref()
            .is_some_and(|d| d.contains_key("secret-key")),
        "the key under one of the names the Hub tries"
    );

    // Where it dials: ws://<sandbox>.<namespace>.svc:4000/acp, a Service of that name.
    let url = format!("ws://{sandbox}.{ns}.svc:4000/acp");
    assert!(agentic_core::names::is_dns1035_label(&sandbox), "{url}");
    let services: &Api<Service> = &Api::namespaced(client.clone(), &ns);
    let sandbox_name = sandbox.as_str();
    let service = eventually(&format!("the Service behind {url}"), || async move {
        services.get_opt(sandbox_name).await.expect("get")
    })
    .await;
    let spec = service.spec.expect("spec");
    assert_eq!(
        spec.cluster_ip.as_deref(),
        Some("None"),
        "headless: the name is the pod's address"
    );
    let pod = sandbox_pod(&client, &ns, &sandbox).await;
    let pod_labels = pod.metadata.labels.clone().unwrap_or_default();
    let selector = spec.selector.unwrap_or_default();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "{url} selects the run's pod: {selector:?} / {pod_labels:?}"
    );

    // The token the Hub gave the run reaches the agent.
    let agent = pod
        .spec
        .expect("spec")
        .containers
        .into_iter()
        .find(|c| c.name == "agent")
        .expect("the agent container");
    assert!(
        agent
            .env_from
            .iter()
            .flatten()
            .any(|e| e.secret_ref.as_ref().is_some_and(|s| s.name == token)),
        "envFrom {token}"
    );
    assert!(
        agent
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "HUB_BASE_URL" && e.value.as_deref() == Some("http://hub.invalid"))
    );
    operator.stop().await;
}

#[tokio::test]
async fn the_acp_relay_reaches_a_pod_backend_sandbox_through_its_service() {
    acp_through_the_service(SandboxBackend::Pod, "hub-acp-pod").await;
}

#[tokio::test]
async fn the_acp_relay_reaches_an_agent_sandbox_through_its_service() {
    acp_through_the_service(SandboxBackend::AgentSandbox, "hub-acp-sandbox").await;
}
