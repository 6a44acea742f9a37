//! `agentic-testenv up`: a control plane and registry in the foreground, for local runs.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use agentic_testenv::{BIN_DIR_ENV, TestEnv, TestEnvOptions, push_operator_image};
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// A real kube-apiserver, etcd, OCI registry and (optionally) agent-sandbox controller and
/// node (containerd, kubelet, kube-scheduler) on loopback, built by `make testenv`.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start everything and run until SIGINT or SIGTERM.
    ///
    /// Writes DIR/kubeconfig (cluster admin) and DIR/registry (host:port), then creates
    /// DIR/ready once everything answers; DIR/ready is removed again on shutdown. With
    /// --with-node, also DIR/images.json (the node's test images, pinned by digest) and
    /// DIR/node-ready once the node is Ready. With --with-workloads, also DIR/pod-registry
    /// (host:port, the registry as pods reach it); with --operator-image, DIR/operator-image
    /// (the pushed image, pinned by digest).
    Up {
        /// Where to write kubeconfig, registry and ready.
        #[arg(long)]
        dir: PathBuf,
        /// Also run the agent-sandbox controller.
        #[arg(long)]
        with_agent_sandbox: bool,
        /// Also run a node (containerd, runc, kubelet, kube-scheduler), so pods really run.
        /// Needs root.
        #[arg(long)]
        with_node: bool,
        /// Also run kube-controller-manager, give pods ServiceAccount tokens, and let pods
        /// on the node reach the API server (the `kubernetes` Service) and the registry, so
        /// that Deployments such as the operator's chart run. Implies --with-node.
        #[arg(long)]
        with_workloads: bool,
        /// Build an image of the operator from BINARY (a build of agentic-operator for this
        /// machine, with the shared libraries it links) and push it to the registry.
        #[arg(long, value_name = "BINARY")]
        operator_image: Option<PathBuf>,
        /// The directory of control-plane binaries printed by `make testenv`.
        #[arg(long, env = BIN_DIR_ENV)]
        bin_dir: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // kube-rs logs every failed request as an error, and the readiness polls fail until
    // the API server is up; our own messages say what went wrong.
    let default_filter = || EnvFilter::new("info,kube_client=off");
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter()))
        .init();
    match Cli::parse().command {
        Command::Up {
            dir,
            with_agent_sandbox,
            with_node,
            with_workloads,
            operator_image,
            bin_dir,
        } => {
            let options = TestEnvOptions {
                with_agent_sandbox,
                with_registry: true,
                with_node,
                with_workloads,
                bin_dir,
            };
            up(&dir, options, operator_image.as_deref()).await
        }
    }
}

async fn up(
    dir: &Path,
    options: TestEnvOptions,
    operator_binary: Option<&Path>,
) -> anyhow::Result<()> {
    let ready = dir.join("ready");
    let node_ready = dir.join("node-ready");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    remove_if_present(&ready)?;
    remove_if_present(&node_ready)?;
    // Listen before starting, so a signal during startup still shuts down cleanly.
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;

    tracing::info!(
        with_agent_sandbox = options.with_agent_sandbox,
        with_node = options.with_node,
        with_workloads = options.with_workloads,
        "starting etcd, kube-apiserver and a registry"
    );
    let env = tokio::select! {
        env = TestEnv::start(options) => env.context("starting the test environment")?,
        _ = interrupt.recv() => return interrupted("SIGINT"),
        _ = terminate.recv() => return interrupted("SIGTERM"),
    };

    let kubeconfig = dir.join("kubeconfig");
    std::fs::copy(env.kubeconfig_path(), &kubeconfig)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    let registry_file = dir.join("registry");
    let registry = env.registry_addr().unwrap_or_default();
    std::fs::write(&registry_file, &registry)
        .with_context(|| format!("writing {}", registry_file.display()))?;
    if let Some(images) = env.images() {
        let images_file = dir.join("images.json");
        let json = serde_json::to_string_pretty(images).context("encoding the image list")?;
        std::fs::write(&images_file, json)
            .with_context(|| format!("writing {}", images_file.display()))?;
        std::fs::write(&node_ready, "")
            .with_context(|| format!("writing {}", node_ready.display()))?;
    }
    if let Some(pod_registry) = env.pod_registry_addr() {
        let path = dir.join("pod-registry");
        std::fs::write(&path, pod_registry)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(binary) = operator_binary {
        let image = push_operator_image(&registry, binary)
            .await
            .with_context(|| format!("pushing an operator image of {}", binary.display()))?;
        let path = dir.join("operator-image");
        std::fs::write(&path, &image).with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(%image, "operator image pushed");
    }
    std::fs::write(&ready, "").with_context(|| format!("writing {}", ready.display()))?;
    tracing::info!(
        apiserver = env.apiserver_url(),
        %registry,
        kubeconfig = %kubeconfig.display(),
        logs = %env.work_dir().display(),
        node_logs = env.node_dir().map(|dir| dir.display().to_string()),
        "ready; stop with Ctrl-C"
    );

    let received = tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
    };
    tracing::info!(signal = received, "shutting down");
    remove_if_present(&ready)?;
    remove_if_present(&node_ready)?;
    drop(env);
    tracing::info!("stopped");
    Ok(())
}

fn interrupted(signal: &str) -> anyhow::Result<()> {
    // Dropping the half-started environment (by returning) stops what it had started.
    tracing::info!(signal, "interrupted during startup; stopped");
    Ok(())
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}
