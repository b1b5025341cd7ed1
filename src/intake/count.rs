//! Counting what the intake takes in: a `Tally` adds up verdicts locally (no atomics per
//! line) and `flush`es into the pre-resolved Prometheus counters of one source.
//!
//! Counters are resolved once from the config, so a line costs no label lookup and no
//! label value can come from the input.

use prometheus::IntCounter;

use super::metrics::IntakeMetrics;
use super::records::Piece;
use super::{Classifier, Verdict};
use crate::config::LogFormat;
use crate::vocab::{LineResult, Op, Outcome, UNKNOWN_NAMESPACE};

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
        }
    }

    /// An empty tally shaped for these counters.
    pub fn tally(&self) -> Tally {
        Tally::new(self.namespaces)
    }

    /// Add `tally` to the counters and zero it; its failures into the last hour.
    pub fn flush(&self, tally: &mut Tally) {
        for (ns, counts) in tally.events.chunks(PER_NAMESPACE).enumerate() {
            let failed: u64 = counts
                .iter()
                .enumerate()
                .filter(|(i, _)| Outcome::ALL[i % Outcome::ALL.len()] != Outcome::Ok)
                .map(|(_, n)| *n)
                .sum();
            if failed > 0 {
                self.recent.add(ns, failed);
            }
        }
        self.restore(tally);
    }

    /// Add saved counts (`tally`) to the counters and zero it: not failures of now.
    pub fn restore(&self, tally: &mut Tally) {
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
}

impl Tally {
    pub fn new(namespaces: usize) -> Self {
        Tally {
            namespaces,
            events: vec![0; (namespaces + 1) * PER_NAMESPACE],
            lines: [0; 3],
        }
    }

    /// Count one classified line.
    pub fn line(&mut self, verdict: &Verdict) {
        self.record(verdict, 1);
    }

    /// Count one classified record of `lines` lines: at most one event, and each of its
    /// lines with the record's result.
    pub fn record(&mut self, verdict: &Verdict, lines: u64) {
        let result = match verdict {
            Verdict::Event {
                namespace, op, outcome, ..
            } => {
                let ns = namespace.filter(|i| *i < self.namespaces);
                self.events[slot(self.namespaces, ns, *op, *outcome)] += 1;
                LineResult::Matched
            }
            Verdict::Ignored(_) => LineResult::Ignored,
            Verdict::Malformed(_) => LineResult::Malformed,
        };
        self.lines[result as usize] += lines;
    }

    /// Classify one piece of input read as `format` and count it.
    pub fn piece(&mut self, classifier: &Classifier, piece: &Piece<'_>, format: LogFormat) {
        self.record(&classifier.classify_piece(piece, format), u64::from(piece.lines()));
    }

    /// Count one lock event (a matched line).
    pub fn event(&mut self, ns: Option<usize>, op: Op, outcome: Outcome) {
        let ns = ns.filter(|i| *i < self.namespaces);
        self.events[slot(self.namespaces, ns, op, outcome)] += 1;
        self.lines[LineResult::Matched as usize] += 1;
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

    /// Add another tally of the same shape.
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
mod tests {
    use super::*;

    #[test]
    fn tally_slots_round_trip() {
        let mut t = Tally::new(2);
        t.event(Some(1), Op::Renew, Outcome::Error);
        t.event(None, Op::Release, Outcome::NotOwned);
        t.event(Some(7), Op::Write, Outcome::StaleFence); // out of range: unknown
        t.too_long();
        t.line(&Verdict::Ignored("x"));
        let traceback = Verdict::Event {
            namespace: Some(0),
            op: Op::Release,
            outcome: Outcome::NotOwned,
            by: String::new(),
        };
        t.record(&traceback, 9);
        let got: Vec<_> = t.events().collect();
        assert_eq!(
            got,
            vec![
                (Some(0), Op::Release, Outcome::NotOwned, 1),
                (Some(1), Op::Renew, Outcome::Error, 1),
                (None, Op::Release, Outcome::NotOwned, 1),
                (None, Op::Write, Outcome::StaleFence, 1),
            ]
        );
        // One event for the 9-line record; its lines all count as matched.
        assert_eq!(t.lines, [12, 1, 1]);
        assert_eq!(t.total(), 14);
    }
}
