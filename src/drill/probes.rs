//! What the drill asks from outside Redis: whether the exporter answers, how its counters
//! moved over the scenario (read with the crate's exposition parser), and which lock
//! alerts Prometheus has pending or firing. Failures here are findings, never errors.

use std::time::{Duration, Instant};

use super::report::CounterCheck;
use crate::exposition;

/// How long the counters get to catch up with the scenario.
const COUNTER_WAIT: Duration = Duration::from_secs(10);

/// The HTTP side of a run: `--exporter` and `--prometheus`, when given.
pub(crate) struct Probes {
    http: reqwest::Client,
    exporter: Option<String>,
    prometheus: Option<String>,
}

/// A counter the scenario must move, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    pub(crate) name: &'static str,
    /// In the order the exposition prints them (sorted), so `series` reads as it does there.
    pub(crate) labels: Vec<(&'static str, String)>,
    pub(crate) by: f64,
}

impl Expected {
    fn new(name: &'static str, labels: &[(&'static str, &str)], by: f64) -> Self {
        Expected {
            name,
            labels: labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect(),
            by,
        }
    }

    /// `name{label="value",…}`, as the report shows it.
    pub(crate) fn series(&self) -> String {
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }

    /// The counter's value in `text`; 0 when the series is not (yet) exported.
    fn value_in(&self, text: &str) -> f64 {
        let labels: Vec<(&str, &str)> = self.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        exposition::value(text, self.name, &labels).unwrap_or(0.0)
    }
}

/// The counters a stale-holder cycle moves in namespace `ns` of target `target`; the
/// transitions and the takeover only when the exporter watches the target (`takeovers`).
pub(crate) fn expected_moves(ns: &str, target: &str, takeovers: bool) -> Vec<Expected> {
    const EVENTS: &str = "lockwatch_lock_events_total";
    const TRANSITIONS: &str = "lockwatch_lock_transitions_total";
    let mut v = vec![
        Expected::new(
            EVENTS,
            &[("namespace", ns), ("op", "renew"), ("outcome", "not_owned")],
            1.0,
        ),
        Expected::new(
            EVENTS,
            &[("namespace", ns), ("op", "release"), ("outcome", "not_owned")],
            1.0,
        ),
        Expected::new(
            EVENTS,
            &[("namespace", ns), ("op", "write"), ("outcome", "stale_fence")],
            1.0,
        ),
    ];
    if takeovers {
        v.push(Expected::new(
            "lockwatch_lock_expiry_takeovers_total",
            &[("namespace", ns), ("target", target)],
            1.0,
        ));
        v.push(Expected::new(
            TRANSITIONS,
            &[("kind", "acquired"), ("namespace", ns), ("target", target)],
            2.0,
        ));
        v.push(Expected::new(
            TRANSITIONS,
            &[("kind", "expired"), ("namespace", ns), ("target", target)],
            1.0,
        ));
    }
    v
}

/// Whether the exporter counts expiry takeovers (it watches keyspace notifications).
pub(crate) fn watches_takeovers(text: &str) -> bool {
    exposition::samples(text).any(|s| s.name == "lockwatch_lock_expiry_takeovers_total")
}

/// How each expected counter moved from `before` to `now`.
pub(crate) fn checks(expected: &[Expected], before: &str, now: &str) -> Vec<CounterCheck> {
    expected
        .iter()
        .map(|e| {
            let moved = e.value_in(now) - e.value_in(before);
            CounterCheck {
                series: e.series(),
                expected: e.by,
                moved,
                ok: (moved - e.by).abs() < 1e-9,
            }
        })
        .collect()
}

impl Probes {
    pub(crate) fn new(exporter: Option<String>, prometheus: Option<String>) -> Self {
        Probes {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            exporter,
            prometheus,
        }
    }

