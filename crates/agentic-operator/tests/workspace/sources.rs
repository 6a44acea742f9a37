//! The workspace's sources as files and module paths.

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|entry| entry.unwrap_or_else(|e| panic!("cannot walk {}: {e}", dir.display())))
        .map(walkdir::DirEntry::into_path)
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    found.sort();
    found
}

/// The module path of a source file (`controllers/agentrun/sweep.rs`: `controllers::agentrun::sweep`).
pub fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The source directory (`<member>/src`) of every member of the workspace that has one,
/// by member path, from the root Cargo.toml's `members` list.
pub fn crate_sources() -> std::collections::BTreeMap<String, PathBuf> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("members = [").expect("a members list");
    let list = &manifest[start..start + manifest[start..].find(']').expect("its end")];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(|member| (member.to_string(), workspace().join(member).join("src")))
        .filter(|(_, src)| src.is_dir())
        .collect()
}
