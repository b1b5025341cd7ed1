//! Reading one log line's fields: a JSON object (slog, zap, logback, Python JSON loggers,
//! Serilog's compact `@mt` / `@x`),
//! logfmt (quoted values and escapes), or plain text — detected per line or forced.
//!
//! Only the fields classification needs are kept: message, error, lock key and namespace,
//! read by their common names, who wrote it (process id, host, instance), and the trace context an instrumented service wrote
//! (`trace_id`/`span_id`, `traceId`, `trace.id`, `dd.trace_id`, …). Knows nothing of locks.

use std::borrow::Cow;

use super::origin::{HOST_FIELDS, INSTANCE_FIELDS, PID_FIELDS};
use crate::config::LogFormat;

/// Field names, in order of preference.
const MESSAGE: &[&str] = &["msg", "message", "event", "@m", "@mt"];
/// Error fields: every one present is read (winston's `stack` beside `message`, pino's `err`).
const ERROR: &[&str] = &[
    "error",
    "err",
    "exception",
    "exc_info",
    "stack_trace",
    "stacktrace",
    "stack",
    "error.message",
    "@x",
];
const KEY: &[&str] = &["key", "lock_key", "lock", "resource", "lock.key"];
const NAMESPACE: &[&str] = &["namespace", "lock_namespace"];
/// Trace and span ids by the names tracing libraries write them: OpenTelemetry's (snake
/// and camel case, Python's logging instrumentation `otelTraceID`), Elastic ECS
/// (`trace.id`), Datadog (`dd.trace_id`), Serilog's compact JSON (`@tr`, `@sp`).
pub(crate) const TRACE_ID: &[&str] = &[
    "trace_id",
    "traceId",
    "traceID",
    "trace.id",
    "otelTraceID",
    "dd.trace_id",
    "@tr",
    "traceid",
];
pub(crate) const SPAN_ID: &[&str] = &[
    "span_id",
    "spanId",
    "spanID",
    "span.id",
    "otelSpanID",
    "dd.span_id",
    "@sp",
    "spanid",
];

/// The fields of a line that matter for classification.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Fields<'a> {
    /// The line's format as read.
    pub(crate) format: Option<LogFormat>,
    /// The message; for a text line, the whole line.
    pub(crate) message: Cow<'a, str>,
    pub(crate) error: Option<Cow<'a, str>>,
    pub(crate) key: Option<Cow<'a, str>>,
    pub(crate) namespace: Option<Cow<'a, str>>,
    pub(crate) trace_id: Option<Cow<'a, str>>,
    pub(crate) span_id: Option<Cow<'a, str>>,
    /// Who wrote it, where the line says (`pid`, `hostname`, `service.instance.id`, …).
    pub(crate) pid: Option<Cow<'a, str>>,
    pub(crate) host: Option<Cow<'a, str>>,
    pub(crate) instance: Option<Cow<'a, str>>,
}

/// Why a line could not be read in the forced format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    NotJson,
    NotLogfmt,
}

impl Malformed {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Malformed::NotJson => "not a JSON object",
            Malformed::NotLogfmt => "not logfmt (no key=value pair)",
        }
    }
}

/// Read `line` as `format` says (`Auto`: JSON object, else logfmt, else text).
pub(crate) fn read(line: &str, format: LogFormat) -> Result<Fields<'_>, Malformed> {
    let trimmed = line.trim();
    match format {
        LogFormat::Json => json::fields(trimmed).ok_or(Malformed::NotJson),
        LogFormat::Logfmt => logfmt(trimmed).ok_or(Malformed::NotLogfmt),
        LogFormat::Text => Ok(text(trimmed)),
        LogFormat::Auto => Ok(if trimmed.starts_with('{') {
            json::fields(trimmed).unwrap_or_else(|| text(trimmed))
        } else if looks_like_logfmt(trimmed) {
            logfmt(trimmed).unwrap_or_else(|| text(trimmed))
        } else {
            text(trimmed)
        }),
    }
}

/// Read a record: its first line as `read` does, the lines after it (`rest`) returned for
/// the error text — unless the first line opens a JSON object that only the whole record
/// (`whole`) closes, as pretty-printed JSON does.
pub(crate) fn read_record<'a>(
    first: &'a str,
    rest: &'a str,
    whole: &'a str,
    format: LogFormat,
) -> Result<(Fields<'a>, &'a str), Malformed> {
    let opens = first.trim_start().starts_with('{') && !first.trim_end().ends_with('}');
    if !rest.is_empty()
        && opens
        && matches!(format, LogFormat::Auto | LogFormat::Json)
        && let Some(f) = json::fields(whole.trim())
    {
        return Ok((f, ""));
    }
    Ok((read(first, format)?, rest))
}

