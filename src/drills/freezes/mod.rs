//! The freezes of `lockwatch drill --freeze` live now (a
//! worker stopped and no thaw reported yet), checked against the config, kept in memory and
//! in `[state] dir` (`saved`), and shown as gauges (`metrics`). The HTTP side hands a body to
//! `Freezes::record` and answers what comes back; the status page reads `Freezes::live`.

mod metrics;
pub mod report;
mod saved;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use super::refused::{Names, Refusals, Refused};
use crate::config::Config;
use crate::metrics::Registry;
use crate::vocab::DrillRefused;
use metrics::FreezeMetrics;
pub use report::{By, MAX_BODY, Report, Reported};
pub use saved::{FILE, SavedError};

/// Freezes live at once, at most: a record of a new one past this is refused (429).
pub const MAX_LIVE: usize = 64;
/// Thaws remembered by id, so that a late `frozen` record of a freeze already thawed (a
/// retried request) does not bring it back.
const MAX_THAWED: usize = 256;

/// A live freeze: the latest record of its id, `Frozen` or `ThawFailed`.
pub type Freeze = Report;

/// Why a record was not taken in whole.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Refused: nothing of it was kept.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// Kept in memory, but the state file could not be written.
    #[error("{0}; the record is kept in memory, but a restart would lose it")]
    Unsaved(SavedError),
}

/// The live freezes of every configured target and namespace.
pub struct Freezes {
    inner: Mutex<Inner>,
    metrics: FreezeMetrics,
    refusals: Refusals,
}

struct Inner {
    names: Names,
    /// `[state] dir`, where the file is saved.
    dir: Option<PathBuf>,
    live: BTreeMap<String, Freeze>,
    /// Thawed ids and when their thaw happened.
    thawed: BTreeMap<String, u64>,
}

impl Freezes {
    /// The families registered, and what `[state] dir` saved (freezes of targets or
    /// namespaces the config no longer has dropped, and said).
    pub(super) fn start(
        config: &Config,
        registry: &Registry,
        refusals: Refusals,
    ) -> Result<Freezes, prometheus::Error> {
        let freezes = Freezes {
            inner: Mutex::new(Inner {
                names: Names::default(),
                dir: None,
                live: BTreeMap::new(),
                thawed: BTreeMap::new(),
            }),
            metrics: FreezeMetrics::register(registry)?,
            refusals,
        };
        if let Some(dir) = &config.state_dir {
            match saved::load(dir) {
                Ok(s) => {
                    let mut inner = freezes.lock();
                    inner.live = s.live.into_iter().map(|f| (f.id.clone(), f)).collect();
                    inner.thawed = s.thawed.into_iter().collect();
                    if !inner.live.is_empty() {
                        tracing::warn!(
                            live = inner.live.len(),
                            "drill freezes saved before the restart are live"
                        );
                    }
                }
                Err(e @ SavedError::Corrupt { .. }) => {
                    let aside = saved::set_aside(dir).map(|p| p.display().to_string());
                    tracing::warn!(error = %e, set_aside = ?aside, "drill freezes not restored");
                }
                Err(e) => tracing::warn!(error = %e, "drill freezes not restored"),
            }
        }
        freezes.reconfigure(config);
        Ok(freezes)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take a record's body: checked whole (the field, then the config's names, then room)
    /// before anything changes, then applied, published and saved. A record older than what
    /// is known of its id changes nothing and is taken all the same.
    pub fn record(&self, body: &[u8]) -> Result<(), RecordError> {
        let checked = Report::parse(body).and_then(|r| {
            let inner = self.lock();
            inner.check(&r).map(|()| (inner, r))
        });
        let (mut inner, report) = match checked {
            Ok(c) => c,
            Err(refused) => {
                self.refusals.count(refused.reason, &refused.message);
                return Err(refused.into());
            }
        };
        if !inner.apply(report) {
            return Ok(());
        }
        self.metrics.publish(&inner.names, inner.live.values());
        inner.save().map_err(RecordError::Unsaved)
    }

