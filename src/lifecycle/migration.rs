//! Slot migration is not a lock event. Resharding moves a key with `MIGRATE`: the target
//! node restores it (publishing `restore`), then the source deletes it and publishes `del` —
//! the same event a release publishes — and publishes nothing more of it until the key's
//! slot comes back. On a cluster, a `del` is therefore checked before it counts: it is a
//! move when another primary restored the key and its own primary wrote nothing of the key
//! after it before the key came back (a `restore` by it, or an event of a third primary).
//! The `del`'s primary is asked where the key lives now (`PTTL` on its own connection,
//! redirections not followed): an answer means its slot is not moving away; a redirection
//! (`ASK`, `MOVED`) names the primary the slot goes to, whose `restore` came before the
//! `del` — a `PING` on its subscription, then one on the `del`'s primary's, brings both
//! streams to past it. No read of the value decides, so a lock released and taken again
//! before the check ends is a release whatever its owner. Events of the key that arrive
//! meanwhile wait behind the `del`, in order (the lock table takes them at once, the `del`
//! by setting the lock aside); a later `del` of the same primary that was in before the
//! check was asked is decided by it too, a later one waits for its own. Cost: one `PTTL`
//! per `del` (per batch of a hot key's), and while slots move two `PING`s.

use std::collections::{HashMap, VecDeque};

use futures_util::future::join_all;

use super::Watcher;
use super::intake::Links;
use crate::dense::Key;

/// Keys waiting for a check at most; beyond, a `del` counts as it comes.
const MAX_WAITING: usize = 10_000;
/// A `restore` not taken by the `del` of its move within this long is forgotten (a
/// `MIGRATE … COPY`, or a `RESTORE` of another kind).
const RESTORE_KEPT_MS: i64 = 10_000;

/// A keyspace notification on a lock key or fencing counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// Which primary published it.
    pub node: usize,
    pub ns: usize,
    pub fence: bool,
    /// Key and event name, inline when short (most are: no allocation per event).
    pub key: Key,
    pub event: Key,
}

/// What to do with an event now.
pub(super) enum Admit {
    Now(Event),
    /// A `del` to check before it counts.
    Verify(Check),
    /// Queued behind a check of its key.
    Queued,
}

/// A `del` to check: its key, and the primary that published it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Check {
    node: usize,
    ns: usize,
    fence: bool,
    key: Vec<u8>,
}

/// A check done: a `restore` of the key published before its `del` is in the streams now.
pub(super) struct Verified {
    /// The namespaces' numbering the check was asked in (`Watcher::epoch`).
    pub epoch: u32,
    pub ns: usize,
    pub fence: bool,
    pub key: Vec<u8>,
    /// The number of the last event admitted before the check was asked: a later `del` of
    /// the key from the same primary, admitted by then, is decided by the same check.
    pub covers: u64,
}

/// The `del`s at the head of a key's wait, decided.
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// The last `del` decided was a move (dropped).
    pub moved: bool,
    /// The events to apply now, in order.
    pub apply: Vec<(Event, i64)>,
    /// The next `del` of the key, to check now; the events after it wait behind it.
    pub next: Option<Check>,
}

/// Most `restore`s of one key kept while no `del` takes them.
const RESTORES_KEPT: usize = 8;

/// Events held back, per key, oldest first, with the time each arrived and its number; and
/// the keys restored lately, by which primary.
#[derive(Default)]
pub(super) struct Deferrals {
    waiting: HashMap<Vec<u8>, VecDeque<(Event, i64, u64)>>,
    restored: HashMap<Vec<u8>, Vec<(usize, i64)>>,
    /// Events admitted so far (each one's number).
    seq: u64,
}

impl Deferrals {
    /// Whether `ev` will wait rather than apply now: its key waits already, or it is a
    /// `del` to check (`cluster`).
    pub(super) fn waits(&self, ev: &Event, cluster: bool) -> bool {
        self.waiting.contains_key(ev.key.as_bytes())
            || (cluster && ev.event == b"del" && self.waiting.len() < MAX_WAITING)
    }

