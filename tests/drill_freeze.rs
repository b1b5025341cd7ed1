//! `lockwatch drill --freeze` on real applications: two payout workers on a real lock
//! library (`tests/workers/`, `common::freeze`) contend for `lock:payout:batch-7`; the drill
//! freezes the one that holds it — by `pid:`, through a cgroup v2 and a cgroup v1 freezer made
//! here, or by `--freeze-cmd` — while the exporter (in this process) watches the key and tails
//! their JSON logs. Each verdict must match the behaviour, and Redis's own record of the
//! payouts: python-redis-lock (its renewal thread), redis-py `Lock` (an extend loop) and node
//! redlock (`using`, automatic extension) that raise on the lost lock are **safe**; a worker
//! that swallows the loss **carries on silently** (and pays twice); one that releases with a
//! plain `DEL` **deletes the new owner's lock**; freezing the worker that waits is **not
//! exercised**. The text records go to `target/test-artifacts/freeze-*.txt`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::Served;
use common::drill::text;
use common::freeze::{Cgroup, KEY, Lib, Workers};
use lockwatch::access::child::RedisChild;
use tokio::task::block_in_place;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const TTL: f64 = 2.0;
const WAIT: Duration = Duration::from_secs(20);

/// How the drill freezes the holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Pid,
    CgroupV2,
    CgroupV1,
    Commands,
}

/// One case: the library and behaviour, how it is frozen, the job's length, how far into a
/// job the holder is frozen, and `--for`; with `new_owner`, the other worker's behaviour
/// (started once the frozen one holds the lock), `worker_args` for both, and `--observe`.
struct Case {
    name: &'static str,
    lib: Lib,
    behavior: &'static str,
    how: How,
    job: f64,
    freeze_at: f64,
    hold: &'static str,
    new_owner: Option<&'static str>,
    worker_args: &'static [&'static str],
    observe: &'static str,
}

/// Other traffic in the namespace while the drill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Traffic {
    Quiet,
    /// Locks of other keys taken and left to expire, and their refused releases logged.
    OtherKeys,
    /// Besides, refused releases of the worker's own key logged by another process (its pid
    /// on each line, from a file of its own).
    SameKey,
}

