//! Signed git commits under a ClusterSkillTrustPolicy, against a real API server and the test
//! git server: commits signed by git with an SSH key (`ssh-keygen`) and a GPG key (`gpg`)
//! made in the test, an unsigned commit and one signed by a key the policy does not list.
//!
//! The cluster policy reaches every namespace of the shared control plane, so it selects
//! only this test's repositories (their URLs carry its git server's port) and is deleted at
//! the end.

use std::path::Path;

use agentic_api::{
    ClusterSkillTrustPolicy, ClusterSkillTrustPolicySpec, GitSigners, KeySource, Revocations,
    SkillCard, SkillCardSpec, TrustMode, TrustPolicy, VerificationState,
};
use agentic_integration_tests::{Operator, apply, condition, env, has_condition, meta, wait_for};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::signing::{SigningKeys, ssh_signing};
use agentic_testenv::{GitFile, GitServer};
use kube::Api;
use kube::api::DeleteParams;

fn card(name: &str, source: &str, git_ref: Option<&str>) -> SkillCard {
    SkillCard {
        metadata: meta(name),
        spec: SkillCardSpec {
            source: Some(source.to_string()),
            git_ref: git_ref.map(str::to_string),
            ..SkillCardSpec::default()
        },
        status: None,
    }
}

fn skill_md(name: &str) -> GitFile {
    GitFile::File(
        format!("---\nname: {name}\ndescription: A skill with a signed commit.\n---\n# {name}\n")
            .into_bytes(),
    )
}

fn public_line(key: &Path) -> String {
    agentic_testenv::signing::ssh_public_line(key).expect("the public key")
}

fn ssh_fingerprint(key: &Path) -> String {
    agentic_testenv::signing::ssh_fingerprint(key).expect("a fingerprint")
}

fn inline(text: String) -> KeySource {
    KeySource {
        pem: Some(text),
        ..KeySource::default()
    }
}

/// The message of the card's `Verified` condition.
fn verified_message(card: SkillCard) -> String {
    let conditions = card.status.expect("status").conditions;
    condition(&conditions, "Verified")
        .expect("Verified")
        .message
        .clone()
}

fn conditions_are(card: &SkillCard, ready: (&str, &str), verified: (&str, &str)) -> bool {
    card.status.as_ref().is_some_and(|s| {
        has_condition(&s.conditions, "Ready", ready.0, ready.1)
            && has_condition(&s.conditions, "Verified", verified.0, verified.1)
    })
}

