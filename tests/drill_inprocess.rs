//! `lockwatch::drill::run` called in-process, against a real redis-server (and the real
//! exporter), told through a recording narrator: the stale-holder scenario passes with the
//! nine steps said in order; a run cancelled during the pause rolls back, reports
//! interrupted, and leaves no run key and no stopped worker A behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Served;
use lockwatch::access::child::RedisChild;
use lockwatch::drill::narrator::{Gate, Narrator, Progress, Said};
use lockwatch::drill::{self, Options};
use tokio_util::sync::CancellationToken;

const CONFIG: &str = "[[target]]\nname = \"staging\"\nurl = \"{url}\"\nsample_interval = \"250ms\"\n\
     [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"{ttl}\"\n";

/// Everything the run said, as lines; the gates it stopped at; the pid it paused.
#[derive(Default)]
struct Recorder {
    said: Vec<String>,
    gates: Vec<String>,
    ticks: usize,
    paused: Option<i32>,
    /// Told the pid of worker A when it has been frozen.
    on_pause: Option<tokio::sync::oneshot::Sender<i32>>,
}

impl Narrator for Recorder {
    fn say(&mut self, said: Said<'_>) {
        match said {
            Said::Intro { run_id, keys, .. } => self.said.push(format!("intro {run_id} {}", keys.lock)),
            Said::Step(s) => self
                .said
                .push(format!("{} step {}: {}", if s.ok { "✓" } else { "✗" }, s.n, s.title)),
            Said::Counters { checks, watched } => self.said.push(format!("counters {} {watched}", checks.len())),
            Said::Interrupted => self.said.push("interrupted".into()),
            Said::RolledBack(lines) => self.said.extend(lines.iter().map(|l| format!("rollback: {l}"))),
            other => self.said.push(format!("{other:?}")),
        }
    }

    fn progress(&mut self, progress: Progress) {
        match progress {
            Progress::PauseStarted { pid, .. } => {
                self.paused = Some(pid);
                if let Some(tx) = self.on_pause.take() {
                    let _ = tx.send(pid);
                }
            }
            Progress::Paused { .. } => self.ticks += 1,
            _ => {}
        }
    }

    fn gate<'a>(&'a mut self, explain: &'a str) -> Gate<'a> {
        self.gates.push(explain.to_string());
        Box::pin(std::future::ready(()))
    }
}

/// The config, loaded in-process and written to a file for worker A.
fn setup(r: &RedisChild, dir: &std::path::Path, ttl: &str) -> (lockwatch::config::Config, Options) {
    let toml = CONFIG.replace("{ttl}", ttl);
    let path = dir.join("lockwatch.toml");
    std::fs::write(&path, toml.replace("{url}", &r.url())).unwrap();
    let opts = Options {
        // This process is the test binary: worker A is the real `lockwatch`.
        worker_program: Some(PathBuf::from(env!("CARGO_BIN_EXE_lockwatch"))),
        ..Options::new(path)
    };
    (common::config(r, &toml), opts)
}

/// Every key in the server (the drill's are the only ones there).
fn all_keys(r: &RedisChild) -> Vec<String> {
    redis::cmd("KEYS").arg("*").query(&mut common::conn(r)).unwrap()
}

