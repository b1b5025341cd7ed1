//! Per-namespace lock state between sample passes: the lock and fence tables, where the
//! SCAN walk stands, and the census of the walk in progress.
//!
//! One [`LockEntry`] per lock key (24 bytes beside the key in the map, and the owner token in
//! a side map only when `show_owners` is on). A *cycle* is one complete walk
//! of the namespace, over one pass or several when the budget cuts it; only a completed
//! cycle may drop entries of keys it did not see. Knows nothing of Redis.

use crate::dense::Key;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use super::ttl;
use crate::config::NamespaceConfig;
use crate::vocab::Unreadable;

pub use super::entry::LockEntry;
pub(super) use super::entry::{AWAIT_TTL, ESTIMATED, NO_EXPIRY, OWNER_UNSURE, PASS_WINDOW, READING, UNREAD};

/// When a key read at `now_ms` with `pttl_ms` left expires (`NO_EXPIRY` for -1).
pub(super) fn expiry(now_ms: i64, pttl_ms: i64) -> i64 {
    if pttl_ms < 0 {
        NO_EXPIRY
    } else {
        now_ms.saturating_add(pttl_ms)
    }
}

/// Lock keys to what is known of them, hashed with a per-process seed.
pub(super) type KeyMap<V> = crate::dense::DenseMap<crate::dense::Key, V, RandomState>;

#[derive(Debug, Clone, Copy)]
pub(super) struct FenceEntry {
    pub(super) value: i64,
    pub(super) pass: u32,
}

/// Was pass `seen` part of the cycle that began at `cycle_start` and is at pass `now`?
/// (Pass numbers wrap; compared as distances back from `now`.)
fn in_cycle(seen: u32, cycle_start: u32, now: u32) -> bool {
    now.wrapping_sub(seen) <= now.wrapping_sub(cycle_start)
}

/// Lock keys and fencing counters a cycle did not see (`NamespaceTable::unseen`).
pub type Unseen = (Vec<Box<[u8]>>, Vec<Box<[u8]>>);

/// Which keys the walk is going through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Locks,
    Fences,
}

/// Where the SCAN walk of the namespace stands; kept across passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkPosition {
    pub phase: Phase,
    /// Which of the target's primaries (a cluster's walk goes through each in turn).
    pub node: u16,
    pub cursor: u64,
}

impl WalkPosition {
    pub const START: WalkPosition = WalkPosition {
        phase: Phase::Locks,
        node: 0,
        cursor: 0,
    };
}

/// What one complete walk (cycle) found in a namespace: the values of the gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Census {
    pub held: i64,
    pub without_ttl: i64,
    pub overdue: i64,
    pub too_long: i64,
    pub max_age_ms: u64,
    pub wrong_type: i64,
    pub bad_value: i64,
    /// Highest fencing counter value seen, if any counter was seen.
    pub fence_max: Option<i64>,
}

/// Counter increments observed and not yet published; they survive failed passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub handoffs: u64,
    pub fence_regressions: u64,
    /// Reconcile repairs by `Repair` index: missing, gone, changed.
    pub repairs: [u64; 3],
}

/// Result of observing one lock, for the caller's histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Remaining TTL in seconds, for locks with an expiry not yet seen in this cycle.
    pub ttl_remaining_s: Option<f64>,
}

pub struct NamespaceTable {
    pub(super) locks: KeyMap<LockEntry>,
    pub(super) fences: KeyMap<FenceEntry>,
    /// Owner tokens by lock key; `Some` only when the config shows owners.
    pub(super) tokens: Option<KeyMap<Box<[u8]>>>,
    hasher: RandomState,
    pub(super) pass: u32,
    /// First pass of the cycle in progress.
    cycle_start: u32,
    /// Where the next pass continues the walk.
    position: WalkPosition,
    census: Census,
    pub(super) pending: Counts,
    last: Census,
    /// Events mode: keys of the namespace that are not readable locks, and why.
    pub(super) odd: KeyMap<Unreadable>,
    /// Events mode: discrepancies a read found, waiting for a second read to confirm them.
    pub(super) suspects: KeyMap<super::events::Suspect>,
    /// Events mode, a cluster: locks whose `del` waits for the check of a slot migration's
    /// move, out of the census meanwhile.
    pub(super) aside: KeyMap<LockEntry>,
    /// Repairs confirmed since the table was made (never taken): changes the events missed.
    pub(super) repaired: u64,
    /// Events mode: the TTLs the namespace's locks were read with after their renewals, a
    /// class each; a renewal's `expire` sets again its own lock's, without a read.
    pub(super) spans: super::event_reads::Spans,
}