/// Other traffic in the namespace while the drill runs: locks of other keys taken every
/// 250 ms from a connection of the test's and left to expire (some while the worker is
/// frozen), and refused releases of those keys logged as JSON with the key.
struct Noise {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Noise {
    fn start(url: &str, dir: &Path, same_key: bool) -> Noise {
        use std::io::Write;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let mut log = std::fs::File::create(dir.join("noise.log")).unwrap();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut i = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let key = format!("lock:payout:noise-{}", i % 5);
                let _: Option<String> = redis::cmd("SET")
                    .arg(&key)
                    .arg(format!("noise-{i}"))
                    .arg("NX")
                    .arg("PX")
                    .arg(1200)
                    .query(&mut conn)
                    .unwrap();
                if i.is_multiple_of(4) {
                    writeln!(
                        log,
                        r#"{{"level":"error","message":"lock release failed: LockNotOwnedError: Cannot release a lock that's no longer owned","key":"{key}"}}"#
                    )
                    .unwrap();
                }
                if same_key && i.is_multiple_of(2) {
                    writeln!(
                        log,
                        r#"{{"level":"error","pid":{},"message":"lock release failed: LockNotOwnedError: Cannot release a lock that's no longer owned","key":"{KEY}"}}"#,
                        std::process::id()
                    )
                    .unwrap();
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Noise {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a drill run left to check.
struct Ran {
    _noise: Option<Noise>,
    _r: RedisChild,
    _dir: tempfile::TempDir,
    conn: redis::Connection,
    workers: Workers,
    victim: i32,
    lost_job: usize,
    out: Output,
    report: serde_json::Value,
    /// The exporter's scrape after the drill ended.
    recorded: common::Metrics,
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_config(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("lockwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[[target]]\nname = \"staging\"\nurl = \"{url}\"\nsample_interval = \"250ms\"\n\
             [[namespace]]\nname = \"payout\"\npattern = \"lock:payout:*\"\nttl = \"2s\"\n\
             [[logs]]\nname = \"payout\"\npath = \"{}/*.log\"\nstart_at = \"beginning\"\n",
            dir.display()
        ),
    )
    .unwrap();
    path
}

/// The two workers, the exporter, the holder frozen `freeze_at` into a job by the drill;
/// the drill's JSON report once it ended.
async fn run(case: &Case, freeze_the_waiter: bool) -> Ran {
    run_with(case, freeze_the_waiter, Traffic::Quiet).await
}

/// [`run`], with `traffic` in the namespace.
async fn run_with(case: &Case, freeze_the_waiter: bool, traffic: Traffic) -> Ran {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url());
    let s = Served::start(lockwatch::config::Config::load(&config, &Default::default()).unwrap()).await;
    s.wait_for(Duration::from_secs(5), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
    })
    .await;
    let exporter = format!("http://{}", s.addr);
    let noise = (traffic != Traffic::Quiet).then(|| Noise::start(&r.url(), dir.path(), traffic == Traffic::SameKey));
    let (workers, (holder, acquired)) = match case.new_owner {
        None => {
            let w = Workers::start(case.lib, case.behavior, &r.url(), dir.path(), TTL, case.job);
            let next = block_in_place(|| w.next_holder(WAIT));
            (w, next)
        }
        Some(other) => {
            let w = block_in_place(|| {
                Workers::start_mixed(
                    case.lib,
                    [case.behavior, other],
                    case.worker_args,
                    &r.url(),
                    dir.path(),
                    TTL,
                    case.job,
                )
            });
            let first = w.pids()[0];
            let at = w.events(first)[0].at;
            (w, (first, at))
        }
    };
    let victim = if freeze_the_waiter {
        workers.other(holder)
    } else {
        holder
    };
    // The drill watches one renewal period (1 s here) before it freezes.
    let start = acquired + Duration::from_secs_f64(case.freeze_at) - Duration::from_secs(1);
    tokio::time::sleep(start.saturating_duration_since(Instant::now())).await;
    let lost_job = workers.jobs(victim);
    let cgroup = match case.how {
        How::CgroupV2 => Some(Cgroup::v2(victim)),
        How::CgroupV1 => Some(Cgroup::v1(victim)),
        How::Pid | How::Commands => None,
    };
    let mut args: Vec<String> = vec!["--namespace".into(), "payout".into()];
    match (case.how, &cgroup) {
        (How::Commands, _) => args.extend([
            "--freeze-cmd".into(),
            format!("kill -STOP {victim}"),
            "--thaw-cmd".into(),
            format!("kill -CONT {victim}"),
        ]),
        (_, Some(cg)) => args.extend(["--freeze".into(), format!("cgroup:{}", cg.path().display())]),
        (_, None) => args.extend(["--freeze".into(), format!("pid:{victim}")]),
    }
    args.extend([
        "--exporter".into(),
        exporter,
        "--yes".into(),
        "--format".into(),
        "json".into(),
    ]);
    if !case.hold.is_empty() {
        args.extend(["--for".into(), case.hold.into()]);
    }
    if !case.observe.is_empty() {
        args.extend(["--observe".into(), case.observe.into()]);
    }
    // The incident's record is the HTML page, looked at in Chromium; the others' are text.
    let ext = if case.name == "incident" { "html" } else { "txt" };
    let record = artifacts().join(format!("freeze-{}.{ext}", case.name));
    args.extend(["--report".into(), record.display().to_string()]);
    let out = tokio::process::Command::new(BIN)
        .arg("drill")
        .arg("-c")
        .arg(&config)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    drop(cgroup);
    // What the drill recorded at the exporter, seen before it stops.
    let recorded = s.metrics().await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no JSON report ({e})\nstdout: {}\nstderr: {}\n{}",
            case.name,
            text(&out.stdout),
            text(&out.stderr),
            workers.report()
        )
    });
    Ran {
        _noise: noise,
        conn: common::conn(&r),
        _r: r,
        _dir: dir,
        workers,
        victim,
        lost_job,
        out,
        report,
        recorded,
    }
}

