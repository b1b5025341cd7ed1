//! The lifecycle watcher's metric families, registered for every target and pre-exported
//! for the targets whose notifications are not off, and each watcher's handles resolved once.

use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use crate::config::{Config, NamespaceConfig, Notifications};
use crate::metrics::Registry;
use crate::vocab::{HeadroomAt, HoldEnd, Method, Transition, Verification, metric};

/// Hold-duration buckets (seconds): from a quick job to a stuck one.
const HOLD_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// TTL headroom and renewal-interval buckets (seconds): lock TTLs run from a few hundred
/// milliseconds to minutes, so a millisecond of headroom left, a second of a 30 s lock and a
/// renewal every few minutes each fall in a bucket of their own (1-2.5-5 below a second, then
/// steps of about 1.5×).
pub(crate) const HEADROOM_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0,
    60.0, 90.0, 120.0, 300.0, 600.0,
];

/// The watcher's families.
#[derive(Clone)]
pub(crate) struct WatcherMetrics {
    /// Labels target, namespace, kind.
    lock_transitions_total: IntCounterVec,
    /// Labels target, namespace.
    lock_expiry_takeovers_total: IntCounterVec,
    /// Labels target, namespace, end.
    lock_hold_duration_seconds: HistogramVec,
    /// Labels target, namespace, at.
    lock_ttl_headroom_seconds: HistogramVec,
    /// Labels target, namespace.
    lock_renewal_interval_seconds: HistogramVec,
    /// Labels target, namespace, at.
    lock_near_misses_total: IntCounterVec,
    /// Label target: subscribed and verified.
    notifications_connected: IntGaugeVec,
    /// Label target: the pub/sub subscription is up, receiving or not.
    notifications_subscribed: IntGaugeVec,
    /// Labels target, state: 1 for the verification state the target is in.
    notifications_verification: IntGaugeVec,
    /// Labels target, method: 1 for how the target's notifications are verified.
    notifications_verification_method: IntGaugeVec,
    /// Label target: keyspace notifications received on lock keys.
    notifications_received_total: IntCounterVec,
    /// Label target: lock keys the watcher holds state for (holds and takeover tombstones).
    lifecycle_tracked_locks: IntGaugeVec,
    /// Label target: `set`s of known locks counted without reading their owner.
    owner_reads_skipped_total: IntCounterVec,
}

/// Handles of one namespace, resolved once.
pub(crate) struct NsMetrics {
    pub(crate) transitions: [IntCounter; 5],
    pub(crate) takeovers: IntCounter,
    pub(crate) hold: [Histogram; 2],
    /// By `HeadroomAt` index.
    pub(crate) headroom: [Histogram; 2],
    pub(crate) renewal_interval: Histogram,
    /// By `HeadroomAt` index.
    pub(crate) near_misses: [IntCounter; 2],
}

/// Handles of one target's watcher.
pub(crate) struct TargetMetrics {
    pub(crate) namespaces: Vec<NsMetrics>,
    pub(crate) connected: IntGauge,
    pub(crate) subscribed: IntGauge,
    /// By `Verification` index.
    pub(crate) verification: [IntGauge; Verification::ALL.len()],
    /// By `Method` index.
    pub(crate) method: [IntGauge; Method::ALL.len()],
    pub(crate) received: IntCounter,
    pub(crate) tracked: IntGauge,
    pub(crate) owner_reads_skipped: IntCounter,
}

