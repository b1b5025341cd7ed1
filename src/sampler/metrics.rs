//! The sampler's metric families, registered and pre-exported for every configured target
//! and namespace, and the one place each pass outcome is logged and counted: counters
//! after every pass, gauges after a completed cycle, the pass's own health.

use std::time::SystemTime;

use prometheus::{GaugeVec, HistogramVec, IntCounterVec, IntGaugeVec};

use super::PassReport;
use crate::config::{Config, NamespaceConfig, Notifications, TargetConfig};
use crate::locks::TargetLocks;
use crate::locks::table::{Census, Counts};
use crate::metrics::Registry;
use crate::vocab::{Repair, TrackingMode, Unreadable, metric};

/// Remaining-TTL buckets (seconds): fine near expiry, where a stalled holder shows up.
const TTL_BUCKETS: &[f64] = &[
    0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// The sampler's families; labels target + namespace unless said otherwise.
#[derive(Clone)]
pub struct SamplerMetrics {
    locks_held: IntGaugeVec,
    locks_without_ttl: IntGaugeVec,
    locks_renewal_overdue: IntGaugeVec,
    locks_held_too_long: IntGaugeVec,
    lock_held_max_seconds: GaugeVec,
    pub(crate) lock_ttl_remaining_seconds: HistogramVec,
    lock_handoffs_total: IntCounterVec,
    fence_token: GaugeVec,
    fence_regressions_total: IntCounterVec,
    /// Labels target, namespace, reason: keys present in a namespace that are not readable locks.
    locks_unreadable: IntGaugeVec,
    // Label target.
    up: IntGaugeVec,
    sample_duration_seconds: GaugeVec,
    sample_errors_total: IntCounterVec,
    sample_truncated_total: IntCounterVec,
    sample_passes_total: IntCounterVec,
    keys_scanned_total: IntCounterVec,
    /// Labels target, mode: 1 for the mode the target is in.
    tracking_mode: IntGaugeVec,
    /// Labels target, namespace, kind.
    reconcile_repairs_total: IntCounterVec,
    /// Labels target, namespace: locks held before a failover and absent after it.
    locks_lost_in_failover_total: IntCounterVec,
    /// For the scrape-time census of events mode.
    registry: Registry,
}

impl SamplerMetrics {
    /// Register the families in `registry`, every known series at 0.
    pub fn register(r: &Registry, config: &Config) -> Result<Self, prometheus::Error> {
        let tn = &["target", "namespace"];
        let t = &["target"];
        let m = SamplerMetrics {
            locks_held: r.int_gauges(metric::LOCKS_HELD, "Lock keys present at the last sample pass.", tn)?,
            locks_without_ttl: r.int_gauges(
                metric::LOCKS_WITHOUT_TTL,
                "Lock keys with no expiry (PTTL -1): never freed if the holder dies.",
                tn,
            )?,
            locks_renewal_overdue: r.int_gauges(
                metric::LOCKS_RENEWAL_OVERDUE,
                "Held locks whose remaining TTL shows the holder missed a renewal (PTTL < ttl - renew_every - renew_grace).",
                tn,
            )?,
            locks_held_too_long: r.int_gauges(
                metric::LOCKS_HELD_TOO_LONG,
                "Locks held by the same owner longer than max_hold.",
                tn,
            )?,
            lock_held_max_seconds: r.gauges(
                metric::LOCK_HELD_MAX_SECONDS,
                "Age of the longest-held lock (same owner since first seen).",
                tn,
            )?,
            lock_ttl_remaining_seconds: r.histograms(
                metric::LOCK_TTL_REMAINING_SECONDS,
                "Remaining TTL of each held lock with an expiry, observed once per sample pass.",
                TTL_BUCKETS,
                tn,
            )?,
            lock_handoffs_total: r.counters(
                metric::LOCK_HANDOFFS_TOTAL,
                "Lock owner changed between two sample passes.",
                tn,
            )?,
            fence_token: r.gauges(
                metric::FENCE_TOKEN,
                "Highest fencing counter value seen at the last pass.",
                tn,
            )?,
            fence_regressions_total: r.counters(
                metric::FENCE_REGRESSIONS_TOTAL,
                "A fencing counter went backwards or vanished.",
                tn,
            )?,
            locks_unreadable: r.int_gauges(
                metric::LOCKS_UNREADABLE,
                "Keys matching a namespace's pattern that could not be read as locks at the last pass, by reason.",
                &["target", "namespace", "reason"],
            )?,
            up: r.int_gauges(metric::UP, "1 when the last sample pass of the target succeeded.", t)?,
            sample_duration_seconds: r.gauges(
                metric::SAMPLE_DURATION_SECONDS,
                "Duration of the last sample pass.",
                t,
            )?,
            sample_errors_total: r.counters(metric::SAMPLE_ERRORS_TOTAL, "Failed sample passes.", t)?,
            sample_truncated_total: r.counters(
                metric::SAMPLE_TRUNCATED_TOTAL,
                "Sample passes cut short by sample_budget.",
                t,
            )?,
            sample_passes_total: r.counters(
                metric::SAMPLE_PASSES_TOTAL,
                "Sample passes run, failed and truncated ones included.",
                t,
            )?,
            keys_scanned_total: r.counters(metric::KEYS_SCANNED_TOTAL, "Keys returned by SCAN.", t)?,
            tracking_mode: r.int_gauges(
                metric::TRACKING_MODE,
                "1 for the mode the target is in: locks tracked from keyspace notifications (events), or found by SCAN passes (scan).",
                &["target", "mode"],
            )?,
            reconcile_repairs_total: r.counters(
                metric::RECONCILE_REPAIRS_TOTAL,
                "What the reconciling SCAN found that keyspace notifications had missed: a lock not announced (missing), one gone unannounced (gone), one whose owner or expiry differs (changed).",
                &["target", "namespace", "kind"],
            )?,
            locks_lost_in_failover_total: r.counters(
                metric::LOCKS_LOST_IN_FAILOVER_TOTAL,
                "Locks held just before a primary change that the new primary does not have: neither released nor expired, lost with the writes the failover dropped.",
                tn,
            )?,
            registry: r.clone(),
        };
        for target in &config.targets {
            m.pre_export(target, &config.namespaces);
        }
        Ok(m)
    }

    fn pre_export(&self, t: &TargetConfig, namespaces: &[NamespaceConfig]) {
        let target = t.name.as_str();
        self.up.with_label_values(&[target]).set(0);
        self.sample_duration_seconds.with_label_values(&[target]).set(0.0);
        self.sample_errors_total.with_label_values(&[target]);
        self.sample_truncated_total.with_label_values(&[target]);
        self.sample_passes_total.with_label_values(&[target]);
        self.keys_scanned_total.with_label_values(&[target]);
        for mode in TrackingMode::ALL {
            self.tracking_mode
                .with_label_values(&[target, mode.as_str()])
                .set(i64::from(mode == TrackingMode::Scan));
        }
        for ns in namespaces {
            let l = [target, ns.name.as_str()];
            self.locks_held.with_label_values(&l);
            self.locks_without_ttl.with_label_values(&l);
            self.locks_renewal_overdue.with_label_values(&l);
            self.locks_held_too_long.with_label_values(&l);
            self.lock_held_max_seconds.with_label_values(&l);
            self.lock_ttl_remaining_seconds.with_label_values(&l);
            self.lock_handoffs_total.with_label_values(&l);
            self.locks_lost_in_failover_total.with_label_values(&l);
            if ns.fence_pattern.is_some() {
                self.fence_token.with_label_values(&l);
                self.fence_regressions_total.with_label_values(&l);
            }
            for reason in Unreadable::ALL {
                self.locks_unreadable
                    .with_label_values(&[target, ns.name.as_str(), reason.as_str()]);
            }
            if t.notifications != Notifications::Off {
                for kind in Repair::ALL {
                    self.reconcile_repairs_total
                        .with_label_values(&[target, ns.name.as_str(), kind.as_str()]);
                }
            }
        }
    }

    /// Counter increments; published after every pass, failed ones included.
    pub(crate) fn publish_counts(&self, target: &str, ns: &NamespaceConfig, c: Counts) {
        let l = [target, ns.name.as_str()];
        self.lock_handoffs_total.with_label_values(&l).inc_by(c.handoffs);
        for kind in Repair::ALL {
            let n = c.repairs[kind.index()];
            if n > 0 {
                self.reconcile_repairs_total
                    .with_label_values(&[target, ns.name.as_str(), kind.as_str()])
                    .inc_by(n);
                tracing::info!(target_name = %target, namespace = %ns.name, kind = kind.as_str(), count = n,
                    "reconcile repaired what keyspace notifications missed; counted in lockwatch_reconcile_repairs_total");
            }
        }
        if ns.fence_pattern.is_some() {
            self.fence_regressions_total
                .with_label_values(&l)
                .inc_by(c.fence_regressions);
        }
        if c.fence_regressions > 0 {
            tracing::warn!(target_name = %target, namespace = %ns.name, count = c.fence_regressions,
                "fencing counter went backwards or vanished: a failover may have lost writes");
        }
    }

    /// Locks of namespace `ns` lost in a failover.
    pub(crate) fn lost_in_failover(&self, target: &str, ns: &str, n: u64) {
        self.locks_lost_in_failover_total
            .with_label_values(&[target, ns])
            .inc_by(n);
    }

    /// The remaining-TTL histogram of a namespace.
    pub(crate) fn ttl_histogram(&self, target: &str, ns: &str) -> prometheus::Histogram {
        self.lock_ttl_remaining_seconds.with_label_values(&[target, ns])
    }

    /// Keys a reconciling SCAN returned.
    pub(crate) fn keys_scanned(&self, target: &str, n: u64) {
        self.keys_scanned_total.with_label_values(&[target]).inc_by(n);
    }

    /// The target is now in `mode`.
    pub(crate) fn set_mode(&self, target: &str, mode: TrackingMode) {
        for m in TrackingMode::ALL {
            self.tracking_mode
                .with_label_values(&[target, m.as_str()])
                .set(i64::from(m == mode));
        }
    }

    /// In events mode, the gauges follow the clock: each scrape takes the census of that
    /// moment, so a holder that stopped renewing shows at its mark, whatever the passes.
    pub(crate) fn follow_clock(&self, target: &str, locks: std::sync::Arc<TargetLocks>) {
        let (me, target) = (self.clone(), target.to_string());
        // Held weakly: a target a reload removed stops publishing (and its hook is dropped).
        let locks = std::sync::Arc::downgrade(&locks);
        self.registry.before_encode(move || {
            let Some(locks) = locks.upgrade() else {
                return false;
            };
            if locks.subscription().is_none() {
                return true;
            }
            let now = locks.now_ms();
            for ns in &locks.namespaces {
                let census = ns.table().census_at(&ns.config, now);
                me.publish_census(&target, &ns.config, &census);
            }
            true
        });
    }

    /// The gauges, from a completed cycle (scan mode) or the census of now (events mode),
    /// set as one change: a scrape reads all of one census.
    pub(crate) fn publish_census(&self, target: &str, ns: &NamespaceConfig, c: &Census) {
        self.registry.together(|| self.set_census(target, ns, c));
    }

    fn set_census(&self, target: &str, ns: &NamespaceConfig, c: &Census) {
        let l = [target, ns.name.as_str()];
        self.locks_held.with_label_values(&l).set(c.held);
        self.locks_without_ttl.with_label_values(&l).set(c.without_ttl);
        self.locks_renewal_overdue.with_label_values(&l).set(c.overdue);
        self.locks_held_too_long.with_label_values(&l).set(c.too_long);
        self.lock_held_max_seconds
            .with_label_values(&l)
            .set(c.max_age_ms as f64 / 1000.0);
        if ns.fence_pattern.is_some() {
            self.fence_token
                .with_label_values(&l)
                .set(c.fence_max.unwrap_or(0) as f64);
        }
        for (reason, n) in [
            (Unreadable::WrongType, c.wrong_type),
            (Unreadable::BadValue, c.bad_value),
        ] {
            self.locks_unreadable
                .with_label_values(&[l[0], l[1], reason.as_str()])
                .set(n);
        }
    }

    /// Record the pass: self metrics, status, and one log line when the health changes.
    pub(crate) fn publish_pass(&self, t: &TargetConfig, locks: &TargetLocks, r: &PassReport) {
        let l = [t.name.as_str()];
        self.sample_passes_total.with_label_values(&l).inc();
        self.sample_duration_seconds
            .with_label_values(&l)
            .set(r.duration.as_secs_f64());
        self.keys_scanned_total.with_label_values(&l).inc_by(r.keys_scanned);
        self.up.with_label_values(&l).set(i64::from(r.error.is_none()));
        if r.truncated && r.error.is_none() {
            self.sample_truncated_total.with_label_values(&l).inc();
            tracing::warn!(target_name = %t.name, duration = ?r.duration,
                "sample pass cut by sample_budget; raise sample_budget or scan_count");
        }
        locks.update_status(|s| {
            match &r.error {
                Some(e) => {
                    self.sample_errors_total.with_label_values(&l).inc();
                    if s.up || s.passes == 0 {
                        tracing::warn!(target_name = %t.name, url = %t.display_url, error = %e,
                            "sample pass failed; lockwatch_up is 0 until a pass succeeds");
                    } else {
                        tracing::debug!(target_name = %t.name, error = %e, "sample pass failed again");
                    }
                }
                None if !s.up && s.passes > 0 => {
                    tracing::info!(target_name = %t.name, "sampling recovered");
                }
                None => {}
            }
            s.passes += 1;
            s.up = r.error.is_none();
            s.last_error = r.error.clone();
            s.last_duration = r.duration;
            s.last_pass_at = Some(SystemTime::now());
            s.last_truncated = r.truncated;
        });
    }
}
