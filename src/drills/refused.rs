//! What both drill endpoints share when a record is not taken: the reason and one sentence
//! for the sender (`Refused`), the one counter of them
//! (`lockwatch_drill_records_refused_total{reason}`), and the configured names a record's
//! are checked against (`Names`).

use prometheus::IntCounterVec;

use crate::metrics::Registry;
use crate::vocab::{DrillRefused, metric};

/// Why a record is not kept: the counter's reason and one sentence for the sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    pub reason: DrillRefused,
    pub message: String,
}

impl Refused {
    pub fn new(reason: DrillRefused, message: impl Into<String>) -> Refused {
        Refused {
            reason,
            message: message.into(),
        }
    }
}

/// The records refused, by reason: one family for freezes and results alike.
#[derive(Clone)]
pub struct Refusals(IntCounterVec);

impl Refusals {
    pub(super) fn register(registry: &Registry) -> Result<Refusals, prometheus::Error> {
        let c = registry.counters(
            metric::DRILL_RECORDS_REFUSED_TOTAL,
            "Records sent by drills (freezes and results) refused, nothing of them kept, by reason.",
            &["reason"],
        )?;
        for reason in DrillRefused::ALL {
            c.with_label_values(&[reason.as_str()]);
        }
        Ok(Refusals(c))
    }

    /// A record refused for `reason`: counted, and logged at debug (the sender got the
    /// sentence naming the problem).
    pub fn count(&self, reason: DrillRefused, message: &str) {
        tracing::debug!(reason = reason.as_str(), message, "drill record refused");
        self.0.with_label_values(&[reason.as_str()]).inc();
    }
}

/// The configured target and namespace names: no other is kept, nor becomes a label.
#[derive(Debug, Default)]
pub(super) struct Names {
    pub(super) targets: Vec<String>,
    pub(super) namespaces: Vec<String>,
}

impl Names {
    pub(super) fn of(config: &crate::config::Config) -> Names {
        Names {
            targets: config.targets.iter().map(|t| t.name.clone()).collect(),
            namespaces: config.namespaces.iter().map(|n| n.name.clone()).collect(),
        }
    }

    /// Whether both are configured.
    pub(super) fn has(&self, target: &str, namespace: &str) -> bool {
        self.targets.iter().any(|t| t == target) && self.namespaces.iter().any(|n| n == namespace)
    }

    /// Both configured, else refused naming the one that is not and those there are.
    pub(super) fn check(&self, target: &str, namespace: &str) -> Result<(), Refused> {
        known(&self.targets, target, "target", DrillRefused::UnknownTarget)?;
        known(&self.namespaces, namespace, "namespace", DrillRefused::UnknownNamespace)
    }
}

/// `name` among `names` of `what`, else refused for `reason`, saying which there are.
fn known(names: &[String], name: &str, what: &str, reason: DrillRefused) -> Result<(), Refused> {
    match names.iter().any(|n| n == name) {
        true => Ok(()),
        false => Err(Refused::new(
            reason,
            format!("no {what} `{name}` in the config (it has {})", names.join(", ")),
        )),
    }
}