/// Cheap structural check for lines that need no full parse: `{…}`.
pub(crate) fn looks_like_json(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('{') && t.ends_with('}')
}

fn text(line: &str) -> Fields<'_> {
    Fields {
        format: Some(LogFormat::Text),
        message: Cow::Borrowed(line),
        ..Fields::default()
    }
}

/// Starts with `ident=`: the first word is a key with a value.
fn looks_like_logfmt(line: &str) -> bool {
    let word = line.split(' ').next().unwrap_or("");
    match word.split_once('=') {
        Some((k, _)) => {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'@'))
        }
        None => false,
    }
}

/// logfmt pairs of `line`; `None` without a single `key=value`.
pub(crate) fn logfmt_pairs(line: &str) -> Option<Vec<(&str, Cow<'_, str>)>> {
    let b = line.as_bytes();
    let mut i = 0;
    let mut pairs = Vec::new();
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && b[i] != b' ' {
            i += 1;
        }
        let key = &line[start..i];
        if i >= b.len() || b[i] == b' ' {
            continue; // a bare word
        }
        i += 1; // '='
        if i < b.len() && b[i] == b'"' {
            i += 1;
            let vstart = i;
            let mut escaped = false;
            let mut owned: Option<String> = None;
            while i < b.len() {
                match b[i] {
                    b'\\' if i + 1 < b.len() => {
                        let s = owned.get_or_insert_with(|| line[vstart..i].to_string());
                        let c = b[i + 1];
                        s.push(match c {
                            b'n' => '\n',
                            b't' => '\t',
                            b'r' => '\r',
                            other => other as char,
                        });
                        escaped = true;
                        i += 2;
                        continue;
                    }
                    b'"' => break,
                    _ => {
                        if let Some(s) = owned.as_mut() {
                            // Copy the whole UTF-8 character.
                            let ch_len = utf8_len(b[i]);
                            s.push_str(&line[i..(i + ch_len).min(b.len())]);
                            i += ch_len;
                            continue;
                        }
                    }
                }
                i += 1;
            }
            let value = match owned {
                Some(s) if escaped => Cow::Owned(s),
                _ => Cow::Borrowed(&line[vstart..i.min(b.len())]),
            };
            i += 1; // closing quote (or past the end of a truncated value)
            pairs.push((key, value));
        } else {
            let vstart = i;
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
            pairs.push((key, Cow::Borrowed(&line[vstart..i])));
        }
    }
    (!pairs.is_empty()).then_some(pairs)
}

/// The error fields present, joined by ` | ` (one is returned as it is).
fn joined<'a>(mut values: impl Iterator<Item = Cow<'a, str>>) -> Option<Cow<'a, str>> {
    let first = values.next()?;
    let Some(second) = values.next() else {
        return Some(first);
    };
    let mut all = format!("{first} | {second}");
    for v in values {
        all.push_str(" | ");
        all.push_str(&v);
    }
    Some(Cow::Owned(all))
}

