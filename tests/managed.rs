//! Managed Redis, reproduced on real redis-server processes: `CONFIG` renamed away (as on
//! ElastiCache, MemoryDB and Azure) or refused (`NOPERM`, as on Memorystore), the flags a
//! provider's console set — complete, partial, the `Ex` many guides suggest, or none —,
//! read-only ACL users, `PSUBSCRIBE` refused (as on ElastiCache Serverless), and a
//! 3-primary cluster (TLS with a private CA is tests/tls.rs's, on the same harness:
//! `common::managed`). For each profile: the mode lockwatch reaches and how
//! fast, the gauges exact within two sample intervals of a change, expiry takeovers counted
//! wherever events are verified, and flags switched off at runtime found within the bound
//! the README states. Each test prints its row of the profile table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::managed::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_managed_with_config_and_the_flags() {
    run(profile(
        "self-managed (CONFIG, KEA)",
        vec!["--notify-keyspace-events".into(), "KEA".into()],
        None,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_renamed_away_with_the_flags_from_the_console() {
    run(profile(
        "CONFIG unknown, KEA (ElastiCache, MemoryDB, Azure Std/Premium)",
        renamed_config("KEA"),
        None,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_noperm_with_the_flags() {
    let user = Some(vec!["~*".into(), "&*".into(), "+@all".into(), "-config".into()]);
    run(profile(
        "CONFIG NOPERM, Kg$xe (Memorystore)",
        vec!["--notify-keyspace-events".into(), "Kg$xe".into()],
        user,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flags_many_guides_suggest_are_not_enough() {
    run(short_of_events(
        "CONFIG unknown, Ex (guides' flags)",
        renamed_config("Ex"),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_flags_at_all() {
    run(short_of_events(
        "CONFIG unknown, no flags (Azure Basic)",
        renamed_config(""),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_without_expired_are_partial() {
    run(short_of_events("CONFIG unknown, Kg$ (no x)", renamed_config("Kg$"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_user_with_config_get_is_verified_by_the_flags() {
    run(Profile {
        method: "flags",
        ..profile(
            "read-only ACL + CONFIG GET, KEA",
            vec!["--notify-keyspace-events".into(), "KEA".into()],
            Some(rules(&["+config|get"])),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_line_lets_the_canary_prove_them() {
    run(profile(
        "documented ACL line (+set ~lockwatch:canary:*), CONFIG unknown",
        renamed_config("KEA"),
        Some(rules(&[
            "+set",
            "~lockwatch:canary:*",
            "&__keyspace@0__:lockwatch:canary:*",
        ])),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psubscribe_refused_stays_in_scan_mode() {
    let mut args = vec!["--rename-command".into(), "PSUBSCRIBE".into(), "".into()];
    args.extend(renamed_config("KEA"));
    run(Profile {
        state: "pubsub_refused",
        mode: "scan",
        ..profile("PSUBSCRIBE unknown (ElastiCache Serverless)", args, None)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_canary_nor_config_is_verified_passively_and_silence_is_found() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let mut admin = Admin {
        c: common::conn(&r),
        config: "CONFIG",
    };
    acl_user(&mut admin.c, &rules(&[]));
    for i in 0..35 {
        admin.lock(&format!("wf:lock:{i}"), &format!("worker-{i}"), 120_000);
    }
    let s = serve_wf(&format!(
        "url = \"redis://lw:pw@127.0.0.1:{}/0\"\nsample_interval = \"1s\"\nreconcile_interval = \"2s\"",
        r.port()
    ))
    .await;
    // No canary (no write), no CONFIG GET: pending, scan mode, the gauges exact by SCAN.
    let reached = s
        .wait_for(Duration::from_secs(10), "pending, scan mode", |m| {
            settled(m, "pending", Some("passive"), "scan")
        })
        .await;
    // A lock taken: its `set` and `expire` arrive and the owner read agrees: verified.
    let taken = Instant::now();
    admin.lock("wf:lock:p", "worker-p", 120_000);
    s.wait_for(Duration::from_secs(5), "verified passively, events mode", |m| {
        state_is(m, "verified") && gauge(m, "lockwatch_tracking_mode", &[("mode", "events")]) == Some(1.0)
    })
    .await;
    let verified = taken.elapsed();
    assert!(change_and_check(&s, &mut admin, "a", &["wf:lock:30", "wf:lock:31", "wf:lock:32"]).await);
    takeover(&s, &mut admin).await;
    // The flags switched off: lock changes no notification announces are repaired by the
    // reconciling walk, and with not one notification in a check interval: silent.
    let off = Instant::now();
    admin.flags("");
    for i in 0..3 {
        admin.lock(&format!("wf:lock:q{i}"), "quiet", 120_000);
    }
    // The bound the README states for passive evidence: reconcile_interval, a confirming
    // read a second later, and the 5 s check.
    s.wait_for(Duration::from_secs(20), "silent, scan mode", |m| {
        state_is(m, "silent") && gauge(m, "lockwatch_tracking_mode", &[("mode", "scan")]) == Some(1.0)
    })
    .await;
    let loss = off.elapsed();
    assert!(change_and_check(&s, &mut admin, "b", &["wf:lock:a0", "wf:lock:a1", "wf:lock:a2"]).await);
    println!(
        "| read-only ACL, no CONFIG, no canary (ElastiCache RBAC read-only) | scan (pending, passive) → events after the first lock ({:.1} s) | {:.1} s | yes | {:.1} s (silent) |",
        verified.as_secs_f64(),
        reached.as_secs_f64(),
        loss.as_secs_f64()
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_primary_cluster_proves_each_primary_and_names_the_one_that_loses_its_flags() {
    use common::topo::{Cluster, cli_at};
    let c = Cluster::start();
    // A managed cluster's user: everything but CONFIG, on every node (ACLs are per node).
    for n in c
        .primaries()
        .into_iter()
        .chain(c.replicas().into_iter().map(|(r, _)| r))
    {
        cli_at(
            n,
            &["ACL", "SETUSER", "lw", "on", ">pw", "~*", "&*", "+@all", "-config"],
        );
    }
    let mut cc = c.client();
    for i in 0..35 {
        set_px(&mut cc, &format!("wf:lock:{i}"), &format!("worker-{i}"), 120_000);
    }
    let seed = c.seed().replace("redis://", "redis://lw:pw@");
    let s = serve_wf(&format!(
        "mode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\""
    ))
    .await;
    let reached = s
        .wait_for(Duration::from_secs(20), "verified on every primary, events mode", |m| {
            settled(m, "verified", Some("canary"), "events")
        })
        .await;
    // A change, then a takeover, through the cluster.
    let changed = Instant::now();
    for i in 0..5 {
        set_px(&mut cc, &format!("wf:lock:a{i}"), "new", 120_000);
    }
    for i in 30..33 {
        let _: () = redis::cmd("DEL").arg(format!("wf:lock:{i}")).query(&mut cc).unwrap();
    }
    s.wait_for(Duration::from_secs(10), "held 37", |m| held(m) == Some(37.0))
        .await;
    let exact = changed.elapsed() <= SAMPLE * 2 + Duration::from_secs(1);
    set_px(&mut cc, "wf:lock:t", "stalled", 300);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: Option<String> = redis::cmd("SET")
        .arg("wf:lock:t")
        .arg("taker")
        .arg("NX")
        .arg("PX")
        .arg(60_000)
        .query(&mut cc)
        .unwrap();
    s.wait_for(Duration::from_secs(5), "one expiry takeover", |m| {
        gauge(m, "lockwatch_lock_expiry_takeovers_total", &[("namespace", "wf")]) == Some(1.0)
    })
    .await;
    // One primary's flags switched off: found within the bound, that primary named.
    let lost = c.primaries()[1];
    let off = Instant::now();
    cli_at(lost, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    s.wait_for(CANARY_BOUND, "events_missing, scan mode", |m| {
        state_is(m, "events_missing") && gauge(m, "lockwatch_tracking_mode", &[("mode", "scan")]) == Some(1.0)
    })
    .await;
    let loss = off.elapsed();
    let (_, _, page) = s.get("/").await;
    assert!(
        page.contains(&format!("127.0.0.1:{lost}: ")),
        "the primary is named: {page}"
    );
    let before = held(&s.metrics().await).unwrap();
    for i in 0..3 {
        set_px(&mut cc, &format!("wf:lock:b{i}"), "new", 120_000);
    }
    s.wait_for(Duration::from_secs(10), "exact in scan mode", |m| {
        held(m) == Some(before + 3.0)
    })
    .await;
    println!(
        "| cluster, 3 primaries, CONFIG NOPERM, KEA | events (verified, canary) | {:.1} s | {} | {:.1} s (one primary) |",
        reached.as_secs_f64(),
        if exact { "yes" } else { "no" },
        loss.as_secs_f64()
    );
    s.stop().await;
}

/// `check-config --connect` against `args`' server as `user` (default user when `None`),
/// with `extra` target lines: exit code and output.
fn check_config(args: &[String], user: Option<&[String]>, extra: &str) -> (Option<i32>, String) {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = common::redis(&argv);
    let auth = match user {
        Some(rules) => {
            acl_user(&mut common::conn(&r), rules);
            "lw:pw@"
        }
        None => "",
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwatch.toml");
    let seed = format!("redis://{auth}127.0.0.1:{}/0", r.port());
    let target = match extra {
        "cluster" => format!("mode = \"cluster\"\nnodes = [\"{seed}\"]"),
        _ => format!("url = \"{seed}\""),
    };
    std::fs::write(
        &path,
        format!("[[target]]\nname = \"main\"\n{target}\n\n[[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args(["check-config", "--connect", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    (out.status.code(), common::output_text(&out))
}

#[test]
fn check_config_says_what_each_provider_refusal_means() {
    let flags = |f: &str| vec!["--notify-keyspace-events".to_string(), f.to_string()];
    // CONFIG renamed away, the flags set in the console: the canary proves them.
    let (code, out) = check_config(&renamed_config("KEA"), None, "");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("CONFIG is not available here") && out.contains("ElastiCache"),
        "{out}"
    );
    assert!(out.contains("✓ notifications: the canary proved them"), "{out}");
    assert!(out.contains("tracking: events"), "{out}");
    // The guides' `Ex`: nothing on the keyspace channels; scan mode, the line to set.
    let (code, out) = check_config(&renamed_config("Ex"), None, "");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("lacks `K`") && out.contains("set notify-keyspace-events to 'Kg$xe'"),
        "{out}"
    );
    assert!(out.contains("tracking: scan"), "{out}");
    // No `x`: expiries and takeovers unseen, named.
    let (_, out) = check_config(&renamed_config("Kg$"), None, "");
    assert!(
        out.contains("lacks `x` (no `expired`: expiries, and so takeovers, unseen)"),
        "{out}"
    );
    assert!(out.contains("tracking: scan"), "{out}");
    // NOPERM on CONFIG, as Memorystore answers.
    let all_but_config: Vec<String> = ["~*", "&*", "+@all", "-config"].map(String::from).into();
    let (code, out) = check_config(&flags("KEA"), Some(&all_but_config), "");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Memorystore answers NOPERM"), "{out}");
    assert!(out.contains("✓ notifications: the canary proved them"), "{out}");
    // A read-only user: no canary; verified by the flags, and the grant named — but on a
    // server without read-only key patterns (6.2), where the canary's `+set` would reach
    // the lock keys, why the line leaves it out.
    let (code, out) = check_config(&flags("KEA"), Some(&rules(&["+config|get"])), "");
    assert_eq!(code, Some(0), "{out}");
    let why = match common::build().server.read_only_key_patterns() {
        true => "(grant `&__keyspace@0__:lockwatch:canary:*`)",
        false => "the Redis 6.2 line leaves it out",
    };
    assert!(
        out.contains("the canary cannot run")
            && out.contains("serve verifies by the flags CONFIG GET reads")
            && out.contains(why),
        "{out}"
    );
    // No pub/sub at all.
    let mut no_pubsub = vec!["--rename-command".to_string(), "PSUBSCRIBE".into(), "".into()];
    no_pubsub.extend(flags("KEA"));
    let (code, out) = check_config(&no_pubsub, None, "");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PSUBSCRIBE is not available here") && out.contains("scan mode"),
        "{out}"
    );
    // mode = "cluster" on an endpoint without cluster commands (a proxy, or a plain server).
    let (code, out) = check_config(&flags("KEA"), None, "cluster");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("use mode = \"standalone\""), "{out}");
}
