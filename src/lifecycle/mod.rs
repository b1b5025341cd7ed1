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
use crate::access::{Link, LinkError, read};
use crate::config::{NamespaceConfig, TargetConfig};
use crate::locks::TargetLocks;
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

/// An owner read asked for by the tracker.
pub(crate) struct ReadRequest {
    ns: usize,
    key: Vec<u8>,
    generation: u32,
}

/// Owners read for one pipeline: (key, generation) pairs and their owner hashes, `None`
/// when the read failed.
type ReadResult = (Vec<(Vec<u8>, u32)>, Option<Vec<Option<u64>>>);

pub(crate) struct Watcher {
    target: TargetConfig,
    namespaces: Vec<NamespaceConfig>,
    /// `__keyspace@<db>__:<pattern>` per namespace, in namespace order.
    channels: Vec<Vec<u8>>,
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
        let channels = namespaces
            .iter()
            .map(|n| [prefix.as_bytes(), n.pattern.as_str().as_bytes()].concat())
            .collect();
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
        for channel in &self.channels {
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
                Some((keys, owners)) = rx.recv() => {
                    in_flight -= 1;
                    let wall = wall_ms();
                    let mut history = self.state.history();
                    let mut obs = Recorder::new(self, &mut history, &mut pending, wall);
                    for (i, (key, generation)) in keys.iter().enumerate() {
                        let owner = owners.as_ref().and_then(|o| o.get(i).copied().flatten());
                        tracker.owner_read(key, *generation, owner, &mut obs);
                    }
                    drop(history);
                    self.flush_reads(&mut pending, &mut in_flight, &tx);
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

    /// Start owner-read pipelines for what is pending, as far as the in-flight bound allows.
    fn flush_reads(&self, pending: &mut Vec<ReadRequest>, in_flight: &mut usize, tx: &mpsc::Sender<ReadResult>) {
        if pending.len() > MAX_PENDING_READS {
            pending.drain(..pending.len() - MAX_PENDING_READS);
        }
        while !pending.is_empty() && *in_flight < READS_IN_FLIGHT {
            let ns = pending[0].ns;
            let mut keys = Vec::new();
            let mut batch = Vec::new();
            pending.retain_mut(|r| {
                if r.ns == ns && keys.len() < 1000 {
                    keys.push(std::mem::take(&mut r.key));
                    batch.push(r.generation);
                    false
                } else {
                    true
                }
            });
            let kind = self.namespaces[ns].value.clone();
            let mut conn = self.conn.clone();
            let locks = self.locks.clone();
            let tx = tx.clone();
            let timeout = self.target.sample_budget;
            *in_flight += 1;
            tokio::spawn(async move {
                let read = tokio::time::timeout(timeout, read::read_owners(&mut conn, &kind, &keys)).await;
                let owners = match read {
                    Ok(Ok(owners)) => {
                        let ns_locks = &locks.namespaces[ns];
                        Some(
                            owners
                                .iter()
                                .map(|o| o.as_deref().map(|o| ns_locks.owner_hash(o)))
                                .collect(),
                        )
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "owner read failed; those owners stay unknown");
                        None
                    }
                    Err(_) => None,
                };
                let _ = tx.send((keys.into_iter().zip(batch).collect(), owners)).await;
            });
        }
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
