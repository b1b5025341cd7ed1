//! A batch of log records as a shipper sends them (OTLP records, Loki entries, JSON
//! objects): each record's text with the fields that came beside it. Counting a batch
//! joins the records' texts and cuts them again with `RecordSplitter`, so a traceback
//! shipped one line per record is still one failure; each record keeps its own fields.

use super::classify::Given;
use super::count::Tally;
use super::records::{End, Piece, RecordSplitter};
use super::{Classifier, MAX_LINE};
use crate::config::Multiline;

/// One record of a batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The record's text: a log line, or lines.
    pub(crate) text: String,
    /// An error's type and message, when sent apart from the text.
    pub(crate) error: Option<String>,
    /// A stack trace sent apart from the text.
    pub(crate) trace: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) namespace: Option<String>,
    /// The trace and span the record was written in, as sent (hex for OTLP).
    pub(crate) trace_id: Option<String>,
    pub(crate) span_id: Option<String>,
    /// Who sent it, when said apart from the text (an OTLP resource, Loki labels).
    pub(crate) pid: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) instance: Option<String>,
}

impl Entry {
    fn given(&self) -> Given<'_> {
        Given {
            error: self.error.as_deref(),
            trace: self.trace.as_deref(),
            key: self.key.as_deref(),
            namespace: self.namespace.as_deref(),
            trace_id: self.trace_id.as_deref(),
            span_id: self.span_id.as_deref(),
            pid: self.pid.as_deref(),
            host: self.host.as_deref(),
            instance: self.instance.as_deref(),
        }
    }
}

/// Records in the order they were sent, and how many could not be read at all.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) entries: Vec<Entry>,
    /// Records with no text to read (counted as malformed, reported to the sender).
    pub(crate) unreadable: u64,
    /// Why the first unreadable record was.
    pub(crate) first_unreadable: Option<String>,
    /// Where streams after the first begin in `entries`: records are never joined across.
    streams: Vec<usize>,
}

impl Batch {
    pub(crate) fn unreadable(&mut self, why: impl FnOnce() -> String) {
        self.unreadable += 1;
        if self.first_unreadable.is_none() {
            self.first_unreadable = Some(why());
        }
    }

    /// The entries pushed from now on belong to another stream (a Loki stream).
    pub(crate) fn next_stream(&mut self) {
        if !self.entries.is_empty() {
            self.streams.push(self.entries.len());
        }
    }

    /// Classify and count every record: each accepted record once, its lines as a file's
    /// would be; unreadable records as one malformed line each.
    pub(crate) fn tally(&self, classifier: &Classifier) -> Tally {
        let mut tally = Tally::new(classifier.namespace_count());
        for _ in 0..self.unreadable {
            tally.too_long();
        }
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(self.streams.iter().copied())
            .chain([self.entries.len()])
            .collect();
        for w in bounds.windows(2) {
            count(&self.entries[w[0]..w[1]], classifier, &mut tally);
        }
        tally
    }
}

/// Count the records of one stream.
fn count(entries: &[Entry], classifier: &Classifier, tally: &mut Tally) {
    if entries.is_empty() {
        return;
    }
    // The texts joined by newlines; `starts[i]` is where entry i begins.
    let mut joined = String::with_capacity(entries.iter().map(|e| e.text.len() + 1).sum());
    let mut starts = Vec::with_capacity(entries.len());
    for e in entries {
        starts.push(joined.len());
        let text = e.text.strip_suffix('\n').unwrap_or(&e.text);
        joined.push_str(text.strip_suffix('\r').unwrap_or(text));
        joined.push('\n');
    }
    let base = joined.as_ptr() as usize;
    RecordSplitter::new(Multiline::Auto).feed(joined.as_bytes(), MAX_LINE, End::Eof, |piece| {
        let Piece::Record {
            bytes,
            lines,
            orphan: false,
            ..
        } = piece
        else {
            tally.piece(classifier, &piece, crate::config::LogFormat::Auto);
            return;
        };
        // The record's first byte tells which entry starts it (a record always starts
        // at a line's start, and every entry starts a line).
        let at = bytes.as_ptr() as usize - base;
        let entry = match starts.binary_search(&at) {
            Ok(i) => &entries[i],
            Err(i) => &entries[i.saturating_sub(1)],
        };
        tally.record(&classifier.classify_given(bytes, &entry.given()), u64::from(lines));
    });
}

/// Field names a record's text is read from, in order of preference.
pub(crate) const MESSAGE_FIELDS: &[&str] = &[
    "message",
    "msg",
    "log",
    "MESSAGE",
    "short_message",
    "body",
    "@m",
    "event",
    "line",
];
/// Field (attribute, label) names read as the lock key.
pub(crate) const KEY_FIELDS: &[&str] = &["lock.key", "lock_key", "key", "lock", "resource"];
/// Field names read as the namespace (used only when configured).
pub(crate) const NAMESPACE_FIELDS: &[&str] = &["lock.namespace", "lock_namespace", "namespace"];
/// Field names read as error text.
pub(crate) const ERROR_FIELDS: &[&str] = &[
    "error",
    "err",
    "error.message",
    "exception",
    "exc_info",
    "stack_trace",
    "stacktrace",
    "stack",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn classifier() -> Classifier {
        let cfg = crate::config::Config::from_toml(
            "[[target]]\nname = \"m\"\nurl = \"redis://127.0.0.1:1/0\"\n\
             [[namespace]]\nname = \"workflow\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n",
            "t.toml",
            std::path::Path::new("."),
            &Default::default(),
        )
        .unwrap();
        Classifier::new(&cfg).unwrap()
    }

    fn text(t: &str) -> Entry {
        Entry {
            text: t.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_traceback_sent_line_by_line_is_one_record_with_its_first_entrys_fields() {
        let c = classifier();
        let mut start = text("release failed");
        start.key = Some("wf:lock:1".into());
        let batch = Batch {
            entries: vec![
                text("INFO served"),
                start,
                text("Traceback (most recent call last):"),
                text("  File \"w.py\", line 3, in run"),
                text("redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned"),
                text("INFO served"),
            ],
            ..Default::default()
        };
        let t = batch.tally(&c);
        let events: Vec<_> = t.events().collect();
        assert_eq!(
            events,
            vec![(Some(0), crate::vocab::Op::Release, crate::vocab::Outcome::NotOwned, 1)]
        );
        assert_eq!(t.lines, [4, 2, 0]);
    }

    #[test]
    fn given_error_and_trace_count_and_unreadable_records_are_malformed() {
        let c = classifier();
        let mut e = text("job failed");
        e.error = Some("LockNotOwnedError: Cannot release a lock that's no longer owned".into());
        e.trace = Some("Traceback (most recent call last):\n  File \"w.py\", line 3\n".into());
        e.namespace = Some("workflow".into());
        let mut batch = Batch {
            entries: vec![e],
            ..Default::default()
        };
        batch.unreadable(|| "no body".into());
        let t = batch.tally(&c);
        assert_eq!(t.events().count(), 1);
        assert_eq!(t.lines, [1, 0, 1]);
        assert_eq!(batch.first_unreadable.as_deref(), Some("no body"));
    }
}
