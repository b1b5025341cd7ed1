//! Plain log records (`POST /api/v1/logs`), as Vector's and Fluent Bit's `http` outputs
//! send them: a JSON array of objects, NDJSON, JSON objects back to back, or text lines.
//! An object's text comes from the field shippers put the line in (`message`, `log`, `msg`,
//! …); its lock-key, namespace, error and trace-context fields are read beside it.

use serde_json::{Map, Value};

use super::batch::{Batch, ERROR_FIELDS, Entry, KEY_FIELDS, MESSAGE_FIELDS, NAMESPACE_FIELDS};
use super::fields::{SPAN_ID, TRACE_ID};
use super::origin::{HOST_FIELDS, INSTANCE_FIELDS, PID_FIELDS};

/// Why a body is none of the framings taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlainError {
    #[error("record {record}: {problem}")]
    Record { record: usize, problem: String },
    #[error("not valid JSON after {records} records: {problem}")]
    Json { records: usize, problem: String },
}

/// What a body holds.
#[derive(Debug)]
pub(crate) enum Plain {
    /// JSON records.
    Records(Batch),
    /// Text lines, read as a file's (`push::text`).
    Text,
}

/// Read a body: JSON when it starts with `[` or `{`, else text lines.
pub(crate) fn read(body: &[u8]) -> Result<Plain, PlainError> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace());
    match start.map(|i| body[i]) {
        Some(b'[') => array(body).map(Plain::Records),
        Some(b'{') => objects(body).map(Plain::Records),
        _ => Ok(Plain::Text),
    }
}

fn array(body: &[u8]) -> Result<Batch, PlainError> {
    let items: Vec<Value> = serde_json::from_slice(body).map_err(|e| PlainError::Json {
        records: 0,
        problem: e.to_string(),
    })?;
    let mut batch = Batch::default();
    for (i, v) in items.iter().enumerate() {
        batch.entries.push(record(v, i + 1)?);
    }
    Ok(batch)
}

/// NDJSON and concatenated objects alike: one object after another, any whitespace between.
fn objects(body: &[u8]) -> Result<Batch, PlainError> {
    let mut batch = Batch::default();
    for (i, v) in serde_json::Deserializer::from_slice(body)
        .into_iter::<Value>()
        .enumerate()
    {
        let v = v.map_err(|e| PlainError::Json {
            records: i,
            problem: e.to_string(),
        })?;
        batch.entries.push(record(&v, i + 1)?);
    }
    Ok(batch)
}

fn record(v: &Value, record: usize) -> Result<Entry, PlainError> {
    let bad = |problem: &str| PlainError::Record {
        record,
        problem: problem.to_string(),
    };
    let o = match v {
        Value::Object(o) => o,
        Value::String(s) => {
            return Ok(Entry {
                text: s.clone(),
                ..Default::default()
            });
        }
        _ => return Err(bad("must be an object (or a string)")),
    };
    let text = find(o, MESSAGE_FIELDS).ok_or_else(|| {
        bad(&format!(
            "no text: none of the fields {} holds a string",
            MESSAGE_FIELDS.join(", ")
        ))
    })?;
    Ok(Entry {
        text,
        error: find(o, ERROR_FIELDS),
        trace: None,
        key: find(o, KEY_FIELDS),
        namespace: find(o, NAMESPACE_FIELDS),
        trace_id: find(o, TRACE_ID),
        span_id: find(o, SPAN_ID),
        pid: find(o, PID_FIELDS),
        host: find(o, HOST_FIELDS),
        instance: find(o, INSTANCE_FIELDS),
    })
}

/// The first of `names` holding a string (or a number, written out).
fn find(o: &Map<String, Value>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| match o.get(*n)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_framing_reads_the_same_records() {
        let want = ["lock lost wf:lock:1", "served", "release failed"];
        let bodies: [&[u8]; 3] = [
            br#"[{"message":"lock lost wf:lock:1"},{"log":"served\n"},{"msg":"release failed","lock_key":"k"}]"#,
            b"{\"message\":\"lock lost wf:lock:1\"}\n{\"log\":\"served\\n\"}\n{\"msg\":\"release failed\",\"lock_key\":\"k\"}\n",
            br#"{"message":"lock lost wf:lock:1"}{"log":"served\n"} {"msg":"release failed","lock_key":"k"}"#,
        ];
        let records = |body| match read(body).unwrap() {
            Plain::Records(b) => b,
            Plain::Text => panic!("not JSON"),
        };
        assert!(matches!(read(b"lock lost\n{not json}"), Ok(Plain::Text)));
        for body in bodies {
            let b = records(body);
            let texts: Vec<_> = b.entries.iter().map(|e| e.text.trim_end()).collect();
            assert_eq!(texts, want, "{}", String::from_utf8_lossy(body));
        }
        assert_eq!(records(bodies[0]).entries[2].key.as_deref(), Some("k"));
    }

    #[test]
    fn wrong_shapes_are_refused() {
        for bad in [&b"[1]"[..], b"[{\"level\":\"info\"}]", b"{\"message\":\"a\"}{", b"[{"] {
            assert!(read(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
