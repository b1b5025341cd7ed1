//! Counting what the intake takes in: a `Tally` adds up verdicts locally (no atomics per
//! line) and `flush`es into the pre-resolved Prometheus counters of one source.
//!
//! Counters are resolved once from the config, so a line costs no label lookup and no
//! label value can come from the input. Events that named a key are also kept, apart from
//! the counters, in the intake's ring of keyed events (`keyed`), never as a label; the
//! latest event of each series that came with trace context becomes its exemplar.

use std::collections::VecDeque;
use std::sync::Arc;

use prometheus::IntCounter;

use super::keyed::{self, KeyedEvents, Pending};
use super::metrics::IntakeMetrics;
use super::origin::{FileRef, Origin};
use super::records::Piece;
use super::{Classifier, Verdict};
use crate::config::LogFormat;
use crate::metrics::{Exemplar, Exemplars, TraceContext};
use crate::vocab::{EventClass, LineResult, Op, Outcome, UNKNOWN_NAMESPACE, metric};

const PER_NAMESPACE: usize = Op::ALL.len() * Outcome::ALL.len();

/// Index of an event in a tally: namespaces in config order, then `unknown`.
fn slot(namespaces: usize, ns: Option<usize>, op: Op, outcome: Outcome) -> usize {
    ns.unwrap_or(namespaces) * PER_NAMESPACE + op.index() * Outcome::ALL.len() + outcome.index()
}

/// The counters one source writes to.
#[derive(Clone)]
pub struct Counters {
    namespaces: usize,
    events: Vec<IntCounter>,
    lines: [IntCounter; 3],
    recent: super::recent::RecentFailures,
    /// The `source` label value, as the keyed events record it.
    source: Arc<str>,
    keyed: KeyedEvents,
    /// The namespace label values in config order, then `unknown`, for exemplars.
    names: Vec<Arc<str>>,
    exemplars: Exemplars,
}

impl Counters {
    /// Counters for `source` (a `[[logs]]` name, or `push`); `namespaces` in config order.
    pub fn new(metrics: &IntakeMetrics, namespaces: &[String], source: &str) -> Self {
        let mut events = Vec::with_capacity((namespaces.len() + 1) * PER_NAMESPACE);
        for ns in namespaces.iter().map(String::as_str).chain([UNKNOWN_NAMESPACE]) {
            for op in Op::ALL {
                for outcome in Outcome::ALL {
                    events.push(
                        metrics
                            .lock_events_total
                            .with_label_values(&[ns, op.as_str(), outcome.as_str()]),
                    );
                }
            }
        }
        let line = |r: LineResult| metrics.log_lines_total.with_label_values(&[source, r.as_str()]);
        Counters {
            namespaces: namespaces.len(),
            events,
            lines: LineResult::ALL.map(line),
            recent: metrics.recent.clone(),
            source: source.into(),
            keyed: metrics.keyed.clone(),
            names: namespaces
                .iter()
                .map(String::as_str)
                .chain([UNKNOWN_NAMESPACE])
                .map(Arc::from)
                .collect(),
            exemplars: metrics.exemplars.clone(),
        }
    }

    /// An empty tally shaped for these counters.
    pub fn tally(&self) -> Tally {
        Tally::new(self.namespaces)
    }

