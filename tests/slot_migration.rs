//! Atomic slot migration (Valkey 9 `CLUSTER MIGRATESLOTS`) on a real Valkey 9.1.2 cluster of
//! 3 primaries is not a lock event: 2,000 slots holding 38 held locks move while locks in
//! them are taken, renewed and released and one expires and is taken over. Events and scan
//! mode count exactly what the clients did (the target's copies of the import count
//! nothing), `lockwatch_locks_held` never dips or doubles, no repair is counted, and the
//! moved locks are followed on their new primary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Metrics, Served, valkey};
use lockwatch::access::cluster::slot;
use lockwatch::config::{Config, Overrides};
use redis::Commands;

/// The slots moved: as many as in the measurement that found the false acquisitions.
const LO: u16 = 0;
const HI: u16 = 1999;
const JOBS: [(&str, &str); 2] = [("target", "c"), ("namespace", "jobs")];

fn config(seed: &str, notifications: &str) -> Config {
    let text = format!(
        "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\"\n\
         notifications = \"{notifications}\"\nreconcile_interval = \"2s\"\nreconcile_rate = 1000000\nscan_count = 5000\n\n\
         [[namespace]]\nname = \"jobs\"\npattern = \"lw:lock:*\"\nttl = \"30s\"\nrenew_every = \"10s\"\n\
         fence_pattern = \"lw:fence:*\"\n"
    );
    Config::from_toml(&text, "asm.toml", std::path::Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn moving(key: &str) -> bool {
    (LO..=HI).contains(&slot(key.as_bytes()))
}

/// The first `n` keys `prefix<i>` whose slot moves (`moves`) or stays.
fn keys(prefix: &str, n: usize, moves: bool) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| moving(k) == moves)
        .take(n)
        .collect()
}

fn held(m: &Metrics) -> f64 {
    m.held("c", "jobs")
}

fn transitions(m: &Metrics, kind: &str) -> f64 {
    m.transitions("c", "jobs", kind)
}

fn repairs(m: &Metrics) -> f64 {
    ["missing", "gone", "changed"]
        .iter()
        .map(|k| m.val("lockwatch_reconcile_repairs_total", &[("target", "c"), ("kind", k)]))
        .sum()
}

