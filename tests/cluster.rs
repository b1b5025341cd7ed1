//! Redis Cluster targets against a real cluster of 3 primaries (with a replica each where
//! failover or the drill is the subject; resharding on the primaries alone): exact
//! gauges across every slot in scan and events mode, an expiry takeover on a cluster key,
//! resharding while locks churn counting nothing for the moved keys, resharding the slots
//! of hot locks back and forth counting each of their transitions once, and failovers
//! (`CLUSTER FAILOVER`, a killed primary) followed with node health and counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::topo::{Cluster, cli_at};
use common::{Metrics, Served};
use lockwatch::access::cluster::slot;
use lockwatch::config::{Config, Overrides};
use redis::Commands;

fn config(seed: &str, notifications: &str) -> Config {
    let text = format!(
        "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\"\n\
         notifications = \"{notifications}\"\nreconcile_interval = \"5s\"\n\n\
         [[namespace]]\nname = \"jobs\"\npattern = \"lw:lock:*\"\nttl = \"30s\"\nrenew_every = \"10s\"\n\
         fence_pattern = \"lw:fence:*\"\n\n\
         [[namespace]]\nname = \"churn\"\npattern = \"lw:churn:*\"\nttl = \"30s\"\n"
    );
    Config::from_toml(&text, "cluster.toml", std::path::Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

const JOBS: [(&str, &str); 2] = [("target", "c"), ("namespace", "jobs")];
/// Locks that churn while slots move: their own namespace, as a scan pass that finds one
/// held by another owner than the pass before counts a handoff, which it is.
const CHURN: &str = "churn";
const T: [(&str, &str); 1] = [("target", "c")];

/// The tests that reshard or fail over load the machine (a cluster each, locks churning, a
/// watcher in debug build): one at a time, so each one's nodes keep their timeouts.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn held(m: &Metrics) -> f64 {
    m.val("lockwatch_locks_held", &JOBS)
}

fn transitions(m: &Metrics, kind: &str) -> f64 {
    m.transitions("c", "jobs", kind)
}

fn churned(m: &Metrics, kind: &str) -> f64 {
    m.transitions("c", CHURN, kind)
}

/// `SET key w<n> NX PX 60000`, a short hold, `DEL`, a pause, over `keys` in turn until
/// `stop` or `most` acquisitions: the acquisitions and releases made.
fn churn(
    mut c: redis::cluster::ClusterConnection,
    keys: Vec<String>,
    (hold, pause, most): (Duration, Duration, u64),
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let (mut acquired, mut released) = (0u64, 0u64);
        let mut j = 0u64;
        while !stop.load(Ordering::Relaxed) && acquired < most {
            let key = &keys[(j % keys.len() as u64) as usize];
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(format!("w{j}"))
                .arg("NX")
                .arg("PX")
                .arg(60_000)
                .query(&mut c)
                .unwrap_or(None);
            if set.is_some() {
                acquired += 1;
                std::thread::sleep(hold);
                let n: i64 = c.del(key).unwrap_or(0);
                released += n as u64;
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            j += 1;
        }
        (acquired, released)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_slot_counted_exactly_a_takeover_seen_and_resharding_is_no_lock_event() {
    let _one_at_a_time = HEAVY.lock().await;
    // No replicas: Valkey 8+ makes every slot move wait for them (the failover test has them).
    let cluster = Cluster::start_primaries();
    cluster.node_timeout(20_000);
    let mut c = cluster.client();
    for i in 0..150 {
        let _: () = redis::cmd("SET")
            .arg(format!("lw:lock:{i}"))
            .arg(format!("owner-{i}"))
            .arg("PX")
            .arg(120_000)
            .query(&mut c)
            .unwrap();
    }
    for i in 0..10 {
        let _: () = c.set(format!("lw:lock:nottl:{i}"), "forever").unwrap();
    }
    for i in 0..20 {
        let _: () = c.set_ex(format!("lw:lock:od:{i}"), "slow", 8).unwrap();
    }
    for i in 0..5 {
        let _: i64 = c.incr(format!("lw:fence:{i}"), 7).unwrap();
    }
    let scan = Served::start(config(&cluster.seed(), "off")).await;
    let events = Served::start(config(&cluster.seed(), "auto")).await;
    for (name, s) in [("scan", &scan), ("events", &events)] {
        s.wait_for(
            Duration::from_secs(20),
            &format!("{name}: exact gauges over 3 primaries"),
            |m| {
                held(m) == 180.0
                    && m.val("lockwatch_locks_without_ttl", &JOBS) == 10.0
                    && m.val("lockwatch_locks_renewal_overdue", &JOBS) == 20.0
                    && m.val("lockwatch_fence_token", &JOBS) == 7.0
                    && m.val("lockwatch_up", &T) == 1.0
                    && m.val("lockwatch_nodes", &[("target", "c"), ("role", "primary")]) == 3.0
                    && m.val("lockwatch_nodes", &[("target", "c"), ("role", "replica")]) == 0.0
            },
        )
        .await;
        let m = s.metrics().await;
        for n in &cluster.nodes {
            let node = format!("127.0.0.1:{}", n.port());
            assert_eq!(
                m.val("lockwatch_node_up", &[("target", "c"), ("node", &node)]),
                1.0,
                "{name} {node}"
            );
        }
    }
    let m = events.metrics().await;
    assert_eq!(
        m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]),
        1.0
    );

    // The stale-holder incident on one cluster key: A's lock expires, B takes it.
    let _: () = redis::cmd("SET")
        .arg("lw:lock:t")
        .arg("A")
        .arg("NX")
        .arg("PX")
        .arg(1200)
        .query(&mut c)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let _: () = redis::cmd("SET")
        .arg("lw:lock:t")
        .arg("B")
        .arg("NX")
        .arg("PX")
        .arg(120_000)
        .query(&mut c)
        .unwrap();
    events
        .wait_for(Duration::from_secs(10), "one takeover", |m| {
            m.val("lockwatch_lock_expiry_takeovers_total", &JOBS) == 1.0
        })
        .await;

    // Release the overdue ones; then reshard a third of the slots while locks churn.
    for i in 0..20 {
        let _: () = c.del(format!("lw:lock:od:{i}")).unwrap();
    }
    for s in [&scan, &events] {
        s.wait_for(Duration::from_secs(20), "161 held before resharding", |m| {
            held(m) == 161.0
        })
        .await;
    }
    let before = events.metrics().await;
    let handoffs_before = scan.metrics().await.val("lockwatch_lock_handoffs_total", &JOBS);
    let stop = Arc::new(AtomicBool::new(false));
    let keys = (0..40).map(|i| format!("lw:churn:{i}")).collect();
    let churning = churn(
        cluster.client(),
        keys,
        (Duration::from_millis(5), Duration::ZERO, u64::MAX),
        stop.clone(),
    );
    let primaries = cluster.primaries();
    let out = tokio::task::block_in_place(|| cluster.reshard(primaries[0], primaries[1], 3000));
    assert!(out.status.success(), "reshard: {}", common::output_text(&out));
    stop.store(true, Ordering::Relaxed);
    let (acquired, released) = churning.join().unwrap();
    let (acquired, released) = (acquired as f64, released as f64);
    assert!(acquired > 50.0, "the churn ran: {acquired} acquisitions");
    eprintln!("the churn: {acquired} acquired and {released} released");
    events
        .wait_for(
            Duration::from_secs(60),
            "transitions of the churn, and none of the moved keys",
            |m| churned(m, "released") == released && churned(m, "acquired") == acquired,
        )
        .await;
    // Some more passes and walks: still exact, still nothing counted for the moves.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = events.metrics().await;
    assert_eq!(churned(&m, "released"), released);
    assert_eq!(churned(&m, "acquired"), acquired);
    for kind in ["acquired", "released", "expired"] {
        assert_eq!(transitions(&m, kind), transitions(&before, kind), "{kind}");
    }
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &JOBS), 1.0);
    assert_eq!(held(&m), 161.0);
    assert_eq!(m.val("lockwatch_fence_regressions_total", &JOBS), 0.0);
    assert_eq!(m.val("lockwatch_failovers_total", &T), 0.0);
    scan.wait_for(Duration::from_secs(10), "scan mode: 161 held after resharding", |m| {
        held(m) == 161.0
    })
    .await;
    let m = scan.metrics().await;
    let churn_handoffs = m.val(
        "lockwatch_lock_handoffs_total",
        &[("target", "c"), ("namespace", CHURN)],
    );
    eprintln!("scan mode: {churn_handoffs} owner changes of churning locks between passes (handoffs)");
    assert_eq!(m.val("lockwatch_lock_handoffs_total", &JOBS), handoffs_before);
    assert_eq!(m.val("lockwatch_fence_regressions_total", &JOBS), 0.0);
    events.stop().await;
    scan.stop().await;
}

