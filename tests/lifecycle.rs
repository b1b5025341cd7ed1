//! The lifecycle watcher against a real redis-server with keyspace notifications: real
//! lock lifecycles (SET NX PX, Lua compare-and-pexpire, Lua compare-and-delete, expiry,
//! takeovers, eviction), the `notifications` policies, a killed subscription, the history API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Metrics, Served, config, conn, redis};
use lockwatch::access::scripts::{SAFE_RELEASE as RELEASE, SAFE_RENEW as RENEW};
use redis::Commands;

const NOTIFY: [&str; 2] = ["--notify-keyspace-events", "KEA"];

fn cfg(extra_target: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
[[target]]
name = "main"
url = "{{url}}"
sample_interval = "200ms"
sample_budget = "150ms"
{extra_target}
[[namespace]]
name = "wf"
pattern = "t:lock:*"
ttl = "1s"
"#
    )
}

fn tr(m: &Metrics, kind: &str) -> f64 {
    m.val(
        "lockwatch_lock_transitions_total",
        &[("namespace", "wf"), ("kind", kind)],
    )
}

fn takeovers(m: &Metrics) -> f64 {
    m.val("lockwatch_lock_expiry_takeovers_total", &[("namespace", "wf")])
}

/// (acquired, released, renewed, expired, evicted)
fn counts(m: &Metrics) -> [f64; 5] {
    ["acquired", "released", "renewed", "expired", "evicted"].map(|k| tr(m, k))
}

async fn subscribed(s: &Served) {
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
}

async fn wait_counts(s: &Served, want: [f64; 5], what: &str) -> Metrics {
    s.wait_for(Duration::from_secs(10), what, |m| counts(m) == want).await;
    // Nothing more trickles in after the expected counts are reached.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = s.metrics().await;
    assert_eq!(counts(&m), want, "{what}: counts moved after settling");
    m
}

fn set_nx_px(c: &mut redis::Connection, key: &str, owner: &str, ms: u64) -> bool {
    let r: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("NX")
        .arg("PX")
        .arg(ms)
        .query(c)
        .unwrap();
    r.is_some()
}

fn bucket(m: &Metrics, end: &str, le: &str) -> f64 {
    m.val(
        "lockwatch_lock_hold_duration_seconds_bucket",
        &[("namespace", "wf"), ("end", end), ("le", le)],
    )
}

