//! What the watcher does with what the tracker reports (`Recorder`, the tracker's
//! observer): count transitions, holds, headroom, near misses and takeovers, log them,
//! record each key's history, queue owner reads; in events mode, answer the tracker's
//! question of a key's expiry from the lock table. Also the start-up check of
//! `notifications = "require"`.

use std::time::{SystemTime, UNIX_EPOCH};

use super::headroom::{self, Expiry, Headroom};
use super::history::History;
use super::migration::Event;
use super::tracker::{Notice, Observer, Tracker};
use super::{ReadRequest, WatchError, Watcher};
use crate::access::notify::{self, NotifyError};
use crate::config::{NamespaceConfig, Notifications, TargetConfig};
use crate::locks::events::{Need, Write};
use crate::vocab::{HeadroomAt, HoldEnd, Transition};

/// The start-up check of `notifications = "require"`: refuse to start when the server is
/// reachable and lacks the flags (or will not say). An unreachable server is not refused
/// here: the watcher checks again on every connect and stays unsubscribed until they are on.
pub(crate) async fn preflight(target: &TargetConfig, namespaces: &[NamespaceConfig]) -> Result<(), WatchError> {
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

pub(super) fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The tracker's observer: counts, logs, records history and queues owner reads.
pub(super) struct Recorder<'a> {
    w: &'a Watcher,
    history: &'a mut History,
    reads: &'a mut Vec<ReadRequest>,
    wall_ms: i64,
    /// The lock table's clock, read once per window of messages (`warm`), not per message.
    table_ms: i64,
}

impl<'a> Recorder<'a> {
    pub(super) fn new(w: &'a Watcher, history: &'a mut History, reads: &'a mut Vec<ReadRequest>, wall_ms: i64) -> Self {
        Recorder {
            w,
            history,
            reads,
            wall_ms,
            table_ms: w.locks.now_ms(),
        }
    }

    /// One pub/sub message from primary `node`: which namespace (by the pattern it came
    /// through), which key, which event.
    pub(super) fn parse(&self, node: usize, msg: &crate::access::pubsub::Message<'_>) -> Option<Event> {
        let (ns, fence, key) = self.locate(msg)?;
        // A canary under a broad lock pattern (`*`): the canary's own subscription has it.
        if key.starts_with(crate::access::canary::PREFIX.as_bytes()) {
            return None;
        }
        let key = crate::dense::Key::new(key);
        Some(Event {
            node,
            ns,
            fence,
            key,
            event: crate::dense::Key::new(msg.payload),
        })
    }

