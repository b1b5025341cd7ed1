use super::*;

#[test]
fn tally_slots_round_trip() {
    let mut t = Tally::new(2);
    t.event(Some(1), Op::Renew, Outcome::Error);
    t.event(None, Op::Release, Outcome::NotOwned);
    t.event(Some(7), Op::Write, Outcome::StaleFence); // out of range: unknown
    t.too_long();
    t.line(&Verdict::Ignored("x"));
    let traceback = Verdict::Event {
        namespace: Some(0),
        op: Op::Release,
        outcome: Outcome::NotOwned,
        by: String::new(),
        key: None,
        trace: None,
        origin: None,
    };
    t.record(&traceback, 9);
    let got: Vec<_> = t.events().collect();
    assert_eq!(
        got,
        vec![
            (Some(0), Op::Release, Outcome::NotOwned, 1),
            (Some(1), Op::Renew, Outcome::Error, 1),
            (None, Op::Release, Outcome::NotOwned, 1),
            (None, Op::Write, Outcome::StaleFence, 1),
        ]
    );
    // One event for the 9-line record; its lines all count as matched.
    assert_eq!(t.lines, [12, 1, 1]);
    assert_eq!(t.total(), 14);
}

/// A config of one namespace, `wf`.
fn one_namespace() -> crate::config::Config {
    crate::config::Config::from_toml(
        "[[target]]\nname = \"m\"\nurl = \"redis://127.0.0.1:1/0\"\n\
         [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n",
        "t.toml",
        std::path::Path::new("."),
        &Default::default(),
    )
    .unwrap()
}

fn wf_metrics() -> IntakeMetrics {
    IntakeMetrics::register(&crate::metrics::Registry::new().unwrap(), &one_namespace()).unwrap()
}

#[test]
fn busy_and_timed_out_acquisitions_are_contention_counted_apart_from_failures() {
    let metrics = wf_metrics();
    let counters = Counters::new(&metrics, &["wf".to_string()], "push");
    let mut t = counters.tally();
    for _ in 0..30 {
        t.event(Some(0), Op::Acquire, Outcome::Busy);
    }
    for _ in 0..10 {
        t.event(Some(0), Op::Acquire, Outcome::Timeout);
    }
    t.event(Some(0), Op::Acquire, Outcome::Ok);
    counters.flush(&mut t);
    // Counted as ever.
    assert_eq!(metrics.events("wf", Op::Acquire, Outcome::Busy), 30);
    assert_eq!(metrics.events("wf", Op::Acquire, Outcome::Timeout), 10);
    let hour = |ns| metrics.recent().last_hour(ns, crate::locks::recent::wall_ms());
    let sums = |ns| {
        hour(ns)
            .iter()
            .flatten()
            .fold((0, 0), |(f, c), b| (f + b.failures, c + b.contention))
    };
    assert_eq!(sums(0), (0, 40), "40 contended, no failure");
    assert!(metrics.recent().incidents().is_empty(), "contention is no burst");
    // A renewal that timed out, a release not owned and an acquire error are failures.
    t.event(Some(0), Op::Renew, Outcome::Timeout);
    t.event(Some(0), Op::Release, Outcome::NotOwned);
    t.event(Some(0), Op::Acquire, Outcome::Error);
    t.event(None, Op::Acquire, Outcome::Busy);
    counters.flush(&mut t);
    assert_eq!(sums(0), (3, 40));
    assert_eq!(sums(1), (0, 1), "unknown's contention apart too");
}

#[test]
fn keyed_events_follow_what_the_counters_count_and_restored_counts_are_none() {
    let metrics = wf_metrics();
    let counters = Counters::new(&metrics, &["wf".to_string()], "app");
    let mut t = counters.tally();
    t.keyed_event(Some(0), Op::Renew, Outcome::NotOwned, "wf:lock:1");
    t.event(Some(0), Op::Renew, Outcome::NotOwned);
    let mut more = counters.tally();
    more.keyed_event(None, Op::Release, Outcome::NotOwned, "wf:lock:1");
    t.absorb(more);
    assert_eq!(t.keyed().count(), 2);
    counters.flush(&mut t);
    assert_eq!(t.keyed().count(), 0);
    let kept = metrics.keyed().of("wf:lock:1");
    let seen: Vec<_> = kept.iter().map(|e| (e.namespace, e.op, &*e.source)).collect();
    assert_eq!(seen, [(Some(0), Op::Renew, "app"), (None, Op::Release, "app")]);
    assert_eq!(metrics.events("wf", Op::Renew, Outcome::NotOwned), 2);
    // Saved counts restored at start are not events of now.
    let mut saved = counters.tally();
    saved.keyed_event(Some(0), Op::Write, Outcome::StaleFence, "wf:lock:2");
    counters.restore(&mut saved);
    assert!(metrics.keyed().of("wf:lock:2").is_empty());
    // A tally keeps no more than the ring would.
    let mut big = counters.tally();
    for i in 0..keyed::CAP + 10 {
        big.keyed_event(Some(0), Op::Acquire, Outcome::Busy, &format!("wf:lock:{i}"));
    }
    assert_eq!(big.keyed().count(), keyed::CAP);
    assert_eq!(big.keyed().next().map(|e| &*e.key), Some("wf:lock:10"));
}

#[test]
fn the_latest_traced_event_of_a_series_is_its_exemplar_and_restored_counts_give_none() {
    let cfg = one_namespace();
    let registry = crate::metrics::Registry::new().unwrap();
    let metrics = IntakeMetrics::register(&registry, &cfg).unwrap();
    let counters = Counters::new(&metrics, &["wf".to_string()], "otlp");
    let t = |id: &str| TraceContext::new(id, Some("00f067aa0ba902b7"));
    let series = [("namespace", "wf"), ("op", "release"), ("outcome", "not_owned")];
    let mut saved = counters.tally();
    saved.pushed(Some(0), Op::Release, Outcome::NotOwned, None, t("aaaa"));
    counters.restore(&mut saved);
    assert!(registry.exemplars().is_empty(), "saved counts are not events of now");
    let mut tally = counters.tally();
    tally.pushed(Some(0), Op::Release, Outcome::NotOwned, Some("wf:lock:1"), t("bbbb"));
    tally.pushed(Some(0), Op::Release, Outcome::NotOwned, None, None);
    let mut later = counters.tally();
    later.pushed(Some(0), Op::Release, Outcome::NotOwned, None, t("cccc"));
    later.pushed(None, Op::Renew, Outcome::Error, None, t("dddd"));
    tally.absorb(later);
    counters.flush(&mut tally);
    let e = registry.exemplars().get(metric::LOCK_EVENTS_TOTAL, &series).unwrap();
    assert_eq!((e.trace.trace_id.as_str(), e.value), ("cccc", 1.0));
    let unknown = [("namespace", UNKNOWN_NAMESPACE), ("op", "renew"), ("outcome", "error")];
    assert_eq!(
        registry
            .exemplars()
            .get(metric::LOCK_EVENTS_TOTAL, &unknown)
            .unwrap()
            .trace
            .trace_id,
        "dddd"
    );
    assert_eq!(registry.exemplars().len(), 2, "one per series");
    let kept = metrics.keyed().of("wf:lock:1");
    assert_eq!(kept[0].trace.as_ref().map(|t| t.trace_id.as_str()), Some("bbbb"));
}
