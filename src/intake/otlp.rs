//! OTLP/HTTP log bodies (`POST /v1/logs`): an `ExportLogsServiceRequest` in protobuf or in
//! proto3 JSON, read into a `Batch`. A record is its body (a string, or the message field
//! of a kvlist) with its attributes: `exception.type` and `exception.message` are the error,
//! `exception.stacktrace` the trace, lock-key and namespace attributes fields; the record's
//! `traceId` and `spanId` its trace context (hex, as trace UIs show them). Resource
//! attributes are never read. The severity does not decide, as a file line's level does not.

use prost::Message;
use serde_json::{Map, Value as Json};

use super::batch::{Batch, ERROR_FIELDS, Entry, KEY_FIELDS, MESSAGE_FIELDS, NAMESPACE_FIELDS};
use super::origin::INSTANCE_FIELDS;
use super::wire::{AnyValue, ExportLogsServiceRequest, KeyValue, LogRecord, Value};

/// Why a body is not an `ExportLogsServiceRequest`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OtlpError {
    #[error("not a protobuf ExportLogsServiceRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("not an OTLP JSON ExportLogsServiceRequest: {0}")]
    Json(String),
}

/// Read a protobuf body.
pub(crate) fn protobuf(body: &[u8]) -> Result<Batch, OtlpError> {
    let req = ExportLogsServiceRequest::decode(body)?;
    let mut batch = Batch::default();
    for r in &req.resource_logs {
        let resource = r.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for record in r.scope_logs.iter().flat_map(|s| &s.log_records) {
            push(&mut batch, record, resource);
        }
    }
    Ok(batch)
}

/// Read a proto3 JSON body: lowerCamelCase keys (the proto names also taken), 64-bit
/// integers as strings or numbers, unknown fields ignored.
pub(crate) fn json(body: &[u8]) -> Result<Batch, OtlpError> {
    let value: Json = serde_json::from_slice(body).map_err(|e| OtlpError::Json(e.to_string()))?;
    let mut batch = Batch::default();
    let top = object(&value, "the body")?;
    for (i, r) in list(top, "resourceLogs", "resource_logs")?.iter().enumerate() {
        let r = object(r, &format!("resourceLogs[{i}]"))?;
        // Read only for who sent the records: a resource that cannot be read is skipped.
        let resource = match r.get("resource").and_then(Json::as_object) {
            Some(res) if res.contains_key("attributes") => {
                key_values(res, "attributes", &format!("resourceLogs[{i}].resource")).unwrap_or_default()
            }
            _ => vec![],
        };
        for (j, s) in list(r, "scopeLogs", "scope_logs")?.iter().enumerate() {
            let s = object(s, &format!("resourceLogs[{i}].scopeLogs[{j}]"))?;
            for (k, l) in list(s, "logRecords", "log_records")?.iter().enumerate() {
                let at = format!("resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]");
                push(&mut batch, &log_record(object(l, &at)?, &at)?, &resource);
            }
        }
    }
    Ok(batch)
}

fn object<'a>(v: &'a Json, what: &str) -> Result<&'a Map<String, Json>, OtlpError> {
    v.as_object()
        .ok_or_else(|| OtlpError::Json(format!("{what} must be an object")))
}

fn field<'a>(o: &'a Map<String, Json>, camel: &str, snake: &str) -> Option<&'a Json> {
    o.get(camel).or_else(|| o.get(snake)).filter(|v| !v.is_null())
}

fn list<'a>(o: &'a Map<String, Json>, camel: &str, snake: &str) -> Result<&'a [Json], OtlpError> {
    match field(o, camel, snake) {
        None => Ok(&[]),
        Some(Json::Array(a)) => Ok(a),
        Some(_) => Err(OtlpError::Json(format!("`{camel}` must be an array"))),
    }
}

fn log_record(o: &Map<String, Json>, at: &str) -> Result<LogRecord, OtlpError> {
    let body = field(o, "body", "body")
        .map(|b| any_value(b, &format!("{at}.body")))
        .transpose()?;
    Ok(LogRecord {
        body,
        attributes: key_values(o, "attributes", at)?,
        trace_id: id_bytes(o, "traceId", "trace_id", at)?,
        span_id: id_bytes(o, "spanId", "span_id", at)?,
        ..Default::default()
    })
}

