//! Drill results recorded at a real `lockwatch serve` process: real staged drills (a safe
//! run, then an unsafe one through a plain-DEL release script) record their verdicts with
//! the config's push token; the gauges, `/api/v1/status`, the report at `/drills/NAME` and
//! the status page's drills section (in Chromium) follow; a SIGKILL and a restart, and a
//! reload, keep them (`LockDrillUnsafe` firing in a real Prometheus is `drill_schedule`'s).
//! Every refusal of `POST /api/v1/drills` (401, 415, 400 naming the field, 404, 413, 429
//! past `max_drills`) keeps nothing, and a retried run is taken once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::drill::{exited, plain_del_release, run as drill, text};
use common::logs::{Proc, spawn_serve};
use common::{Metrics, http_get};
use lockwatch::access::child::{RedisChild, free_port};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERDICT: &str = "lockwatch_drill_verdict";
const RUNS: &str = "lockwatch_drill_runs_total";
const TOKEN: &str = "drill-s3cret";

/// An exporter's files: its config (target `staging`, namespace `drill`, a push token,
/// `[state] dir`, `server` lines added), its port, the redis-server it watches.
struct Setup {
    redis: RedisChild,
    dir: tempfile::TempDir,
    port: u16,
    config: PathBuf,
}

impl Setup {
    fn new(server: &str) -> Setup {
        let redis = common::redis(&["--notify-keyspace-events", "KEA"]);
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        std::fs::write(dir.path().join("push-token"), format!("{TOKEN}\n")).unwrap();
        let config = dir.path().join("lockwatch.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:{port}\"\npush_token_file = \"push-token\"\n{server}\n\
                 [[target]]\nname = \"staging\"\nurl = \"{}\"\nsample_interval = \"250ms\"\n\
                 [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"1s\"\n\
                 [state]\ndir = \"state\"\n",
                redis.url()
            ),
        )
        .unwrap();
        Setup {
            redis,
            dir,
            port,
            config,
        }
    }

    async fn serve(&self, run: &str) -> Proc {
        let p = spawn_serve(
            &self.config,
            &self.dir.path().join(format!("{run}.log")),
            self.port,
            Stdio::null(),
        );
        wait(&p, "subscribed", |m| {
            m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
        })
        .await;
        p
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn get(&self, path: &str) -> (u16, String, String) {
        http_get(([127, 0, 0, 1], self.port).into(), path).await
    }
}

