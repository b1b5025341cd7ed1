//! Reloading the config of a running exporter (issue 27): `POST /-/reload` with
//! `--web.enable-lifecycle` (403 without), SIGHUP on a real `lockwatch serve` process, an
//! invalid config refused naming file, line and key, and what a valid reload keeps: the
//! unchanged target's Redis connections and counters, the unchanged log source's offsets and
//! counts; a changed target restarted alone; a changed namespace restarted alone, the other
//! namespaces' lock tables and every key's history kept; a removed one's series gone; the
//! web config too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::logs::{append, event, lines_of, not_owned, ordinary};
use common::{Metrics, conn, http_get, redis};
use lockwatch::access::child::RedisChild;
use lockwatch::config::{Config, Overrides};
use lockwatch::serve::{ConfigSource, Options};
use tokio_util::sync::CancellationToken;

const NOTIFY: [&str; 2] = ["--notify-keyspace-events", "KEA"];
const WAIT: Duration = Duration::from_secs(15);

/// A config of `targets` (name, url, sample interval), namespace `workflow` and log source `app`.
fn write_config(dir: &Path, targets: &[(&str, String, &str)], extra: &str) -> PathBuf {
    let mut text = String::from("[server]\nlisten = \"127.0.0.1:0\"\n");
    text.push_str(extra);
    for (name, url, every) in targets {
        text.push_str(&format!(
            "[[target]]\nname = \"{name}\"\nurl = \"{url}\"\nsample_interval = \"{every}\"\n"
        ));
    }
    text.push_str(&format!(
        "[[namespace]]\nname = \"workflow\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n\
         [[logs]]\nname = \"app\"\npath = \"{}\"\nstart_at = \"beginning\"\n",
        dir.join("app.log").display()
    ));
    let path = dir.join("lockwatch.toml");
    std::fs::write(&path, text).unwrap();
    path
}

struct Run {
    addr: SocketAddr,
    token: CancellationToken,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

async fn start(path: &Path, enable_lifecycle: bool) -> Run {
    let config = Config::load(path, &Overrides::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let token = CancellationToken::new();
    let options = Options {
        reload_from: Some(ConfigSource {
            path: path.to_path_buf(),
            overrides: Overrides::default(),
        }),
        enable_lifecycle,
    };
    let t = token.clone();
    tokio::spawn(async move { lockwatch::serve::run_with(listener, config, options, t).await.unwrap() });
    Run { addr, token }
}

async fn metrics(addr: SocketAddr) -> Metrics {
    let (status, _, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    Metrics(body)
}

async fn wait_for(addr: SocketAddr, what: &str, pred: impl Fn(&Metrics) -> bool) -> Metrics {
    let started = Instant::now();
    loop {
        let m = metrics(addr).await;
        if pred(&m) {
            return m;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for {what}; last /metrics:\n{}",
            m.0
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post_reload(addr: SocketAddr) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/-/reload"))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The ids of lockwatch's connections to `r` (every client but the one asking).
fn client_ids(r: &RedisChild) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn(r)).unwrap();
    let me: u64 = redis::cmd("CLIENT").arg("ID").query(&mut conn(r)).unwrap();
    let mut ids: Vec<u64> = list
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("id=")))
        .filter_map(|id| id.parse().ok())
        .filter(|id| *id != me && *id + 1 != me)
        .collect();
    ids.sort_unstable();
    ids
}

/// `SET key me NX PX 30000`, then `DEL key`: an acquisition and a release.
fn take_and_release(c: &mut impl redis::ConnectionLike, key: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("me")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(c)
        .unwrap();
    let _: () = redis::cmd("DEL").arg(key).query(c).unwrap();
}

/// Wait until `count` reaches `want`, then check a moment later that it is exactly that:
/// each event counted once, none twice.
async fn counted_exactly(addr: SocketAddr, want: f64, count: impl Fn(&Metrics) -> f64) {
    wait_for(addr, "every churned lock counted", |m| count(m) >= want).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = metrics(addr).await;
    assert_eq!(count(&m), want, "each counted once:\n{}", m.0);
}

/// The ids of the connections subscribed by pattern to `r` (the watchers').
fn subscribers(r: &RedisChild) -> Vec<u64> {
    subscribers_at(r.port())
}

/// The ids of the connections subscribed by pattern to the server on `port`.
fn subscribers_at(port: u16) -> Vec<u64> {
    let url = format!("redis://127.0.0.1:{port}/");
    let mut c = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    list.lines()
        .filter(|l| l.split_whitespace().any(|f| f.starts_with("psub=") && f != "psub=0"))
        .filter_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("id="))?.parse().ok())
        .collect()
}

