//! Gather, for a run without a sandbox: what holds its sandbox's name, its Agent, the trust
//! policies of its namespace, and (once the Agent is usable) the Gateway and SkillCards the
//! Agent names, the keys of its file mounts' sources and the signatures of its cluster-wide
//! default skills under its namespace's policies. Reads only, from the watch caches where they can serve, and returns
//! what it found: present, missing or malformed, never what that means for the run.

use std::collections::BTreeMap;

use agentic_api::CONDITION_READY;
use agentic_api::{Agent, AgentRun, Gateway, SkillCard};
use agentic_core::conditions::find_condition;
use agentic_core::owners::is_controlled_by;
use agentic_core::pin::Pin;
use agentic_core::reasons::{AgentRunReason, ErrorReason};
use agentic_core::sandbox::{
    FileSourceKind, MountedSkill, SANDBOX_KIND, SourceLookup, file_mount_source,
};
use agentic_core::skills::{Lookup, check_agent};
use agentic_core::start::{SourceKey, StartInputs, gateway_to_read, gateway_usable};
use agentic_core::trust::{OutcomesByPin, Policies};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::sandbox_resource;
use crate::caches::listed;
use crate::context::{Context, SandboxBackend};
use crate::controllers::support::{Read, listed_view, lookup, read_cached};
use crate::controllers::trustpolicy::{SourceAuth, listed_policies, outcomes_of};
use crate::error::Result;

/// What a run without a sandbox names, as read.
pub(super) struct Gathered {
    /// The object holding the sandbox's name.
    sandbox: Option<ObjectMeta>,
    agent: Read<Agent>,
    /// The Gateway the run uses; not read (`None`) until the Agent is usable.
    gateway: Read<Gateway>,
    /// The card of each of the Agent's `status.skills`, in order; none until the Agent is
    /// usable.
    cards: Vec<Read<SkillCard>>,
    file_sources: BTreeMap<SourceKey, SourceLookup>,
    /// The trust policies of the run's namespace, or why they cannot be known.
    policies: Result<Policies, String>,
    /// The outcome of each of those policies' requirements on each cluster-wide default
    /// skill the Agent pinned, by pin: the card was judged under another namespace's.
    default_signatures: OutcomesByPin,
}

impl Gathered {
    /// What [`agentic_core::start::plan_start`] decides from.
    pub(super) fn inputs<'a>(
        &'a self,
        run: &'a AgentRun,
        run_uid: &'a str,
        ctx: &'a Context,
    ) -> StartInputs<'a> {
        StartInputs {
            run,
            run_uid,
            sandbox_kind: sandbox_kind(ctx),
            sandbox: self.sandbox.as_ref(),
            agent: lookup(&self.agent),
            gateway: lookup(&self.gateway),
            cards: self.cards.iter().map(lookup).collect(),
            file_sources: &self.file_sources,
            fetcher: ctx.settings.skill_fetcher.as_ref(),
            credential_proxy: &ctx.settings.credential_proxy,
            trace_receiver: ctx.settings.trace_receiver.as_ref(),
            policies: self.policies.as_ref().map_err(String::as_str),
            default_signatures: &self.default_signatures,
        }
    }
}

/// Reads what `run` names. Until its Agent is usable the run waits for it, so nothing the
/// Agent names is read.
pub(super) async fn gather(run: &AgentRun, namespace: &str, ctx: &Context) -> Result<Gathered> {
    let sandbox = holder_of_sandbox_name(
        ctx,
        namespace,
        &agentic_core::names::sandbox_name(&run.name_any()),
        run.metadata.uid.as_deref().unwrap_or_default(),
    )
    .await?;
    let agent_ref = &run.spec.agent_ref;
    let seen_waiting = waits_for_its_agent(run)
        .then(|| listed_view::<Agent>(ctx, namespace, agent_ref))
        .flatten();
    let agent = match seen_waiting {
        Some(cached) => cached,
        None => {
            read_cached(ctx, namespace, agent_ref, |agent| {
                check_agent(agent_ref, Lookup::Found(agent)).is_ok()
            })
            .await?
        }
    };
    let mut gathered = Gathered {
        sandbox,
        agent: None,
        gateway: None,
        cards: Vec::new(),
        file_sources: BTreeMap::new(),
        policies: listed_policies(ctx, namespace).await,
        default_signatures: OutcomesByPin::new(),
    };
    if let Some(usable) = agent
        .as_ref()
        .and_then(|read| read.as_ref().ok())
        .filter(|agent| check_agent(agent_ref, Lookup::Found(agent)).is_ok())
    {
        if let Some(name) = gateway_to_read(run, usable) {
            gathered.gateway = read_cached(ctx, namespace, &name, |gateway: &Gateway| {
                gateway_usable(usable, gateway)
            })
            .await?;
        }
        gathered.cards = read_cards(usable, namespace, ctx).await?;
        if let Ok(policies) = &gathered.policies {
            let pins = default_pins(usable);
            // Mounted without the card namespace's credentials, so read without them.
            let auth = &SourceAuth::ANONYMOUS;
            gathered.default_signatures = outcomes_of(policies, pins, auth, ctx).await;
        }
        gathered.file_sources =
            file_mount_source_keys(ctx, namespace, &run.spec.file_mounts).await?;
    }
    gathered.agent = agent;
    Ok(gathered)
}

