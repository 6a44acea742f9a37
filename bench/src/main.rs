//! `make bench`: the operator's throughput and footprint on the test control plane.
//! With `--node`, a run's start on a real node instead: see `node.rs`. With `--proxy`, the
//! credential proxy's latency and memory instead, without a cluster: see `proxy.rs`.
//!
//! Starts kube-apiserver + etcd and an OCI registry from `agentic-testenv` (no node, no
//! agent-sandbox controller: the `pod` backend, so only the operator writes), runs the
//! `agentic-operator` binary as a separate process (its CPU and peak RSS are its alone),
//! creates one Gateway and one Agent with three image SkillCards, then N AgentRuns through a
//! loader at a fixed concurrency, and prints:
//!
//! - runs/s, and p50/p99 of the time from a run's create request to its sandbox pod showing
//!   up in a watch;
//! - API requests per run by verb and resource, from the API server's own
//!   `apiserver_request_total`, diffed before/after, less the loader's own creates;
//! - the CPU seconds (`/proc/<pid>/stat`) of the operator, kube-apiserver, etcd and the bench
//!   itself during the runs, and the operator's peak RSS (`VmHWM`);
//! - the writes in `--idle-seconds` after convergence;
//! - the operator's requests to the OCI registry during the runs, from its own
//!   `agentic_registry_requests_total`. With `--report-loads` each run then reports three
//!   skill loads to the operator's OTLP receiver, as goose would (see `reports.rs`), and the
//!   requests per run include what that costs; the operator's CPU for the reports is shown
//!   on its own. With `--trust` the skill images are signed and a
//!   ClusterSkillTrustPolicy requires the signature, so this shows what verification costs
//!   a run.
//!
//! `--ceiling` measures the API server instead: the operator only sets up the Agent, then
//! stops, and the loader itself makes exactly one run's writes per run (the run, its ACP
//! Secret, its ACP Service, its Pod, one status apply and one Event), built with the
//! operator's own builders. Both modes watch the runs and pods the same way and end at the
//! same moment (the last run seen with its sandbox recorded), so the harness puts the same
//! load on the machine in both and only the operator differs.

// Statistics over counts and durations: the casts between them lose nothing a report shows.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic_api::{
    Agent, AgentRun, AgentRunSpec, AgentRunStatus, AgentSpec, ClusterSkillTrustPolicy,
    ClusterSkillTrustPolicySpec, KeySource, ObjectRef, SkillCard, SkillCardSpec, SkillType,
    TrustPolicy, VerificationState,
};
use agentic_core::names::sandbox_name;
use agentic_core::reasons::AgentRunReason;
use agentic_core::sandbox::{
    MountedSkill, RUN_LABEL, RunOutcome, SandboxInputs, build_acp_secret, build_acp_service,
    build_pod,
};
use agentic_core::skills::{Lookup, resolve_skill_delivery};
use agentic_fixtures::{apply, llm_gateway, operator_command_watching, push_to, write_skill};
use agentic_oci::RegistryAuth;
use agentic_testenv::{TestEnv, TestEnvOptions};
use anyhow::{Context as _, bail};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

mod node;
mod proxy;
mod reports;
mod restart;
mod spread;

#[derive(Parser, Debug)]
#[command(about = "Throughput and footprint of agentic-operator on the test control plane")]
#[allow(clippy::struct_excessive_bools)] // Command-line switches.
struct Args {
    /// How many AgentRuns to create.
    #[arg(long, default_value_t = 100)]
    runs: usize,
    /// How many creates the loader keeps in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// How long to count writes after convergence.
    #[arg(long, default_value_t = 60)]
    idle_seconds: u64,
    /// Measure the API server's ceiling: the loader makes one run's writes itself.
    #[arg(long)]
    ceiling: bool,
    /// Measure a run's start on a real node instead, against a bare pod (needs root); see
    /// `node.rs`.
    #[arg(long, conflicts_with = "ceiling")]
    node: bool,
    /// Measure the credential proxy instead (no cluster): the latency it adds to a request
    /// and its memory, over this many requests each way (default 2000); see `proxy.rs`.
    #[arg(
        long,
        value_name = "REQUESTS",
        num_args = 0..=1,
        default_missing_value = "2000",
        conflicts_with_all = ["ceiling", "node", "report_loads"]
    )]
    proxy: Option<usize>,
    /// With `--node`: have the operator prefetch skill images onto the node
    /// (`--skill-prefetch=all`, its image pushed to the node's registry) and start each cold
    /// run this many seconds after its Agent turned Ready. Without it the node bench runs
    /// the operator with `--skill-prefetch=off`.
    #[arg(long, value_name = "SECONDS", requires = "node")]
    prefetch_after: Option<u64>,
    /// With `--node`: how many times each scenario is measured, warm and cold.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// The operator binary (`make bench` builds it with `--release`).
    #[arg(long, default_value = "target/release/agentic-operator")]
    operator: PathBuf,
    /// One more argument for `agentic-operator run`, e.g.
    /// `--operator-arg=--reconcile-concurrency=64`; repeatable.
    #[arg(long = "operator-arg", value_name = "ARG", allow_hyphen_values = true)]
    operator_args: Vec<String>,
    /// Sign the skill images with a key made for the run and require that signature with a
    /// ClusterSkillTrustPolicy (mode Enforce) before the Agent is set up.
    #[arg(long, conflicts_with = "node")]
    trust: bool,
    /// Restart the operator over this many existing AgentRuns before the timed runs (95 %
    /// finished, 5 % waiting for an Agent that does not exist); see `restart.rs`. With
    /// `--ceiling`, the loader's runs go beside them instead.
    #[arg(long, default_value_t = 0, conflicts_with = "node")]
    existing: usize,
    /// Serve the operator's OTLP receiver and, once every run has its sandbox, report three
    /// skill loads for each run to it with the run's bearer, as its agent would; see
    /// `reports.rs`.
    #[arg(long, conflicts_with_all = ["node", "ceiling", "existing"])]
    report_loads: bool,
    /// With `--existing`: create the timed runs only once the operator counts every finished
    /// existing run (it lists them after it reports ready), so that runs/s measures new runs
    /// beside the kept ones rather than beside the restart's lists.
    #[arg(long, requires = "existing")]
    settled: bool,
    /// Spread the runs, existing and timed, over this many namespaces, each with the Agent,
    /// Gateway and SkillCards the runs need; their names are picked so that each of
    /// `--shards` shards holds as many, the same names whatever `--replicas`. Default 1, or
    /// 16 with `--replicas` over 1; see `spread.rs`.
    #[arg(long, conflicts_with_all = ["node", "ceiling", "report_loads"])]
    namespaces: Option<usize>,
    /// With `--existing`: restart this many operator processes over the existing runs,
    /// sharing the namespaces (`agentic-operator run --shards`, each named in the shard
    /// Leases), and create the timed runs once they have split the shards. 1 restarts one
    /// operator without sharding, as a single replica runs.
    #[arg(long, default_value_t = 1, conflicts_with_all = ["node", "ceiling", "report_loads"])]
    replicas: usize,
    /// With `--namespaces` over 1: the operator watches every namespace (`all`, as the chart
    /// installs it by default; sharded replicas then receive every object and drop the
    /// other shards'), or each of the bench's namespaces (`listed`, `--namespace` for each;
    /// sharded replicas then watch only their shards' namespaces).
    #[arg(long, value_enum, default_value = "all")]
    watch: WatchScope,
    /// The shards the namespaces are spread over, and the replicas' `--shards` with
    /// `--replicas` over 1.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    shards: u32,
}