/// `n` acquire + release cycles of one lock on `r`: `n` acquired and released transitions.
fn cycles(r: &RedisChild, n: usize) {
    let mut c = conn(r);
    for i in 0..n {
        let _: () = redis::cmd("SET")
            .arg(format!("wf:lock:{i}"))
            .arg("me")
            .arg("PX")
            .arg(30_000)
            .arg("NX")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("DEL").arg(format!("wf:lock:{i}")).query(&mut c).unwrap();
    }
}

fn acquired(m: &Metrics, target: &str) -> f64 {
    m.val(
        "lockwatch_lock_transitions_total",
        &[("target", target), ("namespace", "workflow"), ("kind", "acquired")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_what_did_not_change_and_restarts_or_drops_what_did() {
    let (a, b) = (redis(&NOTIFY), redis(&NOTIFY));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, &(0..5).map(|i| event(i) + &ordinary(i)).collect::<String>());
    let path = write_config(dir.path(), &[("a", a.url(), "200ms"), ("b", b.url(), "200ms")], "");
    let run = start(&path, true).await;
    let subscribed = |m: &Metrics, t: &str| m.get("lockwatch_notifications_connected", &[("target", t)]) == Some(1.0);
    wait_for(run.addr, "both subscribed, 5 events read", |m| {
        subscribed(m, "a") && subscribed(m, "b") && not_owned(m, "workflow") == 5.0
    })
    .await;
    cycles(&a, 3);
    cycles(&b, 2);
    let m = wait_for(run.addr, "3 + 2 acquisitions", |m| {
        acquired(m, "a") == 3.0 && acquired(m, "b") == 2.0
    })
    .await;
    assert_eq!(m.val("lockwatch_config_last_reload_successful", &[]), 1.0);
    let started_at = m.val("lockwatch_config_last_reload_success_timestamp_seconds", &[]);
    assert!(started_at > 1.7e9, "{started_at}");
    let (a_ids, b_ids) = (client_ids(&a), client_ids(&b));
    assert!(!a_ids.is_empty() && !b_ids.is_empty());

    // Reload 1: `b` changed (its interval), `c` added; `a` and `app` unchanged.
    write_config(
        dir.path(),
        &[
            ("a", a.url(), "200ms"),
            ("b", b.url(), "300ms"),
            ("c", b.url(), "200ms"),
        ],
        "",
    );
    tokio::time::sleep(Duration::from_millis(1100)).await; // a whole second apart
    assert_eq!(post_reload(run.addr).await, (200, "config reloaded\n".into()));
    let m = wait_for(run.addr, "c subscribed", |m| subscribed(m, "c") && subscribed(m, "b")).await;
    assert_eq!(client_ids(&a), a_ids, "the unchanged target kept its connections");
    assert!(
        client_ids(&b).iter().all(|id| !b_ids.contains(id)),
        "the changed target reconnected"
    );
    assert_eq!(acquired(&m, "a"), 3.0, "a's counter continues");
    assert_eq!(acquired(&m, "b"), 2.0, "b restarted, its counter did not reset");
    assert_eq!(not_owned(&m, "workflow"), 5.0);
    let reloaded_at = m.val("lockwatch_config_last_reload_success_timestamp_seconds", &[]);
    assert!(reloaded_at > started_at);

    // What comes after counts on, exactly once.
    cycles(&a, 4);
    append(&log, &(5..8).map(|i| event(i) + &ordinary(i)).collect::<String>());
    // The lines' counters are added just after the events' (a scrape may fall between).
    let m = wait_for(run.addr, "7 acquisitions, 8 events, 16 lines", |m| {
        let (matched, ignored, _) = lines_of(m, "app");
        acquired(m, "a") == 7.0 && not_owned(m, "workflow") == 8.0 && matched + ignored >= 16.0
    })
    .await;
    assert_eq!(
        lines_of(&m, "app"),
        (8.0, 8.0, 0.0),
        "the log source kept its offsets: no line read twice"
    );

    // An invalid config: refused, named, and nothing changes.
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, good.replace("\"300ms\"", "\"soon\"")).unwrap();
    let (status, body) = post_reload(run.addr).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("lockwatch.toml") && body.contains("line ") && body.contains("target[1].sample_interval"),
        "{body}"
    );
    let m = metrics(run.addr).await;
    assert_eq!(m.val("lockwatch_config_last_reload_successful", &[]), 0.0);
    assert_eq!(
        m.val("lockwatch_config_last_reload_success_timestamp_seconds", &[]),
        reloaded_at
    );
    assert_eq!(client_ids(&a), a_ids);
    cycles(&a, 1);
    wait_for(run.addr, "a still watched", |m| acquired(m, "a") == 8.0).await;

    // Reload 2: `b` removed: its series go, the others stay.
    write_config(dir.path(), &[("a", a.url(), "200ms"), ("c", b.url(), "200ms")], "");
    assert_eq!(post_reload(run.addr).await.0, 200);
    let m = metrics(run.addr).await;
    assert!(
        !m.0.contains("target=\"b\""),
        "series of the removed target remain:\n{}",
        m.0
    );
    assert_eq!(acquired(&m, "a"), 8.0);
    assert_eq!(m.val("lockwatch_config_last_reload_successful", &[]), 1.0);
    assert_eq!(client_ids(&a), a_ids);
}

