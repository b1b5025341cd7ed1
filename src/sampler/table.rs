//! Per-namespace lock state between sample passes, and the tally of one pass.
//!
//! One entry per lock key: a seeded hash of its owner, when that owner was first seen, the
//! last PTTL and the pass that last saw it — 24 bytes beside the key in the map (and the
//! owner token in a side map only when `show_owners` is on). Entries of keys a complete
//! pass did not see are dropped. Knows nothing of Redis: the pass feeds it observations.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use crate::config::NamespaceConfig;
use crate::metrics::Unreadable;
use crate::sampler::ttl;

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

/// What one pass found in a namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub held: i64,
    pub without_ttl: i64,
    pub overdue: i64,
    pub too_long: i64,
    pub max_age_ms: u64,
    pub wrong_type: i64,
    pub bad_value: i64,
    pub handoffs: u64,
    /// Highest fencing counter value seen, if any counter was seen.
    pub fence_max: Option<i64>,
    pub fence_regressions: u64,
    /// Was the namespace scanned to the end (SCAN cursor back to 0)?
    pub complete: bool,
}

/// Result of observing one lock, for the caller's histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Remaining TTL in seconds, for locks with an expiry that were not seen yet this pass.
    pub ttl_remaining_s: Option<f64>,
}

pub struct NamespaceTable {
    locks: KeyMap<LockEntry>,
    fences: KeyMap<FenceEntry>,
    /// Owner tokens by lock key; `Some` only when the config shows owners.
    tokens: Option<KeyMap<Box<[u8]>>>,
    hasher: RandomState,
    pass: u32,
    tally: Tally,
    last: Tally,
}

impl NamespaceTable {
    pub fn new(keep_tokens: bool) -> Self {
        NamespaceTable {
            locks: HashMap::default(),
            fences: HashMap::default(),
            tokens: keep_tokens.then(HashMap::default),
            hasher: RandomState::default(),
            pass: 0,
            tally: Tally::default(),
            last: Tally::default(),
        }
    }

    /// Start a pass over the namespace.
    pub fn begin(&mut self) {
        self.pass = self.pass.wrapping_add(1);
        self.tally = Tally::default();
    }

    /// Keyed hash of an owner token, comparable with `LockEntry::owner`.
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
        let since_ms = match self.locks.get_mut(key) {
            Some(e) if e.pass == pass => {
                // SCAN may return a key twice in one pass; count it once.
                e.pttl_ms = stored_pttl;
                return Observed { ttl_remaining_s: None };
            }
            Some(e) => {
                if e.owner != owner_hash {
                    self.tally.handoffs += 1;
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
        let t = &mut self.tally;
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
            Unreadable::WrongType => self.tally.wrong_type += 1,
            Unreadable::BadValue => self.tally.bad_value += 1,
        }
    }

    /// A fencing counter and its value.
    pub fn observe_fence(&mut self, key: &[u8], value: i64) {
        let pass = self.pass;
        match self.fences.get_mut(key) {
            Some(f) if f.pass == pass => f.value = f.value.max(value),
            Some(f) => {
                if value < f.value {
                    self.tally.fence_regressions += 1;
                }
                f.value = value;
                f.pass = pass;
            }
            None => {
                self.fences.insert(Box::from(key), FenceEntry { value, pass });
            }
        }
        self.tally.fence_max = Some(self.tally.fence_max.map_or(value, |m| m.max(value)));
    }

    /// End the pass. Only a complete pass may conclude that unseen keys are gone: it drops
    /// their entries, and counts vanished fencing counters as regressions.
    pub fn finish(&mut self, complete: bool) -> Tally {
        self.tally.complete = complete;
        if complete {
            let pass = self.pass;
            self.locks.retain(|_, e| e.pass == pass);
            if let Some(tokens) = &mut self.tokens {
                tokens.retain(|k, _| self.locks.contains_key(k));
            }
            let before = self.fences.len();
            self.fences.retain(|_, f| f.pass == pass);
            self.tally.fence_regressions += (before - self.fences.len()) as u64;
        }
        self.last = self.tally.clone();
        self.last.clone()
    }

    /// The tally of the last finished pass.
    pub fn last(&self) -> &Tally {
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
        let tally = t.finish(true);
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
        t.finish(true);
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 30_000, 70_000);
        let tally = t.finish(true);
        assert_eq!((tally.handoffs, tally.too_long, tally.max_age_ms), (0, 1, 70_000));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"b", 30_000, 80_000);
        let tally = t.finish(true);
        assert_eq!((tally.handoffs, tally.too_long, tally.max_age_ms), (1, 0, 0));
        assert_eq!(t.token(b"wf:1"), Some(&b"b"[..]));
    }

    #[test]
    fn tokens_are_kept_only_when_shown_and_dropped_with_the_lock() {
        let ns = ns();
        let mut hidden = NamespaceTable::new(false);
        hidden.begin();
        hidden.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
        hidden.finish(true);
        assert_eq!(hidden.token(b"wf:1"), None);
        let mut shown = NamespaceTable::new(true);
        shown.begin();
        shown.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
        shown.finish(true);
        assert_eq!(shown.token(b"wf:1"), Some(&b"secret"[..]));
        shown.begin();
        shown.finish(true);
        assert_eq!(shown.token(b"wf:1"), None);
    }

    #[test]
    fn entry_stays_small() {
        assert_eq!(std::mem::size_of::<LockEntry>(), 24);
    }

    #[test]
    fn duplicate_scan_results_count_once() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        let again = t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        assert_eq!(again.ttl_remaining_s, None);
        assert_eq!(t.finish(true).held, 1);
    }

    #[test]
    fn complete_pass_drops_gone_keys_truncated_pass_keeps_them() {
        let (ns, mut t) = (ns(), NamespaceTable::new(false));
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.observe_lock(&ns, b"wf:2", b"a", 20_000, 0);
        t.finish(true);
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.finish(false);
        assert_eq!(t.len(), 2);
        t.begin();
        t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
        t.finish(true);
        assert_eq!(t.len(), 1);
        assert!(t.lock(b"wf:2").is_none());
    }

    #[test]
    fn fence_regressions_backwards_and_vanished() {
        let mut t = NamespaceTable::new(false);
        t.begin();
        t.observe_fence(b"f:1", 10);
        t.observe_fence(b"f:2", 5);
        let tally = t.finish(true);
        assert_eq!((tally.fence_max, tally.fence_regressions), (Some(10), 0));
        t.begin();
        t.observe_fence(b"f:1", 7);
        t.observe_fence(b"f:2", 6);
        let tally = t.finish(true);
        assert_eq!((tally.fence_max, tally.fence_regressions), (Some(7), 1));
        t.begin();
        t.observe_fence(b"f:2", 6);
        let tally = t.finish(true);
        assert_eq!(tally.fence_regressions, 1, "f:1 vanished");
        t.begin();
        let tally = t.finish(false);
        assert_eq!(tally.fence_regressions, 0, "a truncated pass proves nothing vanished");
    }
}
