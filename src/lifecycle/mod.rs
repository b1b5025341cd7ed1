//! The lifecycle watcher: per target, one pub/sub connection subscribed by pattern to the
//! keyspace channels of the namespaces' keys, turning what Redis did to lock keys into
//! transitions, hold durations and expiry takeovers (`tracker`), with a bounded history
//! per key (`history`). The `notifications` policy is applied on every connect (`notify`).
//!
//! After a gap in the stream it forgets its state rather than guess what it missed, and
//! takes owners from the sampler's passes begun after the resubscribe.

pub mod history;
pub mod tracker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{FutureExt, StreamExt};
use prometheus::{Histogram, IntCounter, IntGauge};
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::access::notify::{self, Applied, NotifyError};
use crate::access::{Link, LinkError, read};
use crate::config::{NamespaceConfig, Notifications, TargetConfig};
use crate::metrics::Metrics;
use crate::sampler::TargetState;
use crate::vocab::{HoldEnd, Transition};
use history::History;
use tracker::{Notice, Observer, Tracker};

/// Lock keys the tracker keeps state for, at most (an 8-byte key hash and a 56-byte entry each).
pub const MAX_TRACKED: usize = 1_000_000;
/// History records kept, all keys together (32 bytes each, 16 more in the eviction queue).
pub const HISTORY_CAP: usize = 100_000;
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
pub struct LifecycleState {
    pub target: String,
    connected: AtomicBool,
    history: Mutex<History>,
    notifications: Mutex<String>,
}

