//! The drill's record: pre-flight findings, each step (what happened, what should happen,
//! how to check it yourself), counter checks, alert states and the rollback, and the run's
//! timeline (`Event`s, each on its lane at its time). JSON is its serde; `record` makes it
//! a document for text, markdown and HTML.

use serde::Serialize;

use crate::document;

#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub n: usize,
    pub title: String,
    /// Milliseconds since the run started.
    pub at_ms: i64,
    pub happened: String,
    pub expected: String,
    pub ok: bool,
    /// Commands to see it yourself.
    pub check: Vec<String>,
    /// When it deviated: what that means.
    pub consequence: Option<String>,
}

/// One series the scenario must move. `moved` is how much the namespace-wide series moved
/// over the run; `ok` is judged on the drill's own share (`drill`, from the run's lock key)
/// when the exporter keeps per-key events, else on `moved`.
#[derive(Debug, Clone, Serialize)]
pub struct CounterCheck {
    pub series: String,
    pub expected: f64,
    pub moved: f64,
    pub ok: bool,
    pub judged_by: Judged,
    /// Of `moved`, the drill's own: what the run's lock key's history holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drill: Option<f64>,
    /// The rest of `moved`: other traffic in the namespace, not attributed to the drill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<f64>,
}

/// What a counter check was judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// The run's lock key's transitions and lock events in the exporter's history.
    Key,
    /// The namespace-wide counter (an exporter without per-key events).
    Namespace,
}

impl CounterCheck {
    /// How it moved, in words: `moved by N` and, judged by the key, the drill's share and
    /// the rest.
    pub fn words(&self) -> String {
        match (self.drill, self.other) {
            (Some(d), Some(o)) if o != 0.0 => format!(
                "moved by {}: {d} the drill's (expected {}), {o} other traffic in the namespace, not attributed to the drill",
                self.moved, self.expected
            ),
            (Some(d), _) => format!("moved by {}: {d} the drill's (expected {})", self.moved, self.expected),
            _ => format!("moved by {} (expected {})", self.moved, self.expected),
        }
    }
}

/// Who a moment of the timeline belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    WorkerA,
    WorkerB,
    /// The drill's TCP proxy between worker A and Redis (the network-delay scenarios).
    Proxy,
    Redis,
    /// The exporter's counters and Prometheus' alerts.
    Lockwatch,
}

impl Lane {
    /// Top to bottom, as the timeline draws them.
    pub const ALL: [Lane; 5] = [Lane::WorkerA, Lane::WorkerB, Lane::Proxy, Lane::Redis, Lane::Lockwatch];
}

impl document::Lane for Lane {
    fn id(self) -> &'static str {
        match self {
            Lane::WorkerA => "worker_a",
            Lane::WorkerB => "worker_b",
            Lane::Proxy => "proxy",
            Lane::Redis => "redis",
            Lane::Lockwatch => "lockwatch",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lane::WorkerA => "worker A",
            Lane::WorkerB => "worker B",
            Lane::Proxy => "network proxy",
            Lane::Redis => "Redis",
            Lane::Lockwatch => "lockwatch",
        }
    }

    fn empty(self) -> &'static str {
        match self {
            Lane::Lockwatch => "no --exporter given: no counters read",
            _ => "nothing",
        }
    }
}

/// One moment of the run, in ms since it started: A frozen and a request held in the
/// proxy are spans.
pub type Event = document::Moment<Lane>;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub run_id: String,
    pub started_at: String,
    pub target: String,
    pub namespace: String,
    /// `stale-holder`, `network-delay` or `pause-and-delay`.
    pub scenario: String,
    pub lock_key: String,
    /// The namespace's TTL.
    pub ttl_ms: u64,
    pub preflight: Vec<(String, String)>,
    pub steps: Vec<Step>,
    /// The first cycle's moments, in the order they happened.
    pub events: Vec<Event>,
    pub counters: Vec<CounterCheck>,
    /// How the counters were judged, in a sentence (by the run's key, or by the namespace
    /// counters and why); empty when they were not checked.
    pub attribution: String,
    pub alerts: Vec<(String, String)>,
    pub cycles: Option<SustainSummary>,
    pub rollback: Vec<String>,
    pub interrupted: bool,
    /// Filled in by `finish`: passed, or the deviations.
    pub result: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SustainSummary {
    pub cycles: u64,
    pub seconds: f64,
    pub pending_after_s: Option<f64>,
    pub firing_after_s: Option<f64>,
}

impl Report {
    pub fn deviations(&self) -> usize {
        self.steps.iter().filter(|s| !s.ok).count() + self.counters.iter().filter(|c| !c.ok).count()
    }

    pub fn passed(&self) -> bool {
        !self.interrupted && self.deviations() == 0
    }

    pub fn finish(&mut self) {
        self.result = if self.interrupted {
            "interrupted: rolled back before the scenario finished".into()
        } else if self.passed() {
            "passed: Redis rejected every stale operation and lockwatch saw what it must".into()
        } else {
            let failed: Vec<String> = self
                .steps
                .iter()
                .filter(|s| !s.ok)
                .map(|s| format!("step {} ({})", s.n, s.title))
                .chain(self.counters.iter().filter(|c| !c.ok).map(|c| c.series.clone()))
                .collect();
            format!("FAILED: {} deviation(s): {}", failed.len(), failed.join("; "))
        };
    }
}
