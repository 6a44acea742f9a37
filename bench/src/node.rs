//! `make bench BENCH_ARGS="--node"`: what a user waits for, on a real node: from an AgentRun's
//! create to its agent's process started, with 1, 10 and 30 skills, next to a bare pod of the
//! same agent image created by the bench itself (no skills, no operator), which is the limit.
//! That pod is measured as a user gets it (with the ServiceAccount token volume the
//! `ServiceAccount` admission plugin adds to every pod that does not opt out) and with no
//! volume at all.
//!
//! Every milestone is the moment the bench sees it in a watch, on one clock:
//!
//! - `pod`: the run's pod appears (the operator created it);
//! - `scheduled`: the scheduler's `Scheduled` Event, or the pod's `nodeName`, the earlier;
//! - `skills`: the kubelet's `Pulled` Event of the last skill image (the kubelet posts one per
//!   image volume, present or pulled, after the pod's sandbox exists and before its
//!   containers are created), with the pull time the kubelet reports in it;
//! - `started`: the agent's process running: the time containerd stamped on the first line
//!   the agent wrote (`kubectl logs --timestamps`), against the bench's clock at the create
//!   (the same machine's clock). The kubelet's `Started` Event comes a little later, and the
//!   pod's status shows the container running only after the kubelet's next relist (up to a
//!   second later);
//! - `running`: the run's `status.phase` turns `Running` (the operator saw the container
//!   running in the pod's status).
//!
//! The kubelet posts at most 25 Events per pod in a burst (client-go's spam filter): with 30
//! separate images the later ones (its `Created` and `Started` too) are dropped, so their
//! `skills` milestone is the last of the Events seen (each start's line gives the count).
//!
//! One more run, of one skill, has the `credential-proxy` sidecar (its Agent sets
//! `spec.credentialProxy: preferred`; every other Agent sets `off`): next to the run of one
//! skill without it, what the sidecar adds to a start.
//!
//! Skills come from separate images (one SkillCard each) or from one multi-skill image (a
//! SkillCollection). Warm rounds reuse images the node already holds; cold rounds push
//! images with new bytes first, so the kubelet pulls every skill image for the first time.
//!
//! `--prefetch-after SECONDS` measures skill prefetch: the operator runs with
//! `--skill-prefetch=all` (its own image pushed to the node's registry for the prefetch
//! pods) and each cold run starts that long after its Agent turned Ready, as the first run of
//! a newly published Agent would; without it the operator runs with `--skill-prefetch=off`.
//! Compare the cold rows of the two.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic_api::{
    Agent, AgentRun, AgentRunPhase, AgentRunSpec, AgentSpec, CredentialProxyMode, ObjectRef,
    SkillCard, SkillCardSpec, SkillCollection, SkillCollectionSpec,
};
use agentic_fixtures::{apply, llm_gateway, push_to, write_skill};
use agentic_testenv::{TestEnv, TestEnvOptions, push_operator_image};
use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, Container, DownwardAPIProjection, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, EnvVar, EnvVarSource, Event, KeyToPath,
    ObjectFieldSelector, Pod, PodSpec, ProjectedVolumeSource, Secret, SecretKeySelector,
    ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use kube::api::{DeleteParams, LogParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use crate::{Args, lock, meta, start_operator};

/// The agent's container keeps running this long unless the bench deletes its pod first; the
/// stub agent ends its sleep at SIGTERM.
const AGENT_SLEEP_SECONDS: &str = "600";
/// How long one run or bare pod may take to start, cold pulls included.
const START_LIMIT: Duration = Duration::from_secs(120);
/// How long the deletion of one pod may take (the stub agent exits at SIGTERM).
const DELETE_LIMIT: Duration = Duration::from_secs(60);
/// How many unmeasured starts may fail before a scenario's images are all on the node.
const WARMUP_ATTEMPTS: usize = 5;
/// Bytes of a reference file next to each SKILL.md, so a skill is more than its frontmatter.
const REFERENCE_BYTES: usize = 4096;

/// Where a scenario's skills come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// One image and one SkillCard per skill.
    Separate,
    /// One image holding every skill, listed by a SkillCollection.
    OneImage,
}

