//! End to end on real servers: redis-server, `lockwatch serve`, a lock workload whose
//! holders stall past the TTL and log "lock not owned", a batch job whose run time grows
//! toward its TTL until one run outlives it, and the Debian `prometheus` scraping lockwatch
//! every second with the shipped rules. Every panel query of both dashboards must return
//! data, no rule may fail to evaluate, the fast alerts must reach pending or firing, and
//! `LockHeadroomLow` must go pending before the batch lock's first takeover; `lockwatch
//! advise` on what Prometheus recorded must recommend a TTL the longest run fits in. Then
//! the status page `/` in headless Chromium, with a screenshot kept in
//! `target/test-artifacts/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Served;
use common::prometheus::Prometheus;
use lockwatch::access::scripts::{SAFE_RELEASE as RELEASE, SAFE_RENEW as RENEW};
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Prometheus scraping `scrape` every second, with the shipped rules.
fn start_prometheus(scrape: std::net::SocketAddr) -> Prometheus {
    let alerts = Path::new(ROOT).join("alerts");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\n\
         scrape_configs:\n  - job_name: lockwatch\n    static_configs:\n      - targets: ['{scrape}']\n",
        alerts.join("lockwatch-recording.rules.yml").display(),
        alerts.join("lockwatch-alerts.rules.yml").display(),
    );
    Prometheus::start(&config, &[])
}

