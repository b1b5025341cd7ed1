//! What the lock table reads after an event, in events mode: owner and TTL of a key it
//! does not know yet, the owner alone after a `set` of a lock it knows, nothing after a
//! renewal's `expire` (the TTL its own lock was last read with after a write, its TTL class,
//! is set again) — and what those reads answer.

use crate::dense::Key;
use std::hash::BuildHasher;

use super::events::Found;
use super::table::{AWAIT_TTL, ESTIMATED, LockEntry, NO_EXPIRY, NamespaceTable, OWNER_UNSURE, READING, UNREAD};
use crate::config::NamespaceConfig;

/// What an event wrote, as far as the lock table's reads go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// `set`: the value was replaced (the owner may have changed).
    Value,
    /// `expire`: a TTL was set (a renewal, or the PX of the `SET` just before).
    Ttl,
    /// Anything else that leaves a key in place (a hash write, `persist`, `restore`, …).
    Other,
}

/// What the table needs read after an event, with the event count to read it for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Owner and TTL.
    Full(u16),
    /// The owner alone (`MGET`): the TTL is known or on its way.
    Owner(u16),
    Nothing,
}

/// `written_ms` of a read that follows no write of the lock (its TTL teaches nothing).
pub const NOT_A_WRITE: i64 = i64::MIN;
/// Reads after writes that must agree with a TTL class's first before renewals of its
/// locks are no longer read.
const SPAN_TRUSTED: u32 = 3;
/// TTL classes kept per namespace: a lock's class fits the three bits its entry has left.
const CLASSES: usize = 7;

/// How far two learnt TTLs may differ and still agree, and how much more than the learnt
/// TTL a lock may have left and still be renewed without a read: an eighth (how late the
/// watcher handled each write moves them), at least 10 ms.
fn tolerance(span_ms: i64) -> i64 {
    (span_ms / 8).max(10)
}

/// Whether the expiry a renewal's estimate gave a lock and the one a read found agree:
/// within a second (how late a notification and a read arrive is far less; a renewal
/// with another TTL differs by more).
pub(super) fn agrees(estimated_ms: i64, read_ms: i64) -> bool {
    (estimated_ms - read_ms).abs() <= 1_000
}

/// One TTL the namespace's locks were read with after writes: the least of the reads that
/// agreed with its first, and how many agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    ms: i64,
    first: i64,
    agreed: u32,
}

/// The TTLs a namespace's locks were read with after their renewals, a class each. Each
/// lock keeps the class its own last such read fell in, so a renewal's `expire` is
/// estimated with the TTL *that lock* renews with — never with another lock's (one taken
/// and released every second with a TTL of an hour beside a holder of 30 s), nor with its
/// own acquisition's (a holder may acquire with an hour and renew with 30 s). A lock of no
/// class (its first renewal, or all seven classes taken by other TTLs) has its renewals
/// read. A class no lock holds any more is freed by the next pass that finds them all taken.
#[derive(Debug, Clone, Default)]
pub(crate) struct Spans {
    classes: [Option<Span>; CLASSES],
}

impl Spans {
    /// A read after a write found `ms`: the class (1 to 7) it agrees with, a new one, or 0
    /// when every class is taken by other TTLs.
    fn learn(&mut self, ms: i64) -> u8 {
        let agrees = |s: &Span| (s.first - ms).abs() <= tolerance(s.first);
        if let Some(i) = self.classes.iter().position(|c| c.as_ref().is_some_and(agrees)) {
            if let Some(s) = &mut self.classes[i] {
                s.ms = s.ms.min(ms);
                s.agreed = s.agreed.saturating_add(1);
            }
            return class_of(i);
        }
        match self.classes.iter().position(Option::is_none) {
            Some(i) => {
                self.classes[i] = Some(Span {
                    ms,
                    first: ms,
                    agreed: 0,
                });
                class_of(i)
            }
            None => 0,
        }
    }

    /// The TTL of `class` once enough reads agreed on it.
    fn trusted(&self, class: u8) -> Option<i64> {
        let s = self.classes.get(usize::from(class).checked_sub(1)?)?.as_ref()?;
        (s.agreed >= SPAN_TRUSTED).then_some(s.ms)
    }
}

fn class_of(i: usize) -> u8 {
    u8::try_from(i + 1).unwrap_or(0)
}

impl NamespaceTable {
    /// With every TTL class taken, free those no lock holds (locks set aside for a `del`'s
    /// check hold theirs): one walk over the locks, only then.
    pub(super) fn free_unheld_classes(&mut self) {
        if self.spans.classes.iter().any(Option::is_none) {
            return;
        }
        let mut held = [false; CLASSES];
        for e in self.locks.values().chain(self.aside.values()) {
            if let Some(h) = usize::from(e.ttl_class()).checked_sub(1).and_then(|i| held.get_mut(i)) {
                *h = true;
            }
        }
        for (c, h) in self.spans.classes.iter_mut().zip(held) {
            if !h {
                *c = None;
            }
        }
    }

