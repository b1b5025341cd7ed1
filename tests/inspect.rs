//! `lockwatch inspect` (the binary) against a real redis-server and a running exporter:
//! a key's owner, TTL verdict, fence and history; a namespace's locks in order; exit codes.
//! Also `serve` refusing to start under `notifications = "require"`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{Served, config, conn, redis};
use redis::Commands;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

const TOML: &str = r#"
[server]
listen = "127.0.0.1:0"
[[target]]
name = "main"
url = "{url}"
sample_interval = "200ms"
sample_budget = "150ms"
[[namespace]]
name = "wf"
pattern = "wf:lock:*"
fence_pattern = "wf:fence:*"
ttl = "30s"
renew_every = "10s"
[[namespace]]
name = "other"
pattern = "ot:lock:*"
ttl = "5s"
"#;

fn inspect(cfg: &str, args: &[&str]) -> (Option<i32>, String) {
    let out: Output = Command::new(BIN)
        .arg("inspect")
        .args(["-c", cfg])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_a_key_and_a_namespace() {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let text = TOML.replace("{url}", &r.url());
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("lockwatch.toml");
    std::fs::write(&cfg, &text).unwrap();
    let cfg = cfg.to_str().unwrap();
    let s = Served::start(config(&r, TOML)).await;
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
    let exporter = format!("http://{}", s.addr);
    let mut c = conn(&r);

    // A healthy lock with a fencing token, an overdue one, one without TTL.
    let _: () = redis::cmd("SET")
        .arg(&["wf:lock:7", "tok-seven", "NX", "PX", "29000"])
        .query(&mut c)
        .unwrap();
    let _: () = c.set("wf:fence:7", 41).unwrap();
    let _: () = redis::cmd("SET")
        .arg(&["wf:lock:8", "tok-eight", "NX", "PX", "4000"])
        .query(&mut c)
        .unwrap();
    let _: () = c.set("wf:lock:9", "tok-nine").unwrap();
    s.wait_for(Duration::from_secs(5), "three acquisitions", |m| {
        m.get(
            "lockwatch_lock_transitions_total",
            &[("namespace", "wf"), ("kind", "acquired")],
        ) == Some(3.0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (code, out) = inspect(cfg, &["wf:lock:7", "--exporter", &exporter]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("namespace  wf  (ttl 30s, renewed every 10s, overdue below 15s)"),
        "{out}"
    );
    assert!(out.contains("owner      <redacted> (9 bytes"), "{out}");
    assert!(!out.contains("tok-seven"), "owners are redacted by default: {out}");
    assert!(out.contains("of 30s  ok"), "{out}");
    assert!(out.contains("fence      wf:fence:7 = 41"), "{out}");
    assert!(out.contains("recent lifecycle (from"), "{out}");
    assert!(out.contains(" acquired  owner "), "{out}");

    let (code, out) = inspect(cfg, &["wf:lock:8", "--exporter", &exporter, "--show-owner"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("owner      tok-eight"), "{out}");
    assert!(out.contains("OVERDUE: below 15s"), "{out}");

    let (code, out) = inspect(cfg, &["wf:lock:9", "--exporter", &exporter, "--format", "json"]);
    assert_eq!(code, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["standing"], "no_ttl");
    assert_eq!(v["pttl_ms"], -1);
    assert_eq!(v["owner"], "<redacted>");

    // A key that is gone: exit 1, with its lifecycle still shown.
    let _: () = c.del("wf:lock:8").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, out) = inspect(cfg, &["wf:lock:8", "--exporter", &exporter]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does not exist now"), "{out}");
    assert!(out.contains(" released  owner "), "{out}");

    // No exporter: the Redis facts still come, the history says why it is missing.
    let (code, out) = inspect(cfg, &["wf:lock:7", "--exporter", "http://127.0.0.1:1"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no exporter answers there"), "{out}");

    // The namespace: no TTL first, then the least time left; counts on top.
    let _: () = redis::cmd("SET")
        .arg(&["wf:lock:8", "tok-eight", "NX", "PX", "4000"])
        .query(&mut c)
        .unwrap();
    let (code, out) = inspect(cfg, &["--namespace", "wf"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("3 held · 1 OVERDUE · 1 WITHOUT TTL · 0 unreadable"),
        "{out}"
    );
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|w| w.starts_with("wf:lock:"))
        .collect();
    assert_eq!(order, ["wf:lock:9", "wf:lock:8", "wf:lock:7"], "{out}");
    let (_, out) = inspect(cfg, &["--namespace", "wf", "--limit", "1"]);
    assert!(out.contains("(showing 1 of 3"), "{out}");

    // Usage errors exit 2 and say what is wrong.
    let (code, out) = inspect(cfg, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("give a KEY or --namespace"), "{out}");
    let (code, out) = inspect(cfg, &["--namespace", "nope"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("no namespace `nope`"), "{out}");
    let (code, out) = inspect(cfg, &["wf:lock:7", "--namespace", "other"]);
    assert_eq!(code, Some(2), "{out}");
    // Redis down: exit 1, one sentence.
    drop(r);
    let (code, out) = inspect(cfg, &["wf:lock:7"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("lockwatch: target main"), "{out}");
    s.stop().await;
}

#[test]
fn serve_refuses_to_start_when_required_notifications_are_off() {
    let r = redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("lockwatch.toml");
    let text = TOML.replace("{url}", &r.url()).replace(
        "sample_budget = \"150ms\"",
        "sample_budget = \"150ms\"\nnotifications = \"require\"",
    );
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new(BIN)
        .args(["serve", "-c", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("lockwatch: target main: keyspace notifications are required")
            && err.contains("redis-cli CONFIG SET notify-keyspace-events 'Kg$xe'"),
        "{err}"
    );
}
