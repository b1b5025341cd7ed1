//! The sampler's pass in events mode: the keyspace notifications say which lock keys
//! exist, so a pass reads only those (owner and PTTL, pipelined) and the fencing counters
//! the events announced — its cost follows the number of locks, not the keyspace. What a
//! read finds that the events did not say goes to the lock table as a suspect or repair.

use std::time::Instant;

use super::Sampler;
use crate::access::read::{Counter, KeyRead};
use crate::locks::NamespaceLocks;
use crate::locks::events::{Found, ToRead};

/// Read pipelines of a pass in flight at once.
const READS_IN_FLIGHT: usize = 4;

impl Sampler {
    /// Re-read every tracked key and fencing counter of every namespace; publish the census.
    pub(super) async fn events_pass(&mut self, deadline: Instant) -> super::Walk {
        let mut walk = super::Walk::default();
        self.pass_due = None;
        let full = std::mem::take(&mut self.full_refresh);
        for i in 0..self.locks.namespaces.len() {
            let ns_locks = &self.locks.namespaces[i];
            let result = self.refresh_namespace(ns_locks, deadline, full).await;
            let now = self.locks.now_ms();
            let (census, counts) = {
                let mut table = ns_locks.table();
                if table.has_suspects() {
                    // Their second read: a second from now, not a whole interval.
                    self.pass_due = Some(Instant::now() + std::time::Duration::from_millis(1100));
                }
                (table.census_at(&ns_locks.config, now), table.take_counts())
            };
            self.metrics.publish_counts(&self.target.name, &ns_locks.config, counts);
            self.metrics
                .publish_census(&self.target.name, &ns_locks.config, &census);
            self.locks.record_census(i, &census);
            match result {
                Ok(true) => {}
                Ok(false) => walk.truncated = true,
                Err(e) => {
                    let stop = e.is_io_error() || e.is_timeout() || e.is_unrecoverable_error();
                    let e = crate::access::tls::explain(&self.target, &e);
                    walk.error
                        .get_or_insert_with(|| format!("namespace {}: {e}", ns_locks.config.name));
                    if stop {
                        break;
                    }
                }
            }
        }
        walk
    }

    /// One namespace's tracked keys and counters, re-read. `Ok(false)` when cut by the budget.
    async fn refresh_namespace(
        &self,
        ns_locks: &NamespaceLocks,
        deadline: Instant,
        full: bool,
    ) -> redis::RedisResult<bool> {
        let ns = &ns_locks.config;
        // A lock read within the last `reconcile_interval` (after an event, by a walk or by
        // a pass) needs no read now: its state is known, and what an event might have missed
        // since is the reconcile's to find. After a subscription, everything is read again.
        let now = self.locks.now_ms();
        let passes = match full {
            true => 0,
            false => {
                let per = self.target.sample_interval.as_millis().max(1);
                u32::try_from(self.target.reconcile_interval.as_millis().div_ceil(per)).unwrap_or(u32::MAX)
            }
        };
        let hist = self.metrics.ttl_histogram(&self.target.name, &ns.name);
        // A renewal's estimated TTL is read before the next pass could find it overdue
        // (half a second more for the pass's own reads).
        let horizon = self.target.sample_interval.as_millis() + 500;
        let verify_below = ns
            .overdue_below()
            .map(|b| i64::try_from(b.as_millis().saturating_add(horizon)).unwrap_or(i64::MAX));
        let (keys, fences) = {
            let mut table = ns_locks.table();
            table.next_pass();
            let keys = table.to_refresh(passes, now, verify_below, |s| hist.observe(s));
            (keys, table.fences_to_refresh())
        };
        // A page's reads into the table; the remaining TTLs into the histogram.
        let apply = |(page, found_now): (Vec<ToRead>, Vec<KeyRead>)| {
            let now = self.locks.now_ms();
            let mut table = ns_locks.table();
            for (r, read) in page.iter().zip(&found_now) {
                if let Some(s) = table.refresh_read(ns, &r.key, r.seq, Found::from(read), now) {
                    hist.observe(s);
                }
            }
        };
        let reader = self.reader()?;
        let mut reads = tokio::task::JoinSet::new();
        let mut pages = keys.chunks(self.target.scan_count.max(1)).peekable();
        let mut cut = false;
        loop {
            while reads.len() < READS_IN_FLIGHT
                && let Some(page) = pages.next()
            {
                let page: Vec<ToRead> = page.to_vec();
                let reader = reader.clone();
                let kind = ns.value.clone();
                reads.spawn(async move {
                    let keys: Vec<Vec<u8>> = page.iter().map(|r| r.key.to_vec()).collect();
                    reader.read_locks(&kind, &keys).await.map(|r| (page, r))
                });
            }
            let Some(done) = reads.join_next().await else { break };
            apply(done.map_err(super::task_failed)??);
            if Instant::now() >= deadline && pages.peek().is_some() {
                cut = true;
                break;
            }
        }
        while let Some(done) = reads.join_next().await {
            apply(done.map_err(super::task_failed)??);
        }
        for page in fences.chunks(self.target.scan_count.max(1)) {
            let keys: Vec<Vec<u8>> = page.iter().map(|k| k.to_vec()).collect();
            let values = reader.read_counters(&keys).await?;
            let mut table = ns_locks.table();
            for (key, value) in page.iter().zip(values) {
                match value {
                    Counter::Value(v) => table.fence_read(key, Some(v)),
                    Counter::Gone => table.fence_read(key, None),
                    Counter::NotInteger => {}
                }
            }
        }
        Ok(!cut)
    }
}
