//! The lifecycle watcher: per target, one pub/sub connection subscribed by pattern to the
//! keyspace channels of the namespaces' keys, turning what Redis did to lock keys into
//! transitions, hold durations and expiry takeovers (`tracker`), with a bounded history
//! per key (`history`). The `notifications` policy is applied on every connect (`notify`).
//!
//! After a gap in the stream it forgets its state rather than guess what it missed, and
//! takes owners from the sampler's passes begun after the resubscribe.

pub(crate) mod history;
pub(crate) mod metrics;
mod recorder;
pub(crate) mod tracker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use prometheus::IntCounter;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::access::notify::{self, Applied, NotifyError};
use crate::access::read::{self, KeyRead};
use crate::access::{Link, LinkError};
use crate::config::{NamespaceConfig, Notifications, TargetConfig};
use crate::locks::TargetLocks;
use crate::locks::events::Found;
use history::History;
use metrics::{TargetMetrics, WatcherMetrics};
pub(crate) use recorder::preflight;
use recorder::{Recorder, wall_ms};
use tracker::Tracker;

/// Lock keys the tracker keeps state for, at most (an 8-byte key hash and a 56-byte entry each).
pub(crate) const MAX_TRACKED: usize = 1_000_000;
/// History records kept, all keys together (32 bytes each, 16 more in the eviction queue).
pub(crate) const HISTORY_CAP: usize = 100_000;
/// Notices handled in one go before the watcher looks at anything else.
const BATCH: usize = 512;
/// Owner-read pipelines in flight at once.
const READS_IN_FLIGHT: usize = 8;
/// Owner reads waiting for a pipeline; beyond this, owners stay unknown.
const MAX_PENDING_READS: usize = 100_000;
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Scan mode again when a subscription ends, however it ends.
struct Unsubscribe(Arc<TargetLocks>);

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        self.0.unsubscribed();
    }
}

/// How often the pub/sub connection is pinged, so a dead peer is noticed.
const PING_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("target {target}: {source}")]
    Notifications { target: String, source: NotifyError },
}

