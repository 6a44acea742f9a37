//! Skill trust: which trust policies (`trust.agentic-operator.io`) apply to a skill, what a
//! card says once its signatures are checked, which pin it keeps, which runs a policy's
//! revocations reach.
//!
//! The model, in one place:
//! - A policy *selects* a skill when one of its `images` patterns matches the pinned
//!   repository, or one of its `sources` patterns the git URL. Inline skills are never
//!   selected: they have no bytes anyone signed.
//! - Every selecting policy must be satisfied on its own (any one of its keys or identities
//!   will do): a namespaced policy adds a requirement and never replaces the cluster's, so a
//!   namespaced `Warn`, or a key of the namespace's own, cannot relax a cluster `Enforce`.
//! - Revocations apply to every skill in a policy's scope, selected or not (a digest or a
//!   commit names one content, wherever it comes from): the cluster's everywhere, a
//!   namespace's in that namespace. A signature by a revoked key no longer counts.
//! - No policy selecting a skill and no revocation hitting it: the card reads as before, with
//!   no `Verified` condition, unless a policy in scope says `unselected: Deny`; then it is not
//!   Ready (reason `NotSelected`).
//! - Repositories and git URLs are selected by their canonical names ([`canonical`]), so
//!   spellings of one source are selected alike.

use std::collections::BTreeSet;
use std::fmt;

use agentic_api::{
    AffectedRun, Agent, AgentRun, AgentRunStatus, CONDITION_READY, ClusterSkillTrustPolicy,
    ConditionStatus, KeyRef, MAX_BLAST_RADIUS_ENTRIES, PinnedSkill, RevocationAction, SkillCard,
    SkillCardStatus, SkillTrustPolicy, SkillVerification, TrustMode, TrustPolicy, UnselectedSkills,
    VerificationState,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::{Conditions, is_ready, remove_condition};
use crate::finished::FinishedRuns;
use crate::pin::Pin;
use crate::reasons::{AgentRunReason, SkillCardReason};

mod canonical;
pub mod status;

pub use canonical::{canonical_git_url, canonical_repository, canonical_signer};

/// The condition a SkillCard selected by a trust policy carries (our extension).
pub const CONDITION_VERIFIED: &str = "Verified";

/// What a card pins, as the trust policies see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinnedSource<'a> {
    /// An image: its repository (`registry/path`) and digest (`sha256:...`).
    Image {
        repository: &'a str,
        digest: &'a str,
    },
    /// A git source: its URL as written in `spec.source`, and the full commit id.
    Git { url: &'a str, commit: &'a str },
    /// Inline text: nothing anyone signed.
    Inline,
}

impl<'a> PinnedSource<'a> {
    /// What `pin` pins; `None` (an inline skill, or a recorded string that pins nothing) is
    /// [`PinnedSource::Inline`]: nothing anyone signed, nothing a revocation names.
    pub fn of(pin: Option<&'a Pin>) -> Self {
        match pin {
            Some(Pin::Image { repository, digest }) => Self::Image { repository, digest },
            Some(Pin::Git { url, commit }) => Self::Git { url, commit },
            None => Self::Inline,
        }
    }

    /// The digest or commit, as revocation lists name it.
    fn content(&self) -> Option<&'a str> {
        match *self {
            Self::Image { digest, .. } => Some(digest),
            Self::Git { commit, .. } => Some(commit),
            Self::Inline => None,
        }
    }
}

/// A policy, as status and messages name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyId {
    Cluster { name: String },
    Namespaced { namespace: String, name: String },
}

impl PolicyId {
    pub fn of_cluster(policy: &ClusterSkillTrustPolicy) -> Self {
        Self::Cluster {
            name: policy.metadata.name.clone().unwrap_or_default(),
        }
    }

    pub fn of_namespaced(policy: &SkillTrustPolicy) -> Self {
        Self::Namespaced {
            namespace: policy.metadata.namespace.clone().unwrap_or_default(),
            name: policy.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// Whether the policy's revocations and requirements reach skills of `namespace`.
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Self::Cluster { .. } => true,
            Self::Namespaced { namespace: own, .. } => own == namespace,
        }
    }

