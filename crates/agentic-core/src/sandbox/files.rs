//! A run's `spec.fileMounts`: checked paths, and the volumes and mounts that carry them.
//!
//! A `mountPath` must be absolute. It is normalised lexically: repeated and trailing slashes
//! and `.` are dropped, `..` removes the component before it (`/..` stays `/`). The result
//! may not be one of the directories the contract owns or the service-account token's
//! ([`RESERVED_DIRS`]), lie inside one, or contain one (`/`, `/opt`, `/run`, `/var/run`),
//! and no two mounts may share it. `subPath` and each `items[].path` must be relative and
//! hold no `..` component, as Kubernetes requires; an empty `subPath` is no `subPath`, as in
//! Konveyor.
//!
//! [`file_mount_sources`] decides, from what the operator's caches hold, whether a run's
//! sources are there: Konveyor waits for a missing Secret or ConfigMap and fails at once on
//! a key that is not in one.

use std::collections::BTreeSet;

use agentic_api::FileMount;
use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, SecretVolumeSource, Volume, VolumeMount};

use super::{SKILLS_DIR, TMP_DIR, WORKSPACE_DIR};
use crate::Error;
use crate::reasons::AgentRunReason;

/// The directories a file mount may not be, lie in or contain.
pub const RESERVED_DIRS: [&str; 5] = [
    SKILLS_DIR,
    RUN_DIR,
    WORKSPACE_DIR,
    TMP_DIR,
    SERVICE_ACCOUNT_DIR,
];
/// The directory of the params file, `/run/konveyor/params.json`.
const RUN_DIR: &str = "/run/konveyor";
/// Where the kubelet mounts the pod's service-account token; Konveyor reserves it too.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

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
            let owner = if *reserved == SERVICE_ACCOUNT_DIR {
                "which the kubelet mounts for the service-account token"
            } else {
                "which the operator mounts"
            };
            problems.push(format!(
                "mountPath {written:?} ({path}) is, lies inside or contains {reserved}, {owner}"
            ));
            continue;
        }
        if checked.iter().any(|other| other.path == path) {
            problems.push(format!("mountPath {path} is used more than once"));
            continue;
        }
        if let Some(sub_path) = sub_path(mount)
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
        sub_path: sub_path(&checked.mount).map(str::to_string),
        ..Default::default()
    }
}

/// The mount's `subPath`; an empty one is none, as Konveyor reads it.
fn sub_path(mount: &FileMount) -> Option<&str> {
    mount.sub_path.as_deref().filter(|p| !p.is_empty())
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

/// The kind of object a file mount takes its files from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileSourceKind {
    Secret,
    ConfigMap,
}

impl FileSourceKind {
    /// The kind's name, as a message names it.
    pub fn as_str(self) -> &'static str {
        match self {
            FileSourceKind::Secret => "Secret",
            FileSourceKind::ConfigMap => "ConfigMap",
        }
    }
}

/// The object a file mount reads, in the run's namespace: its kind and name. None for a
/// mount that names neither or both (the CRD refuses those).
pub fn file_mount_source(mount: &FileMount) -> Option<(FileSourceKind, &str)> {
    match (&mount.secret_name, &mount.config_map_name) {
        (Some(secret), None) => Some((FileSourceKind::Secret, secret)),
        (None, Some(config_map)) => Some((FileSourceKind::ConfigMap, config_map)),
        _ => None,
    }
}

/// What the operator found for a file mount's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceLookup {
    /// The object exists with these keys: a Secret's `data`, a ConfigMap's `data` and
    /// `binaryData`. Only keys: values never reach a message.
    Found(BTreeSet<String>),
    /// No such object in the run's namespace.
    NotFound,
    /// It could not be looked up (its cache is not synced, or the operator may not read
    /// that kind there): why.
    Unavailable(String),
}

/// Whether a run's file mount sources let its sandbox be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileMountSources {
    /// Every source holds what its mount projects.
    Ready,
    /// A source is missing or could not be looked up: the run waits, not failed, with this
    /// reason (`FileMountSourceNotFound` or
    /// `FileMountSourceUnavailable`) and message, and is looked at again when
    /// the source changes or after a backoff.
    Wait {
        reason: AgentRunReason,
        message: String,
    },
    /// A source exists but lacks a key the mount projects: the run fails at once with
    /// [`Error::InvalidFileMounts`].
    Invalid(Error),
}

