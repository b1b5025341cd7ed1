//! The last hour of a namespace, for the status page's small charts: a fixed ring of
//! [`SLOTS`] buckets of [`SLOT_MS`] each. The sampler writes the held / overdue / without-TTL
//! gauges of each pass (the highest in a bucket is kept), the watcher adds takeovers, the
//! intake adds lock failures and, apart, contention. A bucket not written in the last hour
//! reads as no data.
//!
//! Memory: `SLOTS × size_of::<Bucket>()` = 360 × 32 = 11,520 bytes per series, allocated once.

/// Buckets kept: one hour of ten-second buckets.
pub const SLOTS: usize = 360;
/// Width of one bucket, ms.
pub const SLOT_MS: i64 = 10_000;

/// One bucket: its slot number (wall ms / [`SLOT_MS`]) and what was seen in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Bucket {
    /// Slot number (wall-clock ms / `SLOT_MS`); 0 = never written.
    pub slot: i64,
    /// Highest held-lock count of a pass in the bucket.
    pub held: u32,
    /// Highest renewal-overdue count of a pass in the bucket.
    pub overdue: u32,
    /// Expiry takeovers in the bucket.
    pub takeovers: u32,
    /// Lock failures reported by logs and pushes in the bucket (`EventClass::Failure`).
    pub failures: u32,
    /// Acquisitions reported busy or timed out in the bucket (`EventClass::Contention`):
    /// never counted among the failures.
    pub contention: u32,
}

/// A fixed ring of buckets.
#[derive(Debug, Clone)]
pub struct Series {
    buckets: Box<[Bucket]>,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            buckets: vec![Bucket::default(); SLOTS].into_boxed_slice(),
        }
    }
}

fn clamp(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl Series {
    /// Bytes this series holds, all on the heap, allocated at creation.
    pub const BYTES: usize = SLOTS * std::mem::size_of::<Bucket>();

    /// The bucket of `at_ms`, emptied when it still held an older hour's data.
    fn at(&mut self, at_ms: i64) -> Option<&mut Bucket> {
        let slot = at_ms.div_euclid(SLOT_MS);
        let b = self
            .buckets
            .get_mut(usize::try_from(slot.rem_euclid(SLOTS as i64)).ok()?)?;
        if b.slot != slot {
            *b = Bucket {
                slot,
                ..Bucket::default()
            };
        }
        Some(b)
    }

    /// A pass's gauges at `at_ms`.
    pub fn gauges(&mut self, at_ms: i64, held: i64, overdue: i64) {
        if let Some(b) = self.at(at_ms) {
            b.held = b.held.max(clamp(held));
            b.overdue = b.overdue.max(clamp(overdue));
        }
    }

    /// A takeover at `at_ms`.
    pub fn takeover(&mut self, at_ms: i64) {
        if let Some(b) = self.at(at_ms) {
            b.takeovers = b.takeovers.saturating_add(1);
        }
    }

    /// `n` lock failures at `at_ms`; the bucket's count after them.
    pub fn failures(&mut self, at_ms: i64, n: u64) -> u32 {
        match self.at(at_ms) {
            Some(b) => {
                b.failures = b.failures.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
                b.failures
            }
            None => 0,
        }
    }

    /// `n` contended acquisitions at `at_ms`.
    pub fn contention(&mut self, at_ms: i64, n: u64) {
        if let Some(b) = self.at(at_ms) {
            b.contention = b.contention.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        }
    }

    /// The hour up to `now_ms`, oldest first: `SLOTS` entries, `None` for a bucket not written.
    pub fn last_hour(&self, now_ms: i64) -> Vec<Option<Bucket>> {
        let last = now_ms.div_euclid(SLOT_MS);
        (last - SLOTS as i64 + 1..=last)
            .map(|slot| {
                let i = usize::try_from(slot.rem_euclid(SLOTS as i64)).ok()?;
                self.buckets.get(i).copied().filter(|b| b.slot == slot)
            })
            .collect()
    }
}

/// Wall-clock ms since the Unix epoch.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stated_memory_is_the_real_one() {
        assert_eq!(std::mem::size_of::<Bucket>(), 32);
        assert_eq!(Series::BYTES, 11_520, "docs/http.md states 11,520 bytes per series");
        let s = Series::default();
        assert_eq!(std::mem::size_of_val(&*s.buckets), Series::BYTES);
    }

    #[test]
    fn keeps_one_hour_and_the_highest_gauge_per_bucket() {
        let mut s = Series::default();
        let t0 = 1_700_000_000_000;
        // Two hours of passes every 5 s: the ring never grows.
        for i in 0..1440 {
            let at = t0 + i * 5_000;
            s.gauges(at, i, i % 3);
            if i % 100 == 0 {
                s.takeover(at);
            }
        }
        assert_eq!(s.buckets.len(), SLOTS);
        let now = t0 + 1439 * 5_000;
        let hour = s.last_hour(now);
        assert_eq!(hour.len(), SLOTS);
        assert!(
            hour.iter().all(Option::is_some),
            "every bucket of the last hour written"
        );
        let last = hour.last().copied().flatten().unwrap();
        assert_eq!(last.held, 1439, "the higher of the bucket's two passes");
        let first = hour.first().copied().flatten().unwrap();
        assert_eq!(first.slot, now / SLOT_MS - SLOTS as i64 + 1);
        let takeovers: u32 = hour.iter().flatten().map(|b| b.takeovers).sum();
        assert_eq!(takeovers, 7, "i = 800 … 1400 fall in the last hour");
    }

    #[test]
    fn a_stale_bucket_reads_as_no_data_and_is_reset_on_write() {
        let mut s = Series::default();
        let t0 = 1_700_000_000_000;
        s.gauges(t0, 5, 1);
        assert_eq!(s.failures(t0, 3), 3);
        s.contention(t0, 40);
        let first = s.last_hour(t0).last().copied().flatten().unwrap();
        assert_eq!((first.failures, first.contention), (3, 40), "contention apart");
        // Exactly one ring later, the same index: not this hour's.
        let later = t0 + SLOTS as i64 * SLOT_MS;
        assert!(s.last_hour(later).last().copied().flatten().is_none());
        assert_eq!(s.failures(later, 2), 2, "the old hour's count does not carry over");
        assert_eq!(s.last_hour(later).iter().flatten().count(), 1);
    }
}
