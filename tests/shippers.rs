//! The log shippers' endpoints end to end, in-process, with real clients: the OpenTelemetry
//! Python and JS SDKs' OTLP/HTTP log exporters (protobuf + gzip, proto3 JSON),
//! python-logging-loki (Loki JSON) and winston-loki (Snappy protobuf, and JSON), each
//! logging as an application does (noise, failures with their exception and stack). Counts
//! are exact per source, namespace and bucket. Then every kind of bad body gets its code
//! and counts nothing; the framings and encodings of `/api/v1/logs`; overload (503 +
//! Retry-After). The clients are installed by `scripts/push-clients.sh` (`make test` runs it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::logs::{NAMESPACES, WAIT, lines_of};
use common::{Metrics, Served};
use prost::Message;

const TOKEN: &str = "s3cret";

/// Where `scripts/push-clients.sh` put the clients; the test fails saying how to get them.
fn clients() -> PathBuf {
    let dir = std::env::var_os("LOCKWATCH_PUSH_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/push-clients"));
    assert!(
        dir.join("installed").exists(),
        "the shippers' client libraries are not installed in {}: run scripts/push-clients.sh \
         (make test runs it through scripts/setup.sh test; it needs python3 with venv, node and npm)",
        dir.display()
    );
    dir
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

/// Run a client to its end; its stdout.
async fn run(mut cmd: Command) -> String {
    let what = format!("{cmd:?}");
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    eprintln!("{:.1?} {what}", started.elapsed());
    assert!(out.status.success(), "{what} failed: {}", common::output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn python(dir: &Path, name: &str) -> Command {
    let mut c = Command::new(dir.join("venv/bin/python"));
    c.arg(script(name));
    c
}

fn node(dir: &Path, name: &str) -> Command {
    let mut c = Command::new("node");
    c.arg(script(name)).env("NODE_PATH", dir.join("node/node_modules"));
    c
}

/// The OTel SDKs' standard environment, as the README shows it.
fn otel_env(c: &mut Command, s: &Served, compression: &str) {
    c.env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", format!("http://{}/v1/logs", s.addr))
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("Authorization=Bearer%20{TOKEN}"))
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
        .env("OTEL_SERVICE_NAME", "worker")
        .env("OTEL_BLRP_SCHEDULE_DELAY", "100");
}

/// The non-zero lock event counters, by (namespace, op, outcome).
fn events(m: &Metrics) -> BTreeMap<(String, String, String), f64> {
    let mut out = BTreeMap::new();
    for line in m.0.lines().filter(|l| l.starts_with("lockwatch_lock_events_total{")) {
        let (labels, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap();
        if value == 0.0 {
            continue;
        }
        let label = |name: &str| {
            let at = labels.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            labels[at..].split('"').next().unwrap().to_string()
        };
        out.insert((label("namespace"), label("op"), label("outcome")), value);
    }
    out
}

fn want(list: &[(&str, &str, &str, f64)]) -> BTreeMap<(String, String, String), f64> {
    list.iter()
        .map(|(ns, op, oc, n)| ((ns.to_string(), op.to_string(), oc.to_string()), *n))
        .collect()
}

async fn expect(s: &Served, source: &str, lines: (f64, f64, f64), ev: &[(&str, &str, &str, f64)]) {
    let what = format!("{source}: lines {lines:?}");
    s.wait_for(WAIT, &what, |m| lines_of(m, source) == lines).await;
    let m = s.metrics().await;
    assert_eq!(events(&m), want(ev), "{what}");
}

fn served_config(r: &lockwatch::access::child::RedisChild, dir: &Path) -> lockwatch::config::Config {
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    common::config(
        r,
        &format!(
            "[server]\npush_token_file = \"{}\"\n[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n{NAMESPACES}",
            dir.join("token").display()
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_shippers_are_counted_exactly_in_their_namespace_and_bucket() {
    let dir = clients();
    let r = common::redis(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let s = Served::start(served_config(&r, tmp.path())).await;

    // OTel Python SDK: protobuf, gzip. 20 requests served, 4 not-owned releases with their
    // traceback, a renewal failure whose lock key is an attribute.
    let mut c = python(&dir, "otlp_logs.py");
    otel_env(&mut c, &s, "gzip");
    run(c).await;
    let mut ev = vec![
        ("workflow", "release", "not_owned", 4.0),
        ("payout", "renew", "error", 1.0),
    ];
    expect(&s, "otlp", (5.0, 20.0, 0.0), &ev).await;

    // OTel JS SDK: proto3 JSON, uncompressed. 12 jobs, 3 renewals lost to expiry (error
    // attributes), one kvlist body.
    let mut c = node(&dir, "otlp_logs.js");
    otel_env(&mut c, &s, "none");
    run(c).await;
    ev.extend([
        ("workflow", "renew", "not_owned", 3.0),
        ("payout", "release", "not_owned", 1.0),
    ]);
    expect(&s, "otlp", (9.0, 32.0, 0.0), &ev).await;

    // python-logging-loki: JSON, one push per record; the stream's namespace label decides.
    let mut c = python(&dir, "loki_logs.py");
    c.arg(format!("http://{}/loki/api/v1/push", s.addr)).arg(TOKEN);
    let out = run(c).await;
    let sent: f64 = out.trim().strip_prefix("lines=").unwrap().parse().unwrap();
    ev[3].3 += 2.0;
    expect(&s, "loki", (sent - 6.0, 6.0, 0.0), &ev).await;

    // winston-loki: Snappy protobuf, then JSON; `namespace="prod"` is not a lock namespace,
    // so the key in the text decides.
    for (i, format) in ["protobuf", "json"].into_iter().enumerate() {
        let mut c = node(&dir, "loki_logs.js");
        c.arg(format!("http://{}", s.addr)).arg(TOKEN).arg(format);
        run(c).await;
        ev[2].3 += 3.0;
        let k = i as f64 + 1.0;
        expect(&s, "loki", (sent - 6.0 + 3.0 * k, 6.0 + 9.0 * k, 0.0), &ev).await;
    }
    // Nothing else moved, nothing counted twice.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let m = s.metrics().await;
    assert_eq!(lines_of(&m, "otlp"), (9.0, 32.0, 0.0));
    assert_eq!(lines_of(&m, "push"), (0.0, 0.0, 0.0));
    assert_eq!(lines_of(&m, "http"), (0.0, 0.0, 0.0));
    s.stop().await;
}

/// `google.rpc.Status`, as an OTLP error answer carries it.
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn snappy(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(data).unwrap()
}

/// POST `body` to `path` with these headers (the token always); (status, headers, body).
async fn post(
    s: &Served,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}{path}", s.addr))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

type Headers = Vec<(&'static str, &'static str)>;

const PROTO: (&str, &str) = ("content-type", "application/x-protobuf");
const JSON: (&str, &str) = ("content-type", "application/json");
const GZ: (&str, &str) = ("content-encoding", "gzip");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_their_code_and_count_nothing() {
    let r = common::redis(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let s = Served::start(served_config(&r, tmp.path())).await;
    let before = s.metrics().await;
    let bomb = gzip(&vec![b' '; 64 << 20]);
    assert!(bomb.len() < 200 << 10, "the bomb is {} bytes", bomb.len());
    let good_otlp =
        br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"lock not owned wf:lock:1"}}]}]}]}"#;
    let cases: Vec<(&str, Headers, Vec<u8>, u16, &str)> = vec![
        (
            "/v1/logs",
            vec![PROTO],
            b"\x0a\xff\xff\xff".to_vec(),
            400,
            "not a protobuf ExportLogsServiceRequest",
        ),
        (
            "/v1/logs",
            vec![JSON],
            br#"{"resourceLogs":{}}"#.to_vec(),
            400,
            "`resourceLogs` must be an array",
        ),
        ("/v1/logs", vec![JSON], b"[1, 2]".to_vec(), 400, "must be an object"),
        (
            "/v1/logs",
            vec![JSON, GZ],
            b"\x1f\x8b\x08\x00corrupt".to_vec(),
            400,
            "not valid gzip",
        ),
        ("/v1/logs", vec![PROTO, GZ], bomb.clone(), 413, "once decompressed"),
        (
            "/v1/logs",
            vec![("content-type", "application/msgpack")],
            good_otlp.to_vec(),
            415,
            "application/msgpack",
        ),
        (
            "/v1/logs",
            vec![JSON, ("content-encoding", "br")],
            good_otlp.to_vec(),
            415,
            "Content-Encoding `br`",
        ),
        (
            "/loki/api/v1/push",
            vec![PROTO],
            b"not snappy at all".to_vec(),
            400,
            "not valid snappy",
        ),
        (
            "/loki/api/v1/push",
            vec![PROTO],
            snappy(b"\x0a\xff\xff\xff"),
            400,
            "not a protobuf PushRequest",
        ),
        (
            "/loki/api/v1/push",
            vec![PROTO],
            snappy(&vec![0u8; 8 << 20]),
            413,
            "once decompressed",
        ),
        (
            "/loki/api/v1/push",
            vec![JSON],
            br#"{"streams":[{"stream":{},"values":[["1",2]]}]}"#.to_vec(),
            400,
            "values[0]",
        ),
        (
            "/loki/api/v1/push",
            vec![JSON, GZ],
            gzip(b"{\"streams\": 3}"),
            400,
            "`streams` array",
        ),
        (
            "/loki/api/v1/push",
            vec![JSON, GZ],
            bomb.clone(),
            413,
            "once decompressed",
        ),
        (
            "/loki/api/v1/push",
            vec![("content-type", "text/plain")],
            b"lock".to_vec(),
            415,
            "text/plain",
        ),
        (
            "/api/v1/logs",
            vec![JSON],
            b"[{\"message\": \"lock lost\"}, 7]".to_vec(),
            400,
            "record 2",
        ),
        (
            "/api/v1/logs",
            vec![JSON],
            b"{\"message\": \"lock lost\"}\n{\"level\": \"info\"}".to_vec(),
            400,
            "no text",
        ),
        (
            "/api/v1/logs",
            vec![JSON, ("content-encoding", "zstd")],
            b"(\xb5/\xfd garbage".to_vec(),
            400,
            "not valid zstd",
        ),
        (
            "/api/v1/logs",
            vec![JSON, ("content-encoding", "deflate")],
            b"\x78\x9c garbage".to_vec(),
            400,
            "not valid deflate",
        ),
        ("/api/v1/logs", vec![JSON, GZ], bomb.clone(), 413, "once decompressed"),
        (
            "/api/v1/logs",
            vec![("content-type", "application/x-protobuf")],
            b"x".to_vec(),
            415,
            "application/x-protobuf",
        ),
    ];
    for (path, headers, body, code, says) in cases {
        let (status, h, answer) = post(&s, path, &headers, body).await;
        let text = if path == "/v1/logs" && code != 415 && headers.contains(&PROTO) {
            let st = Status::decode(&answer[..]).unwrap_or_else(|e| panic!("{path} {headers:?}: not a Status: {e}"));
            assert_eq!(h["content-type"], "application/x-protobuf");
            st.message
        } else {
            String::from_utf8_lossy(&answer).into_owned()
        };
        assert_eq!(status, code, "{path} {headers:?}: {text}");
        assert!(
            text.contains(says),
            "{path} {headers:?}: {text:?} does not say {says:?}"
        );
    }
    // No token: 401, on every shipper endpoint.
    for path in ["/v1/logs", "/loki/api/v1/push", "/api/v1/logs"] {
        let resp = reqwest::Client::new()
            .post(format!("http://{}{path}", s.addr))
            .header("content-type", "application/json")
            .body(&good_otlp[..])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{path}");
    }
    let after = s.metrics().await;
    for source in ["otlp", "loki", "http"] {
        assert_eq!(lines_of(&after, source), (0.0, 0.0, 0.0), "{source}");
    }
    assert_eq!(events(&after), events(&before));
    // Each refusal counted by endpoint and reason.
    let refused = |source, reason| {
        after.val(
            "lockwatch_log_pushes_refused_total",
            &[("source", source), ("reason", reason)],
        )
    };
    for (source, undecodable, too_large, unsupported) in [
        ("otlp", 4.0, 1.0, 2.0),
        ("loki", 4.0, 2.0, 1.0),
        ("http", 4.0, 1.0, 1.0),
    ] {
        assert_eq!(
            [
                refused(source, "undecodable"),
                refused(source, "too_large"),
                refused(source, "unsupported"),
                refused(source, "unauthorized")
            ],
            [undecodable, too_large, unsupported, 1.0],
            "{source}"
        );
    }
    assert_eq!(refused("push", "undecodable"), 0.0);

    // A readable record beside an unreadable one: 200 with partialSuccess, in JSON.
    let mixed = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[
        {"body":{"stringValue":"lock not owned wf:lock:1"}},{"body":{"bytesValue":"AAEC"}}]}]}]}"#;
    let (status, h, answer) = post(&s, "/v1/logs", &[JSON], mixed.to_vec()).await;
    assert_eq!(
        (status, &h["content-type"]),
        (
            200,
            &"application/json".parse::<reqwest::header::HeaderValue>().unwrap()
        )
    );
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["partialSuccess"]["rejectedLogRecords"], "1", "{answer}");
    assert!(
        answer["partialSuccess"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("bytes body"),
        "{answer}"
    );
    // A full success in protobuf: an empty ExportLogsServiceResponse.
    let (status, h, answer) = post(&s, "/v1/logs", &[PROTO], Vec::new()).await;
    assert_eq!(
        (status, h["content-type"].to_str().unwrap(), answer.len()),
        (200, "application/x-protobuf", 0)
    );
    let m = s.metrics().await;
    assert_eq!(lines_of(&m, "otlp"), (1.0, 0.0, 1.0));
    assert_eq!(events(&m), want(&[("workflow", "release", "not_owned", 1.0)]));

    // Loki JSON, gzip, with a tenant header: 204.
    let loki = br#"{"streams":[{"stream":{"namespace":"payout"},"values":[["1763719200000000000","releasing the lock failed: lock not owned"]]}]}"#;
    let (status, _, _) = post(
        &s,
        "/loki/api/v1/push",
        &[JSON, GZ, ("x-scope-orgid", "team-a")],
        gzip(loki),
    )
    .await;
    assert_eq!(status, 204);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_records_in_every_framing_and_encoding() {
    let r = common::redis(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let s = Served::start(served_config(&r, tmp.path())).await;
    // Fluent Bit's `json` (an array, `log` field), Vector's NDJSON (`message`), objects back
    // to back, text lines with a traceback; gzip, deflate, zstd and none.
    let array = br#"[{"date":1763719200.1,"log":"INFO served\n"},{"date":1763719200.2,"log":"lock not owned wf:lock:1\n","kubernetes":{"namespace_name":"prod"}}]"#;
    let ndjson = b"{\"message\":\"renew failed\",\"lock_key\":\"payout:lock:2\",\"error\":\"LockError: Cannot extend an unlocked lock\"}\n{\"message\":\"INFO ok\"}\n";
    let concat = br#"{"msg":"lock not owned","key":"wf:lock:3"}{"msg":"INFO ok"}"#;
    let text = b"2026-11-21 10:00:00,000 ERROR release failed for wf:lock:4\nTraceback (most recent call last):\n  File \"w.py\", line 9, in run\n    lock.release()\nredis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned\nINFO done\n";
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    deflate.write_all(ndjson).unwrap();
    let zstd = ruzstd::encoding::compress_to_vec(&concat[..], ruzstd::encoding::CompressionLevel::Fastest);
    let bodies: Vec<(Headers, Vec<u8>, serde_json::Value)> = vec![
        (
            vec![JSON, GZ],
            gzip(array),
            serde_json::json!({"lines": 2, "matched": 1, "ignored": 1, "malformed": 0}),
        ),
        (
            vec![
                ("content-type", "application/x-ndjson"),
                ("content-encoding", "deflate"),
            ],
            deflate.finish().unwrap(),
            serde_json::json!({"lines": 2, "matched": 1, "ignored": 1, "malformed": 0}),
        ),
        (
            vec![JSON, ("content-encoding", "zstd")],
            zstd,
            serde_json::json!({"lines": 2, "matched": 1, "ignored": 1, "malformed": 0}),
        ),
        (
            vec![("content-type", "text/plain")],
            text.to_vec(),
            serde_json::json!({"lines": 6, "matched": 5, "ignored": 1, "malformed": 0}),
        ),
    ];
    for (headers, body, answer) in bodies {
        let (status, _, got) = post(&s, "/api/v1/logs", &headers, body).await;
        let got: serde_json::Value = serde_json::from_slice(&got).unwrap();
        assert_eq!((status, got), (200, answer), "{headers:?}");
    }
    let m = s.metrics().await;
    assert_eq!(lines_of(&m, "http"), (8.0, 4.0, 0.0));
    assert_eq!(
        events(&m),
        want(&[
            ("workflow", "release", "not_owned", 3.0),
            ("payout", "renew", "error", 1.0),
        ])
    );

    // Overload: every push slot held by a body that has not arrived; the next push is told
    // to come back (503 + Retry-After), and counts nothing.
    let mut held = Vec::new();
    for _ in 0..32 {
        let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "POST /v1/logs HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
        );
        tokio::io::AsyncWriteExt::write_all(&mut c, head.as_bytes())
            .await
            .unwrap();
        held.push(c);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, h, answer) = post(&s, "/v1/logs", &[JSON], br#"{}"#.to_vec()).await;
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(h["retry-after"], "1");
    let st: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(st["code"], 14, "{st}");
    let (status, h, _) = post(&s, "/loki/api/v1/push", &[JSON], br#"{"streams":[]}"#.to_vec()).await;
    assert_eq!((status, h.contains_key("retry-after")), (503, true));
    drop(held);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, _, _) = post(&s, "/loki/api/v1/push", &[JSON], br#"{"streams":[]}"#.to_vec()).await;
    assert_eq!(status, 204);
    let m = s.metrics().await;
    assert_eq!(lines_of(&m, "otlp"), (0.0, 0.0, 0.0));
    let busy = |source| {
        m.val(
            "lockwatch_log_pushes_refused_total",
            &[("source", source), ("reason", "busy")],
        )
    };
    assert_eq!((busy("otlp"), busy("loki")), (1.0, 1.0));
    s.stop().await;
}
