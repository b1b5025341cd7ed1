//! Pushed lock events: reading the body of `POST /api/v1/events`. Event objects (NDJSON)
//! are all checked before any is counted, so a rejected batch can be fixed and resent
//! whole without counting anything twice; `text/plain` lines are classified like a file's,
//! records (a line with its traceback) joined.

use serde_json::Value;

use super::count::Tally;
use super::origin::Origin;
use super::records::{End, RecordSplitter};
use super::{Classifier, MAX_LINE};
use crate::config::{LogFormat, Multiline};
use crate::metrics::TraceContext;
use crate::vocab::UNKNOWN_NAMESPACE;
use crate::vocab::{Op, Outcome};

/// Largest body taken, in bytes (413 above).
pub(crate) const MAX_BODY: usize = 1024 * 1024;

/// The first line of a batch that is not a valid event object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub(crate) struct BadLine {
    /// 1-based.
    pub(crate) line: usize,
    pub(crate) problem: String,
}

/// What a body added up to.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) tally: Tally,
    /// Events whose `namespace` is not configured, counted as `unknown`.
    pub(crate) unknown_namespace: u64,
}

/// Read NDJSON event objects `{"namespace","op","outcome","key"?,"ts"?,"trace_id"?,"span_id"?,
/// "pid"?,"host"?,"instance"?}`, one per line (blank lines skipped, other fields ignored; `traceId`/`spanId` taken too;
/// ids no trace UI could use are left out, the event still counted). Namespace: the field when configured (other
/// names count as `unknown`), else the namespace whose pattern matches `key`, else `unknown`.
/// An event with a `key` is also kept under that key (cut to 256 bytes) for the history API.
pub(crate) fn events(body: &[u8], classifier: &Classifier) -> Result<Batch, BadLine> {
    let mut batch = Batch {
        tally: Tally::new(classifier.namespace_count()),
        unknown_namespace: 0,
    };
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let bad = |problem: String| BadLine { line: i + 1, problem };
        let value: Value = serde_json::from_slice(line)
            .map_err(|e| bad(format!("not valid JSON at column {}: {}", e.column(), json_problem(&e))))?;
        let Value::Object(obj) = value else {
            return Err(bad("not a JSON object".into()));
        };
        let text = |field: &str, required: bool| -> Result<Option<&str>, BadLine> {
            match obj.get(field) {
                None | Some(Value::Null) if !required => Ok(None),
                None | Some(Value::Null) => Err(bad(format!("missing field `{field}`"))),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(bad(format!("field `{field}` must be a string"))),
            }
        };
        let op: Op = text("op", true)?
            .unwrap_or_default()
            .parse()
            .map_err(|e| bad(format!("field `op`: {e}")))?;
        let outcome: Outcome = text("outcome", true)?
            .unwrap_or_default()
            .parse()
            .map_err(|e| bad(format!("field `outcome`: {e}")))?;
        let key = text("key", false)?;
        match obj.get("ts") {
            None | Some(Value::Null | Value::Number(_) | Value::String(_)) => {}
            Some(_) => return Err(bad("field `ts` must be a number or a string".into())),
        }
        let namespace = match text("namespace", false)? {
            Some(name) => {
                let found = classifier.namespace_index(name);
                if found.is_none() && name != UNKNOWN_NAMESPACE {
                    batch.unknown_namespace += 1;
                }
                found
            }
            None => key.and_then(|k| classifier.namespace_of_key(k)),
        };
        let either = |snake: &str, camel: &str| -> Result<Option<&str>, BadLine> {
            Ok(text(snake, false)?.or(text(camel, false)?))
        };
        let trace = either("trace_id", "traceId")?;
        let span = either("span_id", "spanId")?;
        let trace = trace.and_then(|t| TraceContext::new(t, span));
        let pid = match obj.get("pid") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("field `pid` must be a number or a string".into())),
        };
        let origin = Origin::of(pid.as_deref(), text("host", false)?, text("instance", false)?);
        batch.tally.pushed_from(namespace, op, outcome, key, trace, origin);
    }
    Ok(batch)
}

/// serde_json's message without its "at line 1 column N" (the column is given already).
fn json_problem(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Classify raw log lines, as a tailed file's would be: records (a traceback with its
/// line) are joined, and the body's end ends the last one.
pub(crate) fn text(body: &[u8], classifier: &Classifier) -> Tally {
    let mut tally = Tally::new(classifier.namespace_count());
    RecordSplitter::new(Multiline::Auto).feed(body, MAX_LINE, End::Eof, |piece| {
        tally.piece(classifier, &piece, LogFormat::Auto)
    });
    tally
}
