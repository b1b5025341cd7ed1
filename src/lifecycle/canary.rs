//! The watcher's canary rounds (`access::canary`): every `EVERY` on each primary, the canary
//! written and read after its TTL by a task of its own, its events picked out of the
//! subscription's own stream, and the round judged when all three arrived or at its deadline.
//! A round short of events after a proven one counts only if the next one is short too, so
//! one late message does not flip the mode and a primary never gets two writes in an interval.

use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::verify::Round;
use crate::access::canary::{self, ALL, Seen, Written};

/// How often each primary's canary is written: one write per primary per interval.
pub(crate) const EVERY: Duration = Duration::from_secs(10);

/// What a round's task says.
pub(super) enum Note {
    /// The write's answer (`Err`: the connection failed, which the subscription's PING judges).
    Wrote(usize, u64, Result<Written, String>),
    /// The deadline passed.
    Due(usize, u64),
}

/// A round that ended with a verdict on primary `i`: the verification's input.
pub(super) struct Judged(pub(super) usize, pub(super) Round);

/// Per primary: the round under way (number, events seen), whether one was ever proven, and
/// whether the last one came short.
struct Primary {
    key: Vec<u8>,
    open: Option<(u64, u8)>,
    proven: bool,
    short_once: bool,
    /// Rounds still skipped after a refused write: a refusal is asked again every
    /// `REFUSED_EVERY` rounds, not every round (each one is an `ACL LOG` entry).
    skip: u32,
}

/// After a refused write, the canary is tried again every this many rounds (5 minutes).
const REFUSED_EVERY: u32 = 30;

pub(super) struct Canaries {
    primaries: Vec<Primary>,
    /// The channel prefix before a key (`__keyspace@<db>__:`) and the canary pattern.
    prefix_len: usize,
    pattern: Vec<u8>,
    value: String,
    next: u64,
}

impl Canaries {
    /// One canary key per primary: `keys[i]` lives on primary `i`.
    pub(super) fn new(keys: Vec<Vec<u8>>, prefix_len: usize, pattern: Vec<u8>, value: &str) -> Self {
        Canaries {
            primaries: keys
                .into_iter()
                .map(|key| Primary {
                    key,
                    open: None,
                    proven: false,
                    short_once: false,
                    skip: 0,
                })
                .collect(),
            prefix_len,
            pattern,
            value: value.to_string(),
            next: 0,
        }
    }

    /// The keys to write from the next round on (a round under way keeps its own).
    pub(super) fn rekey(&mut self, keys: Vec<Vec<u8>>) {
        for (p, key) in self.primaries.iter_mut().zip(keys) {
            if p.open.is_none() {
                p.key = key;
            }
        }
    }

    /// Start a round on primary `i` unless one is under way: the write, the read after the
    /// TTL and the deadline, in a task that tells `tx`. A primary that serves no slot (no
    /// key fits it) holds no lock: nothing to prove there.
    pub(super) fn start(&mut self, i: usize, mut conn: ConnectionManager, tx: &mpsc::Sender<Note>) -> Option<Judged> {
        let p = self.primaries.get_mut(i)?;
        if p.key.is_empty() {
            return Some(Judged(i, Round::Proven));
        }
        if p.open.is_some() {
            return None;
        }
        if p.skip > 0 {
            p.skip -= 1;
            return None;
        }
        self.next += 1;
        let round = self.next;
        p.open = Some((round, 0));
        let key = p.key.clone();
        let value = self.value.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let written = tokio::time::timeout(canary::DEADLINE, canary::write(&mut conn, &key, &value)).await;
            let written = match written {
                Ok(Ok(w)) => Ok(w),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the canary write timed out".into()),
            };
            let go_on = written == Ok(Written::Ok);
            if tx.send(Note::Wrote(i, round, written)).await.is_err() || !go_on {
                return;
            }
            tokio::time::sleep(canary::TOUCH_AFTER).await;
            let _ = tokio::time::timeout(canary::DEADLINE, canary::touch(&mut conn, &key)).await;
            tokio::time::sleep(canary::DEADLINE.saturating_sub(canary::TOUCH_AFTER)).await;
            let _ = tx.send(Note::Due(i, round)).await;
        });
        None
    }

    /// A message from primary `node`: `None` when it is not a canary's; else `Some`, with the
    /// round's end when it completed the round.
    pub(super) fn seen(&mut self, node: usize, msg: &crate::access::pubsub::Message<'_>) -> Option<Option<Judged>> {
        if msg.pattern != self.pattern.as_slice() {
            return None;
        }
        let Some(p) = self.primaries.get_mut(node) else {
            return Some(None);
        };
        if msg.channel.get(self.prefix_len..) != Some(p.key.as_slice()) {
            return Some(None);
        }
        let Some((_, seen)) = p.open.as_mut() else {
            return Some(None);
        };
        if let Some(bit) = Seen::of(msg.payload) {
            *seen |= bit as u8;
        }
        if *seen & ALL != ALL {
            return Some(None);
        }
        p.open = None;
        p.proven = true;
        p.short_once = false;
        Some(Some(Judged(node, Round::Proven)))
    }

    /// A task's note: what it means for the round, if anything.
    pub(super) fn note(&mut self, note: Note) -> Option<Judged> {
        let (i, round) = match &note {
            Note::Wrote(i, r, _) | Note::Due(i, r) => (*i, *r),
        };
        let p = self.primaries.get_mut(i)?;
        let (open, seen) = p.open?;
        if open != round {
            return None;
        }
        match note {
            Note::Wrote(_, _, Ok(Written::Ok)) => None,
            Note::Wrote(_, _, Ok(Written::Refused(why))) => {
                p.open = None;
                p.skip = REFUSED_EVERY - 1;
                Some(Judged(
                    i,
                    Round::Refused(format!("the canary write was refused: {why}")),
                ))
            }
            Note::Wrote(_, _, Err(e)) => {
                tracing::debug!(error = %e, "canary write failed; the next round tries again");
                p.open = None;
                None
            }
            Note::Due(..) => {
                p.open = None;
                // Short once after a proven round: the next round decides.
                if p.proven && !std::mem::replace(&mut p.short_once, true) {
                    return None;
                }
                p.short_once = false;
                Some(Judged(i, Round::Short(seen)))
            }
        }
    }
}
