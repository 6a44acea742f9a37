//! `docs/architecture.md` stays true to the code in what it names: every backticked span with
//! `::` in it is a Rust path (`agentic_core::cards::decide_card`, `controllers::pipeline`,
//! `Context::kind_state`, `agentic-core::{skills, params}`) and must name a module, type,
//! function, field or variant that exists. A path starts at a workspace crate
//! (`agentic_core`, or `agentic-core` as the crates table spells it) or, without one, at the
//! root of any of them; a path into another crate of Cargo.lock (`kube::…`) is not checked.
//! Bare words are prose, not checked. And the crates table lists exactly the crates under
//! `crates/`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::sources::{crate_sources, module_of, rust_files, workspace};

const DOC: &str = "docs/architecture.md";

/// A workspace crate's modules and the text of each of its files.
struct Crate {
    /// As code names it: `agentic_core`.
    name: String,
    modules: BTreeSet<Vec<String>>,
    files: Vec<(Vec<String>, String)>,
}

fn workspace_crates() -> Vec<Crate> {
    crate_sources()
        .into_iter()
        .map(|(member, src)| {
            let dir = Path::new(&member).file_name().expect("a member directory");
            let files: Vec<(Vec<String>, String)> = rust_files(&src)
                .into_iter()
                .map(|file| {
                    let text = std::fs::read_to_string(&file).expect("a readable source file");
                    (module_of(&src, &file), text)
                })
                .collect();
            Crate {
                name: dir.to_string_lossy().replace('-', "_"),
                modules: files.iter().map(|(module, _)| module.clone()).collect(),
                files,
            }
        })
        .collect()
}

/// Every package of Cargo.lock, as code names it.
fn locked_crates() -> BTreeSet<String> {
    std::fs::read_to_string(workspace().join("Cargo.lock"))
        .expect("Cargo.lock")
        .lines()
        .filter_map(|line| line.strip_prefix("name = \""))
        .map(|name| name.trim_end_matches('"').replace('-', "_"))
        .collect()
}

