//! The tracker's per-key state: a hold in progress or a tombstone ([`State`]), kept
//! flattened as an [`Entry`] of 24 bytes, the size that decides the tracker's memory: its
//! times are milliseconds after the tracker's [`Clock`] epoch, in 32 bits.

use super::UNSEEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Held {
        owner: u64,
        since_ms: i64,
        /// When the hold was last acquired or renewed (`UNSEEN`: neither was seen).
        written_ms: i64,
        /// The next `expire` of this key is the PX of the `set` that acquired it.
        absorb_expire: bool,
    },
    /// Expired or evicted at `at_ms` under `owner`; kept one `ttl` for takeovers.
    Ended { owner: u64, at_ms: i64 },
}

/// Where the entries' 32-bit times count from. The window it gives (2^32 ms, 49 days) moves
/// on ([`Clock::due`], [`Entry::rebase`]) before the watcher's clock leaves it, keeping 24
/// days behind: a time older than that reads as the epoch, 24 to 37 days ago (a hold that
/// long is shown as lasting at least 24 days, far past the hold histogram's buckets).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Clock {
    epoch_ms: i64,
}

/// `Entry`'s stored value of `UNSEEN`.
const UNSEEN_REL: u32 = u32::MAX;
/// How far behind now the epoch is put when it moves.
const BEHIND_MS: i64 = 1 << 31;
/// How far ahead of the epoch now may go before it moves (12 days short of the window's end).
const AHEAD_MS: i64 = (1 << 32) - (1 << 30);

impl Clock {
    fn rel(self, ms: i64) -> u32 {
        if ms == UNSEEN {
            return UNSEEN_REL;
        }
        u32::try_from(ms.saturating_sub(self.epoch_ms).clamp(0, i64::from(UNSEEN_REL - 1))).unwrap_or(0)
    }

    fn abs(self, rel: u32) -> i64 {
        if rel == UNSEEN_REL {
            UNSEEN
        } else {
            self.epoch_ms.saturating_add(i64::from(rel))
        }
    }

    /// At `now_ms`, the milliseconds the epoch must move on by (0: none yet), in one step
    /// however long since the last call (a watcher unsubscribed for months).
    pub(super) fn due(self, now_ms: i64) -> i64 {
        let ahead = now_ms.saturating_sub(self.epoch_ms);
        if ahead < AHEAD_MS { 0 } else { ahead - BEHIND_MS }
    }

    pub(super) fn advance(&mut self, by: i64) {
        self.epoch_ms = self.epoch_ms.saturating_add(by);
    }
}

/// What is kept of one key: a [`State`], flattened to 24 bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) owner: u64,
    /// Held: since when the owner holds it (`UNSEEN_REL`: not seen). Ended: when it ended.
    since: u32,
    /// Held: when last acquired or renewed (`UNSEEN_REL`: neither was seen).
    written: u32,
    /// Which owner read belongs to this entry's current hold.
    pub(super) generation: u32,
    pub(super) ns: u16,
    /// Expired or evicted: a tombstone.
    ended: bool,
    /// Held: the next `expire` of this key is the PX of the `set` that acquired it.
    pub(super) absorb_expire: bool,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 24);

impl Entry {
    /// A key first seen: a tombstone of nobody, ended at no time.
    pub(super) fn fresh(ns: usize) -> Entry {
        Entry {
            owner: super::UNKNOWN,
            since: UNSEEN_REL,
            written: UNSEEN_REL,
            generation: 0,
            ns: ns as u16,
            ended: true,
            absorb_expire: false,
        }
    }

    pub(super) fn state(&self, c: Clock) -> State {
        if self.ended {
            State::Ended {
                owner: self.owner,
                at_ms: c.abs(self.since),
            }
        } else {
            State::Held {
                owner: self.owner,
                since_ms: c.abs(self.since),
                written_ms: c.abs(self.written),
                absorb_expire: self.absorb_expire,
            }
        }
    }

    pub(super) fn set(&mut self, state: State, c: Clock) {
        let (owner, since_ms, written_ms, absorb_expire, ended) = match state {
            State::Held {
                owner,
                since_ms,
                written_ms,
                absorb_expire,
            } => (owner, since_ms, written_ms, absorb_expire, false),
            State::Ended { owner, at_ms } => (owner, at_ms, UNSEEN, false, true),
        };
        (self.owner, self.since, self.written, self.absorb_expire, self.ended) =
            (owner, c.rel(since_ms), c.rel(written_ms), absorb_expire, ended);
    }

    /// Since when the hold is held (or the tombstone's end).
    pub(super) fn since_ms(&self, c: Clock) -> i64 {
        c.abs(self.since)
    }

    pub(super) fn set_since_ms(&mut self, ms: i64, c: Clock) {
        self.since = c.rel(ms);
    }

    pub(super) fn set_written_ms(&mut self, ms: i64, c: Clock) {
        self.written = c.rel(ms);
    }

    /// The epoch moved on `by` ms: the times count from it (one older than it reads as it).
    pub(super) fn rebase(&mut self, by: i64) {
        for t in [&mut self.since, &mut self.written] {
            if *t != UNSEEN_REL {
                *t = u32::try_from(i64::from(*t).saturating_sub(by).max(0)).unwrap_or(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_survive_the_epoch_moving_on() {
        let mut c = Clock::default();
        let mut e = Entry::fresh(0);
        let held = |since_ms, written_ms| State::Held {
            owner: 7,
            since_ms,
            written_ms,
            absorb_expire: false,
        };
        e.set(held(1_000, UNSEEN), c);
        assert_eq!(e.state(c), held(1_000, UNSEEN));
        // 40 days on: the epoch must move before the window's end.
        let now = 40 * 86_400_000;
        assert_eq!(c.due(now - AHEAD_MS - 1), 0);
        let by = c.due(now);
        assert!(by > 0);
        e.set_written_ms(now - 5, c);
        c.advance(by);
        e.rebase(by);
        // The recent time is exact; the old one reads as the window's start (24 days ago).
        assert_eq!(e.state(c), held(now - BEHIND_MS, now - 5));
        assert_eq!(c.due(now), 0);
        e.set(held(now, now + 10), c);
        assert_eq!(e.state(c), held(now, now + 10));
        // After 200 days of silence (a watcher unsubscribed that long), one step brings
        // the epoch to 24 days behind; the old times read as it.
        let later = now + 200 * 86_400_000;
        let by = c.due(later);
        c.advance(by);
        e.rebase(by);
        assert_eq!(c.due(later), 0);
        assert_eq!(e.state(c), held(later - BEHIND_MS, later - BEHIND_MS));
        e.set(held(later, later + 1), c);
        assert_eq!(e.state(c), held(later, later + 1));
    }
}