    /// The namespace `key` is read from: a cluster policy must name one, a namespaced
    /// policy may only read its own, so a tenant never reads another namespace's Secrets
    /// through the operator.
    pub fn key_namespace<'k>(&'k self, key: &'k KeyRef) -> Result<&'k str, String> {
        match (self, key.namespace.as_deref()) {
            (Self::Cluster { .. }, Some(namespace)) => Ok(namespace),
            (Self::Cluster { .. }, None) => Err(format!(
                "{self}: the reference to key {:?} of {:?} names no namespace; a \
                 ClusterSkillTrustPolicy must name one",
                key.key, key.name
            )),
            (Self::Namespaced { namespace, .. }, None) => Ok(namespace),
            (Self::Namespaced { namespace, .. }, Some(other)) if other == namespace => Ok(other),
            (Self::Namespaced { .. }, Some(other)) => Err(format!(
                "{self}: the reference to key {:?} of {:?} names namespace {other:?}; a \
                 SkillTrustPolicy may only read its own namespace",
                key.key, key.name
            )),
        }
    }
}

impl fmt::Display for PolicyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cluster { name } => write!(f, "ClusterSkillTrustPolicy/{name}"),
            Self::Namespaced { namespace, name } => {
                write!(f, "SkillTrustPolicy/{namespace}/{name}")
            }
        }
    }
}

/// One policy with its name.
#[derive(Clone, Copy, Debug)]
pub struct NamedPolicy<'a> {
    pub id: &'a PolicyId,
    pub policy: &'a TrustPolicy,
}

/// Every policy of the cluster and of one namespace, as a card or run of that namespace sees
/// them. Build it with [`Policies::new`].
#[derive(Clone, Debug, Default)]
pub struct Policies {
    policies: Vec<(PolicyId, TrustPolicy)>,
}

impl Policies {
    /// The cluster's policies and those of `namespace` (namespaced policies of other
    /// namespaces are left out), in a stable order: cluster policies first, each kind by name.
    pub fn new<'a>(
        cluster: impl IntoIterator<Item = &'a ClusterSkillTrustPolicy>,
        namespaced: impl IntoIterator<Item = &'a SkillTrustPolicy>,
        namespace: &str,
    ) -> Self {
        let mut policies: Vec<(PolicyId, TrustPolicy)> = cluster
            .into_iter()
            .map(|p| (PolicyId::of_cluster(p), p.spec.policy.clone()))
            .chain(
                namespaced
                    .into_iter()
                    .map(|p| (PolicyId::of_namespaced(p), p.spec.policy.clone())),
            )
            .filter(|(id, _)| id.covers(namespace))
            .collect();
        policies.sort_by(|a, b| a.0.cmp(&b.0));
        Self { policies }
    }

    /// Whether there is no policy at all: everything behaves as without this feature.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = NamedPolicy<'_>> {
        self.policies
            .iter()
            .map(|(id, policy)| NamedPolicy { id, policy })
    }

    /// The policies whose signature requirements apply to `source`.
    pub fn selecting<'s>(&'s self, source: &PinnedSource<'_>) -> Vec<NamedPolicy<'s>> {
        self.iter().filter(|p| selects(p.policy, source)).collect()
    }

    /// The first policy revoking the digest or commit `source` pins, and its action.
    pub fn revoking_content(&self, source: &PinnedSource<'_>) -> Option<NamedPolicy<'_>> {
        self.revoking_content_all(source).next()
    }

    /// Every policy revoking the digest or commit `source` pins, in the order of
    /// [`Policies::new`].
    fn revoking_content_all<'s>(
        &'s self,
        source: &PinnedSource<'_>,
    ) -> impl Iterator<Item = NamedPolicy<'s>> {
        let (content, images) = match *source {
            PinnedSource::Image { digest, .. } => (Some(digest), true),
            PinnedSource::Git { commit, .. } => (Some(commit), false),
            PinnedSource::Inline => (None, false),
        };
        let content = content.map(str::to_string);
        self.iter().filter(move |p| {
            let Some(content) = &content else {
                return false;
            };
            p.policy.revoked.as_ref().is_some_and(|revoked| {
                let list = if images {
                    &revoked.digests
                } else {
                    &revoked.commits
                };
                list.iter().any(|c| c.eq_ignore_ascii_case(content))
            })
        })
    }

    /// The first policy that denies skills no policy selects (`unselected: Deny`).
    fn denying_unselected(&self) -> Option<NamedPolicy<'_>> {
        self.iter()
            .find(|p| p.policy.unselected == UnselectedSkills::Deny)
    }

    /// The first policy revoking the key `signer`.
    pub fn revoking_signer(&self, signer: &str) -> Option<NamedPolicy<'_>> {
        self.revoking_signer_all(signer).next()
    }

    /// Every policy revoking the key `signer`, in the order of [`Policies::new`].
    fn revoking_signer_all<'s, 'k>(
        &'s self,
        signer: &'k str,
    ) -> impl Iterator<Item = NamedPolicy<'s>> + use<'s, 'k> {
        let signer = canonical_signer(signer);
        self.iter().filter(move |p| {
            p.policy
                .revoked
                .as_ref()
                .is_some_and(|revoked| revoked.keys.iter().any(|k| canonical_signer(k) == signer))
        })
    }

    /// The first policy revoking any signer `verification` records (`signers`, and
    /// `signer`).
    pub fn revoking_any_signer(&self, verification: &SkillVerification) -> Option<NamedPolicy<'_>> {
        self.revoking_recorded_signer(verification, |_| true)
            .map(|(policy, _)| policy)
    }

    /// The first policy revoking any signer `verification` records, and that signer.
    fn revoking_recorded_signer<'v>(
        &self,
        verification: &'v SkillVerification,
        by: impl Fn(&NamedPolicy<'_>) -> bool,
    ) -> Option<(NamedPolicy<'_>, &'v str)> {
        recorded_signers(verification).find_map(|signer| {
            self.revoking_signer_all(signer)
                .find(&by)
                .map(|policy| (policy, signer))
        })
    }
}

