//! What a stale-holder cycle must move in the exporter, and how it is judged: by the run's
//! own lock key — its transitions and lock events in `/api/v1/locks/history`, so other
//! traffic in a live namespace is reported, never a deviation — or, with an exporter that
//! keeps no per-key events, by the namespace-wide counters. Pure: `probes` asks over HTTP.

use serde::Deserialize;

use super::report::{CounterCheck, Judged};
use crate::exposition;

/// What one expected series counts in the run's key's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PerKey {
    /// Lock events of this op and outcome.
    Event(&'static str, &'static str),
    /// Transitions of this kind.
    Transition(&'static str),
    /// Transitions marked as an expiry takeover.
    Takeover,
}

/// A counter the scenario must move, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    pub(crate) name: &'static str,
    /// In the order the exposition prints them (sorted), so `series` reads as it does there.
    pub(crate) labels: Vec<(&'static str, String)>,
    pub(crate) by: f64,
    pub(crate) per_key: PerKey,
}

impl Expected {
    fn new(name: &'static str, labels: &[(&'static str, &str)], by: f64, per_key: PerKey) -> Self {
        Expected {
            name,
            labels: labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect(),
            by,
            per_key,
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

    /// The check of a series that moved by `moved`, of which `drill` (when judged by the
    /// run's key) was the drill's: `ok` on the drill's share, else on `moved`.
    fn check(&self, moved: f64, drill: Option<f64>) -> CounterCheck {
        CounterCheck {
            series: self.series(),
            expected: self.by,
            moved,
            ok: (drill.unwrap_or(moved) - self.by).abs() < 1e-9,
            judged_by: if drill.is_some() {
                Judged::Key
            } else {
                Judged::Namespace
            },
            drill,
            other: drill.map(|d| moved - d),
        }
    }

    /// How much the namespace-wide series moved from `before` to `now`.
    fn moved(&self, before: &str, now: &str) -> f64 {
        self.value_in(now) - self.value_in(before)
    }
}

/// The counters a stale-holder cycle moves in namespace `ns` of target `target`; the
/// transitions and the takeover only when the exporter watches the target (`takeovers`).
pub(crate) fn expected_moves(ns: &str, target: &str, takeovers: bool) -> Vec<Expected> {
    const EVENTS: &str = "lockwatch_lock_events_total";
    const TRANSITIONS: &str = "lockwatch_lock_transitions_total";
    let event = |op, outcome| {
        Expected::new(
            EVENTS,
            &[("namespace", ns), ("op", op), ("outcome", outcome)],
            1.0,
            PerKey::Event(op, outcome),
        )
    };
    let mut v = vec![
        event("renew", "not_owned"),
        event("release", "not_owned"),
        event("write", "stale_fence"),
    ];
    if takeovers {
        let labels = [("namespace", ns), ("target", target)];
        v.push(Expected::new(
            "lockwatch_lock_expiry_takeovers_total",
            &labels,
            1.0,
            PerKey::Takeover,
        ));
        for (kind, by) in [("acquired", 2.0), ("expired", 1.0)] {
            let labels = [("kind", kind), ("namespace", ns), ("target", target)];
            v.push(Expected::new(TRANSITIONS, &labels, by, PerKey::Transition(kind)));
        }
    }
    v
}

/// Whether the exporter counts expiry takeovers (it watches keyspace notifications).
pub(crate) fn watches_takeovers(text: &str) -> bool {
    exposition::samples(text).any(|s| s.name == "lockwatch_lock_expiry_takeovers_total")
}

/// Judged by the namespace counters alone: how each moved from `before` to `now`.
pub(crate) fn checks(expected: &[Expected], before: &str, now: &str) -> Vec<CounterCheck> {
    expected.iter().map(|e| e.check(e.moved(before, now), None)).collect()
}

/// `GET /api/v1/locks/history?key=K&target=T`, the parts the drill reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct KeyHistory {
    #[serde(default)]
    pub(crate) transitions: Vec<KeyTransition>,
    /// `None`: the exporter keeps no per-key lock events (a lockwatch older than this one).
    pub(crate) events: Option<Vec<KeyEvent>>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KeyTransition {
    pub(crate) at_ms: i64,
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) takeover: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KeyEvent {
    pub(crate) at_ms: i64,
    pub(crate) op: String,
    pub(crate) outcome: String,
}

/// Wall-clock ms, both ends included: from the run's start to the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) from_ms: i64,
    pub(crate) to_ms: i64,
}

impl Window {
    fn holds(self, at_ms: i64) -> bool {
        (self.from_ms..=self.to_ms).contains(&at_ms)
    }
}

