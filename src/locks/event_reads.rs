//! What the lock table reads after an event, in events mode: owner and TTL of a key it
//! does not know yet, the owner alone after a `set` of a lock it knows, nothing after a
//! renewal's `expire` (the TTL the namespace's locks were last read with is set again) — and
//! what those reads answer.

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
/// Learnt TTLs in a row that must agree before renewals are no longer read: a namespace
/// whose locks are set with different TTLs keeps reading them.
const SPAN_TRUSTED: u32 = 3;

/// How far two learnt TTLs may differ and still agree, and how much more than the learnt
/// TTL a lock may have left and still be renewed without a read: an eighth (how late the
/// watcher handled each write moves them), at least 10 ms.
fn tolerance(span_ms: i64) -> i64 {
    (span_ms / 8).max(10)
}

/// The TTL a namespace's locks were read with after writes: the least of a run of reads
/// that each agreed with the run's first, and how many agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    ms: i64,
    first: i64,
    agreed: u32,
}

impl Span {
    fn next(before: Option<Span>, ms: i64) -> Span {
        match before {
            Some(b) if (b.first - ms).abs() <= tolerance(b.first) => Span {
                ms: b.ms.min(ms),
                first: b.first,
                agreed: b.agreed.saturating_add(1),
            },
            _ => Span {
                ms,
                first: ms,
                agreed: 0,
            },
        }
    }
}

impl NamespaceTable {
    /// An event says `key` was written (`write`: its value, its TTL, or otherwise): track
    /// it. Returns what must be read next and the event count the read is for.
    ///
    /// A new key, or one whose read is still out, needs owner and TTL. A `set` on a lock
    /// already read needs its owner (the TTL comes with the `expire` a `SET … PX` publishes
    /// after it; a `KEEPTTL` keeps it). A renewal's `expire` sets the TTL the namespace's
    /// locks were last read with, unless that is unknown or shorter than what the lock still
    /// had (a lock of a longer TTL): then it is read. A refresh pass re-reads every lock
    /// within `reconcile_interval`, so a renewal with another TTL is corrected there.
    pub fn announce(&mut self, key: &[u8], write: Write, now_ms: i64) -> Need {
        self.suspects.remove(key);
        let span = self.span.filter(|s| s.agreed >= SPAN_TRUSTED).map(|s| s.ms);
        let Some(e) = self.locks.get_mut(key) else {
            self.odd.remove(key);
            self.locks.insert(
                Key::new(key),
                LockEntry::new(0, now_ms, NO_EXPIRY, self.pass, UNREAD | READING),
            );
            return Need::Full(0);
        };
        if !e.unread() && e.flags() & READING == 0 {
            match (write, span) {
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
                if pttl_ms > 0 && written_ms != NOT_A_WRITE {
                    let ms = sent_ms.saturating_add(pttl_ms).saturating_sub(written_ms).max(1);
                    self.span = Some(Span::next(self.span, ms));
                }
                self.apply(ns, key, owner, pttl_ms, now_ms);
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
