//! `LockContentionSustained`: workers that keep giving up waiting for a namespace's locks.
//! Contention (an acquisition `busy` or `timeout`) is the lock working, so no failure alert
//! reads it; this one fires only on the acquisitions that gave up (`timeout`), at least
//! `min_contention_timeouts` in 15 minutes and still so 15 minutes later — a lock nobody
//! gets for minutes. A `busy` that moves on (another node runs the job) never counts.

use super::alerts::{Alert, Dashboard, braces, either, listed, push_alert, variants};
use crate::config::Config;

/// The alert, one branch per threshold (events carry no target: by job and namespace).
pub(super) fn alert(out: &mut String, config: &Config) {
    let variants = variants(config, |t| t.min_contention_timeouts);
    let branches = variants
        .iter()
        .map(|(sel, min)| {
            let sel = if sel.is_empty() {
                r#"op="acquire", outcome="timeout""#.to_string()
            } else {
                format!(r#"op="acquire", outcome="timeout", {sel}"#)
            };
            format!(
                "sum by (job, instance, namespace) (increase(lockwatch_lock_events_total{}[15m])) >= {min}",
                braces(&sel)
            )
        })
        .collect();
    let mins = listed(&variants, |min| min.to_string());
    push_alert(
        out,
        &Alert {
            name: "LockContentionSustained",
            expr: either(branches),
            for_: "15m",
            severity: "warning",
            window: None,
            summary: "Workers keep giving up waiting for locks in namespace {{ $labels.namespace }}",
            description: format!(
                "{{{{ $value | humanize }}}} acquisitions in namespace {{{{ $labels.namespace }}}} (lockwatch job {{{{ $labels.job }}}}) gave up waiting for a lock someone else held (outcome timeout) in the last 15 minutes, at or above the threshold ({mins} in 15 minutes) for 15 minutes now. Contention is the lock working, but work that keeps giving up is not done: a holder that does not let go, a lock without TTL, more workers than the lock serves, or a wait shorter than the hold."
            ),
            dashboard: Dashboard::Namespace { target: false },
        },
        &config.alerts,
    );
}
