//! Exemplars: for each counter series, the latest event that came with trace context, kept
//! to be shown beside the series in the OpenMetrics exposition (never in the 0.0.4 text
//! format, never as a label). One per series, so memory follows the series, not the events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The OpenMetrics limit on an exemplar's label set: names and values, in UTF-8 characters.
pub const MAX_LABEL_CHARS: usize = 128;

/// Trace context read from a record: the ids as the sender wrote them, checked by
/// [`TraceContext::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: String,
    pub span_id: Option<String>,
}

impl TraceContext {
    /// Trace context from ids a sender gave: each 1–64 characters of `[0-9A-Za-z_-]` (hex
    /// W3C and OTLP ids, decimal Datadog ids, UUID-like ones), the two within the
    /// exemplar's 128 characters with their names. An unusable span id is dropped; an
    /// unusable trace id gives `None`.
    pub fn new(trace_id: &str, span_id: Option<&str>) -> Option<Self> {
        let usable = |s: &str| {
            !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        let trace_id = trace_id.trim();
        if !usable(trace_id) || trace_id.bytes().all(|b| b == b'0' || b == b'-') {
            return None;
        }
        let span_id = span_id
            .map(str::trim)
            .filter(|s| usable(s) && !s.bytes().all(|b| b == b'0'))
            .filter(|s| "trace_id".len() + trace_id.len() + "span_id".len() + s.len() <= MAX_LABEL_CHARS)
            .map(str::to_string);
        Some(TraceContext {
            trace_id: trace_id.to_string(),
            span_id,
        })
    }
}

/// One exemplar: the trace context, the observed value (1 for a counted event) and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    pub trace: TraceContext,
    pub value: f64,
    pub at: SystemTime,
}

/// A series' key: its family name and its label pairs sorted by label name, as
/// `prometheus` gathers them.
pub(crate) type SeriesKey = (String, Vec<(String, String)>);

/// What a scrape takes of the store: each series' key and exemplar, shared (no copy).
pub(crate) type Snapshot = Vec<(Arc<SeriesKey>, Arc<Exemplar>)>;

/// The latest exemplar of each series that had one. Cloned handles share the store.
#[derive(Clone, Default)]
pub struct Exemplars {
    inner: Arc<Mutex<HashMap<Arc<SeriesKey>, Arc<Exemplar>>>>,
}

fn key(family: &str, labels: &[(&str, &str)]) -> SeriesKey {
    let mut pairs: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    pairs.sort();
    (family.to_string(), pairs)
}

impl Exemplars {
    /// Keep `exemplar` as the latest of the series `family{labels}`, replacing the one
    /// before.
    pub fn record(&self, family: &str, labels: &[(&str, &str)], exemplar: Exemplar) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Arc::new(key(family, labels)), Arc::new(exemplar));
    }

    /// The latest exemplar of the series `family{labels}` (labels in any order).
    pub fn get(&self, family: &str, labels: &[(&str, &str)]) -> Option<Exemplar> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key(family, labels))
            .map(|e| Exemplar::clone(e))
    }

    /// Every exemplar held with its series' key (label pairs sorted by name), shared: an
    /// encoding holds the lock only while it takes the handles.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let held = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        held.iter().map(|(k, e)| (Arc::clone(k), Arc::clone(e))).collect()
    }

    /// Forget the exemplars of series whose `label` is `value` (a removed namespace's).
    pub fn drop_series(&self, label: &str, value: &str) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|series, _| !series.1.iter().any(|(k, v)| k == label && v == value));
    }

    /// How many series hold an exemplar.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no series holds an exemplar.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_are_checked_and_one_exemplar_is_kept_per_series() {
        assert!(TraceContext::new("", None).is_none());
        assert!(TraceContext::new("00000000000000000000000000000000", None).is_none());
        assert!(TraceContext::new("4bf92f35 77b34da6", None).is_none());
        assert!(TraceContext::new(&"a".repeat(65), None).is_none());
        let t = TraceContext::new("4bf92f3577b34da6a3ce929d0e0e4736", Some("00f067aa0ba902b7")).unwrap();
        assert_eq!(t.span_id.as_deref(), Some("00f067aa0ba902b7"));
        let dd = TraceContext::new("1234567890123456789", Some("bad span!")).unwrap();
        assert_eq!(dd.span_id, None);
        let store = Exemplars::default();
        let at = SystemTime::now();
        store.record(
            "c",
            &[("op", "release"), ("namespace", "a")],
            Exemplar {
                trace: dd.clone(),
                value: 1.0,
                at,
            },
        );
        store.record(
            "c",
            &[("namespace", "a"), ("op", "release")],
            Exemplar {
                trace: t.clone(),
                value: 1.0,
                at,
            },
        );
        assert_eq!(store.len(), 1);
        assert_eq!(
            store.get("c", &[("op", "release"), ("namespace", "a")]).unwrap().trace,
            t
        );
        store.drop_series("namespace", "a");
        assert!(store.is_empty());
    }
}
