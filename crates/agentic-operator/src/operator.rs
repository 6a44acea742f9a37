//! `agentic-operator run`: the controllers with their health, metrics, leader election and
//! graceful shutdown.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tokio::time::Instant;

use agentic_oci::{RegistryClient, RegistryOptions, RegistryRequest};
use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::context::{Context, RunDefaults, SandboxBackend, Settings};
use crate::controllers::{self, Readiness, Scope};
use crate::error::Chain;
use crate::metrics::Metrics;
use crate::server;

/// The Lease that replicas compete for when leader election is on and no other name is
/// given (`--leader-election-lease`).
pub const LEASE_NAME: &str = "agentic-operator-leader";
/// The CRD whose presence makes `--sandbox-backend auto` choose agent-sandbox.
pub const SANDBOX_CRD: &str = "sandboxes.agents.x-k8s.io";

/// How `--sandbox-backend` was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// agent-sandbox when its CRD is installed, else Pod.
    Auto,
    /// Always an agents.x-k8s.io Sandbox.
    AgentSandbox,
    /// Always a plain Pod.
    Pod,
}

/// Everything `run` needs, from flags or the environment.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub scope: Scope,
    pub insecure_registries: Vec<String>,
    /// Git hosts (HOST or HOST:PORT) that may be reached over plain `http://`.
    pub insecure_git_hosts: Vec<String>,
    pub sandbox_backend: BackendChoice,
    pub health_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    /// Serve `/metrics` over TLS to authenticated, authorized callers only; None serves it
    /// over plain HTTP to anyone.
    pub secure_metrics: Option<server::SecureMetrics>,
    /// Hold a Lease before reconciling; None reconciles at once.
    pub leader_election: Option<LeaderElection>,
    /// Split the namespaces into shards and serve those whose Leases this replica holds
    /// (`--shards` over 1); replaces `leader_election`. None: one replica serves all.
    pub shards: Option<crate::shards::leases::ShardLeasing>,
    pub tag_refresh_interval: Duration,
    pub run_defaults: RunDefaults,
    /// The user's trace collector (OTLP/HTTP base URL) that runs' traces are exported to;
    /// `None`: none.
    pub trace_collector: Option<String>,
    /// The most objects of one kind reconciled at once (SkillCards aside); 0 for no bound.
    pub reconcile_concurrency: u16,
    /// Where the cluster-wide default skills are; None: only namespace defaults.
    pub default_skills_namespace: Option<String>,
    /// The operator's own image, which the init containers of git skills run.
    pub operator_image: Option<String>,
    /// `--credential-proxy`: whether runs' model keys go through the credential proxy.
    pub credential_proxy: agentic_core::sandbox::CredentialProxyMode,
    /// Which nodes Ready Agents' skill images are prefetched onto (they run the operator's
    /// image, so nothing without one); None: no prefetch.
    pub skill_prefetch: Option<SkillPrefetch>,
    /// How long the watches of a kind may keep failing before the operator stops (and
    /// exits, so that its restart or the standby takes over); None never.
    pub watch_failure_timeout: Option<Duration>,
    /// The OTLP trace receiver; None: none, and agents get no `OTEL_*` variables.
    pub otlp: Option<crate::otlp::OtlpOptions>,
}

/// The skill prefetch settings of the command line.
#[derive(Clone, Debug)]
pub struct SkillPrefetch {
    pub nodes: agentic_core::prefetch::NodeSelection,
    pub priority_class: Option<String>,
    pub per_agent: usize,
    pub per_cluster: usize,
}

/// Which Lease replicas compete for, and how long a holder keeps it without renewing.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease; [`LEASE_NAME`] unless told otherwise. Two installations in one
    /// namespace need different names, or only one of them would ever act.
    pub lease_name: String,
    /// This replica's name in the Lease (the pod name in a cluster); None picks a random one.
    pub identity: Option<String>,
    /// How long the Lease stays valid after a renewal; a standby takes over after this much
    /// silence from the holder.
    pub lease_duration: Duration,
    /// How long before expiry the holder renews.
    pub renew_before_expiry: Duration,
}

impl LeaderElection {
    /// The Lease [`LEASE_NAME`] in `namespace`, valid for 15 seconds and renewed 5 seconds
    /// before it expires.
    pub fn new(namespace: impl Into<String>, identity: Option<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: LEASE_NAME.to_owned(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_before_expiry: Duration::from_secs(5),
        }
    }
}