fn utf8_len(first: u8) -> usize {
    match first {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

fn logfmt(line: &str) -> Option<Fields<'_>> {
    let pairs = logfmt_pairs(line)?;
    // Per name of the lists (by its number), the first pair that is it: one pass over the
    // pairs, each name looked up once.
    let mut first = [None::<usize>; json::NAMES];
    for (j, (k, _)) in pairs.iter().enumerate() {
        for &(i, inner) in json::uses(k).into_iter().flatten() {
            if inner.is_none() && first[i].is_none() {
                first[i] = Some(j);
            }
        }
    }
    Some(json::by_number(LogFormat::Logfmt, |i| {
        first[i].map(|j| pairs[j].1.clone())
    }))
}

#[path = "fields_json.rs"]
mod json;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_wrote_a_line_is_read() {
        let who = |line: &str| {
            let f = read(line, LogFormat::Auto).unwrap();
            (
                f.pid.map(|c| c.into_owned()),
                f.host.map(|c| c.into_owned()),
                f.instance.map(|c| c.into_owned()),
            )
        };
        let some = |p: &str, h: &str| (Some(p.to_string()), Some(h.to_string()), None);
        assert_eq!(
            who(r#"{"message":"m","process":4242,"hostname":"w1"}"#),
            some("4242", "w1")
        );
        assert_eq!(
            who(r#"{"msg":"m","process":{"pid":9},"host":{"name":"n"}}"#),
            some("9", "n")
        );
        assert_eq!(
            who("msg=m pid=7 hostname=h service.instance.id=i-1"),
            (Some("7".into()), Some("h".into()), Some("i-1".into()))
        );
        assert_eq!(
            who("release failed pid=7"),
            (None, None, None),
            "text lines say nothing"
        );
    }

    #[test]
    fn logfmt_with_quotes_and_escapes() {
        let f = read(
            r#"time=1 level=WARN msg="run lock \"x\" failed" error="lock not owned" key=a:b bare"#,
            LogFormat::Auto,
        )
        .unwrap();
        assert_eq!(f.format, Some(LogFormat::Logfmt));
        assert_eq!(f.message, r#"run lock "x" failed"#);
        assert_eq!(f.error.as_deref(), Some("lock not owned"));
        assert_eq!(f.key.as_deref(), Some("a:b"));
        let f = read(r#"msg="unterminated é and \"more"#, LogFormat::Logfmt).unwrap();
        assert_eq!(f.message, r#"unterminated é and "more"#);
    }

    #[test]
    fn json_fields_by_common_names() {
        let f = read(
            r#"{"message":"m","err":{"code":1},"lock_key":"k","lock_namespace":"ns"}"#,
            LogFormat::Auto,
        )
        .unwrap();
        assert_eq!(f.format, Some(LogFormat::Json));
        assert_eq!(f.message, "m");
        assert_eq!(f.error.as_deref(), Some(r#"{"code":1}"#));
        assert_eq!(f.key.as_deref(), Some("k"));
        assert_eq!(f.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn trace_context_by_the_names_tracing_libraries_write() {
        let ids = |line: &str| {
            let f = read(line, LogFormat::Auto).unwrap();
            (f.trace_id.map(|c| c.into_owned()), f.span_id.map(|c| c.into_owned()))
        };
        let both = |t: &str, s: &str| (Some(t.to_string()), Some(s.to_string()));
        assert_eq!(
            ids(r#"{"msg":"m","trace_id":"ab12","span_id":"cd34"}"#),
            both("ab12", "cd34")
        );
        assert_eq!(
            ids(r#"{"msg":"m","traceId":"ab12","spanId":"cd34"}"#),
            both("ab12", "cd34")
        );
        assert_eq!(
            ids(r#"{"msg":"m","trace":{"id":"ab12"},"span":{"id":"cd34"}}"#),
            both("ab12", "cd34")
        );
        assert_eq!(
            ids(r#"{"msg":"m","trace.id":"ab12","span.id":"cd34"}"#),
            both("ab12", "cd34")
        );
        assert_eq!(
            ids(r#"{"msg":"m","dd.trace_id":123,"dd.span_id":"456"}"#),
            both("123", "456")
        );
        assert_eq!(
            ids(r#"{"msg":"m","dd":{"trace_id":"123","span_id":"456"}}"#),
            both("123", "456")
        );
        assert_eq!(ids(r#"{"@mt":"m","@tr":"ab12","@sp":"cd34"}"#), both("ab12", "cd34"));
        assert_eq!(
            ids(r#"{"msg":"m","otelTraceID":"ab12","otelSpanID":"cd34"}"#),
            both("ab12", "cd34")
        );
        assert_eq!(
            ids("level=error msg=m trace_id=ab12 span_id=cd34"),
            both("ab12", "cd34")
        );
        assert_eq!(ids("level=error msg=m"), (None, None));
    }

    #[test]
    fn auto_falls_back_to_text_and_forced_formats_refuse() {
        let cut = r#"{"msg":"reconciler lock release failed","error":"lock not owned""#;
        assert_eq!(read(cut, LogFormat::Auto).unwrap().format, Some(LogFormat::Text));
        assert_eq!(read(cut, LogFormat::Json), Err(Malformed::NotJson));
        assert_eq!(read("plain words only", LogFormat::Logfmt), Err(Malformed::NotLogfmt));
        let java = "2026-06-28 10:06:37.250 ERROR 4121 --- [main] c.e.PayoutJob : x=y";
        assert_eq!(read(java, LogFormat::Auto).unwrap().format, Some(LogFormat::Text));
    }
}
