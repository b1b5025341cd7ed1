//! Managed Redis, reproduced on real redis-server processes: `CONFIG` renamed away (as on
//! ElastiCache, MemoryDB and Azure) or refused (`NOPERM`, as on Memorystore), the flags a
//! provider's console set — complete, partial, the `Ex` many guides suggest, or none —,
//! read-only ACL users, `PSUBSCRIBE` refused (as on ElastiCache Serverless), TLS with a
//! private CA, and a 3-primary cluster. For each profile: the mode lockwatch reaches and how
//! fast, the gauges exact within two sample intervals of a change, expiry takeovers counted
//! wherever events are verified, and flags switched off at runtime found within the bound
//! the README states. Each test prints its row of the profile table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::pki::Pki;
use common::{Metrics, Served};
use lockwatch::config::{Config, Overrides};

/// `CONFIG` under a name only the test knows: lockwatch meets "unknown command", as on a
/// provider that renamed it away, while the test can still play the provider's console.
const SECRET_CONFIG: &str = "provider-console-config";
/// The bound the README states for a canary-verified target: two rounds 10 s apart (a short
/// round after a proven one counts when the next is short too) and the 2 s deadline: 22 s,
/// within the 30 s the design allows.
const CANARY_BOUND: Duration = Duration::from_secs(25);
const SAMPLE: Duration = Duration::from_secs(1);

/// A read-only monitor user: what serve reads, no `CONFIG`, no write.
const READ_ONLY: &[&str] = &[
    "-@all",
    "+ping",
    "+info",
    "+scan",
    "+multi",
    "+exec",
    "+mget",
    "+pttl",
    "+type",
    "+get",
    "+psubscribe",
];

struct Profile {
    name: &'static str,
    /// redis-server arguments beyond the port.
    args: Vec<String>,
    /// ACL rules of the user lockwatch connects as (`None`: the default user).
    user: Option<Vec<String>>,
    tls: bool,
    /// The verification state and tracking mode lockwatch must reach, and the method.
    state: &'static str,
    mode: &'static str,
    method: &'static str,
}

fn renamed_config(flags: &str) -> Vec<String> {
    vec![
        "--rename-command".into(),
        "CONFIG".into(),
        SECRET_CONFIG.into(),
        "--notify-keyspace-events".into(),
        flags.into(),
    ]
}

fn rules(extra: &[&str]) -> Vec<String> {
    let mut r: Vec<String> = READ_ONLY.iter().map(|s| s.to_string()).collect();
    r.extend(["%R~wf:lock:*", "&__keyspace@0__:wf:lock:*"].map(String::from));
    r.extend(extra.iter().map(|s| s.to_string()));
    r
}

/// The test's own connection (the default user), speaking the renamed `CONFIG` when needed.
struct Admin {
    c: redis::Connection,
    config: &'static str,
}

impl Admin {
    fn flags(&mut self, flags: &str) {
        let _: () = redis::cmd(self.config)
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query(&mut self.c)
            .unwrap();
    }
    fn lock(&mut self, key: &str, owner: &str, px: u64) {
        set_px(&mut self.c, key, owner, px);
    }
    fn del(&mut self, key: &str) {
        let _: () = redis::cmd("DEL").arg(key).query(&mut self.c).unwrap();
    }
}

/// `SET key owner PX px` on any connection (a server's, or a cluster's).
fn set_px(c: &mut impl redis::ConnectionLike, key: &str, owner: &str, px: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("PX")
        .arg(px)
        .query(c)
        .unwrap();
}

/// The user `lw` (password `pw`) with exactly `rules`.
fn acl_user(c: &mut redis::Connection, rules: &[String]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg("lw").arg("reset").arg("on").arg(">pw");
    for rule in rules {
        cmd.arg(rule);
    }
    let _: () = cmd.query(c).unwrap();
}

fn gauge(m: &Metrics, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut l = vec![("target", "main")];
    l.extend_from_slice(labels);
    m.get(name, &l)
}

fn state_is(m: &Metrics, state: &str) -> bool {
    gauge(m, "lockwatch_notifications_verification", &[("state", state)]) == Some(1.0)
}

/// The verification `state` by `method` (any method when `None`), the tracking `mode`, and the
/// 35 locks every test starts with, held.
fn settled(m: &Metrics, state: &str, method: Option<&str>, mode: &str) -> bool {
    state_is(m, state)
        && method.is_none_or(|method| {
            gauge(m, "lockwatch_notifications_verification_method", &[("method", method)]) == Some(1.0)
        })
        && gauge(m, "lockwatch_tracking_mode", &[("mode", mode)]) == Some(1.0)
        && held(m) == Some(35.0)
}

/// The exporter serving a target `main` (its `target` lines) with namespace `wf`.
async fn serve_wf(target: &str) -> Served {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[[target]]\nname = \"main\"\n{target}\n\n[[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
    );
    let config = Config::from_toml(&text, "managed.toml", std::path::Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Served::start(config).await
}

fn held(m: &Metrics) -> Option<f64> {
    gauge(m, "lockwatch_locks_held", &[("namespace", "wf")])
}