async fn wait(p: &Proc, what: &str, pred: impl Fn(&Metrics) -> bool) -> Metrics {
    let started = Instant::now();
    loop {
        let m = p.metrics().await;
        if pred(&m) {
            return m;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{what}: {}", m.0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn labels(verdict: &str) -> [(&str, &str); 4] {
    [
        ("target", "staging"),
        ("namespace", "drill"),
        ("drill", "nightly"),
        ("verdict", verdict),
    ]
}

const DRILL: [(&str, &str); 3] = [("target", "staging"), ("namespace", "drill"), ("drill", "nightly")];

/// The state set says `verdict` and nothing else; the runs counted so far.
fn assert_latest(m: &Metrics, verdict: &str, runs: [(&str, f64); 2]) {
    for v in ["safe", "unsafe", "not_exercised", "interrupted"] {
        let want = if v == verdict { 1.0 } else { 0.0 };
        assert_eq!(m.get(VERDICT, &labels(v)), Some(want), "{v}: {}", m.0);
    }
    for (v, n) in runs {
        assert_eq!(m.get(RUNS, &labels(v)), Some(n), "{v}: {}", m.0);
    }
    assert_eq!(m.get("lockwatch_drill_exposure_seconds", &DRILL), Some(0.0));
}

fn run_drill(s: &Setup, extra: &[&str], code: i32) -> String {
    let url = s.url();
    let mut args = vec![
        "--yes",
        "--exporter",
        url.as_str(),
        "--name",
        "nightly",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = drill(&s.config, &args);
    exited(&out, code, "the drill");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = text(&out.stderr);
    let at = format!("recorded: {url}/drills/nightly?target=staging&namespace=drill");
    assert!(stderr.contains(&at), "{stderr}");
    report["run_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_drills_are_recorded_shown_kept_through_a_sigkill_and_a_reload_and_page() {
    let s = Setup::new("");
    let mut p = s.serve("run1").await;
    let m = p.metrics().await;
    assert!(
        !m.0.contains("lockwatch_drill_verdict{"),
        "no drill before one runs: {}",
        m.0
    );

    let safe_run = tokio::task::block_in_place(|| run_drill(&s, &[], 0));
    let m = p.metrics().await;
    assert_latest(&m, "safe", [("safe", 1.0), ("unsafe", 0.0)]);
    let ended = m.val("lockwatch_drill_last_run_timestamp_seconds", &DRILL);
    assert!((common::wall_ms() as f64 / 1000.0 - ended).abs() < 30.0, "{ended}");

    // The unsafe run: the release script deletes whatever holds the key.
    let script = plain_del_release(s.dir.path());
    let unsafe_run = tokio::task::block_in_place(|| run_drill(&s, &["--release-script", script.to_str().unwrap()], 1));
    let m = p.metrics().await;
    assert_latest(&m, "unsafe", [("safe", 1.0), ("unsafe", 1.0)]);
    assert_eq!(m.val("lockwatch_drill_verdict_streak", &DRILL), 1.0);
    common::promtool_check_metrics(&m.0);

    // Where people look: the API, the report, the status page.
    let (status, _, body) = s.get("/api/v1/status").await;
    assert_eq!(status, 200);
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    let d = &st["drills"][0];
    assert_eq!(
        (d["drill"].as_str(), d["verdict"].as_str()),
        (Some("nightly"), Some("unsafe")),
        "{d}"
    );
    let recent: Vec<&str> = d["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(recent, ["safe", "unsafe"]);
    assert!(d["summary"].as_str().unwrap().starts_with("FAILED"), "{d}");
    let (status, _, json) = s.get("/drills/nightly?format=json").await;
    assert_eq!(status, 200);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["run_id"], unsafe_run.as_str());
    assert_ne!(safe_run, unsafe_run);
    let (status, _, html) = s.get("/drills/nightly").await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"verdict\"") && html.contains(&unsafe_run), "{html}");
    assert!(!html.contains("<script"), "{html}");
    status_page_in_chromium(&s).await;

    // A SIGKILL and a restart keep them; so does a reload.
    p.signal("-KILL");
    let p = s.serve("run2").await;
    let before = m;
    let m = p.metrics().await;
    assert_latest(&m, "unsafe", [("safe", 1.0), ("unsafe", 1.0)]);
    let kept = |m: &Metrics| m.val("lockwatch_drill_last_run_timestamp_seconds", &DRILL);
    assert_eq!(kept(&m), kept(&before));
    assert!(
        Command::new("kill")
            .args(["-HUP", &p.child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let m = wait(&p, "the reload", |m| {
        m.get("lockwatch_config_last_reload_success_timestamp_seconds", &[])
            .is_some_and(|t| t > 0.0)
    })
    .await;
    assert_latest(&m, "unsafe", [("safe", 1.0), ("unsafe", 1.0)]);

    drop(s.redis);
}

/// The drills section as a browser shows it: the line, its verdict, the strip of two runs,
/// a report link that opens the report; a screenshot in `target/test-artifacts`.
async fn status_page_in_chromium(s: &Setup) {
    let mut b = common::cdp::Browser::launch().await;
    let tab = b.tab().await;
    b.navigate(&tab, &format!("{}/", s.url())).await;
    let line = r#"document.querySelector('#drill-results li[data-drill="nightly"][data-verdict="unsafe"]')"#;
    b.wait_until(&tab, &format!("{line} !== null"), Duration::from_secs(10))
        .await;
    let strip = b
        .eval(
            &tab,
            &format!("Array.from({line}.querySelectorAll('.strip i')).map(i => i.className).join(',')"),
        )
        .await;
    assert_eq!(strip, "safe,unsafe");
    let shown = b
        .eval(&tab, &format!("{line}.getBoundingClientRect().height > 0"))
        .await;
    assert_eq!(shown, true);
    let counts = b
        .eval(&tab, "document.querySelector('#drill-results p').textContent")
        .await;
    assert_eq!(counts, "1 drill(s): 1 UNSAFE");
    let dir = Path::new(ROOT).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    b.screenshot(&tab, &dir.join("status-drills.png"), 1280, "light").await;
    let href = b.eval(&tab, &format!("{line}.querySelector('a').href")).await;
    b.navigate(&tab, href.as_str().unwrap()).await;
    let badge = b.eval(&tab, "document.getElementById('verdict').textContent").await;
    assert!(badge.as_str().is_some_and(|w| !w.is_empty()), "{badge}");
    assert!(b.errors(&tab).is_empty(), "{:?}", b.errors(&tab));
}

/// POST a record to the drills' endpoint with the push token unless `token` is false.
async fn post(port: u16, body: impl Into<String>, content_type: &str, token: bool) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/v1/drills"))
        .header("content-type", content_type)
        .body(body.into());
    if token {
        req = req.bearer_auth(TOKEN);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn record(name: &str, namespace: &str, run: &str) -> serde_json::Value {
    common::drill_result(name, "staging", namespace, run, "safe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_keeps_nothing_and_a_retried_run_is_taken_once() {
    let s = Setup::new("max_drills = 2");
    let p = s.serve("run").await;
    let json = "application/json";
    let ok = record("a", "drill", "r1").to_string();
    assert_eq!(post(s.port, ok.clone(), json, false).await.0, 401);
    let (status, body) = post(s.port, ok.clone(), "text/plain", true).await;
    assert_eq!(status, 415, "{body}");
    let (status, body) = post(s.port, "{not json", json, true).await;
    assert_eq!(status, 400, "{body}");
    let mut bad = record("a b", "drill", "r1");
    let (status, body) = post(s.port, bad.to_string(), json, true).await;
    assert!(status == 400 && body.contains("field `name`"), "{status} {body}");
    bad = record("a", "drill", "r1");
    bad["document"]["sections"] = serde_json::json!([{"id": "t", "title": "T", "tone": "neutral", "blocks": [
        {"timeline": {"origin": "start", "about": "", "lanes": [], "moments": [
            {"at_ms": 0, "lane": 3, "what": "x", "ok": true}], "at_least_to": 0, "label_rows": 1, "class": ""}}]}]);
    let (status, body) = post(s.port, bad.to_string(), json, true).await;
    assert!(status == 400 && body.contains("field `document`"), "{status} {body}");
    let (status, body) = post(s.port, record("a", "payouts", "r1").to_string(), json, true).await;
    assert!(
        status == 404 && body.contains("no namespace `payouts`"),
        "{status} {body}"
    );
    let mut big = record("a", "drill", "r1");
    big["summary"] = "x".repeat(300 * 1024).into();
    assert_eq!(post(s.port, big.to_string(), json, true).await.0, 413);
    let m = p.metrics().await;
    assert!(!m.0.contains("lockwatch_drill_verdict{"), "nothing kept: {}", m.0);
    let refused = |m: &Metrics, r: &str| m.val("lockwatch_drill_records_refused_total", &[("reason", r)]);
    assert_eq!(
        [
            refused(&m, "unauthorized"),
            refused(&m, "unsupported"),
            refused(&m, "invalid"),
            refused(&m, "unknown_namespace"),
            refused(&m, "too_large")
        ],
        [1.0, 1.0, 3.0, 1.0, 1.0]
    );

    // Taken, then the same run again (a retry): counted once.
    let (status, body) = post(s.port, ok.clone(), json, true).await;
    assert_eq!(status, 201, "{body}");
    assert!(body.contains("/drills/a?target=staging&namespace=drill"), "{body}");
    assert_eq!(post(s.port, ok, json, true).await.0, 200);
    assert_eq!(
        post(s.port, record("b", "drill", "r1").to_string(), json, true).await.0,
        201
    );
    // max_drills = 2: a third drill is refused; a kept one records again.
    let (status, body) = post(s.port, record("c", "drill", "r1").to_string(), json, true).await;
    assert!(status == 429 && body.contains("max_drills"), "{status} {body}");
    assert_eq!(
        post(s.port, record("b", "drill", "r2").to_string(), json, true).await.0,
        201
    );
    let m = p.metrics().await;
    let runs = |d: &str| {
        m.val(
            RUNS,
            &[
                ("target", "staging"),
                ("namespace", "drill"),
                ("drill", d),
                ("verdict", "safe"),
            ],
        )
    };
    assert_eq!((runs("a"), runs("b")), (1.0, 2.0));
    assert!(!m.0.contains("drill=\"c\""), "{}", m.0);
    assert_eq!(refused(&m, "too_many"), 1.0);
    let (status, _, body) = s.get("/drills/c").await;
    assert!(status == 404 && body.contains("recorded: a, b"), "{status} {body}");

    // A bad name never runs a drill.
    let out = drill(&s.config, &["--yes", "--exporter", &s.url(), "--name", "pay outs"]);
    exited(&out, 2, "a bad --name");
    assert!(text(&out.stderr).contains("--name `pay outs`"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_basic_auth_and_a_push_token_a_drill_records_by_the_token() {
    let hash = bcrypt::hash_with_result("pw", 4)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    let s = Setup::new("web_config_file = \"web.yml\"");
    std::fs::write(
        s.dir.path().join("web.yml"),
        format!("basic_auth_users:\n  ops: {hash}\n"),
    )
    .unwrap();
    let _p = spawn_serve(&s.config, &s.dir.path().join("auth.log"), s.port, Stdio::null());
    let (status, body) = post(s.port, record("a", "drill", "r1").to_string(), "application/json", true).await;
    assert_eq!(status, 201, "{body}");
    // The report is a page like the others: behind basic auth.
    let (status, _, _) = s.get("/drills/a").await;
    assert_eq!(status, 401);
    let page = reqwest::Client::new()
        .get(format!("{}/drills/a", s.url()))
        .basic_auth("ops", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(page.text().await.unwrap().contains(r#"class="verdict safe""#));
}
