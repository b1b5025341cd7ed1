//! The managed-Redis profiles' harness (tests/managed.rs, and its TLS profile in
//! tests/tls.rs): a real server started with a provider's restrictions (`CONFIG` renamed,
//! ACL users, TLS with a private CA), 35 locks, the exporter; then the mode it reaches and
//! how fast, exact gauges, takeovers and a loss of the flags found within the bound.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use super::pki::Pki;
use super::{Metrics, Served};
use lockwatch::config::{Config, Overrides};

/// `CONFIG` under a name only the test knows: lockwatch meets "unknown command", as on a
/// provider that renamed it away, while the test can still play the provider's console.
pub const SECRET_CONFIG: &str = "provider-console-config";
/// The bound the README states for a canary-verified target: two rounds 10 s apart (a short
/// round after a proven one counts when the next is short too) and the 2 s deadline: 22 s,
/// within the 30 s the design allows.
pub const CANARY_BOUND: Duration = Duration::from_secs(25);
pub const SAMPLE: Duration = Duration::from_secs(1);

/// A read-only monitor user: what serve reads, no `CONFIG`, no write.
pub const READ_ONLY: &[&str] = &[
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

pub struct Profile {
    pub name: &'static str,
    /// redis-server arguments beyond the port.
    pub args: Vec<String>,
    /// ACL rules of the user lockwatch connects as (`None`: the default user).
    pub user: Option<Vec<String>>,
    pub tls: bool,
    /// The verification state and tracking mode lockwatch must reach, and the method.
    pub state: &'static str,
    pub mode: &'static str,
    pub method: &'static str,
}

pub fn renamed_config(flags: &str) -> Vec<String> {
    vec![
        "--rename-command".into(),
        "CONFIG".into(),
        SECRET_CONFIG.into(),
        "--notify-keyspace-events".into(),
        flags.into(),
    ]
}

/// The read-only monitor user's rules and `extra`: the lock keys read-only (`%R~`, or `~`
/// on a server without read-only key patterns: before Redis 7.0).
pub fn rules(extra: &[&str]) -> Vec<String> {
    let mut r: Vec<String> = READ_ONLY.iter().map(|s| s.to_string()).collect();
    r.extend([super::key_rule("wf:lock:*"), "&__keyspace@0__:wf:lock:*".into()]);
    r.extend(extra.iter().map(|s| s.to_string()));
    r
}

/// The test's own connection (the default user), speaking the renamed `CONFIG` when needed.
pub struct Admin {
    pub c: redis::Connection,
    pub config: &'static str,
}

impl Admin {
    pub fn flags(&mut self, flags: &str) {
        let _: () = redis::cmd(self.config)
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query(&mut self.c)
            .unwrap();
    }
    pub fn lock(&mut self, key: &str, owner: &str, px: u64) {
        set_px(&mut self.c, key, owner, px);
    }
    pub fn del(&mut self, key: &str) {
        let _: () = redis::cmd("DEL").arg(key).query(&mut self.c).unwrap();
    }
}

/// `SET key owner PX px` on any connection (a server's, or a cluster's).
pub fn set_px(c: &mut impl redis::ConnectionLike, key: &str, owner: &str, px: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("PX")
        .arg(px)
        .query(c)
        .unwrap();
}

/// The user `lw` (password `pw`) with exactly `rules`.
pub fn acl_user(c: &mut redis::Connection, rules: &[String]) {
    let mut cmd = redis::cmd("ACL");
    // `resetchannels`: Redis 6.2's `reset` leaves every channel allowed, and refuses `&` rules then.
    cmd.arg("SETUSER")
        .arg("lw")
        .arg("reset")
        .arg("resetchannels")
        .arg("on")
        .arg(">pw");
    for rule in rules {
        cmd.arg(rule);
    }
    let _: () = cmd.query(c).unwrap();
}

pub fn gauge(m: &Metrics, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut l = vec![("target", "main")];
    l.extend_from_slice(labels);
    m.get(name, &l)
}

pub fn state_is(m: &Metrics, state: &str) -> bool {
    gauge(m, "lockwatch_notifications_verification", &[("state", state)]) == Some(1.0)
}

/// The verification `state` by `method` (any method when `None`), the tracking `mode`, and the
/// 35 locks every test starts with, held.
pub fn settled(m: &Metrics, state: &str, method: Option<&str>, mode: &str) -> bool {
    state_is(m, state)
        && method.is_none_or(|method| {
            gauge(m, "lockwatch_notifications_verification_method", &[("method", method)]) == Some(1.0)
        })
        && gauge(m, "lockwatch_tracking_mode", &[("mode", mode)]) == Some(1.0)
        && held(m) == Some(35.0)
}

/// The exporter serving a target `main` (its `target` lines) with namespace `wf`.
pub async fn serve_wf(target: &str) -> Served {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[[target]]\nname = \"main\"\n{target}\n\n[[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
    );
    let config = Config::from_toml(&text, "managed.toml", std::path::Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Served::start(config).await
}

pub fn held(m: &Metrics) -> Option<f64> {
    gauge(m, "lockwatch_locks_held", &[("namespace", "wf")])
}

pub async fn run(p: Profile) {
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
    let r = super::redis(&argv);
    let renamed = args.iter().any(|a| a == SECRET_CONFIG);
    let mut admin = Admin {
        c: super::conn(&r),
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
pub async fn change_and_check(s: &Served, admin: &mut Admin, tag: &str, remove: &[&str]) -> bool {
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
pub async fn takeover(s: &Served, admin: &mut Admin) {
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

pub fn profile(name: &'static str, args: Vec<String>, user: Option<Vec<String>>) -> Profile {
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
pub fn short_of_events(name: &'static str, args: Vec<String>) -> Profile {
    Profile {
        state: "events_missing",
        mode: "scan",
        ..profile(name, args, None)
    }
}
