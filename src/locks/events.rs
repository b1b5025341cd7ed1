//! The lock table in events mode: keyspace notifications say which keys exist and when
//! they changed, reads after them fill in owner and expiry, and the census is taken at any
//! moment from expiry times — a stalled holder shows at its mark, not at the next pass.
//!
//! What a later read finds that the events did not say (a missed notification) is a
//! *suspect* until a second read at least `CONFIRM_MS` later, with no event for the key in
//! between, confirms it; only then is it repaired and counted. So a notification still in
//! flight when a read answers is never counted as missed.

use crate::dense::Key;
use std::hash::BuildHasher;

pub use super::event_reads::{NOT_A_WRITE, Need, Write};
use super::table::{Census, ESTIMATED, LockEntry, NamespaceTable, OWNER_UNSURE, PASS_WINDOW, READING, UNREAD, expiry};
use super::ttl;
use crate::access::read::KeyRead;
use crate::config::NamespaceConfig;
use crate::vocab::{Repair, Unreadable};

/// How long a discrepancy must last before it counts: pub/sub delivers within this.
pub const CONFIRM_MS: i64 = 1_000;
/// Suspects kept at most per namespace; beyond, discrepancies wait for the next walk.
const MAX_SUSPECTS: usize = 100_000;

/// A discrepancy waiting for its second read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Suspect {
    kind: Repair,
    /// The entry's event count when first seen (missing keys: 0).
    seq: u16,
    /// Counted as a repair once confirmed (a key the inventory found is taken in uncounted).
    counted: bool,
    since_ms: i64,
}

/// What a read of a key found: a lock, nothing, or a key that is not a readable lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<'a> {
    Lock {
        owner: &'a [u8],
        pttl_ms: i64,
    },
    /// The owner alone was read (its TTL was not).
    Owner(&'a [u8]),
    Gone,
    Unreadable(Unreadable),
}

impl<'a> From<&'a KeyRead> for Found<'a> {
    fn from(read: &'a KeyRead) -> Self {
        match read {
            KeyRead::Lock { owner, pttl_ms } => Found::Lock {
                owner,
                pttl_ms: *pttl_ms,
            },
            KeyRead::Owner(owner) => Found::Owner(owner),
            KeyRead::Gone => Found::Gone,
            KeyRead::Unreadable(reason) => Found::Unreadable(*reason),
        }
    }
}

/// A key to read, with the event count it had when the read was asked for.
#[derive(Debug, Clone)]
pub struct ToRead {
    pub key: Box<[u8]>,
    pub seq: u16,
}

impl NamespaceTable {
    /// An event says `key` is gone (del, expired, evicted, renamed away).
    pub fn forget(&mut self, key: &[u8]) {
        self.suspects.remove(key);
        self.odd.remove(key);
        if self.locks.remove(key).is_some()
            && let Some(tokens) = &mut self.tokens
        {
            tokens.remove(key);
        }
    }

    /// A `del` of `key` on a cluster, checked before it counts (a slot migration's move
    /// looks the same): the lock leaves the census at once, kept aside until the check says.
    pub fn set_aside(&mut self, key: &[u8]) {
        self.suspects.remove(key);
        if let Some(e) = self.locks.remove(key) {
            self.aside.insert(Key::new(key), e);
        }
    }

    /// The check of a `del` said: a move (`moved`: the lock back as it was, unless written
    /// since), or gone.
    pub fn settle_aside(&mut self, key: &[u8], moved: bool) {
        let Some(e) = self.aside.remove(key) else {
            return;
        };
        if !self.locks.contains_key(key) {
            if moved {
                self.locks.insert(Key::new(key), e);
            } else if let Some(tokens) = &mut self.tokens {
                tokens.remove(key);
            }
        }
    }

    /// A lock set aside for the check of its `del`.
    pub fn aside(&self, key: &[u8]) -> Option<&LockEntry> {
        self.aside.get(key)
    }

    /// Back to scan mode: the locks set aside return (the next cycle drops those gone).
    pub(super) fn put_aside_back(&mut self) {
        let aside: Vec<(Key, LockEntry)> = self.aside.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
        self.aside.clear();
        for (k, e) in aside {
            if !self.locks.contains_key(&k) {
                self.locks.insert(k, e);
            }
        }
    }