#[tokio::test]
async fn without_the_lifecycle_flag_the_reload_path_answers_403_and_says_why() {
    let r = redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &[("a", r.url(), "1s")], "");
    let run = start(&path, false).await;
    let (status, body) = post_reload(run.addr).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--web.enable-lifecycle"), "{body}");
}

#[tokio::test]
async fn the_web_config_is_reloaded_too() {
    let r = redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "{}\n").unwrap();
    let server = format!("web_config_file = \"{}\"\n", web.display());
    let path = write_config(dir.path(), &[("a", r.url(), "1s")], &server);
    let run = start(&path, true).await;
    assert_eq!(http_get(run.addr, "/metrics").await.0, 200);
    let hash = bcrypt::hash_with_result("s3cret", 10)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    std::fs::write(&web, format!("basic_auth_users:\n  ops: {hash}\n")).unwrap();
    assert_eq!(post_reload(run.addr).await, (200, "config reloaded\n".into()));
    assert_eq!(http_get(run.addr, "/metrics").await.0, 401, "basic auth now asked");
    let resp = reqwest::Client::new()
        .get(format!("http://{}/metrics", run.addr))
        .basic_auth("ops", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // An invalid web config is refused like an invalid config, naming the file and key.
    std::fs::write(&web, "basic_auth_users:\n  ops: not-a-hash\n").unwrap();
    let resp = reqwest::Client::new()
        .post(format!("http://{}/-/reload", run.addr))
        .basic_auth("ops", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body = resp.text().await.unwrap();
    assert!(body.contains("web.yml") && body.contains("basic_auth_users"), "{body}");
}

/// SIGHUP on a real `lockwatch serve` process reloads its file.
#[tokio::test]
async fn sighup_reloads_a_running_process() {
    let (a, b) = (redis(&[]), redis(&[]));
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let listen = format!("[server]\nlisten = \"127.0.0.1:{port}\"\n");
    let path = write_config(dir.path(), &[("a", a.url(), "200ms")], "");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("[server]\nlisten = \"127.0.0.1:0\"\n", &listen);
    std::fs::write(&path, &text).unwrap();
    let proc = common::logs::spawn_serve(&path, &dir.path().join("serve.log"), port, std::process::Stdio::null());
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_for(addr, "a sampled", |m| {
        m.get("lockwatch_up", &[("target", "a")]) == Some(1.0)
    })
    .await;
    let added = text.replacen(
        "[[target]]",
        &format!("[[target]]\nname = \"b\"\nurl = \"{}\"\n[[target]]", b.url()),
        1,
    );
    std::fs::write(&path, added).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &proc.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    wait_for(addr, "b sampled after SIGHUP", |m| {
        m.get("lockwatch_up", &[("target", "b")]) == Some(1.0)
    })
    .await;
    let m = metrics(addr).await;
    assert_eq!(m.val("lockwatch_up", &[("target", "a")]), 1.0, "still running");
    assert_eq!(m.val("lockwatch_config_last_reload_successful", &[]), 1.0);
}

/// A changed log source restarts from its saved offsets: nothing read twice, its counts
/// continued, not added again from the saved state.
#[tokio::test]
async fn a_changed_log_source_restarts_from_its_offsets_without_counting_twice() {
    let r = redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, &(0..5).map(|i| event(i) + &ordinary(i)).collect::<String>());
    let state = format!("[state]\ndir = \"{}\"\n", dir.path().join("state").display());
    let path = write_config(dir.path(), &[("a", r.url(), "1s")], "");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}{state}")).unwrap();
    let run = start(&path, true).await;
    wait_for(run.addr, "5 events", |m| not_owned(m, "workflow") == 5.0).await;
    tokio::time::sleep(Duration::from_millis(1200)).await; // offsets saved
    std::fs::write(
        &path,
        format!(
            "{}{state}",
            text.replace("start_at = \"beginning\"", "start_at = \"end\"")
        ),
    )
    .unwrap();
    assert_eq!(post_reload(run.addr).await.0, 200);
    append(&log, &(5..7).map(|i| event(i) + &ordinary(i)).collect::<String>());
    let m = wait_for(run.addr, "7 events", |m| not_owned(m, "workflow") >= 7.0).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m2 = metrics(run.addr).await;
    assert_eq!((not_owned(&m, "workflow"), not_owned(&m2, "workflow")), (7.0, 7.0));
    assert_eq!(lines_of(&m2, "app"), (7.0, 7.0, 0.0));
}