/// Every signer `verification` records: `signers`, and `signer` (all a status written before
/// `signers` existed has).
fn recorded_signers(verification: &SkillVerification) -> impl Iterator<Item = &str> {
    verification
        .signer
        .iter()
        .chain(&verification.signers)
        .map(String::as_str)
}

/// Whether a change to `policy` can make a live run cancelled: it has `action: Cancel` and
/// revokes something. [`cancellation`] looks at every revoking policy, so a change to any
/// other policy (a `Block` one, or one revoking nothing) never causes a cancellation, and a
/// change from `Cancel` to `Block` only spares runs.
pub fn may_cancel(policy: &TrustPolicy) -> bool {
    policy.action == RevocationAction::Cancel
        && policy.revoked.as_ref().is_some_and(|revoked| {
            !(revoked.digests.is_empty() && revoked.commits.is_empty() && revoked.keys.is_empty())
        })
}

/// Whether `policy`'s `images` or `sources` select `source`, both in canonical form.
pub fn selects(policy: &TrustPolicy, source: &PinnedSource<'_>) -> bool {
    match source {
        PinnedSource::Image { repository, .. } => {
            let repository = canonical_repository(repository);
            policy
                .images
                .iter()
                .any(|p| pattern_matches(&canonical_repository(p), &repository))
        }
        PinnedSource::Git { url, .. } => {
            let url = canonical_git_url(url);
            policy
                .sources
                .iter()
                .any(|p| pattern_matches(&canonical_git_url(p), &url))
        }
        PinnedSource::Inline => false,
    }
}

