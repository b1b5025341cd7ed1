//! The lifecycle watcher: per target, one pub/sub connection subscribed by pattern to the
//! keyspace channels of the namespaces' keys, turning what Redis did to lock keys into
//! transitions, hold durations, TTL headroom and expiry takeovers (`tracker`, `headroom`),
//! with a bounded history per key (`history`). The `notifications` policy is applied on every connect (`notify`).
//!
//! After a gap in the stream it forgets its state rather than guess what it missed, and
//! takes owners from the sampler's passes begun after the resubscribe.

mod canary;
mod checks;
#[doc(hidden)]
pub mod footprint;
mod handoff;
mod headroom;
pub(crate) mod history;
mod intake;
pub(crate) mod metrics;
mod migration;
mod owners;
mod read_budget;
mod recorder;
mod renamespace;
mod session;
pub(crate) mod tracker;
mod verify;

pub(crate) use canary::EVERY as CANARY_EVERY;
pub(crate) use verify::Verdict;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus::IntCounter;
use tokio_util::sync::CancellationToken;

use crate::access::LinkError;
use crate::access::notify::{self, Applied, NotifyError};
use crate::access::read::KeyRead;
use crate::config::{NamespaceConfig, TargetConfig};
use crate::locks::TargetLocks;
use crate::topology::Nodes;
use crate::vocab::{Method, Verification};
use history::History;
use metrics::{TargetMetrics, WatcherMetrics};
pub(crate) use recorder::preflight;
pub(crate) use renamespace::{Renamespace, Renamespacer};
use tracker::Tracker;

