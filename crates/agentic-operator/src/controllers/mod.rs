//! The controllers, one module per kind, and how they are wired to their watches.
//!
//! A kind's module holds its pass, the watches its controller follows with the mappers that
//! serve them, and its private state; [`controllers`] wires each kind with one line. Below
//! the kinds, and importing none of them: [`pipeline`] (the wrapper every pass runs in),
//! [`watches`] (one shared watch per kind and scope) and [`support`] (reads of references
//! and the mapping of a changed object to the objects a controller reconciles).

pub mod agent;
pub mod agentrun;
pub mod agentworkflow;
pub mod agentworkflowrun;
mod census;
#[cfg(test)]
pub(crate) mod fake_api;
#[cfg(test)]
mod fake_registry;
pub mod gateway;
mod pipeline;
#[cfg(test)]
pub(crate) mod scenario;
pub mod skillcard;
pub mod skillcollection;
mod support;
mod trustpolicy;
pub mod watch_health;
mod watches;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::caches::{Caches, FinishedRunsWatched, InitialList};
use crate::context::Context;
pub use watches::WatchOptions;
use watches::{Stop, Watches};

pub use pipeline::{Pass, Reconciled};

/// Label every object the operator creates for a run carries, naming the run.
pub use agentic_core::sandbox::RUN_LABEL;
/// How many orphans one pass of the orphan sweep examines at most.
pub use agentrun::MAX_CANDIDATES_PER_PASS;

/// Which namespaces the controllers watch.
#[derive(Clone, Debug)]
pub enum Scope {
    All,
    Namespaces(Vec<String>),
}

/// What `/readyz` reports: ready once every watch has completed its first list (but the
/// finished runs' watches, where those are apart: nothing a new run needs waits for them),
/// and also
/// while the replica waits for leadership. A standby replica is healthy and must count as
/// available, or a rolling update would wait forever for a new pod that cannot lead before
/// the old one goes.
#[derive(Default)]
pub struct Readiness {
    listed: AtomicBool,
    standby: AtomicBool,
    missing_crds: std::sync::Mutex<Vec<String>>,
    /// The failures of the controllers' watches.
    pub watches: Arc<watch_health::WatchHealth>,
}

impl Readiness {
    /// Ready: the CRDs are installed, and the watches have listed and none has been failing
    /// for [`watch_health::UNREADY_AFTER`] (or this replica waits for leadership).
    pub fn is_ready(&self) -> bool {
        self.missing_crds().is_empty()
            && (self.standby.load(Ordering::Relaxed)
                || (self.listed.load(Ordering::Relaxed) && self.broken_watches().is_empty()))
    }

    /// The controllers whose watches have been failing for [`watch_health::UNREADY_AFTER`].
    pub fn broken_watches(&self) -> Vec<watch_health::BrokenWatch> {
        self.watches
            .broken(watch_health::UNREADY_AFTER, Instant::now())
    }

    /// The CRDs (`plural.group`) the controllers need that the API server does not serve.
    pub fn missing_crds(&self) -> Vec<String> {
        self.missing_crds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set_missing_crds(&self, missing: Vec<String>) {
        *self
            .missing_crds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = missing;
    }

    /// Whether this replica is waiting for leadership rather than reconciling.
    pub fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Relaxed)
    }

    /// Marks the replica as waiting for leadership (true) or leading (false).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Relaxed);
    }
}

/// The controllers of one namespace (or of all), ready to be driven.
pub struct Controllers {
    /// Run the controllers until shutdown.
    pub runs: Vec<BoxFuture<'static, ()>>,
    /// Finish when each watch has listed once (true), or stopped before it did (false).
    pub listed: Vec<BoxFuture<'static, bool>>,
    /// The watch caches of the kinds, for counting objects.
    pub caches: Caches,
}

