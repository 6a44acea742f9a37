//! Every validation rule of the konveyor.io CRDs, checked by the real API server: each CEL
//! rule and each schema constraint users can run into gets an object the server accepts and
//! one it refuses, and a refusal must name the field and carry our rule's message. A rule
//! that stops compiling, stops firing or fires too often fails here, not in a user's cluster.
//!
//! Objects are raw JSON, so shapes the Rust types cannot produce (missing required fields,
//! explicit nulls, unknown enum values) reach the server as a user would send them.
//! Konveyor's own fields are checked against its schema in konveyor_parity.rs.

use std::collections::BTreeSet;

use agentic_api::{
    Agent, AgentRun, AgentWorkflow, AgentWorkflowRun, Gateway, SkillCard, SkillCollection,
};
use agentic_integration_tests::env;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::response::StatusCause;
use kube::{Api, Resource};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "cel-test";

/// How an object of one kind is sent: server-side apply (what `kubectl apply --server-side`
/// does) or a plain create (what `kubectl create` does).
#[derive(Clone, Copy, Debug)]
enum Via {
    Apply,
    Create,
}

/// The API of one of our kinds in one namespace, for raw objects.
struct Kind {
    api: Api<DynamicObject>,
    kind: String,
}

impl Kind {
    fn of<K: Resource<DynamicType = ()>>(client: kube::Client, namespace: &str) -> Self {
        let resource = ApiResource::erase::<K>(&());
        Self {
            api: Api::namespaced_with(client, namespace, &resource),
            kind: K::kind(&()).into_owned(),
        }
    }

    fn object(&self, name: &str, spec: &Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "konveyor.io/v1alpha1",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }))
        .expect("a test object is a valid DynamicObject")
    }

    async fn send(&self, how: Via, name: &str, spec: &Value) -> Result<DynamicObject, kube::Error> {
        let object = self.object(name, spec);
        match how {
            Via::Apply => {
                let params = PatchParams::apply(FIELD_MANAGER).validation_strict();
                self.api.patch(name, &params, &Patch::Apply(&object)).await
            }
            Via::Create => {
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PostParams::default()
                };
                self.api.create(&params, &object).await
            }
        }
    }

    /// Sends the object and expects the server to store it; returns the stored spec.
    async fn accepts(&self, how: Via, name: &str, spec: Value) -> Value {
        let stored = self
            .send(how, name, &spec)
            .await
            .unwrap_or_else(|e| panic!("{} {name} ({how:?}) should be accepted: {e}", self.kind));
        let stored_spec = stored.data["spec"].clone();
        if let Some(path) = missing_from(&stored_spec, &spec, "spec") {
            panic!(
                "{} {name}: the server dropped or changed {path}; sent {spec}, stored {stored_spec}",
                self.kind
            );
        }
        // Leave the namespace as it was, so a later case may reuse the name.
        self.api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {} {name}: {e}", self.kind));
        stored_spec
    }

    /// Sends the object and expects the server to refuse it for exactly one reason: `field`
    /// breaks the rule whose message contains `message`.
    async fn rejects(&self, how: Via, name: &str, spec: Value, field: &str, message: &str) {
        let result = self.send(how, name, &spec).await;
        assert_invalid(
            result,
            &format!("{} {name} ({how:?}) {spec}", self.kind),
            field,
            message,
        );
    }
}

/// What the API server adds as a cause when a schema error made it skip CEL rules; it names
/// no field and no rule.
const RULES_SKIPPED: &str = "some validation rules were not checked because the object was invalid";

/// Asserts that `result` is a 422 Invalid whose only cause (besides the note that CEL rules
/// were skipped) is `field` with `message`.
fn assert_invalid<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    what: &str,
    field: &str,
    message: &str,
) {
    let status = match result {
        Err(kube::Error::Api(status)) => status,
        Err(other) => panic!("{what}: expected the server to refuse it, got the error {other}"),
        Ok(stored) => panic!("{what}: should be rejected ({message}) but was stored: {stored:?}"),
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{what}: {status:?}"
    );
    assert!(
        status.message.contains(message),
        "{what}: the server's message does not contain {message:?}: {}",
        status.message
    );
    let causes: Vec<&StatusCause> = status
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .filter(|cause| !cause.message.contains(RULES_SKIPPED))
        .collect();
    assert!(
        matches!(causes.as_slice(), [cause] if cause.field == field && cause.message.contains(message)),
        "{what}: want exactly one cause at {field} with {message:?}, got {causes:#?}"
    );
}

/// The first path where `sent` has a value that `stored` lacks or differs from; `None` when
/// the server kept everything that was sent (it may add defaults). A null sent means "not
/// set", which the server may store as null or leave out.
fn missing_from(stored: &Value, sent: &Value, path: &str) -> Option<String> {
    match (stored, sent) {
        (Value::Object(stored), Value::Object(sent)) => sent.iter().find_map(|(key, value)| {
            let path = format!("{path}.{key}");
            match stored.get(key) {
                Some(kept) => missing_from(kept, value, &path),
                None if value.is_null() => None,
                None => Some(path),
            }
        }),
        (Value::Array(stored), Value::Array(sent)) if stored.len() == sent.len() => stored
            .iter()
            .zip(sent)
            .enumerate()
            .find_map(|(i, (kept, value))| missing_from(kept, value, &format!("{path}[{i}]"))),
        _ if stored == sent => None,
        _ => Some(path.to_owned()),
    }
}

async fn kind<K: Resource<DynamicType = ()>>(prefix: &str) -> Kind {
    let env = env().await;
    let namespace = env
        .namespace(prefix)
        .await
        .expect("a namespace for the test");
    Kind::of::<K>(env.client(), &namespace)
}

