//! The lifecycle state machine: keyspace notices on lock keys in, transitions, hold
//! durations, TTL headroom, renewal intervals and expiry takeovers out. Pure: no Redis, no
//! clock of its own, no metrics — the watcher feeds it notices, owner reads and (asked) the
//! key's last known expiry, and turns what it reports into metrics.
//!
//! Per tracked key it keeps one [`Entry`] (24 bytes beside an 8-byte key hash, in a dense
//! map): the hold in progress (with when it was last written), or, for one `ttl` after an expiry or eviction,
//! a tombstone with the last owner, so a re-acquisition by another owner is recognised as a
//! takeover. Released locks leave nothing behind.

use std::collections::HashMap;

use std::hash::BuildHasher;

use foldhash::fast::{FixedState, RandomState};

use super::headroom::{Expiry, Headroom, measure};
use crate::dense::DenseMap;
use crate::vocab::{HeadroomAt, HoldEnd, Transition};

/// A keyspace notification that matters for locks, parsed from its event name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// `set`: a string value was written (SET NX PX acquires; SET XX PX may renew).
    Set,
    /// `hset` / `hincrby`: a Redisson hash lock was written (acquire or re-entry).
    HashWrite,
    /// `del`: deleted (compare-and-delete release, or unlock of a Redisson hash).
    Del,
    /// `expire` (also for PEXPIRE, EXPIREAT, the PX of SET): a TTL was set.
    Expire,
    /// `expired`: Redis removed the key because its TTL ran out.
    Expired,
    /// `evicted`: the maxmemory policy removed the key.
    Evicted,
}

impl Notice {
    /// The notice for a keyspace event name; `None` for events locks do not care about.
    pub(crate) fn parse(event: &[u8]) -> Option<Notice> {
        Some(match event {
            b"set" => Notice::Set,
            b"hset" | b"hincrby" | b"hincrbyfloat" => Notice::HashWrite,
            b"del" => Notice::Del,
            b"expire" | b"pexpire" => Notice::Expire,
            b"expired" => Notice::Expired,
            b"evicted" => Notice::Evicted,
            _ => return None,
        })
    }
}

/// What the tracker reports; the watcher counts, logs and records history from it.
pub(crate) trait Observer {
    /// Redis performed a state change on `key`. `owner` is the owner hash when known.
    fn transition(&mut self, ns: usize, key: &[u8], kind: Transition, owner: Option<u64>);
    /// A hold whose acquisition was seen ended after `ms`.
    fn hold(&mut self, ns: usize, end: HoldEnd, ms: i64);
    /// A lock that expired (or was evicted) under `previous` was taken by `owner`
    /// `gap_ms` after it ended.
    fn takeover(&mut self, ns: usize, key: &[u8], previous: u64, owner: u64, gap_ms: i64);
    /// The owner of `key` must be read and handed back with [`Tracker::owner_read`] and `generation`.
    fn read_owner(&mut self, ns: usize, key: &[u8], generation: u32);
    /// The owner of the hold whose last transition was reported without one is now known.
    fn owner_learnt(&mut self, ns: usize, key: &[u8], owner: u64);
    /// The holder renewed (`Renewal`) or released (`Release`) its lock with `h` of its TTL left.
    fn headroom(&mut self, ns: usize, at: HeadroomAt, h: Headroom);
    /// A renewal came `ms` after the hold's acquisition or its previous renewal.
    fn renewal_interval(&mut self, ns: usize, ms: i64);
    /// Asked, not told: what the last read of `key` says is left of its TTL now (by default
    /// nothing is known, and the namespace's `ttl` stands in).
    fn expiry(&mut self, _ns: usize, _key: &[u8]) -> Expiry {
        Expiry::Unknown
    }
}

/// Owner hash 0 is reserved for "not known"; a real hash of 0 is mapped to 1.
const UNKNOWN: u64 = 0;
/// `since_ms` of a hold whose acquisition was not seen.
const UNSEEN: i64 = i64::MIN;

pub(crate) fn known(owner: u64) -> u64 {
    if owner == UNKNOWN { 1 } else { owner }
}

fn opt(owner: u64) -> Option<u64> {
    (owner != UNKNOWN).then_some(owner)
}

