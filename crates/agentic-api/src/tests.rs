use super::*;
use serde_json::Value;

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("schema serializes")
}

#[test]
fn every_kind_is_namespaced_with_status_in_konveyor_v1alpha1() {
    for crd in crds() {
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, VERSION);
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} has no status subresource",
            crd.spec.names.kind
        );
    }
}

#[test]
fn short_names_match_the_platform() {
    let names: Vec<(String, Vec<String>)> = crds()
        .into_iter()
        .map(|c| {
            (
                c.spec.names.kind,
                c.spec.names.short_names.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("SkillCard".to_string(), vec!["skc".to_string()]),
            ("Agent".to_string(), vec!["ag".to_string()]),
            ("AgentRun".to_string(), vec!["ar".to_string()]),
            ("Gateway".to_string(), vec!["gw".to_string()]),
            ("SkillCollection".to_string(), vec!["scol".to_string()]),
            ("AgentWorkflow".to_string(), vec!["aw".to_string()]),
            ("AgentWorkflowRun".to_string(), vec!["awr".to_string()]),
        ]
    );
}

#[test]
fn conditions_merge_by_type_everywhere() {
    for crd in crds() {
        let schema = schema_of(&crd);
        let conditions = &schema["properties"]["status"]["properties"]["conditions"];
        assert_eq!(
            conditions["x-kubernetes-list-type"], "map",
            "{}",
            crd.spec.names.kind
        );
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"]),
            "{}",
            crd.spec.names.kind
        );
    }
}

#[test]
fn no_unsigned_integer_formats() {
    for text in [crds_yaml(), trust_crds_yaml()] {
        let text = text.expect("yaml");
        assert!(!text.contains("format: uint"), "unsigned format found");
    }
}

#[test]
fn trust_policies_live_in_our_group_one_per_scope() {
    let kinds: Vec<(String, String, String)> = trust_crds()
        .into_iter()
        .map(|crd| (crd.spec.names.kind, crd.spec.scope, crd.spec.group))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ClusterSkillTrustPolicy", "Cluster"),
            ("SkillTrustPolicy", "Namespaced"),
        ]
        .map(|(kind, scope)| (
            kind.to_string(),
            scope.to_string(),
            TRUST_GROUP.to_string()
        ))
    );
    for crd in trust_crds() {
        assert_ne!(crd.spec.group, GROUP, "never in Konveyor's group");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, VERSION);
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} has no status subresource",
            crd.spec.names.kind
        );
        let schema = schema_of(&crd);
        let conditions = &schema["properties"]["status"]["properties"]["conditions"];
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
    }
}

#[test]
fn both_trust_policy_kinds_share_one_spec_schema() {
    let [cluster, namespaced] = [ClusterSkillTrustPolicy::crd(), SkillTrustPolicy::crd()]
        .map(|crd| schema_of(&crd)["properties"]["spec"]["properties"].clone());
    assert_eq!(cluster, namespaced);
    let properties: Vec<&String> = cluster.as_object().expect("properties").keys().collect();
    assert_eq!(
        properties,
        [
            "action",
            "gitSigners",
            "images",
            "keyless",
            "keys",
            "mode",
            "revoked",
            "signatureBinding",
            "sources",
            "trustRoot",
            "unselected"
        ]
    );
}

