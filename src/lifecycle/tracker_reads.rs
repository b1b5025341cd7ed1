//! The tracker's owner reads answered: a `set` on a held key decided (a renewal by the
//! holder, or a new holder), a takeover told, an owner learnt.

use std::hash::BuildHasher;

use super::entry::State;
use super::{Observer, Pending, Tracker, UNKNOWN, known, opt, renewed, seen};
use crate::vocab::Transition;

impl Tracker {
    /// The owner read for `generation` of `key` came back (`None`: gone or unreadable).
    pub(crate) fn owner_read(&mut self, key: &[u8], generation: u32, owner: Option<u64>, obs: &mut impl Observer) {
        let id = self.key_hasher.hash_one(key);
        let c = self.clock;
        let Some(e) = self.keys.get_mut(&id) else {
            return;
        };
        if e.generation != generation {
            return; // a later hold began meanwhile; this read is stale
        }
        let ns = e.ns as usize;
        let read = owner.map(known).unwrap_or(UNKNOWN);
        match e.state(c) {
            State::Held { owner: UNKNOWN, .. } => {
                e.owner = read;
                let pending = self.pending.remove(&id).unwrap_or(Pending::None);
                if read != UNKNOWN && !matches!(pending, Pending::Reset { .. }) {
                    obs.owner_learnt(ns, key, read);
                }
                match pending {
                    Pending::None => {}
                    Pending::Takeover { previous, ended_ms } => {
                        if read != UNKNOWN && read != previous {
                            obs.takeover(ns, key, previous, read, e.since_ms(c).saturating_sub(ended_ms));
                        }
                    }
                    Pending::Reset {
                        previous,
                        since_ms: previous_since,
                        written_ms,
                        headroom,
                        sets,
                    } => {
                        // The same owner, or none to be read (the key gone or changed by
                        // the time the read ran): Redis rewrote a held key, and nothing
                        // says its holder changed — a renewal, as after `SET … XX PX`,
                        // one per `set` the read answers for.
                        // So is a `set` on a lock whose own owner read had not answered
                        // yet (`previous` unknown): this read names the holder of both.
                        if read == UNKNOWN || previous == UNKNOWN || read == previous {
                            // The hold's `since_ms` is the `set`'s time until now.
                            let set_ms = e.since_ms(c);
                            e.set_since_ms(previous_since, c);
                            if read == UNKNOWN {
                                e.owner = previous;
                            } else if previous == UNKNOWN {
                                obs.owner_learnt(ns, key, read);
                            }
                            for _ in 0..sets {
                                obs.transition(ns, key, Transition::Renewed, opt(e.owner));
                            }
                            renewed(obs, ns, headroom, seen(written_ms), set_ms);
                        } else {
                            // A new holder by one of them; the others rewrote its lock.
                            obs.transition(ns, key, Transition::Acquired, opt(read));
                            for _ in 1..sets {
                                obs.transition(ns, key, Transition::Renewed, opt(read));
                            }
                        }
                    }
                }
            }
            State::Ended { owner: UNKNOWN, .. } => e.owner = read,
            _ => {}
        }
    }
}

/// A `set` on a held key whose owner read never came before the hold ended: nothing says
/// its holder changed, so it was a rewrite by the holder, a renewal.
pub(super) fn settle_unread(ns: usize, key: &[u8], pending: Option<Pending>, obs: &mut impl Observer) {
    if let Some(Pending::Reset { previous, sets, .. }) = pending {
        for _ in 0..sets {
            obs.transition(ns, key, Transition::Renewed, opt(previous));
        }
    }
}
