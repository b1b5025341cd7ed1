//! `lockwatch drill` against a real redis-server with `lockwatch serve` running: the
//! stale-holder scenario passes and the exporter's counters move by exactly the expected
//! amounts; an unsafe release script fails the drill naming the step; SIGINT, SIGTERM,
//! SIGHUP and SIGQUIT at several points of a run roll back (no run key, no stopped or
//! orphaned worker, a key of the namespace that is not the run's untouched); after SIGKILL
//! the worker dies with the drill and every key of the run expires within the lease, or
//! `--cleanup` removes them; production is refused; `--interactive` is driven through
//! stdin; JSON and markdown reports; sustained cycles.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Served;
use common::drill::{exited, run as drill, text, write_config};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

/// Keys the drill may have left behind.
fn leftovers(r: &lockwatch::access::child::RedisChild) -> Vec<String> {
    let mut c = common::conn(r);
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("drill:*").query(&mut c).unwrap();
    let more: Vec<String> = redis::cmd("KEYS").arg("lockwatch-drill:*").query(&mut c).unwrap();
    keys.extend(more);
    keys
}

fn event(m: &common::Metrics, op: &str, outcome: &str) -> f64 {
    m.val(
        "lockwatch_lock_events_total",
        &[("namespace", "drill"), ("op", op), ("outcome", outcome)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drill_passes_and_the_exporter_counts_exactly_what_happened() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    // The exporter takes pushes only with the token; worker A sends the config's.
    std::fs::write(dir.path().join("push-token"), "drill-s3cret\n").unwrap();
    let body = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("[server]\npush_token_file = \"push-token\"\n{body}")).unwrap();
    let s = Served::start(lockwatch::config::Config::load(&config, &Default::default()).unwrap()).await;
    s.wait_for(Duration::from_secs(5), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
    })
    .await;
    let exporter = format!("http://{}", s.addr);
    let cfg = config.clone();
    let out = tokio::task::spawn_blocking(move || drill(&cfg, &["--yes", "--exporter", &exporter, "--format", "json"]))
        .await
        .unwrap();
    exited(&out, 0, "");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["result"].as_str().unwrap().starts_with("passed"), "{report}");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 9);
    assert!(steps.iter().all(|s| s["ok"] == true), "{report}");
    assert_eq!(report["counters"].as_array().unwrap().len(), 6, "{report}");
    // The exporter's own view, independently of the drill's check.
    let m = s.metrics().await;
    assert_eq!(event(&m, "renew", "not_owned"), 1.0);
    assert_eq!(event(&m, "release", "not_owned"), 1.0);
    assert_eq!(event(&m, "write", "stale_fence"), 1.0);
    assert_eq!(event(&m, "acquire", "busy"), 0.0);
    let t = [("target", "staging"), ("namespace", "drill")];
    assert_eq!(m.val("lockwatch_lock_expiry_takeovers_total", &t), 1.0);
    let kind = |k| {
        m.val(
            "lockwatch_lock_transitions_total",
            &[("target", "staging"), ("namespace", "drill"), ("kind", k)],
        )
    };
    assert_eq!((kind("acquired"), kind("expired"), kind("released")), (2.0, 1.0, 1.0));
    assert!(leftovers(&r).is_empty(), "{:?}", leftovers(&r));
    s.stop().await;
}

