//! What a subscription does with its messages and with the answers of its checks and
//! handoff tasks: each message is a marker of an import (`handoff.rs`), a canary's event,
//! or a lock event — foreign (to its import), a copy still due from an import that ended
//! (dropped), or counted: applied, or held behind its key's `del` check
//! (`migration::Deferrals`), the lock table told at once. Per import, a task writes its
//! markers on the source (`marking`); the answers resolve it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::stream::{BoxStream, SelectAll};
use futures_util::{FutureExt, StreamExt};
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::canary::{Canaries, Judged};
use super::handoff::{Follow, Imports, Placed, Resolved};
use super::migration::{Admit, Check, Deferrals, Event, Verified};
use super::owners::Owners;
use super::read_budget::OwnerReads;
use super::recorder::{Recorder, wall_ms};
use super::tracker::{Notice, Tracker};
use super::verify::{self, Verify};
use super::{BATCH, ReadRequest, SessionError, WARM, Watcher};
use crate::access::canary::{self, Marked};
use crate::access::cluster::slot;
use crate::access::pubsub::{Chunk, Message, Sink};

/// One primary's notifications in chunks, tagged with its index; `None` when its stream ended.
pub(super) type Tagged = BoxStream<'static, Option<(usize, Chunk)>>;

/// An import's markers are written this often.
const MARK_EVERY: Duration = Duration::from_millis(50);

/// What the tasks of the slot handoffs tell the subscription.
#[derive(Debug)]
pub(super) enum Handoff {
    /// A target's imports as it lists them (`None`: it could not be asked).
    Listed {
        target: usize,
        imports: Option<Vec<Vec<(u16, u16)>>>,
    },
    /// The source answered a marker of import `id` `MOVED`: it gave the slots up.
    Flipped { id: u64 },
    /// The source answered `ASK`: a key-by-key migration.
    Legacy { id: u64 },
    /// No marker can be written on the source.
    Unmarked { id: u64, why: String },
    /// The source's stream was read after its `MOVED` (a `PING` answered).
    SourceRead { id: u64 },
    /// The `PING` on a primary the layout gives `slots`: it counts for them once handled.
    Settled { node: usize, slots: Vec<u16>, ok: bool },
}

/// The connections and channels a subscription's checks and handoff tasks use.
pub(super) struct Links {
    /// Each primary's address and own connection (markers, a target's list of imports, a
    /// `del`'s check).
    pub direct: Vec<(String, ConnectionManager)>,
    /// Each primary's subscription (its `PING`s).
    pub sinks: Vec<Sink>,
    pub verified: mpsc::Sender<Verified>,
    pub handoff: mpsc::Sender<Handoff>,
}

/// How counted events are applied: at once, or behind their key's `del` check.
pub(super) struct Counted {
    pub deferrals: Deferrals,
    /// The lock tables' pass numbers at the subscription (owners seen after it stand in).
    pub marks: Vec<u32>,
    pub cluster: bool,
}

/// The state of a subscription that its messages, checks and handoffs change.
pub(super) struct Flow {
    pub counted: Counted,
    /// Owner reads waiting for a pipeline.
    pub pending: Vec<ReadRequest>,
    /// The budget of owner reads after `set`s of known locks.
    pub owner_reads: OwnerReads,
    /// A cluster's slots and whose events count for them.
    pub owners: Option<Owners>,
    pub imports: Imports,
    /// Each import's marking task's stop.
    pub marking: HashMap<u64, Arc<AtomicBool>>,
    /// Whether markers can be written and seen (the canary's write and channel allowed).
    pub markers: bool,
}

impl Flow {
    pub(super) fn new(owners: Option<Owners>, marks: Vec<u32>, markers: bool) -> Self {
        Flow {
            counted: Counted {
                deferrals: Deferrals::default(),
                marks,
                cluster: owners.is_some(),
            },
            pending: Vec::new(),
            owner_reads: OwnerReads::new(std::time::Instant::now()),
            owners,
            imports: Imports::default(),
            marking: HashMap::new(),
            markers,
        }
    }
}

