//! Golden tests: one report of each drill, rendered in each format (text, markdown, HTML
//! from the document; JSON from the report's facts), held byte for byte against the files in
//! `tests/golden/`. After a deliberate change, `UPDATE_GOLDEN=1 cargo test --lib golden`
//! rewrites them; read the diff before committing it.

use std::path::PathBuf;

use super::report::{FreezeReport, Witness};
use super::seen::Window;
use super::span::Thaw;
use super::verdict::{Finding, LockVerdict, Refusal, Shown, Verdict};
use crate::drill::report::{CounterCheck, Event, Judged, Lane, Report, Step};

/// A failing stale-holder run: a plain-DEL release deleted B's lock.
pub(crate) fn staged() -> Report {
    let steps = [
        ("worker A acquires", 12, "A holds drill:lock:r1 with fence 1", true),
        ("B is refused while A holds", 15, "B's SET NX was refused", true),
        (
            "A is paused past the TTL; the key expires",
            1_031,
            "A frozen 1.0 s; Redis expired the key",
            true,
        ),
        (
            "B acquires with a higher token",
            1_035,
            "B holds the lock with fence 2",
            true,
        ),
        (
            "B writes to the fenced resource",
            1_039,
            "the resource took B's write (fence 2)",
            true,
        ),
        (
            "A wakes and tries to renew",
            1_046,
            "the renewal was refused: not owned",
            true,
        ),
        (
            "A tries to release",
            1_049,
            "the release deleted the key: the script is a plain DEL",
            false,
        ),
        (
            "A writes with its old token",
            1_052,
            "the resource refused fence 1",
            true,
        ),
        ("B's lock and write are intact", 1_055, "B's lock is gone", false),
    ];
    let steps: Vec<Step> = steps
        .iter()
        .enumerate()
        .map(|(i, (title, at, happened, ok))| Step {
            n: i + 1,
            title: (*title).into(),
            at_ms: *at,
            happened: (*happened).into(),
            expected: "as the lock's contract says".into(),
            ok: *ok,
            check: vec![format!("redis-cli -p 6379 PTTL 'drill:lock:r1' # step {}", i + 1)],
            consequence: (!ok).then(|| "a stale release deleted B's lock: two holders".into()),
        })
        .collect();
    let at = |at_ms, lane, what: &str, ok| Event::at(at_ms, lane, what, ok);
    let mut events = vec![
        at(12, Lane::WorkerA, "A acquires", true),
        at(15, Lane::WorkerB, "B refused", true),
        Event::span(20, 1_043, Lane::WorkerA, "SIGSTOP", true),
        at(1_031, Lane::Redis, "key expired", true),
        at(1_035, Lane::WorkerB, "B takes over", true),
        at(1_039, Lane::WorkerB, "B's fenced write", true),
        at(1_043, Lane::WorkerA, "SIGCONT", true),
        at(1_046, Lane::WorkerA, "renew refused", true),
        at(1_049, Lane::WorkerA, "release ACCEPTED", false),
        at(1_052, Lane::WorkerA, "stale write refused", true),
        at(1_055, Lane::Redis, "B's lock damaged", false),
        at(1_058, Lane::WorkerB, "B releases", false),
        at(
            2_310,
            Lane::Lockwatch,
            "5 of 6 counters moved as expected for the run's key",
            false,
        ),
    ];
    for (i, e) in events.iter_mut().enumerate().take(11) {
        e.step = Some([1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9][i]);
    }
    let counter = |series: &str, expected: f64, drill: f64, other: f64| CounterCheck {
        series: series.into(),
        expected,
        moved: drill + other,
        ok: drill == expected,
        judged_by: Judged::Key,
        drill: Some(drill),
        other: Some(other),
    };
    let mut r = Report {
        run_id: "r1".into(),
        started_at: "2026-11-29T00:00:00Z".into(),
        target: "staging".into(),
        namespace: "drill".into(),
        scenario: "stale-holder".into(),
        lock_key: "drill:lock:r1".into(),
        ttl_ms: 1_000,
        preflight: vec![
            ("target".into(), "staging, redis 7.0.15".into()),
            (
                "notifications".into(),
                "on: the exporter watches expiries | takeovers".into(),
            ),
        ],
        steps,
        events,
        counters: vec![
            counter("lockwatch_lock_expiry_takeovers_total", 1.0, 1.0, 0.0),
            counter(
                "lockwatch_lock_events_total{op=\"release\",outcome=\"not_owned\"}",
                1.0,
                0.0,
                2.0,
            ),
        ],
        attribution: "judged by the history of the run's lock key; 2 more from other traffic".into(),
        alerts: vec![("LockExpiryTakeover".into(), "pending".into())],
        cycles: None,
        rollback: vec!["worker A stopped".into(), "3 keys deleted".into()],
        interrupted: false,
        result: String::new(),
    };
    r.finish();
    r
}