/// Lock keys the tracker keeps state for, at most (an 8-byte key hash and a 24-byte entry each).
pub(crate) const MAX_TRACKED: usize = 1_000_000;
/// History records kept, all keys together (32 bytes each in the ring, 16 per key with records).
pub(crate) const HISTORY_CAP: usize = 100_000;
/// Notices handled in one go before the watcher looks at anything else.
const BATCH: usize = 512;
/// Messages whose entries are looked up together before they are applied (`Recorder::warm`).
const WARM: usize = 32;
/// Owner-read pipelines in flight at once.
const READS_IN_FLIGHT: usize = 8;
/// Owner reads waiting for a pipeline; beyond this, owners stay unknown.
const MAX_PENDING_READS: usize = 100_000;
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often a refused `PSUBSCRIBE` is tried again.
const REFUSED_RETRY: Duration = Duration::from_secs(30);
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
    Link(#[from] LinkError),
    #[error("{0}")]
    Topology(String),
    #[error("the primaries changed")]
    PrimariesChanged,
    #[error("the reloaded namespaces need other notification flags")]
    FlagsChanged,
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    #[error("pub/sub: {0}")]
    PubSub(#[from] crate::access::pubsub::PubSubError),
    #[error("{0} timed out")]
    Timeout(&'static str),
    #[error("the server closed the subscription")]
    Closed,
    #[error("{0}")]
    Refused(String),
}

/// What the HTTP side may read about a target's watcher.
pub(crate) struct LifecycleState {
    pub(crate) target: String,
    /// The verification verdict in force.
    verdict: Mutex<Verdict>,
    history: Mutex<History>,
    notifications: Mutex<String>,
    /// Expiry takeovers counted, per namespace name (the namespaces change with a reload).
    takeovers: Mutex<Vec<(String, IntCounter)>>,
}

impl LifecycleState {
    fn new(target: &str, takeovers: Vec<(String, IntCounter)>) -> Self {
        LifecycleState {
            target: target.to_string(),
            verdict: Mutex::new(Verdict {
                state: Verification::NotSubscribed,
                method: Method::Canary,
                words: Some("not subscribed yet".into()),
            }),
            history: Mutex::new(History::new(HISTORY_CAP)),
            notifications: Mutex::new("not checked yet".to_string()),
            takeovers: Mutex::new(takeovers),
        }
    }
    /// Expiry takeovers counted so far in namespace `ns`.
    pub(crate) fn takeovers(&self, ns: &str) -> u64 {
        let takeovers = self.takeovers.lock().unwrap_or_else(|p| p.into_inner());
        takeovers.iter().find(|(n, _)| n == ns).map_or(0, |(_, c)| c.get())
    }
    /// The verification verdict: state, method and words.
    pub(crate) fn verification(&self) -> Verdict {
        self.verdict.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub(crate) fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The server's notification setting as last found, in words.
    pub(crate) fn notifications(&self) -> String {
        self.notifications.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A read of a lock key's owner (and TTL, `ttl`), asked for by the tracker (`generation`)
/// and/or by the lock table after an event (`seq`) at `written_ms` (the table's clock).
pub(crate) struct ReadRequest {
    ns: usize,
    key: crate::dense::Key,
    generation: Option<u32>,
    seq: Option<u16>,
    ttl: bool,
    written_ms: i64,
    /// When the read was sent (the table's clock), set as its pipeline starts.
    sent_ms: i64,
}

impl ReadRequest {
    /// An owner read after a `set` of a lock the table knows (asked by the table, without
    /// the TTL): the one kind the budget may skip.
    fn skippable(&self) -> bool {
        self.seq.is_some() && !self.ttl
    }
}

/// One pipeline's reads: the namespaces' numbering it was asked in (`Watcher::epoch`), the
/// namespace, the requests, and what each key held (`None` when the read failed).
type ReadResult = (u32, usize, Vec<ReadRequest>, Option<Vec<KeyRead>>);

/// How often the server's `notify-keyspace-events` is checked again while subscribed.
const FLAGS_CHECK_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Watcher {
    target: TargetConfig,
    namespaces: Vec<NamespaceConfig>,
    /// `__keyspace@<db>__:<pattern>` of each namespace's locks and fencing counters, with
    /// the namespace and whether the pattern is the fence pattern.
    channels: Vec<(Vec<u8>, usize, bool)>,
    prefix_len: usize,
    /// `__keyspace@<db>__:lockwatch:canary:*`.
    canary_channel: Vec<u8>,
    /// This process's part of its canary keys, so two exporters on one target (an HA pair)
    /// never take each other's canary for their own.
    instance: String,
    needed: String,
    /// The target's lock tables: owner hashes, and owners the sampler saw after a gap.
    locks: Arc<TargetLocks>,
    state: Arc<LifecycleState>,
    /// The target's primaries: one subscription each.
    nodes: Nodes,
    metrics: TargetMetrics,
    /// The families `metrics` come from (the namespaces change with a reload).
    families: WatcherMetrics,
    /// How the namespaces are numbered: one more at each reload that changed them, with
    /// `renumber` mapping the numbers before to those now (reads out across the change).
    epoch: u32,
    renumber: Vec<Option<usize>>,
    /// Namespace changes from a reload, and where they are sent.
    changes: Option<tokio::sync::mpsc::UnboundedReceiver<Renamespace>>,
    changes_tx: tokio::sync::mpsc::UnboundedSender<Renamespace>,
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
        nodes: Nodes,
    ) -> Result<Self, WatchError> {
        let families = metrics.clone();
        let metrics = metrics.for_target(&target.name, namespaces);
        let takeovers = takeover_counters(namespaces, &metrics);
        let (changes_tx, changes) = tokio::sync::mpsc::unbounded_channel();
        Ok(Watcher {
            target: target.clone(),
            namespaces: namespaces.to_vec(),
            channels: channels(target, namespaces),
            prefix_len: keyspace_prefix(target).len(),
            canary_channel: crate::access::canary::channel(target.connection.redis_settings().db()).into_bytes(),
            instance: instance_id(),
            needed: notify::needed_flags(namespaces),
            locks,
            state: Arc::new(LifecycleState::new(&target.name, takeovers)),
            nodes,
            metrics,
            families,
            epoch: 0,
            renumber: Vec::new(),
            changes: Some(changes),
            changes_tx,
            origin: Instant::now(),
        })
    }

    pub(crate) fn state(&self) -> Arc<LifecycleState> {
        self.state.clone()
    }

    /// Where a reload sends this watcher the new namespaces.
    pub(crate) fn renamespacer(&self) -> Renamespacer {
        Renamespacer(self.changes_tx.clone())
    }

    /// Subscribe, follow the stream, and resubscribe with backoff until `shutdown`.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let mut tracker = Tracker::new(&tracker_params(&self.namespaces), MAX_TRACKED);
        let mut changes = self
            .changes
            .take()
            .unwrap_or_else(|| tokio::sync::mpsc::unbounded_channel().1);
        let mut backoff = MIN_BACKOFF;
        let mut last_error = String::new();
        loop {
            let mut subscribed = false;
            let refused;
            let result = self
                .session(&mut tracker, &mut changes, &shutdown, &mut subscribed)
                .await;
            // A subscription that was made says the server is fine: the next try is quick.
            if subscribed {
                backoff = MIN_BACKOFF;
            }
            let state = match &result {
                Err(SessionError::Refused(_)) => Verification::PubsubRefused,
                _ => Verification::NotSubscribed,
            };
            let method = self.state.verification().method;
            let words = result.as_ref().err().map(|e| match e {
                SessionError::Refused(why) => format!("{why}; the provider or the ACL allows no keyspace subscription here, so lockwatch stays in scan mode (see the managed Redis profiles)"),
                e => e.to_string(),
            });
            self.publish(&Verdict { state, method, words });
            match result {
                Ok(()) => return,
                Err(SessionError::PrimariesChanged) => {
                    tracing::info!(target_name = %self.target.name, "primaries changed: subscribing on the new ones");
                    backoff = MIN_BACKOFF;
                    continue;
                }
                Err(SessionError::FlagsChanged) => {
                    tracing::info!(target_name = %self.target.name, "the reloaded namespaces need other notification flags: subscribing anew");
                    backoff = MIN_BACKOFF;
                    continue;
                }
                Err(e) => {
                    refused = matches!(e, SessionError::Refused(_));
                    let e = e.to_string();
                    if e != last_error {
                        tracing::warn!(target_name = %self.target.name, error = %e,
                            "keyspace notifications: not subscribed; lockwatch_notifications_connected is 0 and the target in scan mode until resubscribed");
                    } else {
                        tracing::debug!(target_name = %self.target.name, error = %e, "resubscribe failed again");
                    }
                    last_error = e;
                }
            }
            // A refusal is no passing fault: it is asked again every REFUSED_RETRY.
            let wait = if refused { REFUSED_RETRY } else { backoff };
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = &mut sleep => break,
                    Some(change) = changes.recv() => {
                        // Not subscribed: the next session subscribes to the new channels.
                        self.renamespace(change, &mut tracker);
                        self.locks.unsubscribed();
                    }
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A verdict on the target's notifications: the gauges (subscribed, connected, the
    /// verification state and method) and what the status page says.
    fn publish(&self, v: &Verdict) {
        let subscribed = !matches!(v.state, Verification::NotSubscribed | Verification::PubsubRefused);
        let connected = v.state == Verification::Verified;
        self.metrics.subscribed.set(i64::from(subscribed));
        self.metrics.connected.set(i64::from(connected));
        for s in Verification::ALL {
            self.metrics.verification[s.index()].set(i64::from(s == v.state));
        }
        for m in Method::ALL {
            self.metrics.method[m.index()].set(i64::from(m == v.method));
        }
        *self.state.verdict.lock().unwrap_or_else(|p| p.into_inner()) = v.clone();
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// What applying the policy found on primary `node` (one of `primaries`), in words for
    /// the status page, and logged.
    fn report_applied(&self, node: &str, primaries: usize, applied: &Applied) {
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
                    "cannot read notify-keyspace-events (CONFIG is denied, as on managed Redis): the canary shows whether notifications arrive; enable '{}' in the provider's settings", self.needed);
                format!("notify-keyspace-events unreadable ({why})")
            }
        };
        let words = match primaries {
            1 => words,
            _ => format!("{node}: {words}"),
        };
        *self.state.notifications.lock().unwrap_or_else(|p| p.into_inner()) = words;
    }
}

/// `__keyspace@<db>__:` of the target's database.
fn keyspace_prefix(target: &TargetConfig) -> String {
    format!("__keyspace@{}__:", target.connection.redis_settings().db())
}

/// The channel patterns of `namespaces`' locks and fencing counters, with the namespace and
/// whether the pattern is the fence pattern.
fn channels(target: &TargetConfig, namespaces: &[NamespaceConfig]) -> Vec<(Vec<u8>, usize, bool)> {
    let prefix = keyspace_prefix(target);
    let channel = |glob: &crate::glob::Glob| [prefix.as_bytes(), glob.as_str().as_bytes()].concat();
    let mut channels = Vec::new();
    for (i, n) in namespaces.iter().enumerate() {
        channels.push((channel(&n.pattern), i, false));
        if let Some(f) = &n.fence_pattern {
            channels.push((channel(f), i, true));
        }
    }
    channels
}

/// What the tracker needs of each namespace: its ttl in ms, and whether its locks are
/// Redisson hashes.
fn tracker_params(namespaces: &[NamespaceConfig]) -> Vec<(i64, bool)> {
    namespaces
        .iter()
        .map(|n| {
            (
                i64::try_from(n.ttl.as_millis()).unwrap_or(i64::MAX),
                n.value == crate::config::ValueKind::Redisson,
            )
        })
        .collect()
}

/// Each namespace's expiry-takeover counter, by name, for the status page.
fn takeover_counters(namespaces: &[NamespaceConfig], metrics: &TargetMetrics) -> Vec<(String, IntCounter)> {
    namespaces
        .iter()
        .zip(&metrics.namespaces)
        .map(|(n, m)| (n.name.clone(), m.takeovers.clone()))
        .collect()
}

/// A per-process id for canary keys: the pid and the start time, in hex.
fn instance_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:05x}", std::process::id(), nanos & 0xfffff)
}