/// `--watch`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WatchScope {
    /// Every namespace.
    All,
    /// The bench's namespaces, each with `--namespace`.
    Listed,
}

/// The Agent every run names.
const AGENT: &str = "bench";
/// Its skills (each SkillCard is named after its skill).
const SKILLS: [&str; 3] = ["java-upgrade", "quarkus-config", "maven-deps"];
/// How long a run may take to get its sandbox before the benchmark gives up.
const CONVERGE_PER_RUN: Duration = Duration::from_millis(200);
/// And how much longer for each existing run of `--existing`.
const CONVERGE_PER_EXISTING_RUN: Duration = Duration::from_millis(2);

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(bench(Args::parse()));
    // The control plane is stopped when `bench` returns; what the test environment left on
    // blocking threads must not keep the process alive after the report.
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

async fn bench(args: Args) -> anyhow::Result<()> {
    if let Some(requests) = args.proxy {
        return proxy::bench(&args.operator, requests).await;
    }
    if args.node {
        return node::bench(&args).await;
    }
    if args.runs == 0 || args.concurrency == 0 {
        bail!("--runs and --concurrency must be at least 1");
    }
    let operator = std::fs::canonicalize(&args.operator).with_context(|| {
        format!(
            "the operator binary {} (build it: cargo build --release -p agentic-operator)",
            args.operator.display()
        )
    })?;
    let spread = args
        .namespaces
        .unwrap_or(if args.replicas > 1 { 16 } else { 1 });
    if spread == 0 || args.replicas == 0 {
        bail!("--namespaces and --replicas must be at least 1");
    }
    let shards = agentic_core::shard::Shards::new(args.shards);
    if args.replicas > 1 {
        if args.existing == 0 {
            bail!("--replicas over 1 restarts the operator over existing runs: give --existing");
        }
        if args.replicas > args.shards as usize || spread < args.shards as usize {
            bail!(
                "--replicas {} over --shards {} and --namespaces {spread}: every replica needs a shard and every shard a namespace",
                args.replicas,
                args.shards
            );
        }
    }
    eprintln!("starting the control plane and registry");
    let env = TestEnv::start(TestEnvOptions {
        with_agent_sandbox: false,
        with_registry: true,
        with_node: false,
        with_workloads: false,
        bin_dir: None,
    })
    .await?;
    let client = env.client();
    let namespaces = if spread == 1 && args.replicas == 1 {
        vec![env.namespace("bench").await?]
    } else {
        let names = spread::pick_namespaces(spread, shards);
        spread::create_namespaces(&client, &names).await?;
        names
    };
    let ns = namespaces[0].clone();
    let registry = env.registry_addr().context("the registry")?;
    let log = tempfile::NamedTempFile::new()?;
    let mut operator_args = args.operator_args.clone();
    if args.report_loads {
        operator_args.extend(reports::OPERATOR_ARGS.map(str::to_owned));
    }
    let mut child = start_operator(
        &operator,
        &operator_args,
        &env,
        Watched {
            namespaces: &namespaces,
            scope: args.watch,
        },
        &registry,
        &log,
        None,
    )?;
    let pid = child.id().context("the operator's pid")?;
    eprintln!(
        "operator pid {pid}, log {}; setting up the Agent in {} namespace(s)",
        log.path().display(),
        namespaces.len()
    );
    fixture(&client, &namespaces, &registry, args.trust).await?;
    let metrics = operator_addr(log.path(), PROBES_LOG, "metrics").await?;

    if args.ceiling {
        let existing = if args.existing > 0 {
            Some(existing_runs(&client, &namespaces, &ns, &args, || child.kill()).await?)
        } else {
            child.kill().await?;
            None
        };
        let report = ceiling(&client, &ns, &args, &Processes::of(&env, &[])?).await?;
        if let Some(loaded) = existing {
            let (waiting, finished) = restart::split(args.existing);
            println!(
                "  beside {} existing runs ({finished} finished, {waiting} waiting), created in {:.1} s",
                args.existing,
                loaded.as_secs_f64()
            );
        }
        println!("{report}");
        return Ok(());
    }

    let (mut replicas, restart) = if args.existing > 0 {
        let loaded = existing_runs(&client, &namespaces, &ns, &args, || child.kill()).await?;
        eprintln!(
            "created in {:.1} s; restarting {} operator(s)",
            loaded.as_secs_f64(),
            args.replicas
        );
        let (replicas, mut restart) =
            restart_replicas(&operator, &args, &env, &namespaces, &registry, shards).await?;
        if args.settled {
            let (_, finished) = restart::split(args.existing);
            let after = settled(&replicas, finished, restart.spawned).await?;
            eprintln!(
                "every finished run counted {:.1} s after the start",
                after.as_secs_f64()
            );
            restart.settled = Some(after);
        }
        (replicas, Some((loaded, restart)))
    } else {
        let replica = Replica {
            identity: "operator".into(),
            child,
            pid,
            log,
            metrics,
            at_ready: None,
        };
        (vec![replica], None)
    };
    let pids: Vec<u32> = replicas.iter().map(|replica| replica.pid).collect();
    let processes = Processes::of(&env, &pids)?;
    let one_namespace = (namespaces.len() == 1).then_some(ns.as_str());
    let seen = Seen::watch(&client, one_namespace).await?;
    let cpu_before = processes.cpu()?;
    let registry_before = registry_requests_of(&replicas).await?;
    let before = request_counts(&client).await?;
    let created = Arc::new(Mutex::new(HashMap::new()));
    let started = Instant::now();
    futures::stream::iter(0..args.runs)
        .map(|i| {
            let runs: Api<AgentRun> =
                Api::namespaced(client.clone(), spread::namespace_of(i, &namespaces));
            let created = created.clone();
            async move {
                let name = format!("run-{i:05}");
                let run = bench_run(&name);
                let at = Instant::now();
                runs.create(&PostParams::default(), &run).await?;
                lock(&created).insert(sandbox_name(&name), at);
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<()>()
        .await?;
    let loaded = started.elapsed();
    // After a restart the existing runs' own passes and lists share the machine with the
    // timed ones: more time before giving up, so that a slow restart is measured, not lost.
    let limit = Duration::from_secs(60)
        + CONVERGE_PER_RUN * args.runs as u32
        + CONVERGE_PER_EXISTING_RUN * u32::try_from(args.existing).unwrap_or(u32::MAX);
    let last = seen.converged(args.runs, limit).await?;
    let elapsed = last.duration_since(started);
    let cpu_runs = processes.cpu()?.since(&cpu_before);
    let reported = if args.report_loads {
        let (message, field) = reports::RECEIVER_LOG;
        let receiver = operator_addr(replicas[0].log.path(), message, field).await?;
        let names: Vec<String> = (0..args.runs).map(|i| format!("run-{i:05}")).collect();
        let cpu_before = processes.cpu()?;
        let started = Instant::now();
        reports::post_all(&client, &ns, &receiver, &names, &SKILLS, args.concurrency).await?;
        let posted = started.elapsed();
        let last = seen.recorded(args.runs, limit).await?;
        let elapsed = last.duration_since(started);
        Some((posted, elapsed, processes.cpu()?.since(&cpu_before)))
    } else {
        None
    };
    let quiet = quiesce(&client).await?;
    let after = request_counts(&client).await?;
    let registry_during = registry_requests_of(&replicas).await? - registry_before;

    let latencies = {
        let created = lock(&created);
        let pods = lock(&seen.pods);
        let mut l: Vec<f64> = created
            .iter()
            .filter_map(|(name, at)| pods.get(name).map(|p| p.duration_since(*at).as_secs_f64()))
            .collect();
        l.sort_by(f64::total_cmp);
        l
    };
    let mut diff = subtract(&after, &before);
    // The loader's own creates.
    if let Some(n) = diff.get_mut(&("POST".into(), "agentruns".into())) {
        *n -= args.runs as f64;
    }
    // The reports' reads of each run's bearer.
    if args.report_loads
        && let Some(n) = diff.get_mut(&("GET".into(), "secrets".into()))
    {
        *n -= args.runs as f64;
    }
    eprintln!("idle: counting writes for {} s", args.idle_seconds);
    let idle_before = request_counts(&client).await?;
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let idle_after = request_counts(&client).await?;
    let idle = subtract(&idle_after, &idle_before);
    let mut ends = Vec::new();
    for replica in &mut replicas {
        let end = ReplicaEnd {
            cpu: cpu_seconds(replica.pid)?,
            peak_rss: peak_rss_mb(replica.pid)?,
            rss: status_mb(replica.pid, "VmRSS")?,
            rss_anon: status_mb(replica.pid, "RssAnon")?,
            rss_file: status_mb(replica.pid, "RssFile")?,
            served: (args.replicas > 1)
                .then(|| std::fs::read_to_string(replica.log.path()).map(|l| spread::served(&l)))
                .transpose()?,
        };
        ends.push(end);
    }
    for replica in &mut replicas {
        replica.child.kill().await?;
    }
    let cpu_total: f64 = ends.iter().map(|end| end.cpu).sum();

    let n = args.runs as f64;
    println!(
        "agentic-operator bench: {} runs, concurrency {}",
        args.runs, args.concurrency
    );
    if namespaces.len() > 1 || replicas.len() > 1 {
        println!(
            "  {} namespaces ({}), runs spread round-robin, {}; {}",
            namespaces.len(),
            namespaces.join(", "),
            match args.watch {
                WatchScope::All => "every namespace watched",
                WatchScope::Listed => "each watched with --namespace",
            },
            if replicas.len() > 1 {
                format!("{} replicas, --shards {}", replicas.len(), args.shards)
            } else {
                "one replica, not sharded".to_owned()
            }
        );
    }
    if let Some((
        loaded,
        Restart {
            spawned,
            ready,
            settled,
        },
    )) = restart
    {
        let (waiting, finished) = restart::split(args.existing);
        let first = lock(&seen.pods).values().min().copied();
        println!(
            "  restart over {} existing runs ({finished} finished, {waiting} waiting), created in {:.1} s",
            args.existing,
            loaded.as_secs_f64()
        );
        println!(
            "    ready after             {:.2} s{}",
            ready.as_secs_f64(),
            if replicas.len() > 1 {
                " (every shard served, each replica's watches listed)"
            } else {
                ""
            }
        );
        if let Some(settled) = settled {
            println!(
                "    settled after           {:.2} s (every finished run counted; the timed runs created then)",
                settled.as_secs_f64()
            );
        }
        println!(
            "    first new sandbox after {:.2} s from the start, {:.2} s from the first create",
            first.map_or(f64::NAN, |at| at.duration_since(spawned).as_secs_f64()),
            first.map_or(f64::NAN, |at| at.duration_since(started).as_secs_f64()),
        );
        println!(
            "    last new sandbox after  {:.2} s from the first create",
            last.duration_since(started).as_secs_f64()
        );
        let cpu_at_ready: f64 = replicas
            .iter()
            .filter_map(|replica| replica.at_ready.as_ref())
            .map(|at| at.cpu)
            .sum();
        println!("    CPU by ready            {cpu_at_ready:.2} s");
    }
    println!("  loader's creates took     {:.2} s", loaded.as_secs_f64());
    println!(
        "  runs/s                    {:.1}  ({} runs in {:.2} s, create of the first to status of the last)",
        n / elapsed.as_secs_f64(),
        args.runs,
        elapsed.as_secs_f64()
    );
    println!(
        "  create -> pod  p50 / p99  {:.2} / {:.2} s",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99)
    );
    cpu_runs.print("CPU during the runs", n, elapsed);
    if let Some((posted, elapsed, cpu)) = &reported {
        println!(
            "  reports of {} skill loads per run: posted in {:.2} s, all counted in the runs' status after {:.2} s",
            SKILLS.len(),
            posted.as_secs_f64(),
            elapsed.as_secs_f64()
        );
        cpu.print("CPU during the reports", n, *elapsed);
    }
    if let [end] = ends.as_slice() {
        println!("  operator CPU in all       {cpu_total:.2} s");
        println!(
            "  operator peak RSS         {:.1} MB ({:.1} MB at the end)",
            replicas[0].peak_rss(end),
            end.rss
        );
        println!(
            "    at the end: {:.1} MB anonymous (heap, stacks), {:.1} MB file-backed (code)",
            end.rss_anon, end.rss_file
        );
        if let Some(at) = &replicas[0].at_ready {
            println!(
                "    peak RSS by ready {:.1} MB, from ready on {:.1} MB",
                at.peak_rss, end.peak_rss
            );
        }
    } else {
        println!(
            "  operators' CPU in all     {cpu_total:.2} s ({} replicas)",
            replicas.len()
        );
    }
    if namespaces.len() > 1 || replicas.len() > 1 {
        println!("  per replica:");
        for (replica, end) in replicas.iter().zip(&ends) {
            replica.print(end, &namespaces, shards, args.existing, args.runs);
        }
    }
    println!("  quiet after               {:.1} s", quiet.as_secs_f64());
    let (reads, writes) = print_table("API requests per run (operator's)", &diff, n);
    println!("  per run: {reads:.2} reads, {writes:.2} writes");
    println!(
        "  registry requests         {registry_before:.0} to read{} the three cards, {registry_during:.0} during the runs ({:.2} per run)",
        if args.trust {
            " and verify the signatures a ClusterSkillTrustPolicy requires of"
        } else {
            ""
        },
        registry_during / n,
    );
    let (_, idle_writes) = print_table(
        &format!("requests in {} s idle after convergence", args.idle_seconds),
        &idle,
        1.0,
    );
    println!("  idle writes: {idle_writes:.0}");
    if replicas.len() > 1 {
        println!(
            "  (leases: with --replicas, also the replicas' shard Leases: each reads {} and renews its own every 2 s, whatever the runs)",
            2 * args.shards
        );
    }
    Ok(())
}

/// One operator process of a round.
struct Replica {
    /// Its name in the shard Leases (`POD_NAME`); "operator" when not sharded.
    identity: String,
    child: tokio::process::Child,
    pid: u32,
    log: tempfile::NamedTempFile,
    /// Where it serves `/metrics`.
    metrics: String,
    /// What it had spent when the operator (all replicas) reported ready, after a restart.
    at_ready: Option<AtReady>,
}

/// A replica when the replicas reported ready.
struct AtReady {
    /// CPU seconds since its start.
    cpu: f64,
    /// Its peak RSS since its start, in MB; the peak is then reset, so that the peak at the
    /// end says the peak from ready on.
    peak_rss: f64,
    /// What it served (sharded replicas).
    served: Option<spread::Served>,
}

/// A replica at the end of a round, before it is stopped.
struct ReplicaEnd {
    /// CPU seconds since its start.
    cpu: f64,
    /// Its peak RSS since its start or, after a restart, since ready; in MB.
    peak_rss: f64,
    /// Its RSS now, in MB.
    rss: f64,
    /// Of `rss`, its anonymous memory (heap, stacks) and its file-backed pages (the binary
    /// and the C library as mapped), in MB. The file-backed part is not the operator's to
    /// choose: on recent kernels (6.18 here) one touch maps the whole page-cache folio around
    /// it, and the folios a binary's
    /// pages sit in depend on how the kernel read the file, so the same binary maps a
    /// megabyte or two more or less from one copy of it to the next (docs/performance.md).
    rss_anon: f64,
    rss_file: f64,
    served: Option<spread::Served>,
}

impl Replica {
    /// Its peak RSS over its whole life, in MB.
    fn peak_rss(&self, end: &ReplicaEnd) -> f64 {
        self.at_ready
            .as_ref()
            .map_or(end.peak_rss, |at| at.peak_rss.max(end.peak_rss))
    }

    /// A line or two on what it served and spent.
    fn print(
        &self,
        end: &ReplicaEnd,
        namespaces: &[String],
        shards: agentic_core::shard::Shards,
        existing: usize,
        runs: usize,
    ) {
        let served = end
            .served
            .as_ref()
            .map_or_else(|| shards.all().collect(), |served| served.shards.clone());
        let mine = spread::namespaces_in(namespaces, shards, &served);
        let sets = end
            .served
            .as_ref()
            .map_or(", not sharded".to_owned(), |served| {
                format!(", {} set(s) of shards served since its start", served.sets)
            });
        let at_ready = self.at_ready.as_ref();
        let changed = at_ready
            .and_then(|at| at.served.as_ref())
            .zip(end.served.as_ref())
            .is_some_and(|(then, now)| then.shards != now.shards);
        println!(
            "    {} (pid {}): shards {served:?}{}, {} namespaces ({}), {} existing and {} new runs{sets}",
            self.identity,
            self.pid,
            if changed {
                " (changed after ready)"
            } else {
                ""
            },
            mine.len(),
            mine.join(", "),
            spread::runs_in(existing, namespaces, shards, &served),
            spread::runs_in(runs, namespaces, shards, &served),
        );
        println!(
            "      CPU by ready {:.2} s, in all {:.2} s; peak RSS {:.1} MB (by ready {:.1} MB, from ready on {:.1} MB), {:.1} MB at the end",
            at_ready.map_or(f64::NAN, |at| at.cpu),
            end.cpu,
            self.peak_rss(end),
            at_ready.map_or(f64::NAN, |at| at.peak_rss),
            end.peak_rss,
            end.rss
        );
    }
}

/// Puts `args.existing` runs on the control plane ([`restart`]): the waiting ones while the
/// operator started for the fixture runs, then, once `stop` has stopped it, the finished
/// ones; how long that took.
async fn existing_runs<F: std::future::Future<Output = std::io::Result<()>>>(
    client: &Client,
    namespaces: &[String],
    ns: &str,
    args: &Args,
    stop: impl FnOnce() -> F,
) -> anyhow::Result<Duration> {
    let (waiting, finished) = restart::split(args.existing);
    eprintln!(
        "creating {waiting} waiting runs in {} namespace(s) and waiting for their status",
        namespaces.len()
    );
    let statused =
        restart::waiting_runs(client, namespaces, args.existing, args.concurrency).await?;
    stop().await?;
    let skills = restart::pinned_skills(client, ns).await?;
    eprintln!(
        "{waiting} waiting runs have their status after {:.1} s; operator stopped; \
         creating {finished} finished runs",
        statused.as_secs_f64()
    );
    let loaded =
        restart::finished_runs(client, namespaces, args.existing, args.concurrency, &skills)
            .await?;
    Ok(loaded + statused)
}

/// When the replicas of a restart were started, and how long until they reported ready.
struct Restart {
    spawned: Instant,
    ready: Duration,
    /// With `--settled`: when every finished run was counted, from the start.
    settled: Option<Duration>,
}

/// Starts `args.replicas` operator processes over `namespaces` (sharded when more than one)
/// and waits until they are ready: one replica's `/readyz`, or several having split the
/// shards and listed their own. Each one's CPU and peak RSS are noted then, and its peak
/// reset.
async fn restart_replicas(
    operator: &std::path::Path,
    args: &Args,
    env: &TestEnv,
    namespaces: &[String],
    registry: &str,
    shards: agentic_core::shard::Shards,
) -> anyhow::Result<(Vec<Replica>, Restart)> {
    let leases = if args.replicas > 1 {
        Some(env.namespace("bench-leases").await?)
    } else {
        None
    };
    let spawned = Instant::now();
    let mut replicas = Vec::new();
    for r in 0..args.replicas {
        let identity = if args.replicas > 1 {
            format!("replica-{}", char::from(b'a' + (r % 26) as u8))
        } else {
            "operator".to_owned()
        };
        let sharding = leases.as_deref().map(|leases| Sharding {
            leases_namespace: leases,
            identity: &identity,
            shards: args.shards,
        });
        let log = tempfile::NamedTempFile::new()?;
        let child = start_operator(
            operator,
            &args.operator_args,
            env,
            Watched {
                namespaces,
                scope: args.watch,
            },
            registry,
            &log,
            sharding,
        )?;
        let pid = child.id().context("the operator's pid")?;
        replicas.push((identity, child, pid, log));
    }
    let mut started = Vec::new();
    for (identity, child, pid, log) in replicas {
        let metrics = operator_addr(log.path(), PROBES_LOG, "metrics").await?;
        eprintln!("{identity}: pid {pid}, log {}", log.path().display());
        started.push(Replica {
            identity,
            child,
            pid,
            log,
            metrics,
            at_ready: None,
        });
    }
    let (ready, served) = if let [replica] = started.as_slice() {
        let health = operator_addr(replica.log.path(), PROBES_LOG, "health").await?;
        (restart::ready(&health, spawned).await?, vec![None])
    } else {
        let logs: Vec<&std::path::Path> = started.iter().map(|r| r.log.path()).collect();
        let (ready, served) = spread::wait_split(&logs, shards, spawned).await?;
        (ready, served.into_iter().map(Some).collect())
    };
    for (replica, served) in started.iter_mut().zip(served) {
        let at = AtReady {
            cpu: cpu_seconds(replica.pid)?,
            peak_rss: peak_rss_mb(replica.pid)?,
            served,
        };
        spread::reset_peak_rss(replica.pid)?;
        eprintln!(
            "{} ready {:.2} s after the start: {:.2} s of CPU, peak RSS {:.1} MB{}",
            replica.identity,
            ready.as_secs_f64(),
            at.cpu,
            at.peak_rss,
            at.served
                .as_ref()
                .map_or(String::new(), |s| format!(", shards {:?}", s.shards))
        );
        replica.at_ready = Some(at);
    }
    Ok((
        started,
        Restart {
            spawned,
            ready,
            settled: None,
        },
    ))
}

/// `agentic_registry_requests_total` summed over `replicas`.
async fn registry_requests_of(replicas: &[Replica]) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for replica in replicas {
        total += registry_requests(&replica.metrics).await?;
    }
    Ok(total)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The namespaces an operator serves, and how it watches them.
#[derive(Clone, Copy)]
struct Watched<'a> {
    namespaces: &'a [String],
    /// Ignored for a single namespace, which is always watched alone.
    scope: WatchScope,
}

/// How a replica of a sharded round is started.
#[derive(Clone, Copy)]
struct Sharding<'a> {
    /// Where the shard Leases are (`POD_NAMESPACE`).
    leases_namespace: &'a str,
    /// Its name in them (`POD_NAME`).
    identity: &'a str,
    /// `--shards`.
    shards: u32,
}

