//! The passes of finished runs, which the runs' watch keeps out of its cache as compact
//! entries ([`FinishedRunCache`], [`agentic_core::finished`]). A finished run is passed
//! when the operator ended it and its sandbox is to be stopped (again after a restart: the
//! sandbox may still exist), when its time to live is over, and when its agent reported
//! skill loads after it ended. Nothing waits per run in the controller's queue: the
//! expiries wait in time order in the cache, and a list hands no finished run to the
//! controller. Each pass reads its run from the API server (the entry holds too little for
//! the pass, and a finished run is passed about once) and runs through the one wrapper as
//! every pass does: [`finish`](super::finish) decides, the wrapper writes the status when
//! it changed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use agentic_api::{AgentRun, AgentRunPhase};
use futures::channel::mpsc::{UnboundedReceiver, unbounded};
use futures::{Stream, StreamExt};
use kube::Api;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

use super::KIND;
use crate::caches::{FinishedRunCache, Guarded, RunName};
use crate::context::Context;
use crate::controllers::pipeline::guarded;
use crate::controllers::watches::Stop;

/// How long the schedule sleeps when no run expires: it wakes sooner when one is kept.
const IDLE: Duration = Duration::from_secs(3600);

/// Passes the finished runs of `finished` as they come due (`due`: a sandbox to stop;
/// their expiries; `reported`: loads reported), at most `ctx`'s reconcile concurrency at
/// once, until `stop`.
pub(super) async fn drive(
    finished: FinishedRunCache,
    due: UnboundedReceiver<RunName>,
    reported: impl Stream<Item = ObjectRef<Guarded<AgentRun>>> + Send + 'static,
    ctx: Arc<Context>,
    stop: Stop,
) {
    let (retry, retried) = unbounded();
    let kept = finished.clone();
    let reported = reported.filter_map(move |run| {
        let name = run.namespace.map(|namespace| (namespace, run.name));
        std::future::ready(name.filter(|(namespace, name)| kept.contains(namespace, name)))
    });
    let passes = futures::stream::select_all([
        due.boxed(),
        retried.boxed(),
        expiries(finished.clone()).boxed(),
        reported.boxed(),
    ])
    .take_until(stop);
    let concurrency = usize::from(ctx.settings.reconcile_concurrency).max(1);
    passes
        .for_each_concurrent(concurrency, |(namespace, name)| {
            let (finished, ctx, retry) = (&finished, &ctx, retry.clone());
            async move {
                if let Err(delay) = pass(&namespace, &name, finished, ctx).await {
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = retry.unbounded_send((namespace, name));
                    });
                }
            }
        })
        .await;
}

/// The runs whose time to live is over, each once, as time passes.
fn expiries(finished: FinishedRunCache) -> impl Stream<Item = RunName> {
    futures::stream::unfold(
        (finished, VecDeque::new()),
        |(finished, mut expired)| async move {
            loop {
                if let Some(run) = expired.pop_front() {
                    return Some((run, (finished, expired)));
                }
                let now = crate::now().0.as_second();
                let (taken, next) = {
                    let mut runs = finished.lock();
                    (runs.take_expired(now), runs.next_expiry())
                };
                expired.extend(taken);
                if !expired.is_empty() {
                    continue;
                }
                let wait = next.map_or(IDLE, |at| {
                    Duration::from_secs(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
                });
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = finished.rescheduled() => {}
                }
            }
        },
    )
}

/// One pass of the finished run `namespace/name`, read from the API server; how long to
/// wait before it is tried again when it failed.
async fn pass(
    namespace: &str,
    name: &str,
    finished: &FinishedRunCache,
    ctx: &Arc<Context>,
) -> Result<(), Duration> {
    let api: Api<Guarded<AgentRun>> = Api::namespaced(ctx.client.clone(), namespace);
    let run = match api.get_opt(name).await {
        Ok(Some(run)) => run,
        // Gone: its watch event follows.
        Ok(None) => return Ok(()),
        Err(error) => return Err(failed(ctx, namespace, name, &error.into())),
    };
    if let Ok(run) = &run.0
        && !run
            .status
            .as_ref()
            .and_then(|status| status.phase)
            .is_some_and(AgentRunPhase::is_finished)
    {
        // Not finished (its status was replaced): the controller passes it.
        return Ok(());
    }
    match guarded(Arc::new(run), Arc::clone(ctx), super::reconcile).await {
        Ok(_) => {
            // A finished run's pass stops the sandbox the operator ended it with.
            finished.lock().sandbox_stopped(namespace, name);
            Ok(())
        }
        Err(error) => Err(failed(ctx, namespace, name, &error)),
    }
}

