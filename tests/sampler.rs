//! The sampler against a real redis-server: locks of every value kind and every fault
//! class the sampler reports, with exact metric values read back from the exposition.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Metrics, conn, redis};
use lockwatch::locks::TargetLocks;
use lockwatch::metrics::Registry;
use lockwatch::sampler::{Sampler, SamplerMetrics};
use lockwatch::topology::Nodes;
use redis::Commands;

const CONFIG: &str = r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "1s"

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
max_hold = "2s"
value = "json:owner.id"

[[namespace]]
name = "rs"
pattern = "rs:lock:*"
ttl = "30s"
renew_every = "10s"
value = "redisson"
"#;

/// The sampler of `cfg`'s only target, its registry and its lock tables.
fn sampler_of(cfg: &lockwatch::config::Config) -> (Sampler, Registry, Arc<TargetLocks>) {
    let registry = Registry::new().unwrap();
    let metrics = SamplerMetrics::register(&registry, cfg).unwrap();
    let locks = Arc::new(TargetLocks::new(&cfg.targets[0], &cfg.namespaces, false));
    let sampler = Sampler::new(
        &cfg.targets[0],
        locks.clone(),
        metrics,
        Nodes::standalone(&cfg.targets[0]).unwrap(),
    )
    .unwrap();
    (sampler, registry, locks)
}

fn exposition(m: &Registry) -> Metrics {
    Metrics(m.encode().unwrap())
}