/// One line of the report: a bare pod, or a run with `skills` skills laid out as `layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// The agent's image alone, with no volume at all (`automountServiceAccountToken: false`).
    Bare,
    /// The same pod as a user gets it: with the `kube-api-access-*` token volume the
    /// `ServiceAccount` admission plugin adds (the test cluster runs without the plugin, so the
    /// bench adds the volume as the plugin would). The limit the ratios are taken against.
    UserBare,
    /// The bare pod plus what a run's pod has besides its skills: two emptyDirs, the
    /// `downwardAPI` volume of the run's two files, a variable from a Secret. What the kubelet
    /// does for those, no operator.
    BareWithVolumes,
    Run {
        skills: usize,
        layout: Layout,
    },
    /// A run of one skill whose Agent keeps the model key behind the `credential-proxy`
    /// sidecar (`spec.credentialProxy: preferred`): the `Run` of one skill plus the sidecar,
    /// which the kubelet starts before the agent. Every other run's Agent sets `off`.
    ProxiedRun,
}

impl Scenario {
    fn all() -> Vec<Scenario> {
        let run = |skills, layout| Scenario::Run { skills, layout };
        vec![
            Scenario::Bare,
            Scenario::UserBare,
            Scenario::BareWithVolumes,
            run(1, Layout::Separate),
            Scenario::ProxiedRun,
            run(10, Layout::Separate),
            run(10, Layout::OneImage),
            run(30, Layout::Separate),
            run(30, Layout::OneImage),
        ]
    }

    fn label(self) -> String {
        match self {
            Scenario::Bare => "bare pod, no volume at all".into(),
            Scenario::UserBare => "bare pod as a user gets it (token volume)".into(),
            Scenario::BareWithVolumes => "bare pod + a run's other volumes".into(),
            Scenario::Run {
                skills,
                layout: Layout::Separate,
            } => format!("run, {skills} skill(s), separate images"),
            Scenario::Run {
                skills,
                layout: Layout::OneImage,
            } => format!("run, {skills} skills, one image"),
            Scenario::ProxiedRun => "run, 1 skill, credential-proxy sidecar".into(),
        }
    }

    /// A run's skills, their layout and whether it has the credential proxy; `None` for a
    /// bare pod.
    fn run_shape(self) -> Option<(usize, Layout, bool)> {
        match self {
            Scenario::Run { skills, layout } => Some((skills, layout, false)),
            Scenario::ProxiedRun => Some((1, Layout::Separate, true)),
            Scenario::Bare | Scenario::UserBare | Scenario::BareWithVolumes => None,
        }
    }

    /// A short name for the objects of this scenario.
    fn slug(self) -> String {
        match self {
            Scenario::Bare => "bare".into(),
            Scenario::UserBare => "userbare".into(),
            Scenario::BareWithVolumes => "barevol".into(),
            Scenario::Run {
                skills,
                layout: Layout::Separate,
            } => format!("sep{skills}"),
            Scenario::Run {
                skills,
                layout: Layout::OneImage,
            } => format!("one{skills}"),
            Scenario::ProxiedRun => "proxy1".into(),
        }
    }
}

/// What the bench saw of one pod, each the first moment it saw it.
#[derive(Clone, Debug, Default)]
struct Milestones {
    pod: Option<Instant>,
    scheduled: Option<Instant>,
    first_skill: Option<Instant>,
    last_skill: Option<Instant>,
    skill_events: usize,
    /// The kubelet's own pull times of the skill images, in seconds, from its `Pulled`
    /// messages ("Successfully pulled image ... in 1.2s"); empty when all were present.
    skill_pulls: Vec<f64>,
    agent_pulled: Option<Instant>,
    created: Option<Instant>,
    started_event: Option<Instant>,
    started_status: Option<Instant>,
    running: Option<Instant>,
    /// The run's Ready message when it failed before its agent started (a kubelet that
    /// refuses pulls beyond its QPS, for one).
    failed: Option<String>,
}

