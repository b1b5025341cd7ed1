//! From a lock failure to its trace: a worker instrumented with the real OpenTelemetry
//! Python SDK fails a lock release inside a span and ships the record over OTLP; a JSON
//! record with `trace_id`/`span_id`, a logfmt line, a Loki push with structured metadata
//! and an `/api/v1/events` line do the same. Each trace id becomes its series' exemplar in
//! the OpenMetrics scrape (a real Prometheus with exemplar storage returns the SDK's), never
//! a label of the 0.0.4 one; and reaches the key's history
//! (`/api/v1/locks/history`), its page and the status page's incidents (and
//! `/api/v1/status`), linked by `[server] trace_url`; ids no trace UI could use are left
//! out and the event is still counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::logs::NAMESPACES;
use common::prometheus::Prometheus;
use common::{Metrics, Served};

const TOKEN: &str = "s3cret";
const TRACE_URL: &str = "https://jaeger.example/trace/{trace_id}?uiFind={span_id}";

fn clients() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/push-clients");
    assert!(
        dir.join("installed").exists(),
        "the OpenTelemetry SDK is not installed in {}: run scripts/push-clients.sh (make test runs it)",
        dir.display()
    );
    dir
}

fn served_config(r: &lockwatch::access::child::RedisChild, dir: &Path, trace_url: bool) -> lockwatch::config::Config {
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let url = if trace_url {
        format!("trace_url = \"{TRACE_URL}\"\n")
    } else {
        String::new()
    };
    common::config(
        r,
        &format!(
            "[server]\npush_token_file = \"{}\"\n{url}[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n{NAMESPACES}",
            dir.join("token").display()
        ),
    )
}

async fn post(s: &Served, path: &str, content_type: &str, body: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("http://{}{path}", s.addr))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The exemplar's `(trace_id, span_id)` on the series `lockwatch_lock_events_total{labels}`
/// of an OpenMetrics scrape, as Prometheus asks for it.
async fn exemplar(s: &Served, labels: &str) -> Option<(String, String)> {
    let body = reqwest::Client::new()
        .get(format!("http://{}/metrics", s.addr))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.ends_with("# EOF\n"), "an OpenMetrics scrape");
    let line = body
        .lines()
        .find(|l| l.starts_with(&format!("lockwatch_lock_events_total{{{labels}}} ")))?;
    let (_, ex) = line.split_once(" # {")?;
    let value = |name: &str| {
        let at = ex.find(&format!("{name}=\""))? + name.len() + 2;
        Some(ex[at..].split('"').next()?.to_string())
    };
    Some((value("trace_id")?, value("span_id").unwrap_or_default()))
}

fn not_owned(m: &Metrics, ns: &str, op: &str) -> f64 {
    m.val(
        "lockwatch_lock_events_total",
        &[("namespace", ns), ("op", op), ("outcome", "not_owned")],
    )
}