    /// A fencing counter was written (its value is read by the next pass).
    pub fn announce_fence(&mut self, key: &[u8]) {
        if !self.fences.contains_key(key) {
            self.fences
                .insert(Key::new(key), super::table::FenceEntry { value: 0, pass: 0 });
        }
    }

    /// A fencing counter was deleted: it vanished, which counts as a regression.
    pub fn forget_fence(&mut self, key: &[u8]) {
        if self.fences.remove(key).is_some_and(|f| f.pass != 0) {
            self.pending.fence_regressions += 1;
        }
    }

    /// A fencing counter's value, read in events mode; going backwards counts.
    pub fn fence_read(&mut self, key: &[u8], value: Option<i64>) {
        let pass = self.pass.max(1);
        match (self.fences.get_mut(key), value) {
            (Some(f), Some(v)) => {
                if f.pass != 0 && v < f.value {
                    self.pending.fence_regressions += 1;
                }
                f.value = v;
                f.pass = pass;
            }
            (None, Some(v)) => {
                self.fences
                    .insert(Key::new(key), super::table::FenceEntry { value: v, pass });
            }
            (Some(_), None) => self.forget_fence(key),
            (None, None) => {}
        }
    }

    /// Keys to re-read in a pass: every tracked lock not read within the last `fresh_passes`
    /// passes (a read after an event or by a walk is as good as a pass's), every lock whose
    /// estimated TTL (a renewal's, not read) is below `verify_below_ms` — read before the
    /// estimate could make it overdue — and every unreadable key, each with its event count.
    /// For the locks read recently enough, `fresh` gets their remaining TTL now in seconds
    /// (for the histogram the pass observes). With every TTL class taken, the classes no lock
    /// holds are freed.
    pub fn to_refresh(
        &mut self,
        fresh_passes: u32,
        now_ms: i64,
        verify_below_ms: Option<i64>,
        mut fresh: impl FnMut(f64),
    ) -> Vec<ToRead> {
        self.free_unheld_classes();
        let pass = self.pass;
        // Older passes all read as `PASS_WINDOW` ago.
        let fresh_passes = fresh_passes.min(PASS_WINDOW);
        let mut stale = Vec::new();
        for (k, e) in self.locks.iter() {
            let pttl = e.pttl_at(now_ms);
            let verify = e.flags() & ESTIMATED != 0 && verify_below_ms.is_some_and(|v| pttl >= 0 && pttl < v);
            if !e.unread()
                && !verify
                && pass.wrapping_sub(e.pass_at(pass)) < fresh_passes
                && !self.suspects.contains_key(k)
            {
                if pttl >= 0 {
                    fresh(pttl as f64 / 1000.0);
                }
            } else {
                stale.push(ToRead {
                    key: Box::from(k),
                    seq: e.seq(),
                });
            }
        }
        stale.extend(self.odd.keys().map(|k| ToRead {
            key: Box::from(k),
            seq: 0,
        }));
        stale
    }

    /// Fencing counters to re-read in a pass.
    pub fn fences_to_refresh(&self) -> Vec<Box<[u8]>> {
        self.fences.keys().map(Box::from).collect()
    }

