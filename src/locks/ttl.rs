//! TTL and age arithmetic of the sampler, as pure functions of milliseconds.
//!
//! `pttl_ms` follows Redis: -2 the key is gone, -1 the key has no expiry, else milliseconds left.

use std::time::Duration;

/// A holder that renews every `renew_every` keeps PTTL above `ttl - renew_every`; below
/// `overdue_below` (that minus a grace) it has missed a renewal and is stalled *now*.
pub(crate) fn renewal_overdue(pttl_ms: i64, overdue_below: Option<Duration>) -> bool {
    match overdue_below {
        Some(below) => pttl_ms >= 0 && (pttl_ms as u128) < below.as_millis(),
        None => false,
    }
}

/// When a lock seen for the first time was acquired, at the latest: a lock set with
/// `ttl` and `pttl_ms` left was set (or last renewed) `ttl - pttl` ago, and acquired no
/// later than that. Without an expiry, or with more left than `ttl`, only `now` is known.
/// Times are milliseconds on the sampler clock, which may go below zero (before start).
pub(crate) fn acquired_no_later_than(now_ms: i64, pttl_ms: i64, ttl: Duration) -> i64 {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    if (0..=ttl_ms).contains(&pttl_ms) {
        now_ms.saturating_sub(ttl_ms - pttl_ms)
    } else {
        now_ms
    }
}

/// Held longer than `max_hold`?
pub(crate) fn held_too_long(age_ms: u64, max_hold: Option<Duration>) -> bool {
    max_hold.is_some_and(|m| u128::from(age_ms) > m.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1000;

    #[test]
    fn overdue_only_below_threshold_and_only_for_expiring_keys() {
        let below = Some(Duration::from_secs(15));
        assert!(!renewal_overdue(29_000, below));
        assert!(!renewal_overdue(15_000, below));
        assert!(renewal_overdue(14_999, below));
        assert!(renewal_overdue(0, below));
        assert!(!renewal_overdue(-1, below), "no TTL is a different problem");
        assert!(!renewal_overdue(-2, below), "gone is not overdue");
        assert!(!renewal_overdue(1, None), "not renewed: never overdue");
    }

    #[test]
    fn acquisition_estimate_is_a_lower_bound_on_age() {
        let ttl = Duration::from_secs(30);
        let s = S as i64;
        assert_eq!(acquired_no_later_than(100 * s, 30_000, ttl), 100 * s);
        assert_eq!(acquired_no_later_than(100 * s, 10_000, ttl), 80 * s);
        assert_eq!(acquired_no_later_than(100 * s, -1, ttl), 100 * s);
        assert_eq!(
            acquired_no_later_than(100 * s, 60_000, ttl),
            100 * s,
            "longer TTL than configured"
        );
        assert_eq!(
            acquired_no_later_than(5 * s, 0, ttl),
            -25 * s,
            "before the sampler started"
        );
    }

    #[test]
    fn too_long_is_strictly_longer() {
        let m = Some(Duration::from_secs(60));
        assert!(!held_too_long(60 * S, m));
        assert!(held_too_long(60 * S + 1, m));
        assert!(!held_too_long(u64::MAX, None));
    }
}