impl KeyHistory {
    /// How many of what `per_key` counts happened in `w`; `None` without per-key events.
    fn count(&self, per_key: PerKey, w: Window) -> Option<f64> {
        let events = self.events.as_ref()?;
        let n = match per_key {
            PerKey::Event(op, outcome) => events
                .iter()
                .filter(|e| w.holds(e.at_ms) && e.op == op && e.outcome == outcome)
                .count(),
            PerKey::Transition(kind) => self
                .transitions
                .iter()
                .filter(|t| w.holds(t.at_ms) && t.kind == kind)
                .count(),
            PerKey::Takeover => self
                .transitions
                .iter()
                .filter(|t| w.holds(t.at_ms) && t.takeover)
                .count(),
        };
        Some(n as f64)
    }

    /// Whether the key's history in `w` holds exactly what every expected series asks.
    pub(crate) fn complete(&self, expected: &[Expected], w: Window) -> bool {
        expected
            .iter()
            .all(|e| self.count(e.per_key, w).is_some_and(|n| (n - e.by).abs() < 1e-9))
    }
}

/// Judged by the run's key: each check `ok` when the key's history in `w` holds exactly the
/// expected number; `moved` how much the namespace-wide series moved from `before` to `now`,
/// `drill` the key's share, `other` the rest (other traffic in the namespace, never a
/// deviation). `None` when the history keeps no per-key events.
pub(crate) fn keyed_checks(
    expected: &[Expected],
    history: &KeyHistory,
    w: Window,
    (before, now): (&str, &str),
) -> Option<Vec<CounterCheck>> {
    history.events.as_ref()?;
    Some(
        expected
            .iter()
            .map(|e| {
                let drill = history.count(e.per_key, w).unwrap_or(0.0);
                e.check(e.moved(before, now), Some(drill))
            })
            .collect(),
    )
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
        assert!(c.iter().all(|c| c.judged_by == Judged::Namespace && c.drill.is_none()));
    }

    fn history(json: &str) -> KeyHistory {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_run_s_key_judges_and_other_traffic_is_the_rest() {
        let expected = expected_moves("drill", "staging", true);
        let h = history(
            r#"{"key":"drill:lock:drill-1-1","namespace":"drill","transitions":[
            {"target":"staging","at_ms":900,"kind":"acquired","owner_hash":"a","takeover":false},
            {"target":"staging","at_ms":1100,"kind":"acquired","owner_hash":"a","takeover":false},
            {"target":"staging","at_ms":2100,"kind":"expired","owner_hash":"a","takeover":false},
            {"target":"staging","at_ms":2200,"kind":"acquired","owner_hash":"b","takeover":true}],
            "events":[
            {"at":"x","at_ms":2300,"op":"renew","outcome":"not_owned","source":"push"},
            {"at":"x","at_ms":2400,"op":"release","outcome":"not_owned","source":"push"},
            {"at":"x","at_ms":2500,"op":"write","outcome":"stale_fence","source":"push"},
            {"at":"x","at_ms":9000,"op":"write","outcome":"stale_fence","source":"push"}]}"#,
        );
        // The window leaves out the acquisition before the run and the event after the check.
        let w = Window {
            from_ms: 1000,
            to_ms: 3000,
        };
        assert!(h.complete(&expected, w));
        let wide = Window {
            from_ms: 0,
            to_ms: 10_000,
        };
        assert!(!h.complete(&expected, wide), "an acquisition and a write too many");
        let before = "lockwatch_lock_events_total{namespace=\"drill\",op=\"renew\",outcome=\"not_owned\"} 10\n";
        let now = "lockwatch_lock_events_total{namespace=\"drill\",op=\"renew\",outcome=\"not_owned\"} 14\n\
            lockwatch_lock_transitions_total{kind=\"acquired\",namespace=\"drill\",target=\"staging\"} 7\n";
        let c = keyed_checks(&expected, &h, w, (before, now)).unwrap();
        assert!(c.iter().all(|c| c.ok && c.judged_by == Judged::Key), "{c:?}");
        let renew = &c[0];
        assert_eq!((renew.moved, renew.drill, renew.other), (4.0, Some(1.0), Some(3.0)));
        let acquired = &c[4];
        assert_eq!(
            (acquired.moved, acquired.drill, acquired.other),
            (7.0, Some(2.0), Some(5.0))
        );
        // An exporter that keeps no per-key events: no keyed judgement.
        let old = history(r#"{"key":"k","namespace":"drill","transitions":[]}"#);
        assert!(keyed_checks(&expected, &old, w, (before, now)).is_none());
        assert!(!old.complete(&expected, w));
    }
}