fn start_operator(
    binary: &std::path::Path,
    extra_args: &[String],
    env: &TestEnv,
    watched: Watched<'_>,
    registry: &str,
    log: &tempfile::NamedTempFile,
    sharding: Option<Sharding<'_>>,
) -> anyhow::Result<tokio::process::Child> {
    let Watched { namespaces, scope } = watched;
    // One namespace is always watched alone, as the bench always did.
    let scope = if namespaces.len() > 1 {
        scope
    } else {
        WatchScope::Listed
    };
    let watched: &[String] = match scope {
        WatchScope::Listed => namespaces,
        WatchScope::All => &[],
    };
    let mut command = operator_command_watching(binary, env, watched);
    command.args(["--insecure-registry", registry]);
    if let Some(sharding) = sharding {
        command
            .args(["--shards", &sharding.shards.to_string()])
            .env("POD_NAMESPACE", sharding.leases_namespace)
            .env("POD_NAME", sharding.identity);
    }
    command
        .args(extra_args)
        .stdout(log.reopen()?)
        .stderr(log.reopen()?)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

/// The Gateway `llm`, three image SkillCards, and the Agent `bench` using them, Ready, in
/// each of `namespaces`. With `trust`, the images are signed and a ClusterSkillTrustPolicy
/// requires it first.
async fn fixture(
    client: &Client,
    namespaces: &[String],
    registry: &str,
    trust: bool,
) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let signing = if trust {
        Some(require_signatures(client, registry).await?)
    } else {
        None
    };
    let mut images = Vec::new();
    for skill in SKILLS {
        let dir = write_skill(tmp.path(), skill, "A skill for the benchmark.")?;
        let pushed = push_to(registry, &[dir], &format!("bench/{skill}:1")).await?;
        if let Some((key, registry_client)) = &signing {
            let image = agentic_oci::ResolvedImage::from_pinned(&pushed)?;
            agentic_trust::sign_image(registry_client, &RegistryAuth::Anonymous, &image, key)
                .await
                .with_context(|| format!("signing {pushed}"))?;
        }
        let tagged = pushed.split('@').next().unwrap_or(&pushed).to_string();
        images.push((skill, tagged));
    }
    for ns in namespaces {
        let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
        for (skill, tagged) in &images {
            apply(
                &cards,
                &SkillCard {
                    metadata: meta(skill),
                    spec: SkillCardSpec {
                        image: Some(tagged.clone()),
                        skill_type: SkillType::Skill,
                        ..SkillCardSpec::default()
                    },
                    status: None,
                },
            )
            .await?;
        }
        llm_gateway(client, ns).await?;
        let agents: Api<Agent> = Api::namespaced(client.clone(), ns);
        apply(
            &agents,
            &Agent {
                metadata: meta(AGENT),
                spec: AgentSpec {
                    image: "harness.invalid/agent:1".into(),
                    gateways: vec![ObjectRef { name: "llm".into() }],
                    skill_cards: SKILLS
                        .iter()
                        .map(|name| ObjectRef {
                            name: (*name).into(),
                        })
                        .collect(),
                    skill_delivery: "native".into(),
                    ..AgentSpec::default()
                },
                status: None,
            },
        )
        .await?;
    }
    for ns in namespaces {
        agent_ready(client, ns, signing.is_some()).await?;
    }
    Ok(())
}