    /// The number of the last event admitted: what a check asked now covers.
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// Decide about `ev` arriving at `now_ms` (`cluster`: `del`s are checked).
    pub(super) fn admit(&mut self, ev: Event, now_ms: i64, cluster: bool) -> Admit {
        self.seq += 1;
        if let Some(q) = self.waiting.get_mut(ev.key.as_bytes()) {
            q.push_back((ev, now_ms, self.seq));
            return Admit::Queued;
        }
        if !cluster || ev.event != b"del" || self.waiting.len() >= MAX_WAITING {
            return Admit::Now(ev);
        }
        let check = check_of(&ev);
        self.waiting
            .insert(ev.key.to_vec(), VecDeque::from([(ev, now_ms, self.seq)]));
        Admit::Verify(check)
    }

    /// Primary `node` published `restore` of `key` at `now_ms`: the target of a `MIGRATE`
    /// (or a key written back).
    pub(super) fn restored(&mut self, key: &[u8], node: usize, now_ms: i64) {
        let kept = self.restored.entry(key.to_vec()).or_default();
        if kept.len() >= RESTORES_KEPT {
            kept.remove(0);
        }
        kept.push((node, now_ms));
    }

    /// The check of `key`'s first waiting `del` done (`covers`: see `Verified`): that `del`,
    /// and each later one of the same primary the check covers, dropped when a move, the
    /// events between applied, up to the next `del` to check.
    pub(super) fn resolve(&mut self, key: &[u8], covers: u64) -> Decided {
        let mut decided = Decided::default();
        let Some(mut q) = self.waiting.remove(key) else {
            return decided;
        };
        let mut head: Option<usize> = None;
        while let Some((ev, at, seq)) = q.pop_front() {
            if ev.event == b"del" {
                let covered = match head {
                    None => true,
                    Some(node) => ev.node == node && seq <= covers,
                };
                if !covered {
                    decided.next = Some(check_of(&ev));
                    q.push_front((ev, at, seq));
                    self.waiting.insert(key.to_vec(), q);
                    break;
                }
                head.get_or_insert(ev.node);
                decided.moved = self.moved(key, ev.node, &q);
                if !decided.moved {
                    decided.apply.push((ev, at));
                }
                continue;
            }
            decided.apply.push((ev, at));
        }
        decided
    }

    /// Whether a `del` of `key` by primary `node`, followed in its wait by `rest`, was a
    /// move: another primary restored the key (that `restore` is taken), and `node` wrote
    /// nothing more of the key before it came back to it (a `restore` by `node`, or an
    /// event of another primary than the restore's, in `rest`).
    fn moved(&mut self, key: &[u8], node: usize, rest: &VecDeque<(Event, i64, u64)>) -> bool {
        let Some(kept) = self.restored.get_mut(key) else {
            return false;
        };
        let Some(i) = kept.iter().position(|&(by, _)| by != node) else {
            return false;
        };
        for (e, _, _) in rest {
            match (e.node == node, e.event == b"restore") {
                (false, true) => continue,
                (true, false) => return false,
                _ => break,
            }
        }
        kept.remove(i);
        if kept.is_empty() {
            self.restored.remove(key);
        }
        true
    }

    /// Forget the `restore`s older than `RESTORE_KEPT_MS` at `now_ms`.
    pub(super) fn sweep(&mut self, now_ms: i64) {
        self.restored.retain(|_, kept| {
            kept.retain(|&(_, at)| now_ms - at < RESTORE_KEPT_MS);
            !kept.is_empty()
        });
    }