/// A decision that waits for the owner read after a `set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    /// Acquired within `ttl` of an expiry or eviction, at `ended_ms`, under this owner.
    Takeover {
        previous: u64,
        ended_ms: i64,
    },
    /// `set` on a key already held by `previous` (since `since_ms`, last written at
    /// `written_ms`): a renewal by `SET … XX PX` when the owner is the same, else a new
    /// acquisition. `headroom`: what the lock had left when the `set` came.
    Reset {
        previous: u64,
        since_ms: i64,
        written_ms: i64,
        headroom: Option<Headroom>,
        /// The `set`s waiting for this read (a later one before it answers joins it).
        sets: u32,
    },
}

#[path = "tracker_entry.rs"]
mod entry;
#[path = "tracker_reads.rs"]
mod reads;
use entry::{Clock, Entry, State};
use reads::settle_unread;

/// Lifecycle state of one target's lock keys.
pub(crate) struct Tracker {
    /// By a seeded 64-bit hash of the key: no key bytes are stored (two keys colliding
    /// among a million tracked is a one-in-ten-million chance, and would mix two locks' state).
    keys: DenseMap<u64, Entry, FixedState>,
    /// Decisions waiting for an owner read, by key hash: few at a time, so kept apart from
    /// the entries (which they would otherwise more than double).
    pending: HashMap<u64, Pending, FixedState>,
    key_hasher: RandomState,
    /// Namespace TTLs in ms, by namespace index: how long a tombstone waits for a takeover.
    ttl_ms: Vec<i64>,
    /// Whether the namespace's locks are Redisson hashes.
    hash_locks: Vec<bool>,
    max_keys: usize,
    generation: u32,
    /// Where the entries' times count from.
    clock: Clock,
    /// Notices on keys that were not tracked because `max_keys` was reached.
    pub(crate) untracked: u64,
}

