//! Whose events count for each slot of a cluster: the primary serving it, as far as the
//! watcher has followed. A slot the layout gives another primary counts from it once a
//! `PING` on its subscription (and on the old one's) answered, and no event of it for the
//! slot still waits to be placed (`handoff::Imports::settle`).

use std::collections::HashSet;

use crate::access::cluster::{SLOTS, slot};
use crate::topology::Layout;

/// A slot no primary serves.
const NONE: u16 = u16::MAX;

/// Whose events count for each slot of a cluster.
#[derive(Debug, Clone)]
pub(super) struct Owners {
    /// By slot: the primary (its index in the session) whose events count.
    map: Vec<u16>,
    /// Primaries the layout gives slots to, waiting for the `PING` on their subscription.
    waiting: HashSet<(usize, u16)>,
}

impl Owners {
    /// The owners of `layout`'s slots; `None` for a target that is not a cluster.
    pub(super) fn of(layout: &Layout) -> Option<Owners> {
        if !layout.is_cluster() {
            return None;
        }
        let map = (0..SLOTS as u16)
            .map(|s| layout.serving(s).and_then(|i| u16::try_from(i).ok()).unwrap_or(NONE))
            .collect();
        Some(Owners {
            map,
            waiting: HashSet::new(),
        })
    }

    /// The primary whose events of `slot` count.
    pub(super) fn of_slot(&self, slot: u16) -> Option<usize> {
        self.map
            .get(usize::from(slot))
            .filter(|&&o| o != NONE)
            .map(|&o| usize::from(o))
    }

    /// Whether an event of `key` from primary `node` is foreign: another primary serves
    /// its slot (a slot no one serves has no owner to prefer).
    pub(super) fn foreign(&self, node: usize, key: &[u8]) -> bool {
        self.of_slot(slot(key)).is_some_and(|o| o != node)
    }

    /// Slots `layout` gives to another primary than the one counted now, by primary; each
    /// waits for a `PING` on that primary's subscription (unless one is awaited already).
    pub(super) fn moved(&mut self, layout: &Layout) -> Vec<(usize, Vec<u16>)> {
        let mut out: Vec<(usize, Vec<u16>)> = Vec::new();
        for (s, &now) in self.map.iter().enumerate() {
            let s = s as u16;
            let Some(to) = layout.serving(s) else { continue };
            if usize::from(now) == to || !self.waiting.insert((to, s)) {
                continue;
            }
            match out.iter_mut().find(|(n, _)| *n == to) {
                Some((_, slots)) => slots.push(s),
                None => out.push((to, vec![s])),
            }
        }
        out
    }

    /// The primaries whose events count for `slots` now.
    pub(super) fn holders(&self, slots: &[u16]) -> Vec<usize> {
        let mut out: Vec<usize> = slots.iter().filter_map(|&s| self.of_slot(s)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// From now on `node`'s events of `slots` count (`settled`), or, not settled, the
    /// layout's word on them is taken again at its next change.
    pub(super) fn settle(&mut self, node: usize, slots: impl IntoIterator<Item = u16>, settled: bool) {
        for s in slots {
            self.waiting.remove(&(node, s));
            if settled && let Some(o) = self.map.get_mut(usize::from(s)) {
                *o = u16::try_from(node).unwrap_or(NONE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_counts_from_its_new_primary_once_settled() {
        let key = b"lw:lock:1";
        let s = slot(key);
        let mut o = Owners {
            map: vec![0; SLOTS],
            waiting: HashSet::new(),
        };
        assert!(!o.foreign(0, key) && o.foreign(1, key));
        o.settle(1, [s], false);
        assert!(o.foreign(1, key), "not settled: nothing changes");
        o.settle(1, [s], true);
        assert!(o.foreign(0, key) && !o.foreign(1, key));
        assert_eq!(o.of_slot(s), Some(1));
        assert_eq!(o.holders(&[s, s, 0, 1]), [0, 1], "each primary counted for them once");
    }
}
