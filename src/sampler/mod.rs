//! The keyspace sampler: per target, every `sample_interval`, walk each namespace with
//! `SCAN MATCH`, read owners and PTTLs in pipelines, keep per-lock state, publish gauges.
//!
//! Passes run on their own clock, never on a scrape: `/metrics` reads what the last pass
//! published. A pass stops starting new batches at `sample_budget` (counted as truncated);
//! a failing Redis marks `lockwatch_up 0` and the next pass tries again.

mod events;
pub(crate) mod metrics;
mod reconcile;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use crate::access::read::{self, KeyRead};
use crate::access::{Link, LinkError};
use crate::config::TargetConfig;
use crate::locks::table::{Phase, WalkPosition};
use crate::locks::{NamespaceLocks, TargetLocks};
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
    /// Reads owners and PTTLs (several pipelines in flight).
    conn: ConnectionManager,
    /// Walks SCAN cursors: its own connection, so a page never waits behind a read pipeline.
    scan_conn: ConnectionManager,
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
    pub fn new(target: &TargetConfig, locks: Arc<TargetLocks>, metrics: SamplerMetrics) -> Result<Self, SamplerError> {
        let link = Link::new(target)?;
        let conn = link.managed()?;
        let scan_conn = link.managed()?;
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
            conn,
            scan_conn,
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
        let outcome = match self.follow_mode() {
            TrackingMode::Scan => tokio::time::timeout(hard, self.walk(deadline)).await,
            TrackingMode::Events => tokio::time::timeout(hard, self.events_pass(deadline)).await,
        };
        let (keys_scanned, truncated, error) = match outcome {
            Ok(w) => (w.keys_scanned, w.truncated, w.error),
            Err(_) => (
                0,
                true,
                Some(format!("pass did not finish within {}", crate::duration::format(hard))),
            ),
        };
        let report = PassReport {
            duration: started.elapsed(),
            keys_scanned,
            truncated,
            error,
        };
        self.metrics.publish_pass(&self.target, &self.locks, &report);
        report
    }

    async fn walk(&mut self, deadline: Instant) -> Walk {
        let mut walk = Walk::default();
        let n = self.locks.namespaces.len();
        let start = self.next_start % n.max(1);
        for i in (0..n).map(|k| (start + k) % n) {
            if walk.truncated {
                break;
            }
            match self.sample_namespace(i, deadline, &mut walk.keys_scanned).await {
                Ok(true) => {}
                Ok(false) => {
                    walk.truncated = true;
                    self.next_start = i;
                }
                Err(e) => {
                    let stop = e.is_io_error() || e.is_timeout() || e.is_unrecoverable_error();
                    let e = crate::access::tls::explain(&self.target, &e);
                    let ns = &self.locks.namespaces[i].config.name;
                    walk.error.get_or_insert_with(|| format!("namespace {ns}: {e}"));
                    if stop {
                        break;
                    }
                }
            }
        }
        walk
    }

    /// Walk one namespace from where its last pass stopped. Counters are published whatever
    /// happens; gauges when the walk completes a cycle. `Ok(false)` when cut by the budget.
    async fn sample_namespace(&self, i: usize, deadline: Instant, scanned: &mut u64) -> redis::RedisResult<bool> {
        let ns_locks = &self.locks.namespaces[i];
        let from = ns_locks.table().begin();
        let walked = self.walk_namespace(ns_locks, from, deadline, scanned).await;
        let mut table = ns_locks.table();
        let (outcome, census) = match walked {
            Ok(None) => (Ok(true), Some(table.complete())),
            Ok(Some(at)) => {
                table.suspend(at);
                (Ok(false), None)
            }
            Err(e) => {
                table.abandon();
                (Err(e), None)
            }
        };
        let counts = table.take_counts();
        drop(table);
        self.metrics.publish_counts(&self.target.name, &ns_locks.config, counts);
        if let Some(c) = census {
            self.metrics.publish_census(&self.target.name, &ns_locks.config, &c);
        }
        outcome
    }

    /// The lock keys, then the fencing counters, from `from`; where it stopped if cut.
    async fn walk_namespace(
        &self,
        ns_locks: &NamespaceLocks,
        from: WalkPosition,
        deadline: Instant,
        scanned: &mut u64,
    ) -> redis::RedisResult<Option<WalkPosition>> {
        let ns = &ns_locks.config;
        let count = self.target.scan_count;
        let mut fence_from = from.cursor;
        if from.phase == Phase::Locks {
            let cut = self
                .walk_pattern(
                    ns.pattern.as_str(),
                    from.cursor,
                    count,
                    deadline,
                    scanned,
                    |mut conn, keys| {
                        let kind = ns.value.clone();
                        async move { read::read_locks(&mut conn, &kind, &keys).await.map(|r| (keys, r)) }
                    },
                    |keys, reads| {
                        let now_ms = self.locks.now_ms();
                        let hist = self
                            .metrics
                            .lock_ttl_remaining_seconds
                            .with_label_values(&[&self.target.name, &ns.name]);
                        let mut table = ns_locks.table();
                        for (key, read) in keys.iter().zip(reads) {
                            match read {
                                KeyRead::Lock { owner, pttl_ms } => {
                                    let seen = table.observe_lock(ns, key, &owner, pttl_ms, now_ms);
                                    if let Some(s) = seen.ttl_remaining_s {
                                        hist.observe(s);
                                    }
                                }
                                KeyRead::Gone => {}
                                KeyRead::Unreadable(reason) => {
                                    table.observe_unreadable(reason);
                                    log_unreadable(&self.target.name, &ns.name, key, reason);
                                }
                            }
                        }
                    },
                )
                .await?;
            if let Some(cursor) = cut {
                return Ok(Some(WalkPosition {
                    phase: Phase::Locks,
                    cursor,
                }));
            }
            fence_from = 0;
            if ns.fence_pattern.is_some() && Instant::now() >= deadline {
                return Ok(Some(WalkPosition {
                    phase: Phase::Fences,
                    cursor: 0,
                }));
            }
        }
        let Some(fence) = &ns.fence_pattern else {
            return Ok(None);
        };
        let cut = self
            .walk_pattern(
                fence.as_str(),
                fence_from,
                count,
                deadline,
                scanned,
                |mut conn, keys| async move { read::read_counters(&mut conn, &keys).await.map(|r| (keys, r)) },
                |keys, values| {
                    let mut table = ns_locks.table();
                    for (key, value) in keys.iter().zip(values) {
                        match value {
                            read::Counter::Value(v) => table.observe_fence(key, v),
                            read::Counter::Gone => {}
                            read::Counter::NotInteger => table.observe_unreadable(Unreadable::BadValue),
                        }
                    }
                },
            )
            .await?;
        Ok(cut.map(|cursor| WalkPosition {
            phase: Phase::Fences,
            cursor,
        }))
    }

    /// SCAN `pattern` from `cursor` to the end or the deadline (at least one page). Each
    /// page is read by its own task while the walk goes on, up to `READS_IN_FLIGHT` at
    /// once, so neither Redis nor lockwatch waits on the other's round trip. Returns the
    /// cursor to continue from when cut, `None` when the walk reached the end.
    #[allow(clippy::too_many_arguments)]
    async fn walk_pattern<R, F, Fut>(
        &self,
        pattern: &str,
        mut cursor: u64,
        count: usize,
        deadline: Instant,
        scanned: &mut u64,
        read: F,
        mut apply: impl FnMut(Vec<Vec<u8>>, Vec<R>),
    ) -> redis::RedisResult<Option<u64>>
    where
        R: Send + 'static,
        F: Fn(ConnectionManager, Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = redis::RedisResult<(Vec<Vec<u8>>, Vec<R>)>> + Send + 'static,
    {
        const READS_IN_FLIGHT: usize = 4;
        let mut scan_conn = self.scan_conn.clone();
        let mut reads = tokio::task::JoinSet::new();
        let cut = loop {
            let (next, keys) = read::scan_page(&mut scan_conn, pattern, cursor, count).await?;
            *scanned += keys.len() as u64;
            cursor = next;
            if !keys.is_empty() {
                reads.spawn(read(self.conn.clone(), keys));
            }
            while reads.len() >= READS_IN_FLIGHT {
                if let Some(done) = reads.join_next().await {
                    let (keys, values) = done.map_err(task_failed)??;
                    apply(keys, values);
                }
            }
            if cursor == 0 {
                break None;
            }
            if Instant::now() >= deadline {
                break Some(cursor);
            }
        };
        while let Some(done) = reads.join_next().await {
            let (keys, values) = done.map_err(task_failed)??;
            apply(keys, values);
        }
        Ok(cut)
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
