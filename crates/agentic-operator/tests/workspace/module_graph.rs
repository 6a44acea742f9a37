//! The modules of each crate of the workspace depend on each other without a cycle: in each
//! crate, each module at the crate's root is a node (in the operator, each kind's module
//! `controllers::<kind>` too), and a path to another module (`crate::…`, `super::…`,
//! `self::…`) in its code (not its comments or its tests) is an edge. Read from the source
//! text: the compiler allows such cycles, so only a test keeps the layering that
//! `docs/architecture.md` draws.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::sources::{crate_sources, module_of, rust_files, workspace};

/// The node a module belongs to: a kind's module under `controllers`, else the module at the
/// crate's root (`controllers` itself for its own file).
fn node_of(module: &[String]) -> String {
    match module {
        [] => "crate".to_string(),
        [first, second, ..] if first == "controllers" => format!("controllers::{second}"),
        [first, ..] => first.clone(),
    }
}

/// Test-only files: the fakes, the scenarios and unit tests.
fn is_test_only(module: &[String]) -> bool {
    module.iter().any(|part| {
        matches!(
            part.as_str(),
            "tests" | "scenarios" | "scenario" | "fake_api" | "fake_registry"
        )
    })
}

/// The code of a file: its comments and its trailing `#[cfg(test)]` module left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path in `code` that starts at `crate`, `super` or `self`, with `use` groups
/// (`super::{a, b::c}`) expanded: the segments of each.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(root) {
            let start = from + found;
            from = start + root.len();
            let preceded_by_ident = start > 0
                && (bytes[start - 1].is_ascii_alphanumeric()
                    || bytes[start - 1] == b'_'
                    || bytes[start - 1] == b':');
            // `pub(in crate::controllers)` is a visibility, not a dependency.
            if preceded_by_ident || code[..start].ends_with("(in ") {
                continue;
            }
            let rest = &code[start..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let prefix: Vec<String> = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if rest[end..].starts_with('{') {
                let group = &rest[end + 1..rest[end..].find('}').map_or(rest.len(), |c| end + c)];
                for item in group.split(',') {
                    let mut path = prefix.clone();
                    path.extend(
                        item.trim()
                            .split("::")
                            .filter(|s| !s.is_empty())
                            .map(str::to_string),
                    );
                    paths.push(path);
                }
            } else {
                paths.push(prefix);
            }
        }
    }
    paths
}

/// Whether `code` names `child::…` bare, not as the tail of a longer path.
fn names_bare(code: &str, child: &str) -> bool {
    let needle = format!("{child}::");
    code.match_indices(&needle).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// The module a path names: as many of its leading segments as are modules.
fn target_of(path: &[String], module: &[String], modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    let (mut base, rest): (Vec<String>, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (module.to_vec(), &path[1..]),
        Some("super") => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            // In `foo.rs` and `foo/mod.rs` alike, `super` is `foo`'s parent.
            (base, rest)
        }
        _ => return module.to_vec(),
    };
    for segment in rest {
        let mut next = base.clone();
        next.push(segment.clone());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    base
}

/// The edges between the nodes of the crate whose sources are in `src`, from the code of
/// every module that is not a test's.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = rust_files(src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        if is_test_only(&module) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a readable source file");
        let code = code_of(&text);
        let from = node_of(&module);
        let named = paths_in(&code)
            .into_iter()
            .map(|path| target_of(&path, &module, &modules));
        // A module names its own child modules bare (`agentrun::controller`).
        let children = modules
            .iter()
            .filter(|child| child.len() == module.len() + 1 && child.starts_with(&module))
            .filter(|child| names_bare(&code, &child[module.len()]))
            .cloned();
        for target in named.chain(children) {
            let to = node_of(&target);
            if to != from && to != "crate" {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// The nodes that lie on some cycle, each cycle's nodes together: the graph's strongly
/// connected components of more than one node.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<BTreeSet<String>> {
    let reachable = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut pending = vec![from.to_string()];
        while let Some(node) = pending.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    pending.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|node| (node, reachable(node))).collect();
    reach
        .iter()
        .filter(|(node, from)| from.contains(node.as_str()))
        .map(|(node, from)| {
            from.iter()
                .filter(|other| {
                    reach
                        .get(other)
                        .is_some_and(|back| back.contains(node.as_str()))
                })
                .cloned()
                .collect()
        })
        .collect()
}

#[test]
fn the_modules_of_every_crate_depend_on_each_other_without_a_cycle() {
    let sources = crate_sources();
    // Every crate under crates/ is read: a member missing here would go unchecked.
    for name in std::fs::read_dir(workspace().join("crates")).expect("crates/") {
        let member = format!(
            "crates/{}",
            name.expect("an entry").file_name().to_string_lossy()
        );
        assert!(
            sources.contains_key(&member),
            "{member} is not read: {sources:?}"
        );
    }
    let found: BTreeMap<&String, BTreeSet<BTreeSet<String>>> = sources
        .iter()
        .map(|(member, src)| (member, cycles(&edges(src))))
        .filter(|(_, cycles)| !cycles.is_empty())
        .collect();
    assert!(found.is_empty(), "module cycles: {found:#?}");
}

#[test]
fn the_reading_sees_the_layers_the_architecture_draws() {
    let edges = edges(&workspace().join("crates/agentic-operator/src"));
    let wiring = &edges["controllers"];
    assert!(wiring.contains("controllers::agentrun"), "{edges:#?}");
    assert!(edges["controllers::agentrun"].contains("controllers::pipeline"));
    assert!(edges["controllers::watches"].contains("controllers::pipeline"));
    assert!(edges["context"].contains("caches"));
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let edges = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        // Only leads into the cycle, so is not on it.
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(
        cycles(&edges),
        BTreeSet::from([BTreeSet::from(["a".into(), "b".into(), "c".into()])])
    );
    assert_eq!(
        cycles(&BTreeMap::from([(
            "a".to_string(),
            BTreeSet::from(["b".to_string()])
        )])),
        BTreeSet::new()
    );
}