async fn get_json(url: &str, query: &[(&str, &str)]) -> serde_json::Value {
    let resp = reqwest::Client::new().get(url).query(query).send().await.unwrap();
    let status = resp.status();
    let body = resp.text().await.unwrap();
    assert!(status.is_success(), "{url} {query:?}: {status}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `SET key owner NX PX 1500`; refused silently when held.
async fn acquire(c: &mut redis::aio::ConnectionManager, key: &str, owner: impl redis::ToRedisArgs + Send + Sync) {
    let _: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("NX")
        .arg("PX")
        .arg(1500)
        .query_async(c)
        .await
        .unwrap();
}

/// Stalled holders, in a loop: A takes a lock and stops renewing (overdue, then expired), B
/// takes it over, A's release and renewal are refused and logged; healthy holders renew and
/// release so the ratios have successes under them.
async fn workload(url: String, log: PathBuf, stop: CancellationToken) {
    let client = redis::Client::open(url).unwrap();
    let mut c = redis::aio::ConnectionManager::new(client).await.unwrap();
    let (release, renew) = (redis::Script::new(RELEASE), redis::Script::new(RENEW));
    let mut i = 0u64;
    while !stop.is_cancelled() {
        i += 1;
        let key = format!("payout:lock:{i}");
        let fence: i64 = c.incr("payout:fence:batch", 1).await.unwrap();
        acquire(&mut c, &key, format!("A-{i}-{fence}")).await;
        // A healthy holder on another key: renew and release.
        let ok_key = format!("payout:lock:ok{i}");
        acquire(&mut c, &ok_key, "H").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _: i64 = renew
            .key(&ok_key)
            .arg("H")
            .arg(1500)
            .invoke_async(&mut c)
            .await
            .unwrap();
        let _: i64 = release.key(&ok_key).arg("H").invoke_async(&mut c).await.unwrap();
        // A stalls past its TTL; B takes the expired lock.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        acquire(&mut c, &key, format!("B-{i}")).await;
        let renewed: i64 = renew
            .key(&key)
            .arg(format!("A-{i}-{fence}"))
            .arg(1500)
            .invoke_async(&mut c)
            .await
            .unwrap();
        let released: i64 = release
            .key(&key)
            .arg(format!("A-{i}-{fence}"))
            .invoke_async(&mut c)
            .await
            .unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        if renewed == 0 {
            writeln!(
                f,
                "level=warn msg=\"payout lock renewal failed\" key={key} error=\"lock not owned\""
            )
            .unwrap();
        }
        if released == 0 {
            writeln!(
                f,
                "level=error msg=\"payout lock release failed\" key={key} error=\"lock not owned\""
            )
            .unwrap();
        }
        writeln!(f, "level=info msg=\"batch step done\" step={i}").unwrap();
        let _: i64 = release
            .key(&key)
            .arg(format!("B-{i}"))
            .invoke_async(&mut c)
            .await
            .unwrap();
    }
}

/// Run times of the batch job (ms) under its 1 s TTL: well inside it, then ever closer
/// (under a fifth of the TTL left: near misses), then one run that outlives it.
fn batch_runs() -> Vec<u64> {
    let mut runs = vec![300; 12];
    runs.extend((0..15).map(|i| 850 + 5 * i));
    runs.push(BATCH_OVERRUN_MS);
    runs
}
const BATCH_OVERRUN_MS: u64 = 1300;

/// The batch job, one run after another on one lock (`SET NX PX 1000`, compare-and-delete).
/// During the last run, which outlives the TTL, another worker takes the expired lock: the
/// moment it does is returned.
async fn drifting_batch(url: String) -> Instant {
    let client = redis::Client::open(url).unwrap();
    let c = redis::aio::ConnectionManager::new(client).await.unwrap();
    let release = redis::Script::new(RELEASE);
    let key = "batch:lock:nightly";
    let set_nx = |owner: String| {
        let mut c = c.clone();
        async move {
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(owner)
                .arg("NX")
                .arg("PX")
                .arg(1000)
                .query_async(&mut c)
                .await
                .unwrap();
            set.is_some()
        }
    };
    let runs = batch_runs();
    let last = runs.len() - 1;
    let mut taken_over = None;
    for (i, run_ms) in runs.into_iter().enumerate() {
        assert!(set_nx(format!("W-{i}")).await, "run {i}: the batch lock was not free");
        if i == last {
            // Another worker keeps trying; it gets the lock the moment it expires.
            let deadline = Instant::now() + Duration::from_millis(run_ms);
            while Instant::now() < deadline && taken_over.is_none() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if set_nx("other".into()).await {
                    taken_over = Some(Instant::now());
                }
            }
            tokio::time::sleep(deadline.saturating_duration_since(Instant::now())).await;
        } else {
            tokio::time::sleep(Duration::from_millis(run_ms)).await;
        }
        let _: i64 = release
            .key(key)
            .arg(format!("W-{i}"))
            .invoke_async(&mut c.clone())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    taken_over.expect("the overrun's lock was never taken over")
}

fn config_text(log_dir: &Path) -> String {
    format!(
        "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nsample_interval = \"250ms\"\n\
         [[namespace]]\nname = \"payout\"\npattern = \"payout:lock:*\"\nttl = \"1500ms\"\nrenew_every = \"500ms\"\n\
         max_hold = \"1m\"\nfence_pattern = \"payout:fence:*\"\nlog_phrases = [\"payout lock\"]\n\
         [[namespace]]\nname = \"batch\"\npattern = \"batch:lock:*\"\nttl = \"1s\"\n\
         [[logs]]\nname = \"app\"\npath = \"{}/*.log\"\nstart_at = \"beginning\"\n",
        log_dir.display()
    )
}

async fn wait_ready(prom: &Prometheus) {
    let started = Instant::now();
    while !reqwest::get(format!("{}/-/ready", prom.url))
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "prometheus did not get ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Ready, and lockwatch scraped once: every count from now on is in Prometheus.
async fn wait_scraped(prom: &Prometheus) {
    wait_ready(prom).await;
    let started = Instant::now();
    loop {
        let v = get_json(
            &format!("{}/api/v1/query", prom.url),
            &[("query", "up{job=\"lockwatch\"} == 1")],
        )
        .await;
        if v["data"]["result"].as_array().is_some_and(|r| !r.is_empty()) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "lockwatch was never scraped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_lockwatch_evaluates_the_rules_and_answers_every_panel() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(common::config(&r, &config_text(dir.path()))).await;
    // A drill's result, for the dashboard's drills row.
    let result = common::drill_result("nightly", "main", "payout", "r1", "safe");
    common::post_drill_result(s.addr, &result).await;
    let prom = start_prometheus(s.addr);
    wait_scraped(&prom).await;
    let stop = CancellationToken::new();
    let load = tokio::spawn(workload(r.url(), dir.path().join("app.log"), stop.clone()));
    let batch = tokio::spawn(drifting_batch(r.url()));

    // The fast alerts reach pending or firing; the near-miss alert of the batch namespace
    // before its lock is first taken over.
    let started = Instant::now();
    let mut states = std::collections::BTreeMap::new();
    let mut headroom_low_at = None;
    while started.elapsed() < Duration::from_secs(120) {
        if let Ok(resp) = reqwest::get(format!("{}/api/v1/alerts", prom.url)).await
            && let Ok(v) = resp.json::<serde_json::Value>().await
        {
            for a in v["data"]["alerts"].as_array().into_iter().flatten() {
                let name = a["labels"]["alertname"].as_str().unwrap_or("");
                if name == "LockHeadroomLow" && a["labels"]["namespace"] == "batch" && headroom_low_at.is_none() {
                    headroom_low_at = Some(Instant::now());
                }
                states.insert(name.to_string(), a["state"].as_str().unwrap_or("").to_string());
            }
        }
        if states.contains_key("LockRenewalOverdue")
            && states.contains_key("LockExpiryTakeovers")
            && batch.is_finished()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("alerts after {:?}: {states:?}", started.elapsed());
    let taken_over_at = batch.await.unwrap();
    let headroom_low_at = headroom_low_at.expect("LockHeadroomLow never went pending for namespace batch");
    eprintln!(
        "LockHeadroomLow pending {:?} in, the batch lock taken over {:?} in",
        headroom_low_at - started,
        taken_over_at - started
    );
    assert!(
        headroom_low_at < taken_over_at,
        "LockHeadroomLow went pending {:?} after the first takeover",
        headroom_low_at - taken_over_at
    );
    for a in ["LockRenewalOverdue", "LockExpiryTakeovers"] {
        let st = states.get(a).map(String::as_str);
        assert!(
            matches!(st, Some("pending" | "firing")),
            "{a} is {st:?}; all: {states:?}"
        );
    }

    // Every rule evaluates without error.
    let rules = get_json(&format!("{}/api/v1/rules", prom.url), &[]).await;
    let mut evaluated = 0;
    for g in rules["data"]["groups"].as_array().unwrap() {
        for rule in g["rules"].as_array().unwrap() {
            let name = rule["name"].as_str().unwrap_or("?");
            assert_eq!(rule["health"], "ok", "{name}: {}", rule["lastError"]);
            assert!(
                rule["lastError"].as_str().unwrap_or("").is_empty(),
                "{name}: {}",
                rule["lastError"]
            );
            evaluated += 1;
        }
    }
    assert_eq!(evaluated, 54, "{rules}");

    // Every panel query of both dashboards returns data (recording rules may need a few
    // more evaluations on a loaded machine: asked again for up to 60 s).
    let queries = common::dashboard_queries();
    let asked = Instant::now();
    let empty = loop {
        let mut empty = Vec::new();
        for q in &queries {
            let expr = common::fill_variables(&q.expr, "payout");
            let v = get_json(&format!("{}/api/v1/query", prom.url), &[("query", &expr)]).await;
            if v["data"]["result"].as_array().is_none_or(Vec::is_empty) {
                empty.push(format!("{} / {}: {expr}", q.dashboard, q.panel));
            }
        }
        if empty.is_empty() || asked.elapsed() > Duration::from_secs(60) {
            break empty;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert!(empty.is_empty(), "queries without data:\n{}", empty.join("\n"));
    eprintln!("{} panel queries answered, {evaluated} rules healthy", queries.len());

    // What Prometheus recorded of the batch job is enough for advise, and its TTL would
    // have held the run that outlived the old one. The takeover is counted once lockwatch
    // has seen the expiry and Prometheus has scraped the count since: waited for (up to
    // 60 s), as advise reads only what Prometheus holds.
    let takeovers = "sum(increase(lockwatch_lock_expiry_takeovers_total{namespace=\"batch\"}[1h]))";
    let asked = Instant::now();
    loop {
        let v = get_json(&format!("{}/api/v1/query", prom.url), &[("query", takeovers)]).await;
        let n = v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|n| n.parse::<f64>().ok());
        if n >= Some(1.0) {
            eprintln!(
                "takeovers in Prometheus {:?} after the batch's first",
                taken_over_at.elapsed()
            );
            break;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(60),
            "Prometheus holds no takeover of the batch lock {:?} after it: {v}",
            taken_over_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let config = dir.path().join("lockwatch.toml");
    std::fs::write(&config, config_text(dir.path()).replace("{url}", &r.url())).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args([
            "advise",
            "--window",
            "1h",
            "--namespace",
            "batch",
            "--format",
            "json",
            "-c",
        ])
        .arg(&config)
        .args(["--prometheus", &prom.url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    let advice: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rec = &advice["namespaces"][0]["recommended"];
    let ttl = rec["ttl"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("no recommendation: {advice}"));
    let ttl = common::duration(ttl);
    assert!(
        ttl > Duration::from_millis(BATCH_OVERRUN_MS),
        "advised ttl {ttl:?} would not have held the {BATCH_OVERRUN_MS} ms run: {advice}"
    );
    assert!(
        advice["namespaces"][0]["seen"]["takeovers"].as_f64() >= Some(1.0),
        "{advice}"
    );
    assert_eq!(rec["fencing_needed"], true, "{advice}");

    stop.cancel();
    load.await.unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_renders_in_headless_chromium() {
    let chromium = ["chromium", "chromium-browser"]
        .iter()
        .find_map(|b| {
            ["/usr/bin", "/usr/local/bin"]
                .iter()
                .map(|d| Path::new(d).join(b))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "chromium not found: install it with `sudo apt-get install chromium` (or run `make test`, which does)"
            )
        });
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::conn(&r);
    for i in 0..3 {
        let _: () = redis::cmd("SET")
            .arg(format!("payout:lock:{i}"))
            .arg("owner")
            .arg("PX")
            .arg(600_000)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("payout:lock:forever")
        .arg("owner")
        .query(&mut c)
        .unwrap();
    let s = Served::start(common::config(&r, &config_text(dir.path()))).await;
    s.wait_for(Duration::from_secs(10), "the locks", |m| {
        m.get("lockwatch_locks_held", &[("namespace", "payout")]) == Some(4.0)
    })
    .await;
    let pushed = reqwest::Client::new()
        .post(format!("http://{}/api/v1/events", s.addr))
        .header("content-type", "application/x-ndjson")
        .body(
            "{\"namespace\":\"payout\",\"op\":\"release\",\"outcome\":\"not_owned\"}\n\
             {\"namespace\":\"payout\",\"op\":\"renew\",\"outcome\":\"not_owned\"}\n",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status().as_u16(), 200);
    let url = format!("http://{}/", s.addr);
    let artifacts = Path::new(ROOT).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let profile = dir.path().join("chromium");
    let run = move |args: &[&str]| {
        let out = Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let url2 = url.clone();
    let dom = tokio::task::spawn_blocking(move || {
        let dom = run(&["--dump-dom", &url2]);
        run(&[
            "--window-size=1280,900",
            &format!("--screenshot={}", shot.display()),
            &url2,
        ]);
        dom
    })
    .await
    .unwrap();
    // The rendered page names the target and namespace, and its row shows the counts.
    assert!(dom.contains("target main"), "{dom}");
    let cells = |marker: &str| -> Vec<String> {
        let row = dom
            .split("<tr")
            .find(|r| r.contains(marker))
            .unwrap_or_else(|| panic!("no {marker} in:\n{dom}"));
        row.split("<td")
            .skip(1)
            .map(|c| {
                c.split_once('>')
                    .map_or("", |(_, rest)| rest)
                    .split('<')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        &cells(r#"data-namespace="payout""#)[..4],
        ["payout", "4", "0", "1"],
        "held, overdue, without TTL"
    );
    // Lock failures pushed to the exporter: 2 not-owned, one of them a renewal; no contention.
    assert_eq!(
        cells(r#"data-events="payout""#),
        ["payout", "2", "2", "1", "0", "0"],
        "failures, not owned, renewal failed, stale fence, contention"
    );
    let png = std::fs::read(artifacts.join("status-page.png")).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot of {} bytes",
        png.len()
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sustained_drill_takes_the_ratio_alert_to_pending() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lockwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[[target]]\nname = \"staging\"\nurl = \"{}\"\nsample_interval = \"250ms\"\n\
             [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"500ms\"\n",
            r.url()
        ),
    )
    .unwrap();
    let s = Served::start(lockwatch::config::Config::load(&config, &Default::default()).unwrap()).await;
    let prom = start_prometheus(s.addr);
    wait_ready(&prom).await;
    let (exporter, prometheus) = (format!("http://{}", s.addr), prom.url.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_lockwatch"))
            .args([
                "drill",
                "--yes",
                "--format",
                "json",
                "--sustain",
                "30s",
                "--rate",
                "40",
                "-c",
            ])
            .arg(&config)
            .args(["--exporter", &exporter, "--prometheus", &prometheus])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cycles = &report["cycles"];
    eprintln!("sustained drill: {cycles}");
    assert!(cycles["cycles"].as_u64().unwrap() >= 10, "{report}");
    assert!(
        cycles["pending_after_s"].as_f64().is_some(),
        "the ratio alert never went pending: {report}"
    );
    let alerts = report["alerts"].as_array().unwrap();
    assert!(
        alerts.iter().any(|a| a[0] == "LockNotOwnedRatioHigh"),
        "alert states reported: {alerts:?}"
    );
    s.stop().await;
}
