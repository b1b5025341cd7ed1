//! Views of the lock tables for the HTTP side: the held locks of a target and namespace
//! with their verdicts (overdue, age, fence), closest to expiry first. Callers ask; they
//! never walk the tables or judge a lock themselves.
//!
//! A listing is a bounded top-N selection: the walk keeps the `limit` best so far in a
//! heap and builds a view only for a lock that gets in, so a 10-row answer over a million
//! locks costs O(n log limit) time and O(limit) memory, never a copy of every lock.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::Serialize;

use super::{TargetLocks, ttl};

/// One held lock as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LockView {
    pub(crate) target: String,
    pub(crate) namespace: String,
    pub(crate) key: String,
    /// The owner token, or `<redacted>` unless owners are shown.
    pub(crate) owner: String,
    /// Seeded hash of the owner: comparable between locks, not reversible.
    pub(crate) owner_hash: String,
    pub(crate) pttl_ms: i64,
    pub(crate) age_s: f64,
    pub(crate) fence: Option<i64>,
    pub(crate) overdue: bool,
}

/// Which locks to list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filter<'a> {
    pub(crate) target: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) show_owners: bool,
    pub(crate) limit: usize,
}

/// A listing: the first `limit` locks and how many matched in all.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LockList {
    /// Locks matching the query before `limit` was applied.
    pub(crate) total: usize,
    pub(crate) truncated: bool,
    pub(crate) locks: Vec<LockView>,
}

/// Held locks of `targets` matching `f`, those closest to expiry first (stalled holders
/// lead the list), locks without expiry last; ties by key. Each namespace's table is locked
/// only while it is walked.
pub(crate) fn held_locks(targets: &[std::sync::Arc<TargetLocks>], f: Filter<'_>) -> LockList {
    let mut best = Best::new(f.limit);
    for target in targets.iter().filter(|t| f.target.is_none_or(|name| t.name == name)) {
        let now_ms = target.now_ms();
        for ns_locks in target
            .namespaces
            .iter()
            .filter(|n| f.namespace.is_none_or(|name| n.config.name == name))
        {
            let ns = &ns_locks.config;
            let fence_of = ns.fence_map();
            let table = ns_locks.table();
            for (key, e) in table.locks().filter(|(_, e)| e.known()) {
                let pttl_ms = e.pttl_at(now_ms);
                let rank = Rank {
                    expiry: if pttl_ms < 0 { i64::MAX } else { pttl_ms },
                    key,
                };
                best.offer(rank, || {
                    let fence = fence_of.key_for(key).and_then(|k| table.fence(&k));
                    view_of(target, ns, &table, (key, e, fence), f.show_owners, now_ms)
                });
            }
        }
    }
    best.into_list()
}

/// The view of one lock as the table holds it.
fn view_of(
    target: &TargetLocks,
    ns: &crate::config::NamespaceConfig,
    table: &super::table::NamespaceTable,
    (key, e, fence): (&[u8], &super::table::LockEntry, Option<i64>),
    show_owners: bool,
    now_ms: i64,
) -> LockView {
    let pttl_ms = e.pttl_at(now_ms);
    LockView {
        target: target.name.clone(),
        namespace: ns.name.clone(),
        key: String::from_utf8_lossy(key).into_owned(),
        owner: match (table.token(key), show_owners) {
            (Some(t), true) => String::from_utf8_lossy(t).into_owned(),
            _ => "<redacted>".to_string(),
        },
        owner_hash: format!("{:016x}", e.owner),
        pttl_ms,
        age_s: now_ms.saturating_sub(e.since_ms()).max(0) as f64 / 1000.0,
        fence,
        overdue: ttl::renewal_overdue(pttl_ms, ns.overdue_below()),
    }
}

