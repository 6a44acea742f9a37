//! Signatures made by cosign itself (COSIGN_BIN), in a registry of this test's own, checked by
//! the operator against a ClusterSkillTrustPolicy whose keys come from a Secret: a signed
//! image is verified and names its signer, an unsigned one is refused, a tag moved to unsigned
//! bytes is not followed, and a registry outage leaves the verified card Ready on its pin.
//!
//! The policy selects only this test's registry, which no other test uses, and is deleted at
//! the end.

use std::path::Path;
use std::time::{Duration, Instant};

use agentic_api::{
    ClusterSkillTrustPolicy, ClusterSkillTrustPolicySpec, KeyRef, KeySource, SkillCard,
    TrustPolicy, VerificationState,
};
use agentic_integration_tests::{
    Operator, apply, card_ready_is, condition, cosign, env, events_about, has_condition,
    image_card, meta, pem_fingerprint, wait_for, write_skill,
};
use agentic_operator::context::SandboxBackend;
use agentic_testenv::Registry;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;

/// How long the registry stays down: several of the operator's 2 s tag refreshes, each of
/// which tries the registry and must keep the card as it is.
const OUTAGE: Duration = Duration::from_secs(8);

/// Packs a skill whose description is `description` and pushes it as `repo_tag` to
/// `registry`; returns the image by digest, as a card's `status.resolvedImage` names it.
async fn push_skill(registry: &str, dir: &Path, repo_tag: &str, description: &str) -> String {
    let skill = write_skill(dir, "java-upgrade", description);
    let pushed = agentic_fixtures::push_to(registry, &[skill], repo_tag)
        .await
        .expect("pushing the skill");
    let (tagged, digest) = pushed.rsplit_once('@').expect("pinned by digest");
    let (repository, _tag) = tagged.rsplit_once(':').expect("tagged");
    format!("{repository}@{digest}")
}

/// Signs `pinned` with cosign's key `key`, in cosign's legacy `.sig` tag, offline.
fn cosign_sign(dir: &Path, key: &Path, pinned: &str) {
    cosign(
        dir,
        &[
            "sign",
            "--key",
            &key.display().to_string(),
            "--tlog-upload=false",
            "--use-signing-config=false",
            "--new-bundle-format=false",
            "--allow-http-registry",
            "--yes",
            pinned,
        ],
    );
}

