//! Trust policies against a real API server and registry: a revocation reaches the card that
//! pinned the digest in the time of one watch event and one pass, a namespace's policy
//! cannot relax the cluster's, and a namespace's policy writes its own status.
//!
//! Cluster policies reach every namespace of the shared control plane, so each one here
//! selects and revokes only this test's own repositories and digests, and is deleted at the
//! end.

use std::time::{Duration, Instant};

use agentic_api::{
    ClusterSkillTrustPolicy, ClusterSkillTrustPolicySpec, KeySource, Revocations, SkillCard,
    SkillTrustPolicy, SkillTrustPolicySpec, TrustMode, TrustPolicy, UnselectedSkills,
    VerificationState,
};
use agentic_integration_tests::{
    CONVERGE, apply, card_ready_is, condition, has_condition, image_card, meta, push, scenario,
    wait_for, write_skill,
};
use agentic_operator::context::SandboxBackend;
use kube::Api;
use kube::api::DeleteParams;

fn cluster_policy(name: &str, policy: TrustPolicy) -> ClusterSkillTrustPolicy {
    ClusterSkillTrustPolicy {
        metadata: meta(name),
        spec: ClusterSkillTrustPolicySpec { policy },
        status: None,
    }
}

/// A cosign-style public key (ECDSA P-256, PEM) that signed nothing.
fn unused_key() -> KeySource {
    let key = rcgen::KeyPair::generate().expect("a P-256 key");
    KeySource {
        pem: Some(key.public_key_pem()),
        ..KeySource::default()
    }
}

/// Pushes a one-skill image to a repository of this test's namespace; returns the tag
/// reference and the digest.
async fn push_skill(ns: &str, repository: &str) -> (String, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let skill = write_skill(tmp.path(), repository, "A skill trust policies look at.");
    let pushed = push(&[skill], &format!("{ns}/{repository}:1")).await;
    let (reference, digest) = pushed.rsplit_once('@').expect("pinned");
    let tag = reference.to_string();
    (tag, digest.to_string())
}

