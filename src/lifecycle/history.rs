//! Recent lifecycle transitions per lock key, for `/api/v1/locks/history` and `inspect`.
//!
//! Bounded twice: each key keeps its last [`PER_KEY`] records, and all keys together at
//! most `cap` (the oldest records go first, whichever key they belong to). Keys are held
//! as seeded 64-bit hashes, so a record is 32 bytes plus 16 in the eviction queue and no
//! key bytes are stored.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use crate::vocab::Transition;

/// Records kept per key.
pub(crate) const PER_KEY: usize = 32;

/// One transition of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// Wall-clock time, ms since the Unix epoch.
    pub(crate) at_ms: i64,
    pub(crate) kind: Transition,
    /// Owner hash, 0 when unknown (see [`Record::owner`]).
    owner: u64,
    /// This acquisition took over a lock that expired or was evicted under another owner.
    pub(crate) takeover: bool,
    seq: u64,
}

impl Record {
    /// Owner hash, when known (the same seeded hash as the sampler's `owner_hash`).
    pub(crate) fn owner(&self) -> Option<u64> {
        (self.owner != 0).then_some(self.owner)
    }
}

pub(crate) struct History {
    keys: HashMap<u64, VecDeque<Record>, foldhash::fast::FixedState>,
    /// (key hash, sequence number) of every record, oldest first.
    order: VecDeque<(u64, u64)>,
    hasher: RandomState,
    cap: usize,
    seq: u64,
}

impl History {
    pub(crate) fn new(cap: usize) -> Self {
        History {
            keys: HashMap::default(),
            order: VecDeque::new(),
            hasher: RandomState::default(),
            cap: cap.max(1),
            seq: 0,
        }
    }

    /// Records held now, all keys together.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Add a record for `key`; the oldest go when a bound is reached.
    pub(crate) fn push(&mut self, key: &[u8], at_ms: i64, kind: Transition, owner: Option<u64>) {
        let h = self.hasher.hash_one(key);
        self.seq += 1;
        let rec = Record {
            at_ms,
            kind,
            owner: owner.map(super::tracker::known).unwrap_or(0),
            takeover: false,
            seq: self.seq,
        };
        // Most keys have a record or two: start small rather than at the default of four.
        let list = self.keys.entry(h).or_insert_with(|| VecDeque::with_capacity(2));
        if list.len() >= PER_KEY {
            list.pop_front();
        }
        list.push_back(rec);
        self.order.push_back((h, self.seq));
        while self.order.len() > self.cap {
            self.evict_oldest();
        }
    }

    /// The owner read after the latest record of `key` came back: fill it in.
    pub(crate) fn fill_owner(&mut self, key: &[u8], owner: u64) {
        let h = self.hasher.hash_one(key);
        if let Some(rec) = self.keys.get_mut(&h).and_then(|l| l.back_mut())
            && rec.owner == 0
        {
            rec.owner = super::tracker::known(owner);
        }
    }

    /// Mark the latest acquisition of `key` as a takeover and give it its owner.
    pub(crate) fn mark_takeover(&mut self, key: &[u8], owner: u64) {
        let h = self.hasher.hash_one(key);
        if let Some(rec) = self
            .keys
            .get_mut(&h)
            .and_then(|l| l.iter_mut().rev().find(|r| r.kind == Transition::Acquired))
        {
            rec.takeover = true;
            rec.owner = super::tracker::known(owner);
        }
    }

    fn evict_oldest(&mut self) {
        let Some((h, seq)) = self.order.pop_front() else {
            return;
        };
        if let Some(list) = self.keys.get_mut(&h) {
            // The per-key bound may already have dropped it.
            if list.front().is_some_and(|r| r.seq == seq) {
                list.pop_front();
            }
            if list.is_empty() {
                self.keys.remove(&h);
            }
        }
    }

    /// The records of `key`, oldest first.
    pub(crate) fn of(&self, key: &[u8]) -> Vec<Record> {
        let h = self.hasher.hash_one(key);
        self.keys
            .get(&h)
            .map(|l| l.iter().copied().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_records_of_each_key_within_the_global_cap() {
        let mut h = History::new(100);
        for i in 0..40 {
            h.push(b"hot", i, Transition::Renewed, None);
        }
        let hot = h.of(b"hot");
        assert_eq!(hot.len(), PER_KEY);
        assert_eq!(hot.first().map(|r| r.at_ms), Some(40 - PER_KEY as i64));
        assert_eq!(h.len(), 40, "the eviction queue still counts records dropped per key");
        for i in 0..100 {
            h.push(format!("k{i}").as_bytes(), 1000 + i, Transition::Acquired, Some(7));
        }
        assert_eq!(h.len(), 100);
        assert!(h.of(b"hot").is_empty(), "the oldest key's records went first");
        assert_eq!(h.of(b"k0").len(), 1);
        assert_eq!(h.of(b"k99")[0].owner(), Some(7));
        h.push(b"k100", 5000, Transition::Acquired, None);
        assert!(h.of(b"k0").is_empty());
        assert_eq!(h.of(b"k1").len(), 1);
    }

    #[test]
    fn a_takeover_marks_the_latest_acquisition() {
        let mut h = History::new(10);
        h.push(b"k", 1, Transition::Acquired, Some(1));
        h.push(b"k", 2, Transition::Expired, Some(1));
        h.push(b"k", 3, Transition::Acquired, None);
        h.mark_takeover(b"k", 2);
        let r = h.of(b"k");
        assert!(!r[0].takeover);
        assert!(r[2].takeover);
        assert_eq!(r[2].owner(), Some(2));
        assert_eq!(r[1].owner(), Some(1));
    }

    #[test]
    fn records_stay_small() {
        assert_eq!(std::mem::size_of::<Record>(), 32);
    }
}