/// Waits until the Agent `bench` in `ns` is Ready with every skill pinned (and, when
/// `signed`, every SkillCard verified).
async fn agent_ready(client: &Client, ns: &str, signed: bool) -> anyhow::Result<()> {
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    let agents: Api<Agent> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let agent = agents.get(AGENT).await?;
        let status = agent.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready && status.skills.len() == SKILLS.len() {
            if signed {
                for name in SKILLS {
                    let verification = cards.get(name).await?.status.and_then(|s| s.verification);
                    if verification.as_ref().map(|v| v.state) != Some(VerificationState::Verified) {
                        bail!("SkillCard {name} is Ready but not verified: {verification:?}");
                    }
                }
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the Agent in {ns} never turned Ready: {:?}",
                status.conditions
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A signing key made for this run, a registry client to sign with, and the
/// ClusterSkillTrustPolicy `bench-signed` that requires the key's signature on every image
/// under `<registry>/bench/`.
async fn require_signatures(
    client: &Client,
    registry: &str,
) -> anyhow::Result<(agentic_trust::SigningKey, agentic_oci::RegistryClient)> {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let key = agentic_trust::SigningKey::from_pem(&pair.serialize_pem(), "the bench's key", None)?;
    let policies: Api<ClusterSkillTrustPolicy> = Api::all(client.clone());
    apply(
        &policies,
        &ClusterSkillTrustPolicy::new(
            "bench-signed",
            ClusterSkillTrustPolicySpec {
                policy: TrustPolicy {
                    images: vec![format!("{registry}/bench/**")],
                    keys: vec![KeySource {
                        pem: Some(pair.public_key_pem()),
                        ..KeySource::default()
                    }],
                    ..TrustPolicy::default()
                },
            },
        ),
    )
    .await?;
    let registry_client = agentic_oci::RegistryClient::new(agentic_oci::RegistryOptions {
        insecure_registries: vec![registry.to_owned()],
        ..agentic_oci::RegistryOptions::default()
    })?;
    Ok((key, registry_client))
}

/// The line the operator logs once it serves probes and metrics, with the fields `metrics`
/// and `health`.
const PROBES_LOG: &str = "serving probes and metrics";

/// An address the operator logs in its line `message`, as the field `field`.
async fn operator_addr(
    log: &std::path::Path,
    message: &str,
    field: &str,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let prefix = format!("{field}=");
    loop {
        let text = std::fs::read_to_string(log)?;
        let addr = text
            .lines()
            .filter(|line| line.contains(message))
            .find_map(|line| {
                let (_, rest) = line.split_once(&prefix)?;
                rest.split_whitespace().next().map(str::to_owned)
            });
        if let Some(addr) = addr {
            return Ok(addr);
        }
        if Instant::now() > deadline {
            bail!("the operator never logged its {field} address; its log:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `agentic_registry_requests_total` of the operator serving metrics at `addr`.
async fn registry_requests(addr: &str) -> anyhow::Result<f64> {
    metric(addr, "agentic_registry_requests_total ")
        .await?
        .with_context(|| format!("no agentic_registry_requests_total at {addr}/metrics"))
}

/// The value of the operator's metric sample starting with `series` (its name and labels,
/// then a space), if it has one.
async fn metric(addr: &str, series: &str) -> anyhow::Result<Option<f64>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to the operator's metrics at {addr}"))?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    response
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .map(|value| {
            value
                .trim()
                .parse()
                .context("a metric that is not a number")
        })
        .transpose()
}

/// With `--settled`: waits until the replicas together count every finished existing run
/// (`agentic_objects`, refreshed every 5 s), so that the timed runs meet the operator as it
/// is once a restart is over; how long from `since`.
async fn settled(
    replicas: &[Replica],
    finished: usize,
    since: Instant,
) -> anyhow::Result<Duration> {
    const SUCCEEDED: &str = "agentic_objects{kind=\"AgentRun\",phase=\"Succeeded\"} ";
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut counted = 0.0;
        for replica in replicas {
            counted += metric(&replica.metrics, SUCCEEDED).await?.unwrap_or(0.0);
        }
        if counted >= finished as f64 {
            return Ok(since.elapsed());
        }
        if Instant::now() > deadline {
            bail!("the replicas count {counted} of {finished} finished runs after 600 s");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The label of the timed runs, which the bench's own watch of runs selects: a restart round
/// must not list the existing runs before it creates the timed ones.
const TIMED_LABEL: &str = "agentic-bench/timed";

fn bench_run(name: &str) -> AgentRun {
    AgentRun {
        metadata: ObjectMeta {
            labels: Some([(TIMED_LABEL.to_string(), "true".to_string())].into()),
            ..meta(name)
        },
        spec: AgentRunSpec {
            agent_ref: AGENT.into(),
            ..AgentRunSpec::default()
        },
        status: None,
    }
}

/// When each sandbox pod, each run's recorded sandbox and each run's recorded skill loads
/// (`--report-loads`: a load of each of its skills) were first seen, from watches.
struct Seen {
    pods: Arc<Mutex<HashMap<String, Instant>>>,
    runs: Arc<Mutex<HashMap<String, Instant>>>,
    loads: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Seen {
    /// Watches the runs and pods of `ns`, or of every namespace.
    async fn watch(client: &Client, ns: Option<&str>) -> anyhow::Result<Self> {
        let pods = Arc::new(Mutex::new(HashMap::new()));
        let runs = Arc::new(Mutex::new(HashMap::new()));
        let loads = Arc::new(Mutex::new(HashMap::new()));
        let (listed_tx, mut listed_rx) = tokio::sync::mpsc::channel(2);
        let api: Api<Pod> = ns.map_or_else(
            || Api::all(client.clone()),
            |ns| Api::namespaced(client.clone(), ns),
        );
        let seen = pods.clone();
        let tx = listed_tx.clone();
        tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default().labels(RUN_LABEL)));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        lock(&seen)
                            .entry(pod.name_any())
                            .or_insert_with(Instant::now);
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = tx.send(()).await;
                    }
                    _ => {}
                }
            }
        });
        let api: Api<AgentRun> = ns.map_or_else(
            || Api::all(client.clone()),
            |ns| Api::namespaced(client.clone(), ns),
        );
        let (seen, seen_loads) = (runs.clone(), loads.clone());
        tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default().labels(TIMED_LABEL)));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)) => {
                        let Some(status) = &run.status else { continue };
                        if status.sandbox_name.is_some() {
                            lock(&seen)
                                .entry(run.name_any())
                                .or_insert_with(Instant::now);
                        }
                        if !status.skills.is_empty()
                            && status.skills.iter().all(|skill| skill.loads.is_some())
                        {
                            lock(&seen_loads)
                                .entry(run.name_any())
                                .or_insert_with(Instant::now);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = listed_tx.send(()).await;
                    }
                    _ => {}
                }
            }
        });
        for _ in 0..2 {
            listed_rx.recv().await.context("a watch ended")?;
        }
        Ok(Self { pods, runs, loads })
    }

    /// Waits until `n` runs were seen with a load of each of their skills recorded; the last
    /// of those moments.
    async fn recorded(&self, n: usize, limit: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let recorded = lock(&self.loads).len();
            if recorded >= n {
                return Ok(lock(&self.loads)
                    .values()
                    .max()
                    .copied()
                    .unwrap_or_else(Instant::now));
            }
            if Instant::now() > deadline {
                bail!("after {limit:?}: {recorded} of {n} runs with their skill loads recorded");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `n` pods and `n` runs with a sandbox were seen; the last of those moments.
    async fn converged(&self, n: usize, limit: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let (pods, runs) = (lock(&self.pods).len(), lock(&self.runs).len());
            if pods >= n && runs >= n {
                let last = |m: &Mutex<HashMap<String, Instant>>| lock(m).values().max().copied();
                return Ok(last(&self.pods)
                    .max(last(&self.runs))
                    .unwrap_or_else(Instant::now));
            }
            if Instant::now() > deadline {
                bail!("after {limit:?}: {pods} of {n} pods, {runs} of {n} runs with a sandbox");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Counts of `apiserver_request_total` by verb and resource (`resource/subresource`).
type Counts = BTreeMap<(String, String), f64>;

async fn request_counts(client: &Client) -> anyhow::Result<Counts> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut counts = Counts::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split("\",")
                .filter_map(|kv| kv.split_once("=\""))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let resource = label("resource");
        // Non-resource URLs: /metrics itself, health checks.
        if resource.is_empty() {
            continue;
        }
        let resource = match label("subresource").as_str() {
            "" => resource,
            sub => format!("{resource}/{sub}"),
        };
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        *counts.entry((label("verb"), resource)).or_default() += value;
    }
    Ok(counts)
}

fn subtract(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v != 0.0)
        .collect()
}

/// What the API server does by itself whoever its clients are: renew its identity Lease,
/// reconcile the `kubernetes` Service's endpoints, and list LimitRanges for admission.
fn is_apiserver_own(resource: &str) -> bool {
    ["leases", "endpoints", "limitranges"].contains(&resource)
}

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION"
    )
}