#[tokio::test]
async fn revoking_a_digest_makes_its_cards_revoked_at_once_and_lifting_it_restores_them() {
    let (ns, client, _operator) = scenario("trust-revoke", SandboxBackend::Pod).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let policies: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());
    let (tag, digest) = push_skill(&ns, "revoked").await;
    apply(&cards, &image_card("java", &tag)).await;
    let ready = wait_for(&cards, "java", "Ready", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;
    let status = ready.status.expect("status");
    assert!(
        condition(&status.conditions, "Verified").is_none() && status.verification.is_none(),
        "no policy: the card is as it always was: {status:#?}"
    );

    let name = format!("{ns}-revoke");
    let revoke = cluster_policy(
        &name,
        TrustPolicy {
            revoked: Some(Revocations {
                digests: vec![digest.clone()],
                ..Revocations::default()
            }),
            ..TrustPolicy::default()
        },
    );
    let started = Instant::now();
    apply(&policies, &revoke).await;
    // The policy's watch event maps to every card in scope, and the card's pass reads no
    // registry for a digest it validated at this generation: one event and one status write.
    // Polled every 50 ms, well under the 5 s the feature promises.
    let revoked = loop {
        let card = cards.get("java").await.expect("the card");
        if card_ready_is(&card, "False", "Revoked") {
            break card;
        }
        assert!(
            started.elapsed() < CONVERGE,
            "not revoked after {CONVERGE:?}: {:#?}",
            card.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = started.elapsed();
    eprintln!("revocation reached the card in {took:?}");
    let status = revoked.status.expect("status");
    let ready = condition(&status.conditions, "Ready").expect("Ready");
    assert!(
        ready.message.contains(&digest) && ready.message.contains(&name),
        "names the digest and the policy: {}",
        ready.message
    );
    assert!(has_condition(
        &status.conditions,
        "Verified",
        "False",
        "Revoked"
    ));
    assert_eq!(
        status.verification.map(|v| v.state),
        Some(VerificationState::Revoked)
    );

    policies
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the policy");
    let restored = wait_for(&cards, "java", "Ready again", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;
    let status = restored.status.expect("status");
    assert!(
        condition(&status.conditions, "Verified").is_none() && status.verification.is_none(),
        "the policy is gone, and with it every trace: {status:#?}"
    );
}

#[tokio::test]
async fn a_namespaced_warn_policy_cannot_relax_a_cluster_enforce_policy() {
    let (ns, client, _operator) = scenario("trust-relax", SandboxBackend::Pod).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let cluster: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());
    let namespaced: Api<SkillTrustPolicy> = Api::namespaced(client.clone(), &ns);
    let (tag, _) = push_skill(&ns, "unsigned").await;
    apply(&cards, &image_card("unsigned", &tag)).await;
    wait_for(&cards, "unsigned", "Ready", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;

    let selected = format!("*/{ns}/**");
    let name = format!("{ns}-signed");
    apply(
        &cluster,
        &cluster_policy(
            &name,
            TrustPolicy {
                images: vec![selected.clone()],
                mode: TrustMode::Enforce,
                keys: vec![unused_key()],
                ..TrustPolicy::default()
            },
        ),
    )
    .await;
    let blocked = wait_for(&cards, "unsigned", "Ready=False Unverified", |c| {
        card_ready_is(c, "False", "Unverified")
    })
    .await;
    let status = blocked.status.expect("status");
    assert!(
        has_condition(&status.conditions, "Verified", "False", "Unsigned"),
        "{status:#?}"
    );

    // The tenant selects the same images in Warn mode, with a key of its own.
    apply(
        &namespaced,
        &SkillTrustPolicy {
            metadata: meta("relaxed"),
            spec: SkillTrustPolicySpec {
                policy: TrustPolicy {
                    images: vec![selected],
                    mode: TrustMode::Warn,
                    keys: vec![unused_key()],
                    ..TrustPolicy::default()
                },
            },
            status: None,
        },
    )
    .await;
    let tenant_policy = format!("SkillTrustPolicy/{ns}/relaxed");
    let judged = wait_for(&cards, "unsigned", "both policies applied", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.verification.as_ref())
            .is_some_and(|v| v.policies.contains(&tenant_policy))
    })
    .await;
    // The tenant's policy reports on itself: its inline key parsed, no run mounted the skill.
    let reported = wait_for(&namespaced, "relaxed", "the policy's own status", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Ready", "True", "KeysRead"))
    })
    .await;
    let policy_status = reported.status.expect("status");
    assert_eq!(
        (
            policy_status.observed_generation,
            policy_status.affected_runs,
            policy_status.blast_radius.len()
        ),
        (reported.metadata.generation, 0, 0),
        "{policy_status:#?}"
    );
    let status = judged.status.expect("status");
    let ready = condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Unverified"),
        "the cluster's Enforce still holds: {status:#?}"
    );
    assert!(
        ready
            .message
            .contains(&format!("ClusterSkillTrustPolicy/{name}")),
        "{}",
        ready.message
    );

    cluster
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the policy");
    // The tenant's Warn policy alone: Ready, with Verified=False.
    let warned = wait_for(&cards, "unsigned", "Ready under Warn", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;
    assert!(has_condition(
        &warned.status.expect("status").conditions,
        "Verified",
        "False",
        "Unsigned"
    ));
}

#[tokio::test]
async fn a_namespaces_default_deny_holds_back_what_no_policy_selects() {
    let (ns, client, _operator) = scenario("trust-deny", SandboxBackend::Pod).await;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    let namespaced: Api<SkillTrustPolicy> = Api::namespaced(client.clone(), &ns);
    let (tag, _) = push_skill(&ns, "unselected").await;
    apply(&cards, &image_card("unselected", &tag)).await;
    wait_for(&cards, "unselected", "Ready", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;

    // A policy of the namespace that selects nothing and denies what no policy selects.
    let deny = |name: &str, revoked: Option<Revocations>| SkillTrustPolicy {
        metadata: meta(name),
        spec: SkillTrustPolicySpec {
            policy: TrustPolicy {
                unselected: UnselectedSkills::Deny,
                revoked,
                ..TrustPolicy::default()
            },
        },
        status: None,
    };
    apply(&namespaced, &deny("deny", None)).await;
    let denied = wait_for(&cards, "unselected", "Ready=False NotSelected", |c| {
        card_ready_is(c, "False", "NotSelected")
    })
    .await;
    let message = condition(&denied.status.expect("status").conditions, "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains(&format!("SkillTrustPolicy/{ns}/deny")),
        "{message}"
    );

    // The CRD takes revoked keys in their canonical form only.
    let upper_case = Revocations {
        keys: vec![format!("sha256:{}", "AB".repeat(32))],
        ..Revocations::default()
    };
    let refused = namespaced
        .create(
            &kube::api::PostParams::default(),
            &deny("mistyped", Some(upper_case)),
        )
        .await
        .expect_err("a key in another form is refused");
    assert!(refused.to_string().contains("keys"), "{refused}");

    namespaced
        .delete("deny", &DeleteParams::default())
        .await
        .expect("the policy is deleted");
    wait_for(&cards, "unselected", "Ready again", |c| {
        card_ready_is(c, "True", "SkillValid")
    })
    .await;
}