#[tokio::test]
async fn exact_metrics_for_every_value_kind_and_fault_class() {
    let r = redis(&[]);
    let mut c = conn(&r);
    // wf (token): fresh, overdue, no TTL, wrong type; two fencing counters.
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("a")
        .arg("PX")
        .arg(29_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("wf:lock:2")
        .arg("b")
        .arg("PX")
        .arg(5_000)
        .query(&mut c)
        .unwrap();
    let _: () = c.set("wf:lock:3", "c").unwrap();
    let _: () = c.hset("wf:lock:4", "f", "v").unwrap();
    let _: () = c.set("wf:fence:1", 10).unwrap();
    let _: () = c.set("wf:fence:2", 5).unwrap();
    // appr (json:owner.id): readable, and a value without the owner field.
    let _: () = redis::cmd("SET")
        .arg("appr:lock:1")
        .arg(r#"{"owner":{"id":"w1"}}"#)
        .arg("PX")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("appr:lock:2")
        .arg("garbage")
        .arg("PX")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    // rs (redisson): a lock hash, and a plain string where a hash belongs.
    let _: () = c
        .hset("rs:lock:1", "8743c9c0-0795-4907-87fd-6c719a6b4586:57", 1)
        .unwrap();
    let _: () = c.pexpire("rs:lock:1", 25_000).unwrap();
    let _: () = c.set("rs:lock:2", "x").unwrap();
    // Keys of no namespace are never read.
    let _: () = c.set("other:key", "x").unwrap();

    let cfg = common::config(&r, CONFIG);
    let (mut sampler, metrics, locks) = sampler_of(&cfg);
    let report = sampler.pass().await;
    assert_eq!(report.error, None);
    assert!(!report.truncated);
    assert_eq!(report.keys_scanned, 10);

    let m = exposition(&metrics);
    let wf = [("target", "main"), ("namespace", "wf")];
    let appr = [("target", "main"), ("namespace", "appr")];
    let rs = [("target", "main"), ("namespace", "rs")];
    assert_eq!(m.val("lockwatch_up", &[("target", "main")]), 1.0);
    assert_eq!(m.val("lockwatch_keys_scanned_total", &[("target", "main")]), 10.0);
    assert_eq!(m.val("lockwatch_sample_passes_total", &[("target", "main")]), 1.0);
    assert_eq!(m.val("lockwatch_sample_errors_total", &[("target", "main")]), 0.0);

    assert_eq!(m.val("lockwatch_locks_held", &wf), 3.0);
    assert_eq!(m.val("lockwatch_locks_without_ttl", &wf), 1.0);
    assert_eq!(m.val("lockwatch_locks_renewal_overdue", &wf), 1.0);
    assert_eq!(
        m.val("lockwatch_locks_unreadable", &[wf[0], wf[1], ("reason", "wrong_type")]),
        1.0
    );
    assert_eq!(m.val("lockwatch_fence_token", &wf), 10.0);
    assert_eq!(m.val("lockwatch_lock_ttl_remaining_seconds_count", &wf), 2.0);
    assert_eq!(
        m.val(
            "lockwatch_lock_ttl_remaining_seconds_bucket",
            &[wf[0], wf[1], ("le", "5")]
        ),
        1.0
    );
    assert_eq!(
        m.val(
            "lockwatch_lock_ttl_remaining_seconds_bucket",
            &[wf[0], wf[1], ("le", "20")]
        ),
        1.0
    );
    assert_eq!(
        m.val(
            "lockwatch_lock_ttl_remaining_seconds_bucket",
            &[wf[0], wf[1], ("le", "30")]
        ),
        2.0
    );
    // wf:lock:2 has 5 s of 30 left: set at least 25 s ago.
    let age = m.val("lockwatch_lock_held_max_seconds", &wf);
    assert!((24.9..26.0).contains(&age), "{age}");

    assert_eq!(m.val("lockwatch_locks_held", &appr), 1.0);
    assert_eq!(
        m.val(
            "lockwatch_locks_unreadable",
            &[appr[0], appr[1], ("reason", "bad_value")]
        ),
        1.0
    );
    assert_eq!(m.val("lockwatch_locks_held_too_long", &appr), 0.0);

    assert_eq!(m.val("lockwatch_locks_held", &rs), 1.0);
    assert_eq!(
        m.val("lockwatch_locks_renewal_overdue", &rs),
        0.0,
        "25 s left is above 15 s"
    );
    assert_eq!(
        m.val("lockwatch_locks_unreadable", &[rs[0], rs[1], ("reason", "wrong_type")]),
        1.0
    );
    assert_eq!(m.val("lockwatch_locks_without_ttl", &rs), 0.0);

    // Second pass: a handoff, a lock gone, a counter backwards, a counter vanished, a hold too long.
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("z")
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    let _: () = c.del("wf:lock:2").unwrap();
    let _: () = c.set("wf:fence:1", 7).unwrap();
    let _: () = c.del("wf:fence:2").unwrap();
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let report = sampler.pass().await;
    assert_eq!(report.error, None);
    let m = exposition(&metrics);
    assert_eq!(m.val("lockwatch_lock_handoffs_total", &wf), 1.0);
    assert_eq!(m.val("lockwatch_locks_held", &wf), 2.0);
    assert_eq!(m.val("lockwatch_locks_renewal_overdue", &wf), 0.0);
    assert_eq!(m.val("lockwatch_fence_token", &wf), 7.0);
    assert_eq!(
        m.val("lockwatch_fence_regressions_total", &wf),
        2.0,
        "one backwards, one vanished"
    );
    assert_eq!(m.val("lockwatch_lock_ttl_remaining_seconds_count", &wf), 3.0);
    assert_eq!(m.val("lockwatch_locks_held_too_long", &appr), 1.0);
    let age = m.val("lockwatch_lock_held_max_seconds", &appr);
    assert!((2.2..4.0).contains(&age), "{age}");
    assert_eq!(m.val("lockwatch_lock_handoffs_total", &appr), 0.0);
    // State is dropped with the key.
    let state = locks.clone();
    assert!(state.namespaces[0].table().lock(b"wf:lock:2").is_none());
    assert_eq!(state.namespaces[0].table().len(), 2);
}

#[tokio::test]
async fn passes_cut_by_the_budget_resume_and_reach_every_namespace() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("SET")
            .arg(format!("wf:lock:{i}"))
            .arg("t")
            .arg("PX")
            .arg(60_000)
            .ignore();
    }
    for i in 0..3 {
        pipe.cmd("SET")
            .arg(format!("b:lock:{i}"))
            .arg("t")
            .arg("PX")
            .arg(60_000)
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let cfg = common::config(
        &r,
        "[[target]]\nname = \"main\"\nurl = \"{url}\"\nscan_count = 10\nsample_budget = \"20ms\"\n\
         [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"60s\"\n\
         [[namespace]]\nname = \"b\"\npattern = \"b:lock:*\"\nttl = \"60s\"\n",
    );
    let (mut sampler, metrics, locks) = sampler_of(&cfg);
    let report = sampler.pass().await;
    assert!(report.truncated, "{report:?}");
    assert_eq!(report.error, None);
    let m = exposition(&metrics);
    assert_eq!(m.val("lockwatch_sample_truncated_total", &[("target", "main")]), 1.0);
    assert_eq!(
        m.val("lockwatch_up", &[("target", "main")]),
        1.0,
        "a truncated pass is not a failed one"
    );
    assert_eq!(
        m.val("lockwatch_locks_held", &[("namespace", "wf")]),
        0.0,
        "no partial gauges"
    );

    let held = |m: &Metrics, ns: &str| m.val("lockwatch_locks_held", &[("namespace", ns)]);
    let mut passes = 1;
    let mut scanned = report.keys_scanned;
    loop {
        let m = exposition(&metrics);
        if held(&m, "wf") == 20_000.0 && held(&m, "b") == 3.0 {
            break;
        }
        assert!(passes < 2_000, "the walk never completed:\n{}", m.0);
        scanned += sampler.pass().await.keys_scanned;
        passes += 1;
    }
    assert!(passes > 1, "the budget should have cut the first pass");
    let m = exposition(&metrics);
    assert_eq!(
        m.val("lockwatch_keys_scanned_total", &[("target", "main")]),
        scanned as f64
    );

    // Keys deleted now are dropped when the next cycle, however many passes long, completes.
    let _: () = c
        .del(&["wf:lock:1", "wf:lock:2", "wf:lock:3", "wf:lock:4", "wf:lock:5"])
        .unwrap();
    let mut more = 0;
    while held(&exposition(&metrics), "wf") != 19_995.0 {
        assert!(more < 2_000, "deleted keys were never dropped");
        sampler.pass().await;
        more += 1;
    }
    assert_eq!(locks.namespaces[0].table().len(), 19_995);
}

#[tokio::test]
async fn redis_down_at_start_is_a_failed_pass_not_a_crash() {
    let port = lockwatch::access::child::free_port().unwrap();
    let text = format!(
        "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:{port}/0\"\n[[namespace]]\nname = \"wf\"\npattern = \"wf:*\"\nttl = \"5s\"\n"
    );
    let cfg = lockwatch::config::Config::from_toml(&text, "t", std::path::Path::new("."), &Default::default()).unwrap();
    let (mut sampler, metrics, _locks) = sampler_of(&cfg);
    let report = sampler.pass().await;
    assert!(
        report
            .error
            .as_deref()
            .is_some_and(|e| e.contains(&format!("node 127.0.0.1:{port}: Connection refused"))),
        "{report:?}"
    );
    let m = exposition(&metrics);
    assert_eq!(m.val("lockwatch_up", &[("target", "main")]), 0.0);
    assert_eq!(m.val("lockwatch_sample_errors_total", &[("target", "main")]), 1.0);
}