/// Namespaces `alpha` (`a:lock:*`) and `beta` (`beta_pattern`) on target `t` at `url`.
fn write_two_namespaces(dir: &Path, url: &str, beta_pattern: &str) -> PathBuf {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\
         [[target]]\nname = \"t\"\nurl = \"{url}\"\nsample_interval = \"200ms\"\n\
         [[namespace]]\nname = \"alpha\"\npattern = \"a:lock:*\"\nttl = \"30s\"\n\
         [[namespace]]\nname = \"beta\"\npattern = \"{beta_pattern}\"\nttl = \"30s\"\n"
    );
    let path = dir.join("lockwatch.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A reload that changes only namespace `beta` keeps `alpha`'s table: its held count stays
/// exact throughout and its locks' ages go on growing (their PTTL, above the namespace's
/// ttl, does not tell when they were taken: a new table would start them at 0); `beta`
/// restarts on its new pattern. In events mode (`notify`) and in scan mode.
async fn a_namespace_change_keeps_the_others_tables(notify: bool) {
    let r = redis(if notify { &NOTIFY } else { &[] });
    let mut c = conn(&r);
    for key in ["a:lock:1", "a:lock:2", "b:lock:1", "b:lock:2", "c:lock:1"] {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("me")
            .arg("PX")
            .arg(300_000)
            .query(&mut c)
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write_two_namespaces(dir.path(), &r.url(), "b:lock:*");
    let run = start(&path, true).await;
    let ns = |n: &'static str| [("target", "t"), ("namespace", n)];
    let held = |m: &Metrics, n| m.get("lockwatch_locks_held", &ns(n));
    let age = |m: &Metrics, n| m.val("lockwatch_lock_held_max_seconds", &ns(n));
    let mode = if notify { "events" } else { "scan" };
    let in_mode = |m: &Metrics| m.get("lockwatch_tracking_mode", &[("target", "t"), ("mode", mode)]) == Some(1.0);
    wait_for(run.addr, "both namespaces' locks", |m| {
        in_mode(m) && held(m, "alpha") == Some(2.0) && held(m, "beta") == Some(2.0)
    })
    .await;
    // In events mode, a key's lifecycle as the watcher saw it (its page and `inspect`).
    let history = |addr| async move {
        let (status, _, body) = http_get(addr, "/api/v1/locks/history?key=a:lock:h").await;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["kind"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    if notify {
        take_and_release(&mut c, "a:lock:h");
        let started = Instant::now();
        while history(run.addr).await.len() < 2 {
            assert!(
                started.elapsed() < WAIT,
                "a:lock:h's history: {:?}",
                history(run.addr).await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let before = age(&metrics(run.addr).await, "alpha");
    assert!(before >= 2.0, "{before}");
    let history_before = history(run.addr).await;
    let acquired_alpha = |m: &Metrics| {
        m.val(
            "lockwatch_lock_transitions_total",
            &[("target", "t"), ("namespace", "alpha"), ("kind", "acquired")],
        )
    };
    let acquired_before = acquired_alpha(&metrics(run.addr).await);
    let subscriber = subscribers(&r);
    assert_eq!(subscriber.len(), 1, "the watcher's one pub/sub connection");
    // Alpha's locks come and go while the reload happens: every one is counted.
    const CHURN: usize = 300;
    let churn = notify.then(|| {
        let url = r.url();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
            for i in 0..CHURN {
                take_and_release(&mut c, &format!("a:lock:c{i}"));
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    write_two_namespaces(dir.path(), &r.url(), "c:lock:*");
    assert_eq!(post_reload(run.addr).await.0, 200);
    assert_eq!(
        history(run.addr).await,
        history_before,
        "a:lock:h's history is kept across the reload"
    );
    // Its locks held for a moment only: done before alpha's held count is watched below.
    if let Some(churn) = churn {
        churn.join().unwrap();
    }
    if notify {
        counted_exactly(run.addr, acquired_before + CHURN as f64, acquired_alpha).await;
    }
    assert_eq!(
        subscribers(&r),
        subscriber,
        "the watcher's subscription stays the same connection, beta's channel changed on it"
    );
    let (mut last, started) = (before, Instant::now());
    let mut beta_restarted = None;
    while started.elapsed() < Duration::from_secs(4) {
        let m = metrics(run.addr).await;
        assert_eq!(held(&m, "alpha"), Some(2.0), "alpha's count stays exact:\n{}", m.0);
        let now = age(&m, "alpha");
        assert!(now >= last, "alpha's lock age went back from {last} to {now}:\n{}", m.0);
        last = now;
        // Beta's age when its new table is first seen, in whatever mode: events mode waits for
        // the new subscription's verification, which a loaded machine can stretch.
        if beta_restarted.is_none() && held(&m, "beta") == Some(1.0) {
            beta_restarted = Some(age(&m, "beta"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let beta = beta_restarted.expect("beta's series follow its new pattern");
    assert!(
        beta < 1.5,
        "beta's table started anew: its lock first seen now ({beta})"
    );
    let m = metrics(run.addr).await;
    assert!(in_mode(&m), "{}", m.0);
    assert!(
        age(&m, "alpha") >= before + 3.5,
        "alpha's ages went on: {before} → {}",
        age(&m, "alpha")
    );
    // The carried table follows what happens next.
    let _: () = redis::cmd("DEL").arg("a:lock:2").query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("a:lock:3")
        .arg("me")
        .arg("PX")
        .arg(20_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("a:lock:4")
        .arg("me")
        .arg("PX")
        .arg(20_000)
        .query(&mut c)
        .unwrap();
    let m = wait_for(run.addr, "alpha's new locks", |m| held(m, "alpha") == Some(3.0)).await;
    assert!(age(&m, "alpha") >= before + 3.5, "{}", m.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_change_keeps_the_other_namespaces_tables_in_events_mode() {
    a_namespace_change_keeps_the_others_tables(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_change_keeps_the_other_namespaces_tables_in_scan_mode() {
    a_namespace_change_keeps_the_others_tables(false).await;
}

/// On a cluster (3 primaries, a subscription on each), a namespace change is made on every
/// primary's live connection: the unchanged namespace's lock events, on keys of every
/// slot, are each counted once across the reload, and the watcher's connections stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_a_namespace_change_keeps_every_primary_s_subscription() {
    let cluster = common::topo::Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwatch.toml");
    let write = |beta: &str| {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{}\"]\nsample_interval = \"1s\"\n\
             notifications = \"configure\"\n\
             [[namespace]]\nname = \"alpha\"\npattern = \"a:lock:*\"\nttl = \"30s\"\n\
             [[namespace]]\nname = \"beta\"\npattern = \"{beta}\"\nttl = \"30s\"\n",
            cluster.seed()
        );
        std::fs::write(&path, text).unwrap();
    };
    write("b:lock:*");
    let run = start(&path, true).await;
    wait_for(run.addr, "events mode on the cluster", |m| {
        m.get("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == Some(1.0)
    })
    .await;
    let primaries = cluster.primaries();
    let watchers = || primaries.iter().map(|p| subscribers_at(*p)).collect::<Vec<_>>();
    let before = watchers();
    assert!(
        before.iter().all(|s| s.len() == 1),
        "one subscription per primary: {before:?}"
    );
    let acquired = |m: &Metrics| {
        m.val(
            "lockwatch_lock_transitions_total",
            &[("target", "c"), ("namespace", "alpha"), ("kind", "acquired")],
        )
    };
    let acquired_before = acquired(&metrics(run.addr).await);
    const CHURN: usize = 300;
    let mut c = cluster.client();
    let churn = std::thread::spawn(move || {
        for i in 0..CHURN {
            take_and_release(&mut c, &format!("a:lock:{i}"));
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    write("c:lock:*");
    assert_eq!(post_reload(run.addr).await.0, 200);
    churn.join().unwrap();
    counted_exactly(run.addr, acquired_before + CHURN as f64, acquired).await;
    assert_eq!(
        watchers(),
        before,
        "every primary's subscription is the same connection"
    );
}
