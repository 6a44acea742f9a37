//! The command line: `run`, `crd`, `skill validate|push|inspect|pull`,
//! `agentrun list|start|logs|cancel`, and the sidecar's hidden `credential-proxy`.

mod agentrun;
mod skill;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use agentic_core::sandbox::{CredentialProxyMode, TtlDefaults};

use crate::context::RunDefaults;
use crate::controllers::Scope;
use crate::error::Chain;
use crate::operator::{BackendChoice, LeaderElection, RunOptions, SkillPrefetch};
use crate::server::SecureMetrics;
use crate::shards::leases::ShardLeasing;

/// Kubernetes operator for AI coding agents and their skills (konveyor.io/v1alpha1).
#[derive(Debug, Parser)]
#[command(name = "agentic-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controllers against the current kubeconfig's cluster
    ///
    /// The cluster of the current kubeconfig context, or, in a pod, the cluster the pod runs
    /// in. Runs until SIGTERM or SIGINT, then finishes the passes in flight.
    Run(Box<RunArgs>),
    /// Print every CustomResourceDefinition as multi-document YAML.
    Crd(CrdArgs),
    /// Validate, push, inspect, pull and verify skill images.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// List, start, follow and cancel AgentRuns
    ///
    /// Against the cluster of the current kubeconfig context, in its namespace unless -n
    /// names another.
    Agentrun(agentrun::AgentRunArgs),
    /// Forward a sandbox's model requests to its Gateway with the key
    ///
    /// What the `credential-proxy` sidecar of a sandbox runs (docs/pod-contract.md): it
    /// listens on loopback, adds the key from --key-file (read at every request, so a rotated
    /// Secret is used without a restart) and forwards to --upstream only, streaming answers.
    #[command(hide = true)]
    CredentialProxy(CredentialProxyArgs),
}

#[derive(Debug, clap::Args)]
pub struct CredentialProxyArgs {
    /// Loopback address to listen on.
    #[arg(long, default_value = "127.0.0.1:4100")]
    pub listen: SocketAddr,
    /// The Gateway's spec.endpoint: every request goes there, and nowhere else.
    #[arg(long)]
    pub upstream: String,
    /// How the key goes into a request: `Authorization: Bearer`, or Anthropic's headers.
    #[arg(long, value_enum)]
    pub auth: ProxyAuth,
    /// The file holding the key (the Gateway's Secret, mounted).
    #[arg(long)]
    pub key_file: PathBuf,
    /// The largest request body forwarded, in bytes.
    #[arg(long, default_value_t = crate::credential_proxy::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// Format of the log lines.
    #[arg(long, value_enum, default_value = "json")]
    pub log_format: LogFormat,
}

/// `credential-proxy --auth` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProxyAuth {
    Bearer,
    Anthropic,
}

#[derive(Debug, clap::Args)]
pub struct CrdArgs {
    /// Print only the CRDs of this API group: Konveyor's kinds, or our trust policies.
    #[arg(long, value_enum)]
    pub group: Option<CrdGroup>,
}

/// The API groups whose CRDs the operator ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CrdGroup {
    #[value(name = "konveyor.io")]
    Konveyor,
    #[value(name = "trust.agentic-operator.io")]
    Trust,
}

/// `--credential-proxy`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CredentialProxyArg {
    Required,
    Preferred,
    Off,
}

impl From<CredentialProxyArg> for CredentialProxyMode {
    fn from(arg: CredentialProxyArg) -> Self {
        match arg {
            CredentialProxyArg::Required => CredentialProxyMode::Required,
            CredentialProxyArg::Preferred => CredentialProxyMode::Preferred,
            CredentialProxyArg::Off => CredentialProxyMode::Off,
        }
    }
}

/// `--shard-watch`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShardWatch {
    /// Namespaces placed by SHA-256; a replica watching every namespace drops the other
    /// shards' objects itself.
    Client,
    /// Namespaces placed by the API server's hash (64-bit FNV-1a), which filters each
    /// replica's watches to its shards (KEP-5866); the replica filters itself where the API
    /// server does not.
    Server,
}

