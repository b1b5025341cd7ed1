//! `lockwatch discover`: which keys of a live Redis look like locks. A SCAN sample of every
//! primary under a budget of keys per second and in total (never `KEYS`), each key's type,
//! PTTL and value shape read through `access::survey`, grouped into patterns (`family`),
//! judged (`judge`) and printed with a ready `[[namespace]]` config (`render`). Read-only;
//! values are never kept or printed, only their shapes.

mod family;
mod judge;
mod render;
mod shape;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::access::{connect, survey};
use crate::config::TargetConfig;

pub use judge::{Pattern, Verdict};
pub use render::{Format, quote, render};

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot read Redis at {url}: {source}")]
    Redis { url: String, source: redis::RedisError },
    #[error("Redis at {url} did not answer within {secs}s")]
    Timeout { url: String, secs: u64 },
}

/// How much of the keyspace to walk, and how fast.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Keys per second, at most.
    pub rate: u64,
    /// Keys in all, at most (shared among a cluster's primaries).
    pub max_keys: u64,
}

/// What the walk covered.
#[derive(Debug, Clone, Serialize)]
pub struct Walked {
    pub primaries: usize,
    /// `DBSIZE` summed over the primaries when the walk began.
    pub keys_in_db: u64,
    /// Keys SCAN returned (a key may come twice).
    pub keys_scanned: u64,
    /// Keys read (the others were gone by then).
    pub keys_read: u64,
    /// Whether every primary's walk reached its end.
    pub complete: bool,
    pub elapsed_ms: u64,
    pub rate: u64,
    pub max_keys: u64,
    /// Keys of patterns past the number kept, not judged.
    pub unsorted: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub target: String,
    pub url: String,
    pub walked: Walked,
    /// Lock families first, then fencing counters, then what is not a lock.
    pub patterns: Vec<Pattern>,
}

/// Keys asked of one SCAN page, at most.
const PAGE: u64 = 500;
/// Pages being read at once.
const IN_FLIGHT: usize = 4;

type PageRead = Result<redis::RedisResult<Vec<survey::Sampled>>, tokio::task::JoinError>;

/// A page's keys into the census.
fn take(done: Option<PageRead>, census: &mut family::Census, walked: &mut Walked) -> redis::RedisResult<()> {
    let sampled = match done {
        Some(Ok(read)) => read?,
        Some(Err(e)) => {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "page read failed",
                e.to_string(),
            )));
        }
        None => return Ok(()),
    };
    for s in &sampled {
        walked.keys_read += 1;
        census.add(s);
    }
    Ok(())
}

/// Walk `target` within `budget` and judge what was found.
pub async fn run(target: &TargetConfig, budget: Budget) -> Result<Report, DiscoverError> {
    let url = target.display_url.clone();
    let fail = |source| DiscoverError::Redis {
        url: url.clone(),
        source,
    };
    let mut conns = tokio::time::timeout(connect::TIMEOUT, connect::primaries(target))
        .await
        .map_err(|_| DiscoverError::Timeout {
            url: url.clone(),
            secs: connect::TIMEOUT.as_secs(),
        })?
        .map_err(fail)?;
    let mut census = family::Census::default();
    let started = Instant::now();
    let mut walked = Walked {
        primaries: conns.len(),
        keys_in_db: 0,
        keys_scanned: 0,
        keys_read: 0,
        complete: true,
        elapsed_ms: 0,
        rate: budget.rate,
        max_keys: budget.max_keys,
        unsorted: 0,
    };
    for (_, conn) in conns.iter_mut() {
        walked.keys_in_db += survey::dbsize(conn).await.map_err(fail)?;
    }
    let rate = budget.rate.max(1) as f64;
    let count = conns.len() as u64;
    let mut reads = tokio::task::JoinSet::new();
    for (i, (_, conn)) in conns.iter_mut().enumerate() {
        // Each primary's share of what is left of the total.
        let share = (budget.max_keys - walked.keys_scanned.min(budget.max_keys)) / (count - i as u64);
        let mut scanned = 0u64;
        let mut cursor = 0u64;
        loop {
            let ask = PAGE.min(share - scanned.min(share)).max(1);
            let (next, keys) = survey::page(conn, cursor, usize::try_from(ask).unwrap_or(1))
                .await
                .map_err(fail)?;
            scanned += keys.len() as u64;
            walked.keys_scanned += keys.len() as u64;
            // Each page read on its own task, the next SCAN meanwhile; a few at a time.
            let mut reader = conn.clone();
            reads.spawn(async move { survey::sample(&mut reader, keys).await });
            while reads.len() >= IN_FLIGHT {
                take(reads.join_next().await, &mut census, &mut walked).map_err(fail)?;
            }
            cursor = next;
            // The pace: never ahead of `rate` keys per second since the start.
            let due = Duration::from_secs_f64(walked.keys_scanned as f64 / rate);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
            if cursor == 0 {
                break;
            }
            if scanned >= share {
                walked.complete = false;
                break;
            }
        }
    }
    while let Some(done) = reads.join_next().await {
        take(Some(done), &mut census, &mut walked).map_err(fail)?;
    }
    walked.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    walked.unsorted = census.unsorted;
    Ok(Report {
        target: target.name.clone(),
        url,
        walked,
        patterns: judge::judge(census.into_families()),
    })
}