/// The doc's inline code spans, fenced blocks left out.
fn code_spans(doc: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The paths a span names, as segments: turbofish generics, call parentheses and a glob
/// dropped, `{a, b::c}` groups expanded, a crate's `-` spelled `_`.
fn paths_of(span: &str) -> Vec<Vec<String>> {
    let mut text = span.replace("()", "");
    while let Some(start) = text.find("::<") {
        let end = text[start..]
            .find('>')
            .map_or(text.len(), |at| start + at + 1);
        text.replace_range(start..end, "");
    }
    let text = text.trim_end_matches("::*");
    let spelled = |path: &str| -> Vec<String> {
        path.split("::")
            .map(|segment| segment.trim().to_owned())
            .enumerate()
            .map(|(at, segment)| {
                if at == 0 {
                    segment.replace('-', "_")
                } else {
                    segment
                }
            })
            .collect()
    };
    match text.split_once("::{") {
        Some((prefix, group)) => group
            .trim_end_matches('}')
            .split(',')
            .map(|item| spelled(&format!("{prefix}::{}", item.trim())))
            .collect(),
        None => vec![spelled(text)],
    }
}

/// Whether `text` declares `name`: an item (`fn name`, `struct name`, `mod name`…), or a
/// field or enum variant (a line that starts with it, visibility aside).
fn declares(text: &str, name: &str) -> bool {
    let ends_word = |rest: &str| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_');
    let item = [
        "fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ",
    ]
    .iter()
    .any(|keyword| {
        let needle = format!("{keyword}{name}");
        text.match_indices(&needle)
            .any(|(at, _)| ends_word(&text[at + needle.len()..]))
    });
    item || text.lines().any(|line| {
        let line = line.trim_start();
        let line = match line.strip_prefix("pub") {
            Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or("", |(_, r)| r),
            Some(rest) => rest,
            None => line,
        }
        .trim_start();
        line.strip_prefix(name).is_some_and(|rest| {
            rest.starts_with([':', '(', ',', ' ', '{']) && !rest.starts_with("::")
        })
    })
}

/// Whether `path` (no crate name) names something in `krate`: the longest prefix that is a
/// module, then an item declared in that module's files, then its members (a type's fields,
/// variants and functions, which may be declared anywhere in the crate).
fn resolves_in(krate: &Crate, path: &[String]) -> bool {
    let mut module: Vec<String> = Vec::new();
    let mut rest = path;
    while let Some((first, tail)) = rest.split_first() {
        let mut next = module.clone();
        next.push(first.clone());
        if !krate.modules.contains(&next) {
            break;
        }
        module = next;
        rest = tail;
    }
    let Some((item, members)) = rest.split_first() else {
        return true;
    };
    let in_module = krate
        .files
        .iter()
        .filter(|(file_module, _)| file_module.starts_with(&module))
        .any(|(_, text)| declares(text, item));
    in_module
        && members
            .iter()
            .all(|member| krate.files.iter().any(|(_, text)| declares(text, member)))
}

/// Whether `path` names something of the workspace, or of a crate outside it.
fn resolves(crates: &[Crate], locked: &BTreeSet<String>, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    if let Some(krate) = crates.iter().find(|krate| &krate.name == first) {
        return resolves_in(krate, rest);
    }
    let rest = if first == "crate" { rest } else { path };
    crates.iter().any(|krate| resolves_in(krate, rest)) || locked.contains(first)
}

#[test]
fn every_module_type_and_function_the_architecture_names_exists() {
    let doc = std::fs::read_to_string(workspace().join(DOC)).expect("the architecture doc");
    let (crates, locked) = (workspace_crates(), locked_crates());
    let paths: Vec<Vec<String>> = code_spans(&doc)
        .iter()
        .filter(|span| span.contains("::"))
        .flat_map(|span| paths_of(span))
        .collect();
    assert!(paths.len() > 30, "the doc names {} paths", paths.len());
    let missing: Vec<String> = paths
        .iter()
        .filter(|path| !resolves(&crates, &locked, path))
        .map(|path| path.join("::"))
        .collect();
    assert!(
        missing.is_empty(),
        "{DOC} names what does not exist: {missing:#?}"
    );
}

#[test]
fn the_check_tells_what_exists_from_what_does_not() {
    let (crates, locked) = (workspace_crates(), locked_crates());
    let check = |span: &str| {
        paths_of(span)
            .iter()
            .all(|path| resolves(&crates, &locked, path))
    };
    for there in [
        "agentic-core::{conditions, events, sandbox::outcome}",
        "agentic_core::cards::decide_card",
        "Context::kind_state",
        "Watches::of::<K>()",
        "controllers::<kind>",
        "kube::runtime::reflector::Store",
    ] {
        assert!(check(there), "{there} exists");
    }
    for gone in [
        "Context::run_status",
        "agentic_core::cards::no_such_function",
        "agentic-core::{conditions, no_such_module}",
        "agentic_trust::NoSuchType",
        "controllers::no_such_kind",
    ] {
        assert!(!check(gone), "{gone} does not exist");
    }
}

/// The workspace crates a crate depends on (its `[dependencies]`), by Cargo.toml.
fn workspace_dependencies(krate: &str) -> BTreeSet<String> {
    let path = workspace().join("crates").join(krate).join("Cargo.toml");
    let manifest =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    manifest
        .split("\n[")
        .find(|table| table.starts_with("dependencies]"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("agentic-"))
        .filter_map(|line| line.split(['.', ' ', '=']).next())
        .map(str::to_owned)
        .collect()
}

/// The crates table lists every crate under `crates/`, once, and the workspace crates each
/// depends on as its Cargo.toml says.
#[test]
fn the_crates_table_lists_every_crate_and_its_workspace_dependencies() {
    let doc = std::fs::read_to_string(workspace().join(DOC)).expect("the architecture doc");
    let section = doc
        .split("\n## ")
        .find(|section| section.starts_with("Crates\n"))
        .expect("a Crates section");
    let mut listed = BTreeSet::new();
    for row in section.lines().filter(|row| row.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        let named: BTreeSet<String> = code_spans(cells[3])
            .into_iter()
            .filter(|span| span.starts_with("agentic-"))
            .collect();
        assert_eq!(
            named,
            workspace_dependencies(&name),
            "{DOC}: what {name} depends on among the workspace's crates"
        );
        assert!(listed.insert(name.clone()), "{DOC} lists {name} twice");
    }
    let crates: BTreeSet<String> = std::fs::read_dir(workspace().join("crates"))
        .expect("crates/")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(listed, crates, "{DOC}'s crates table and crates/");
}
