//! TTL headroom: how much of its TTL a lock still had when its holder renewed or released
//! it, and whether that was a near miss. Pure arithmetic for the tracker (which knows when
//! a hold was last written) and the recorder (which knows the namespace's fraction).
//!
//! The TTL left comes from the last PTTL read of the key when there is one (events mode:
//! a read follows every write), else from the namespace's `ttl` counted from the last write.

/// What the last read of a key said about its expiry, as of now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// This many ms were left (0 once past due).
    Left(i64),
    /// The key had no expiry (PTTL -1): no headroom to speak of.
    Never,
    /// No read to go by: estimate from the namespace's `ttl`.
    Unknown,
}

/// The TTL a lock had left at a renewal or release, and the TTL it was last given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Headroom {
    pub(crate) left_ms: i64,
    pub(crate) ttl_ms: i64,
}

/// The headroom at `now_ms` of a hold last written (acquired or renewed) at `written_ms`
/// (`None`: not seen), in a namespace whose `ttl` is `ns_ttl_ms`, given what the last read
/// said (`read`). With a read and a known write, the TTL given is what the read implies
/// (left + time since the write): the real one, whatever the namespace says.
pub(crate) fn measure(read: Expiry, written_ms: Option<i64>, ns_ttl_ms: i64, now_ms: i64) -> Option<Headroom> {
    let since = written_ms.map(|w| now_ms.saturating_sub(w).max(0));
    match (read, since) {
        (Expiry::Never, _) | (Expiry::Unknown, None) => None,
        (Expiry::Left(left), Some(since)) => Some(Headroom {
            left_ms: left.max(0),
            ttl_ms: left.max(0).saturating_add(since),
        }),
        (Expiry::Left(left), None) => Some(Headroom {
            left_ms: left.max(0),
            ttl_ms: ns_ttl_ms.max(left),
        }),
        (Expiry::Unknown, Some(since)) => Some(Headroom {
            left_ms: ns_ttl_ms.saturating_sub(since).max(0),
            ttl_ms: ns_ttl_ms,
        }),
    }
}

/// Whether `h` leaves less than `fraction` of the TTL: a near miss.
pub(crate) fn near_miss(h: Headroom, fraction: f64) -> bool {
    h.ttl_ms > 0 && (h.left_ms as f64) < fraction * h.ttl_ms as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_gives_the_real_ttl() {
        // Set with 6 s (the namespace says 2 s), released 1 s later: 5 s of 6 s left.
        let h = measure(Expiry::Left(5000), Some(10_000), 2000, 11_000);
        assert_eq!(
            h,
            Some(Headroom {
                left_ms: 5000,
                ttl_ms: 6000
            })
        );
        assert!(!near_miss(h.unwrap_or(Headroom { left_ms: 0, ttl_ms: 0 }), 0.2));
    }

    #[test]
    fn without_a_read_the_namespace_ttl_counts_from_the_last_write() {
        assert_eq!(
            measure(Expiry::Unknown, Some(0), 2000, 1800),
            Some(Headroom {
                left_ms: 200,
                ttl_ms: 2000
            })
        );
        // Past the namespace's ttl (the application set a longer one): nothing left, as far as is known.
        assert_eq!(
            measure(Expiry::Unknown, Some(0), 2000, 2500),
            Some(Headroom {
                left_ms: 0,
                ttl_ms: 2000
            })
        );
        assert_eq!(measure(Expiry::Unknown, None, 2000, 2500), None);
    }

    #[test]
    fn a_key_without_expiry_has_no_headroom() {
        assert_eq!(measure(Expiry::Never, Some(0), 2000, 100), None);
    }

    #[test]
    fn a_read_without_a_seen_write_takes_the_namespace_ttl() {
        assert_eq!(
            measure(Expiry::Left(300), None, 2000, 100),
            Some(Headroom {
                left_ms: 300,
                ttl_ms: 2000
            })
        );
        assert_eq!(
            measure(Expiry::Left(9000), None, 2000, 100),
            Some(Headroom {
                left_ms: 9000,
                ttl_ms: 9000
            })
        );
    }

    #[test]
    fn near_misses_are_below_the_fraction() {
        let h = |left_ms| Headroom { left_ms, ttl_ms: 1000 };
        assert!(near_miss(h(199), 0.2));
        assert!(!near_miss(h(200), 0.2));
        assert!(!near_miss(Headroom { left_ms: 0, ttl_ms: 0 }, 0.2));
    }
}
