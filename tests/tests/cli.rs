//! The `agentic-operator` command line, run as a user would: `skill validate` (exit codes,
//! text and JSON), `skill push`, `skill inspect` and `skill pull` against a real registry,
//! `skill verify` against what cosign signed, `crd`, usage errors, and the logs of a `run`
//! that cannot start, and the hidden
//! `skill fetch` against a real git server.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use agentic_integration_tests::{
    cli, cosign, files_below, operator_binary, paths_below, pem_fingerprint, push_insecure, stderr,
    stdout, write_skill,
};
use agentic_oci::{RegistryAuth, RegistryOptions};
use agentic_testenv::{GitFile, GitServer, Registry};
use serde_json::Value;

/// A skill whose name has uppercase letters and that has no description.
fn write_invalid_skill(parent: &Path) -> String {
    let dir = parent.join("Broken");
    std::fs::create_dir_all(&dir).expect("create dir");
    std::fs::write(dir.join("SKILL.md"), "---\nname: Broken\n---\nBody.\n").expect("write");
    dir.display().to_string()
}

#[test]
fn skill_validate_exits_0_1_or_2_and_names_every_problem() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let valid = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let valid = valid.display().to_string();
    let invalid = write_invalid_skill(tmp.path());

    let out = cli(&["skill", "validate", &valid]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("valid") && text.contains("(java-upgrade)"),
        "{text}"
    );
    assert!(text.contains("1 valid, 0 invalid"), "{text}");

    let out = cli(&["skill", "validate", &valid, &invalid]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let listed: Vec<&str> = text.lines().filter(|l| l.contains("error")).collect();
    assert!(listed.iter().any(|l| l.contains("NameUppercase")), "{text}");
    assert!(
        listed.iter().any(|l| l.contains("DescriptionMissing")),
        "{text}"
    );
    assert!(text.contains("1 valid, 1 invalid"), "{text}");

    let missing = tmp.path().join("no-such-skill").display().to_string();
    let out = cli(&["skill", "validate", &missing]);
    assert_eq!(out.status.code(), Some(2), "an I/O error is exit 2");
    assert!(stderr(&out).contains("no-such-skill"), "{}", stderr(&out));

    // Usage errors are exit 2 too.
    let out = cli(&["skill", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn skill_validate_json_has_one_report_per_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let valid = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let valid = valid.display().to_string();
    let invalid = write_invalid_skill(tmp.path());
    // Valid, with a warning: an empty body.
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(&bare).expect("dir");
    std::fs::write(
        bare.join("SKILL.md"),
        "---\nname: bare\ndescription: Nothing more.\n---\n",
    )
    .expect("write");
    let bare = bare.display().to_string();

    let out = cli(&[
        "skill", "validate", "--output", "json", &valid, &invalid, &bare,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let reports: Value = serde_json::from_str(&stdout(&out)).expect("JSON on stdout");
    let reports = reports.as_array().expect("a JSON array");
    assert_eq!(reports.len(), 3);
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    };
    for report in reports {
        assert_eq!(
            keys(report),
            ["errors", "name", "path", "valid", "warnings"]
                .map(String::from)
                .into(),
            "{report}"
        );
        for finding in report["errors"]
            .as_array()
            .into_iter()
            .chain(report["warnings"].as_array())
            .flatten()
        {
            assert_eq!(
                keys(finding),
                ["code", "message"].map(String::from).into(),
                "{finding}"
            );
            assert!(!finding["message"].as_str().expect("message").is_empty());
        }
    }

    assert_eq!(reports[0]["path"], valid.as_str());
    assert_eq!(reports[0]["name"], "java-upgrade");
    assert_eq!(reports[0]["valid"], true);
    assert_eq!(reports[0]["errors"], serde_json::json!([]));

    assert_eq!(reports[1]["path"], invalid.as_str());
    assert_eq!(reports[1]["valid"], false);
    assert_eq!(reports[1]["name"], Value::Null);
    let codes: BTreeSet<&str> = reports[1]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert_eq!(
        codes,
        BTreeSet::from(["DescriptionMissing", "NameUppercase"])
    );

    assert_eq!(reports[2]["valid"], true);
    assert_eq!(reports[2]["warnings"][0]["code"], "BodyEmpty");
}

#[tokio::test]
async fn skill_push_prints_the_pinned_reference_and_is_reproducible() {
    let registry = Registry::start().await.expect("the test registry starts");
    let addr = registry.addr();
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let skill = skill.display().to_string();

    let mut digests = Vec::new();
    for tag in ["1", "again"] {
        let reference = format!("{addr}/skills/java:{tag}");
        let out = cli(&["skill", "push", "--insecure", &skill, &reference]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let last = text.lines().last().expect("output");
        let digest = last
            .strip_prefix(&format!("{reference}@"))
            .unwrap_or_else(|| panic!("want {reference}@sha256:…, got {last}"));
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        assert!(
            hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()),
            "{digest}"
        );
        digests.push(digest.to_owned());
    }
    assert_eq!(
        digests[0], digests[1],
        "the same skill packs to the same image"
    );

    // The registry serves that digest, and the image holds the skill.
    let options = RegistryOptions {
        insecure_registries: vec![addr.clone()],
        ..RegistryOptions::default()
    };
    let resolved = agentic_oci::resolve_digest(
        &format!("{addr}/skills/java:1"),
        &RegistryAuth::Anonymous,
        &options,
    )
    .await
    .expect("the pushed tag resolves");
    assert_eq!(resolved.digest, digests[0]);
    let content = agentic_oci::fetch_skill(&resolved, None, &RegistryAuth::Anonymous, &options)
        .await
        .expect("the pushed image holds a skill");
    assert_eq!(
        content.report.frontmatter.as_ref().map(|f| f.name.as_str()),
        Some("java-upgrade")
    );

    // An invalid skill is refused before anything is pushed.
    let invalid = write_invalid_skill(tmp.path());
    let reference = format!("{addr}/skills/broken:1");
    let out = cli(&["skill", "push", "--insecure", &invalid, &reference]);
    assert_ne!(out.status.code(), Some(0));
    let message = stderr(&out);
    assert!(
        message.contains("Broken") && message.contains("uppercase"),
        "{message}"
    );
    assert!(
        agentic_oci::resolve_digest(&reference, &RegistryAuth::Anonymous, &options)
            .await
            .is_err(),
        "nothing was pushed for an invalid skill"
    );
}

#[tokio::test]
async fn skill_push_to_a_plain_http_registry_without_insecure_hints_at_it() {
    let registry = Registry::start().await.expect("the test registry starts");
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let reference = format!("{}/skills/java:1", registry.addr());

    let out = cli(&["skill", "push", &skill.display().to_string(), &reference]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("--insecure"), "{message}");
}

#[test]
fn usage_names_the_push_arguments() {
    let out = cli(&["skill", "push", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = stdout(&out);
    assert!(
        help.contains("Usage: agentic-operator skill push [OPTIONS] <DIR>... <REFERENCE>"),
        "{help}"
    );
}

#[test]
fn usage_mistakes_exit_2_in_every_subcommand() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let skill = skill.display().to_string();
    let missing = tmp.path().join("no-such-skill").display().to_string();
    for args in [
        &["no-such-command"][..],
        &["crd", "extra"],
        &["run", "--health-addr", "8081"],
        &["run", "--metrics-addr", ":http"],
        &["run", "--sandbox-backend", "docker"],
        &["skill", "push", &skill],
        &["skill", "push", &missing, "localhost:5000/skills/java:1"],
        &["skill", "push", &skill, "Not A Reference"],
        &["skill", "validate", "--output", "yaml", &skill],
    ] {
        let out = cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: "),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// `agentic-operator run` with nowhere to connect to: it logs why and exits 1.
fn run_without_a_cluster(log_format: &str) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    Command::new(operator_binary())
        .args(["run", "--log-format", log_format])
        .env("KUBECONFIG", home.path().join("no-such-kubeconfig"))
        .env("HOME", home.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_LOG")
        .output()
        .expect("agentic-operator runs")
}

#[test]
fn json_logs_are_flat_and_errors_carry_their_cause() {
    let out = run_without_a_cluster("json");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let error = lines
        .iter()
        .find(|l| l["level"] == "ERROR")
        .unwrap_or_else(|| panic!("no ERROR line in {text}"));
    assert!(error.get("fields").is_none(), "fields are nested: {error}");
    assert_eq!(error["message"], "the operator stopped", "{error}");
    let message = error["error"].as_str().expect("an error field");
    // The context, then kube's reason, then the file that is missing.
    assert!(message.starts_with("loading the kubeconfig"), "{message}");
    assert!(message.contains("no-such-kubeconfig"), "{message}");
    assert_eq!(
        message.matches("no-such-kubeconfig").count(),
        1,
        "a cause repeated: {message}"
    );
}

#[test]
fn text_logs_have_no_colour_codes_when_piped() {
    let out = run_without_a_cluster("text");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("the operator stopped"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escapes in piped logs: {text:?}"
    );
}

#[test]
fn crd_prints_the_committed_manifests() {
    let committed = |group: &str| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../config/crd/bases/{group}.yaml"));
        std::fs::read_to_string(&path).expect("the committed CRDs")
    };
    let mut everything = String::new();
    for group in ["konveyor.io", "trust.agentic-operator.io"] {
        let out = cli(&["crd", "--group", group]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out) == committed(group),
            "`agentic-operator crd --group {group}` differs from config/crd/bases/{group}.yaml; run `make crds`"
        );
        everything.push_str(&committed(group));
    }
    let out = cli(&["crd"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out) == everything,
        "`agentic-operator crd` prints every group's CRDs, one after the other"
    );
}

/// `skill fetch …` off the runtime's thread: the test git server's HTTP side is a task of
/// this runtime and must keep answering while the command waits for it.
async fn fetch_cli(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&args)
    })
    .await
    .expect("skill fetch ran")
}

/// What `dir` holds, files and directories, as relative paths.
fn written_below(dir: &Path) -> BTreeSet<String> {
    paths_below(dir)
        .iter()
        .map(|relative| relative.display().to_string())
        .collect()
}

#[tokio::test]
async fn skill_fetch_writes_exactly_the_asked_commit_and_refuses_others() {
    let server = GitServer::start_with_basic_auth("reader", "s3cret")
        .await
        .expect("git server");
    server.create_repo("skills.git").unwrap();
    let skill = |description: &str| {
        GitFile::File(
            format!("---\nname: demo\ndescription: {description}\n---\n# demo\n").into_bytes(),
        )
    };
    let pinned = server
        .commit(
            "skills.git",
            "main",
            &[
                ("skills/demo/SKILL.md", skill("Pinned.")),
                (
                    "skills/demo/scripts/run.sh",
                    GitFile::Executable(b"#!/bin/sh\necho pinned\n".to_vec()),
                ),
                ("README.md", GitFile::File(b"not the skill\n".to_vec())),
            ],
        )
        .unwrap();
    // The branch moves on: the pinned commit is what must be written, not the tip.
    let tip = server
        .commit(
            "skills.git",
            "main",
            &[
                ("skills/demo/SKILL.md", skill("Moved.")),
                ("skills/demo/extra.md", GitFile::File(b"new\n".to_vec())),
            ],
        )
        .unwrap();
    assert_ne!(pinned, tip);

    let credentials = tempfile::tempdir().expect("tempdir");
    std::fs::write(credentials.path().join("username"), "reader").unwrap();
    std::fs::write(credentials.path().join("password"), "s3cret").unwrap();
    let args = |commit: &str, dest: &Path| {
        vec![
            "skill".to_string(),
            "fetch".to_string(),
            format!("--url={}", server.http_url("skills.git")),
            format!("--commit={commit}"),
            "--sub-path=skills/demo".to_string(),
            format!("--insecure-git-host={}", server.http_host()),
            format!("--credentials-dir={}", credentials.path().display()),
            dest.display().to_string(),
        ]
    };

    let dest = tempfile::tempdir().expect("tempdir");
    let out = fetch_cli(args(&pinned, dest.path())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        written_below(dest.path()),
        BTreeSet::from(["SKILL.md", "scripts", "scripts/run.sh"].map(String::from)),
    );
    let skill_md = std::fs::read_to_string(dest.path().join("SKILL.md")).unwrap();
    assert!(skill_md.contains("Pinned."), "{skill_md}");
    assert!(stdout(&out).contains(&pinned), "{}", stdout(&out));

    // A commit the repository does not have: refused, nothing written.
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let dest = tempfile::tempdir().expect("tempdir");
    let out = fetch_cli(args(missing, dest.path())).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains(missing), "{}", stderr(&out));
    assert!(written_below(dest.path()).is_empty());

    // An abbreviated id or a branch name is not a pin.
    let dest = tempfile::tempdir().expect("tempdir");
    for not_a_pin in [&pinned[..12], "main"] {
        let out = fetch_cli(args(not_a_pin, dest.path())).await;
        assert_eq!(out.status.code(), Some(1), "{not_a_pin}: {}", stdout(&out));
        assert!(written_below(dest.path()).is_empty());
    }

    // A destination that is not empty is not overwritten.
    let dest = tempfile::tempdir().expect("tempdir");
    std::fs::write(dest.path().join("SKILL.md"), "old").unwrap();
    let out = fetch_cli(args(&pinned, dest.path())).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("not empty"), "{}", stderr(&out));

    // Without the credentials the server refuses, and so does the command.
    let dest = tempfile::tempdir().expect("tempdir");
    let mut anonymous = args(&pinned, dest.path());
    anonymous.retain(|a| !a.starts_with("--credentials-dir"));
    let out = fetch_cli(anonymous).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(written_below(dest.path()).is_empty());
}

