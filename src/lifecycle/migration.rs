//! Slot migration is not a lock event. Resharding moves a key with `MIGRATE`: the target
//! node restores it, then the source deletes it and publishes `del` — the same event a
//! release publishes. On a cluster, a `del` is therefore checked before it counts: the key
//! is read where it lives now; still there with the same owner (or, for a fencing counter,
//! still there), it moved, and the `del` is dropped. Events of the key that arrive while
//! the check runs wait behind it, so their order is kept (the lock table takes them at
//! once, the `del` by setting the lock aside). Cost: one routed read per `del`.

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc;

use super::Watcher;
use crate::access::read::{Counter, KeyRead};
use crate::access::reader::Reader;

/// Keys waiting for a check at most; beyond, a `del` counts as it comes.
const MAX_WAITING: usize = 10_000;

/// A keyspace notification on a lock key or fencing counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// Which primary published it.
    pub node: usize,
    pub ns: usize,
    pub fence: bool,
    pub key: Vec<u8>,
    pub event: Vec<u8>,
}

/// What to do with an event now.
pub(super) enum Admit {
    Now(Event),
    /// A `del` to check before it counts: read this key.
    Verify(Check),
    /// Queued behind a check of its key.
    Queued,
}

/// A key to read for a `del` check.
pub(super) struct Check {
    ns: usize,
    fence: bool,
    key: Vec<u8>,
}

/// A check's answer.
pub(super) struct Verified {
    /// The namespaces' numbering the check was asked in (`Watcher::epoch`).
    pub epoch: u32,
    pub ns: usize,
    pub fence: bool,
    pub key: Vec<u8>,
    /// What the key holds now, where it lives now (`None`: the read failed).
    lock: Option<KeyRead>,
    counter: Option<Counter>,
}

/// Events held back, per key, oldest first, with the time each arrived.
#[derive(Default)]
pub(super) struct Deferrals {
    waiting: HashMap<Vec<u8>, VecDeque<(Event, i64)>>,
}

impl Deferrals {
    /// Whether `ev` will wait rather than apply now: its key waits already, or it is a
    /// `del` to check (`cluster`).
    pub(super) fn waits(&self, ev: &Event, cluster: bool) -> bool {
        self.waiting.contains_key(&ev.key) || (cluster && ev.event == b"del" && self.waiting.len() < MAX_WAITING)
    }

    /// Decide about `ev` arriving at `now_ms` (`cluster`: `del`s are checked).
    pub(super) fn admit(&mut self, ev: Event, now_ms: i64, cluster: bool) -> Admit {
        if let Some(q) = self.waiting.get_mut(&ev.key) {
            q.push_back((ev, now_ms));
            return Admit::Queued;
        }
        if !cluster || ev.event != b"del" || self.waiting.len() >= MAX_WAITING {
            return Admit::Now(ev);
        }
        let check = Check {
            ns: ev.ns,
            fence: ev.fence,
            key: ev.key.clone(),
        };
        self.waiting.insert(ev.key.clone(), VecDeque::from([(ev, now_ms)]));
        Admit::Verify(check)
    }

    /// The check of `key` answered: the events to apply now, in order. A `del` that was a
    /// move is dropped — also when the key is gone but a later `del` from another node
    /// waits behind it (moved, then released on its new node).
    pub(super) fn resolve(&mut self, key: &[u8], moved: bool) -> Vec<(Event, i64)> {
        let Some(mut q) = self.waiting.remove(key) else {
            return Vec::new();
        };
        let Some(first) = q.pop_front() else {
            return Vec::new();
        };
        let released_elsewhere = q.iter().any(|(e, _)| e.event == b"del" && e.node != first.0.node);
        let mut out: Vec<(Event, i64)> = Vec::with_capacity(q.len() + 1);
        if !moved && !released_elsewhere {
            out.push(first);
        }
        out.extend(q);
        out
    }

