//! The drill's record: pre-flight findings, each step (what happened, what should happen,
//! how to check it yourself), counter checks, alert states and the rollback, rendered as
//! text, JSON or markdown (the markdown is the drill record teams keep), or HTML (`html`);
//! and the run's timeline events (`Event`), each on its lane at its time.

use std::fmt::Write as _;

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub n: usize,
    pub title: String,
    /// Milliseconds since the run started.
    pub at_ms: u64,
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

/// Who an event of the timeline belongs to.
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

    pub fn name(self) -> &'static str {
        match self {
            Lane::WorkerA => "worker A",
            Lane::WorkerB => "worker B",
            Lane::Proxy => "network proxy",
            Lane::Redis => "Redis",
            Lane::Lockwatch => "lockwatch",
        }
    }
}

/// A period an event opens or closes on its lane: A frozen, a request held in the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    Begins,
    Ends,
}

/// One moment of the run, for the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Milliseconds since the run started.
    pub at_ms: u64,
    pub lane: Lane,
    /// A few words.
    pub what: String,
    /// The step it belongs to, if any.
    pub step: Option<usize>,
    /// `false`: a deviation.
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<Period>,
}

impl Event {
    /// A moment of no step and no period.
    pub fn at(at_ms: u64, lane: Lane, what: impl Into<String>, ok: bool) -> Self {
        Event {
            at_ms,
            lane,
            what: what.into(),
            step: None,
            ok,
            period: None,
        }
    }
}

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
    /// Milliseconds from the start to the last step or event.
    pub fn span_ms(&self) -> u64 {
        let steps = self.steps.iter().map(|s| s.at_ms);
        steps.chain(self.events.iter().map(|e| e.at_ms)).max().unwrap_or(0)
    }

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

    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "lockwatch drill {} — {}", self.run_id, self.result);
        let _ = writeln!(
            o,
            "scenario {}, target {}, namespace {}, lock {}",
            self.scenario, self.target, self.namespace, self.lock_key
        );
        for s in &self.steps {
            let _ = writeln!(
                o,
                "  {} step {} {} (+{:.1}s): {}",
                if s.ok { "✓" } else { "✗" },
                s.n,
                s.title,
                s.at_ms as f64 / 1000.0,
                s.happened
            );
            if let Some(c) = &s.consequence {
                let _ = writeln!(o, "      expected: {}\n      {c}", s.expected);
            }
        }
        for c in &self.counters {
            let _ = writeln!(o, "  {} {} {}", if c.ok { "✓" } else { "✗" }, c.series, c.words());
        }
        if !self.attribution.is_empty() {
            let _ = writeln!(o, "  ({})", self.attribution);
        }
        o
    }

    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# Drill record: {}, run `{}`\n",
            self.scenario.replace('-', " "),
            self.run_id
        );
        let _ = writeln!(o, "- **Result:** {}", self.result);
        let _ = writeln!(o, "- **Started:** {}", self.started_at);
        let _ = writeln!(
            o,
            "- **Target:** `{}`, namespace `{}`, lock key `{}`\n",
            self.target, self.namespace, self.lock_key
        );
        let _ = writeln!(o, "## Pre-flight\n\n| check | finding |\n|---|---|");
        for (k, v) in &self.preflight {
            let _ = writeln!(o, "| {k} | {} |", v.replace('|', "\\|"));
        }
        let _ = writeln!(
            o,
            "\n## Timeline\n\n| # | at | step | happened | expected | |\n|---|---|---|---|---|---|"
        );
        for s in &self.steps {
            let _ = writeln!(
                o,
                "| {} | +{:.1}s | {} | {} | {} | {} |",
                s.n,
                s.at_ms as f64 / 1000.0,
                s.title,
                s.happened.replace('|', "\\|"),
                s.expected.replace('|', "\\|"),
                if s.ok { "✓" } else { "✗ deviation" }
            );
        }
        let deviating: Vec<&Step> = self.steps.iter().filter(|s| !s.ok).collect();
        if !deviating.is_empty() {
            let _ = writeln!(o, "\n## Deviations\n");
            for s in deviating {
                let _ = writeln!(
                    o,
                    "- **Step {} — {}**: {} {}",
                    s.n,
                    s.title,
                    s.happened,
                    s.consequence.as_deref().unwrap_or("")
                );
            }
        }
        if !self.counters.is_empty() {
            let _ = writeln!(
                o,
                "\n## What lockwatch counted\n\n{}\n\n| series | expected | moved | the drill's | other traffic, not attributed to the drill | |\n|---|---|---|---|---|---|",
                self.attribution
            );
            let opt = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("+{v}"));
            for c in &self.counters {
                let _ = writeln!(
                    o,
                    "| `{}` | +{} | +{} | {} | {} | {} |",
                    c.series,
                    c.expected,
                    c.moved,
                    opt(c.drill),
                    opt(c.other),
                    if c.ok { "✓" } else { "✗" }
                );
            }
        }
        if let Some(c) = &self.cycles {
            let _ = writeln!(
                o,
                "\n## Sustained run\n\n{} {} cycles in {:.0} s; alert pending after {}, firing after {}.",
                c.cycles,
                self.scenario,
                c.seconds,
                c.pending_after_s.map_or("—".into(), |s| format!("{s:.0} s")),
                c.firing_after_s.map_or("—".into(), |s| format!("{s:.0} s"))
            );
        }
        if !self.alerts.is_empty() {
            let _ = writeln!(o, "\n## Lock alerts in Prometheus\n\n| alert | state |\n|---|---|");
            for (a, st) in &self.alerts {
                let _ = writeln!(o, "| {a} | {st} |");
            }
        }
        let _ = writeln!(o, "\n## How to check it yourself\n");
        for s in &self.steps {
            for c in &s.check {
                let _ = writeln!(o, "- step {}: `{c}`", s.n);
            }
        }
        let _ = writeln!(o, "\n## Rollback\n");
        for r in &self.rollback {
            let _ = writeln!(o, "- {r}");
        }
        o
    }
}
