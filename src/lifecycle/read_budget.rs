//! The budget of owner reads after a `set` of a lock already known (one `MGET` key each):
//! at most `OWNER_READS_PER_S` a second per target, a second's worth at once. Beyond it, such a
//! `set` is counted as a renewal without a read (and counted as skipped): the Redis work a
//! burst of rewrites of held locks makes lockwatch add stays bounded. Reads of keys not known
//! yet (acquisitions, their owner and TTL) are never skipped.

use std::time::Instant;

/// Owner reads a second after `set`s of known locks, per target.
pub(crate) const OWNER_READS_PER_S: f64 = 5_000.0;

/// A token bucket of owner reads.
pub(crate) struct OwnerReads {
    tokens: f64,
    at: Instant,
}

impl OwnerReads {
    pub(crate) fn new(now: Instant) -> Self {
        OwnerReads {
            tokens: OWNER_READS_PER_S,
            at: now,
        }
    }

    /// Whether one more owner read may be sent at `now`.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * OWNER_READS_PER_S;
        self.tokens = (self.tokens + refill).min(OWNER_READS_PER_S);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_of_reads_at_once_then_the_rate() {
        let t0 = Instant::now();
        let mut b = OwnerReads::new(t0);
        let first = (0..20_000).filter(|_| b.take(t0)).count();
        assert_eq!(first, OWNER_READS_PER_S as usize);
        let later = t0 + Duration::from_millis(100);
        let more = (0..20_000).filter(|_| b.take(later)).count();
        assert_eq!(more, (OWNER_READS_PER_S / 10.0) as usize);
        // Idle for a minute: still a second's worth, no more.
        let idle = t0 + Duration::from_secs(60);
        assert_eq!((0..20_000).filter(|_| b.take(idle)).count(), OWNER_READS_PER_S as usize);
    }
}
