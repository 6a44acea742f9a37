use agentic_api::{
    AgentRunPhase, AgentRunSpec, AgentRunStatus, ClusterSkillTrustPolicySpec, PinnedSkill,
    Revocations, SkillTrustPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::conditions::Conditions;

use super::*;

const REPO: &str = "registry.example/skills/java";
const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER_DIGEST: &str =
    "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const URL: &str = "https://git.example/acme/skills";

fn image() -> PinnedSource<'static> {
    PinnedSource::Image {
        repository: REPO,
        digest: DIGEST,
    }
}

fn policy(images: &[&str], mode: TrustMode) -> TrustPolicy {
    TrustPolicy {
        images: images
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
        mode,
        ..TrustPolicy::default()
    }
}

fn cluster(name: &str, policy: TrustPolicy) -> ClusterSkillTrustPolicy {
    ClusterSkillTrustPolicy {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ClusterSkillTrustPolicySpec { policy },
        status: None,
    }
}

fn namespaced(namespace: &str, name: &str, policy: TrustPolicy) -> SkillTrustPolicy {
    SkillTrustPolicy {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        spec: SkillTrustPolicySpec { policy },
        status: None,
    }
}

fn verified(signer: &str) -> Outcome {
    Outcome::Verified(Signature {
        signer: signer.into(),
        digest: Some(OTHER_DIGEST.into()),
        layout: "tag".into(),
    })
}

fn revoking(revoked: Revocations, action: RevocationAction) -> TrustPolicy {
    TrustPolicy {
        revoked: Some(revoked),
        action,
        ..TrustPolicy::default()
    }
}

/// The blast radius of the cluster policy `policy` (`id`) alone over `runs`, none of them
/// kept apart as finished.
fn cluster_radius<'a>(
    policy: &ClusterSkillTrustPolicy,
    id: &PolicyId,
    runs: impl IntoIterator<Item = &'a AgentRun>,
    intended: impl Fn(&AgentRun) -> Vec<PinnedSkill>,
) -> (i64, Vec<AffectedRun>) {
    let none = FinishedRuns::default();
    blast_radius(std::slice::from_ref(policy), &[], id, runs, &none, intended)
}

#[test]
fn patterns_match_whole_names_with_single_and_double_stars() {
    for (pattern, text) in [
        ("registry.example/skills/java", REPO),
        ("registry.example/skills/*", REPO),
        ("registry.example/**", REPO),
        ("**", REPO),
        ("registry.example/*/java", REPO),
        ("*.example/skills/j*a", REPO),
        ("a/**/x*", "a/b/x/c/xd"),
        ("https://git.example/**", URL),
    ] {
        assert!(
            pattern_matches(pattern, text),
            "{pattern} should match {text}"
        );
    }
    for (pattern, text) in [
        ("registry.example/*", REPO),
        ("registry.example/skills/jav", REPO),
        ("registry.example/skills/java/", REPO),
        ("other.example/**", REPO),
        ("*", REPO),
        ("a/*/x*", "a/b/x/c/xd"),
        ("", REPO),
    ] {
        assert!(
            !pattern_matches(pattern, text),
            "{pattern} must not match {text}"
        );
    }
}

#[test]
fn a_hostile_pattern_finishes_quickly() {
    let pattern = "*a".repeat(200) + "b";
    let text = "a".repeat(2000);
    assert!(!pattern_matches(&pattern, &text));
}

#[test]
fn no_policy_leaves_the_card_as_it_was() {
    let none = Policies::new([], [], "team");
    assert!(none.is_empty());
    assert_eq!(judge(&none, &image(), &[]), None);
    let elsewhere = Policies::new(
        [&cluster(
            "c",
            policy(&["other.example/**"], TrustMode::Enforce),
        )],
        [],
        "team",
    );
    assert_eq!(judge(&elsewhere, &image(), &[]), None, "not selected");
    assert_eq!(
        judge(&elsewhere, &PinnedSource::Inline, &[]),
        None,
        "inline skills are never selected"
    );
}

#[test]
fn policies_of_other_namespaces_do_not_apply() {
    let other = namespaced("other", "p", policy(&["**"], TrustMode::Enforce));
    let policies = Policies::new([], [&other], "team");
    assert!(policies.is_empty());
    assert_eq!(judge(&policies, &image(), &[]), None);
}

#[test]
fn enforce_without_a_signature_is_not_ready() {
    let policies = Policies::new(
        [&cluster(
            "signed",
            policy(&["registry.example/**"], TrustMode::Enforce),
        )],
        [],
        "team",
    );
    let verdict = judge(&policies, &image(), &[Outcome::Unsigned]).expect("selected");
    assert_eq!(verdict.verified.0, ConditionStatus::False);
    assert_eq!(verdict.verified.1, SkillCardReason::Unsigned);
    let (reason, message) = verdict.blocked.expect("blocked");
    assert_eq!(reason, SkillCardReason::Unverified);
    assert!(
        message.contains("ClusterSkillTrustPolicy/signed"),
        "{message}"
    );
    assert!(message.contains(DIGEST), "{message}");
    assert_eq!(verdict.verification.state, VerificationState::Unverified);
    assert_eq!(
        verdict.verification.policies,
        ["ClusterSkillTrustPolicy/signed"]
    );

    let invalid = judge(
        &policies,
        &image(),
        &[Outcome::Invalid("signed for another digest".into())],
    )
    .expect("selected");
    assert_eq!(invalid.verified.1, SkillCardReason::SignatureInvalid);
    assert!(invalid.verified.2.contains("signed for another digest"));
    assert!(!invalid.usable());
}

