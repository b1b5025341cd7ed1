//! The latest lock events that named a key, for `/api/v1/locks/history`: a ring of the last
//! [`CAP`] events of every source together, filled by `Counters::flush` (what the counters
//! count, at the time they count it), read by key. Keys are kept here, never as labels.
//!
//! Memory: `CAP × size_of::<Slot>()` = 4,096 × 304 = 1,245,184 bytes at most (the key held
//! inline, cut to [`KEY_MAX`] bytes), reached once the ring is full; a source's name is
//! shared. An event that came with trace context holds it apart, 176 bytes at most (two
//! ids of at most 64 bytes and their `TraceContext`), and one that says who wrote it (its
//! file, pid, host, instance: `origin`) 472 bytes at most: 3,899,392 bytes in all, at most.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::origin::Origin;
use crate::locks::incidents::KEY_MAX;
use crate::metrics::TraceContext;
use crate::vocab::{Op, Outcome};

/// Keyed events kept, all sources together.
pub const CAP: usize = 4096;

/// `key` cut to [`KEY_MAX`] bytes, at a character boundary.
pub fn cut(key: &str) -> &str {
    if key.len() <= KEY_MAX {
        return key;
    }
    let mut end = KEY_MAX;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    &key[..end]
}

/// A keyed event not yet counted (in a `Tally`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Cut to [`KEY_MAX`] bytes.
    pub key: Box<str>,
    /// Index of the namespace in the config's order; `None` is `unknown`.
    pub namespace: Option<usize>,
    pub op: Op,
    pub outcome: Outcome,
    /// The trace the event was written in, when it came with one.
    pub trace: Option<TraceContext>,
    /// Who wrote it, as far as its record and source tell.
    pub origin: Origin,
}

impl Pending {
    pub fn new(key: &str, namespace: Option<usize>, op: Op, outcome: Outcome) -> Self {
        Pending {
            key: cut(key).into(),
            namespace,
            op,
            outcome,
            trace: None,
            origin: Origin::default(),
        }
    }

    /// The same event, from `origin`.
    pub fn from(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    /// The same event, written in `trace`.
    pub fn traced(mut self, trace: Option<TraceContext>) -> Self {
        self.trace = trace;
        self
    }
}

/// A keyed event as the ring gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Wall-clock ms since the Unix epoch when it was counted.
    pub at_ms: i64,
    pub namespace: Option<usize>,
    pub op: Op,
    pub outcome: Outcome,
    /// The `source` label value of the counting source: a `[[logs]]` name, `push`, `otlp`, …
    pub source: Arc<str>,
    /// The trace the event was written in, when it came with one.
    pub trace: Option<TraceContext>,
    pub origin: Origin,
}

/// One event in the ring: its key inline, so the ring's size is fixed by [`CAP`].
struct Slot {
    key: [u8; KEY_MAX],
    at_ms: i64,
    source: Arc<str>,
    /// `u32::MAX`: `unknown`.
    namespace: u32,
    key_len: u16,
    op: Op,
    outcome: Outcome,
    trace: Option<Box<TraceContext>>,
    origin: Option<Box<Origin>>,
}

impl Slot {
    fn key(&self) -> &[u8] {
        &self.key[..usize::from(self.key_len)]
    }
}

/// Shared by every source's `Counters` and read by the history API.
#[derive(Clone, Default)]
pub struct KeyedEvents(Arc<Mutex<VecDeque<Slot>>>);

