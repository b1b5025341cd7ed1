//! Events mode against a real redis-server: the same exact gauge values as scan mode,
//! missed notifications repaired and counted exactly (and no transition invented),
//! notifications switched off and on at runtime, a restart without the flags (and
//! `configure` putting them back), flags off where `CONFIG` is denied never taken for events mode —
//! each "subscribed but not receiving" within two checks and back when the flags are —,
//! repeated pub/sub kills each recovered within a second, and a stalled holder (a real
//! process, SIGSTOPped) flagged at its mark with a 30 s sample interval.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Metrics, Served, config, conn, redis};
use redis::Commands;

const NOTIFY: [&str; 2] = ["--notify-keyspace-events", "KEA"];

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"
[[target]]
name = "main"
url = "{url}"
{target_extra}

[[namespace]]
name = "wf"
pattern = "wf:lock:*"
ttl = "30s"
renew_every = "10s"             # overdue below 30 - 10 - 5 = 15 s
fence_pattern = "wf:fence:*"

[[namespace]]
name = "appr"
pattern = "appr:lock:*"
ttl = "10s"
max_hold = "1m"
value = "json:owner.id"

[[namespace]]
name = "rs"
pattern = "rs:lock:*"
ttl = "30s"
renew_every = "10s"
value = "redisson"
"#;