#[test]
fn a_valid_signature_is_verified_and_names_its_signer() {
    let policies = Policies::new(
        [&cluster(
            "signed",
            policy(&["registry.example/**"], TrustMode::Enforce),
        )],
        [],
        "team",
    );
    let verdict = judge(&policies, &image(), &[verified("sha256:abcd")]).expect("selected");
    assert!(verdict.usable());
    assert_eq!(verdict.verified.0, ConditionStatus::True);
    assert_eq!(verdict.verified.1, SkillCardReason::SignatureVerified);
    assert_eq!(verdict.verification.state, VerificationState::Verified);
    assert_eq!(verdict.verification.signer.as_deref(), Some("sha256:abcd"));
    assert_eq!(
        verdict.verification.signature_digest.as_deref(),
        Some(OTHER_DIGEST)
    );
    assert_eq!(verdict.verification.layout.as_deref(), Some("tag"));
}

#[test]
fn warn_keeps_the_card_ready_with_verified_false() {
    let policies = Policies::new(
        [&cluster("audit", policy(&["**"], TrustMode::Warn))],
        [],
        "team",
    );
    let verdict = judge(&policies, &image(), &[Outcome::Unsigned]).expect("selected");
    assert!(verdict.usable());
    assert_eq!(verdict.verified.0, ConditionStatus::False);
    assert_eq!(verdict.verified.1, SkillCardReason::Unsigned);
    assert_eq!(verdict.verification.state, VerificationState::Unverified);

    let unknown = judge(
        &policies,
        &image(),
        &[Outcome::Unavailable("registry down".into())],
    )
    .expect("selected");
    assert!(unknown.usable());
    assert_eq!(unknown.verified.0, ConditionStatus::Unknown);
}

#[test]
fn a_namespaced_warn_policy_cannot_soften_a_cluster_enforce_one() {
    let cluster_policy = cluster("signed", policy(&["**"], TrustMode::Enforce));
    // The tenant's own policy selects the same skills, in Warn mode, with its own key.
    let tenant = namespaced("team", "relaxed", policy(&["**"], TrustMode::Warn));
    let policies = Policies::new([&cluster_policy], [&tenant], "team");
    assert_eq!(policies.selecting(&image()).len(), 2, "both apply");
    // Signed by the tenant's key only: the cluster's requirement still fails.
    let verdict = judge(
        &policies,
        &image(),
        &[
            Outcome::Invalid("no signature by its keys".into()),
            verified("tenant-key"),
        ],
    )
    .expect("selected");
    let (reason, message) = verdict.blocked.expect("still blocked");
    assert_eq!(reason, SkillCardReason::Unverified);
    assert!(
        message.contains("ClusterSkillTrustPolicy/signed"),
        "{message}"
    );
    assert!(!message.contains("SkillTrustPolicy/team"), "{message}");
}

#[test]
fn a_namespaced_policy_adds_a_requirement() {
    let cluster_policy = cluster("audit", policy(&["**"], TrustMode::Warn));
    let tenant = namespaced("team", "strict", policy(&["**"], TrustMode::Enforce));
    let policies = Policies::new([&cluster_policy], [&tenant], "team");
    let verdict = judge(
        &policies,
        &image(),
        &[verified("platform-key"), Outcome::Unsigned],
    )
    .expect("selected");
    let (_, message) = verdict.blocked.expect("the tenant's Enforce blocks");
    assert!(
        message.contains("SkillTrustPolicy/team/strict"),
        "{message}"
    );
    // In another namespace the tenant's policy does not apply.
    let elsewhere = Policies::new([&cluster_policy], [&tenant], "other");
    let verdict = judge(&elsewhere, &image(), &[verified("platform-key")]).expect("selected");
    assert!(verdict.usable());
}

#[test]
fn an_enforce_policy_that_cannot_check_blocks_an_unverified_pin() {
    let policies = Policies::new(
        [&cluster("signed", policy(&["**"], TrustMode::Enforce))],
        [],
        "team",
    );
    let verdict = judge(
        &policies,
        &image(),
        &[Outcome::Unavailable("registry down".into())],
    )
    .expect("selected");
    assert_eq!(verdict.verified.0, ConditionStatus::Unknown);
    assert_eq!(
        verdict.blocked.map(|b| b.0),
        Some(SkillCardReason::VerificationUnavailable)
    );
    let unchecked = judge(&policies, &image(), &[]).expect("selected");
    assert!(
        !unchecked.usable(),
        "a missing outcome never counts as verified"
    );
}

