//! The near-miss rules: the share of renewals and releases that left less than
//! `headroom_fraction` of the lock's TTL (recorded per window), and `LockHeadroomLow`, which
//! fires on that share sustained over two windows with a minimum of near misses — before any
//! lock has expired under its holder.
//!
//! The exporter decides what a near miss is, against each lock's real TTL; the histogram's
//! buckets are absolute seconds and could not say "a fifth of this lock's TTL".

use super::alerts::{Alert, Dashboard, braces, either, listed, push_alert, variants};
use super::{WINDOWS, rule};
use crate::config::Config;

/// Recorded name of the near-miss share over window `w`.
fn ratio(w: &str) -> String {
    format!("target_namespace:lockwatch_lock_near_misses:ratio_rate{w}")
}

/// The recording rules: near misses ÷ renewals and releases measured, per window.
pub(super) fn recording(out: &mut String) {
    for w in WINDOWS {
        rule(
            out,
            "record",
            &ratio(w),
            &format!(
                "sum by (job, instance, target, namespace) (rate(lockwatch_lock_near_misses_total[{w}]))\n/\n(sum by (job, instance, target, namespace) (rate(lockwatch_lock_ttl_headroom_seconds_count[{w}])) > 0)"
            ),
        );
    }
}

/// `LockHeadroomLow`: a fast and a slow pair, like the ratio alerts, one severity lower
/// (nothing has been lost yet).
pub(super) fn alert(out: &mut String, config: &Config) {
    let variants = variants(config, |t| (t.near_miss_budget, t.min_bad_events, t.headroom_fraction));
    let thresholds = listed(&variants, |(budget, min, fraction)| {
        format!("{budget}, a near miss being less than {fraction} of the TTL left, at least {min} near misses")
    });
    for (long, short, factor, for_, severity, window) in [
        ("1h", "5m", 14.4, "2m", "warning", "fast"),
        ("6h", "30m", 6.0, "15m", "info", "slow"),
    ] {
        let branches = variants
            .iter()
            .map(|(sel, (budget, min, _))| {
                let s = braces(sel);
                format!(
                    "{ratio_long}{s} > ({factor} * {budget})\nand\n{ratio_short}{s} > ({factor} * {budget})\nand\nsum by (job, instance, target, namespace) (increase(lockwatch_lock_near_misses_total{s}[{long}])) >= {min}",
                    ratio_long = ratio(long),
                    ratio_short = ratio(short),
                )
            })
            .collect();
        push_alert(
            out,
            &Alert {
                name: "LockHeadroomLow",
                expr: either(branches),
                for_,
                severity,
                window: Some(window),
                summary: "Lock holders renew or release close to their TTL in namespace {{ $labels.namespace }}",
                description: format!(
                    "{{{{ $value | humanizePercentage }}}} of renewals and releases in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} came with little of the lock's TTL left over the last {long} (and over the last {short}), above {factor} × the near-miss budget (budget {thresholds}, in {long}). Holders run close to their TTL: a slightly longer pause lets a held lock expire and another worker take it."
                ),
                dashboard: Dashboard::Namespace { target: true },
            },
            &config.alerts,
        );
    }
}