/// Why a subscription ended.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error(transparent)]
    Notify(#[from] NotifyError),
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    #[error("{0} timed out")]
    Timeout(&'static str),
    #[error("the server closed the subscription")]
    Closed,
}

/// What the HTTP side may read about a target's watcher.
pub(crate) struct LifecycleState {
    pub(crate) target: String,
    connected: AtomicBool,
    history: Mutex<History>,
    notifications: Mutex<String>,
    /// Expiry takeovers counted, per namespace name.
    takeovers: Vec<(String, IntCounter)>,
}

impl LifecycleState {
    fn new(target: &str, takeovers: Vec<(String, IntCounter)>) -> Self {
        LifecycleState {
            target: target.to_string(),
            connected: AtomicBool::new(false),
            history: Mutex::new(History::new(HISTORY_CAP)),
            notifications: Mutex::new("not checked yet".to_string()),
            takeovers,
        }
    }
    /// Expiry takeovers counted so far in namespace `ns`.
    pub(crate) fn takeovers(&self, ns: &str) -> u64 {
        self.takeovers.iter().find(|(n, _)| n == ns).map_or(0, |(_, c)| c.get())
    }
    pub(crate) fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
    pub(crate) fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The server's notification setting as last found, in words.
    pub(crate) fn notifications(&self) -> String {
        self.notifications.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A read of a lock key's owner and TTL, asked for by the tracker (`generation`) and/or by
/// the lock table after an event (`seq`).
pub(crate) struct ReadRequest {
    ns: usize,
    key: Vec<u8>,
    generation: Option<u32>,
    seq: Option<u16>,
}

/// One pipeline's reads: the namespace, the requests, and what each key held (`None` when
/// the read failed).
type ReadResult = (usize, Vec<ReadRequest>, Option<Vec<KeyRead>>);

/// How often the server's `notify-keyspace-events` is checked again while subscribed.
const FLAGS_CHECK_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Watcher {
    target: TargetConfig,
    namespaces: Vec<NamespaceConfig>,
    /// `__keyspace@<db>__:<pattern>` of each namespace's locks and fencing counters, with
    /// the namespace and whether the pattern is the fence pattern.
    channels: Vec<(Vec<u8>, usize, bool)>,
    prefix_len: usize,
    needed: String,
    /// The target's lock tables: owner hashes, and owners the sampler saw after a gap.
    locks: Arc<TargetLocks>,
    state: Arc<LifecycleState>,
    link: Link,
    conn: ConnectionManager,
    metrics: TargetMetrics,
    origin: Instant,
}

impl Watcher {
    /// Set up the watcher of `target`; connects lazily. `locks` are the same target's lock
    /// tables (for owner hashes and owners seen after a gap). Call inside a tokio runtime.
    pub(crate) fn new(
        target: &TargetConfig,
        namespaces: &[NamespaceConfig],
        locks: Arc<TargetLocks>,
        metrics: &WatcherMetrics,
    ) -> Result<Self, WatchError> {
        let link = Link::new(target)?;
        let conn = link.managed()?;
        let prefix = format!("__keyspace@{}__:", link.db());
        let channel = |glob: &crate::glob::Glob| [prefix.as_bytes(), glob.as_str().as_bytes()].concat();
        let mut channels = Vec::new();
        for (i, n) in namespaces.iter().enumerate() {
            channels.push((channel(&n.pattern), i, false));
            if let Some(f) = &n.fence_pattern {
                channels.push((channel(f), i, true));
            }
        }
        let metrics = metrics.for_target(&target.name, namespaces);
        let takeovers = namespaces
            .iter()
            .zip(&metrics.namespaces)
            .map(|(n, m)| (n.name.clone(), m.takeovers.clone()))
            .collect();
        Ok(Watcher {
            target: target.clone(),
            namespaces: namespaces.to_vec(),
            channels,
            prefix_len: prefix.len(),
            needed: notify::needed_flags(namespaces),
            locks,
            state: Arc::new(LifecycleState::new(&target.name, takeovers)),
            link,
            conn,
            metrics,
            origin: Instant::now(),
        })
    }

    pub(crate) fn state(&self) -> Arc<LifecycleState> {
        self.state.clone()
    }

    /// Subscribe, follow the stream, and resubscribe with backoff until `shutdown`.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let ns: Vec<(i64, bool)> = self
            .namespaces
            .iter()
            .map(|n| {
                (
                    i64::try_from(n.ttl.as_millis()).unwrap_or(i64::MAX),
                    n.value == crate::config::ValueKind::Redisson,
                )
            })
            .collect();
        let mut tracker = Tracker::new(&ns, MAX_TRACKED);
        let mut backoff = MIN_BACKOFF;
        let mut last_error = String::new();
        loop {
            let began = Instant::now();
            let result = self.session(&mut tracker, &shutdown).await;
            self.set_connected(false);
            match result {
                Ok(()) => return,
                Err(e) => {
                    let e = e.to_string();
                    if e != last_error {
                        tracing::warn!(target_name = %self.target.name, error = %e,
                            "keyspace notifications: not subscribed; lockwatch_notifications_connected is 0 until resubscribed");
                    } else {
                        tracing::debug!(target_name = %self.target.name, error = %e, "resubscribe failed again");
                    }
                    last_error = e;
                }
            }
            if began.elapsed() > Duration::from_secs(30) {
                backoff = MIN_BACKOFF;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn set_connected(&self, up: bool) {
        self.metrics.connected.set(i64::from(up));
        self.state.connected.store(up, Ordering::Relaxed);
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Apply the policy, subscribe, and follow the stream until it ends (`Err`) or `shutdown` (`Ok`).
    async fn session(&mut self, tracker: &mut Tracker, shutdown: &CancellationToken) -> Result<(), SessionError> {
        let limit = self.target.sample_budget.max(Duration::from_secs(2));
        let applied = tokio::time::timeout(
            limit,
            notify::apply(self.target.notifications, &self.needed, &mut self.conn),
        )
        .await
        .map_err(|_| SessionError::Timeout("checking notify-keyspace-events"))??;
        self.report_applied(&applied);
        let pubsub = tokio::time::timeout(limit, self.link.pubsub())
            .await
            .map_err(|_| SessionError::Timeout("connecting for pub/sub"))??;
        let (mut sink, mut stream) = pubsub.split();
        for (channel, _, _) in &self.channels {
            tokio::time::timeout(limit, sink.psubscribe(channel.as_slice()))
                .await
                .map_err(|_| SessionError::Timeout("PSUBSCRIBE"))??;
        }
        // Whatever happened while unsubscribed is unknown: start clean, and let the
        // sampler's passes from now on stand in for owners not seen in a `set`.
        tracker.reset();
        let marks: Vec<u32> = self.locks.namespaces.iter().map(|n| n.table().pass_number()).collect();
        self.set_connected(true);
        tracing::info!(target_name = %self.target.name, patterns = self.channels.len(), "subscribed to keyspace notifications");
        let mut complete = !matches!(applied, Applied::Missing { .. });
        if complete {
            self.locks.subscribed();
        }
        let _unsubscribe = Unsubscribe(self.locks.clone());
        let mut flags_check = tokio::time::interval(FLAGS_CHECK_EVERY);
        flags_check.reset();

        let (tx, mut rx) = mpsc::channel::<ReadResult>(READS_IN_FLIGHT * 2);
        let mut pending: Vec<ReadRequest> = Vec::new();
        let mut in_flight = 0usize;
        let mut cap_warned = false;
        let mut sweep = tokio::time::interval(Duration::from_secs(1));
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                Some((ns, requests, reads)) = rx.recv() => {
                    in_flight -= 1;
                    self.reads_done(tracker, ns, &requests, reads.as_deref(), &mut pending);
                    self.flush_reads(&mut pending, &mut in_flight, &tx);
                }
                _ = flags_check.tick() => {
                    complete = self.recheck_flags(complete, limit).await;
                }
                msg = stream.next() => {
                    let Some(first) = msg else { return Err(SessionError::Closed) };
                    let now = self.now_ms();
                    let wall = wall_ms();
                    let mut history = self.state.history();
                    let mut obs = Recorder::new(self, &mut history, &mut pending, wall);
                    let mut n = 1u64;
                    obs.handle(tracker, &first, now, &marks);
                    while (n as usize) < BATCH {
                        match stream.next().now_or_never() {
                            Some(Some(m)) => { obs.handle(tracker, &m, now, &marks); n += 1; }
                            Some(None) => { drop(history); return Err(SessionError::Closed) }
                            None => break,
                        }
                    }
                    drop(history);
                    self.metrics.received.inc_by(n);
                    self.flush_reads(&mut pending, &mut in_flight, &tx);
                }
                _ = sweep.tick() => {
                    tracker.sweep(self.now_ms());
                    self.metrics.tracked.set(tracker.len() as i64);
                    if tracker.untracked > 0 && !std::mem::replace(&mut cap_warned, true) {
                        tracing::warn!(target_name = %self.target.name, max = MAX_TRACKED,
                            "lifecycle watcher holds state for its maximum of lock keys; transitions of further keys are counted without holds or takeovers");
                    }
                }
                _ = ping.tick() => {
                    tokio::time::timeout(limit, sink.ping::<redis::Value>())
                        .await
                        .map_err(|_| SessionError::Timeout("PING on the pub/sub connection"))??;
                }
            }
        }
    }

    /// Start read pipelines for what is pending, as far as the in-flight bound allows.
    fn flush_reads(&self, pending: &mut Vec<ReadRequest>, in_flight: &mut usize, tx: &mpsc::Sender<ReadResult>) {
        if pending.len() > MAX_PENDING_READS {
            pending.drain(..pending.len() - MAX_PENDING_READS);
        }
        while !pending.is_empty() && *in_flight < READS_IN_FLIGHT {
            let ns = pending[0].ns;
            let mut batch = Vec::new();
            let mut i = 0;
            while i < pending.len() && batch.len() < 1000 {
                if pending[i].ns == ns {
                    batch.push(pending.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            let kind = self.namespaces[ns].value.clone();
            let mut conn = self.conn.clone();
            let tx = tx.clone();
            let timeout = self.target.sample_budget;
            *in_flight += 1;
            tokio::spawn(async move {
                let keys: Vec<Vec<u8>> = batch.iter().map(|r| r.key.clone()).collect();
                let reads = match tokio::time::timeout(timeout, read::read_locks(&mut conn, &kind, &keys)).await {
                    Ok(Ok(reads)) => Some(reads),
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "owner read failed; those owners stay unknown");
                        None
                    }
                    Err(_) => None,
                };
                let _ = tx.send((ns, batch, reads)).await;
            });
        }
    }

    /// Reads answered: owners to the tracker, owners and TTLs to the lock table.
    fn reads_done(
        &self,
        tracker: &mut Tracker,
        ns: usize,
        requests: &[ReadRequest],
        reads: Option<&[KeyRead]>,
        pending: &mut Vec<ReadRequest>,
    ) {
        let Some(ns_locks) = self.locks.namespaces.get(ns) else {
            return;
        };
        if let Some(reads) = reads {
            let now = self.locks.now_ms();
            let mut table = ns_locks.table();
            for (r, read) in requests.iter().zip(reads) {
                if let Some(seq) = r.seq {
                    table.event_read(&ns_locks.config, &r.key, seq, Found::from(read), now);
                }
            }
        }
        let wall = wall_ms();
        let mut history = self.state.history();
        let mut obs = Recorder::new(self, &mut history, pending, wall);
        for (i, r) in requests.iter().enumerate() {
            let Some(generation) = r.generation else { continue };
            let owner = match reads.and_then(|x| x.get(i)) {
                Some(KeyRead::Lock { owner, .. }) => Some(ns_locks.owner_hash(owner)),
                _ => None,
            };
            tracker.owner_read(&r.key, generation, owner, &mut obs);
        }
    }

    /// Check `notify-keyspace-events` again: flags switched off at runtime (or a restart
    /// without them) put the target in scan mode, flags back return it to events mode
    /// (`configure` puts them back itself). Returns whether the flags are complete.
    async fn recheck_flags(&mut self, complete: bool, limit: Duration) -> bool {
        let policy = match self.target.notifications {
            Notifications::Configure => Notifications::Configure,
            _ => Notifications::Auto,
        };
        let applied = match tokio::time::timeout(limit, notify::apply(policy, &self.needed, &mut self.conn)).await {
            Ok(Ok(a)) => a,
            _ => return complete, // the PING of the subscription tells about the connection
        };
        let now = !matches!(applied, Applied::Missing { .. });
        if now != complete || matches!(applied, Applied::Configured { .. }) {
            self.report_applied(&applied);
        }
        match (complete, now) {
            (true, false) => {
                tracing::warn!(target_name = %self.target.name,
                    "notify-keyspace-events no longer has what lockwatch needs: scan mode until it does");
                self.locks.unsubscribed();
            }
            (false, true) => {
                tracing::info!(target_name = %self.target.name,
                    "notify-keyspace-events has what lockwatch needs again: events mode");
                self.locks.subscribed();
            }
            _ => {}
        }
        now
    }

    fn report_applied(&self, applied: &Applied) {
        let t = &self.target.name;
        let words = match applied {
            Applied::On { flags } => format!("on (notify-keyspace-events \"{flags}\")"),
            Applied::Configured { before, after } => {
                tracing::info!(target_name = %t, before = %before, after = %after,
                    "notifications = \"configure\": added the keyspace-notification flags lockwatch needs");
                format!("configured by lockwatch: \"{before}\" → \"{after}\"")
            }
            Applied::Missing { flags, missing } => {
                tracing::warn!(target_name = %t, flags = %flags, missing = %missing,
                    "notify-keyspace-events lacks flags the lifecycle watcher needs; it subscribes but will see too little. Fix: redis-cli {}",
                    notify::fix_command(flags, &self.needed));
                format!("incomplete: \"{flags}\" lacks `{missing}`")
            }
            Applied::Unknown { why } => {
                tracing::info!(target_name = %t, why = %why,
                    "cannot read notify-keyspace-events (CONFIG is denied, as on managed Redis): subscribing anyway; enable '{}' in the server's settings", self.needed);
                format!("unknown ({why}); subscribed anyway")
            }
        };
        *self.state.notifications.lock().unwrap_or_else(|p| p.into_inner()) = words;
    }
}