    /// A message's namespace (by the pattern it came through), whether it is a fence's, and
    /// its key.
    fn locate<'m>(&self, msg: &crate::access::pubsub::Message<'m>) -> Option<(usize, bool, &'m [u8])> {
        let &(_, ns, fence) = self.w.channels.iter().find(|(c, _, _)| c.as_slice() == msg.pattern)?;
        Some((ns, fence, msg.channel.get(self.w.prefix_len..)?))
    }

    /// Before `window`'s messages are applied, what they will touch (the key's tracker entry,
    /// history and, in events mode, lock table entry) is looked up once for all of them: the
    /// lookups' cache misses then overlap, where applying them one by one waits for each in
    /// turn. Nothing is changed.
    pub(super) fn warm(&mut self, window: &[crate::access::pubsub::Message<'_>], tracker: &Tracker) {
        self.table_ms = self.w.locks.now_ms();
        let events = self.w.locks.subscription().is_some();
        let mut table: Option<(usize, std::sync::MutexGuard<'_, crate::locks::table::NamespaceTable>)> = None;
        for m in window {
            let Some((ns, fence, key)) = self.locate(m) else {
                continue;
            };
            std::hint::black_box(tracker.warm(key) | self.history.warm(key));
            if !events || fence {
                continue;
            }
            if table.as_ref().is_none_or(|(n, _)| *n != ns) {
                // One table locked at a time: the last one's guard goes first.
                drop(table.take());
                table = self.w.locks.namespaces.get(ns).map(|n| (ns, n.table()));
            }
            if let Some((_, t)) = &table {
                std::hint::black_box(t.lock(key).is_some());
            }
        }
    }

    /// One event, at `now_ms`: to the tracker, and in events mode to the lock table.
    pub(super) fn apply(&mut self, tracker: &mut Tracker, ev: &Event, now_ms: i64, marks: &[u32]) {
        // The tracker first: its owner fallback reads the lock table as it was before
        // this event.
        self.count(tracker, ev, now_ms, marks);
        self.table(ev);
    }

    /// The event to the tracker alone (its table part applied already: a key's event
    /// that waits for a check behind a `del` still says at once whether the key exists).
    pub(super) fn count(&mut self, tracker: &mut Tracker, ev: &Event, now_ms: i64, marks: &[u32]) {
        if !ev.fence
            && let Some(notice) = Notice::parse(&ev.event)
        {
            self.notice(tracker, ev.ns, &ev.key, notice, now_ms, marks);
        }
    }

    /// The event to the lock table alone, in events mode.
    pub(super) fn table(&mut self, ev: &Event) {
        if self.w.locks.subscription().is_some() {
            self.track(ev.ns, ev.fence, &ev.key, &ev.event);
        }
    }

    /// A lock's `del` waits for its check: out of the table's census until it says.
    pub(super) fn aside(&mut self, ns: usize, key: &[u8]) {
        if self.w.locks.subscription().is_some()
            && let Some(n) = self.w.locks.namespaces.get(ns)
        {
            n.table().set_aside(key);
        }
    }

    /// The check said: moved (the lock back in the table) or gone.
    pub(super) fn settle_aside(&mut self, ns: usize, key: &[u8], moved: bool) {
        if let Some(n) = self.w.locks.namespaces.get(ns) {
            n.table().settle_aside(key, moved);
        }
    }

    fn notice(&mut self, tracker: &mut Tracker, ns: usize, key: &[u8], notice: Notice, now_ms: i64, marks: &[u32]) {
        let locks = &self.w.locks;
        let fallback = || {
            let ns_locks = locks.namespaces.get(ns)?;
            ns_locks.table().owner_seen_after(key, marks.get(ns).copied()?)
        };
        tracker.notice(ns, key, notice, now_ms, fallback, self);
    }
}

impl Recorder<'_> {
    /// Events mode: the event's word on whether `key` exists, into the lock table; a
    /// written lock key is read (owner and TTL) next.
    fn track(&mut self, ns: usize, fence: bool, key: &[u8], event: &[u8]) {
        let Some(ns_locks) = self.w.locks.namespaces.get(ns) else {
            return;
        };
        let membership = Membership::of(event);
        if membership == Membership::Unrelated {
            return;
        }
        let now = self.table_ms;
        let mut table = ns_locks.table();
        match (membership, fence) {
            (Membership::Written, false) => {
                let write = match event {
                    b"set" => Write::Value,
                    b"expire" | b"pexpire" => Write::Ttl,
                    _ => Write::Other,
                };
                let (seq, ttl) = match table.announce(key, write, now) {
                    Need::Full(seq) => (seq, true),
                    Need::Owner(seq) => (seq, false),
                    Need::Nothing => return,
                };
                drop(table);
                // One read serves every event of the key still waiting for it (the `set` and
                // `expire` of an acquisition, the tracker's owner read): the newest count wins.
                if let Some(waiting) = self
                    .reads
                    .iter_mut()
                    .rev()
                    .take(READ_MERGE_WINDOW)
                    .find(|r| r.ns == ns && r.key.as_bytes() == key)
                {
                    waiting.seq = Some(seq);
                    waiting.ttl |= ttl;
                    waiting.written_ms = now;
                    return;
                }
                self.reads.push(ReadRequest {
                    ns,
                    key: crate::dense::Key::new(key),
                    generation: None,
                    seq: Some(seq),
                    ttl,
                    written_ms: now,
                    sent_ms: now,
                });
            }
            (Membership::Written, true) => table.announce_fence(key),
            (Membership::Removed, false) => table.forget(key),
            (Membership::Removed, true) => table.forget_fence(key),
            (Membership::Unrelated, _) => {}
        }
    }
}