/// Decides, mount by mount in the run's order as Konveyor does, whether the sources are
/// ready: the first mount whose source is missing or unreadable makes the run wait, the
/// first whose `items[].key` or `subPath` is not in its source fails it. `lookup` answers
/// for each source from the operator's caches. A `subPath` names a path of the projected
/// volume: a key, or an `items[].path` (or a directory of them) when `items` is set.
pub fn file_mount_sources(
    namespace: &str,
    mounts: &[FileMount],
    mut lookup: impl FnMut(FileSourceKind, &str) -> SourceLookup,
) -> FileMountSources {
    for mount in mounts {
        let Some((kind, name)) = file_mount_source(mount) else {
            continue;
        };
        let at = &mount.mount_path;
        let keys = match lookup(kind, name) {
            SourceLookup::Found(keys) => keys,
            SourceLookup::NotFound => {
                return FileMountSources::Wait {
                    reason: AgentRunReason::FileMountSourceNotFound,
                    message: format!(
                        "file mount at {at:?} waits for {} {name:?} in namespace {namespace:?}, which does not exist",
                        kind.as_str()
                    ),
                };
            }
            SourceLookup::Unavailable(why) => {
                return FileMountSources::Wait {
                    reason: AgentRunReason::FileMountSourceUnavailable,
                    message: format!(
                        "file mount at {at:?} waits for {} {name:?} in namespace {namespace:?}, which cannot be read: {why}",
                        kind.as_str()
                    ),
                };
            }
        };
        if let Err(problem) = check_projection(mount, &keys) {
            return FileMountSources::Invalid(Error::InvalidFileMounts(vec![format!(
                "mountPath {at:?} from {} {name:?}: {problem}",
                kind.as_str()
            )]));
        }
    }
    FileMountSources::Ready
}

