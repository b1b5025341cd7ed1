//! Views of the lock tables for the HTTP side: the held locks of a target and namespace
//! with their verdicts (overdue, age, fence), closest to expiry first. Callers ask; they
//! never walk the tables or judge a lock themselves.

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
/// lead the list); locks without expiry last.
pub(crate) fn held_locks(targets: &[std::sync::Arc<TargetLocks>], f: Filter<'_>) -> LockList {
    let mut out = Vec::new();
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
                out.push(LockView {
                    target: target.name.clone(),
                    namespace: ns.name.clone(),
                    key: String::from_utf8_lossy(key).into_owned(),
                    owner: match (table.token(key), f.show_owners) {
                        (Some(t), true) => String::from_utf8_lossy(t).into_owned(),
                        _ => "<redacted>".to_string(),
                    },
                    owner_hash: format!("{:016x}", e.owner),
                    pttl_ms: e.pttl_at(now_ms),
                    age_s: now_ms.saturating_sub(e.since_ms).max(0) as f64 / 1000.0,
                    fence: fence_of.key_for(key).and_then(|k| table.fence(&k)),
                    overdue: ttl::renewal_overdue(e.pttl_at(now_ms), ns.overdue_below()),
                });
            }
        }
    }
    out.sort_by_key(|l| if l.pttl_ms < 0 { i64::MAX } else { l.pttl_ms });
    let total = out.len();
    out.truncate(f.limit);
    LockList {
        total,
        truncated: total > f.limit,
        locks: out,
    }
}
