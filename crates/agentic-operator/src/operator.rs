//! `agentic-operator run`: the controllers with their health, metrics, leader election and
//! graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentic_oci::RegistryOptions;
use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::context::{Context, SandboxBackend, Settings};
use crate::controllers::{self, Readiness, Scope};
use crate::metrics::Metrics;
use crate::server;

/// The Lease that replicas compete for when leader election is on.
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
    pub sandbox_backend: BackendChoice,
    pub health_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub leader_elect: bool,
    pub tag_refresh_interval: Duration,
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

/// Runs until SIGINT or SIGTERM, then stops taking work, lets in-flight reconciles finish and
/// releases the lease.
pub async fn run(options: RunOptions) -> anyhow::Result<()> {
    let client = Client::try_default()
        .await
        .context("loading the kubeconfig (in-cluster or KUBECONFIG)")?;
    let backend = resolve_backend(&client, options.sandbox_backend).await?;
    tracing::info!(?backend, scope = ?options.scope, "starting");

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing in-flight reconciles");
        let _ = stop_tx.send(true);
    });

    let metrics = Arc::new(Metrics::default());
    let readiness = Arc::new(Readiness::default());
    let health = server::spawn(
        options.health_addr,
        server::health_router(readiness.clone()),
        stop_rx.clone(),
    )
    .await
    .with_context(|| format!("binding --health-addr {}", options.health_addr))?;
    let metrics_at = server::spawn(
        options.metrics_addr,
        server::metrics_router(metrics.clone()),
        stop_rx.clone(),
    )
    .await
    .with_context(|| format!("binding --metrics-addr {}", options.metrics_addr))?;
    tracing::info!(%health, metrics = %metrics_at, "serving probes and metrics");

    let lease = if options.leader_elect {
        match acquire_lease(&client, stop_rx.clone()).await? {
            Some(lease) => Some(lease),
            None => return Ok(()),
        }
    } else {
        None
    };

    let settings = Settings {
        registry: RegistryOptions {
            insecure_registries: options.insecure_registries.clone(),
            ..RegistryOptions::default()
        },
        sandbox_backend: backend,
        tag_refresh_interval: options.tag_refresh_interval,
    };
    let ctx = Arc::new(Context::new(client, settings, metrics));
    controllers::run(ctx, options.scope, readiness, stop_rx).await;

    if let Some(lease) = lease {
        lease.release().await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// A held Lease, renewed in the background until released.
struct HeldLease {
    channel: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

impl HeldLease {
    async fn release(self) {
        drop(self.channel);
        match self.task.await {
            Ok(Ok(manager)) => {
                if let Err(e) = manager.release().await {
                    tracing::warn!(error = %e, "releasing the lease failed");
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "lease manager failed"),
            Err(e) => tracing::warn!(error = %e, "lease task failed"),
        }
    }
}

/// Waits until this replica holds the Lease, or returns None when shutdown comes first.
async fn acquire_lease(
    client: &Client,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<HeldLease>> {
    let namespace = std::env::var("POD_NAMESPACE")
        .context("--leader-elect needs POD_NAMESPACE (the namespace of the Lease)")?;
    let mut builder = LeaseManagerBuilder::new(client.clone(), LEASE_NAME)
        .with_namespace(namespace)
        .with_duration(15)
        .with_grace(5);
    if let Ok(pod) = std::env::var("POD_NAME") {
        builder = builder.with_identity(pod);
    }
    let manager = builder
        .build()
        .await
        .context("creating the lease manager")?;
    let (mut channel, task) = manager.watch().await;
    tracing::info!(lease = LEASE_NAME, "waiting for leadership");
    loop {
        if *channel.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = channel.changed() => changed.context("lease manager stopped")?,
            _ = stop.wait_for(|s| *s) => return Ok(None),
        }
    }
    tracing::info!(lease = LEASE_NAME, "became leader");
    Ok(Some(HeldLease { channel, task }))
}

async fn wait_for_signal() {
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
