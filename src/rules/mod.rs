//! `lockwatch rules`: renders the Prometheus recording and alerting rules with the
//! config's thresholds (`[alerts]`, `[namespace.alerts]`) and link bases, as rule files or
//! as one Prometheus Operator `PrometheusRule`. The shipped `alerts/` files and
//! `deploy/kubernetes/prometheusrule.yaml` are this output for a config without `[alerts]`;
//! tests keep them equal.
//!
//! Ratios follow the design: successes come from keyspace notifications (transitions, per
//! target), failures from logs and pushes (events, per lockwatch instance); the events of
//! an instance are joined onto each of its targets. A ratio with nothing under it is absent,
//! never NaN. Per-namespace thresholds become extra rules of the same alert name, and the
//! default rule excludes those namespaces.

use std::fmt::Write as _;
use std::path::Path;

mod alerts;
mod contention;
mod drill;
mod drill_results;
mod headroom;
mod replicas;

use crate::config::Config;
use alerts::alerts;
pub use alerts::runbook_slug;

/// File names inside `--out DIR` (and `alerts/`).
pub const RECORDING_FILE: &str = "lockwatch-recording.rules.yml";
pub const ALERTS_FILE: &str = "lockwatch-alerts.rules.yml";
/// File name inside `--out DIR` for `--format prometheus-operator`.
pub const PROMETHEUS_RULE_FILE: &str = "lockwatch-prometheusrule.yaml";

/// What `lockwatch rules` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Prometheus rule files (`rule_files:`).
    Prometheus,
    /// One `PrometheusRule` resource (monitoring.coreos.com/v1) holding both groups.
    PrometheusOperator,
}

/// Ratio windows: the fast alert pair reads 1h and 5m, the slow pair 6h and 30m.
const WINDOWS: [&str; 4] = ["5m", "30m", "1h", "6h"];

/// The rendered rule files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFiles {
    pub recording: String,
    pub alerts: String,
    /// Both groups in one file, for stdout.
    pub combined: String,
    /// Both groups in one `PrometheusRule` manifest.
    pub prometheus_rule: String,
}

impl RuleFiles {
    /// Write both files into `dir` (created if missing).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(RECORDING_FILE), &self.recording)?;
        std::fs::write(dir.join(ALERTS_FILE), &self.alerts)
    }
}

/// A `PrometheusRule` whose `spec.groups` are `groups` (rule-file YAML, list items indented
/// by two spaces), labelled like the other manifests of `deploy/kubernetes/`.
fn prometheus_rule(groups: &str) -> String {
    let mut out = format!(
        "{HEADER}{RECORDING_NOTE}{ALERTS_NOTE}apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: lockwatch\n  labels:\n    app.kubernetes.io/name: lockwatch\n    app.kubernetes.io/component: rules\nspec:\n  groups:\n"
    );
    for line in groups.lines() {
        if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

pub fn render(config: &Config) -> RuleFiles {
    let (rec, alert) = (recording(), alerts(config));
    RuleFiles {
        recording: format!("{HEADER}{RECORDING_NOTE}groups:\n{rec}"),
        alerts: format!("{HEADER}{ALERTS_NOTE}groups:\n{alert}"),
        combined: format!("{HEADER}{RECORDING_NOTE}{ALERTS_NOTE}groups:\n{rec}{alert}"),
        prometheus_rule: prometheus_rule(&format!("{rec}{alert}")),
    }
}

const RECORDING_NOTE: &str = "# Recording rules: ratios per target and namespace over the windows the alerts read.
# Failures (events) come from logs and pushes and carry no target; they are joined onto each
# target of the same lockwatch instance. `> 0` on the denominator leaves a ratio absent, not
# NaN, when nothing happened.
";

const ALERTS_NOTE: &str = "# Alerts: every one has severity, summary, description, runbook_url and dashboard_url.
# The ratio alerts fire on sustained ratios (two windows each, a minimum number of
# failures), never on one event.
";

const HEADER: &str =
    "# Rendered by `lockwatch rules`; edit the config's [alerts] and render again rather than this file.\n";

/// One ratio family: its recorded names and the event selector of its failures.
struct Ratio {
    /// `not_owned` / `renew_failure`
    name: &'static str,
    /// Selector of the failing events in `lockwatch_lock_events_total`.
    events: &'static str,
    /// Recorded name of the successes, and the transition kinds they count.
    successes: &'static str,
    kinds: &'static str,
}

const NOT_OWNED: Ratio = Ratio {
    name: "not_owned",
    events: r#"op=~"release|renew", outcome="not_owned""#,
    successes: "releases_renewals",
    kinds: r#"kind=~"released|renewed""#,
};

const RENEW_FAILURE: Ratio = Ratio {
    name: "renew_failure",
    events: r#"op="renew", outcome!="ok""#,
    successes: "renewals",
    kinds: r#"kind="renewed""#,
};

impl Ratio {
    fn events_rate(&self, w: &str) -> String {
        format!("job_namespace:lockwatch_lock_{}_events:rate{w}", self.name)
    }
    fn successes_rate(&self, w: &str) -> String {
        format!("target_namespace:lockwatch_lock_{}:rate{w}", self.successes)
    }
    fn ratio(&self, w: &str) -> String {
        format!("target_namespace:lockwatch_lock_{}:ratio_rate{w}", self.name)
    }
}

/// The recording group.
fn recording() -> String {
    let mut out = String::from("  - name: lockwatch-recording\n    rules:\n");
    for r in [&NOT_OWNED, &RENEW_FAILURE] {
        for w in WINDOWS {
            let (ev, ok, ratio) = (r.events_rate(w), r.successes_rate(w), r.ratio(w));
            rule(
                &mut out,
                "record",
                &ev,
                &format!(
                    "sum by (job, instance, namespace) (rate(lockwatch_lock_events_total{{{}}}[{w}]))",
                    r.events
                ),
            );
            rule(
                &mut out,
                "record",
                &ok,
                &format!(
                    "sum by (job, instance, target, namespace) (rate(lockwatch_lock_transitions_total{{{}}}[{w}]))",
                    r.kinds
                ),
            );
            rule(
                &mut out,
                "record",
                &ratio,
                &format!(
                    "(0 * {ok} + on (job, instance, namespace) group_left {ev})\n/\n(({ok} + on (job, instance, namespace) group_left {ev}) > 0)"
                ),
            );
        }
    }
    headroom::recording(&mut out);
    out
}

fn rule(out: &mut String, kind: &str, name: &str, expr: &str) {
    let _ = writeln!(out, "      - {kind}: {name}\n        expr: |");
    for line in replicas::across(expr).lines() {
        let _ = writeln!(out, "          {line}");
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runbook_slugs() {
        assert_eq!(runbook_slug("LockNotOwnedRatioHigh"), "lock-not-owned-ratio-high");
        assert_eq!(runbook_slug("LockWithoutTTL"), "lock-without-ttl");
        assert_eq!(runbook_slug("LockwatchDown"), "lockwatch-down");
    }
}
