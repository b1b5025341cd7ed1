//! `lockwatch advise` on a recorded workload: a real redis-server, `lockwatch serve`, and
//! renewing holders of a 1 s lock, some of which stall between renewals — one past the TTL,
//! so another worker takes its lock over. Advise must recommend a `ttl` and `renew_every`
//! that the stalls it saw would not have outlasted, say fencing is needed, give a TOML
//! snippet the config accepts, and say "not enough data" for a namespace nobody used.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Served, redis};
use lockwatch::access::scripts::{SAFE_RELEASE, SAFE_RENEW};

const CONFIG: &str = r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "200ms"
[[namespace]]
name = "batch"
pattern = "batch:lock:*"
ttl = "1s"
renew_every = "250ms"
[[namespace]]
name = "idle"
pattern = "idle:lock:*"
ttl = "10s"
"#;

/// The pause each holder takes once, after its first renewal; the last is past the TTL.
const STALLS_MS: [u64; 6] = [0, 0, 300, 450, 550, 1600];
const RENEW_EVERY_MS: u64 = 250;

type Conn = redis::aio::MultiplexedConnection;

async fn set_nx(c: &mut Conn, key: &str, token: &str) -> bool {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(1000)
        .query_async(c)
        .await
        .unwrap();
    set.is_some()
}

/// One holder: acquire, renew every 250 ms four times with one stall of `stall_ms` after the
/// first renewal, release. Returns whether it kept its lock to the end.
async fn holder(mut c: Conn, key: String, stall_ms: u64) -> bool {
    let (renew, release) = (redis::Script::new(SAFE_RENEW), redis::Script::new(SAFE_RELEASE));
    assert!(set_nx(&mut c, &key, "A").await, "{key} was taken");
    for i in 0..4 {
        tokio::time::sleep(Duration::from_millis(
            RENEW_EVERY_MS + if i == 1 { stall_ms } else { 0 },
        ))
        .await;
        let renewed: i64 = renew.key(&key).arg("A").arg(1000).invoke_async(&mut c).await.unwrap();
        if renewed == 0 {
            return false;
        }
    }
    let released: i64 = release.key(&key).arg("A").invoke_async(&mut c).await.unwrap();
    released == 1
}

fn advise(config: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .arg("advise")
        .arg("-c")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    (stdout, stderr)
}