const EXACTLY_ONE: &str = "exactly one of spec.image, spec.inline or spec.source must be set";
const SUB_PATH_NEEDS_CONTENT: &str = "spec.subPath is only allowed with spec.image or spec.source";
const SUB_PATH_RELATIVE: &str = "spec.subPath must be relative: it must not start with '/'";
const SUB_PATH_NO_DOTDOT: &str = "spec.subPath must not contain '..' segments (Konveyor's schema takes them, but a path out of the image or repository can never hold the skill)";
const REF_NEEDS_SOURCE: &str = "spec.ref is only allowed with spec.source";
const PULL_SECRETS_NEED_IMAGE: &str = "spec.pullSecrets is only allowed with spec.image";
const SOURCE_SECRET_NEEDS_SOURCE: &str = "spec.sourceSecret is only allowed with spec.source";
const DEFAULT_NOT_REQUIRED: &str = "a param with a non-empty default cannot be required";
const RUN_IMMUTABLE: &str =
    "spec is immutable, except that spec.cancel may be set to true; create a new AgentRun instead";
const WORKFLOW_RUN_IMMUTABLE: &str = "spec is immutable, except that spec.cancel may be set to true; create a new AgentWorkflowRun instead";
const GIT_BOTH_OR_NEITHER: &str = "set both userName and userEmail, or neither";
const FILE_MOUNT_ONE_SOURCE: &str = "set exactly one of secretName and configMapName";
const RUNTIME_USERS_DIFFER: &str = "harnessUser and runtimeUser must differ: the runtime must not be able to read the harness's files";

const COLLECTION_ONE: &str = "set exactly one of spec.image or spec.skills";
const ENTRY_ONE: &str = "exactly one of skillCardRef, image or source must be set";
const ENTRY_SUB_PATH_RELATIVE: &str = "subPath must be relative: it must not start with '/'";
const ENTRY_SUB_PATH_NO_DOTDOT: &str = "subPath must not contain '..' segments (Konveyor's schema takes them, but a path out of the image or repository can never hold the skill)";

/// Every CEL rule message of the CRDs, each exercised by the tests below.
const EXERCISED_RULES: [&str; 17] = [
    WORKFLOW_RUN_IMMUTABLE,
    RUNTIME_USERS_DIFFER,
    GIT_BOTH_OR_NEITHER,
    FILE_MOUNT_ONE_SOURCE,
    EXACTLY_ONE,
    SUB_PATH_NEEDS_CONTENT,
    SUB_PATH_RELATIVE,
    SUB_PATH_NO_DOTDOT,
    REF_NEEDS_SOURCE,
    PULL_SECRETS_NEED_IMAGE,
    SOURCE_SECRET_NEEDS_SOURCE,
    DEFAULT_NOT_REQUIRED,
    RUN_IMMUTABLE,
    COLLECTION_ONE,
    ENTRY_ONE,
    ENTRY_SUB_PATH_RELATIVE,
    ENTRY_SUB_PATH_NO_DOTDOT,
];

const IMAGE: &str = "registry.example/skills/java:1.0";
const INLINE: &str = "---\nname: java\ndescription: Java things.\n---\n# Java\n";
const SOURCE: &str = "https://git.example/skills.git";

/// The messages of every `x-kubernetes-validations` rule under `value`.
fn rule_messages(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for rule in map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let message = rule["message"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a CEL rule without a message: {rule}"));
                found.insert(message.to_owned());
            }
            map.values().for_each(|v| rule_messages(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| rule_messages(v, found)),
        _ => {}
    }
}

#[test]
fn every_cel_rule_is_exercised_here() {
    let mut declared = BTreeSet::new();
    for crd in agentic_api::crds() {
        rule_messages(
            &serde_json::to_value(crd).expect("a CRD serializes"),
            &mut declared,
        );
    }
    let exercised: BTreeSet<String> = EXERCISED_RULES
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(
        declared, exercised,
        "a CEL rule was added or changed: give it accepted and rejected cases in this file"
    );
}

#[tokio::test]
async fn skill_card_takes_exactly_one_of_image_inline_and_source() {
    let cards = kind::<SkillCard>("cel-skc-one").await;
    for how in [Via::Apply, Via::Create] {
        cards.accepts(how, "image", json!({"image": IMAGE})).await;
        cards
            .accepts(how, "inline", json!({"inline": INLINE}))
            .await;
        cards
            .accepts(how, "source", json!({"source": SOURCE}))
            .await;
        for (name, spec) in [
            (
                "nothing",
                json!({"type": "skill", "description": "no content"}),
            ),
            ("image-inline", json!({"image": IMAGE, "inline": INLINE})),
            ("image-source", json!({"image": IMAGE, "source": SOURCE})),
            ("inline-source", json!({"inline": INLINE, "source": SOURCE})),
            (
                "all-three",
                json!({"image": IMAGE, "inline": INLINE, "source": SOURCE}),
            ),
        ] {
            cards.rejects(how, name, spec, "spec", EXACTLY_ONE).await;
        }
    }
    // An empty string is set, not absent: it is refused for its length, not counted out.
    cards
        .rejects(
            Via::Apply,
            "empty-image",
            json!({"image": ""}),
            "spec.image",
            "should be at least 1 chars long",
        )
        .await;
}