/// What the clients did during the test.
#[derive(Default)]
struct Done {
    acquired: AtomicU64,
    renewed: AtomicU64,
    released: AtomicU64,
    errors: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moving_held_locks_by_atomic_slot_migration_counts_nothing() {
    let cluster = valkey::cluster(&[]);
    let source = valkey::serving(cluster.nodes[0].port(), LO);
    let target = cluster.primaries().into_iter().find(|p| *p != source).unwrap();
    let mut c = cluster.client();
    let moved = keys("lw:lock:held:", 38, true);
    let staying = keys("lw:lock:stay:", 12, false);
    for k in moved.iter().chain(&staying) {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg(format!("owner-{k}"))
            .arg("PX")
            .arg(600_000)
            .query(&mut c)
            .unwrap();
    }
    let fence = keys("lw:fence:", 1, true).remove(0);
    let _: i64 = c.incr(&fence, 5).unwrap();
    // Keys of no lock in one moving slot, so the import takes a while: the churn, the
    // expiry and the takeover below happen while it runs.
    let tag = (0..).map(|i| format!("{{f{i}}}")).find(|t| moving(t)).unwrap();
    let mut direct = redis::Client::open(format!("redis://127.0.0.1:{source}/0"))
        .unwrap()
        .get_connection()
        .unwrap();
    for chunk in 0..30 {
        let mut pipe = redis::pipe();
        for i in 0..10_000 {
            pipe.cmd("SET")
                .arg(format!("fill:{tag}:{chunk}:{i}"))
                .arg(&[b'x'; 100][..])
                .ignore();
        }
        let _: () = pipe.query(&mut direct).unwrap();
    }

    let seed = cluster.seed();
    let events = Served::start(config(&seed, "auto")).await;
    let scan = Served::start(config(&seed, "off")).await;
    for (name, s) in [("events", &events), ("scan", &scan)] {
        s.wait_for(Duration::from_secs(30), &format!("{name}: 50 held, the fence"), |m| {
            held(m) == 50.0
                && m.val("lockwatch_fence_token", &JOBS) == 5.0
                && m.val("lockwatch_up", &[("target", "c")]) == 1.0
        })
        .await;
    }
    events
        .wait_for(Duration::from_secs(30), "events mode, inventory done", |m| {
            m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == 1.0
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = events.metrics().await;

    // `lockwatch_locks_held` in both modes, every 20 ms until the end of the churn.
    let stop = Arc::new(AtomicBool::new(false));
    let watch = |s: &Served| {
        let (addr, stop) = (s.addr, stop.clone());
        tokio::spawn(async move {
            let (mut lo, mut hi) = (f64::MAX, f64::MIN);
            while !stop.load(Ordering::Relaxed) {
                let (_, _, body) = common::http_get(addr, "/metrics").await;
                let h = held(&Metrics(body));
                (lo, hi) = (lo.min(h), hi.max(h));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (lo, hi)
        })
    };
    let (held_events, held_scan) = (watch(&events), watch(&scan));

    // One worker on locks of the moving slots: acquire, renew, release, again and again,
    // across the migration and after it.
    let done = Arc::new(Done::default());
    let churn = {
        let (stop, done) = (stop.clone(), done.clone());
        let mut c = cluster.client();
        let locks = keys("lw:lock:churn:", 20, true);
        std::thread::spawn(move || {
            let mut j = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let key = &locks[j % locks.len()];
                let set: redis::RedisResult<Option<String>> = redis::cmd("SET")
                    .arg(key)
                    .arg(format!("w{j}"))
                    .arg("NX")
                    .arg("PX")
                    .arg(60_000)
                    .query(&mut c);
                match set {
                    Ok(Some(_)) => {
                        done.acquired.fetch_add(1, Ordering::Relaxed);
                        match c.pexpire::<_, i64>(key, 60_000) {
                            Ok(n) => done.renewed.fetch_add(n as u64, Ordering::Relaxed),
                            Err(_) => done.errors.fetch_add(1, Ordering::Relaxed),
                        };
                        std::thread::sleep(Duration::from_millis(2));
                        match c.del::<_, i64>(key) {
                            Ok(n) => done.released.fetch_add(n as u64, Ordering::Relaxed),
                            Err(_) => done.errors.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    Ok(None) => {}
                    Err(_) => {
                        done.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                j += 1;
            }
        })
    };

    // A lock that expires during the migration and is taken by another worker: one takeover.
    let stale = keys("lw:lock:stale:", 1, true).remove(0);
    let _: () = redis::cmd("SET")
        .arg(&stale)
        .arg("A")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    let job = tokio::task::block_in_place(|| valkey::start_migration(&cluster, source, target, LO, HI));
    loop {
        let taken: Option<String> = redis::cmd("SET")
            .arg(&stale)
            .arg("B")
            .arg("NX")
            .arg("PX")
            .arg(600_000)
            .query(&mut c)
            .unwrap();
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let state = tokio::task::block_in_place(|| valkey::migration_state(source, &job));
    assert_ne!(
        state, "success",
        "the takeover came after the migration: make the import longer"
    );
    tokio::task::block_in_place(|| valkey::wait_migrated(source, &job, Duration::from_secs(60)));
    assert_eq!(valkey::serving(source, LO), target);
    assert_eq!(valkey::serving(target, HI), target);
    // The worker goes on on the new primary for a while, then stops.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    let (lo, hi) = held_events.await.unwrap();
    let (scan_lo, scan_hi) = held_scan.await.unwrap();
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
    assert_eq!(n(&done.errors), 0.0, "the worker's commands all answered");
    assert!(n(&done.acquired) > 50.0, "the churn ran: {}", n(&done.acquired));

    // Held locks moved and were followed: one released, one renewed on the new primary.
    let _: i64 = c.pexpire(&moved[0], 600_000).unwrap();
    let _: i64 = c.del(&moved[1]).unwrap();
    let delta = |m: &Metrics, kind: &str| transitions(m, kind) - transitions(&before, kind);
    let expect = [
        // The stale lock's two holders.
        ("acquired", n(&done.acquired) + 2.0),
        ("renewed", n(&done.renewed) + 1.0),
        ("released", n(&done.released) + 1.0),
        ("expired", 1.0),
        ("evicted", 0.0),
    ];
    let settled = std::time::Instant::now();
    while settled.elapsed() < Duration::from_secs(20) {
        let m = events.metrics().await;
        if expect.iter().all(|(kind, v)| delta(&m, kind) == *v) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Passes and walks go on: still exact, nothing repaired, nothing lost.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = events.metrics().await;
    let counted: Vec<(&str, f64)> = expect.iter().map(|(kind, _)| (*kind, delta(&m, kind))).collect();
    assert_eq!(
        counted, expect,
        "transitions counted during the test, against what the clients did"
    );
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &JOBS), 1.0);
    assert_eq!(repairs(&m), repairs(&before), "no repair: nothing was missed");
    assert_eq!(held(&m), 50.0);
    assert_eq!(m.val("lockwatch_fence_token", &JOBS), 5.0);
    assert_eq!(m.val("lockwatch_fence_regressions_total", &JOBS), 0.0);
    assert_eq!(m.val("lockwatch_failovers_total", &[("target", "c")]), 0.0);
    // 50 held throughout, plus the worker's lock and the stale one.
    assert!(lo >= 50.0 && hi <= 52.0, "events mode: held between {lo} and {hi}");
    assert!(
        scan_lo >= 50.0 && scan_hi <= 52.0,
        "scan mode: held between {scan_lo} and {scan_hi}"
    );
    scan.wait_for(Duration::from_secs(20), "scan mode: 50 held after", |m| held(m) == 50.0)
        .await;
    let m = scan.metrics().await;
    assert_eq!(m.val("lockwatch_fence_regressions_total", &JOBS), 0.0);
    assert_eq!(m.val("lockwatch_fence_token", &JOBS), 5.0);
    events.stop().await;
    scan.stop().await;
}
