//! `lockwatch serve` as a process with saved offsets: graceful restarts and ten SIGKILLs
//! under a steady writer and after bursts leave every count exact — the counters continue from the
//! counts saved with the offsets, never go down, and nothing is read twice; a file rewritten
//! in place while lockwatch was stopped (same first bytes) is read from its start; multi-line
//! records through rotation and a restart that cuts one; and the stdin source.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use common::Metrics;
use common::logs::{
    NAMESPACES, Writer, append, event, lines_of, not_owned, ordinary, restartable, settle, spawn_serve, stack_trace,
    traceback, workflow_events,
};

/// Lines and `workflow` not-owned releases on `/metrics`.
fn counts(m: &Metrics) -> (u64, u64) {
    let (a, b, c) = lines_of(m, "app");
    ((a + b + c) as u64, not_owned(m, "workflow") as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_continues_the_counters_exactly() {
    let (_r, dir, port, config) = restartable();
    let w = Writer::start(dir.path().join("app.log"), 2000);
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    first.signal("-TERM");
    let (lines1, matched1) = first.stopped_totals();
    assert!(lines1 > 0, "the first run read nothing");
    tokio::time::sleep(Duration::from_millis(800)).await; // more is appended while stopped
    let total = w.finish();
    assert!(total > lines1, "nothing was written after the stop");

    let mut second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    // The counters start from the first run's saved counts…
    let (at_start, events_at_start) = counts(&second.metrics().await);
    assert!(
        at_start >= lines1,
        "{at_start} lines at start, the first run counted {lines1}"
    );
    assert!(events_at_start >= matched1);
    settle(&second, total).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // …and reach exactly what was written: nothing lost, nothing counted twice.
    assert_eq!(counts(&second.metrics().await), (total, total.div_ceil(10)));
    second.signal("-TERM");
    // The second run read only what the first had not counted.
    assert_eq!(second.stopped_totals().0, total - lines1);
}

/// A burst of 1,000 lines (100 events) appended in one write.
fn burst(path: &std::path::Path) {
    let text: String = (0..1000)
        .map(|i| if i % 10 == 0 { event(i) } else { ordinary(i) })
        .collect();
    append(path, &text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_sigkills_during_a_writer_and_after_bursts_neither_lose_nor_repeat_a_count() {
    let (_r, dir, port, config) = restartable();
    let log = dir.path().join("app.log");
    let w = Writer::start(log.clone(), 3000);
    let mut last_seen = (0, 0);
    let mut bursts = 0;
    for round in 0..10u64 {
        let mut p = spawn_serve(
            &config,
            &dir.path().join(format!("run{round}.log")),
            port,
            Stdio::null(),
        );
        // A counter continued from saved counts never goes below what was scraped before
        // the kill: Prometheus would take a drop for a reset and count everything again.
        let first = counts(&p.metrics().await);
        assert!(
            first.0 >= last_seen.0 && first.1 >= last_seen.1,
            "round {round}: {first:?} after the restart, {last_seen:?} scraped before the kill"
        );
        // Scrape while lines are read, then kill: during the steady writer at a different
        // moment of the 1 s save period each round, or 200 ms after a burst.
        let scrapes = if round % 2 == 0 { 8 + round } else { 6 };
        for _ in 0..scrapes {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = counts(&p.metrics().await);
            assert!(now.0 >= last_seen.0, "round {round}: lines went down");
            last_seen = now;
        }
        if round % 2 == 1 {
            burst(&log);
            bursts += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        p.signal("-KILL");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let written = w.finish();
    // The steady writer's events are every 10th of its lines, from the first.
    let (total, events) = (written + bursts * 1000, written.div_ceil(10) + bursts * 100);
    let mut p = spawn_serve(&config, &dir.path().join("last.log"), port, Stdio::null());
    settle(&p, total).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = counts(&p.metrics().await);
    eprintln!("after 10 SIGKILLs: {got:?} counted (lines, events); {total} lines and {events} events written");
    assert_eq!(got, (total, events), "counts lost or repeated across SIGKILLs");
    p.signal("-TERM");
    // What was saved last covers the whole file, with its counts.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("state/logs-app.offsets.json")).unwrap()).unwrap();
    let size = std::fs::metadata(&log).unwrap().len();
    assert_eq!(saved["files"][0]["offset"].as_u64(), Some(size));
    let l = &saved["counts"]["lines"];
    assert_eq!(l["matched"].as_u64().unwrap() + l["ignored"].as_u64().unwrap(), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rewritten_in_place_while_stopped_is_read_from_its_start() {
    let (_r, dir, port, config) = restartable();
    let log = dir.path().join("app.log");
    // A banner longer than the 1 KiB fingerprint: the same first bytes before and after.
    let banner: String = (0..30)
        .map(|i| format!("# app 1.2.3 starting, banner line {i:02} ......\n"))
        .collect();
    assert!(banner.len() > 1024);
    let lines = |from: usize, n: usize| -> String {
        (from..from + n)
            .map(|i| if i % 2 == 0 { event(i) } else { ordinary(i) })
            .collect()
    };
    std::fs::write(&log, banner.clone() + &lines(0, 10)).unwrap();
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    settle(&first, 40).await;
    first.signal("-TERM");
    // Rewritten in place (same inode), longer than before: the old offset lies inside it.
    let f = OpenOptions::new().write(true).truncate(true).open(&log).unwrap();
    drop(f);
    append(&log, &(banner + &lines(100, 30)));

    let mut second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    settle(&second, 40 + 60).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // 30 + 10 lines of the first file, 30 + 30 of the new one, none lost.
    assert_eq!(counts(&second.metrics().await), (100, 5 + 15));
    second.signal("-TERM");
    let text = std::fs::read_to_string(dir.path().join("run2.log")).unwrap();
    assert!(text.contains("rewritten while lockwatch was stopped"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_source_is_counted() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{}\"\nnotifications = \"off\"\n{NAMESPACES}\n[[logs]]\nname = \"app\"\npath = \"-\"\n",
            r.url()
        ),
    )
    .unwrap();
    let mut p = spawn_serve(&config, &dir.path().join("run.log"), port, Stdio::piped());
    let mut stdin = p.child.stdin.take().unwrap();
    stdin
        .write_all((event(1) + &ordinary(2) + &event(3)).as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    settle(&p, 3).await;
    drop(stdin); // EOF: the source ends, the exporter keeps serving
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = p.metrics().await;
    assert_eq!(lines_of(&m, "app"), (2.0, 1.0, 0.0));
    assert_eq!(not_owned(&m, "workflow"), 2.0);
    p.signal("-TERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_line_records_are_counted_once_through_rotation_and_restart() {
    let (_r, dir, port, config) = restartable();
    let log = dir.path().join("app.log");
    append(&log, &(ordinary(0) + &traceback(1) + &ordinary(2) + &stack_trace(3)));
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    // The stack trace at the end is counted once the file has been quiet for a second.
    settle(&first, 11).await;

    // A traceback written in two pieces is one record.
    let tb = traceback(4);
    let (head, tail) = tb.split_at(tb.find("  File").unwrap());
    append(&log, head);
    tokio::time::sleep(Duration::from_millis(400)).await;
    append(&log, &(tail.to_string() + &ordinary(5)));
    settle(&first, 17).await;

    // Rename rotation, the writer still writing records to the renamed file.
    let mut old = OpenOptions::new().append(true).open(&log).unwrap();
    old.write_all(traceback(6).as_bytes()).unwrap();
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    old.write_all(stack_trace(7).as_bytes()).unwrap();
    append(&log, &(ordinary(8) + &traceback(9)));
    old.write_all(ordinary(10).as_bytes()).unwrap();
    drop(old);
    settle(&first, 33).await;

    // copytruncate: the copy is not read, the file starts again at 0.
    std::fs::copy(&log, dir.path().join("app.log.2")).unwrap();
    OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    append(&log, &(stack_trace(11) + &ordinary(12)));
    settle(&first, 38).await;
    let m = first.metrics().await;
    assert_eq!(workflow_events(&m), (4.0, 3.0), "events counted twice or lost");
    assert_eq!(lines_of(&m, "app"), (32.0, 6.0, 0.0));

    // Half a record when lockwatch stops: not counted, and the offset stays before it.
    let st = stack_trace(13);
    let (head, tail) = st.split_at(st.find("\tat").unwrap());
    append(&log, head);
    tokio::time::sleep(Duration::from_millis(400)).await;
    first.signal("-TERM");
    assert_eq!(first.stopped_totals(), (38, 32));
    append(&log, &(tail.to_string() + &traceback(14) + &ordinary(15)));

    let mut second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    settle(&second, 48).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m = second.metrics().await;
    // The counters continue from the first run's 38 lines: 10 more, the cut record one event.
    assert_eq!(lines_of(&m, "app"), (41.0, 7.0, 0.0), "lines lost or counted twice");
    assert_eq!(
        workflow_events(&m),
        (5.0, 4.0),
        "the record cut by the stop is one event"
    );
    second.signal("-TERM");
}
