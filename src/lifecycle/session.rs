//! One subscription of the watcher: the `notifications` policy applied on every primary,
//! one pub/sub connection per primary (keyspace notifications are node-local), their
//! streams followed as one, owner reads, and the flags checked again while subscribed. A
//! reload's new namespaces are taken on the live connections (`renamespace`). It ends when
//! a stream ends, a ping fails, or the primaries change.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::SelectAll;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::canary::{Canaries, EVERY as CANARY_EVERY, Judged, Note};
use super::checks::fold_all;
use super::intake::{Flow, Handoff, Links, Tagged};
use super::migration::Verified;
use super::owners::Owners;
use super::read_budget::OwnerReads;
use super::recorder::{Recorder, wall_ms};
use super::renamespace::Renamespace;
use super::tracker::Tracker;
use super::verify::{self, Round, Verify};
use super::{
    FLAGS_CHECK_EVERY, MAX_PENDING_READS, MAX_TRACKED, PING_EVERY, READS_IN_FLIGHT, ReadRequest, ReadResult,
    SessionError, Unsubscribe, Watcher,
};
use crate::access::canary;
use crate::access::notify;
use crate::access::pubsub::{PubSubError, Sink};
use crate::access::read::KeyRead;
use crate::access::reader::Reader;
use crate::config::ValueKind;
use crate::locks::events::{Found, NOT_A_WRITE};
use crate::vocab::Verification;

