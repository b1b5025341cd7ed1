//! The exporter as operators run it: HTTP endpoints, readiness, and Redis faults (down,
//! restarted, paused, sleeping) under a running exporter, against a real redis-server.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Served, conn, redis};
use redis::Commands;

fn cfg(extra_server: &str, interval: &str, budget: &str) -> String {
    format!(
        r#"
[server]
{extra_server}

[[target]]
name = "main"
url = "{{url}}"
sample_interval = "{interval}"
sample_budget = "{budget}"

[[namespace]]
name = "wf"
pattern = "wf:lock:*"
ttl = "30s"
renew_every = "10s"

[[namespace]]
name = "appr"
pattern = "appr:lock:*"
ttl = "10s"
"#
    )
}

const UP: &[(&str, &str)] = &[("target", "main")];

#[tokio::test]
async fn endpoints_serve_what_the_sampler_saw() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("tok-secret-1")
        .arg("PX")
        .arg(4_000)
        .query(&mut c)
        .unwrap();
    let _: () = c.set("appr:lock:<x>", "tok-2").unwrap();
    let served = Served::start(common::config(&r, &cfg("", "200ms", "150ms"))).await;
    served
        .wait_for(Duration::from_secs(5), "first pass", |m| {
            m.val("lockwatch_sample_passes_total", UP) >= 1.0
        })
        .await;

    let (status, _, body) = served.get("/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, _, _) = served.get("/readyz").await;
    assert_eq!(status, 200);
    let (status, ctype, body) = served.get("/metrics").await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    assert!(body.contains("lockwatch_build_info{version=\""), "{body}");
    assert!(
        body.contains("process_resident_memory_bytes"),
        "process metrics are exported"
    );

    // promtool, the real one, accepts the exposition.
    common::promtool_check_metrics(&body);

    let (status, ctype, page) = served.get("/").await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/html"));
    // Row cells: held, renewal overdue, without TTL, held too long.
    let row = |ns: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("<tr data-namespace=\"{ns}\">")))
            .unwrap_or_default()
            .to_string()
    };
    let wf = row("wf");
    assert!(
        wf.contains(r#"</small></td><td>1</td><td class="bad">1</td><td>0</td><td>0</td>"#),
        "wf: held 1, overdue 1: {wf}"
    );
    let appr = row("appr");
    assert!(
        appr.contains(r#"</small></td><td>1</td><td>0</td><td class="bad">1</td><td>0</td>"#),
        "appr: held 1, no TTL 1: {appr}"
    );

    let (status, ctype, json) = served.get("/api/v1/locks?namespace=wf").await;
    assert_eq!(status, 200);
    assert_eq!(ctype, "application/json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["total"], 1);
    let lock = &v["locks"][0];
    assert_eq!(lock["key"], "wf:lock:1");
    assert_eq!(lock["owner"], "<redacted>");
    assert!(!json.contains("tok-secret-1"));
    assert_eq!(lock["overdue"], true);
    assert!(lock["pttl_ms"].as_i64().unwrap() <= 4_000);
    let (_, _, all) = served.get("/api/v1/locks").await;
    let v: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(v["total"], 2);
    assert_eq!(v["locks"][1]["pttl_ms"], -1, "no expiry sorts last");

    let (status, _, body) = served.get("/api/v1/locks?namespace=nope").await;
    assert_eq!(status, 400);
    assert!(
        body.contains("unknown namespace `nope`; configured: wf, appr"),
        "{body}"
    );
    let (status, _, body) = served.get("/api/v1/locks?limit=ten").await;
    assert_eq!(status, 400);
    assert!(body.contains("limit"), "{body}");
    let (_, _, one) = served.get("/api/v1/locks?limit=1").await;
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!((&v["total"], &v["truncated"]), (&2.into(), &true.into()), "{v}");
    assert_eq!(v["locks"][0]["key"], "wf:lock:1", "the least time left first");
    let (status, _, body) = served.get("/api/v1/locks?limit=10001").await;
    assert_eq!(status, 400);
    assert!(body.contains("over the maximum of 10000"), "{body}");
    let (status, _, body) = served.get("/nope").await;
    assert_eq!(status, 404);
    assert!(body.contains("/metrics"), "{body}");
    served.stop().await;
}

#[tokio::test]
async fn owners_are_shown_only_when_configured() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let _: () = c.set("wf:lock:1", "tok-visible").unwrap();
    let served = Served::start(common::config(&r, &cfg("show_owners = true", "200ms", "150ms"))).await;
    served
        .wait_for(Duration::from_secs(5), "first pass", |m| {
            m.val("lockwatch_sample_passes_total", UP) >= 1.0
        })
        .await;
    let (_, _, json) = served.get("/api/v1/locks?namespace=wf").await;
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["locks"][0]["owner"], "tok-visible");
    served.stop().await;
}

