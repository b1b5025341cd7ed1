//! The intake's metric families — `lockwatch_lock_events_total`, `lockwatch_log_lines_total`,
//! `lockwatch_log_files`, `lockwatch_log_files_not_reopened`,
//! `lockwatch_log_pushes_refused_total` — registered and pre-exported from the config, and
//! read back for the status page. Sources count through `Counters` resolved from here; a
//! refused push through `refused`. Beside them, not as metrics: the last hour's failures
//! and contention (`recent`), the latest keyed events (`keyed`) and the rotated files not reopened (`reopen`).

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec};

use crate::config::Config;
use crate::metrics::Registry;
use crate::vocab::{LineResult, Op, Outcome, PUSH_SOURCES, Refused, UNKNOWN_NAMESPACE, metric};

/// The intake's families.
#[derive(Clone)]
pub struct IntakeMetrics {
    /// Labels namespace, op, outcome.
    pub(crate) lock_events_total: IntCounterVec,
    /// Labels source, result: lines taken in from each `[[logs]]` source and from each push
    /// endpoint (`push`, `otlp`, `loki`, `http`).
    pub(crate) log_lines_total: IntCounterVec,
    /// Label source: files a `[[logs]]` source is reading (rotated ones being finished included).
    log_files: IntGaugeVec,
    /// Label source: rotated files still written to while the file now at their path is not.
    log_files_not_reopened: IntGaugeVec,
    /// Labels source (a push endpoint's), reason: bodies refused, nothing of them counted.
    pushes_refused_total: IntCounterVec,
    /// Lock failures and contention of the last hour, and the failures' bursts, for the status page.
    pub(crate) recent: super::recent::RecentFailures,
    /// The latest lock events that named a key, for the history API.
    pub(crate) keyed: super::keyed::KeyedEvents,
    /// The rotated files whose application did not reopen its log, for the status page.
    pub(crate) reopen: super::reopen::ReopenNotes,
    /// The registry's exemplar store: the latest traced event of each series.
    pub(crate) exemplars: crate::metrics::Exemplars,
}

impl IntakeMetrics {
    /// Register the families in `registry`, every known series at 0.
    pub fn register(registry: &Registry, config: &Config) -> Result<Self, prometheus::Error> {
        let m = IntakeMetrics {
            lock_events_total: registry.counters(
                metric::LOCK_EVENTS_TOTAL,
                "Lock events reported by applications (classified log lines and pushed events).",
                &["namespace", "op", "outcome"],
            )?,
            log_lines_total: registry.counters(
                metric::LOG_LINES_TOTAL,
                "Log lines taken in, by what they were: a lock event, ignored, or malformed.",
                &["source", "result"],
            )?,
            log_files: registry.int_gauges(
                metric::LOG_FILES,
                "Files a log source is reading, rotated files still being finished included.",
                &["source"],
            )?,
            log_files_not_reopened: registry.int_gauges(
                metric::LOG_FILES_NOT_REOPENED,
                "Rotated files of a log source still written to while the file now at their path is not: the application did not reopen its log after the rotation.",
                &["source"],
            )?,
            pushes_refused_total: registry.counters(
                metric::LOG_PUSHES_REFUSED_TOTAL,
                "Pushed bodies refused, nothing of them counted, by push endpoint and reason.",
                &["source", "reason"],
            )?,
            recent: super::recent::RecentFailures::new(config.namespaces.len()),
            keyed: super::keyed::KeyedEvents::default(),
            reopen: super::reopen::ReopenNotes::default(),
            exemplars: registry.exemplars().clone(),
        };
        for source in PUSH_SOURCES {
            for reason in Refused::ALL {
                m.pushes_refused_total.with_label_values(&[source, reason.as_str()]);
            }
        }
        let namespaces = config
            .namespaces
            .iter()
            .map(|n| n.name.as_str())
            .chain([UNKNOWN_NAMESPACE]);
        for ns in namespaces {
            for op in Op::ALL {
                for outcome in Outcome::ALL {
                    m.lock_events_total
                        .with_label_values(&[ns, op.as_str(), outcome.as_str()]);
                }
            }
        }
        let sources = config.logs.iter().map(|l| l.name.as_str()).chain(PUSH_SOURCES);
        for source in sources {
            for result in LineResult::ALL {
                m.log_lines_total.with_label_values(&[source, result.as_str()]);
            }
        }
        for l in config.logs.iter().filter(|l| l.path != "-") {
            m.log_files.with_label_values(&[l.name.as_str()]).set(0);
            m.log_files_not_reopened.with_label_values(&[l.name.as_str()]).set(0);
        }
        Ok(m)
    }

    /// A push to `source` (one of `PUSH_SOURCES`) refused for `reason`: counted and logged
    /// at debug (the sender got the sentence naming the problem).
    pub(crate) fn refused(&self, source: &'static str, reason: Refused) {
        tracing::debug!(source, reason = reason.as_str(), "push refused");
        self.pushes_refused_total
            .with_label_values(&[source, reason.as_str()])
            .inc();
    }

    /// Pushes to `source` refused for `reason` so far.
    pub fn pushes_refused(&self, source: &str, reason: Refused) -> u64 {
        self.pushes_refused_total
            .with_label_values(&[source, reason.as_str()])
            .get()
    }

    /// The gauge of files `source` is reading.
    pub(crate) fn files_gauge(&self, source: &str) -> IntGauge {
        self.log_files.with_label_values(&[source])
    }

    /// Lock events counted so far for `ns` (a configured name or `unknown`).
    pub fn events(&self, ns: &str, op: Op, outcome: Outcome) -> u64 {
        self.lock_events_total
            .with_label_values(&[ns, op.as_str(), outcome.as_str()])
            .get()
    }

    /// Lines `source` took in, by result.
    pub fn lines(&self, source: &str, result: LineResult) -> u64 {
        self.log_lines_total.with_label_values(&[source, result.as_str()]).get()
    }

    /// Files `source` is reading now.
    pub fn files(&self, source: &str) -> i64 {
        self.log_files.with_label_values(&[source]).get()
    }

    /// The gauge of `source`'s rotated files not reopened.
    pub(crate) fn not_reopened_gauge(&self, source: &str) -> IntGauge {
        self.log_files_not_reopened.with_label_values(&[source])
    }

    /// The rotated files whose application did not reopen its log, of every source.
    pub fn not_reopened(&self) -> &super::reopen::ReopenNotes {
        &self.reopen
    }

    /// Lock failures and contention of the last hour, per namespace, and the failures' bursts.
    pub fn recent(&self) -> &super::recent::RecentFailures {
        &self.recent
    }

    /// The latest lock events that named a key.
    pub fn keyed(&self) -> &super::keyed::KeyedEvents {
        &self.keyed
    }
}