impl Watcher {
    /// Apply the policy, subscribe on every primary, and follow the streams until one ends
    /// (`Err`) or `shutdown` (`Ok`).
    pub(super) async fn session(
        &mut self,
        tracker: &mut Tracker,
        changes: &mut mpsc::UnboundedReceiver<Renamespace>,
        shutdown: &CancellationToken,
        subscribed: &mut bool,
    ) -> Result<(), SessionError> {
        let limit = self.target.sample_budget.max(Duration::from_secs(2));
        let layout = self.nodes.current();
        if !layout.discovered || layout.primaries.is_empty() {
            return Err(SessionError::Topology(
                layout.problem.clone().unwrap_or_else(|| "no primary known".into()),
            ));
        }
        let primaries: Vec<String> = layout.primaries.iter().map(|p| p.addr.clone()).collect();
        let mut flag_conns: Vec<(String, ConnectionManager)> = Vec::with_capacity(primaries.len());
        let mut each = Vec::with_capacity(primaries.len());
        for p in &layout.primaries {
            let mut conn = p.link.managed()?;
            let applied =
                tokio::time::timeout(limit, notify::apply(self.target.notifications, &self.needed, &mut conn))
                    .await
                    .map_err(|_| SessionError::Timeout("checking notify-keyspace-events"))??;
            each.push(self.flags_of(&p.addr, primaries.len(), &applied));
            self.report_applied(&p.addr, primaries.len(), &applied);
            flag_conns.push((p.addr.clone(), conn));
        }
        let flags = fold_all(each);
        // One canary key per primary, on a slot it serves.
        let reader = match crate::access::cluster::routed(&self.target, limit).await? {
            Some(routed) => Reader::Routed(routed),
            None => Reader::Direct(flag_conns[0].1.clone()),
        };
        let mut streams: SelectAll<Tagged> = SelectAll::new();
        let mut sinks = Vec::with_capacity(primaries.len());
        let mut canary_refused = None;
        for (i, p) in layout.primaries.iter().enumerate() {
            let (mut sink, stream) = p.link.subscriber(limit).await?;
            for (channel, _, _) in &self.channels {
                psubscribe(&mut sink, channel, limit).await?;
            }
            // The canary's channel: refused (an ACL granting only the lock channels), the
            // canary cannot run, and the flags or passive evidence stand in.
            match tokio::time::timeout(limit, sink.psubscribe(self.canary_channel.as_slice())).await {
                Err(_) => return Err(SessionError::Timeout("PSUBSCRIBE")),
                Ok(Err(e @ PubSubError::Refused(_))) => {
                    let c = String::from_utf8_lossy(&self.canary_channel);
                    canary_refused = Some(format!("PSUBSCRIBE `{c}` was refused (grant `&{c}`): {e}"));
                }
                Ok(r) => r?,
            }
            sinks.push(sink);
            let tagged = stream
                .map(move |m| Some((i, m)))
                .chain(futures_util::stream::once(async { None }));
            streams.push(tagged.boxed());
        }
        // Whatever happened while unsubscribed is unknown: start clean, and let the
        // sampler's passes from now on stand in for owners not seen in a `set`.
        tracker.reset();
        let owners = Owners::of(&layout);
        let marks = self.locks.namespaces.iter().map(|n| n.table().pass_number()).collect();
        // Slot handoffs write markers as the canary is written, seen on its channel.
        let mut flow = Flow::new(owners, marks, canary_refused.is_none());
        *subscribed = true;
        tracing::info!(target_name = %self.target.name, patterns = self.channels.len(), primaries = primaries.len(),
            "subscribed to keyspace notifications");
        let mut verify = Verify::new(
            &self.needed,
            flags,
            &primaries,
            self.metrics.received.get(),
            self.locks.repaired(),
        );
        let mut canaries = Canaries::new(
            self.canary_keys(&layout),
            self.prefix_len,
            self.canary_channel.clone(),
            &self.instance,
        );
        let (ctx, mut crx) = mpsc::channel::<Note>(primaries.len() * 4 + 4);
        let mut canary_tick = tokio::time::interval(CANARY_EVERY);
        if let Some(why) = &canary_refused {
            for i in 0..primaries.len() {
                verify.round(i, Round::Refused(why.clone()));
            }
        }
        let mut shown = None;
        self.follow(&mut shown, &verify);
        let mut _unsubscribe = Unsubscribe(self.locks.clone());
        let mut flags_check = tokio::time::interval(FLAGS_CHECK_EVERY);
        flags_check.reset();
        let mut nodes = self.nodes.clone();

        let (tx, mut rx) = mpsc::channel::<ReadResult>(READS_IN_FLIGHT * 2);
        let (vtx, mut vrx) = mpsc::channel::<Verified>(READS_IN_FLIGHT * 2);
        let (htx, mut hrx) = mpsc::channel::<Handoff>(primaries.len() * 4 + 4);
        let links = Links {
            direct: flag_conns.clone(),
            sinks: sinks.clone(),
            verified: vtx,
            handoff: htx,
        };
        let mut in_flight = 0usize;
        let mut cap_warned = false;
        let mut sweep = tokio::time::interval(Duration::from_secs(1));
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                Some((epoch, ns, requests, reads)) = rx.recv() => {
                    in_flight -= 1;
                    if let Some(ns) = self.renumbered(epoch, ns)
                        && self.reads_done(tracker, ns, &requests, reads.as_deref(), &mut flow.pending)
                    {
                        verify.evidence(verify::SET_AGREED);
                        self.follow(&mut shown, &verify);
                    }
                    self.flush_reads(&reader, &mut flow.pending, &mut flow.owner_reads, &mut in_flight, &tx);
                }
                Some(verified) = vrx.recv() => {
                    // After the check's PINGs, a `restore` published before its `del` is in
                    // the streams: taken first.
                    self.intake(None, &mut streams, true, tracker, &mut flow, &links, &mut canaries, &mut verify)?;
                    self.checked(verified, tracker, &mut flow, &links);
                    self.follow(&mut shown, &verify);
                    self.flush_reads(&reader, &mut flow.pending, &mut flow.owner_reads, &mut in_flight, &tx);
                }
                Some(said) = hrx.recv() => {
                    // After a PING answered, every event the primary published before is
                    // in its stream: handled first, under the owners so far.
                    if matches!(said, Handoff::SourceRead { .. } | Handoff::Settled { .. }) {
                        self.intake(None, &mut streams, true, tracker, &mut flow, &links, &mut canaries, &mut verify)?;
                    }
                    self.handoff(said, tracker, &mut flow, &links);
                    self.follow(&mut shown, &verify);
                    self.flush_reads(&reader, &mut flow.pending, &mut flow.owner_reads, &mut in_flight, &tx);
                }
                _ = flags_check.tick() => {
                    if let Some(flags) = self.recheck_flags(&verify.flags, limit, &mut flag_conns).await {
                        verify.flags = flags;
                    }
                    verify.check(self.metrics.received.get(), self.locks.repaired());
                    self.follow(&mut shown, &verify);
                }
                _ = canary_tick.tick(), if canary_refused.is_none() => {
                    // Slots move between the same primaries (resharding): each round's key
                    // on a slot its primary serves now.
                    canaries.rekey(self.canary_keys(&self.nodes.current()));
                    for (i, (_, conn)) in flag_conns.iter().enumerate() {
                        if let Some(Judged(i, round)) = canaries.start(i, conn.clone(), &ctx) {
                            verify.round(i, round);
                        }
                    }
                    self.follow(&mut shown, &verify);
                }
                Some(note) = crx.recv() => {
                    if let Some(Judged(i, round)) = canaries.note(note) {
                        verify.round(i, round);
                        self.follow(&mut shown, &verify);
                    }
                }
                Some(change) = changes.recv() => {
                    let before: Vec<Vec<u8>> = self.channels.iter().map(|(c, _, _)| c.clone()).collect();
                    let old_marks = std::mem::take(&mut flow.counted.marks);
                    let same_flags = self.renamespace(change, tracker);
                    // Whichever way this session ends from here, the new tables go to scan mode.
                    _unsubscribe = Unsubscribe(self.locks.clone());
                    if !same_flags {
                        return Err(SessionError::FlagsChanged);
                    }
                    self.resubscribe(&before, &mut sinks, limit).await?;
                    // An unchanged namespace keeps its mark; a new one's owners come from
                    // the passes from now on.
                    flow.counted.marks = self
                        .locks
                        .namespaces
                        .iter()
                        .enumerate()
                        .map(|(j, n)| {
                            self.renumber
                                .iter()
                                .position(|m| *m == Some(j))
                                .and_then(|i| old_marks.get(i).copied())
                                .unwrap_or_else(|| n.table().pass_number())
                        })
                        .collect();
                    flow.pending.retain_mut(|r| match self.renumber.get(r.ns).copied().flatten() {
                        Some(n) => {
                            r.ns = n;
                            true
                        }
                        None => false,
                    });
                    flow.counted.deferrals.renamespace(&self.renumber);
                    // The new tables follow the verdict in force (a verified one marked them
                    // already, when the reload found the old ones in events mode).
                    if let Some(v) = &shown {
                        match (v.state == Verification::Verified, self.locks.subscription()) {
                            (true, None) => self.locks.subscribed(),
                            (false, Some(_)) => self.locks.unsubscribed(),
                            _ => {}
                        }
                        self.publish(v);
                    }
                }
                _ = nodes.changed() => {
                    let now = nodes.current();
                    if now.primary_addrs() != primaries.iter().map(String::as_str).collect::<Vec<_>>() {
                        return Err(SessionError::PrimariesChanged);
                    }
                    // Slots that changed hands count from their new primary once a PING on
                    // its subscription and on the old primary's answered (and none of its
                    // events of them waits to be placed).
                    for (node, slots) in flow.owners.as_mut().map(|o| o.moved(&now)).unwrap_or_default() {
                        let from = flow.owners.as_ref().map(|o| o.holders(&slots)).unwrap_or_default();
                        self.settle(&links, node, from, slots);
                    }
                }
                msg = streams.next() => {
                    let Some(Some(first)) = msg else { return Err(SessionError::Closed) };
                    self.intake(Some(first), &mut streams, false, tracker, &mut flow, &links, &mut canaries, &mut verify)?;
                    self.follow(&mut shown, &verify);
                    self.flush_reads(&reader, &mut flow.pending, &mut flow.owner_reads, &mut in_flight, &tx);
                }
                _ = sweep.tick() => {
                    self.overdue(tracker, &mut flow, &links);
                    flow.counted.deferrals.sweep(self.now_ms());
                    tracker.sweep(self.now_ms());
                    self.metrics.tracked.set(tracker.len() as i64);
                    if tracker.untracked > 0 && !std::mem::replace(&mut cap_warned, true) {
                        tracing::warn!(target_name = %self.target.name, max = MAX_TRACKED,
                            "lifecycle watcher holds state for its maximum of lock keys; transitions of further keys are counted without holds or takeovers");
                    }
                }
                _ = ping.tick() => {
                    for sink in &sinks {
                        tokio::time::timeout(limit, sink.ping())
                            .await
                            .map_err(|_| SessionError::Timeout("PING on the pub/sub connection"))??;
                    }
                }
            }
        }
    }

    /// One canary key per primary of `layout`, on a slot it serves.
    fn canary_keys(&self, layout: &crate::topology::Layout) -> Vec<Vec<u8>> {
        (0..layout.primaries.len())
            .map(|i| canary::key_for(&self.instance, |k| layout.primary_of(k) == Some(i)).unwrap_or_default())
            .collect()
    }

    /// Start read pipelines for what is pending, as far as the in-flight bound allows.
    fn flush_reads(
        &self,
        reader: &Reader,
        pending: &mut Vec<ReadRequest>,
        budget: &mut OwnerReads,
        in_flight: &mut usize,
        tx: &mpsc::Sender<ReadResult>,
    ) {
        if pending.len() > MAX_PENDING_READS {
            pending.drain(..pending.len() - MAX_PENDING_READS);
        }
        let now = std::time::Instant::now();
        while !pending.is_empty() && *in_flight < READS_IN_FLIGHT {
            let ns = pending[0].ns;
            let (mut batch, mut skipped) = (Vec::new(), Vec::new());
            let mut i = 0;
            while i < pending.len() && batch.len() < 1000 {
                if pending[i].ns == ns {
                    let r = pending.swap_remove(i);
                    // Owner and TTL are always read, and so is every owner the table does
                    // not know; the owner of a known lock's `set` within the budget.
                    if !r.skippable() || budget.take(now) {
                        batch.push(r);
                    } else {
                        skipped.push(r);
                    }
                } else {
                    i += 1;
                }
            }
            if !skipped.is_empty() {
                // Answered as unread: each `set` a renewal, as when its read finds nothing.
                self.metrics.owner_reads_skipped.inc_by(skipped.len() as u64);
                let (tx, epoch) = (tx.clone(), self.epoch);
                *in_flight += 1;
                tokio::spawn(async move {
                    let _ = tx.send((epoch, ns, skipped, None)).await;
                });
            }
            if batch.is_empty() {
                continue;
            }
            let sent = self.locks.now_ms();
            for r in &mut batch {
                r.sent_ms = sent;
            }
            let kind = self.namespaces[ns].value.clone();
            let reader = reader.clone();
            let tx = tx.clone();
            let timeout = self.target.sample_budget;
            let epoch = self.epoch;
            *in_flight += 1;
            tokio::spawn(async move {
                let reads = match tokio::time::timeout(timeout, read_batch(&reader, &kind, &batch)).await {
                    Ok(Ok(reads)) => Some(reads),
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "owner read failed; those owners stay unknown");
                        None
                    }
                    Err(_) => None,
                };
                let _ = tx.send((epoch, ns, batch, reads)).await;
            });
        }
        // A burst's queue gives its memory back once it has drained.
        if pending.is_empty() && pending.capacity() > 4096 {
            *pending = Vec::new();
        }
    }

    /// Reads answered: owners to the tracker, owners and TTLs to the lock table. `true` when
    /// a read the tracker asked for after a write found the lock (passive evidence).
    fn reads_done(
        &self,
        tracker: &mut Tracker,
        ns: usize,
        requests: &[ReadRequest],
        reads: Option<&[KeyRead]>,
        pending: &mut Vec<ReadRequest>,
    ) -> bool {
        let Some(ns_locks) = self.locks.namespaces.get(ns) else {
            return false;
        };
        let mut agreed = false;
        {
            let now = self.locks.now_ms();
            let mut table = ns_locks.table();
            // Looked up together first, so their cache misses overlap (`Recorder::warm`).
            for r in requests.iter().filter(|r| r.seq.is_some()) {
                std::hint::black_box(table.lock(&r.key).is_some());
            }
            for (i, r) in requests.iter().enumerate() {
                let Some(seq) = r.seq else { continue };
                let ttl_next = match reads.and_then(|x| x.get(i)) {
                    Some(read) => table.event_read(
                        &ns_locks.config,
                        &r.key,
                        seq,
                        Found::from(read),
                        r.written_ms,
                        r.sent_ms,
                        now,
                    ),
                    None => table.event_read_failed(&r.key, seq),
                };
                // A `set` no `expire` followed: its TTL is read (a `SET` without `PX`).
                if let Some(seq) = ttl_next {
                    pending.push(ReadRequest {
                        ns,
                        key: r.key.clone(),
                        generation: None,
                        seq: Some(seq),
                        ttl: true,
                        written_ms: NOT_A_WRITE,
                        sent_ms: now,
                    });
                }
            }
        }
        let mut history = self.state.history();
        for r in requests.iter().filter(|r| r.generation.is_some()) {
            std::hint::black_box(tracker.warm(&r.key) | history.warm(&r.key));
        }
        let mut obs = Recorder::new(self, &mut history, pending, wall_ms());
        for (i, r) in requests.iter().enumerate() {
            let Some(generation) = r.generation else { continue };
            let owner = match reads.and_then(|x| x.get(i)) {
                Some(KeyRead::Lock { owner, .. } | KeyRead::Owner(owner)) => Some(ns_locks.owner_hash(owner)),
                _ => None,
            };
            agreed |= owner.is_some();
            tracker.owner_read(&r.key, generation, owner, &mut obs);
        }
        agreed
    }
}