impl LifecycleState {
    fn new(target: &str) -> Self {
        LifecycleState {
            target: target.to_string(),
            connected: AtomicBool::new(false),
            history: Mutex::new(History::new(HISTORY_CAP)),
            notifications: Mutex::new("not checked yet".to_string()),
        }
    }
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
    pub fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The server's notification setting as last found, in words.
    pub fn notifications(&self) -> String {
        self.notifications.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Metric handles of one namespace, resolved once.
struct NsMetrics {
    transitions: [IntCounter; 5],
    takeovers: IntCounter,
    hold: [Histogram; 2],
}

/// An owner read asked for by the tracker.
struct ReadRequest {
    ns: usize,
    key: Vec<u8>,
    generation: u32,
}

/// Owners read for one pipeline: (key, generation) pairs and their owner hashes, `None`
/// when the read failed.
type ReadResult = (Vec<(Vec<u8>, u32)>, Option<Vec<Option<u64>>>);

pub struct Watcher {
    target: TargetConfig,
    namespaces: Vec<NamespaceConfig>,
    /// `__keyspace@<db>__:<pattern>` per namespace, in namespace order.
    channels: Vec<Vec<u8>>,
    prefix_len: usize,
    needed: String,
    sampler: Arc<TargetState>,
    state: Arc<LifecycleState>,
    link: Link,
    conn: ConnectionManager,
    ns_metrics: Vec<NsMetrics>,
    connected: IntGauge,
    received: IntCounter,
    tracked: IntGauge,
    origin: Instant,
}

impl Watcher {
    /// Set up the watcher of `target`; connects lazily. `sampler` is the same target's
    /// sampler state (for owner hashes and reconciliation). Call inside a tokio runtime.
    pub fn new(
        target: &TargetConfig,
        namespaces: &[NamespaceConfig],
        sampler: Arc<TargetState>,
        metrics: &Metrics,
    ) -> Result<Self, WatchError> {
        let link = Link::new(target)?;
        let conn = link.managed()?;
        let prefix = format!("__keyspace@{}__:", link.db());
        let channels = namespaces
            .iter()
            .map(|n| [prefix.as_bytes(), n.pattern.as_str().as_bytes()].concat())
            .collect();
        let t = target.name.as_str();
        let ns_metrics = namespaces
            .iter()
            .map(|n| {
                let ns = n.name.as_str();
                NsMetrics {
                    transitions: Transition::ALL
                        .map(|k| metrics.lock_transitions_total.with_label_values(&[t, ns, k.as_str()])),
                    takeovers: metrics.lock_expiry_takeovers_total.with_label_values(&[t, ns]),
                    hold: HoldEnd::ALL.map(|e| {
                        metrics
                            .lock_hold_duration_seconds
                            .with_label_values(&[t, ns, e.as_str()])
                    }),
                }
            })
            .collect();
        Ok(Watcher {
            target: target.clone(),
            namespaces: namespaces.to_vec(),
            channels,
            prefix_len: prefix.len(),
            needed: notify::needed_flags(namespaces),
            sampler,
            state: Arc::new(LifecycleState::new(t)),
            link,
            conn,
            ns_metrics,
            connected: metrics.notifications_connected.with_label_values(&[t]),
            received: metrics.notifications_received_total.with_label_values(&[t]),
            tracked: metrics.lifecycle_tracked_locks.with_label_values(&[t]),
            origin: Instant::now(),
        })
    }

    pub fn state(&self) -> Arc<LifecycleState> {
        self.state.clone()
    }

    /// Subscribe, follow the stream, and resubscribe with backoff until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
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
        self.connected.set(i64::from(up));
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
        let marks: Vec<u32> = self
            .sampler
            .namespaces
            .iter()
            .map(|n| n.table().pass_number())
            .collect();
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
                    self.received.inc_by(n);
                    self.flush_reads(&mut pending, &mut in_flight, &tx);
                }
                _ = sweep.tick() => {
                    tracker.sweep(self.now_ms());
                    self.tracked.set(tracker.len() as i64);
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
            let sampler = self.sampler.clone();
            let tx = tx.clone();
            let timeout = self.target.sample_budget;
            *in_flight += 1;
            tokio::spawn(async move {
                let read = tokio::time::timeout(timeout, read::read_owners(&mut conn, &kind, &keys)).await;
                let owners = match read {
                    Ok(Ok(owners)) => {
                        let ns_state = &sampler.namespaces[ns];
                        Some(
                            owners
                                .iter()
                                .map(|o| o.as_deref().map(|o| ns_state.owner_hash(o)))
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

/// The start-up check of `notifications = "require"`: refuse to start when the server is
/// reachable and lacks the flags (or will not say). An unreachable server is not refused
/// here: the watcher checks again on every connect and stays unsubscribed until they are on.
pub async fn preflight(target: &TargetConfig, namespaces: &[NamespaceConfig]) -> Result<(), WatchError> {
    if target.notifications != Notifications::Require {
        return Ok(());
    }
    let mut conn = match crate::access::connect::once(target).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(target_name = %target.name, error = %e,
                "cannot check notify-keyspace-events at start; the watcher will check on connect");
            return Ok(());
        }
    };
    match notify::apply(Notifications::Require, &notify::needed_flags(namespaces), &mut conn).await {
        Ok(_) => Ok(()),
        Err(NotifyError::Redis(e)) => {
            tracing::warn!(target_name = %target.name, error = %e,
                "cannot check notify-keyspace-events at start; the watcher will check on connect");
            Ok(())
        }
        Err(source) => Err(WatchError::Notifications {
            target: target.name.clone(),
            source,
        }),
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The tracker's observer: counts, logs, records history and queues owner reads.
struct Recorder<'a> {
    w: &'a Watcher,
    history: &'a mut History,
    reads: &'a mut Vec<ReadRequest>,
    wall_ms: i64,
}

impl<'a> Recorder<'a> {
    fn new(w: &'a Watcher, history: &'a mut History, reads: &'a mut Vec<ReadRequest>, wall_ms: i64) -> Self {
        Recorder {
            w,
            history,
            reads,
            wall_ms,
        }
    }

    /// One pub/sub message: which namespace (by the pattern it came through), which key, which event.
    fn handle(&mut self, tracker: &mut Tracker, msg: &redis::Msg, now_ms: i64, marks: &[u32]) {
        let Some(notice) = Notice::parse(msg.get_payload_bytes()) else {
            return;
        };
        let (Ok(Some(pattern)), Ok(channel)) = (msg.get_pattern::<Option<Vec<u8>>>(), msg.get_channel::<Vec<u8>>())
        else {
            return;
        };
        let Some(ns) = self.w.channels.iter().position(|c| *c == pattern) else {
            return;
        };
        let Some(key) = channel.get(self.w.prefix_len..) else {
            return;
        };
        let sampler = &self.w.sampler;
        let fallback = || {
            let ns_state = sampler.namespaces.get(ns)?;
            ns_state.table().owner_seen_after(key, marks.get(ns).copied()?)
        };
        tracker.notice(ns, key, notice, now_ms, fallback, self);
    }
}

impl Observer for Recorder<'_> {
    fn transition(&mut self, ns: usize, key: &[u8], kind: Transition, owner: Option<u64>) {
        if let Some(m) = self.w.ns_metrics.get(ns) {
            m.transitions[kind.index()].inc();
        }
        self.history.push(key, self.wall_ms, kind, owner);
        if kind == Transition::Evicted {
            tracing::warn!(target_name = %self.w.target.name, namespace = %self.w.namespaces[ns].name,
                key = %String::from_utf8_lossy(key),
                "lock evicted by the maxmemory policy while held: another worker can take it now; give lock keys a noeviction home");
        }
    }

    fn hold(&mut self, ns: usize, end: HoldEnd, ms: i64) {
        if let Some(m) = self.w.ns_metrics.get(ns) {
            let i = match end {
                HoldEnd::Released => 0,
                HoldEnd::Expired => 1,
            };
            m.hold[i].observe(ms.max(0) as f64 / 1000.0);
        }
    }

    fn takeover(&mut self, ns: usize, key: &[u8], previous: u64, owner: u64, gap_ms: i64) {
        if let Some(m) = self.w.ns_metrics.get(ns) {
            m.takeovers.inc();
        }
        self.history.mark_takeover(key, owner);
        tracing::warn!(target_name = %self.w.target.name, namespace = %self.w.namespaces[ns].name,
            key = %String::from_utf8_lossy(key), previous_owner = %format!("{previous:016x}"),
            owner = %format!("{owner:016x}"), after_ms = gap_ms,
            "expiry takeover: the lock expired under one owner and another took it; if the first is still working, two run the same job");
    }

    fn read_owner(&mut self, ns: usize, key: &[u8], generation: u32) {
        self.reads.push(ReadRequest {
            ns,
            key: key.to_vec(),
            generation,
        });
    }

    fn owner_learnt(&mut self, _ns: usize, key: &[u8], owner: u64) {
        self.history.fill_owner(key, owner);
    }
}
