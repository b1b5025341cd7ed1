//! Several databases in cluster mode, on real Valkey 9.1.2 clusters of 3 primaries: a
//! cluster target whose seeds name database 2 watches that database only — its keyspace
//! channel, SCAN and reads in it on every node, the canary in it — and counts nothing of
//! locks of the same names in database 0. Where the cluster does not serve the database
//! (Valkey's default of one, Redis Cluster), `check-config --connect` and the status page
//! say so and the target is down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::topo::Cluster;
use common::{Metrics, Served, valkey};
use lockwatch::config::{Config, Overrides};
use redis::Commands;

const JOBS: [(&str, &str); 2] = [("target", "c"), ("namespace", "jobs")];

fn text(seed: &str, notifications: &str) -> String {
    format!(
        "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\"\n\
         notifications = \"{notifications}\"\nreconcile_interval = \"2s\"\n\n\
         [[namespace]]\nname = \"jobs\"\npattern = \"lw:lock:*\"\nttl = \"30s\"\nfence_pattern = \"lw:fence:*\"\n"
    )
}

fn config(seed: &str, notifications: &str) -> Config {
    Config::from_toml(
        &text(seed, notifications),
        "db.toml",
        std::path::Path::new("."),
        &Overrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The URL of the cluster's first node in database `db`.
fn seed(cluster: &Cluster, db: u8) -> String {
    format!("redis://127.0.0.1:{}/{db}", cluster.nodes[0].port())
}

/// A client that follows the cluster's redirections, in database `db`.
fn client(cluster: &Cluster, db: u8) -> redis::cluster::ClusterConnection {
    let seeds: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://127.0.0.1:{}/{db}", n.port()))
        .collect();
    redis::cluster::ClusterClient::new(seeds)
        .unwrap()
        .get_connection()
        .unwrap()
}

fn lock(c: &mut redis::cluster::ClusterConnection, key: &str, owner: &str, px: u64) -> bool {
    common::acquire(c, key, owner, px)
}

/// `check-config --connect` of `text`: exit code and output.
fn check_config(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lockwatch.toml");
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args(["check-config", "--connect", "-c"])
        .arg(&file)
        .env_remove("LOCKWATCH_CONFIG")
        .output()
        .unwrap();
    (out.status.code(), common::output_text(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_target_watches_its_own_database_only() {
    let cluster = valkey::cluster(&["--cluster-databases", "4"]);
    let (mut zero, mut two) = (client(&cluster, 0), client(&cluster, 2));
    for i in 0..30 {
        assert!(lock(&mut two, &format!("lw:lock:{i}"), &format!("two-{i}"), 600_000));
        assert!(lock(&mut zero, &format!("lw:lock:{i}"), &format!("zero-{i}"), 600_000));
    }
    for i in 0..10 {
        assert!(lock(&mut zero, &format!("lw:lock:zero:{i}"), "zero", 600_000));
    }
    let _: i64 = two.incr("lw:fence:1", 4).unwrap();
    let _: i64 = zero.incr("lw:fence:1", 9).unwrap();

    let (code, out) = check_config(&text(&seed(&cluster, 2), "auto"));
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches(": reachable, ").count(), 3, "each primary checked: {out}");
    let events = Served::start(config(&seed(&cluster, 2), "auto")).await;
    let scan = Served::start(config(&seed(&cluster, 2), "off")).await;
    for (name, s) in [("events", &events), ("scan", &scan)] {
        s.wait_for(
            Duration::from_secs(30),
            &format!("{name}: database 2's 30 locks"),
            |m| m.held("c", "jobs") == 30.0 && m.val("lockwatch_fence_token", &JOBS) == 4.0,
        )
        .await;
    }
    events
        .wait_for(
            Duration::from_secs(30),
            "events mode, by the canary in database 2",
            |m| {
                m.val("lockwatch_tracking_mode", &[("target", "c"), ("mode", "events")]) == 1.0
                    && m.val(
                        "lockwatch_notifications_verification_method",
                        &[("target", "c"), ("method", "canary")],
                    ) == 1.0
            },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = events.metrics().await;

    // Database 0: a whole life of every lock there, none of it database 2's.
    for i in 0..10 {
        let key = format!("lw:lock:zero:new:{i}");
        assert!(lock(&mut zero, &key, "z", 60_000));
        let _: i64 = zero.pexpire(&key, 60_000).unwrap();
        let _: i64 = zero.del(&key).unwrap();
    }
    for i in 0..5 {
        let _: i64 = zero.del(format!("lw:lock:{i}")).unwrap();
    }
    // Database 2: 5 acquired, 3 renewed, 4 released, one expired and taken over.
    for i in 0..5 {
        assert!(lock(&mut two, &format!("lw:lock:new:{i}"), "w", 600_000));
    }
    for i in 10..13 {
        let _: i64 = two.pexpire(format!("lw:lock:{i}"), 600_000).unwrap();
    }
    for i in 20..24 {
        let _: i64 = two.del(format!("lw:lock:{i}")).unwrap();
    }
    assert!(lock(&mut two, "lw:lock:stale", "A", 300));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let taken = tokio::time::timeout(Duration::from_secs(5), async {
        while !lock(&mut two, "lw:lock:stale", "B", 600_000) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    taken.await.expect("the stale lock expired and was taken");

    let delta = |m: &Metrics, kind: &str| m.transitions("c", "jobs", kind) - before.transitions("c", "jobs", kind);
    let expect = [("acquired", 7.0), ("renewed", 3.0), ("released", 4.0), ("expired", 1.0)];
    events
        .wait_for(Duration::from_secs(20), "database 2's transitions", |m| {
            expect.iter().all(|(k, v)| delta(m, k) == *v) && m.held("c", "jobs") == 32.0
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = events.metrics().await;
    let counted: Vec<(&str, f64)> = expect.iter().map(|(k, _)| (*k, delta(&m, k))).collect();
    assert_eq!(counted, expect, "database 0's locks count nothing");
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &JOBS), 1.0);
    assert_eq!(m.held("c", "jobs"), 32.0);
    assert_eq!(m.val("lockwatch_fence_token", &JOBS), 4.0);
    scan.wait_for(Duration::from_secs(20), "scan mode: database 2's 32 locks", |m| {
        m.held("c", "jobs") == 32.0
    })
    .await;
    events.stop().await;
    scan.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_does_not_serve_the_database_says_so_and_the_target_is_down() {
    // Valkey serves one database in cluster mode unless `cluster-databases` says more.
    let cluster = valkey::cluster(&[]);
    let seed = seed(&cluster, 2);
    let (code, out) = check_config(&text(&seed, "auto"));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("does not serve database 2") && out.contains("cluster-databases"),
        "{out}"
    );
    let served = Served::start(config(&seed, "auto")).await;
    served
        .wait_for(Duration::from_secs(10), "the target down, not subscribed", |m| {
            m.val("lockwatch_up", &[("target", "c")]) == 0.0
                && m.val("lockwatch_notifications_connected", &[("target", "c")]) == 0.0
                && m.val("lockwatch_sample_passes_total", &[("target", "c")]) >= 1.0
        })
        .await;
    let mut page = String::new();
    for _ in 0..100 {
        page = served.get("/").await.2;
        if page.contains("does not serve database 2") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let said: Vec<&str> = page.lines().filter(|l| l.contains("data-part=\"health\"")).collect();
    assert!(
        page.contains("does not serve database 2"),
        "the status page says why: {said:?}"
    );
    served.stop().await;

    // Redis Cluster has database 0 only.
    let redis = Cluster::start();
    let (code, out) = check_config(&text(&redis.seed().replace("/0", "/2"), "auto"));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does not serve database 2"), "{out}");
}
