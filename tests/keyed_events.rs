//! Lock events that name a key, kept per key, against the real exporter: a JSON line with a
//! `key` field and a text line naming the key as a word in a tailed file, an
//! `/api/v1/events` NDJSON line with `key`, and an OTLP/JSON record with a key attribute
//! each appear once under that key's `events` in `/api/v1/locks/history`, with their op,
//! outcome and source; a line naming no key is under no key; a key of another namespace,
//! or a longer key with the same start, stays apart; the ring keeps its last 4,096.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Served;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(10);
const CAP: usize = 4096;

async fn post(s: &Served, path: &str, content_type: &str, body: String) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("http://{}{path}", s.addr))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

async fn history(s: &Served, key: &str) -> Value {
    let (status, _, body) = s.get(&format!("/api/v1/locks/history?key={key}")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// `(op, outcome, source)` of each event kept for `key`, oldest first.
async fn events(s: &Served, key: &str) -> Vec<(String, String, String)> {
    let h = history(s, key).await;
    let list = h["events"].as_array().unwrap_or_else(|| panic!("no events in {h}"));
    let at: Vec<i64> = list.iter().map(|e| e["at_ms"].as_i64().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "oldest first: {h}");
    assert!(list.iter().all(|e| e["at"].as_str().unwrap().ends_with('Z')), "{h}");
    list.iter()
        .map(|e| {
            let f = |k: &str| e[k].as_str().unwrap().to_string();
            (f("op"), f("outcome"), f("source"))
        })
        .collect()
}

fn ev(op: &str, outcome: &str, source: &str) -> (String, String, String) {
    (op.into(), outcome.into(), source.into())
}

/// Poll until `key` has `n` events kept.
async fn wait_events(s: &Served, key: &str, n: usize) -> Vec<(String, String, String)> {
    let started = std::time::Instant::now();
    loop {
        let got = events(s, key).await;
        if got.len() >= n || started.elapsed() > WAIT {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_naming_a_key_are_kept_under_it_from_every_intake() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let config = common::config(
        &r,
        &format!(
            "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n\
             [[namespace]]\nname = \"workflow\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n\
             [[namespace]]\nname = \"payout\"\npattern = \"payout:lock:*\"\nttl = \"30s\"\n\
             [[logs]]\nname = \"app\"\npath = \"{}\"\nstart_at = \"beginning\"\n",
            log.display()
        ),
    );
    let s = Served::start(config).await;
    let key = "wf:lock:1";
    assert!(events(&s, key).await.is_empty(), "nothing before any event");

    // A tailed file: a JSON line with a key field, a text line naming the key as a word,
    // a line naming no key, a key of another namespace, an ordinary line with the key.
    common::logs::append(
        &log,
        "{\"level\":\"error\",\"msg\":\"lock release failed: lock not owned\",\"key\":\"wf:lock:1\"}\n\
         2026-11-25 10:00:01 WARN could not renew lock wf:lock:1: lock not owned\n\
         2026-11-25 10:00:02 ERROR lock acquire timed out after 5s\n\
         2026-11-25 10:00:03 ERROR release of lock payout:lock:9 failed: lock not owned\n\
         2026-11-25 10:00:04 INFO served GET /wf:lock:1 in 3 ms\n",
    );
    s.wait_for(WAIT, "the file's five lines", |m| {
        common::logs::lines_of(m, "app") == (4.0, 1.0, 0.0)
    })
    .await;
    let from_file = events(&s, key).await;
    assert_eq!(
        from_file,
        [ev("release", "not_owned", "app"), ev("renew", "not_owned", "app")]
    );

    // An NDJSON push with the key (namespace from it), and one of a longer key.
    let (status, body) = post(
        &s,
        "/api/v1/events",
        "application/x-ndjson",
        "{\"op\":\"write\",\"outcome\":\"stale_fence\",\"key\":\"wf:lock:1\"}\n\
         {\"op\":\"write\",\"outcome\":\"stale_fence\",\"key\":\"wf:lock:10\"}\n\
         {\"namespace\":\"workflow\",\"op\":\"renew\",\"outcome\":\"error\"}\n"
            .into(),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"accepted\":3,\"unknown_namespace\":0}")
    );

    // An OTLP/JSON record with the key as an attribute.
    let otlp = r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[
        {"body":{"stringValue":"failed to acquire lock: busy"},
         "attributes":[{"key":"lock.key","value":{"stringValue":"wf:lock:1"}}]},
        {"body":{"stringValue":"INFO nothing about it"},
         "attributes":[{"key":"lock.key","value":{"stringValue":"wf:lock:1"}}]}]}]}]}"#;
    let (status, body) = post(&s, "/v1/logs", "application/json", otlp.into()).await;
    assert_eq!(status, 200, "{body}");

    let got = wait_events(&s, key, 4).await;
    assert_eq!(
        got,
        [
            ev("release", "not_owned", "app"),
            ev("renew", "not_owned", "app"),
            ev("write", "stale_fence", "push"),
            ev("acquire", "busy", "otlp"),
        ],
        "each once, in the order counted"
    );
    let h = history(&s, key).await;
    assert_eq!(h["namespace"], "workflow");
    assert_eq!(h["transitions"].as_array().unwrap().len(), 0);
    assert_eq!(h["unwatched_targets"], serde_json::json!(["main"]));
    // The other keys stay apart; the line naming no key and the keyless push are counted,
    // under no key.
    assert_eq!(events(&s, "payout:lock:9").await, [ev("release", "not_owned", "app")]);
    assert_eq!(events(&s, "wf:lock:10").await, [ev("write", "stale_fence", "push")]);
    let m = s.metrics().await;
    let counted = |ns: &str, op: &str, outcome: &str| {
        m.val(
            "lockwatch_lock_events_total",
            &[("namespace", ns), ("op", op), ("outcome", outcome)],
        )
    };
    assert_eq!(counted("unknown", "acquire", "timeout"), 1.0);
    assert_eq!(counted("workflow", "renew", "error"), 1.0);
    assert_eq!(counted("workflow", "write", "stale_fence"), 2.0);
    for k in ["wf:lock:1", "wf:lock:10", "payout:lock:9", "wf:lock:2"] {
        let list = events(&s, k).await;
        assert!(
            !list
                .iter()
                .any(|(op, o, _)| (op == "acquire" && o == "timeout") || o == "error"),
            "{k}: {list:?}"
        );
    }
    // The key's page lists them too.
    let (status, _, page) = s.get("/locks/workflow?key=wf:lock:1&format=json").await;
    assert_eq!(status, 200);
    let page: Value = serde_json::from_str(&page).unwrap();
    assert_eq!(page["events"].as_array().unwrap().len(), 4, "{page}");
    assert!(page["html"].as_str().unwrap().contains("data-outcome=\"stale_fence\""));
    // No key becomes a label.
    assert!(!m.0.contains("wf:lock:1"), "a key in /metrics");

    // The ring's bound: 100 events, then 4,096 more, of another key; the oldest go.
    let mut flood = String::new();
    for i in 0..CAP + 100 {
        let (op, outcome) = if i < 100 {
            ("acquire", "busy")
        } else {
            ("renew", "error")
        };
        flood.push_str(&format!(
            "{{\"op\":\"{op}\",\"outcome\":\"{outcome}\",\"key\":\"wf:lock:flood\"}}\n"
        ));
    }
    let (status, _) = post(&s, "/api/v1/events", "application/x-ndjson", flood).await;
    assert_eq!(status, 200);
    let kept = events(&s, "wf:lock:flood").await;
    assert_eq!(kept.len(), CAP);
    assert!(
        kept.iter().all(|e| *e == ev("renew", "error", "push")),
        "the first 100 went"
    );
    assert!(events(&s, key).await.is_empty(), "older events of other keys went too");
    s.stop().await;
}
