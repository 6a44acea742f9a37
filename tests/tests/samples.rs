//! The samples in config/samples: the skills are valid, the manifests are objects of our API
//! with no misspelt field, their references resolve, and they name the images that
//! hack/push-samples.sh pushes.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use agentic_api::{Agent, AgentRun, Gateway, SkillCard};
use agentic_integration_tests::files_below;
use agentic_integration_tests::support;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use support::{
    all_of_kind, find, kind, meta, parse_yaml_stream, read_yaml_file, repo_root, run_ok,
};

const SKILLS: &str = "config/samples/skills";
const MANIFESTS: [&str; 4] = [
    "config/samples/gateway.yaml",
    "config/samples/skillcards.yaml",
    "config/samples/agent.yaml",
    "config/samples/agentrun.yaml",
];
const PLACEHOLDER: &str = "REGISTRY/";

fn sample_objects() -> Vec<Value> {
    MANIFESTS.iter().flat_map(|m| read_yaml_file(m)).collect()
}

/// Every skill directory (a directory holding SKILL.md) under config/samples/skills; a
/// SKILL.md inside a skill is part of that skill, not one of its own.
fn skill_dirs() -> Vec<std::path::PathBuf> {
    let skills = repo_root().join(SKILLS);
    let holding_skill_md: Vec<std::path::PathBuf> = files_below(&skills)
        .into_iter()
        .filter(|relative| relative.file_name().is_some_and(|name| name == "SKILL.md"))
        .map(|relative| skills.join(relative.parent().expect("a file has a parent")))
        .collect();
    holding_skill_md
        .iter()
        .filter(|dir| {
            !holding_skill_md
                .iter()
                .any(|other| other != *dir && dir.starts_with(other))
        })
        .cloned()
        .collect()
}

#[test]
fn every_sample_skill_is_valid() {
    let dirs = skill_dirs();
    let names: BTreeSet<String> = dirs
        .iter()
        .map(|d| d.file_name().expect("named").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(
            [
                "java-upgrade",
                "maven-deps",
                "no-system-out",
                "quarkus-config"
            ]
            .map(String::from)
        )
    );
    for dir in &dirs {
        let report = agentic_skill::validate_path(dir)
            .unwrap_or_else(|e| panic!("cannot validate {}: {e}", dir.display()));
        assert!(report.is_valid(), "{}: {}", dir.display(), report.summary());
        assert!(
            report.warnings.is_empty(),
            "{}: warnings {:?}",
            dir.display(),
            report.warnings
        );
    }
    assert!(
        repo_root()
            .join(SKILLS)
            .join("java-upgrade/references/removed-apis.md")
            .is_file(),
        "java-upgrade ships a references/ folder"
    );
}

/// `original` with every field it sets also set, to the same value, in `typed`: a field the
/// type does not know (a typo) is dropped by serde and shows up here.
fn assert_no_field_lost(original: &Value, typed: &Value, path: &str) {
    match (original, typed) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in want {
                let field = format!("{path}.{key}");
                let Some(kept) = got.get(key) else {
                    panic!("{field} is not a field of the API (misspelt?)");
                };
                assert_no_field_lost(value, kept, &field);
            }
        }
        (Value::Array(want), Value::Array(got)) => {
            assert_eq!(want.len(), got.len(), "{path} length");
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                assert_no_field_lost(w, g, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(original, typed, "{path}"),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(object: &Value) -> T {
    let name = format!("{} {}", kind(object), meta(object, "name"));
    let typed: T = serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{name} does not match the API types: {e}"));
    let back = serde_json::to_value(&typed).expect("API objects serialize");
    assert_no_field_lost(&object["spec"], &back["spec"], &format!("{name}: spec"));
    typed
}

#[test]
fn sample_manifests_are_api_objects_without_unknown_fields() {
    let objects = sample_objects();
    let mut kinds = BTreeMap::<String, usize>::new();
    for object in &objects {
        *kinds.entry(kind(object).to_owned()).or_default() += 1;
        assert!(
            meta(object, "namespace").is_empty(),
            "samples leave the namespace to `kubectl apply -n`: {}",
            meta(object, "name")
        );
        match kind(object) {
            "SkillCard" => {
                let _: SkillCard = round_trip(object);
            }
            "Agent" => {
                let _: Agent = round_trip(object);
            }
            "AgentRun" => {
                let _: AgentRun = round_trip(object);
            }
            "Gateway" => {
                let _: Gateway = round_trip(object);
            }
            "Secret" => {}
            other => panic!("unexpected sample kind {other}"),
        }
    }
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("Agent".to_owned(), 1),
            ("AgentRun".to_owned(), 1),
            ("Gateway".to_owned(), 1),
            ("Secret".to_owned(), 1),
            ("SkillCard".to_owned(), 5),
        ])
    );
}

