//! The network-delay scenarios of `lockwatch drill` against a real redis-server: worker A
//! talks to Redis through the drill's proxy, which holds its renewal past the TTL
//! (`network-delay`), with A frozen as well and its release and write arriving late
//! (`pause-and-delay`). Each passes with the safe scripts (the exporter counting exactly
//! what happened), fails naming the step with a PEXPIRE-only renew or a plain-DEL release,
//! and leaves no key, no proxy and no stopped process behind when interrupted at any step —
//! in-process at each step, and by a real SIGINT to the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::drill::{exited, process_gone, run as drill, text, write_config};
use lockwatch::access::child::RedisChild;
use lockwatch::drill::narrator::{Narrator, Progress, Said};
use lockwatch::drill::{self, Options, Report, Scenario};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const SCENARIOS: [&str; 2] = ["network-delay", "pause-and-delay"];

/// Keys of the run `run_id` still in Redis (every key of a run carries its id).
fn keys_of(r: &RedisChild, run_id: &str) -> Vec<String> {
    let all: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut common::conn(r)).unwrap();
    all.into_iter().filter(|k| k.contains(run_id)).collect()
}

/// The pid of worker A and the proxy's address, as the rollback reported them.
fn rolled_back(rollback: &[String]) -> (Option<i32>, Option<String>) {
    let pid = rollback.iter().find_map(|l| {
        l.strip_prefix("worker A (pid ")
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse().ok())
    });
    let proxy = rollback.iter().find_map(|l| {
        l.strip_prefix("network proxy ")
            .and_then(|r| r.split(' ').next())
            .map(str::to_string)
    });
    (pid, proxy)
}

/// Whether the proxy the rollback closed still listens (checked right after the rollback:
/// later, another run's proxy may have been given the same free port). A worker process
/// being started by a concurrent in-process run holds a copy of every socket between its
/// fork and its exec, so a closed listener can answer for a moment: only one that keeps
/// answering for half a second still listens.
fn proxy_listens(rollback: &[String]) -> Option<bool> {
    let (_, proxy) = rolled_back(rollback);
    proxy.map(|p| {
        (0..10).all(|_| {
            let up = std::net::TcpStream::connect(&p).is_ok();
            if up {
                std::thread::sleep(Duration::from_millis(50));
            }
            up
        })
    })
}

/// Nothing of the run left: no key, worker A gone; the proxy closed (`listens` as
/// `proxy_listens` found it).
fn nothing_left(r: &RedisChild, run_id: &str, rollback: &[String], listens: Option<bool>, what: &str) {
    assert!(
        keys_of(r, run_id).is_empty(),
        "{what}: keys left {:?}",
        keys_of(r, run_id)
    );
    assert_eq!(
        listens,
        Some(false),
        "{what}: the proxy still listens, or none was closed: {rollback:?}"
    );
    let (pid, _) = rolled_back(rollback);
    if let Some(pid) = pid {
        assert!(process_gone(pid), "{what}: worker A (pid {pid}) still exists");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scenario_passes_and_the_exporter_counts_exactly_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let (r, config, s, exporter) = common::drill::served(dir.path()).await;
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        let (cfg, exporter) = (config.clone(), exporter.clone());
        let out = tokio::task::spawn_blocking(move || {
            drill(
                &cfg,
                &[
                    "--yes",
                    "--scenario",
                    scenario,
                    "--exporter",
                    &exporter,
                    "--format",
                    "json",
                ],
            )
        })
        .await
        .unwrap();
        exited(&out, 0, scenario);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["scenario"], *scenario);
        let steps = report["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 9, "{report}");
        assert!(steps.iter().all(|s| s["ok"] == true), "{report}");
        let counters = report["counters"].as_array().unwrap();
        assert_eq!(counters.len(), 6, "{report}");
        assert!(counters.iter().all(|c| c["ok"] == true), "{report}");
        // The exporter's own view: one more stale renew, release, write and takeover each run.
        let m = s.metrics().await;
        let n = (i + 1) as f64;
        for (op, outcome) in [
            ("renew", "not_owned"),
            ("release", "not_owned"),
            ("write", "stale_fence"),
        ] {
            let labels = [("namespace", "drill"), ("op", op), ("outcome", outcome)];
            assert_eq!(m.val("lockwatch_lock_events_total", &labels), n, "{scenario} {op}");
        }
        assert_eq!(
            m.val("lockwatch_lock_expiry_takeovers_total", &[("namespace", "drill")]),
            n,
            "{scenario}"
        );
        let run_id = report["run_id"].as_str().unwrap();
        let rollback: Vec<String> = serde_json::from_value(report["rollback"].clone()).unwrap();
        nothing_left(&r, run_id, &rollback, proxy_listens(&rollback), scenario);
    }
    s.stop().await;
}

