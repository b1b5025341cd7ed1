//! The drills' recorded results: each drill's latest record, its last runs and totals, kept
//! per (target, namespace, name) in memory and in `[state] dir` (`saved`), checked against
//! the config and `[server] max_drills`, and shown as gauges (`metrics`). The HTTP side hands
//! a body to `Results::record`; the status page and `/drills/NAME` read `list` and `latest`.
//! Memory: per drill, its latest record (at most `MAX_BODY`, typically some tens of KiB) and
//! 30 runs.

mod metrics;
pub mod record;
mod saved;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::refused::{Names, Refusals, Refused};
use crate::config::Config;
use crate::metrics::Registry;
use crate::vocab::DrillRefused;
use metrics::ResultMetrics;
pub use record::{Kind, MAX_BODY, Record, Verdict, valid_name};
pub use saved::{DIR, SavedError};

/// Runs remembered per drill, the latest last.
pub const RECENT: usize = 30;

/// A drill as `(target, namespace, name)`.
pub type Key = (String, String, String);

/// One run, as the strip of recent verdicts shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run: String,
    pub verdict: Verdict,
    pub ended_ms: u64,
    pub exposure_ms: u64,
}

/// What is kept of one drill.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    /// The record of the run that ended last.
    pub latest: Record,
    /// The last runs, by end, the latest last; at most [`RECENT`].
    pub recent: VecDeque<Run>,
    /// Runs recorded since the drill was first, by verdict.
    pub runs: BTreeMap<Verdict, u64>,
}

impl Kept {
    /// How many of the latest runs in a row, the latest included, had the latest verdict.
    pub fn streak(&self) -> usize {
        let v = self.latest.verdict;
        self.recent.iter().rev().take_while(|r| r.verdict == v).count()
    }
}

/// What came of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Kept: a new run.
    Kept,
    /// A run already kept (a retry): nothing changed.
    Again,
}

/// Why a record was not taken.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Refused: nothing of it was kept.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The state file could not be written: nothing of it was kept either (send it again).
    #[error("{0}; nothing of this record was kept: send it again")]
    Unsaved(SavedError),
}

/// The recorded drills of every configured target and namespace.
pub struct Results {
    inner: Mutex<Inner>,
    metrics: ResultMetrics,
    refusals: Refusals,
}

struct Inner {
    names: Names,
    max: usize,
    dir: Option<PathBuf>,
    drills: BTreeMap<Key, Arc<Kept>>,
}