    /// The exporter's URL, and whether its `/healthz` answers; `None` without `--exporter`.
    pub(crate) async fn exporter_health(&self) -> Option<(&str, bool)> {
        let url = self.exporter.as_deref()?;
        let ok = self
            .http
            .get(format!("{}/healthz", url.trim_end_matches('/')))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        Some((url, ok))
    }

    /// The exporter's `/metrics`; `None` without `--exporter` or when it does not answer.
    pub(crate) async fn scrape(&self) -> Option<String> {
        let url = self.exporter.as_ref()?;
        self.http
            .get(format!("{}/metrics", url.trim_end_matches('/')))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    /// Poll the exporter until every expected counter moved from `before` by its amount,
    /// or [`COUNTER_WAIT`] passed: the last reading.
    pub(crate) async fn counters(&self, expected: &[Expected], before: &str) -> Vec<CounterCheck> {
        let deadline = Instant::now() + COUNTER_WAIT;
        loop {
            let now = self.scrape().await.unwrap_or_default();
            let found = checks(expected, before, &now);
            if found.iter().all(|c| c.ok) || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `--prometheus`, when given.
    pub(crate) fn prometheus(&self) -> Option<&str> {
        self.prometheus.as_deref()
    }

    /// Lock alerts pending or firing in Prometheus: (name, state), sorted; `Err` says why
    /// there is no answer. `None` without `--prometheus`.
    pub(crate) async fn lock_alerts(&self) -> Option<Result<Vec<(String, String)>, String>> {
        let url = self.prometheus.as_deref()?;
        Some(self.alerts_at(url).await)
    }

    async fn alerts_at(&self, url: &str) -> Result<Vec<(String, String)>, String> {
        let v: serde_json::Value = self
            .http
            .get(format!("{}/api/v1/alerts", url.trim_end_matches('/')))
            .send()
            .await
            .map_err(|e| format!("does not answer ({e})"))?
            .json()
            .await
            .map_err(|e| format!("bad answer ({e})"))?;
        let mut out: Vec<(String, String)> = v["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let name = a["labels"]["alertname"].as_str()?;
                name.starts_with("Lock")
                    .then(|| (name.to_string(), a["state"].as_str().unwrap_or("").to_string()))
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_read_as_the_exposition_prints_them() {
        let e = expected_moves("drill", "staging", true);
        let series: Vec<String> = e.iter().map(Expected::series).collect();
        assert_eq!(
            series[0],
            r#"lockwatch_lock_events_total{namespace="drill",op="renew",outcome="not_owned"}"#
        );
        assert_eq!(
            series[4],
            r#"lockwatch_lock_transitions_total{kind="acquired",namespace="drill",target="staging"}"#
        );
        assert_eq!(expected_moves("drill", "staging", false).len(), 3);
    }

    #[test]
    fn counters_move_from_before_to_now() {
        let before = "# TYPE lockwatch_lock_events_total counter\n\
            lockwatch_lock_events_total{namespace=\"drill\",op=\"renew\",outcome=\"not_owned\"} 2\n\
            lockwatch_lock_expiry_takeovers_total{namespace=\"drill\",target=\"staging\"} 0\n";
        let now = "lockwatch_lock_events_total{namespace=\"drill\",op=\"renew\",outcome=\"not_owned\"} 3\n\
            lockwatch_lock_events_total{namespace=\"drill\",op=\"release\",outcome=\"not_owned\"} 2\n\
            lockwatch_lock_events_total{namespace=\"other\",op=\"write\",outcome=\"stale_fence\"} 1\n";
        assert!(watches_takeovers(before));
        assert!(!watches_takeovers(now));
        let c = checks(&expected_moves("drill", "staging", false), before, now);
        let moved: Vec<(f64, bool)> = c.iter().map(|c| (c.moved, c.ok)).collect();
        // renew moved by one; release by two (a deviation); write not at all in "drill".
        assert_eq!(moved, [(1.0, true), (2.0, false), (0.0, false)]);
    }
}