/// Starts every controller for one namespace (or all), and the shared watches they follow;
/// they run until `shutdown` turns true. A kind is one line here: its module subscribes to
/// the watches it follows and hands back its controller.
pub fn controllers(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    options: &WatchOptions,
    health: &Arc<watch_health::WatchHealth>,
    shutdown: watch::Receiver<bool>,
) -> Controllers {
    let stop = move || -> Stop {
        let mut rx = shutdown.clone();
        Box::pin(async move {
            let _ = rx.wait_for(|stop| *stop).await;
        })
    };
    let mut watches = Watches::new(&ctx, namespace, options);
    let w = &mut watches;
    let mut runs = vec![
        skillcard::controller(w, &ctx, &stop),
        skillcollection::controller(w, &ctx, &stop),
        gateway::controller(w, &ctx, &stop),
        agent::controller(w, &ctx, &stop),
        agentworkflow::controller(w, &ctx, &stop),
        agentworkflowrun::controller(w, &ctx, &stop),
        agentrun::controller(w, &ctx, &stop),
        trustpolicy::status::namespaced_controller(w, &ctx, &stop),
        trustpolicy::status::cluster_controller(w, namespace, &ctx, &stop),
    ];
    // Every subscription is made: the caches are known, and the watches can start.
    let caches = watches.caches();
    ctx.register_caches(namespace, caches.clone());
    let (watch_runs, listed) = watches.start(health, &stop);
    runs.extend(watch_runs);
    Controllers {
        runs,
        listed,
        caches,
    }
}

/// Runs the controllers for `scope` until `shutdown` turns true, marking `readiness` once
/// every watch has listed. In-flight reconciles finish before this returns.
pub async fn run_until_shutdown(
    ctx: Arc<Context>,
    scope: Scope,
    readiness: Arc<Readiness>,
    shutdown: watch::Receiver<bool>,
) {
    let namespaces: Vec<Option<String>> = match scope {
        Scope::All => vec![None],
        // Another replica's shards are not even watched.
        Scope::Namespaces(list) => list
            .into_iter()
            .filter(|namespace| ctx.serves(namespace))
            .map(Some)
            .collect(),
    };
    let probed = namespaces.first().cloned().flatten();
    let initial_list = InitialList::probe(&ctx.client, probed.as_deref()).await;
    tracing::info!(?initial_list, "how the watches list");
    let shard_selector = match (namespaces.as_slice(), ctx.shards()) {
        ([None], Some(shards)) => server_side_shards(&ctx.client, shards).await,
        _ => None,
    };
    let finished_runs = FinishedRunsWatched::probe(&ctx.client, probed.as_deref()).await;
    tracing::info!(?finished_runs, "how the finished runs are watched");
    let options = WatchOptions {
        initial_list,
        shard_selector,
        finished_runs,
    };
    let mut runs = Vec::new();
    let mut listed = Vec::new();
    let mut caches = Vec::new();
    let mut sweep_scopes = Vec::new();
    for ns in &namespaces {
        let started = controllers(
            ctx.clone(),
            ns.as_deref(),
            &options,
            &readiness.watches,
            shutdown.clone(),
        );
        runs.extend(started.runs);
        listed.extend(started.listed);
        if let (Some(runs), Some(workflow_runs)) = (
            started.caches.of::<agentic_api::AgentRun>(),
            started.caches.of::<agentic_api::AgentWorkflowRun>(),
        ) {
            sweep_scopes.push(agentrun::SweepScope {
                namespace: ns.clone(),
                runs,
                finished_runs: started.caches.finished_runs.clone(),
                workflow_runs,
            });
        }
        caches.push(started.caches);
    }
    let (every_watch_listed, sweep_after) = watch::channel(false);
    let mark_ready = async move {
        let listed = futures::future::join_all(listed).await;
        if listed.into_iter().all(|listed| listed) {
            readiness.listed.store(true, Ordering::Relaxed);
            every_watch_listed.send_replace(true);
            tracing::info!("every watch has listed; ready");
        }
    };
    let run_all = futures::future::join_all(runs);
    let sweep = agentrun::sweep(
        ctx.clone(),
        sweep_scopes,
        ctx.settings.run_defaults.orphan_sweep_interval,
        sweep_after,
        shutdown.clone(),
    );
    tokio::join!(
        mark_ready,
        run_all,
        sweep,
        census::census(&ctx.metrics, &caches, shutdown)
    );
}

