//! A restart over many existing runs (`--existing N`): what a busy platform meets on every
//! upgrade, crash or leader change. N AgentRuns are put on the control plane: 5 % waiting
//! for an Agent that does not exist yet, created while the operator runs so that they carry
//! the status it gives them; then, with the operator stopped, 95 % finished as the operator
//! leaves them (phase, sandbox, pinned skills, conditions). The operator then starts over
//! them, and the timed runs are created as soon as it reports ready.

use std::time::{Duration, Instant};

use agentic_api::AgentRun;
use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::spread::namespace_of;

/// The share of existing runs left waiting, in percent; the rest are finished.
const WAITING_PERCENT: usize = 5;
/// The Agent the waiting runs name, which never exists.
const ABSENT_AGENT: &str = "bench-absent";
/// What existing runs are named after: never `run-`, the timed runs' prefix.
const EXISTING_PREFIX: &str = "old-";

/// How many of `n` existing runs are waiting, and how many finished.
pub fn split(n: usize) -> (usize, usize) {
    let waiting = n * WAITING_PERCENT / 100;
    (waiting, n - waiting)
}

/// Creates the waiting runs of `n` existing ones ([`split`]; run `i` in [`namespace_of`]),
/// `concurrency` requests at a time, while the operator still runs, and waits until it has
/// written each one's status. A waiting run on a live cluster carries the status its
/// operator wrote, so a restart over it has nothing to write; runs without one would make
/// the restart write thousands of statuses that no real restart writes.
pub async fn waiting_runs(
    client: &Client,
    namespaces: &[String],
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let (waiting, _) = split(n);
    create_runs(client, namespaces, 0..waiting, concurrency, |_| None).await?;
    let deadline = Instant::now() + Duration::from_secs(60) + STATUS_PER_RUN * waiting as u32;
    loop {
        let mut without = 0;
        for namespace in namespaces {
            let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace);
            without += runs
                .list(&kube::api::ListParams::default())
                .await?
                .items
                .iter()
                .filter(|run| {
                    run.metadata
                        .name
                        .as_deref()
                        .is_some_and(|name| name.starts_with(EXISTING_PREFIX))
                        && run
                            .status
                            .as_ref()
                            .is_none_or(|status| status.conditions.is_empty())
                })
                .count();
        }
        if without == 0 {
            return Ok(started.elapsed());
        }
        if Instant::now() > deadline {
            bail!("{without} of {waiting} waiting runs still have no status from the operator");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How long the operator may take to write one waiting run's status, on top of a minute.
const STATUS_PER_RUN: Duration = Duration::from_millis(20);

/// Creates the finished runs of `n` existing ones ([`split`]; run `i` in [`namespace_of`])
/// with the operator stopped, each with the status the operator leaves on a finished run;
/// how long that took.
pub async fn finished_runs(
    client: &Client,
    namespaces: &[String],
    n: usize,
    concurrency: usize,
    skills: &[(String, String)],
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let (waiting, _) = split(n);
    let status = finished_status(skills);
    create_runs(client, namespaces, waiting..n, concurrency, |name| {
        let mut status = status.clone();
        status["sandboxName"] = json!(agentic_core::names::sandbox_name(name));
        Some(status)
    })
    .await?;
    Ok(started.elapsed())
}

/// Creates existing runs `indices` over `namespaces`, `concurrency` at a time: a run with a
/// status from `status_of` (given its name) names the bench's Agent and carries that
/// status, one without names an Agent that never exists.
async fn create_runs(
    client: &Client,
    namespaces: &[String],
    indices: std::ops::Range<usize>,
    concurrency: usize,
    status_of: impl Fn(&str) -> Option<serde_json::Value>,
) -> anyhow::Result<()> {
    let status_of = &status_of;
    futures::stream::iter(indices)
        .map(|i| {
            let runs: Api<AgentRun> = Api::namespaced(client.clone(), namespace_of(i, namespaces));
            async move {
                let name = format!("{EXISTING_PREFIX}{i:06}");
                let status = status_of(&name);
                let agent = if status.is_some() {
                    super::AGENT
                } else {
                    ABSENT_AGENT
                };
                let run: AgentRun = serde_json::from_value(json!({
                    "apiVersion": "konveyor.io/v1alpha1",
                    "kind": "AgentRun",
                    "metadata": {"name": name},
                    "spec": {"agentRef": agent, "instructions": "Upgrade the service to Java 21."},
                }))?;
                runs.create(&PostParams::default(), &run).await?;
                if let Some(status) = status {
                    runs.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": status})),
                    )
                    .await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await
}

/// The status a run the operator saw succeed carries: its phase and times, its pinned
/// skills, its conditions.
fn finished_status(skills: &[(String, String)]) -> serde_json::Value {
    let at = jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": at, "observedGeneration": 1,
        })
    };
    json!({
        "phase": "Succeeded",
        "startTime": at,
        "completionTime": at,
        "duration": 42,
        "observedGeneration": 1,
        "skills": skills
            .iter()
            .map(|(name, image)| json!({"name": name, "image": image, "type": "skill"}))
            .collect::<Vec<_>>(),
        "conditions": [
            condition("Ready", "False", "Succeeded", "the agent exited 0"),
            condition("Completed", "True", "Succeeded", "the agent exited 0"),
        ],
    })
}

/// Waits until the operator serving probes at `health` reports ready; how long from `since`.
pub async fn ready(health: &str, since: Instant) -> anyhow::Result<Duration> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let answer = async {
            let mut stream = tokio::net::TcpStream::connect(health).await?;
            stream
                .write_all(b"GET /readyz HTTP/1.1\r\nHost: operator\r\nConnection: close\r\n\r\n")
                .await?;
            let mut text = String::new();
            stream.read_to_string(&mut text).await?;
            anyhow::Ok(text)
        }
        .await;
        if answer.is_ok_and(|text| text.starts_with("HTTP/1.1 200")) {
            return Ok(since.elapsed());
        }
        if Instant::now() > deadline {
            bail!("the operator did not report ready within 600 s of its start");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Agent's pinned skills, as a finished run records them: name and pinned image.
pub async fn pinned_skills(client: &Client, ns: &str) -> anyhow::Result<Vec<(String, String)>> {
    let agents: Api<agentic_api::Agent> = Api::namespaced(client.clone(), ns);
    let agent = agents.get(super::AGENT).await?;
    let status = agent.status.context("the Agent's status")?;
    Ok(status
        .skills
        .iter()
        .map(|skill| (skill.name.clone(), skill.image.clone().unwrap_or_default()))
        .collect())
}
