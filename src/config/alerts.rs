//! The `[alerts]` table and per-namespace `[namespace.alerts]` overrides: the thresholds
//! `lockwatch rules` renders into the alert rules, and where their links point. One of them,
//! `headroom_fraction`, is applied by the exporter itself: it decides what counts as a near miss.

use std::time::Duration;

use super::ConfigError;
use super::Cx;
use super::raw::{RawAlerts, RawThresholds, S};

/// Where alert links point by default: the runbooks of the lockwatch repository.
pub const DEFAULT_RUNBOOK_BASE_URL: &str = "https://github.com/lockwatch/lockwatch/blob/main/runbooks";
/// Grafana's default address.
pub const DEFAULT_DASHBOARD_BASE_URL: &str = "http://localhost:3000";
/// The shortest `drill_max_age`: below it, rule evaluation and scrape intervals decide.
const MIN_DRILL_MAX_AGE: Duration = Duration::from_secs(60);

/// Alert thresholds of one namespace (or the defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Acceptable fraction of releases and renewals failing with "lock not owned"; the
    /// fast alert fires at 14.4× this, the slow one at 6×.
    pub not_owned_budget: f64,
    /// The same for renewal failures.
    pub renew_failure_budget: f64,
    /// Bad events needed in an alert's long window before it fires.
    pub min_bad_events: u32,
    /// Expiry takeovers within 15 minutes that fire `LockExpiryTakeovers`.
    pub min_takeovers: u32,
    /// Acquisitions that gave up waiting (`acquire` + `timeout`, contention) within 15
    /// minutes, sustained for 15 minutes, that fire `LockContentionSustained`. High by
    /// default: contention is the lock working, and a few workers giving up is normal.
    pub min_contention_timeouts: u32,
    /// A renewal or release with less than this fraction of the lock's TTL left is a near
    /// miss (`lockwatch_lock_near_misses_total`, counted by the exporter).
    pub headroom_fraction: f64,
    /// Acceptable fraction of renewals and releases that are near misses; `LockHeadroomLow`
    /// fires at 14.4× this (fast) or 6× (slow).
    pub near_miss_budget: f64,
    /// How long past its planned end a drill's freeze may stay unthawed (no thaw reported)
    /// before `LockDrillLeftFrozen` fires.
    pub drill_left_frozen_after: Duration,
    /// How long a recorded drill may go without a new result before `LockDrillStale`
    /// fires: its schedule stopped. At least a minute.
    pub drill_max_age: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            not_owned_budget: 0.001,
            renew_failure_budget: 0.001,
            min_bad_events: 5,
            min_takeovers: 2,
            min_contention_timeouts: 100,
            headroom_fraction: 0.2,
            near_miss_budget: 0.01,
            drill_left_frozen_after: Duration::from_secs(60),
            drill_max_age: Duration::from_secs(8 * 86_400),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlertsConfig {
    /// The `job` label Prometheus gives lockwatch's scrape (for `LockwatchDown`).
    pub job: String,
    pub runbook_base_url: String,
    pub dashboard_base_url: String,
    /// For namespaces without overrides.
    pub defaults: Thresholds,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            job: "lockwatch".into(),
            runbook_base_url: DEFAULT_RUNBOOK_BASE_URL.into(),
            dashboard_base_url: DEFAULT_DASHBOARD_BASE_URL.into(),
            defaults: Thresholds::default(),
        }
    }
}