    /// An event says `key` was written (`write`: its value, its TTL, or otherwise): track
    /// it. Returns what must be read next and the event count the read is for.
    ///
    /// A new key, or one whose read is still out, needs owner and TTL. A `set` on a lock
    /// already read needs its owner (the TTL comes with the `expire` a `SET … PX` publishes
    /// after it; a `KEEPTTL` keeps it). A renewal's `expire` sets again the TTL this lock's
    /// own last read after a write found (its class), unless that is unknown, not yet
    /// trusted, or shorter than what the lock still had: then it is read. A renewal with
    /// another TTL than the lock's last is corrected by a refresh pass: within
    /// `reconcile_interval`, and before an estimate would make the lock overdue.
    pub fn announce(&mut self, key: &[u8], write: Write, now_ms: i64) -> Need {
        self.suspects.remove(key);
        let spans = &self.spans;
        let Some(e) = self.locks.get_mut(key) else {
            self.odd.remove(key);
            self.locks.insert(
                Key::new(key),
                LockEntry::new(0, now_ms, NO_EXPIRY, self.pass, UNREAD | READING),
            );
            return Need::Full(0);
        };
        if !e.unread() && e.flags() & READING == 0 {
            match (write, spans.trusted(e.ttl_class())) {
                (Write::Value, _) => {
                    e.set_flags((e.flags() & !ESTIMATED) | AWAIT_TTL);
                    return Need::Owner(e.bump_seq());
                }
                (Write::Ttl, Some(span)) if e.pttl_at(now_ms) <= span.saturating_add(tolerance(span)) => {
                    // A read out before this renewal (a pass's) would answer with the TTL
                    // before it: the count moves on.
                    e.bump_seq();
                    e.set_flags((e.flags() | ESTIMATED) & !AWAIT_TTL);
                    e.set_expires_ms(now_ms.saturating_add(span));
                    return Need::Nothing;
                }
                _ => {}
            }
        }
        e.set_flags((e.flags() | READING) & !(ESTIMATED | AWAIT_TTL));
        Need::Full(e.bump_seq())
    }

    /// The read asked for after an event (`seq` as `announce` returned it), sent at
    /// `sent_ms` and answered at `now_ms`, for a write at `written_ms` (`NOT_A_WRITE`: the
    /// TTL it reads teaches nothing). A read answered after a newer event is left to that
    /// event's own read (an owner read stays good across a renewal whose TTL was taken); one
    /// answered after the key was forgotten (its `del` or expiry handled while the read was
    /// in flight) is dropped, or it would bring back a lock that is gone. A TTL read right
    /// after a write teaches the namespace's TTL. Returns the event count of a TTL read to
    /// ask for now: an owner read answered for a `set` that no `expire` followed.
    #[allow(clippy::too_many_arguments)]
    pub fn event_read(
        &mut self,
        ns: &NamespaceConfig,
        key: &[u8],
        seq: u16,
        found: Found<'_>,
        written_ms: i64,
        sent_ms: i64,
        now_ms: i64,
    ) -> Option<u16> {
        let e = self.locks.get_mut(key)?;
        let owner_only = matches!(found, Found::Owner(_));
        // A full read is never out across a renewal whose TTL was taken (one is taken only
        // with no read out); an owner read is.
        let current = if owner_only { e.answered_by(seq) } else { e.seq() == seq };
        if !current {
            if owner_only && !e.unread() {
                e.set_flags(e.flags() | OWNER_UNSURE);
            }
            return None;
        }
        if !owner_only {
            e.set_flags(e.flags() & !READING);
        }
        let unread = e.unread();
        match found {
            Found::Lock { owner, pttl_ms } => {
                // Only a read after a write of a lock already held (its renewal) teaches the
                // TTL its renewals set: a holder may acquire with one TTL and renew with a
                // shorter one, which its acquisition's TTL would overstate.
                let class = match (pttl_ms > 0, written_ms != NOT_A_WRITE && !unread) {
                    (true, true) => {
                        let ms = sent_ms.saturating_add(pttl_ms).saturating_sub(written_ms).max(1);
                        Some(self.spans.learn(ms))
                    }
                    // Written without a TTL: none to take again.
                    (false, true) => Some(0),
                    (_, false) => None,
                };
                self.apply(ns, key, owner, pttl_ms, now_ms);
                if let (Some(class), Some(e)) = (class, self.locks.get_mut(key)) {
                    e.set_ttl_class(class);
                }
                None
            }
            Found::Owner(owner) if !unread => {
                self.apply_owner(key, owner, now_ms);
                self.ttl_unless_expired(key)
            }
            // Gone before the read: the event saying so follows.
            Found::Gone | Found::Owner(_) => None,
            Found::Unreadable(reason) => {
                self.set_odd(key, reason);
                None
            }
        }
    }

    /// The read asked for after an event failed (or was not sent: the budget). The owner of
    /// a lock known before may have changed unread; a `set` no `expire` followed has its TTL
    /// read (the event count returned).
    pub fn event_read_failed(&mut self, key: &[u8], seq: u16) -> Option<u16> {
        let e = self.locks.get_mut(key)?;
        if !e.answered_by(seq) {
            return None;
        }
        e.set_flags(e.flags() & !READING);
        if e.unread() {
            return None;
        }
        e.set_flags(e.flags() | OWNER_UNSURE);
        self.ttl_unless_expired(key)
    }

    /// After the owner read of a `set`: when no `expire` came after it, its TTL is read
    /// next (the event count returned).
    fn ttl_unless_expired(&mut self, key: &[u8]) -> Option<u16> {
        let e = self.locks.get_mut(key)?;
        if e.flags() & AWAIT_TTL == 0 {
            return None;
        }
        e.set_flags((e.flags() | READING) & !(AWAIT_TTL | ESTIMATED));
        Some(e.bump_seq())
    }

    /// Take an owner read alone as the truth (a new owner is a handoff); the TTL stays.
    fn apply_owner(&mut self, key: &[u8], owner: &[u8], now_ms: i64) {
        let hash = self.hasher().hash_one(owner);
        if let Some(e) = self.locks.get_mut(key) {
            e.set_flags(e.flags() & !OWNER_UNSURE);
            if e.owner != hash {
                self.pending.handoffs += 1;
                e.owner = hash;
                e.set_since_ms(now_ms);
            }
        }
        if let Some(tokens) = &mut self.tokens
            && tokens.get(key).is_none_or(|t| **t != *owner)
        {
            tokens.insert(Key::new(key), Box::from(owner));
        }
    }
}
