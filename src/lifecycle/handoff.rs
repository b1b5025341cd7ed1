//! Atomic slot migration (Valkey 9 `CLUSTER MIGRATESLOTS`, Redis 8.4 `CLUSTER MIGRATION`) is
//! not a lock event. The target imports the slots while the source still serves them and
//! publishes an event for every write it copies — a `set` and an `expire` per lock of the
//! snapshot, then each of the source's writes again, the buffered ones in a burst just
//! before it takes the slots over; the source drops the keys without any event afterwards.
//! So on a cluster an event counts only from the primary that serves its key's slot
//! (`owners::Owners`); one from another primary is *foreign*, and belongs to an `Import`.
//!
//! An import is followed by *markers*: writes of lockwatch's own in one of its slots on the
//! source, which the import copies in order. A marker's `set` in the target's stream says
//! that every foreign event before it is a copy. Once the source answers a marker `MOVED`
//! (it gave the slots up) and its own stream has been read to that point, the source's
//! events of each key after the last marker the target copied are the copies still to
//! come from the target; the target's events beyond them are its own, and counted.
//!
//! A slot counts from its new primary once the layout gives it that primary and a `PING` on
//! its subscription (and on the old one's) answered — but not while events of that primary
//! for the slot still wait (to be placed in an import, or in an import not over): those
//! came first, and its later events wait behind them; the slot counts from it once they
//! are placed or counted (`Imports::settle`, `Imports::ready`).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::migration::Event;
use crate::access::cluster::slot;

/// A flipped import whose target copied no marker for this long resolves without (its
/// events taken for copies): the marker was lost.
pub(super) const MARKER_LATE_MS: i64 = 5_000;
/// Copies expected from a target are forgotten after this long (a missed notification).
const EXPECT_MS: i64 = 10_000;
/// An import that sends nothing for this long is given up (a failed migration).
pub(super) const IMPORT_IDLE_MS: i64 = 600_000;

/// How an import is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Markers on its source.
    Marked,
    /// A key-by-key migration (`MIGRATE`, the source answered `ASK`): the target's events
    /// are no copies of counted ones (its `restore`s count nothing), so they count.
    Legacy,
    /// No marker could be written: its events are dropped.
    Unmarked,
}

/// Slots a target imports from a source, followed as one.
#[derive(Debug)]
pub(super) struct Import {
    pub id: u64,
    pub target: usize,
    pub source: usize,
    pub ranges: Vec<(u16, u16)>,
    way: Way,
    /// The target listed it as an import (else it is followed slot by slot: no atomic
    /// migration the target would list, or the list could not be asked).
    listed: bool,
    /// Per marker the source took (its `set` seen in its stream) and the target has not
    /// copied yet: the source's events of each key after it.
    since: BTreeMap<u64, HashMap<Vec<u8>, u32>>,
    /// Whether the source took a marker, and the last the target copied.
    marked: bool,
    copied: Option<u64>,
    /// The target's events after the last marker it copied.
    pending: Vec<(Event, i64)>,
    /// The source answered a marker `MOVED`: when; and whether its stream was read after.
    flipped_ms: Option<i64>,
    source_read: bool,
    last_ms: i64,
}

impl Import {
    fn covers(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

/// What became of a target's foreign event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// Waits for its import's markers.
    Pending,
    /// Counts now.
    Count(Event),
    /// A copy, or not to be followed: dropped.
    Dropped,
    /// In no import known yet: the target's imports are to be asked (`first`: no question
    /// out for it yet).
    Unplaced { first: bool },
}

/// An import's end: the target's events that count, in order, and its slots, which count
/// from the target on.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    pub id: u64,
    pub target: usize,
    pub count: Vec<(Event, i64)>,
    pub ranges: Vec<(u16, u16)>,
}

/// An import to follow from now on: write markers on `source` in `slot`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Follow {
    pub id: u64,
    pub source: usize,
    pub ranges: Vec<(u16, u16)>,
}

