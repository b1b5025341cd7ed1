//! Least privilege, against a real server: a user created with exactly the documented
//! read-only ACL line for that server (docs/security.md: the Redis 7 line, or the 6.2 one
//! on a server before 7.0) runs `serve` (events mode, exact gauges, a takeover, an empty
//! `ACL LOG` — on 6.2 but for the canary's refusals), `check-config --connect` and
//! `inspect`; without any one of its rules, `check-config --connect` exits 1 and names it
//! (the optional ones: exit 0, still named); with the documented drill additions the drill
//! passes; the documented worked example is what `check-config` prints for the sample
//! config; without `+multi`, `serve` reports the refusal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::output_text as text;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::Served;
use lockwatch::access::child::RedisChild;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

/// The test config's namespaces: a string lock with fencing counters, and Redisson locks.
const NAMESPACES: &str = "[[namespace]]\nname = \"a\"\npattern = \"a:lock:*\"\nfence_pattern = \"a:fence:*\"\nttl = \"30s\"\n\
     [[namespace]]\nname = \"r\"\npattern = \"r:lock:*\"\nttl = \"30s\"\nvalue = \"redisson\"\n";

/// The patterns of [`NAMESPACES`]: (pattern, fence_pattern).
const PATTERNS: &[(&str, Option<&str>)] = &[("a:lock:*", Some("a:fence:*")), ("r:lock:*", None)];

/// The rules of a README line (after `ACL SETUSER lockwatch`), its placeholders filled in
/// for `patterns` on database 0: a rule naming `<fence_pattern>` once per fencing pattern,
/// one naming `<pattern>` once per lock pattern.
fn expand(line: &str, patterns: &[(&str, Option<&str>)]) -> Vec<String> {
    let rules = line.strip_prefix("ACL SETUSER lockwatch ").unwrap();
    let mut out = Vec::new();
    for rule in rules.split_whitespace() {
        let rule = rule.replace("<db>", "0").replace(">PASSWORD", ">pw");
        if rule.contains("<fence_pattern>") {
            out.extend(
                patterns
                    .iter()
                    .filter_map(|(_, f)| *f)
                    .map(|f| rule.replace("<fence_pattern>", f)),
            );
        } else if rule.contains("<pattern>") {
            out.extend(patterns.iter().map(|(p, _)| rule.replace("<pattern>", p)));
        } else {
            out.push(rule);
        }
    }
    out
}

/// The documented read-only line for [`NAMESPACES`] on the tests' server (the Redis 7 line,
/// or the 6.2 one before 7.0), with `+hgetall` as the docs say for a Redisson namespace.
fn serve_rules() -> Vec<String> {
    let line = common::read_only_line("<pattern>");
    let mut rules = expand(&line, PATTERNS);
    rules.push("+hgetall".into());
    rules
}

fn set_user(r: &RedisChild, rules: &[String]) {
    let mut c = common::conn(r);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("lockwatch")
        .arg(rules)
        .query(&mut c)
        .unwrap_or_else(|e| panic!("ACL SETUSER lockwatch {}: {e}", rules.join(" ")));
}

/// What Redis refused to anyone since the last reset, as `ACL LOG` tells it, but for what
/// docs/security.md says a server records whatever the line: the client library's
/// `CLIENT SETINFO` at connect (refused, and recorded, on 6.2 and on 7.2 and later — 7.0
/// does not know the subcommand), and on 6.2 the canary's refusals (its line has none).
fn refused_beyond_the_documented(r: &RedisChild) -> Vec<String> {
    let server = &common::build().server;
    let compat = server.redis_compat().unwrap_or((0, 0));
    let setinfo_logged = !((7, 0)..(7, 2)).contains(&compat);
    let canary_refused = !server.read_only_key_patterns();
    let mut c = common::conn(r);
    let entries: Vec<Vec<redis::Value>> = redis::cmd("ACL").arg("LOG").query(&mut c).unwrap();
    entries
        .iter()
        .filter(|e| {
            let field = |name: &str| {
                e.chunks(2).find_map(|kv| match kv {
                    [redis::Value::BulkString(k), redis::Value::BulkString(v)] if k == name.as_bytes() => {
                        Some(String::from_utf8_lossy(v).into_owned())
                    }
                    _ => None,
                })
            };
            let object = field("object").unwrap_or_default();
            let setinfo = object == "client" || object == "client|setinfo";
            !(setinfo_logged && setinfo || canary_refused && object.contains("lockwatch:canary"))
        })
        .map(|e| format!("{e:?}"))
        .collect()
}