#[test]
fn trust_policy_manifests_deserialize() {
    let policy: ClusterSkillTrustPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "trust.agentic-operator.io/v1alpha1", "kind": "ClusterSkillTrustPolicy",
        "metadata": {"name": "signed-skills"},
        "spec": {"images": ["registry.example/skills/**"], "mode": "Enforce", "action": "Cancel",
                  "keys": [{"pem": "-----BEGIN PUBLIC KEY-----"},
                           {"secretKeyRef": {"name": "keys", "key": "next.pub", "namespace": "platform"}}],
                  "keyless": [{"issuer": "https://issuer.example", "subjectRegExp": "^https://ci.example/.*$"}],
                  "trustRoot": {"fulcioCertificates": [{"configMapKeyRef": {"name": "root", "key": "fulcio.pem", "namespace": "platform"}}],
                                "rekorKeys": [{"pem": "k"}]},
                  "gitSigners": {"allowedSigners": {"pem": "dev@example ssh-ed25519 AAAA"}},
                  "revoked": {"digests": ["sha256:0000000000000000000000000000000000000000000000000000000000000000"],
                              "keys": ["sha256:ab"]}}
    }))
    .expect("a cluster policy");
    let spec = &policy.spec.policy;
    assert_eq!(spec.action, RevocationAction::Cancel);
    assert_eq!(spec.keys.len(), 2);
    assert_eq!(
        spec.keyless[0].subject_reg_exp.as_deref(),
        Some("^https://ci.example/.*$")
    );
    let defaulted: SkillTrustPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "trust.agentic-operator.io/v1alpha1", "kind": "SkillTrustPolicy",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"sources": ["https://git.example/**"]}
    }))
    .expect("a namespaced policy");
    assert_eq!(defaulted.spec.policy.mode, TrustMode::Enforce);
    assert_eq!(defaulted.spec.policy.action, RevocationAction::Block);
}

#[test]
fn defaults_are_in_the_schema() {
    let skc = schema_of(&SkillCard::crd());
    assert_eq!(
        skc["properties"]["spec"]["properties"]["type"]["default"],
        "skill"
    );
    let ag = schema_of(&Agent::crd());
    assert_eq!(
        ag["properties"]["spec"]["properties"]["skillDelivery"]["default"],
        "native"
    );
    assert_eq!(
        ag["properties"]["spec"]["properties"]["params"]["items"]["properties"]["type"]["default"],
        "string"
    );
}

/// The final schema of a kind, as [`crds`] makes it.
fn final_schema_of(kind: &str) -> Value {
    let crd = crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .expect("a CRD of that kind");
    schema_of(&crd)
}

#[test]
fn konveyors_defaults_are_in_the_final_schema() {
    for kind in ["AgentRun", "AgentWorkflowRun"] {
        let schema = final_schema_of(kind);
        assert_eq!(
            schema["properties"]["status"]["properties"]["phase"]["default"], "Pending",
            "{kind}"
        );
        let spec = &schema["properties"]["spec"]["properties"];
        let value_from = &spec["env"]["items"]["properties"]["valueFrom"]["properties"];
        for reference in ["configMapKeyRef", "secretKeyRef"] {
            assert_eq!(
                value_from[reference]["properties"]["name"]["default"], "",
                "{kind} {reference}"
            );
        }
        assert_eq!(
            value_from["fileKeyRef"]["properties"]["optional"]["default"], false,
            "{kind}"
        );
        let env_from = &spec["envFrom"]["items"]["properties"];
        for reference in ["configMapRef", "secretRef"] {
            assert_eq!(
                env_from[reference]["properties"]["name"]["default"], "",
                "{kind} {reference}"
            );
        }
    }
    for kind in ["Agent", "SkillCard", "Gateway"] {
        assert_eq!(
            final_schema_of(kind)["properties"]["status"]["properties"]["phase"],
            Value::Null,
            "{kind} has no phase to default"
        );
    }
}

#[test]
fn platform_manifests_deserialize_with_exact_field_names() {
    let skill: SkillCard = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "SkillCard",
        "metadata": {"name": "java", "namespace": "ns"},
        "spec": {"image": "registry.example/skills:1", "subPath": "skills/java", "type": "rule",
                  "displayName": "Java", "version": "1.0", "tags": ["java"]}
    }))
    .expect("skillcard");
    assert_eq!(skill.spec.sub_path.as_deref(), Some("skills/java"));
    assert_eq!(skill.spec.skill_type, SkillType::Rule);

    let agent: Agent = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "Agent",
        "metadata": {"name": "migrator"},
        "spec": {"image": "harness:1", "gateways": [{"ref": "gw"}], "skillCards": [{"ref": "java"}],
                  "params": [{"name": "target", "type": "number", "required": true}]}
    }))
    .expect("agent");
    assert_eq!(agent.spec.skill_cards[0].name, "java");
    assert_eq!(agent.spec.skill_delivery, "native");
    assert_eq!(agent.spec.params[0].param_type, ParamType::Number);

    let run: AgentRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": "r1"},
        "spec": {"agentRef": "migrator", "params": [{"name": "target", "value": "3"}],
                  "env": [{"name": "A", "value": "b"}], "envFrom": [{"secretRef": {"name": "s"}}]}
    }))
    .expect("agentrun");
    assert_eq!(run.spec.agent_ref, "migrator");

    let gw: Gateway = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw"},
        "spec": {"provider": "openai", "endpoint": "https://llm", "credentialRef": {"secretName": "k", "key": "api"},
                  "model": {"name": "m", "contextWindow": 128_000, "tier": "smart"}}
    }))
    .expect("gateway");
    assert_eq!(gw.spec.model.context_window, 128_000);
}

