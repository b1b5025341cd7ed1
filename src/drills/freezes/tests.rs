#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::*;

fn config(namespaces: &[&str], dir: Option<&Path>) -> Config {
    super::super::test_config("", "staging", namespaces, dir)
}

fn start(config: &Config) -> Freezes {
    let registry = Registry::new().unwrap();
    with(config, &registry)
}

fn with(config: &Config, registry: &Registry) -> Freezes {
    Freezes::start(config, registry, Refusals::register(registry).unwrap()).unwrap()
}

fn record(id: &str, state: &str, at_ms: u64) -> Vec<u8> {
    format!(
        r#"{{"id":"{id}","target":"staging","namespace":"payouts","state":"{state}","frozen":"pid:4242",
        "what":"process 4242","since_ms":1000,"for_ms":8000,"at_ms":{at_ms},"by":"drill","thaw_by_hand":""}}"#
    )
    .into_bytes()
}

fn ids(f: &Freezes) -> Vec<(String, Reported)> {
    f.live().into_iter().map(|f| (f.id, f.state)).collect()
}

fn reason(e: RecordError) -> DrillRefused {
    match e {
        RecordError::Refused(r) => r.reason,
        RecordError::Unsaved(e) => panic!("{e}"),
    }
}

#[test]
fn frozen_thawed_and_failed_thaws() {
    let f = start(&config(&["payouts"], None));
    f.record(&record("a", "frozen", 1001)).unwrap();
    f.record(&record("a", "frozen", 1001)).unwrap();
    assert_eq!(ids(&f), vec![("a".to_string(), Reported::Frozen)]);
    f.record(&record("a", "thaw_failed", 9002)).unwrap();
    assert_eq!(ids(&f), vec![("a".to_string(), Reported::ThawFailed)]);
    f.record(&record("a", "thawed", 9500)).unwrap();
    assert!(ids(&f).is_empty());
    // An unknown id's thaw is taken; a thaw failed inserts a freeze not seen before.
    f.record(&record("never", "thawed", 1)).unwrap();
    f.record(&record("b", "thaw_failed", 9002)).unwrap();
    assert_eq!(ids(&f), vec![("b".to_string(), Reported::ThawFailed)]);
}

#[test]
fn a_record_older_than_what_is_known_changes_nothing() {
    let f = start(&config(&["payouts"], None));
    f.record(&record("a", "frozen", 1001)).unwrap();
    f.record(&record("a", "thawed", 9001)).unwrap();
    // The freeze's record retried after its thaw: not live again.
    f.record(&record("a", "frozen", 1001)).unwrap();
    assert!(ids(&f).is_empty());
    f.record(&record("b", "thaw_failed", 9002)).unwrap();
    f.record(&record("b", "frozen", 1001)).unwrap();
    assert_eq!(ids(&f), vec![("b".to_string(), Reported::ThawFailed)]);
    // A thaw older than the failure does not end it either.
    f.record(&record("b", "thawed", 5000)).unwrap();
    assert_eq!(ids(&f).len(), 1);
}

#[test]
fn names_and_room_are_checked_before_anything_changes() {
    let f = start(&config(&["payouts"], None));
    let other_target = String::from_utf8(record("x", "frozen", 1))
        .unwrap()
        .replace("staging", "prod");
    let e = f.record(other_target.as_bytes()).unwrap_err();
    assert!(e.to_string().contains("no target `prod`"), "{e}");
    assert_eq!(reason(e), DrillRefused::UnknownTarget);
    let other_ns = String::from_utf8(record("x", "frozen", 1))
        .unwrap()
        .replace("payouts", "refunds");
    assert_eq!(
        reason(f.record(other_ns.as_bytes()).unwrap_err()),
        DrillRefused::UnknownNamespace
    );
    for i in 0..MAX_LIVE {
        f.record(&record(&format!("d-{i}"), "frozen", 1)).unwrap();
    }
    assert_eq!(
        reason(f.record(&record("one-more", "frozen", 1)).unwrap_err()),
        DrillRefused::TooMany
    );
    assert_eq!(
        reason(f.record(&record("one-more", "thaw_failed", 1)).unwrap_err()),
        DrillRefused::TooMany
    );
    // A live one's record, and a thaw, still go through.
    f.record(&record("d-0", "thaw_failed", 2)).unwrap();
    f.record(&record("d-1", "thawed", 2)).unwrap();
    f.record(&record("one-more", "frozen", 3)).unwrap();
    assert_eq!(f.live().len(), MAX_LIVE);
}

#[test]
fn saved_restored_and_dropped_with_their_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&["payouts", "refunds"], Some(dir.path()));
    let f = start(&cfg);
    f.record(&record("a", "frozen", 1001)).unwrap();
    f.record(&record("gone", "thawed", 1001)).unwrap();
    let refunds = String::from_utf8(record("r", "frozen", 1))
        .unwrap()
        .replace("payouts", "refunds");
    f.record(refunds.as_bytes()).unwrap();
    let again = start(&cfg);
    assert_eq!(again.live(), f.live());
    // The thaw is remembered across the restart too.
    again.record(&record("gone", "frozen", 1001)).unwrap();
    assert_eq!(again.live().len(), 2);
    // A reload without `refunds` forgets its freeze, in the file too.
    again.reconfigure(&config(&["payouts"], Some(dir.path())));
    assert_eq!(ids(&again), vec![("a".to_string(), Reported::Frozen)]);
    let third = start(&config(&["payouts"], Some(dir.path())));
    assert_eq!(ids(&third), vec![("a".to_string(), Reported::Frozen)]);
}

#[test]
fn an_unreadable_file_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE), "{not json").unwrap();
    let f = start(&config(&["payouts"], Some(dir.path())));
    assert!(f.live().is_empty());
    assert!(dir.path().join(format!("{FILE}.unreadable")).exists());
    f.record(&record("a", "frozen", 1)).unwrap();
    assert!(dir.path().join(FILE).exists());
}

#[test]
fn the_gauges_follow_the_live_freezes() {
    let registry = Registry::new().unwrap();
    let f = with(&config(&["payouts", "refunds"], None), &registry);
    let text = registry.encode().unwrap();
    assert!(
        text.contains(r#"lockwatch_drill_frozen{namespace="refunds",target="staging"} 0"#),
        "{text}"
    );
    assert!(!text.contains("lockwatch_drill_thaw_due_timestamp_seconds{"), "{text}");
    f.record(&record("a", "frozen", 1001)).unwrap();
    let later = String::from_utf8(record("b", "frozen", 1001))
        .unwrap()
        .replace("\"since_ms\":1000", "\"since_ms\":5000");
    f.record(later.as_bytes()).unwrap();
    let text = registry.encode().unwrap();
    assert!(
        text.contains(r#"lockwatch_drill_frozen{namespace="payouts",target="staging"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"lockwatch_drill_thaw_due_timestamp_seconds{namespace="payouts",target="staging"} 9"#),
        "{text}"
    );
    f.record(&record("a", "thawed", 2000)).unwrap();
    f.record(&record("b", "thawed", 2000)).unwrap();
    let text = registry.encode().unwrap();
    assert!(
        text.contains(r#"lockwatch_drill_frozen{namespace="payouts",target="staging"} 0"#),
        "{text}"
    );
    assert!(!text.contains("lockwatch_drill_thaw_due_timestamp_seconds{"), "{text}");
}