/// The slots hot locks live in, resharded back and forth while the locks churn: each acquisition
/// and release counted once — also when the layout gives the target a slot while its first
/// events of it still wait to be placed, and when a `del`'s check reads the key after the
/// next holder took it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resharding_the_slots_of_hot_locks_back_and_forth_counts_each_transition_once() {
    let _one_at_a_time = HEAVY.lock().await;
    const MOVED: u16 = 400;
    // A lock held a millisecond, a millisecond between: the same key taken again within some
    // tens of milliseconds, and the nodes left enough of the machine not to fail over.
    const MS: Duration = Duration::from_millis(1);
    // At most this many acquisitions per worker: where the moves are slow (Valkey 9.1 took
    // minutes for these under load), more would only be a backlog for a debug build.
    const MOST: u64 = 3_000;
    let cluster = Cluster::start_primaries();
    cluster.node_timeout(20_000);
    // `redis-cli --cluster reshard` moves the source's lowest slots: those of slot 0's primary
    // to another, then back.
    let nodes = cli_at(cluster.primaries()[0], &["cluster", "nodes"]);
    let source = nodes
        .lines()
        .find(|l| l.split_whitespace().skip(8).any(|r| r == "0" || r.starts_with("0-")))
        .map(|l| common::topo::port_of(l.split_whitespace().nth(1).unwrap()))
        .unwrap();
    let target = cluster.primaries().into_iter().find(|&p| p != source).unwrap();
    let keys: Vec<String> = (0..)
        .map(|i| format!("lw:churn:{i}"))
        .filter(|k| slot(k.as_bytes()) < MOVED)
        .take(24)
        .collect();
    let events = Served::start(config(&cluster.seed(), "auto")).await;
    events
        .wait_for(Duration::from_secs(20), "events mode", |m| {
            m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == 1.0
        })
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let churning: Vec<_> = keys
        .chunks(8)
        .map(|k| churn(cluster.client(), k.to_vec(), (MS, MS, MOST), stop.clone()))
        .collect();
    for (from, to) in [(source, target), (target, source), (source, target)] {
        let out = tokio::task::block_in_place(|| cluster.reshard(from, to, u32::from(MOVED)));
        assert!(out.status.success(), "reshard: {}", common::output_text(&out));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut acquired, mut released) = (0.0, 0.0);
    for c in churning {
        let (a, r) = c.join().unwrap();
        (acquired, released) = (acquired + a as f64, released + r as f64);
    }
    assert!(acquired > 100.0, "the churn ran: {acquired} acquisitions");
    let m = events.metrics().await;
    assert_eq!(
        m.val("lockwatch_failovers_total", &T),
        0.0,
        "no failover (a node that missed its timeout on a loaded machine): a gap counts nothing"
    );
    eprintln!("the hot locks: {acquired} acquired and {released} released");
    events
        .wait_for(Duration::from_secs(60), "each transition counted once", |m| {
            churned(m, "acquired") == acquired && churned(m, "released") == released
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = events.metrics().await;
    assert_eq!((churned(&m, "acquired"), churned(&m, "released")), (acquired, released));
    assert_eq!(churned(&m, "expired") + churned(&m, "renewed"), 0.0);
    let ns = [("target", "c"), ("namespace", CHURN)];
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &ns), 0.0);
    assert_eq!(m.held("c", CHURN), 0.0);
    events.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failovers_are_followed_with_node_health_and_no_lock_lost() {
    let _one_at_a_time = HEAVY.lock().await;
    let mut cluster = Cluster::start();
    let mut c = cluster.client();
    for i in 0..50 {
        let _: () = c.set_ex(format!("lw:lock:{i}"), format!("o{i}"), 300).unwrap();
    }
    // Replicas catch up before anything fails over.
    let _: () = redis::cmd("WAIT").arg(1).arg(2000).query(&mut c).unwrap_or(());
    let events = Served::start(config(&cluster.seed(), "auto")).await;
    // One series: every primary is the same build, in mode cluster.
    let (family, version) = common::server_build();
    let info = [
        ("server", family.as_str()),
        ("version", version.as_str()),
        ("mode", "cluster"),
    ];
    events
        .wait_for(Duration::from_secs(20), "50 held, events mode", |m| {
            held(m) == 50.0
                && m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == 1.0
                && m.get("lockwatch_target_info", &info) == Some(1.0)
        })
        .await;

    // The drill on a cluster key: its keys share a hash tag, so its scripts run on one node.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drill.toml");
    std::fs::write(
        &file,
        format!(
            "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{}\"]\nsample_interval = \"250ms\"\n\n\
             [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"1s\"\n",
            cluster.seed()
        ),
    )
    .unwrap();
    let drill_cfg = Config::load(&file, &Overrides::default()).unwrap();
    let watched = Served::start(drill_cfg).await;
    watched
        .wait_for(Duration::from_secs(20), "the drill's exporter subscribed", |m| {
            m.val("lockwatch_notifications_connected", &T) == 1.0
        })
        .await;
    let exporter = format!("http://{}", watched.addr);
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
            .args(["drill", "-c"])
            .arg(&file)
            .args(["--yes", "--exporter", &exporter, "--format", "json"])
            .env_remove("LOCKWATCH_CONFIG")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    });
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(report["result"].as_str().unwrap().starts_with("passed"), "{report}");
    assert!(report["lock_key"].as_str().unwrap().contains("{drill-"), "{report}");
    let m = watched.metrics().await;
    let drill_ns = [("target", "c"), ("namespace", "drill")];
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &drill_ns), 1.0);
    watched.stop().await;

    // What two interrupted runs left (each on the node of its hash tag) is found on every
    // primary and removed by `--cleanup`; a key of the namespace that is no run's stays.
    let runs = ["0badc0de", "f00dcafe"];
    for run in runs {
        for key in [
            format!("drill:lock:{{drill-{run}}}-1"),
            format!("drill:fence:{{drill-{run}}}-1"),
            format!("lockwatch-drill:{{drill-{run}}}:1:resource"),
        ] {
            let _: () = c.set_ex(key, "left", 300).unwrap();
        }
    }
    let _: () = c.set_ex("drill:lock:{job}-1", "someone", 300).unwrap();
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
            .args(["drill", "--cleanup", "-c"])
            .arg(&file)
            .env_remove("LOCKWATCH_CONFIG")
            .output()
            .unwrap()
    });
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{said}");
    for run in runs {
        assert!(said.contains(&format!("removed 3 keys of run {run}:")), "{said}");
        let left: Option<String> = c.get(format!("drill:lock:{{drill-{run}}}-1")).unwrap();
        assert_eq!(left, None);
    }
    let kept: Option<String> = c.get("drill:lock:{job}-1").unwrap();
    assert_eq!(kept.as_deref(), Some("someone"));

    // A manual failover: a replica takes over its primary's slots, nothing is lost.
    let (replica, old_primary) = cluster.replicas()[0];
    assert!(cli_at(replica, &["cluster", "failover"]).contains("OK"));
    events
        .wait_for(Duration::from_secs(20), "one failover followed", |m| {
            m.val("lockwatch_failovers_total", &T) == 1.0
                && m.val("lockwatch_up", &T) == 1.0
                && m.val("lockwatch_notifications_connected", &T) == 1.0
        })
        .await;
    assert!(cluster.primaries().contains(&replica) && !cluster.primaries().contains(&old_primary));

    // A primary killed: its replica is elected after the node timeout. `CLUSTER SHARDS`
    // lists the failed node, down; `CLUSTER SLOTS` (6.2) lists no failed node: it leaves the
    // topology, and its series with it.
    let victim = cluster.primaries()[0];
    let node = format!("127.0.0.1:{victim}");
    let failed_listed = cluster.has_shards();
    cluster.node(victim).stop();
    events
        .wait_for(Duration::from_secs(30), "the killed primary replaced", |m| {
            let up = m.get("lockwatch_node_up", &[("target", "c"), ("node", &node)]);
            m.val("lockwatch_failovers_total", &T) == 2.0
                && up == failed_listed.then_some(0.0)
                && m.val("lockwatch_up", &T) == 1.0
                && held(m) == 50.0
        })
        .await;
    let m = events.metrics().await;
    assert_eq!(m.val("lockwatch_nodes", &[("target", "c"), ("role", "primary")]), 3.0);
    assert_eq!(m.val("lockwatch_locks_lost_in_failover_total", &JOBS), 0.0);
    assert_eq!(transitions(&m, "released"), 0.0);
    assert_eq!(transitions(&m, "expired"), 0.0);
    events.stop().await;
}

