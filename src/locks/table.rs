//! Per-namespace lock state between sample passes: the lock and fence tables, where the
//! SCAN walk stands, and the census of the walk in progress.
//!
//! One entry per lock key: a seeded hash of its owner, when that owner was first seen, the
//! last PTTL and the pass that last saw it — 24 bytes beside the key in the map (and the
//! owner token in a side map only when `show_owners` is on). A *cycle* is one complete walk
//! of the namespace, over one pass or several when the budget cuts it; only a completed
//! cycle may drop entries of keys it did not see. Knows nothing of Redis.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use super::ttl;
use crate::config::NamespaceConfig;
use crate::vocab::Unreadable;

/// What the sampler remembers of one lock.
#[derive(Debug, Clone)]
pub struct LockEntry {
    /// Seeded (per-process random) hash of the owner token: comparable, not reversible offline.
    pub owner: u64,
    /// Since when (ms on the sampler clock) the current owner holds it, at the latest.
    pub since_ms: i64,
    /// PTTL at the last pass (-1: no expiry), saturated at `i32::MAX` (24.8 days).
    pub pttl_ms: i32,
    /// Pass number that last saw the key.
    pass: u32,
}

/// Lock keys to what is known of them, hashed with a per-process seed.
type KeyMap<V> = HashMap<Box<[u8]>, V, RandomState>;

#[derive(Debug, Clone, Copy)]
struct FenceEntry {
    value: i64,
    pass: u32,
}

/// Was pass `seen` part of the cycle that began at `cycle_start` and is at pass `now`?
/// (Pass numbers wrap; compared as distances back from `now`.)
fn in_cycle(seen: u32, cycle_start: u32, now: u32) -> bool {
    now.wrapping_sub(seen) <= now.wrapping_sub(cycle_start)
}

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
    pub cursor: u64,
}

impl WalkPosition {
    pub const START: WalkPosition = WalkPosition {
        phase: Phase::Locks,
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
}

/// Result of observing one lock, for the caller's histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Remaining TTL in seconds, for locks with an expiry not yet seen in this cycle.
    pub ttl_remaining_s: Option<f64>,
}

pub struct NamespaceTable {
    locks: KeyMap<LockEntry>,
    fences: KeyMap<FenceEntry>,
    /// Owner tokens by lock key; `Some` only when the config shows owners.
    tokens: Option<KeyMap<Box<[u8]>>>,
    hasher: RandomState,
    pass: u32,
    /// First pass of the cycle in progress.
    cycle_start: u32,
    /// Where the next pass continues the walk.
    position: WalkPosition,
    census: Census,
    pending: Counts,
    last: Census,
}

impl NamespaceTable {
    pub fn new(keep_tokens: bool) -> Self {
        Self::with_hasher(keep_tokens, RandomState::default())
    }

    /// A table whose owner hashes are comparable with others made with the same `hasher`.
    pub fn with_hasher(keep_tokens: bool, hasher: RandomState) -> Self {
        NamespaceTable {
            locks: HashMap::default(),
            fences: HashMap::default(),
            tokens: keep_tokens.then(HashMap::default),
            hasher,
            pass: 0,
            cycle_start: 1,
            position: WalkPosition::START,
            census: Census::default(),
            pending: Counts::default(),
            last: Census::default(),
        }
    }

