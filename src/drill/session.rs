//! One run under way: what it holds (connection, worker A, the network proxy of the delay
//! scenarios, the report, every key it created) and the order of the scenario — start
//! worker A, the narrated cycle, the exporter's counters, sustained cycles, alert states.
//! The steps are `cycle`'s.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::Options;
use super::cycle;
use super::expect;
use super::lease::{self, Lease};
use super::narrator::{Narrator, Progress, Said};
use super::plan::Plan;
use super::probes::Probes;
use super::proxy::Proxy;
use super::report::{Event, Judged, Lane, Report, Step, SustainSummary};
use super::worker::{Worker, WorkerError};
use crate::access::scripts::LockScripts;

/// The alert a sustained drill rehearses.
const RATIO_ALERT: &str = "LockNotOwnedRatioHigh";

pub(crate) struct Session<'a> {
    pub(crate) plan: Plan<'a>,
    pub(crate) opts: &'a Options,
    /// B's connection, and the drill's own reads.
    pub(crate) conn: MultiplexedConnection,
    /// B's scripts: always the safe ones, whatever A runs.
    pub(crate) b: LockScripts,
    pub(crate) worker: Option<Worker>,
    /// Between worker A and Redis, in the network-delay scenarios.
    pub(crate) proxy: Option<Proxy>,
    pub(crate) report: Report,
    pub(crate) started: Instant,
    /// The start as wall-clock ms: the run's window in the exporter's history begins here.
    pub(crate) started_ms: i64,
    /// Every key the run created, for the rollback.
    pub(crate) created: Vec<String>,
    /// Keeps the run's fencing counters and resources alive while it runs, no longer.
    pub(crate) lease: Lease,
    pub(crate) probes: Probes,
    /// The timeline's moments are marked (the narrated first cycle).
    pub(crate) recording: bool,
    /// The spans of the timeline still open (indexes of `report.events`).
    open: Vec<usize>,
}