/// One pipeline's reads, in `batch`'s order: owner and TTL where a request needs the TTL
/// (one MULTI/EXEC), the owner alone for the rest (one `MGET`).
async fn read_batch(reader: &Reader, kind: &ValueKind, batch: &[ReadRequest]) -> redis::RedisResult<Vec<KeyRead>> {
    let (full, owner): (Vec<&ReadRequest>, Vec<&ReadRequest>) = batch.iter().partition(|r| r.ttl);
    let keys = |rs: &[&ReadRequest]| rs.iter().map(|r| r.key.to_vec()).collect::<Vec<_>>();
    let mut full_reads = reader.read_locks(kind, &keys(&full)).await?.into_iter();
    let mut owner_reads = reader.read_owners(kind, &keys(&owner)).await?.into_iter();
    batch
        .iter()
        .map(|r| match r.ttl {
            true => full_reads.next(),
            false => owner_reads.next(),
        })
        .map(|read| read.ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Parse, "a read short of its keys"))))
        .collect()
}

/// Subscribe `sink` to the lock channel pattern `channel`; a refusal (no pub/sub here, or
/// an ACL without the channel) says so.
pub(super) async fn psubscribe(sink: &mut Sink, channel: &[u8], limit: Duration) -> Result<(), SessionError> {
    match tokio::time::timeout(limit, sink.psubscribe(channel)).await {
        Err(_) => Err(SessionError::Timeout("PSUBSCRIBE")),
        Ok(Err(e @ PubSubError::Refused(_))) => Err(SessionError::Refused(format!(
            "PSUBSCRIBE {} refused: {e}",
            String::from_utf8_lossy(channel)
        ))),
        Ok(r) => Ok(r?),
    }
}
