//! agentic-git against a real git server: `git daemon` and `git http-backend` (Debian's git).

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentic_git::{
    GitAuth, GitError, GitOptions, RefKind, SkillEntryKind, SourceUrl, fetch_commit, resolve,
};
use agentic_testenv::{GitFile, GitServer};

fn skill_md(name: &str, description: &str) -> GitFile {
    GitFile::File(
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n").into_bytes(),
    )
}

fn options(server: &GitServer) -> GitOptions {
    GitOptions {
        insecure_hosts: vec![server.http_host()],
        ..GitOptions::default()
    }
}

/// Runs a blocking call of the crate off the test's runtime, which serves the HTTP side.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

#[tokio::test(flavor = "multi_thread")]
async fn resolves_fetches_and_reads_a_pinned_commit_over_git_and_http() {
    let server = GitServer::start().await.expect("git server");
    server.create_repo("skills.git").unwrap();
    let first = server
        .commit(
            "skills.git",
            "main",
            &[
                ("demo/SKILL.md", skill_md("demo", "First version.")),
                (
                    "demo/scripts/run.sh",
                    GitFile::Executable(b"#!/bin/sh\necho hi\n".to_vec()),
                ),
                ("README.md", GitFile::File(b"not a skill".to_vec())),
            ],
        )
        .unwrap();
    server.tag("skills.git", "v1", &first).unwrap();
    let second = server
        .commit(
            "skills.git",
            "main",
            &[("demo/SKILL.md", skill_md("demo", "Second version."))],
        )
        .unwrap();
    assert_ne!(first, second);

    for url in [server.git_url("skills.git"), server.http_url("skills.git")] {
        let options = options(&server);
        let source = SourceUrl::parse(&url, &options.insecure_hosts).unwrap();
        let (s, o) = (source.clone(), options.clone());
        let head = blocking(move || resolve(&s, None, &GitAuth::Anonymous, &o))
            .await
            .unwrap();
        assert_eq!(head.commit, second, "{url}");
        assert_eq!(
            head.kind,
            RefKind::DefaultBranch {
                branch: Some("main".into())
            }
        );
        let (s, o) = (source.clone(), options.clone());
        let tag = blocking(move || resolve(&s, Some("v1"), &GitAuth::Anonymous, &o))
            .await
            .unwrap();
        assert_eq!(
            (tag.commit.as_str(), tag.kind),
            (first.as_str(), RefKind::Tag("v1".into()))
        );
        let (s, o) = (source.clone(), options.clone());
        let gone = blocking(move || resolve(&s, Some("nope"), &GitAuth::Anonymous, &o))
            .await
            .unwrap_err();
        assert_eq!(gone.reason(), "RefNotFound", "{gone}");

        // The older commit, by id, although main has moved on: exactly its files.
        let (s, o, c) = (source.clone(), options.clone(), first.clone());
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().to_path_buf();
        let (commit, skill, root, missing) = blocking(move || {
            let fetched = fetch_commit(&s, &c, &GitAuth::Anonymous, &o).unwrap();
            // The raw object handed to signature checks is the commit's: it hashes to its id.
            let raw = fetched.raw_commit().unwrap();
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Commit, &raw)
                .unwrap();
            assert_eq!(id.to_string(), fetched.commit());
            let skill = fetched.skill(Some("demo"), &o.limits).unwrap();
            fetched.write_skill(&skill, &dest).unwrap();
            let root = fetched.skill(None, &o.limits).unwrap_err();
            let missing = fetched.skill(Some("missing"), &o.limits).unwrap_err();
            (fetched.commit(), skill, root, missing)
        })
        .await;
        assert_eq!(commit, first);
        assert_eq!(
            skill.report.frontmatter.as_ref().unwrap().description,
            "First version."
        );
        let paths: Vec<(&str, SkillEntryKind)> = skill
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e.kind))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("SKILL.md", SkillEntryKind::File { executable: false }),
                ("scripts", SkillEntryKind::Directory),
                ("scripts/run.sh", SkillEntryKind::File { executable: true }),
            ]
        );
        let written = std::fs::read_to_string(out.path().join("SKILL.md")).unwrap();
        assert!(written.contains("First version."), "{written}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.path().join("scripts/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);

        // The root has no SKILL.md but a skill directory: a subPath is asked for.
        assert_eq!(root.reason(), "SubPathRequired", "{root}");
        assert!(root.to_string().ends_with("demo"), "{root}");
        assert_eq!(missing.reason(), "SkillNotFound", "{missing}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refuses_unsafe_and_invalid_content_and_unknown_commits() {
    let server = GitServer::start().await.expect("git server");
    server.create_repo("bad.git").unwrap();
    let commit = server
        .commit(
            "bad.git",
            "main",
            &[
                (
                    "real/SKILL.md",
                    skill_md("linked", "Reached through a link."),
                ),
                ("linked", GitFile::Symlink("real".into())),
                ("broken/SKILL.md", GitFile::File(b"no frontmatter".to_vec())),
                // What goose would load as more than the skill, or differently.
                (
                    "nested/SKILL.md",
                    skill_md("nested", "Holds another skill."),
                ),
                (
                    "nested/refs/deep/SKILL.md",
                    skill_md("other", "Nobody validated me."),
                ),
                ("with-link/SKILL.md", skill_md("with-link", "Links out.")),
                ("with-link/docs/out", GitFile::Symlink("../../real".into())),
                ("cut/SKILL.md", skill_md("cut", "a --- b")),
            ],
        )
        .unwrap();
    let options = options(&server);
    let source = SourceUrl::parse(&server.git_url("bad.git"), &[]).unwrap();
    let (s, o, c) = (source.clone(), options.clone(), commit.clone());
    let (linked, broken, large, goose) = blocking(move || {
        let fetched = fetch_commit(&s, &c, &GitAuth::Anonymous, &o).unwrap();
        let tiny = agentic_git::Limits {
            max_entries: 0,
            ..o.limits
        };
        (
            fetched.skill(Some("linked"), &o.limits).unwrap_err(),
            fetched.skill(Some("broken"), &o.limits).unwrap_err(),
            fetched.skill(Some("real"), &tiny).unwrap_err(),
            ["nested", "with-link", "cut"]
                .map(|dir| fetched.skill(Some(dir), &o.limits).unwrap_err()),
        )
    })
    .await;
    let [nested, with_link, cut] = goose;
    for (error, reason, path) in [
        (&nested, "NestedSkillFile", "nested/refs/deep/SKILL.md"),
        (&with_link, "LinkInSkill", "with-link/docs/out"),
        (&cut, "GooseIncompatible", "cut/SKILL.md"),
    ] {
        assert_eq!(error.reason(), reason, "{error}");
        assert!(error.is_content_verdict(), "{error}");
        assert!(error.to_string().starts_with(path), "{error}");
    }
    assert!(nested.to_string().contains("skill of its own"), "{nested}");
    assert!(
        with_link.to_string().contains("follows links"),
        "{with_link}"
    );
    assert!(cut.to_string().contains("'---'"), "{cut}");
    assert_eq!(linked.reason(), "UnsafeSourceContent", "{linked}");
    assert_eq!(broken.reason(), "InvalidSkill", "{broken}");
    assert!(matches!(large, GitError::TooLarge { .. }), "{large}");

    let unknown = "0123456789abcdef0123456789abcdef01234567";
    let (s, o) = (source.clone(), options.clone());
    let error = blocking(move || fetch_commit(&s, unknown, &GitAuth::Anonymous, &o).err())
        .await
        .expect("an unknown commit is not fetched");
    assert_eq!(error.reason(), "RefNotFound", "{error}");

    // Dropping the server ends its daemon and watchdog and removes the repositories.
    let pids = server.pids();
    assert!(pids.len() >= 2, "{pids:?}");
    drop(server);
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for this process to reap it.
        assert!(
            stat.is_empty() || stat.contains(") Z "),
            "pid {pid} still runs: {stat}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn http_credentials_are_required_and_used_and_a_dead_host_is_unavailable() {
    let server = GitServer::start_with_basic_auth("bot", "s3cret")
        .await
        .expect("git server");
    server.create_repo("private.git").unwrap();
    let commit = server
        .commit(
            "private.git",
            "main",
            &[("SKILL.md", skill_md("private", "Behind auth."))],
        )
        .unwrap();
    let options = options(&server);
    let source =
        SourceUrl::parse(&server.http_url("private.git"), &options.insecure_hosts).unwrap();
    let (s, o) = (source.clone(), options.clone());
    let error = blocking(move || resolve(&s, Some("main"), &GitAuth::Anonymous, &o))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");
    let wrong = GitAuth::Basic {
        username: "bot".into(),
        password: "wrong".into(),
    };
    let (s, o) = (source.clone(), options.clone());
    let error = blocking(move || resolve(&s, Some("main"), &wrong, &o))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "Unauthorized", "{error}");
    assert!(!error.to_string().contains("wrong"), "{error}");
    let right = GitAuth::Basic {
        username: "bot".into(),
        password: "s3cret".into(),
    };
    let (s, o, a) = (source.clone(), options.clone(), right.clone());
    let resolved = blocking(move || resolve(&s, Some("main"), &a, &o))
        .await
        .unwrap();
    assert_eq!(resolved.commit, commit);
    let (s, o, c) = (source.clone(), options.clone(), commit.clone());
    let skill = blocking(move || agentic_git::validate_commit(&s, &c, None, &right, &o))
        .await
        .unwrap();
    assert_eq!(skill.frontmatter.name, "private");

    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = SourceUrl::parse(&format!("git://127.0.0.1:{port}/x.git"), &[]).unwrap();
    let o = options.clone();
    let error = blocking(move || resolve(&dead, Some("main"), &GitAuth::Anonymous, &o))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "SourceUnavailable", "{error}");
    assert!(error.is_transient());
}