#[tokio::test]
async fn not_ready_until_the_first_pass_finishes() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1_500)
        .arg("ALL")
        .query(&mut c)
        .unwrap();
    let served = Served::start(common::config(&r, &cfg("", "1s", "1s"))).await;
    let (status, _, body) = served.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("waiting for the first sample pass of target main"),
        "{body}"
    );
    let started = Instant::now();
    loop {
        if served.get("/readyz").await.0 == 200 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(6), "never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    served.stop().await;
}

#[tokio::test]
async fn redis_stopped_and_restarted_under_a_running_exporter() {
    let mut r = redis(&["--notify-keyspace-events", "KEA"]);
    let _: () = conn(&r).set("wf:lock:1", "t").unwrap();
    let interval = Duration::from_millis(500);
    let served = Served::start(common::config(&r, &cfg("", "500ms", "400ms"))).await;
    served
        .wait_for(Duration::from_secs(5), "up", |m| m.val("lockwatch_up", UP) == 1.0)
        .await;
    served
        .wait_for(Duration::from_secs(5), "lock seen", |m| {
            m.val("lockwatch_locks_held", &[("namespace", "wf")]) == 1.0
        })
        .await;

    r.stop();
    served
        .wait_for(Duration::from_secs(5), "up 0 while Redis is down", |m| {
            m.val("lockwatch_up", UP) == 0.0
        })
        .await;
    let errors_before = served.metrics().await.val("lockwatch_sample_errors_total", UP);
    tokio::time::sleep(interval * 12).await;
    let m = served.metrics().await;
    assert_eq!(m.val("lockwatch_up", UP), 0.0);
    assert!(
        m.val("lockwatch_sample_errors_total", UP) > errors_before,
        "passes keep trying and counting failures"
    );

    r.restart().unwrap();
    let back = served
        .wait_for(Duration::from_secs(10), "up 1 after restart", |m| {
            m.val("lockwatch_up", UP) == 1.0
        })
        .await;
    eprintln!("lockwatch_up back to 1 {back:?} after the restart");
    assert!(
        back <= interval * 2 + Duration::from_millis(300),
        "up again after {back:?}, more than two intervals"
    );
    // Up means up: no pass fails once more on a connection that was not yet remade (the
    // lock taken now is read on the sampler's other connection).
    let _: () = conn(&r).set_ex("wf:lock:2", "t", 60).unwrap();
    let watched = Instant::now();
    while watched.elapsed() < interval * 6 {
        let m = served.metrics().await;
        assert_eq!(
            m.val("lockwatch_up", UP),
            1.0,
            "lockwatch_up fell back to 0 {:?} after it recovered: {}",
            watched.elapsed(),
            served.get("/").await.2
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The restarted Redis is empty: the first lock is gone from the gauges.
    served
        .wait_for(Duration::from_secs(3), "held 1", |m| {
            m.val("lockwatch_locks_held", &[("namespace", "wf")]) == 1.0
        })
        .await;
    served.stop().await;
}

#[tokio::test]
async fn paused_and_sleeping_redis_marks_down_keeps_serving_and_recovers() {
    let r = redis(common::debug_args());
    let served = Served::start(common::config(&r, &cfg("", "300ms", "250ms"))).await;
    served
        .wait_for(Duration::from_secs(5), "up", |m| m.val("lockwatch_up", UP) == 1.0)
        .await;

    // CLIENT PAUSE: every command of the exporter stalls.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(3_000)
        .arg("ALL")
        .query(&mut conn(&r))
        .unwrap();
    served
        .wait_for(Duration::from_secs(3), "up 0 while paused", |m| {
            m.val("lockwatch_up", UP) == 0.0
        })
        .await;
    let t = Instant::now();
    let _ = served.metrics().await;
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "a scrape never waits for Redis: {:?}",
        t.elapsed()
    );
    let passes = served.metrics().await.val("lockwatch_sample_passes_total", UP);
    served
        .wait_for(Duration::from_secs(2), "passes go on", |m| {
            m.val("lockwatch_sample_passes_total", UP) > passes
        })
        .await;
    served
        .wait_for(Duration::from_secs(5), "up 1 after pause", |m| {
            m.val("lockwatch_up", UP) == 1.0
        })
        .await;

    // DEBUG SLEEP: the server itself is stuck; the request that started it waits too.
    let url = r.url();
    let sleeper = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("DEBUG").arg("SLEEP").arg(2).query(&mut c).unwrap();
    });
    served
        .wait_for(Duration::from_secs(3), "up 0 while Redis sleeps", |m| {
            m.val("lockwatch_up", UP) == 0.0
        })
        .await;
    sleeper.join().unwrap();
    served
        .wait_for(Duration::from_secs(3), "up 1 after sleep", |m| {
            m.val("lockwatch_up", UP) == 1.0
        })
        .await;
    served.stop().await;
}
