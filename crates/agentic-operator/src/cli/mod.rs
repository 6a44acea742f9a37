//! The command line: `run`, `crd`, `skill validate` and `skill push`.

mod skill;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::controllers::Scope;
use crate::operator::{BackendChoice, LeaderElection, RunOptions};

/// Kubernetes operator for AI coding agents and their skills (konveyor.io/v1alpha1).
#[derive(Debug, Parser)]
#[command(name = "agentic-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controllers against the cluster of the current kubeconfig (or in-cluster).
    Run(RunArgs),
    /// Print every CustomResourceDefinition as multi-document YAML.
    Crd,
    /// Validate and publish skills.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Namespace to watch; repeat for several. Default: all namespaces.
    #[arg(long = "namespace", env = "AGENTIC_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,

    /// Registry (HOST:PORT) to reach over plain HTTP; repeat for several.
    #[arg(
        long = "insecure-registry",
        env = "AGENTIC_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,

    /// What runs a sandbox: an agent-sandbox Sandbox, a Pod, or auto (Sandbox when its CRD
    /// exists).
    #[arg(
        long,
        env = "AGENTIC_SANDBOX_BACKEND",
        value_enum,
        default_value = "auto"
    )]
    pub sandbox_backend: BackendChoice,

    /// Address of /healthz and /readyz.
    #[arg(long, env = "AGENTIC_HEALTH_ADDR", default_value = "0.0.0.0:8081")]
    pub health_addr: SocketAddr,

    /// Address of /metrics.
    #[arg(long, env = "AGENTIC_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// Hold the Lease `agentic-operator-leader` in $POD_NAMESPACE before reconciling, so only
    /// one replica acts; $POD_NAME names this replica in the Lease.
    #[arg(long, env = "AGENTIC_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Log format; the level comes from RUST_LOG (default info).
    #[arg(long, env = "AGENTIC_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Seconds between re-resolving image tags, to notice a pushed new digest.
    #[arg(long, env = "AGENTIC_TAG_REFRESH_SECONDS", default_value_t = 300)]
    pub tag_refresh_seconds: u64,
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Crd => print_crds(),
        Command::Skill(command) => skill::run(command),
        Command::Run(args) => run_operator(args),
    }
}

fn run_operator(args: RunArgs) -> ExitCode {
    init_logging(args.log_format);
    let leader_election = if args.leader_elect {
        let Ok(namespace) = std::env::var("POD_NAMESPACE") else {
            tracing::error!("--leader-elect needs POD_NAMESPACE (the namespace of the Lease)");
            return ExitCode::FAILURE;
        };
        Some(LeaderElection::new(
            namespace,
            std::env::var("POD_NAME").ok(),
        ))
    } else {
        None
    };
    let options = RunOptions {
        scope: if args.namespaces.is_empty() {
            Scope::All
        } else {
            Scope::Namespaces(args.namespaces)
        },
        insecure_registries: args.insecure_registries,
        sandbox_backend: args.sandbox_backend,
        health_addr: args.health_addr,
        metrics_addr: args.metrics_addr,
        leader_election,
        tag_refresh_interval: Duration::from_secs(args.tag_refresh_seconds.max(10)),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(crate::operator::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn print_crds() -> ExitCode {
    match agentic_api::crds_yaml() {
        Ok(yaml) => match std::io::stdout().write_all(yaml.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing CRDs: {e}");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("error: serializing CRDs: {e}");
            ExitCode::from(2)
        }
    }
}