/// A trace or span id in OTLP JSON: a hex string (the OTLP JSON mapping's, not base64);
/// an empty one is none.
fn id_bytes(o: &Map<String, Json>, camel: &str, snake: &str, at: &str) -> Result<Vec<u8>, OtlpError> {
    let Some(v) = field(o, camel, snake) else {
        return Ok(Vec::new());
    };
    let bad = || OtlpError::Json(format!("{at}.{camel} must be a hex string"));
    let hex = v.as_str().ok_or_else(bad)?;
    if hex.len() % 2 != 0 {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

fn key_values(o: &Map<String, Json>, name: &str, at: &str) -> Result<Vec<KeyValue>, OtlpError> {
    let mut out = Vec::new();
    for (i, kv) in list(o, name, name)?.iter().enumerate() {
        let what = format!("{at}.{name}[{i}]");
        let kv = object(kv, &what)?;
        let key = match kv.get("key") {
            Some(Json::String(k)) => k.clone(),
            _ => return Err(OtlpError::Json(format!("{what}.key must be a string"))),
        };
        let value = kv.get("value").map(|v| any_value(v, &what)).transpose()?;
        out.push(KeyValue { key, value });
    }
    Ok(out)
}

/// An `AnyValue` in JSON: `{"stringValue": …}`, `{"intValue": "3"}`, `{"kvlistValue":
/// {"values": […]}}`, …
fn any_value(v: &Json, at: &str) -> Result<AnyValue, OtlpError> {
    let o = object(v, at)?;
    let bad = |what: &str| OtlpError::Json(format!("{at}: {what}"));
    let value = if let Some(s) = field(o, "stringValue", "string_value") {
        Value::String(
            s.as_str()
                .ok_or_else(|| bad("stringValue must be a string"))?
                .to_string(),
        )
    } else if let Some(b) = field(o, "boolValue", "bool_value") {
        Value::Bool(b.as_bool().ok_or_else(|| bad("boolValue must be true or false"))?)
    } else if let Some(n) = field(o, "intValue", "int_value") {
        let n = match n {
            Json::Number(n) => n.as_i64(),
            Json::String(s) => s.parse().ok(),
            _ => None,
        };
        Value::Int(n.ok_or_else(|| bad("intValue must be a 64-bit integer (a number or a string)"))?)
    } else if let Some(d) = field(o, "doubleValue", "double_value") {
        Value::Double(d.as_f64().unwrap_or(f64::NAN))
    } else if let Some(a) = field(o, "arrayValue", "array_value") {
        let a = object(a, at)?;
        let values = list(a, "values", "values")?
            .iter()
            .map(|v| any_value(v, at))
            .collect::<Result<_, _>>()?;
        Value::Array(super::wire::ArrayValue { values })
    } else if let Some(kv) = field(o, "kvlistValue", "kvlist_value") {
        let values = key_values(object(kv, at)?, "values", at)?;
        Value::Kvlist(super::wire::KeyValueList { values })
    } else if let Some(b) = field(o, "bytesValue", "bytes_value") {
        Value::Bytes(b.as_str().unwrap_or_default().as_bytes().to_vec())
    } else {
        return Ok(AnyValue { value: None });
    };
    Ok(AnyValue { value: Some(value) })
}

/// A scalar as text; `None` for bytes, arrays, kvlists and absent values.
fn text(v: Option<&AnyValue>) -> Option<String> {
    match v?.value.as_ref()? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Int(n) => Some(n.to_string()),
        Value::Double(d) => Some(d.to_string()),
        Value::Array(_) | Value::Kvlist(_) | Value::Bytes(_) => None,
    }
}

fn lookup(kvs: &[KeyValue], names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        kvs.iter()
            .find(|kv| kv.key == *n)
            .and_then(|kv| text(kv.value.as_ref()))
    })
}

/// One record into the batch, or counted unreadable when it holds no text; `resource`: its
/// resource's attributes, read for who sent it.
fn push(batch: &mut Batch, r: &LogRecord, resource: &[KeyValue]) {
    let attrs = &r.attributes[..];
    let (body, fields): (Option<String>, &[KeyValue]) = match r.body.as_ref().and_then(|b| b.value.as_ref()) {
        Some(Value::Kvlist(kv)) => (lookup(&kv.values, MESSAGE_FIELDS), &kv.values),
        _ => (text(r.body.as_ref()), &[]),
    };
    let error = match (
        lookup(attrs, &["exception.type"]),
        lookup(attrs, &["exception.message"]),
    ) {
        (Some(t), Some(m)) => Some(format!("{t}: {m}")),
        (t, m) => t
            .or(m)
            .or_else(|| lookup(attrs, ERROR_FIELDS))
            .or_else(|| lookup(fields, ERROR_FIELDS)),
    };
    let trace = lookup(attrs, &["exception.stacktrace"]);
    if body.is_none() && error.is_none() && trace.is_none() {
        let kind = match r.body.as_ref().and_then(|b| b.value.as_ref()) {
            None => "no body and no exception attributes",
            Some(Value::Bytes(_)) => "a bytes body",
            Some(Value::Array(_)) => "an array body",
            Some(_) => "a kvlist body without a message field",
        };
        batch.unreadable(|| format!("a record with {kind} has no text to read"));
        return;
    }
    batch.entries.push(Entry {
        text: body.unwrap_or_default(),
        error,
        trace,
        key: lookup(attrs, KEY_FIELDS).or_else(|| lookup(fields, KEY_FIELDS)),
        namespace: lookup(attrs, NAMESPACE_FIELDS).or_else(|| lookup(fields, NAMESPACE_FIELDS)),
        trace_id: hex(&r.trace_id),
        span_id: hex(&r.span_id),
        pid: lookup(resource, &["process.pid"]).or_else(|| lookup(attrs, &["process.pid"])),
        host: lookup(resource, &["host.name"]).or_else(|| lookup(attrs, &["host.name"])),
        instance: lookup(resource, INSTANCE_FIELDS).or_else(|| lookup(attrs, INSTANCE_FIELDS)),
    });
}