impl Results {
    /// The families registered, and what `[state] dir` saved (drills of targets or
    /// namespaces the config no longer has dropped, and said).
    pub(super) fn start(
        config: &Config,
        registry: &Registry,
        refusals: Refusals,
    ) -> Result<Results, prometheus::Error> {
        let results = Results {
            inner: Mutex::new(Inner {
                names: Names::default(),
                max: config.server.max_drills,
                dir: config.state_dir.clone(),
                drills: BTreeMap::new(),
            }),
            metrics: ResultMetrics::register(registry)?,
            refusals,
        };
        if let Some(dir) = &config.state_dir {
            match saved::load(dir) {
                Ok(all) => {
                    let mut inner = results.lock();
                    for k in all {
                        results.metrics.publish(&k);
                        inner.drills.insert(k.latest.key(), Arc::new(k));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "drill results not restored"),
            }
            let inner = results.lock();
            if !inner.drills.is_empty() {
                tracing::info!(drills = inner.drills.len(), "drill results restored");
            }
        }
        results.reconfigure(config);
        Ok(results)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take a record's body at `now_ms`: checked whole (fields, the config's names, room),
    /// then applied, saved (undone if the save fails) and published. A run already kept
    /// changes nothing. What came of it, and the drill's key.
    pub fn record(&self, body: &[u8], now_ms: u64) -> Result<(Taken, Key), RecordError> {
        let checked = Record::parse(body).and_then(|r| {
            let inner = self.lock();
            inner.check(&r).map(|()| (inner, r))
        });
        let (mut inner, mut record) = match checked {
            Ok(c) => c,
            Err(refused) => {
                self.refusals.count(refused.reason, &refused.message);
                return Err(refused.into());
            }
        };
        if record.ended_ms > now_ms {
            tracing::debug!(
                ended_ms = record.ended_ms,
                now_ms,
                "a drill's end is ahead of this clock: taken as now"
            );
            record.ended_ms = now_ms;
        }
        let key = record.key();
        let before = inner.drills.get(&key);
        // A run already kept, or older than the 30 kept (its retry could not be told from
        // a new run): nothing changes.
        let known = before.is_some_and(|k| {
            k.recent.iter().any(|r| r.run == record.run)
                || (k.recent.len() >= RECENT && k.recent.front().is_some_and(|r| record.ended_ms < r.ended_ms))
        });
        if known {
            return Ok((Taken::Again, key));
        }
        record.document.badge = badge(record.verdict);
        let kept = apply(before.map(|k| Kept::clone(k)), record);
        if let Some(dir) = &inner.dir
            && let Err(e) = saved::save(dir, &kept)
        {
            return Err(RecordError::Unsaved(e));
        }
        tracing::info!(target_name = %key.0, namespace = %key.1, drill = %key.2, verdict = kept.latest.verdict.as_str(),
            run = %kept.recent.back().map_or("", |r| r.run.as_str()), "drill result recorded");
        self.metrics.publish(&kept);
        inner.drills.insert(key.clone(), Arc::new(kept));
        Ok((Taken::Kept, key))
    }

    /// Follow a new config: drills of a target or namespace it no longer has are forgotten
    /// (and said, their files removed), `max_drills` taken (a lower one refuses new drills,
    /// and forgets none), the files saved where `[state] dir` now says.
    pub fn reconfigure(&self, config: &Config) {
        let mut inner = self.lock();
        inner.names = Names::of(config);
        inner.max = config.server.max_drills;
        let moved = inner.dir != config.state_dir;
        inner.dir.clone_from(&config.state_dir);
        let gone: Vec<Key> = inner
            .drills
            .keys()
            .filter(|(t, ns, _)| !inner.names.has(t, ns))
            .cloned()
            .collect();
        for key in gone {
            tracing::warn!(target_name = %key.0, namespace = %key.1, drill = %key.2,
                "drill results forgotten: the config no longer has its target or namespace");
            inner.drills.remove(&key);
            self.metrics.remove(&key);
            if let Some(dir) = &inner.dir
                && let Err(e) = saved::remove(dir, &key)
            {
                tracing::error!(error = %e, "a forgotten drill's file not removed");
            }
        }
        if inner.drills.len() > inner.max {
            tracing::warn!(
                drills = inner.drills.len(),
                max_drills = inner.max,
                "more drills are kept than server.max_drills: records of new drills are refused until some are forgotten"
            );
        }
        if moved && let Some(dir) = &inner.dir {
            for kept in inner.drills.values() {
                if let Err(e) = saved::save(dir, kept) {
                    tracing::error!(error = %e, "drill result not saved");
                }
            }
        }
    }

    /// Every kept drill, in key order.
    pub fn list(&self) -> Vec<Arc<Kept>> {
        self.lock().drills.values().cloned().collect()
    }

    /// The kept drills named `name`, of `target` and `namespace` when given.
    pub fn named(&self, name: &str, target: Option<&str>, namespace: Option<&str>) -> Vec<Arc<Kept>> {
        self.lock()
            .drills
            .iter()
            .filter(|((t, ns, n), _)| n == name && target.is_none_or(|x| x == t) && namespace.is_none_or(|x| x == ns))
            .map(|(_, k)| k.clone())
            .collect()
    }
}

impl Inner {
    /// Whether `r` may be applied: its names configured, room for a new drill.
    fn check(&self, r: &Record) -> Result<(), Refused> {
        self.names.check(&r.target, &r.namespace)?;
        if !self.drills.contains_key(&r.key()) && self.drills.len() >= self.max {
            return Err(Refused::new(
                DrillRefused::TooMany,
                format!(
                    "{} drills are kept already, server.max_drills: raise it, or drop a drill's target or namespace from the config",
                    self.max
                ),
            ));
        }
        Ok(())
    }
}

/// The verdict as the report's badge says it: the record's verdict decides, whatever the
/// sender's document said.
fn badge(v: Verdict) -> crate::document::Badge {
    let word = match v {
        Verdict::Safe => "SAFE",
        Verdict::Unsafe => "UNSAFE",
        Verdict::NotExercised => "NOT EXERCISED",
        Verdict::Interrupted => "INTERRUPTED",
    };
    crate::document::Badge {
        word: word.into(),
        class: v.as_str().into(),
    }
}

/// `before` with the run of `r` added: among the recent runs by its end, counted, and the
/// latest record when it ended last.
fn apply(before: Option<Kept>, r: Record) -> Kept {
    let run = Run {
        run: r.run.clone(),
        verdict: r.verdict,
        ended_ms: r.ended_ms,
        exposure_ms: r.exposure_ms,
    };
    let mut kept = before.unwrap_or_else(|| Kept {
        latest: r.clone(),
        recent: VecDeque::new(),
        runs: BTreeMap::new(),
    });
    *kept.runs.entry(r.verdict).or_insert(0) += 1;
    let at = kept.recent.partition_point(|x| x.ended_ms <= run.ended_ms);
    kept.recent.insert(at, run);
    while kept.recent.len() > RECENT {
        kept.recent.pop_front();
    }
    if r.ended_ms >= kept.latest.ended_ms {
        kept.latest = r;
    }
    kept
}

#[cfg(test)]
mod tests;