    /// A pass re-read a tracked key. Agreement refreshes the TTL; a disagreement that no
    /// event explains becomes a suspect (or, confirmed, a repair). Returns the remaining
    /// TTL in seconds for the histogram.
    pub fn refresh_read(
        &mut self,
        ns: &NamespaceConfig,
        key: &[u8],
        seq: u16,
        found: Found<'_>,
        now_ms: i64,
    ) -> Option<f64> {
        let Some(e) = self.locks.get(key) else {
            // An unreadable key, or one forgotten since the read was asked for.
            match found {
                Found::Unreadable(reason) if self.odd.contains_key(key) => self.set_odd(key, reason),
                Found::Gone | Found::Lock { .. } => {
                    self.odd.remove(key);
                }
                Found::Unreadable(_) | Found::Owner(_) => {}
            }
            return None;
        };
        if e.seq() != seq {
            return None; // an event came after the read was asked for; its read decides
        }
        let kind = match found {
            // A lock whose owner may have changed unread: another owner is a handoff.
            Found::Lock { owner, pttl_ms }
                if e.unread() || e.flags() & OWNER_UNSURE != 0 || self.owner_hash(owner) == e.owner =>
            {
                let estimated = (e.flags() & ESTIMATED != 0).then(|| e.expires_ms());
                self.suspects.remove(key);
                self.apply(ns, key, owner, pttl_ms, now_ms);
                self.pass_seen(key);
                if let Some(e) = self.locks.get_mut(key) {
                    // Its TTL is read now, no longer a renewal's estimate; one the read
                    // disagrees with (renewed with another TTL than its class's) is no
                    // longer taken: its next renewal is read, and teaches its class anew.
                    e.set_flags(e.flags() & !ESTIMATED);
                    if estimated.is_some_and(|at| !super::event_reads::agrees(at, e.expires_ms())) {
                        e.set_ttl_class(0);
                    }
                }
                return (pttl_ms >= 0).then(|| pttl_ms as f64 / 1000.0);
            }
            Found::Lock { .. } => Repair::Changed,
            Found::Gone => Repair::Gone,
            Found::Unreadable(_) => Repair::Changed,
            // A pass reads owner and TTL; an owner alone proves nothing either way.
            Found::Owner(_) => return None,
        };
        if self.confirmed(key, kind, seq, true, now_ms).is_some() {
            self.pending.repairs[kind.index()] += 1;
            self.repaired += 1;
            match found {
                Found::Lock { owner, pttl_ms } => self.apply(ns, key, owner, pttl_ms, now_ms),
                Found::Gone => self.forget(key),
                Found::Unreadable(reason) => {
                    self.forget(key);
                    self.set_odd(key, reason);
                }
                Found::Owner(_) => {}
            }
        }
        None
    }

    /// The reconciling SCAN found `key` and read it. A lock the events never announced is
    /// a suspect, taken in once a second read confirms it: counted as a repair
    /// (`counting`), or silently (the first walk after start, which is an inventory, not a
    /// check).
    pub fn walk_found(&mut self, ns: &NamespaceConfig, key: &[u8], found: Found<'_>, now_ms: i64, counting: bool) {
        if self.locks.contains_key(key) {
            return; // tracked: passes re-read it
        }
        match found {
            Found::Lock { owner, pttl_ms } => {
                // Even the inventory takes a key in only once a second read finds it: a read
                // answered after the key's `del` was handled would bring back a lock gone.
                // An inventory with no room left to confirm takes it in at once, as the next
                // walk would otherwise count it as missed.
                let at_once = !counting && self.suspects.len() >= MAX_SUSPECTS && !self.suspects.contains_key(key);
                let confirmed = match at_once {
                    true => Some(false),
                    false => self.confirmed(key, Repair::Missing, 0, counting, now_ms),
                };
                if let Some(counted) = confirmed {
                    if counted {
                        self.pending.repairs[Repair::Missing.index()] += 1;
                        self.repaired += 1;
                    }
                    self.apply(ns, key, owner, pttl_ms, now_ms);
                    self.pass_seen(key);
                }
            }
            Found::Gone => {
                self.suspects.remove(key);
            }
            Found::Unreadable(reason) => self.set_odd(key, reason),
            Found::Owner(_) => {}
        }
    }

    /// Whether a tracked key's discrepancy waits for its second read (by the next pass).
    pub fn has_suspects(&self) -> bool {
        self.suspects.values().any(|s| s.kind != Repair::Missing)
    }

    /// Keys found missing by a walk and waiting for their second read.
    pub fn missing_suspects(&self, now_ms: i64) -> Vec<Box<[u8]>> {
        self.suspects
            .iter()
            .filter(|(_, s)| s.kind == Repair::Missing && now_ms - s.since_ms >= CONFIRM_MS)
            .map(|(k, _)| Box::from(k))
            .collect()
    }

