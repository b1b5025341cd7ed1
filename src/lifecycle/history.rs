//! Recent lifecycle transitions per lock key, for `/api/v1/locks/history` and `inspect`.
//!
//! One ring of the target's last `cap` records (oldest go first, whichever key they belong
//! to), each linked to its key's previous one; a key shows its last [`PER_KEY`]. Keys are
//! held as seeded 64-bit hashes: a record is 32 bytes, plus 16 per key with records (up to
//! an eighth more keys than records: those whose records left the ring go in bulk).

use std::collections::VecDeque;
use std::hash::BuildHasher;

use foldhash::fast::{FixedState, RandomState};

use crate::dense::DenseMap;
use crate::vocab::Transition;

/// Records shown per key.
pub(crate) const PER_KEY: usize = 32;

/// One transition of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// Wall-clock time, ms since the Unix epoch.
    pub(crate) at_ms: i64,
    /// Owner hash, 0 when unknown (see [`Record::owner`]).
    owner: u64,
    pub(crate) kind: Transition,
    /// This acquisition took over a lock that expired or was evicted under another owner.
    pub(crate) takeover: bool,
}

impl Record {
    /// Owner hash, when known (the same seeded hash as the sampler's `owner_hash`).
    pub(crate) fn owner(&self) -> Option<u64> {
        (self.owner != 0).then_some(self.owner)
    }
}

/// A record in the ring and the sequence number of its key's record before.
#[derive(Debug, Clone, Copy)]
struct Slot {
    prev: u64,
    rec: Record,
}

pub(crate) struct History {
    /// Oldest first; `ring[i]` has sequence number `first + i` (numbers start at 1).
    ring: VecDeque<Slot>,
    first: u64,
    /// Key hash → sequence number of its latest record (still in the ring, or for at most
    /// an eighth of `cap` keys, gone from it).
    latest: DenseMap<u64, u64, FixedState>,
    hasher: RandomState,
    cap: usize,
}

impl History {
    pub(crate) fn new(cap: usize) -> Self {
        History {
            ring: VecDeque::new(),
            first: 1,
            latest: DenseMap::default(),
            hasher: RandomState::default(),
            cap: cap.max(1),
        }
    }

    /// Records held now, all keys together.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ring.len()
    }

    fn slot(&self, seq: u64) -> Option<&Slot> {
        self.ring.get(usize::try_from(seq.checked_sub(self.first)?).ok()?)
    }

    fn slot_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        self.ring.get_mut(usize::try_from(seq.checked_sub(self.first)?).ok()?)
    }

    /// Sequence numbers of the records of key hash `h` shown, newest first.
    fn chain(&self, h: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut seq = self.latest.get(&h).copied().unwrap_or(0);
        while out.len() < PER_KEY
            && let Some(s) = self.slot(seq)
        {
            out.push(seq);
            seq = s.prev;
        }
        out
    }

    /// Look `key` up and forget the answer: it is in the cache for what comes next.
    pub(crate) fn warm(&self, key: &[u8]) -> bool {
        self.latest.contains_key(&self.hasher.hash_one(key))
    }

    /// Add a record for `key`; the oldest goes when the ring is full.
    pub(crate) fn push(&mut self, key: &[u8], at_ms: i64, kind: Transition, owner: Option<u64>) {
        let h = self.hasher.hash_one(key);
        let seq = self.first + self.ring.len() as u64;
        let prev = self.latest.insert(h, seq).unwrap_or(0);
        let rec = Record {
            at_ms,
            kind,
            owner: owner.map(super::tracker::known).unwrap_or(0),
            takeover: false,
        };
        // The oldest record goes first, when the ring is full (so it never grows past `cap`),
        // and without a lookup of its key: a key's latest number left pointing before
        // `first` reads as no records (numbers are never reused, and `seq` above stays the
        // new record's), and such keys are dropped together once they are an eighth of the ring.
        if self.ring.len() >= self.cap {
            self.ring.pop_front();
            self.first += 1;
        } else if self.ring.len() == self.ring.capacity() {
            // Doubling, but to `cap` exactly at the last step (not the next power of two).
            let more = self.ring.len().max(16).min(self.cap - self.ring.len());
            self.ring.reserve_exact(more);
        }
        self.ring.push_back(Slot { prev, rec });
        if self.latest.len() > self.cap + self.cap / 8 {
            let first = self.first;
            self.latest.retain(|_, &mut seq| seq >= first);
        }
    }

    /// The owner read after the latest record of `key` came back: fill it in.
    pub(crate) fn fill_owner(&mut self, key: &[u8], owner: u64) {
        let h = self.hasher.hash_one(key);
        let seq = self.latest.get(&h).copied().unwrap_or(0);
        if let Some(s) = self.slot_mut(seq)
            && s.rec.owner == 0
        {
            s.rec.owner = super::tracker::known(owner);
        }
    }

    /// Mark the latest acquisition of `key` as a takeover and give it its owner.
    pub(crate) fn mark_takeover(&mut self, key: &[u8], owner: u64) {
        let h = self.hasher.hash_one(key);
        let found = self
            .chain(h)
            .into_iter()
            .find(|&q| self.slot(q).is_some_and(|s| s.rec.kind == Transition::Acquired));
        if let Some(s) = found.and_then(|q| self.slot_mut(q)) {
            s.rec.takeover = true;
            s.rec.owner = super::tracker::known(owner);
        }
    }

    /// The records of `key`, oldest first.
    pub(crate) fn of(&self, key: &[u8]) -> Vec<Record> {
        let h = self.hasher.hash_one(key);
        let mut out: Vec<Record> = self
            .chain(h)
            .into_iter()
            .filter_map(|q| self.slot(q))
            .map(|s| s.rec)
            .collect();
        out.reverse();
        out
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
    fn keys_whose_records_left_the_ring_are_dropped_in_bulk_and_show_nothing() {
        let mut h = History::new(16);
        for i in 0..16 {
            h.push(format!("k{i}").as_bytes(), i, Transition::Acquired, None);
        }
        assert_eq!(h.ring.capacity(), 16, "grown to the cap exactly");
        // Two more keys: k0 and k1 leave the ring, their latest numbers stay for now.
        h.push(b"x", 16, Transition::Acquired, None);
        h.push(b"y", 17, Transition::Acquired, None);
        assert_eq!(h.latest.len(), 18);
        assert!(h.of(b"k0").is_empty());
        // A key whose old records left the ring starts a chain of its own.
        h.push(b"k0", 18, Transition::Released, None);
        assert_eq!(h.of(b"k0").len(), 1);
        h.fill_owner(b"k1", 5);
        assert!(h.of(b"k1").is_empty());
        // Past an eighth of the ring in stale keys, they go.
        h.push(b"z", 19, Transition::Acquired, None);
        assert_eq!(h.latest.len(), 16, "only keys with records in the ring");
        assert_eq!(h.len(), 16);
    }

    #[test]
    fn the_ring_grows_to_its_cap_and_never_past_it() {
        let mut h = History::new(100);
        for i in 0..250 {
            h.push(b"k", i, Transition::Renewed, None);
            assert!(h.ring.capacity() <= 100, "capacity {} after {i}", h.ring.capacity());
        }
        assert_eq!(h.ring.capacity(), 100);
        let k = h.of(b"k");
        assert_eq!(k.len(), PER_KEY);
        assert_eq!(k.last().map(|r| r.at_ms), Some(249));
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
        assert_eq!(std::mem::size_of::<Record>(), 24);
        assert_eq!(std::mem::size_of::<Slot>(), 32);
    }
}