#[test]
fn an_unsafe_release_script_fails_the_drill_and_names_the_step() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    let script = common::drill::plain_del_release(dir.path());
    let record = dir.path().join("drill.md");
    let out = drill(
        &config,
        &[
            "--yes",
            "--release-script",
            script.to_str().unwrap(),
            "--report",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAILED") && stdout.contains("step 7 (A tries to release)"),
        "{stdout}"
    );
    assert!(stdout.contains("step 9 (B's lock and write are intact)"), "{stdout}");
    assert!(text(&out.stderr).contains("plain DEL"), "{}", text(&out.stderr));
    let md = std::fs::read_to_string(&record).unwrap();
    for want in [
        "# Drill record",
        "## Timeline",
        "## Deviations",
        "plain DEL",
        "## Rollback",
        "✗ deviation",
    ] {
        assert!(md.contains(want), "no {want} in:\n{md}");
    }
    assert!(leftovers(&r).is_empty(), "{:?}", leftovers(&r));
    // The safe scripts, passed explicitly, pass (an unsafe renew fails step 6).
    let renew = dir.path().join("renew.lua");
    std::fs::write(&renew, "return redis.call('pexpire', KEYS[1], ARGV[2])\n").unwrap();
    let out = drill(&config, &["--yes", "--renew-script", renew.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("step 6 (A wakes and tries to renew)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn sigint_during_the_pause_rolls_back() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "20s");
    let mut child = Command::new(BIN)
        .args(["drill", "--yes", "-c", config.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let started = Instant::now();
    let pid = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "drill ended before the pause");
        if let Some(rest) = line.trim().strip_prefix("A paused (pid ") {
            break rest.split(')').next().unwrap().parse::<i32>().unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(10));
    };
    // Worker A is stopped (state T) and its lock is held.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(state.contains(") T "), "worker A is not stopped: {state}");
    assert!(!leftovers(&r).is_empty());
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    assert!(
        rest.contains("interrupted") && rest.contains("rollback: worker A"),
        "{rest}"
    );
    assert!(leftovers(&r).is_empty(), "{:?}", leftovers(&r));
    // No stopped process left behind: the worker is gone (or a zombie being reaped).
    let gone = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "));
    assert!(gone, "worker A still exists");
}

#[test]
fn production_is_refused_and_usage_errors_exit_2() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "environment = \"production\"", "1s");
    let out = drill(&config, &["--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("production") && text(&out.stderr).contains("--allow-production"));
    assert!(leftovers(&r).is_empty());
    let out = drill(&config, &["--yes", "--allow-production", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = drill(&config, &["--yes", "--allow-production", "--namespace", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no namespace `nope`"));
    // Without a terminal and without --yes or --interactive.
    let out = drill(&config, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--yes"));
}

#[test]
fn interactive_mode_waits_for_enter_before_each_step() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    let mut child = Command::new(BIN)
        .args([
            "drill",
            "--interactive",
            "-c",
            config.to_str().unwrap(),
            "--format",
            "markdown",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut prompts = 0;
    let mut transcript = String::new();
    let mut buf = Vec::new();
    // Answer each prompt only when it appears.
    loop {
        buf.clear();
        let n = err.read_until(b' ', &mut buf).unwrap();
        if n == 0 {
            break;
        }
        transcript.push_str(&String::from_utf8_lossy(&buf));
        if transcript.ends_with("press Enter to run it… ") {
            prompts += 1;
            stdin.write_all(b"\n").unwrap();
            stdin.flush().unwrap();
            transcript.push_str("<enter>");
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{transcript}");
    assert_eq!(prompts, 5, "{transcript}");
    assert!(transcript.contains("next: A is frozen with SIGSTOP"), "{transcript}");
    let md = text(&out.stdout);
    assert!(md.starts_with("# Drill record") && md.contains("| 9 |"), "{md}");
}

#[test]
fn sustained_mode_repeats_cycles() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "500ms");
    let out = drill(
        &config,
        &["--yes", "--sustain", "3s", "--rate", "60", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cycles = report["cycles"]["cycles"].as_u64().unwrap();
    assert!((2..=4).contains(&cycles), "{report}");
    assert!(leftovers(&r).is_empty(), "{:?}", leftovers(&r));
}

/// Keys in the drill namespace that belong to no run: no rollback or cleanup may touch them.
const BYSTANDERS: &[(&str, &str)] = &[
    ("drill:lock:job-7", "someone"),
    ("drill:fence:job-7", "41"),
    ("drill:lock:drill-0a1b2c3d", "not-a-run"),
    ("lockwatch-drill:notes", "kept"),
];

fn set_bystanders(r: &lockwatch::access::child::RedisChild) {
    let mut c = common::conn(r);
    for (k, v) in BYSTANDERS {
        let _: () = redis::cmd("SET").arg(k).arg(v).query(&mut c).unwrap();
    }
}

fn assert_bystanders(r: &lockwatch::access::child::RedisChild) {
    let mut c = common::conn(r);
    for (k, v) in BYSTANDERS {
        let got: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(got.as_deref(), Some(*v), "{k} was touched");
    }
}

/// The run's keys still in Redis, with their PTTLs.
fn run_keys(r: &lockwatch::access::child::RedisChild, run: &str) -> Vec<(String, i64)> {
    let mut c = common::conn(r);
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("*{run}*")).query(&mut c).unwrap();
    keys.into_iter()
        .map(|k| {
            let pttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut c).unwrap();
            (k, pttl)
        })
        .collect()
}

/// The `drill-worker` process of the drill using `config`, by its command line.
fn worker_of(config: &Path) -> Option<i32> {
    let wanted = config.to_str().unwrap();
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args.contains(&b"drill-worker".as_slice()) && args.contains(&wanted.as_bytes());
        ours.then_some(pid)
    })
}

/// A process's state letter (`T` stopped, `Z` zombie), `None` once it is gone.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Wait up to `limit` for `pid` to be gone (or a zombie, dead and waiting to be reaped).
fn assert_ends(pid: i32, limit: Duration, what: &str) {
    let started = Instant::now();
    while let Some(s) = state(pid).filter(|s| *s != 'Z') {
        assert!(
            started.elapsed() < limit,
            "{what}: worker A (pid {pid}) still there, state {s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A drill interrupted by `signal` at the `prompt`-th prompt of an interactive run: 1
/// (worker A started, nothing taken), 2 (A holds the lock), 3 (A holds it, about to be
/// frozen), 4 (A frozen, its lock expired), 5 (A frozen, B holds the lock and wrote).
struct Interrupted {
    run: String,
    worker: i32,
    /// Whether worker A was stopped (SIGSTOP) when the signal was sent.
    worker_stopped: bool,
    status: std::process::ExitStatus,
    stderr: String,
}

fn interrupt_at(config: &Path, prompt: usize, signal: &str) -> Interrupted {
    let mut child = Command::new(BIN)
        .args(["drill", "--interactive", "-c", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (mut transcript, mut buf, mut prompts) = (String::new(), Vec::new(), 0);
    while prompts < prompt {
        buf.clear();
        assert!(
            err.read_until(b' ', &mut buf).unwrap() > 0,
            "the drill ended early:\n{transcript}"
        );
        transcript.push_str(&String::from_utf8_lossy(&buf));
        if transcript.ends_with("press Enter to run it… ") {
            prompts += 1;
            if prompts < prompt {
                stdin.write_all(b"\n").unwrap();
                stdin.flush().unwrap();
            }
        }
    }
    let run = transcript
        .split_once("lockwatch drill ")
        .and_then(|(_, rest)| rest.split(':').next())
        .unwrap()
        .to_string();
    let worker = worker_of(config).unwrap_or_else(|| panic!("no worker A:\n{transcript}"));
    let worker_stopped = state(worker) == Some('T');
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    drop(stdin);
    Interrupted {
        run,
        worker,
        worker_stopped,
        status,
        stderr: transcript + &rest,
    }
}

/// A redis-server with the bystanders and a drill config (ttl 1 s) in `dir`.
fn drill_setup(dir: &Path) -> (lockwatch::access::child::RedisChild, std::path::PathBuf) {
    let r = common::redis(&[]);
    set_bystanders(&r);
    let config = write_config(dir, &r.url(), "", "1s");
    (r, config)
}

#[test]
fn sigterm_sighup_and_sigquit_at_several_points_roll_back() {
    let cases = [
        ("TERM", 1),
        ("TERM", 4),
        ("HUP", 2),
        ("HUP", 5),
        ("QUIT", 3),
        ("QUIT", 5),
    ];
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(signal, prompt)| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let (r, config) = drill_setup(dir.path());
                let i = interrupt_at(&config, prompt, signal);
                let what = format!("SIG{signal} at prompt {prompt}");
                assert_eq!(i.status.code(), Some(1), "{what}: {}", i.stderr);
                assert_eq!(i.worker_stopped, prompt >= 4, "{what}: worker A's state");
                for said in [format!("SIG{signal} received"), "interrupted: rolling back".into()] {
                    assert!(i.stderr.contains(&said), "{what}: no `{said}` in:\n{}", i.stderr);
                }
                assert!(i.stderr.contains("rollback: worker A"), "{what}: {}", i.stderr);
                assert_ends(i.worker, Duration::from_secs(2), &what);
                assert_eq!(run_keys(&r, &i.run), vec![], "{what}: keys of run {} left", i.run);
                assert_bystanders(&r);
            })
        })
        .collect();
    for run in runs {
        run.join().unwrap();
    }
}

#[test]
fn after_sigkill_the_worker_dies_and_every_key_expires_or_is_cleaned_up() {
    let cases = [(4, false), (5, true)];
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(prompt, clean)| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let (r, config) = drill_setup(dir.path());
                let i = interrupt_at(&config, prompt, "KILL");
                let what = format!("SIGKILL at prompt {prompt}");
                assert!(i.worker_stopped, "{what}: worker A was not frozen");
                // The worker dies with the drill, frozen as it was.
                assert_ends(i.worker, Duration::from_secs(2), &what);
                // Every key the run created expires: within the lease, 4 × ttl + 5 s.
                let lease = 9_000;
                let left = run_keys(&r, &i.run);
                assert!(!left.is_empty(), "{what}: the run created nothing?");
                assert!(
                    left.iter().all(|(_, pttl)| (1..=lease).contains(pttl)),
                    "{what}: {left:?}"
                );
                if clean {
                    let out = drill(&config, &["--cleanup"]);
                    let said = text(&out.stdout);
                    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
                    assert!(
                        said.contains(&format!("removed {} keys of run {}", left.len(), i.run)),
                        "{said}"
                    );
                    for (k, _) in &left {
                        assert!(said.contains(&format!("  {k}\n")), "{k} not named:\n{said}");
                    }
                    assert_eq!(run_keys(&r, &i.run), vec![], "{what}");
                    let again = text(&drill(&config, &["--cleanup"]).stdout);
                    assert!(
                        again.starts_with("nothing left by a drill on target staging"),
                        "{again}"
                    );
                } else {
                    let deadline = Instant::now() + Duration::from_millis(lease as u64 + 1_000);
                    while !run_keys(&r, &i.run).is_empty() {
                        assert!(Instant::now() < deadline, "{what}: {:?}", run_keys(&r, &i.run));
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                assert_bystanders(&r);
            })
        })
        .collect();
    for run in runs {
        run.join().unwrap();
    }
}
