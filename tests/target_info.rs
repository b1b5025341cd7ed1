//! Which server a target is, against the real server the tests start (under `make compat`
//! each build of the matrix reports its own): `lockwatch_target_info{target, server,
//! version, mode}` from `INFO server` (else `HELLO`), equal to what the binary's
//! `--version` says; asked again when the target reconnects, the old series dropped; on
//! the status page's target line, in `/api/v1/status` and in `check-config --connect`.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::Served;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

const CONFIG: &str = "[[target]]\nname = \"main\"\nurl = \"{url}\"\nsample_interval = \"200ms\"\n\
     [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n";

/// Every `lockwatch_target_info` series of target `main`: (server, version, mode).
fn info_series(m: &common::Metrics) -> Vec<(String, String, String)> {
    lockwatch::exposition::samples(&m.0)
        .filter(|s| s.name == "lockwatch_target_info" && s.has_labels(&[("target", "main")]))
        .map(|s| {
            assert_eq!(s.value, 1.0);
            let label = |name: &str| s.label(name).unwrap().to_string();
            (label("server"), label("version"), label("mode"))
        })
        .collect()
}

/// How people write the build: `Redis 7.0.15`, `Valkey 9.1.2`.
fn written(family: &str, version: &str) -> String {
    match family {
        "valkey" => format!("Valkey {version}"),
        _ => format!("Redis {version}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_build_reports_its_own_server_and_version() {
    let (family, version) = common::server_build();
    let r = common::redis(&[]);
    let s = Served::start(common::config(&r, CONFIG)).await;
    let want = (family.clone(), version.clone(), "standalone".to_string());
    s.wait_for(Duration::from_secs(10), "the server's info", |m| {
        info_series(m) == [want.clone()]
    })
    .await;

    let (status, _, page) = s.get("/").await;
    assert_eq!(status, 200);
    let line = format!(
        r#"data-part="server">{}, standalone</span>"#,
        written(&family, &version)
    );
    assert!(page.contains(&line), "no {line} in the status page:\n{page}");
    let (_, _, json) = s.get("/api/v1/status").await;
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    let target = &status["targets"][0];
    assert_eq!(target["topology"], "standalone");
    assert_eq!(
        target["servers"],
        serde_json::json!([{"server": family, "version": version}])
    );
    s.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lockwatch.toml");
    std::fs::write(&file, CONFIG.replace("{url}", &r.url())).unwrap();
    let out = Command::new(BIN)
        .args(["check-config", "--connect", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    let said = format!("✓ target main: reachable, {} (standalone)", written(&family, &version));
    assert!(text.contains(&said), "no `{said}` in:\n{text}");
}

/// A server that answers neither `INFO` nor `HELLO` (both renamed away, as a proxy might)
/// is `unknown`. Restarted on the same port answering `HELLO` only: the follower's ping
/// fails, it reconnects and asks again — the server's own series, the unknown one gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_again_when_the_target_reconnects() {
    let (family, version) = common::server_build();
    let mut r = common::redis(&["--rename-command", "INFO", "", "--rename-command", "HELLO", ""]);
    let s = Served::start(common::config(&r, CONFIG)).await;
    s.wait_for(Duration::from_secs(10), "up", |m| {
        m.get("lockwatch_node_up", &[("target", "main")]) == Some(1.0)
    })
    .await;
    // A few pings more: asked, and unknown it stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let unknown = ("unknown".to_string(), "unknown".to_string(), "standalone".to_string());
    assert_eq!(info_series(&s.metrics().await), [unknown]);

    r.restart_with(&["--rename-command", "INFO", ""]).unwrap();
    let want = (family, version, "standalone".to_string());
    s.wait_for(Duration::from_secs(10), "the server's info after the reconnect", |m| {
        info_series(m) == [want.clone()]
    })
    .await;
    s.stop().await;
}