#[test]
fn revoked_digests_commits_and_keys_block_with_reason_revoked() {
    let digests = cluster(
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let policies = Policies::new([&digests], [], "team");
    // Revocations apply to what no pattern selects.
    let verdict = judge(&policies, &image(), &[]).expect("revoked");
    assert_eq!(
        verdict.blocked.as_ref().map(|b| b.0),
        Some(SkillCardReason::Revoked)
    );
    assert_eq!(verdict.verified.1, SkillCardReason::Revoked);
    assert_eq!(verdict.verification.state, VerificationState::Revoked);
    assert!(verdict.verified.2.contains("ClusterSkillTrustPolicy/kill"));

    let commits = namespaced(
        "team",
        "kill",
        revoking(
            Revocations {
                commits: vec![COMMIT.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let git = PinnedSource::Git {
        url: URL,
        commit: COMMIT,
    };
    let policies = Policies::new([], [&commits], "team");
    let verdict = judge(&policies, &git, &[]).expect("revoked");
    assert_eq!(verdict.blocked.map(|b| b.0), Some(SkillCardReason::Revoked));
    assert_eq!(
        judge(&Policies::new([], [&commits], "other"), &git, &[]),
        None
    );

    let mut keys = policy(&["**"], TrustMode::Enforce);
    keys.revoked = Some(Revocations {
        keys: vec!["sha256:leaked".into()],
        ..Revocations::default()
    });
    let policies = Policies::new([&cluster("keys", keys)], [], "team");
    let verdict = judge(&policies, &image(), &[verified("sha256:leaked")]).expect("selected");
    assert_eq!(verdict.blocked.map(|b| b.0), Some(SkillCardReason::Revoked));
    assert_eq!(
        verdict.verification.signer.as_deref(),
        Some("sha256:leaked")
    );
    let fresh = judge(&policies, &image(), &[verified("sha256:new")]).expect("selected");
    assert!(fresh.usable());
}

#[test]
fn a_namespaced_revocation_adds_to_the_clusters() {
    let cluster_policy = cluster("signed", policy(&["**"], TrustMode::Enforce));
    let tenant = namespaced(
        "team",
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let policies = Policies::new([&cluster_policy], [&tenant], "team");
    let verdict = judge(&policies, &image(), &[verified("k")]).expect("selected");
    assert_eq!(verdict.blocked.map(|b| b.0), Some(SkillCardReason::Revoked));
}

#[test]
fn a_tag_moved_to_an_unsigned_digest_keeps_the_verified_pin() {
    let policies = Policies::new(
        [&cluster("signed", policy(&["**"], TrustMode::Enforce))],
        [],
        "team",
    );
    let old_pin = format!("{REPO}@{DIGEST}");
    let new_pin = format!("{REPO}@{OTHER_DIGEST}");
    let moved = PinnedSource::Image {
        repository: REPO,
        digest: OTHER_DIGEST,
    };
    let previous = judge(&policies, &image(), &[verified("k")]);
    let new = judge(&policies, &moved, &[Outcome::Unsigned]);
    let PinChoice::KeepPrevious { message } =
        choose_pin(&new_pin, new.as_ref(), Some(&old_pin), previous.as_ref())
    else {
        panic!("the unsigned digest must be refused");
    };
    assert!(message.contains(&format!("kept {old_pin}")), "{message}");
    assert!(message.contains(&format!("refused {new_pin}")), "{message}");
    assert!(message.contains("no signature found"), "{message}");

    let signed = judge(&policies, &moved, &[verified("k")]);
    assert_eq!(
        choose_pin(&new_pin, signed.as_ref(), Some(&old_pin), previous.as_ref()),
        PinChoice::Adopt
    );
    // Nothing verified to fall back on: the new pin's verdict stands.
    let unverified_before = judge(&policies, &image(), &[Outcome::Unsigned]);
    assert_eq!(
        choose_pin(
            &new_pin,
            new.as_ref(),
            Some(&old_pin),
            unverified_before.as_ref()
        ),
        PinChoice::Adopt
    );
    assert_eq!(
        choose_pin(&new_pin, new.as_ref(), None, None),
        PinChoice::Adopt
    );
    // A revoked previous pin is never kept.
    let mut revoked = policy(&["**"], TrustMode::Enforce);
    revoked.revoked = Some(Revocations {
        digests: vec![DIGEST.into()],
        ..Revocations::default()
    });
    let policies = Policies::new([&cluster("signed", revoked)], [], "team");
    let previous = judge(&policies, &image(), &[verified("k")]);
    assert_eq!(
        choose_pin(&new_pin, new.as_ref(), Some(&old_pin), previous.as_ref()),
        PinChoice::Adopt
    );
}

#[test]
fn a_registry_outage_keeps_a_verified_card_on_its_new_pin_refused() {
    let policies = Policies::new(
        [&cluster("signed", policy(&["**"], TrustMode::Enforce))],
        [],
        "team",
    );
    let old_pin = format!("{REPO}@{DIGEST}");
    let new_pin = format!("{REPO}@{OTHER_DIGEST}");
    let moved = PinnedSource::Image {
        repository: REPO,
        digest: OTHER_DIGEST,
    };
    let previous = judge(&policies, &image(), &[verified("k")]);
    let new = judge(
        &policies,
        &moved,
        &[Outcome::Unavailable("registry down".into())],
    );
    assert!(matches!(
        choose_pin(&new_pin, new.as_ref(), Some(&old_pin), previous.as_ref()),
        PinChoice::KeepPrevious { .. }
    ));
}

#[test]
fn key_references_stay_in_the_policys_namespace() {
    let key = |namespace: Option<&str>| KeyRef {
        name: "keys".into(),
        key: "cosign.pub".into(),
        namespace: namespace.map(str::to_string),
    };
    let cluster_id = PolicyId::Cluster { name: "c".into() };
    let team = PolicyId::Namespaced {
        namespace: "team".into(),
        name: "p".into(),
    };
    assert_eq!(
        cluster_id.key_namespace(&key(Some("platform"))),
        Ok("platform")
    );
    let missing = cluster_id.key_namespace(&key(None)).expect_err("needs one");
    assert!(missing.contains("ClusterSkillTrustPolicy/c"), "{missing}");
    assert_eq!(team.key_namespace(&key(None)), Ok("team"));
    assert_eq!(team.key_namespace(&key(Some("team"))), Ok("team"));
    let escape = team
        .key_namespace(&key(Some("platform")))
        .expect_err("refused");
    assert!(escape.contains("SkillTrustPolicy/team/p"), "{escape}");
    assert!(escape.contains("\"platform\""), "{escape}");
}

fn run(namespace: &str, name: &str, phase: AgentRunPhase, skills: Vec<PinnedSkill>) -> AgentRun {
    AgentRun {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        spec: AgentRunSpec::default(),
        status: Some(AgentRunStatus {
            phase: Some(phase),
            skills,
            ..AgentRunStatus::default()
        }),
    }
}

fn mounted(name: &str, image: &str, verification: Option<SkillVerification>) -> PinnedSkill {
    PinnedSkill {
        name: name.into(),
        image: image.into(),
        verification: verification.map(Box::new),
        ..PinnedSkill::default()
    }
}

/// What a test's runs would mount before their start: nothing.
fn nothing_intended(_: &AgentRun) -> Vec<PinnedSkill> {
    Vec::new()
}

/// A run held before its start: `Ready` False with `reason`, no sandbox, nothing mounted.
fn held(namespace: &str, name: &str, reason: AgentRunReason) -> AgentRun {
    let mut run = run(namespace, name, AgentRunPhase::Pending, Vec::new());
    let status = run.status.as_mut().expect("a status");
    Conditions::<AgentRunReason>::new(&mut status.conditions, None, now()).set(
        CONDITION_READY,
        ConditionStatus::False,
        reason,
        "held",
    );
    run
}

#[test]
fn the_blast_radius_counts_runs_held_before_start_by_their_intended_skills() {
    let kill = cluster(
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let id = PolicyId::of_cluster(&kill);
    let revoked = format!("{REPO}@{DIGEST}");
    let fine = format!("{REPO}@{OTHER_DIGEST}");
    let runs = [
        held("a", "held", AgentRunReason::SkillBlocked),
        held("a", "held-elsewhere", AgentRunReason::SkillBlocked),
        // Waiting for another reason: what its Agent names is not asked.
        held("a", "queued", AgentRunReason::Queued),
    ];
    let intended = |run: &AgentRun| match run.metadata.name.as_deref() {
        Some("held") => vec![mounted("java", &fine, None), mounted("pdf", &revoked, None)],
        Some("held-elsewhere") => vec![mounted("java", &fine, None)],
        Some("queued") => vec![mounted("pdf", &revoked, None)],
        _ => Vec::new(),
    };
    let (count, entries) = cluster_radius(&kill, &id, &runs, intended);
    assert_eq!(count, 1);
    assert_eq!(
        entries
            .iter()
            .map(|a| (
                a.name.as_str(),
                a.skill.as_str(),
                a.image.as_str(),
                a.reason.as_str()
            ))
            .collect::<Vec<_>>(),
        [(
            "held",
            "pdf",
            revoked.as_str(),
            SkillCardReason::Revoked.as_str()
        )]
    );
}

#[test]
fn every_policy_revoking_a_mounted_skill_counts_it() {
    let revoked = Revocations {
        digests: vec![DIGEST.into()],
        ..Revocations::default()
    };
    let first = cluster(
        "a-first",
        revoking(revoked.clone(), RevocationAction::Block),
    );
    let second = cluster("b-second", revoking(revoked, RevocationAction::Cancel));
    let policies = [first, second];
    let runs = [run(
        "a",
        "r",
        AgentRunPhase::Running,
        vec![mounted("java", &format!("{REPO}@{DIGEST}"), None)],
    )];
    for policy in &policies {
        let id = PolicyId::of_cluster(policy);
        let (count, entries) = blast_radius(
            &policies,
            &[],
            &id,
            &runs,
            &FinishedRuns::default(),
            nothing_intended,
        );
        assert_eq!((count, entries.len()), (1, 1), "{id}");
    }
}

#[test]
fn the_blast_radius_lists_live_runs_first_and_counts_runs_once() {
    let kill = cluster(
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                commits: vec![COMMIT.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let revoked_image = format!("{REPO}@{DIGEST}");
    let revoked_commit = format!("{URL}@{COMMIT}");
    let fine = format!("{REPO}@{OTHER_DIGEST}");
    let runs = [
        run(
            "a",
            "finished",
            AgentRunPhase::Succeeded,
            vec![mounted("java", &revoked_image, None)],
        ),
        run(
            "b",
            "live",
            AgentRunPhase::Running,
            vec![
                mounted("java", &revoked_image, None),
                mounted("git", &revoked_commit, None),
            ],
        ),
        run(
            "a",
            "untouched",
            AgentRunPhase::Running,
            vec![mounted("java", &fine, None)],
        ),
    ];
    let id = PolicyId::of_cluster(&kill);
    let (count, entries) = cluster_radius(&kill, &id, &runs, nothing_intended);
    assert_eq!(count, 2);
    let listed: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|a| (a.name.as_str(), a.skill.as_str(), a.reason.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("live", "git", SkillCardReason::Revoked.as_str()),
            ("live", "java", SkillCardReason::Revoked.as_str()),
            ("finished", "java", SkillCardReason::Revoked.as_str())
        ]
    );
    // The finished run kept as a compact entry instead counts the same.
    let mut finished = FinishedRuns::default();
    assert_eq!(finished.keep(&runs[0]), crate::finished::Kept::Scheduled);
    let compact = blast_radius(
        std::slice::from_ref(&kill),
        &[],
        &id,
        &runs[1..],
        &finished,
        nothing_intended,
    );
    assert_eq!(compact, (count, entries));
}

#[test]
fn the_blast_radius_counts_unverified_mounts_and_revoked_signers() {
    let mut audit = policy(&["**"], TrustMode::Warn);
    audit.revoked = Some(Revocations {
        keys: vec!["sha256:leaked".into()],
        ..Revocations::default()
    });
    let audit = cluster("audit", audit);
    let id = PolicyId::of_cluster(&audit);
    let pin = format!("{REPO}@{OTHER_DIGEST}");
    let warned = SkillVerification {
        state: VerificationState::Unverified,
        policies: vec![id.to_string()],
        ..SkillVerification::default()
    };
    let leaked = SkillVerification {
        state: VerificationState::Verified,
        signer: Some("sha256:leaked".into()),
        policies: vec![id.to_string()],
        ..SkillVerification::default()
    };
    let other_policys = SkillVerification {
        state: VerificationState::Unverified,
        policies: vec!["ClusterSkillTrustPolicy/else".into()],
        ..SkillVerification::default()
    };
    let runs = [
        run(
            "a",
            "warned",
            AgentRunPhase::Failed,
            vec![mounted("s", &pin, Some(warned))],
        ),
        run(
            "a",
            "leaked",
            AgentRunPhase::Running,
            vec![mounted("s", &pin, Some(leaked))],
        ),
        run(
            "a",
            "other",
            AgentRunPhase::Running,
            vec![mounted("s", &pin, Some(other_policys))],
        ),
    ];
    let (count, entries) = cluster_radius(&audit, &id, &runs, nothing_intended);
    assert_eq!(count, 2);
    assert_eq!(
        entries
            .iter()
            .map(|a| (a.name.as_str(), a.reason.as_str()))
            .collect::<Vec<_>>(),
        [
            ("leaked", SkillCardReason::Revoked.as_str()),
            ("warned", SkillCardReason::Unverified.as_str())
        ]
    );
}

#[test]
fn the_blast_radius_is_capped_but_counts_everything() {
    let kill = cluster(
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let pin = format!("{REPO}@{DIGEST}");
    let runs: Vec<AgentRun> = (0..MAX_BLAST_RADIUS_ENTRIES + 5)
        .map(|i| {
            run(
                "a",
                &format!("r{i:04}"),
                AgentRunPhase::Succeeded,
                vec![mounted("s", &pin, None)],
            )
        })
        .collect();
    let id = PolicyId::of_cluster(&kill);
    let (count, entries) = cluster_radius(&kill, &id, &runs, nothing_intended);
    assert_eq!(
        count,
        i64::try_from(MAX_BLAST_RADIUS_ENTRIES + 5).expect("small")
    );
    assert_eq!(entries.len(), MAX_BLAST_RADIUS_ENTRIES);
}

#[test]
fn a_namespaced_policys_blast_radius_stays_in_its_namespace() {
    let kill = namespaced(
        "a",
        "kill",
        revoking(
            Revocations {
                digests: vec![DIGEST.into()],
                ..Revocations::default()
            },
            RevocationAction::Block,
        ),
    );
    let pin = format!("{REPO}@{DIGEST}");
    let runs = [
        run(
            "a",
            "mine",
            AgentRunPhase::Running,
            vec![mounted("s", &pin, None)],
        ),
        run(
            "b",
            "theirs",
            AgentRunPhase::Running,
            vec![mounted("s", &pin, None)],
        ),
    ];
    let id = PolicyId::of_namespaced(&kill);
    let (count, entries) = blast_radius(
        &[],
        std::slice::from_ref(&kill),
        &id,
        &runs,
        &FinishedRuns::default(),
        nothing_intended,
    );
    assert_eq!(count, 1);
    assert_eq!(entries[0].name, "mine");
}

#[test]
fn only_cancel_policies_cancel_live_runs() {
    let pin = format!("{REPO}@{DIGEST}");
    let revoked = Revocations {
        digests: vec![DIGEST.into()],
        ..Revocations::default()
    };
    let blocking = cluster("block", revoking(revoked.clone(), RevocationAction::Block));
    let cancelling = cluster("cancel", revoking(revoked, RevocationAction::Cancel));
    let live = run(
        "a",
        "r",
        AgentRunPhase::Running,
        vec![mounted("java", &pin, None)],
    );

    assert_eq!(
        cancellation(&Policies::new([&blocking], [], "a"), &live),
        None,
        "Block never cancels"
    );
    let why = cancellation(&Policies::new([&cancelling], [], "a"), &live).expect("cancelled");
    assert!(why.contains("ClusterSkillTrustPolicy/cancel"), "{why}");
    assert!(why.contains("\"java\""), "{why}");

    let finished = run(
        "a",
        "r",
        AgentRunPhase::Failed,
        vec![mounted("java", &pin, None)],
    );
    assert_eq!(
        cancellation(&Policies::new([&cancelling], [], "a"), &finished),
        None
    );
    let mut cancelled = live.clone();
    cancelled.spec.cancel = Some(true);
    assert_eq!(
        cancellation(&Policies::new([&cancelling], [], "a"), &cancelled),
        None
    );

    let signer = cluster(
        "keys",
        revoking(
            Revocations {
                keys: vec!["sha256:leaked".into()],
                ..Revocations::default()
            },
            RevocationAction::Cancel,
        ),
    );
    let signed_by_leaked = run(
        "a",
        "r",
        AgentRunPhase::Pending,
        vec![mounted(
            "java",
            &format!("{REPO}@{OTHER_DIGEST}"),
            Some(SkillVerification {
                signer: Some("sha256:leaked".into()),
                ..SkillVerification::default()
            }),
        )],
    );
    assert!(cancellation(&Policies::new([&signer], [], "a"), &signed_by_leaked).is_some());
}

#[test]
fn a_clusters_block_does_not_shield_a_run_from_its_namespaces_cancel() {
    let pin = format!("{REPO}@{DIGEST}");
    let revoked = Revocations {
        digests: vec![DIGEST.into()],
        ..Revocations::default()
    };
    // Cluster policies come first, so the Block one is the first revoker.
    let blocking = cluster("block", revoking(revoked.clone(), RevocationAction::Block));
    let cancelling = namespaced("a", "cancel", revoking(revoked, RevocationAction::Cancel));
    let live = run(
        "a",
        "r",
        AgentRunPhase::Running,
        vec![mounted("java", &pin, None)],
    );
    let why = cancellation(&Policies::new([&blocking], [&cancelling], "a"), &live)
        .expect("the namespace's Cancel applies");
    assert!(why.contains("SkillTrustPolicy/a/cancel"), "{why}");
}

#[test]
fn only_cancel_policies_that_revoke_something_may_cancel() {
    let revoked = Revocations {
        keys: vec!["sha256:leaked".into()],
        ..Revocations::default()
    };
    assert!(may_cancel(&revoking(
        revoked.clone(),
        RevocationAction::Cancel
    )));
    assert!(!may_cancel(&revoking(revoked, RevocationAction::Block)));
    assert!(!may_cancel(&revoking(
        Revocations::default(),
        RevocationAction::Cancel
    )));
    assert!(!may_cancel(&policy(&["**"], TrustMode::Enforce)));
}

#[test]
fn pins_read_back_from_run_status() {
    let source = |recorded: &str| {
        let pin = Pin::parse(recorded);
        format!("{:?}", PinnedSource::of(pin.as_ref()))
    };
    assert_eq!(
        source(&format!("{REPO}@{DIGEST}")),
        format!("{:?}", image())
    );
    assert_eq!(
        source(&format!("{URL}@{COMMIT}")),
        format!(
            "{:?}",
            PinnedSource::Git {
                url: URL,
                commit: COMMIT
            }
        )
    );
    for nothing_signed in ["configmap:x", &format!("{URL}@main")] {
        assert_eq!(
            source(nothing_signed),
            format!("{:?}", PinnedSource::Inline)
        );
    }
}

fn ready_status(pin: &str) -> SkillCardStatus {
    let mut status = SkillCardStatus {
        resolved_image: Some(pin.into()),
        ..SkillCardStatus::default()
    };
    Conditions::<SkillCardReason>::new(&mut status.conditions, Some(1), now()).set(
        CONDITION_READY,
        ConditionStatus::True,
        SkillCardReason::SkillValid,
        "",
    );
    status
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1).expect("a valid time"))
}

#[test]
fn a_blocking_verdict_turns_ready_false_and_no_verdict_leaves_no_trace() {
    let pin = format!("{REPO}@{DIGEST}");
    let policies = Policies::new(
        [&cluster("signed", policy(&["**"], TrustMode::Enforce))],
        [],
        "team",
    );
    let mut status = ready_status(&pin);
    assert_eq!(ready_pin(&status), Some(pin.as_str()));
    let verdict = judge(&policies, &image(), &[Outcome::Unsigned]);
    apply_to_card(&mut status, verdict.as_ref(), Some(1), &now());
    let ready =
        crate::conditions::find_condition(&status.conditions, CONDITION_READY).expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", SkillCardReason::Unverified.as_str())
    );
    let verified = crate::conditions::find_condition(&status.conditions, CONDITION_VERIFIED)
        .expect("Verified");
    assert_eq!(verified.reason, SkillCardReason::Unsigned.as_str());
    assert_eq!(ready_pin(&status), None, "not Ready: nothing to verify");
    assert!(status.verification.is_some());

    apply_to_card(&mut status, None, Some(1), &now());
    assert!(crate::conditions::find_condition(&status.conditions, CONDITION_VERIFIED).is_none());
    assert_eq!(status.verification, None);
}

#[test]
fn keeping_the_previous_pin_keeps_its_content_and_says_why() {
    let old = ready_status(&format!("{REPO}@{DIGEST}"));
    let kept = keep_previous_pin(&old, "kept a; refused b: unsigned", Some(2), &now());
    assert_eq!(kept.resolved_image, old.resolved_image);
    assert_eq!(kept.observed_generation, Some(2));
    let verified =
        crate::conditions::find_condition(&kept.conditions, CONDITION_VERIFIED).expect("Verified");
    assert_eq!(
        (
            verified.status.as_str(),
            verified.reason.as_str(),
            verified.message.as_str()
        ),
        (
            "True",
            SkillCardReason::NewPinRefused.as_str(),
            "kept a; refused b: unsigned"
        )
    );
}

#[test]
fn policies_select_every_spelling_of_a_repository_or_url() {
    let selects_image = |pattern: &str, repository: &str| {
        selects(
            &policy(&[pattern], TrustMode::Enforce),
            &PinnedSource::Image {
                repository,
                digest: DIGEST,
            },
        )
    };
    for (pattern, repository) in [
        ("registry.example/skills/**", "REGISTRY.example/skills/x"),
        (
            "registry.example/skills/**",
            "registry.example:443/skills/x",
        ),
        ("REGISTRY.EXAMPLE:443/skills/x", "registry.example/skills/x"),
        ("index.docker.io/acme/**", "docker.io/acme/x"),
        ("docker.io/alpine", "docker.io/library/alpine"),
        (
            "registry-1.docker.io/library/alpine",
            "docker.io/library/alpine",
        ),
        ("alpine", "index.docker.io/library/alpine"),
    ] {
        assert!(
            selects_image(pattern, repository),
            "{pattern} should select {repository}"
        );
    }
    for (pattern, repository) in [
        (
            "registry.example/skills/**",
            "registry.example:5000/skills/x",
        ),
        ("docker.io/acme/**", "docker.io/library/alpine"),
        ("registry.example/Skills/**", "registry.example/skills/x"),
    ] {
        assert!(
            !selects_image(pattern, repository),
            "{pattern} must not select {repository}"
        );
    }
    let selects_url = |pattern: &str, url: &str| {
        selects(
            &TrustPolicy {
                sources: vec![pattern.to_string()],
                ..TrustPolicy::default()
            },
            &PinnedSource::Git {
                url,
                commit: COMMIT,
            },
        )
    };
    for url in [
        "https://git.example/acme/skills",
        "HTTPS://GIT.EXAMPLE/acme/skills",
        "https://git.example:443/acme/skills.git",
        "https://git.example/acme/skills/",
        "https://git.example/acme/skills.git/",
    ] {
        assert!(selects_url(URL, url), "{URL} should select {url}");
        assert!(selects_url("https://Git.example/acme/*.git", url), "{url}");
    }
    assert!(!selects_url(URL, "https://git.example:8443/acme/skills"));
    assert!(!selects_url(URL, "http://git.example/acme/skills"));
}

#[test]
fn unselected_deny_holds_back_what_no_policy_selects_inline_included() {
    let deny = TrustPolicy {
        unselected: UnselectedSkills::Deny,
        ..policy(&["registry.example/signed/**"], TrustMode::Enforce)
    };
    let policies = Policies::new([&cluster("deny", deny.clone())], [], "team");
    let git = PinnedSource::Git {
        url: URL,
        commit: COMMIT,
    };
    for source in [image(), git, PinnedSource::Inline] {
        let verdict = judge(&policies, &source, &[]).expect("a verdict");
        assert!(!verdict.usable(), "{source:?}");
        let (status, reason, message) = &verdict.verified;
        assert_eq!(
            (*status, *reason),
            (ConditionStatus::False, SkillCardReason::NotSelected)
        );
        assert!(
            message.contains("ClusterSkillTrustPolicy/deny"),
            "{message}"
        );
        assert_eq!(verdict.verification.state, VerificationState::Unverified);
    }
    // What the policy selects is judged by its signatures as before.
    let selected = PinnedSource::Image {
        repository: "registry.example/signed/x",
        digest: DIGEST,
    };
    let verdict = judge(&policies, &selected, &[verified("sha256:key")]).expect("a verdict");
    assert!(verdict.usable());
    // A namespace's Deny reaches its own namespace only; Allow (the default) changes nothing.
    let namespaced_deny = [namespaced("team", "deny", deny)];
    let other = Policies::new([], &namespaced_deny, "elsewhere");
    assert_eq!(judge(&other, &PinnedSource::Inline, &[]), None);
    let allow = Policies::new(
        [&cluster(
            "allow",
            policy(&["x.example/**"], TrustMode::Enforce),
        )],
        [],
        "team",
    );
    assert_eq!(judge(&allow, &PinnedSource::Inline, &[]), None);
}

#[test]
fn every_verified_signer_is_recorded_and_each_reaches_its_revocations() {
    let first_key = format!("sha256:{}", "a".repeat(64));
    let second_key = format!("sha256:{}", "b".repeat(64));
    let selecting = [
        cluster(
            "first",
            policy(&["registry.example/**"], TrustMode::Enforce),
        ),
        cluster(
            "second",
            policy(&["registry.example/**"], TrustMode::Enforce),
        ),
    ];
    let policies = Policies::new(&selecting, [], "team");
    let verdict = judge(
        &policies,
        &image(),
        &[verified(&first_key), verified(&second_key)],
    )
    .expect("a verdict");
    assert!(verdict.usable());
    // `signer` stays the first, for compatibility; `signers` names both.
    assert_eq!(
        verdict.verification.signer.as_deref(),
        Some(first_key.as_str())
    );
    assert_eq!(
        verdict.verification.signers,
        [first_key.clone(), second_key.clone()]
    );

    // A Cancel of the second policy's key, written in another case, reaches a live run that
    // mounted the skill: the run recorded both signers.
    let cancel_second = cluster(
        "cancel",
        revoking(
            Revocations {
                keys: vec![
                    second_key
                        .to_ascii_uppercase()
                        .replacen("SHA256", "sha256", 1),
                ],
                ..Revocations::default()
            },
            RevocationAction::Cancel,
        ),
    );
    let live = run(
        "team",
        "r",
        AgentRunPhase::Running,
        vec![mounted(
            "java",
            &format!("{REPO}@{DIGEST}"),
            Some(verdict.verification.clone()),
        )],
    );
    let revoking = Policies::new([&cancel_second], [], "team");
    assert!(
        revoking
            .revoking_any_signer(&verdict.verification)
            .is_some_and(|p| p.id == &PolicyId::of_cluster(&cancel_second)),
        "a new run's start is held by the second signer's revocation"
    );
    let why = cancellation(&revoking, &live).expect("cancelled by the second signer's revocation");
    assert!(why.contains("ClusterSkillTrustPolicy/cancel"), "{why}");
    // And the policy's blast radius lists the run.
    let (count, entries) = blast_radius(
        std::slice::from_ref(&cancel_second),
        &[],
        &PolicyId::of_cluster(&cancel_second),
        [&live],
        &FinishedRuns::default(),
        nothing_intended,
    );
    assert_eq!((count, entries.len()), (1, 1));

    // The card itself turns Revoked when the second key is revoked.
    let with_revocation = Policies::new(selecting.iter().chain([&cancel_second]), [], "team");
    let revoked = judge(
        &with_revocation,
        &image(),
        &[verified(&first_key), verified(&second_key)],
    )
    .expect("a verdict");
    assert_eq!(revoked.verification.state, VerificationState::Revoked);
}

#[test]
fn revoked_keys_are_compared_in_canonical_form() {
    let gpg = "0123456789ABCDEF0123456789ABCDEF01234567";
    for written in [
        "0123456789abcdef0123456789abcdef01234567",
        "0123 4567 89AB CDEF 0123  4567 89AB CDEF 0123 4567",
    ] {
        let policies = Policies::new(
            [&cluster(
                "revoke",
                revoking(
                    Revocations {
                        keys: vec![written.to_string()],
                        ..Revocations::default()
                    },
                    RevocationAction::Block,
                ),
            )],
            [],
            "team",
        );
        assert!(policies.revoking_signer(gpg).is_some(), "{written}");
    }
}
