//! The Prometheus registry and every metric family lockwatch exports.
//!
//! Families are created and their known label values pre-exported at 0 here, once, from
//! the config, so `rate()` works from the first scrape and no label value can come from
//! anywhere but the config. Collectors (the sampler) update them; `/metrics` only encodes.

use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::config::{Config, Notifications};
use crate::vocab::{HoldEnd, Transition};
use crate::vocab::{LineResult, PUSH_SOURCE, UNKNOWN_NAMESPACE, Unreadable};
use crate::vocab::{Op, Outcome};

/// Remaining-TTL buckets (seconds): fine near expiry, where a stalled holder shows up.
const TTL_BUCKETS: &[f64] = &[
    0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// Hold-duration buckets (seconds): from a quick job to a stuck one.
const HOLD_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// All metric families, registered in one registry.
pub struct Metrics {
    registry: Registry,
    // sampler, labels target + namespace
    pub locks_held: IntGaugeVec,
    pub locks_without_ttl: IntGaugeVec,
    pub locks_renewal_overdue: IntGaugeVec,
    pub locks_held_too_long: IntGaugeVec,
    pub lock_held_max_seconds: GaugeVec,
    pub lock_ttl_remaining_seconds: HistogramVec,
    pub lock_handoffs_total: IntCounterVec,
    pub fence_token: GaugeVec,
    pub fence_regressions_total: IntCounterVec,
    /// Labels target, namespace, reason: keys present in a namespace that are not readable locks.
    pub locks_unreadable: IntGaugeVec,
    // lifecycle, labels target + namespace (+ kind / end)
    pub lock_transitions_total: IntCounterVec,
    pub lock_expiry_takeovers_total: IntCounterVec,
    pub lock_hold_duration_seconds: HistogramVec,
    pub notifications_connected: IntGaugeVec,
    /// Label target: keyspace notifications received on lock keys.
    pub notifications_received_total: IntCounterVec,
    /// Label target: lock keys the watcher holds state for (holds and takeover tombstones).
    pub lifecycle_tracked_locks: IntGaugeVec,
    // events from logs and pushes
    /// Labels namespace, op, outcome.
    pub lock_events_total: IntCounterVec,
    /// Labels source, result: lines taken in from each `[[logs]]` source and from pushes.
    pub log_lines_total: IntCounterVec,
    /// Label source: files a `[[logs]]` source is reading (rotated ones being finished included).
    pub log_files: IntGaugeVec,
    // lockwatch itself, label target
    pub up: IntGaugeVec,
    pub sample_duration_seconds: GaugeVec,
    pub sample_errors_total: IntCounterVec,
    pub sample_truncated_total: IntCounterVec,
    pub sample_passes_total: IntCounterVec,
    pub keys_scanned_total: IntCounterVec,
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help)
}

