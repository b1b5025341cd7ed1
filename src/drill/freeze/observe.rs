//! What the freeze drill asks the running exporter (`--exporter`, required): whether it
//! follows the target's keyspace notifications and knows the namespace, the locks held at
//! the freeze (`/api/v1/locks`), each candidate key's history and lock events
//! (`/api/v1/locks/history`), and the namespace's refusals as `/metrics` counts them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::seen::{CountedRefusal, EventOrigin, KeyEvent, Transition, WallMs};
use crate::exposition;

/// At most this many held locks are followed (each costs one history request).
pub const MAX_CANDIDATES: usize = 2_000;

const EVENTS: &str = "lockwatch_lock_events_total";

/// The exporter, for one target and namespace.
pub struct Exporter {
    http: reqwest::Client,
    base: String,
    target: String,
    namespace: String,
}

#[derive(Deserialize)]
struct Locks {
    #[serde(default)]
    locks: Vec<HeldLock>,
}

#[derive(Deserialize)]
struct HeldLock {
    key: String,
    #[serde(default)]
    owner_hash: String,
}

#[derive(Deserialize)]
struct History {
    #[serde(default)]
    transitions: Vec<HistoryTransition>,
    /// Absent from exporters older than per-key lock events.
    events: Option<Vec<HistoryEvent>>,
    #[serde(default)]
    unwatched_targets: Vec<String>,
}

#[derive(Deserialize)]
struct HistoryTransition {
    at_ms: WallMs,
    kind: String,
    owner_hash: Option<String>,
    #[serde(default)]
    takeover: bool,
}

#[derive(Deserialize)]
struct HistoryEvent {
    at_ms: WallMs,
    op: String,
    outcome: String,
    #[serde(default)]
    source: String,
    file: Option<String>,
    /// `device:inode`.
    file_id: Option<String>,
    pid: Option<u32>,
    host: Option<String>,
    instance: Option<String>,
}

impl Exporter {
    pub fn new(base: &str, target: &str, namespace: &str) -> Self {
        Exporter {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            base: base.trim_end_matches('/').to_string(),
            target: target.into(),
            namespace: namespace.into(),
        }
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<String, String> {
        let url = format!("{}{path}", self.base);
        let r = self
            .http
            .get(&url)
            .query(query)
            .send()
            .await
            .map_err(|e| format!("{url} does not answer ({e})"))?;
        let status = r.status();
        let body = r.text().await.map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{url} answered {status}: {}", body.trim()));
        }
        Ok(body)
    }

    /// Why the drill cannot judge with this exporter, if so: it does not answer, does not
    /// know the namespace or target, or does not follow the target's notifications (the
    /// expiries and takeovers come from there).
    pub async fn unfit(&self) -> Option<String> {
        let q = [
            ("namespace", self.namespace.as_str()),
            ("target", self.target.as_str()),
            ("limit", "1"),
        ];
        if let Err(e) = self.get("/api/v1/locks", &q).await {
            return Some(format!("the exporter cannot list the namespace's locks: {e}"));
        }
        let metrics = match self.get("/metrics", &[]).await {
            Ok(m) => m,
            Err(e) => return Some(e),
        };
        let t = [("target", self.target.as_str())];
        match exposition::value(&metrics, "lockwatch_notifications_connected", &t) {
            Some(v) if v >= 1.0 => None,
            found => {
                let state = exposition::samples(&metrics)
                    .find(|s| s.name == "lockwatch_notifications_verification" && s.has_labels(&t) && s.value >= 1.0)
                    .and_then(|s| s.labels.iter().find(|(k, _)| k == "state").map(|(_, v)| v.clone()));
                Some(format!(
                    "the exporter {} does not follow target {}'s keyspace notifications ({}): the drill reads the expiries and takeovers from them. Enable them (notifications = \"configure\", or notify-keyspace-events; see docs/tracking.md) and wait for lockwatch_notifications_connected 1",
                    self.base,
                    self.target,
                    match (found, state) {
                        (None, _) => "it does not watch that target".to_string(),
                        (_, Some(s)) => format!("verification {s}"),
                        (_, None) => "not connected".into(),
                    }
                ))
            }
        }
    }

    /// The namespace's held locks (key, owner hash), at most [`MAX_CANDIDATES`].
    pub async fn held(&self) -> Result<Vec<(String, Option<String>)>, String> {
        let limit = MAX_CANDIDATES.to_string();
        let q = [
            ("namespace", self.namespace.as_str()),
            ("target", self.target.as_str()),
            ("limit", limit.as_str()),
        ];
        let body = self.get("/api/v1/locks", &q).await?;
        let locks: Locks = serde_json::from_str(&body).map_err(|e| format!("/api/v1/locks: {e}"))?;
        Ok(locks
            .locks
            .into_iter()
            .map(|l| (l.key, Some(l.owner_hash).filter(|h| !h.is_empty())))
            .collect())
    }