/// Prints `counts / n` by verb and resource; the totals of reads and writes (per `n`).
/// What the API server does by itself is shown but not counted.
fn print_table(title: &str, counts: &Counts, n: f64) -> (f64, f64) {
    println!("  {title}:");
    let (mut reads, mut writes) = (0.0, 0.0);
    for ((verb, resource), count) in counts {
        let own = is_apiserver_own(resource);
        let note = if own {
            "  (the API server's own; not counted)"
        } else {
            ""
        };
        println!("    {verb:<8} {resource:<28} {:>8.2}{note}", count / n);
        if own {
            continue;
        }
        if is_write(verb) {
            writes += count / n;
        } else if verb != "WATCH" {
            reads += count / n;
        }
    }
    (reads, writes)
}

/// Waits until the API server's write counters stop moving for ten seconds (a loaded operator
/// can pause for seconds between passes); how long that took.
async fn quiesce(client: &Client) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let writes = |c: &Counts| -> f64 {
        c.iter()
            .filter(|((verb, resource), _)| is_write(verb) && !is_apiserver_own(resource))
            .map(|(_, v)| v)
            .sum()
    };
    let mut last = writes(&request_counts(client).await?);
    let mut still = Instant::now();
    while still.elapsed() < Duration::from_secs(10) && started.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = writes(&request_counts(client).await?);
        if now != last {
            last = now;
            still = Instant::now();
        }
    }
    Ok(started.elapsed())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// User plus system CPU seconds of `pid`, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("the format of /proc/<pid>/stat")?
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15; the first after the ')' is field 3.
    let ticks: f64 = fields
        .get(11..13)
        .context("utime and stime")?
        .iter()
        .map(|f| f.parse::<f64>().unwrap_or(0.0))
        .sum();
    Ok(ticks / clock_ticks())
}

