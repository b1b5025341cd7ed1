//! The families of the drills' live freezes — `lockwatch_drill_frozen`,
//! `lockwatch_drill_thaw_due_timestamp_seconds` —
//! registered here and set only by the store (`Freezes`), from the configured target and
//! namespace names: no label value comes from a sender.

use prometheus::{GaugeVec, IntGaugeVec};

use super::Freeze;
use crate::drills::refused::Names;
use crate::metrics::Registry;
use crate::vocab::metric;

#[derive(Clone)]
pub(super) struct FreezeMetrics {
    /// Labels target, namespace: live freezes, 0 for every configured pair.
    frozen: IntGaugeVec,
    /// Labels target, namespace: the earliest planned end among the pair's live freezes,
    /// Unix seconds; absent when none is live.
    due: GaugeVec,
}

impl FreezeMetrics {
    pub(super) fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = FreezeMetrics {
            frozen: registry.int_gauges(
                metric::DRILL_FROZEN,
                "Freezes of lockwatch drill --freeze live now (a worker stopped and not yet reported thawed), per target and namespace.",
                &["target", "namespace"],
            )?,
            due: registry.gauges(
                metric::DRILL_THAW_DUE_TIMESTAMP_SECONDS,
                "When the earliest live drill freeze of the target and namespace was planned to end, Unix seconds; absent when none is live.",
                &["target", "namespace"],
            )?,
        };
        Ok(m)
    }

    /// Set both gauges of every configured pair from the live freezes (`live` holds only
    /// configured pairs).
    pub(super) fn publish<'a>(&self, names: &Names, live: impl Iterator<Item = &'a Freeze>) {
        let live: Vec<&Freeze> = live.collect();
        for t in &names.targets {
            for ns in &names.namespaces {
                let of_pair = || live.iter().filter(|f| f.target == *t && f.namespace == *ns);
                let count = i64::try_from(of_pair().count()).unwrap_or(i64::MAX);
                self.frozen.with_label_values(&[t.as_str(), ns.as_str()]).set(count);
                match of_pair().map(|f| f.due_ms()).min() {
                    Some(due) => self
                        .due
                        .with_label_values(&[t.as_str(), ns.as_str()])
                        .set(due as f64 / 1000.0),
                    None => {
                        let _ = self.due.remove_label_values(&[t.as_str(), ns.as_str()]);
                    }
                }
            }
        }
    }
}
