//! Recent incidents, for the status page's timeline: expiry takeovers, overdue episodes,
//! locks without TTL appearing, locks lost in a failover, bursts of lock failures, lock
//! failures reported with a trace.
//!
//! A ring of the last [`CAP`] incidents; the key, when known, is kept (never as a label)
//! cut to [`KEY_MAX`] bytes, and the trace a reported failure came with. Memory: at most
//! `CAP × (size_of::<Incident>() + KEY_MAX + TRACE_MAX)` = 200 × (48 + 256 + 176) = 96,000
//! bytes per log.

use std::collections::VecDeque;

use crate::metrics::TraceContext;

/// Incidents kept per log.
pub const CAP: usize = 200;
/// Longest key kept, bytes (a longer one is cut and shown without a link).
pub const KEY_MAX: usize = 256;
/// Most a kept trace takes: the context and its two ids at their longest (64 bytes each).
pub const TRACE_MAX: usize = std::mem::size_of::<TraceContext>() + 128;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Takeover,
    Overdue,
    WithoutTtl,
    LostInFailover,
    FailureBurst,
    /// A lock failure reported by logs or pushes that came with a trace.
    TracedFailure,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Takeover => "takeover",
            Kind::Overdue => "overdue",
            Kind::WithoutTtl => "without_ttl",
            Kind::LostInFailover => "lost_in_failover",
            Kind::FailureBurst => "failure_burst",
            Kind::TracedFailure => "traced_failure",
        }
    }

    /// In words, for the timeline.
    pub fn words(self) -> &'static str {
        match self {
            Kind::Takeover => "expiry takeover",
            Kind::Overdue => "renewal overdue",
            Kind::WithoutTtl => "lock without TTL",
            Kind::LostInFailover => "lost in failover",
            Kind::FailureBurst => "lock failures burst",
            Kind::TracedFailure => "lock failure reported",
        }
    }
}

/// One incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    /// Wall-clock ms since the Unix epoch.
    pub at_ms: i64,
    /// Index of the namespace in the config's order (the log's owner knows which list).
    pub namespace: usize,
    pub kind: Kind,
    /// How many (locks overdue, failures in the burst, …); 1 for one key's incident.
    pub count: u32,
    /// The key, cut to `KEY_MAX` bytes, when one key is concerned.
    pub key: Option<Box<[u8]>>,
    /// The key was longer than `KEY_MAX` (no link: the page could not find it).
    pub cut: bool,
    /// The trace of the (latest traced) failure behind it, when it had one.
    pub trace: Option<Box<TraceContext>>,
}

/// The ring.
#[derive(Debug, Default)]
pub struct IncidentLog {
    ring: VecDeque<Incident>,
}

impl IncidentLog {
    /// Add an incident; the oldest goes past `CAP`.
    pub fn push(&mut self, at_ms: i64, namespace: usize, kind: Kind, count: u32, key: Option<&[u8]>) {
        if self.ring.len() >= CAP {
            self.ring.pop_front();
        }
        self.ring.push_back(Incident {
            at_ms,
            namespace,
            kind,
            count,
            cut: key.is_some_and(|k| k.len() > KEY_MAX),
            key: key.map(|k| Box::from(&k[..k.len().min(KEY_MAX)])),
            trace: None,
        });
    }

    /// Add an incident with the trace behind it.
    pub fn push_traced(&mut self, at_ms: i64, namespace: usize, kind: Kind, key: Option<&[u8]>, trace: TraceContext) {
        self.push(at_ms, namespace, kind, 1, key);
        if let Some(last) = self.ring.back_mut() {
            last.trace = Some(Box::new(trace));
        }
    }

    /// Give the latest incident of `kind` in `namespace` at or after `since_ms` the trace
    /// `trace` (a burst's latest traced failure); false when there is none.
    pub fn retrace(&mut self, since_ms: i64, namespace: usize, kind: Kind, trace: &TraceContext) -> bool {
        match self
            .ring
            .iter_mut()
            .rev()
            .take_while(|i| i.at_ms >= since_ms)
            .find(|i| i.kind == kind && i.namespace == namespace)
        {
            Some(i) => {
                i.trace = Some(Box::new(trace.clone()));
                true
            }
            None => false,
        }
    }

    /// The incidents whose namespace `index` maps to a new index, renumbered (a reload
    /// carrying some namespaces over); the others go.
    pub fn carried(&self, index: impl Fn(usize) -> Option<usize>) -> IncidentLog {
        let ring = self
            .ring
            .iter()
            .filter_map(|i| index(i.namespace).map(|namespace| Incident { namespace, ..i.clone() }))
            .collect();
        IncidentLog { ring }
    }

    /// The incidents kept, oldest first.
    pub fn all(&self) -> impl Iterator<Item = &Incident> {
        self.ring.iter()
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_count_and_key_length() {
        assert_eq!(
            std::mem::size_of::<Incident>(),
            48,
            "docs/http.md states 48 bytes + the key + the trace"
        );
        assert_eq!(TRACE_MAX, 176);
        let mut log = IncidentLog::default();
        let long = vec![b'k'; 10_000];
        for i in 0..1000 {
            log.push(i, 0, Kind::Takeover, 1, Some(&long));
        }
        assert_eq!(log.len(), CAP);
        assert_eq!(
            log.all().next().map(|i| i.at_ms),
            Some(1000 - CAP as i64),
            "the oldest went first"
        );
        assert!(
            log.all()
                .all(|i| i.cut && i.key.as_ref().is_some_and(|k| k.len() == KEY_MAX))
        );
        log.push(2000, 1, Kind::Overdue, 3, None);
        let last = log.all().last().unwrap();
        assert_eq!(
            (last.kind, last.count, last.key.is_none(), last.cut),
            (Kind::Overdue, 3, true, false)
        );
    }

    #[test]
    fn carried_over_renumbered_and_only_the_kept_namespaces() {
        let mut log = IncidentLog::default();
        for (at, ns) in [(1, 0), (2, 1), (3, 2), (4, 1)] {
            log.push(at, ns, Kind::Takeover, 1, Some(b"k"));
        }
        // Namespace 1 changed; 0 and 2 kept, now at 1 and 0.
        let carried = log.carried(|ns| [Some(1), None, Some(0)][ns]);
        let got: Vec<(i64, usize)> = carried.all().map(|i| (i.at_ms, i.namespace)).collect();
        assert_eq!(got, [(1, 1), (3, 0)]);
        assert_eq!(log.len(), 4, "the old log is left as it was");
    }
}