    /// Follow a new config: freezes of a target or namespace it no longer has are dropped
    /// (and said), the gauges of every configured pair set, the file saved where `[state]
    /// dir` now says.
    pub fn reconfigure(&self, config: &Config) {
        let mut inner = self.lock();
        inner.names = Names::of(config);
        let moved = inner.dir != config.state_dir;
        inner.dir.clone_from(&config.state_dir);
        let Inner { names, live, .. } = &mut *inner;
        let before = live.len();
        live.retain(|id, f| {
            let kept = names.has(&f.target, &f.namespace);
            if !kept {
                tracing::warn!(id, target_name = %f.target, namespace = %f.namespace, frozen = %f.frozen,
                    "drill freeze forgotten: the config no longer has its target or namespace; thaw it by hand if it is still stopped");
            }
            kept
        });
        let dropped = live.len() != before;
        self.metrics.publish(&inner.names, inner.live.values());
        if (dropped || moved)
            && let Err(e) = inner.save()
        {
            tracing::error!(error = %e, "drill freezes not saved");
        }
    }

    /// The live freezes, the earliest frozen first.
    pub fn live(&self) -> Vec<Freeze> {
        let mut all: Vec<Freeze> = self.lock().live.values().cloned().collect();
        all.sort_by(|a, b| (a.since_ms, &a.id).cmp(&(b.since_ms, &b.id)));
        all
    }
}

impl Inner {
    /// Whether `r` may be applied: its names configured, room for a new freeze.
    fn check(&self, r: &Report) -> Result<(), Refused> {
        self.names.check(&r.target, &r.namespace)?;
        let new = r.state != Reported::Thawed && !self.live.contains_key(&r.id) && !self.stale(r);
        if new && self.live.len() >= MAX_LIVE {
            return Err(Refused::new(
                DrillRefused::TooMany,
                format!(
                    "{MAX_LIVE} drill freezes are live already, the most kept: report their thaws first (see the status page)"
                ),
            ));
        }
        Ok(())
    }

    /// Whether what is known of `r`'s id happened after it.
    fn stale(&self, r: &Report) -> bool {
        let live_later = self.live.get(&r.id).is_some_and(|f| f.at_ms > r.at_ms);
        let thawed_since = r.state != Reported::Thawed && self.thawed.get(&r.id).is_some_and(|at| *at >= r.at_ms);
        live_later || thawed_since
    }

    /// Apply a checked record; whether anything changed.
    fn apply(&mut self, r: Report) -> bool {
        if self.stale(&r) {
            tracing::debug!(id = %r.id, state = r.state.as_str(), "drill record older than what is known of its freeze");
            return false;
        }
        if r.state == Reported::Thawed {
            if let Some(f) = self.live.remove(&r.id) {
                tracing::info!(id = %r.id, target_name = %f.target, namespace = %f.namespace, frozen = %f.frozen,
                    by = r.by.as_str(), "drill freeze thawed");
            }
            let at = self.thawed.entry(r.id).or_insert(r.at_ms);
            *at = (*at).max(r.at_ms);
            while self.thawed.len() > MAX_THAWED {
                let oldest = self.thawed.iter().min_by_key(|(_, at)| **at).map(|(id, _)| id.clone());
                oldest.and_then(|id| self.thawed.remove(&id));
            }
            return true;
        }
        if self.live.get(&r.id) == Some(&r) {
            return false;
        }
        match r.state {
            Reported::ThawFailed => tracing::warn!(id = %r.id, target_name = %r.target, namespace = %r.namespace,
                frozen = %r.frozen, what = %r.what, by = r.by.as_str(), thaw_by_hand = %r.thaw_by_hand,
                "a drill could not thaw what it froze"),
            _ => tracing::info!(id = %r.id, target_name = %r.target, namespace = %r.namespace, frozen = %r.frozen,
                what = %r.what, for_ms = r.for_ms, by = r.by.as_str(), "drill freeze landed"),
        }
        self.thawed.remove(&r.id);
        self.live.insert(r.id.clone(), r);
        true
    }

    fn save(&self) -> Result<(), SavedError> {
        match &self.dir {
            Some(dir) => saved::save(dir, self.live.values(), self.thawed.iter()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
