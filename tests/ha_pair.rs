//! An HA pair end to end (issue 27): two `lockwatch serve` processes watch the same Redis,
//! a real Prometheus scrapes both (job `lockwatch`) with the shipped rules and sends to a real
//! Alertmanager, which delivers to a webhook this test serves. A fencing counter going
//! backwards (an incident both replicas see) is exactly one alert; one replica SIGKILLed
//! leaves it one alert, not resolved; while both are healthy there is no `LockwatchDown`,
//! and with one gone it is pending as a warning for that replica only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::alertmanager::Alertmanager;
use common::logs::{Proc, spawn_serve};
use common::prometheus::Prometheus;
use common::{Metrics, conn, http_get, redis};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const ALERT: &str = "LockFenceTokenRegression";

fn replica(dir: &Path, name: &str, url: &str) -> (Proc, SocketAddr) {
    let port = lockwatch::access::child::free_port().unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{url}\"\n\
             sample_interval = \"200ms\"\nnotifications = \"off\"\n\
             [[namespace]]\nname = \"payout\"\npattern = \"payout:lock:*\"\nfence_pattern = \"payout:fence:*\"\nttl = \"30s\"\n"
        ),
    )
    .unwrap();
    let proc = spawn_serve(
        &path,
        &dir.join(format!("{name}.log")),
        port,
        std::process::Stdio::null(),
    );
    (proc, ([127, 0, 0, 1], port).into())
}

async fn fence_token(addr: SocketAddr) -> Option<f64> {
    let (status, _, body) = http_get(addr, "/metrics").await;
    (status == 200).then(|| Metrics(body).get("lockwatch_fence_token", &[("namespace", "payout")]))?
}

/// Prometheus's alerts named `name`: (state, labels).
async fn prometheus_alerts(prom: &Prometheus, name: &str) -> Vec<(String, serde_json::Value)> {
    let v = prom.json("/api/v1/alerts", &[]).await.unwrap_or_default();
    v["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == name)
        .map(|a| (a["state"].as_str().unwrap_or("").to_string(), a["labels"].clone()))
        .collect()
}

async fn until(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool, log: impl Fn() -> String) {
    let started = Instant::now();
    while !done().await {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_seen_by_both_replicas_is_one_alert_and_stays_one_when_a_replica_dies() {
    let r = redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = conn(&r);
    let _: () = redis::cmd("SET").arg("payout:fence:42").arg(10).query(&mut c).unwrap();
    let (_a, a_addr) = replica(dir.path(), "a", &r.url());
    let (mut b, b_addr) = replica(dir.path(), "b", &r.url());
    let am = Alertmanager::start().await;
    let alerts = Path::new(ROOT).join("alerts");
    let prom = Prometheus::start(
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{}']\n\
             rule_files:\n  - {}\n  - {}\n\
             scrape_configs:\n  - job_name: lockwatch\n    static_configs:\n      - targets: ['{a_addr}', '{b_addr}']\n",
            am.addr,
            alerts.join("lockwatch-recording.rules.yml").display(),
            alerts.join("lockwatch-alerts.rules.yml").display(),
        ),
        &[],
    );
    let limit = Duration::from_secs(30);
    let nothing = String::new;
    until(
        limit,
        "both replicas to see the fencing counter at 10",
        async || fence_token(a_addr).await == Some(10.0) && fence_token(b_addr).await == Some(10.0),
        nothing,
    )
    .await;
    prom.scraped_targets(1, limit).await;
    // Both scraped, up and healthy: no LockwatchDown, not even pending.
    until(
        limit,
        "both replicas scraped as up",
        async || {
            let v = prom
                .json("/api/v1/query", &[("query", "sum(up{job=\"lockwatch\"})")])
                .await;
            v.is_some_and(|v| v["data"]["result"][0]["value"][1] == "2")
        },
        || std::fs::read_to_string(prom.dir().join("prometheus.log")).unwrap_or_default(),
    )
    .await;

    // The incident: the counter goes backwards, both replicas count a regression.
    let _: () = redis::cmd("SET").arg("payout:fence:42").arg(5).query(&mut c).unwrap();
    until(
        Duration::from_secs(60),
        "one alert delivered by Alertmanager",
        async || !am.alerts().is_empty(),
        || {
            format!(
                "Prometheus alerts: {:?}\nAlertmanager log:\n{}",
                std::fs::read_to_string(prom.dir().join("prometheus.log")).unwrap_or_default(),
                am.log()
            )
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await; // a second copy would have come by now
    let delivered = am.alerts();
    let ours: Vec<_> = delivered.iter().filter(|(_, l)| l["alertname"] == ALERT).collect();
    assert_eq!(ours.len(), 1, "exactly one alert, one notification: {delivered:?}");
    assert_eq!(ours[0].0, "firing");
    assert!(
        ours[0].1.get("instance").is_none() && ours[0].1.get("pod").is_none(),
        "{:?}",
        ours[0].1
    );
    assert!(
        delivered.iter().all(|(_, l)| l["alertname"] != "LockwatchDown"),
        "both healthy, yet: {delivered:?}"
    );
    assert!(prometheus_alerts(&prom, "LockwatchDown").await.is_empty());

    // One replica SIGKILLed: still one alert, not resolved; LockwatchDown pending as a
    // warning for that replica only.
    b.signal("-KILL");
    until(
        Duration::from_secs(30),
        "LockwatchDown pending for b",
        async || !prometheus_alerts(&prom, "LockwatchDown").await.is_empty(),
        nothing,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let down = prometheus_alerts(&prom, "LockwatchDown").await;
    assert_eq!(down.len(), 1, "{down:?}");
    assert_eq!(down[0].1["severity"], "warning", "{down:?}");
    assert_eq!(down[0].1["instance"], b_addr.to_string(), "{down:?}");
    let firing = prometheus_alerts(&prom, ALERT).await;
    assert_eq!(firing.len(), 1, "{firing:?}");
    assert_eq!(firing[0].0, "firing");
    let delivered = am.alerts();
    let ours: Vec<_> = delivered.iter().filter(|(_, l)| l["alertname"] == ALERT).collect();
    assert_eq!(ours.len(), 1, "still one notification, none resolved: {delivered:?}");
    assert!(delivered.iter().all(|(s, _)| s == "firing"), "{delivered:?}");
}
