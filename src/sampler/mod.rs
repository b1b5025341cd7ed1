//! The keyspace sampler: per target, every `sample_interval`, walk each namespace with
//! `SCAN MATCH`, read owners and PTTLs in pipelines, keep per-lock state, publish gauges.
//!
//! Passes run on their own clock, never on a scrape: `/metrics` reads what the last pass
//! published. A pass stops starting new batches at `sample_budget` (counted as truncated);
//! a failing Redis marks `lockwatch_up 0` and the next pass tries again.

pub mod table;
pub mod ttl;

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use foldhash::fast::RandomState;
use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use crate::access::read::{self, KeyRead};
use crate::access::{Link, LinkError};
use crate::config::{NamespaceConfig, TargetConfig};
use crate::metrics::Metrics;
use crate::vocab::Unreadable;
use table::{Counts, NamespaceTable, Phase, Tally, WalkPosition};

/// The sampler could not be set up (the pass itself never fails this way: it reports).
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// A namespace's config and its lock table, shared with the HTTP side.
pub struct NamespaceState {
    pub config: NamespaceConfig,
    /// Seeds owner hashes, so the sampler's and the lifecycle watcher's can be compared.
    hasher: RandomState,
    table: Mutex<NamespaceTable>,
}

impl NamespaceState {
    /// Seeded hash of an owner token, the same as the lock table's.
    pub fn owner_hash(&self, owner: &[u8]) -> u64 {
        self.hasher.hash_one(owner)
    }

    /// The lock table; a poisoned lock (a panic elsewhere) still yields the data.
    pub fn table(&self) -> MutexGuard<'_, NamespaceTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How the target's sampling is going, for `/`, `/readyz` and the API.
#[derive(Debug, Clone, Default)]
pub struct TargetStatus {
    pub passes: u64,
    pub up: bool,
    pub last_error: Option<String>,
    pub last_duration: Duration,
    pub last_pass_at: Option<SystemTime>,
    pub last_truncated: bool,
}

/// Everything the HTTP side may read about one target.
pub struct TargetState {
    pub name: String,
    pub display_url: String,
    pub namespaces: Vec<NamespaceState>,
    status: Mutex<TargetStatus>,
    /// Origin of the sampler clock: lock ages are measured from it.
    origin: Instant,
}

impl TargetState {
    pub fn status(&self) -> TargetStatus {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// Milliseconds on the sampler clock now.
    pub fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
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
    state: Arc<TargetState>,
    metrics: Arc<Metrics>,
    /// Reads owners and PTTLs (several pipelines in flight).
    conn: ConnectionManager,
    /// Walks SCAN cursors: its own connection, so a page never waits behind a read pipeline.
    scan_conn: ConnectionManager,
    /// Where the next pass starts, so a truncated pass does not starve the same namespaces.
    next_start: usize,
}

impl Sampler {
    /// Set up the sampler for `target`; connects lazily, so a Redis that is down now is
    /// not an error: the passes will say so. Call it inside a tokio runtime.
    pub fn new(
        target: &TargetConfig,
        namespaces: &[NamespaceConfig],
        show_owners: bool,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SamplerError> {
        let link = Link::new(target)?;
        let conn = link.managed()?;
        let scan_conn = link.managed()?;
        let state = Arc::new(TargetState {
            name: target.name.clone(),
            display_url: target.display_url.clone(),
            namespaces: namespaces
                .iter()
                .map(|n| {
                    let hasher = RandomState::default();
                    NamespaceState {
                        config: n.clone(),
                        hasher: hasher.clone(),
                        table: Mutex::new(NamespaceTable::with_hasher(show_owners, hasher)),
                    }
                })
                .collect(),
            status: Mutex::new(TargetStatus::default()),
            origin: Instant::now(),
        });
        Ok(Sampler {
            target: target.clone(),
            state,
            metrics,
            conn,
            scan_conn,
            next_start: 0,
        })
    }

    pub fn state(&self) -> Arc<TargetState> {
        self.state.clone()
    }

    /// Run passes every `sample_interval` until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.target.sample_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.pass() => {}
            }
        }
    }

    /// One pass over every namespace; publishes metrics and status, and reports.
    pub async fn pass(&mut self) -> PassReport {
        let started = Instant::now();
        let deadline = started + self.target.sample_budget;
        // Hard stop: the budget plus one request timeout; only a wedged connection gets here.
        let hard = self.target.sample_budget * 2 + Duration::from_secs(1);
        let outcome = tokio::time::timeout(hard, self.walk(deadline)).await;
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
        self.publish(&report);
        report
    }

