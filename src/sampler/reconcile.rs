//! The reconciling SCAN of events mode: a walk of the keyspace under a budget of
//! `reconcile_rate` keys per second, in small steps, its cursor kept across steps, looking
//! for lock keys the events never announced. One walk per target covers every namespace
//! (`MATCH` on the namespaces' common prefix; each key is sorted to its namespace here).
//!
//! A walk starts with events mode (after every subscription: events may have been missed
//! while away) and every `reconcile_interval`. The first walk after start is an inventory:
//! what it finds is taken in without counting repairs.

use std::time::{Duration, Instant};

use super::Sampler;
use crate::access::read::{self, Counter};
use crate::locks::events::Found;

/// How often the walk takes a step.
pub(super) const STEP: Duration = Duration::from_millis(100);

/// Where the reconciling walk stands.
#[derive(Debug, Default)]
pub(super) struct Walk {
    /// The primary and SCAN cursor of the walk in progress; `None` between walks.
    cursor: Option<(usize, u64)>,
    /// Whether what this walk finds counts as repairs (false for the inventory).
    counting: bool,
    /// When the last walk began, for `reconcile_interval`.
    began: Option<Instant>,
    /// Keys of budget not spent yet (a step may spend less than its share).
    credit: f64,
    /// A walk has completed since start: the inventory is taken.
    pub(super) inventoried: bool,
}

impl Walk {
    /// Begin a walk now (a resubscription, or the interval); one in progress starts over.
    pub(super) fn restart(&mut self) {
        self.cursor = Some((0, 0));
        self.counting = self.inventoried;
        self.began = Some(Instant::now());
    }

    pub(super) fn in_progress(&self) -> bool {
        self.cursor.is_some()
    }
}

/// `MATCH` pattern covering every namespace's locks and fencing counters: their longest
/// common literal prefix, then `*`.
pub(super) fn common_match(patterns: &[&str]) -> String {
    let literal = |p: &str| -> String {
        let end = p.find(['*', '?', '[', '\\']).unwrap_or(p.len());
        p[..end].to_string()
    };
    let mut prefix: Option<String> = None;
    for p in patterns {
        let l = literal(p);
        prefix = Some(match prefix {
            None => l,
            Some(cur) => cur
                .chars()
                .zip(l.chars())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect(),
        });
    }
    format!("{}*", prefix.unwrap_or_default())
}

impl Sampler {
    /// One step of the walk, if one is due or in progress; then confirm the missing keys
    /// found at least a second ago.
    pub(super) async fn reconcile_step(&mut self) -> redis::RedisResult<()> {
        let interval = self.target.reconcile_interval;
        if !self.walk.in_progress() && self.walk.began.is_none_or(|b| b.elapsed() >= interval) {
            self.walk.restart();
        }
        let rate = self.target.reconcile_rate as f64;
        // At most a second's worth of credit, so a slow Redis does not get a burst later.
        self.walk.credit = (self.walk.credit + rate * STEP.as_secs_f64()).min(rate.max(1.0));
        // Pages of at most `scan_count`, as many as the credit pays for, within one step.
        let started = std::time::Instant::now();
        self.follow_nodes().await?;
        while let Some((node, cursor)) = self.walk.cursor {
            let count = (self.walk.credit.floor() as usize).min(self.target.scan_count.max(1));
            if count == 0 || started.elapsed() >= STEP {
                break;
            }
            let Some(mut scan) = self.primaries.get(node).map(|p| p.scan.clone()) else {
                self.walk.restart();
                break;
            };
            self.walk.credit -= count as f64;
            let (next, keys) = read::scan_page(&mut scan, &self.walk_match, cursor, count).await?;
            self.metrics.keys_scanned(&self.target.name, keys.len() as u64);
            self.sort_found(keys, self.walk.counting).await?;
            if next == 0 && node + 1 < self.primaries.len() {
                self.walk.cursor = Some((node + 1, 0));
            } else if next == 0 {
                self.walk.cursor = None;
                if !self.walk.inventoried {
                    tracing::info!(target_name = %self.target.name,
                        "inventory of the lock keys done: events mode tracks every lock from now on");
                }
                self.walk.inventoried = true;
            } else {
                self.walk.cursor = Some((node, next));
            }
        }
        self.confirm_missing().await?;
        self.publish_repairs();
        Ok(())
    }

    /// Keys a walk returned: read the locks of each namespace and the fencing counters,
    /// and hand them to the lock tables.
    async fn sort_found(&mut self, keys: Vec<Vec<u8>>, counting: bool) -> redis::RedisResult<()> {
        let reader = self.reader()?;
        for ns_locks in self.locks.namespaces.iter() {
            let ns = &ns_locks.config;
            let mine: Vec<Vec<u8>> = keys.iter().filter(|k| ns.pattern.matches(k)).cloned().collect();
            if !mine.is_empty() {
                let reads = reader.read_locks(&ns.value, &mine).await?;
                let now = self.locks.now_ms();
                let mut table = ns_locks.table();
                for (key, r) in mine.iter().zip(&reads) {
                    table.walk_found(ns, key, Found::from(r), now, counting);
                }
            }
            let Some(fence) = &ns.fence_pattern else { continue };
            let fences: Vec<Vec<u8>> = keys.iter().filter(|k| fence.matches(k)).cloned().collect();
            if !fences.is_empty() {
                let values = reader.read_counters(&fences).await?;
                let mut table = ns_locks.table();
                for (key, v) in fences.iter().zip(values) {
                    if let Counter::Value(v) = v {
                        table.fence_read(key, Some(v));
                    }
                }
            }
        }
        Ok(())
    }

    /// Read again the keys a walk found missing a second or more ago: still there and still
    /// unannounced, they are repaired and counted.
    async fn confirm_missing(&mut self) -> redis::RedisResult<()> {
        let reader = self.reader()?;
        for ns_locks in self.locks.namespaces.iter() {
            let now = self.locks.now_ms();
            let keys: Vec<Vec<u8>> = ns_locks
                .table()
                .missing_suspects(now)
                .into_iter()
                .map(|k| k.to_vec())
                .collect();
            if keys.is_empty() {
                continue;
            }
            let ns = &ns_locks.config;
            let reads = reader.read_locks(&ns.value, &keys).await?;
            let now = self.locks.now_ms();
            let mut table = ns_locks.table();
            for (key, r) in keys.iter().zip(&reads) {
                table.walk_found(ns, key, Found::from(r), now, true);
            }
        }
        Ok(())
    }

    /// Repairs (and handoffs, fence regressions) counted since the last publication.
    fn publish_repairs(&self) {
        for ns_locks in self.locks.namespaces.iter() {
            let counts = ns_locks.table().take_counts();
            self.metrics.publish_counts(&self.target.name, &ns_locks.config, counts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::common_match;

    #[test]
    fn one_match_covers_every_namespace() {
        assert_eq!(common_match(&["app:wf:lock:*", "app:wf:fence:*", "app:ap:*"]), "app:*");
        assert_eq!(common_match(&["a:lock:*"]), "a:lock:*");
        assert_eq!(common_match(&["x:*", "y:*"]), "*");
        assert_eq!(common_match(&["lock:[ab]:*", "lock:c?"]), "lock:*");
        assert_eq!(common_match(&[]), "*");
    }
}