#[test]
fn cel_rules_are_declared_where_the_api_promises() {
    let text = crds_yaml().expect("yaml");
    for needle in [
        "exactly one of spec.image, spec.inline or spec.source must be set",
        "spec.subPath is only allowed with spec.image or spec.source",
        "spec.subPath must be relative",
        "spec.subPath must not contain '..' segments",
        "a param with a non-empty default cannot be required",
        crate::agentrun::SPEC_IMMUTABLE_MESSAGE,
        crate::WORKFLOW_RUN_SPEC_IMMUTABLE_MESSAGE,
    ] {
        assert!(text.contains(needle), "missing CEL rule: {needle}");
    }
}

#[test]
fn committed_manifests_match_the_code() {
    let konveyor = crds_yaml().expect("yaml");
    let trust = trust_crds_yaml().expect("yaml");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (path, generated) in [
        ("config/crd/bases/konveyor.io.yaml", &konveyor),
        (
            "charts/agentic-operator/files/crds/konveyor.io.yaml",
            &konveyor,
        ),
        ("config/crd/bases/trust.agentic-operator.io.yaml", &trust),
        (
            "charts/agentic-operator/files/crds/trust.agentic-operator.io.yaml",
            &trust,
        ),
    ] {
        let committed = std::fs::read_to_string(root.join(path))
            .unwrap_or_else(|e| panic!("{path}: {e}; run `make crds`"));
        assert!(
            &committed == generated,
            "{path} drifted from the Rust types; run `make crds` and commit the result"
        );
    }
}

/// Every `description` string anywhere in `value`. A property named `description` holds a
/// schema object, not a string, so it is walked into rather than collected.
fn descriptions(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::String(text) if key == "description" => out.push(text.clone()),
                    other => descriptions(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| descriptions(v, out)),
        _ => {}
    }
}

#[test]
fn descriptions_have_no_line_break_inside_a_paragraph() {
    let mut found = Vec::new();
    for crd in crds().into_iter().chain(trust_crds()) {
        descriptions(&serde_json::to_value(&crd).expect("crd"), &mut found);
    }
    assert!(
        found.len() > 50,
        "only {} descriptions found: the walk misses the schemas",
        found.len()
    );
    let ragged: Vec<&String> = found
        .iter()
        .filter(|d| d.split("\n\n").any(|paragraph| paragraph.contains('\n')))
        .collect();
    assert!(
        ragged.is_empty(),
        "`kubectl explain` would print these with hard line breaks: {ragged:#?}"
    );
}

#[test]
fn the_immutability_rule_names_every_run_spec_field_but_cancel() {
    let everything = AgentRunSpec {
        agent_ref: "a".into(),
        gateway: Some("g".into()),
        params: vec![crate::RunParam::default()],
        instructions: Some("i".into()),
        env: vec![k8s_openapi::api::core::v1::EnvVar::default()],
        env_from: vec![k8s_openapi::api::core::v1::EnvFromSource::default()],
        startup_deadline_seconds: Some(1),
        active_deadline_seconds: Some(1),
        ttl_seconds_after_finished: Some(1),
        cancel: Some(true),
        execution: Some(crate::RunExecution::default()),
        workflow_params: Some(serde_json::Map::new()),
        git_config: Some(crate::GitConfig::default()),
        file_mounts: vec![crate::FileMount::default()],
    };
    let fields = serde_json::to_value(&everything).expect("the spec serializes");
    let fields = fields.as_object().expect("an object");
    assert_eq!(fields.len(), 14, "every field is set above: {fields:?}");
    let rule = crate::agentrun::SPEC_IMMUTABLE_RULE;
    for field in fields.keys().filter(|f| *f != "cancel") {
        let compared = format!("(!has(self.{field}) || self.{field} == oldSelf.{field})");
        let required = format!("self.{field} == oldSelf.{field}");
        assert!(
            rule.contains(&compared) || rule.contains(&required),
            "spec.{field} must stay immutable: {rule}"
        );
    }
}