impl Watcher {
    /// Messages: `first` (if any), then those that are there already — up to `BATCH`, or
    /// all of them with `drain`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn intake(
        &self,
        first: Option<(usize, Chunk)>,
        streams: &mut SelectAll<Tagged>,
        drain: bool,
        tracker: &mut Tracker,
        flow: &mut Flow,
        links: &Links,
        canaries: &mut Canaries,
        verify: &mut Verify,
    ) -> Result<(), SessionError> {
        let now = self.now_ms();
        let mut checks = Vec::new();
        let mut resolved = Vec::new();
        let mut ask = Vec::new();
        let mut history = self.state.history();
        let mut obs = Recorder::new(self, &mut history, &mut flow.pending, wall_ms());
        let (mut n, mut taken, mut evidence) = (0u64, 0usize, 0u8);
        let mut next = first;
        loop {
            if next.is_none() && (drain || taken < BATCH) {
                // Out of Tokio's cooperative budget, a channel with messages in it answers
                // `Pending`: a drain would stop short of what a `PING` answered after.
                next = match tokio::task::coop::unconstrained(streams.next()).now_or_never() {
                    Some(Some(Some(m))) => Some(m),
                    Some(_) => return Err(SessionError::Closed),
                    None => None,
                };
            }
            let Some((node, chunk)) = next.take() else { break };
            let messages: Vec<Message<'_>> = chunk.messages().collect();
            for window in messages.chunks(WARM) {
                obs.warm(window, tracker);
                for m in window {
                    taken += 1;
                    if let Some(seq) = self.marker(m) {
                        resolved.extend(flow.imports.marked(node, seq >> 32, seq & u64::from(u32::MAX), now));
                    } else if let Some(judged) = canaries.seen(node, m) {
                        if let Some(Judged(i, round)) = judged {
                            verify.round(i, round);
                        }
                    } else if let Some(ev) = obs.parse(node, m) {
                        n += 1;
                        if ev.event == b"restore" {
                            flow.counted.deferrals.restored(&ev.key, node, now);
                        }
                        evidence |= passive_evidence(&ev.event);
                        if flow.owners.as_ref().is_some_and(|o| o.foreign(node, &ev.key)) {
                            match flow.imports.foreign(ev, now) {
                                Placed::Count(ev) => flow.counted.admit(&mut obs, tracker, &mut checks, ev, now),
                                Placed::Unplaced { first: true } => ask.push(node),
                                Placed::Dropped => {
                                    tracing::debug!(target_name = %self.target.name, node, "slot migration: a copy dropped")
                                }
                                Placed::Pending | Placed::Unplaced { first: false } => {}
                            }
                        } else if !flow.imports.copy_due(node, &ev.key, now) {
                            flow.imports.source_event(node, &ev.key);
                            flow.counted.admit(&mut obs, tracker, &mut checks, ev, now);
                        } else {
                            tracing::debug!(target_name = %self.target.name, node, key = %String::from_utf8_lossy(&ev.key),
                        event = %String::from_utf8_lossy(&ev.event), "slot migration: a copy still due from the new primary, dropped");
                        }
                    }
                }
            }
        }
        drop(history);
        self.metrics.received.inc_by(n);
        if n > 0 {
            verify.received();
        }
        verify.evidence(evidence);
        let covers = flow.counted.deferrals.seq();
        for check in checks {
            self.spawn_verify(links, check, covers);
        }
        for target in ask {
            self.list_imports(target, links);
        }
        if !resolved.is_empty() {
            for r in resolved {
                self.resolved(r, tracker, flow, links);
            }
            self.release_held(flow);
        }
        Ok(())
    }

    /// Slots held back from their new primary (`Imports::settle`) whose events no longer
    /// wait: they count from it now.
    fn release_held(&self, flow: &mut Flow) {
        for (node, slots) in flow.imports.ready() {
            if let Some(o) = &mut flow.owners {
                o.settle(node, slots, true);
            }
        }
    }

    /// The number of an import's marker, when `m` is the `set` of one of this watcher's
    /// (read without copying: it is asked of every message).
    fn marker(&self, m: &Message<'_>) -> Option<u64> {
        if m.payload != b"set" {
            return None;
        }
        let key = m.channel.get(self.prefix_len..)?;
        canary::marker_seq(key, &self.instance)
    }

    /// A `del`'s check done (its streams read to there): the `del` dropped if a move, the
    /// key's events that waited behind it applied, up to its next `del`, checked in turn.
    pub(super) fn checked(&self, mut v: Verified, tracker: &mut Tracker, flow: &mut Flow, links: &Links) {
        let carried = self.renumbered(v.epoch, v.ns);
        if let Some(ns) = carried {
            v.ns = ns;
        }
        let decided = flow.counted.deferrals.resolve(&v.key, v.covers);
        if decided.moved {
            tracing::debug!(target_name = %self.target.name, key = %String::from_utf8_lossy(&v.key),
                "slot migration: a del was a move (another primary restored the key), dropped");
        }
        let mut history = self.state.history();
        let mut obs = Recorder::new(self, &mut history, &mut flow.pending, wall_ms());
        // The table hears of the last `del` of the wait once it is decided.
        if !v.fence && carried.is_some() && decided.next.is_none() {
            obs.settle_aside(v.ns, &v.key, decided.moved);
        }
        for (ev, at) in &decided.apply {
            // The table took them when they came; a fencing counter's `del` waited.
            match ev.fence && ev.event == b"del" {
                true => obs.apply(tracker, ev, *at, &flow.counted.marks),
                false => obs.count(tracker, ev, *at, &flow.counted.marks),
            }
        }
        drop(history);
        if let Some(next) = decided.next {
            self.spawn_verify(links, next, flow.counted.deferrals.seq());
        }
    }

    /// What a handoff task said.
    pub(super) fn handoff(&self, said: Handoff, tracker: &mut Tracker, flow: &mut Flow, links: &Links) {
        let now = self.now_ms();
        match said {
            Handoff::Listed { target, imports } => {
                let owners = flow.owners.clone();
                let source_of = |s: u16| owners.as_ref().and_then(|o| o.of_slot(s));
                let placing = flow.imports.place(target, imports, source_of, now);
                for follow in placing.follow {
                    self.mark_import(follow, flow, links);
                }
                self.count_now(placing.count, tracker, flow, links);
            }
            Handoff::Flipped { id } => {
                if let Some(source) = flow.imports.flipped(id, now)
                    && let Some(sink) = links.sinks.get(source).cloned()
                {
                    let (tx, limit) = (links.handoff.clone(), self.target.sample_budget);
                    tokio::spawn(async move {
                        // A failed PING ends the session: the import goes with it.
                        if let Ok(Ok(())) = tokio::time::timeout(limit, sink.ping()).await {
                            let _ = tx.send(Handoff::SourceRead { id }).await;
                        }
                    });
                }
            }
            Handoff::SourceRead { id } => {
                if let Some(r) = flow.imports.source_read(id, now) {
                    self.resolved(r, tracker, flow, links);
                }
            }
            Handoff::Legacy { id } => {
                self.stop_marking(id, flow);
                let events = flow.imports.legacy(id);
                self.count_now(events, tracker, flow, links);
            }
            Handoff::Unmarked { id, why } => {
                self.stop_marking(id, flow);
                tracing::warn!(target_name = %self.target.name, error = %why,
                    "slot migration: no marker can be written on the source (the canary's write is refused); the target's events for the slots it imports are not counted until the topology shows it serving them");
                flow.imports.unmarked(id);
            }
            Handoff::Settled { node, slots, ok } => {
                let now = if ok {
                    flow.imports.settle(node, &slots)
                } else {
                    Vec::new()
                };
                if let Some(o) = &mut flow.owners {
                    // Every slot leaves the waiting; those held count from `node` later.
                    o.settle(node, slots, false);
                    o.settle(node, now, true);
                }
            }
        }
        self.release_held(flow);
    }

    /// Imports that waited too long (`Imports::overdue`).
    pub(super) fn overdue(&self, tracker: &mut Tracker, flow: &mut Flow, links: &Links) {
        for r in flow.imports.overdue(self.now_ms()) {
            tracing::warn!(target_name = %self.target.name, import = r.id,
                "slot migration: the import's markers did not come; its events until now are not counted");
            self.resolved(r, tracker, flow, links);
        }
        self.release_held(flow);
    }

    /// An import ended: the target's own events count, and its slots count from it on.
    fn resolved(&self, r: Resolved, tracker: &mut Tracker, flow: &mut Flow, links: &Links) {
        self.stop_marking(r.id, flow);
        if let Some(o) = &mut flow.owners {
            o.settle(r.target, r.ranges.iter().flat_map(|&(a, b)| a..=b), true);
        }
        tracing::debug!(target_name = %self.target.name, import = r.id, counted = r.count.len(),
            "slot migration over: the slots count from their new primary on");
        self.count_now(r.count, tracker, flow, links);
    }

    /// Events of a primary that turned out to count: as if they came now.
    fn count_now(&self, events: Vec<(Event, i64)>, tracker: &mut Tracker, flow: &mut Flow, links: &Links) {
        let mut checks = Vec::new();
        let mut history = self.state.history();
        let mut obs = Recorder::new(self, &mut history, &mut flow.pending, wall_ms());
        for (ev, at) in events {
            flow.counted.admit(&mut obs, tracker, &mut checks, ev, at);
        }
        drop(history);
        let covers = flow.counted.deferrals.seq();
        for check in checks {
            self.spawn_verify(links, check, covers);
        }
    }

    fn stop_marking(&self, id: u64, flow: &mut Flow) {
        if let Some(stop) = flow.marking.remove(&id) {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// Ask `target` which slots it imports.
    fn list_imports(&self, target: usize, links: &Links) {
        let Some((_, mut conn)) = links.direct.get(target).cloned() else {
            return;
        };
        let (tx, limit) = (links.handoff.clone(), self.target.sample_budget);
        tokio::spawn(async move {
            let imports = match tokio::time::timeout(limit, crate::access::cluster::imports(&mut conn)).await {
                Ok(Ok(r)) => Some(r),
                // A server without atomic slot migration (neither command known): it
                // imports nothing but key by key. Refused (ACL) or unanswered: unknown.
                Ok(Err(e))
                    if !(e.is_io_error()
                        || e.is_timeout()
                        || e.is_connection_dropped()
                        || e.code() == Some("NOPERM")) =>
                {
                    Some(Vec::new())
                }
                _ => None,
            };
            let _ = tx.send(Handoff::Listed { target, imports }).await;
        });
    }

    /// Follow an import: markers on its source, one of its slots, every `MARK_EVERY`
    /// until the source answers `MOVED` (or `ASK`, or refuses).
    fn mark_import(&self, follow: Follow, flow: &mut Flow, links: &Links) {
        let tx = links.handoff.clone();
        let id = follow.id;
        let key = follow
            .ranges
            .iter()
            .flat_map(|&(a, b)| a..=b)
            .find_map(|s| canary::key_for(&self.instance, |k| slot(k) == s));
        let (Some(key), Some((_, mut conn)), true) = (key, links.direct.get(follow.source).cloned(), flow.markers)
        else {
            flow.imports.unmarked(id);
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        flow.marking.insert(id, stop.clone());
        let limit = self.target.sample_budget;
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let marker = canary::marker(&key, (id << 32) | n);
                let said = match tokio::time::timeout(limit, canary::mark(&mut conn, &marker)).await {
                    Ok(Ok(Marked::Ok)) | Ok(Err(_)) | Err(_) => None,
                    Ok(Ok(Marked::Moved)) => Some(Handoff::Flipped { id }),
                    Ok(Ok(Marked::Ask)) => Some(Handoff::Legacy { id }),
                    Ok(Ok(Marked::Refused(why))) => Some(Handoff::Unmarked { id, why }),
                };
                if let Some(said) = said {
                    let _ = tx.send(said).await;
                    return;
                }
                tokio::time::sleep(MARK_EVERY).await;
            }
        });
    }

    /// `PING` the subscriptions of primary `node`, for the slots the layout gives it, and of
    /// the primaries counted for them so far (`from`), then say so: every event they
    /// published before is then in their streams, and is taken under the owners so far.
    pub(super) fn settle(&self, links: &Links, node: usize, from: Vec<usize>, slots: Vec<u16>) {
        let mut nodes = from;
        nodes.push(node);
        nodes.sort_unstable();
        nodes.dedup();
        let Some(sinks) = nodes
            .iter()
            .map(|&n| links.sinks.get(n).cloned())
            .collect::<Option<Vec<Sink>>>()
        else {
            return;
        };
        let limit = self.target.sample_budget;
        let tx = links.handoff.clone();
        tokio::spawn(async move {
            let pings = sinks
                .into_iter()
                .map(|sink| async move { matches!(tokio::time::timeout(limit, sink.ping()).await, Ok(Ok(()))) });
            let ok = futures_util::future::join_all(pings).await.into_iter().all(|ok| ok);
            let _ = tx.send(Handoff::Settled { node, slots, ok }).await;
        });
    }
}

