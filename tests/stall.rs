//! A stalled holder among other lock traffic, against a real redis-server: in each namespace a
//! real holder process (acquire `PX 30000`, renew with `PEXPIRE 30000`) is SIGSTOPped right
//! after a renewal, beside other locks held with an hour's TTL and one of them released and
//! taken again every second or every 100 ms, with a TTL of an hour or of 20 s (and a holder
//! that acquires with an hour and renews with 30 s), and 100,000 cache keys in the same
//! database. In events mode and in scan mode, the holder must be
//! flagged overdue — the gauge, the status page's stall line and the lock's page — within
//! `renew_every` + grace of its last renewal (15 s: the sample interval later at most in scan
//! mode), never before. Beside the same traffic, the figures derived per lock from the
//! holder's renewals (headroom, near misses, renewal intervals, held-for, advise's cadence)
//! are its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Served, config, conn, redis};
use lockwatch::access::child::RedisChild;
use redis::Commands;

const NOTIFY: [&str; 2] = ["--notify-keyspace-events", "KEA"];
const HOUR_MS: u64 = 3_600_000;

/// One namespace's traffic beside its holder: locks held untouched, and one of them released
/// and taken again every `period_ms` with `ttl_ms`.
struct Traffic {
    ns: &'static str,
    held: usize,
    period_ms: u64,
    ttl_ms: u64,
    /// The holder's acquisition TTL (its renewals set 30 s).
    acquire_px: u64,
}

const TRAFFIC: [Traffic; 6] = [
    Traffic {
        ns: "alone",
        held: 0,
        period_ms: 0,
        ttl_ms: 0,
        acquire_px: 30_000,
    },
    Traffic {
        ns: "hour_1s",
        held: 20,
        period_ms: 1_000,
        ttl_ms: HOUR_MS,
        acquire_px: 30_000,
    },
    Traffic {
        ns: "hour_100ms",
        held: 2_000,
        period_ms: 100,
        ttl_ms: HOUR_MS,
        acquire_px: 30_000,
    },
    Traffic {
        ns: "short_1s",
        held: 20,
        period_ms: 1_000,
        ttl_ms: 20_000,
        acquire_px: 30_000,
    },
    Traffic {
        ns: "short_100ms",
        held: 2_000,
        period_ms: 100,
        ttl_ms: 20_000,
        acquire_px: 30_000,
    },
    // A holder that acquires with an hour and renews with 30 s, beside locks of an hour.
    Traffic {
        ns: "renews_shorter",
        held: 20,
        period_ms: 100,
        ttl_ms: HOUR_MS,
        acquire_px: HOUR_MS,
    },
];

/// The namespaces' config: ttl 30 s, renew every 10 s (grace 5 s: overdue below 15 s left).
fn toml(target_extra: &str) -> String {
    let mut t =
        format!("[server]\nlisten = \"127.0.0.1:0\"\n[[target]]\nname = \"main\"\nurl = \"{{url}}\"\n{target_extra}\n");
    for tr in &TRAFFIC {
        t += &format!(
            "[[namespace]]\nname = \"{0}\"\npattern = \"{0}:lock:*\"\nttl = \"30s\"\nrenew_every = \"10s\"\n",
            tr.ns
        );
    }
    t
}

/// Overdue below this much left: ttl - renew_every - grace.
const MARK_MS: i64 = 15_000;

/// The untouched locks of every namespace and 100,000 cache keys, pipelined.
fn fill(r: &RedisChild) {
    let mut c = conn(r);
    let mut p = redis::pipe();
    for tr in &TRAFFIC {
        for i in 0..tr.held {
            p.cmd("SET")
                .arg(format!("{}:lock:other:{i}", tr.ns))
                .arg(format!("tok-{i}"))
                .arg("PX")
                .arg(HOUR_MS)
                .ignore();
        }
    }
    let _: () = p.query(&mut c).unwrap();
    for chunk in 0..10 {
        let mut p = redis::pipe();
        for i in 0..10_000 {
            p.cmd("SET").arg(format!("cache:{chunk}:{i}")).arg("v").ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
}

/// The churn: in each namespace with traffic, lock `other:0` released and taken again (by a
/// new owner) every period, until `stop`.
fn churn(r: &RedisChild, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    TRAFFIC
        .iter()
        .filter(|tr| tr.period_ms > 0)
        .map(|tr| {
            let (mut c, stop) = (conn(r), stop.clone());
            let (key, period, ttl) = (format!("{}:lock:other:0", tr.ns), tr.period_ms, tr.ttl_ms);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _: i64 = c.del(&key).unwrap();
                    let set: Option<String> = redis::cmd("SET")
                        .arg(&key)
                        .arg(format!("churn-{n}"))
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query(&mut c)
                        .unwrap();
                    assert!(set.is_some(), "{key} taken back");
                    n += 1;
                    std::thread::sleep(Duration::from_millis(period));
                }
                n
            })
        })
        .collect()
}

