//! The reason vocabulary: for each kind, an enum of every reason its conditions can carry.
//!
//! A reason is a variant, spelled once: its name is the CamelCase word written into
//! conditions, Events and metric labels, its doc comment what it means. The conditions
//! writer ([`crate::conditions::Conditions`]) takes the kind's enum, so a reason no enum
//! lists does not compile, and a reason of one kind cannot land on another's conditions.
//!
//! The errors of the pure middle ([`crate::Error`]) are one type shared by several kinds:
//! their reasons are [`ErrorReason`], carried by a kind's `Error` variant, and each kind
//! names in its `ERRORS` the ones its conditions can carry (what its section of
//! `docs/conditions.md` documents). [`ReconcileErrorReason`] labels failed passes
//! (`agentic_reconcile_errors_total`, the `ReconcileFailed` Event) and [`EventReason`] the
//! Events that belong to no condition. A test (`tests/tests/reasons.rs`) fails when a
//! section of `docs/conditions.md` and its enum differ.

use std::fmt;

/// A kind's reason enum.
pub trait Reason: Copy + Eq + fmt::Debug + fmt::Display + 'static {
    /// The kind, as `docs/conditions.md` titles its section.
    const KIND: &'static str;
    /// Every reason of the kind: its own, then those of [`crate::Error`] it carries.
    fn all() -> Vec<Self>;
    /// The word written into conditions, Events and metric labels.
    fn as_str(self) -> &'static str;
}

