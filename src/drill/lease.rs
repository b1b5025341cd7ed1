//! The run's lease: every key a run creates expires, so nothing outlives a drill that was
//! killed without its rollback. Locks carry their own TTL; the fencing counters and the
//! fenced resources are created with the lease as their expiry and renewed by a task while
//! the run lives (a run waiting at an interactive prompt keeps its keys).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

/// What a lease adds to the longest TTL the run sets (B's lock: four times the namespace's).
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// How long a key of a run whose namespace has `ttl` outlives the drill at most: longer
/// than B's lock (4 × ttl), so no key of the run outlives it.
pub(crate) fn lease(ttl: Duration) -> Duration {
    ttl.saturating_mul(4).saturating_add(LEASE_MARGIN)
}

/// The keys under lease and the task that renews them.
pub(crate) struct Lease {
    pub(crate) duration: Duration,
    keys: Arc<Mutex<Vec<String>>>,
    renewer: JoinHandle<()>,
}

impl Lease {
    /// Start renewing, every third of `duration`, on `conn`.
    pub(crate) fn start(conn: MultiplexedConnection, duration: Duration) -> Lease {
        let keys: Arc<Mutex<Vec<String>>> = Arc::default();
        let renewer = tokio::spawn(renew(conn, duration, keys.clone()));
        Lease {
            duration,
            keys,
            renewer,
        }
    }

    /// Keys to keep alive from now on (created with the lease as their expiry).
    pub(crate) fn hold(&self, keys: impl IntoIterator<Item = String>) {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).extend(keys);
    }

    /// Stop renewing: the rollback deletes the keys, or they expire within the lease.
    pub(crate) fn stop(&self) {
        self.renewer.abort();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew(mut conn: MultiplexedConnection, duration: Duration, keys: Arc<Mutex<Vec<String>>>) {
    let every = (duration / 3).max(Duration::from_millis(500));
    let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::time::sleep(every).await;
        let now: Vec<String> = keys.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for key in now {
            // A key already gone stays gone: PEXPIRE does not create it.
            let renewed: redis::RedisResult<i64> = redis::cmd("PEXPIRE").arg(&key).arg(ms).query_async(&mut conn).await;
            if let Err(e) = renewed {
                tracing::debug!(key = %key, error = %e, "renewing the drill's lease failed; the key expires within it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_outlasts_every_ttl_of_the_run() {
        assert_eq!(lease(Duration::from_secs(1)), Duration::from_secs(9));
        assert_eq!(lease(Duration::from_millis(500)), Duration::from_secs(7));
        assert!(lease(Duration::from_secs(120)) > Duration::from_secs(480));
    }
}
