//! The values table of the chart's README is generated from `values.yaml`: each key's
//! `# --` comment is its description and its value the default. This test fails when the
//! README's table differs from what `values.yaml` says, or when a value has no description;
//! `make chart-readme` (this test with `AGENTIC_BLESS=1`) rewrites the table.

use agentic_integration_tests::support;
use serde_json::Value;
use support::{parse_yaml_stream, repo_root};

const VALUES: &str = "charts/agentic-operator/values.yaml";
const README: &str = "charts/agentic-operator/README.md";
const START: &str = "<!-- values:start (generated from values.yaml by `make chart-readme`) -->";
const END: &str = "<!-- values:end -->";

/// One documented value: its dotted path and its `# --` description.
struct Documented {
    path: String,
    description: String,
}

/// The keys of `values.yaml` with the `# --` comment block right above them, in file order.
/// Keys are found by indentation (two spaces a level); list items and commented-out
/// examples are not keys.
fn documented(text: &str) -> (Vec<Documented>, Vec<String>) {
    let mut parents: Vec<(usize, String)> = Vec::new();
    let mut comment: Option<String> = None;
    let mut found = Vec::new();
    let mut undocumented = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(rest) = trimmed.strip_prefix("# -- ") {
            comment = Some(rest.trim().to_owned());
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            // A continuation of a `# --` block; other comments end it.
            if let Some(text) = comment.as_mut()
                && rest.starts_with(' ')
                && !rest.trim_start().starts_with('-')
            {
                text.push(' ');
                text.push_str(rest.trim());
                continue;
            }
            comment = None;
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            comment = None;
            continue;
        };
        if trimmed.starts_with('-') || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
            comment = None;
            continue;
        }
        while parents.last().is_some_and(|(level, _)| *level >= indent) {
            parents.pop();
        }
        let path = parents
            .iter()
            .map(|(_, key)| key.as_str())
            .chain([key])
            .collect::<Vec<_>>()
            .join(".");
        let ancestor_documented = found
            .iter()
            .any(|d: &Documented| path.starts_with(&format!("{}.", d.path)));
        match comment.take() {
            Some(description) => found.push(Documented {
                path: path.clone(),
                description,
            }),
            // A map whose keys carry the descriptions needs none itself.
            None if trimmed.ends_with(':') || ancestor_documented => {}
            None => undocumented.push(path.clone()),
        }
        parents.push((indent, key.to_owned()));
    }
    (found, undocumented)
}

fn lookup<'a>(values: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(values, |value, key| &value[key])
}

/// The table the README must contain.
fn table() -> String {
    let text = std::fs::read_to_string(repo_root().join(VALUES)).expect("values.yaml");
    let values = parse_yaml_stream(&text, VALUES).remove(0);
    let (documented, undocumented) = documented(&text);
    assert!(
        undocumented.is_empty(),
        "values without a `# --` description in {VALUES}: {undocumented:?}"
    );
    let mut table = String::from("| value | default | description |\n|---|---|---|\n");
    for Documented { path, description } in documented {
        let default = lookup(&values, &path);
        let default = serde_json::to_string(default).expect("JSON");
        table.push_str(&format!(
            "| `{path}` | `{}` | {} |\n",
            default.replace('|', "\\|"),
            description.replace('|', "\\|")
        ));
    }
    table
}

#[test]
fn the_readme_documents_every_value_as_values_yaml_does() {
    let path = repo_root().join(README);
    let readme = std::fs::read_to_string(&path).expect("the chart has a README");
    let (Some(start), Some(end)) = (readme.find(START), readme.find(END)) else {
        panic!("{README} lacks the generated section markers {START} … {END}");
    };
    let generated = &readme[start + START.len()..end];
    let expected = format!("\n{}", table());
    if std::env::var_os("AGENTIC_BLESS").is_some() {
        let updated = format!(
            "{}{expected}{}",
            &readme[..start + START.len()],
            &readme[end..]
        );
        std::fs::write(&path, updated).expect("write the README");
        return;
    }
    assert!(
        generated == expected,
        "{README} is out of date with {VALUES}: run `make chart-readme`.\nexpected:\n{expected}"
    );
}

#[test]
fn descriptions_attach_to_the_key_below_them() {
    let text = "# -- Top.\ntop: 1\nmap:\n  # -- Inner,\n  # continued.\n  inner: []\n  #  - example\nbare: x\n";
    let (found, undocumented) = documented(text);
    let paths: Vec<_> = found
        .iter()
        .map(|d| (d.path.as_str(), d.description.as_str()))
        .collect();
    assert_eq!(paths, [("top", "Top."), ("map.inner", "Inner, continued.")]);
    assert_eq!(undocumented, ["bare"]);
}
