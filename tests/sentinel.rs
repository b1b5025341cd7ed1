//! Sentinel targets against a real group (1 primary, 1 replica, 3 sentinels): locks lost in
//! a failover made real — the replica paused and cut off while locks are taken on the primary, the
//! primary killed, the replica promoted — counted exactly, the fence regression counted,
//! and the new primary followed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Served;
use common::topo::{MASTER, SentinelGroup, signal};
use lockwatch::config::{Config, Overrides};
use redis::Commands;

const JOBS: [(&str, &str); 2] = [("target", "s"), ("namespace", "jobs")];
const T: [(&str, &str); 1] = [("target", "s")];

fn config(g: &SentinelGroup) -> Config {
    let sentinels: Vec<String> = g.sentinel_urls().iter().map(|u| format!("\"{u}\"")).collect();
    let text = format!(
        "[[target]]\nname = \"s\"\nmode = \"sentinel\"\nsentinels = [{}]\nmaster_name = \"{MASTER}\"\n\
         sample_interval = \"1s\"\n\n\
         [[namespace]]\nname = \"jobs\"\npattern = \"lw:lock:*\"\nttl = \"60s\"\nrenew_every = \"20s\"\n\
         fence_pattern = \"lw:fence:*\"\n",
        sentinels.join(", ")
    );
    Config::from_toml(&text, "sentinel.toml", std::path::Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn locks_the_new_primary_never_received_are_counted_lost() {
    let mut g = SentinelGroup::start();
    let mut c = common::conn(&g.primary);
    for i in 0..20 {
        let _: () = c.set_ex(format!("lw:lock:{i}"), format!("o{i}"), 300).unwrap();
    }
    let _: i64 = c.incr("lw:fence:run", 10).unwrap();
    let _: i64 = redis::cmd("WAIT").arg(1).arg(2000).query(&mut c).unwrap();
    let served = Served::start(config(&g)).await;
    // Which server the primary the sentinels name is, in mode sentinel.
    let (family, version) = common::server_build();
    let info = [
        ("target", "s"),
        ("server", family.as_str()),
        ("version", version.as_str()),
        ("mode", "sentinel"),
    ];
    served
        .wait_for(Duration::from_secs(20), "20 held in events mode", |m| {
            m.get("lockwatch_target_info", &info) == Some(1.0)
                && m.val("lockwatch_locks_held", &JOBS) == 20.0
                && m.val("lockwatch_tracking_mode", &[("target", "s"), ("mode", "events")]) == 1.0
                && m.val("lockwatch_fence_token", &JOBS) == 10.0
                && m.val("lockwatch_nodes", &[("target", "s"), ("role", "replica")]) == 1.0
        })
        .await;

    // The replica stops receiving; 7 locks and 5 fencing tokens go to the primary only.
    // Paused, and its replication link cut (as a partition would): nothing written from
    // now on reaches it, not even into its socket buffer.
    let replica_pid = g.replica.pid().unwrap();
    signal(replica_pid, "STOP");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut c)
        .unwrap();
    for i in 0..7 {
        let _: () = c.set_ex(format!("lw:lock:late:{i}"), format!("late{i}"), 300).unwrap();
    }
    let _: i64 = c.incr("lw:fence:run", 5).unwrap();
    served
        .wait_for(Duration::from_secs(10), "27 held, fence at 15", |m| {
            m.val("lockwatch_locks_held", &JOBS) == 27.0 && m.val("lockwatch_fence_token", &JOBS) == 15.0
        })
        .await;
    let old = format!("127.0.0.1:{}", g.primary.port());
    let new = format!("127.0.0.1:{}", g.replica.port());
    g.primary.stop();
    signal(replica_pid, "CONT");
    served
        .wait_for(
            Duration::from_secs(40),
            "the failover followed and the lost locks counted",
            |m| {
                m.val("lockwatch_failovers_total", &T) == 1.0
                    && m.val("lockwatch_locks_lost_in_failover_total", &JOBS) == 7.0
                    && m.val("lockwatch_up", &T) == 1.0
                    && m.val("lockwatch_locks_held", &JOBS) == 20.0
                    && m.val("lockwatch_fence_regressions_total", &JOBS) >= 1.0
                    && m.val("lockwatch_node_up", &[("target", "s"), ("node", &new)]) == 1.0
                    && m.get("lockwatch_node_up", &[("target", "s"), ("node", &old)])
                        .is_none_or(|v| v == 0.0)
            },
        )
        .await;
    assert_eq!(g.primary_port(), Some(g.replica.port()));
    // Counted once: more passes change nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = served.metrics().await;
    assert_eq!(m.val("lockwatch_locks_lost_in_failover_total", &JOBS), 7.0);
    assert_eq!(m.val("lockwatch_failovers_total", &T), 1.0);
    assert_eq!(m.val("lockwatch_fence_token", &JOBS), 10.0);
    // Locks taken on the new primary are tracked as usual.
    let mut c = common::conn(&g.replica);
    let _: () = c.set_ex("lw:lock:after", "x", 300).unwrap();
    served
        .wait_for(Duration::from_secs(10), "the new primary's locks", |m| {
            m.val("lockwatch_locks_held", &JOBS) == 21.0 && m.val("lockwatch_notifications_connected", &T) == 1.0
        })
        .await;
    served.stop().await;
}
