//! The intake's last hour, for the status page: lock failures and, apart, contention
//! (`vocab::EventClass`) per namespace in ten-second buckets (`locks::recent::Series`, 11,520
//! bytes per namespace, `unknown` included), and a burst — [`BURST`] failures or more in one
//! bucket — as an incident of the timeline (`locks::incidents`, at most 200), with the trace
//! of its latest failure that came with one; a failure reported with a trace is an
//! incident of its own. Contention is the lock working: it makes no burst and no incident.

use std::sync::{Arc, Mutex};

use crate::locks::incidents::{Incident, IncidentLog, Kind};
use crate::locks::recent::{Bucket, SLOT_MS, Series, wall_ms};
use crate::metrics::TraceContext;

/// Failures in one bucket that make a burst.
pub const BURST: u32 = 5;

/// Shared by every source's `Counters` and read by the status page.
#[derive(Clone, Default)]
pub struct RecentFailures(Arc<Mutex<Inner>>);

#[derive(Default)]
struct Inner {
    /// Config namespaces in order, then `unknown`.
    series: Vec<Series>,
    incidents: IncidentLog,
}

impl RecentFailures {
    /// For `namespaces` configured namespaces (plus `unknown`).
    pub fn new(namespaces: usize) -> Self {
        RecentFailures(Arc::new(Mutex::new(Inner {
            series: vec![Series::default(); namespaces + 1],
            incidents: IncidentLog::default(),
        })))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `n` failures of namespace `ns` (index; the last is `unknown`) counted now; `trace`,
    /// the latest of them that came with one, goes with the burst they make or join.
    pub fn add(&self, ns: usize, n: u64, trace: Option<&TraceContext>) {
        let at = wall_ms();
        let mut inner = self.inner();
        let Some(series) = inner.series.get_mut(ns) else {
            return;
        };
        let after = series.failures(at, n);
        let before = after.saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        if before < BURST && after >= BURST {
            inner.incidents.push(at, ns, Kind::FailureBurst, after, None);
        }
        if let Some(t) = trace
            && after >= BURST
        {
            inner
                .incidents
                .retrace(at - at.rem_euclid(SLOT_MS), ns, Kind::FailureBurst, t);
        }
    }

    /// A lock failure of namespace `ns` reported with `trace` (and the key it named): an
    /// incident of its own, so on-call can open the trace.
    pub fn traced(&self, ns: usize, key: Option<&str>, trace: TraceContext) {
        let at = wall_ms();
        self.inner()
            .incidents
            .push_traced(at, ns, Kind::TracedFailure, key.map(str::as_bytes), trace);
    }

    /// `n` contended acquisitions (busy, timed out) of namespace `ns` counted now: drawn and
    /// summed apart from the failures, never an incident.
    pub fn contention(&self, ns: usize, n: u64) {
        let at = wall_ms();
        if let Some(series) = self.inner().series.get_mut(ns) {
            series.contention(at, n);
        }
    }

    /// Namespace `ns`'s last hour up to `now_ms`, oldest first.
    pub fn last_hour(&self, ns: usize, now_ms: i64) -> Vec<Option<Bucket>> {
        self.inner()
            .series
            .get(ns)
            .map_or_else(Vec::new, |s| s.last_hour(now_ms))
    }

    /// The bursts kept, oldest first.
    pub fn incidents(&self) -> Vec<Incident> {
        self.inner().incidents.all().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_one_incident_per_bucket() {
        let r = RecentFailures::new(1);
        r.add(0, 3, None);
        r.add(0, 3, None);
        r.add(0, 10, None);
        r.add(1, 1, None);
        r.add(7, 100, None);
        let bursts = r.incidents();
        assert!(
            bursts.len() <= 2,
            "one per bucket, at most two buckets crossed: {bursts:?}"
        );
        assert!(bursts.iter().all(|i| i.kind == Kind::FailureBurst && i.namespace == 0));
        let total: u32 = r.last_hour(0, wall_ms()).iter().flatten().map(|b| b.failures).sum();
        assert_eq!(total, 16);
    }

    #[test]
    fn a_burst_carries_its_latest_trace_and_a_traced_failure_is_an_incident() {
        let r = RecentFailures::new(1);
        let t = |id: &str| TraceContext::new(id, None).unwrap();
        r.add(0, 6, Some(&t("aaaa")));
        r.add(0, 1, Some(&t("bbbb")));
        r.traced(0, Some("wf:lock:1"), t("cccc"));
        let kept = r.incidents();
        let trace = |i: &Incident| i.trace.as_ref().map(|t| t.trace_id.clone());
        let burst: Vec<_> = kept.iter().filter(|i| i.kind == Kind::FailureBurst).collect();
        assert!(!burst.is_empty() && burst.len() <= 2, "{kept:?}");
        assert_eq!(
            trace(burst[burst.len() - 1]).as_deref(),
            Some("bbbb"),
            "the burst's latest trace"
        );
        let one = kept.iter().find(|i| i.kind == Kind::TracedFailure).unwrap();
        assert_eq!(
            (trace(one).as_deref(), one.key.as_deref()),
            (Some("cccc"), Some(&b"wf:lock:1"[..]))
        );
    }

    #[test]
    fn contention_is_counted_apart_and_makes_no_burst() {
        let r = RecentFailures::new(1);
        r.contention(0, 30);
        r.contention(0, 10);
        r.contention(9, 1);
        assert!(r.incidents().is_empty(), "{:?}", r.incidents());
        let hour = r.last_hour(0, wall_ms());
        let sum = |f: fn(&Bucket) -> u32| hour.iter().flatten().map(f).sum::<u32>();
        assert_eq!((sum(|b| b.failures), sum(|b| b.contention)), (0, 40));
    }
}
