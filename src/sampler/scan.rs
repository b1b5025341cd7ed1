//! The sampler's pass in scan mode: walk each namespace with `SCAN MATCH` on every primary
//! in turn (one on a standalone or Sentinel target), read owners and PTTLs of each page
//! while the walk goes on, and take the census when the walk completes a cycle.
//!
//! On a cluster, a key that a slot migration moved from a node not yet walked to one
//! already walked is not seen by the cycle: before the cycle completes, the keys it did not
//! see are read where they live now, so resharding never looks like a lock going away.

use std::time::Instant;

use redis::aio::ConnectionManager;

use super::{Sampler, Walk, log_unreadable, task_failed};
use crate::access::read::{self, KeyRead};
use crate::access::reader::Reader;
use crate::locks::NamespaceLocks;
use crate::locks::table::{Phase, WalkPosition};
use crate::vocab::Unreadable;

/// Read pipelines of one walk in flight at once.
const READS_IN_FLIGHT: usize = 4;

impl Sampler {
    pub(super) async fn walk(&mut self, deadline: Instant) -> Walk {
        let mut walk = Walk::default();
        let n = self.locks.namespaces.len();
        let start = self.next_start % n.max(1);
        for i in (0..n).map(|k| (start + k) % n) {
            if walk.truncated {
                break;
            }
            match self.sample_namespace(i, deadline, &mut walk.keys_scanned).await {
                Ok(true) => {}
                Ok(false) => {
                    walk.truncated = true;
                    self.next_start = i;
                }
                Err(e) => {
                    let stop = e.is_io_error() || e.is_timeout() || e.is_unrecoverable_error();
                    let e = crate::access::tls::explain(&self.target, &e);
                    let ns = &self.locks.namespaces[i].config.name;
                    walk.error.get_or_insert_with(|| format!("namespace {ns}: {e}"));
                    if stop {
                        break;
                    }
                }
            }
        }
        walk
    }

    /// Walk one namespace from where its last pass stopped. Counters are published whatever
    /// happens; gauges when the walk completes a cycle. `Ok(false)` when cut by the budget.
    async fn sample_namespace(&self, i: usize, deadline: Instant, scanned: &mut u64) -> redis::RedisResult<bool> {
        let ns_locks = &self.locks.namespaces[i];
        let from = ns_locks.table().begin();
        let mut walked = self.walk_namespace(ns_locks, from, deadline, scanned).await;
        if matches!(walked, Ok(None))
            && self.primaries.len() > 1
            && let Err(e) = self.read_unseen(ns_locks).await
        {
            walked = Err(e);
        }
        let mut table = ns_locks.table();
        let (outcome, census) = match walked {
            Ok(None) => (Ok(true), Some(table.complete())),
            Ok(Some(at)) => {
                table.suspend(at);
                (Ok(false), None)
            }
            Err(e) => {
                table.abandon();
                (Err(e), None)
            }
        };
        let counts = table.take_counts();
        drop(table);
        self.metrics.publish_counts(&self.target.name, &ns_locks.config, counts);
        if let Some(c) = census {
            self.metrics.publish_census(&self.target.name, &ns_locks.config, &c);
            self.locks.record_census(i, &c);
        }
        outcome
    }

    /// Keys tracked but not seen by this cycle, read where they live now (several primaries:
    /// a slot migration may have moved them behind the walk).
    async fn read_unseen(&self, ns_locks: &NamespaceLocks) -> redis::RedisResult<()> {
        let (locks, fences) = ns_locks.table().unseen();
        let reader = self.reader()?;
        let ns = &ns_locks.config;
        for page in locks.chunks(self.target.scan_count.max(1)) {
            let keys: Vec<Vec<u8>> = page.iter().map(|k| k.to_vec()).collect();
            let reads = reader.read_locks(&ns.value, &keys).await?;
            self.apply_locks(ns_locks, keys, reads);
        }
        for page in fences.chunks(self.target.scan_count.max(1)) {
            let keys: Vec<Vec<u8>> = page.iter().map(|k| k.to_vec()).collect();
            let values = reader.read_counters(&keys).await?;
            self.apply_fences(ns_locks, keys, values);
        }
        Ok(())
    }

    /// A page of lock reads into the table.
    fn apply_locks(&self, ns_locks: &NamespaceLocks, keys: Vec<Vec<u8>>, reads: Vec<KeyRead>) {
        let ns = &ns_locks.config;
        let now_ms = self.locks.now_ms();
        let hist = self.metrics.ttl_histogram(&self.target.name, &ns.name);
        let mut table = ns_locks.table();
        for (key, read) in keys.iter().zip(reads) {
            match read {
                KeyRead::Lock { owner, pttl_ms } => {
                    let seen = table.observe_lock(ns, key, &owner, pttl_ms, now_ms);
                    if let Some(s) = seen.ttl_remaining_s {
                        hist.observe(s);
                    }
                }
                // `read_locks` reads owner and TTL: never an owner alone.
                KeyRead::Gone | KeyRead::Owner(_) => {}
                KeyRead::Unreadable(reason) => {
                    table.observe_unreadable(reason);
                    log_unreadable(&self.target.name, &ns.name, key, reason);
                }
            }
        }
    }