impl<'a> Session<'a> {
    pub(crate) fn new(plan: Plan<'a>, opts: &'a Options, conn: MultiplexedConnection) -> Self {
        let report = Report {
            run_id: plan.run_id.clone(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            target: plan.target.name.clone(),
            namespace: plan.ns.name.clone(),
            scenario: opts.scenario.name().into(),
            lock_key: plan.keys(1).lock,
            ttl_ms: plan.ttl_ms(),
            ..Report::default()
        };
        let lease = Lease::start(conn.clone(), lease::lease(plan.ns.ttl));
        Session {
            plan,
            opts,
            conn,
            lease,
            b: LockScripts::default(),
            worker: None,
            proxy: None,
            report,
            started: Instant::now(),
            started_ms: crate::locks::recent::wall_ms(),
            created: Vec::new(),
            probes: Probes::new(opts.exporter.clone(), opts.prometheus.clone()),
            recording: false,
            open: Vec::new(),
        }
    }

    /// Milliseconds since the run started.
    pub(crate) fn at_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// A moment inside the current step for the timeline, now.
    pub(crate) fn mark(&mut self, lane: Lane, what: impl Into<String>) {
        let event = Event {
            step: Some(self.next_n()),
            ..Event::at(self.at_ms(), lane, what, true)
        };
        self.record(event);
    }

    /// A span of `lane` begins now (A frozen, a request held), until `close`.
    pub(crate) fn open(&mut self, lane: Lane, what: impl Into<String>) {
        let at = self.at_ms();
        let event = Event {
            step: Some(self.next_n()),
            ..Event::span(at, at, lane, what, true)
        };
        if self.recording {
            self.report.events.push(event);
            self.open.push(self.report.events.len() - 1);
        }
    }

    /// Whether a span of `lane` is open.
    pub(crate) fn is_open(&self, lane: Lane) -> bool {
        self.open
            .iter()
            .any(|i| self.report.events.get(*i).is_some_and(|e| e.lane == lane))
    }

    /// The span open on `lane`, if any, ends now; the moment `what` is marked either way.
    pub(crate) fn close(&mut self, lane: Lane, what: impl Into<String>) {
        let at = self.at_ms();
        let open = self
            .open
            .iter()
            .position(|i| self.report.events.get(*i).is_some_and(|e| e.lane == lane));
        if let Some(e) = open.and_then(|i| self.report.events.get_mut(self.open.remove(i))) {
            e.until_ms = Some(at);
        }
        self.mark(lane, what);
    }

    /// The recording stops (the cycle ended, was interrupted or broke): spans still open
    /// end now.
    pub(crate) fn stop_recording(&mut self) {
        let at = self.at_ms();
        for i in std::mem::take(&mut self.open) {
            if let Some(e) = self.report.events.get_mut(i) {
                e.until_ms = Some(at);
            }
        }
        self.recording = false;
    }

    /// An event of the timeline; nothing outside the first cycle.
    pub(crate) fn record(&mut self, event: Event) {
        if self.recording {
            self.report.events.push(event);
        }
    }

    /// The number the next recorded step gets.
    pub(crate) fn next_n(&self) -> usize {
        self.report.steps.len() + 1
    }

    pub(crate) fn worker(&mut self) -> Result<&mut Worker, WorkerError> {
        self.worker
            .as_mut()
            .ok_or_else(|| WorkerError::Reply("worker A is not running".into()))
    }

    /// The scenario could not go on: a step of its own says why.
    pub(crate) fn broken(&mut self, e: &WorkerError) {
        let step = Step {
            n: self.next_n(),
            title: "the drill itself".into(),
            at_ms: self.at_ms(),
            happened: e.to_string(),
            expected: "every step runs".into(),
            ok: false,
            check: vec![],
            consequence: Some("the scenario could not be completed".into()),
        };
        self.report.steps.push(step);
    }

    /// Pre-flight findings into the report, and the intro with the plan said.
    pub(crate) async fn preflight(&mut self, narrator: &mut dyn Narrator) {
        let found = super::preflight::findings(&self.plan, &mut self.conn, &self.probes).await;
        narrator.say(Said::Intro {
            run_id: &self.plan.run_id,
            scenario: self.opts.scenario.name(),
            plan: self.opts.scenario.plan(),
            findings: &found,
            namespace: &self.plan.ns.name,
            ttl: self.plan.ns.ttl,
            keys: &self.plan.keys(1),
        });
        self.report.preflight = found;
    }
}

/// Worker A, the narrated cycle, the counters, sustained cycles and the alert states.
pub(crate) async fn scenario(s: &mut Session<'_>, narrator: &mut dyn Narrator) -> Result<(), WorkerError> {
    let before = s.probes.scrape().await;
    let watched = before.as_deref().is_some_and(expect::watches_takeovers);
    s.worker = Some(start_worker(s).await?);
    cycle::run(s, narrator, 1, true).await?;
    if let Some(before) = before {
        let expected = expect::expected_moves(&s.plan.ns.name, &s.plan.target.name, watched);
        let key = s.plan.keys(1).lock;
        let target = (key.as_str(), s.plan.target.name.as_str());
        let (checks, attribution) = s.probes.judge(&expected, &before, target, s.started_ms).await;
        narrator.say(Said::Counters {
            checks: &checks,
            watched,
        });
        let moved = checks.iter().filter(|c| c.ok).count();
        let other: f64 = checks.iter().filter_map(|c| c.other).sum();
        let what = match checks.first().map(|c| c.judged_by) {
            Some(Judged::Key) if other != 0.0 => format!(
                "{moved} of {} counters moved as expected for the run's key; {other} more from other traffic",
                checks.len()
            ),
            Some(Judged::Key) => format!(
                "{moved} of {} counters moved as expected for the run's key",
                checks.len()
            ),
            _ => format!(
                "{moved} of {} counters moved as expected (namespace counters)",
                checks.len()
            ),
        };
        let event = Event::at(s.at_ms(), Lane::Lockwatch, what, moved == checks.len());
        s.report.events.push(event);
        s.report.counters = checks;
        s.report.attribution = attribution;
    }
    if let Some(d) = s.opts.sustain {
        sustain(s, narrator, d).await?;
    }
    match s.probes.lock_alerts().await {
        None => {}
        Some(Ok(a)) => {
            narrator.say(Said::Alerts(&a));
            let firing = a.iter().filter(|(_, st)| st == "firing").count();
            let what = format!("{} lock alert(s) active, {firing} firing", a.len());
            s.report.events.push(Event::at(s.at_ms(), Lane::Lockwatch, what, true));
            s.report.alerts = a;
        }
        Some(Err(e)) => s.report.alerts = vec![("prometheus".into(), e)],
    }
    Ok(())
}

/// `lockwatch drill-worker` for this run's target and namespace, from `worker_program`
/// (by default this very executable).
async fn start_worker(s: &Session<'_>) -> Result<Worker, WorkerError> {
    let program = match &s.opts.worker_program {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(WorkerError::Spawn)?,
    };
    let mut args = vec![
        "-c".to_string(),
        s.opts.config_path.display().to_string(),
        "--target".into(),
        s.plan.target.name.clone(),
        "--namespace".into(),
        s.plan.ns.name.clone(),
        "--key".into(),
        s.plan.keys(1).lock,
    ];
    if let Some(e) = &s.opts.exporter {
        args.extend(["--exporter".into(), e.clone()]);
    }
    if let Some(p) = &s.proxy {
        args.extend(["--via".into(), p.addr.to_string()]);
    }
    Worker::spawn(&program, &args, &s.plan.scripts).await
}

/// Repeat the scenario's cycles for `d` at `rate` per minute, watching the ratio alert.
async fn sustain(s: &mut Session<'_>, narrator: &mut dyn Narrator, d: Duration) -> Result<(), WorkerError> {
    let started = Instant::now();
    let every = Duration::from_secs(60) / s.opts.rate.max(1);
    let mut summary = SustainSummary::default();
    let mut n = 1;
    while started.elapsed() < d {
        let cycle = Instant::now();
        n += 1;
        cycle::run(s, narrator, n, false).await?;
        summary.cycles += 1;
        if let Some(Ok(alerts)) = s.probes.lock_alerts().await {
            let at = started.elapsed().as_secs_f64();
            for (_, state) in alerts.iter().filter(|(a, _)| a == RATIO_ALERT) {
                if summary.pending_after_s.is_none() {
                    summary.pending_after_s = Some(at);
                }
                if state == "firing" && summary.firing_after_s.is_none() {
                    summary.firing_after_s = Some(at);
                }
            }
        }
        narrator.progress(Progress::Sustaining {
            cycles: summary.cycles,
            elapsed: started.elapsed(),
            of: d,
        });
        tokio::time::sleep(every.saturating_sub(cycle.elapsed())).await;
    }
    summary.seconds = started.elapsed().as_secs_f64();
    narrator.say(Said::Sustained {
        cycles: summary.cycles,
        seconds: summary.seconds,
    });
    s.report.cycles = Some(summary);
    Ok(())
}