/// A real holder process of `key`: acquires with PX `px`, renews with PEXPIRE 30000 every
/// 700 ms (its own process group, so a SIGSTOP stops the loop and any redis-cli it runs).
fn holder(r: &RedisChild, key: &str, px: u64) -> std::process::Child {
    let cli = std::env::var("LOCKWATCH_REDIS_CLI").unwrap_or_else(|_| "redis-cli".into());
    let script = format!(
        r#"{cli} -p {port} SET {key} holder NX PX {px} >/dev/null
while true; do
  sleep 0.7
  {cli} -p {port} PEXPIRE {key} 30000 >/dev/null
done"#,
        port = r.port(),
    );
    std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// The holders, killed (and woken, so they go) however the test ends.
struct Holders(Vec<(String, std::process::Child)>);

impl Drop for Holders {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            signal(child, nix::sys::signal::Signal::SIGKILL);
            signal(child, nix::sys::signal::Signal::SIGCONT);
            let _ = child.wait();
        }
    }
}

fn signal(child: &std::process::Child, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), sig);
}

/// What the exporter shows of namespace `ns` and its holder's `key` now: the gauge, the
/// status API's count and stall line, the lock's page, the locks API.
async fn shown(s: &Served, ns: &str, key: &str) -> (f64, i64, bool, bool, bool) {
    let gauge = s
        .metrics()
        .await
        .get(
            "lockwatch_locks_renewal_overdue",
            &[("target", "main"), ("namespace", ns)],
        )
        .unwrap_or(-1.0);
    let (_, _, status) = s.get("/api/v1/status").await;
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    let row = v["targets"][0]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == ns)
        .cloned()
        .unwrap();
    let line = v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["namespace"] == ns)
        .map(|l| l["parts"].to_string())
        .unwrap_or_default();
    let (_, _, page) = s.get(&format!("/locks/{ns}?key={key}")).await;
    let (_, _, api) = s.get(&format!("/api/v1/locks?namespace={ns}&limit=1")).await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let first = &api["locks"][0];
    (
        gauge,
        row["overdue"].as_i64().unwrap(),
        line.contains("1 renewal overdue"),
        page.contains(r#"<span class="bad">overdue</span>"#),
        first["key"] == key && first["overdue"] == true,
    )
}

