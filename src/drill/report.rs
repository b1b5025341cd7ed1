//! The drill's record: pre-flight findings, each step (what happened, what should happen,
//! how to check it yourself), counter checks, alert states and the rollback, rendered as
//! text, JSON or markdown (the markdown is the drill record teams keep).

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

#[derive(Debug, Clone, Serialize)]
pub struct CounterCheck {
    pub series: String,
    pub expected: f64,
    pub moved: f64,
    pub ok: bool,
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
    pub preflight: Vec<(String, String)>,
    pub steps: Vec<Step>,
    pub counters: Vec<CounterCheck>,
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
            let _ = writeln!(
                o,
                "  {} {} moved by {} (expected {})",
                if c.ok { "✓" } else { "✗" },
                c.series,
                c.moved,
                c.expected
            );
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
                "\n## What lockwatch counted\n\n| series | expected | moved | |\n|---|---|---|---|"
            );
            for c in &self.counters {
                let _ = writeln!(
                    o,
                    "| `{}` | +{} | +{} | {} |",
                    c.series,
                    c.expected,
                    c.moved,
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