/// Gone, or a zombie about to be reaped: not a stopped process.
fn process_gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drill_runs_in_process_and_says_each_step() {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let (config, mut opts) = setup(&r, dir.path(), "1s");
    let served = Served::start(config.clone()).await;
    served
        .wait_for(Duration::from_secs(5), "subscribed", |m| {
            m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
        })
        .await;
    opts.exporter = Some(format!("http://{}", served.addr));
    let mut narrator = Recorder::default();
    let report = drill::run(&config, &opts, &mut narrator, CancellationToken::new())
        .await
        .unwrap();

    assert!(report.passed(), "{}", report.text());
    assert!(report.result.starts_with("passed"), "{}", report.result);
    assert_eq!(report.steps.len(), 9);
    assert!(report.steps.iter().all(|s| s.ok), "{}", report.text());
    assert_eq!(report.counters.len(), 6, "{}", report.text());
    assert!(report.counters.iter().all(|c| c.ok), "{}", report.text());
    assert!(!report.interrupted);

    let steps: Vec<&str> = narrator
        .said
        .iter()
        .filter(|l| l.contains(" step "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        steps,
        [
            "✓ step 1: worker A acquires",
            "✓ step 2: B is refused while A holds",
            "✓ step 3: A is paused past the TTL; the key expires",
            "✓ step 4: B acquires with a higher token",
            "✓ step 5: B writes to the fenced resource",
            "✓ step 6: A wakes and tries to renew",
            "✓ step 7: A tries to release",
            "✓ step 8: A writes with its old token",
            "✓ step 9: B's lock and write are intact",
        ]
    );
    // The order of what was said: intro, steps, counters, rollback.
    let said = &narrator.said;
    assert_eq!(
        said[0],
        format!("intro {} drill:lock:drill-{}-1", report.run_id, report.run_id)
    );
    assert_eq!(said[10], "counters 6 true", "{said:#?}");
    assert!(said[11].starts_with("rollback: worker A (pid "), "{said:#?}");
    assert_eq!(
        said[12],
        "rollback: deleted 2 of the run's 3 keys (the others were gone already)"
    );
    assert_eq!(said.len(), 13, "{said:#?}");
    assert_eq!(narrator.gates.len(), 5, "{:?}", narrator.gates);
    assert!(narrator.gates[2].starts_with("A is frozen with SIGSTOP"));
    assert!(narrator.ticks >= 5, "the countdown was told {} times", narrator.ticks);
    assert_eq!(report.rollback.len(), 2);

    assert!(all_keys(&r).is_empty(), "{:?}", all_keys(&r));
    assert!(process_gone(narrator.paused.unwrap()), "worker A still exists");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_during_the_pause_rolls_back_and_reports_interrupted() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (config, opts) = setup(&r, dir.path(), "20s");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut narrator = Recorder {
        on_pause: Some(tx),
        ..Recorder::default()
    };
    let cancel = CancellationToken::new();
    // Ctrl-C, as it were: once worker A is frozen and holds its lock.
    let seen = tokio::spawn({
        let cancel = cancel.clone();
        let url = r.url();
        async move {
            let pid = rx.await.unwrap();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let mut c = redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut c).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
            (pid, state, keys)
        }
    });
    let started = Instant::now();
    let report = drill::run(&config, &opts, &mut narrator, cancel).await.unwrap();
    let (pid, state, keys_while_paused) = seen.await.unwrap();

    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the run waited out the 20 s pause"
    );
    assert!(state.contains(") T "), "worker A was not stopped: {state}");
    assert!(!keys_while_paused.is_empty(), "A's lock was not held");

    assert!(report.interrupted);
    assert!(!report.passed());
    assert!(report.result.starts_with("interrupted"), "{}", report.result);
    assert_eq!(report.steps.len(), 2, "{}", report.text());
    // A frozen until the interruption: its span on the timeline covers the 300 ms waited.
    let frozen = report
        .events
        .iter()
        .find(|e| e.what == "SIGSTOP")
        .unwrap_or_else(|| panic!("no SIGSTOP in {:#?}", report.events));
    let span = frozen.until_ms.unwrap_or(frozen.at_ms) - frozen.at_ms;
    assert!(span >= 300, "A frozen for {span} ms on the timeline: {frozen:?}");
    assert_eq!(
        report.rollback.first().map(String::as_str),
        Some(format!("worker A (pid {pid}) continued and ended").as_str())
    );
    let said = &narrator.said;
    let at = said.iter().position(|l| l == "interrupted").expect("interrupted said");
    assert!(said[at + 1].starts_with("rollback: worker A"), "{said:#?}");
    assert_eq!(said.len(), at + 3, "{said:#?}");

    assert!(all_keys(&r).is_empty(), "{:?}", all_keys(&r));
    assert!(process_gone(pid), "worker A still exists");
}
