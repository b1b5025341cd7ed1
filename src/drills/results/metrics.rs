//! The families of recorded drills — `lockwatch_drill_verdict` (a state set),
//! `_verdict_streak`, `_last_run_timestamp_seconds`, `_runs_total`, `_exposure_seconds` —
//! registered here and set only by the store (`Results`). Target and namespace are
//! configured names; the drill's name is a sender's, checked, and at most `[server]
//! max_drills` of them are kept.

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec};

use super::{Kept, Verdict};
use crate::metrics::Registry;
use crate::vocab::metric;

#[derive(Clone)]
pub(super) struct ResultMetrics {
    verdict: IntGaugeVec,
    streak: IntGaugeVec,
    last_run: GaugeVec,
    runs: IntCounterVec,
    exposure: GaugeVec,
}

const LABELS: [&str; 3] = ["target", "namespace", "drill"];
const WITH_VERDICT: [&str; 4] = ["target", "namespace", "drill", "verdict"];

impl ResultMetrics {
    pub(super) fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(ResultMetrics {
            verdict: registry.int_gauges(
                metric::DRILL_VERDICT,
                "The latest verdict of each recorded drill: 1 for it, 0 for each other of safe, unsafe, not_exercised, interrupted.",
                &WITH_VERDICT,
            )?,
            streak: registry.int_gauges(
                metric::DRILL_VERDICT_STREAK,
                "How many of a drill's latest runs in a row, the latest included, had its latest verdict.",
                &LABELS,
            )?,
            last_run: registry.gauges(
                metric::DRILL_LAST_RUN_TIMESTAMP_SECONDS,
                "When a drill's latest recorded run ended, Unix seconds.",
                &LABELS,
            )?,
            runs: registry.counters(
                metric::DRILL_RUNS_TOTAL,
                "Runs of a drill recorded, by verdict.",
                &WITH_VERDICT,
            )?,
            exposure: registry.gauges(
                metric::DRILL_EXPOSURE_SECONDS,
                "In a drill's latest run, how long the woken worker went on under a lock it no longer held (the worst lock's); 0 when none did.",
                &LABELS,
            )?,
        })
    }

    /// Every family of `k`'s drill set from what is kept (the counters raised to its totals).
    pub(super) fn publish(&self, k: &Kept) {
        let (t, ns, d) = k.latest.key();
        let labels = [t.as_str(), ns.as_str(), d.as_str()];
        for v in Verdict::ALL {
            let with = [t.as_str(), ns.as_str(), d.as_str(), v.as_str()];
            self.verdict
                .with_label_values(&with)
                .set(i64::from(v == k.latest.verdict));
            let runs = self.runs.with_label_values(&with);
            let want = k.runs.get(&v).copied().unwrap_or(0);
            if want > runs.get() {
                runs.inc_by(want - runs.get());
            }
        }
        self.streak
            .with_label_values(&labels)
            .set(i64::try_from(k.streak()).unwrap_or(i64::MAX));
        self.last_run
            .with_label_values(&labels)
            .set(k.latest.ended_ms as f64 / 1000.0);
        self.exposure
            .with_label_values(&labels)
            .set(k.latest.exposure_ms as f64 / 1000.0);
    }

    /// Every series of the drill `key` removed: it is no longer kept.
    pub(super) fn remove(&self, key: &(String, String, String)) {
        let labels = [key.0.as_str(), key.1.as_str(), key.2.as_str()];
        for v in Verdict::ALL {
            let with = [key.0.as_str(), key.1.as_str(), key.2.as_str(), v.as_str()];
            let _ = self.verdict.remove_label_values(&with);
            let _ = self.runs.remove_label_values(&with);
        }
        let _ = self.streak.remove_label_values(&labels);
        let _ = self.last_run.remove_label_values(&labels);
        let _ = self.exposure.remove_label_values(&labels);
    }
}
