//! A run's `spec.fileMounts`: checked paths, and the volumes and mounts that carry them.
//!
//! A `mountPath` must be absolute. It is normalised lexically: repeated and trailing slashes
//! and `.` are dropped, `..` removes the component before it (`/..` stays `/`). The result
//! may not be one of the directories the contract owns ([`RESERVED_DIRS`]), lie inside one,
//! or contain one (`/`, `/opt`, `/run`), and no two mounts may share it. `subPath` and each
//! `items[].path` must be relative and hold no `..` component, as Kubernetes requires.

use agentic_api::FileMount;
use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, SecretVolumeSource, Volume, VolumeMount};

use super::{SKILLS_DIR, TMP_DIR, WORKSPACE_DIR};
use crate::Error;

/// The directories a file mount may not be, lie in or contain.
pub const RESERVED_DIRS: [&str; 4] = [SKILLS_DIR, RUN_DIR, WORKSPACE_DIR, TMP_DIR];
/// The directory of the params file, `/run/konveyor/params.json`.
const RUN_DIR: &str = "/run/konveyor";

/// A file mount whose paths were checked, at its normalised path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CheckedMount {
    pub(crate) path: String,
    pub(crate) mount: FileMount,
}

/// Checks every file mount; on failure returns [`Error::InvalidFileMounts`] listing each
/// problem, in the order of the mounts.
pub(crate) fn check_file_mounts(mounts: &[FileMount]) -> Result<Vec<CheckedMount>, Error> {
    let mut problems = Vec::new();
    let mut checked: Vec<CheckedMount> = Vec::new();
    for mount in mounts {
        let written = &mount.mount_path;
        let Some(path) = normalise(written) else {
            problems.push(format!("mountPath {written:?} is not an absolute path"));
            continue;
        };
        if let Some(reserved) = RESERVED_DIRS.iter().find(|dir| overlaps(&path, dir)) {
            problems.push(format!(
                "mountPath {written:?} ({path}) is, lies inside or contains {reserved}, which the operator mounts"
            ));
            continue;
        }
        if checked.iter().any(|other| other.path == path) {
            problems.push(format!("mountPath {path} is used more than once"));
            continue;
        }
        if let Some(sub_path) = &mount.sub_path
            && !is_relative_within(sub_path)
        {
            problems.push(format!(
                "subPath {sub_path:?} of mountPath {path} must be a relative path without '..'"
            ));
            continue;
        }
        if let Some(item) = mount.items.iter().find(|i| !is_relative_within(&i.path)) {
            problems.push(format!(
                "items path {:?} of mountPath {path} must be a relative path without '..'",
                item.path
            ));
            continue;
        }
        if mount.secret_name.is_some() == mount.config_map_name.is_some() {
            problems.push(format!(
                "mountPath {path} must set exactly one of secretName and configMapName"
            ));
            continue;
        }
        checked.push(CheckedMount {
            path,
            mount: mount.clone(),
        });
    }
    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(Error::InvalidFileMounts(problems))
    }
}

/// The volume of the file mount at `index`, `file-<index>`.
pub(crate) fn volume(index: usize, checked: &CheckedMount) -> Volume {
    let mount = &checked.mount;
    let items = (!mount.items.is_empty()).then(|| mount.items.clone());
    Volume {
        name: volume_name(index),
        secret: mount.secret_name.as_ref().map(|name| SecretVolumeSource {
            secret_name: Some(name.clone()),
            items: items.clone(),
            ..Default::default()
        }),
        config_map: mount
            .config_map_name
            .as_ref()
            .map(|name| ConfigMapVolumeSource {
                name: name.clone(),
                items,
                ..Default::default()
            }),
        ..Default::default()
    }
}

/// The read-only mount of the file mount at `index`.
pub(crate) fn volume_mount(index: usize, checked: &CheckedMount) -> VolumeMount {
    VolumeMount {
        name: volume_name(index),
        mount_path: checked.path.clone(),
        read_only: Some(true),
        sub_path: checked.mount.sub_path.clone(),
        ..Default::default()
    }
}