    /// Add `tally` to the counters and zero it; its failures and, apart, its contention
    /// into the last hour, its keyed events into the intake's ring, at this moment.
    pub fn flush(&self, tally: &mut Tally) {
        let keyed = std::mem::take(&mut tally.keyed);
        let traced = std::mem::take(&mut tally.traced);
        // The failures that came with a trace: the latest per failing series, its key
        // when a keyed event of the batch carried the same trace.
        let failing: Vec<(usize, &TraceContext)> = traced
            .iter()
            .filter(|(slot, _)| {
                let rest = slot % PER_NAMESPACE;
                let op = Op::ALL[rest / Outcome::ALL.len()];
                EventClass::of(op, Outcome::ALL[rest % Outcome::ALL.len()]) == EventClass::Failure
            })
            .map(|(slot, t)| (*slot, t))
            .collect();
        for (ns, counts) in tally.events.chunks(PER_NAMESPACE).enumerate() {
            let (mut failed, mut contended) = (0, 0);
            for (i, n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
                let op = Op::ALL[i / Outcome::ALL.len()];
                match EventClass::of(op, Outcome::ALL[i % Outcome::ALL.len()]) {
                    EventClass::Failure => failed += n,
                    EventClass::Contention => contended += n,
                    EventClass::Ok => {}
                }
            }
            if failed > 0 {
                let latest = failing.iter().rev().find(|(slot, _)| slot / PER_NAMESPACE == ns);
                self.recent.add(ns, failed, latest.map(|(_, t)| *t));
            }
            if contended > 0 {
                self.recent.contention(ns, contended);
            }
        }
        self.restore(tally);
        for (slot, trace) in &failing {
            let key = keyed
                .iter()
                .rev()
                .find(|e| e.trace.as_ref() == Some(*trace))
                .map(|e| &*e.key);
            self.recent.traced(slot / PER_NAMESPACE, key, (*trace).clone());
        }
        // After the counters: whoever reads the ring then `/metrics` sees them counted.
        if !keyed.is_empty() {
            self.keyed.record(crate::locks::recent::wall_ms(), &self.source, keyed);
        }
        let at = std::time::SystemTime::now();
        for (slot, trace) in traced {
            let (ns, rest) = (slot / PER_NAMESPACE, slot % PER_NAMESPACE);
            let (op, outcome) = (
                Op::ALL[rest / Outcome::ALL.len()],
                Outcome::ALL[rest % Outcome::ALL.len()],
            );
            let Some(name) = self.names.get(ns) else { continue };
            self.exemplars.record(
                metric::LOCK_EVENTS_TOTAL,
                &[("namespace", name), ("op", op.as_str()), ("outcome", outcome.as_str())],
                Exemplar { trace, value: 1.0, at },
            );
        }
    }

    /// Add saved counts (`tally`) to the counters and zero it: not failures of now, nor
    /// events of now (any keyed ones are dropped).
    pub fn restore(&self, tally: &mut Tally) {
        tally.keyed.clear();
        tally.traced.clear();
        if tally.is_empty() {
            return;
        }
        for (counter, n) in self.events.iter().zip(tally.events.iter_mut()) {
            if *n > 0 {
                counter.inc_by(*n);
                *n = 0;
            }
        }
        for (counter, n) in self.lines.iter().zip(tally.lines.iter_mut()) {
            counter.inc_by(*n);
            *n = 0;
        }
    }
}

/// Counts not yet added to the counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    namespaces: usize,
    events: Vec<u64>,
    /// By `LineResult`: matched, ignored, malformed.
    pub lines: [u64; 3],
    /// The events that named a key, in order; the last [`keyed::CAP`] (the ring keeps no more).
    keyed: VecDeque<Pending>,
    /// The latest trace context of each series (by slot) that had one: at most one per series.
    traced: Vec<(usize, TraceContext)>,
}

impl Tally {
    pub fn new(namespaces: usize) -> Self {
        Tally {
            namespaces,
            events: vec![0; (namespaces + 1) * PER_NAMESPACE],
            lines: [0; 3],
            keyed: VecDeque::new(),
            traced: Vec::new(),
        }
    }

    /// Count one classified line.
    pub fn line(&mut self, verdict: &Verdict) {
        self.record(verdict, 1);
    }

    /// Count one classified record of `lines` lines: at most one event, and each of its
    /// lines with the record's result.
    pub fn record(&mut self, verdict: &Verdict, lines: u64) {
        self.record_from(verdict, lines, None);
    }

    /// [`record`](Self::record), for a record read from `file` (kept with a keyed event).
    fn record_from(&mut self, verdict: &Verdict, lines: u64, file: Option<&FileRef<'_>>) {
        let result = match verdict {
            Verdict::Event {
                namespace,
                op,
                outcome,
                key,
                trace,
                origin,
                ..
            } => {
                let ns = namespace.filter(|i| *i < self.namespaces);
                let at = slot(self.namespaces, ns, *op, *outcome);
                self.events[at] += 1;
                if let Some(t) = trace {
                    self.trace(at, t.clone());
                }
                if let Some(key) = key {
                    let mut origin = origin.as_deref().cloned().unwrap_or_default();
                    origin.file = file.map(FileRef::owned);
                    let e = Pending::new(key, ns, *op, *outcome).traced(trace.clone());
                    self.keep(e.from(origin));
                }
                LineResult::Matched
            }
            Verdict::Ignored(_) => LineResult::Ignored,
            Verdict::Malformed(_) => LineResult::Malformed,
        };
        self.lines[result as usize] += lines;
    }

    /// Classify one piece of input read as `format` and count it.
    pub fn piece(&mut self, classifier: &Classifier, piece: &Piece<'_>, format: LogFormat) {
        self.record(&classifier.count_piece(piece, format), u64::from(piece.lines()));
    }

