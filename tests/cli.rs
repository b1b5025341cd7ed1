//! The `lockwatch` binary: config errors (message and exit code 2), check-config with and
//! without --connect against a real redis-server, environment fallbacks, and SIGTERM.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LOCKWATCH_CONFIG")
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const TARGET: &str = "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:1/0\"\n";

#[test]
fn bad_configs_exit_2_with_one_sentence_naming_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unknown-key.toml",
            format!("{TARGET}sample_intervl = \"5s\"\n"),
            "line 4: sample_intervl: unknown field `sample_intervl`",
        ),
        (
            "bad-duration.toml",
            format!("{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"30\"\n"),
            "line 7: namespace[0].ttl: `30` is not a duration",
        ),
        (
            "bad-glob.toml",
            format!("{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:[*\"\nttl = \"3s\"\n"),
            "line 6: namespace[0].pattern: bad glob",
        ),
        (
            "duplicate.toml",
            format!(
                "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n[[namespace]]\nname = \"a\"\npattern = \"b:*\"\nttl = \"3s\"\n"
            ),
            "line 9: namespace[1].name: duplicate namespace name `a`",
        ),
        (
            "overlap.toml",
            format!(
                "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"lock:*\"\nttl = \"3s\"\n[[namespace]]\nname = \"b\"\npattern = \"lock:wf:*\"\nttl = \"3s\"\n"
            ),
            "line 10: namespace[1].pattern: `lock:wf:*` and namespace `a`'s `lock:*` can match the same key",
        ),
        (
            "password.toml",
            format!("{TARGET}password_file = \"/nonexistent/pw\"\n"),
            "line 4: target[0].password_file: cannot read /nonexistent/pw",
        ),
    ];
    for (name, text, expected) in cases {
        let path = write(dir.path(), name, &text);
        for cmd in ["serve", "check-config"] {
            let out = run(&[cmd, "-c", &path]);
            assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {}", stderr(&out));
            let err = stderr(&out);
            assert!(err.contains(expected), "{cmd} {name}: expected `{expected}` in: {err}");
            assert_eq!(err.trim().lines().count(), 1, "one line, no panic or debug dump: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let out = run(&["check-config", "-c", "/nonexistent/lockwatch.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read config file /nonexistent/lockwatch.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["serve"]).status.code(), Some(2), "missing -c");
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(run(&["serve", "-c", "x", "--bogus"]).status.code(), Some(2));
}

#[test]
fn check_config_prints_the_meaning_of_the_shared_sample() {
    let out = run(&["check-config", "-c", "tests/fixtures/lockwatch.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("OK — 1 target(s), 4 namespace(s)"), "{text}");
    assert!(
        text.contains("namespace workflow: `cordum:wf:run:lock:*` ttl 30s, renewed every 10s, overdue below 15s left"),
        "{text}"
    );
}

#[test]
fn config_and_url_from_environment_and_password_never_printed() {
    let r = common::redis(&["--requirepass", "hunter2-secret"]);
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n",
    );
    let out = Command::new(BIN)
        .args(["check-config", "--connect"])
        .env("LOCKWATCH_CONFIG", &path)
        .env("LOCKWATCH_REDIS_URL", r.url())
        .env("LOCKWATCH_REDIS_PASSWORD", "hunter2-secret")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("✓ target main: reachable"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    // Wrong password: unhealthy, exit 1, still no secret in the output.
    let out = Command::new(BIN)
        .args(["check-config", "--connect", "-c", &path, "--redis-url", &r.url()])
        .env("LOCKWATCH_REDIS_PASSWORD", "wrong-one")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!text.contains("wrong-one"), "{text}");
}

#[test]
fn check_config_connect_reports_notifications_and_permissions() {
    let with = common::redis(&["--notify-keyspace-events", "KEA"]);
    let without = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let text = |url: &str, mode: &str| {
        format!(
            "[[target]]\nname = \"main\"\nurl = \"{url}\"\nnotifications = \"{mode}\"\n[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n"
        )
    };
    let ok = write(dir.path(), "ok.toml", &text(&with.url(), "require"));
    let out = run(&["check-config", "--connect", "-c", &ok]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("✓ notifications (require): notify-keyspace-events = \"AKE\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("✓ namespace a: SCAN, MGET and PTTL allowed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- tracking: events — lock keys followed from keyspace notifications; a SCAN reconciles every 10m at 2000 keys/s"),
        "{stdout}"
    );

    let required = write(dir.path(), "req.toml", &text(&without.url(), "require"));
    let out = run(&["check-config", "--connect", "-c", &required]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("redis-cli CONFIG SET notify-keyspace-events 'Kg$xe'"),
        "{stdout}"
    );

    let auto = write(dir.path(), "auto.toml", &text(&without.url(), "auto"));
    let out = run(&["check-config", "--connect", "-c", &auto]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("- tracking: scan — lock keys found by SCAN passes every 5s"),
        "{stdout}"
    );

    // An ACL user that may not SCAN.
    let mut c = common::conn(&with);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("reader")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-scan")
        .query(&mut c)
        .unwrap();
    let url = with.url().replace("redis://", "redis://reader:pw@");
    let acl = write(dir.path(), "acl.toml", &text(&url, "auto"));
    let out = run(&["check-config", "--connect", "-c", &acl]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("✗ namespace a: the user may not run SCAN on `a:*` (grant `+scan`)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("redis://reader:***@"),
        "password redacted in the URL: {stdout}"
    );

    let port = lockwatch::access::child::free_port().unwrap();
    let down = write(
        dir.path(),
        "down.toml",
        &text(&format!("redis://127.0.0.1:{port}/0"), "auto"),
    );
    let out = run(&["check-config", "--connect", "-c", &down]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("✗ target main: cannot connect"));
}

#[test]
fn serve_stops_gracefully_on_sigterm() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{}\"\nsample_interval = \"200ms\"\n[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n",
            r.url()
        ),
    );
    let mut child = Command::new(BIN)
        .args(["serve", "-c", &path, "--log-format", "json"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "serve did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "serve did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    let out = child.wait_with_output().unwrap();
    let log = stderr(&out);
    for line in log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("--log-format json line is not JSON ({e}): {line}"));
        assert!(v.get("level").is_some(), "{line}");
    }
    assert!(log.contains("\"stopped\""), "{log}");
}