/// Whether `text` matches `pattern` whole: `**` matches any characters, `*` any but `/`,
/// everything else itself.
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let (pattern, text) = (pattern.as_bytes(), text.as_bytes());
    // Two pointers and a restart point per wildcard kind, no recursion: linear in practice
    // and bounded by pattern × text on hostile input. A `*` that reaches a `/` gives way to
    // the last `**`, which takes one more character and tries again.
    let (mut p, mut t) = (0, 0);
    let mut single: Option<(usize, usize)> = None;
    let mut double: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&b'*') {
            if pattern.get(p + 1) == Some(&b'*') {
                p += 2;
                double = Some((p, t));
                single = None;
            } else {
                p += 1;
                single = Some((p, t));
            }
            continue;
        }
        if pattern.get(p) == Some(&text[t]) {
            p += 1;
            t += 1;
            continue;
        }
        if let Some((after, from)) = single.filter(|&(_, from)| text[from] != b'/') {
            single = Some((after, from + 1));
            (p, t) = (after, from + 1);
        } else if let Some((after, from)) = double {
            single = None;
            double = Some((after, from + 1));
            (p, t) = (after, from + 1);
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A signature that verified, as the verifier reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Key fingerprint or certificate identity.
    pub signer: String,
    /// Digest of the signature manifest or bundle (none for a git commit).
    pub digest: Option<String>,
    /// `tag`, `referrers` or `commit`.
    pub layout: String,
}

/// For each pin, the outcome of each policy's requirement that selects it, in the order of
/// [`Policies::selecting`].
pub type OutcomesByPin = std::collections::BTreeMap<Pin, Vec<Outcome>>;

/// What checking one policy's requirement against the pinned bytes found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Verified(Signature),
    /// No signature at all.
    Unsigned,
    /// Signatures, none valid for this policy; why.
    Invalid(String),
    /// The registry, git server or the policy's keys could not be read; why.
    Unavailable(String),
}

/// What a card's status says about trust, from its policies and the outcomes of their
/// requirements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The `Verified` condition: status, reason, message.
    pub verified: (ConditionStatus, SkillCardReason, String),
    /// `Ready=False` with this reason and message, when trust forbids using the skill.
    pub blocked: Option<(SkillCardReason, String)>,
    /// `status.verification`.
    pub verification: SkillVerification,
}

impl Verdict {
    /// Whether the pinned bytes may be used: not blocked.
    pub fn usable(&self) -> bool {
        self.blocked.is_none()
    }
}