    async fn walk(&mut self, deadline: Instant) -> Walk {
        let mut walk = Walk::default();
        let n = self.state.namespaces.len();
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
                    let ns = &self.state.namespaces[i].config.name;
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
        let ns_state = &self.state.namespaces[i];
        let from = ns_state.table().begin();
        let walked = self.walk_namespace(ns_state, from, deadline, scanned).await;
        let mut table = ns_state.table();
        let (outcome, tally) = match walked {
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
        self.publish_counts(&ns_state.config, counts);
        if let Some(t) = tally {
            self.publish_gauges(&ns_state.config, &t);
        }
        outcome
    }

    /// The lock keys, then the fencing counters, from `from`; where it stopped if cut.
    async fn walk_namespace(
        &self,
        ns_state: &NamespaceState,
        from: WalkPosition,
        deadline: Instant,
        scanned: &mut u64,
    ) -> redis::RedisResult<Option<WalkPosition>> {
        let ns = &ns_state.config;
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
                        let now_ms = self.state.now_ms();
                        let hist = self
                            .metrics
                            .lock_ttl_remaining_seconds
                            .with_label_values(&[&self.target.name, &ns.name]);
                        let mut table = ns_state.table();
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
                    let mut table = ns_state.table();
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

    /// Counter increments; published after every pass, failed ones included.
    fn publish_counts(&self, ns: &NamespaceConfig, c: Counts) {
        let l = [self.target.name.as_str(), ns.name.as_str()];
        self.metrics
            .lock_handoffs_total
            .with_label_values(&l)
            .inc_by(c.handoffs);
        if ns.fence_pattern.is_some() {
            self.metrics
                .fence_regressions_total
                .with_label_values(&l)
                .inc_by(c.fence_regressions);
        }
        if c.fence_regressions > 0 {
            tracing::warn!(target_name = %self.target.name, namespace = %ns.name, count = c.fence_regressions,
                "fencing counter went backwards or vanished: a failover may have lost writes");
        }
    }

    /// The gauges, from a completed cycle.
    fn publish_gauges(&self, ns: &NamespaceConfig, t: &Tally) {
        let m = &self.metrics;
        let l = [self.target.name.as_str(), ns.name.as_str()];
        m.locks_held.with_label_values(&l).set(t.held);
        m.locks_without_ttl.with_label_values(&l).set(t.without_ttl);
        m.locks_renewal_overdue.with_label_values(&l).set(t.overdue);
        m.locks_held_too_long.with_label_values(&l).set(t.too_long);
        m.lock_held_max_seconds
            .with_label_values(&l)
            .set(t.max_age_ms as f64 / 1000.0);
        if ns.fence_pattern.is_some() {
            m.fence_token.with_label_values(&l).set(t.fence_max.unwrap_or(0) as f64);
        }
        for (reason, n) in [
            (Unreadable::WrongType, t.wrong_type),
            (Unreadable::BadValue, t.bad_value),
        ] {
            m.locks_unreadable
                .with_label_values(&[l[0], l[1], reason.as_str()])
                .set(n);
        }
    }

    /// Record the pass: self metrics, status, and one log line when the health changes.
    fn publish(&self, r: &PassReport) {
        let m = &self.metrics;
        let t = [self.target.name.as_str()];
        m.sample_passes_total.with_label_values(&t).inc();
        m.sample_duration_seconds
            .with_label_values(&t)
            .set(r.duration.as_secs_f64());
        m.keys_scanned_total.with_label_values(&t).inc_by(r.keys_scanned);
        m.up.with_label_values(&t).set(i64::from(r.error.is_none()));
        if r.truncated && r.error.is_none() {
            m.sample_truncated_total.with_label_values(&t).inc();
            tracing::warn!(target_name = %self.target.name, duration = ?r.duration,
                "sample pass cut by sample_budget; raise sample_budget or scan_count");
        }
        let mut s = self.state.status.lock().unwrap_or_else(|p| p.into_inner());
        match &r.error {
            Some(e) => {
                m.sample_errors_total.with_label_values(&t).inc();
                if s.up || s.passes == 0 {
                    tracing::warn!(target_name = %self.target.name, url = %self.target.display_url, error = %e,
                        "sample pass failed; lockwatch_up is 0 until a pass succeeds");
                } else {
                    tracing::debug!(target_name = %self.target.name, error = %e, "sample pass failed again");
                }
            }
            None if !s.up && s.passes > 0 => {
                tracing::info!(target_name = %self.target.name, "sampling recovered");
            }
            None => {}
        }
        s.passes += 1;
        s.up = r.error.is_none();
        s.last_error = r.error.clone();
        s.last_duration = r.duration;
        s.last_pass_at = Some(SystemTime::now());
        s.last_truncated = r.truncated;
    }
}

#[derive(Default)]
struct Walk {
    keys_scanned: u64,
    truncated: bool,
    error: Option<String>,
}

fn task_failed(e: tokio::task::JoinError) -> redis::RedisError {
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