#[tokio::test]
async fn skill_collection_takes_an_image_or_a_list_of_single_source_entries() {
    let collections = kind::<SkillCollection>("cel-scol").await;
    for how in [Via::Apply, Via::Create] {
        collections
            .accepts(how, "image", json!({"image": IMAGE, "type": "rule"}))
            .await;
        collections
            .accepts(
                how,
                "skills",
                json!({"skills": [
                    {"name": "a", "skillCardRef": "java"},
                    {"name": "b", "image": IMAGE, "subPath": "skills/b", "type": "rule"},
                    {"name": "c", "source": SOURCE, "ref": "main", "subPath": "c"},
                ]}),
            )
            .await;
        for (name, spec) in [
            ("neither", json!({"version": "1.0.0"})),
            (
                "both",
                json!({"image": IMAGE, "skills": [{"name": "a", "skillCardRef": "java"}]}),
            ),
        ] {
            collections
                .rejects(how, name, spec, "spec", COLLECTION_ONE)
                .await;
        }
        for (name, entry) in [
            ("entry-none", json!({"name": "a", "subPath": "x"})),
            (
                "entry-two",
                json!({"name": "a", "skillCardRef": "java", "image": IMAGE}),
            ),
            (
                "entry-three",
                json!({"name": "a", "skillCardRef": "java", "image": IMAGE, "source": SOURCE}),
            ),
        ] {
            collections
                .rejects(
                    how,
                    name,
                    json!({"skills": [entry]}),
                    "spec.skills[0]",
                    ENTRY_ONE,
                )
                .await;
        }
    }
    for (name, sub_path, message) in [
        ("entry-absolute", "/etc", ENTRY_SUB_PATH_RELATIVE),
        ("entry-dotdot", "a/../b", ENTRY_SUB_PATH_NO_DOTDOT),
    ] {
        collections
            .rejects(
                Via::Apply,
                name,
                json!({"skills": [{"name": "a", "image": IMAGE, "subPath": sub_path}]}),
                "spec.skills[0].subPath",
                message,
            )
            .await;
    }
    // An empty list is refused: it would satisfy "one of" and never be Ready.
    collections
        .rejects(
            Via::Apply,
            "empty",
            json!({"skills": []}),
            "spec.skills",
            "should have at least 1 items",
        )
        .await;
}

#[tokio::test]
async fn skill_card_null_fields_count_as_absent() {
    // YAML's `image: ~` and JSON's null mean "not set": they must neither count towards
    // exactly-one-of nor make the other rules fire.
    let cards = kind::<SkillCard>("cel-skc-null").await;
    let how = Via::Create;
    cards
        .accepts(
            how,
            "inline-null-image",
            json!({"inline": INLINE, "image": null, "source": null}),
        )
        .await;
    cards
        .accepts(
            how,
            "inline-null-extras",
            json!({"inline": INLINE, "subPath": null, "ref": null, "pullSecrets": null}),
        )
        .await;
    cards
        .rejects(
            how,
            "all-null",
            json!({"image": null, "inline": null, "source": null}),
            "spec",
            EXACTLY_ONE,
        )
        .await;
}

#[tokio::test]
async fn skill_card_sub_path_is_relative_without_dot_dot_and_needs_image_or_source() {
    let cards = kind::<SkillCard>("cel-skc-subpath").await;
    let how = Via::Apply;
    for (name, sub_path) in [
        ("plain", "java"),
        ("nested", "skills/java"),
        ("dots-in-names", "skills/..java/v1..2/..."),
    ] {
        cards
            .accepts(how, name, json!({"image": IMAGE, "subPath": sub_path}))
            .await;
    }
    cards
        .accepts(
            how,
            "source",
            json!({"source": SOURCE, "subPath": "skills/java"}),
        )
        .await;

    cards
        .rejects(
            how,
            "inline",
            json!({"inline": INLINE, "subPath": "skills/java"}),
            "spec",
            SUB_PATH_NEEDS_CONTENT,
        )
        .await;
    for (name, sub_path) in [("root", "/"), ("absolute", "/skills/java")] {
        cards
            .rejects(
                how,
                name,
                json!({"image": IMAGE, "subPath": sub_path}),
                "spec.subPath",
                SUB_PATH_RELATIVE,
            )
            .await;
    }
    for (name, sub_path) in [
        ("only", ".."),
        ("leading", "../java"),
        ("middle", "skills/../java"),
        ("trailing", "skills/.."),
    ] {
        cards
            .rejects(
                how,
                name,
                json!({"image": IMAGE, "subPath": sub_path}),
                "spec.subPath",
                SUB_PATH_NO_DOTDOT,
            )
            .await;
    }
    cards
        .rejects(
            how,
            "empty",
            json!({"image": IMAGE, "subPath": ""}),
            "spec.subPath",
            "should be at least 1 chars long",
        )
        .await;
}

#[tokio::test]
async fn skill_card_ref_needs_source_and_pull_secrets_need_image() {
    let cards = kind::<SkillCard>("cel-skc-only-with").await;
    let how = Via::Apply;
    cards
        .accepts(how, "source-ref", json!({"source": SOURCE, "ref": "v1.2"}))
        .await;
    cards
        .rejects(
            how,
            "image-ref",
            json!({"image": IMAGE, "ref": "v1.2"}),
            "spec",
            REF_NEEDS_SOURCE,
        )
        .await;
    cards
        .rejects(
            how,
            "inline-ref",
            json!({"inline": INLINE, "ref": "main"}),
            "spec",
            REF_NEEDS_SOURCE,
        )
        .await;

    let git_secret = json!({"name": "git-credentials"});
    cards
        .accepts(
            how,
            "source-secret",
            json!({"source": SOURCE, "sourceSecret": git_secret}),
        )
        .await;
    for (name, spec) in [
        (
            "image-source-secret",
            json!({"image": IMAGE, "sourceSecret": git_secret}),
        ),
        (
            "inline-source-secret",
            json!({"inline": INLINE, "sourceSecret": git_secret}),
        ),
    ] {
        cards
            .rejects(how, name, spec, "spec", SOURCE_SECRET_NEEDS_SOURCE)
            .await;
    }

    let secrets = json!([{"name": "ghcr"}, {"name": "quay"}]);
    cards
        .accepts(
            how,
            "image-secrets",
            json!({"image": IMAGE, "pullSecrets": secrets}),
        )
        .await;
    for (name, spec) in [
        (
            "inline-secrets",
            json!({"inline": INLINE, "pullSecrets": secrets}),
        ),
        (
            "source-secrets",
            json!({"source": SOURCE, "pullSecrets": secrets}),
        ),
    ] {
        cards
            .rejects(how, name, spec, "spec", PULL_SECRETS_NEED_IMAGE)
            .await;
    }
    // Lists keyed by name: schema validation names the duplicate; server-side apply refuses
    // it before validation, when it merges.
    let duplicate = json!({"image": IMAGE, "pullSecrets": [{"name": "ghcr"}, {"name": "ghcr"}]});
    cards
        .rejects(
            Via::Create,
            "duplicate-secret",
            duplicate.clone(),
            "spec.pullSecrets[1]",
            "Duplicate value",
        )
        .await;
    let refused = cards.send(Via::Apply, "duplicate-secret", &duplicate).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status))
            if status.message.contains(r#".spec.pullSecrets: duplicate entries for key [name="ghcr"]"#)),
        "server-side apply refuses duplicate pullSecrets: {refused:?}"
    );
}