#[test]
fn the_immutability_rule_names_every_workflow_run_spec_field_but_cancel() {
    let everything = AgentWorkflowRunSpec {
        workflow_ref: "w".into(),
        gateway: Some("g".into()),
        params: vec![crate::RunParam::default()],
        env: vec![k8s_openapi::api::core::v1::EnvVar::default()],
        env_from: vec![k8s_openapi::api::core::v1::EnvFromSource::default()],
        file_mounts: vec![crate::FileMount::default()],
        ttl_seconds_after_finished: Some(1),
        cancel: Some(true),
    };
    let fields = serde_json::to_value(&everything).expect("the spec serializes");
    let fields = fields.as_object().expect("an object");
    assert_eq!(fields.len(), 8, "every field is set above: {fields:?}");
    let rule = crate::WORKFLOW_RUN_SPEC_IMMUTABLE_RULE;
    for field in fields.keys().filter(|f| *f != "cancel") {
        let compared = format!("(!has(self.{field}) || self.{field} == oldSelf.{field})");
        let required = format!("self.{field} == oldSelf.{field}");
        assert!(
            rule.contains(&compared) || rule.contains(&required),
            "spec.{field} must stay immutable: {rule}"
        );
    }
}

#[test]
fn workflow_manifests_deserialize_with_exact_field_names() {
    let workflow: AgentWorkflow = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflow",
        "metadata": {"name": "migrate"},
        "spec": {"guide": "Move to $(workflow.target)",
                  "params": [{"name": "target", "type": "string", "default": "quarkus"}],
                  "stages": [
                      {"name": "plan", "agentRef": "planner", "instructions": "write PLAN.md"},
                      {"name": "execute", "agentRef": "doer", "execution": {"mode": "approve", "maxTurns": 5}}]}
    }))
    .expect("agentworkflow");
    assert_eq!(workflow.spec.stages[1].agent_ref, "doer");
    assert_eq!(
        workflow.spec.stages[1]
            .execution
            .as_ref()
            .and_then(|e| e.max_turns),
        Some(5)
    );
    assert_eq!(workflow.spec.params[0].name, "target");

    let run: AgentWorkflowRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentWorkflowRun",
        "metadata": {"name": "migrate-1"},
        "spec": {"workflowRef": "migrate", "gateway": "gw",
                  "params": [{"name": "target", "value": "spring"}],
                  "env": [{"name": "APP_ID", "value": "1"}], "envFrom": [{"configMapRef": {"name": "c"}}]},
        "status": {"phase": "Running", "currentStage": "plan", "guide": "g",
                    "stages": [{"name": "plan", "phase": "Running", "agentRunName": "migrate-1-plan",
                                "agentRef": "planner", "instructions": "write PLAN.md"}]}
    }))
    .expect("agentworkflowrun");
    assert_eq!(run.spec.workflow_ref, "migrate");
    let status = run.status.expect("status");
    assert_eq!(status.phase, Some(AgentRunPhase::Running));
    assert_eq!(
        status.stages[0].agent_run_name.as_deref(),
        Some("migrate-1-plan")
    );
}

#[test]
fn workflow_stages_are_a_map_keyed_by_name_with_label_safe_names() {
    let schema = schema_of(&AgentWorkflow::crd());
    let stages = &schema["properties"]["spec"]["properties"]["stages"];
    assert_eq!(stages["x-kubernetes-list-type"], "map");
    assert_eq!(
        stages["x-kubernetes-list-map-keys"],
        serde_json::json!(["name"])
    );
    assert_eq!(stages["minItems"], 1);
    let name = &stages["items"]["properties"]["name"];
    assert_eq!(name["pattern"], STAGE_NAME_PATTERN);
    assert_eq!(name["maxLength"], 63);
    let required = &schema["properties"]["spec"]["required"];
    assert_eq!(required, &serde_json::json!(["stages"]));
}