impl Counted {
    /// A counted event: applied now, or — behind its key's check, or a `del` to check —
    /// told the lock table at once (a lock's `del` sets it aside) and counted once decided.
    fn admit(&mut self, obs: &mut Recorder<'_>, tracker: &mut Tracker, checks: &mut Vec<Check>, ev: Event, now: i64) {
        if self.deferrals.waits(&ev, self.cluster) {
            match (ev.event.as_bytes(), ev.fence) {
                (b"del", false) => obs.aside(ev.ns, &ev.key),
                (b"del", true) => {}
                _ => obs.table(&ev),
            }
        }
        match self.deferrals.admit(ev, now, self.cluster) {
            Admit::Now(ev) => obs.apply(tracker, &ev, now, &self.marks),
            Admit::Verify(v) => checks.push(v),
            Admit::Queued => {}
        }
    }
}

/// Flags a lock notification shows by arriving (passive evidence; a `set` counts only once
/// a read found its lock).
pub(super) fn passive_evidence(event: &[u8]) -> u8 {
    match Notice::parse(event) {
        Some(Notice::Del | Notice::Expire) => verify::GENERIC,
        Some(Notice::Expired) => verify::EXPIRED,
        Some(Notice::HashWrite) => verify::HASH,
        _ => 0,
    }
}