impl WatcherMetrics {
    /// Register the families in `r`, every known series of watched targets at 0.
    pub fn register(r: &Registry, config: &Config) -> Result<Self, prometheus::Error> {
        let tn = &["target", "namespace"];
        let t = &["target"];
        let m = WatcherMetrics {
            lock_transitions_total: r.counters(
                metric::LOCK_TRANSITIONS_TOTAL,
                "Lock state changes Redis performed, from keyspace notifications.",
                &["target", "namespace", "kind"],
            )?,
            lock_expiry_takeovers_total: r.counters(
                metric::LOCK_EXPIRY_TAKEOVERS_TOTAL,
                "Locks that expired or were evicted (not released) and were re-acquired by a different owner within one ttl.",
                tn,
            )?,
            lock_hold_duration_seconds: r.histograms(
                metric::LOCK_HOLD_DURATION_SECONDS,
                "Time from acquisition to release or expiry, for holds whose acquisition was seen.",
                HOLD_BUCKETS,
                &["target", "namespace", "end"],
            )?,
            lock_ttl_headroom_seconds: r.histograms(
                metric::LOCK_TTL_HEADROOM_SECONDS,
                "TTL a lock still had when its holder renewed or released it (from the last PTTL read of the key, else the namespace's ttl since the last write).",
                HEADROOM_BUCKETS,
                &["target", "namespace", "at"],
            )?,
            lock_renewal_interval_seconds: r.histograms(
                metric::LOCK_RENEWAL_INTERVAL_SECONDS,
                "Time between consecutive renewals of one hold, acquisition to first renewal included.",
                HEADROOM_BUCKETS,
                tn,
            )?,
            lock_near_misses_total: r.counters(
                metric::LOCK_NEAR_MISSES_TOTAL,
                "Renewals and releases with less than the namespace's headroom_fraction of the lock's TTL left.",
                &["target", "namespace", "at"],
            )?,
            notifications_connected: r.int_gauges(
                metric::NOTIFICATIONS_CONNECTED,
                "1 while subscribed to the target's keyspace notifications and they are verified to arrive: the flags complete where CONFIG GET answers, and no repairs without a single notification.",
                t,
            )?,
            notifications_subscribed: r.int_gauges(
                metric::NOTIFICATIONS_SUBSCRIBED,
                "1 while the pub/sub subscription to the target's keyspace notifications is up, whether or not notifications arrive (subscribed 1 and connected 0: subscribed but not receiving).",
                t,
            )?,
            notifications_verification: r.int_gauges(
                metric::NOTIFICATIONS_VERIFICATION,
                "1 for the state of the target's keyspace notifications: verified (shown to arrive: events mode), pending, not_subscribed, pubsub_refused, flags_missing, events_missing or silent (scan mode in every state but verified).",
                &["target", "state"],
            )?,
            notifications_verification_method: r.int_gauges(
                metric::NOTIFICATIONS_VERIFICATION_METHOD,
                "1 for how the target's keyspace notifications are verified: canary (a key of lockwatch's own written every 10 s whose events must arrive), flags (the canary write is refused: CONFIG GET), passive (neither: lock notifications that reads agree with).",
                &["target", "method"],
            )?,
            notifications_received_total: r.counters(
                metric::NOTIFICATIONS_RECEIVED_TOTAL,
                "Keyspace notifications received on lock keys.",
                t,
            )?,
            lifecycle_tracked_locks: r.int_gauges(
                metric::LIFECYCLE_TRACKED_LOCKS,
                "Lock keys the lifecycle watcher keeps state for: holds in progress and recent expiries.",
                t,
            )?,
            owner_reads_skipped_total: r.counters(
                metric::OWNER_READS_SKIPPED_TOTAL,
                "Rewrites (set) of held locks counted as renewals without reading their owner: beyond 5,000 owner reads a second per target (a changed owner is then found by the lock's next re-read, within reconcile_interval).",
                t,
            )?,
        };
        for target in config.targets.iter().filter(|t| t.notifications != Notifications::Off) {
            // Resolving the handles creates every series at 0.
            let h = m.for_target(&target.name, &config.namespaces);
            h.connected.set(0);
            h.subscribed.set(0);
            h.verification[Verification::NotSubscribed.index()].set(1);
            h.method[Method::Canary.index()].set(1);
        }
        Ok(m)
    }

    /// The handles of target `t`'s watcher.
    pub(crate) fn for_target(&self, t: &str, namespaces: &[NamespaceConfig]) -> TargetMetrics {
        TargetMetrics {
            namespaces: namespaces
                .iter()
                .map(|n| {
                    let ns = n.name.as_str();
                    NsMetrics {
                        transitions: Transition::ALL
                            .map(|k| self.lock_transitions_total.with_label_values(&[t, ns, k.as_str()])),
                        takeovers: self.lock_expiry_takeovers_total.with_label_values(&[t, ns]),
                        hold: HoldEnd::ALL
                            .map(|e| self.lock_hold_duration_seconds.with_label_values(&[t, ns, e.as_str()])),
                        headroom: HeadroomAt::ALL
                            .map(|a| self.lock_ttl_headroom_seconds.with_label_values(&[t, ns, a.as_str()])),
                        renewal_interval: self.lock_renewal_interval_seconds.with_label_values(&[t, ns]),
                        near_misses: HeadroomAt::ALL
                            .map(|a| self.lock_near_misses_total.with_label_values(&[t, ns, a.as_str()])),
                    }
                })
                .collect(),
            connected: self.notifications_connected.with_label_values(&[t]),
            subscribed: self.notifications_subscribed.with_label_values(&[t]),
            verification: Verification::ALL
                .map(|v| self.notifications_verification.with_label_values(&[t, v.as_str()])),
            method: Method::ALL.map(|m| {
                self.notifications_verification_method
                    .with_label_values(&[t, m.as_str()])
            }),
            received: self.notifications_received_total.with_label_values(&[t]),
            tracked: self.lifecycle_tracked_locks.with_label_values(&[t]),
            owner_reads_skipped: self.owner_reads_skipped_total.with_label_values(&[t]),
        }
    }
}