async fn run(p: Profile) {
    let pki = p.tls.then(Pki::new);
    let tls_port = lockwatch::access::child::free_port().unwrap();
    let mut args: Vec<String> = p.args.clone();
    if let Some(pki) = &pki {
        args.extend([
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            pki.path("node.pem"),
            "--tls-key-file".into(),
            pki.path("node.key"),
            "--tls-ca-cert-file".into(),
            pki.path("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = common::redis(&argv);
    let renamed = args.iter().any(|a| a == SECRET_CONFIG);
    let mut admin = Admin {
        c: common::conn(&r),
        config: if renamed { SECRET_CONFIG } else { "CONFIG" },
    };
    let (scheme, port) = match &pki {
        Some(_) => ("rediss", tls_port),
        None => ("redis", r.port()),
    };
    let auth = match &p.user {
        Some(rules) => {
            acl_user(&mut admin.c, rules);
            "lw:pw@"
        }
        None => "",
    };
    for i in 0..35 {
        admin.lock(&format!("wf:lock:{i}"), &format!("worker-{i}"), 120_000);
    }
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[[target]]\nname = \"main\"\nurl = \"{scheme}://{auth}127.0.0.1:{port}/0\"\nsample_interval = \"1s\"\n{}\n[[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n",
        if pki.is_some() { "tls_ca_file = \"ca.pem\"" } else { "" }
    );
    let dir = pki
        .as_ref()
        .map_or(std::path::PathBuf::from("."), |p| p.dir().to_path_buf());
    let config =
        Config::from_toml(&text, "managed.toml", &dir, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    let s = Served::start(config).await;
    let reached = s
        .wait_for(
            Duration::from_secs(15),
            &format!("{}: {} in {} mode", p.name, p.state, p.mode),
            |m| settled(m, p.state, None, p.mode),
        )
        .await;
    let m = s.metrics().await;
    assert_eq!(
        gauge(
            &m,
            "lockwatch_notifications_verification_method",
            &[("method", p.method)]
        ),
        Some(1.0),
        "{}",
        m.0
    );
    // A change: within two sample intervals the gauges say it, exactly.
    let exact = change_and_check(&s, &mut admin, "a", &["wf:lock:30", "wf:lock:31", "wf:lock:32"]).await;
    // Takeovers wherever events are verified.
    let events = p.mode == "events";
    if events {
        takeover(&s, &mut admin).await;
    }
    // The flags switched off in the provider's console: found within the bound.
    let mut loss = String::from("—");
    if events {
        let off = Instant::now();
        admin.flags("");
        let bound = if p.method == "canary" {
            CANARY_BOUND
        } else {
            Duration::from_secs(20)
        };
        s.wait_for(bound, "the loss found: scan mode", |m| {
            !state_is(m, "verified") && gauge(m, "lockwatch_tracking_mode", &[("mode", "scan")]) == Some(1.0)
        })
        .await;
        loss = format!("{:.1} s", off.elapsed().as_secs_f64());
        let exact = change_and_check(&s, &mut admin, "b", &["wf:lock:a0", "wf:lock:a1", "wf:lock:a2"]).await;
        assert!(exact, "exact in scan mode after the loss");
    }
    println!(
        "| {} | {} ({}, {}) | {:.1} s | {} | {} |",
        p.name,
        p.mode,
        p.state,
        p.method,
        reached.as_secs_f64(),
        if exact { "yes" } else { "no" },
        loss
    );
    s.stop().await;
}

/// Five locks taken (`wf:lock:<tag>0..4`) and `remove` released: `held` says it exactly
/// within two sample intervals (and a second of slack for a loaded machine).
async fn change_and_check(s: &Served, admin: &mut Admin, tag: &str, remove: &[&str]) -> bool {
    let before = held(&s.metrics().await).unwrap();
    for i in 0..5 {
        admin.lock(&format!("wf:lock:{tag}{i}"), "new", 120_000);
    }
    for k in remove {
        admin.del(k);
    }
    let want = before + 5.0 - remove.len() as f64;
    let took = s
        .wait_for(Duration::from_secs(10), &format!("held {want}"), |m| {
            held(m) == Some(want)
        })
        .await;
    took <= SAMPLE * 2 + Duration::from_secs(1)
}

/// An expiry takeover: a lock left to expire, re-acquired by another owner at once.
async fn takeover(s: &Served, admin: &mut Admin) {
    admin.lock("wf:lock:t", "stalled", 300);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: Option<String> = redis::cmd("SET")
        .arg("wf:lock:t")
        .arg("taker")
        .arg("NX")
        .arg("PX")
        .arg(60_000)
        .query(&mut admin.c)
        .unwrap();
    s.wait_for(Duration::from_secs(5), "one expiry takeover", |m| {
        gauge(m, "lockwatch_lock_expiry_takeovers_total", &[("namespace", "wf")]) == Some(1.0)
    })
    .await;
}

fn profile(name: &'static str, args: Vec<String>, user: Option<Vec<String>>) -> Profile {
    Profile {
        name,
        args,
        user,
        tls: false,
        state: "verified",
        mode: "events",
        method: "canary",
    }
}

/// A profile whose canary rounds come short: scan mode, `events_missing`.
fn short_of_events(name: &'static str, args: Vec<String>) -> Profile {
    Profile {
        state: "events_missing",
        mode: "scan",
        ..profile(name, args, None)
    }
}

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
async fn tls_with_a_private_ca_and_config_renamed() {
    run(Profile {
        tls: true,
        ..profile("TLS, private CA, CONFIG unknown, KEA", renamed_config("KEA"), None)
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
    // A read-only user: no canary; verified by the flags, and the grant named.
    let (code, out) = check_config(&flags("KEA"), Some(&rules(&["+config|get"])), "");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("the canary cannot run")
            && out.contains("serve verifies by the flags CONFIG GET reads")
            && out.contains("(grant `&__keyspace@0__:lockwatch:canary:*`)"),
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
