//! Simulated lock users for the demo: they take, renew and release real Redis locks with
//! the usual scripts, and now and then stall past the TTL so that expiry takeovers and
//! "lock not owned" failures really happen. Their failures go to a logfmt log file, each
//! line with the job's trace and span ids, as an instrumented service writes them.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use crate::access::scripts::{LockScripts, acquire, next_fence};

/// A small xorshift generator: the demo needs variety, not statistics.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn seeded(salt: u64) -> Self {
        use std::hash::{BuildHasher, RandomState};
        Rng(RandomState::new().hash_one(salt) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform-ish in `lo..hi` (milliseconds or indices).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// The application log the workers write, in logfmt.
#[derive(Clone)]
pub(crate) struct AppLog(Arc<Mutex<std::fs::File>>);

impl AppLog {
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        Ok(AppLog(Arc::new(Mutex::new(std::fs::File::create(path)?))))
    }
    fn line(&self, level: &str, msg: &str, key: &str, extra: &str, trace: &str) {
        let ts = humantime_now();
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(f, "time={ts} level={level} msg=\"{msg}\" key={key}{extra}{trace}");
    }
}

fn humantime_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// How one kind of worker behaves.
#[derive(Clone)]
pub(crate) struct Profile {
    pub(crate) label: &'static str,
    /// Lock key prefix; the job id follows.
    pub(crate) prefix: &'static str,
    pub(crate) fence_prefix: Option<&'static str>,
    pub(crate) jobs: u64,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    /// Hold time range in milliseconds.
    pub(crate) hold_ms: (u64, u64),
    /// Chance (percent) that a hold stalls past the TTL.
    pub(crate) stall_percent: u64,
    /// Phrase the application uses in its log messages ("run lock", "approval lock"…).
    pub(crate) phrase: &'static str,
}

/// Run one worker until `stop`.
pub(crate) async fn run(worker: String, p: Profile, mut conn: ConnectionManager, log: AppLog, stop: CancellationToken) {
    let mut rng = Rng::seeded(worker.len() as u64 ^ p.jobs);
    let scripts = LockScripts::default();
    let mut n = 0u64;
    while !stop.is_cancelled() {
        n += 1;
        let key = format!("{}{}", p.prefix, rng.range(0, p.jobs));
        let token = format!("{worker}-{n}-{:08x}", rng.next() as u32);
        // The job's trace, as an OpenTelemetry-instrumented worker would log it.
        let trace = format!(
            " trace_id={:016x}{:016x} span_id={:016x}",
            rng.next(),
            rng.next(),
            rng.next()
        );
        match acquire(&mut conn, &key, &token, p.ttl).await {
            Ok(true) => {}
            Ok(false) => {
                log.line("INFO", &format!("{} busy, will retry", p.phrase), &key, "", &trace);
                pause(&stop, Duration::from_millis(rng.range(300, 900))).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(error = %e, "demo worker: redis error");
                pause(&stop, Duration::from_secs(1)).await;
                continue;
            }
        }
        if let Some(fp) = p.fence_prefix {
            let _ = next_fence(&mut conn, &format!("{fp}{}", &key[p.prefix.len()..])).await;
        }
        let hold = Duration::from_millis(rng.range(p.hold_ms.0, p.hold_ms.1));
        let stall = rng.chance(p.stall_percent);
        let mut still_owner = true;
        if stall {
            tracing::info!(worker = %worker, key = %key, "demo: worker stalls past the TTL (like a long GC pause)");
            pause(&stop, p.ttl + Duration::from_millis(rng.range(1000, 3000))).await;
        } else {
            let mut left = hold;
            while !left.is_zero() && !stop.is_cancelled() {
                let step = p.renew_every.unwrap_or(left).min(left);
                pause(&stop, step).await;
                left = left.saturating_sub(step);
                if p.renew_every.is_some()
                    && !left.is_zero()
                    && !renewed(&scripts, &mut conn, &key, &token, p.ttl).await
                {
                    still_owner = false;
                    break;
                }
            }
        }
        if stall && p.renew_every.is_some() && !renewed(&scripts, &mut conn, &key, &token, p.ttl).await {
            log.line(
                "WARN",
                &format!("{} renewal failed", p.phrase),
                &key,
                " error=\"lock not owned\"",
                &trace,
            );
            still_owner = false;
        }
        let released = scripts.release(&mut conn, &key, &token).await.unwrap_or(false);
        if !released {
            let extra = if still_owner {
                " error=\"lock not owned\""
            } else {
                " error=\"token mismatch\""
            };
            log.line("ERROR", &format!("{} release failed", p.phrase), &key, extra, &trace);
        }
        pause(&stop, Duration::from_millis(rng.range(100, 600))).await;
    }
}

/// Compare-and-pexpire; false when the lock is no longer ours (or Redis failed).
async fn renewed(scripts: &LockScripts, conn: &mut ConnectionManager, key: &str, token: &str, ttl: Duration) -> bool {
    scripts.renew(conn, key, token, ttl).await.unwrap_or(false)
}

async fn pause(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(d) => {}
    }
}