impl Tracker {
    /// `namespaces`: (ttl ms, Redisson hash locks) by namespace index.
    pub(crate) fn new(namespaces: &[(i64, bool)], max_keys: usize) -> Self {
        Tracker {
            keys: DenseMap::default(),
            pending: HashMap::default(),
            key_hasher: RandomState::default(),
            ttl_ms: namespaces.iter().map(|n| n.0).collect(),
            hash_locks: namespaces.iter().map(|n| n.1).collect(),
            max_keys,
            generation: 0,
            clock: Clock::default(),
            untracked: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Look `key` up and forget the answer: its entry is in the cache for what comes next.
    pub(crate) fn warm(&self, key: &[u8]) -> bool {
        self.keys.contains_key(&self.key_hasher.hash_one(key))
    }

    /// After a gap in the notification stream: forget everything. Holds may have ended and
    /// others begun unseen; a tombstone may have been taken over unseen. Owners are learnt
    /// again from the next `set`, from reads, and from the sampler (`fallback_owner`).
    pub(crate) fn reset(&mut self) {
        self.keys.clear();
        self.pending.clear();
    }

    /// The namespaces changed while subscribed (a reload): `carried[old]` is the new index
    /// of each namespace that did not change. Their keys' state stays, renumbered; the keys
    /// of the others are forgotten (their locks are judged anew, as after a gap).
    pub(crate) fn renamespace(&mut self, carried: &[Option<usize>], namespaces: &[(i64, bool)]) {
        let mut gone = Vec::new();
        self.keys
            .retain(|id, e| match carried.get(usize::from(e.ns)).copied().flatten() {
                Some(n) => {
                    e.ns = n as u16;
                    true
                }
                None => {
                    gone.push(*id);
                    false
                }
            });
        for id in gone {
            self.pending.remove(&id);
        }
        self.ttl_ms = namespaces.iter().map(|n| n.0).collect();
        self.hash_locks = namespaces.iter().map(|n| n.1).collect();
    }

    /// What waits for the owner read of key hash `id` (nothing: `Pending::None`).
    fn set_pending(&mut self, id: u64, pending: Pending) {
        if pending == Pending::None {
            self.pending.remove(&id);
        } else {
            self.pending.insert(id, pending);
        }
    }

    fn next_generation(&mut self) -> u32 {
        self.generation = self.generation.wrapping_add(1);
        self.generation
    }

    /// The entry of key hash `id`, inserted when new (then `true`), unless the table is full.
    fn slot(&mut self, id: u64, ns: usize) -> Option<(&mut Entry, bool)> {
        // One lookup of the key's hash (the table is large, each a likely cache miss);
        // the cap asks a second only when full.
        if self.keys.len() >= self.max_keys && !self.keys.contains_key(&id) {
            self.untracked += 1;
            return None;
        }
        let mut fresh = false;
        let e = self.keys.get_or_insert_with(id, || {
            fresh = true;
            Entry::fresh(ns)
        })?;
        Some((e, fresh))
    }

    /// One notice for `key` in namespace `ns` at `now_ms`. `fallback_owner` is asked (only)
    /// when an untracked key expires: the owner the sampler saw since the last (re)subscribe.
    pub(crate) fn notice(
        &mut self,
        ns: usize,
        key: &[u8],
        notice: Notice,
        now_ms: i64,
        fallback_owner: impl FnOnce() -> Option<u64>,
        obs: &mut impl Observer,
    ) {
        self.follow_clock(now_ms);
        match notice {
            Notice::Set => self.on_write(ns, key, now_ms, true, obs),
            Notice::HashWrite => self.on_write(ns, key, now_ms, false, obs),
            Notice::Expire => self.on_expire(ns, key, now_ms, obs),
            Notice::Del => self.on_del(ns, key, now_ms, obs),
            Notice::Expired => self.on_end(ns, key, Transition::Expired, now_ms, fallback_owner, obs),
            Notice::Evicted => self.on_end(ns, key, Transition::Evicted, now_ms, fallback_owner, obs),
        }
    }

    /// `set` (`replaces`: a string write replaces the value) or a Redisson hash write.
    fn on_write(&mut self, ns: usize, key: &[u8], now_ms: i64, replaces: bool, obs: &mut impl Observer) {
        let ttl = self.ttl_ms.get(ns).copied().unwrap_or(0);
        let is_hash = self.hash_locks.get(ns).copied().unwrap_or(false);
        let generation = self.next_generation();
        let id = self.key_hasher.hash_one(key);
        let waiting = self.pending.get(&id).copied();
        let c = self.clock;
        let Some((e, fresh)) = self.slot(id, ns) else {
            obs.transition(ns, key, Transition::Acquired, None);
            return;
        };
        let pending = match e.state(c) {
            State::Held {
                owner,
                since_ms,
                written_ms,
                ..
            } if !fresh => {
                if !replaces || is_hash {
                    // Re-entry or an unlock's decrement of a held Redisson lock: no change
                    // of holder. Its PEXPIRE, if any, is a renewal.
                    return;
                }
                // The owner read decides between renewal and a new holder.
                match waiting {
                    Some(Pending::Reset {
                        previous,
                        since_ms,
                        written_ms,
                        headroom,
                        sets,
                    }) => Pending::Reset {
                        previous,
                        since_ms,
                        written_ms,
                        headroom,
                        sets: sets.saturating_add(1),
                    },
                    _ => Pending::Reset {
                        previous: owner,
                        since_ms,
                        written_ms,
                        headroom: measure(obs.expiry(ns, key), seen(written_ms), ttl, now_ms),
                        sets: 1,
                    },
                }
            }
            State::Ended { owner, at_ms } if !fresh && now_ms.saturating_sub(at_ms) <= ttl && owner != UNKNOWN => {
                Pending::Takeover {
                    previous: owner,
                    ended_ms: at_ms,
                }
            }
            _ => Pending::None,
        };
        e.generation = generation;
        e.set(held(now_ms, now_ms, true), c);
        self.set_pending(id, pending);
        if !matches!(pending, Pending::Reset { .. }) {
            obs.transition(ns, key, Transition::Acquired, None);
        }
        obs.read_owner(ns, key, generation);
    }

    fn on_expire(&mut self, ns: usize, key: &[u8], now_ms: i64, obs: &mut impl Observer) {
        let ttl = self.ttl_ms.get(ns).copied().unwrap_or(0);
        let generation = self.next_generation();
        let id = self.key_hasher.hash_one(key);
        let c = self.clock;
        let Some((e, fresh)) = self.slot(id, ns) else {
            obs.transition(ns, key, Transition::Renewed, None);
            return;
        };
        match e.state(c) {
            State::Held {
                absorb_expire: true, ..
            } if !fresh => {
                // The PX of the SET (or the EXPIRE after SETNX) that acquired it.
                e.absorb_expire = false;
            }
            State::Held { owner, written_ms, .. } if !fresh => {
                obs.transition(ns, key, Transition::Renewed, opt(owner));
                let written = seen(written_ms);
                let h = measure(obs.expiry(ns, key), written, ttl, now_ms);
                renewed(obs, ns, h, written, now_ms);
                e.set_written_ms(now_ms, c);
            }
            _ => {
                // A renewal of a lock whose acquisition was not seen: learn its owner.
                e.generation = generation;
                e.set(held(UNSEEN, now_ms, false), c);
                self.pending.remove(&id);
                obs.transition(ns, key, Transition::Renewed, None);
                let h = measure(obs.expiry(ns, key), None, ttl, now_ms);
                renewed(obs, ns, h, None, now_ms);
                obs.read_owner(ns, key, generation);
            }
        }
    }

    fn on_del(&mut self, ns: usize, key: &[u8], now_ms: i64, obs: &mut impl Observer) {
        let ttl = self.ttl_ms.get(ns).copied().unwrap_or(0);
        let id = self.key_hasher.hash_one(key);
        let Some(e) = self.keys.remove(&id) else {
            obs.transition(ns, key, Transition::Released, None);
            return;
        };
        let pending = self.pending.remove(&id);
        match e.state(self.clock) {
            State::Held {
                owner,
                since_ms,
                written_ms,
                ..
            } => {
                settle_unread(ns, key, pending, obs);
                obs.transition(ns, key, Transition::Released, opt(owner));
                if since_ms != UNSEEN {
                    obs.hold(ns, HoldEnd::Released, now_ms.saturating_sub(since_ms));
                }
                if let Some(h) = measure(obs.expiry(ns, key), seen(written_ms), ttl, now_ms) {
                    obs.headroom(ns, HeadroomAt::Release, h);
                }
            }
            State::Ended { .. } => obs.transition(ns, key, Transition::Released, None),
        }
    }

    /// `expired` or `evicted`: the hold ends without a release; a tombstone waits for a takeover.
    fn on_end(
        &mut self,
        ns: usize,
        key: &[u8],
        kind: Transition,
        now_ms: i64,
        fallback_owner: impl FnOnce() -> Option<u64>,
        obs: &mut impl Observer,
    ) {
        let id = self.key_hasher.hash_one(key);
        let pending = self.pending.remove(&id);
        let c = self.clock;
        let Some((e, fresh)) = self.slot(id, ns) else {
            obs.transition(ns, key, kind, None);
            return;
        };
        let owner = match e.state(c) {
            State::Held { owner, since_ms, .. } if !fresh => {
                settle_unread(ns, key, pending, obs);
                obs.transition(ns, key, kind, opt(owner));
                if kind == Transition::Expired && since_ms != UNSEEN {
                    obs.hold(ns, HoldEnd::Expired, now_ms.saturating_sub(since_ms));
                }
                owner
            }
            _ => {
                let owner = fallback_owner().map(known).unwrap_or(UNKNOWN);
                obs.transition(ns, key, kind, opt(owner));
                owner
            }
        };
        e.set(State::Ended { owner, at_ms: now_ms }, c);
    }

    /// Drop tombstones older than their namespace's `ttl`.
    pub(crate) fn sweep(&mut self, now_ms: i64) {
        self.follow_clock(now_ms);
        let (ttl, c) = (&self.ttl_ms, self.clock);
        self.keys.retain(|_, e| match e.state(c) {
            State::Ended { at_ms, .. } => now_ms.saturating_sub(at_ms) <= ttl.get(e.ns as usize).copied().unwrap_or(0),
            State::Held { .. } => true,
        });
    }

    /// Move the entries' epoch on when `now_ms` nears the end of their window (every 12
    /// days or so, or at once after a longer silence: one pass over the entries).
    fn follow_clock(&mut self, now_ms: i64) {
        let by = self.clock.due(now_ms);
        if by > 0 {
            self.clock.advance(by);
            self.keys.retain(|_, e| {
                e.rebase(by);
                true
            });
        }
    }
}

/// A hold beginning (or first seen) now, its owner still to be read.
fn held(since_ms: i64, written_ms: i64, absorb_expire: bool) -> State {
    State::Held {
        owner: UNKNOWN,
        since_ms,
        written_ms,
        absorb_expire,
    }
}

/// A time, unless it is `UNSEEN`.
fn seen(ms: i64) -> Option<i64> {
    (ms != UNSEEN).then_some(ms)
}

/// A renewal at `now_ms`, with headroom `h`, of a hold last written at `written` (when seen).
fn renewed(obs: &mut impl Observer, ns: usize, h: Option<Headroom>, written: Option<i64>, now_ms: i64) {
    if let Some(h) = h {
        obs.headroom(ns, HeadroomAt::Renewal, h);
    }
    if let Some(w) = written {
        obs.renewal_interval(ns, now_ms.saturating_sub(w).max(0));
    }
}

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;