impl Cx<'_> {
    pub(super) fn alerts(&self, raw: Option<RawAlerts>) -> Result<AlertsConfig, ConfigError> {
        let mut a = AlertsConfig::default();
        let Some(raw) = raw else { return Ok(a) };
        if let Some(job) = &raw.job {
            let ok = !job.get_ref().is_empty()
                && job
                    .get_ref()
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.:/".contains(&b));
            if !ok {
                return Err(self.err(
                    Some(&job.span()),
                    "alerts.job",
                    "use a job name of A-Z a-z 0-9 _ - . : /",
                ));
            }
            a.job.clone_from(job.get_ref());
        }
        if let Some(u) = &raw.runbook_base_url {
            a.runbook_base_url = self.base_url(u, "alerts.runbook_base_url")?;
        }
        if let Some(u) = &raw.dashboard_base_url {
            a.dashboard_base_url = self.base_url(u, "alerts.dashboard_base_url")?;
        }
        let defaults = RawThresholds {
            not_owned_budget: raw.not_owned_budget,
            renew_failure_budget: raw.renew_failure_budget,
            min_bad_events: raw.min_bad_events,
            min_takeovers: raw.min_takeovers,
            min_contention_timeouts: raw.min_contention_timeouts,
            headroom_fraction: raw.headroom_fraction,
            near_miss_budget: raw.near_miss_budget,
            drill_left_frozen_after: raw.drill_left_frozen_after,
            drill_max_age: raw.drill_max_age,
        };
        a.defaults = self.thresholds(&defaults, Thresholds::default(), "alerts")?;
        Ok(a)
    }

    fn base_url(&self, v: &S<String>, key: &str) -> Result<String, ConfigError> {
        let s = v.get_ref().trim_end_matches('/');
        let ok = (s.starts_with("http://") || s.starts_with("https://"))
            && !s.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '{' | '}' | '\\'));
        if !ok {
            return Err(self.err(
                Some(&v.span()),
                key,
                format!(
                    "`{}` is not an http(s) URL without quotes, braces or spaces",
                    v.get_ref()
                ),
            ));
        }
        Ok(s.to_string())
    }

    /// `raw` over `base`; `at` is the table's key for messages (`alerts`, `namespace[2].alerts`).
    pub(super) fn thresholds(
        &self,
        raw: &RawThresholds,
        base: Thresholds,
        at: &str,
    ) -> Result<Thresholds, ConfigError> {
        let mut t = base;
        let fraction = |v: &S<f64>, key: &str| -> Result<f64, ConfigError> {
            let f = *v.get_ref();
            if f > 0.0 && f < 1.0 {
                Ok(f)
            } else {
                Err(self.err(
                    Some(&v.span()),
                    format!("{at}.{key}"),
                    format!("{f} is not a fraction between 0 and 1 (e.g. 0.001 for 0.1%)"),
                ))
            }
        };
        let count = |v: &S<i64>, key: &str| -> Result<u32, ConfigError> {
            u32::try_from(*v.get_ref()).ok().filter(|n| *n >= 1).ok_or_else(|| {
                self.err(
                    Some(&v.span()),
                    format!("{at}.{key}"),
                    format!("{} is not a count of at least 1", v.get_ref()),
                )
            })
        };
        if let Some(v) = &raw.not_owned_budget {
            t.not_owned_budget = fraction(v, "not_owned_budget")?;
        }
        if let Some(v) = &raw.renew_failure_budget {
            t.renew_failure_budget = fraction(v, "renew_failure_budget")?;
        }
        if let Some(v) = &raw.min_bad_events {
            t.min_bad_events = count(v, "min_bad_events")?;
        }
        if let Some(v) = &raw.min_takeovers {
            t.min_takeovers = count(v, "min_takeovers")?;
        }
        if let Some(v) = &raw.min_contention_timeouts {
            t.min_contention_timeouts = count(v, "min_contention_timeouts")?;
        }
        if let Some(v) = &raw.headroom_fraction {
            t.headroom_fraction = fraction(v, "headroom_fraction")?;
        }
        if let Some(v) = &raw.near_miss_budget {
            t.near_miss_budget = fraction(v, "near_miss_budget")?;
        }
        if let Some(v) = &raw.drill_left_frozen_after {
            t.drill_left_frozen_after = self.duration(v, &format!("{at}.drill_left_frozen_after"))?;
        }
        if let Some(v) = &raw.drill_max_age {
            let key = format!("{at}.drill_max_age");
            let age = self.duration(v, &key)?;
            if age < MIN_DRILL_MAX_AGE {
                return Err(self.err(
                    Some(&v.span()),
                    key,
                    format!(
                        "`{}` is shorter than a minute: a drill's schedule is hours or days (e.g. \"8d\" for a weekly drill)",
                        v.get_ref()
                    ),
                ));
            }
            t.drill_max_age = age;
        }
        Ok(t)
    }
}
