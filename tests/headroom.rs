//! TTL headroom and renewal intervals from real lock lifecycles: a redis-server with keyspace
//! notifications, `lockwatch serve` in events mode, and holders that renew and release at
//! known moments — one with a TTL longer than the namespace's, one renewing by `SET … XX
//! PX`. Every bucket of both histograms and the near-miss counters must be exactly what
//! those moments give.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Served, config, redis};
use lockwatch::access::scripts::{SAFE_RELEASE, SAFE_RENEW};

const CONFIG: &str = r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "200ms"
sample_budget = "150ms"
[[namespace]]
name = "jobs"
pattern = "jobs:lock:*"
ttl = "2s"
renew_every = "500ms"
"#;

/// The namespace's ttl and the default headroom_fraction: below this much left is a near miss.
const NEAR_MISS_BELOW_S: f64 = 2.0 * 0.2;

async fn connect(r: &lockwatch::access::child::RedisChild) -> redis::aio::MultiplexedConnection {
    redis::Client::open(r.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn acquire(c: &mut redis::aio::MultiplexedConnection, key: &str, token: &str, px: u64) {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(px)
        .query_async(c)
        .await
        .unwrap();
    assert!(set.is_some(), "{key} was not free");
}

async fn renew(c: &mut redis::aio::MultiplexedConnection, key: &str, token: &str) {
    let n: i64 = redis::Script::new(SAFE_RENEW)
        .key(key)
        .arg(token)
        .arg(2000)
        .invoke_async(c)
        .await
        .unwrap();
    assert_eq!(n, 1, "renewal of {key} refused");
}

async fn release(c: &mut redis::aio::MultiplexedConnection, key: &str, token: &str) {
    let n: i64 = redis::Script::new(SAFE_RELEASE)
        .key(key)
        .arg(token)
        .invoke_async(c)
        .await
        .unwrap();
    assert_eq!(n, 1, "release of {key} refused");
}

fn sleep(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headroom_and_renewal_intervals_are_exact_per_bucket() {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let s = Served::start(config(&r, CONFIG)).await;
    // Events mode: the lock table reads every written key, so the real TTL is known.
    s.wait_for(Duration::from_secs(10), "events mode", |m| {
        m.get("lockwatch_tracking_mode", &[("target", "main"), ("mode", "events")]) == Some(1.0)
    })
    .await;

    // a: renewed 300 ms after acquiring (1.7 s left), then 1.8 s later (0.2 s left: a near
    //    miss), released 100 ms after that (1.9 s left).
    // b: set with 6 s, not the namespace's 2 s, released after 0.7 s: 5.3 s of 6 s left.
    // c: renewed by SET XX PX 600 ms in (1.4 s left), released 1.65 s later (0.35 s left: a
    //    near miss).
    let (mut ca, mut cb, mut cc) = (connect(&r).await, connect(&r).await, connect(&r).await);
    let a = async {
        acquire(&mut ca, "jobs:lock:a", "A", 2000).await;
        sleep(300).await;
        renew(&mut ca, "jobs:lock:a", "A").await;
        sleep(1800).await;
        renew(&mut ca, "jobs:lock:a", "A").await;
        sleep(100).await;
        release(&mut ca, "jobs:lock:a", "A").await;
    };
    let b = async {
        acquire(&mut cb, "jobs:lock:b", "B", 6000).await;
        sleep(700).await;
        release(&mut cb, "jobs:lock:b", "B").await;
    };
    let c = async {
        acquire(&mut cc, "jobs:lock:c", "C", 2000).await;
        sleep(600).await;
        let _: () = redis::cmd("SET")
            .arg("jobs:lock:c")
            .arg("C")
            .arg("XX")
            .arg("PX")
            .arg(2000)
            .query_async(&mut cc)
            .await
            .unwrap();
        sleep(1650).await;
        release(&mut cc, "jobs:lock:c", "C").await;
    };
    tokio::join!(a, b, c);

    let ns = [("namespace", "jobs")];
    let kind = |k: &'static str| [("namespace", "jobs"), ("kind", k)];
    s.wait_for(Duration::from_secs(5), "3 renewals and 3 releases", |m| {
        m.get("lockwatch_lock_transitions_total", &kind("renewed")) == Some(3.0)
            && m.get("lockwatch_lock_transitions_total", &kind("released")) == Some(3.0)
    })
    .await;
    let m = s.metrics().await;

    let renewals = [1.7, 0.2, 1.4];
    let releases = [1.9, 5.3, 0.35];
    let intervals = [0.3, 1.8, 0.6];
    for (at, planned) in [("renewal", &renewals[..]), ("release", &releases[..])] {
        let labels = [("namespace", "jobs"), ("at", at)];
        let got = common::buckets(&m, "lockwatch_lock_ttl_headroom_seconds", &labels);
        assert_eq!(got, common::expected_buckets(&got, planned), "headroom at {at}");
        let near = planned.iter().filter(|v| **v < NEAR_MISS_BELOW_S).count() as f64;
        assert_eq!(
            m.val("lockwatch_lock_near_misses_total", &labels),
            near,
            "near misses at {at}"
        );
    }
    let got = common::buckets(&m, "lockwatch_lock_renewal_interval_seconds", &ns);
    assert_eq!(got, common::expected_buckets(&got, &intervals), "renewal intervals");
    // The 6 s lock counted against its own TTL: with the namespace's 2 s it would have
    // shown 1.3 s left, in another bucket.
    let sum = m.val(
        "lockwatch_lock_ttl_headroom_seconds_sum",
        &[("namespace", "jobs"), ("at", "release")],
    );
    let planned: f64 = releases.iter().sum();
    assert!(
        (sum - planned).abs() < 0.15,
        "headroom sum at release {sum}, planned {planned}"
    );
    s.stop().await;
}