    /// A page of fencing counters into the table.
    fn apply_fences(&self, ns_locks: &NamespaceLocks, keys: Vec<Vec<u8>>, values: Vec<read::Counter>) {
        let mut table = ns_locks.table();
        for (key, value) in keys.iter().zip(values) {
            match value {
                read::Counter::Value(v) => table.observe_fence(key, v),
                read::Counter::Gone => {}
                read::Counter::NotInteger => table.observe_unreadable(Unreadable::BadValue),
            }
        }
    }

    /// The lock keys on each primary, then the fencing counters on each, from `from`;
    /// where it stopped if cut.
    async fn walk_namespace(
        &self,
        ns_locks: &NamespaceLocks,
        from: WalkPosition,
        deadline: Instant,
        scanned: &mut u64,
    ) -> redis::RedisResult<Option<WalkPosition>> {
        let ns = &ns_locks.config;
        let reader = self.reader()?;
        let phases: &[Phase] = match ns.fence_pattern {
            Some(_) => &[Phase::Locks, Phase::Fences],
            None => &[Phase::Locks],
        };
        for &phase in phases.iter().skip_while(|&&p| p != from.phase) {
            let first = if phase == from.phase { usize::from(from.node) } else { 0 };
            for node in first..self.primaries.len() {
                let cursor = if phase == from.phase && node == usize::from(from.node) {
                    from.cursor
                } else {
                    0
                };
                if cursor == 0 && (node > 0 || phase != Phase::Locks) && Instant::now() >= deadline {
                    return Ok(Some(position(phase, node, 0)));
                }
                let scan = self.primaries[node].scan.clone();
                let cut = match phase {
                    Phase::Locks => {
                        let kind = ns.value.clone();
                        self.walk_pattern(
                            scan,
                            ns.pattern.as_str(),
                            cursor,
                            deadline,
                            scanned,
                            &reader,
                            move |r, keys| {
                                let kind = kind.clone();
                                async move { r.read_locks(&kind, &keys).await.map(|v| (keys, v)) }
                            },
                            |keys, reads| self.apply_locks(ns_locks, keys, reads),
                        )
                        .await?
                    }
                    Phase::Fences => {
                        let Some(fence) = &ns.fence_pattern else { break };
                        self.walk_pattern(
                            scan,
                            fence.as_str(),
                            cursor,
                            deadline,
                            scanned,
                            &reader,
                            |r, keys| async move { r.read_counters(&keys).await.map(|v| (keys, v)) },
                            |keys, values| self.apply_fences(ns_locks, keys, values),
                        )
                        .await?
                    }
                };
                if let Some(cursor) = cut {
                    return Ok(Some(position(phase, node, cursor)));
                }
            }
        }
        Ok(None)
    }

    /// SCAN `pattern` on one node from `cursor` to the end or the deadline (at least one
    /// page). Each page is read by its own task while the walk goes on, up to
    /// `READS_IN_FLIGHT` at once, so neither Redis nor lockwatch waits on the other's
    /// round trip. Returns the cursor to continue from when cut, `None` at the end.
    #[allow(clippy::too_many_arguments)]
    async fn walk_pattern<R, F, Fut>(
        &self,
        mut scan: ConnectionManager,
        pattern: &str,
        mut cursor: u64,
        deadline: Instant,
        scanned: &mut u64,
        reader: &Reader,
        read: F,
        mut apply: impl FnMut(Vec<Vec<u8>>, Vec<R>),
    ) -> redis::RedisResult<Option<u64>>
    where
        R: Send + 'static,
        F: Fn(Reader, Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = redis::RedisResult<(Vec<Vec<u8>>, Vec<R>)>> + Send + 'static,
    {
        let count = self.target.scan_count;
        let mut reads = tokio::task::JoinSet::new();
        let cut = loop {
            let (next, keys) = read::scan_page(&mut scan, pattern, cursor, count).await?;
            *scanned += keys.len() as u64;
            cursor = next;
            if !keys.is_empty() {
                reads.spawn(read(reader.clone(), keys));
            }
            while reads.len() >= READS_IN_FLIGHT {
                if let Some(done) = reads.join_next().await {
                    let (keys, values) = done.map_err(task_failed)??;
                    apply(keys, values);
                }
            }
            if cursor == 0 {
                break None;
            }
            if Instant::now() >= deadline {
                break Some(cursor);
            }
        };
        while let Some(done) = reads.join_next().await {
            let (keys, values) = done.map_err(task_failed)??;
            apply(keys, values);
        }
        Ok(cut)
    }
}

fn position(phase: Phase, node: usize, cursor: u64) -> WalkPosition {
    WalkPosition {
        phase,
        node: u16::try_from(node).unwrap_or(u16::MAX),
        cursor,
    }
}