async fn wait_gone(c: &mut redis::Connection, key: &str) {
    for _ in 0..200 {
        // EXISTS would expire it lazily; we want Redis's own expiry to be what removes it.
        let pttl: i64 = c.pttl(key).unwrap();
        if pttl == -2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{key} did not expire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_lifecycles_give_exact_transitions_holds_and_takeovers() {
    let r = redis(&NOTIFY);
    let s = Served::start(config(&r, &cfg(""))).await;
    subscribed(&s).await;
    let mut c = conn(&r);
    let release = redis::Script::new(RELEASE);
    let renew = redis::Script::new(RENEW);

    // SET NX PX emits `set` and `expire`: one acquisition, no renewal.
    assert!(set_nx_px(&mut c, "t:lock:a", "A", 1000));
    let m = wait_counts(&s, [1.0, 0.0, 0.0, 0.0, 0.0], "SET NX PX").await;
    assert_eq!(tr(&m, "renewed"), 0.0, "the PX of the acquiring SET is not a renewal");

    // A refused acquire writes nothing.
    assert!(!set_nx_px(&mut c, "t:lock:a", "B", 1000));
    // Compare-and-pexpire by the owner renews; by another owner it is rejected and silent.
    let ok: i64 = renew.key("t:lock:a").arg("A").arg(1000).invoke(&mut c).unwrap();
    assert_eq!(ok, 1);
    let no: i64 = renew.key("t:lock:a").arg("B").arg(1000).invoke(&mut c).unwrap();
    assert_eq!(no, 0);
    // A rejected compare-and-delete writes nothing and changes nothing.
    let no: i64 = release.key("t:lock:a").arg("B").invoke(&mut c).unwrap();
    assert_eq!(no, 0);
    wait_counts(&s, [1.0, 0.0, 1.0, 0.0, 0.0], "renewal and rejected calls").await;

    // Released by its owner after ~300 ms: one hold ending `released`.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ok: i64 = release.key("t:lock:a").arg("A").invoke(&mut c).unwrap();
    assert_eq!(ok, 1);
    let m = wait_counts(&s, [1.0, 1.0, 1.0, 0.0, 0.0], "release").await;
    // At least the 300 ms slept; the settling waits before it can take it near 1 s on a
    // loaded machine, so the upper check leaves room.
    assert_eq!(bucket(&m, "released", "0.25"), 0.0);
    assert_eq!(bucket(&m, "released", "2.5"), 1.0);

    // Expiry under A, then B takes it within one ttl (1s): a takeover.
    assert!(set_nx_px(&mut c, "t:lock:c", "A", 300));
    wait_gone(&mut c, "t:lock:c").await;
    wait_counts(&s, [2.0, 1.0, 1.0, 1.0, 0.0], "expiry").await;
    assert!(set_nx_px(&mut c, "t:lock:c", "B", 60_000));
    s.wait_for(Duration::from_secs(5), "takeover", |m| takeovers(m) == 1.0)
        .await;

    // Expiry under A, re-acquired by A itself: not a takeover.
    assert!(set_nx_px(&mut c, "t:lock:d", "A", 300));
    wait_gone(&mut c, "t:lock:d").await;
    assert!(set_nx_px(&mut c, "t:lock:d", "A", 60_000));
    // Expiry under A, taken by B only after the ttl window: not a takeover.
    assert!(set_nx_px(&mut c, "t:lock:e", "A", 300));
    wait_gone(&mut c, "t:lock:e").await;
    tokio::time::sleep(Duration::from_millis(1400)).await;
    assert!(set_nx_px(&mut c, "t:lock:e", "B", 60_000));
    let m = wait_counts(&s, [7.0, 1.0, 1.0, 3.0, 0.0], "more holds").await;
    assert_eq!(takeovers(&m), 1.0, "same owner or outside the window is no takeover");
    assert_eq!(bucket(&m, "expired", "0.25"), 0.0);
    assert_eq!(bucket(&m, "expired", "1"), 3.0);
    assert_eq!(
        m.val(
            "lockwatch_lock_hold_duration_seconds_count",
            &[("namespace", "wf"), ("end", "expired")]
        ),
        3.0
    );

    // Keys outside every namespace are not watched.
    assert!(set_nx_px(&mut c, "other:lock:z", "A", 1000));
    let _: () = c.del("other:lock:z").unwrap();

    // The history of the taken-over key, oldest first, the takeover marked.
    let (status, _, body) = s.get("/api/v1/locks/history?key=t:lock:c").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["namespace"], "wf");
    let kinds: Vec<&str> = v["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["acquired", "expired", "acquired"], "{body}");
    let t = &v["transitions"];
    assert_eq!(t[2]["takeover"], true);
    assert_eq!(t[0]["owner_hash"], t[1]["owner_hash"]);
    assert_ne!(t[0]["owner_hash"], t[2]["owner_hash"]);
    assert!(t[0]["owner_hash"].is_string(), "{body}");

    let (status, _, body) = s.get("/api/v1/locks/history").await;
    assert_eq!(status, 400);
    assert!(body.contains("missing `key`"), "{body}");
    let (status, _, body) = s.get("/api/v1/locks/history?key=other:lock:z").await;
    assert_eq!(status, 400);
    assert!(body.contains("matches no namespace"), "{body}");
    let m = wait_counts(&s, [7.0, 1.0, 1.0, 3.0, 0.0], "outside keys ignored").await;
    assert_eq!(takeovers(&m), 1.0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_hash_locks_reentry_and_unlock() {
    const LOCK: &str = r#"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
return redis.call('pttl', KEYS[1])"#;
    const UNLOCK: &str = r#"
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local n = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if n > 0 then redis.call('pexpire', KEYS[1], ARGV[1]); return 0 end
redis.call('del', KEYS[1]); return 1"#;
    let r = redis(&NOTIFY);
    let toml = cfg("").replace("ttl = \"1s\"", "ttl = \"1s\"\nvalue = \"redisson\"");
    let s = Served::start(config(&r, &toml)).await;
    subscribed(&s).await;
    let mut c = conn(&r);
    let lock = redis::Script::new(LOCK);
    let unlock = redis::Script::new(UNLOCK);
    let me = "9f0c:1";
    let _: () = lock.key("t:lock:h").arg(5000).arg(me).invoke(&mut c).unwrap();
    wait_counts(&s, [1.0, 0.0, 0.0, 0.0, 0.0], "hash lock").await;
    // Re-entry by the same thread: the PEXPIRE is a renewal, the holder does not change.
    let _: () = lock.key("t:lock:h").arg(5000).arg(me).invoke(&mut c).unwrap();
    // Another thread is refused and writes nothing.
    let _: i64 = lock.key("t:lock:h").arg(5000).arg("other:2").invoke(&mut c).unwrap();
    let _: i64 = unlock.key("t:lock:h").arg(5000).arg(me).invoke(&mut c).unwrap();
    let _: i64 = unlock.key("t:lock:h").arg(5000).arg(me).invoke(&mut c).unwrap();
    let m = wait_counts(&s, [1.0, 1.0, 2.0, 0.0, 0.0], "re-entry and unlock").await;
    assert_eq!(
        m.val(
            "lockwatch_lock_hold_duration_seconds_count",
            &[("namespace", "wf"), ("end", "released")]
        ),
        1.0
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_evicted_under_maxmemory_are_counted_and_their_takeover_seen() {
    let r = redis(&[
        "--notify-keyspace-events",
        "KEA",
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let s = Served::start(config(&r, &cfg(""))).await;
    subscribed(&s).await;
    let mut c = conn(&r);
    let locks: Vec<String> = (0..5).map(|i| format!("t:lock:ev{i}")).collect();
    for k in &locks {
        assert!(set_nx_px(&mut c, k, "A", 60_000));
    }
    wait_counts(&s, [5.0, 0.0, 0.0, 0.0, 0.0], "five locks").await;
    // Let the owner reads land (the API lists a lock once its owner is read), then fill
    // memory with newer keys until every lock is gone.
    let started = std::time::Instant::now();
    loop {
        let (_, _, body) = s.get("/api/v1/locks?namespace=wf").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if v["total"] == 5 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "owners not read: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let filler = vec![b'x'; 64 * 1024];
    let mut i = 0;
    loop {
        let left: usize = locks
            .iter()
            .filter(|k| c.exists::<_, bool>(k.as_str()).unwrap())
            .count();
        if left == 0 {
            break;
        }
        assert!(i < 5000, "locks still present after {i} filler writes");
        let _: () = c.set(format!("fill:{i}"), &filler[..]).unwrap();
        i += 1;
    }
    let m = wait_counts(&s, [5.0, 0.0, 0.0, 0.0, 5.0], "evictions").await;
    assert_eq!(
        m.val(
            "lockwatch_lock_hold_duration_seconds_count",
            &[("namespace", "wf"), ("end", "expired")]
        ),
        0.0,
        "an eviction is not an expiry"
    );
    // Another owner takes an evicted lock within the ttl window: a takeover.
    let _: () = c.del((0..i).map(|n| format!("fill:{n}")).collect::<Vec<_>>()).unwrap();
    assert!(set_nx_px(&mut c, &locks[0], "B", 60_000));
    s.wait_for(Duration::from_secs(5), "takeover of an evicted lock", |m| {
        takeovers(m) == 1.0
    })
    .await;
    s.stop().await;
}

/// The server has lockwatch's pattern subscription again (the kill removed the old one at
/// once, so this cannot see the one from before).
async fn resubscribed(admin: &mut redis::Connection) {
    for _ in 0..200 {
        let n: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(admin).unwrap();
        if n >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("lockwatch did not resubscribe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscription_reconnects_without_inventing_a_takeover() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    // lockwatch's own ACL user, so the test can hold the gap open: while the user is off,
    // established connections keep working and new ones are refused.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "on", ">pw", "~*", "&*", "+@all"])
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://lw:pw@127.0.0.1:{}/0", r.port());
    let toml = cfg("").replace("{url}", &url);
    let s = Served::start(config(&r, &toml)).await;
    subscribed(&s).await;

    // A plain kill: back within the backoff.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    resubscribed(&mut admin).await;
    subscribed(&s).await;

    // A holds k, seen by the watcher.
    assert!(set_nx_px(&mut admin, "t:lock:k", "A", 5000));
    wait_counts(&s, [1.0, 0.0, 0.0, 0.0, 0.0], "A acquires").await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The gap: the subscription is killed and cannot come back; meanwhile A releases and
    // B acquires, unseen.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "off"])
        .query(&mut admin)
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    s.wait_for(Duration::from_secs(5), "disconnected", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(0.0)
    })
    .await;
    let _: () = admin.del("t:lock:k").unwrap();
    assert!(set_nx_px(&mut admin, "t:lock:k", "B", 700));
    // And B takes n, which the watcher will only know from the sampler.
    assert!(set_nx_px(&mut admin, "t:lock:n", "B", 6000));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = s.metrics().await;
    assert_eq!(m.val("lockwatch_notifications_connected", &[("target", "main")]), 0.0);
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "lw", "on"])
        .query(&mut admin)
        .unwrap();
    resubscribed(&mut admin).await;
    subscribed(&s).await;

    // B's lock expires and B takes it again: the watcher must not think A lost it to B.
    wait_gone(&mut admin, "t:lock:k").await;
    assert!(set_nx_px(&mut admin, "t:lock:k", "B", 5000));
    let m = wait_counts(&s, [2.0, 0.0, 0.0, 1.0, 0.0], "after the gap").await;
    assert_eq!(takeovers(&m), 0.0, "no takeover invented from state older than the gap");

    // A real takeover after the gap is still seen.
    assert!(set_nx_px(&mut admin, "t:lock:m", "C", 300));
    wait_gone(&mut admin, "t:lock:m").await;
    assert!(set_nx_px(&mut admin, "t:lock:m", "D", 5000));
    s.wait_for(Duration::from_secs(5), "a real takeover", |m| takeovers(m) == 1.0)
        .await;

    // n was taken in the gap; the sampler's passes since the resubscribe saw B hold it, so
    // when it expires and C takes it, that is a takeover too.
    let passes = s
        .metrics()
        .await
        .val("lockwatch_sample_passes_total", &[("target", "main")]);
    s.wait_for(Duration::from_secs(5), "two more sample passes", |m| {
        m.val("lockwatch_sample_passes_total", &[("target", "main")]) >= passes + 2.0
    })
    .await;
    wait_gone(&mut admin, "t:lock:n").await;
    assert!(set_nx_px(&mut admin, "t:lock:n", "C", 5000));
    s.wait_for(Duration::from_secs(5), "a takeover known from the sampler", |m| {
        takeovers(m) == 2.0
    })
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_refuses_a_server_without_notifications_with_the_fix() {
    let r = redis(&[]);
    let c = config(&r, &cfg(r#"notifications = "require""#));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = lockwatch::serve::run(listener, c, tokio_util::sync::CancellationToken::new())
        .await
        .expect_err("require must refuse to start");
    let msg = err.to_string();
    assert!(
        msg.contains(r#"notifications = "require""#) && msg.contains("CONFIG SET notify-keyspace-events 'Kg$xe'"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_adds_the_flags_and_keeps_those_set() {
    let r = redis(&["--notify-keyspace-events", "Kl"]);
    let s = Served::start(config(&r, &cfg(r#"notifications = "configure""#))).await;
    subscribed(&s).await;
    let mut c = conn(&r);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "notify-keyspace-events"])
        .query(&mut c)
        .unwrap();
    for flag in ['K', 'l', 'g', '$', 'x', 'e'] {
        assert!(got[1].contains(flag), "{flag} missing from {got:?}");
    }
    assert!(set_nx_px(&mut c, "t:lock:q", "A", 1000));
    wait_counts(&s, [1.0, 0.0, 0.0, 0.0, 0.0], "seen once configured").await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_subscribes_where_config_is_denied() {
    let r = redis(&NOTIFY);
    let mut admin = conn(&r);
    let url = common::user_without_config(&r);
    let s = Served::start(config(&r, &cfg("").replace("{url}", &url))).await;
    subscribed(&s).await;
    assert!(set_nx_px(&mut admin, "t:lock:m", "A", 1000));
    wait_counts(&s, [1.0, 0.0, 0.0, 0.0, 0.0], "seen without CONFIG").await;
    let (_, _, page) = s.get("/").await;
    assert!(
        page.contains("verified by the canary") && page.contains("notify-keyspace-events unreadable"),
        "{page}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_exports_no_lifecycle_series() {
    let r = redis(&NOTIFY);
    let s = Served::start(config(&r, &cfg(r#"notifications = "off""#))).await;
    s.wait_for(Duration::from_secs(5), "first pass", |m| {
        m.get("lockwatch_sample_passes_total", &[("target", "main")]) >= Some(1.0)
    })
    .await;
    let m = s.metrics().await;
    assert!(
        m.get("lockwatch_notifications_connected", &[("target", "main")])
            .is_none()
    );
    assert!(!m.0.contains("lockwatch_lock_transitions_total{"));
    s.stop().await;
}