impl From<ShardWatch> for agentic_core::shard::ShardHash {
    fn from(watch: ShardWatch) -> Self {
        match watch {
            ShardWatch::Client => Self::Sha256,
            ShardWatch::Server => Self::Fnv1a,
        }
    }
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

    /// Git host (HOST or HOST:PORT) to reach over plain http:// for SkillCard sources;
    /// repeat for several. git:// is always allowed, https:// always verified.
    #[arg(
        long = "insecure-git-host",
        env = "AGENTIC_INSECURE_GIT_HOSTS",
        value_delimiter = ','
    )]
    pub insecure_git_hosts: Vec<String>,

    /// What runs a sandbox: an agent-sandbox Sandbox, a Pod, or auto (Sandbox when its CRD
    /// exists).
    #[arg(
        long,
        env = "AGENTIC_SANDBOX_BACKEND",
        value_enum,
        default_value = "auto"
    )]
    pub sandbox_backend: BackendChoice,

    /// Address of /healthz and /readyz: IP:PORT, or :PORT for all interfaces.
    #[arg(
        long,
        env = "AGENTIC_HEALTH_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:8081",
        value_parser = listen_addr
    )]
    pub health_addr: SocketAddr,

    /// Address of /metrics: IP:PORT, or :PORT for all interfaces.
    #[arg(
        long,
        env = "AGENTIC_METRICS_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:8080",
        value_parser = listen_addr
    )]
    pub metrics_addr: SocketAddr,

    /// Serve /metrics over HTTPS, only to callers whose bearer token the API server
    /// authenticates (TokenReview) and allows to get the non-resource URL /metrics
    /// (SubjectAccessReview); 401 and 403 otherwise. Needs RBAC to create both reviews.
    #[arg(long, env = "AGENTIC_METRICS_SECURE")]
    pub metrics_secure: bool,

    /// PEM certificate chain for /metrics with --metrics-secure; without it (and
    /// --metrics-tls-key) a self-signed certificate is generated at start.
    #[arg(
        long,
        env = "AGENTIC_METRICS_TLS_CERT",
        value_name = "FILE",
        requires_all = ["metrics_secure", "metrics_tls_key"]
    )]
    pub metrics_tls_cert: Option<PathBuf>,

    /// PEM private key of --metrics-tls-cert.
    #[arg(
        long,
        env = "AGENTIC_METRICS_TLS_KEY",
        value_name = "FILE",
        requires_all = ["metrics_secure", "metrics_tls_cert"]
    )]
    pub metrics_tls_key: Option<PathBuf>,

    /// Hold a Lease in $POD_NAMESPACE before reconciling, so only one replica acts; $POD_NAME
    /// names this replica in the Lease.
    #[arg(long, env = "AGENTIC_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the leader-election Lease; installations sharing a namespace need their own.
    #[arg(
        long,
        env = "AGENTIC_LEADER_ELECTION_LEASE",
        value_name = "NAME",
        default_value = crate::operator::LEASE_NAME,
        value_parser = lease_name
    )]
    pub leader_election_lease: String,

    /// Split the namespaces into this many shards, each served by one replica: the replicas
    /// share them out through Leases in $POD_NAMESPACE (`<leader-election-lease>-shard-<i>`),
    /// and take over a stopped replica's within the lease duration (15 s). 1 keeps one
    /// replica serving every namespace (with --leader-elect, the others on standby). Every
    /// replica must be given the same number.
    #[arg(long, env = "AGENTIC_SHARDS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub shards: u32,

    /// With --shards over 1 and every namespace watched: `server` asks the API server for
    /// this replica's shards' objects only (KEP-5866 sharded list and watch, alpha in
    /// Kubernetes 1.36 behind its ShardedListAndWatch feature gate), instead of receiving
    /// every object and dropping the other shards'. It places namespaces by the API server's
    /// hash, so every replica must be given the same value, and changing it moves namespaces
    /// between replicas. Where the API server does not filter, the replica does.
    #[arg(
        long,
        env = "AGENTIC_SHARD_WATCH",
        value_enum,
        default_value = "client"
    )]
    pub shard_watch: ShardWatch,

    /// Seconds the operator's watches may keep failing (the API server refuses or does not
    /// answer them) before the operator stops reconciling and exits, so that its restart, or
    /// the standby replica, takes over; 0 never. /readyz reports failing watches after 15 s.
    #[arg(long, env = "AGENTIC_WATCH_FAILURE_SECONDS", default_value_t = 120)]
    pub watch_failure_seconds: u64,

    /// Log format; the level comes from RUST_LOG (default info).
    #[arg(long, env = "AGENTIC_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Namespace whose SkillCollections labelled `konveyor.io/default-skills: "true"` apply
    /// to every Agent of the cluster (collections with the label in an Agent's own namespace
    /// always apply to it). Unset: no cluster-wide defaults.
    #[arg(long, env = "AGENTIC_DEFAULT_SKILLS_NAMESPACE")]
    pub default_skills_namespace: Option<String>,

    /// The operator's own image (REGISTRY/REPOSITORY:TAG or @DIGEST): runs with git skills
    /// fetch them in an init container from it. Unset: such runs wait Pending with reason
    /// OperatorImageNotSet.
    #[arg(long, env = "AGENTIC_OPERATOR_IMAGE", value_name = "IMAGE")]
    pub operator_image: Option<String>,

    /// Whether runs' model keys go through a credential proxy beside the agent (a sidecar from
    /// --operator-image) instead of into the agent's environment: required (a run whose key
    /// the proxy cannot serve does not start), preferred (such a run gets the key as before
    /// and says so in its CredentialIsolation condition) or off.
    #[arg(
        long,
        env = "AGENTIC_CREDENTIAL_PROXY",
        value_enum,
        default_value = "preferred"
    )]
    pub credential_proxy: CredentialProxyArg,

    /// Have the kubelets pull a Ready Agent's skill images before its first run: onto every
    /// node its runs can land on (`all`), onto those of them a label selector picks
    /// (`pool=agents`, `tier in (a,b)`, `!gpu`), or not at all (`off`). Its pods run the
    /// --operator-image; without one it is off.
    #[arg(
        long,
        env = "AGENTIC_SKILL_PREFETCH",
        value_name = "all|off|SELECTOR",
        default_value = "all",
        value_parser = skill_prefetch
    )]
    pub skill_prefetch: SkillPrefetchNodes,

    /// The PriorityClass of the prefetch pods (one of low priority, so runs go first; the
    /// operator creates none). Unset: the cluster's default priority.
    #[arg(
        long,
        env = "AGENTIC_SKILL_PREFETCH_PRIORITY_CLASS",
        value_name = "NAME"
    )]
    pub skill_prefetch_priority_class: Option<String>,

    /// The most nodes one Agent's skill images are pulled onto at once.
    #[arg(long, env = "AGENTIC_SKILL_PREFETCH_NODES_PER_AGENT", default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    pub skill_prefetch_nodes_per_agent: u16,

    /// The most prefetch pods pulling at once in the watched namespaces (in each listed
    /// --namespace).
    #[arg(long, env = "AGENTIC_SKILL_PREFETCH_MAX_PODS", default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..))]
    pub skill_prefetch_max_pods: u16,

    /// The most objects of one kind reconciled at once; SkillCards, whose registry reads are
    /// bounded per registry, are not bounded by it. 0 for no bound.
    #[arg(
        long,
        env = "AGENTIC_RECONCILE_CONCURRENCY",
        default_value_t = crate::context::DEFAULT_RECONCILE_CONCURRENCY
    )]
    pub reconcile_concurrency: u16,

    /// Seconds between re-resolving image tags and git branches and tags, to notice a pushed
    /// new digest or commit.
    #[arg(long, env = "AGENTIC_TAG_REFRESH_SECONDS", default_value_t = 300)]
    pub tag_refresh_seconds: u64,

    /// Seconds a run's agent container may take to start, from the creation of its sandbox,
    /// for runs without `spec.startupDeadlineSeconds`; 0 for no limit.
    #[arg(
        long,
        env = "AGENTIC_STARTUP_DEADLINE_SECONDS",
        default_value_t = crate::context::DEFAULT_STARTUP_DEADLINE_SECONDS
    )]
    pub startup_deadline_seconds: u64,

    /// Seconds to keep a Succeeded run without `spec.ttlSecondsAfterFinished` before deleting
    /// it, from its completion time. Default: keep it.
    #[arg(long, env = "AGENTIC_TTL_AFTER_SUCCEEDED", value_name = "SECONDS")]
    pub ttl_after_succeeded: Option<u64>,

    /// Seconds to keep a Failed run without `spec.ttlSecondsAfterFinished` before deleting
    /// it, from its completion time. Default: keep it.
    #[arg(long, env = "AGENTIC_TTL_AFTER_FAILED", value_name = "SECONDS")]
    pub ttl_after_failed: Option<u64>,

    /// The most runs active at once in one namespace, whatever their Agent; more wait
    /// `Pending`/`Queued` and start in creation order. 0 for no limit.
    #[arg(
        long,
        env = "AGENTIC_MAX_CONCURRENT_RUNS_PER_NAMESPACE",
        default_value_t = 0
    )]
    pub max_concurrent_runs_per_namespace: u32,

    /// Seconds between sweeps for sandboxes, Pods, ConfigMaps and Secrets labelled for an
    /// AgentRun that no longer exists, which are deleted (objects another controller owns
    /// are never touched); the first sweep runs at start. 0 turns the sweep off.
    #[arg(
        long,
        env = "AGENTIC_ORPHAN_SWEEP_SECONDS",
        value_name = "SECONDS",
        default_value_t = crate::context::DEFAULT_ORPHAN_SWEEP_INTERVAL.as_secs()
    )]
    pub orphan_sweep_seconds: u64,

    /// The user's OpenTelemetry collector, as an OTLP/HTTP base URL (`http://HOST:4318`;
    /// requests go to `<URL>/v1/traces`, protobuf): each run's trace, the operator's spans
    /// and its agent's, is exported there. Unset: no trace leaves the operator.
    #[arg(long, env = "AGENTIC_TRACE_COLLECTOR", value_name = "URL")]
    pub trace_collector: Option<String>,

    /// Address of the OTLP/HTTP trace receiver (POST /v1/traces), where runs' agents report
    /// the skills they load: IP:PORT, or :PORT for all interfaces. Served only with
    /// --otlp-advertised-address.
    #[arg(
        long,
        env = "AGENTIC_OTLP_BIND_ADDRESS",
        value_name = "ADDR",
        default_value = "0.0.0.0:4318",
        value_parser = listen_addr
    )]
    pub otlp_bind_address: SocketAddr,

    /// The receiver's base URL as sandboxes reach it (the chart's Service:
    /// http://<release>-otlp.<namespace>.svc:4318); agents get it as
    /// OTEL_EXPORTER_OTLP_ENDPOINT. Unset: no receiver, and agents get no OTEL_* variables.
    #[arg(long, env = "AGENTIC_OTLP_ADVERTISED_ADDRESS", value_name = "URL")]
    pub otlp_advertised_address: Option<String>,

    /// Whether agents export message content
    /// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), which goose needs to name
    /// the skill it loads; an Agent's spec.captureMessageContent overrides it. The receiver
    /// drops all content before anything else sees a span.
    #[arg(
        long,
        env = "AGENTIC_OTLP_CAPTURE_CONTENT",
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub otlp_capture_content: bool,

    /// Seconds after a run's end that its agent's traces are still taken (its last export
    /// may arrive after the end was seen); later ones are refused with 403.
    #[arg(
        long,
        env = "AGENTIC_OTLP_FINISHED_GRACE_SECONDS",
        value_name = "SECONDS",
        default_value_t = crate::otlp::Limits::default().finished_grace.as_secs()
    )]
    pub otlp_finished_grace_seconds: u64,
}