    /// The namespaces were renumbered (a reload): `carried[old]` is each one's number now.
    /// Events of namespaces that changed are dropped, with their keys' waits.
    pub(super) fn renamespace(&mut self, carried: &[Option<usize>]) {
        self.waiting.retain(|_, q| {
            q.retain_mut(|(e, _)| match carried.get(e.ns).copied().flatten() {
                Some(n) => {
                    e.ns = n;
                    true
                }
                None => false,
            });
            !q.is_empty()
        });
    }
}

impl Watcher {
    /// Read the key of `check` through `reader` and send the answer on `tx`.
    pub(super) fn spawn_verify(&self, reader: &Reader, check: Check, tx: &mpsc::Sender<Verified>) {
        let reader = reader.clone();
        let tx = tx.clone();
        let kind = self.namespaces.get(check.ns).map(|n| n.value.clone());
        let timeout = self.target.sample_budget;
        let epoch = self.epoch;
        tokio::spawn(async move {
            let keys = [check.key.clone()];
            let (mut lock, mut counter) = (None, None);
            if check.fence {
                if let Ok(Ok(mut v)) = tokio::time::timeout(timeout, reader.read_counters(&keys)).await {
                    counter = v.pop();
                }
            } else if let Some(kind) = kind
                && let Ok(Ok(mut v)) = tokio::time::timeout(timeout, reader.read_locks(&kind, &keys)).await
            {
                lock = v.pop();
            }
            let _ = tx
                .send(Verified {
                    epoch,
                    ns: check.ns,
                    fence: check.fence,
                    key: check.key,
                    lock,
                    counter,
                })
                .await;
        });
    }

    /// Whether the checked key moved rather than went: it is still there, with the owner
    /// the lock table knows (any owner when the table does not know one).
    pub(super) fn migrated(&self, v: &Verified) -> bool {
        if v.fence {
            return matches!(v.counter, Some(Counter::Value(_)));
        }
        let Some(KeyRead::Lock { owner, .. }) = &v.lock else {
            return false;
        };
        let Some(ns_locks) = self.locks.namespaces.get(v.ns) else {
            return false;
        };
        let now = ns_locks.owner_hash(owner);
        let table = ns_locks.table();
        table
            .lock(&v.key)
            .or_else(|| table.aside(&v.key))
            .is_none_or(|e| !e.known() || e.owner == now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(node: usize, event: &str) -> Event {
        Event {
            node,
            ns: 0,
            fence: false,
            key: b"k".to_vec(),
            event: event.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_del_waits_with_what_follows_and_a_move_drops_it() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "set"), 1, true), Admit::Now(_)));
        assert!(matches!(d.admit(ev(0, "del"), 2, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(1, "expire"), 3, true), Admit::Queued));
        let out = d.resolve(b"k", true);
        assert_eq!(
            out.iter().map(|(e, t)| (e.event.clone(), *t)).collect::<Vec<_>>(),
            vec![(b"expire".to_vec(), 3)]
        );
        assert!(matches!(d.admit(ev(0, "del"), 4, true), Admit::Verify(_)));
        assert_eq!(d.resolve(b"k", false).len(), 1, "a release stays a release");
    }

    #[test]
    fn moved_then_released_on_the_new_node_counts_one_release() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(1, "del"), 2, true), Admit::Queued));
        let out = d.resolve(b"k", false);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.node, 1);
    }

    #[test]
    fn a_reload_renumbers_waiting_events_and_drops_a_changed_namespace_s() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        let mut other = ev(0, "del");
        other.key = b"j".to_vec();
        other.ns = 1;
        assert!(matches!(d.admit(other, 2, true), Admit::Verify(_)));
        d.renamespace(&[None, Some(0)]);
        assert!(
            d.resolve(b"k", false).is_empty(),
            "namespace 0 changed: its wait is gone"
        );
        let out = d.resolve(b"j", false);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.ns, 0, "renumbered");
    }

    #[test]
    fn outside_a_cluster_nothing_waits() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, false), Admit::Now(_)));
    }
}