fn user_url(r: &RedisChild) -> String {
    r.url().replace("redis://", "redis://lockwatch:pw@")
}

fn write_config(dir: &Path, url: &str, target_extra: &str, namespaces: &str) -> String {
    let p = dir.join("lockwatch.toml");
    std::fs::write(
        &p,
        format!(
            "[[target]]\nname = \"main\"\nurl = \"{url}\"\nsample_interval = \"250ms\"\n{target_extra}\n{namespaces}"
        ),
    )
    .unwrap();
    p.display().to_string()
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LOCKWATCH_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `check-config --connect`: (exit code, output).
fn check(config: &str) -> (Option<i32>, String) {
    let out = run(&["check-config", "--connect", "-c", config]);
    (out.status.code(), text(&out))
}

/// The rule line `check-config --connect` prints when something is missing.
fn printed_rule(output: &str) -> String {
    output
        .lines()
        .find_map(|l| l.split_once("(replace PASSWORD): ").map(|(_, rule)| rule.to_string()))
        .unwrap_or_else(|| panic!("no rule printed:\n{output}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_line_runs_serve_inspect_and_check_config_cleanly() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    set_user(&r, &serve_rules());
    let mut c = common::conn(&r);
    let _: () = redis::cmd("ACL").arg("LOG").arg("RESET").query(&mut c).unwrap();
    let url = user_url(&r);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url, "", NAMESPACES);

    let s = Served::start(lockwatch::config::Config::load(Path::new(&config), &Default::default()).unwrap()).await;
    s.wait_for(Duration::from_secs(10), "events mode", |m| {
        m.get("lockwatch_tracking_mode", &[("mode", "events")]) == Some(1.0)
            && m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
    })
    .await;
    let _: () = redis::cmd("SET")
        .arg("a:lock:1")
        .arg("w1")
        .arg("PX")
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("a:lock:2")
        .arg("w2")
        .arg("PX")
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("a:fence:1").arg(7).query(&mut c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("r:lock:1")
        .arg("8d3c-uuid:41")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("PEXPIRE").arg("r:lock:1").arg(60_000).query(&mut c).unwrap();
    // A lock that expires under one owner and is taken by another: a takeover.
    let _: () = redis::cmd("SET")
        .arg("a:lock:3")
        .arg("old")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let _: () = redis::cmd("SET")
        .arg("a:lock:3")
        .arg("new")
        .arg("PX")
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    let a = [("target", "main"), ("namespace", "a")];
    let rn = [("target", "main"), ("namespace", "r")];
    s.wait_for(Duration::from_secs(10), "the locks, the fence and the takeover", |m| {
        m.get("lockwatch_locks_held", &a) == Some(3.0)
            && m.get("lockwatch_locks_held", &rn) == Some(1.0)
            && m.get("lockwatch_fence_token", &a) == Some(7.0)
            && m.get("lockwatch_lock_expiry_takeovers_total", &a) == Some(1.0)
    })
    .await;
    let m = s.metrics().await;
    assert_eq!(m.val("lockwatch_up", &[("target", "main")]), 1.0);
    assert_eq!(m.val("lockwatch_notifications_connected", &[("target", "main")]), 1.0);
    assert_eq!(m.val("lockwatch_tracking_mode", &[("mode", "events")]), 1.0);
    assert_eq!(m.val("lockwatch_sample_errors_total", &[("target", "main")]), 0.0);
    let kind = |ns: &str, k: &str| {
        m.val(
            "lockwatch_lock_transitions_total",
            &[("target", "main"), ("namespace", ns), ("kind", k)],
        )
    };
    assert_eq!((kind("a", "acquired"), kind("a", "expired")), (4.0, 1.0));
    assert_eq!(kind("r", "acquired"), 1.0);

    // inspect, with the exporter's history, and check-config, as the same user.
    let exporter = format!("http://{}", s.addr);
    let cfg = config.clone();
    let (key, ns, checked) = tokio::task::spawn_blocking(move || {
        (
            run(&["inspect", "a:lock:3", "-c", &cfg, "--exporter", &exporter]),
            run(&["inspect", "--namespace", "r", "-c", &cfg, "--exporter", &exporter]),
            check(&cfg),
        )
    })
    .await
    .unwrap();
    assert_eq!(key.status.code(), Some(0), "{}", text(&key));
    assert!(text(&key).contains("type       string"), "{}", text(&key));
    assert!(
        text(&key).contains("TAKEOVER"),
        "history from the exporter: {}",
        text(&key)
    );
    assert_eq!(ns.status.code(), Some(0), "{}", text(&ns));
    assert!(text(&ns).contains("1 held"), "{}", text(&ns));
    let (code, out) = checked;
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains('✗') && !out.contains("! ") && !out.contains('→'), "{out}");
    assert!(out.contains("✓ namespace a: SCAN, MGET and PTTL allowed"), "{out}");
    assert!(out.contains("✓ namespace r: SCAN, HGETALL and PTTL allowed"), "{out}");
    assert!(
        out.contains("✓ notifications: PSUBSCRIBE allowed on `__keyspace@0__:a:lock:*`, `__keyspace@0__:a:fence:*`, `__keyspace@0__:r:lock:*`"),
        "{out}"
    );
    s.stop().await;
    let refused = refused_beyond_the_documented(&r);
    assert!(refused.is_empty(), "Redis refused something: {refused:#?}");
}

#[test]
fn check_config_names_each_rule_of_the_line_that_is_missing() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &user_url(&r), "", NAMESPACES);
    let full = serve_rules();
    // The README's line, filled in, is the rule check-config prints for this config.
    set_user(&r, &["reset".into(), "on".into(), ">pw".into()]);
    let (code, out) = check(&config);
    assert_eq!(code, Some(1), "{out}");
    let mut printed: Vec<String> = printed_rule(&out)
        .strip_prefix("ACL SETUSER lockwatch ")
        .unwrap()
        .split(' ')
        .map(|s| s.replace(">PASSWORD", ">pw"))
        .collect();
    let mut documented = full.clone();
    printed.sort();
    documented.sort();
    assert_eq!(printed, documented, "check-config's rule and the README's line differ");

    // The key rules too where they are `~` (6.2): on 7 `~lockwatch:canary:*` goes with `+set`.
    let key_rule = if common::build().server.read_only_key_patterns() {
        '%'
    } else {
        '~'
    };
    for rule in full.iter().filter(|r| r.starts_with(['+', '&', key_rule])) {
        let without: Vec<String> = full.iter().filter(|r| *r != rule).cloned().collect();
        set_user(&r, &without);
        let (code, out) = check(&config);
        let grant = format!("(grant `{rule}`");
        assert!(
            out.contains(&grant),
            "without {rule}, check-config does not name it:\n{out}"
        );
        match rule.as_str() {
            "+config|get" => {
                assert_eq!(code, Some(0), "without {rule}: {out}");
                assert!(
                    out.contains("prove them instead") || out.contains("proves them instead"),
                    "{out}"
                );
            }
            // Without the canary's rules, serve verifies by the flags: optional.
            "+set" | "&__keyspace@0__:lockwatch:canary:*" => {
                assert_eq!(code, Some(0), "without {rule}: {out}");
                let line = out.lines().find(|l| l.contains(&grant)).unwrap();
                assert!(
                    line.contains("the canary cannot run") && line.contains("the flags CONFIG GET reads"),
                    "{line}"
                );
            }
            "+info" => assert_eq!(code, Some(0), "without {rule}: {out}"),
            _ => {
                assert_eq!(code, Some(1), "without {rule}: {out}");
                let line = out.lines().find(|l| l.contains(&grant)).unwrap();
                assert!(line.trim_start().starts_with('✗'), "{line}");
            }
        }
    }

    // Under `configure`, CONFIG SET too (probed without changing anything).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("")
        .query(&mut common::conn(&r))
        .unwrap();
    let configure = write_config(dir.path(), &user_url(&r), "notifications = \"configure\"", NAMESPACES);
    set_user(&r, &full);
    let (code, out) = check(&configure);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("the user may not run CONFIG SET (grant `+config|set`)"),
        "{out}"
    );
    assert!(printed_rule(&out).contains(" +config|set "), "{out}");
    set_user(&r, &["+config|set".to_string()]);
    let (code, out) = check(&configure);
    assert_eq!(code, Some(0), "{out}");
    let flags: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query(&mut common::conn(&r))
        .unwrap();
    assert_eq!(flags[1], "", "check-config changed the setting");
}