/// `key` of namespace `ns` (by name) in each of `targets` where it is held now.
pub(crate) fn one_lock(
    targets: &[std::sync::Arc<TargetLocks>],
    ns: &str,
    key: &[u8],
    show_owners: bool,
) -> Vec<LockView> {
    let mut out = Vec::new();
    for target in targets.iter() {
        let now_ms = target.now_ms();
        for ns_locks in target.namespaces.iter().filter(|n| n.config.name == ns) {
            let table = ns_locks.table();
            if let Some(e) = table.lock(key).filter(|e| e.known()) {
                let fence = ns_locks.config.fence_map().key_for(key).and_then(|k| table.fence(&k));
                out.push(view_of(
                    target,
                    &ns_locks.config,
                    &table,
                    (key, e, fence),
                    show_owners,
                    now_ms,
                ));
            }
        }
    }
    out
}

/// Where a lock stands in a listing: less time left first (no expiry as `i64::MAX`), then
/// by key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Rank<'k> {
    expiry: i64,
    key: &'k [u8],
}

/// A chosen lock: its rank (the key owned, as it outlives the table's lock) and its view.
struct Chosen {
    expiry: i64,
    key: Box<[u8]>,
    view: LockView,
}

impl Chosen {
    fn rank(&self) -> Rank<'_> {
        Rank {
            expiry: self.expiry,
            key: &self.key,
        }
    }
}

impl PartialEq for Chosen {
    fn eq(&self, other: &Self) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for Chosen {}

impl PartialOrd for Chosen {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Chosen {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// The `limit` best locks offered so far (a max-heap: the worst of them on top, replaced
/// by a better one), and how many were offered.
struct Best {
    limit: usize,
    heap: BinaryHeap<Chosen>,
    offered: usize,
}

impl Best {
    fn new(limit: usize) -> Self {
        Best {
            limit,
            heap: BinaryHeap::with_capacity(limit.saturating_add(1)),
            offered: 0,
        }
    }

    /// Count a lock; keep it (building its view) only when it ranks among the best.
    fn offer(&mut self, rank: Rank<'_>, view: impl FnOnce() -> LockView) {
        self.offered += 1;
        let better = match self.heap.peek() {
            _ if self.heap.len() < self.limit => true,
            Some(worst) => rank < worst.rank(),
            None => false,
        };
        if better {
            self.heap.push(Chosen {
                expiry: rank.expiry,
                key: rank.key.into(),
                view: view(),
            });
            if self.heap.len() > self.limit {
                self.heap.pop();
            }
        }
    }

    fn into_list(self) -> LockList {
        LockList {
            total: self.offered,
            truncated: self.offered > self.limit,
            locks: self.heap.into_sorted_vec().into_iter().map(|c| c.view).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(key: &str) -> LockView {
        LockView {
            target: "t".into(),
            namespace: "n".into(),
            key: key.into(),
            owner: String::new(),
            owner_hash: String::new(),
            pttl_ms: 0,
            age_s: 0.0,
            fence: None,
            overdue: false,
        }
    }

    /// The selection equals a full sort cut at `limit`, for every limit, ties included.
    #[test]
    fn the_best_are_those_a_full_sort_would_list_first() {
        // A scrambled order, with repeated expiries and no-expiry locks.
        let locks: Vec<(i64, String)> = (0..200u64)
            .map(|i| {
                let spread = (i * 7919) % 200;
                let expiry = if spread % 17 == 0 {
                    i64::MAX
                } else {
                    (spread / 3) as i64
                };
                (expiry, format!("k{spread:03}"))
            })
            .collect();
        let mut sorted = locks.clone();
        sorted.sort();
        for limit in [0, 1, 2, 10, 66, 199, 200, 500] {
            let mut best = Best::new(limit);
            for (expiry, key) in &locks {
                let rank = Rank {
                    expiry: *expiry,
                    key: key.as_bytes(),
                };
                best.offer(rank, || view(key));
            }
            assert!(best.heap.len() <= limit);
            let list = best.into_list();
            assert_eq!((list.total, list.truncated), (200, limit < 200));
            let keys: Vec<&str> = list.locks.iter().map(|l| l.key.as_str()).collect();
            let want: Vec<&str> = sorted.iter().take(limit).map(|(_, k)| k.as_str()).collect();
            assert_eq!(keys, want, "limit {limit}");
        }
    }
}