/// How far back in the queue a new event's read looks for one of the same key to share.
const READ_MERGE_WINDOW: usize = 16;

/// What a keyspace event says about the key's existence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Membership {
    /// It exists and was written: its value or TTL may have changed.
    Written,
    /// It is gone (deleted, expired, evicted, renamed or moved away).
    Removed,
    Unrelated,
}

impl Membership {
    fn of(event: &[u8]) -> Self {
        match event {
            b"set" | b"hset" | b"hincrby" | b"hincrbyfloat" | b"hdel" | b"expire" | b"persist" | b"rename_to"
            | b"restore" | b"copy_to" | b"incrby" | b"incrbyfloat" | b"move_to" => Membership::Written,
            b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => Membership::Removed,
            _ => Membership::Unrelated,
        }
    }
}

impl Observer for Recorder<'_> {
    fn transition(&mut self, ns: usize, key: &[u8], kind: Transition, owner: Option<u64>) {
        if let Some(m) = self.w.metrics.namespaces.get(ns) {
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
        if let Some(m) = self.w.metrics.namespaces.get(ns) {
            m.hold[end.index()].observe(ms.max(0) as f64 / 1000.0);
        }
    }

    fn takeover(&mut self, ns: usize, key: &[u8], previous: u64, owner: u64, gap_ms: i64) {
        if let Some(m) = self.w.metrics.namespaces.get(ns) {
            m.takeovers.inc();
        }
        self.history.mark_takeover(key, owner);
        self.w.locks.record_takeover(ns, key);
        tracing::warn!(target_name = %self.w.target.name, namespace = %self.w.namespaces[ns].name,
            key = %String::from_utf8_lossy(key), previous_owner = %format!("{previous:016x}"),
            owner = %format!("{owner:016x}"), after_ms = gap_ms,
            "expiry takeover: the lock expired under one owner and another took it; if the first is still working, two run the same job");
    }

    fn read_owner(&mut self, ns: usize, key: &[u8], generation: u32) {
        self.reads.push(ReadRequest {
            ns,
            key: crate::dense::Key::new(key),
            generation: Some(generation),
            seq: None,
            ttl: false,
            written_ms: self.table_ms,
            sent_ms: 0,
        });
    }

    fn owner_learnt(&mut self, _ns: usize, key: &[u8], owner: u64) {
        self.history.fill_owner(key, owner);
    }

    fn headroom(&mut self, ns: usize, at: HeadroomAt, h: Headroom) {
        let (Some(m), Some(n)) = (self.w.metrics.namespaces.get(ns), self.w.namespaces.get(ns)) else {
            return;
        };
        m.headroom[at.index()].observe(h.left_ms as f64 / 1000.0);
        if headroom::near_miss(h, n.alerts.headroom_fraction) {
            m.near_misses[at.index()].inc();
        }
    }

    fn renewal_interval(&mut self, ns: usize, ms: i64) {
        if let Some(m) = self.w.metrics.namespaces.get(ns) {
            m.renewal_interval.observe(ms.max(0) as f64 / 1000.0);
        }
    }

    /// In events mode a read follows every write of a lock key, so the table's expiry is the
    /// TTL really set (as of the last write whose read has answered).
    fn expiry(&mut self, ns: usize, key: &[u8]) -> Expiry {
        let locks = &self.w.locks;
        if locks.subscription().is_none() {
            return Expiry::Unknown;
        }
        let Some(ns_locks) = locks.namespaces.get(ns) else {
            return Expiry::Unknown;
        };
        let now = locks.now_ms();
        let pttl = ns_locks.table().lock(key).filter(|e| e.known()).map(|e| e.pttl_at(now));
        match pttl {
            Some(-1) => Expiry::Never,
            Some(ms) => Expiry::Left(ms),
            None => Expiry::Unknown,
        }
    }
}