/// The verdict on `source` under `policies`, given the outcome of each selecting policy's
/// requirement (in the order of [`Policies::selecting`]; a missing outcome counts as
/// unavailable). `None`: no policy selects it and nothing revokes it, so the card reads as it
/// did before trust policies existed.
pub fn judge(
    policies: &Policies,
    source: &PinnedSource<'_>,
    outcomes: &[Outcome],
) -> Option<Verdict> {
    let selecting = policies.selecting(source);
    let revoked = policies.revoking_content(source);
    if selecting.is_empty() && revoked.is_none() {
        return policies.denying_unselected().map(|denying| {
            let what = source.content().map_or_else(
                || "an inline skill".to_string(),
                std::string::ToString::to_string,
            );
            let message = format!(
                "no trust policy selects {what}, and {} denies skills no policy selects",
                denying.id
            );
            Verdict {
                verified: (
                    ConditionStatus::False,
                    SkillCardReason::NotSelected,
                    message.clone(),
                ),
                blocked: Some((SkillCardReason::NotSelected, message)),
                verification: SkillVerification {
                    state: VerificationState::Unverified,
                    ..SkillVerification::default()
                },
            }
        });
    }
    let names: Vec<String> = selecting.iter().map(|p| p.id.to_string()).collect();
    let mut verification = SkillVerification {
        policies: names,
        ..SkillVerification::default()
    };
    if let Some(revoking) = revoked {
        let message = format!(
            "{} is revoked by {}",
            source.content().unwrap_or_default(),
            revoking.id
        );
        verification.state = VerificationState::Revoked;
        return Some(revoked_verdict(message, verification));
    }

    let mut failures: Vec<String> = Vec::new();
    let mut failure_reason = SkillCardReason::Unsigned;
    let mut unavailable: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut warn_reason = SkillCardReason::Unsigned;
    let mut warn_unavailable: Vec<String> = Vec::new();
    let mut signers: Vec<String> = Vec::new();
    for (index, policy) in selecting.iter().enumerate() {
        let outcome = outcomes
            .get(index)
            .cloned()
            .unwrap_or_else(|| Outcome::Unavailable("the signature was not checked".to_string()));
        let enforced = policy.policy.mode == TrustMode::Enforce;
        match outcome {
            Outcome::Verified(signature) => {
                if let Some(revoking) = policies.revoking_signer(&signature.signer) {
                    let message = format!(
                        "the signer {} of {} is revoked by {}",
                        signature.signer,
                        source.content().unwrap_or_default(),
                        revoking.id
                    );
                    verification.state = VerificationState::Revoked;
                    if !verification.signers.contains(&signature.signer) {
                        verification.signers.push(signature.signer.clone());
                    }
                    verification.signer = Some(signature.signer);
                    verification.signature_digest = signature.digest;
                    verification.layout = Some(signature.layout);
                    return Some(revoked_verdict(message, verification));
                }
                if verification.signer.is_none() {
                    verification.signer = Some(signature.signer.clone());
                    verification.signature_digest = signature.digest;
                    verification.layout = Some(signature.layout);
                }
                if !verification.signers.contains(&signature.signer) {
                    verification.signers.push(signature.signer.clone());
                }
                signers.push(format!("{} ({})", signature.signer, policy.id));
            }
            Outcome::Unsigned | Outcome::Invalid(_) => {
                let (reason, why) = match &outcome {
                    Outcome::Invalid(why) => (SkillCardReason::SignatureInvalid, why.as_str()),
                    _ => (SkillCardReason::Unsigned, "no signature found"),
                };
                let line = format!("{}: {why}", policy.id);
                if enforced {
                    if failures.is_empty() {
                        failure_reason = reason;
                    }
                    failures.push(line);
                } else {
                    if warnings.is_empty() {
                        warn_reason = reason;
                    }
                    warnings.push(line);
                }
            }
            Outcome::Unavailable(why) => {
                let line = format!("{}: {why}", policy.id);
                if enforced {
                    unavailable.push(line);
                } else {
                    warn_unavailable.push(line);
                }
            }
        }
    }

    let content = source.content().unwrap_or_default();
    if !failures.is_empty() {
        verification.state = VerificationState::Unverified;
        let message = format!(
            "{content} is not signed as required: {}",
            failures.join("; ")
        );
        return Some(Verdict {
            verified: (ConditionStatus::False, failure_reason, message.clone()),
            blocked: Some((SkillCardReason::Unverified, message)),
            verification,
        });
    }
    if !unavailable.is_empty() {
        verification.state = VerificationState::Unverified;
        let message = format!(
            "the signatures of {content} could not be checked: {}",
            unavailable.join("; ")
        );
        return Some(Verdict {
            verified: (
                ConditionStatus::Unknown,
                SkillCardReason::VerificationUnavailable,
                message.clone(),
            ),
            blocked: Some((SkillCardReason::VerificationUnavailable, message)),
            verification,
        });
    }
    if !warnings.is_empty() {
        verification.state = VerificationState::Unverified;
        let message = format!(
            "{content} is used although it is not signed as a Warn policy asks: {}",
            warnings.join("; ")
        );
        return Some(Verdict {
            verified: (ConditionStatus::False, warn_reason, message),
            blocked: None,
            verification,
        });
    }
    if !warn_unavailable.is_empty() {
        verification.state = VerificationState::Unverified;
        let message = format!(
            "{content} is used; its signatures could not be checked for a Warn policy: {}",
            warn_unavailable.join("; ")
        );
        return Some(Verdict {
            verified: (
                ConditionStatus::Unknown,
                SkillCardReason::VerificationUnavailable,
                message,
            ),
            blocked: None,
            verification,
        });
    }
    verification.state = VerificationState::Verified;
    let message = format!("{content} is signed by {}", signers.join(", "));
    Some(Verdict {
        verified: (
            ConditionStatus::True,
            SkillCardReason::SignatureVerified,
            message,
        ),
        blocked: None,
        verification,
    })
}