#[tokio::test]
async fn skill_card_type_is_skill_or_rule_and_defaults_to_skill() {
    let cards = kind::<SkillCard>("cel-skc-type").await;
    let how = Via::Apply;
    let stored = cards.accepts(how, "default", json!({"image": IMAGE})).await;
    assert_eq!(stored["type"], json!("skill"), "the default type: {stored}");
    cards
        .accepts(how, "rule", json!({"image": IMAGE, "type": "rule"}))
        .await;
    cards
        .accepts(how, "skill", json!({"image": IMAGE, "type": "skill"}))
        .await;
    for (name, value) in [("tool", "tool"), ("capitalised", "Rule")] {
        cards
            .rejects(
                how,
                name,
                json!({"image": IMAGE, "type": value}),
                "spec.type",
                r#"supported values: "skill", "rule""#,
            )
            .await;
    }
}

#[tokio::test]
async fn agent_needs_an_image_and_named_references() {
    let agents = kind::<Agent>("cel-agent-required").await;
    let how = Via::Apply;
    let stored = agents
        .accepts(
            how,
            "minimal",
            json!({"image": "harness:1", "gateways": [{"ref": "gw"}], "skillCards": [{"ref": "java"}]}),
        )
        .await;
    assert_eq!(stored["skillDelivery"], json!("native"), "{stored}");

    agents
        .rejects(
            how,
            "no-image",
            json!({"prompt": "no harness"}),
            "spec.image",
            "Required value",
        )
        .await;
    agents
        .rejects(
            how,
            "empty-image",
            json!({"image": ""}),
            "spec.image",
            "should be at least 1 chars long",
        )
        .await;
    for list in ["gateways", "skillCards"] {
        agents
            .rejects(
                Via::Create,
                &format!("{}-without-ref", list.to_lowercase()),
                json!({"image": "harness:1", list: [{}]}),
                &format!("spec.{list}[0].ref"),
                "Required value",
            )
            .await;
        agents
            .rejects(
                Via::Create,
                &format!("{}-twice", list.to_lowercase()),
                json!({"image": "harness:1", list: [{"ref": "a"}, {"ref": "a"}]}),
                &format!("spec.{list}[1]"),
                "Duplicate value",
            )
            .await;
    }
}

#[tokio::test]
async fn agent_skill_delivery_is_any_non_empty_word() {
    let agents = kind::<Agent>("cel-agent-delivery").await;
    let how = Via::Apply;
    // Unknown values are allowed on purpose: the operator falls back to `inject` and says so.
    for (name, delivery) in [
        ("native", "native"),
        ("inject", "inject"),
        ("unknown", "telepathy"),
    ] {
        agents
            .accepts(
                how,
                name,
                json!({"image": "harness:1", "skillDelivery": delivery}),
            )
            .await;
    }
    agents
        .rejects(
            how,
            "empty",
            json!({"image": "harness:1", "skillDelivery": ""}),
            "spec.skillDelivery",
            "should be at least 1 chars long",
        )
        .await;
    agents
        .rejects(
            how,
            "too-long",
            json!({"image": "harness:1", "skillDelivery": "x".repeat(64)}),
            "spec.skillDelivery",
            "may not be more than 63 bytes",
        )
        .await;
}

#[tokio::test]
async fn agent_param_names_are_identifiers_with_a_known_type() {
    let agents = kind::<Agent>("cel-agent-params").await;
    let how = Via::Apply;
    let stored = agents
        .accepts(
            how,
            "identifiers",
            json!({"image": "harness:1", "params": [
                {"name": "targetJdk", "type": "number"},
                {"name": "_private", "type": "boolean"},
                {"name": "repo_2", "type": "string"},
                {"name": "untyped"},
            ]}),
        )
        .await;
    assert_eq!(
        stored["params"][3]["type"],
        json!("string"),
        "a param's type defaults to string: {stored}"
    );

    for (name, param) in [
        ("leading-digit", "2fast"),
        ("dash", "target-jdk"),
        ("space", "target jdk"),
        ("dot", "target.jdk"),
        ("non-ascii", "zielJdkä"),
    ] {
        agents
            .rejects(
                how,
                name,
                json!({"image": "harness:1", "params": [{"name": param}]}),
                "spec.params[0].name",
                "should match '^[a-zA-Z_][a-zA-Z0-9_]*$'",
            )
            .await;
    }
    agents
        .rejects(
            how,
            "integer-type",
            json!({"image": "harness:1", "params": [{"name": "n", "type": "integer"}]}),
            "spec.params[0].type",
            r#"supported values: "string", "number", "boolean""#,
        )
        .await;
    agents
        .rejects(
            Via::Create,
            "same-name",
            json!({"image": "harness:1", "params": [{"name": "n"}, {"name": "n", "type": "number"}]}),
            "spec.params[1]",
            "Duplicate value",
        )
        .await;
}