fn cfg(url: &str, target_extra: &str) -> lockwatch::config::Config {
    let text = CONFIG.replace("{url}", url).replace("{target_extra}", target_extra);
    lockwatch::config::Config::from_toml(
        &text,
        "test.toml",
        std::path::Path::new("."),
        &lockwatch::config::Overrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

type Want<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

/// Wait until every wanted series has exactly its value; fail naming those that do not.
async fn expect(s: &Served, what: &str, want: &[Want<'_>]) -> Metrics {
    let started = Instant::now();
    loop {
        let m = s.metrics().await;
        let wrong: Vec<String> = want
            .iter()
            .filter(|(name, labels, v)| m.get(name, labels) != Some(*v))
            .map(|(name, labels, v)| format!("{name}{labels:?} = {:?}, want {v}", m.get(name, labels)))
            .collect();
        if wrong.is_empty() {
            return m;
        }
        if started.elapsed() > Duration::from_secs(15) {
            panic!("{what}: after 15 s\n{}", wrong.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn mode(m: &Metrics, mode: &str) -> Option<f64> {
    m.get("lockwatch_tracking_mode", &[("target", "main"), ("mode", mode)])
}

async fn in_mode(s: &Served, want: &str) {
    s.wait_for(Duration::from_secs(15), want, |m| mode(m, want) == Some(1.0))
        .await;
}

fn set_px(c: &mut redis::Connection, key: &str, value: &str, px: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(px)
        .query(c)
        .unwrap();
}

/// The fixture of every value kind and fault class, then a second round of changes; the
/// gauges must come out the same in either mode.
async fn exact_gauges(events: bool) {
    let r = redis(&NOTIFY);
    let mut c = conn(&r);
    // One lock exists before lockwatch starts: events mode finds it by its inventory.
    set_px(&mut c, "wf:lock:1", "a", 20_000);
    let extra = if events {
        r#"sample_interval = "1s""#
    } else {
        "sample_interval = \"1s\"\nnotifications = \"off\""
    };
    let s = Served::start(cfg(&r.url(), extra)).await;
    in_mode(&s, if events { "events" } else { "scan" }).await;
    if events {
        // The inventory of a small database is one step.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The rest arrives while lockwatch watches.
    set_px(&mut c, "wf:lock:2", "b", 5_000);
    let _: () = c.set("wf:lock:3", "c").unwrap();
    let _: () = c.hset("wf:lock:4", "f", "v").unwrap();
    let _: () = c.set("wf:fence:1", 10).unwrap();
    let _: () = c.set("wf:fence:2", 5).unwrap();
    set_px(&mut c, "appr:lock:1", r#"{"owner":{"id":"w1"}}"#, 10_000);
    set_px(&mut c, "appr:lock:2", "garbage", 10_000);
    let _: () = c
        .hset("rs:lock:1", "8743c9c0-0795-4907-87fd-6c719a6b4586:57", 1)
        .unwrap();
    let _: () = c.pexpire("rs:lock:1", 25_000).unwrap();
    let _: () = c.set("rs:lock:2", "x").unwrap();
    let _: () = c.set("other:key", "x").unwrap();

    let t = ("target", "main");
    let wf = vec![t, ("namespace", "wf")];
    let appr = vec![t, ("namespace", "appr")];
    let rs = vec![t, ("namespace", "rs")];
    let with = |base: &Vec<(&'static str, &'static str)>, k: &'static str, v: &'static str| {
        let mut l = base.clone();
        l.push((k, v));
        l
    };
    let m = expect(
        &s,
        "first round",
        &[
            ("lockwatch_locks_held", wf.clone(), 3.0),
            ("lockwatch_locks_without_ttl", wf.clone(), 1.0),
            ("lockwatch_locks_renewal_overdue", wf.clone(), 1.0),
            ("lockwatch_locks_unreadable", with(&wf, "reason", "wrong_type"), 1.0),
            ("lockwatch_fence_token", wf.clone(), 10.0),
            ("lockwatch_locks_held", appr.clone(), 1.0),
            ("lockwatch_locks_unreadable", with(&appr, "reason", "bad_value"), 1.0),
            ("lockwatch_locks_held_too_long", appr.clone(), 0.0),
            ("lockwatch_locks_held", rs.clone(), 1.0),
            ("lockwatch_locks_renewal_overdue", rs.clone(), 0.0),
            ("lockwatch_locks_unreadable", with(&rs, "reason", "wrong_type"), 1.0),
            ("lockwatch_locks_without_ttl", rs.clone(), 0.0),
            ("lockwatch_up", vec![t], 1.0),
        ],
    )
    .await;
    assert_eq!(m.val("lockwatch_lock_handoffs_total", &wf), 0.0);
    assert_eq!(m.val("lockwatch_fence_regressions_total", &wf), 0.0);

    // Second round: a handoff, a lock gone, a counter backwards, a counter vanished.
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("z")
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    let _: () = c.del("wf:lock:2").unwrap();
    let _: () = c.set("wf:fence:1", 7).unwrap();
    let _: () = c.del("wf:fence:2").unwrap();
    let m = expect(
        &s,
        "second round",
        &[
            ("lockwatch_locks_held", wf.clone(), 2.0),
            ("lockwatch_locks_renewal_overdue", wf.clone(), 0.0),
            ("lockwatch_lock_handoffs_total", wf.clone(), 1.0),
            ("lockwatch_fence_regressions_total", wf.clone(), 2.0),
            ("lockwatch_fence_token", wf.clone(), 7.0),
        ],
    )
    .await;
    // Nothing moves further once settled.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = s.metrics().await;
    for name in [
        "lockwatch_lock_handoffs_total",
        "lockwatch_fence_regressions_total",
        "lockwatch_locks_held",
    ] {
        assert_eq!(later.val(name, &wf), m.val(name, &wf), "{name} moved after settling");
    }
    if events {
        for kind in ["missing", "gone", "changed"] {
            assert_eq!(
                later.val("lockwatch_reconcile_repairs_total", &with(&wf, "kind", kind)),
                0.0,
                "no event was missed, so nothing is repaired ({kind})"
            );
        }
        assert_eq!(mode(&later, "events"), Some(1.0));
        assert_eq!(mode(&later, "scan"), Some(0.0));
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_mode_gives_the_exact_gauges() {
    exact_gauges(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_mode_gives_the_same_exact_gauges() {
    exact_gauges(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_events_are_repaired_and_counted_exactly() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    // lockwatch's own ACL user holds the gap open: while it is off, established connections
    // work and the pub/sub connection cannot come back.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "on", ">pw", "~*", "&*", "+@all"])
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://lw:pw@127.0.0.1:{}/0", r.port());
    // No sample pass during the gap: only the reconcile can find what changed.
    let s = Served::start(cfg(&url, r#"sample_interval = "60s""#.trim())).await;
    in_mode(&s, "events").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for k in ["wf:lock:1", "wf:lock:2", "wf:lock:3"] {
        set_px(&mut admin, k, "A", 60_000);
    }
    let wf = vec![("target", "main"), ("namespace", "wf")];
    expect(&s, "three locks", &[("lockwatch_locks_held", wf.clone(), 3.0)]).await;

    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "off"])
        .query(&mut admin)
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    in_mode(&s, "scan").await;
    // Unseen: one lock changes owner, one is added, one is deleted.
    set_px(&mut admin, "wf:lock:1", "B", 60_000);
    set_px(&mut admin, "wf:lock:4", "C", 60_000);
    let _: () = admin.del("wf:lock:3").unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "on"])
        .query(&mut admin)
        .unwrap();
    in_mode(&s, "events").await;

    let kind = |k: &'static str| {
        let mut l = wf.clone();
        l.push(("kind", k));
        l
    };
    let m = expect(
        &s,
        "repairs after the gap",
        &[
            ("lockwatch_reconcile_repairs_total", kind("missing"), 1.0),
            ("lockwatch_reconcile_repairs_total", kind("gone"), 1.0),
            ("lockwatch_reconcile_repairs_total", kind("changed"), 1.0),
            ("lockwatch_locks_held", wf.clone(), 3.0),
        ],
    )
    .await;
    let tr = |m: &Metrics, k: &str| {
        m.val(
            "lockwatch_lock_transitions_total",
            &[("target", "main"), ("namespace", "wf"), ("kind", k)],
        )
    };
    assert_eq!(tr(&m, "acquired"), 3.0, "only the three acquisitions seen");
    assert_eq!(tr(&m, "released"), 0.0, "the unseen delete is a repair, not a release");
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &wf), 0.0);
    // Exactly once: later passes and walks find nothing more.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = s.metrics().await;
    for k in ["missing", "gone", "changed"] {
        assert_eq!(later.val("lockwatch_reconcile_repairs_total", &kind(k)), 1.0, "{k}");
    }
    // The API shows the repaired owner hashes: wf:lock:1 is B's now, wf:lock:4 is tracked.
    let (_, _, body) = s.get("/api/v1/locks?namespace=wf").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let keys: Vec<&str> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"wf:lock:4") && !keys.contains(&"wf:lock:3"), "{keys:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_switched_off_at_runtime_fall_back_to_scan_and_return() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    let s = Served::start(cfg(&r.url(), r#"sample_interval = "1s""#)).await;
    in_mode(&s, "events").await;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", ""])
        .query(&mut admin)
        .unwrap();
    // Within two flag checks (5 s each): subscribed, but not receiving, and scan mode.
    let took = s
        .wait_for(Duration::from_secs(12), "not receiving, scan mode", |m| {
            mode(m, "scan") == Some(1.0) && not_receiving(m)
        })
        .await;
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (_, _, page) = s.get("/").await;
    assert!(page.contains(r#"data-mode="scan""#), "the status page says scan");
    assert!(
        page.contains("subscribed but not receiving</span>: ") && page.contains("lacks `"),
        "{page}"
    );
    // Locks are still found, by SCAN.
    set_px(&mut admin, "wf:lock:9", "x", 20_000);
    expect(
        &s,
        "found by SCAN",
        &[(
            "lockwatch_locks_held",
            vec![("target", "main"), ("namespace", "wf")],
            1.0,
        )],
    )
    .await;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "KEA"])
        .query(&mut admin)
        .unwrap();
    s.wait_for(Duration::from_secs(12), "events mode again", |m| {
        mode(m, "events") == Some(1.0) && receiving(m)
    })
    .await;
    let (_, _, page) = s.get("/").await;
    assert!(page.contains(r#"data-mode="events""#), "the status page says events");
    assert!(page.contains("subscribed, receiving"), "{page}");
    s.stop().await;
}

fn gauge(m: &Metrics, name: &str) -> Option<f64> {
    m.get(name, &[("target", "main")])
}

/// Subscribed, but `lockwatch_notifications_connected` says nothing arrives.
fn not_receiving(m: &Metrics) -> bool {
    gauge(m, "lockwatch_notifications_subscribed") == Some(1.0)
        && gauge(m, "lockwatch_notifications_connected") == Some(0.0)
}

fn receiving(m: &Metrics) -> bool {
    gauge(m, "lockwatch_notifications_subscribed") == Some(1.0)
        && gauge(m, "lockwatch_notifications_connected") == Some(1.0)
}

fn set_flags(c: &mut redis::Connection, flags: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", flags])
        .query(c)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_the_flags_is_not_receiving_until_they_are_back_or_configured() {
    // The flags set at runtime only: a restart forgets them.
    let (mut auto, mut configured) = (redis(&[]), redis(&[]));
    set_flags(&mut conn(&auto), "KEA");
    set_flags(&mut conn(&configured), "KEA");
    let a = Served::start(cfg(&auto.url(), r#"sample_interval = "1s""#)).await;
    let c = Served::start(cfg(
        &configured.url(),
        "sample_interval = \"1s\"\nnotifications = \"configure\"",
    ))
    .await;
    for s in [&a, &c] {
        s.wait_for(Duration::from_secs(10), "receiving", receiving).await;
    }
    auto.restart().unwrap();
    configured.restart().unwrap();
    let took = a
        .wait_for(
            Duration::from_secs(12),
            "not receiving after the restart",
            not_receiving,
        )
        .await;
    assert!(took < Duration::from_secs(10), "{took:?}");
    in_mode(&a, "scan").await;
    // `configure` puts the flags back on the restarted server and receives.
    c.wait_for(Duration::from_secs(10), "receiving after the restart", receiving)
        .await;
    let flags: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "notify-keyspace-events"])
        .query(&mut conn(&configured))
        .unwrap();
    assert!(flags[1].contains('K') && flags[1].contains('x'), "{flags:?}");
    set_px(&mut conn(&configured), "wf:lock:1", "o", 20_000);
    expect(
        &c,
        "a lock taken after the restart, from its notification",
        &[(
            "lockwatch_lock_transitions_total",
            vec![("target", "main"), ("namespace", "wf"), ("kind", "acquired")],
            1.0,
        )],
    )
    .await;
    // The flags back by hand: receiving again.
    set_flags(&mut conn(&auto), "KEA");
    a.wait_for(Duration::from_secs(12), "receiving again", receiving).await;
    in_mode(&a, "events").await;
    a.stop().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_off_where_config_is_denied_never_pass_for_events_mode() {
    let r = redis(&[]);
    let mut admin = conn(&r);
    // A managed Redis: CONFIG refused, and the flags (unknown to lockwatch) off.
    let url = common::user_without_config(&r);
    let s = Served::start(cfg(&url, "sample_interval = \"1s\"")).await;
    for i in 0..3 {
        set_px(&mut admin, &format!("wf:lock:{i}"), "o", 60_000);
    }
    // The canary's round shows nothing arrives: never events mode, the gauges by SCAN.
    s.wait_for(Duration::from_secs(10), "events_missing", |m| {
        not_receiving(m)
            && m.get(
                "lockwatch_notifications_verification",
                &[("target", "main"), ("state", "events_missing")],
            ) == Some(1.0)
    })
    .await;
    expect(
        &s,
        "the locks, found by SCAN",
        &[(
            "lockwatch_locks_held",
            vec![("target", "main"), ("namespace", "wf")],
            3.0,
        )],
    )
    .await;
    assert_eq!(mode(&s.metrics().await, "events"), Some(0.0));
    let (_, _, page) = s.get("/").await;
    assert!(page.contains("no keyspace event of the canary arrived"), "{page}");
    // The flags turned on: the next canary round proves `K$gx` (within its 10 s interval),
    // and a Redisson lock's hash write `h`, which the canary cannot show.
    set_flags(&mut admin, "KEA");
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg("rs:lock:1")
        .arg("a1b2:1")
        .arg(1)
        .cmd("PEXPIRE")
        .arg("rs:lock:1")
        .arg(60_000)
        .query(&mut admin)
        .unwrap();
    s.wait_for(Duration::from_secs(15), "receiving again", |m| {
        receiving(m) && mode(m, "events") == Some(1.0)
    })
    .await;
    expect(
        &s,
        "the locks, in events mode",
        &[(
            "lockwatch_locks_held",
            vec![("target", "main"), ("namespace", "wf")],
            3.0,
        )],
    )
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_of_repeated_pubsub_kills_recovers_within_a_second() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    let s = Served::start(cfg(&r.url(), "")).await;
    s.wait_for(Duration::from_secs(10), "receiving", receiving).await;
    for round in 1..=6 {
        let killed: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "pubsub"])
            .query(&mut admin)
            .unwrap();
        assert_eq!(killed, 1, "round {round}");
        let since = Instant::now();
        loop {
            let n: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut admin).unwrap();
            if n >= 1 && receiving(&s.metrics().await) {
                break;
            }
            assert!(
                since.elapsed() < Duration::from_secs(1),
                "round {round}: not resubscribed within 1 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        eprintln!("round {round}: back in {:?}", since.elapsed());
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_renewing_holder_is_flagged_at_its_mark() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    let toml = r#"
[server]
listen = "127.0.0.1:0"
[[target]]
name = "main"
url = "{url}"
sample_interval = "30s"
sample_budget = "2s"
[[namespace]]
name = "job"
pattern = "job:lock:*"
ttl = "3s"
renew_every = "1s"              # grace 0.5 s: overdue below 3 - 1 - 0.5 = 1.5 s
"#;
    let s = Served::start(config(&r, toml)).await;
    in_mode(&s, "events").await;
    // A real holder process: acquire, then renew every second with compare-and-pexpire.
    let script = format!(
        r#"redis-cli -p {port} SET job:lock:1 holder NX PX 3000 >/dev/null
while true; do
  sleep 1
  redis-cli -p {port} EVAL "{renew}" 1 job:lock:1 holder 3000 >/dev/null
done"#,
        port = r.port(),
        renew = lockwatch::access::scripts::SAFE_RENEW,
    );
    let mut holder = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = holder.id() as i32;
    let job = [("target", "main"), ("namespace", "job")];
    let overdue = |m: &Metrics| m.get("lockwatch_locks_renewal_overdue", &job);
    expect(&s, "held", &[("lockwatch_locks_held", job.to_vec(), 1.0)]).await;
    // Let it renew a few times, healthy all along.
    let healthy_until = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < healthy_until {
        assert_eq!(
            overdue(&s.metrics().await),
            Some(0.0),
            "a renewing holder is not overdue"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Stop the whole holder (the loop and any redis-cli it runs) just after a renewal.
    let before: i64 = admin.pttl("job:lock:1").unwrap();
    loop {
        let p: i64 = admin.pttl("job:lock:1").unwrap();
        if p > before || p > 2900 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGSTOP).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let read_at = Instant::now();
    let pttl: i64 = admin.pttl("job:lock:1").unwrap();
    assert!(pttl > 1500, "stopped before the mark: {pttl} ms left");
    // The mark: when the remaining TTL falls below 1.5 s.
    let mark = read_at + Duration::from_millis((pttl - 1500) as u64);
    let mut flagged = None;
    while Instant::now() < mark + Duration::from_secs(3) {
        let asked = Instant::now();
        if overdue(&s.metrics().await) == Some(1.0) {
            flagged = Some(asked);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGCONT);
    let _ = holder.wait();
    let flagged = flagged.expect("never flagged overdue");
    let late_ms = flagged.saturating_duration_since(mark).as_millis();
    let early_ms = mark.saturating_duration_since(flagged).as_millis();
    eprintln!("flagged {late_ms} ms after the mark ({early_ms} ms before it)");
    assert!(early_ms <= 25, "flagged {early_ms} ms before the mark");
    assert!(late_ms <= 100, "flagged {late_ms} ms after the mark");
    s.stop().await;
}

use std::os::unix::process::CommandExt as _;
