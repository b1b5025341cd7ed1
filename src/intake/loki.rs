//! Loki push bodies (`POST /loki/api/v1/push`): a protobuf `PushRequest` (its Snappy
//! block already undone by `decode`) or Loki's JSON (`streams[].stream` labels, `values[]`
//! of `[ns timestamp, line, metadata?]`), read into a `Batch`, one stream after another.
//! The stream's labels and an entry's structured metadata are read as fields (a lock key, a
//! configured namespace); they never become labels.

use prost::Message;
use serde_json::Value as Json;

use super::batch::{Batch, ERROR_FIELDS, Entry, KEY_FIELDS, NAMESPACE_FIELDS};
use super::fields::{SPAN_ID, TRACE_ID};
use super::origin::{HOST_FIELDS, INSTANCE_FIELDS, PID_FIELDS};
use super::wire::PushRequest;

/// Why a body is not a Loki push.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LokiError {
    #[error("not a protobuf PushRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("stream {stream}: the labels `{labels}` are not of the form {{name=\"value\", …}}")]
    Labels { stream: usize, labels: String },
    #[error("not a Loki JSON push: {0}")]
    Json(String),
}

/// Read a protobuf body (already decompressed).
pub(crate) fn protobuf(body: &[u8]) -> Result<Batch, LokiError> {
    let req = PushRequest::decode(body)?;
    let mut batch = Batch::default();
    for (i, s) in req.streams.into_iter().enumerate() {
        let labels = parse_labels(&s.labels).ok_or_else(|| LokiError::Labels {
            stream: i,
            labels: s.labels.chars().take(200).collect(),
        })?;
        batch.next_stream();
        for e in s.entries {
            let meta: Vec<(String, String)> = e.structured_metadata.into_iter().map(|p| (p.name, p.value)).collect();
            batch.entries.push(entry(e.line, &meta, &labels));
        }
    }
    Ok(batch)
}

/// Read a JSON body.
pub(crate) fn json(body: &[u8]) -> Result<Batch, LokiError> {
    let bad = |what: String| LokiError::Json(what);
    let value: Json = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let streams = value
        .get("streams")
        .and_then(Json::as_array)
        .ok_or_else(|| bad("the body must be an object with a `streams` array".into()))?;
    let mut batch = Batch::default();
    for (i, s) in streams.iter().enumerate() {
        let labels = match s.get("stream") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Object(o)) => {
                strings(o).ok_or_else(|| bad(format!("streams[{i}].stream: label values must be strings")))?
            }
            Some(_) => return Err(bad(format!("streams[{i}].stream must be an object of labels"))),
        };
        let values = s
            .get("values")
            .and_then(Json::as_array)
            .ok_or_else(|| bad(format!("streams[{i}].values must be an array")))?;
        batch.next_stream();
        for (j, v) in values.iter().enumerate() {
            let at = || format!("streams[{i}].values[{j}]");
            let shape = || {
                bad(format!(
                    "{} must be [\"<ns timestamp>\", \"<line>\", {{metadata}}?]",
                    at()
                ))
            };
            let v = v.as_array().filter(|v| (2..=3).contains(&v.len())).ok_or_else(shape)?;
            match &v[0] {
                Json::String(s) if s.parse::<i128>().is_ok() => {}
                Json::Number(n) if n.is_i64() || n.is_u64() => {}
                _ => return Err(bad(format!("{}: the timestamp must be nanoseconds as a string", at()))),
            }
            let line = v[1].as_str().ok_or_else(shape)?;
            let meta = match v.get(2) {
                None | Some(Json::Null) => Vec::new(),
                Some(Json::Object(o)) => strings(o).ok_or_else(shape)?,
                Some(_) => return Err(shape()),
            };
            batch.entries.push(entry(line.to_string(), &meta, &labels));
        }
    }
    Ok(batch)
}

fn strings(o: &serde_json::Map<String, Json>) -> Option<Vec<(String, String)>> {
    o.iter()
        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect()
}

fn entry(line: String, meta: &[(String, String)], labels: &[(String, String)]) -> Entry {
    let find = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| meta.iter().chain(labels).find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    };
    Entry {
        text: line,
        error: find(ERROR_FIELDS),
        trace: None,
        key: find(KEY_FIELDS),
        namespace: find(NAMESPACE_FIELDS),
        trace_id: find(TRACE_ID),
        span_id: find(SPAN_ID),
        pid: find(PID_FIELDS),
        host: find(HOST_FIELDS),
        instance: find(INSTANCE_FIELDS),
    }
}

/// `{a="x", b="y \"q\""}` into pairs; `None` when it is not that form.
pub(crate) fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let mut chars = rest[eq + 1..].trim_start().char_indices();
        let after_eq = rest[eq + 1..].trim_start();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in chars {
            match (escaped, c) {
                (true, 'n') => value.push('\n'),
                (true, c) => value.push(c),
                (false, '\\') => {}
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, c) => value.push(c),
            }
            escaped = !escaped && c == '\\';
        }
        out.push((name.to_string(), value));
        rest = after_eq[end? + 1..].trim_start();
        rest = match rest.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::wire::{EntryAdapter, LabelPairAdapter, StreamAdapter};

    #[test]
    fn labels_parse_with_escapes() {
        assert_eq!(
            parse_labels(r#"{app="w", namespace="workflow", q="a \"b\" \\ c"}"#).unwrap(),
            vec![
                ("app".into(), "w".into()),
                ("namespace".into(), "workflow".into()),
                ("q".into(), r#"a "b" \ c"#.into())
            ]
        );
        assert_eq!(parse_labels("{}").unwrap(), vec![]);
        for bad in ["app=\"w\"", "{app=w}", "{app=\"w}", "{=\"w\"}", "{a=\"1\" b=\"2\"}"] {
            assert_eq!(parse_labels(bad), None, "{bad}");
        }
    }

    #[test]
    fn protobuf_and_json_read_labels_and_metadata_as_fields() {
        let bytes = PushRequest {
            streams: vec![StreamAdapter {
                labels: r#"{job="w", namespace="workflow"}"#.into(),
                entries: vec![EntryAdapter {
                    line: "lock release failed".into(),
                    structured_metadata: vec![LabelPairAdapter {
                        name: "lock_key".into(),
                        value: "wf:lock:1".into(),
                    }],
                }],
            }],
        }
        .encode_to_vec();
        let a = protobuf(&bytes).unwrap();
        let b = json(
            br#"{"streams":[{"stream":{"job":"w","namespace":"workflow"},
              "values":[["1763719200000000000","lock release failed",{"lock_key":"wf:lock:1"}]]}]}"#,
        )
        .unwrap();
        assert_eq!(a.entries, b.entries);
        assert_eq!(a.entries[0].namespace.as_deref(), Some("workflow"));
        assert_eq!(a.entries[0].key.as_deref(), Some("wf:lock:1"));
        for bad in [
            &br#"{"streams":{}}"#[..],
            br#"{"streams":[{"stream":{},"values":[["1"]]}]}"#,
            br#"{"streams":[{"stream":{},"values":[["x","line"]]}]}"#,
            br#"{"streams":[{"stream":{"a":1},"values":[]}]}"#,
            br#"{"streams":[{"stream":{},"values":[["1",2]]}]}"#,
        ] {
            assert!(json(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
