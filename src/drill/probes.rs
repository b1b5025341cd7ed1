//! What the drill asks from outside Redis: whether the exporter answers, its run's lock
//! key's history and how its counters moved over the scenario (judged by `expect`), and
//! which lock alerts Prometheus has pending or firing. Failures here are findings, never
//! errors.

use std::time::{Duration, Instant};

use super::expect::{self, Expected, KeyHistory, Window};
use super::report::CounterCheck;

/// How long the counters get to catch up with the scenario.
const COUNTER_WAIT: Duration = Duration::from_secs(10);
/// How far the exporter's clock may be from the drill's when the key's history is read
/// for the run's window. The key is the run's own, so nothing else could fall in.
const CLOCK_SLACK_MS: i64 = 5_000;

/// The sentence of a check judged by the run's key.
fn keyed_words(key: &str, other: f64) -> String {
    let rest = if other == 0.0 {
        "nothing else moved the namespace counters meanwhile".to_string()
    } else {
        format!(
            "the namespace counters moved by {other} more: other traffic in the namespace, not attributed to the drill"
        )
    };
    format!("judged by the history of the run's lock key {key} (its transitions and lock events); {rest}")
}

/// The HTTP side of a run: `--exporter` and `--prometheus`, when given.
pub(crate) struct Probes {
    http: reqwest::Client,
    exporter: Option<String>,
    prometheus: Option<String>,
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

    /// Judge the scenario's moves: by the history of the run's lock `key` on `target` from
    /// `from_ms` (wall clock) to now, polled until it holds every expected move or
    /// [`COUNTER_WAIT`] passed, then `/metrics` read for what the namespace counters moved
    /// beside it; or, where the exporter keeps no per-key events, by the namespace counters
    /// alone. The checks, and how they were judged in a sentence.
    pub(crate) async fn judge(
        &self,
        expected: &[Expected],
        before: &str,
        (key, target): (&str, &str),
        from_ms: i64,
    ) -> (Vec<CounterCheck>, String) {
        let deadline = Instant::now() + COUNTER_WAIT;
        loop {
            let history = self.history(key, target).await;
            let window = Window {
                from_ms: from_ms - CLOCK_SLACK_MS,
                to_ms: crate::locks::recent::wall_ms() + CLOCK_SLACK_MS,
            };
            let why = match &history {
                Ok(h) if h.events.is_some() => {
                    if h.complete(expected, window) || Instant::now() > deadline {
                        let now = self.scrape().await.unwrap_or_default();
                        if let Some(checks) = expect::keyed_checks(expected, h, window, (before, &now)) {
                            let other: f64 = checks.iter().filter_map(|c| c.other).sum();
                            return (checks, keyed_words(key, other));
                        }
                    }
                    None
                }
                Ok(_) => {
                    Some("the exporter keeps no per-key lock events (a lockwatch older than this one)".to_string())
                }
                Err(e) => Some(format!("the history of the run's key could not be read ({e})")),
            };
            if let Some(why) = why {
                let checks = self.counters(expected, before).await;
                return (
                    checks,
                    format!(
                        "judged by the namespace counters: {why}; other traffic in the namespace, if any, moves them too"
                    ),
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `/api/v1/locks/history?key=K&target=T` of the exporter.
    async fn history(&self, key: &str, target: &str) -> Result<KeyHistory, String> {
        let url = self.exporter.as_deref().ok_or("no --exporter")?;
        let resp = self
            .http
            .get(format!("{}/api/v1/locks/history", url.trim_end_matches('/')))
            .query(&[("key", key), ("target", target)])
            .send()
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            return Err(format!("{status}: {}", body.trim()));
        }
        resp.json().await.map_err(|e| format!("bad answer: {e}"))
    }

    /// Poll the exporter until every expected counter moved from `before` by its amount,
    /// or [`COUNTER_WAIT`] passed: the last reading.
    async fn counters(&self, expected: &[Expected], before: &str) -> Vec<CounterCheck> {
        let deadline = Instant::now() + COUNTER_WAIT;
        loop {
            let now = self.scrape().await.unwrap_or_default();
            let found = expect::checks(expected, before, &now);
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