fn revoked_verdict(message: String, verification: SkillVerification) -> Verdict {
    Verdict {
        verified: (
            ConditionStatus::False,
            SkillCardReason::Revoked,
            message.clone(),
        ),
        blocked: Some((SkillCardReason::Revoked, message)),
        verification,
    }
}

/// Which pin a card keeps when its tag or branch resolves to new bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinChoice {
    /// Take the new pin, with its verdict.
    Adopt,
    /// Stay on the previous pin; the message says why the new one was refused, for the
    /// `Verified` condition (reason [`SkillCardReason::NewPinRefused`]) and its Event.
    KeepPrevious { message: String },
}

/// Whether a card adopts `new_pin` (judged `new`) or keeps `previous_pin` (judged `previous`
/// under the same policies): a tag that moves to bytes that are not verified, or cannot be
/// checked now, is not followed while the previous pin is still usable and verified. A
/// revoked previous pin is never kept; a Warn-only verdict is adopted as Warn says.
pub fn choose_pin(
    new_pin: &str,
    new: Option<&Verdict>,
    previous_pin: Option<&str>,
    previous: Option<&Verdict>,
) -> PinChoice {
    let Some(new) = new else {
        return PinChoice::Adopt;
    };
    let (Some(previous_pin), Some(previous)) = (previous_pin, previous) else {
        return PinChoice::Adopt;
    };
    let previous_verified =
        previous.usable() && previous.verification.state == VerificationState::Verified;
    if new.usable() || previous_pin == new_pin || !previous_verified {
        return PinChoice::Adopt;
    }
    let why = new
        .blocked
        .as_ref()
        .map(|(_, message)| message.as_str())
        .unwrap_or_default();
    PinChoice::KeepPrevious {
        message: format!("kept {previous_pin}; refused {new_pin}: {why}"),
    }
}

/// Writes `verdict` into the status a card's pass decided without trust: the `Verified`
/// condition and `status.verification`, and `Ready=False` with the verdict's reason when it
/// forbids the skill. Without a verdict (no policy selects the card, or the card is not
/// valid anyway), both are removed and the status is what it was before trust policies.
pub fn apply_to_card(
    status: &mut SkillCardStatus,
    verdict: Option<&Verdict>,
    generation: Option<i64>,
    now: &Time,
) {
    let Some(verdict) = verdict else {
        remove_condition(&mut status.conditions, CONDITION_VERIFIED);
        status.verification = None;
        return;
    };
    let mut conditions =
        Conditions::<SkillCardReason>::new(&mut status.conditions, generation, now.clone());
    let (verified, reason, message) = &verdict.verified;
    conditions.set(CONDITION_VERIFIED, *verified, *reason, message);
    if let Some((reason, message)) = &verdict.blocked {
        conditions.set(CONDITION_READY, ConditionStatus::False, *reason, message);
    }
    status.verification = Some(verdict.verification.clone());
}

/// The status of a card that keeps its previous, verified pin (`old`) and refuses the new
/// one: everything `old` said about its content, at this generation, with `Verified` saying
/// what was refused and why.
pub fn keep_previous_pin(
    old: &SkillCardStatus,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) -> SkillCardStatus {
    let mut kept = old.clone();
    kept.observed_generation = generation;
    Conditions::<SkillCardReason>::new(&mut kept.conditions, generation, now.clone()).set(
        CONDITION_VERIFIED,
        ConditionStatus::True,
        SkillCardReason::NewPinRefused,
        message,
    );
    kept
}

/// The pin a decided card status holds, when it is Ready: the verification applies to the
/// bytes a card is about to hand to runs, nothing else.
pub fn ready_pin(status: &SkillCardStatus) -> Option<&str> {
    if !is_ready(&status.conditions) {
        return None;
    }
    status
        .resolved_image
        .as_deref()
        .or(status.resolved_source.as_deref())
}

/// The verdict on a card its pass decided Ready without a pin (an inline skill): nothing
/// signs it, so only a policy with `unselected: Deny` can hold it back.
pub fn judge_unpinned(policies: &Policies, decided: &SkillCardStatus) -> Option<Verdict> {
    if !is_ready(&decided.conditions) {
        return None;
    }
    judge(policies, &PinnedSource::Inline, &[])
}