#[tokio::test]
async fn cosign_signed_skills_are_verified_and_unsigned_bytes_are_never_adopted() {
    let env = env().await;
    let ns = env.namespace("trust-registry").await.expect("namespace");
    let client = env.client();
    let mut registry = Registry::start()
        .await
        .expect("a registry of this test's own");
    let addr = registry.addr();
    let _operator = Operator::start(client.clone(), &ns, SandboxBackend::Pod, vec![addr.clone()]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    cosign(
        dir,
        &["generate-key-pair", "--output-key-prefix", "release"],
    );
    let public = std::fs::read_to_string(dir.join("release.pub")).expect("release.pub");

    let signed = push_skill(&addr, dir, "skills/java:1", "Signed at release.").await;
    cosign_sign(dir, &dir.join("release.key"), &signed);
    let unsigned = push_skill(&addr, dir, "skills/unsigned:1", "Never signed.").await;

    // The key in a Secret, beside a retired key that signed nothing: any one of a policy's
    // keys will do, which is how keys rotate.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    apply(
        &secrets,
        &Secret {
            metadata: meta("skill-signing"),
            string_data: Some([("release.pub".to_string(), public.clone())].into()),
            ..Secret::default()
        },
    )
    .await;
    let retired = rcgen::KeyPair::generate().expect("a P-256 key");
    let policies: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());
    let policy_name = format!("{ns}-release");
    apply(
        &policies,
        &ClusterSkillTrustPolicy {
            metadata: meta(&policy_name),
            spec: ClusterSkillTrustPolicySpec {
                policy: TrustPolicy {
                    images: vec![format!("{addr}/skills/**")],
                    keys: vec![
                        KeySource {
                            pem: Some(retired.public_key_pem()),
                            ..KeySource::default()
                        },
                        KeySource {
                            secret_key_ref: Some(KeyRef {
                                name: "skill-signing".into(),
                                key: "release.pub".into(),
                                namespace: Some(ns.clone()),
                            }),
                            ..KeySource::default()
                        },
                    ],
                    ..TrustPolicy::default()
                },
            },
            status: None,
        },
    )
    .await;

    let cards: Api<SkillCard> = Api::namespaced(client.clone(), &ns);
    apply(
        &cards,
        &image_card("java", &format!("{addr}/skills/java:1")),
    )
    .await;
    apply(
        &cards,
        &image_card("unsigned", &format!("{addr}/skills/unsigned:1")),
    )
    .await;

    // The card may pass once before the operator's watch has the policy (it was applied
    // just before): the policy's event then brings the card back, verified.
    let verified = wait_for(&cards, "java", "Ready and verified", |c| {
        card_ready_is(c, "True", "SkillValid")
            && c.status.as_ref().is_some_and(|s| {
                has_condition(&s.conditions, "Verified", "True", "SignatureVerified")
            })
    })
    .await;
    let status = verified.status.expect("status");
    assert_eq!(status.resolved_image.as_deref(), Some(signed.as_str()));
    let verification = status.verification.expect("status.verification");
    assert_eq!(verification.state, VerificationState::Verified);
    assert_eq!(
        verification.signer.as_deref(),
        Some(pem_fingerprint(&public).as_str()),
        "the signer is the release key, by fingerprint"
    );
    assert_eq!(verification.layout.as_deref(), Some("tag"));
    assert!(
        verification
            .signature_digest
            .as_deref()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{verification:?}"
    );

    let refused = wait_for(&cards, "unsigned", "refused", |c| {
        card_ready_is(c, "False", "Unverified")
    })
    .await;
    let ready = condition(
        &refused.status.as_ref().expect("status").conditions,
        "Ready",
    )
    .expect("Ready")
    .clone();
    let (_, unsigned_digest) = unsigned.rsplit_once('@').expect("pinned");
    assert!(
        ready.message.contains(&policy_name) && ready.message.contains(unsigned_digest),
        "names the policy that requires a signature and the digest it lacks: {}",
        ready.message
    );

    // The tag moves to bytes nobody signed: the card stays on what it verified.
    let moved = push_skill(
        &addr,
        dir,
        "skills/java:1",
        "Pushed over the tag, unsigned.",
    )
    .await;
    assert_ne!(moved, signed);
    let kept = wait_for(&cards, "java", "the new pin refused", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| has_condition(&s.conditions, "Verified", "True", "NewPinRefused"))
    })
    .await;
    let status = kept.status.expect("status");
    assert_eq!(
        status.resolved_image.as_deref(),
        Some(signed.as_str()),
        "still the verified digest"
    );
    assert!(has_condition(
        &status.conditions,
        "Ready",
        "True",
        "SkillValid"
    ));
    let why = condition(&status.conditions, "Verified")
        .expect("Verified")
        .message
        .clone();
    let (_, signed_digest) = signed.rsplit_once('@').expect("pinned");
    let (_, moved_digest) = moved.rsplit_once('@').expect("pinned");
    assert!(
        why.contains(signed_digest) && why.contains(moved_digest),
        "names the kept and the refused digest: {why}"
    );
    let events = events_about(&client, &ns, "SkillCard", "java").await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("NewPinRefused")),
        "an Event says the new pin was refused: {events:#?}"
    );

    // The registry goes away for several tag refreshes: the verified card stays Ready on its
    // pin all along, and is still so once the registry is back.
    let watched = async {
        let started = Instant::now();
        let mut looked = 0;
        while started.elapsed() < OUTAGE {
            let card = cards.get("java").await.expect("the card");
            let status = card.status.as_ref().expect("status");
            assert!(
                card_ready_is(&card, "True", "SkillValid")
                    && status.resolved_image.as_deref() == Some(signed.as_str()),
                "during the outage: {status:#?}"
            );
            looked += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        looked
    };
    let (restarted, looked) = tokio::join!(registry.restart(OUTAGE), watched);
    restarted.expect("the registry comes back");
    assert!(looked > 0);
    let card = cards.get("java").await.expect("the card");
    assert!(
        card_ready_is(&card, "True", "SkillValid"),
        "{:#?}",
        card.status
    );

    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("deleting the policy");
}
