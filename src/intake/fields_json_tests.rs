//! `fields` reads every name of its lists in one pass over the object, and `logfmt` in one
//! pass over its pairs; here they are held to the reading they replaced, a lookup per
//! name, on generated objects and lines.
#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use super::super::{ERROR, HOST_FIELDS, INSTANCE_FIELDS, KEY, MESSAGE, NAMESPACE, PID_FIELDS, SPAN_ID, TRACE_ID};
use super::*;

/// The old reading: each name looked up, flat first, then nested under its first dot.
fn by_lookups(line: &str) -> Option<Fields<'_>> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).ok()?;
    let value = |n: &str| -> Option<Cow<'static, str>> {
        let v = match (map.get(n), n.split_once('.')) {
            (Some(v), _) => v,
            (None, Some((outer, inner))) => map.get(outer)?.get(inner)?,
            (None, None) => return None,
        };
        match v {
            serde_json::Value::String(s) => Some(Cow::Owned(s.clone())),
            serde_json::Value::Null => None,
            other => Some(Cow::Owned(other.to_string())),
        }
    };
    Some(by_names(LogFormat::Json, value))
}

/// The old reading of the lists: each list's first name that has a value, and every error
/// name's, joined; every name looked up by `value(name)`.
fn by_names<'a>(format: LogFormat, value: impl Fn(&str) -> Option<Cow<'a, str>>) -> Fields<'a> {
    let get = |names: &[&str]| names.iter().find_map(|n| value(n));
    Fields {
        format: Some(format),
        message: get(MESSAGE).unwrap_or_default(),
        error: super::super::joined(ERROR.iter().filter_map(|n| value(n))),
        key: get(KEY),
        namespace: get(NAMESPACE),
        trace_id: get(TRACE_ID),
        span_id: get(SPAN_ID),
        pid: get(PID_FIELDS),
        host: get(HOST_FIELDS),
        instance: get(INSTANCE_FIELDS),
    }
}

#[test]
fn a_logfmt_line_reads_what_a_lookup_per_name_read() {
    let names: Vec<&str> = LISTS.iter().flat_map(|l| l.iter().copied()).collect();
    let others = ["dd", "trace", "level", "time", "x", "msg2", "lock"];
    let values = ["a", "\"b \\\"q\\\" é\"", "\"\"", "7", "x=y", "\"two words\""];
    let mut rng = crate::intake::test_rng::Xorshift(0x10cf_a7ed_0b1e_c75d);
    let mut next = |n: usize| rng.below(n);
    let mut read = 0;
    for _ in 0..4000 {
        let pairs: Vec<String> = (0..1 + next(9))
            .map(|_| {
                let k = match next(3) {
                    0 => others[next(others.len())],
                    _ => names[next(names.len())],
                };
                format!("{k}={}", values[next(values.len())])
            })
            .collect();
        let line = pairs.join(" ");
        let old = super::super::logfmt_pairs(&line).map(|p| {
            by_names(LogFormat::Logfmt, |n| {
                p.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())
            })
        });
        assert_eq!(super::super::logfmt(&line), old, "{line}");
        read += usize::from(old.is_some_and(|f| f.error.is_some() && f.key.is_some()));
    }
    assert!(read > 500, "lines with an error and a key: {read}");
}

#[test]
fn one_pass_reads_what_a_lookup_per_name_read() {
    let names: Vec<&str> = LISTS.iter().flat_map(|l| l.iter().copied()).collect();
    assert_eq!(names.len(), NAMES);
    // Outer names of the dotted ones, and names no list holds.
    let others = [
        "dd", "trace", "span", "service", "host", "process", "lock", "error", "x", "msg2",
    ];
    let values = [
        r#""a""#,
        r#""b \"q\" é""#,
        "null",
        "7",
        "true",
        "[1,\"x\"]",
        r#"{"id":"n1","trace_id":"n2","span_id":"n3","key":"n4","message":"n5","name":"n6","pid":9,"instance.id":"n7"}"#,
        r#"{"id":null}"#,
    ];
    let mut rng = crate::intake::test_rng::Xorshift(0x51_7cc1_b727_220a);
    let mut next = |n: usize| rng.below(n);
    for _ in 0..4000 {
        let members: Vec<String> = (0..1 + next(9))
            .map(|_| {
                let k = match next(3) {
                    0 => others[next(others.len())],
                    _ => names[next(names.len())],
                };
                format!("{}:{}", serde_json::to_string(k).unwrap(), values[next(values.len())])
            })
            .collect();
        let line = format!("{{{}}}", members.join(","));
        assert_eq!(fields(&line), by_lookups(&line), "{line}");
    }
    assert_eq!(fields("[1]"), None);
    assert_eq!(fields("{\"msg\":"), None);
    for line in [
        r#"{"ms\u0067":"escaped name","error":"a \"q\"","err":{"b":1,"a":[2,null]}}"#,
        r#"{"msg":"one","msg":"two","dd":{"trace_id":"t1"},"dd":"flat"}"#,
        r#"{"msg":"m","dd":"x","dd":{"trace_id":7}}"#,
        r#" {"msg":1.5e3,"pid":-3,"x":{"deep":[{"msg":"no"}]}} "#,
        r#"{"msg":"m"} x"#,
        r#"{"msg":"m",}"#,
        r#"{"msg":"m","x":[1,}"#,
        "{}",
        // What a `Value` refuses in a member that is not kept: a lone surrogate (as a value
        // and as a nested name), a number out of range, nesting past the parser's depth.
        r#"{"msg":"lock release failed: not owned","x":"\ud800"}"#,
        r#"{"msg":"lock release failed: not owned","x":{"\ud800":1}}"#,
        r#"{"msg":"lock release failed: not owned","x":1e400}"#,
        format!(r#"{{"msg":"m","x":{}}}"#, "9".repeat(400)).as_str(),
        format!(r#"{{"msg":"m","x":{}{}}}"#, "[".repeat(200), "]".repeat(200)).as_str(),
        format!(r#"{{"msg":"m","x":{}{}}}"#, "[".repeat(100), "]".repeat(100)).as_str(),
        r#"{"msg":"m","x":"\ud83d\ude00","y":-0,"z":[1.0,true,null,{"a":"b"}]}"#,
    ] {
        assert_eq!(fields(line), by_lookups(line), "{line}");
    }
    // The old reading refuses the first five of those, and reads the others.
    let refused = [
        r#"{"msg":"m","x":"\ud800"}"#.to_string(),
        r#"{"msg":"m","x":{"\ud800":1}}"#.to_string(),
        r#"{"msg":"m","x":1e400}"#.to_string(),
        format!(r#"{{"msg":"m","x":{}}}"#, "9".repeat(400)),
        format!(r#"{{"msg":"m","x":{}{}}}"#, "[".repeat(200), "]".repeat(200)),
    ];
    for line in &refused {
        assert!(by_lookups(line).is_none() && fields(line).is_none(), "{line}");
    }
    assert!(fields(&format!(r#"{{"msg":"m","x":{}{}}}"#, "[".repeat(100), "]".repeat(100))).is_some());
    assert!(matches!(
        fields(r#"{"msg":"plain"}"#).unwrap().message,
        Cow::Borrowed("plain")
    ));
}
