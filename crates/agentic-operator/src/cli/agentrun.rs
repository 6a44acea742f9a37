//! `agentrun list|start|logs|skills|cancel`: AgentRuns for people at a terminal, against the
//! cluster of the current kubeconfig, without writing YAML.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase, AgentRunSpec, CONDITION_READY, RunParam};
use agentic_core::conditions::find_condition;
use clap::{Args, Subcommand};
use futures::{AsyncBufReadExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

/// How often `--follow` looks at a run that has no running pod yet.
const POLL: Duration = Duration::from_secs(1);
/// The field manager of the patch `cancel` sends.
const FIELD_MANAGER: &str = "agentic-operator-cli";

#[derive(Debug, Args)]
pub struct AgentRunArgs {
    /// The namespace; default: the current kubeconfig context's.
    #[arg(long, short = 'n', global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: AgentRunCommand,
}

#[derive(Debug, Subcommand)]
enum AgentRunCommand {
    /// List the runs with their Agent, phase, reason and age
    #[command(after_long_help = LIST_AFTER)]
    List {
        /// List the runs of every namespace.
        #[arg(long, short = 'A')]
        all_namespaces: bool,
    },
    /// Start a run of an Agent and print its name
    ///
    /// With --follow, then print the agent's log until the run ends.
    #[command(after_long_help = START_AFTER)]
    Start {
        /// The Agent to run (`spec.agentRef`).
        #[arg(value_name = "AGENT")]
        agent: String,
        /// The run's name; default: the Agent's name and a random suffix.
        #[arg(long)]
        name: Option<String>,
        /// A param the Agent declares, NAME=VALUE; repeat for several.
        #[arg(long = "param", value_name = "NAME=VALUE", value_parser = param)]
        params: Vec<RunParam>,
        /// The Gateway to use (`spec.gateway`), when the Agent names none or several.
        #[arg(long)]
        gateway: Option<String>,
        /// Appended to the Agent's prompt (`spec.instructions`).
        #[arg(long)]
        instructions: Option<String>,
        /// Follow the agent's log until the run ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Print the log of a run's agent
    ///
    /// With --follow, wait for the pod, print the log as it is written, then wait for the run
    /// to end.
    #[command(after_long_help = LOGS_AFTER)]
    Logs {
        #[arg(value_name = "RUN")]
        run: String,
        /// Follow the log until the run ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Show a run's skills and how often its agent loaded each
    ///
    /// From the run's status: each pinned skill with its source, loads and first load, then
    /// the names the agent loaded that the run did not mount. Loads are what the agent
    /// reported over OTLP; a harness that reports nothing shows none.
    #[command(after_long_help = SKILLS_AFTER)]
    Skills {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Cancel a run
    ///
    /// Sets `spec.cancel: true`: the operator deletes the run's sandbox and the run ends
    /// Failed with reason Cancelled.
    #[command(after_long_help = CANCEL_AFTER)]
    Cancel {
        #[arg(value_name = "RUN")]
        run: String,
    },
}

const LIST_AFTER: &str = "\
Exit status:
  0  listed
  1  the runs cannot be listed
  2  a usage error

Examples:
  agentic-operator agentrun list
  agentic-operator agentrun list -A";

const START_AFTER: &str = "\
Exit status:
  0  started; with --follow, the run Succeeded
  1  the run could not be started; with --follow, it Failed
  2  a usage error

Examples:
  # Start and print the run's name
  agentic-operator agentrun start java-migrator --param target=21

  # Start with a name, follow the agent's log, exit with the run's outcome
  agentic-operator agentrun start java-migrator --name upgrade-to-21 --param target=21 -f";

const LOGS_AFTER: &str = "\
Exit status:
  0  printed; with --follow, the run Succeeded
  1  the log cannot be read; with --follow, the run Failed
  2  a usage error

Examples:
  agentic-operator agentrun logs upgrade-to-21
  agentic-operator agentrun logs -n team-a upgrade-to-21 -f";

const SKILLS_AFTER: &str = "\
Exit status:
  0  shown
  1  the run cannot be read
  2  a usage error

Examples:
  agentic-operator agentrun skills upgrade-to-21";

const CANCEL_AFTER: &str = "\
Exit status:
  0  cancelled
  1  the run cannot be cancelled
  2  a usage error

Examples:
  agentic-operator agentrun cancel upgrade-to-21";

/// `NAME=VALUE`, split at the first `=`.
fn param(text: &str) -> Result<RunParam, String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok(RunParam {
            name: name.to_owned(),
            value: value.to_owned(),
        }),
        _ => Err("expected NAME=VALUE".to_owned()),
    }
}

pub fn run(args: AgentRunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(args)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(args: AgentRunArgs) -> Result<ExitCode, String> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("loading the kubeconfig: {e}"))?;
    let namespace = args
        .namespace
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| format!("connecting to the cluster: {e}"))?;
    let runs: Api<AgentRun> = Api::namespaced(client.clone(), &namespace);
    match args.command {
        AgentRunCommand::List { all_namespaces } => {
            let api = if all_namespaces {
                Api::all(client)
            } else {
                runs
            };
            list(&api, all_namespaces).await
        }
        AgentRunCommand::Start {
            agent,
            name,
            params,
            gateway,
            instructions,
            follow,
        } => {
            let run = AgentRun {
                metadata: ObjectMeta {
                    generate_name: name.is_none().then(|| format!("{agent}-")),
                    name,
                    ..ObjectMeta::default()
                },
                spec: AgentRunSpec {
                    agent_ref: agent,
                    gateway,
                    params,
                    instructions,
                    ..AgentRunSpec::default()
                },
                status: None,
            };
            let created = runs
                .create(&PostParams::default(), &run)
                .await
                .map_err(|e| format!("creating the AgentRun in namespace {namespace}: {e}"))?;
            let name = created.name_any();
            println!("agentrun/{name} created");
            if follow {
                let pods = Api::namespaced(client, &namespace);
                return follow_run(&runs, &pods, &name).await;
            }
            Ok(ExitCode::SUCCESS)
        }
        AgentRunCommand::Logs { run, follow } => {
            let pods = Api::namespaced(client, &namespace);
            if follow {
                return follow_run(&runs, &pods, &run).await;
            }
            let found = runs
                .get(&run)
                .await
                .map_err(|e| format!("reading AgentRun {namespace}/{run}: {e}"))?;
            let pod = found
                .status
                .as_ref()
                .and_then(|status| status.sandbox_name.clone())
                .ok_or_else(|| no_sandbox(&namespace, &found))?;
            let log = pods
                .logs(&pod, &agent_log(false))
                .await
                .map_err(|e| format!("reading the log of pod {namespace}/{pod}: {e}"))?;
            print!("{log}");
            Ok(ExitCode::SUCCESS)
        }
        AgentRunCommand::Skills { run } => {
            let found = runs
                .get(&run)
                .await
                .map_err(|e| format!("reading AgentRun {namespace}/{run}: {e}"))?;
            print!("{}", skills_table(&found.status.unwrap_or_default()));
            Ok(ExitCode::SUCCESS)
        }
        AgentRunCommand::Cancel { run } => {
            let patch = serde_json::json!({ "spec": { "cancel": true } });
            runs.patch(
                &run,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| format!("cancelling AgentRun {namespace}/{run}: {e}"))?;
            println!("agentrun/{run} cancelled");
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn list(runs: &Api<AgentRun>, all_namespaces: bool) -> Result<ExitCode, String> {
    let listed = runs
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing AgentRuns: {e}"))?;
    let now = k8s_openapi::jiff::Timestamp::now();
    let rows: Vec<Vec<String>> = listed
        .items
        .iter()
        .map(|run| {
            let status = run.status.clone().unwrap_or_default();
            let reason = find_condition(&status.conditions, CONDITION_READY)
                .map(|c| c.reason.clone())
                .unwrap_or_default();
            let age = run
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|created| age(now.duration_since(created.0)))
                .unwrap_or_default();
            let mut row = Vec::new();
            if all_namespaces {
                row.push(run.namespace().unwrap_or_default());
            }
            row.extend([
                run.name_any(),
                run.spec.agent_ref.clone(),
                status.phase.unwrap_or_default().as_str().to_owned(),
                reason,
                age,
            ]);
            row
        })
        .collect();
    let mut header = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE");
    }
    header.extend(["NAME", "AGENT", "PHASE", "REASON", "AGE"]);
    print!("{}", table(&header, &rows));
    Ok(ExitCode::SUCCESS)
}

/// The run's pinned skills with their loads, then the names it loaded without mounting
/// them. `-` for a skill never loaded.
fn skills_table(status: &agentic_api::AgentRunStatus) -> String {
    let rows: Vec<Vec<String>> = status
        .skills
        .iter()
        .map(|skill| {
            vec![
                skill.name.clone(),
                skill.loads.unwrap_or_default().to_string(),
                skill
                    .first_loaded_at
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |t| t.0.to_string()),
                skill.image.clone(),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        "The run mounts no skill.\n".to_owned()
    } else {
        table(&["SKILL", "LOADS", "FIRST LOADED", "SOURCE"], &rows)
    };
    if !status.unmounted_skill_loads.is_empty() {
        let rows: Vec<Vec<String>> = status
            .unmounted_skill_loads
            .iter()
            .map(|load| vec![load.name.clone(), load.count.to_string()])
            .collect();
        out.push_str("\nLoaded but not mounted (not validated, pinned or checked for trust):\n");
        out.push_str(&table(&["NAME", "LOADS"], &rows));
    }
    out
}

/// Columns padded to their widest cell, separated by three spaces, as kubectl prints them.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}   ");
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// An age as kubectl shows it: `45s`, `12m`, `5h`, `3d`.
fn age(elapsed: k8s_openapi::jiff::SignedDuration) -> String {
    let seconds = elapsed.as_secs().max(0);
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86400),
    }
}