/// Konveyor's rule: a required param may have an empty default, not another one.
#[tokio::test]
async fn agent_param_with_a_non_empty_default_cannot_be_required() {
    let agents = kind::<Agent>("cel-agent-default").await;
    for how in [Via::Apply, Via::Create] {
        agents
            .accepts(
                how,
                "allowed",
                json!({"image": "harness:1", "params": [
                    {"name": "withDefault", "default": "21"},
                    {"name": "defaultNotRequired", "default": "21", "required": false},
                    {"name": "requiredNoDefault", "required": true},
                    {"name": "emptyDefault", "default": ""},
                    {"name": "emptyAndRequired", "default": "", "required": true},
                ]}),
            )
            .await;
        agents
            .rejects(
                how,
                "both",
                json!({"image": "harness:1", "params": [
                    {"name": "fine", "required": true},
                    {"name": "both", "default": "21", "required": true},
                ]}),
                "spec.params[1]",
                DEFAULT_NOT_REQUIRED,
            )
            .await;
    }
    // Explicit nulls mean "not set" and must not break the rule's evaluation.
    agents
        .accepts(
            Via::Create,
            "nulls",
            json!({"image": "harness:1", "params": [
                {"name": "nullRequired", "default": "21", "required": null},
                {"name": "nullDefault", "default": null, "required": true},
            ]}),
        )
        .await;
}

#[tokio::test]
async fn agent_run_needs_an_agent_and_named_params() {
    let runs = kind::<AgentRun>("cel-run-required").await;
    let how = Via::Apply;
    runs.accepts(
        how,
        "minimal",
        json!({"agentRef": "migrator", "params": [{"name": "targetJdk", "value": "21"}]}),
    )
    .await;
    runs.rejects(
        how,
        "no-agent",
        json!({"instructions": "do it"}),
        "spec.agentRef",
        "Required value",
    )
    .await;
    runs.rejects(
        how,
        "empty-agent",
        json!({"agentRef": ""}),
        "spec.agentRef",
        "should be at least 1 chars long",
    )
    .await;
    runs.rejects(
        how,
        "param-without-value",
        json!({"agentRef": "migrator", "params": [{"name": "targetJdk"}]}),
        "spec.params[0].value",
        "Required value",
    )
    .await;
    runs.rejects(
        Via::Create,
        "param-twice",
        json!({"agentRef": "migrator", "params": [
            {"name": "targetJdk", "value": "21"},
            {"name": "targetJdk", "value": "17"},
        ]}),
        "spec.params[1]",
        "Duplicate value",
    )
    .await;
}

#[tokio::test]
async fn agent_run_spec_is_immutable_but_metadata_and_status_are_not() {
    let runs = kind::<AgentRun>("cel-run-immutable").await;
    let name = "upgrade";
    let spec = json!({
        "agentRef": "migrator",
        "params": [{"name": "targetJdk", "value": "21"}],
        "instructions": "Upgrade to Java 21.",
        "env": [{"name": "A", "value": "b"}],
    });
    let created = runs
        .send(Via::Apply, name, &spec)
        .await
        .expect("the run is created");
    let generation = created.metadata.generation;

    // Every way a user could change the spec is refused.
    let mut changed_instructions = spec.clone();
    changed_instructions["instructions"] = json!("Upgrade to Java 25.");
    let mut changed_param = spec.clone();
    changed_param["params"][0]["value"] = json!("25");
    let mut added_gateway = spec.clone();
    added_gateway["gateway"] = json!("other");
    let mut dropped_env = spec.clone();
    dropped_env
        .as_object_mut()
        .expect("the spec is an object")
        .remove("env");
    for (what, changed) in [
        ("instructions", &changed_instructions),
        ("param value", &changed_param),
        ("gateway", &added_gateway),
        ("env", &dropped_env),
    ] {
        let result = runs.send(Via::Apply, name, changed).await;
        assert_invalid(
            result,
            &format!("applying a changed {what}"),
            "spec",
            RUN_IMMUTABLE,
        );
    }
    let mut replaced = runs.api.get(name).await.expect("the run exists");
    replaced.data["spec"] = changed_instructions.clone();
    let result = runs
        .api
        .replace(name, &PostParams::default(), &replaced)
        .await;
    assert_invalid(result, "replacing the spec", "spec", RUN_IMMUTABLE);
    let result = runs
        .api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"instructions": "Upgrade to Java 25."}})),
        )
        .await;
    assert_invalid(result, "merge-patching the spec", "spec", RUN_IMMUTABLE);

    // Labels and annotations may change; re-applying the same spec is no change.
    let labelled = runs
        .api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "migrations"}}})),
        )
        .await
        .expect("adding a label is allowed");
    assert_eq!(labelled.metadata.generation, generation);
    let mut reapplied = runs.object(name, &spec);
    reapplied.metadata.annotations = Some(
        [("note".to_owned(), "same spec".to_owned())]
            .into_iter()
            .collect(),
    );
    let reapplied = runs
        .api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&reapplied),
        )
        .await
        .expect("re-applying the same spec with an annotation is allowed");
    assert_eq!(reapplied.data["spec"], spec);
    assert_eq!(
        reapplied.metadata.labels.unwrap_or_default().get("team"),
        Some(&"migrations".to_owned())
    );

    // The operator writes status through the status subresource.
    let with_status = runs
        .api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .expect("status may change");
    assert_eq!(with_status.data["status"]["phase"], json!("Running"));
    assert_eq!(with_status.data["spec"], spec);
}