/// Each namespace's holder stopped right after a renewal; flagged overdue within `late_ms` of
/// its mark (15 s after that renewal), never before, everywhere the exporter shows it.
async fn stalled_holders_are_flagged(mode: &str, target_extra: &str, late_ms: u128) {
    let r = redis(&NOTIFY);
    let s = Served::start(config(&r, &toml(target_extra))).await;
    s.wait_for(Duration::from_secs(20), &format!("{mode} mode"), |m| {
        m.get("lockwatch_tracking_mode", &[("target", "main"), ("mode", mode)]) == Some(1.0)
    })
    .await;
    // Written once the mode is reached: locks already there would be taken in by the
    // reconciling walk, paced at 2,000 keys/s over the cache keys too.
    fill(&r);
    let stop = Arc::new(AtomicBool::new(false));
    let churners = churn(&r, stop.clone());
    let holders = Holders(
        TRAFFIC
            .iter()
            .map(|tr| {
                let key = format!("{}:lock:stalled", tr.ns);
                let child = holder(&r, &key, tr.acquire_px);
                (key, child)
            })
            .collect(),
    );
    s.wait_for(Duration::from_secs(20), "every lock held", |m| {
        TRAFFIC.iter().all(|tr| {
            m.get("lockwatch_locks_held", &[("target", "main"), ("namespace", tr.ns)]) == Some((tr.held + 1) as f64)
        })
    })
    .await;
    // Let them renew a while (in events mode, their renewals are estimated from then on).
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Each holder stopped just after a renewal; its mark from the TTL left.
    let mut admin = conn(&r);
    let mut marks = Vec::new();
    for (key, child) in &holders.0 {
        let mut before: i64 = admin.pttl(key).unwrap();
        let started = Instant::now();
        loop {
            let p: i64 = admin.pttl(key).unwrap();
            if p > before {
                break;
            }
            before = p;
            assert!(started.elapsed() < Duration::from_secs(3), "{key} not renewed");
            std::thread::sleep(Duration::from_millis(2));
        }
        signal(child, nix::sys::signal::Signal::SIGSTOP);
        let read_at = Instant::now();
        let pttl: i64 = admin.pttl(key).unwrap();
        assert!(pttl > 29_000, "{key} stopped with {pttl} ms left");
        marks.push(read_at + Duration::from_millis((pttl - MARK_MS) as u64));
    }
    let mut flagged: Vec<Option<(Instant, i64)>> = vec![None; holders.0.len()];
    let deadline = *marks.iter().max().unwrap() + Duration::from_millis(late_ms as u64 + 2_000);
    while Instant::now() < deadline && flagged.iter().any(Option::is_none) {
        for (i, tr) in TRAFFIC.iter().enumerate() {
            if flagged[i].is_some() {
                continue;
            }
            let asked = Instant::now();
            let key = &holders.0[i].0;
            let (gauge, row, line, page, api) = shown(&s, tr.ns, key).await;
            if gauge > 0.0 {
                let left: i64 = admin.pttl(key).unwrap();
                assert!(
                    gauge == 1.0 && row == 1 && line && page && api,
                    "{mode}, {}: the gauge says {gauge}; status row {row}, stall line {line}, \
                     the lock's page {page}, the locks API {api}",
                    tr.ns
                );
                flagged[i] = Some((asked, left));
            } else if asked + Duration::from_millis(200) < marks[i] {
                assert!(
                    row == 0 && !line && !page && !api,
                    "{mode}, {}: shown overdue before its mark",
                    tr.ns
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    drop(holders);
    let churned: Vec<u64> = churners.into_iter().map(|h| h.join().unwrap()).collect();
    let mut report = Vec::new();
    for (i, tr) in TRAFFIC.iter().enumerate() {
        let (at, left) = flagged[i].unwrap_or_else(|| panic!("{mode}, {}: never flagged overdue", tr.ns));
        let late = at.saturating_duration_since(marks[i]).as_millis();
        let early = marks[i].saturating_duration_since(at).as_millis();
        report.push(format!(
            "{}: {late} ms after the mark, {early} ms before it, {left} ms left",
            tr.ns
        ));
        assert!(early <= 50, "{mode}, {}: flagged {early} ms before its mark", tr.ns);
        assert!(late <= late_ms, "{mode}, {}: flagged {late} ms after its mark", tr.ns);
        assert!(left >= 10_000, "{mode}, {}: flagged with {left} ms left", tr.ns);
    }
    eprintln!("{mode}: {}; churned {churned:?}", report.join("; "));
    assert!(
        churned.iter().all(|n| *n >= 15),
        "the churn ran throughout: {churned:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_holder_is_flagged_among_other_lock_traffic_in_events_mode() {
    // A scrape takes the census of its moment: flagged at the mark.
    stalled_holders_are_flagged("events", "sample_interval = \"5s\"", 400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_holder_is_flagged_among_other_lock_traffic_in_scan_mode() {
    // The first pass after the mark flags it: within a sample interval (2 s) and its walk.
    stalled_holders_are_flagged("scan", "sample_interval = \"2s\"\nnotifications = \"off\"", 3_000).await;
}

const DERIVED: &str = r#"
[server]
listen = "127.0.0.1:0"
[[target]]
name = "main"
url = "{url}"
sample_interval = "5s"
[[namespace]]
name = "jobs"
pattern = "jobs:lock:*"
ttl = "2s"
renew_every = "500ms"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holders_headroom_intervals_and_hold_are_its_own_among_other_lock_traffic() {
    let r = redis(&NOTIFY);
    let s = Served::start(config(&r, DERIVED)).await;
    s.wait_for(Duration::from_secs(20), "events mode", |m| {
        m.get("lockwatch_tracking_mode", &[("target", "main"), ("mode", "events")]) == Some(1.0)
    })
    .await;
    // Beside the holder: 20 locks held with an hour's TTL, one of them released and taken
    // again every 100 ms.
    let mut c = conn(&r);
    for i in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(format!("jobs:lock:other:{i}"))
            .arg("o")
            .arg("PX")
            .arg(HOUR_MS)
            .query(&mut c)
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churner = {
        let (mut c, stop) = (conn(&r), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _: i64 = c.del("jobs:lock:other:0").unwrap();
                let _: () = redis::cmd("SET")
                    .arg("jobs:lock:other:0")
                    .arg(format!("churn-{n}"))
                    .arg("NX")
                    .arg("PX")
                    .arg(HOUR_MS)
                    .query(&mut c)
                    .unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The holder: acquires with 2 s, renews every 300 ms six times (1.7 s left each: from the
    // fourth on its renewals are estimated, not read), then 1.8 s late (0.2 s left: a near
    // miss), and releases 100 ms later (1.9 s left).
    let mut h = conn(&r);
    let key = "jobs:lock:holder";
    let acquired = Instant::now();
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg("H")
        .arg("NX")
        .arg("PX")
        .arg(2000)
        .query(&mut h)
        .unwrap();
    assert!(set.is_some());
    let mut intervals = vec![0.3; 6];
    intervals.push(1.8);
    for wait in &intervals {
        tokio::time::sleep(Duration::from_secs_f64(*wait)).await;
        let renewed: bool = h.pexpire(key, 2000).unwrap();
        assert!(renewed);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Held for as long as it was, whatever the other lock's handoffs.
    let (_, _, api) = s.get("/api/v1/locks?namespace=jobs&limit=100").await;
    let held_s = acquired.elapsed().as_secs_f64();
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let lock = api["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == key)
        .cloned()
        .unwrap();
    let age = lock["age_s"].as_f64().unwrap();
    assert!(
        (age - held_s).abs() < 0.3,
        "held for {age} s on the locks API; {held_s} s really"
    );
    assert!(lock["pttl_ms"].as_i64().unwrap() <= 2_000, "its own TTL: {lock}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let released: i64 = h.del(key).unwrap();
    assert_eq!(released, 1);
    stop.store(true, Ordering::Relaxed);
    let churned = churner.join().unwrap();
    assert!(churned >= 30, "the churn ran throughout: {churned}");
    s.wait_for(Duration::from_secs(5), "7 renewals", |m| {
        m.get(
            "lockwatch_lock_transitions_total",
            &[("namespace", "jobs"), ("kind", "renewed")],
        ) == Some(7.0)
    })
    .await;
    let m = s.metrics().await;
    let renewal = [("namespace", "jobs"), ("at", "renewal")];
    let got = common::buckets(&m, "lockwatch_lock_ttl_headroom_seconds", &renewal);
    let mut headroom = vec![1.7; 6];
    headroom.push(0.2);
    assert_eq!(got, common::expected_buckets(&got, &headroom), "headroom at renewal");
    assert_eq!(m.val("lockwatch_lock_near_misses_total", &renewal), 1.0, "near misses");
    let got = common::buckets(&m, "lockwatch_lock_renewal_interval_seconds", &[("namespace", "jobs")]);
    assert_eq!(got, common::expected_buckets(&got, &intervals), "renewal intervals");
    // advise reads the same: seven renewals, a usual interval of 300 ms, one near miss.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwatch.toml");
    std::fs::write(&path, DERIVED.replace("{url}", &r.url())).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args(["advise", "-c"])
        .arg(&path)
        .args([
            "--exporter",
            &format!("http://{}", s.addr),
            "--format",
            "json",
            "--namespace",
            "jobs",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let seen = &v["namespaces"][0]["seen"];
    eprintln!("advise saw: {seen}");
    assert_eq!(seen["near_misses"], 1.0, "{seen}");
    assert_eq!(seen["renewal_interval"]["count"], 7.0, "{seen}");
    let p50 = seen["renewal_interval"]["p50"].as_f64().unwrap();
    assert!((0.2..=0.5).contains(&p50), "usual renewal interval {p50} s: {seen}");
    s.stop().await;
}