#[test]
fn sample_references_resolve() {
    let objects = sample_objects();
    let agent: Agent = round_trip(find(&objects, "Agent", "java-migrator"));
    for skill in &agent.spec.skill_cards {
        find(&objects, "SkillCard", &skill.name);
    }
    assert_eq!(
        agent.spec.skill_cards.len(),
        all_of_kind(&objects, "SkillCard").len(),
        "the agent uses every sample skill"
    );
    for gateway in &agent.spec.gateways {
        let gateway: Gateway = round_trip(find(&objects, "Gateway", &gateway.name));
        let credential = gateway
            .spec
            .credential_ref
            .expect("the gateway has credentials");
        let secret = find(&objects, "Secret", &credential.secret_name);
        let key = credential.key.expect("the gateway names its key");
        assert!(secret["stringData"][&key].is_string(), "Secret key {key}");
    }

    let run: AgentRun = round_trip(find(&objects, "AgentRun", "upgrade-to-21"));
    assert_eq!(run.spec.agent_ref, "java-migrator");
    let declared: BTreeSet<&str> = agent.spec.params.iter().map(|p| p.name.as_str()).collect();
    for param in &run.spec.params {
        assert!(
            declared.contains(param.name.as_str()),
            "param {}",
            param.name
        );
    }
    for required in agent
        .spec
        .params
        .iter()
        .filter(|p| p.required == Some(true))
    {
        assert!(
            run.spec.params.iter().any(|p| p.name == required.name),
            "the run sets required param {}",
            required.name
        );
    }
}

#[test]
fn inline_sample_skill_is_valid() {
    let objects = sample_objects();
    let inline: Vec<SkillCard> = all_of_kind(&objects, "SkillCard")
        .into_iter()
        .map(round_trip::<SkillCard>)
        .filter(|card| card.spec.inline.is_some())
        .collect();
    assert_eq!(inline.len(), 1, "one inline sample");
    let card = &inline[0];
    let name = card.metadata.name.as_deref().expect("named");
    let report = agentic_skill::validate_skill_md(
        card.spec.inline.as_deref().unwrap_or_default().as_bytes(),
        Some(name),
    );
    assert!(report.is_valid(), "{name}: {}", report.summary());
}

/// `image name -> skill directories` as hack/push-samples.sh pushes them, from its
/// `push NAME DIR...` lines.
fn pushed_images() -> BTreeMap<String, Vec<String>> {
    let script = std::fs::read_to_string(repo_root().join("hack/push-samples.sh"))
        .expect("hack/push-samples.sh exists");
    script
        .lines()
        .filter_map(|line| line.strip_prefix("push "))
        .map(|rest| {
            let mut words = rest.split_whitespace();
            let image = words.next().expect("push names an image").to_owned();
            let dirs = words
                .map(|w| {
                    w.trim_matches('"')
                        .strip_prefix("$skills/")
                        .unwrap_or_else(|| panic!("push takes $skills/ dirs, got {w}"))
                        .to_owned()
                })
                .collect();
            (image, dirs)
        })
        .collect()
}

#[test]
fn skill_cards_name_the_pushed_images_and_their_folders() {
    let pushed = pushed_images();
    assert_eq!(pushed.len(), 3, "{pushed:?}");
    let all_pushed_dirs: BTreeSet<&String> = pushed.values().flatten().collect();
    assert_eq!(
        all_pushed_dirs.len(),
        skill_dirs().len(),
        "every sample skill is pushed"
    );

    let objects = sample_objects();
    for object in all_of_kind(&objects, "SkillCard") {
        let card: SkillCard = round_trip(object);
        let Some(image) = card.spec.image.as_deref() else {
            continue;
        };
        let card_name = card.metadata.name.as_deref().unwrap_or_default();
        let repository = image
            .strip_prefix(PLACEHOLDER)
            .and_then(|rest| rest.strip_prefix("konveyor-samples/"))
            .and_then(|rest| rest.strip_suffix(":v1"))
            .unwrap_or_else(|| {
                panic!("{card_name}: image {image} is not {PLACEHOLDER}konveyor-samples/NAME:v1")
            });
        let dirs = pushed
            .get(repository)
            .unwrap_or_else(|| panic!("{card_name}: push-samples.sh does not push {repository}"));
        // One skill sits at the image root; several sit in folders named after them.
        let skill_dir = match (dirs.as_slice(), card.spec.sub_path.as_deref()) {
            ([only], None) => only.clone(),
            (_, Some(sub_path)) if dirs.len() > 1 => dirs
                .iter()
                .find(|d| d.rsplit('/').next() == Some(sub_path))
                .unwrap_or_else(|| panic!("{card_name}: no pushed folder {sub_path} in {dirs:?}"))
                .clone(),
            _ => panic!(
                "{card_name}: subPath {:?} does not fit {dirs:?}",
                card.spec.sub_path
            ),
        };
        assert_eq!(
            skill_dir.rsplit('/').next(),
            Some(card_name),
            "{card_name} is named after its skill"
        );
    }
}

#[test]
fn render_samples_substitutes_the_registry() {
    let text = run_ok(
        Command::new(repo_root().join("hack/render-samples.sh")).arg("registry.example:5000"),
    );
    assert!(!text.contains(PLACEHOLDER), "placeholder left:\n{text}");
    let rendered = parse_yaml_stream(&text, "hack/render-samples.sh");
    assert_eq!(rendered.len(), sample_objects().len());
    let images: BTreeSet<String> = rendered
        .iter()
        .filter_map(|o| o["spec"]["image"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(images.contains("registry.example:5000/konveyor-samples/migration-skills:v1"));
    assert!(images.contains("registry.example:5000/agentic-stub-agent:v1"));
    assert!(
        images
            .iter()
            .all(|i| i.starts_with("registry.example:5000/")),
        "{images:?}"
    );
}