/// Clock ticks per second, asked of `getconf` once: a CPU snapshot reads five counters at
/// the edge of the measured window.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// `VmHWM` of `pid` in MB.
fn peak_rss_mb(pid: u32) -> anyhow::Result<f64> {
    status_mb(pid, "VmHWM")
}

/// A memory figure of `/proc/<pid>/status` (`VmHWM`, `VmRSS`), in MB.
fn status_mb(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("{field} in /proc/<pid>/status"))?;
    Ok(kb / 1024.0)
}

/// The API server's ceiling for one run's writes, made by the loader itself, measured as the
/// operator's rounds are: from the first create to the last run seen with its sandbox.
async fn ceiling(
    client: &Client,
    ns: &str,
    args: &Args,
    processes: &Processes,
) -> anyhow::Result<String> {
    let agent: Agent = Api::namespaced(client.clone(), ns).get(AGENT).await?;
    let gateway: agentic_api::Gateway = Api::namespaced(client.clone(), ns).get("llm").await?;
    let cards: Api<SkillCard> = Api::namespaced(client.clone(), ns);
    let mut skills = Vec::new();
    for pinned in &agent.status.clone().unwrap_or_default().skills {
        let card = cards.get(&pinned.skill_card).await?;
        skills.push(MountedSkill::from_agent_skill(
            pinned,
            Lookup::Found(&card),
        )?);
    }
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "agentic-bench".into(),
            instance: None,
        },
    );
    let shared = Arc::new(RunTemplate {
        agent,
        gateway,
        skills,
        recorder,
    });
    let seen = Seen::watch(client, Some(ns)).await?;
    let cpu_before = processes.cpu()?;
    let before = request_counts(client).await?;
    let started = Instant::now();
    futures::stream::iter(0..args.runs)
        .map(|i| {
            let client = client.clone();
            let shared = shared.clone();
            async move { one_runs_writes(&client, ns, &format!("run-{i:05}"), &shared).await }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<()>()
        .await?;
    let limit = Duration::from_secs(60);
    let elapsed = seen
        .converged(args.runs, limit)
        .await?
        .duration_since(started);
    let cpu = processes.cpu()?.since(&cpu_before);
    let after = request_counts(client).await?;
    let n = args.runs as f64;
    println!(
        "API server ceiling: {} runs' writes, concurrency {}",
        args.runs, args.concurrency
    );
    cpu.print("CPU during the runs", n, elapsed);
    let (reads, writes) = print_table(
        "API requests per run (loader's)",
        &subtract(&after, &before),
        n,
    );
    println!("  per run: {reads:.2} reads, {writes:.2} writes");
    Ok(format!(
        "  ceiling: {:.1} runs/s ({} runs in {:.2} s, create of the first to status of the last)",
        n / elapsed.as_secs_f64(),
        args.runs,
        elapsed.as_secs_f64()
    ))
}

/// The processes whose CPU the bench reports: the operator (not in `--ceiling` rounds), the
/// API server and etcd (what the operator's requests and watches cost them), and the bench
/// itself (the loader and the watches that time the runs). On a machine that is saturated,
/// as this one is during a round, runs/s is about the cores over their CPU per run, so their
/// sum compares the operator with the ceiling more steadily than runs/s when the machine is
/// shared; the time the hypervisor gave to other guests (steal) says how shared it was.
struct Processes {
    /// The operator's processes: one, one per replica, or none.
    operators: Vec<u32>,
    apiserver: u32,
    etcd: u32,
}

/// CPU seconds of [`Processes`] and the machine's stolen seconds, at one moment or between
/// two.
struct Cpu {
    /// Summed over the replicas; `None` in a `--ceiling` round.
    operator: Option<f64>,
    apiserver: f64,
    etcd: f64,
    bench: f64,
    stolen: f64,
}

impl Processes {
    fn of(env: &TestEnv, operators: &[u32]) -> anyhow::Result<Self> {
        let named = |name: &str| {
            env.pids()
                .into_iter()
                .find(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|comm| comm.trim() == name)
                })
                .with_context(|| format!("no {name} process in the test environment"))
        };
        Ok(Self {
            operators: operators.to_vec(),
            apiserver: named("kube-apiserver")?,
            etcd: named("etcd")?,
        })
    }

    fn cpu(&self) -> anyhow::Result<Cpu> {
        Ok(Cpu {
            operator: if self.operators.is_empty() {
                None
            } else {
                let mut sum = 0.0;
                for pid in &self.operators {
                    sum += cpu_seconds(*pid)?;
                }
                Some(sum)
            },
            apiserver: cpu_seconds(self.apiserver)?,
            etcd: cpu_seconds(self.etcd)?,
            bench: cpu_seconds(std::process::id())?,
            stolen: stolen_seconds()?,
        })
    }
}