/// Decides the sandbox backend; `auto` looks for the Sandbox CRD once, at start.
pub async fn resolve_backend(
    client: &Client,
    choice: BackendChoice,
) -> anyhow::Result<SandboxBackend> {
    Ok(match choice {
        BackendChoice::AgentSandbox => SandboxBackend::AgentSandbox,
        BackendChoice::Pod => SandboxBackend::Pod,
        BackendChoice::Auto => {
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            match crds
                .get_opt(SANDBOX_CRD)
                .await
                .context("looking up the Sandbox CRD")?
            {
                Some(_) => SandboxBackend::AgentSandbox,
                None => SandboxBackend::Pod,
            }
        }
    })
}

/// How often a missing CRD is looked for again.
const CRD_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// Every CRD the operator installs, which the controllers watch: `plural.group`, with the
/// `group/version` discovery serves it under. Derived from the CRD lists, so a kind added
/// there is checked here.
fn required_crds() -> Vec<(String, String)> {
    agentic_api::crds()
        .into_iter()
        .chain(agentic_api::trust_crds())
        .map(|crd| {
            let spec = crd.spec;
            let version = spec
                .versions
                .iter()
                .find(|v| v.served)
                .map(|v| v.name.clone())
                .unwrap_or_default();
            let group_version = format!("{}/{version}", spec.group);
            (
                group_version,
                format!("{}.{}", spec.names.plural, spec.group),
            )
        })
        .collect()
}

