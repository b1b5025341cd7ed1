//! `lockwatch drill` on a live namespace: while another process's workers (a thread here,
//! with its own Redis connection and HTTP pushes) take and release their own keys of the
//! drill's namespace, let some expire and be taken over, and report `not_owned` failures
//! and `busy` contention (some with no key), the drill judges by its own lock key's history and passes;
//! the namespace counters' other traffic is reported, not counted as a deviation. Against
//! an exporter that keeps no per-key events (an older lockwatch, played by a shim that
//! drops `events` from the history answer) it falls back to the namespace counters and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::drill::{exited, run as drill, served};
use serde_json::Value;

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Other workers of the namespace until `stop`: each round takes and releases a key of its
/// own, lets another expire and takes it over, and pushes failures and contention; `rounds`
/// counts them.
fn other_traffic(redis_url: String, exporter: String, stop: Arc<AtomicBool>, rounds: Arc<AtomicU64>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut c = redis::Client::open(redis_url).unwrap().get_connection().unwrap();
    let http = reqwest::Client::new();
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let key = format!("drill:lock:worker-{}", i % 4);
        let token = format!("other-{i}");
        let set: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(2000)
            .query(&mut c)
            .unwrap();
        if set.is_some() {
            let _: i64 = redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(1)
                .arg(&key)
                .arg(&token)
                .query(&mut c)
                .unwrap();
        }
        // A lock left to expire, then taken over by another owner and released.
        let stale = format!("drill:lock:stale-{i}");
        let _: () = redis::cmd("SET")
            .arg(&stale)
            .arg("a")
            .arg("PX")
            .arg(150)
            .query(&mut c)
            .unwrap();
        std::thread::sleep(Duration::from_millis(250));
        let _: () = redis::cmd("SET")
            .arg(&stale)
            .arg("b")
            .arg("NX")
            .arg("PX")
            .arg(2000)
            .query(&mut c)
            .unwrap();
        // Held a moment: the exporter reads the new owner to call it a takeover.
        std::thread::sleep(Duration::from_millis(100));
        let _: i64 = redis::cmd("EVAL")
            .arg(RELEASE)
            .arg(1)
            .arg(&stale)
            .arg("b")
            .query(&mut c)
            .unwrap();
        // Its failures (and a busy acquisition, contention): with its keys, and some with none.
        let body = format!(
            "{{\"namespace\":\"drill\",\"op\":\"renew\",\"outcome\":\"not_owned\",\"key\":\"{stale}\"}}\n\
             {{\"namespace\":\"drill\",\"op\":\"release\",\"outcome\":\"not_owned\",\"key\":\"{stale}\"}}\n\
             {{\"op\":\"acquire\",\"outcome\":\"busy\",\"key\":\"{key}\"}}\n\
             {{\"namespace\":\"drill\",\"op\":\"write\",\"outcome\":\"stale_fence\"}}\n\
             {{\"namespace\":\"drill\",\"op\":\"release\",\"outcome\":\"not_owned\"}}\n"
        );
        let sent = rt.block_on(
            http.post(format!("{exporter}/api/v1/events"))
                .header("content-type", "application/x-ndjson")
                .body(body)
                .send(),
        );
        assert!(sent.unwrap().status().is_success());
        rounds.fetch_add(1, Ordering::SeqCst);
    }
}

fn wait_rounds(rounds: &AtomicU64, n: u64) {
    let started = std::time::Instant::now();
    while rounds.load(Ordering::SeqCst) < n {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the other workers do not run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drill_judges_its_own_key_on_a_namespace_with_other_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (r, config, s, exporter) = served(dir.path()).await;
    let (stop, rounds) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (url, exporter, stop, rounds) = (r.url(), exporter.clone(), stop.clone(), rounds.clone());
        std::thread::spawn(move || other_traffic(url, exporter, stop, rounds))
    };
    wait_rounds(&rounds, 2);
    let record = dir.path().join("drill.md");
    let out = {
        let (config, exporter, record) = (config.clone(), exporter.clone(), record.clone());
        tokio::task::spawn_blocking(move || {
            drill(
                &config,
                &[
                    "--yes",
                    "--exporter",
                    &exporter,
                    "--format",
                    "json",
                    "--report",
                    record.to_str().unwrap(),
                ],
            )
        })
        .await
        .unwrap()
    };
    let during = rounds.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    traffic.join().unwrap();
    exited(&out, 0, "a drill on a live namespace");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["result"].as_str().unwrap().starts_with("passed"), "{report}");
    assert!(during >= 4, "other traffic during the whole run: {during} rounds");
    let counters = report["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 6, "{report}");
    for c in counters {
        assert_eq!(c["judged_by"], "key", "{c}");
        assert_eq!(c["ok"], true, "{c}");
        assert_eq!(c["drill"], c["expected"], "{c}");
        let (moved, drill, other) = (
            c["moved"].as_f64().unwrap(),
            c["drill"].as_f64().unwrap(),
            c["other"].as_f64().unwrap(),
        );
        assert_eq!(moved, drill + other, "{c}");
    }
    // The other workers' failures and takeovers moved the namespace counters too.
    let other = |series: &str| {
        let c = counters
            .iter()
            .find(|c| c["series"].as_str().unwrap().contains(series))
            .unwrap_or_else(|| panic!("no {series} in {report}"));
        c["other"].as_f64().unwrap()
    };
    for series in [
        "op=\"renew\",outcome=\"not_owned\"",
        "op=\"release\",outcome=\"not_owned\"",
        "op=\"write\",outcome=\"stale_fence\"",
        "lockwatch_lock_expiry_takeovers_total",
        "kind=\"acquired\"",
        "kind=\"expired\"",
    ] {
        assert!(other(series) > 0.0, "{series}: {report}");
    }
    let attribution = report["attribution"].as_str().unwrap();
    assert!(
        attribution.contains("history of the run's lock key") && attribution.contains("other traffic"),
        "{attribution}"
    );
    let md = std::fs::read_to_string(&record).unwrap();
    assert!(md.contains("other traffic, not attributed to the drill"), "{md}");
    s.stop().await;
}

/// An exporter that keeps no per-key events: the real one behind a shim that forwards
/// everything and drops `events` from the history answer, as a lockwatch before them does.
async fn older_exporter(real: String) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, Uri};
    let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let real = real.clone();
        async move {
            let mut req = reqwest::Client::new()
                .request(method, format!("{real}{uri}"))
                .body(body);
            if let Some(t) = headers.get("content-type") {
                req = req.header("content-type", t.to_str().unwrap());
            }
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            let text = if uri.path() == "/api/v1/locks/history" && status == 200 {
                let mut v: Value = serde_json::from_str(&text).unwrap();
                v.as_object_mut().unwrap().remove("events");
                v.to_string()
            } else {
                text
            };
            (axum::http::StatusCode::from_u16(status).unwrap(), text)
        }
    };
    let app = axum::Router::new().fallback(handler);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporter_without_per_key_events_is_judged_by_the_namespace_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, s, exporter) = served(dir.path()).await;
    let older = older_exporter(exporter).await;
    let out = tokio::task::spawn_blocking(move || drill(&config, &["--yes", "--exporter", &older]))
        .await
        .unwrap();
    exited(&out, 0, "a quiet namespace, an older exporter");
    let stdout = common::drill::text(&out.stdout);
    assert!(
        stdout.contains("judged by the namespace counters: the exporter keeps no per-key lock events"),
        "{stdout}"
    );
    assert!(!stdout.contains("the drill's"), "{stdout}");
    s.stop().await;
}