impl Cpu {
    fn since(&self, before: &Self) -> Self {
        Self {
            operator: self
                .operator
                .zip(before.operator)
                .map(|(now, then)| now - then),
            apiserver: self.apiserver - before.apiserver,
            etcd: self.etcd - before.etcd,
            bench: self.bench - before.bench,
            stolen: self.stolen - before.stolen,
        }
    }

    /// Prints each process's seconds and milliseconds per run over `n` runs, their sum per
    /// run, and the machine's stolen seconds in `elapsed`.
    fn print(&self, title: &str, n: f64, elapsed: Duration) {
        let per_run = |seconds: f64| seconds * 1000.0 / n;
        let processes: Vec<(&str, f64)> = self
            .operator
            .map(|seconds| ("operator", seconds))
            .into_iter()
            .chain([
                ("kube-apiserver", self.apiserver),
                ("etcd", self.etcd),
                ("bench (loader, watches)", self.bench),
            ])
            .collect();
        println!("  {title}:");
        for &(who, seconds) in &processes {
            println!(
                "    {who:<25} {seconds:>6.2} s  {:>6.2} ms per run",
                per_run(seconds)
            );
        }
        let total: f64 = processes.iter().map(|(_, seconds)| seconds).sum();
        println!(
            "    {:<25} {total:>6.2} s  {:>6.2} ms per run",
            "all of them",
            per_run(total)
        );
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        println!(
            "  stolen by other guests    {:.2} s of {:.2} s ({cores} cores)",
            self.stolen,
            cores as f64 * elapsed.as_secs_f64()
        );
    }
}

