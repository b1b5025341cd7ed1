//! The keyspace sampler: per target, every `sample_interval`, walk each namespace with
//! `SCAN MATCH`, read owners and PTTLs in pipelines, keep per-lock state, publish gauges.
//!
//! Passes run on their own clock, never on a scrape: `/metrics` reads what the last pass
//! published. A pass stops starting new batches at `sample_budget` (counted as truncated);
//! a failing Redis marks `lockwatch_up 0` and the next pass tries again.

mod events;
mod failover;
pub(crate) mod metrics;
mod nodes;
mod reconcile;
mod scan;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::access::LinkError;
use crate::access::reader::Reader;
use crate::config::TargetConfig;
use crate::locks::TargetLocks;
use crate::topology::Nodes;
use crate::vocab::{TrackingMode, Unreadable};
pub use metrics::SamplerMetrics;

/// The sampler could not be set up (the pass itself never fails this way: it reports).
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// What one pass did.
#[derive(Debug, Clone)]
pub struct PassReport {
    pub duration: Duration,
    pub keys_scanned: u64,
    pub truncated: bool,
    pub error: Option<String>,
}

pub struct Sampler {
    target: TargetConfig,
    locks: Arc<TargetLocks>,
    metrics: SamplerMetrics,
    /// The target's topology, as the follower finds it.
    nodes: Nodes,
    /// Connections of the current primaries, in the layout's order.
    primaries: Vec<nodes::NodeConns>,
    /// Reads owners and PTTLs (several pipelines in flight) wherever the keys live.
    reader: Option<Reader>,
    /// The last failover compared with the new primary.
    failovers_handled: u64,
    /// The mode of the last pass that succeeded: whether the tables were current.
    last_ok_mode: Option<TrackingMode>,
    /// Where the next pass starts, so a truncated pass does not starve the same namespaces.
    next_start: usize,
    /// The mode the target is in, and in events mode the subscription it follows.
    mode: (TrackingMode, u64),
    /// The reconciling walk of events mode.
    walk: reconcile::Walk,
    /// `MATCH` of the reconciling walk: every namespace's keys.
    walk_match: String,
    /// Events mode: when a pass is due before the next tick (right after a subscription,
    /// and a second after a pass that found something to confirm).
    pass_due: Option<Instant>,
    /// Events mode: the next pass re-reads every tracked key (after a subscription, reads
    /// from before the gap prove nothing).
    full_refresh: bool,
}

impl Sampler {
    /// Set up the sampler for `target`, filling `locks` (the target's tables); connects
    /// lazily, so a Redis that is down now is not an error: the passes will say so. Call it
    /// inside a tokio runtime.
    pub fn new(
        target: &TargetConfig,
        locks: Arc<TargetLocks>,
        metrics: SamplerMetrics,
        nodes: Nodes,
    ) -> Result<Self, SamplerError> {
        let patterns: Vec<&str> = locks
            .namespaces
            .iter()
            .flat_map(|n| std::iter::once(&n.config.pattern).chain(&n.config.fence_pattern))
            .map(|g| g.as_str())
            .collect();
        let walk_match = reconcile::common_match(&patterns);
        metrics.follow_clock(&target.name, locks.clone());
        Ok(Sampler {
            target: target.clone(),
            locks,
            metrics,
            nodes,
            primaries: Vec::new(),
            reader: None,
            failovers_handled: 0,
            last_ok_mode: None,
            next_start: 0,
            mode: (TrackingMode::Scan, 0),
            walk: reconcile::Walk::default(),
            walk_match,
            pass_due: None,
            full_refresh: true,
        })
    }