/// Counts and logs the failed pass of `namespace/name`, as the controller's error policy
/// does: the backoff before the next.
fn failed(ctx: &Context, namespace: &str, name: &str, error: &crate::error::Error) -> Duration {
    let run = AgentRun {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: agentic_api::AgentRunSpec::default(),
        status: None,
    };
    ctx.failed(KIND, &run, error, Duration::MAX)
}

#[cfg(test)]
mod tests {
    use agentic_core::sandbox::TtlDefaults;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::fake_api::FakeApi;
    use crate::controllers::scenario::{NS, context, object};

    /// A run the operator cancelled, finished at `completed` with a time to live of `ttl`.
    fn cancelled(name: &str, ttl: Option<i32>, completed: &str) -> AgentRun {
        object(json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"agentRef": "coder", "ttlSecondsAfterFinished": ttl},
            "status": {
                "phase": "Failed", "sandboxName": name, "completionTime": completed,
                "conditions": [{
                    "type": "Ready", "status": "False", "reason": "Cancelled", "message": "",
                    "lastTransitionTime": completed
                }],
            },
        }))
    }

    fn sandbox_pod(run: &str) -> Pod {
        object(json!({"metadata": {"name": run, "ownerReferences": [{
            "apiVersion": "konveyor.io/v1alpha1", "kind": "AgentRun", "name": run,
            "uid": format!("uid-{run}"), "controller": true
        }]}}))
    }

    /// Drives the passes of `runs`, kept as the runs' watch keeps them, until `done` holds
    /// (at most 30 s: a pass is a few requests to the fake API server).
    async fn drive_until(api: &FakeApi, runs: &[AgentRun], done: impl Fn(&FakeApi) -> bool) {
        let (finished, due) = FinishedRunCache::new(TtlDefaults::default());
        let feed = finished.feed(None);
        for run in runs {
            api.put(run);
            assert!(feed.keep(&Guarded(Ok(run.clone()))));
        }
        let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
        let stop: Stop = Box::pin(stop_rx.map(|_| ()));
        let driving = tokio::spawn(drive(
            finished,
            due,
            futures::stream::pending(),
            context(api),
            stop,
        ));
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            while !done(api) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let _ = stop_tx.send(());
        driving.await.expect("the passes end on stop");
        assert!(waited.is_ok(), "not done: {:?}", api.writes());
    }

    #[tokio::test]
    async fn a_finished_run_kept_apart_has_the_sandbox_it_was_ended_with_stopped() {
        let api = FakeApi::default();
        api.put(&sandbox_pod("stopped"));
        let run = cancelled("stopped", None, "2026-01-01T00:00:00Z");
        drive_until(&api, &[run], |api| api.names::<Pod>(NS).is_empty()).await;
        assert!(api.get::<AgentRun>(NS, "stopped").is_some(), "kept: no TTL");
    }

    #[tokio::test]
    async fn a_finished_run_kept_apart_is_deleted_when_its_time_to_live_is_over() {
        let api = FakeApi::default();
        let expired = cancelled("expired", Some(60), "2026-01-01T00:00:00Z");
        let kept = cancelled("kept", Some(3600), &crate::now().0.to_string());
        drive_until(&api, &[expired, kept], |api| {
            api.get::<AgentRun>(NS, "expired").is_none()
        })
        .await;
        assert!(api.get::<AgentRun>(NS, "kept").is_some());
        let statuses: Vec<Value> = api
            .writes()
            .iter()
            .filter(|w| w.path.ends_with("/status"))
            .map(|w| serde_json::from_str(&w.body).unwrap_or(Value::Null))
            .collect();
        assert!(
            statuses.is_empty(),
            "a finished run's status is not written: {statuses:?}"
        );
    }
}