    /// The census now, from expiry times: the gauges' values at this moment.
    pub fn census_at(&self, ns: &NamespaceConfig, now_ms: i64) -> Census {
        let mut c = Census::default();
        let below = ns.overdue_below();
        for e in self.locks.values() {
            c.held += 1;
            if e.unread() {
                continue;
            }
            let pttl = e.pttl_at(now_ms);
            if pttl == -1 {
                c.without_ttl += 1;
            }
            if ttl::renewal_overdue(pttl, below) {
                c.overdue += 1;
            }
            let age_ms = u64::try_from(now_ms.saturating_sub(e.since_ms())).unwrap_or(0);
            if ttl::held_too_long(age_ms, ns.max_hold) {
                c.too_long += 1;
            }
            c.max_age_ms = c.max_age_ms.max(age_ms);
        }
        for reason in self.odd.values() {
            match reason {
                Unreadable::WrongType => c.wrong_type += 1,
                Unreadable::BadValue => c.bad_value += 1,
            }
        }
        c.fence_max = self.fences.values().filter(|f| f.pass != 0).map(|f| f.value).max();
        c
    }

    /// Whether a discrepancy of `kind` on `key` was already seen at least `CONFIRM_MS` ago
    /// with the same event count — then whether it counts as a repair (`counted` as it was
    /// first noted); otherwise it is (re)noted as a suspect, to count as `counted` says.
    fn confirmed(&mut self, key: &[u8], kind: Repair, seq: u16, counted: bool, now_ms: i64) -> Option<bool> {
        match self.suspects.get(key) {
            Some(s) if s.kind == kind && s.seq == seq => {
                if now_ms - s.since_ms >= CONFIRM_MS {
                    let counted = s.counted;
                    self.suspects.remove(key);
                    return Some(counted);
                }
                None
            }
            _ => {
                if self.suspects.len() < MAX_SUSPECTS {
                    self.suspects.insert(
                        Key::new(key),
                        Suspect {
                            kind,
                            seq,
                            counted,
                            since_ms: now_ms,
                        },
                    );
                }
                None
            }
        }
    }

    /// Take a read as the truth: owner (a new one is a handoff), TTL, token.
    pub(super) fn apply(&mut self, ns: &NamespaceConfig, key: &[u8], owner: &[u8], pttl_ms: i64, now_ms: i64) {
        let hash = self.hasher().hash_one(owner);
        let expires_ms = expiry(now_ms, pttl_ms);
        let pass = self.pass;
        self.odd.remove(key);
        match self.locks.get_mut(key) {
            Some(e) => {
                if e.unread() {
                    e.owner = hash;
                    e.set_flags(e.flags() & !(UNREAD | READING));
                } else if e.owner != hash {
                    self.pending.handoffs += 1;
                    e.owner = hash;
                    e.set_since_ms(now_ms);
                }
                e.set_expires_ms(expires_ms);
                e.set_flags(e.flags() & !OWNER_UNSURE);
                e.set_pass(pass);
            }
            None => {
                let since_ms = ttl::acquired_no_later_than(now_ms, pttl_ms, ns.ttl);
                self.locks
                    .insert(Key::new(key), LockEntry::new(hash, since_ms, expires_ms, pass, 0));
            }
        }
        if let Some(tokens) = &mut self.tokens
            && tokens.get(key).is_none_or(|t| **t != *owner)
        {
            tokens.insert(Key::new(key), Box::from(owner));
        }
    }

    pub(super) fn set_odd(&mut self, key: &[u8], reason: Unreadable) {
        self.forget_lock_only(key);
        self.odd.insert(Key::new(key), reason);
    }

    fn forget_lock_only(&mut self, key: &[u8]) {
        if self.locks.remove(key).is_some()
            && let Some(tokens) = &mut self.tokens
        {
            tokens.remove(key);
        }
    }

    /// Mark `key` as seen by the pass in progress (the watcher's owner fallback reads this).
    fn pass_seen(&mut self, key: &[u8]) {
        let pass = self.pass;
        if let Some(e) = self.locks.get_mut(key) {
            e.set_pass(pass);
        }
    }
}