    /// The namespaces were renumbered (a reload): `carried[old]` is each one's number now.
    /// Events of namespaces that changed are dropped, with their keys' waits.
    pub(super) fn renamespace(&mut self, carried: &[Option<usize>]) {
        self.waiting.retain(|_, q| {
            q.retain_mut(|(e, _, _)| match carried.get(e.ns).copied().flatten() {
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

fn check_of(ev: &Event) -> Check {
    Check {
        node: ev.node,
        ns: ev.ns,
        fence: ev.fence,
        key: ev.key.to_vec(),
    }
}

impl Watcher {
    /// Check a `del`: ask its primary where the key lives (`PTTL`); redirected, `PING` the
    /// subscription of the primary named (of every other primary when the name is not one
    /// of the session's, or the question had no answer), then the `del`'s primary's; then
    /// say so to the subscription, which reads what its streams hold before it decides.
    pub(super) fn spawn_verify(&self, links: &Links, check: Check, covers: u64) {
        let (direct, sinks, tx) = (links.direct.clone(), links.sinks.clone(), links.verified.clone());
        let (limit, epoch) = (self.target.sample_budget, self.epoch);
        tokio::spawn(async move {
            let others = || (0..sinks.len()).filter(|&i| i != check.node).collect::<Vec<_>>();
            let asked = match direct.get(check.node) {
                Some((_, conn)) => {
                    let (mut conn, mut pttl) = (conn.clone(), redis::cmd("PTTL"));
                    pttl.arg(&check.key);
                    tokio::time::timeout(limit, pttl.query_async::<redis::Value>(&mut conn))
                        .await
                        .ok()
                }
                None => None,
            };
            let ping = match asked {
                Some(Ok(_)) => Vec::new(),
                Some(Err(e)) => match e.redirect_node() {
                    Some((addr, _)) => direct
                        .iter()
                        .position(|(a, _)| a == addr)
                        .map_or_else(others, |i| vec![i]),
                    None => others(),
                },
                None => others(),
            };
            // A failed PING ends the session (its own PING fails too): the check goes with it.
            let ping_one = |i: usize| {
                let sink = sinks.get(i).cloned();
                async move {
                    if let Some(sink) = sink {
                        let _ = tokio::time::timeout(limit, sink.ping()).await;
                    }
                }
            };
            if !ping.is_empty() {
                join_all(ping.into_iter().map(ping_one)).await;
                // Everything the `del`'s primary published before the restore is in too.
                ping_one(check.node).await;
            }
            let _ = tx
                .send(Verified {
                    epoch,
                    ns: check.ns,
                    fence: check.fence,
                    key: check.key,
                    covers,
                })
                .await;
        });
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
            key: Key::new(b"k"),
            event: Key::new(event.as_bytes()),
        }
    }

    fn names(d: &Decided) -> Vec<(usize, String)> {
        d.apply
            .iter()
            .map(|(e, _)| (e.node, String::from_utf8_lossy(&e.event).into_owned()))
            .collect()
    }

    #[test]
    fn a_del_waits_with_what_follows_and_a_move_drops_it() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "set"), 1, true), Admit::Now(_)));
        d.restored(b"k", 1, 2);
        assert!(matches!(d.admit(ev(0, "del"), 2, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(1, "expire"), 3, true), Admit::Queued));
        let out = d.resolve(b"k", 0);
        assert!(out.moved && out.next.is_none());
        assert_eq!(names(&out), [(1, "expire".to_string())]);
        assert!(matches!(d.admit(ev(0, "del"), 4, true), Admit::Verify(_)));
        let out = d.resolve(b"k", 0);
        assert!(!out.moved, "a release stays a release: the restore was taken");
        assert_eq!(out.apply.len(), 1);
    }