impl KeyedEvents {
    fn ring(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record `events`, counted now by `source`; the oldest go past [`CAP`].
    pub fn record(&self, at_ms: i64, source: &Arc<str>, events: impl IntoIterator<Item = Pending>) {
        let mut events = events.into_iter().peekable();
        if events.peek().is_none() {
            return;
        }
        let mut ring = self.ring();
        for e in events {
            let key = cut(&e.key).as_bytes();
            let mut slot = if ring.len() >= CAP {
                match ring.pop_front() {
                    Some(s) => s,
                    None => continue,
                }
            } else {
                Slot {
                    key: [0; KEY_MAX],
                    at_ms: 0,
                    source: source.clone(),
                    namespace: 0,
                    key_len: 0,
                    op: e.op,
                    outcome: e.outcome,
                    trace: None,
                    origin: None,
                }
            };
            slot.key[..key.len()].copy_from_slice(key);
            slot.key_len = u16::try_from(key.len()).unwrap_or(0);
            slot.at_ms = at_ms;
            if !Arc::ptr_eq(&slot.source, source) {
                slot.source = source.clone();
            }
            slot.namespace = e.namespace.and_then(|n| u32::try_from(n).ok()).unwrap_or(u32::MAX);
            slot.op = e.op;
            slot.outcome = e.outcome;
            slot.trace = e.trace.map(Box::new);
            slot.origin = (!e.origin.is_empty()).then(|| Box::new(e.origin));
            if ring.capacity() == ring.len() && ring.len() < CAP {
                // Grow to CAP at most: doubling, never past it.
                let more = ring.len().max(16).min(CAP - ring.len());
                ring.reserve_exact(more);
            }
            ring.push_back(slot);
        }
    }

    /// The events kept that named `key` (cut as the ring cuts it), oldest first.
    pub fn of(&self, key: &str) -> Vec<Recorded> {
        let key = cut(key).as_bytes();
        self.ring()
            .iter()
            .filter(|s| s.key() == key)
            .map(|s| Recorded {
                at_ms: s.at_ms,
                namespace: (s.namespace != u32::MAX).then_some(s.namespace as usize),
                op: s.op,
                outcome: s.outcome,
                source: s.source.clone(),
                trace: s.trace.as_deref().cloned(),
                origin: s.origin.as_deref().cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// Events kept now.
    pub fn len(&self) -> usize {
        self.ring().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::origin::{FileRef, PATH_MAX, TEXT_MAX};

    fn push(r: &KeyedEvents, source: &Arc<str>, at: i64, key: &str) {
        r.record(at, source, [Pending::new(key, Some(0), Op::Release, Outcome::NotOwned)]);
    }

    #[test]
    fn the_stated_memory_is_the_real_one() {
        assert_eq!(std::mem::size_of::<Slot>(), 304);
        assert_eq!(
            CAP * std::mem::size_of::<Slot>(),
            1_245_184,
            "docs/http.md states 1,245,184 bytes"
        );
        // A trace held apart: the context and its two ids at their longest.
        let trace = std::mem::size_of::<TraceContext>() + 64 + 64;
        assert_eq!(trace, 176);
        // Who wrote it, held apart: the origin, its path (in an `Arc`: two counts before it),
        // host and instance at their longest.
        let origin = std::mem::size_of::<Origin>() + 16 + PATH_MAX + 2 * TEXT_MAX;
        assert_eq!(origin, 472);
        assert_eq!(
            CAP * (std::mem::size_of::<Slot>() + trace + origin),
            3_899_392,
            "docs/http.md"
        );
        let r = KeyedEvents::default();
        let source: Arc<str> = "push".into();
        for i in 0..3 * CAP {
            push(&r, &source, i as i64, &format!("wf:lock:{i}"));
        }
        let ring = r.ring();
        assert_eq!(ring.len(), CAP);
        assert_eq!(ring.capacity() * std::mem::size_of::<Slot>(), 1_245_184);
    }

    #[test]
    fn who_wrote_an_event_is_kept_with_it() {
        let r = KeyedEvents::default();
        let origin = Origin {
            file: Some(
                FileRef {
                    dev: 1,
                    ino: 2,
                    path: std::path::Path::new(&"/var/log/x".repeat(100)),
                }
                .owned(),
            ),
            ..Origin::of(Some("77"), Some("web-1"), Some("i-3"))
        };
        let e = Pending::new("wf:lock:a", Some(0), Op::Renew, Outcome::NotOwned).from(origin.clone());
        r.record(1, &"app".into(), [e]);
        let got = r.of("wf:lock:a");
        assert_eq!(got[0].origin, origin);
        assert_eq!(got[0].origin.file.as_ref().map(|f| f.path.len()), Some(PATH_MAX));
        push(&r, &"app".into(), 2, "wf:lock:a");
        assert!(
            r.of("wf:lock:a")[1].origin.is_empty(),
            "a slot reused keeps no old origin"
        );
    }

    #[test]
    fn the_oldest_go_and_keys_stay_apart() {
        let r = KeyedEvents::default();
        let (push_src, file): (Arc<str>, Arc<str>) = ("push".into(), "app".into());
        push(&r, &file, 1, "wf:lock:a");
        push(&r, &push_src, 2, "wf:lock:b");
        push(&r, &push_src, 3, "wf:lock:a");
        let a = r.of("wf:lock:a");
        assert_eq!(
            a.iter().map(|e| (e.at_ms, &*e.source)).collect::<Vec<_>>(),
            [(1, "app"), (3, "push")]
        );
        assert_eq!(r.of("wf:lock:b").len(), 1);
        assert!(r.of("wf:lock:").is_empty());
        for i in 0..CAP {
            push(&r, &file, 10 + i as i64, "wf:lock:c");
        }
        assert!(r.of("wf:lock:a").is_empty(), "pushed out by newer events");
        assert_eq!(r.of("wf:lock:c").len(), CAP);
        assert_eq!(r.of("wf:lock:c")[0].at_ms, 10, "oldest first");
    }

    #[test]
    fn long_keys_are_cut_at_a_character_boundary() {
        let long = format!("wf:lock:{}", "é".repeat(200));
        let c = cut(&long);
        assert!(c.len() <= KEY_MAX && c.len() >= KEY_MAX - 1, "{}", c.len());
        assert!(long.starts_with(c));
        let r = KeyedEvents::default();
        push(&r, &"push".into(), 1, &long);
        assert_eq!(r.of(&long).len(), 1, "found by the same cut");
        assert_eq!(r.of(c).len(), 1);
    }
}