    /// A key's transitions and, where the exporter keeps them, the lock events naming it.
    pub async fn history(&self, key: &str) -> Result<(Vec<Transition>, Option<Vec<KeyEvent>>), String> {
        let body = self
            .get(
                "/api/v1/locks/history",
                &[("key", key), ("target", self.target.as_str())],
            )
            .await?;
        let h: History = serde_json::from_str(&body).map_err(|e| format!("/api/v1/locks/history: {e}"))?;
        if h.unwatched_targets.contains(&self.target) {
            return Err(format!(
                "the exporter does not watch target {}'s lifecycle",
                self.target
            ));
        }
        let transitions = h
            .transitions
            .into_iter()
            .map(|t| Transition {
                at_ms: t.at_ms,
                kind: t.kind,
                owner: t.owner_hash,
                takeover: t.takeover,
            })
            .collect();
        let events = h.events.map(|ev| {
            ev.into_iter()
                .map(|e| KeyEvent {
                    at_ms: e.at_ms,
                    op: e.op,
                    outcome: e.outcome,
                    source: e.source,
                    origin: EventOrigin {
                        file: e.file,
                        file_id: e.file_id.as_deref().and_then(|id| {
                            let (dev, ino) = id.split_once(':')?;
                            Some((dev.parse().ok()?, ino.parse().ok()?))
                        }),
                        pid: e.pid,
                        host: e.host,
                        instance: e.instance,
                    },
                })
                .collect()
        });
        Ok((transitions, events))
    }

    /// `/metrics`, or `None` when it does not answer.
    pub async fn scrape(&self) -> Option<String> {
        self.get("/metrics", &[]).await.ok()
    }

    /// The namespace's refusal counters in `text`: (op, outcome) → count.
    pub fn refusals(&self, text: &str) -> BTreeMap<(String, String), u64> {
        refusals(text, &self.namespace)
    }
}

/// `lockwatch_lock_events_total` of namespace `ns` whose outcome is a refusal.
fn refusals(text: &str, ns: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for s in exposition::samples(text).filter(|s| s.name == EVENTS && s.has_labels(&[("namespace", ns)])) {
        let label = |k: &str| s.labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if let (Some(op), Some(outcome)) = (label("op"), label("outcome"))
            && matches!(outcome.as_str(), "not_owned" | "stale_fence")
        {
            out.insert((op, outcome), s.value.max(0.0) as u64);
        }
    }
    out
}

/// The namespace's refusal counters followed scrape by scrape: each move, timed.
#[derive(Debug, Default)]
pub struct Counting {
    last: Option<BTreeMap<(String, String), u64>>,
    pub moves: Vec<CountedRefusal>,
}

impl Counting {
    /// A scrape's counts at `at_ms`: what moved since the last one is recorded.
    pub fn update(&mut self, at_ms: WallMs, now: BTreeMap<(String, String), u64>) {
        if let Some(last) = &self.last {
            for ((op, outcome), n) in &now {
                let before = last.get(&(op.clone(), outcome.clone())).copied().unwrap_or(0);
                if *n > before {
                    self.moves.push(CountedRefusal {
                        at_ms,
                        op: op.clone(),
                        outcome: outcome.clone(),
                        by: n - before,
                    });
                }
            }
        }
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_counters_of_the_namespace_are_followed_by_their_moves() {
        let at = |n: u64, other: u64| {
            format!(
                "lockwatch_lock_events_total{{namespace=\"payout\",op=\"renew\",outcome=\"not_owned\"}} {n}\n\
                 lockwatch_lock_events_total{{namespace=\"payout\",op=\"acquire\",outcome=\"busy\"}} 7\n\
                 lockwatch_lock_events_total{{namespace=\"other\",op=\"release\",outcome=\"not_owned\"}} {other}\n"
            )
        };
        let mut c = Counting::default();
        c.update(1, refusals(&at(2, 0), "payout"));
        c.update(2, refusals(&at(2, 5), "payout"));
        c.update(3, refusals(&at(4, 9), "payout"));
        assert_eq!(
            c.moves,
            vec![CountedRefusal {
                at_ms: 3,
                op: "renew".into(),
                outcome: "not_owned".into(),
                by: 2
            }]
        );
    }
}
