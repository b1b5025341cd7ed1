//! The tracker's per-key state: a hold in progress or a tombstone ([`State`]), kept
//! flattened as an [`Entry`] of 32 bytes, the size that decides the tracker's memory.

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

/// What is kept of one key: a [`State`], flattened to 32 bytes (an enum of it would take 32
/// on its own, beside the namespace and generation).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) owner: u64,
    /// Held: since when the owner holds it (`UNSEEN`: not seen). Ended: when it ended.
    pub(super) since_ms: i64,
    /// Held: when last acquired or renewed (`UNSEEN`: neither was seen).
    pub(super) written_ms: i64,
    /// Which owner read belongs to this entry's current hold.
    pub(super) generation: u32,
    pub(super) ns: u16,
    /// Expired or evicted: a tombstone.
    pub(super) ended: bool,
    /// Held: the next `expire` of this key is the PX of the `set` that acquired it.
    pub(super) absorb_expire: bool,
}

impl Entry {
    pub(super) fn state(&self) -> State {
        if self.ended {
            State::Ended {
                owner: self.owner,
                at_ms: self.since_ms,
            }
        } else {
            State::Held {
                owner: self.owner,
                since_ms: self.since_ms,
                written_ms: self.written_ms,
                absorb_expire: self.absorb_expire,
            }
        }
    }

    pub(super) fn set(&mut self, state: State) {
        (
            self.owner,
            self.since_ms,
            self.written_ms,
            self.absorb_expire,
            self.ended,
        ) = match state {
            State::Held {
                owner,
                since_ms,
                written_ms,
                absorb_expire,
            } => (owner, since_ms, written_ms, absorb_expire, false),
            State::Ended { owner, at_ms } => (owner, at_ms, UNSEEN, false, true),
        };
    }
}