/// The key's kept events as (op, outcome, source, trace_id, span_id).
async fn history(s: &Served, key: &str) -> Vec<(String, String, String, Option<String>, Option<String>)> {
    let (status, _, body) = s.get(&format!("/api/v1/locks/history?key={key}")).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let text = |e: &serde_json::Value, f: &str| e.get(f).and_then(|v| v.as_str()).map(str::to_string);
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                text(e, "op").unwrap(),
                text(e, "outcome").unwrap(),
                text(e, "source").unwrap(),
                text(e, "trace_id"),
                text(e, "span_id"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_otel_sdk_failure_inside_a_span_links_to_its_trace() {
    let dir = clients();
    let r = common::redis(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let s = Served::start(served_config(&r, tmp.path(), true)).await;

    let mut c = Command::new(dir.join("venv/bin/python"));
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/otlp_traced.py"))
        .arg("wf:lock:7")
        .env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", format!("http://{}/v1/logs", s.addr))
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("Authorization=Bearer%20{TOKEN}"))
        .env("OTEL_SERVICE_NAME", "payout-worker");
    let out = tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    let (trace_id, span_id) = printed.trim().split_once(' ').unwrap();
    assert_eq!((trace_id.len(), span_id.len()), (32, 16), "{printed}");

    s.wait_for(Duration::from_secs(10), "the release counted", |m| {
        not_owned(m, "workflow", "release") == 1.0
    })
    .await;
    let kept = history(&s, "wf:lock:7").await;
    assert_eq!(
        kept,
        [(
            "release".into(),
            "not_owned".into(),
            "otlp".into(),
            Some(trace_id.to_string()),
            Some(span_id.to_string())
        )]
    );
    let (status, _, page) = s.get("/locks/workflow?key=wf:lock:7").await;
    assert_eq!(status, 200);
    let href = format!("href=\"https://jaeger.example/trace/{trace_id}?uiFind={span_id}\"");
    assert!(page.contains(&href), "the key page links the trace: {page}");
    // The status page's timeline: the failure reported with its trace, linked.
    let (_, _, status) = s.get("/").await;
    assert!(
        status.contains("lock failure reported") && status.contains(&href),
        "{status}"
    );
    let (_, _, api) = s.get("/api/v1/status").await;
    let v: serde_json::Value = serde_json::from_str(&api).unwrap();
    let traced: Vec<&serde_json::Value> = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "traced_failure")
        .collect();
    assert_eq!(traced.len(), 1, "{api}");
    assert_eq!(
        (
            traced[0]["trace_id"].as_str(),
            traced[0]["span_id"].as_str(),
            traced[0]["key"].as_str()
        ),
        (Some(trace_id), Some(span_id), Some("wf:lock:7"))
    );
    // Never a label: the 0.0.4 exposition has no trace id anywhere; the OpenMetrics one
    // has it as the series' exemplar.
    let m = s.metrics().await;
    assert!(!m.0.contains(trace_id), "a trace id in the text format");
    let series = r#"namespace="workflow",op="release",outcome="not_owned""#;
    assert_eq!(
        exemplar(&s, series).await,
        Some((trace_id.to_string(), span_id.to_string()))
    );

    // A real Prometheus with exemplar storage keeps it.
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lockwatch\n    static_configs:\n      - targets: ['{}']\n",
        s.addr
    );
    let p = Prometheus::start_with(&config, &[], &["--enable-feature=exemplar-storage"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (start, end) = ((now - 600).to_string(), (now + 600).to_string());
    let query = format!("lockwatch_lock_events_total{{{series}}}");
    let started = std::time::Instant::now();
    let stored = loop {
        let v = p
            .json(
                "/api/v1/query_exemplars",
                &[("query", &query), ("start", &start), ("end", &end)],
            )
            .await;
        let first = v.as_ref().and_then(|v| {
            v["data"][0]["exemplars"][0]["labels"]["trace_id"]
                .as_str()
                .map(str::to_string)
        });
        if let Some(found) = first {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no exemplar from Prometheus: {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stored, trace_id);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logfmt_loki_and_pushed_events_carry_their_trace_and_bad_ids_are_left_out() {
    let r = common::redis(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let s = Served::start(served_config(&r, tmp.path(), false)).await;

    let counted = |ns: &'static str, op: &'static str, n: f64| {
        move |m: &Metrics| {
            m.val(
                "lockwatch_lock_events_total",
                &[("namespace", ns), ("op", op), ("outcome", "not_owned")],
            ) == n
        }
    };
    let release = r#"namespace="workflow",op="release",outcome="not_owned""#;
    // A JSON record (as Vector or Fluent Bit send it) with the OpenTelemetry field names.
    let json = r#"[{"message":"release of wf:lock:1 failed: lock not owned","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"}]"#;
    assert_eq!(post(&s, "/api/v1/logs", "application/json", json).await.0, 200);
    s.wait_for(
        Duration::from_secs(10),
        "the JSON record",
        counted("workflow", "release", 1.0),
    )
    .await;
    assert_eq!(
        exemplar(&s, release).await,
        Some(("0af7651916cd43dd8448eb211c80319c".into(), "b7ad6b7169203331".into()))
    );
    // logfmt and ECS-style JSON lines pushed as text, as a file's lines are read.
    let lines = "level=error msg=\"payout lock renewal failed: lock not owned\" key=payout:lock:2 trace_id=11111111111111111111111111111111 span_id=2222222222222222\n\
                 {\"message\":\"release of wf:lock:3 failed: lock no longer owned\",\"trace\":{\"id\":\"33333333333333333333333333333333\"},\"dd.span_id\":\"4444\"}\n";
    assert_eq!(post(&s, "/api/v1/events", "text/plain", lines).await.0, 200);
    // A Loki push whose entry carries the trace as structured metadata (as Alloy sends it).
    let loki = r#"{"streams":[{"stream":{"service_name":"worker"},"values":[["1700000000000000000","release of wf:lock:4 failed: lock not owned",{"trace_id":"55555555555555555555555555555555","span_id":"6666666666666666"}]]}]}"#;
    assert_eq!(post(&s, "/loki/api/v1/push", "application/json", loki).await.0, 204);
    s.wait_for(
        Duration::from_secs(10),
        "the Loki entry",
        counted("workflow", "release", 3.0),
    )
    .await;
    assert_eq!(
        exemplar(&s, release).await,
        Some(("55555555555555555555555555555555".into(), "6666666666666666".into())),
        "the latest traced event of the series"
    );
    let renew = r#"namespace="payout",op="renew",outcome="not_owned""#;
    assert_eq!(
        exemplar(&s, renew).await,
        Some(("11111111111111111111111111111111".into(), "2222222222222222".into())),
        "the logfmt line's, on its own series"
    );
    // Pushed events: one with ids, one with ids no trace UI could use (still counted).
    let events = "{\"op\":\"release\",\"outcome\":\"not_owned\",\"key\":\"wf:lock:5\",\"trace_id\":\"77777777777777777777777777777777\",\"spanId\":\"8888888888888888\"}\n\
                  {\"op\":\"release\",\"outcome\":\"not_owned\",\"key\":\"wf:lock:6\",\"trace_id\":\"<script>\",\"span_id\":\"x y\"}\n";
    let (status, body) = post(&s, "/api/v1/events", "application/x-ndjson", events).await;
    assert_eq!(status, 200, "{body}");
    // A trace id that is not a string is a bad event, the batch refused whole.
    let bad = "{\"op\":\"release\",\"outcome\":\"not_owned\",\"key\":\"wf:lock:9\",\"trace_id\":7}\n";
    let (status, body) = post(&s, "/api/v1/events", "application/x-ndjson", bad).await;
    assert_eq!(
        (status, body.trim()),
        (
            400,
            "line 1: field `trace_id` must be a string; nothing in this body was counted"
        )
    );

    s.wait_for(Duration::from_secs(10), "every event counted", |m| {
        not_owned(m, "workflow", "release") == 5.0 && not_owned(m, "payout", "renew") == 1.0
    })
    .await;
    let ids = |t: &str, sp: Option<&str>| (Some(t.to_string()), sp.map(str::to_string));
    for (key, source, want) in [
        (
            "wf:lock:1",
            "http",
            ids("0af7651916cd43dd8448eb211c80319c", Some("b7ad6b7169203331")),
        ),
        (
            "payout:lock:2",
            "push",
            ids("11111111111111111111111111111111", Some("2222222222222222")),
        ),
        (
            "wf:lock:3",
            "push",
            ids("33333333333333333333333333333333", Some("4444")),
        ),
        (
            "wf:lock:4",
            "loki",
            ids("55555555555555555555555555555555", Some("6666666666666666")),
        ),
        (
            "wf:lock:5",
            "push",
            ids("77777777777777777777777777777777", Some("8888888888888888")),
        ),
        ("wf:lock:6", "push", (None, None)),
    ] {
        let kept = history(&s, key).await;
        assert_eq!(kept.len(), 1, "{key}: {kept:?}");
        assert_eq!(kept[0].2, source, "{key}");
        assert_eq!((kept[0].3.clone(), kept[0].4.clone()), want, "{key}");
    }
    // Without trace_url the key page shows the id as text, no link.
    let (_, _, page) = s.get("/locks/workflow?key=wf:lock:5").await;
    assert!(
        page.contains("<code class=\"trace\" title=\"trace 77777777777777777777777777777777\">"),
        "{page}"
    );
    assert!(!page.contains("class=\"trace\" href"), "{page}");
    s.stop().await;
}