/// Exit status of a usage mistake, the same clap uses for the mistakes it catches. Every
/// other failure exits 1.
const USAGE_ERROR: u8 = 2;

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Crd(args) => print_crds(args.group),
        Command::Skill(command) => skill::run(command),
        Command::Agentrun(args) => agentrun::run(args),
        Command::Run(args) => run_operator(*args),
        Command::CredentialProxy(args) => run_credential_proxy(args),
    }
}

fn run_credential_proxy(args: CredentialProxyArgs) -> ExitCode {
    init_logging(args.log_format);
    let config = crate::credential_proxy::ProxyConfig {
        listen: args.listen,
        upstream: args.upstream,
        auth: match args.auth {
            ProxyAuth::Bearer => agentic_core::gateway::AuthStyle::Bearer,
            ProxyAuth::Anthropic => agentic_core::gateway::AuthStyle::Anthropic,
        },
        key_file: args.key_file,
        max_request_bytes: args.max_request_bytes,
    };
    // One core's worth of threads: a sidecar per sandbox must stay small.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "starting the async runtime failed");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::credential_proxy::serve(
        config,
        crate::operator::wait_for_signal(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run_operator(args: RunArgs) -> ExitCode {
    init_logging(args.log_format);
    let shards = if args.shards > 1 {
        let Ok(namespace) = std::env::var("POD_NAMESPACE") else {
            tracing::error!("--shards needs POD_NAMESPACE (the namespace of the shard Leases)");
            return ExitCode::from(USAGE_ERROR);
        };
        Some(ShardLeasing {
            namespace,
            prefix: args.leader_election_lease.clone(),
            identity: std::env::var("POD_NAME")
                .unwrap_or_else(|_| format!("agentic-operator-{:016x}", rand::random::<u64>())),
            shards: agentic_core::shard::Shards::with_hash(args.shards, args.shard_watch.into()),
            lease_duration: Duration::from_secs(15),
        })
    } else {
        None
    };
    // The shard Leases replace the leader's: each replica serves its share.
    let leader_election = if args.leader_elect && shards.is_none() {
        let Ok(namespace) = std::env::var("POD_NAMESPACE") else {
            tracing::error!("--leader-elect needs POD_NAMESPACE (the namespace of the Lease)");
            return ExitCode::from(USAGE_ERROR);
        };
        let mut election = LeaderElection::new(namespace, std::env::var("POD_NAME").ok());
        election.lease_name = args.leader_election_lease;
        Some(election)
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
        insecure_git_hosts: args.insecure_git_hosts,
        sandbox_backend: args.sandbox_backend,
        health_addr: args.health_addr,
        metrics_addr: args.metrics_addr,
        secure_metrics: args.metrics_secure.then(|| SecureMetrics {
            cert_and_key: args.metrics_tls_cert.zip(args.metrics_tls_key),
        }),
        leader_election,
        shards,
        tag_refresh_interval: Duration::from_secs(args.tag_refresh_seconds.max(10)),
        reconcile_concurrency: args.reconcile_concurrency,
        default_skills_namespace: args.default_skills_namespace,
        operator_image: args.operator_image.filter(|image| !image.is_empty()),
        credential_proxy: args.credential_proxy.into(),
        trace_collector: args.trace_collector.filter(|url| !url.is_empty()),
        skill_prefetch: args.skill_prefetch.0.map(|nodes| SkillPrefetch {
            nodes,
            priority_class: args
                .skill_prefetch_priority_class
                .filter(|class| !class.is_empty()),
            per_agent: usize::from(args.skill_prefetch_nodes_per_agent),
            per_cluster: usize::from(args.skill_prefetch_max_pods),
        }),
        watch_failure_timeout: Some(Duration::from_secs(args.watch_failure_seconds))
            .filter(|timeout| !timeout.is_zero()),
        otlp: args
            .otlp_advertised_address
            .filter(|address| !address.is_empty())
            .map(|endpoint| crate::otlp::OtlpOptions {
                bind: args.otlp_bind_address,
                receiver: agentic_core::sandbox::TraceReceiver {
                    endpoint,
                    capture_content: args.otlp_capture_content,
                },
                limits: crate::otlp::Limits {
                    finished_grace: Duration::from_secs(args.otlp_finished_grace_seconds),
                    ..crate::otlp::Limits::default()
                },
            }),
        run_defaults: RunDefaults {
            startup_deadline_seconds: args.startup_deadline_seconds,
            ttl: TtlDefaults {
                after_succeeded: args.ttl_after_succeeded,
                after_failed: args.ttl_after_failed,
            },
            max_concurrent_runs_per_namespace: Some(args.max_concurrent_runs_per_namespace)
                .filter(|cap| *cap > 0),
            orphan_sweep_interval: Some(Duration::from_secs(args.orphan_sweep_seconds))
                .filter(|interval| !interval.is_zero()),
        },
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "starting the async runtime failed");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::operator::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %Chain(e.as_ref()), "the operator stopped");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours are for a person at a terminal; `kubectl logs` and log files get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    match format {
        // One object per line with the event's fields beside `message`, where log pipelines
        // index them; the innermost span, when there is one, under `span`.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
        LogFormat::Text => builder.init(),
    }
}

fn print_crds(group: Option<CrdGroup>) -> ExitCode {
    let yaml = match group {
        Some(CrdGroup::Konveyor) => agentic_api::crds_yaml(),
        Some(CrdGroup::Trust) => agentic_api::trust_crds_yaml(),
        None => agentic_api::crds_yaml()
            .and_then(|konveyor| Ok(konveyor + &agentic_api::trust_crds_yaml()?)),
    };
    let written = yaml
        .map_err(|e| format!("serializing CRDs: {e}"))
        .and_then(|yaml| {
            std::io::stdout()
                .write_all(yaml.as_bytes())
                .map_err(|e| format!("writing CRDs: {e}"))
        });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Parses a listen address: `IP:PORT`, or `:PORT` (Go's form) for all IPv4 interfaces, like
/// the default `0.0.0.0:PORT`.
fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    match text.strip_prefix(':') {
        Some(port) => port
            .parse::<u16>()
            .map(|port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .map_err(|_| format!("{port:?} is not a port number (0 to 65535)")),
        None => text
            .parse()
            .map_err(|_| "expected IP:PORT, e.g. 127.0.0.1:8080, or :PORT".to_string()),
    }
}

/// `--skill-prefetch`: the nodes it selects, `None` for `off`.
#[derive(Clone, Debug)]
pub struct SkillPrefetchNodes(Option<agentic_core::prefetch::NodeSelection>);

fn skill_prefetch(text: &str) -> Result<SkillPrefetchNodes, String> {
    agentic_core::prefetch::NodeSelection::parse(text).map(SkillPrefetchNodes)
}

/// A Lease name: a DNS subdomain (lowercase letters, digits, `-` and `.`, at most 253).
fn lease_name(text: &str) -> Result<String, String> {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = (1..=253).contains(&text.len())
        && text.starts_with(alphanumeric)
        && text.ends_with(alphanumeric)
        && text
            .chars()
            .all(|c| alphanumeric(c) || c == '-' || c == '.');
    if valid {
        Ok(text.to_owned())
    } else {
        Err("expected a Lease name: at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_dns_subdomains() {
        for valid in ["agentic-operator-leader", "team-a.agentic", "x"] {
            assert_eq!(lease_name(valid).as_deref(), Ok(valid));
        }
        for wrong in ["", "Leader", "-leader", "leader-", "a/b", &"a".repeat(254)] {
            assert!(lease_name(wrong).is_err(), "{wrong} was accepted");
        }
    }

    #[test]
    fn listen_addresses_take_ip_and_port_or_a_bare_port() {
        assert_eq!(listen_addr(":8081"), Ok("0.0.0.0:8081".parse().unwrap()));
        assert_eq!(
            listen_addr("127.0.0.1:0"),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(listen_addr("[::1]:9090"), Ok("[::1]:9090".parse().unwrap()));
        for wrong in [":", ":http", ":65536", "8080", "localhost:8080", "::1:80"] {
            assert!(listen_addr(wrong).is_err(), "{wrong} was accepted");
        }
    }

    #[test]
    fn go_style_addresses_reach_the_run_options() {
        let cli = Cli::try_parse_from([
            "agentic-operator",
            "run",
            "--health-addr",
            ":8081",
            "--metrics-addr=:9090",
        ])
        .expect("parses");
        let Command::Run(args) = cli.command else {
            panic!("not run: {cli:?}");
        };
        assert_eq!(args.health_addr, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(args.metrics_addr, "0.0.0.0:9090".parse().unwrap());
    }

    #[test]
    fn skill_prefetch_is_all_by_default_and_takes_off_or_a_label_selector() {
        use agentic_core::prefetch::NodeSelection;
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["agentic-operator", "run"].iter().chain(args)).map(|cli| {
                let Command::Run(args) = cli.command else {
                    panic!("not run");
                };
                args.skill_prefetch.0
            })
        };
        assert_eq!(parse(&[]).expect("parses"), Some(NodeSelection::All));
        assert_eq!(parse(&["--skill-prefetch=off"]).expect("parses"), None);
        assert!(matches!(
            parse(&["--skill-prefetch", "pool=agents"]).expect("parses"),
            Some(NodeSelection::Matching(_))
        ));
        let error = parse(&["--skill-prefetch", "pool in agents"])
            .expect_err("no parentheses")
            .to_string();
        assert!(error.contains("pool in agents"), "{error}");
    }

    #[test]
    fn metrics_certificates_come_in_pairs_and_only_with_metrics_secure() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["agentic-operator", "run"].iter().chain(args)).map(|cli| {
                let Command::Run(args) = cli.command else {
                    panic!("not run");
                };
                (
                    args.metrics_secure,
                    args.metrics_tls_cert,
                    args.metrics_tls_key,
                )
            })
        };
        assert_eq!(parse(&[]).expect("parses"), (false, None, None));
        assert_eq!(
            parse(&["--metrics-secure"]).expect("parses"),
            (true, None, None)
        );
        assert_eq!(
            parse(&[
                "--metrics-secure",
                "--metrics-tls-cert=/tls/tls.crt",
                "--metrics-tls-key=/tls/tls.key"
            ])
            .expect("parses"),
            (
                true,
                Some(PathBuf::from("/tls/tls.crt")),
                Some(PathBuf::from("/tls/tls.key"))
            )
        );
        for wrong in [
            &["--metrics-tls-cert=/c", "--metrics-tls-key=/k"][..],
            &["--metrics-secure", "--metrics-tls-cert=/c"],
            &["--metrics-secure", "--metrics-tls-key=/k"],
        ] {
            let error = parse(wrong).expect_err("refused");
            assert_eq!(error.exit_code(), 2, "{wrong:?}: {error}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// A command's list of subcommands reads like kubectl's and cargo's: one short line each.
    /// The detail, exit codes and examples belong to the subcommand's own `--help`.
    #[test]
    fn every_subcommand_summary_is_one_short_line() {
        use clap::CommandFactory;
        /// What fits beside the subcommand's name in an 80-column terminal.
        const WIDTH: usize = 64;
        fn check(command: &clap::Command, path: &str, seen: &mut usize) {
            for sub in command.get_subcommands() {
                let name = format!("{path} {}", sub.get_name());
                let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
                assert!(!about.is_empty(), "`{name}` has no summary");
                assert!(
                    !about.contains('\n') && about.chars().count() <= WIDTH,
                    "`{name}`'s summary is not one line of at most {WIDTH} characters: {about:?}"
                );
                *seen += 1;
                check(sub, &name, seen);
            }
        }
        let mut seen = 0;
        check(&Cli::command(), "agentic-operator", &mut seen);
        // run, crd, skill and its six, agentrun and its four (help subcommands are clap's).
        assert!(seen >= 14, "the walk saw {seen} subcommands");
    }
}
