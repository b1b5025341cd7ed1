#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::*;

fn config(namespaces: &[&str], dir: Option<&Path>, max: usize) -> Config {
    super::super::test_config(&format!("max_drills = {max}"), "main", namespaces, dir)
}

fn start(config: &Config, registry: &Registry) -> Results {
    Results::start(
        config,
        registry,
        super::super::refused::Refusals::register(registry).unwrap(),
    )
    .unwrap()
}

fn body(name: &str, ns: &str, run: &str, verdict: &str, ended_ms: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "name": name, "kind": "freeze", "target": "main", "namespace": ns,
        "run": run, "verdict": verdict, "ended_ms": ended_ms, "exposure_ms": if verdict == "unsafe" { 3200 } else { 0 },
        "summary": "lock:1: went on 3.2 s after the thaw",
        "report": {"target": "main", "namespace": ns, "verdict": verdict},
        "document": {"title": "Freeze drill", "badge": {"word": "W", "class": verdict},
            "lead": "x", "facts": [], "sections": [], "tab": "t"},
    }))
    .unwrap()
}

fn series(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[test]
fn the_gauges_follow_the_latest_run_and_the_counts_every_run() {
    let registry = Registry::new().unwrap();
    let r = start(&config(&["payouts"], None, 100), &registry);
    let t = |x: &Results, b: Vec<u8>| x.record(&b, 9_000_000).unwrap().0;
    assert_eq!(t(&r, body("nightly", "payouts", "a", "safe", 1_000)), Taken::Kept);
    assert_eq!(t(&r, body("nightly", "payouts", "b", "unsafe", 2_000)), Taken::Kept);
    assert_eq!(t(&r, body("nightly", "payouts", "b", "unsafe", 2_000)), Taken::Again);
    let text = registry.encode().unwrap();
    let l = r#"drill="nightly",namespace="payouts",target="main""#;
    for (line, want) in [
        (format!("lockwatch_drill_verdict{{{l},verdict=\"unsafe\"}} 1"), true),
        (format!("lockwatch_drill_verdict{{{l},verdict=\"safe\"}} 0"), true),
        (
            format!("lockwatch_drill_verdict{{{l},verdict=\"interrupted\"}} 0"),
            true,
        ),
        (format!("lockwatch_drill_runs_total{{{l},verdict=\"unsafe\"}} 1"), true),
        (format!("lockwatch_drill_runs_total{{{l},verdict=\"safe\"}} 1"), true),
        (
            format!("lockwatch_drill_runs_total{{{l},verdict=\"not_exercised\"}} 0"),
            true,
        ),
        (format!("lockwatch_drill_last_run_timestamp_seconds{{{l}}} 2"), true),
        (format!("lockwatch_drill_exposure_seconds{{{l}}} 3.2"), true),
        (format!("lockwatch_drill_verdict_streak{{{l}}} 1"), true),
    ] {
        assert_eq!(series(&text, &line), want, "{line}\n{text}");
    }
    // A run that ended before the latest joins the history, not the gauges.
    t(&r, body("nightly", "payouts", "c", "safe", 1_500));
    let k = &r.list()[0];
    assert_eq!(k.latest.run, "b");
    let runs: Vec<&str> = k.recent.iter().map(|r| r.run.as_str()).collect();
    assert_eq!(runs, ["a", "c", "b"]);
    assert_eq!(k.runs[&Verdict::Safe], 2);
}

#[test]
fn the_streak_counts_the_latest_verdict_in_a_row_and_thirty_runs_are_kept() {
    let registry = Registry::new().unwrap();
    let r = start(&config(&["payouts"], None, 100), &registry);
    for i in 0..40u64 {
        let v = if i < 37 { "safe" } else { "not_exercised" };
        r.record(&body("d", "payouts", &format!("r{i}"), v, 1_000 + i), 9_000_000)
            .unwrap();
    }
    let k = &r.list()[0];
    assert_eq!((k.recent.len(), k.streak()), (RECENT, 3));
    assert_eq!(k.runs[&Verdict::Safe], 37);
    assert!(
        registry
            .encode()
            .unwrap()
            .contains(r#"lockwatch_drill_verdict_streak{drill="d",namespace="payouts",target="main"} 3"#)
    );
}

#[test]
fn unknown_names_and_one_drill_too_many_are_refused_and_nothing_is_kept() {
    let registry = Registry::new().unwrap();
    let r = start(&config(&["payouts"], None, 2), &registry);
    let e = r.record(&body("d", "refunds", "a", "safe", 1), 9).unwrap_err();
    assert!(
        matches!(e, RecordError::Refused(ref x) if x.reason == DrillRefused::UnknownNamespace),
        "{e}"
    );
    r.record(&body("one", "payouts", "a", "safe", 1), 9).unwrap();
    r.record(&body("two", "payouts", "a", "safe", 1), 9).unwrap();
    let e = r.record(&body("three", "payouts", "a", "safe", 1), 9).unwrap_err();
    assert!(
        matches!(e, RecordError::Refused(ref x) if x.reason == DrillRefused::TooMany),
        "{e}"
    );
    // A kept drill records again at the bound.
    r.record(&body("two", "payouts", "b", "unsafe", 2), 9).unwrap();
    assert_eq!(r.list().len(), 2);
    let text = registry.encode().unwrap();
    assert!(
        series(&text, r#"lockwatch_drill_records_refused_total{reason="too_many"} 1"#),
        "{text}"
    );
    assert!(
        series(
            &text,
            r#"lockwatch_drill_records_refused_total{reason="unknown_namespace"} 1"#
        ),
        "{text}"
    );
    assert!(!text.contains(r#"drill="three""#));
}

#[test]
fn a_restart_reads_back_every_drill_and_a_reload_forgets_a_removed_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&["payouts", "refunds"], Some(dir.path()), 100);
    {
        let r = start(&cfg, &Registry::new().unwrap());
        r.record(&body("p", "payouts", "a", "unsafe", 5_000), 9_000_000)
            .unwrap();
        r.record(&body("p", "payouts", "b", "unsafe", 6_000), 9_000_000)
            .unwrap();
        r.record(&body("q", "refunds", "a", "safe", 5_000), 9_000_000).unwrap();
    }
    let registry = Registry::new().unwrap();
    let r = start(&cfg, &registry);
    let kept = r.named("p", None, None);
    assert_eq!((kept.len(), kept[0].recent.len(), kept[0].streak()), (1, 2, 2));
    assert_eq!(kept[0].latest.document.title, "Freeze drill");
    let text = registry.encode().unwrap();
    assert!(
        series(
            &text,
            r#"lockwatch_drill_runs_total{drill="p",namespace="payouts",target="main",verdict="unsafe"} 2"#
        ),
        "{text}"
    );
    r.reconfigure(&config(&["payouts"], Some(dir.path()), 100));
    assert!(r.named("q", None, None).is_empty());
    assert!(!registry.encode().unwrap().contains(r#"drill="q""#));
    assert!(!saved::path(dir.path(), &("main".into(), "refunds".into(), "q".into())).exists());
    // A file that cannot be read is set aside; the others are read.
    std::fs::write(dir.path().join(DIR).join("main~payouts~x.json"), "{not json").unwrap();
    let r = start(&config(&["payouts"], Some(dir.path()), 100), &Registry::new().unwrap());
    assert_eq!(r.list().len(), 1);
    assert!(dir.path().join(DIR).join("main~payouts~x.json.unreadable").exists());
}

#[test]
fn a_save_that_fails_keeps_nothing_so_a_retry_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("state");
    std::fs::write(&blocked, "a file where the directory should be").unwrap();
    let registry = Registry::new().unwrap();
    let r = start(&config(&["payouts"], Some(&blocked), 100), &registry);
    let e = r
        .record(&body("p", "payouts", "a", "unsafe", 5_000), 9_000_000)
        .unwrap_err();
    assert!(matches!(e, RecordError::Unsaved(_)), "{e}");
    assert!(r.list().is_empty());
    assert!(!registry.encode().unwrap().contains(r#"drill="p""#));
    std::fs::remove_file(&blocked).unwrap();
    std::fs::create_dir(&blocked).unwrap();
    assert_eq!(
        r.record(&body("p", "payouts", "a", "unsafe", 5_000), 9_000_000)
            .unwrap()
            .0,
        Taken::Kept
    );
}

#[test]
fn the_badge_is_the_records_verdict_and_a_run_older_than_the_thirty_kept_changes_nothing() {
    let registry = Registry::new().unwrap();
    let r = start(&config(&["payouts"], None, 100), &registry);
    let mut b: serde_json::Value = serde_json::from_slice(&body("d", "payouts", "x", "unsafe", 500)).unwrap();
    b["document"]["badge"] = serde_json::json!({"word": "SAFE", "class": "safe"});
    r.record(&serde_json::to_vec(&b).unwrap(), 9_000_000).unwrap();
    let badge = r.list()[0].latest.document.badge.clone();
    assert_eq!((badge.word.as_str(), badge.class.as_str()), ("UNSAFE", "unsafe"));
    for i in 0..30u64 {
        r.record(&body("d", "payouts", &format!("r{i}"), "safe", 1_000 + i), 9_000_000)
            .unwrap();
    }
    let text = registry.encode().unwrap();
    assert!(series(
        &text,
        r#"lockwatch_drill_runs_total{drill="d",namespace="payouts",target="main",verdict="unsafe"} 1"#
    ));
    // Older than every kept run: taken as nothing, and its retry too.
    for _ in 0..2 {
        let (taken, _) = r.record(&body("d", "payouts", "old", "unsafe", 10), 9_000_000).unwrap();
        assert_eq!(taken, Taken::Again);
    }
    let text = registry.encode().unwrap();
    assert!(
        series(
            &text,
            r#"lockwatch_drill_runs_total{drill="d",namespace="payouts",target="main",verdict="unsafe"} 1"#
        ),
        "{text}"
    );
}