/// Whether `run`'s status already says it waits for its Agent (missing, or not Ready).
///
/// Such a run is woken by the Agent's watch when the Agent changes, so the listed cache's
/// view of it is as good as a read from the API server: a cache a moment behind cannot turn
/// away a run that already waits. Without this a restart read the Agent of every waiting
/// run (5,000 GETs at 100,000 runs) for the verdict their statuses already held.
fn waits_for_its_agent(run: &AgentRun) -> bool {
    let waiting = [ErrorReason::AgentNotFound, ErrorReason::AgentNotReady]
        .map(|reason| AgentRunReason::Error(reason).as_str());
    run.status
        .as_ref()
        .and_then(|status| find_condition(&status.conditions, CONDITION_READY))
        .is_some_and(|ready| waiting.contains(&ready.reason.as_str()))
}

/// The pins of the Agent's cluster-wide default skills.
fn default_pins(agent: &Agent) -> Vec<Pin> {
    let pinned = agent.status.as_ref().map_or(&[][..], |s| &s.skills[..]);
    pinned
        .iter()
        .filter(|skill| skill.namespace.is_some())
        .filter_map(|skill| Pin::parse(skill.image.as_deref()?))
        .collect()
}

/// The card of each skill the Agent pinned, from the namespace it lives in (a cluster-wide
/// default skill's in the default-skills namespace).
async fn read_cards(agent: &Agent, namespace: &str, ctx: &Context) -> Result<Vec<Read<SkillCard>>> {
    let pinned = agent.status.as_ref().map_or(&[][..], |s| &s.skills[..]);
    let mut cards = Vec::with_capacity(pinned.len());
    for skill in pinned {
        let card_namespace = skill.namespace.as_deref().unwrap_or(namespace);
        let card = read_cached(
            ctx,
            card_namespace,
            &skill.skill_card,
            |card: &SkillCard| MountedSkill::from_agent_skill(skill, Lookup::Found(card)).is_ok(),
        )
        .await?;
        cards.push(card);
    }
    Ok(cards)
}

/// The kind of the object the sandbox backend creates.
fn sandbox_kind(ctx: &Context) -> &'static str {
    match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => "Pod",
        SandboxBackend::AgentSandbox => SANDBOX_KIND,
    }
}

/// The metadata of the object named `name` of the sandbox backend's kind, if there is one.
/// From the cache once it has listed: absent there is absent, but for a sandbox this process
/// created a moment ago that its watch has not brought yet. Creating that one again meets
/// 409, and the create hands back the existing sandbox with its pinned skills. Another's
/// holder is the cache's; the run's own (`run_uid` controls it), which the run adopts with
/// the skills it mounts, is read from the API server: the caches keep no sandbox's
/// pinned-skills annotation, a kilobyte a run that only an adoption reads.
async fn holder_of_sandbox_name(
    ctx: &Context,
    namespace: &str,
    name: &str,
    run_uid: &str,
) -> Result<Option<ObjectMeta>> {
    if let Some(caches) = ctx.caches(namespace) {
        let cached = match (ctx.settings.sandbox_backend, &caches.sandboxes) {
            (SandboxBackend::Pod, _) => listed(&caches.pods).then(|| {
                caches
                    .pods
                    .get(&ObjectRef::new(name).within(namespace))
                    .map(|p| p.metadata.clone())
            }),
            (SandboxBackend::AgentSandbox, Some(sandboxes)) => listed(sandboxes).then(|| {
                sandboxes
                    .get(&ObjectRef::new_with(name, sandbox_resource()).within(namespace))
                    .map(|s| s.metadata.clone())
            }),
            (SandboxBackend::AgentSandbox, None) => None,
        };
        if let Some(metadata) = cached
            && !metadata
                .as_ref()
                .is_some_and(|holder| is_controlled_by(holder, run_uid))
        {
            return Ok(metadata);
        }
    }
    Ok(match ctx.settings.sandbox_backend {
        SandboxBackend::Pod => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            pods.get_opt(name).await?.map(|p| p.metadata)
        }
        SandboxBackend::AgentSandbox => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), namespace, &sandbox_resource());
            api.get_opt(name).await?.map(|s| s.metadata)
        }
    })
}

/// The keys of every Secret and ConfigMap the run's file mounts read, from the API server
/// (the Secret watch carries no data, ConfigMaps are not watched). Keys only: the values
/// are dropped here. A source the operator may not read is `Unavailable`, as Konveyor has it.
async fn file_mount_source_keys(
    ctx: &Context,
    namespace: &str,
    mounts: &[agentic_api::FileMount],
) -> Result<BTreeMap<SourceKey, SourceLookup>> {
    let mut found = BTreeMap::new();
    for (kind, name) in mounts.iter().filter_map(file_mount_source) {
        let key = (kind.as_str(), name.to_string());
        if found.contains_key(&key) {
            continue;
        }
        let read = match kind {
            FileSourceKind::Secret => Api::<Secret>::namespaced(ctx.client.clone(), namespace)
                .get_opt(name)
                .await
                .map(|secret| secret.map(|s| s.data.unwrap_or_default().into_keys().collect())),
            FileSourceKind::ConfigMap => {
                Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map(|config_map| {
                        config_map.map(|c| {
                            let data = c.data.unwrap_or_default().into_keys();
                            data.chain(c.binary_data.unwrap_or_default().into_keys())
                                .collect()
                        })
                    })
            }
        };
        let lookup = match read {
            Ok(Some(keys)) => SourceLookup::Found(keys),
            Ok(None) => SourceLookup::NotFound,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                SourceLookup::Unavailable(format!(
                    "the operator may not read {} {name}: {}",
                    kind.as_str(),
                    status.message
                ))
            }
            Err(e) => return Err(e.into()),
        };
        found.insert(key, lookup);
    }
    Ok(found)
}