impl Milestones {
    fn started(&self) -> Option<Instant> {
        match (self.started_event, self.started_status) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Milestones by pod name, filled by the watches of one namespace.
#[derive(Clone, Default)]
struct Watches {
    pods: Arc<Mutex<HashMap<String, Milestones>>>,
}

impl Watches {
    async fn start(client: &Client, ns: &str, agent_image: &str) -> anyhow::Result<Self> {
        let watches = Watches::default();
        let (listed_tx, mut listed_rx) = tokio::sync::mpsc::channel(3);

        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let (seen, tx) = (watches.clone(), listed_tx.clone());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(pods, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        let now = Instant::now();
                        seen.update(&pod.name_any(), |m| {
                            m.pod.get_or_insert(now);
                            if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                                m.scheduled.get_or_insert(now);
                            }
                            let running = pod
                                .status
                                .as_ref()
                                .and_then(|s| s.container_statuses.as_ref())
                                .into_iter()
                                .flatten()
                                .any(|c| {
                                    c.name == "agent"
                                        && c.state.as_ref().is_some_and(|s| s.running.is_some())
                                });
                            if running {
                                m.started_status.get_or_insert(now);
                            }
                        });
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = tx.send(()).await;
                    }
                    _ => {}
                }
            }
        });

        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        let (seen, tx, agent_image) = (watches.clone(), listed_tx.clone(), agent_image.to_string());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(events, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(event) | watcher::Event::InitApply(event)) => {
                        seen.event(&event, &agent_image, Instant::now());
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = tx.send(()).await;
                    }
                    _ => {}
                }
            }
        });

        let runs: Api<AgentRun> = Api::namespaced(client.clone(), ns);
        let seen = watches.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(runs, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)) => {
                        let Some(status) = run.status else { continue };
                        let Some(pod) = status.sandbox_name else {
                            continue;
                        };
                        let now = Instant::now();
                        match status.phase {
                            Some(AgentRunPhase::Running) => seen.update(&pod, |m| {
                                m.running.get_or_insert(now);
                            }),
                            Some(AgentRunPhase::Failed) => {
                                let message = status
                                    .conditions
                                    .iter()
                                    .find(|c| c.type_ == "Ready")
                                    .map(|c| format!("{}: {}", c.reason, c.message))
                                    .unwrap_or_default();
                                seen.update(&pod, |m| {
                                    m.failed.get_or_insert(message);
                                });
                            }
                            _ => {}
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = listed_tx.send(()).await;
                    }
                    _ => {}
                }
            }
        });
        for _ in 0..3 {
            listed_rx.recv().await.context("a watch ended")?;
        }
        Ok(watches)
    }

    fn update(&self, pod: &str, change: impl FnOnce(&mut Milestones)) {
        change(lock(&self.pods).entry(pod.to_string()).or_default());
    }

    /// Records what an Event about a pod says: scheduled, a skill image present or pulled,
    /// the agent's image, container created or started.
    fn event(&self, event: &Event, agent_image: &str, now: Instant) {
        let object = &event.involved_object;
        if object.kind.as_deref() != Some("Pod") {
            return;
        }
        let Some(pod) = object.name.as_deref() else {
            return;
        };
        let reason = event.reason.as_deref().unwrap_or_default();
        let message = event.message.as_deref().unwrap_or_default();
        let agent_container = object.field_path.as_deref() == Some("spec.containers{agent}");
        self.update(pod, |m| match reason {
            "Scheduled" => {
                m.scheduled = Some(m.scheduled.map_or(now, |t| t.min(now)));
            }
            "Pulled" if agent_container || message.contains(agent_image) => {
                m.agent_pulled.get_or_insert(now);
            }
            // The kubelet checks image volumes again at every sync of the pod: only those
            // before the agent's own image count.
            "Pulled" if m.agent_pulled.is_none() && m.started_event.is_none() => {
                m.first_skill.get_or_insert(now);
                m.last_skill = Some(now);
                m.skill_events += 1;
                if let Some(seconds) = pull_seconds(message) {
                    m.skill_pulls.push(seconds);
                }
            }
            "Created" if agent_container => {
                m.created.get_or_insert(now);
            }
            "Started" if agent_container => {
                m.started_event.get_or_insert(now);
            }
            _ => {}
        });
    }

    fn get(&self, pod: &str) -> Milestones {
        lock(&self.pods).get(pod).cloned().unwrap_or_default()
    }
}

/// The pull time in a kubelet `Pulled` message: `Successfully pulled image "x" in 1.234s
/// (1.3s including waiting). ...`; `None` for "already present".
fn pull_seconds(message: &str) -> Option<f64> {
    let rest = message.strip_prefix("Successfully pulled image ")?;
    let (_, after) = rest.split_once("\" in ")?;
    let duration = after.split_whitespace().next()?;
    parse_go_duration(duration)
}

/// A Go `time.Duration` as printed: `1.5s`, `812.3ms`, `1m2.5s`, `950µs`.
fn parse_go_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "µs" | "us" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = next;
    }
    Some(total)
}

/// One measured start: the milestones in seconds after the create request.
#[derive(Clone, Debug, Default)]
struct Sample {
    pod: Option<f64>,
    scheduled: Option<f64>,
    first_skill: Option<f64>,
    last_skill: Option<f64>,
    agent_pulled: Option<f64>,
    created: Option<f64>,
    /// The agent's first log line, as containerd stamped it.
    started: f64,
    started_event: Option<f64>,
    started_status: Option<f64>,
    running: Option<f64>,
    skill_events: usize,
    /// The kubelet's pull times of the skill images, summed; `None` when none was pulled.
    pull_sum: Option<f64>,
}