/// An id's bytes as lowercase hex, as trace UIs show it; `None` when empty.
fn hex(id: &[u8]) -> Option<String> {
    use std::fmt::Write;
    (!id.is_empty()).then(|| {
        id.iter().fold(String::with_capacity(id.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::wire::{Resource, ResourceLogs, ScopeLogs};

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(Value::String(v.into())),
            }),
        }
    }

    #[test]
    fn protobuf_and_json_read_the_same_records() {
        let record = LogRecord {
            severity_number: 17,
            severity_text: "ERROR".into(),
            body: Some(AnyValue {
                value: Some(Value::String("release failed".into())),
            }),
            attributes: vec![
                kv("exception.type", "LockNotOwnedError"),
                kv("exception.message", "no longer owned"),
                kv("exception.stacktrace", "Traceback ..."),
                kv("lock.key", "wf:lock:1"),
            ],
            trace_id: vec![
                0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c,
            ],
            span_id: vec![0xeb, 0xa9, 0x03, 0x5f, 0x12, 0x00, 0x0a, 0xbc],
        };
        let bytes = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", "x"),
                        kv("process.pid", "4242"),
                        kv("host.name", "w1"),
                        kv("service.instance.id", "i-1"),
                    ],
                }),
                scope_logs: vec![ScopeLogs {
                    log_records: vec![record, LogRecord::default()],
                }],
            }],
        }
        .encode_to_vec();
        let a = protobuf(&bytes).unwrap();
        let b = json(
            br#"{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"x"}},
              {"key":"process.pid","value":{"intValue":"4242"}},{"key":"host.name","value":{"stringValue":"w1"}},
              {"key":"service.instance.id","value":{"stringValue":"i-1"}}]},
              "scopeLogs":[{"scope":{"name":"s"},"logRecords":[{"timeUnixNano":"1","severityNumber":"SEVERITY_NUMBER_ERROR",
              "traceId":"5b8efff798038103d269b633813fc60c","spanId":"EBA9035F12000ABC","body":{"stringValue":"release failed"},"attributes":[
              {"key":"exception.type","value":{"stringValue":"LockNotOwnedError"}},
              {"key":"exception.message","value":{"stringValue":"no longer owned"}},
              {"key":"exception.stacktrace","value":{"stringValue":"Traceback ..."}},
              {"key":"lock.key","value":{"stringValue":"wf:lock:1"}}]},{}]}]}]}"#,
        )
        .unwrap();
        for batch in [&a, &b] {
            assert_eq!(batch.entries.len(), 1);
            assert_eq!(batch.unreadable, 1);
            let e = &batch.entries[0];
            assert_eq!(e.error.as_deref(), Some("LockNotOwnedError: no longer owned"));
            assert_eq!(e.key.as_deref(), Some("wf:lock:1"));
            assert_eq!(e.trace_id.as_deref(), Some("5b8efff798038103d269b633813fc60c"));
            assert_eq!(e.span_id.as_deref(), Some("eba9035f12000abc"));
            let who = (e.pid.as_deref(), e.host.as_deref(), e.instance.as_deref());
            assert_eq!(
                who,
                (Some("4242"), Some("w1"), Some("i-1")),
                "the resource says who sent it"
            );
        }
        assert_eq!(a.entries, b.entries);
    }

    #[test]
    fn kvlist_bodies_and_bad_shapes() {
        let b = json(
            br#"{"resource_logs":[{"scope_logs":[{"log_records":[{"body":{"kvlistValue":{"values":[
              {"key":"msg","value":{"stringValue":"lock lost"}},{"key":"namespace","value":{"stringValue":"workflow"}},
              {"key":"n","value":{"intValue":7}}]}}}]}]}]}"#,
        )
        .unwrap();
        assert_eq!(b.entries[0].text, "lock lost");
        assert_eq!(b.entries[0].namespace.as_deref(), Some("workflow"));
        for bad in [
            &br#"[1]"#[..],
            br#"{"resourceLogs":{}}"#,
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":3}}]}]}]}"#,
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[{"key":1}]}]}]}]}"#,
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"},"traceId":"5b8z"}]}]}]}"#,
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"},"spanId":"abc"}]}]}]}"#,
            b"{",
        ] {
            assert!(json(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(protobuf(b"\x0a\xff\xff\xff\xff\x0f").is_err());
    }
}