/// A run's mounted skill that a policy revokes or did not verify, and why.
fn affected_skill(
    policies: &Policies,
    policy: &PolicyId,
    pinned: &PinnedSkill,
) -> Option<SkillCardReason> {
    let pin = Pin::parse(&pinned.image);
    let source = PinnedSource::of(pin.as_ref());
    // Every revoking policy counts the skill, not only the first of them.
    if policies
        .revoking_content_all(&source)
        .any(|p| p.id == policy)
    {
        return Some(SkillCardReason::Revoked);
    }
    let verification = pinned.verification.as_ref()?;
    if policies
        .revoking_recorded_signer(verification, |p| p.id == policy)
        .is_some()
    {
        return Some(SkillCardReason::Revoked);
    }
    let named_here = verification
        .policies
        .iter()
        .any(|p| *p == policy.to_string());
    match verification.state {
        VerificationState::Unverified if named_here => Some(SkillCardReason::Unverified),
        VerificationState::Revoked if named_here => Some(SkillCardReason::Revoked),
        _ => None,
    }
}

/// Whether `run` is held before its start by the trust policies: not finished, no sandbox,
/// nothing mounted, and `Ready` says `SkillBlocked`. Its Agent's skills are what it would
/// mount ([`blast_radius`]'s `intended`).
pub fn held_before_start(run: &AgentRun) -> bool {
    run.status.as_ref().is_some_and(|status| {
        status.skills.is_empty()
            && status.sandbox_name.is_none()
            && !status
                .phase
                .is_some_and(agentic_api::AgentRunPhase::is_finished)
            && crate::conditions::find_condition(&status.conditions, CONDITION_READY)
                .is_some_and(|ready| ready.reason == AgentRunReason::SkillBlocked.as_str())
    })
}

/// What a run of `namespace` held before its start would mount: `agent`'s pinned skills,
/// each with the verification of its card (found by `card`, from the card's namespace and
/// name) when the card still pins what the Agent resolved. Inline skills pin nothing a
/// policy revokes and are left out.
pub fn intended_skills<C>(
    agent: &Agent,
    namespace: &str,
    card: impl Fn(&str, &str) -> Option<C>,
) -> Vec<PinnedSkill>
where
    C: std::ops::Deref<Target = SkillCard>,
{
    let skills = agent.status.as_ref().map_or(&[][..], |s| &s.skills[..]);
    skills
        .iter()
        .filter_map(|skill| {
            let image = skill.image.clone()?;
            let card_namespace = skill.namespace.as_deref().unwrap_or(namespace);
            let verification = card(card_namespace, &skill.skill_card).and_then(|card| {
                let status = card.status.as_ref()?;
                let pinned = status
                    .resolved_image
                    .as_deref()
                    .or(status.resolved_source.as_deref());
                (pinned == Some(image.as_str()))
                    .then(|| status.verification.clone().map(Box::new))
                    .flatten()
            });
            Some(PinnedSkill {
                name: skill.name.clone(),
                image,
                skill_type: skill.skill_type,
                verification,
                ..PinnedSkill::default()
            })
        })
        .collect()
}