#[tokio::test]
async fn agent_run_spec_takes_cancel_once_and_nothing_else() {
    let runs = kind::<AgentRun>("cel-run-cancel").await;
    let spec = json!({
        "agentRef": "migrator",
        "instructions": "Upgrade to Java 21.",
        "startupDeadlineSeconds": 60,
    });
    let merge = |patch: Value| {
        let api = runs.api.clone();
        async move {
            api.patch("upgrade", &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    };
    runs.send(Via::Apply, "upgrade", &spec)
        .await
        .expect("the run is created");

    // Cancelling together with another change, or writing false, is a change of the spec.
    let result = merge(json!({"spec": {"cancel": true, "instructions": "Something else."}})).await;
    assert_invalid(
        result,
        "cancel with new instructions",
        "spec",
        RUN_IMMUTABLE,
    );
    let result = merge(json!({"spec": {"cancel": true, "startupDeadlineSeconds": 1}})).await;
    assert_invalid(result, "cancel with a new deadline", "spec", RUN_IMMUTABLE);
    let result = merge(json!({"spec": {"cancel": true, "activeDeadlineSeconds": 5}})).await;
    assert_invalid(result, "cancel with a run deadline", "spec", RUN_IMMUTABLE);
    let result = merge(json!({"spec": {"cancel": true, "ttlSecondsAfterFinished": 0}})).await;
    assert_invalid(result, "cancel with a TTL", "spec", RUN_IMMUTABLE);
    let result = merge(json!({"spec": {"cancel": false}})).await;
    assert_invalid(result, "unset to false", "spec", RUN_IMMUTABLE);

    // Unset to true: the kubectl patch of the operations guide.
    let cancelled = merge(json!({"spec": {"cancel": true}}))
        .await
        .expect("setting spec.cancel to true is allowed");
    let mut expected = spec.clone();
    expected["cancel"] = json!(true);
    assert_eq!(cancelled.data["spec"], expected);
    merge(json!({"spec": {"cancel": true}}))
        .await
        .expect("writing true again is no change");

    // Once true, it stays true.
    let result = merge(json!({"spec": {"cancel": false}})).await;
    assert_invalid(result, "true to false", "spec", RUN_IMMUTABLE);
    let result = merge(json!({"spec": {"cancel": null}})).await;
    assert_invalid(result, "true to unset", "spec", RUN_IMMUTABLE);

    // false to true is allowed as well.
    let mut not_cancelled = spec.clone();
    not_cancelled["cancel"] = json!(false);
    runs.send(Via::Apply, "later", &not_cancelled)
        .await
        .expect("a run created with cancel false");
    runs.api
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cancel": true}})),
        )
        .await
        .expect("false to true is allowed");
}

#[tokio::test]
async fn gateway_needs_a_provider_and_a_model_with_a_positive_context_window() {
    let gateways = kind::<Gateway>("cel-gateway").await;
    let how = Via::Apply;
    let model = |window: i64| json!({"name": "gpt-4o-mini", "contextWindow": window});
    gateways
        .accepts(
            how,
            "smallest",
            json!({"provider": "openai", "model": model(1)}),
        )
        .await;
    gateways
        .accepts(
            how,
            "large",
            json!({"provider": "openai", "model": model(2_000_000)}),
        )
        .await;
    for (name, window) in [("zero", 0), ("negative", -1)] {
        gateways
            .rejects(
                how,
                name,
                json!({"provider": "openai", "model": model(window)}),
                "spec.model.contextWindow",
                "should be greater than or equal to 1",
            )
            .await;
    }
    for (name, spec, field) in [
        ("no-provider", json!({"model": model(8)}), "spec.provider"),
        ("no-model", json!({"provider": "openai"}), "spec.model"),
        (
            "no-model-name",
            json!({"provider": "openai", "model": {"contextWindow": 8}}),
            "spec.model.name",
        ),
        (
            "no-context-window",
            json!({"provider": "openai", "model": {"name": "m"}}),
            "spec.model.contextWindow",
        ),
        (
            "no-secret-name",
            json!({"provider": "openai", "model": model(8), "credentialRef": {"key": "api-key"}}),
            "spec.credentialRef.secretName",
        ),
    ] {
        gateways
            .rejects(how, name, spec, field, "Required value")
            .await;
    }
}

/// References go into request paths: only object names (DNS-1123 subdomains) are accepted.
#[tokio::test]
async fn references_are_object_names() {
    const BAD: [&str; 3] = ["../secrets", "a/b", "Upper"];
    let agents = kind::<Agent>("cel-ref-agent").await;
    let runs = kind::<AgentRun>("cel-ref-run").await;
    let gateways = kind::<Gateway>("cel-ref-gateway").await;
    let cards = kind::<SkillCard>("cel-ref-card").await;
    agents
        .accepts(
            Via::Apply,
            "dotted",
            json!({"image": "harness:1", "gateways": [{"ref": "gw.v2"}]}),
        )
        .await;
    for (index, bad) in BAD.iter().enumerate() {
        for list in ["gateways", "skillCards"] {
            agents
                .rejects(
                    Via::Apply,
                    &format!("{}-{index}", list.to_lowercase()),
                    json!({"image": "harness:1", list: [{"ref": bad}]}),
                    &format!("spec.{list}[0].ref"),
                    "should match",
                )
                .await;
        }
        for field in ["agentRef", "gateway"] {
            let mut spec = json!({"agentRef": "migrator"});
            spec[field] = json!(bad);
            runs.rejects(
                Via::Apply,
                &format!("{}-{index}", field.to_lowercase()),
                spec,
                &format!("spec.{field}"),
                "should match",
            )
            .await;
        }
        gateways
            .rejects(
                Via::Apply,
                &format!("secret-{index}"),
                json!({
                    "provider": "openai",
                    "model": {"name": "gpt", "contextWindow": 8},
                    "credentialRef": {"secretName": bad},
                }),
                "spec.credentialRef.secretName",
                "should match",
            )
            .await;
        cards
            .rejects(
                Via::Apply,
                &format!("pull-{index}"),
                json!({"image": "registry.example/skill:1", "pullSecrets": [{"name": bad}]}),
                "spec.pullSecrets[0].name",
                "should match",
            )
            .await;
    }
}

#[tokio::test]
async fn the_runtime_container_runs_under_a_user_of_its_own() {
    let agents = kind::<Agent>("cel-agent-runtime").await;
    let command = json!(["goose", "serve", "--port", "$(KONVEYOR_RUNTIME_ACP_PORT)"]);
    for how in [Via::Apply, Via::Create] {
        // The defaults (ADR 0017's 1001 and 1002) differ.
        let stored = agents
            .accepts(
                how,
                "defaults",
                json!({"image": "h:1", "runtime": {"command": command}}),
            )
            .await;
        assert_eq!(
            (
                &stored["runtime"]["harnessUser"],
                &stored["runtime"]["runtimeUser"]
            ),
            (&json!(1001), &json!(1002))
        );
        agents
            .accepts(
                how,
                "chosen",
                json!({"image": "h:1",
                       "runtime": {"command": command, "harnessUser": 2000, "runtimeUser": 2001}}),
            )
            .await;
        agents
            .rejects(
                how,
                "same-user",
                json!({"image": "h:1",
                       "runtime": {"command": command, "harnessUser": 1001, "runtimeUser": 1001}}),
                "spec.runtime",
                RUNTIME_USERS_DIFFER,
            )
            .await;
        agents
            .rejects(
                how,
                "default-clash",
                json!({"image": "h:1", "runtime": {"command": command, "runtimeUser": 1001}}),
                "spec.runtime",
                RUNTIME_USERS_DIFFER,
            )
            .await;
    }
}

#[tokio::test]
async fn run_contract_fields_are_checked() {
    let runs = kind::<AgentRun>("cel-run-contract").await;
    let agents = kind::<Agent>("cel-agent-contract").await;
    for how in [Via::Apply, Via::Create] {
        runs.accepts(
            how,
            "full",
            json!({"agentRef": "a",
                   "execution": {"mode": "auto", "maxTurns": 1, "maxCost": "0"},
                   "workflowParams": {"nested": {"deep": [1, {"x": null}]}, "n": 1.5},
                   "gitConfig": {"userName": "Zoë Bot", "userEmail": "zoe@example.com"},
                   "fileMounts": [{"mountPath": "/etc/a", "configMapName": "c"}]}),
        )
        .await;
        runs.accepts(how, "empty-git", json!({"agentRef": "a", "gitConfig": {}}))
            .await;
        agents
            .accepts(
                how,
                "limits",
                json!({"image": "h:1", "execution": {"maxTurns": 3, "maxCost": "12.34"},
                       "gitConfig": {"userName": "A", "userEmail": "a@b"}}),
            )
            .await;
        runs.rejects(
            how,
            "half-git",
            json!({"agentRef": "a", "gitConfig": {"userName": "Bot"}}),
            "spec.gitConfig",
            GIT_BOTH_OR_NEITHER,
        )
        .await;
        agents
            .rejects(
                how,
                "half-git",
                json!({"image": "h:1", "gitConfig": {"userEmail": "a@b"}}),
                "spec.gitConfig",
                GIT_BOTH_OR_NEITHER,
            )
            .await;
        runs.rejects(
            how,
            "no-source",
            json!({"agentRef": "a", "fileMounts": [{"mountPath": "/etc/a"}]}),
            "spec.fileMounts[0]",
            FILE_MOUNT_ONE_SOURCE,
        )
        .await;
        runs.rejects(
            how,
            "two-sources",
            json!({"agentRef": "a", "fileMounts": [
                {"mountPath": "/etc/a", "secretName": "s", "configMapName": "c"}]}),
            "spec.fileMounts[0]",
            FILE_MOUNT_ONE_SOURCE,
        )
        .await;
    }
    for (name, spec, field, message) in [
        (
            "bad-mode",
            json!({"agentRef": "a", "execution": {"mode": "manual"}}),
            "spec.execution.mode",
            "Unsupported value",
        ),
        (
            "zero-turns",
            json!({"agentRef": "a", "execution": {"maxTurns": 0}}),
            "spec.execution.maxTurns",
            "greater than or equal to 1",
        ),
        (
            "cost-cents",
            json!({"agentRef": "a", "execution": {"maxCost": "1.234"}}),
            "spec.execution.maxCost",
            "should match",
        ),
        (
            "cost-currency",
            json!({"agentRef": "a", "execution": {"maxCost": "$5"}}),
            "spec.execution.maxCost",
            "should match",
        ),
        (
            "name-brackets",
            json!({"agentRef": "a", "gitConfig": {"userName": "Bot <x>", "userEmail": "a@b"}}),
            "spec.gitConfig.userName",
            "should match",
        ),
        (
            "name-newline",
            json!({"agentRef": "a", "gitConfig": {"userName": "Bot\nX", "userEmail": "a@b"}}),
            "spec.gitConfig.userName",
            "should match",
        ),
        (
            "name-long",
            json!({"agentRef": "a", "gitConfig": {"userName": "n".repeat(129), "userEmail": "a@b"}}),
            "spec.gitConfig.userName",
            "Too long",
        ),
        (
            "email-no-at",
            json!({"agentRef": "a", "gitConfig": {"userName": "Bot", "userEmail": "bot.example.com"}}),
            "spec.gitConfig.userEmail",
            "should match",
        ),
        (
            "email-long",
            json!({"agentRef": "a", "gitConfig": {"userName": "Bot",
                   "userEmail": format!("{}@example.com", "b".repeat(243))}}),
            "spec.gitConfig.userEmail",
            "Too long",
        ),
        (
            "params-not-object",
            json!({"agentRef": "a", "workflowParams": [1, 2]}),
            "spec.workflowParams",
            "must be of type object",
        ),
        (
            "mount-twice",
            json!({"agentRef": "a", "fileMounts": [
                {"mountPath": "/etc/a", "secretName": "s"},
                {"mountPath": "/etc/a", "configMapName": "c"}]}),
            "spec.fileMounts[1]",
            "Duplicate value",
        ),
    ] {
        runs.rejects(Via::Create, name, spec, field, message).await;
    }
    agents
        .rejects(
            Via::Create,
            "zero-turns",
            json!({"image": "h:1", "execution": {"maxTurns": 0}}),
            "spec.execution.maxTurns",
            "greater than or equal to 1",
        )
        .await;
}

/// Kubernetes 1.36's env shapes, which Konveyor's schema takes: references without `name`
/// and `fileKeyRef`. The server stores them as written and the operator's types keep
/// `fileKeyRef` (an absent `name` reads as empty).
#[tokio::test]
async fn env_takes_the_kubernetes_1_36_shapes() {
    let runs = kind::<AgentRun>("cel-run-env").await;
    let spec = json!({"agentRef": "a",
        "env": [
            {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"key": "k"}}},
            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"key": "k", "optional": true}}},
            {"name": "FROM_FILE", "valueFrom": {"fileKeyRef": {
                "volumeName": "config", "path": "app.env", "key": "TOKEN", "optional": false}}},
        ],
        "envFrom": [{"configMapRef": {}}, {"secretRef": {"optional": true}, "prefix": "S_"}],
    });
    for how in [Via::Apply, Via::Create] {
        runs.accepts(how, "k8s-136", spec.clone()).await;
    }
    let typed: AgentRun = serde_json::from_value(json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": "k8s-136"}, "spec": spec,
    }))
    .expect("the operator reads it");
    let file = typed.spec.env[2]
        .value_from
        .as_ref()
        .and_then(|source| source.file_key_ref.as_ref())
        .expect("fileKeyRef is kept");
    assert_eq!(
        (
            file.volume_name.as_str(),
            file.path.as_str(),
            file.key.as_str()
        ),
        ("config", "app.env", "TOKEN")
    );
    runs.rejects(
        Via::Create,
        "file-no-path",
        json!({"agentRef": "a", "env": [{"name": "F", "valueFrom": {"fileKeyRef": {
            "volumeName": "config", "key": "TOKEN"}}}]}),
        "spec.env[0].valueFrom.fileKeyRef.path",
        "Required value",
    )
    .await;
}