/// A subscription's imports, and the copies still to come from targets whose import ended.
#[derive(Debug, Default)]
pub(super) struct Imports {
    list: Vec<Import>,
    next_id: u64,
    /// Foreign events in no import yet, per target, waiting for its list of imports.
    unplaced: HashMap<usize, Vec<(Event, i64)>>,
    expect: HashMap<(usize, Vec<u8>), (u32, i64)>,
    /// Slots the layout gave a primary while its events of them waited: they count from it
    /// once none waits (`ready`).
    held: HashMap<usize, HashSet<u16>>,
}

/// What a target's list of imports did with its unplaced events.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Placing {
    /// Imports to follow from now on.
    pub follow: Vec<Follow>,
    /// Events of slots the target serves by now (none to import them from): they count.
    pub count: Vec<(Event, i64)>,
}

impl Imports {
    fn covering(&mut self, target: usize, slot: u16) -> Option<&mut Import> {
        self.list.iter_mut().find(|i| i.target == target && i.covers(slot))
    }

    /// Whether an event of `key` from `node` is a copy still to come from an import that
    /// ended (then it is taken as one).
    pub(super) fn copy_due(&mut self, node: usize, key: &[u8], now_ms: i64) -> bool {
        if self.expect.is_empty() {
            return false;
        }
        let k = (node, key.to_vec());
        match self.expect.get_mut(&k) {
            Some((n, at)) if now_ms - *at < EXPECT_MS => {
                *n -= 1;
                if *n == 0 {
                    self.expect.remove(&k);
                }
                true
            }
            Some(_) => {
                self.expect.remove(&k);
                false
            }
            None => false,
        }
    }

    /// A foreign event (`ev.node`, the target) at `now_ms`.
    pub(super) fn foreign(&mut self, ev: Event, now_ms: i64) -> Placed {
        if self.copy_due(ev.node, &ev.key, now_ms) {
            return Placed::Dropped;
        }
        let s = slot(&ev.key);
        match self.covering(ev.node, s) {
            Some(i) => {
                i.last_ms = now_ms;
                match i.way {
                    Way::Marked => {
                        i.pending.push((ev, now_ms));
                        Placed::Pending
                    }
                    Way::Legacy => Placed::Count(ev),
                    Way::Unmarked => Placed::Dropped,
                }
            }
            None => {
                let waiting = self.unplaced.entry(ev.node).or_default();
                waiting.push((ev, now_ms));
                Placed::Unplaced {
                    first: waiting.len() == 1,
                }
            }
        }
    }

    /// `target`'s imports, as it lists them (empty on a server without atomic slot
    /// migration; `None`: it could not be asked, each slot is then followed alone by
    /// markers): the imports its unplaced events belong to, each from the primary
    /// `source_of` its slot (the slot's counting does not move to the target while they
    /// wait, see `settle`; one that did anyway has its events counted, in order). A slot
    /// the list does not hold is a key-by-key migration's: its events count now.
    pub(super) fn place(
        &mut self,
        target: usize,
        listed: Option<Vec<Vec<(u16, u16)>>>,
        source_of: impl Fn(u16) -> Option<usize>,
        now_ms: i64,
    ) -> Placing {
        let asked = listed.is_some();
        let listed = listed.unwrap_or_default();
        let mut out = Placing::default();
        for (ev, at) in self.unplaced.remove(&target).unwrap_or_default() {
            let s = slot(&ev.key);
            if self.covering(target, s).is_none() {
                // No other primary serves the slot to import it from: the target's own.
                let source = match source_of(s) {
                    Some(source) if source != target => source,
                    _ => {
                        out.count.push((ev, at));
                        continue;
                    }
                };
                let import = listed
                    .iter()
                    .rev()
                    .find(|r| r.iter().any(|&(a, b)| (a..=b).contains(&s)));
                let ranges = import.cloned().unwrap_or_else(|| vec![(s, s)]);
                // A target that lists every import it runs or ran, without this slot:
                // a key-by-key migration (`MIGRATE`), whose events are the target's own.
                let way = match (asked, import) {
                    (true, None) => Way::Legacy,
                    _ => Way::Marked,
                };
                self.next_id += 1;
                self.list.push(Import {
                    id: self.next_id,
                    target,
                    source,
                    ranges: ranges.clone(),
                    way,
                    listed: import.is_some(),
                    since: BTreeMap::new(),
                    marked: false,
                    copied: None,
                    pending: Vec::new(),
                    flipped_ms: None,
                    source_read: false,
                    last_ms: now_ms,
                });
                tracing::debug!(
                    import = self.next_id,
                    target,
                    source,
                    ?ranges,
                    listed = import.is_some(),
                    key_by_key = way == Way::Legacy,
                    "slot migration: events of a primary for slots another serves, followed as an import"
                );
                if way == Way::Marked {
                    out.follow.push(Follow {
                        id: self.next_id,
                        source,
                        ranges,
                    });
                }
            }
            if let Some(i) = self.covering(target, s) {
                match i.way {
                    Way::Marked => i.pending.push((ev, at)),
                    Way::Legacy => out.count.push((ev, at)),
                    Way::Unmarked => {}
                }
            }
        }
        out
    }