/// The shard selector of `shards` when the API server filters by it (KEP-5866); None when
/// the shards are not its hash ranges (`--shard-watch=client`) or it does not.
async fn server_side_shards(
    client: &kube::Client,
    shards: &crate::shards::ShardFilter,
) -> Option<String> {
    let selector = shards.selector()?;
    if crate::shards::selector::applied(client, &selector).await {
        tracing::info!(%selector, "the API server sends this replica its shards' objects only");
        Some(selector)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::controllers::fake_api::FakeApi;
    use crate::controllers::scenario::context;

    /// Where a controller may read a whole cache (`Store::state`, `Caches::state_of`), and
    /// why: never in a watch mapper, whose work per event must not grow with the objects
    /// cached (indexes serve them, `caches::Index`). A scan in a periodic task or in a pass
    /// over few objects is allowed, listed here with its reason.
    const WHOLE_CACHE_READS: &[(&str, &str)] = &[
        (
            "agent/prefetch.rs",
            "the nodes, in an Agent's prefetch pass (node events reach Agents only when the selected set changes)",
        ),
        ("census.rs", "counts every object, once per census interval"),
        (
            "agentrun/sweep.rs",
            "the orphan sweep, once per sweep interval",
        ),
        (
            "trustpolicy.rs",
            "the trust policies of a namespace (few); the cards a policy change reaches",
        ),
        (
            "trustpolicy/status.rs",
            "a policy's blast radius, at most once per recount interval; policies per run (few)",
        ),
        (
            "watches.rs",
            "hands each listed object on and rebuilds the indexes, once per list",
        ),
    ];

    #[test]
    fn no_watch_mapper_scans_a_cache() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controllers");
        let mut files = vec![root.clone()];
        let mut scanning = BTreeSet::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(
                    std::fs::read_dir(&path)
                        .expect("a source folder")
                        .map(|entry| entry.expect("an entry").path()),
                );
                continue;
            }
            let relative = path
                .strip_prefix(&root)
                .expect("below the root")
                .to_string_lossy()
                .into_owned();
            let is_test = ["scenarios.rs", "scenario.rs", "fake_api.rs"]
                .iter()
                .any(|name| relative.ends_with(name));
            let text = std::fs::read_to_string(&path).expect("a source file");
            // Only the code before a file's own tests.
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            if !is_test && (code.contains(".state()") || code.contains("state_of")) {
                scanning.insert(relative);
            }
        }
        let allowed: BTreeSet<String> = WHOLE_CACHE_READS
            .iter()
            .map(|(file, _)| (*file).to_string())
            .collect();
        assert_eq!(scanning, allowed);
    }

    /// Every kind the operator installs a CRD for.
    fn installed_kinds() -> BTreeSet<String> {
        agentic_api::crds()
            .into_iter()
            .chain(agentic_api::trust_crds())
            .map(|crd| crd.spec.names.kind)
            .collect()
    }

    #[tokio::test]
    async fn wiring_watches_caches_and_counts_every_kind_with_a_crd() {
        let api = FakeApi::default();
        let ctx = context(&api);
        let (_, shutdown) = watch::channel(false);
        let health = Arc::default();
        let started = controllers(
            ctx.clone(),
            None,
            &WatchOptions::default(),
            &health,
            shutdown,
        );
        let cached: BTreeSet<String> = started
            .caches
            .kinds()
            .map(|cache| cache.kind().to_string())
            .collect();
        assert_eq!(cached, installed_kinds());
        let text = ctx.metrics.encode();
        for kind in installed_kinds() {
            for result in ["ok", "error"] {
                let series =
                    format!("agentic_reconciles_total{{kind=\"{kind}\",result=\"{result}\"}} 0");
                assert!(text.contains(&series), "{series} in:\n{text}");
            }
        }
    }
}