    /// [`piece`](Self::piece), read from `file`: a keyed event keeps the file it came from.
    pub(crate) fn piece_from(
        &mut self,
        classifier: &Classifier,
        piece: &Piece<'_>,
        format: LogFormat,
        file: &FileRef<'_>,
    ) {
        let verdict = classifier.count_piece(piece, format);
        self.record_from(&verdict, u64::from(piece.lines()), Some(file));
    }

    /// Count one lock event (a matched line).
    pub fn event(&mut self, ns: Option<usize>, op: Op, outcome: Outcome) {
        let ns = ns.filter(|i| *i < self.namespaces);
        self.events[slot(self.namespaces, ns, op, outcome)] += 1;
        self.lines[LineResult::Matched as usize] += 1;
    }

    /// Count one lock event (a matched line) that named `key`.
    pub fn keyed_event(&mut self, ns: Option<usize>, op: Op, outcome: Outcome, key: &str) {
        self.pushed(ns, op, outcome, Some(key), None);
    }

    /// Count one lock event (a matched line), with the key it named, the trace it was
    /// written in and who sent it, when it came with them.
    pub fn pushed(
        &mut self,
        ns: Option<usize>,
        op: Op,
        outcome: Outcome,
        key: Option<&str>,
        trace: Option<TraceContext>,
    ) {
        self.pushed_from(ns, op, outcome, key, trace, Origin::default());
    }

    /// [`pushed`](Self::pushed), from `origin`.
    pub(crate) fn pushed_from(
        &mut self,
        ns: Option<usize>,
        op: Op,
        outcome: Outcome,
        key: Option<&str>,
        trace: Option<TraceContext>,
        origin: Origin,
    ) {
        self.event(ns, op, outcome);
        let ns = ns.filter(|i| *i < self.namespaces);
        if let Some(t) = &trace {
            self.trace(slot(self.namespaces, ns, op, outcome), t.clone());
        }
        if let Some(key) = key {
            self.keep(Pending::new(key, ns, op, outcome).traced(trace).from(origin));
        }
    }

    /// `trace` is the latest of the series at `slot`.
    fn trace(&mut self, slot: usize, trace: TraceContext) {
        match self.traced.iter_mut().find(|(s, _)| *s == slot) {
            Some(kept) => kept.1 = trace,
            None => self.traced.push((slot, trace)),
        }
    }

    /// Keep a keyed event for the ring; past [`keyed::CAP`] the oldest go, as they would there.
    fn keep(&mut self, e: Pending) {
        if self.keyed.len() >= keyed::CAP {
            self.keyed.pop_front();
        }
        self.keyed.push_back(e);
    }

    /// The keyed events not yet recorded, oldest first.
    #[cfg(test)]
    pub(crate) fn keyed(&self) -> impl Iterator<Item = &Pending> {
        self.keyed.iter()
    }

    /// Add `n` events of one series, without their lines (restoring saved counts).
    pub(crate) fn events_of(&mut self, ns: Option<usize>, op: Op, outcome: Outcome, n: u64) {
        let ns = ns.filter(|i| *i < self.namespaces);
        self.events[slot(self.namespaces, ns, op, outcome)] += n;
    }

    /// A line too long to keep, counted as malformed.
    pub fn too_long(&mut self) {
        self.lines[LineResult::Malformed as usize] += 1;
    }

    pub fn total(&self) -> u64 {
        self.lines.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Add another tally of the same shape, its keyed events taken after this one's.
    pub fn absorb(&mut self, mut other: Tally) {
        self.add(&other);
        for e in other.keyed.drain(..) {
            self.keep(e);
        }
        for (slot, t) in other.traced.drain(..) {
            self.trace(slot, t);
        }
    }

    /// Add the counts of another tally of the same shape (not its keyed events: a running
    /// total of counts keeps none).
    pub fn add(&mut self, other: &Tally) {
        for (a, b) in self.events.iter_mut().zip(&other.events) {
            *a += b;
        }
        for (a, b) in self.lines.iter_mut().zip(&other.lines) {
            *a += b;
        }
    }

    /// The non-zero event counts: (namespace index or `None` for unknown, op, outcome, count).
    pub fn events(&self) -> impl Iterator<Item = (Option<usize>, Op, Outcome, u64)> + '_ {
        self.events.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| {
            let ns = i / PER_NAMESPACE;
            let rest = i % PER_NAMESPACE;
            (
                (ns < self.namespaces).then_some(ns),
                Op::ALL[rest / Outcome::ALL.len()],
                Outcome::ALL[rest % Outcome::ALL.len()],
                *n,
            )
        })
    }
}

#[cfg(test)]
#[path = "count_tests.rs"]
mod tests;