/// Defines a reason enum whose variants are the reasons themselves (the variant's name is
/// the word), and with `errors [...]` an `Error` variant for the listed [`ErrorReason`]s.
macro_rules! reasons {
    (
        $(#[doc = $enum_doc:literal])*
        pub enum $name:ident for $kind:literal {
            $( $(#[doc = $doc:literal])+ $variant:ident, )+
        }
        errors [ $($error:ident),+ $(,)? ]
    ) => {
        $(#[doc = $enum_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[doc = $doc])+ $variant, )+
            /// A reason of [`crate::Error`]; the ones this kind carries are in `ERRORS`.
            Error(ErrorReason),
        }

        impl $name {
            /// The reasons of [`crate::Error`] this kind's conditions carry.
            pub const ERRORS: &'static [ErrorReason] = &[$(ErrorReason::$error),+];

            /// The word written into conditions, Events and metric labels.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => stringify!($variant), )+
                    Self::Error(error) => error.as_str(),
                }
            }
        }

        impl From<ErrorReason> for $name {
            fn from(error: ErrorReason) -> Self {
                Self::Error(error)
            }
        }

        impl Reason for $name {
            const KIND: &'static str = $kind;

            fn all() -> Vec<Self> {
                [$(Self::$variant),+]
                    .into_iter()
                    .chain(Self::ERRORS.iter().copied().map(Self::Error))
                    .collect()
            }

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (
        $(#[doc = $enum_doc:literal])*
        pub enum $name:ident for $kind:literal {
            $( $(#[doc = $doc:literal])+ $variant:ident, )+
        }
    ) => {
        $(#[doc = $enum_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl $name {
            /// The word written into conditions, Events and metric labels.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => stringify!($variant), )+
                }
            }
        }

        impl Reason for $name {
            const KIND: &'static str = $kind;

            fn all() -> Vec<Self> {
                vec![$(Self::$variant),+]
            }

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

reasons! {
    /// The reasons of [`crate::Error`]: why an Agent, a run, a workflow or a collection cannot
    /// be built as asked.
    pub enum ErrorReason for "errors" {
        /// A run sets a param the Agent does not declare.
        UnknownParam,
        /// A run sets the same param more than once.
        DuplicateParam,
        /// A required param is not set by the run.
        MissingParam,
        /// A run's value does not parse as the param's declared type.
        InvalidParamValue,
        /// An Agent's declared default does not parse as the param's declared type.
        InvalidParamDefault,
        /// `spec.prompt` or `spec.instructions` references a param that has no value.
        UnresolvedReference,
        /// Every param problem found at once.
        InvalidParams,
        /// `spec.gitConfig` cannot be used as a commit author.
        InvalidGitConfig,
        /// The run's `spec.fileMounts` cannot be mounted.
        InvalidFileMounts,
        /// SkillCards an Agent references do not exist.
        SkillCardNotFound,
        /// SkillCards an Agent references exist but cannot be used yet.
        SkillCardNotReady,
        /// Two SkillCards of one Agent provide skills with the same frontmatter name.
        DuplicateSkillName,
        /// SkillCollections an Agent references do not exist.
        SkillCollectionNotFound,
        /// SkillCollections an Agent references exist but are not Ready.
        SkillCollectionNotReady,
        /// A SkillCollection's image holds no skill.
        NoSkills,
        /// A SkillCollection holds more skills than one collection may.
        TooManySkills,
        /// Two skills of one SkillCollection would get the same SkillCard name.
        DuplicateSkillCardName,
        /// A skill name that is not a safe directory name under `/opt/skills`.
        InvalidSkillName,
        /// A SkillCard without `spec.inline` was asked for its inline ConfigMap (an invariant
        /// of the code, never a condition).
        MissingInlineSkill,
        /// A run has git skills, and the operator was not told its own image.
        OperatorImageNotSet,
        /// Gateways an Agent or a run references do not exist.
        GatewayNotFound,
        /// Gateways an Agent or a run references exist but are not Ready.
        GatewayNotReady,
        /// Neither the Agent nor the run names a gateway.
        NoGateway,
        /// The Agent lists several gateways and the run does not pick one.
        GatewayRequired,
        /// The run asks for a gateway the Agent does not list.
        GatewayNotAllowed,
        /// The run's Agent does not exist.
        AgentNotFound,
        /// The run's Agent exists but is not Ready for its current spec.
        AgentNotReady,
        /// The run's `spec.env` sets names the operator reserves.
        ReservedEnvName,
        /// The run's `spec.env` sets the same name twice.
        DuplicateEnvName,
        /// What a run's sandbox carries as annotations would not fit an object's annotations.
        AnnotationsTooLarge,
        /// An object lacks metadata the API server always sets.
        MissingMetadata,
        /// Turning a built object into JSON failed.
        SerializationFailed,
    }
}

reasons! {
    /// The reasons of a SkillCard's conditions.
    pub enum SkillCardReason for "SkillCard" {
        /// `Ready` True: the card's content is valid.
        SkillValid,
        /// `ExtensionsKept` False: an update removed extension fields (`pullSecrets`,
        /// `sourceSecret`), as a client that does not know them does.
        ExtensionFieldsDropped,
        /// `Ready` Unknown: its registry or git server is being asked.
        Validating,
        /// `RegistryReachable` True: the registry answered with the tag's digest.
        DigestResolved,
        /// `SourceReachable` True: the git server answered with the ref's commit.
        RefResolved,
        /// `MovingRef` True: the card follows the repository's default branch.
        DefaultBranch,
        /// `MovingRef` False: the card names its ref.
        RefSet,
        /// A pull secret is not a docker config.
        InvalidPullSecret,
        /// A pull secret does not exist.
        PullSecretNotFound,
        /// `spec.sourceSecret` does not exist.
        SourceSecretNotFound,
        /// `spec.sourceSecret` holds no usable credential.
        InvalidSourceSecret,
        /// The registry did not answer.
        RegistryUnavailable,
        /// The inline card's ConfigMap exists and is controlled by something else.
        ObjectNameTaken,
        /// None, or more than one, of `spec.image`, `spec.inline` and `spec.source` is set.
        NoSkillSource,
        /// The registry served bytes that do not hash to their digest.
        DigestMismatch,
        /// The registry does not know the repository, tag or digest.
        ImageNotFound,
        /// The image is over a limit.
        ImageTooLarge,
        /// Not an image the operator can read.
        InvalidImage,
        /// `spec.ref` cannot name a branch or tag.
        InvalidRef,
        /// `spec.image` cannot be parsed.
        InvalidReference,
        /// goose would skip the skill or read it cut short.
        GooseIncompatible,
        /// The SKILL.md breaks the Agent Skills specification.
        InvalidSkill,
        /// `spec.source` is not a URL the operator may fetch.
        InvalidSource,
        /// `spec.subPath` cannot be used.
        InvalidSubPath,
        /// A link inside the skill.
        LinkInSkill,
        /// A SKILL.md below the skill's root.
        NestedSkillFile,
        /// The repository has no such ref or commit.
        RefNotFound,
        /// The registry answered in a way the operator does not understand.
        RegistryError,
        /// The git server does not have the repository.
        RepositoryNotFound,
        /// The fetch or the skill directory is over a limit.
        RepositoryTooLarge,
        /// No SKILL.md at the root or under `spec.subPath`.
        SkillNotFound,
        /// The git server could not be reached.
        SourceUnavailable,
        /// The image holds several skills and no `spec.subPath` picks one.
        SubPathRequired,
        /// The image holds more skill directories than one image may, and no `spec.subPath`
        /// picks one.
        TooManySkills,
        /// The registry or git server refused the credentials.
        Unauthorized,
        /// Unsafe entries in the image.
        UnsafeImageContent,
        /// Unsafe entries in the repository's tree.
        UnsafeSourceContent,
        /// `Verified` True: every selecting trust policy's requirement is met.
        SignatureVerified,
        /// `Verified` False: no signature of the pinned digest or commit was found.
        Unsigned,
        /// `Verified` False: signatures were found, but none verifies as a policy requires.
        SignatureInvalid,
        /// `Verified` False and `Ready` False: the pinned digest, commit or its signer is
        /// revoked.
        Revoked,
        /// `Ready` False: an `Enforce` policy's requirement is not met.
        Unverified,
        /// `Verified` Unknown (and `Ready` False for a pin never verified under `Enforce`):
        /// the signatures or the policy's keys could not be read.
        VerificationUnavailable,
        /// `Verified` True: the card keeps its verified pin and refused the digest or commit
        /// its tag or branch moved to.
        NewPinRefused,
        /// `Verified` Unknown (and `Ready` False for content not admitted before): the trust
        /// policies cannot be known (their watches have not listed, their CRDs are missing,
        /// the operator may not list them, or one does not match the schema), so nothing new
        /// is pinned or admitted.
        TrustPoliciesUnavailable,
        /// `Verified` False and `Ready` False: no trust policy selects the skill, and a policy
        /// in scope says `unselected: Deny`.
        NotSelected,
    }
    errors [MissingMetadata, MissingInlineSkill]
}

reasons! {
    /// The reasons of a SkillCollection's conditions.
    pub enum SkillCollectionReason for "SkillCollection" {
        /// `Ready` True: every SkillCard of the collection is Ready (Konveyor's word).
        AllSkillsResolved,
        /// `Ready` False: some SkillCards of the collection are missing or not Ready.
        SkillsNotReady,
        /// The registry did not answer.
        RegistryUnavailable,
        /// SkillCards it would generate are controlled by something else.
        ObjectNameTaken,
        /// The registry served bytes that do not hash to their digest.
        DigestMismatch,
        /// The registry does not know the repository, tag or digest.
        ImageNotFound,
        /// The image is over a limit.
        ImageTooLarge,
        /// Not an image the operator can read.
        InvalidImage,
        /// `spec.image` cannot be parsed.
        InvalidReference,
        /// goose would skip the root skill or read it cut short.
        GooseIncompatible,
        /// The root skill's SKILL.md breaks the Agent Skills specification.
        InvalidSkill,
        /// A link inside a skill.
        LinkInSkill,
        /// A SKILL.md below a skill's root.
        NestedSkillFile,
        /// The registry refused the credentials (or their absence).
        Unauthorized,
        /// Unsafe entries in the image.
        UnsafeImageContent,
    }
    errors [NoSkills, TooManySkills, DuplicateSkillCardName]
}

impl SkillCollectionReason {
    /// The reason a collection writes for a finding of a card read (its image's listing, or
    /// the read of its root skill): the same word where the collection has it. The match
    /// is total, so a new card reason does not compile until it is decided here. Reasons a
    /// collection's read cannot produce (it has no pull secrets, no `subPath`, no git
    /// source, no trust policies) are mapped to the collection reason closest in meaning.
    pub const fn for_collection(card: SkillCardReason) -> Self {
        use SkillCardReason as Card;
        match card {
            Card::RegistryUnavailable
            | Card::RegistryError
            | Card::Validating
            | Card::DigestResolved
            | Card::SourceUnavailable
            | Card::VerificationUnavailable
            | Card::TrustPoliciesUnavailable => Self::RegistryUnavailable,
            Card::ObjectNameTaken => Self::ObjectNameTaken,
            Card::DigestMismatch => Self::DigestMismatch,
            Card::ImageNotFound | Card::RepositoryNotFound | Card::RefNotFound => {
                Self::ImageNotFound
            }
            Card::ImageTooLarge | Card::RepositoryTooLarge => Self::ImageTooLarge,
            Card::InvalidImage
            | Card::SkillNotFound
            | Card::SubPathRequired
            | Card::InvalidSubPath
            | Card::NoSkillSource => Self::InvalidImage,
            Card::InvalidReference
            | Card::InvalidSource
            | Card::InvalidRef
            | Card::RefResolved
            | Card::DefaultBranch
            | Card::RefSet => Self::InvalidReference,
            Card::GooseIncompatible => Self::GooseIncompatible,
            Card::InvalidSkill | Card::SkillValid | Card::ExtensionFieldsDropped => {
                Self::InvalidSkill
            }
            Card::LinkInSkill => Self::LinkInSkill,
            Card::NestedSkillFile => Self::NestedSkillFile,
            Card::Unauthorized
            | Card::InvalidPullSecret
            | Card::PullSecretNotFound
            | Card::SourceSecretNotFound
            | Card::InvalidSourceSecret
            | Card::SignatureVerified
            | Card::Unsigned
            | Card::SignatureInvalid
            | Card::Revoked
            | Card::Unverified
            | Card::NewPinRefused
            | Card::NotSelected => Self::Unauthorized,
            Card::UnsafeImageContent | Card::UnsafeSourceContent => Self::UnsafeImageContent,
            Card::TooManySkills => Self::Error(ErrorReason::TooManySkills),
            Card::Error(error) => Self::Error(error),
        }
    }
}

reasons! {
    /// The reasons of a Gateway's conditions (`Ready` and `EndpointReachable`).
    pub enum GatewayReason for "Gateway" {
        /// Ready: the endpoint answered the check with a 2xx status.
        ConnectionVerified,
        /// Ready without a check: the provider signs requests with cloud credentials, the
        /// Gateway has no endpoint, or its credential is a whole Secret whose API key the
        /// operator cannot pick.
        VerificationSkipped,
        /// The endpoint answered 401 or 403: it refused the credential.
        Unauthorized,
        /// The endpoint could not be reached, or did not answer in time.
        EndpointUnreachable,
        /// The endpoint answered with a status other than 2xx, 401 and 403 (redirects
        /// included).
        UnexpectedStatus,
        /// The TLS handshake with the endpoint failed (certificate not trusted, expired,
        /// wrong name, or no TLS at all).
        TLSFailure,
        /// `spec.endpoint` is not an `http` or `https` URL the operator can check.
        InvalidEndpoint,
        /// The credential cannot be sent in an HTTP header (it holds a newline or another
        /// control character).
        InvalidCredential,
        /// The credential Secret does not exist.
        SecretNotFound,
        /// The credential Secret lacks `spec.credentialRef.key`.
        SecretKeyNotFound,
    }
}

reasons! {
    /// The reasons of an Agent's conditions.
    pub enum AgentReason for "Agent" {
        /// `Ready` True: every reference is Ready and skill names are unique.
        AgentReady,
        /// `SkillDeliveryResolved` True: `spec.skillDelivery` is one the operator knows.
        KnownSkillDelivery,
        /// `SkillDeliveryResolved` True for `inject`: Konveyor's harness ignores it (goose
        /// discovers every skill, the harness injects only rules).
        HarnessMayIgnoreInject,
        /// `SkillDeliveryResolved` False: `spec.skillDelivery` is not a known mode.
        UnknownSkillDelivery,
        /// `GatewayConfigured` True: `spec.gateways` lists at least one.
        GatewaysListed,
        /// `GatewayConfigured` False: `spec.gateways` is empty; runs must name one.
        NoGatewaysListed,
        /// `DefaultSkills` True: every default skill is in the Agent's skill set.
        DefaultSkillsApplied,
        /// `DefaultSkills` True: some default skills are replaced by the Agent's own of that
        /// name.
        DefaultSkillsShadowed,
        /// `DefaultSkills` False: some default skills are left out because they are not
        /// usable.
        DefaultSkillsSkipped,
        /// `DefaultSkills` False: two default skills share a name, and both are left out.
        DuplicateDefaultSkill,
        /// `RulesFitContext` True: the rules take at most their share of the context window.
        RulesFit,
        /// `RulesFitContext` False: the rules take more than their share of the context
        /// window.
        RulesExceedContext,
        /// `SkillsPrefetched` True: every node selected for prefetch holds the Agent's skill
        /// images.
        SkillImagesPresent,
        /// `SkillsPrefetched` False: prefetch pods are pulling the skill images, or wait for
        /// a slot under the caps.
        SkillPrefetchInProgress,
        /// `SkillsPrefetched` False: the prefetch failed on some nodes (the message names
        /// them and why); it is retried with backoff, and runs there pull the images
        /// themselves.
        SkillPrefetchFailed,
        /// `SkillsPrefetched` False: no node is selected for prefetch (none is schedulable,
        /// Ready and untainted and matches `--skill-prefetch`).
        NoPrefetchNodes,
        /// `ExtensionsKept` False: an update removed extension fields (`skillDelivery`,
        /// `maxConcurrentRuns`, `defaultSkills`), as a client that does not know them does.
        ExtensionFieldsDropped,
        /// `CredentialIsolation` True: the `credential-proxy` sidecar adds the key of every
        /// keyed Gateway the Agent lists.
        KeyProxied,
        /// `CredentialIsolation` True: no Gateway the Agent lists names a Secret.
        NoCredential,
        /// `CredentialIsolation` False: a Gateway's provider signs requests with cloud
        /// credentials, which the proxy does not add.
        CloudSignedProvider,
        /// `CredentialIsolation` False: a Gateway has no `spec.endpoint` to forward to.
        NoEndpoint,
        /// `CredentialIsolation` False: a Gateway's `spec.credentialRef` names no key.
        WholeSecretImported,
        /// `CredentialIsolation` False: a Gateway's `spec.endpoint` is not a URL the proxy
        /// forwards to.
        UnsupportedEndpoint,
        /// `CredentialIsolation` False: the Agent's `spec.credentialProxy` (or else the
        /// operator's `--credential-proxy`) is `off`.
        CredentialProxyOff,
    }
    errors [
        OperatorImageNotSet,
        SkillCardNotFound,
        SkillCardNotReady,
        DuplicateSkillName,
        InvalidSkillName,
        SkillCollectionNotFound,
        SkillCollectionNotReady,
        GatewayNotFound,
        GatewayNotReady,
    ]
}

reasons! {
    /// The reasons of an AgentRun's conditions (`Ready`, `Completed`, and Konveyor's
    /// `Succeeded` and `ACPReady`).
    pub enum AgentRunReason for "AgentRun" {
        /// No pod yet: the sandbox is being created, or agent-sandbox has not made its pod.
        SandboxCreating,
        /// The pod exists but the agent container has not started (scheduling, image pulls).
        PodPending,
        /// The agent container runs.
        AgentRunning,
        /// The agent container exited 0.
        AgentSucceeded,
        /// The agent container exited non-zero.
        AgentFailed,
        /// The agent exited 2: an execution limit (`maxTurns`, `maxCost`) was reached and
        /// the agent stopped.
        LimitReached,
        /// The agent exited 3: it declined the task.
        Refused,
        /// The pod failed without the agent container terminating (for example it was
        /// evicted).
        PodFailed,
        /// An init container fetching a git skill failed, so the agent never started.
        SkillFetchFailed,
        /// The sandbox or its pod disappeared, or was replaced, after the agent started.
        SandboxLost,
        /// The kubelet cannot start the agent container or an init container.
        StartupFailed,
        /// The agent container did not start within the startup deadline.
        StartupDeadlineExceeded,
        /// The agent ran longer than the run's `spec.activeDeadlineSeconds`.
        DeadlineExceeded,
        /// The run waits for one of its Agent's (or its namespace's) slots.
        Queued,
        /// The run's `spec.cancel` is true.
        Cancelled,
        /// A trust policy with `action: Cancel` revokes a skill the run mounted (its digest,
        /// commit or signer key); the run ends as a cancelled one does, its sandbox stopped.
        SkillRevoked,
        /// A trust policy of the run's namespace or of the cluster revokes a skill the run
        /// would mount (its digest, commit or signer key), wherever its card lives (a
        /// cluster-wide default skill included): the run waits, with no sandbox, until the
        /// revocation is lifted or its Agent no longer names the skill.
        SkillBlocked,
        /// An object the run does not control holds the name of one of the run's objects.
        ObjectNameTaken,
        /// `Succeeded` True: the agent exited 0 (Konveyor's name for `AgentSucceeded`).
        Succeeded,
        /// `Succeeded` False: the agent exited non-zero (Konveyor's name for `AgentFailed`).
        Failed,
        /// `Succeeded` Unknown: the agent runs (Konveyor's name for `AgentRunning`).
        Running,
        /// `ACPReady` True: the pod is Ready, its readiness probe connects to the ACP port.
        Listening,
        /// `ACPReady` False: the run has not started, or its agent does not listen (yet).
        NotListening,
        /// `ACPReady` False: the run has ended.
        Finished,
        /// The run waits for a file mount's Secret or ConfigMap that does not exist
        /// (Konveyor's).
        FileMountSourceNotFound,
        /// The run waits for a file mount's source that could not be looked up (Konveyor's).
        FileMountSourceUnavailable,
        /// `CredentialIsolation` True: the `credential-proxy` sidecar adds the Gateway's key;
        /// the agent container holds a placeholder.
        KeyProxied,
        /// `CredentialIsolation` True: the Gateway names no Secret, so there is no key to hold.
        NoCredential,
        /// `CredentialIsolation` False: the Gateway's provider signs requests with cloud
        /// credentials, which the proxy does not add.
        CloudSignedProvider,
        /// `CredentialIsolation` False: the Gateway has no `spec.endpoint` to forward to.
        NoEndpoint,
        /// `CredentialIsolation` False: the Gateway's `spec.credentialRef` names no key, so
        /// the whole Secret goes to the agent.
        WholeSecretImported,
        /// `CredentialIsolation` False: the Gateway's `spec.endpoint` is not a URL the proxy
        /// forwards to.
        UnsupportedEndpoint,
        /// `CredentialIsolation` False: the Agent's `spec.credentialProxy` (or else the
        /// operator's `--credential-proxy`) is `off`.
        CredentialProxyOff,
        /// The Agent's `spec.credentialProxy` (or else the operator's `--credential-proxy`)
        /// is `required` and the run's key cannot be kept from its agent
        /// (`CredentialIsolation` says why): the run does not start.
        CredentialIsolationRequired,
    }
    errors [
        AgentNotFound,
        AgentNotReady,
        GatewayNotFound,
        GatewayNotReady,
        SkillCardNotFound,
        SkillCardNotReady,
        OperatorImageNotSet,
        InvalidParams,
        UnknownParam,
        MissingParam,
        InvalidParamValue,
        DuplicateParam,
        InvalidParamDefault,
        UnresolvedReference,
        InvalidFileMounts,
        InvalidGitConfig,
        NoGateway,
        GatewayRequired,
        GatewayNotAllowed,
        ReservedEnvName,
        DuplicateEnvName,
        AnnotationsTooLarge,
    ]
}

reasons! {
    /// The reasons of an AgentWorkflow's `Ready`.
    pub enum AgentWorkflowReason for "AgentWorkflow" {
        /// Every stage's Agent exists and is Ready.
        AllAgentsReady,
        /// A stage's Agent is missing or not Ready.
        AgentsNotReady,
    }
    errors [InvalidParams]
}

reasons! {
    /// The reasons of an AgentWorkflowRun's `Ready`.
    pub enum AgentWorkflowRunReason for "AgentWorkflowRun" {
        /// Pending: its AgentWorkflow does not exist.
        WorkflowNotFound,
        /// Pending: its AgentWorkflow is not Ready.
        WorkflowNotReady,
        /// Running: the current stage's run is on its way.
        StageRunning,
        /// Running: a stage succeeded and the next one starts.
        StageSucceeded,
        /// Failed: a stage's run failed.
        StageFailed,
        /// Failed: a stage's run was deleted before it finished.
        AgentRunDeleted,
        /// Succeeded: every stage's run succeeded (Konveyor's).
        Succeeded,
        /// Failed: `spec.cancel` is true.
        Cancelled,
        /// Failed: an AgentRun it does not control holds the name of a stage's run.
        ObjectNameTaken,
    }
    errors [AgentNotFound, AgentNotReady, InvalidParams]
}

reasons! {
    /// The reasons of a SkillTrustPolicy's or ClusterSkillTrustPolicy's `Ready`.
    pub enum SkillTrustPolicyReason for "SkillTrustPolicy" {
        /// Every key, certificate, Secret and ConfigMap the policy names was read and parsed.
        KeysRead,
        /// A key, certificate, Secret or ConfigMap the policy names cannot be read or parsed.
        KeyUnreadable,
    }
}

reasons! {
    /// The reasons of a failed pass: the `reason` label of `agentic_reconcile_errors_total`
    /// and the reason in the note of a `ReconcileFailed` Event.
    pub enum ReconcileErrorReason for "Reconcile errors" {
        /// The API server refused a request.
        ApiError,
        /// The API server could not be reached.
        ApiUnavailable,
        /// A registry could not be reached.
        RegistryUnavailable,
        /// A git server could not be reached.
        SourceUnavailable,
        /// The client that checks Gateways could not be built.
        HttpClientFailed,
        /// The object does not match the schema.
        MalformedObject,
    }
    errors [SerializationFailed, MissingMetadata]
}

reasons! {
    /// The reasons of the Events that report no condition.
    pub enum EventReason for "Events" {
        /// Warning: a pass failed; it is retried with backoff. A reason of its own: the
        /// recorder folds Events of one reason into one series, and a failure must not vanish
        /// into the series of a condition's transition that carries the same word.
        ReconcileFailed,
        /// Warning: the object does not match the schema and is skipped.
        MalformedObject,
        /// Normal, on a stage's AgentRun: params of the workflow run that the stage's Agent
        /// does not declare.
        ParamsFiltered,
        /// Warning, on an AgentRun: its agent loaded a skill the run did not mount (one baked
        /// into the harness image, say), which bypassed validation and trust.
        UnmountedSkillLoaded,
    }
}

/// The reasons of one kind's conditions, as words.
#[derive(Debug)]
pub struct Vocabulary {
    /// The kind, as `docs/conditions.md` titles its section.
    pub kind: &'static str,
    /// Every reason its conditions can carry.
    pub reasons: Vec<&'static str>,
}

impl Vocabulary {
    fn of<R: Reason>() -> Self {
        Self {
            kind: R::KIND,
            reasons: R::all().into_iter().map(R::as_str).collect(),
        }
    }
}

/// Every kind's reasons, in the order of `docs/conditions.md`.
pub fn vocabulary() -> Vec<Vocabulary> {
    vec![
        Vocabulary::of::<SkillCardReason>(),
        Vocabulary::of::<SkillCollectionReason>(),
        Vocabulary::of::<GatewayReason>(),
        Vocabulary::of::<AgentReason>(),
        Vocabulary::of::<AgentRunReason>(),
        Vocabulary::of::<AgentWorkflowReason>(),
        Vocabulary::of::<AgentWorkflowRunReason>(),
        Vocabulary::of::<SkillTrustPolicyReason>(),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn is_reason(word: &str) -> bool {
        word.len() > 1
            && word.starts_with(|c: char| c.is_ascii_uppercase())
            && word.chars().all(|c| c.is_ascii_alphanumeric())
            && word.chars().any(|c| c.is_ascii_lowercase())
    }

    fn words<R: Reason>() -> BTreeSet<String> {
        R::all()
            .into_iter()
            .map(|r| r.as_str().to_owned())
            .collect()
    }

    /// Two variants with one word would make a reason's meaning depend on which was written,
    /// and matching on the enum would miss the other.
    #[test]
    fn no_kind_spells_a_reason_twice() {
        fn unique<R: Reason>() {
            let all = R::all();
            assert_eq!(words::<R>().len(), all.len(), "{}: {all:?}", R::KIND);
        }
        unique::<SkillCardReason>();
        unique::<SkillCollectionReason>();
        unique::<GatewayReason>();
        unique::<AgentReason>();
        unique::<AgentRunReason>();
        unique::<AgentWorkflowReason>();
        unique::<AgentWorkflowRunReason>();
        unique::<ReconcileErrorReason>();
        unique::<EventReason>();
        unique::<ErrorReason>();
    }

    /// A collection writes a card read's finding under the same word wherever it has one:
    /// the conversion changes the type, never the word on the wire.
    #[test]
    fn a_card_reason_keeps_its_word_on_a_collection_that_has_it() {
        let collection = words::<SkillCollectionReason>();
        for card in SkillCardReason::all() {
            let written = SkillCollectionReason::for_collection(card);
            if collection.contains(card.as_str()) {
                assert_eq!(written.as_str(), card.as_str());
            }
            // A card's own errors are invariants of the code no listing reaches.
            assert!(
                matches!(card, SkillCardReason::Error(_)) || collection.contains(written.as_str()),
                "{card} lands as {written}, which SkillCollectionReason does not list"
            );
        }
        assert_eq!(
            SkillCollectionReason::for_collection(SkillCardReason::TooManySkills),
            SkillCollectionReason::Error(ErrorReason::TooManySkills)
        );
    }

    #[test]
    fn the_word_is_the_variant_and_an_error_keeps_its_word() {
        assert_eq!(GatewayReason::TLSFailure.as_str(), "TLSFailure");
        assert_eq!(
            AgentRunReason::from(ErrorReason::InvalidParams).to_string(),
            "InvalidParams"
        );
        for vocabulary in vocabulary() {
            for reason in vocabulary.reasons {
                assert!(is_reason(reason), "{}: {reason}", vocabulary.kind);
            }
        }
    }
}
