//! What a drill tells the exporter while it holds a worker frozen, against real `lockwatch
//! serve` processes: every answer of `POST /api/v1/drills/freezes` (204, 400 naming the
//! field, 404 naming the target or namespace, 413, 415, 429 at the 65th live freeze, 401
//! without basic auth or the push token), `lockwatch_drill_frozen` and
//! `lockwatch_drill_thaw_due_timestamp_seconds` in live scrapes before, while and after a
//! freeze, the status page's line and `/api/v1/status`, the freezes kept across a SIGKILL
//! and a restart and dropped by a reload without their namespace; and `LockDrillLeftFrozen`
//! through `promtool test rules` on two replicas' real scrapes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::logs::{Proc, spawn_serve};
use common::{Metrics, freeze_record, http_get, wall_ms};
use lockwatch::access::child::{RedisChild, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const FROZEN: &str = "lockwatch_drill_frozen";
const DUE: &str = "lockwatch_drill_thaw_due_timestamp_seconds";
const REFUSED: &str = "lockwatch_drill_records_refused_total";

/// One exporter's files: its config (target `staging`, namespaces `payouts` and
/// `refunds`, `[state] dir`), its port, the redis-server it watches.
struct Setup {
    _redis: RedisChild,
    dir: tempfile::TempDir,
    port: u16,
    config: PathBuf,
}

impl Setup {
    /// `server` goes into `[server]`, `rest` after the namespaces.
    fn new(server: &str, rest: &str) -> Setup {
        let redis = common::redis(&[]);
        let dir = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let config = dir.path().join("lockwatch.toml");
        let setup = Setup {
            _redis: redis,
            dir,
            port,
            config,
        };
        setup.write(server, &["payouts", "refunds"], rest);
        setup
    }

    fn write(&self, server: &str, namespaces: &[&str], rest: &str) {
        let mut text = format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\n{server}\n[[target]]\nname = \"staging\"\nurl = \"{}\"\n\
             notifications = \"off\"\nsample_interval = \"200ms\"\n[state]\ndir = \"{}\"\n",
            self.port,
            self._redis.url(),
            self.dir.path().join("state").display()
        );
        for (i, ns) in namespaces.iter().enumerate() {
            text.push_str(&format!(
                "[[namespace]]\nname = \"{ns}\"\npattern = \"{ns}:lock:{i}:*\"\nttl = \"30s\"\n"
            ));
        }
        text.push_str(rest);
        std::fs::write(&self.config, text).unwrap();
    }

    fn serve(&self, run: &str) -> Proc {
        spawn_serve(
            &self.config,
            &self.dir.path().join(format!("{run}.log")),
            self.port,
            Stdio::null(),
        )
    }

    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }
}

/// POST `body` to the drills' endpoint: (status, body, `WWW-Authenticate`).
async fn post(port: u16, body: impl Into<String>, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut req = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/v1/drills/freezes"))
        .body(body.into());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let auth = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, resp.text().await.unwrap(), auth)
}

const JSON: [(&str, &str); 1] = [("content-type", "application/json")];

/// A record of freeze `id` on `staging`, `state` as given, the other fields of `freeze_record`.
fn record(id: &str, namespace: &str, state: &str, since_ms: u64, for_ms: u64) -> String {
    freeze_record(id, "staging", namespace, state, since_ms, for_ms)
}

/// `record` with `key` replaced by `value` (`null` removes it).
fn with(key: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&record("d-1", "payouts", "frozen", wall_ms(), 8000)).unwrap();
    match value {
        serde_json::Value::Null => v.as_object_mut().unwrap().remove(key),
        value => v.as_object_mut().unwrap().insert(key.into(), value),
    };
    v.to_string()
}