impl NamespaceTable {
    pub fn new(keep_tokens: bool) -> Self {
        Self::with_hasher(keep_tokens, RandomState::default())
    }

    /// A table whose owner hashes are comparable with others made with the same `hasher`.
    pub fn with_hasher(keep_tokens: bool, hasher: RandomState) -> Self {
        NamespaceTable {
            locks: KeyMap::default(),
            fences: KeyMap::default(),
            tokens: keep_tokens.then(KeyMap::default),
            hasher,
            pass: 0,
            cycle_start: 1,
            position: WalkPosition::START,
            census: Census::default(),
            pending: Counts::default(),
            last: Census::default(),
            odd: KeyMap::default(),
            suspects: KeyMap::default(),
            aside: KeyMap::default(),
            repaired: 0,
            spans: Default::default(),
        }
    }

    /// Repairs confirmed so far, all kinds: what the events missed and reads or the
    /// reconciling walk found (the watcher compares it with what it received).
    pub fn repaired(&self) -> u64 {
        self.repaired
    }

    /// Start a pass; a walk at its start begins a new cycle. Returns where to walk from.
    pub fn begin(&mut self) -> WalkPosition {
        self.next_pass();
        if self.position == WalkPosition::START {
            self.cycle_start = self.pass;
            self.census = Census::default();
        }
        self.position
    }

    /// The pass stopped with the walk at `position` (the budget ran out).
    pub fn suspend(&mut self, position: WalkPosition) {
        self.position = position;
    }

    /// The pass failed: forget the cycle in progress (counters stay pending) and start
    /// over next time. Nothing is dropped: a failed walk proves nothing is gone.
    pub fn abandon(&mut self) {
        self.position = WalkPosition::START;
    }

    /// The number of the pass in progress (or last run): a mark for `owner_seen_after`.
    pub fn pass_number(&self) -> u32 {
        self.pass
    }

    /// The owner hash of `key` if a pass begun after pass `mark` saw it.
    pub fn owner_seen_after(&self, key: &[u8], mark: u32) -> Option<u64> {
        let e = self.locks.get(key).filter(|e| !e.unread())?;
        (self.pass.wrapping_sub(e.pass_at(self.pass)) < self.pass.wrapping_sub(mark)).then_some(e.owner)
    }

    pub(super) fn hasher(&self) -> &RandomState {
        &self.hasher
    }

    /// Events mode: a pass begins; its number marks the keys it reads. (Every
    /// `PASS_WINDOW` passes, entries not read for longer are pinned there.)
    pub fn next_pass(&mut self) {
        self.pass = self.pass.wrapping_add(1);
        if self.pass.is_multiple_of(PASS_WINDOW) {
            let pass = self.pass;
            for e in self.locks.values_mut().chain(self.aside.values_mut()) {
                e.pin(pass);
            }
        }
    }

    /// Back to scan mode: what only events mode keeps is dropped, and the next pass
    /// starts a fresh cycle (which drops the locks it does not find).
    pub fn enter_scan_mode(&mut self) {
        self.odd.clear();
        self.suspects.clear();
        self.put_aside_back();
        self.position = WalkPosition::START;
    }

    /// Seeded hash of an owner token, comparable with `LockEntry::owner`.
    pub fn owner_hash(&self, owner: &[u8]) -> u64 {
        self.hasher.hash_one(owner)
    }

    /// A lock key with its owner and PTTL, as read in this pass at `now_ms`.
    pub fn observe_lock(
        &mut self,
        ns: &NamespaceConfig,
        key: &[u8],
        owner: &[u8],
        pttl_ms: i64,
        now_ms: i64,
    ) -> Observed {
        let owner_hash = self.owner_hash(owner);
        let pass = self.pass;
        let expires_ms = expiry(now_ms, pttl_ms);
        let cycle_start = self.cycle_start;
        let since_ms = match self.locks.get_mut(key) {
            Some(e) if in_cycle(e.pass_at(pass), cycle_start, pass) => {
                // SCAN may return a key twice in one cycle; count it once.
                e.set_expires_ms(expires_ms);
                return Observed { ttl_remaining_s: None };
            }
            Some(e) => {
                if e.owner != owner_hash {
                    self.pending.handoffs += 1;
                    e.owner = owner_hash;
                    e.set_since_ms(ttl::acquired_no_later_than(now_ms, pttl_ms, ns.ttl));
                }
                e.set_expires_ms(expires_ms);
                e.set_flags(e.flags() & !UNREAD);
                e.set_pass(pass);
                e.since_ms()
            }
            None => {
                let since_ms = ttl::acquired_no_later_than(now_ms, pttl_ms, ns.ttl);
                let entry = LockEntry::new(owner_hash, since_ms, expires_ms, pass, 0);
                self.locks.insert(Key::new(key), entry);
                since_ms
            }
        };
        if let Some(tokens) = &mut self.tokens
            && tokens.get(key).is_none_or(|t| **t != *owner)
        {
            tokens.insert(Key::new(key), Box::from(owner));
        }
        let t = &mut self.census;
        t.held += 1;
        if pttl_ms == -1 {
            t.without_ttl += 1;
        }
        if ttl::renewal_overdue(pttl_ms, ns.overdue_below()) {
            t.overdue += 1;
        }
        let age_ms = u64::try_from(now_ms.saturating_sub(since_ms)).unwrap_or(0);
        if ttl::held_too_long(age_ms, ns.max_hold) {
            t.too_long += 1;
        }
        t.max_age_ms = t.max_age_ms.max(age_ms);
        Observed {
            ttl_remaining_s: (pttl_ms >= 0).then(|| pttl_ms as f64 / 1000.0),
        }
    }