/// The machine's stolen time (the hypervisor running other guests), in seconds summed over
/// its cores, from `/proc/stat`.
fn stolen_seconds() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let ticks = steal_ticks(&stat).context("the steal field of /proc/stat")?;
    Ok(ticks / clock_ticks())
}

/// The steal field of the summary line of `/proc/stat`: `cpu  user nice system idle iowait
/// irq softirq steal ...`, in clock ticks.
fn steal_ticks(stat: &str) -> Option<f64> {
    let summary = stat.lines().next()?;
    let mut fields = summary.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    fields.nth(7)?.parse().ok()
}

/// What every run of a `--ceiling` round is built from.
struct RunTemplate {
    agent: Agent,
    gateway: agentic_api::Gateway,
    skills: Vec<MountedSkill>,
    recorder: Recorder,
}

/// What the operator writes for one run of the `pod` backend, plus the run itself: the run,
/// its ACP Secret, its ACP Service, its Pod (which carries the skills manifest and params),
/// one status apply, one Event.
async fn one_runs_writes(
    client: &Client,
    ns: &str,
    name: &str,
    template: &RunTemplate,
) -> anyhow::Result<()> {
    let RunTemplate {
        agent,
        gateway,
        skills,
        recorder,
    } = template;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
    let run = runs
        .create(&PostParams::default(), &bench_run(name))
        .await?;
    let owner = run.controller_owner_ref(&()).context("the run's uid")?;
    let params = agentic_core::params::resolve_run(&agent.spec, &run.spec)?;
    let mode = resolve_skill_delivery(&agent.spec.skill_delivery).mode;
    let inputs = SandboxInputs::new(&run, agent, gateway, skills.clone(), mode, params, None)?;
    let post = PostParams::default();
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(
            &post,
            &build_acp_secret(&inputs, "k".repeat(43), &"t".repeat(43), owner.clone()),
        )
        .await?;
    Api::<Service>::namespaced(client.clone(), ns)
        .create(&post, &build_acp_service(&inputs, owner.clone()))
        .await?;
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&post, &build_pod(&inputs, owner))
        .await?;
    let sandbox = sandbox_name(name);
    let mut status = AgentRunStatus {
        sandbox_name: Some(sandbox.clone()),
        skills: inputs.pinned_skills(),
        ..AgentRunStatus::default()
    };
    let outcome = RunOutcome::pending(
        AgentRunReason::SandboxCreating,
        format!("sandbox {sandbox} created; waiting for its pod"),
    );
    outcome.apply(
        &mut status,
        run.metadata.generation,
        agentic_operator::now(),
    );
    let patch = serde_json::json!({
        "apiVersion": AgentRun::api_version(&()),
        "kind": AgentRun::kind(&()),
        "status": status,
    });
    runs.patch_status(
        name,
        &PatchParams::apply("agentic-bench").force(),
        &Patch::Apply(&patch),
    )
    .await?;
    let event = Event {
        type_: EventType::Normal,
        reason: AgentRunReason::SandboxCreating.as_str().into(),
        note: Some(outcome.message),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &run.object_ref(&())).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_number_of_the_summary_line() {
        let stat =
            "cpu  288396 98685 71170 180239 1345 0 1905 9693 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(steal_ticks(stat), Some(9693.0));
    }

    #[test]
    fn a_stat_without_the_summary_line_has_no_steal() {
        assert_eq!(steal_ticks("cpu0 1 2 3 4 5 6 7 8 0 0\n"), None);
        assert_eq!(steal_ticks("cpu  1 2 3\n"), None);
        assert_eq!(steal_ticks(""), None);
    }
}