#[tokio::test]
async fn agent_workflow_run_spec_takes_cancel_once_and_nothing_else() {
    let runs = kind::<AgentWorkflowRun>("cel-awr-cancel").await;
    let spec = json!({
        "workflowRef": "migrate",
        "params": [{"name": "ticket", "value": "MIG-1"}],
        "ttlSecondsAfterFinished": 60,
    });
    let merge = |patch: Value| {
        let api = runs.api.clone();
        async move {
            api.patch("migrate-1", &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    };
    runs.send(Via::Apply, "migrate-1", &spec)
        .await
        .expect("the workflow run is created");

    for (patch, what) in [
        (
            json!({"spec": {"cancel": true, "workflowRef": "other"}}),
            "cancel with a new workflow",
        ),
        (
            json!({"spec": {"cancel": true, "ttlSecondsAfterFinished": 0}}),
            "cancel with a new TTL",
        ),
        (
            json!({"spec": {"cancel": true, "gateway": "gw"}}),
            "cancel with a gateway",
        ),
        (
            json!({"spec": {"cancel": true, "fileMounts": [{"mountPath": "/etc/x", "secretName": "s"}]}}),
            "cancel with file mounts",
        ),
        (
            json!({"spec": {"params": [{"name": "ticket", "value": "MIG-2"}]}}),
            "new params",
        ),
        (json!({"spec": {"cancel": false}}), "unset to false"),
    ] {
        assert_invalid(merge(patch).await, what, "spec", WORKFLOW_RUN_IMMUTABLE);
    }
    let cancelled = merge(json!({"spec": {"cancel": true}}))
        .await
        .expect("setting spec.cancel to true is allowed");
    let mut expected = spec.clone();
    expected["cancel"] = json!(true);
    assert_eq!(cancelled.data["spec"], expected);
    let result = merge(json!({"spec": {"cancel": false}})).await;
    assert_invalid(result, "true to false", "spec", WORKFLOW_RUN_IMMUTABLE);

    // Metadata and status stay writable.
    runs.api
        .patch(
            "migrate-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .expect("labels may change");
}

#[tokio::test]
async fn agent_workflow_stages_are_named_labels_and_at_least_one() {
    let workflows = kind::<AgentWorkflow>("cel-aw-stages").await;
    workflows
        .accepts(
            Via::Apply,
            "ok",
            json!({"stages": [{"name": "a.b-1", "agentRef": "x"}, {"name": "b", "agentRef": "y"}]}),
        )
        .await;
    for how in [Via::Apply, Via::Create] {
        workflows
            .rejects(
                how,
                "upper",
                json!({"stages": [{"name": "Plan", "agentRef": "x"}]}),
                "spec.stages[0].name",
                "should match",
            )
            .await;
        workflows
            .rejects(
                how,
                "long",
                json!({"stages": [{"name": "a".repeat(64), "agentRef": "x"}]}),
                "spec.stages[0].name",
                "may not be more than 63",
            )
            .await;
        workflows
            .rejects(
                how,
                "none",
                json!({"stages": []}),
                "spec.stages",
                "should have at least 1 items",
            )
            .await;
        workflows
            .rejects(
                how,
                "no-agent",
                json!({"stages": [{"name": "a"}]}),
                "spec.stages[0].agentRef",
                "Required value",
            )
            .await;
    }
}