#[tokio::test]
async fn skill_inspect_lists_the_skills_of_an_image_with_their_digest() {
    let registry = Registry::start().await.expect("the test registry starts");
    let addr = registry.addr();
    let tmp = tempfile::tempdir().expect("tempdir");
    let java = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let quarkus = write_skill(tmp.path(), "quarkus-config", "Configure Quarkus.");
    let reference = format!("{addr}/skills/bundle:1");
    let pinned = push_insecure(&[&java, &quarkus], &reference);
    let digest = pinned.rsplit_once('@').expect("a digest").1.to_owned();

    let out = cli(&["skill", "inspect", "--insecure", &reference]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text,
        format!(
            "{addr}/skills/bundle@{digest}\n  \
             java-upgrade  subPath java-upgrade  valid\n    Upgrade Java projects.\n  \
             quarkus-config  subPath quarkus-config  valid\n    Configure Quarkus.\n  \
             unsigned: no signature in the .sig tag or as a referrer\n"
        )
    );

    let out = cli(&[
        "skill",
        "inspect",
        "--insecure",
        "--output",
        "json",
        &pinned,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["image"], format!("{addr}/skills/bundle@{digest}"));
    let names: Vec<&str> = json["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| skill["subPath"].as_str().expect("a subPath"))
        .collect();
    assert_eq!(names, ["java-upgrade", "quarkus-config"]);

    let missing = format!("{addr}/skills/missing:1");
    let out = cli(&["skill", "inspect", "--insecure", &missing]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("skills/missing"), "{}", stderr(&out));
}

/// Runs `agentic-operator args…` against the shared control plane.
fn cli_in_cluster(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(operator_binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("agentic-operator runs")
}

#[tokio::test]
async fn agentrun_start_list_and_cancel_work_against_the_cluster() {
    use agentic_api::{AgentRun, AgentRunPhase};
    use agentic_integration_tests::{
        Operator, condition, env, llm_agent_spec, ready_agent, wait_phase,
    };
    use agentic_operator::context::SandboxBackend;
    use kube::Api;

    let env = env().await;
    let ns = env.namespace("cli-runs").await.expect("namespace");
    let client = env.client();
    let operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, Vec::new());
    ready_agent(
        &client,
        &ns,
        "migrator",
        llm_agent_spec("harness.invalid/agent:1"),
    )
    .await;
    let kubeconfig = env.kubeconfig_path();

    let out = cli_in_cluster(
        kubeconfig,
        &[
            "agentrun",
            "start",
            "migrator",
            "-n",
            &ns,
            "--instructions",
            "Fix the build.",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let created = stdout(&out);
    let name = created
        .trim()
        .strip_prefix("agentrun/")
        .and_then(|rest| rest.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert!(name.starts_with("migrator-"), "{name}");
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &ns);
    let run = runs.get(&name).await.expect("the run exists");
    assert_eq!(run.spec.agent_ref, "migrator");
    assert_eq!(run.spec.instructions.as_deref(), Some("Fix the build."));

    let out = cli_in_cluster(kubeconfig, &["agentrun", "list", "-n", &ns]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = stdout(&out);
    let mut lines = listing.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGENT", "PHASE", "REASON", "AGE"]);
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(
        row[..3],
        [name.as_str(), "migrator", "Pending"],
        "{listing}"
    );

    let out = cli_in_cluster(kubeconfig, &["agentrun", "cancel", &name, "-n", &ns]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cancelled = wait_phase(&runs, &name, AgentRunPhase::Failed).await;
    let ready = condition(&cancelled.status.as_ref().unwrap().conditions, "Ready").unwrap();
    assert_eq!(ready.reason, "Cancelled");
    let out = cli_in_cluster(kubeconfig, &["agentrun", "list", "-A"]);
    let listing = stdout(&out);
    assert!(
        listing.lines().any(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            cells.len() >= 5
                && cells[..5]
                    == [
                        ns.as_str(),
                        name.as_str(),
                        "migrator",
                        "Failed",
                        "Cancelled",
                    ]
        }),
        "{listing}"
    );

    let out = cli_in_cluster(
        kubeconfig,
        &["agentrun", "cancel", "no-such-run", "-n", &ns],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no-such-run"), "{}", stderr(&out));
    operator.stop().await;
}

#[tokio::test]
async fn skill_push_gets_credentials_from_a_docker_credential_helper() {
    use std::os::unix::fs::PermissionsExt as _;
    const USER: &str = "pusher";
    const PASSWORD: &str = "helper-secret";
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let registry = Registry::start_with_htpasswd(&format!("{USER}:{hash}\n"))
        .await
        .expect("the registry starts");
    let addr = registry.addr();
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "java-upgrade", "Upgrade Java projects.");
    let skill = skill.display().to_string();
    let reference = format!("{addr}/private/java:1");

    // docker-credential-agentictest: the credential-helper protocol, `get` with the registry
    // on stdin and the credentials as JSON on stdout; it records what it was asked.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let asked = tmp.path().join("asked");
    let helper = bin.join("docker-credential-agentictest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 3\ncat > '{}'\n\
             printf '{{\"ServerURL\":\"%s\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}' x\n",
            asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let docker_config = tmp.path().join("docker");
    std::fs::create_dir(&docker_config).unwrap();
    std::fs::write(
        docker_config.join("config.json"),
        format!(r#"{{"credHelpers": {{"{addr}": "agentictest"}}}}"#),
    )
    .unwrap();
    let push = |path: &str| {
        Command::new(operator_binary())
            .args(["skill", "push", "--insecure", &skill, &reference])
            .env("DOCKER_CONFIG", &docker_config)
            .env("PATH", path)
            .output()
            .expect("agentic-operator runs")
    };

    let path = format!("{}:/usr/bin:/bin", bin.display());
    let out = push(&path);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&asked).unwrap(), addr);
    assert!(!stderr(&out).contains(PASSWORD), "{}", stderr(&out));

    // Without the helper on PATH the push fails, saying what to install.
    let out = push("/usr/bin:/bin");
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(
        message.contains("credential helper") && message.contains("PATH"),
        "{message}"
    );
}

/// Every file below `dir` with its bytes and whether it is executable.
fn tree_of(dir: &Path) -> std::collections::BTreeMap<String, (Vec<u8>, bool)> {
    use std::os::unix::fs::PermissionsExt as _;
    files_below(dir)
        .into_iter()
        .map(|relative| {
            let path = dir.join(&relative);
            let bytes = std::fs::read(&path).expect("read a file");
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            (relative.display().to_string(), (bytes, mode & 0o111 != 0))
        })
        .collect()
}

#[tokio::test]
async fn skill_pull_writes_back_exactly_what_was_pushed_and_never_overwrites_unasked() {
    use std::os::unix::fs::PermissionsExt as _;
    let registry = Registry::start().await.expect("the test registry starts");
    let addr = registry.addr();
    let source = tempfile::tempdir().expect("tempdir");
    let java = write_skill(source.path(), "java-upgrade", "Upgrade Java projects.");
    std::fs::create_dir_all(java.join("scripts")).expect("scripts dir");
    std::fs::write(
        java.join("scripts/upgrade.sh"),
        "#!/bin/sh\nmvn versions:set\n",
    )
    .expect("write the script");
    std::fs::set_permissions(
        java.join("scripts/upgrade.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod the script");
    std::fs::create_dir_all(java.join("references/deep")).expect("nested dir");
    std::fs::write(
        java.join("references/deep/table.bin"),
        [0u8, 159, 146, 150, 255],
    )
    .expect("write binary");
    let quarkus = write_skill(source.path(), "quarkus-config", "Configure Quarkus.");
    let reference = format!("{addr}/skills/pull:1");
    let pinned = push_insecure(&[&java, &quarkus], &reference);
    let digest = pinned.rsplit_once('@').expect("a digest").1.to_owned();

    let dest = tempfile::tempdir().expect("tempdir");
    let target = dest.path().join("skills");
    let target_arg = target.display().to_string();
    let out = cli(&["skill", "pull", "--insecure", &reference, &target_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{addr}/skills/pull@{digest}\n  \
             java-upgrade  3 file(s)  {target_arg}/java-upgrade\n  \
             quarkus-config  1 file(s)  {target_arg}/quarkus-config\n"
        )
    );
    for skill in ["java-upgrade", "quarkus-config"] {
        assert_eq!(
            tree_of(&target.join(skill)),
            tree_of(&source.path().join(skill)),
            "{skill} round-trips byte for byte, with its execute bits"
        );
    }

    // A file in the way: refused, nothing touched.
    let skill_md = target.join("java-upgrade/SKILL.md");
    std::fs::write(&skill_md, "edited locally").expect("edit");
    let out = cli(&["skill", "pull", "--insecure", &pinned, &target_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let message = stderr(&out);
    assert!(
        message.contains("--force") && message.contains("java-upgrade/SKILL.md"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&skill_md).expect("read"),
        "edited locally"
    );
    // --force replaces it; a symlink in the way is replaced, not followed.
    let outside = dest.path().join("outside.txt");
    std::fs::write(&outside, "not the skill's").expect("write");
    let script = target.join("java-upgrade/scripts/upgrade.sh");
    std::fs::remove_file(&script).expect("remove");
    std::os::unix::fs::symlink(&outside, &script).expect("symlink");
    let out = cli(&[
        "skill",
        "pull",
        "--insecure",
        "--force",
        &pinned,
        &target_arg,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        tree_of(&target.join("java-upgrade")),
        tree_of(&java),
        "--force restores the pushed files"
    );
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "not the skill's"
    );

    // The current directory by default, an image-root skill under its name.
    let single = format!("{addr}/skills/single:1");
    push_insecure(&[&quarkus], &single);
    let here = tempfile::tempdir().expect("tempdir");
    let docker_config = tempfile::tempdir().expect("tempdir");
    let out = Command::new(operator_binary())
        .args(["skill", "pull", "--insecure", &single])
        .current_dir(here.path())
        .env("DOCKER_CONFIG", docker_config.path())
        .output()
        .expect("agentic-operator runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        tree_of(&here.path().join("quarkus-config")),
        tree_of(&quarkus)
    );
}

/// Pushes an image whose one skill, `broken/SKILL.md`, is invalid, bypassing `skill push`
/// (which refuses it): a packed valid image with its layer replaced.
async fn push_invalid_skill_image(addr: &str, reference: &str) {
    use sha2::Digest as _;
    let digest = |bytes: &[u8]| format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)));
    let tmp = tempfile::tempdir().expect("tempdir");
    let valid = write_skill(tmp.path(), "broken", "Stands in for the broken one.");
    let mut image = agentic_oci::pack_skills(&[valid]).expect("pack");

    let skill_md = b"---\nname: Broken_Name\n---\nNo description.\n";
    let mut header = tar::Header::new_gnu();
    header.set_path("broken/SKILL.md").expect("path");
    header.set_size(skill_md.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &skill_md[..]).expect("append");
    let layer_tar = builder.into_inner().expect("tar");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, &layer_tar).expect("gzip");
    image.layer = encoder.finish().expect("gzip");
    image.diff_id = digest(&layer_tar);
    image.layer_digest = digest(&image.layer);

    let mut config: Value = serde_json::from_slice(&image.config).expect("config JSON");
    config["rootfs"]["diff_ids"] = serde_json::json!([image.diff_id]);
    image.config = serde_json::to_vec(&config).expect("config");
    image.config_digest = digest(&image.config);
    let mut manifest: Value = serde_json::from_slice(&image.manifest).expect("manifest JSON");
    manifest["config"]["digest"] = Value::from(image.config_digest.clone());
    manifest["config"]["size"] = Value::from(image.config.len());
    manifest["layers"][0]["digest"] = Value::from(image.layer_digest.clone());
    manifest["layers"][0]["size"] = Value::from(image.layer.len());
    image.manifest = serde_json::to_vec(&manifest).expect("manifest");
    image.manifest_digest = digest(&image.manifest);

    let options = RegistryOptions {
        insecure_registries: vec![addr.to_owned()],
        ..RegistryOptions::default()
    };
    agentic_oci::push_image(&image, reference, &RegistryAuth::Anonymous, &options)
        .await
        .expect("push the invalid image");
}

#[tokio::test]
async fn skill_pull_refuses_an_invalid_skill_with_its_findings_and_writes_nothing() {
    let registry = Registry::start().await.expect("the test registry starts");
    let addr = registry.addr();
    let reference = format!("{addr}/skills/broken:1");
    push_invalid_skill_image(&addr, &reference).await;

    let dest = tempfile::tempdir().expect("tempdir");
    let out = cli(&[
        "skill",
        "pull",
        "--insecure",
        &reference,
        &dest.path().display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let message = stderr(&out);
    assert!(
        message.contains("InvalidSkill") && message.contains("uppercase"),
        "{message}"
    );
    assert!(written_below(dest.path()).is_empty(), "nothing written");

    // Usage mistakes exit 2.
    let out = cli(&["skill", "pull"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = cli(&["skill", "pull", "not a reference!"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[tokio::test]
async fn skill_verify_accepts_what_cosign_signed_and_names_the_key() {
    let registry = Registry::start().await.expect("the test registry starts");
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), "signed-skill", "A skill signed with cosign.");
    let reference = format!("{}/skills/signed:1", registry.addr());
    let pinned = push_insecure(&[&skill], &reference);
    let (_, digest) = pinned.rsplit_once('@').expect("a digest");
    let by_digest = format!("{}/skills/signed@{digest}", registry.addr());
    for name in ["a", "b"] {
        cosign(
            tmp.path(),
            &["generate-key-pair", "--output-key-prefix", name],
        );
    }
    let key_a = tmp.path().join("a.pub").display().to_string();
    let key_b = tmp.path().join("b.pub").display().to_string();

    // Unsigned yet: exit 1, saying so.
    let out = cli(&["skill", "verify", "--insecure", "--key", &key_a, &reference]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!("{by_digest}: unsigned")),
        "{}",
        stderr(&out)
    );

    cosign(
        tmp.path(),
        &[
            "sign",
            "--key",
            "a.key",
            "--tlog-upload=false",
            "--use-signing-config=false",
            "--new-bundle-format=false",
            "--allow-http-registry",
            "--yes",
            &by_digest,
        ],
    );
    // Either of two keys may count (rotation); the one that signed is named.
    let out = cli(&[
        "skill",
        "verify",
        "--insecure",
        "--key",
        &key_b,
        "--key",
        &key_a,
        &reference,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("{by_digest}: verified\n")),
        "{text}"
    );
    let fingerprint = pem_fingerprint(&std::fs::read_to_string(&key_a).expect("a.pub"));
    assert!(
        text.contains(&format!("signed by key {fingerprint}")),
        "{text}"
    );
    assert!(text.contains("(from the .sig tag)"), "{text}");

    // Another key alone: exit 1 with the reason.
    let out = cli(&["skill", "verify", "--insecure", "--key", &key_b, &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not validly signed: ")
            && stderr(&out).contains("(SignatureMismatch)"),
        "{}",
        stderr(&out)
    );

    // No requirement at all is a usage error.
    let out = cli(&["skill", "verify", "--insecure", &reference]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
