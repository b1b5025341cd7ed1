//! The drill tests' shared parts: the staging config with a `drill` namespace, running
//! `lockwatch drill`, and telling a gone worker from a stopped one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `lockwatch.toml` in `dir`: target `staging` at `url` (plus `extra_target` lines), and
/// namespace `drill` with a fence pattern and `ttl`.
pub fn write_config(dir: &Path, url: &str, extra_target: &str, ttl: &str) -> PathBuf {
    let path = dir.join("lockwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[[target]]\nname = \"staging\"\nurl = \"{url}\"\nsample_interval = \"250ms\"\n{extra_target}\n\
             [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"{ttl}\"\n"
        ),
    )
    .unwrap();
    path
}

/// `lockwatch drill -c config args…`, stdin closed, to its end.
pub fn run(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .arg("drill")
        .arg("-c")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Gone, or a zombie about to be reaped: not a stopped process.
pub fn process_gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// The unsafe release a drill must fail on: a Lua script that just DELs, in `dir`.
pub fn plain_del_release(dir: &Path) -> PathBuf {
    let script = dir.join("release.lua");
    std::fs::write(&script, "return redis.call('del', KEYS[1])\n").unwrap();
    script
}

/// A redis-server with keyspace notifications, the drill's config for it in `dir` (TTL
/// 1 s), and `lockwatch serve` of that config, subscribed: the server, the config's path,
/// the exporter and its URL.
pub async fn served(dir: &Path) -> (super::RedisChild, PathBuf, super::Served, String) {
    let r = super::redis(&["--notify-keyspace-events", "KEA"]);
    let config = write_config(dir, &r.url(), "", "1s");
    let s = super::Served::start(lockwatch::config::Config::load(&config, &Default::default()).unwrap()).await;
    s.wait_for(std::time::Duration::from_secs(5), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
    })
    .await;
    let url = format!("http://{}", s.addr);
    (r, config, s, url)
}

/// Assert a finished drill exited with `code`, showing `what`, its stdout and its stderr.
pub fn exited(out: &Output, code: i32, what: impl std::fmt::Display) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