impl Metrics {
    /// Build the registry for `config`: every family registered, every known series at 0.
    pub fn new(config: &Config) -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let tn = &["target", "namespace"];
        let t = &["target"];
        let m = Metrics {
            locks_held: IntGaugeVec::new(
                opts("lockwatch_locks_held", "Lock keys present at the last sample pass."),
                tn,
            )?,
            locks_without_ttl: IntGaugeVec::new(
                opts(
                    "lockwatch_locks_without_ttl",
                    "Lock keys with no expiry (PTTL -1): never freed if the holder dies.",
                ),
                tn,
            )?,
            locks_renewal_overdue: IntGaugeVec::new(
                opts(
                    "lockwatch_locks_renewal_overdue",
                    "Held locks whose remaining TTL shows the holder missed a renewal (PTTL < ttl - renew_every - renew_grace).",
                ),
                tn,
            )?,
            locks_held_too_long: IntGaugeVec::new(
                opts(
                    "lockwatch_locks_held_too_long",
                    "Locks held by the same owner longer than max_hold.",
                ),
                tn,
            )?,
            lock_held_max_seconds: GaugeVec::new(
                opts(
                    "lockwatch_lock_held_max_seconds",
                    "Age of the longest-held lock (same owner since first seen).",
                ),
                tn,
            )?,
            lock_ttl_remaining_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "lockwatch_lock_ttl_remaining_seconds",
                    "Remaining TTL of each held lock with an expiry, observed once per sample pass.",
                )
                .buckets(TTL_BUCKETS.to_vec()),
                tn,
            )?,
            lock_handoffs_total: IntCounterVec::new(
                opts(
                    "lockwatch_lock_handoffs_total",
                    "Lock owner changed between two sample passes.",
                ),
                tn,
            )?,
            fence_token: GaugeVec::new(
                opts(
                    "lockwatch_fence_token",
                    "Highest fencing counter value seen at the last pass.",
                ),
                tn,
            )?,
            fence_regressions_total: IntCounterVec::new(
                opts(
                    "lockwatch_fence_regressions_total",
                    "A fencing counter went backwards or vanished.",
                ),
                tn,
            )?,
            locks_unreadable: IntGaugeVec::new(
                opts(
                    "lockwatch_locks_unreadable",
                    "Keys matching a namespace's pattern that could not be read as locks at the last pass, by reason.",
                ),
                &["target", "namespace", "reason"],
            )?,
            lock_transitions_total: IntCounterVec::new(
                opts(
                    "lockwatch_lock_transitions_total",
                    "Lock state changes Redis performed, from keyspace notifications.",
                ),
                &["target", "namespace", "kind"],
            )?,
            lock_expiry_takeovers_total: IntCounterVec::new(
                opts(
                    "lockwatch_lock_expiry_takeovers_total",
                    "Locks that expired or were evicted (not released) and were re-acquired by a different owner within one ttl.",
                ),
                tn,
            )?,
            lock_hold_duration_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "lockwatch_lock_hold_duration_seconds",
                    "Time from acquisition to release or expiry, for holds whose acquisition was seen.",
                )
                .buckets(HOLD_BUCKETS.to_vec()),
                &["target", "namespace", "end"],
            )?,
            notifications_connected: IntGaugeVec::new(
                opts(
                    "lockwatch_notifications_connected",
                    "1 while subscribed to the target's keyspace notifications.",
                ),
                t,
            )?,
            notifications_received_total: IntCounterVec::new(
                opts(
                    "lockwatch_notifications_received_total",
                    "Keyspace notifications received on lock keys.",
                ),
                t,
            )?,
            lifecycle_tracked_locks: IntGaugeVec::new(
                opts(
                    "lockwatch_lifecycle_tracked_locks",
                    "Lock keys the lifecycle watcher keeps state for: holds in progress and recent expiries.",
                ),
                t,
            )?,
            lock_events_total: IntCounterVec::new(
                opts(
                    "lockwatch_lock_events_total",
                    "Lock events reported by applications (classified log lines and pushed events).",
                ),
                &["namespace", "op", "outcome"],
            )?,
            log_lines_total: IntCounterVec::new(
                opts(
                    "lockwatch_log_lines_total",
                    "Log lines taken in, by what they were: a lock event, ignored, or malformed.",
                ),
                &["source", "result"],
            )?,
            log_files: IntGaugeVec::new(
                opts(
                    "lockwatch_log_files",
                    "Files a log source is reading, rotated files still being finished included.",
                ),
                &["source"],
            )?,
            up: IntGaugeVec::new(
                opts("lockwatch_up", "1 when the last sample pass of the target succeeded."),
                t,
            )?,
            sample_duration_seconds: GaugeVec::new(
                opts("lockwatch_sample_duration_seconds", "Duration of the last sample pass."),
                t,
            )?,
            sample_errors_total: IntCounterVec::new(opts("lockwatch_sample_errors_total", "Failed sample passes."), t)?,
            sample_truncated_total: IntCounterVec::new(
                opts(
                    "lockwatch_sample_truncated_total",
                    "Sample passes cut short by sample_budget.",
                ),
                t,
            )?,
            sample_passes_total: IntCounterVec::new(
                opts(
                    "lockwatch_sample_passes_total",
                    "Sample passes run, failed and truncated ones included.",
                ),
                t,
            )?,
            keys_scanned_total: IntCounterVec::new(opts("lockwatch_keys_scanned_total", "Keys returned by SCAN."), t)?,
            registry,
        };
        m.register_all()?;
        m.pre_export(config);
        let build_info = IntGaugeVec::new(
            opts(
                "lockwatch_build_info",
                "Always 1; the version label says which lockwatch runs.",
            ),
            &["version"],
        )?;
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        m.registry.register(Box::new(build_info))?;
        #[cfg(target_os = "linux")]
        m.registry
            .register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
        Ok(m)
    }

    fn register_all(&self) -> Result<(), prometheus::Error> {
        let r = &self.registry;
        r.register(Box::new(self.locks_held.clone()))?;
        r.register(Box::new(self.locks_without_ttl.clone()))?;
        r.register(Box::new(self.locks_renewal_overdue.clone()))?;
        r.register(Box::new(self.locks_held_too_long.clone()))?;
        r.register(Box::new(self.lock_held_max_seconds.clone()))?;
        r.register(Box::new(self.lock_ttl_remaining_seconds.clone()))?;
        r.register(Box::new(self.lock_handoffs_total.clone()))?;
        r.register(Box::new(self.fence_token.clone()))?;
        r.register(Box::new(self.fence_regressions_total.clone()))?;
        r.register(Box::new(self.locks_unreadable.clone()))?;
        r.register(Box::new(self.lock_transitions_total.clone()))?;
        r.register(Box::new(self.lock_expiry_takeovers_total.clone()))?;
        r.register(Box::new(self.lock_hold_duration_seconds.clone()))?;
        r.register(Box::new(self.notifications_connected.clone()))?;
        r.register(Box::new(self.notifications_received_total.clone()))?;
        r.register(Box::new(self.lifecycle_tracked_locks.clone()))?;
        r.register(Box::new(self.lock_events_total.clone()))?;
        r.register(Box::new(self.log_lines_total.clone()))?;
        r.register(Box::new(self.log_files.clone()))?;
        r.register(Box::new(self.up.clone()))?;
        r.register(Box::new(self.sample_duration_seconds.clone()))?;
        r.register(Box::new(self.sample_errors_total.clone()))?;
        r.register(Box::new(self.sample_truncated_total.clone()))?;
        r.register(Box::new(self.sample_passes_total.clone()))?;
        r.register(Box::new(self.keys_scanned_total.clone()))?;
        Ok(())
    }

    fn pre_export(&self, config: &Config) {
        let namespaces = config
            .namespaces
            .iter()
            .map(|n| n.name.as_str())
            .chain([UNKNOWN_NAMESPACE]);
        for ns in namespaces {
            for op in Op::ALL {
                for outcome in Outcome::ALL {
                    self.lock_events_total
                        .with_label_values(&[ns, op.as_str(), outcome.as_str()]);
                }
            }
        }
        let sources = config.logs.iter().map(|l| l.name.as_str()).chain([PUSH_SOURCE]);
        for source in sources {
            for result in LineResult::ALL {
                self.log_lines_total.with_label_values(&[source, result.as_str()]);
            }
        }
        for l in config.logs.iter().filter(|l| l.path != "-") {
            self.log_files.with_label_values(&[l.name.as_str()]).set(0);
        }
        for t in &config.targets {
            let target = t.name.as_str();
            self.up.with_label_values(&[target]).set(0);
            self.sample_duration_seconds.with_label_values(&[target]).set(0.0);
            self.sample_errors_total.with_label_values(&[target]);
            self.sample_truncated_total.with_label_values(&[target]);
            self.sample_passes_total.with_label_values(&[target]);
            self.keys_scanned_total.with_label_values(&[target]);
            let watched = t.notifications != Notifications::Off;
            if watched {
                self.notifications_connected.with_label_values(&[target]).set(0);
                self.notifications_received_total.with_label_values(&[target]);
                self.lifecycle_tracked_locks.with_label_values(&[target]).set(0);
            }
            for ns in &config.namespaces {
                let l = [target, ns.name.as_str()];
                self.locks_held.with_label_values(&l);
                self.locks_without_ttl.with_label_values(&l);
                self.locks_renewal_overdue.with_label_values(&l);
                self.locks_held_too_long.with_label_values(&l);
                self.lock_held_max_seconds.with_label_values(&l);
                self.lock_ttl_remaining_seconds.with_label_values(&l);
                self.lock_handoffs_total.with_label_values(&l);
                if ns.fence_pattern.is_some() {
                    self.fence_token.with_label_values(&l);
                    self.fence_regressions_total.with_label_values(&l);
                }
                if watched {
                    for kind in Transition::ALL {
                        self.lock_transitions_total
                            .with_label_values(&[target, ns.name.as_str(), kind.as_str()]);
                    }
                    self.lock_expiry_takeovers_total.with_label_values(&l);
                    for end in HoldEnd::ALL {
                        self.lock_hold_duration_seconds
                            .with_label_values(&[target, ns.name.as_str(), end.as_str()]);
                    }
                }
                for reason in Unreadable::ALL {
                    self.locks_unreadable
                        .with_label_values(&[target, ns.name.as_str(), reason.as_str()]);
                }
            }
        }
    }

    /// The text exposition format of everything registered.
    pub fn encode(&self) -> Result<String, prometheus::Error> {
        let families = self.registry.gather();
        let mut buf = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&families, &mut buf)?;
        String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}