    /// Marker `n` of import `id` came in `node`'s stream: on the source, its events count
    /// from here; on the target, every event of it before is a copy.
    pub(super) fn marked(&mut self, node: usize, id: u64, n: u64, now_ms: i64) -> Option<Resolved> {
        let i = self.list.iter_mut().find(|i| i.id == id)?;
        if node == i.source {
            i.marked = true;
            i.since.entry(n).or_default();
            return None;
        }
        if node != i.target {
            return None;
        }
        i.copied = Some(n);
        i.pending.clear();
        i.since = i.since.split_off(&n);
        self.resolve(id, now_ms)
    }

    /// An event of the primary counted for its slot: for an import from it, one more
    /// of the key's copies to come.
    pub(super) fn source_event(&mut self, node: usize, key: &[u8]) {
        if self.list.is_empty() {
            return;
        }
        let s = slot(key);
        if let Some(i) = self.list.iter_mut().find(|i| i.source == node && i.covers(s))
            && let Some((_, counts)) = i.since.iter_mut().next_back()
        {
            *counts.entry(key.to_vec()).or_default() += 1;
        }
    }

    /// The source answered a marker of import `id` `MOVED` at `now_ms`: its stream is to be
    /// read to here (the source returned).
    pub(super) fn flipped(&mut self, id: u64, now_ms: i64) -> Option<usize> {
        let i = self.list.iter_mut().find(|i| i.id == id)?;
        i.flipped_ms.get_or_insert(now_ms);
        Some(i.source)
    }

    /// The source's stream was read after its `MOVED`.
    pub(super) fn source_read(&mut self, id: u64, now_ms: i64) -> Option<Resolved> {
        self.list.iter_mut().find(|i| i.id == id)?.source_read = true;
        self.resolve(id, now_ms)
    }

    /// Import `id` is a key-by-key migration: its events count (those waiting, returned).
    pub(super) fn legacy(&mut self, id: u64) -> Vec<(Event, i64)> {
        self.follow_no_more(id, Way::Legacy)
    }

    /// No marker can be written for import `id`: its events are dropped.
    pub(super) fn unmarked(&mut self, id: u64) {
        self.follow_no_more(id, Way::Unmarked);
    }

    fn follow_no_more(&mut self, id: u64, way: Way) -> Vec<(Event, i64)> {
        let Some(i) = self.list.iter_mut().find(|i| i.id == id) else {
            return Vec::new();
        };
        i.way = way;
        i.since.clear();
        std::mem::take(&mut i.pending)
    }