    /// Run passes every `sample_interval` (and, in events mode, reconciling steps) until
    /// `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.target.sample_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut step = tokio::time::interval(reconcile::STEP);
        step.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = self.pass() => {}
                    }
                }
                _ = step.tick() => {
                    if self.follow_mode() == TrackingMode::Events && self.pass_due.is_some_and(|t| Instant::now() >= t) {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = self.pass() => {}
                        }
                    }
                    if self.mode.0 == TrackingMode::Events {
                        let limit = self.target.sample_budget.max(Duration::from_secs(1));
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            r = tokio::time::timeout(limit, self.reconcile_step()) => {
                                if let Ok(Err(e)) = r {
                                    tracing::debug!(target_name = %self.target.name, error = %e, "reconciling step failed; the next one tries again");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Follow the watcher: events mode while it is subscribed with the flags it needs (a
    /// new subscription starts a reconciling walk), scan mode otherwise.
    fn follow_mode(&mut self) -> TrackingMode {
        let now = match self.locks.subscription() {
            Some(n) => (TrackingMode::Events, n),
            None => (TrackingMode::Scan, 0),
        };
        if now != self.mode {
            match now.0 {
                TrackingMode::Events => {
                    // Events may have been missed while away: walk the keyspace, and re-read
                    // the tracked keys now rather than at the next tick.
                    self.walk.restart();
                    self.pass_due = Some(Instant::now());
                    self.full_refresh = true;
                }
                TrackingMode::Scan => {
                    for ns in &self.locks.namespaces {
                        ns.table().enter_scan_mode();
                    }
                }
            }
            if now.0 != self.mode.0 {
                tracing::info!(target_name = %self.target.name, mode = now.0.as_str(), "tracking mode");
            }
            self.metrics.set_mode(&self.target.name, now.0);
            self.mode = now;
        }
        self.mode.0
    }

    /// One pass over every namespace, in the target's mode; publishes metrics and status,
    /// and reports.
    pub async fn pass(&mut self) -> PassReport {
        let started = Instant::now();
        let deadline = started + self.target.sample_budget;
        // Hard stop: the budget plus one request timeout; only a wedged connection gets here.
        let hard = self.target.sample_budget * 2 + Duration::from_secs(1);
        let mode = self.follow_mode();
        let outcome = tokio::time::timeout(hard, async {
            if let Err(e) = self.follow_nodes().await {
                return Walk {
                    error: Some(crate::access::tls::explain(&self.target, &e)),
                    ..Walk::default()
                };
            }
            if let Err((node, e)) = self.check_conns().await {
                return Walk {
                    error: Some(format!(
                        "node {node}: {}",
                        crate::access::tls::explain(&self.target, &e)
                    )),
                    ..Walk::default()
                };
            }
            match mode {
                TrackingMode::Scan => self.walk(deadline).await,
                TrackingMode::Events => self.events_pass(deadline).await,
            }
        })
        .await;
        let (keys_scanned, truncated, error) = match outcome {
            Ok(w) => (w.keys_scanned, w.truncated, w.error),
            Err(_) => {
                // A routed cluster connection wedged (a slot map refresh that never ends
                // while slots move) would wedge every later pass: the next one builds anew.
                if matches!(self.reader, Some(Reader::Routed(_))) {
                    self.reader = None;
                }
                (
                    0,
                    true,
                    Some(format!("pass did not finish within {}", crate::duration::format(hard))),
                )
            }
        };
        if error.is_none() {
            self.last_ok_mode = Some(mode);
        }
        let report = PassReport {
            duration: started.elapsed(),
            keys_scanned,
            truncated,
            error,
        };
        self.metrics.publish_pass(&self.target, &self.locks, &report);
        report
    }
}

#[derive(Default)]
pub(crate) struct Walk {
    keys_scanned: u64,
    truncated: bool,
    error: Option<String>,
}

pub(crate) fn task_failed(e: tokio::task::JoinError) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "read task failed", e.to_string()))
}

/// Log an unreadable key once: the first few distinct ones, then stay quiet.
fn log_unreadable(target: &str, ns: &str, key: &[u8], reason: Unreadable) {
    use std::collections::HashSet;
    use std::sync::LazyLock;
    const MAX_LOGGED: usize = 1000;
    static LOGGED: LazyLock<Mutex<HashSet<Vec<u8>>>> = LazyLock::new(|| Mutex::new(HashSet::new()));
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    if logged.len() >= MAX_LOGGED || !logged.insert(key.to_vec()) {
        return;
    }
    tracing::warn!(target_name = target, namespace = ns, key = %String::from_utf8_lossy(key), reason = reason.as_str(),
        "key matches the namespace pattern but is not a readable lock; counted in lockwatch_locks_unreadable");
}