fn secs(d: &str) -> f64 {
    common::duration(d).as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advise_recommends_settings_the_stalls_seen_would_not_have_beaten() {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwatch.toml");
    std::fs::write(&path, CONFIG.replace("{url}", &r.url())).unwrap();
    let s = Served::start(common::config(&r, CONFIG)).await;
    s.wait_for(Duration::from_secs(10), "events mode", |m| {
        m.get("lockwatch_tracking_mode", &[("target", "main"), ("mode", "events")]) == Some(1.0)
    })
    .await;
    let exporter = format!("http://{}", s.addr);

    // Before any lock was used: nothing to go by, for either namespace.
    let (text, _) = advise(&path, &["--exporter", &exporter]);
    assert_eq!(text.matches("not enough data: 0 holds ended").count(), 2, "{text}");
    assert!(text.contains("No recommendation"), "{text}");

    // Two rounds of six holders at once; in each, the holder that stalls 1.6 s loses its lock
    // and another worker takes it over.
    let client = redis::Client::open(r.url()).unwrap();
    for round in 0..2 {
        let mut tasks = Vec::new();
        for (i, stall) in STALLS_MS.iter().enumerate() {
            let c = client.get_multiplexed_async_connection().await.unwrap();
            tasks.push(tokio::spawn(holder(c, format!("batch:lock:{round}-{i}"), *stall)));
        }
        let lost = format!("batch:lock:{round}-{}", STALLS_MS.len() - 1);
        let mut b = client.get_multiplexed_async_connection().await.unwrap();
        let taken = async {
            // Once A holds it: B keeps trying, and gets it the moment it expires.
            tokio::time::sleep(Duration::from_millis(500)).await;
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if set_nx(&mut b, &lost, "B").await {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), taken).await.unwrap();
        let kept: Vec<bool> = all_kept(tasks).await;
        assert_eq!(
            kept.iter().filter(|k| !**k).count(),
            1,
            "exactly the long stall loses: {kept:?}"
        );
    }
    s.wait_for(Duration::from_secs(5), "2 takeovers", |m| {
        m.get("lockwatch_lock_expiry_takeovers_total", &[("namespace", "batch")]) == Some(2.0)
    })
    .await;

    let (json, _) = advise(
        &path,
        &["--exporter", &exporter, "--format", "json", "--namespace", "batch"],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let batch = &v["namespaces"][0];
    assert_eq!(batch["namespace"], "batch", "{v}");
    assert_eq!(batch["seen"]["takeovers"], 2.0, "{v}");
    let rec = &batch["recommended"];
    let ttl = secs(rec["ttl"]["value"].as_str().unwrap());
    let every = secs(rec["renew_every"]["value"].as_str().unwrap());
    let longest_stall = STALLS_MS.iter().max().copied().unwrap() as f64 / 1000.0;
    // A holder that renewed at t and stalls S before its next renewal (due at t + every) keeps
    // its lock while every + S < ttl: the stall that lost it would not have with these.
    assert!(ttl - every > longest_stall, "ttl {ttl} renewed every {every}: {v}");
    assert!(ttl > 1.0 && every <= ttl / 3.0, "{v}");
    assert_eq!(rec["fencing_needed"], true, "{v}");
    for why in ["ttl", "renew_every", "renew_grace"] {
        assert!(!rec[why]["why"].as_str().unwrap().is_empty(), "{why}: {v}");
    }

    // The TOML snippet, merged with the namespace's pattern, is a config lockwatch accepts.
    let (snippet, _) = advise(&path, &["--exporter", &exporter, "--format", "toml"]);
    assert!(
        snippet.contains("name = \"batch\"") && !snippet.contains("\"idle\""),
        "{snippet}"
    );
    let merged = format!(
        "[[target]]\nname = \"t\"\nurl = \"redis://127.0.0.1:1\"\n{}",
        snippet.replace("name = \"batch\"", "name = \"batch\"\npattern = \"batch:lock:*\"")
    );
    let cfg = lockwatch::config::Config::from_toml(&merged, "advised.toml", Path::new("."), &Default::default())
        .unwrap_or_else(|e| panic!("{e}\n{merged}"));
    assert_eq!(cfg.namespaces[0].ttl.as_secs_f64(), ttl);

    // The text says what was seen, and still "not enough data" for the idle namespace.
    let (text, _) = advise(&path, &["--exporter", &exporter]);
    for want in [
        "namespace batch",
        "takeovers 2",
        "longest stall",
        "recommended",
        "fencing",
    ] {
        assert!(text.contains(want), "no {want} in:\n{text}");
    }
    let idle = text.split("namespace idle").nth(1).unwrap();
    assert!(idle.contains("not enough data: 0 holds ended and 0 renewals"), "{text}");
    s.stop().await;
}

async fn all_kept(tasks: Vec<tokio::task::JoinHandle<bool>>) -> Vec<bool> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, CONFIG.replace("{url}", "redis://127.0.0.1:1")).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lockwatch"))
            .arg("advise")
            .arg("-c")
            .arg(&path)
            .args(args)
            .output()
            .unwrap()
    };
    let none = run(&[]);
    assert_eq!(none.status.code(), Some(2));
    let both = run(&["--prometheus", "http://x", "--exporter", "http://y"]);
    assert_eq!(both.status.code(), Some(2));
    let window = run(&["--prometheus", "http://127.0.0.1:1", "--window", "7"]);
    assert_eq!(window.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&window.stderr).contains("--window `7`"));
    let ns = run(&["--exporter", "http://127.0.0.1:1", "--namespace", "nope"]);
    assert_eq!(ns.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&ns.stderr).contains("no namespace `nope`"));
    let down = run(&["--exporter", "http://127.0.0.1:1"]);
    assert_eq!(down.status.code(), Some(1));
}