fn agent_log(follow: bool) -> LogParams {
    LogParams {
        container: Some(agentic_core::sandbox::AGENT_CONTAINER.to_owned()),
        follow,
        ..LogParams::default()
    }
}

/// Why `logs` has nothing to print for a run without a sandbox: one that ended before it got
/// one never will (its Ready condition says why), so waiting for it would never end.
fn no_sandbox(namespace: &str, run: &AgentRun) -> String {
    let name = run.name_any();
    let status = run.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or_default();
    if !phase.is_finished() {
        return format!("AgentRun {namespace}/{name} has no sandbox yet; use --follow to wait");
    }
    let why = find_condition(&status.conditions, CONDITION_READY)
        .map(|c| format!(" ({}: {})", c.reason, c.message))
        .unwrap_or_default();
    format!(
        "AgentRun {namespace}/{name} {} before it got a sandbox{why}: there is no agent log",
        phase.as_str()
    )
}

/// Waits for the run's agent container to start, prints its log as it is written, then
/// waits for the run to end: exit 0 when it Succeeded, 1 when it Failed.
async fn follow_run(runs: &Api<AgentRun>, pods: &Api<Pod>, name: &str) -> Result<ExitCode, String> {
    let mut printed = false;
    loop {
        let run = runs
            .get(name)
            .await
            .map_err(|e| format!("reading AgentRun {name}: {e}"))?;
        let status = run.status.unwrap_or_default();
        let phase = status.phase.unwrap_or_default();
        if !printed && let Some(pod) = &status.sandbox_name {
            let started = pods
                .get_opt(pod)
                .await
                .map_err(|e| format!("reading pod {pod}: {e}"))?
                .is_some_and(|pod| agent_started(&pod));
            if started {
                let log = pods
                    .log_stream(pod, &agent_log(true))
                    .await
                    .map_err(|e| format!("following the log of pod {pod}: {e}"))?;
                let mut lines = log.lines();
                while let Some(line) = lines
                    .try_next()
                    .await
                    .map_err(|e| format!("reading the log of pod {pod}: {e}"))?
                {
                    println!("{line}");
                }
                printed = true;
                continue;
            }
        }
        if phase.is_finished() {
            let reason = find_condition(&status.conditions, CONDITION_READY)
                .map(|c| format!("{}: {}", c.reason, c.message))
                .unwrap_or_default();
            eprintln!("agentrun/{name} {}: {reason}", phase.as_str());
            return Ok(if phase == AgentRunPhase::Succeeded {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the agent container has started (it runs or has exited): its log exists.
fn agent_started(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.name == agentic_core::sandbox::AGENT_CONTAINER)
        .any(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_in(phase: AgentRunPhase, reason: &str) -> AgentRun {
        let mut run = AgentRun::new("fix-1", AgentRunSpec::default());
        run.status = Some(agentic_api::AgentRunStatus {
            phase: Some(phase),
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: CONDITION_READY.to_owned(),
                status: "False".to_owned(),
                reason: reason.to_owned(),
                message: "Agent team/fixer does not exist".to_owned(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            }],
            ..Default::default()
        });
        run
    }

    #[test]
    fn a_run_that_failed_without_a_sandbox_is_not_waited_for() {
        let message = no_sandbox("team", &run_in(AgentRunPhase::Failed, "AgentNotFound"));
        assert_eq!(
            message,
            "AgentRun team/fix-1 Failed before it got a sandbox (AgentNotFound: Agent team/fixer \
             does not exist): there is no agent log"
        );
        assert!(!message.contains("--follow"), "{message}");
        let pending = no_sandbox("team", &run_in(AgentRunPhase::Pending, "Queued"));
        assert_eq!(
            pending,
            "AgentRun team/fix-1 has no sandbox yet; use --follow to wait"
        );
    }

    #[test]
    fn params_split_at_the_first_equals_sign() {
        let parsed = param("query=a=b").expect("parses");
        assert_eq!(
            (parsed.name.as_str(), parsed.value.as_str()),
            ("query", "a=b")
        );
        assert_eq!(param("empty=").expect("parses").value, "");
        for wrong in ["noequals", "=value"] {
            assert!(param(wrong).is_err(), "{wrong} was accepted");
        }
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let rows = vec![
            vec!["fix-1".to_owned(), "Running".to_owned()],
            vec!["a-much-longer-name".to_owned(), "Failed".to_owned()],
        ];
        assert_eq!(
            table(&["NAME", "PHASE"], &rows),
            "NAME                 PHASE\nfix-1                Running\na-much-longer-name   Failed\n"
        );
    }

    #[test]
    fn the_skills_table_shows_loads_and_unmounted_names() {
        let status: agentic_api::AgentRunStatus = serde_json::from_value(serde_json::json!({
            "skills": [
                {"name": "java", "image": "r/java@sha256:ab", "loads": 2,
                 "firstLoadedAt": "2026-12-05T03:00:00Z"},
                {"name": "style", "image": "configmap:style-skill"},
            ],
            "unmountedSkillLoads": [{"name": "baked-in", "count": 1}],
        }))
        .expect("a status");
        assert_eq!(
            skills_table(&status),
            "SKILL   LOADS   FIRST LOADED           SOURCE\n\
             java    2       2026-12-05T03:00:00Z   r/java@sha256:ab\n\
             style   0       -                      configmap:style-skill\n\
             \n\
             Loaded but not mounted (not validated, pinned or checked for trust):\n\
             NAME       LOADS\n\
             baked-in   1\n"
        );
        assert_eq!(
            skills_table(&agentic_api::AgentRunStatus::default()),
            "The run mounts no skill.\n"
        );
    }

    #[test]
    fn ages_read_like_kubectls() {
        for (seconds, shown) in [
            (5, "5s"),
            (59, "59s"),
            (60, "1m"),
            (7200, "2h"),
            (90000, "1d"),
        ] {
            assert_eq!(
                age(k8s_openapi::jiff::SignedDuration::from_secs(seconds)),
                shown
            );
        }
    }
}