fn pair(namespace: &str) -> [(&'static str, &str); 2] {
    [("target", "staging"), ("namespace", namespace)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_answer_and_the_gauges_before_while_and_after_a_freeze() {
    let s = Setup::new("", "");
    let p = s.serve("run");
    // Before: 0 for every configured pair, no due timestamp, nothing refused.
    let m = p.metrics().await;
    assert_eq!(
        (m.val(FROZEN, &pair("payouts")), m.val(FROZEN, &pair("refunds"))),
        (0.0, 0.0)
    );
    assert_eq!(m.get(DUE, &pair("payouts")), None);
    assert!(!m.0.contains(&format!("{DUE}{{")), "{}", m.0);
    assert_eq!(m.val(REFUSED, &[("reason", "invalid")]), 0.0);

    // While: the freeze landed (twice: the same record changes nothing).
    let since = wall_ms();
    for _ in 0..2 {
        let (status, body, _) = post(s.port, record("d-4242-1", "payouts", "frozen", since, 8000), &JSON).await;
        assert_eq!((status, body.as_str()), (204, ""));
    }
    let m = p.metrics().await;
    assert_eq!(m.val(FROZEN, &pair("payouts")), 1.0);
    assert_eq!(m.val(FROZEN, &pair("refunds")), 0.0);
    assert_eq!(m.val(DUE, &pair("payouts")), (since + 8000) as f64 / 1000.0);
    assert_eq!(m.get(DUE, &pair("refunds")), None);
    common::promtool_check_metrics(&m.0);

    // Refusals, each naming its problem; none changes anything.
    let refused = [
        ("{\"id\":", 400, "the body is not JSON"),
        (
            with("for_ms", serde_json::Value::Null).as_str(),
            400,
            "field `for_ms` is missing",
        ),
        (
            with("for_ms", "8s".into()).as_str(),
            400,
            "field `for_ms` must be a whole number",
        ),
        (with("id", "d 1/../x".into()).as_str(), 400, "field `id`"),
        (with("state", "melted".into()).as_str(), 400, "field `state`"),
        (
            with("what", "w".repeat(513).into()).as_str(),
            400,
            "field `what` is too long",
        ),
        (with("frozen", "4242".into()).as_str(), 400, "field `frozen`"),
        (
            with("target", "production".into()).as_str(),
            404,
            "no target `production`",
        ),
        (
            with("namespace", "ledger".into()).as_str(),
            404,
            "no namespace `ledger`",
        ),
    ]
    .map(|(b, st, words)| (b.to_string(), st, words));
    for (body, want, words) in &refused {
        let (status, text, _) = post(s.port, body.clone(), &JSON).await;
        assert_eq!(status, *want, "{body}: {text}");
        assert!(text.contains(words), "{body}: {text}");
    }
    let big = with("what", "w".repeat(20 * 1024).into());
    let (status, text, _) = post(s.port, big, &JSON).await;
    assert_eq!(status, 413, "{text}");
    let (status, text, _) = post(
        s.port,
        record("d-2", "payouts", "frozen", since, 8000),
        &[("content-type", "text/plain")],
    )
    .await;
    assert_eq!(status, 415, "{text}");

    // 64 live at most: the 65th is refused, its thaw and a live one's records are not.
    for i in 2..=64 {
        let (status, text, _) = post(
            s.port,
            record(&format!("d-{i}"), "refunds", "frozen", since, 60_000),
            &JSON,
        )
        .await;
        assert_eq!(status, 204, "{i}: {text}");
    }
    let (status, text, _) = post(s.port, record("d-65", "refunds", "frozen", since, 60_000), &JSON).await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("64 drill freezes are live already"), "{text}");
    assert_eq!(
        post(s.port, record("d-64", "refunds", "thaw_failed", since, 60_000), &JSON)
            .await
            .0,
        204
    );
    let m = p.metrics().await;
    assert_eq!(m.val(FROZEN, &pair("refunds")), 63.0);
    let reasons = [
        ("invalid", 7.0),
        ("unknown_target", 1.0),
        ("unknown_namespace", 1.0),
        ("too_large", 1.0),
        ("unsupported", 1.0),
        ("too_many", 1.0),
        ("unauthorized", 0.0),
    ];
    for (reason, n) in reasons {
        assert_eq!(m.val(REFUSED, &[("reason", reason)]), n, "{reason}");
    }

    // After: thawed (by the watchdog too, and an id never seen), the pair back to 0.
    for by in ["drill", "watchdog"] {
        let thaw = record("d-4242-1", "payouts", "thawed", since, 8000).replace("\"drill\"", &format!("\"{by}\""));
        assert_eq!(post(s.port, thaw, &JSON).await.0, 204);
    }
    let unknown =
        r#"{"id":"never-seen","target":"staging","namespace":"payouts","state":"thawed","at_ms":1,"by":"watchdog"}"#;
    assert_eq!(post(s.port, unknown, &JSON).await.0, 204);
    let m = p.metrics().await;
    assert_eq!(m.val(FROZEN, &pair("payouts")), 0.0);
    assert_eq!(m.get(DUE, &pair("payouts")), None);
    assert_eq!(m.val(DUE, &pair("refunds")), (since + 60_000) as f64 / 1000.0);
}

/// The status page's HTML and `/api/v1/status`'s `drill_freezes`.
async fn status(s: &Setup) -> (String, serde_json::Value) {
    let (code, _, html) = http_get(s.addr(), "/").await;
    assert_eq!(code, 200, "{html}");
    let (code, _, json) = http_get(s.addr(), "/api/v1/status").await;
    assert_eq!(code, 200, "{json}");
    (html, serde_json::from_str(&json).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_and_api_say_what_is_frozen_and_how_to_thaw_it() {
    let s = Setup::new("", "");
    let _p = s.serve("run");
    let (html, json) = status(&s).await;
    assert!(!html.contains("a drill froze"), "{html}");
    assert_eq!(json["drill_freezes"], serde_json::json!([]));

    // Overdue by about 12 s, what it is written by a sender who writes markup.
    let now = wall_ms();
    let overdue = record("d-4242", "payouts", "frozen", now - 20_000, 8000)
        .replace("python3 worker.py", "<script>alert(1)</script>");
    assert_eq!(post(s.port, overdue, &JSON).await.0, 204);
    let running = record("d-77", "refunds", "frozen", now, 60_000).replace("4242", "77");
    assert_eq!(post(s.port, running, &JSON).await.0, 204);
    let failed = freeze_record("d-cg", "staging", "payouts", "thaw_failed", now - 1000, 500)
        .replace("pid:4242", "cgroup:/sys/fs/cgroup/payout.slice")
        .replace("\"drill\"", "\"watchdog\"");
    assert_eq!(post(s.port, failed, &JSON).await.0, 204);

    let (html, json) = status(&s).await;
    let line = |id: &str| {
        let at = html
            .find(&format!("data-freeze=\"{id}\""))
            .unwrap_or_else(|| panic!("no {id}: {html}"));
        let start = html[..at].rfind("<li").unwrap();
        html[start..at + html[at..].find("</li>").unwrap()].to_string()
    };
    let d4242 = line("d-4242");
    let since = clock(now - 20_000);
    assert!(
        d4242.contains(&format!(
            "a drill froze pid 4242 (process 4242 (&lt;script&gt;alert(1)&lt;/script&gt;)) at <time datetime=\"{}\">{} UTC</time> for 8 s",
            since.0, since.1
        )),
        "{d4242}"
    );
    assert!(
        d4242.contains("lvl-bad") && d4242.contains("thaw overdue by 1"),
        "{d4242}"
    );
    assert!(
        d4242.contains("thaw it by hand: <code>lockwatch drill --thaw pid:4242</code>"),
        "{d4242}"
    );
    assert!(!html.contains("<script>alert"), "{html}");
    let d77 = line("d-77");
    assert!(
        d77.contains("lvl-warn") && d77.contains("for 60 s; thaw due at"),
        "{d77}"
    );
    assert!(!d77.contains("overdue"), "{d77}");
    let cg = line("d-cg");
    assert!(
        cg.contains("a drill froze cgroup <code>/sys/fs/cgroup/payout.slice</code>")
            && cg.contains("the thaw failed</strong> (watchdog at"),
        "{cg}"
    );
    // Near the top: before the state lines.
    assert!(html.find("data-freeze").unwrap() < html.find("id=\"state\"").unwrap());

    let freezes = json["drill_freezes"].as_array().unwrap();
    assert_eq!(ids(&json), ["d-4242", "d-cg", "d-77"], "the earliest frozen first");
    let f = &freezes[0];
    for (key, want) in [
        ("target", "staging"),
        ("namespace", "payouts"),
        ("frozen", "pid:4242"),
        ("what", "process 4242 (<script>alert(1)</script>)"),
        ("by", "drill"),
        ("state", "frozen"),
        ("thaw_by_hand", "lockwatch drill --thaw pid:4242"),
    ] {
        assert_eq!(f[key], want, "{key}: {f}");
    }
    assert_eq!(
        (f["since_ms"].as_u64(), f["for_ms"].as_u64()),
        (Some(now - 20_000), Some(8000))
    );
    let late = f["overdue_s"].as_u64().unwrap();
    assert!((11..=20).contains(&late), "{f}");
    assert_eq!(freezes[2]["overdue_s"], 0);
    assert_eq!(freezes[1]["state"], "thaw_failed");
    assert!(
        json["drill_freezes_html"]
            .as_str()
            .unwrap()
            .contains("data-freeze=\"d-77\"")
    );
}

/// The ids of `/api/v1/status`'s `drill_freezes`, in order.
fn ids(status: &serde_json::Value) -> Vec<&str> {
    let freezes = status["drill_freezes"].as_array().unwrap();
    freezes.iter().map(|f| f["id"].as_str().unwrap()).collect()
}

/// `20:41:07` and its RFC 3339 form, as the page writes a time.
fn clock(ms: u64) -> (String, String) {
    let at = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string();
    let clock = at[11..19].to_string();
    (at, clock)
}

async fn wait_until(p: &Proc, what: &str, pred: impl Fn(&Metrics) -> bool) -> Metrics {
    let started = Instant::now();
    loop {
        let m = p.metrics().await;
        if pred(&m) {
            return m;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "waited for {what}:\n{}",
            m.0
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freezes_outlive_a_sigkill_and_a_reload_drops_those_of_a_removed_namespace() {
    let s = Setup::new("", "");
    let since = wall_ms();
    let mut first = s.serve("run1");
    for (id, ns) in [("d-1", "payouts"), ("d-2", "refunds"), ("d-3", "payouts")] {
        assert_eq!(post(s.port, record(id, ns, "frozen", since, 8000), &JSON).await.0, 204);
    }
    assert_eq!(
        post(s.port, record("d-3", "payouts", "thawed", since, 8000), &JSON)
            .await
            .0,
        204
    );
    first.signal("-KILL");

    let mut second = s.serve("run2");
    let m = second.metrics().await;
    assert_eq!(
        (m.val(FROZEN, &pair("payouts")), m.val(FROZEN, &pair("refunds"))),
        (1.0, 1.0)
    );
    assert_eq!(m.val(DUE, &pair("payouts")), (since + 8000) as f64 / 1000.0);
    let (_, json) = status(&s).await;
    assert_eq!(ids(&json), ["d-1", "d-2"]);
    // The thaw was kept too: d-3's late `frozen` does not bring it back.
    let mut late: serde_json::Value = serde_json::from_str(&record("d-3", "payouts", "frozen", since, 8000)).unwrap();
    late["at_ms"] = 1.into();
    assert_eq!(post(s.port, late.to_string(), &JSON).await.0, 204);
    assert_eq!(second.metrics().await.val(FROZEN, &pair("payouts")), 1.0);

    // A reload without `refunds` forgets its freeze, says so, and the file keeps it forgotten.
    s.write("", &["payouts"], "");
    assert!(
        Command::new("kill")
            .args(["-HUP", &second.child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let m = wait_until(&second, "the reload", |m| m.get(FROZEN, &pair("refunds")).is_none()).await;
    assert_eq!(m.val(FROZEN, &pair("payouts")), 1.0);
    second.signal("-KILL");
    let log = std::fs::read_to_string(s.dir.path().join("run2.log")).unwrap();
    assert!(log.contains("drill freeze forgotten") && log.contains("d-2"), "{log}");
    let third = s.serve("run3");
    let m = third.metrics().await;
    assert_eq!(m.val(FROZEN, &pair("payouts")), 1.0);
    assert_eq!(m.get(FROZEN, &pair("refunds")), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_or_the_push_token_guards_the_records() {
    let hash = bcrypt::hash_with_result("pw", 4)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    let s = Setup::new("web_config_file = \"web.yml\"", "");
    std::fs::write(
        s.dir.path().join("web.yml"),
        format!("basic_auth_users:\n  drill: {hash}\n"),
    )
    .unwrap();
    let p = s.serve("basic");
    let body = || record("d-1", "payouts", "frozen", wall_ms(), 8000);
    let (status, _, auth) = post(s.port, body(), &JSON).await;
    assert_eq!((status, auth.as_str()), (401, "Basic realm=\"lockwatch\""));
    let basic = ("authorization", "Basic ZHJpbGw6cHc="); // drill:pw
    assert_eq!(post(s.port, body(), &[JSON[0], basic]).await.0, 204);
    drop(p);

    // With a push token, the token guards it (as every push endpoint), not basic auth.
    std::fs::write(s.dir.path().join("push-token"), "s3cret\n").unwrap();
    s.write(
        "web_config_file = \"web.yml\"\npush_token_file = \"push-token\"",
        &["payouts", "refunds"],
        "",
    );
    let p = s.serve("token");
    let (status, text, auth) = post(s.port, body(), &[JSON[0], basic]).await;
    assert_eq!((status, auth.as_str()), (401, "Bearer"), "{text}");
    assert_eq!(
        post(s.port, body(), &[JSON[0], ("authorization", "Bearer s3cret")])
            .await
            .0,
        204
    );
    let (_, _, metrics) = common::http_get(s.addr(), "/metrics").await;
    assert!(
        metrics.contains("401 Unauthorized"),
        "scrapes still need basic auth: {metrics}"
    );
    drop(p);
}

/// The series of `name` in a scrape, as promtool input series of `instance` holding
/// `values`.
fn input_series(m: &Metrics, name: &str, instance: &str, values: impl Fn(f64) -> String) -> String {
    lockwatch::exposition::samples(&m.0)
        .filter(|s| s.name == name)
        .map(|s| {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            format!(
                "      - series: '{name}{{job=\"lockwatch\", instance=\"{instance}\", {}}}'\n        values: '{}'\n",
                labels.join(", "),
                values(s.value)
            )
        })
        .collect()
}

/// One firing `LockDrillLeftFrozen` of `namespace`, `ago` past its planned end, with the
/// thresholds of the test's config.
fn expected(namespace: &str, ago: &str) -> String {
    let threshold = "30s (namespace!~`refunds`); 5m (namespace=\"refunds\")";
    format!(
        "          - exp_labels:\n              severity: critical\n              job: lockwatch\n              target: staging\n              namespace: {namespace}\n            exp_annotations:\n              summary: 'A drill left a worker frozen in namespace {namespace} on target staging'\n              description: 'A freeze of lockwatch drill --freeze in namespace {namespace} on target staging should have been thawed {ago} ago, and no thaw was reported (threshold {threshold} past its planned end). The drill or its watchdog died, or the thaw failed: a worker may be stopped right now. The status page (or /api/v1/status, drill_freezes) names what is frozen and how to thaw it by hand.'\n              runbook_url: 'https://github.com/lockwatch/lockwatch/blob/main/runbooks/lock-drill-left-frozen.md'\n              dashboard_url: 'http://localhost:3000/d/lockwatch-namespace/lockwatch-namespace?var-namespace={namespace}&var-target=staging'\n"
    )
}

fn promtool_test(dir: &Path, test: &str) {
    let path = dir.join("drill.test.yml");
    std::fs::write(&path, test).unwrap();
    let promtool = common::require_binary("promtool", "prometheus");
    let out = Command::new(promtool)
        .args(["test", "rules", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{test}", common::output_text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_drill_left_frozen_fires_once_per_pair_across_two_replicas_from_real_scrapes() {
    // Thresholds of their own: 30s, and 5m for `refunds`. Times near the epoch, so that
    // promtool's clock (0 at the start) reads the scraped due timestamps as they are.
    let rest = "[namespace.alerts]\ndrill_left_frozen_after = \"5m\"\n[alerts]\ndrill_left_frozen_after = \"30s\"\n";
    let (a, b) = (Setup::new("", rest), Setup::new("", rest));
    let (pa, pb) = (a.serve("a"), b.serve("b"));
    // Replica a was told of the payouts freeze due at 68 s, and of a refunds one due at 10 s;
    // replica b of a later payouts freeze (due at 400 s) and of a refunds one thawed since.
    for (s, id, ns, since, for_ms) in [
        (&a, "p1", "payouts", 60_000, 8000),
        (&a, "r1", "refunds", 0, 10_000),
        (&b, "p2", "payouts", 300_000, 100_000),
        (&b, "r2", "refunds", 0, 1000),
    ] {
        assert_eq!(
            post(s.port, record(id, ns, "frozen", since, for_ms), &JSON).await.0,
            204
        );
    }
    let (ma, mb_before) = (pa.metrics().await, pb.metrics().await);
    assert_eq!(
        post(b.port, record("r2", "refunds", "thawed", 0, 1000), &JSON).await.0,
        204
    );
    let mb_after = pb.metrics().await;
    assert_eq!(ma.val(DUE, &pair("payouts")), 68.0);
    assert_eq!(mb_before.val(DUE, &pair("refunds")), 1.0);
    assert_eq!(mb_after.get(DUE, &pair("refunds")), None);

    // The rules as `lockwatch rules` renders them for this config.
    let out = Command::new(BIN)
        .args([
            "rules",
            "-c",
            a.config.to_str().unwrap(),
            "--out",
            a.dir.path().join("rules").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    // b's thawed series: present in the scrapes before the thaw, stale after it.
    let thawed = |m: &Metrics| {
        input_series(m, DUE, "lw-b:9747", |v| format!("{v} {v} stale"))
            .lines()
            .collect::<Vec<_>>()
            .chunks(2)
            .filter(|c| c[0].contains("refunds"))
            .flatten()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let b_payouts: String = input_series(&mb_after, DUE, "lw-b:9747", |v| format!("{v}x10"));
    let mut series = input_series(&ma, DUE, "lw-a:9747", |v| format!("{v}x10"));
    series.push_str(&b_payouts);
    series.push_str(&thawed(&mb_before));
    let test = format!(
        "rule_files: [rules/lockwatch-alerts.rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n      - eval_time: 1m\n        alertname: LockDrillLeftFrozen\n        exp_alerts: []\n      - eval_time: 2m\n        alertname: LockDrillLeftFrozen\n        exp_alerts:\n{}      - eval_time: 6m\n        alertname: LockDrillLeftFrozen\n        exp_alerts:\n{}{}",
        expected("payouts", "52s"),
        expected("payouts", "4m 52s"),
        expected("refunds", "5m 50s"),
    );
    promtool_test(a.dir.path(), &test);
}