/// A worker that noticed late: it went on 4.8 s under a lock taken over while it was
/// frozen; a second lock outlasted the freeze.
pub(crate) fn frozen() -> FreezeReport {
    let (frozen, thawed, end) = (1_000_000, 1_006_000, 1_015_000);
    let finding = Finding::NoticedLate;
    let late = LockVerdict {
        key: "lock:payout:batch-7".into(),
        verdict: finding.verdict(),
        finding,
        attributed_by: "MONITOR saw the frozen worker's connection renew it (EVALSHA)".into(),
        owner: Some("w1".into()),
        last_renewal_ms: Some(frozen - 300),
        expired_ms: Some(frozen + 1_700),
        taken_over_ms: Some(frozen + 3_200),
        new_owner: Some("w2".into()),
        deleted_ms: None,
        deleted_how: None,
        exposure_ms: Some(4_800),
        last_act: Some("its release not_owned event, logged".into()),
        exposure_open: false,
        commands: vec![
            Shown {
                at_ms: thawed,
                name: "EVALSHA".into(),
                by: "127.0.0.1:50438".into(),
                taken_as: "acting",
            },
            Shown {
                at_ms: thawed + 4_800,
                name: "SET NX".into(),
                by: "127.0.0.1:50438".into(),
                taken_as: "acquiring",
            },
        ],
        commands_seen: 2,
        refusals: vec![Refusal {
            at_ms: thawed + 4_800,
            what: "release not_owned from payout".into(),
            whose: "the worker's: its pid 11470".into(),
        }],
        not_credited: vec![],
        consequence: finding.consequence(Some(4_800), false),
        fix: finding.fix(),
        notes: vec!["the woken worker's writes on this key (MONITOR): EVALSHA at +0.0 s".into()],
    };
    let outlasted = LockVerdict {
        key: "lock:payout:<batch-8>".into(),
        verdict: Finding::OutlastedFreeze.verdict(),
        finding: Finding::OutlastedFreeze,
        attributed_by: "held when the worker froze, its owner the worker's".into(),
        last_renewal_ms: Some(frozen - 500),
        expired_ms: None,
        taken_over_ms: None,
        new_owner: None,
        exposure_ms: None,
        last_act: None,
        commands: vec![],
        commands_seen: 0,
        refusals: vec![],
        consequence: Finding::OutlastedFreeze.consequence(None, false),
        fix: Finding::OutlastedFreeze.fix(),
        notes: vec![],
        ..late.clone()
    };
    let mut r = FreezeReport {
        verdict: Verdict::Unsafe,
        result: "unsafe: 1 of the 2 lock(s) the frozen worker held were handled unsafely after the thaw".into(),
        started_at: "2026-11-29T00:00:00Z".into(),
        target: "staging".into(),
        namespace: "payout".into(),
        frozen: "pid:11470".into(),
        what: "process 11470 (python payout_worker.py --name w1)".into(),
        method: "a ptrace stop".into(),
        thaw: Thaw {
            by: "drill".into(),
            frozen_ms: 6_000,
            by_hand: "lockwatch drill --thaw pid:11470".into(),
            ..Thaw::default()
        },
        for_ms: 6_000,
        observe_ms: 9_000,
        window: Some(Window {
            frozen_ms: frozen,
            thawed_ms: thawed,
            end_ms: end,
        }),
        worker: "pids 11470; 1 file(s) written (/var/log/payout/w1.log)".into(),
        held_at_freeze: 3,
        locks: vec![late, outlasted],
        counted: vec![],
        witness: Witness {
            ran: true,
            unavailable: None,
            unsure: vec![],
            worker_connections: vec![(
                "127.0.0.1:50438".into(),
                "a TCP connection of the frozen process, from /proc".into(),
            )],
        },
        timeline: vec![],
        alerts: vec![("LockExpiryTakeover".into(), "firing".into())],
        notes: vec!["1 lock of the namespace was another holder's: left out".into()],
        interrupted: false,
    };
    r.build_timeline();
    r
}