/// `check-config --connect -c <file>`: exit code and output.
fn check_config(file: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args(["check-config", "--connect", "-c"])
        .arg(file)
        .env_remove("LOCKWATCH_CONFIG")
        .output()
        .unwrap();
    (out.status.code(), common::output_text(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_cluster_user_runs_serve_and_check_config_names_what_is_missing() {
    let cluster = Cluster::start();
    let mut c = cluster.client();
    for i in 0..30 {
        let _: () = c.set_ex(format!("lw:lock:{i}"), format!("o{i}"), 300).unwrap();
    }
    // The documented read-only line for this server and namespace, plus the cluster line,
    // on every node.
    let mut rules: Vec<String> = Vec::new();
    let read_only = common::read_only_line("<pattern>");
    for rule in read_only
        .strip_prefix("ACL SETUSER lockwatch ")
        .unwrap()
        .split_whitespace()
    {
        let rule = rule.replace("<db>", "0").replace(">PASSWORD", ">pw");
        rules.push(
            rule.replace("<fence_pattern>", "lw:fence:*")
                .replace("<pattern>", "lw:lock:*"),
        );
    }
    let cluster_line = common::security_line("ACL SETUSER lockwatch +cluster", "+asking");
    rules.extend(
        cluster_line
            .strip_prefix("ACL SETUSER lockwatch ")
            .unwrap()
            .split_whitespace()
            .map(String::from),
    );
    for n in &cluster.nodes {
        let mut args = vec!["ACL", "SETUSER", "lockwatch"];
        args.extend(rules.iter().map(String::as_str));
        assert_eq!(cli_at(n.port(), &args).trim(), "OK");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lockwatch.toml");
    let seed = cluster.seed().replace("redis://", "redis://lockwatch:pw@");
    let text = format!(
        "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\"\n\n\
         [[namespace]]\nname = \"jobs\"\npattern = \"lw:lock:*\"\nttl = \"30s\"\nfence_pattern = \"lw:fence:*\"\n"
    );
    std::fs::write(&file, &text).unwrap();
    let (code, out) = check_config(&file);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches(": reachable, ").count(), 3, "each primary checked: {out}");
    assert_eq!(out.matches(" (cluster)\n").count(), 3, "{out}");
    assert!(out.contains("a cluster of 3 primaries and 3 replicas"), "{out}");

    // inspect walks every primary, and reads a key on the node that holds it.
    let inspect = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
            .args(["inspect", "-c"])
            .arg(&file)
            .args(args)
            .env_remove("LOCKWATCH_CONFIG")
            .output()
            .unwrap();
        (out.status.code(), common::output_text(&out))
    };
    let (code, out) = inspect(&["--namespace", "jobs", "--format", "json"]);
    assert_eq!(code, Some(0), "{out}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["held"], 30, "{report}");
    for key in ["lw:lock:0", "lw:lock:7", "lw:lock:29"] {
        let (code, out) = inspect(&[key]);
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.contains(key) && out.contains("TTL left") && out.contains("redis-cli -c -h 127.0.0.1"),
            "{out}"
        );
    }

    let cfg = Config::from_toml(&text, "acl.toml", dir.path(), &Overrides::default()).unwrap();
    let served = Served::start(cfg).await;
    served
        .wait_for(Duration::from_secs(20), "serve as the documented user", |m| {
            held(m) == 30.0
                && m.val("lockwatch_up", &T) == 1.0
                && m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == 1.0
        })
        .await;
    served.stop().await;

    // One rule taken away on every node: check-config names it, per node.
    for n in &cluster.nodes {
        assert_eq!(cli_at(n.port(), &["ACL", "SETUSER", "lockwatch", "-pttl"]).trim(), "OK");
    }
    let (code, out) = check_config(&file);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(out.matches("grant `+pttl`").count(), 3, "named on each primary: {out}");
    for n in &cluster.nodes {
        assert_eq!(
            cli_at(n.port(), &["ACL", "SETUSER", "lockwatch", "+pttl", "-asking"]).trim(),
            "OK"
        );
    }
    let (code, out) = check_config(&file);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("grant `+asking`"), "{out}");
}
