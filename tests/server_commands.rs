//! The lock commands without Lua and the newer notification classes, on whichever server
//! `LOCKWATCH_REDIS_SERVER` picks (`make compat` runs this on every build of the matrix):
//! `SET … XX PX` and `SET … IFEQ` renewals, `DELIFEQ` and `DELEX … IFEQ` releases are each
//! counted once in events mode, a refused one counts nothing, and scan mode's gauges stay
//! exact through them; `overwritten` / `type_changed` (`o`, `c`) enabled change no count, and
//! `check-config --connect` says which flags lockwatch uses and which it ignores. What a
//! server lacks is asked of the server and asserted as refused, never skipped: each test
//! names what it exercised and what the build lacked (`common::compat`), which `make compat`
//! writes into the matrix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Metrics, Served, compat, config, conn, redis};

const KEY: &str = "t:lock:cmd";

fn cfg(notifications: &str) -> String {
    format!(
        "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nsample_interval = \"200ms\"\nnotifications = \"{notifications}\"\n\
         [[namespace]]\nname = \"wf\"\npattern = \"t:lock:*\"\nttl = \"30s\"\n"
    )
}

/// (acquired, released, renewed)
fn counts(m: &Metrics) -> [f64; 3] {
    ["acquired", "released", "renewed"]
        .map(|k| m.val("lockwatch_lock_transitions_total", &[("namespace", "wf"), ("kind", k)]))
}

async fn settle(s: &Served, want: [f64; 3], what: &str) {
    s.wait_for(Duration::from_secs(10), what, |m| counts(m) == want).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(counts(&s.metrics().await), want, "{what}: counts moved after settling");
}