fn golden(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    // The stylesheet and the version are not the report's: left out of the golden files.
    let got = got
        .replace(crate::document::html::STYLE, "/* style.css */")
        .replace(env!("CARGO_PKG_VERSION"), "VERSION");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap_or(&path)).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; write it with UPDATE_GOLDEN=1", path.display()));
    if got != want {
        let new = path.with_extension(format!(
            "{}.new",
            path.extension().and_then(|e| e.to_str()).unwrap_or("")
        ));
        std::fs::write(&new, &got).unwrap();
        panic!(
            "{name} differs from its golden file: diff {} {} (UPDATE_GOLDEN=1 to accept)",
            path.display(),
            new.display()
        );
    }
}

#[test]
fn the_staged_drill_reads_the_same_in_every_format() {
    let r = staged();
    let doc = r.document();
    golden("drill.txt", &doc.text());
    golden("drill.md", &doc.markdown());
    golden("drill.html", &doc.html());
    golden("drill.json", &(serde_json::to_string_pretty(&r).unwrap() + "\n"));
}

#[test]
fn the_freeze_drill_reads_the_same_in_every_format() {
    let r = frozen();
    let doc = r.document();
    golden("freeze.txt", &doc.text());
    golden("freeze.md", &doc.markdown());
    golden("freeze.html", &doc.html());
    golden("freeze.json", &(serde_json::to_string_pretty(&r).unwrap() + "\n"));
}

#[test]
fn the_json_keeps_every_documented_key() {
    let staged = serde_json::to_value(staged()).unwrap();
    for key in [
        "run_id", "scenario", "lock_key", "ttl_ms", "steps", "events", "counters", "result",
    ] {
        assert!(staged.get(key).is_some(), "staged: {key}");
    }
    let e = &staged["events"][2];
    assert_eq!((e["at_ms"].as_i64(), e["until_ms"].as_i64()), (Some(20), Some(1_043)));
    assert_eq!(e["lane"], "worker_a");
    let frozen = serde_json::to_value(frozen()).unwrap();
    for key in ["verdict", "locks", "timeline", "witness", "thaw", "notes", "result"] {
        assert!(frozen.get(key).is_some(), "freeze: {key}");
    }
    assert_eq!(frozen["verdict"], "unsafe");
    let lock = &frozen["locks"][0];
    for key in [
        "exposure_ms",
        "last_act",
        "exposure_open",
        "commands",
        "commands_seen",
        "refusals",
        "not_credited",
    ] {
        assert!(lock.get(key).is_some(), "lock: {key}");
    }
    let span = frozen["timeline"]
        .as_array()
        .and_then(|t| t.iter().find(|m| m["until_ms"].is_i64() && m["ok"] == false))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (span["at_ms"].as_i64(), span["until_ms"].as_i64()),
        (Some(6_000), Some(10_800))
    );
    assert_eq!(span["lane"], "worker");
}

#[test]
fn many_commands_after_the_thaw_keep_the_drawing_a_page_high() {
    let mut r = frozen();
    let lock = r.locks[0].clone();
    r.locks = (0..3)
        .map(|n| LockVerdict {
            key: format!("lock:payout:{n}"),
            commands: (0..25)
                .map(|i| Shown {
                    at_ms: 1_006_000 + i * 16,
                    name: "SET".into(),
                    by: "127.0.0.1:50438".into(),
                    taken_as: "acting",
                })
                .collect(),
            commands_seen: 25,
            ..lock.clone()
        })
        .collect();
    r.build_timeline();
    let html = r.document().html();
    let svg = html.split("<svg class=\"timeline whole\"").nth(1).unwrap_or("");
    let height: f64 = svg
        .split("viewBox=\"0 0 1000 ")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::MAX);
    assert!(height < 700.0, "a drawing {height} high");
    // Every moment is still drawn, and listed.
    assert_eq!(
        svg.split("</svg>").next().unwrap_or("").matches("<circle").count(),
        r.timeline.len()
    );
}