#[tokio::test]
async fn signed_commits_are_verified_and_unsigned_or_foreign_ones_are_not_ready() {
    let keys = SigningKeys::new().expect("a directory for signing keys");
    let dev = keys.ssh_key("dev", "ed25519").expect("an SSH key");
    let stranger = keys.ssh_key("stranger", "ed25519").expect("an SSH key");
    let gpg_dev = keys
        .gpg_key("Dev <dev@example.com>", "never")
        .expect("a GPG key");
    let armored = keys.gpg_export(&gpg_dev).expect("gpg exports it");

    let server = GitServer::start().await.expect("git server");
    let mut commits = Vec::new();
    for (repo, signing) in [
        ("ssh.git", Some(ssh_signing(&dev))),
        ("gpg.git", Some(keys.gpg_signing(&gpg_dev))),
        ("unsigned.git", None),
        ("stranger.git", Some(ssh_signing(&stranger))),
    ] {
        server.create_repo(repo).expect("a repository");
        let files = [("SKILL.md", skill_md("demo"))];
        let commit = match signing {
            Some(signing) => server.commit_signed(repo, "main", &files, &signing),
            None => server.commit(repo, "main", &files),
        }
        .expect("a commit");
        commits.push(commit);
    }
    let gpg_commit = commits[1].clone();
    let ssh_commit = commits[0].clone();

    let env = env().await;
    let ns = env.namespace("trust-git").await.expect("namespace");
    let client = env.client();
    let mut operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, Vec::new());
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let policies: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());

    let name = format!("{ns}-git");
    let dev_allowed = format!(
        "# who may sign skills\ndev@example.com namespaces=\"git\" {}\n",
        public_line(&dev)
    );
    let policy =
        |mode: TrustMode, allowed: &str, revoked: Option<Revocations>| ClusterSkillTrustPolicy {
            metadata: meta(&name),
            spec: ClusterSkillTrustPolicySpec {
                policy: TrustPolicy {
                    sources: ["ssh.git", "gpg.git", "unsigned.git", "stranger.git"]
                        .iter()
                        .map(|repo| server.git_url(repo))
                        .collect(),
                    mode,
                    git_signers: Some(GitSigners {
                        allowed_signers: Some(inline(allowed.to_string())),
                        gpg_keys: vec![inline(armored.clone())],
                    }),
                    revoked,
                    ..TrustPolicy::default()
                },
            },
            status: None,
        };
    apply(&policies, &policy(TrustMode::Enforce, &dev_allowed, None)).await;
    // The ssh card names its commit in `spec.ref`: once it is Ready at this generation, its
    // passes fetch nothing, which the restart below relies on.
    for (card_name, repo, git_ref) in [
        ("ssh", "ssh.git", Some(ssh_commit.as_str())),
        ("gpg", "gpg.git", None),
        ("unsigned", "unsigned.git", None),
        ("stranger", "stranger.git", None),
    ] {
        apply(&cards, &card(card_name, &server.git_url(repo), git_ref)).await;
    }

    // Signed by an allowed key: Ready, verified, the signer named as `revoked.keys` names it.
    for (card_name, signer) in [("ssh", ssh_fingerprint(&dev)), ("gpg", gpg_dev.clone())] {
        let verified = wait_for(&cards, card_name, "Ready and Verified", |c| {
            conditions_are(c, ("True", "SkillValid"), ("True", "SignatureVerified"))
        })
        .await;
        let verification = verified
            .status
            .and_then(|s| s.verification)
            .expect("status.verification");
        assert_eq!(verification.state, VerificationState::Verified);
        assert_eq!(verification.signer.as_deref(), Some(signer.as_str()));
        assert_eq!(verification.layout.as_deref(), Some("commit"));
        assert_eq!(
            verification.policies,
            vec![format!("ClusterSkillTrustPolicy/{name}")]
        );
    }

    // Unsigned, or signed by a key the policy does not list: not Ready, and why.
    wait_for(
        &cards,
        "unsigned",
        "Ready=False Unverified, Unsigned",
        |c| conditions_are(c, ("False", "Unverified"), ("False", "Unsigned")),
    )
    .await;
    let foreign = wait_for(
        &cards,
        "stranger",
        "Ready=False Unverified, SignatureInvalid",
        |c| conditions_are(c, ("False", "Unverified"), ("False", "SignatureInvalid")),
    )
    .await;
    let message = verified_message(foreign);
    assert!(
        message.contains(&ssh_fingerprint(&stranger)) && message.contains("not an allowed signer"),
        "names the foreign key: {message}"
    );

    // A restarted operator keeps no commit objects, and the pass of a Ready card pinned by
    // commit id fetches nothing (under `Warn` the card stays Ready, so no pass fetches it):
    // the policy now allows the stranger's key instead of dev's. The ssh card is refused
    // naming dev's key, which only a read of its commit object by the trust check itself
    // can find; had it failed, `Verified` would stay Unknown (`VerificationUnavailable`).
    operator.stop().await;
    let stranger_allowed = format!("ops@example.com {}\n", public_line(&stranger));
    apply(&policies, &policy(TrustMode::Warn, &stranger_allowed, None)).await;
    operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, Vec::new());
    let admitted = wait_for(&cards, "stranger", "Ready and Verified", |c| {
        conditions_are(c, ("True", "SkillValid"), ("True", "SignatureVerified"))
    })
    .await;
    assert_eq!(
        admitted
            .status
            .and_then(|s| s.verification)
            .and_then(|v| v.signer),
        Some(ssh_fingerprint(&stranger))
    );
    let refused = wait_for(
        &cards,
        "ssh",
        "Ready under Warn, Verified=False SignatureInvalid",
        |c| conditions_are(c, ("True", "SkillValid"), ("False", "SignatureInvalid")),
    )
    .await;
    let message = verified_message(refused);
    assert!(
        message.contains(&ssh_fingerprint(&dev)),
        "names dev's key: {message}"
    );

    // Revoking the GPG-signed commit, then the stranger's SSH key: each card turns Revoked.
    apply(
        &policies,
        &policy(
            TrustMode::Enforce,
            &stranger_allowed,
            Some(Revocations {
                commits: vec![gpg_commit.clone()],
                ..Revocations::default()
            }),
        ),
    )
    .await;
    let revoked = wait_for(&cards, "gpg", "Ready=False Revoked", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "False", "Revoked"))
    })
    .await;
    let ready = condition(&revoked.status.expect("status").conditions, "Ready")
        .expect("Ready")
        .message
        .clone();
    assert!(ready.contains(&gpg_commit), "names the commit: {ready}");
    apply(
        &policies,
        &policy(
            TrustMode::Enforce,
            &stranger_allowed,
            Some(Revocations {
                commits: vec![gpg_commit],
                keys: vec![ssh_fingerprint(&stranger)],
                ..Revocations::default()
            }),
        ),
    )
    .await;
    wait_for(&cards, "stranger", "Ready=False Revoked", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "False", "Revoked"))
    })
    .await;

    policies
        .delete(&name, &DeleteParams::default())
        .await
        .expect("the policy deleted");
    operator.stop().await;
}