#[test]
fn the_readme_example_is_what_check_config_prints_for_the_sample() {
    let r = common::redis(&[]);
    set_user(&r, &["reset".into(), "on".into(), ">pw".into()]);
    let out = run(&[
        "check-config",
        "--connect",
        "-c",
        "tests/fixtures/lockwatch.toml",
        "--redis-url",
        &user_url(&r),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let example = common::read_only_line("cordum:wf:run:lock:*");
    assert_eq!(printed_rule(&text(&out)), example);
}

#[test]
fn the_drill_passes_with_the_readme_drill_additions() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let drill_ns = [("drill:lock:*", Some("drill:fence:*"))];
    let read = common::read_only_line("<pattern>");
    let adds = common::security_line("ACL SETUSER lockwatch +", "<pattern>");
    let mut rules = expand(&read, &drill_ns);
    rules.extend(expand(&adds, &drill_ns));
    set_user(&r, &rules);
    let mut c = common::conn(&r);
    let _: () = redis::cmd("ACL").arg("LOG").arg("RESET").query(&mut c).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &user_url(&r),
        "",
        "[[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"1s\"\n",
    );
    let out = run(&["drill", "-c", &config, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let refused = refused_beyond_the_documented(&r);
    assert!(refused.is_empty(), "Redis refused something: {refused:#?}");
    let left: Vec<String> = redis::cmd("KEYS").arg("*drill*").query(&mut c).unwrap();
    assert!(left.is_empty(), "{left:?}");

    // An unsafe renew script is reported as such, not as a refused PEXPIRE.
    let script = dir.path().join("renew.lua");
    std::fs::write(&script, "return redis.call('pexpire', KEYS[1], ARGV[2])\n").unwrap();
    let out = run(&[
        "drill",
        "-c",
        &config,
        "--yes",
        "--renew-script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("renewal was ACCEPTED"), "{}", text(&out));
}

/// A user without `+multi`: each page read is refused, and `serve` says so — `lockwatch_up`
/// 0, failed passes counted, the refusal on the status page — instead of panicking in the
/// Redis client (its atomic pipeline underflows on a refused MULTI in debug builds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reports_a_refused_multi() {
    let r = common::redis(&[]);
    let rules: Vec<String> = serve_rules().into_iter().filter(|r| r != "+multi").collect();
    assert_eq!(rules.len() + 1, serve_rules().len());
    set_user(&r, &rules);
    let mut c = common::conn(&r);
    for i in 0..3 {
        let _: () = redis::cmd("SET")
            .arg(format!("a:lock:{i}"))
            .arg("w")
            .arg("PX")
            .arg(60_000)
            .query(&mut c)
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &user_url(&r), "notifications = \"off\"", NAMESPACES);
    let s = Served::start(lockwatch::config::Config::load(Path::new(&config), &Default::default()).unwrap()).await;
    let t = [("target", "main")];
    s.wait_for(Duration::from_secs(10), "two failed passes", |m| {
        m.get("lockwatch_sample_errors_total", &t).unwrap_or(0.0) >= 2.0
    })
    .await;
    let m = s.metrics().await;
    assert_eq!(m.val("lockwatch_up", &t), 0.0);
    assert_eq!(m.val("lockwatch_locks_held", &[("namespace", "a")]), 0.0);
    let (_, _, page) = s.get("/").await;
    assert!(
        page.contains("no permissions to run the &#39;multi&#39; command"),
        "{page}"
    );
    // Granted again, the same exporter recovers: nothing died.
    set_user(&r, &["+multi".to_string()]);
    s.wait_for(Duration::from_secs(10), "the locks", |m| {
        m.get("lockwatch_up", &t) == Some(1.0) && m.get("lockwatch_locks_held", &[("namespace", "a")]) == Some(3.0)
    })
    .await;
    s.stop().await;
}