/// The required CRDs the API server does not serve, from its discovery documents (which
/// every client may read: no RBAC on CRDs needed).
async fn missing_crds(client: &Client) -> kube::Result<Vec<String>> {
    let required = required_crds();
    let group_versions: BTreeSet<&str> = required.iter().map(|(gv, _)| gv.as_str()).collect();
    let mut served = BTreeSet::new();
    for group_version in group_versions {
        match client.list_api_group_resources(group_version).await {
            Ok(list) => served.extend(list.resources.into_iter().map(|r| (group_version, r.name))),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(required
        .iter()
        .filter(|(group_version, crd)| {
            let plural = crd.split('.').next().unwrap_or_default().to_string();
            !served.contains(&(group_version.as_str(), plural))
        })
        .map(|(_, crd)| crd.clone())
        .collect())
}

/// Names missing CRDs in the log and in `/readyz` until they are all installed: without
/// them the watches cannot list, and "not listed yet" alone would not say why.
async fn check_crds(client: Client, readiness: Arc<Readiness>, mut stop: watch::Receiver<bool>) {
    let mut reported: Option<Vec<String>> = None;
    loop {
        match missing_crds(&client).await {
            Ok(missing) if missing.is_empty() => {
                if reported.is_some_and(|before| !before.is_empty()) {
                    tracing::info!("the CRDs this operator needs are installed now");
                }
                readiness.set_missing_crds(missing);
                return;
            }
            Ok(missing) => {
                if reported.as_ref() != Some(&missing) {
                    tracing::error!(
                        missing = %missing.join(", "),
                        "CRDs this operator needs are not installed; install the chart with crds.enabled=true or apply config/crd"
                    );
                    readiness.set_missing_crds(missing.clone());
                    reported = Some(missing);
                }
            }
            Err(e) => {
                tracing::warn!(error = %Chain(&e), "cannot read API discovery to check the CRDs");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(CRD_CHECK_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Runs until SIGINT or SIGTERM, then stops taking work, lets in-flight reconciles finish and
/// releases the lease.
pub async fn run(options: RunOptions) -> anyhow::Result<()> {
    let config = kube::Config::infer()
        .await
        .context("loading the kubeconfig (in-cluster or KUBECONFIG)")?;
    let client = crate::api_client::connect(config).context("connecting to the API server")?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing in-flight reconciles");
        let _ = stop_tx.send(true);
    });
    start(client, options, stop_rx).await?.finished().await
}

/// An operator started by [`start`].
pub struct Started {
    /// Where `/healthz` and `/readyz` answer (the bound port when 0 was asked for).
    pub health_addr: SocketAddr,
    /// Where `/metrics` answers.
    pub metrics_addr: SocketAddr,
    /// Where the OTLP trace receiver answers, when there is one.
    pub otlp_addr: Option<SocketAddr>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Started {
    /// Waits until the operator has stopped: Ok after a shutdown, an error when it could not
    /// run or lost its leadership.
    pub async fn finished(self) -> anyhow::Result<()> {
        self.task.await.context("the operator task failed")?
    }
}

/// Serves probes and metrics, then (holding the Lease when leader election is on) runs the
/// controllers with `client` until `shutdown` turns true. Losing the Lease stops the
/// controllers too, and [`Started::finished`] then reports an error, so that the process
/// exits and its restart competes for the Lease again.
pub async fn start(
    client: Client,
    options: RunOptions,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Started> {
    let backend = resolve_backend(&client, options.sandbox_backend).await?;
    tracing::info!(?backend, scope = ?options.scope, "starting");

    // Everything started here stops on `stop`: the caller's shutdown or a lost Lease.
    let (stop_tx, stop) = watch::channel(false);
    let metrics = Arc::new(Metrics::default());
    let readiness = Arc::new(Readiness::default());
    // Standby from the first probe on, until the Lease is ours.
    readiness.set_standby(options.leader_election.is_some());
    let health_addr = server::spawn(
        options.health_addr,
        server::health_router(readiness.clone()),
        stop.clone(),
    )
    .await
    .with_context(|| format!("binding --health-addr {}", options.health_addr))?;
    let metrics_addr = match &options.secure_metrics {
        None => {
            server::spawn(
                options.metrics_addr,
                server::metrics_router(metrics.clone()),
                stop.clone(),
            )
            .await
        }
        Some(secure) => {
            let tls = secure
                .tls_config()
                .context("the TLS certificate of --metrics-secure")?;
            server::spawn_tls(
                options.metrics_addr,
                server::secure_metrics_router(metrics.clone(), client.clone()),
                tls,
                stop.clone(),
            )
            .await
        }
    }
    .with_context(|| format!("binding --metrics-addr {}", options.metrics_addr))?;
    tracing::info!(
        health = %health_addr,
        metrics = %metrics_addr,
        metrics_secure = options.secure_metrics.is_some(),
        "serving probes and metrics"
    );
    tokio::spawn(check_crds(client.clone(), readiness.clone(), stop.clone()));
    // One export for the process: the receiver forwards the agents' spans to it, the
    // controllers (while this replica leads) send the operator's.
    let trace_export = options
        .trace_collector
        .as_deref()
        .map(|endpoint| crate::traces::TraceExport::start(endpoint, Arc::clone(&metrics)))
        .transpose()?;
    let receiver = crate::otlp::Receiver::new(
        options
            .otlp
            .as_ref()
            .map(|otlp| otlp.limits)
            .unwrap_or_default(),
        trace_export
            .clone()
            .map(|export| export as Arc<dyn crate::traces::TraceSink>),
    );
    let otlp_addr = match &options.otlp {
        Some(otlp) => Some(
            server::spawn(
                otlp.bind,
                crate::otlp::router(Arc::clone(&receiver)),
                stop.clone(),
            )
            .await
            .with_context(|| format!("binding --otlp-bind-address {}", otlp.bind))?,
        ),
        None => None,
    };
    if let Some(otlp_addr) = otlp_addr {
        tracing::info!(otlp = %otlp_addr, "serving the OTLP trace receiver");
    }

    let task = tokio::spawn(async move {
        let served = Served {
            metrics,
            readiness,
            receiver,
            trace_export,
        };
        let outcome = lead(client, options, backend, served, shutdown, &stop_tx).await;
        let _ = stop_tx.send(true);
        outcome
    });
    Ok(Started {
        health_addr,
        metrics_addr,
        otlp_addr,
        task,
    })
}

/// What the servers started before leadership share with the controllers.
struct Served {
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    /// Takes the controllers' context while this replica leads.
    receiver: Arc<crate::otlp::Receiver>,
    trace_export: Option<Arc<crate::traces::TraceExport>>,
}

/// Waits for the Lease when asked to, then runs the controllers until `shutdown` or the loss
/// of the Lease; `stop` tells the controllers to stop.
async fn lead(
    client: Client,
    options: RunOptions,
    backend: SandboxBackend,
    served: Served,
    mut shutdown: watch::Receiver<bool>,
    stop: &watch::Sender<bool>,
) -> anyhow::Result<()> {
    let Served {
        metrics,
        readiness,
        receiver,
        trace_export,
    } = served;
    let mut lease = match &options.leader_election {
        Some(election) => {
            let acquired = acquire_lease(&client, election, shutdown.clone()).await;
            readiness.set_standby(false);
            match acquired? {
                Some(lease) => Some(lease),
                None => return Ok(()),
            }
        }
        None => None,
    };

    let settings = Settings {
        registry: RegistryClient::observed(
            RegistryOptions {
                insecure_registries: options.insecure_registries.clone(),
                ..RegistryOptions::default()
            },
            {
                let metrics = Arc::clone(&metrics);
                Arc::new(move |request: &RegistryRequest| {
                    metrics.registry_request(request.registry, request.ok, request.took);
                })
            },
        )?,
        git: agentic_git::GitOptions {
            insecure_hosts: options.insecure_git_hosts.clone(),
            ..agentic_git::GitOptions::default()
        },
        sandbox_backend: backend,
        tag_refresh_interval: options.tag_refresh_interval,
        trust_policy_list_wait: crate::context::TRUST_POLICY_LIST_WAIT,
        trace_export,
        run_defaults: options.run_defaults,
        reconcile_concurrency: options.reconcile_concurrency,
        default_skills_namespace: default_skills_namespace(&options),
        credential_proxy: agentic_core::sandbox::CredentialProxy {
            mode: options.credential_proxy,
            image: options.operator_image.clone(),
        },
        skill_prefetch: prefetch_settings(&options),
        trace_receiver: options.otlp.as_ref().map(|otlp| otlp.receiver.clone()),
        skill_fetcher: options.operator_image.clone().map(|image| {
            agentic_core::sandbox::SkillFetcher {
                image,
                insecure_git_hosts: options.insecure_git_hosts.clone(),
            }
        }),
    };
    if let Some(leasing) = options.shards.clone() {
        let sharded = Sharded {
            client,
            settings,
            metrics,
            readiness,
            receiver,
        };
        return serve_shards(sharded, leasing, &options, shutdown).await;
    }
    let leading = Arc::clone(&metrics);
    leading.set_leader(true);
    let ctx = Arc::new(Context::new(client, settings, metrics));
    receiver.set_context(Some(Arc::clone(&ctx)));
    let watches = readiness.watches.clone();
    let controllers =
        controllers::run_until_shutdown(ctx, options.scope, readiness, stop.subscribe());
    tokio::pin!(controllers);

    /// Why the controllers stop before they finish on their own.
    enum Interrupted {
        LostLease(&'static str),
        BrokenWatches(controllers::watch_health::BrokenWatch),
    }
    let interrupted = tokio::select! {
        () = &mut controllers => None,
        _ = shutdown.wait_for(|s| *s) => None,
        why = lost(lease.as_mut()) => Some(Interrupted::LostLease(why)),
        broken = watches_broken(&watches, options.watch_failure_timeout) => {
            Some(Interrupted::BrokenWatches(broken))
        }
    };
    let _ = stop.send(true);
    receiver.set_context(None);
    leading.set_leader(false);
    match interrupted {
        // Without the Lease nothing may act any more: in-flight reconciles are dropped with
        // the controllers, not finished (each is idempotent, as after a kill), so a reconcile
        // stuck on an unreachable API server cannot outlast the Lease.
        Some(Interrupted::LostLease(why)) => {
            let (namespace, name) = options
                .leader_election
                .as_ref()
                .map_or(("", ""), |e| (e.namespace.as_str(), e.lease_name.as_str()));
            anyhow::bail!("lost the Lease {namespace}/{name} ({why}); stopped reconciling");
        }
        // The watches see nothing: in-flight reconciles are dropped the same way (the
        // controllers are not polled again), and the Lease goes at once so that the standby
        // need not wait for it to expire.
        Some(Interrupted::BrokenWatches(broken)) => {
            if let Some(lease) = lease {
                lease.release().await;
            }
            anyhow::bail!(
                "{broken}; stopped reconciling so that a restart, or the standby replica, \
                 takes over (--watch-failure-seconds)"
            );
        }
        None => {}
    }
    controllers.await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// What the controllers of each set of shards are started with.
struct Sharded {
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    receiver: Arc<crate::otlp::Receiver>,
}

/// The controllers serving a set of shards.
struct Serving {
    shards: BTreeSet<u32>,
    stop: watch::Sender<bool>,
    /// Aborted when dropped: nothing outlives the set it served.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Serving {
    /// Starts the controllers for the namespaces of `shards`, with a context of their own:
    /// nothing cached or remembered for other shards carries over.
    fn start(sharded: &Sharded, scope: &Scope, filter: crate::shards::ShardFilter) -> Self {
        let shards = filter.owned().clone();
        // Said before anything serves them, as "stopped" is said after: the log brackets
        // every moment the shards were served.
        tracing::info!(?shards, "serving shards");
        let ctx = Arc::new(
            Context::new(
                sharded.client.clone(),
                sharded.settings.clone(),
                Arc::clone(&sharded.metrics),
            )
            .with_shards(filter),
        );
        sharded.receiver.set_context(Some(Arc::clone(&ctx)));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(controllers::run_until_shutdown(
            ctx,
            scope.clone(),
            Arc::clone(&sharded.readiness),
            stopped,
        ));
        Self {
            shards,
            stop,
            task: Some(task),
        }
    }

    /// Stops taking work and lets in-flight passes finish until `until`, then drops them
    /// (each pass is idempotent, as after a kill).
    async fn stop(mut self, until: Instant) {
        let _ = self.stop.send(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout_at(until, &mut task).await.is_err()
        {
            task.abort();
            let _ = task.await;
        }
        tracing::info!(shards = ?self.shards, "stopped serving shards");
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Serves the shards whose Leases this replica holds, starting the controllers again
/// whenever that set changes, until `shutdown`; then releases every Lease. A shard is
/// served only while its Lease is confirmed, and given up (released) only once its
/// controllers have stopped.
async fn serve_shards(
    sharded: Sharded,
    leasing: crate::shards::leases::ShardLeasing,
    options: &RunOptions,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    use crate::shards::leases::{RENEW_INTERVAL, STOP_MARGIN, ShardLeases};
    if leasing.lease_duration <= STOP_MARGIN + RENEW_INTERVAL {
        anyhow::bail!(
            "sharding: the lease duration ({:?}) must be longer than {:?}",
            leasing.lease_duration,
            STOP_MARGIN + RENEW_INTERVAL
        );
    }
    let shards = leasing.shards;
    let api: Api<Lease> = Api::namespaced(sharded.client.clone(), &leasing.namespace);
    let owner = service_account_owner(&leasing.namespace);
    tracing::info!(
        shards = shards.count(),
        namespace = %leasing.namespace,
        identity = %leasing.identity,
        "sharding: taking this replica's share of the shard Leases"
    );
    let mut leases = ShardLeases::new(api, leasing, owner);
    let mut serving: Option<Serving> = None;
    // Ready while serving nothing, like a standby.
    sharded.readiness.set_standby(true);
    let mut tick = tokio::time::interval(RENEW_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let broken = loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => break None,
            broken = watches_broken(&sharded.readiness.watches, options.watch_failure_timeout) => {
                break Some(broken);
            }
        }
        // A look that outlasts the first deadline is cut short: what it did not confirm lapses.
        let looked = Instant::now();
        let look = match leases.deadline() {
            Some(deadline) => tokio::time::timeout_at(deadline, leases.look())
                .await
                .unwrap_or_default(),
            None => leases.look().await,
        };
        let took = looked.elapsed();
        if took > RENEW_INTERVAL {
            tracing::warn!(
                took = ?took,
                "a look at the shard Leases took longer than the renewal interval; the API server is slow"
            );
        }
        leases.lapse(Instant::now());
        let held = leases.held();
        let wanted: BTreeSet<u32> = held
            .iter()
            .filter(|shard| !look.release.contains(shard))
            .copied()
            .collect();
        let served = serving
            .as_ref()
            .map(|s| s.shards.clone())
            .unwrap_or_default();
        if served != wanted {
            if let Some(old) = serving.take() {
                // Reports wait for the new set (the receiver answers that it is unavailable,
                // which exporters retry) rather than land in a shard being given up.
                sharded.receiver.set_context(None);
                // A shard no longer held stops at once; otherwise passes in flight get a
                // renewal interval to finish (each pass is idempotent, as after a kill).
                // Waiting longer would stop renewing the shards this replica keeps: a stop
                // that lasted until their deadline made them lapse, unserved until taken back.
                let until = if old.shards.is_subset(&held) {
                    let grace = Instant::now() + RENEW_INTERVAL;
                    leases
                        .deadline()
                        .map_or(grace, |deadline| deadline.min(grace))
                } else {
                    Instant::now()
                };
                old.stop(until).await;
            }
            if wanted.is_empty() {
                sharded.receiver.set_context(None);
            } else {
                let filter = crate::shards::ShardFilter::new(shards, wanted);
                serving = Some(Serving::start(&sharded, &options.scope, filter));
            }
            sharded.readiness.set_standby(serving.is_none());
            sharded.metrics.set_leader(serving.is_some());
            sharded
                .metrics
                .set_shards_served(serving.as_ref().map_or(0, |serving| serving.shards.len()));
        }
        leases.release(&look.release).await;
    };
    if let Some(old) = serving.take() {
        let until = match broken {
            Some(_) => Instant::now(),
            None => leases.deadline().unwrap_or_else(Instant::now),
        };
        old.stop(until).await;
    }
    sharded.receiver.set_context(None);
    sharded.metrics.set_leader(false);
    sharded.metrics.set_shards_served(0);
    leases.release_all().await;
    if let Some(broken) = broken {
        anyhow::bail!(
            "{broken}; stopped reconciling and released the shards so that the other replicas \
             take them over (--watch-failure-seconds)"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// Returns the first kind whose watches have been failing for `timeout`; never when
/// there is no timeout.
async fn watches_broken(
    watches: &controllers::watch_health::WatchHealth,
    timeout: Option<Duration>,
) -> controllers::watch_health::BrokenWatch {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Some(broken) = watches.broken(timeout, std::time::Instant::now()).pop() {
            return broken;
        }
    }
}

/// Returns why the held Lease is lost, when it is; never without one.
async fn lost(lease: Option<&mut HeldLease>) -> &'static str {
    match lease {
        Some(lease) => lease.lost().await,
        None => std::future::pending().await,
    }
}

/// How often the leader reads its Lease back to confirm a renewal, and how long before the
/// Lease could have expired it stops acting when no renewal was confirmed.
const RENEWAL_CHECK: Duration = Duration::from_secs(1);
const RENEWAL_MARGIN: Duration = Duration::from_secs(1);

/// A held Lease, renewed in the background until released.
struct HeldLease {
    channel: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
    leases: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    duration: Duration,
    /// When this replica learned the Lease was its own, just after acquiring it.
    acquired: Instant,
}

impl HeldLease {
    /// Returns when another replica holds the Lease, the renewal task has ended, or no
    /// renewal could be confirmed in time; says which.
    async fn lost(&mut self) -> &'static str {
        tokio::select! {
            _ = self.channel.wait_for(|leader| !*leader) => "another replica holds it",
            why = lapsed(&self.leases, &self.name, &self.identity, self.duration, self.acquired) => why,
        }
    }
}

/// Reads the Lease back every [`RENEWAL_CHECK`] and returns once it is not ours (`identity`),
/// or once it may have expired without a renewal this replica saw: a leader cut off from the
/// API server must stop acting before a standby can take over, not when it notices the
/// standby (client-go's renew deadline). A renewal seen at one read happened after the read
/// before it, so the Lease is valid at least until that earlier read plus its `duration`.
async fn lapsed(
    leases: &Api<Lease>,
    name: &str,
    identity: &str,
    duration: Duration,
    acquired: Instant,
) -> &'static str {
    let mut valid_until = acquired + duration;
    let mut last_renewal = None;
    let mut previous_read = acquired;
    loop {
        let deadline = valid_until
            .checked_sub(RENEWAL_MARGIN)
            .unwrap_or(valid_until);
        let read_at = Instant::now();
        if read_at >= deadline {
            return "no renewal confirmed before it could expire";
        }
        // A slow answer is still an answer, as long as it comes before the deadline.
        let read = tokio::time::timeout_at(deadline, leases.get(name)).await;
        if let Ok(Ok(lease)) = read {
            let spec = lease.spec.unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(identity) {
                return "another replica holds it";
            }
            if spec.renew_time != last_renewal {
                if last_renewal.is_some() {
                    valid_until = previous_read + duration;
                }
                last_renewal = spec.renew_time;
            }
        }
        previous_read = read_at;
        tokio::time::sleep_until((read_at + RENEWAL_CHECK).min(deadline)).await;
    }
}

impl HeldLease {
    /// Releases the Lease and says so only when it was: a release that failed (for example
    /// once an uninstall has removed the Lease's Role) leaves the Lease to expire.
    async fn release(self) {
        // Closing the channel makes the renewal task release the Lease and return.
        drop(self.channel);
        let failed = match self.task.await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(Chain(&e).to_string()),
            Err(e) => Some(Chain(&e).to_string()),
        };
        match failed {
            None => {
                tracing::info!(lease = %self.name, namespace = %self.namespace, "Lease released");
            }
            Some(error) => tracing::warn!(
                lease = %self.name,
                namespace = %self.namespace,
                %error,
                expires_in = ?self.duration,
                "could not release the Lease; a standby takes over once it expires"
            ),
        }
    }
}

/// Waits until this replica holds the Lease, or returns None when shutdown comes first.
async fn acquire_lease(
    client: &Client,
    election: &LeaderElection,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<HeldLease>> {
    let duration = election.lease_duration.as_secs();
    let grace = election.renew_before_expiry.as_secs();
    // The lease manager panics on these; say what is wrong instead.
    if grace == 0 || grace >= duration {
        anyhow::bail!(
            "leader election: renew_before_expiry ({grace}s) must be at least 1s and shorter than lease_duration ({duration}s)"
        );
    }
    // Known here, so that the renewal check can tell our holding from another's.
    let identity = election
        .identity
        .clone()
        .unwrap_or_else(|| format!("agentic-operator-{:016x}", rand::random::<u64>()));
    let name = election.lease_name.as_str();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    if let Some(owner) = service_account_owner(&election.namespace) {
        own_lease(&leases, name, owner).await.with_context(|| {
            format!(
                "making this pod's ServiceAccount the owner of the Lease {}/{name}",
                election.namespace
            )
        })?;
    }
    let builder = LeaseManagerBuilder::new(client.clone(), name)
        .with_namespace(election.namespace.clone())
        .with_duration(duration)
        .with_grace(grace)
        .with_identity(identity.clone());
    let manager = builder
        .build()
        .await
        .with_context(|| format!("creating the Lease {}/{name}", election.namespace))?;
    let (mut channel, task) = manager.watch().await;
    tracing::info!(lease = name, namespace = %election.namespace, "waiting for leadership");
    loop {
        if *channel.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = channel.changed() => changed.context("lease manager stopped")?,
            _ = stop.wait_for(|s| *s) => return Ok(None),
        }
    }
    let acquired = Instant::now();
    tracing::info!(lease = name, %identity, "became leader");
    Ok(Some(HeldLease {
        channel,
        task,
        leases,
        namespace: election.namespace.clone(),
        name: name.to_owned(),
        identity,
        duration: election.lease_duration,
        acquired,
    }))
}

/// Where a pod's ServiceAccount token is mounted.
const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The ServiceAccount this pod runs as, from its token, as the owner of a Lease in
/// `namespace`: deleting the installation (and with it the ServiceAccount) then deletes the
/// Lease through the garbage collector, whatever order the installation's objects go in and
/// even when the leader can no longer release it. None outside a pod, or when the Lease is in
/// another namespace (an owner must be in the dependent's namespace, or the collector deletes
/// the dependent at once).
fn service_account_owner(namespace: &str) -> Option<OwnerReference> {
    let token = std::fs::read_to_string(SERVICE_ACCOUNT_TOKEN).ok()?;
    service_account_of(&token, namespace)
}

/// The ServiceAccount a token was issued to (its `kubernetes.io` claims), when it is in
/// `namespace`. The token is not verified: the API server does that on every request.
fn service_account_of(token: &str, namespace: &str) -> Option<OwnerReference> {
    use base64::Engine as _;
    let payload = token.trim().split('.').nth(1)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&claims).ok()?;
    let issued = &claims["kubernetes.io"];
    if issued["namespace"].as_str() != Some(namespace) {
        return None;
    }
    let account = &issued["serviceaccount"];
    Some(OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ServiceAccount".to_owned(),
        name: account["name"].as_str()?.to_owned(),
        uid: account["uid"].as_str()?.to_owned(),
        ..OwnerReference::default()
    })
}

/// Creates the Lease owned by `owner`, or makes `owner` the owner of an existing Lease that
/// has none (one an older operator created).
async fn own_lease(leases: &Api<Lease>, name: &str, owner: OwnerReference) -> kube::Result<()> {
    match leases.get_opt(name).await? {
        None => {
            let lease = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.to_owned()),
                    owner_references: Some(vec![owner]),
                    ..Default::default()
                },
                spec: None,
            };
            match leases
                .create(&kube::api::PostParams::default(), &lease)
                .await
            {
                // Another replica created it first, with the same owner.
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                created => created.map(drop),
            }
        }
        Some(lease)
            if lease
                .metadata
                .owner_references
                .as_ref()
                .is_none_or(std::vec::Vec::is_empty) =>
        {
            let patch = serde_json::json!({ "metadata": { "ownerReferences": [owner] } });
            leases
                .patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map(drop)
        }
        Some(_) => Ok(()),
    }
}

/// Resolves at SIGTERM or SIGINT.
pub(crate) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The namespace of the cluster-wide default skills, when the operator watches it: watching
/// some namespaces only, it has no permission elsewhere, so a default-skills namespace outside
/// them is left out (with a warning) rather than read and refused on every pass.
fn default_skills_namespace(options: &RunOptions) -> Option<String> {
    let namespace = options.default_skills_namespace.clone()?;
    match &options.scope {
        Scope::Namespaces(watched) if !watched.contains(&namespace) => {
            tracing::warn!(
                %namespace,
                "the default-skills namespace is not watched (--namespace); there are no cluster-wide default skills"
            );
            None
        }
        _ => Some(namespace),
    }
}

/// What skill prefetch does, when it is on: it runs the operator's image, so without
/// `--operator-image` it is off (with a warning).
fn prefetch_settings(options: &RunOptions) -> Option<agentic_core::prefetch::PrefetchSettings> {
    let prefetch = options.skill_prefetch.clone()?;
    let Some(image) = options.operator_image.clone() else {
        tracing::warn!("skill prefetch needs --operator-image, which its pods run; it is off");
        return None;
    };
    Some(agentic_core::prefetch::PrefetchSettings {
        nodes: prefetch.nodes,
        image,
        priority_class: prefetch.priority_class,
        per_agent: prefetch.per_agent,
        per_cluster: prefetch.per_cluster,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(scope: Scope, defaults: Option<&str>) -> RunOptions {
        RunOptions {
            scope,
            insecure_registries: Vec::new(),
            insecure_git_hosts: Vec::new(),
            sandbox_backend: BackendChoice::Pod,
            health_addr: ([127, 0, 0, 1], 0).into(),
            metrics_addr: ([127, 0, 0, 1], 0).into(),
            secure_metrics: None,
            leader_election: None,
            shards: None,
            tag_refresh_interval: Duration::from_secs(300),
            run_defaults: RunDefaults::default(),
            reconcile_concurrency: crate::context::DEFAULT_RECONCILE_CONCURRENCY,
            default_skills_namespace: defaults.map(str::to_string),
            operator_image: None,
            credential_proxy: agentic_core::sandbox::CredentialProxyMode::default(),
            skill_prefetch: None,
            watch_failure_timeout: None,
            trace_collector: None,
            otlp: None,
        }
    }

    /// A token as the API server issues them, unsigned: only the claims matter here.
    fn token(claims: serde_json::Value) -> String {
        use base64::Engine as _;
        let encode = |value: &serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        let header = serde_json::json!({ "alg": "ES256" });
        format!("{}.{}.signature", encode(&header), encode(&claims))
    }

    /// The trust policies are watched like every kind: a cluster without their CRDs is
    /// named in `/readyz`, not left waiting on watches that never list.
    #[test]
    fn the_required_crds_are_every_crd_the_operator_installs_trust_policies_included() {
        let required = required_crds();
        for crd in agentic_api::crds()
            .into_iter()
            .chain(agentic_api::trust_crds())
        {
            let name = crd.metadata.name.clone().unwrap_or_default();
            assert!(
                required.iter().any(|(_, required)| *required == name),
                "{name} in {required:?}"
            );
        }
        let trust = required
            .iter()
            .find(|(_, crd)| crd.starts_with("clusterskilltrustpolicies."))
            .map(|(group_version, _)| group_version.as_str());
        assert_eq!(trust, Some("trust.agentic-operator.io/v1alpha1"));
    }

    #[test]
    fn the_lease_owner_is_the_tokens_service_account_in_the_leases_namespace() {
        let claims = serde_json::json!({
            "aud": ["https://kubernetes.default.svc"],
            "kubernetes.io": {
                "namespace": "operators",
                "pod": { "name": "agentic-operator-7d9f-abcde", "uid": "pod-uid" },
                "serviceaccount": { "name": "agentic-operator", "uid": "sa-uid" },
            },
        });
        let owner = service_account_of(&format!("{}\n", token(claims.clone())), "operators")
            .expect("an owner from the token");
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str()),
            ("v1", "ServiceAccount")
        );
        assert_eq!(
            (owner.name.as_str(), owner.uid.as_str()),
            ("agentic-operator", "sa-uid")
        );
        // The collector would delete a Lease whose owner is in another namespace at once.
        assert_eq!(service_account_of(&token(claims), "elsewhere"), None);
        assert_eq!(service_account_of("not a token", "operators"), None);
        assert_eq!(
            service_account_of(&token(serde_json::json!({})), "operators"),
            None
        );
    }

    #[test]
    fn cluster_defaults_come_only_from_a_watched_namespace() {
        let watched = |list: &[&str]| {
            Scope::Namespaces(list.iter().map(std::string::ToString::to_string).collect())
        };
        assert_eq!(
            default_skills_namespace(&options(Scope::All, Some("platform"))).as_deref(),
            Some("platform")
        );
        assert_eq!(
            default_skills_namespace(&options(watched(&["team", "platform"]), Some("platform")))
                .as_deref(),
            Some("platform")
        );
        assert_eq!(
            default_skills_namespace(&options(watched(&["team"]), Some("platform"))),
            None
        );
        assert_eq!(default_skills_namespace(&options(Scope::All, None)), None);
    }
}