fn volume_name(index: usize) -> String {
    format!("file-{index}")
}

/// `path` normalised, or None when it is not absolute.
fn normalise(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Whether `path` is `dir`, lies inside it, or contains it; both normalised.
fn overlaps(path: &str, dir: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner == outer
            || outer == "/"
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    within(path, dir) || within(dir, path)
}

fn is_relative_within(path: &str) -> bool {
    !path.is_empty() && !path.starts_with('/') && !path.split('/').any(|part| part == "..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::KeyToPath;

    fn secret_at(path: &str) -> FileMount {
        FileMount {
            mount_path: path.into(),
            secret_name: Some("creds".into()),
            ..FileMount::default()
        }
    }

    #[test]
    fn paths_are_normalised() {
        for (written, normal) in [
            ("/etc/app", "/etc/app"),
            ("/etc/app/", "/etc/app"),
            ("//etc///app//", "/etc/app"),
            ("/etc/./app/.", "/etc/app"),
            ("/etc/x/../app", "/etc/app"),
            ("/../../etc/app", "/etc/app"),
            ("/", "/"),
        ] {
            assert_eq!(normalise(written).as_deref(), Some(normal), "{written}");
        }
        for relative in ["", "etc/app", "./etc", "../etc"] {
            assert_eq!(normalise(relative), None, "{relative}");
        }
    }

    #[test]
    fn good_mounts_are_kept_at_their_normal_path() {
        let checked = check_file_mounts(&[
            secret_at("/etc/app//"),
            FileMount {
                mount_path: "/home/agent/.config/tool".into(),
                config_map_name: Some("tool".into()),
                sub_path: Some("conf/tool.yaml".into()),
                ..FileMount::default()
            },
            secret_at("/tmpfiles"),
            secret_at("/opt/tools"),
            secret_at("/run/secrets"),
        ])
        .expect("valid");
        let paths: Vec<&str> = checked.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/etc/app",
                "/home/agent/.config/tool",
                "/tmpfiles",
                "/opt/tools",
                "/run/secrets"
            ]
        );
    }

    #[test]
    fn reserved_directories_and_what_holds_them_are_refused() {
        for path in [
            "/opt/skills",
            "/opt/skills/",
            "/opt/skills/java",
            "/opt//skills/./x",
            "/opt/other/../skills",
            "/opt",
            "/run",
            "/run/konveyor",
            "/run/konveyor/params.json",
            "/workspace",
            "/workspace/src",
            "/tmp",
            "/tmp/x/..",
            "/",
            "/..",
        ] {
            let error = check_file_mounts(&[secret_at(path)]).expect_err(path);
            assert_eq!(error.reason(), "InvalidFileMounts", "{path}");
            assert!(
                error.to_string().contains("which the operator mounts"),
                "{path}: {error}"
            );
        }
    }

    #[test]
    fn every_problem_is_listed() {
        let error = check_file_mounts(&[
            secret_at("relative/path"),
            secret_at("/etc/app"),
            secret_at("/etc/app/"),
            FileMount {
                sub_path: Some("../up".into()),
                ..secret_at("/a")
            },
            FileMount {
                items: vec![KeyToPath {
                    key: "k".into(),
                    path: "/abs".into(),
                    mode: None,
                }],
                ..secret_at("/b")
            },
            FileMount {
                config_map_name: Some("both".into()),
                ..secret_at("/c")
            },
            FileMount {
                mount_path: "/d".into(),
                ..FileMount::default()
            },
        ])
        .expect_err("invalid");
        assert_eq!(
            error.to_string(),
            "spec.fileMounts: mountPath \"relative/path\" is not an absolute path; \
             mountPath /etc/app is used more than once; \
             subPath \"../up\" of mountPath /a must be a relative path without '..'; \
             items path \"/abs\" of mountPath /b must be a relative path without '..'; \
             mountPath /c must set exactly one of secretName and configMapName; \
             mountPath /d must set exactly one of secretName and configMapName"
        );
    }
}