impl Sample {
    /// `started` is the agent's first log line's time less the create's, both wall clock.
    fn of(at: Instant, m: &Milestones, started: f64) -> Self {
        let since = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(at).as_secs_f64());
        Sample {
            pod: since(m.pod),
            scheduled: since(m.scheduled),
            first_skill: since(m.first_skill),
            last_skill: since(m.last_skill),
            agent_pulled: since(m.agent_pulled),
            created: since(m.created),
            started,
            started_event: since(m.started_event),
            started_status: since(m.started_status),
            running: since(m.running),
            skill_events: m.skill_events,
            pull_sum: (!m.skill_pulls.is_empty()).then(|| m.skill_pulls.iter().sum()),
        }
    }
}

/// The time containerd stamped on the first line of a log read with timestamps.
fn first_line_time(log: &str) -> anyhow::Result<jiff::Timestamp> {
    let stamp = log
        .split_whitespace()
        .next()
        .context("the agent wrote nothing")?;
    stamp
        .parse()
        .with_context(|| format!("the log timestamp {stamp:?}"))
}

/// The skills and the Agent of one scenario, ready to run.
struct Prepared {
    agent: String,
}

/// The node bench: every scenario warm, then cold, `args.rounds` times each, interleaved.
pub async fn bench(args: &Args) -> anyhow::Result<()> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let operator = std::fs::canonicalize(&args.operator).with_context(|| {
        format!(
            "the operator binary {} (build it: cargo build --release -p agentic-operator)",
            args.operator.display()
        )
    })?;
    eprintln!("starting the control plane, registry and node");
    let env = TestEnv::start(TestEnvOptions {
        with_agent_sandbox: false,
        with_registry: true,
        with_node: true,
        with_workloads: false,
        bin_dir: None,
    })
    .await?;
    let client = env.client();
    let ns = env.namespace("bench-node").await?;
    let registry = env.registry_addr().context("the registry")?;
    let agent_image = env
        .images()
        .context("the node's images")?
        .stub_agent
        .clone();
    let mut operator_args = args.operator_args.clone();
    // The credential proxy's sidecar and the prefetch pods run the operator's image.
    let image = push_operator_image(&registry, &operator).await?;
    operator_args.push(format!("--operator-image={image}"));
    match args.prefetch_after {
        Some(_) => operator_args.push("--skill-prefetch=all".into()),
        None => operator_args.push("--skill-prefetch=off".into()),
    }
    let log = tempfile::NamedTempFile::new()?;
    let mut child = start_operator(
        &operator,
        &operator_args,
        &env,
        crate::Watched {
            namespaces: std::slice::from_ref(&ns),
            scope: crate::WatchScope::Listed,
        },
        &registry,
        &log,
        None,
    )?;
    eprintln!(
        "operator pid {}, log {}",
        child.id().unwrap_or_default(),
        log.path().display()
    );
    llm_gateway(&client, &ns).await?;
    let watches = Watches::start(&client, &ns, &agent_image).await?;
    let bench = NodeBench {
        client: client.clone(),
        ns: ns.clone(),
        registry,
        agent_image,
        watches,
    };

    let scenarios = Scenario::all();
    let mut warm: BTreeMap<String, Vec<Result<Sample, String>>> = BTreeMap::new();
    let mut cold: BTreeMap<String, Vec<Result<Sample, String>>> = BTreeMap::new();
    let mut prepared = HashMap::new();
    eprintln!("warm-up: unmeasured starts per scenario until its images are on the node");
    for &scenario in &scenarios {
        let ready = bench.prepare(scenario, "warm").await?;
        let mut attempt = 0;
        // A kubelet pulls at most `registryBurst` (10) images at once, then 5 a second
        // (`registryPullQPS`) and fails the rest; each attempt pulls more of them.
        while let Err(failed) = bench
            .start_once(scenario, ready.as_ref(), &format!("warmup{attempt}"))
            .await?
        {
            attempt += 1;
            eprintln!("warm-up of {}: {failed}", scenario.label());
            if attempt == WARMUP_ATTEMPTS {
                bail!(
                    "{} never started in {WARMUP_ATTEMPTS} attempts",
                    scenario.label()
                );
            }
        }
        prepared.insert(scenario.slug(), ready);
    }
    for round in 0..args.rounds {
        for &scenario in &scenarios {
            let ready = prepared.get(&scenario.slug()).and_then(Option::as_ref);
            let sample = bench
                .start_once(scenario, ready, &format!("w{round}"))
                .await?;
            report_one("warm", scenario, &sample);
            warm.entry(scenario.label()).or_default().push(sample);
        }
        for &scenario in &scenarios {
            if scenario.run_shape().is_none() {
                // The agent's image is on the node after the first start: a bare pod has no
                // cold start to measure here.
                continue;
            }
            let tag = format!("c{round}");
            let ready = bench.prepare(scenario, &tag).await?;
            if let Some(wait) = args.prefetch_after {
                // The first run of a new Agent, some time after it turned Ready: what
                // prefetch had to pull its images meanwhile.
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
            let sample = bench.start_once(scenario, ready.as_ref(), &tag).await?;
            report_one("cold", scenario, &sample);
            cold.entry(scenario.label()).or_default().push(sample);
        }
    }
    child.kill().await?;

    let started_median = |scenario: Scenario| {
        warm.get(&scenario.label())
            .map(|results| {
                median(
                    results
                        .iter()
                        .filter_map(|r| r.as_ref().ok())
                        .map(|s| s.started),
                )
            })
            .with_context(|| format!("no {} measured", scenario.label()))
    };
    let bare = Bases {
        user: started_median(Scenario::UserBare)?,
        no_volume: started_median(Scenario::Bare)?,
    };
    println!(
        "agentic-operator node bench: {} rounds, medians (min-max of create -> started); skill prefetch {}",
        args.rounds,
        args.prefetch_after.map_or_else(
            || "off".to_string(),
            |wait| format!("on, cold runs started {wait} s after their Agent turned Ready")
        )
    );
    for (temperature, table) in [("warm", &warm), ("cold", &cold)] {
        println!("  {temperature}:");
        println!(
            "    {:<44} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>15} {:>6} {:>6} {:>9}",
            "",
            "pod",
            "sched",
            "skills",
            "created",
            "started",
            "Running",
            "(min-max)",
            "ratio",
            "(novol)",
            "pulls",
        );
        for scenario in &scenarios {
            let Some(samples) = table.get(&scenario.label()) else {
                continue;
            };
            print_row(&scenario.label(), samples, &bare);
        }
    }
    println!(
        "  ratio: the median create -> agent started over the bare pod's as a user gets it \
         ({:.3} s); (novol): over the bare pod's without any volume ({:.3} s); \
         pulls: the kubelet's summed pull time of the skill images (median)",
        bare.user, bare.no_volume
    );
    Ok(())
}