    /// A key in the namespace that is not a readable lock.
    pub fn observe_unreadable(&mut self, reason: Unreadable) {
        match reason {
            Unreadable::WrongType => self.census.wrong_type += 1,
            Unreadable::BadValue => self.census.bad_value += 1,
        }
    }

    /// A fencing counter and its value.
    pub fn observe_fence(&mut self, key: &[u8], value: i64) {
        let (pass, cycle_start) = (self.pass, self.cycle_start);
        match self.fences.get_mut(key) {
            Some(f) if in_cycle(f.pass, cycle_start, pass) => f.value = f.value.max(value),
            Some(f) => {
                if value < f.value {
                    self.pending.fence_regressions += 1;
                }
                f.value = value;
                f.pass = pass;
            }
            None => {
                self.fences.insert(Key::new(key), FenceEntry { value, pass });
            }
        }
        self.census.fence_max = Some(self.census.fence_max.map_or(value, |m| m.max(value)));
    }

    /// Lock keys and fencing counters tracked but not seen by the cycle in progress: on a
    /// cluster, keys a slot migration moved to a node walked earlier, read before `complete`.
    pub fn unseen(&self) -> Unseen {
        let (pass, cycle_start) = (self.pass, self.cycle_start);
        let seen = |p: u32| in_cycle(p, cycle_start, pass);
        let locks = self
            .locks
            .iter()
            .filter(|(_, e)| !seen(e.pass_at(pass)))
            .map(|(k, _)| Box::from(k))
            .collect();
        let fences = self
            .fences
            .iter()
            .filter(|(_, f)| !seen(f.pass))
            .map(|(k, _)| Box::from(k))
            .collect();
        (locks, fences)
    }

    /// The walk reached the end: drop entries of keys this cycle did not see, count
    /// vanished fencing counters, and return the cycle's census (the gauges' new values).
    pub fn complete(&mut self) -> Census {
        let (pass, cycle_start) = (self.pass, self.cycle_start);
        let seen = |p: u32| in_cycle(p, cycle_start, pass);
        self.locks.retain(|_, e| seen(e.pass_at(pass)));
        if let Some(tokens) = &mut self.tokens {
            tokens.retain(|k, _| self.locks.contains_key(k));
        }
        let before = self.fences.len();
        self.fences.retain(|_, f| seen(f.pass));
        self.pending.fence_regressions += (before - self.fences.len()) as u64;
        self.position = WalkPosition::START;
        self.last = std::mem::take(&mut self.census);
        self.last.clone()
    }

    /// Counter increments since the last call.
    pub fn take_counts(&mut self) -> Counts {
        std::mem::take(&mut self.pending)
    }

    /// The census of the last completed cycle.
    pub fn last(&self) -> &Census {
        &self.last
    }

    /// Locks currently tracked.
    pub fn locks(&self) -> impl Iterator<Item = (&[u8], &LockEntry)> {
        self.locks.iter().map(|(k, e)| (k.as_ref(), e))
    }

    pub fn lock(&self, key: &[u8]) -> Option<&LockEntry> {
        self.locks.get(key)
    }

    /// The owner token of a lock, when the config shows owners.
    pub fn token(&self, key: &[u8]) -> Option<&[u8]> {
        self.tokens.as_ref()?.get(key).map(|t| t.as_ref())
    }

    pub fn fence(&self, key: &[u8]) -> Option<i64> {
        self.fences.get(key).map(|f| f.value)
    }

    pub fn len(&self) -> usize {
        self.locks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