    /// Imports that end at `now_ms` without what they wait for: flipped long ago and no
    /// marker copied (their events dropped), or idle.
    pub(super) fn overdue(&mut self, now_ms: i64) -> Vec<Resolved> {
        let late: Vec<u64> = self
            .list
            .iter()
            .filter(|i| {
                let flipped_late = i.flipped_ms.is_some_and(|f| now_ms - f >= MARKER_LATE_MS);
                flipped_late || now_ms - i.last_ms >= IMPORT_IDLE_MS
            })
            .map(|i| i.id)
            .collect();
        late.into_iter()
            .filter_map(|id| {
                let i = self.list.iter_mut().find(|i| i.id == id)?;
                i.pending.clear();
                i.since.clear();
                i.marked = false;
                i.source_read = true;
                i.flipped_ms.get_or_insert(now_ms);
                self.resolve(id, now_ms)
            })
            .collect()
    }

    /// Whether events of `node` for `slot` wait: to be placed, or in an import not over.
    fn waits(&self, node: usize, s: u16) -> bool {
        self.unplaced
            .get(&node)
            .is_some_and(|q| q.iter().any(|(e, _)| slot(&e.key) == s))
            || self
                .list
                .iter()
                .any(|i| i.target == node && i.way == Way::Marked && i.covers(s))
    }

    /// The layout gave `node` `slots` (a `PING` on its subscription answered): those that
    /// count from it now, returned; those with events of it still waiting are held until
    /// none waits (`ready`), so that its later events wait behind them.
    pub(super) fn settle(&mut self, node: usize, slots: &[u16]) -> Vec<u16> {
        let (held, now): (Vec<u16>, Vec<u16>) = slots.iter().partition(|&&s| self.waits(node, s));
        if !held.is_empty() {
            tracing::debug!(
                node,
                slots = held.len(),
                "slot migration: slots given to a primary whose events of them still wait; they count from it once those are placed"
            );
            self.held.entry(node).or_default().extend(held);
        }
        self.settled(node, &now);
        now
    }

    /// Held slots (`settle`) whose primary's events no longer wait: they count from it now.
    pub(super) fn ready(&mut self) -> Vec<(usize, Vec<u16>)> {
        if self.held.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (node, mut slots) in std::mem::take(&mut self.held) {
            let (wait, now): (HashSet<u16>, HashSet<u16>) = slots.drain().partition(|&s| self.waits(node, s));
            if !wait.is_empty() {
                self.held.insert(node, wait);
            }
            if !now.is_empty() {
                let mut now: Vec<u16> = now.into_iter().collect();
                now.sort_unstable();
                self.settled(node, &now);
                out.push((node, now));
            }
        }
        out
    }

    /// Imports of `node`'s that the layout gave it (it counts for their slots now): the
    /// key-by-key and unmarked ones are done.
    fn settled(&mut self, node: usize, slots: &[u16]) {
        self.list
            .retain(|i| !(i.target == node && i.way != Way::Marked && slots.iter().any(|&s| i.covers(s))));
    }

    /// Resolve import `id` at `now_ms` if it has what it needs: flipped, its source read
    /// after, and the target's copy of a marker (when the source took one). When the source
    /// took none, a listed import ended before its first marker (what the target sent is
    /// dropped), and an unlisted one was a key-by-key migration's slot (what the target sent
    /// counts: `restore`s and writes sent there with `ASK`).
    fn resolve(&mut self, id: u64, now_ms: i64) -> Option<Resolved> {
        let at = self.list.iter().position(|i| i.id == id)?;
        let i = &self.list[at];
        if i.way != Way::Marked || i.flipped_ms.is_none() || !i.source_read || (i.marked && i.copied.is_none()) {
            return None;
        }
        let i = self.list.remove(at);
        let mut due: HashMap<Vec<u8>, u32> = HashMap::new();
        for counts in i.since.into_values() {
            for (k, n) in counts {
                *due.entry(k).or_default() += n;
            }
        }
        let mut count = Vec::new();
        for (ev, at) in i.pending.into_iter().filter(|_| i.marked || !i.listed) {
            match due.get_mut(ev.key.as_bytes()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => count.push((ev, at)),
            }
        }
        for (k, n) in due.into_iter().filter(|(_, n)| *n > 0) {
            self.expect.insert((i.target, k), (n, now_ms));
        }
        Some(Resolved {
            id,
            target: i.target,
            count,
            ranges: i.ranges,
        })
    }
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