/// Whether every `items[].key` is in `keys` and the `subPath` names a projected path.
fn check_projection(mount: &FileMount, keys: &BTreeSet<String>) -> Result<(), String> {
    let projected: BTreeSet<String> = if mount.items.is_empty() {
        keys.iter().map(|key| clean_relative(key)).collect()
    } else {
        if let Some(item) = mount.items.iter().find(|item| !keys.contains(&item.key)) {
            return Err(format!("items key {:?} is not in it", item.key));
        }
        mount
            .items
            .iter()
            .map(|item| clean_relative(&item.path))
            .collect()
    };
    let Some(written) = sub_path(mount) else {
        return Ok(());
    };
    let wanted = clean_relative(written);
    let found = wanted == "."
        || projected.iter().any(|path| {
            path == &wanted
                || path
                    .strip_prefix(wanted.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        });
    if found {
        Ok(())
    } else {
        let listing = if mount.items.is_empty() {
            "its keys"
        } else {
            "the items' paths"
        };
        Err(format!("subPath {written:?} is none of {listing}"))
    }
}

/// A relative path without empty and `.` components; `.` when nothing is left.
fn clean_relative(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
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
            assert_eq!(error.reason().as_str(), "InvalidFileMounts", "{path}");
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

    #[test]
    fn the_service_account_token_and_what_holds_it_are_refused() {
        for path in [
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "/var/run/secrets",
            "/var/run",
            "/var",
        ] {
            let error = check_file_mounts(&[secret_at(path)]).expect_err(path);
            assert!(
                error
                    .to_string()
                    .contains("which the kubelet mounts for the service-account token"),
                "{path}: {error}"
            );
        }
        assert!(check_file_mounts(&[secret_at("/var/run/secrets-extra")]).is_ok());
    }

    #[test]
    fn an_empty_sub_path_is_no_sub_path() {
        let mount = FileMount {
            sub_path: Some(String::new()),
            ..secret_at("/etc/app")
        };
        let checked = check_file_mounts(&[mount]).expect("Konveyor accepts subPath \"\"");
        assert_eq!(volume_mount(0, &checked[0]).sub_path, None);
    }

    fn keys(names: &[&str]) -> SourceLookup {
        SourceLookup::Found(names.iter().map(|k| (*k).to_string()).collect())
    }

    fn item(key: &str, path: &str) -> KeyToPath {
        KeyToPath {
            key: key.into(),
            path: path.into(),
            mode: None,
        }
    }

    fn config_map_at(path: &str, sub_path: Option<&str>, items: Vec<KeyToPath>) -> FileMount {
        FileMount {
            mount_path: path.into(),
            config_map_name: Some("app-config".into()),
            sub_path: sub_path.map(Into::into),
            items,
            ..FileMount::default()
        }
    }

    #[test]
    fn sources_that_hold_what_is_projected_are_ready() {
        for mount in [
            config_map_at("/etc/app", None, vec![]),
            config_map_at("/etc/app", Some(""), vec![]),
            config_map_at("/etc/app/config.yaml", Some("config.yaml"), vec![]),
            config_map_at("/etc/app/config.yaml", Some("./config.yaml"), vec![]),
            config_map_at(
                "/etc/app/renamed",
                Some("nested/renamed"),
                vec![item("config.yaml", "nested/renamed")],
            ),
            config_map_at(
                "/etc/app/nested",
                Some("nested"),
                vec![item("config.yaml", "nested/renamed")],
            ),
        ] {
            let mut asked = Vec::new();
            let decision =
                file_mount_sources("team", std::slice::from_ref(&mount), |kind, name| {
                    asked.push((kind, name.to_string()));
                    keys(&["config.yaml", "other"])
                });
            assert_eq!(decision, FileMountSources::Ready, "{mount:?}");
            assert_eq!(
                asked,
                [(FileSourceKind::ConfigMap, "app-config".to_string())]
            );
        }
    }

    #[test]
    fn a_missing_or_unreadable_source_waits() {
        let decision = file_mount_sources("team", &[secret_at("/etc/jira")], |kind, name| {
            assert_eq!((kind, name), (FileSourceKind::Secret, "creds"));
            SourceLookup::NotFound
        });
        assert_eq!(
            decision,
            FileMountSources::Wait {
                reason: AgentRunReason::FileMountSourceNotFound,
                message: "file mount at \"/etc/jira\" waits for Secret \"creds\" in namespace \
                          \"team\", which does not exist"
                    .into(),
            }
        );
        let decision = file_mount_sources("team", &[secret_at("/etc/jira")], |_, _| {
            SourceLookup::Unavailable("the Secret cache is not synced yet".into())
        });
        assert_eq!(
            decision,
            FileMountSources::Wait {
                reason: AgentRunReason::FileMountSourceUnavailable,
                message: "file mount at \"/etc/jira\" waits for Secret \"creds\" in namespace \
                          \"team\", which cannot be read: the Secret cache is not synced yet"
                    .into(),
            }
        );
    }

    #[test]
    fn a_key_that_is_not_in_the_source_fails_at_once() {
        for (mount, problem) in [
            (
                config_map_at("/etc/app", None, vec![item("absent", "file")]),
                "items key \"absent\" is not in it",
            ),
            (
                config_map_at("/etc/app/x", Some("absent"), vec![]),
                "subPath \"absent\" is none of its keys",
            ),
            (
                config_map_at(
                    "/etc/app/x",
                    Some("config.yaml"),
                    vec![item("config.yaml", "renamed")],
                ),
                "subPath \"config.yaml\" is none of the items' paths",
            ),
            (
                config_map_at("/etc/app/x", Some("config"), vec![]),
                "subPath \"config\" is none of its keys",
            ),
        ] {
            let decision = file_mount_sources("team", std::slice::from_ref(&mount), |_, _| {
                keys(&["config.yaml"])
            });
            let FileMountSources::Invalid(error) = decision else {
                panic!("{mount:?}: {decision:?}");
            };
            assert_eq!(error.reason().as_str(), "InvalidFileMounts");
            assert_eq!(
                error.to_string(),
                format!(
                    "spec.fileMounts: mountPath {:?} from ConfigMap \"app-config\": {problem}",
                    mount.mount_path
                )
            );
        }
    }

    #[test]
    fn mounts_are_decided_in_order_as_konveyor_does() {
        let mounts = [
            secret_at("/etc/jira"),
            config_map_at("/etc/app", None, vec![item("absent", "file")]),
        ];
        let mut asked = Vec::new();
        let decision = file_mount_sources("team", &mounts, |kind, _| {
            asked.push(kind);
            match kind {
                FileSourceKind::Secret => SourceLookup::NotFound,
                FileSourceKind::ConfigMap => keys(&[]),
            }
        });
        assert!(
            matches!(decision, FileMountSources::Wait { reason, .. } if reason == AgentRunReason::FileMountSourceNotFound),
            "{decision:?}"
        );
        assert_eq!(
            asked,
            [FileSourceKind::Secret],
            "stops at the first that waits"
        );
    }
}