#[test]
fn unsafe_scripts_fail_the_drill_naming_the_step() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    let renew = dir.path().join("renew.lua");
    std::fs::write(&renew, "return redis.call('pexpire', KEYS[1], ARGV[2])\n").unwrap();
    let release = common::drill::plain_del_release(dir.path());
    let cases = [
        (
            "network-delay",
            "--renew-script",
            &renew,
            "step 6 (A's delayed renewal reaches Redis)",
        ),
        (
            "pause-and-delay",
            "--renew-script",
            &renew,
            "step 6 (A's delayed renewal reaches Redis while A is frozen)",
        ),
        (
            "network-delay",
            "--release-script",
            &release,
            "step 7 (A tries to release)",
        ),
        (
            "pause-and-delay",
            "--release-script",
            &release,
            "step 7 (A's release arrives late)",
        ),
    ];
    std::thread::scope(|scope| {
        let runs: Vec<_> = cases
            .iter()
            .map(|(scenario, flag, script, _)| {
                let config = &config;
                scope.spawn(move || {
                    drill(
                        config,
                        &["--yes", "--scenario", scenario, flag, script.to_str().unwrap()],
                    )
                })
            })
            .collect();
        for (run, (scenario, flag, _, step)) in runs.into_iter().zip(&cases) {
            let out = run.join().unwrap();
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(out.status.code(), Some(1), "{scenario} {flag}: {stdout}{stderr}");
            assert!(
                stdout.contains("FAILED") && stdout.contains(step),
                "{scenario} {flag}: {stdout}"
            );
            let meaning = if *flag == "--renew-script" {
                "a PEXPIRE without an owner check"
            } else {
                "plain DEL"
            };
            assert!(stderr.contains(meaning), "{scenario} {flag}: {stderr}");
        }
    });
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut common::conn(&r)).unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// A narrator that cancels the run at one point: when step `after` has been said (0: at
/// the intro), or at the first tick of the step-3 countdown (`countdown`).
struct CancelAt {
    after: usize,
    countdown: bool,
    cancel: CancellationToken,
    /// `proxy_listens` when the rollback was said.
    listens: Option<bool>,
}

impl Narrator for CancelAt {
    fn say(&mut self, said: Said<'_>) {
        let done = match said {
            Said::Intro { .. } => Some(0),
            Said::Step(s) => Some(s.n),
            Said::RolledBack(lines) => {
                self.listens = proxy_listens(lines);
                None
            }
            _ => None,
        };
        if !self.countdown && done == Some(self.after) {
            self.cancel.cancel();
        }
    }

    fn progress(&mut self, progress: Progress) {
        if self.countdown && matches!(progress, Progress::Held { .. } | Progress::Paused { .. }) {
            self.cancel.cancel();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_at_any_step_nothing_is_left_behind() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &r.url(), "", "1s");
    let config = lockwatch::config::Config::load(&path, &Default::default()).unwrap();
    // Every run at once: each scenario cancelled before each of its nine steps, and during
    // the wait for the TTL with A's renewal held.
    let mut runs = Vec::new();
    for scenario in [Scenario::NetworkDelay, Scenario::PauseAndDelay] {
        let points = (0..9).map(|after| (after, false)).chain([(2, true)]);
        for (after, countdown) in points {
            let (config, path) = (config.clone(), path.clone());
            runs.push(tokio::spawn(async move {
                let opts = Options {
                    scenario,
                    worker_program: Some(PathBuf::from(BIN)),
                    ..Options::new(path)
                };
                let cancel = CancellationToken::new();
                let mut narrator = CancelAt {
                    after,
                    countdown,
                    cancel: cancel.clone(),
                    listens: None,
                };
                let started = Instant::now();
                let report: Report = drill::run(&config, &opts, &mut narrator, cancel).await.unwrap();
                (scenario, after, countdown, report, narrator.listens, started.elapsed())
            }));
        }
    }
    let mut done = Vec::new();
    for run in runs {
        done.push(run.await.unwrap());
    }
    for (scenario, after, countdown, report, listens, took) in done {
        let what = format!(
            "{} cancelled {}",
            scenario.name(),
            if countdown {
                "during the TTL wait".to_string()
            } else {
                format!("after step {after}")
            }
        );
        assert!(report.interrupted, "{what}: {}", report.text());
        assert!(!report.passed());
        assert_eq!(report.steps.len(), after, "{what}: {}", report.text());
        assert!(took < Duration::from_secs(10), "{what} took {took:?}");
        nothing_left(&r, &report.run_id, &report.rollback, listens, &what);
    }
}

#[test]
fn sigint_while_a_renewal_is_held_rolls_back() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "20s");
    for (scenario, marker) in [
        ("network-delay", "A's renewal held in the network"),
        ("pause-and-delay", "A paused (pid "),
    ] {
        let mut child = Command::new(BIN)
            .args(["drill", "--yes", "--format", "json", "--scenario", scenario, "-c"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let started = Instant::now();
        loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "{scenario}: ended before the wait"
            );
            if line.trim().starts_with(marker) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "{scenario}");
        }
        let held: Vec<String> = redis::cmd("KEYS")
            .arg("drill:lock:*")
            .query(&mut common::conn(&r))
            .unwrap();
        assert_eq!(held.len(), 1, "{scenario}: A's lock is not held");
        assert!(
            Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
        let out = child.wait_with_output().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert_eq!(out.status.code(), Some(1), "{scenario}: {rest}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{scenario}: waited out the TTL"
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["interrupted"], true, "{report}");
        let rollback: Vec<String> = serde_json::from_value(report["rollback"].clone()).unwrap();
        nothing_left(
            &r,
            report["run_id"].as_str().unwrap(),
            &rollback,
            proxy_listens(&rollback),
            scenario,
        );
    }
}