impl Ran {
    /// The overall verdict, the one lock's verdict and finding, and the exit code; on a
    /// mismatch the report, the drill's stderr and what the workers did.
    fn assert(&self, verdict: &str, finding: &str, code: i32) {
        let why = || {
            format!(
                "{}\nstderr: {}\n{}",
                serde_json::to_string_pretty(&self.report).unwrap(),
                text(&self.out.stderr),
                self.workers.report()
            )
        };
        assert_eq!(self.report["verdict"], verdict, "{}", why());
        let locks = self.report["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 1, "{}", why());
        assert_eq!(locks[0]["key"], KEY, "{}", why());
        assert_eq!(locks[0]["finding"], finding, "{}", why());
        assert_eq!(self.out.status.code(), Some(code), "{}", why());
        assert!(self.report["timeline"].as_array().unwrap().len() >= 5, "{}", why());
        self.assert_recorded(verdict);
    }

    /// The exporter holds the drill's result: `verdict` the latest of the state set, one
    /// run counted, the worst lock's exposure.
    fn assert_recorded(&self, verdict: &str) {
        let drill = [("target", "staging"), ("namespace", "payout"), ("drill", "payout")];
        for v in ["safe", "unsafe", "not_exercised", "interrupted"] {
            let l = [drill[0], drill[1], drill[2], ("verdict", v)];
            let want = if v == verdict { 1.0 } else { 0.0 };
            assert_eq!(
                self.recorded.get("lockwatch_drill_verdict", &l),
                Some(want),
                "{v}: {}",
                self.recorded.0
            );
            assert_eq!(self.recorded.get("lockwatch_drill_runs_total", &l), Some(want), "{v}");
        }
        let worst = self.report["locks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["exposure_ms"].as_f64())
            .fold(0.0, f64::max);
        assert_eq!(
            self.recorded.get("lockwatch_drill_exposure_seconds", &drill),
            Some(worst / 1000.0)
        );
        assert!(
            text(&self.out.stderr).contains("recorded: http://"),
            "{}",
            text(&self.out.stderr)
        );
    }

    /// Whether the job the frozen worker was doing got paid.
    fn lost_job_paid(&mut self) -> bool {
        let entry = format!("{}:{}", self.workers.name(self.victim), self.lost_job);
        block_in_place(|| {
            // The woken worker finishes (or gives up) its job within a few seconds.
            std::thread::sleep(Duration::from_secs(2));
            self.workers.payouts(&mut self.conn).contains(&entry)
        })
    }
}

const SAFE: &str = "stopped";

fn case(name: &'static str, lib: Lib, behavior: &'static str, how: How) -> Case {
    Case {
        name,
        lib,
        behavior,
        how,
        job: 4.0,
        freeze_at: 1.5,
        hold: "6s",
        new_owner: None,
        worker_args: &[],
        observe: "",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_redis_lock_that_raises_is_safe() {
    let mut r = run(
        &case("python-redis-lock-raise", Lib::PythonRedisLock, "raise", How::Pid),
        false,
    )
    .await;
    r.assert("safe", SAFE, 0);
    let lock = &r.report["locks"][0];
    assert!(lock["refusals"].as_array().unwrap().len() >= 2, "{lock}");
    assert!(!r.lost_job_paid(), "{}", r.workers.report());
    // The witness told the worker's connection from /proc.
    let conns = r.report["witness"]["worker_connections"].as_array().unwrap();
    assert!(
        conns.iter().any(|c| c[1].as_str().unwrap().contains("/proc")),
        "{}",
        r.report["witness"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_lock_with_an_extend_loop_is_safe_with_the_default_duration() {
    let c = Case {
        hold: "",
        ..case("redis-py-raise", Lib::RedisPy, "raise", How::Pid)
    };
    let mut r = run(&c, false).await;
    assert_eq!(
        r.report["for_ms"], 5000,
        "the default --for: twice the 2 s ttl plus 1 s"
    );
    r.assert("safe", SAFE, 0);
    assert!(!r.lost_job_paid(), "{}", r.workers.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_using_that_raises_is_safe() {
    let mut r = run(&case("redlock-raise", Lib::NodeRedlock, "raise", How::Pid), false).await;
    r.assert("safe", SAFE, 0);
    assert!(!r.lost_job_paid(), "{}", r.workers.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_swallows_the_loss_carries_on_silently() {
    let mut r = run(&case("swallow", Lib::PythonRedisLock, "swallow", How::Pid), false).await;
    r.assert("unsafe", "carried_on_silently", 1);
    assert!(
        r.lost_job_paid(),
        "the drill said unsafe; the payout must show it\n{}",
        r.workers.report()
    );
    let text = std::fs::read_to_string(artifacts().join("freeze-swallow.txt")).unwrap();
    assert!(
        text.contains("unsafe: carried on silently") && text.contains("double payout"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_releases_with_a_plain_del_deletes_the_new_owners_lock() {
    // Frozen near the end of a long job: it deletes right after waking, inside the new
    // owner's hold.
    let c = Case {
        job: 8.0,
        freeze_at: 7.0,
        ..case("plain-del", Lib::PythonRedisLock, "plain-del", How::Pid)
    };
    let r = run(&c, false).await;
    r.assert("unsafe", "deleted_new_owners_lock", 1);
    let how = r.report["locks"][0]["deleted_how"].as_str().unwrap();
    assert!(how.contains("DEL sent by the woken worker's connection"), "{how}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_through_a_cgroup_v2_freezer() {
    let r = run(&case("cgroup-v2", Lib::PythonRedisLock, "raise", How::CgroupV2), false).await;
    r.assert("safe", SAFE, 0);
    assert_eq!(r.report["method"], "the cgroup v2 freezer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_through_a_cgroup_v1_freezer() {
    let r = run(&case("cgroup-v1", Lib::NodeRedlock, "raise", How::CgroupV1), false).await;
    r.assert("safe", SAFE, 0);
    assert_eq!(r.report["method"], "the cgroup v1 freezer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_by_commands() {
    let r = run(&case("commands", Lib::RedisPy, "raise", How::Commands), false).await;
    r.assert("safe", SAFE, 0);
    assert_eq!(r.report["frozen"], "cmd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freezing_the_worker_that_waits_is_not_exercised() {
    let r = run(&case("waiter", Lib::RedisPy, "raise", How::Pid), true).await;
    assert_eq!(r.report["verdict"], "not_exercised", "{}", r.report);
    assert!(r.report["locks"].as_array().unwrap().is_empty(), "{}", r.report);
    assert!(
        r.report["result"]
            .as_str()
            .unwrap()
            .contains("retry at a busier moment"),
        "{}",
        r.report
    );
    assert_eq!(r.out.status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_live_namespace_other_holders_locks_and_refusals_are_not_the_worker_s() {
    // The worker swallows its loss; others' refusals in the namespace must not make it safe,
    // and their locks expiring while it is frozen are not its.
    let mut r = run_with(
        &case("live-swallow", Lib::PythonRedisLock, "swallow", How::Pid),
        false,
        Traffic::OtherKeys,
    )
    .await;
    r.assert("unsafe", "carried_on_silently", 1);
    assert!(r.lost_job_paid(), "{}", r.workers.report());
    let notes: Vec<&str> = r.report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("lock:payout:noise-") && n.contains("another holder's")),
        "{notes:?}"
    );
    let counted = r.report["counted"].as_array().unwrap();
    assert!(
        !counted.is_empty(),
        "the noise's refusals were counted for the namespace: {}",
        r.report
    );
}

/// Python workers paying one item every 50 ms (`--items --step 0.05`): `w1` (frozen 1.5 s into
/// a 6 s job) with `behavior`, `w2` (the new owner) with `new_owner`.
fn paying(name: &'static str, behavior: &'static str, new_owner: &'static str) -> Case {
    Case {
        job: 6.0,
        new_owner: Some(new_owner),
        worker_args: &["--items", "--step", "0.05"],
        observe: "9s",
        ..case(name, Lib::PythonRedisLock, behavior, How::Pid)
    }
}

impl Ran {
    /// The items of the frozen worker's lost job that landed after the new owner's first
    /// item: paid while another worker held the lock.
    fn paid_twice(&mut self) -> Vec<String> {
        let (me, lost) = (self.workers.name(self.victim).to_string(), self.lost_job);
        let other = self.workers.name(self.workers.other(self.victim)).to_string();
        block_in_place(|| std::thread::sleep(Duration::from_secs(1)));
        let items = self.workers.items(&mut self.conn);
        let first_other = items.iter().position(|i| i.starts_with(&format!("{other}:")));
        let mine = format!("{me}:{lost}:");
        match first_other {
            None => vec![],
            Some(at) => items[at..].iter().filter(|i| i.starts_with(&mine)).cloned().collect(),
        }
    }

    /// The lock's report entry.
    fn lock(&self) -> &serde_json::Value {
        &self.report["locks"][0]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payout_incident_is_noticed_late_with_its_exposure() {
    // The renewal fails unnoticed, the batch runs to its end, and only the release's refusal
    // is logged, with the key: the refusal is the incident, not the safety.
    let mut r = run(&paying("incident", "late", "late"), false).await;
    r.assert("unsafe", "noticed_late", 1);
    let thawed = r.report["window"]["thawed_ms"].as_i64().unwrap();
    let refused = r.workers.events(r.victim);
    let refused = refused
        .iter()
        .find(|e| e.kind == "refused" && e.at_ms > thawed)
        .unwrap_or_else(|| panic!("the worker's release was not refused\n{}", r.workers.report()));
    let real = refused.at_ms - thawed;
    let exposure = r.lock()["exposure_ms"].as_i64().unwrap();
    assert!(
        (exposure - real).abs() <= 1000 && real > 3000,
        "exposure {exposure} ms, the worker's release refused {real} ms after the thaw\n{}",
        r.report
    );
    // The store shows what the verdict says: the lost job's items paid beside the new owner's.
    let twice = r.paid_twice();
    assert!(twice.len() > 20, "{twice:?}\n{}", r.workers.report());
    // Its HTML record, as Chromium renders it: self-contained, silent, the verdict and the
    // exposure said, the woken worker's exposure drawn as a span of harm; screenshots kept.
    let page = artifacts().join("freeze-incident.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for bad in ["<script", "<link", "<img", "@import", "url(", "src=\"", "href=\"http"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    let profile = tempfile::tempdir().unwrap();
    let rendered = common::headless::render(&page, profile.path());
    assert!(rendered.console.is_empty(), "console: {:?}", rendered.console);
    let dom = rendered.dom;
    assert!(
        dom.contains("class=\"verdict unsafe\"") && dom.contains("<dt>exposure</dt>"),
        "{dom}"
    );
    assert!(
        dom.contains("<rect class=\"span deviation\""),
        "the exposure drawn: {dom}"
    );
    assert!(dom.contains("<li class=\"lock finding deviation\""), "{dom}");
    for (suffix, size, dark) in [
        ("1280", (1280, 1800), false),
        ("1280-dark", (1280, 1800), true),
        ("390", (390, 3000), false),
    ] {
        let shot = artifacts().join(format!("freeze-report-incident-{suffix}.png"));
        let bytes = common::headless::screenshot(&page, profile.path(), &shot, size, dark);
        assert!(bytes > 20_000, "a screenshot of {bytes} bytes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_checks_the_lock_before_each_item_stopped() {
    let mut r = run(&paying("check", "check", "check"), false).await;
    r.assert("safe", "stopped", 0);
    let exposure = r.lock()["exposure_ms"].as_i64().unwrap();
    assert!(exposure < 2_000, "{}", r.report);
    assert!(r.paid_twice().len() <= 1, "{}", r.workers.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_writes_are_fenced_is_safe_and_nothing_stale_landed() {
    let mut r = run(&paying("fenced", "fenced", "fenced"), false).await;
    r.assert("safe", "fenced", 0);
    let exposure = r.lock()["exposure_ms"].as_i64().unwrap();
    assert!(exposure > 3_000, "it went on, refused: {}", r.report);
    // In the store: no item with a token below one already committed.
    block_in_place(|| std::thread::sleep(Duration::from_secs(1)));
    let items = r.workers.items(&mut r.conn);
    let tokens: Vec<i64> = items
        .iter()
        .map(|i| i.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(tokens.windows(2).all(|p| p[0] <= p[1]), "{items:?}");
    assert!(r.paid_twice().is_empty(), "{items:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_del_worker_writing_each_item_is_caught_and_the_new_owner_s_refusals_are_not_its() {
    // It deletes right after waking, among its per-item writes on the same connection; the new
    // owner, a careful worker, stops at once and logs its refusals with the key.
    let c = Case {
        job: 8.0,
        freeze_at: 7.0,
        ..paying("plain-del-items", "plain-del", "raise")
    };
    let r = run(&c, false).await;
    r.assert("unsafe", "deleted_new_owners_lock", 1);
    let lock = r.lock();
    let how = lock["deleted_how"].as_str().unwrap();
    assert!(how.contains("DEL sent by the woken worker's connection"), "{how}");
    assert!(lock["refusals"].as_array().unwrap().is_empty(), "{lock}");
    let others = lock["not_credited"].as_array().unwrap();
    assert!(
        !others.is_empty()
            && others
                .iter()
                .all(|o| o["whose"].as_str().unwrap().contains("not the worker's")),
        "{lock}"
    );
    // In the store: the new owner's key was deleted under it (it stopped its job unpaid).
    let new_owner = r.workers.other(r.victim);
    assert!(
        r.workers.events(new_owner).iter().any(|e| e.kind == "lost"),
        "{}",
        r.workers.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_of_the_same_key_logged_by_other_processes_are_not_credited() {
    let mut r = run_with(
        &case("same-key-swallow", Lib::PythonRedisLock, "swallow", How::Pid),
        false,
        Traffic::SameKey,
    )
    .await;
    r.assert("unsafe", "carried_on_silently", 1);
    assert!(r.lost_job_paid(), "{}", r.workers.report());
    let others = r.lock()["not_credited"].as_array().unwrap();
    assert!(
        others
            .iter()
            .any(|o| o["whose"].as_str().unwrap().contains("not the worker's")),
        "{}",
        r.report
    );
}