/// The blast radius of `policy`: every run (live or finished) that mounted a skill it
/// revokes or did not verify, and every run held before its start ([`held_before_start`])
/// whose `intended` skills (its Agent's, with their cards' verification) it revokes or did
/// not verify; live runs first, then by namespace and name; at most
/// [`MAX_BLAST_RADIUS_ENTRIES`] entries, with the count of them all. The cache holds
/// `runs` whole and the `finished` ones as compact entries.
pub fn blast_radius<'a>(
    cluster: &[ClusterSkillTrustPolicy],
    namespaced: &[SkillTrustPolicy],
    policy: &PolicyId,
    runs: impl IntoIterator<Item = &'a AgentRun>,
    finished: &FinishedRuns,
    intended: impl Fn(&AgentRun) -> Vec<PinnedSkill>,
) -> (i64, Vec<AffectedRun>) {
    let mut by_namespace: std::collections::BTreeMap<String, Policies> =
        std::collections::BTreeMap::default();
    let mut affected: Vec<(bool, AffectedRun)> = Vec::new();
    let mut count = |namespace: &str,
                     name: &str,
                     phase: Option<agentic_api::AgentRunPhase>,
                     skills: &[PinnedSkill]| {
        if !policy.covers(namespace) {
            return;
        }
        let policies = by_namespace
            .entry(namespace.to_string())
            .or_insert_with(|| Policies::new(cluster, namespaced, namespace));
        let live = !phase.is_some_and(agentic_api::AgentRunPhase::is_finished);
        for pinned in skills {
            if let Some(reason) = affected_skill(policies, policy, pinned) {
                affected.push((
                    live,
                    AffectedRun {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        phase,
                        skill: pinned.name.clone(),
                        image: pinned.image.clone(),
                        reason: reason.to_string(),
                    },
                ));
            }
        }
    };
    for run in runs {
        let Some(status) = &run.status else {
            continue;
        };
        let namespace = run.metadata.namespace.as_deref().unwrap_or_default();
        let name = run.metadata.name.as_deref().unwrap_or_default();
        if held_before_start(run) {
            if policy.covers(namespace) {
                count(namespace, name, status.phase, &intended(run));
            }
        } else {
            count(namespace, name, status.phase, &status.skills);
        }
    }
    for (namespace, name, run) in finished.iter() {
        count(namespace, name, Some(run.phase), &run.skills);
    }
    let runs: BTreeSet<(&str, &str)> = affected
        .iter()
        .map(|(_, a)| (a.namespace.as_str(), a.name.as_str()))
        .collect();
    let count = i64::try_from(runs.len()).unwrap_or(i64::MAX);
    affected.sort_by(|(live_a, a), (live_b, b)| {
        live_b
            .cmp(live_a)
            .then_with(|| (&a.namespace, &a.name, &a.skill).cmp(&(&b.namespace, &b.name, &b.skill)))
    });
    let entries = affected
        .into_iter()
        .map(|(_, a)| a)
        .take(MAX_BLAST_RADIUS_ENTRIES)
        .collect();
    (count, entries)
}

/// Why a live run must be cancelled under `policies`: it mounted a skill whose digest,
/// commit or signer a policy with `action: Cancel` revokes. `None` for finished runs, runs
/// already cancelled and runs nothing revokes.
pub fn cancellation(policies: &Policies, run: &AgentRun) -> Option<String> {
    if run.spec.cancel == Some(true) {
        return None;
    }
    cancelling_revocation(policies, run.status.as_ref()?)
}

/// Like [`cancellation`], from the run's status alone (the status a pass is deciding, which
/// may be ahead of the stored run's): why a run with `status` must be cancelled, whatever its
/// `spec.cancel`.
pub fn cancelling_revocation(policies: &Policies, status: &AgentRunStatus) -> Option<String> {
    if status
        .phase
        .is_some_and(agentic_api::AgentRunPhase::is_finished)
    {
        return None;
    }
    // Any Cancel policy revoking the skill cancels, whichever policy revokes it first: a
    // cluster `Block` does not shield a run from a namespace's `Cancel`.
    let cancelling = |p: &NamedPolicy<'_>| p.policy.action == RevocationAction::Cancel;
    status.skills.iter().find_map(|pinned| {
        let pin = Pin::parse(&pinned.image);
        let source = PinnedSource::of(pin.as_ref());
        let by = policies
            .revoking_content_all(&source)
            .find(cancelling)
            .or_else(|| {
                let verification = pinned.verification.as_ref()?;
                policies
                    .revoking_recorded_signer(verification, cancelling)
                    .map(|(policy, _)| policy)
            })?
            .id;
        Some(format!(
            "skill {:?} ({}) is revoked by {by}, whose action is Cancel",
            pinned.name, pinned.image
        ))
    })
}

#[cfg(test)]
mod tests;