/// The server's answer to a command, as text (`Err` for an error reply).
fn ask(c: &mut redis::Connection, args: &[&str]) -> Result<String, String> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(redis::Value::Okay) => Ok("OK".into()),
        Ok(redis::Value::Nil) => Ok("nil".into()),
        Ok(redis::Value::Int(n)) => Ok(n.to_string()),
        Ok(redis::Value::SimpleString(s)) => Ok(s),
        Ok(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Ok(v) => Ok(format!("{v:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the server knows `command` (`COMMAND INFO` answers nil for an unknown one).
fn knows(c: &mut redis::Connection, command: &str) -> bool {
    let info: Vec<redis::Value> = redis::cmd("COMMAND").arg("INFO").arg(command).query(c).unwrap();
    !matches!(info.first(), None | Some(redis::Value::Nil))
}

fn server(c: &mut redis::Connection) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    format!(
        "{} {}",
        field("server_name:").unwrap_or_else(|| "redis".into()),
        field("valkey_version:")
            .or_else(|| field("redis_version:"))
            .unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_commands_without_lua_count_once_each_in_events_mode() {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let mut c = conn(&r);
    let s = Served::start(config(&r, &cfg("require"))).await;
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
    let who = server(&mut c);
    let mut want = [0.0; 3];

    // SET NX PX acquires; SET XX PX with the same token renews (every server).
    assert_eq!(ask(&mut c, &["SET", KEY, "tok-a", "NX", "PX", "30000"]).unwrap(), "OK");
    want[0] += 1.0;
    settle(&s, want, "acquired").await;
    assert_eq!(ask(&mut c, &["SET", KEY, "tok-a", "XX", "PX", "30000"]).unwrap(), "OK");
    want[2] += 1.0;
    settle(&s, want, "SET XX PX renewal").await;
    compat::exercised("SET XX PX (events mode)");

    // SET … IFEQ: a renewal when the token matches, nothing when it does not.
    match ask(&mut c, &["SET", KEY, "tok-a", "IFEQ", "tok-a", "PX", "30000"]) {
        Ok(ok) => {
            assert_eq!(ok, "OK", "{who}");
            want[2] += 1.0;
            settle(&s, want, "SET IFEQ renewal").await;
            assert_eq!(
                ask(&mut c, &["SET", KEY, "tok-b", "IFEQ", "nope", "PX", "30000"]).unwrap(),
                "nil"
            );
            settle(&s, want, "a refused SET IFEQ counts nothing").await;
            compat::exercised("SET IFEQ (events mode)");
        }
        Err(e) => {
            // Servers before Valkey 8.1 / Redis 8.4 refuse the option; nothing is counted.
            assert!(e.contains("syntax error"), "{who}: {e}");
            settle(&s, want, "a SET IFEQ the server refuses").await;
            compat::lacks("SET IFEQ", &format!("{who}: {e}"));
        }
    }

    // DELIFEQ (Valkey 9): a release when the token matches.
    if knows(&mut c, "DELIFEQ") {
        assert_eq!(ask(&mut c, &["DELIFEQ", KEY, "nope"]).unwrap(), "0");
        settle(&s, want, "a refused DELIFEQ counts nothing").await;
        assert_eq!(ask(&mut c, &["DELIFEQ", KEY, "tok-a"]).unwrap(), "1");
        want[1] += 1.0;
        settle(&s, want, "DELIFEQ release").await;
        compat::exercised("DELIFEQ (events mode)");
        assert_eq!(ask(&mut c, &["SET", KEY, "tok-a", "NX", "PX", "30000"]).unwrap(), "OK");
        want[0] += 1.0;
        settle(&s, want, "acquired again").await;
    } else {
        assert!(
            ask(&mut c, &["DELIFEQ", KEY, "tok-a"])
                .unwrap_err()
                .contains("unknown command"),
            "{who}"
        );
        compat::lacks("DELIFEQ", &format!("{who}: unknown command"));
    }

    // DELEX … IFEQ (Redis 8.4).
    if knows(&mut c, "DELEX") {
        assert_eq!(ask(&mut c, &["DELEX", KEY, "IFEQ", "nope"]).unwrap(), "0");
        settle(&s, want, "a refused DELEX counts nothing").await;
        assert_eq!(ask(&mut c, &["DELEX", KEY, "IFEQ", "tok-a"]).unwrap(), "1");
        want[1] += 1.0;
        settle(&s, want, "DELEX IFEQ release").await;
        compat::exercised("DELEX IFEQ (events mode)");
    } else {
        assert!(
            ask(&mut c, &["DELEX", KEY, "IFEQ", "tok-a"])
                .unwrap_err()
                .contains("unknown command"),
            "{who}"
        );
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut c).unwrap();
        want[1] += 1.0;
        settle(&s, want, "released with DEL").await;
        compat::lacks("DELEX", &format!("{who}: unknown command"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_mode_stays_exact_through_the_lock_commands() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let s = Served::start(config(&r, &cfg("off"))).await;
    let who = server(&mut c);
    let held = |m: &Metrics| m.get("lockwatch_locks_held", &[("namespace", "wf")]);
    ask(&mut c, &["SET", KEY, "tok-a", "NX", "PX", "30000"]).unwrap();
    s.wait_for(Duration::from_secs(10), "held 1", |m| held(m) == Some(1.0))
        .await;
    match ask(&mut c, &["SET", KEY, "tok-a", "IFEQ", "tok-a", "PX", "30000"]) {
        Ok(ok) => {
            assert_eq!(ok, "OK", "{who}");
            compat::exercised("SET IFEQ (scan mode)");
        }
        Err(e) => {
            assert!(e.contains("syntax error"), "{who}: {e}");
            compat::lacks("SET IFEQ", &format!("{who}: {e}"));
        }
    }
    ask(&mut c, &["SET", KEY, "tok-a", "XX", "PX", "30000"]).unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let m = s.metrics().await;
    assert_eq!(held(&m), Some(1.0), "{who}");
    assert_eq!(
        m.get("lockwatch_lock_handoffs_total", &[("namespace", "wf")])
            .unwrap_or(0.0),
        0.0,
        "{who}: a renewal is no handoff"
    );
    let released = if knows(&mut c, "DELIFEQ") {
        compat::exercised("DELIFEQ (scan mode)");
        ask(&mut c, &["DELIFEQ", KEY, "tok-a"]).unwrap()
    } else {
        ask(&mut c, &["DEL", KEY]).unwrap()
    };
    assert_eq!(released, "1");
    s.wait_for(Duration::from_secs(10), "held 0", |m| held(m) == Some(0.0))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwritten_and_type_changed_events_change_no_count() {
    let r = redis(&[]);
    let mut c = conn(&r);
    let who = server(&mut c);
    // `o` and `c` exist since Redis 8.2; older Redis and Valkey refuse them.
    let taken = ask(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEg$xeoc"]);
    let flags = match taken {
        Ok(_) => "KEg$xeoc",
        Err(e) => {
            assert!(e.contains("notify-keyspace-events"), "{who}: {e}");
            compat::lacks("notify-keyspace-events `o` and `c`", &format!("{who}: {e}"));
            ask(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]).unwrap();
            "KEA"
        }
    };
    let s = Served::start(config(&r, &cfg("require"))).await;
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
    // Acquire, renew by overwrite (an `overwritten` before the `set` where `o` is on), take
    // over by overwrite, change the type under a lock key (`type_changed`), release.
    ask(&mut c, &["SET", KEY, "tok-a", "NX", "PX", "30000"]).unwrap();
    settle(&s, [1.0, 0.0, 0.0], "acquired").await;
    ask(&mut c, &["SET", KEY, "tok-a", "PX", "30000"]).unwrap();
    settle(&s, [1.0, 0.0, 1.0], "renewed by an overwrite").await;
    ask(&mut c, &["SET", KEY, "tok-b", "PX", "30000"]).unwrap();
    settle(&s, [2.0, 0.0, 1.0], "a new owner's token written over").await;
    ask(&mut c, &["DEL", KEY]).unwrap();
    settle(&s, [2.0, 1.0, 1.0], "released").await;
    ask(&mut c, &["LPUSH", "t:lock:list", "x"]).unwrap();
    ask(&mut c, &["SET", "t:lock:list", "tok-c", "PX", "30000"]).unwrap();
    settle(&s, [3.0, 1.0, 1.0], "a list replaced by a lock").await;
    ask(&mut c, &["DEL", "t:lock:list"]).unwrap();
    settle(&s, [3.0, 2.0, 1.0], "released").await;

    // check-config says which flags it uses and which it ignores.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockwatch.toml");
    std::fs::write(&path, cfg("require").replace("{url}", &r.url())).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockwatch"))
        .args(["check-config", "--connect", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("lockwatch uses"), "{said}");
    if flags.contains('o') {
        assert!(
            said.contains("ignores") && said.contains("o (overwritten)") && said.contains("c (type_changed)"),
            "{who}: {said}"
        );
    }
    if flags.contains('o') {
        compat::exercised("notify-keyspace-events `o` (overwritten) and `c` (type_changed)");
    }
}