    #[test]
    fn moved_then_released_on_the_new_node_counts_one_release_each_del_checked() {
        let mut d = Deferrals::default();
        d.restored(b"k", 1, 0);
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(1, "del"), 2, true), Admit::Queued));
        assert!(matches!(d.admit(ev(1, "set"), 3, true), Admit::Queued));
        let out = d.resolve(b"k", 0);
        assert!(out.moved && out.apply.is_empty());
        assert_eq!(out.next.as_ref().map(|c| c.node), Some(1), "the next del is checked");
        let out = d.resolve(b"k", 0);
        assert!(!out.moved);
        assert_eq!(names(&out), [(1, "del".to_string()), (1, "set".to_string())]);
    }

    #[test]
    fn released_then_taken_and_released_elsewhere_counts_every_event() {
        // A release on node 0, then a new hold on node 1 (the key's slot moved meanwhile,
        // the key not with it) taken and released while the check ran: no restore, no move.
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(1, "set"), 2, true), Admit::Queued));
        assert!(matches!(d.admit(ev(1, "del"), 3, true), Admit::Queued));
        let out = d.resolve(b"k", 0);
        assert_eq!(names(&out), [(0, "del".to_string()), (1, "set".to_string())]);
        assert!(!d.resolve(b"k", 0).moved);
    }

    #[test]
    fn a_release_before_the_move_leaves_the_restore_to_the_move_s_del() {
        // Node 0 releases the key, takes it again, and the key moves to node 1 (its restore
        // seen before the first del is decided).
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        assert!(matches!(d.admit(ev(0, "set"), 2, true), Admit::Queued));
        assert!(matches!(d.admit(ev(0, "del"), 3, true), Admit::Queued));
        d.restored(b"k", 1, 3);
        let out = d.resolve(b"k", 0);
        assert!(!out.moved, "node 0 wrote the key after this del: a release");
        assert_eq!(names(&out), [(0, "del".to_string()), (0, "set".to_string())]);
        assert!(out.next.is_some());
        assert!(d.resolve(b"k", 0).moved, "the last del of node 0 is the move");
    }

    #[test]
    fn a_restore_by_the_del_s_own_primary_is_no_move_and_old_ones_are_forgotten() {
        let mut d = Deferrals::default();
        d.restored(b"k", 0, 0);
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        assert!(!d.resolve(b"k", 0).moved);
        d.sweep(RESTORE_KEPT_MS - 1);
        assert!(matches!(d.admit(ev(1, "del"), 2, true), Admit::Verify(_)));
        assert!(d.resolve(b"k", 0).moved, "the source's del still takes it");
        d.restored(b"k", 1, 10);
        d.sweep(10 + RESTORE_KEPT_MS);
        assert!(matches!(d.admit(ev(0, "del"), 3, true), Admit::Verify(_)));
        assert!(!d.resolve(b"k", 0).moved);
    }

    #[test]
    fn a_reload_renumbers_waiting_events_and_drops_a_changed_namespace_s() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        let mut other = ev(0, "del");
        other.key = Key::new(b"j");
        other.ns = 1;
        assert!(matches!(d.admit(other, 2, true), Admit::Verify(_)));
        d.renamespace(&[None, Some(0)]);
        assert!(
            d.resolve(b"k", 0).apply.is_empty(),
            "namespace 0 changed: its wait is gone"
        );
        let out = d.resolve(b"j", 0);
        assert_eq!(out.apply.len(), 1);
        assert_eq!(out.apply[0].0.ns, 0, "renumbered");
    }

    #[test]
    fn outside_a_cluster_nothing_waits() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, false), Admit::Now(_)));
    }

    #[test]
    fn a_move_s_del_with_the_key_moved_back_behind_it_is_a_move() {
        // 0 → 1 with the key, its holder releasing and taking it on 1, the slot back on 0
        // and the key taken there: all of it waiting behind the move's del.
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        d.restored(b"k", 1, 1);
        for e in [
            ev(1, "restore"),
            ev(1, "del"),
            ev(1, "set"),
            ev(1, "del"),
            ev(0, "set"),
            ev(0, "del"),
        ] {
            assert!(matches!(d.admit(e, 2, true), Admit::Queued));
        }
        let out = d.resolve(b"k", 0);
        assert!(out.moved, "node 0 wrote the key again only after node 1 had it");
        assert_eq!(names(&out), [(1, "restore".to_string())]);
        let out = d.resolve(b"k", 0);
        assert!(!out.moved, "no restore left: a release");
        assert_eq!(names(&out), [(1, "del".to_string()), (1, "set".to_string())]);
    }

    #[test]
    fn one_check_decides_the_later_dels_of_its_primary_admitted_before_it() {
        let mut d = Deferrals::default();
        assert!(matches!(d.admit(ev(0, "del"), 1, true), Admit::Verify(_)));
        for e in [ev(0, "set"), ev(0, "del"), ev(0, "set"), ev(0, "del")] {
            assert!(matches!(d.admit(e, 2, true), Admit::Queued));
        }
        let covers = d.seq();
        assert!(matches!(d.admit(ev(0, "set"), 3, true), Admit::Queued));
        assert!(matches!(d.admit(ev(0, "del"), 3, true), Admit::Queued));
        let out = d.resolve(b"k", covers);
        assert_eq!(
            out.apply.len(),
            6,
            "three releases and three acquisitions: {:?}",
            names(&out)
        );
        assert!(out.next.is_some(), "the del admitted after the check waits for its own");
        let out = d.resolve(b"k", d.seq());
        assert_eq!(names(&out), [(0, "del".to_string())]);
        assert!(out.next.is_none());
        assert!(matches!(d.admit(ev(0, "set"), 4, true), Admit::Now(_)), "nothing waits");
    }
}