struct NodeBench {
    client: Client,
    ns: String,
    registry: String,
    agent_image: String,
    watches: Watches,
}

impl NodeBench {
    /// Pushes the scenario's skill images (their bytes marked with `tag`, so each tag gives
    /// new images), creates their SkillCards or SkillCollection and an Agent, and waits until
    /// the Agent is Ready with every skill. `None` for the bare pod.
    async fn prepare(&self, scenario: Scenario, tag: &str) -> anyhow::Result<Option<Prepared>> {
        let Some((skills, layout, proxied)) = scenario.run_shape() else {
            match scenario {
                Scenario::BareWithVolumes => self.bare_volume_sources().await?,
                Scenario::UserBare => self.service_account_sources().await?,
                _ => {}
            }
            return Ok(None);
        };
        let prefix = format!("{}-{tag}", scenario.slug());
        let scratch = tempfile::tempdir()?;
        let dirs: Vec<_> = (0..skills)
            .map(|i| {
                let name = format!("skill-{i:02}");
                let dir = write_skill(scratch.path(), &name, &format!("Bench skill ({prefix})."))?;
                let reference = format!("{prefix} {name}\n").repeat(REFERENCE_BYTES / 16);
                std::fs::write(dir.join("reference.md"), reference)?;
                anyhow::Ok(dir)
            })
            .collect::<Result<_, _>>()?;
        let tagged = |pushed: String| pushed.split('@').next().unwrap_or(&pushed).to_string();
        let mut spec = AgentSpec {
            image: self.agent_image.clone(),
            gateways: vec![ObjectRef { name: "llm".into() }],
            skill_delivery: "native".into(),
            credential_proxy: Some(if proxied {
                CredentialProxyMode::Preferred
            } else {
                CredentialProxyMode::Off
            }),
            ..AgentSpec::default()
        };
        match layout {
            Layout::Separate => {
                let cards: Api<SkillCard> = Api::namespaced(self.client.clone(), &self.ns);
                for (i, dir) in dirs.iter().enumerate() {
                    let card = format!("{prefix}-{i:02}");
                    let image = push_to(
                        &self.registry,
                        std::slice::from_ref(dir),
                        &format!("bench/{card}:1"),
                    )
                    .await?;
                    apply(
                        &cards,
                        &SkillCard {
                            metadata: meta(&card),
                            spec: SkillCardSpec {
                                image: Some(tagged(image)),
                                ..SkillCardSpec::default()
                            },
                            status: None,
                        },
                    )
                    .await?;
                    spec.skill_cards.push(ObjectRef { name: card });
                }
            }
            Layout::OneImage => {
                let image = push_to(&self.registry, &dirs, &format!("bench/{prefix}:1")).await?;
                let collections: Api<SkillCollection> =
                    Api::namespaced(self.client.clone(), &self.ns);
                apply(
                    &collections,
                    &SkillCollection {
                        metadata: meta(&prefix),
                        spec: SkillCollectionSpec {
                            image: Some(tagged(image)),
                            ..SkillCollectionSpec::default()
                        },
                        status: None,
                    },
                )
                .await?;
                spec.skill_collections.push(ObjectRef {
                    name: prefix.clone(),
                });
            }
        }
        let agents: Api<Agent> = Api::namespaced(self.client.clone(), &self.ns);
        apply(
            &agents,
            &Agent {
                metadata: meta(&prefix),
                spec,
                status: None,
            },
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let status = agents.get(&prefix).await?.status.unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            if ready && status.skills.len() == skills {
                return Ok(Some(Prepared { agent: prefix }));
            }
            if Instant::now() > deadline {
                bail!(
                    "the Agent {prefix} never turned Ready: {:?}",
                    status.conditions
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates one run of `prepared`'s Agent (or, without one, a bare pod), waits until its
    /// agent has started (and a run is `Running`), then deletes it and waits until its pod
    /// is gone, so that the next start has the node to itself.
    async fn start_once(
        &self,
        scenario: Scenario,
        prepared: Option<&Prepared>,
        tag: &str,
    ) -> anyhow::Result<Result<Sample, String>> {
        let name = format!("{}-{tag}", scenario.slug());
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let runs: Api<AgentRun> = Api::namespaced(self.client.clone(), &self.ns);
        let sleep = EnvVar {
            name: "STUB_SLEEP_SECONDS".into(),
            value: Some(AGENT_SLEEP_SECONDS.into()),
            value_from: None,
        };
        let ((at, wall), pod_name) = match prepared {
            None => {
                let mut pod = bare_pod(&name, &self.agent_image, sleep);
                match scenario {
                    Scenario::BareWithVolumes => add_run_volumes(&mut pod),
                    Scenario::UserBare => add_token_volume(&mut pod),
                    _ => {}
                }
                let at = (Instant::now(), jiff::Timestamp::now());
                pods.create(&PostParams::default(), &pod).await?;
                (at, name.clone())
            }
            Some(prepared) => {
                let run = AgentRun {
                    metadata: meta(&name),
                    spec: AgentRunSpec {
                        agent_ref: prepared.agent.clone(),
                        env: vec![sleep],
                        ..AgentRunSpec::default()
                    },
                    status: None,
                };
                let at = (Instant::now(), jiff::Timestamp::now());
                runs.create(&PostParams::default(), &run).await?;
                (at, agentic_core::names::sandbox_name(&name))
            }
        };
        let deadline = at + START_LIMIT;
        let milestones = loop {
            let m = self.watches.get(&pod_name);
            if let Some(failed) = m.failed {
                self.remove(&name, &pod_name, prepared.is_some()).await?;
                return Ok(Err(failed));
            }
            let done = m.started().is_some() && (prepared.is_none() || m.running.is_some());
            if done {
                break m;
            }
            if Instant::now() > deadline {
                let run = runs.get_opt(&name).await?.and_then(|r| r.status);
                bail!("{name}: not started in {START_LIMIT:?}: {m:?}; run status {run:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // A moment for late Events of this start (a `Started` after the status showed it).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let log = pods
            .logs(
                &pod_name,
                &LogParams {
                    container: Some("agent".into()),
                    timestamps: true,
                    limit_bytes: Some(4096),
                    ..LogParams::default()
                },
            )
            .await?;
        let first = first_line_time(&log).with_context(|| format!("{name}: {milestones:?}"))?;
        let started = first.duration_since(wall).as_secs_f64();
        let sample = Sample::of(at, &self.watches.get(&pod_name), started);
        self.remove(&name, &pod_name, prepared.is_some()).await?;
        Ok(Ok(sample))
    }

    /// Deletes the run `name` (when `is_run`) and its pod, and waits until the pod is gone:
    /// without kube-controller-manager nothing collects a run's pod.
    async fn remove(&self, name: &str, pod_name: &str, is_run: bool) -> anyhow::Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        if is_run {
            let runs: Api<AgentRun> = Api::namespaced(self.client.clone(), &self.ns);
            runs.delete(name, &DeleteParams::default()).await?;
        }
        match pods.delete(pod_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        let deadline = Instant::now() + DELETE_LIMIT;
        while pods.get_opt(pod_name).await?.is_some() {
            if Instant::now() > deadline {
                bail!("pod {pod_name} still there {DELETE_LIMIT:?} after its deletion");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

/// The Secret of [`Scenario::BareWithVolumes`].
const BARE_SOURCES: &str = "bare-sources";
/// The ServiceAccount a user's pod runs as when it names none.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap of the cluster's CA that every namespace gets and token volumes project.
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Where the `ServiceAccount` admission plugin mounts the token volume.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token lifetime the admission plugin asks for (an hour, plus the 7 s it adds).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

impl NodeBench {
    /// The Secret [`add_run_volumes`] names, as a run's ACP Secret is.
    async fn bare_volume_sources(&self) -> anyhow::Result<()> {
        apply(
            &Api::<Secret>::namespaced(self.client.clone(), &self.ns),
            &Secret {
                metadata: meta(BARE_SOURCES),
                string_data: Some(BTreeMap::from([("secret-key".to_string(), "k".repeat(43))])),
                ..Secret::default()
            },
        )
        .await?;
        Ok(())
    }

    /// What kube-controller-manager gives every namespace and a user's pod's token volume
    /// needs: the `default` ServiceAccount (the kubelet asks for its token) and the
    /// `kube-root-ca.crt` ConfigMap (its content does not matter to the timing).
    async fn service_account_sources(&self) -> anyhow::Result<()> {
        apply(
            &Api::<ServiceAccount>::namespaced(self.client.clone(), &self.ns),
            &ServiceAccount {
                metadata: meta(DEFAULT_SERVICE_ACCOUNT),
                ..ServiceAccount::default()
            },
        )
        .await?;
        apply(
            &Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns),
            &ConfigMap {
                metadata: meta(ROOT_CA_CONFIG_MAP),
                data: Some(BTreeMap::from([(
                    "ca.crt".to_string(),
                    "the cluster's CA bundle".to_string(),
                )])),
                ..ConfigMap::default()
            },
        )
        .await?;
        Ok(())
    }
}

/// A `downwardAPI` file of the pod's field `field_path`.
fn field_file(path: &str, field_path: &str) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            field_path: field_path.into(),
            ..ObjectFieldSelector::default()
        }),
        ..DownwardAPIVolumeFile::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

/// What the `ServiceAccount` admission plugin does to a pod that does not set
/// `automountServiceAccountToken: false`: the `default` ServiceAccount, and a projected
/// volume of its token, the cluster's CA and the namespace, read-only at
/// `/var/run/secrets/kubernetes.io/serviceaccount` in every container.
fn add_token_volume(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.automount_service_account_token = None;
    spec.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT.into());
    let name = "kube-api-access-bench";
    spec.volumes = Some(vec![Volume {
        name: name.into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                        path: "token".into(),
                        ..ServiceAccountTokenProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: ROOT_CA_CONFIG_MAP.into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            mode: None,
                        }]),
                        ..ConfigMapProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![field_file("namespace", "metadata.namespace")]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }]);
    for container in &mut spec.containers {
        container.volume_mounts = Some(vec![VolumeMount {
            read_only: Some(true),
            ..mount(name, TOKEN_MOUNT_PATH)
        }]);
    }
}

/// What a run's pod has besides its skills: `/workspace` and `/tmp` emptyDirs, the two files
/// of a `downwardAPI` volume of the pod's annotations (as big as a run's with a few skills),
/// a variable from a Secret.
fn add_run_volumes(pod: &mut Pod) {
    let manifest = format!(
        "{{\"skills\": [], \"rules\": [], \"pad\": \"{}\"}}\n",
        "x".repeat(600)
    );
    pod.metadata.annotations = Some(BTreeMap::from([
        ("konveyor.io/skills-manifest".to_string(), manifest),
        (
            "konveyor.io/params".to_string(),
            "{\"agent\": {}, \"execution\": {\"mode\": \"auto\"}, \"workflow\": {}}\n".to_string(),
        ),
    ]));
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let empty = |name: &str| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    spec.volumes = Some(vec![
        empty("workspace"),
        empty("tmp"),
        Volume {
            name: "konveyor-run".into(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![
                    field_file(
                        "konveyor-skills.json",
                        "metadata.annotations['konveyor.io/skills-manifest']",
                    ),
                    field_file("params.json", "metadata.annotations['konveyor.io/params']"),
                ]),
                ..DownwardAPIVolumeSource::default()
            }),
            ..Volume::default()
        },
    ]);
    for container in &mut spec.containers {
        container.volume_mounts = Some(vec![
            mount("workspace", "/workspace"),
            mount("tmp", "/tmp"),
            VolumeMount {
                read_only: Some(true),
                sub_path: Some("konveyor-skills.json".into()),
                ..mount("konveyor-run", "/opt/skills/.konveyor-skills.json")
            },
            VolumeMount {
                read_only: Some(true),
                sub_path: Some("params.json".into()),
                ..mount("konveyor-run", "/run/konveyor/params.json")
            },
        ]);
        container.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: "KONVEYOR_ACP_SECRET_KEY".into(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: BARE_SOURCES.into(),
                    key: "secret-key".into(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
        });
    }
}

/// The limit: the agent's image alone in a pod, as plain as a pod gets.
fn bare_pod(name: &str, image: &str, sleep: EnvVar) -> Pod {
    Pod {
        metadata: meta(name),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "agent".into(),
                image: Some(image.into()),
                env: Some(vec![sleep]),
                ..Container::default()
            }],
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn report_one(temperature: &str, scenario: Scenario, sample: &Result<Sample, String>) {
    let s = match sample {
        Ok(s) => s,
        Err(failed) => {
            eprintln!("{temperature} {:<40} failed: {failed}", scenario.label());
            return;
        }
    };
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    eprintln!(
        "{temperature} {:<40} pod {} sched {} skills {}..{} ({} events, pulls {} s) agent-pulled {} created {} started {:.3} (Event {}, status {}) Running {}",
        scenario.label(),
        show(s.pod),
        show(s.scheduled),
        show(s.first_skill),
        show(s.last_skill),
        s.skill_events,
        show(s.pull_sum),
        show(s.agent_pulled),
        show(s.created),
        s.started,
        show(s.started_event),
        show(s.started_status),
        show(s.running),
    );
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

/// The median of a milestone over the samples that saw it; `-` when none did.
fn median_of(samples: &[Sample], pick: impl Fn(&Sample) -> Option<f64>) -> String {
    let values: Vec<f64> = samples.iter().filter_map(pick).collect();
    if values.is_empty() {
        "-".into()
    } else {
        format!("{:.3}", median(values.into_iter()))
    }
}

/// The two bare pods' median starts, which the ratios divide by.
struct Bases {
    /// [`Scenario::UserBare`]'s.
    user: f64,
    /// [`Scenario::Bare`]'s.
    no_volume: f64,
}

fn print_row(label: &str, results: &[Result<Sample, String>], bare: &Bases) {
    let samples: Vec<Sample> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .cloned()
        .collect();
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let failures = match failed.first() {
        None => String::new(),
        Some(first) => format!("  {} of {} failed: {first}", failed.len(), results.len()),
    };
    if samples.is_empty() {
        println!("    {label:<44}{failures}");
        return;
    }
    let started = median(samples.iter().map(|s| s.started));
    let min = samples
        .iter()
        .map(|s| s.started)
        .fold(f64::INFINITY, f64::min);
    let max = samples.iter().map(|s| s.started).fold(0.0, f64::max);
    println!(
        "    {label:<44} {:>7} {:>7} {:>7} {:>7} {started:>7.3} {:>7} {:>15} {:>6.2} {:>6.2} {:>9}{failures}",
        median_of(&samples, |s| s.pod),
        median_of(&samples, |s| s.scheduled),
        median_of(&samples, |s| s.last_skill),
        median_of(&samples, |s| s.created),
        median_of(&samples, |s| s.running),
        format!("({min:.3}-{max:.3})"),
        started / bare.user,
        started / bare.no_volume,
        median_of(&samples, |s| s.pull_sum),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_pull_time_is_read_from_its_message() {
        let message = "Successfully pulled image \"127.0.0.1:5000/bench/a:1@sha256:ab\" in \
                       812.5ms (1.2s including waiting). Image size: 4096 bytes.";
        assert_eq!(pull_seconds(message), Some(0.8125));
        assert_eq!(
            pull_seconds("Successfully pulled image \"x\" in 1m2.5s (1m3s including waiting)."),
            Some(62.5)
        );
        assert_eq!(
            pull_seconds("Container image \"x\" already present on machine"),
            None
        );
    }

    #[test]
    fn go_durations_of_every_unit() {
        assert_eq!(parse_go_duration("950µs"), Some(0.000_95));
        assert_eq!(parse_go_duration("2h"), Some(7200.0));
        assert_eq!(parse_go_duration("1.5x"), None);
        assert_eq!(parse_go_duration("s"), None);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), 2.5);
        assert!(median(std::iter::empty()).is_nan());
    }
}