    /// Start a pass; a walk at its start begins a new cycle. Returns where to walk from.
    pub fn begin(&mut self) -> WalkPosition {
        self.pass = self.pass.wrapping_add(1);
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
        let e = self.locks.get(key)?;
        (self.pass.wrapping_sub(e.pass) < self.pass.wrapping_sub(mark)).then_some(e.owner)
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
        let stored_pttl = i32::try_from(pttl_ms).unwrap_or(i32::MAX);
        let cycle_start = self.cycle_start;
        let since_ms = match self.locks.get_mut(key) {
            Some(e) if in_cycle(e.pass, cycle_start, pass) => {
                // SCAN may return a key twice in one cycle; count it once.
                e.pttl_ms = stored_pttl;
                return Observed { ttl_remaining_s: None };
            }
            Some(e) => {
                if e.owner != owner_hash {
                    self.pending.handoffs += 1;
                    e.owner = owner_hash;
                    e.since_ms = ttl::acquired_no_later_than(now_ms, pttl_ms, ns.ttl);
                }
                e.pttl_ms = stored_pttl;
                e.pass = pass;
                e.since_ms
            }
            None => {
                let since_ms = ttl::acquired_no_later_than(now_ms, pttl_ms, ns.ttl);
                let entry = LockEntry {
                    owner: owner_hash,
                    since_ms,
                    pttl_ms: stored_pttl,
                    pass,
                };
                self.locks.insert(Box::from(key), entry);
                since_ms
            }
        };
        if let Some(tokens) = &mut self.tokens
            && tokens.get(key).is_none_or(|t| **t != *owner)
        {
            tokens.insert(Box::from(key), Box::from(owner));
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
                self.fences.insert(Box::from(key), FenceEntry { value, pass });
            }
        }
        self.census.fence_max = Some(self.census.fence_max.map_or(value, |m| m.max(value)));
    }

    /// The walk reached the end: drop entries of keys this cycle did not see, count
    /// vanished fencing counters, and return the cycle's census (the gauges' new values).
    pub fn complete(&mut self) -> Census {
        let (pass, cycle_start) = (self.pass, self.cycle_start);
        let seen = |p: u32| in_cycle(p, cycle_start, pass);
        self.locks.retain(|_, e| seen(e.pass));
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
mod tests {
    use super::*;
    use crate::config::ValueKind;
    use crate::glob::Glob;
    use std::time::Duration;

    fn ns() -> NamespaceConfig {
        NamespaceConfig {
            name: "wf".into(),
            pattern: Glob::new("wf:*").unwrap(),
            ttl: Duration::from_secs(30),
            renew_every: Some(Duration::from_secs(10)),
            renew_grace: Duration::from_secs(5),
            max_hold: Some(Duration::from_secs(60)),
            value: ValueKind::Token,
            fence_pattern: None,
            log_phrases: vec![],
            alerts: Default::default(),
        }
    }

    #[test]
    fn tallies_held_no_ttl_overdue_and_age() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 29_000, 100_000);
        t.observe_lock(&ns, b"wf:2", b"b", -1, 100_000);
        let o = t.observe_lock(&ns, b"wf:3", b"c", 4_000, 100_000);
        assert_eq!(o.ttl_remaining_s, Some(4.0));
        let tally = t.complete();
        assert_eq!(
            (tally.held, tally.without_ttl, tally.overdue, tally.too_long),
            (3, 1, 1, 0)
        );
        assert_eq!(tally.max_age_ms, 26_000, "wf:3 was set at least 26 s ago");
    }

    #[test]
    fn handoff_counts_owner_change_and_resets_age() {
        let (ns, mut t) = (ns(), NamespaceTable::new(true));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 30_000, 0);
        t.complete();
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 30_000, 70_000);
        let tally = t.complete();
        assert_eq!(
            (t.take_counts().handoffs, tally.too_long, tally.max_age_ms),
            (0, 1, 70_000)
        );
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"b", 30_000, 80_000);
        let tally = t.complete();
        assert_eq!((t.take_counts().handoffs, tally.too_long, tally.max_age_ms), (1, 0, 0));
        assert_eq!(t.token(b"wf:1"), Some(&b"b"[..]));
    }

    #[test]
    fn tokens_are_kept_only_when_shown_and_dropped_with_the_lock() {
        let ns = ns();
        let mut hidden = NamespaceTable::new(false);
        hidden.begin();
        hidden.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
        hidden.complete();
        assert_eq!(hidden.token(b"wf:1"), None);
        let mut shown = NamespaceTable::new(true);
        shown.begin();
        shown.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
        shown.complete();
        assert_eq!(shown.token(b"wf:1"), Some(&b"secret"[..]));
        shown.begin();
        shown.complete();
        assert_eq!(shown.token(b"wf:1"), None);
    }

    #[test]
    fn entry_stays_small() {
        assert_eq!(std::mem::size_of::<LockEntry>(), 24);
    }

    #[test]
    fn duplicate_scan_results_count_once_per_cycle() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.suspend(WalkPosition {
            phase: Phase::Locks,
            cursor: 7,
        });
        assert_eq!(
            t.begin(),
            WalkPosition {
                phase: Phase::Locks,
                cursor: 7
            },
            "the walk resumes"
        );
        let again = t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        assert_eq!(again.ttl_remaining_s, None);
        assert_eq!(t.complete().held, 1);
    }

    #[test]
    fn a_cycle_over_several_passes_drops_only_what_it_did_not_see() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.observe_lock(&ns, b"wf:2", b"a", 20_000, 0);
        t.complete();
        // Next cycle, cut after wf:1; the gauges keep the last complete cycle's values.
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.suspend(WalkPosition {
            phase: Phase::Locks,
            cursor: 3,
        });
        assert_eq!((t.len(), t.last().held), (2, 2));
        // It ends in the next pass without meeting wf:2, which is then gone.
        t.begin();
        t.observe_lock(&ns, b"wf:3", b"a", 20_000, 0);
        let tally = t.complete();
        assert_eq!(tally.held, 2);
        assert!(t.lock(b"wf:2").is_none() && t.lock(b"wf:1").is_some());
        assert_eq!(t.begin(), WalkPosition::START);
    }

    #[test]
    fn counts_survive_an_abandoned_pass() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.complete();
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"b", 20_000, 0);
        t.abandon();
        assert_eq!(
            t.take_counts().handoffs,
            1,
            "the handoff is published even though the pass failed"
        );
        assert_eq!(t.len(), 1, "an abandoned walk drops nothing");
        assert_eq!(t.begin(), WalkPosition::START);
        t.observe_lock(&ns, b"wf:1", b"b", 20_000, 0);
        t.complete();
        assert_eq!(t.take_counts().handoffs, 0, "and is not counted twice");
    }

    #[test]
    fn fence_regressions_backwards_and_vanished() {
        let mut t = NamespaceTable::new(false);
        t.begin();
        t.observe_fence(b"f:1", 10);
        t.observe_fence(b"f:2", 5);
        let tally = t.complete();
        assert_eq!((tally.fence_max, t.take_counts().fence_regressions), (Some(10), 0));
        t.begin();
        t.observe_fence(b"f:1", 7);
        t.observe_fence(b"f:2", 6);
        let tally = t.complete();
        assert_eq!((tally.fence_max, t.take_counts().fence_regressions), (Some(7), 1));
        t.begin();
        t.observe_fence(b"f:2", 6);
        t.complete();
        assert_eq!(t.take_counts().fence_regressions, 1, "f:1 vanished");
        t.begin();
        t.suspend(WalkPosition {
            phase: Phase::Fences,
            cursor: 9,
        });
        assert_eq!(
            t.take_counts().fence_regressions,
            0,
            "an unfinished walk proves nothing vanished"
        );
    }
}
