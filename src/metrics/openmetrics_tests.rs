//! The OpenMetrics encoder on hand-made families (every type, escaping, numbers, timestamps,
//! exemplars) and the `Accept` negotiation, each against the exact text the spec asks for.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::proto::{Gauge as GaugeValue, LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary, Untyped};
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};

use super::*;
use crate::metrics::TraceContext;

/// Prometheus 2.42's scrape `Accept` header.
const PROMETHEUS_2: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// Prometheus 3's, which adds name escaping and its text 1.0.0.
const PROMETHEUS_3: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";

#[test]
fn accept_picks_the_format_as_client_golang_does() {
    use Format::{OpenMetrics as Om, Text};
    for (accept, want) in [
        ("", Text),
        ("*/*", Text),
        ("text/html,application/xhtml+xml,*/*;q=0.8", Text),
        ("text/plain", Text),
        ("text/plain; version=0.0.4", Text),
        (PROMETHEUS_2, Om),
        (PROMETHEUS_3, Om),
        ("application/openmetrics-text", Om),
        ("application/openmetrics-text; version=1.0.0", Om),
        ("application/openmetrics-text;version=0.0.1", Om),
        ("Application/OpenMetrics-Text; Version=\"1.0.0\"", Om),
        // A version this encoder does not write is passed over.
        ("application/openmetrics-text;version=2.0.0", Text),
        (
            "application/openmetrics-text;version=2.0.0,application/openmetrics-text;version=1.0.0;q=0.1",
            Om,
        ),
        // The highest q wins, wherever it is listed; equal ones go by order.
        ("text/plain;version=0.0.4;q=0.5,application/openmetrics-text;q=0.9", Om),
        ("application/openmetrics-text;q=0.3,text/plain;q=0.5", Text),
        ("text/plain,application/openmetrics-text", Text),
        ("application/openmetrics-text,text/plain", Om),
        // q=0 means not acceptable; an unreadable q too.
        ("application/openmetrics-text;q=0", Text),
        ("application/openmetrics-text;q=high", Text),
        ("application/openmetrics-text;q=0.001", Om),
        // Protobuf is not offered: the next acceptable range decides.
        (
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;q=0.5",
            Om,
        ),
    ] {
        assert_eq!(Format::negotiate(accept), want, "Accept: {accept}");
    }
    assert_eq!(Format::OpenMetrics.content_type(), CONTENT_TYPE);
    assert_eq!(Format::Text.content_type(), "text/plain; version=0.0.4");
}

fn canon(v: f64) -> String {
    let mut s = String::new();
    canonical(&mut s, v);
    s
}

#[test]
fn le_and_quantile_numbers_are_the_specs_canonical_ones() {
    let spec = "0.0 0.001 0.002 0.01 0.1 0.9 0.95 0.99 0.999 1.0 1.7 10.0";
    let got: Vec<String> = spec.split(' ').map(|s| canon(s.parse().unwrap())).collect();
    assert_eq!(got.join(" "), spec);
    let powers = "1e-10 1e-09 1e-05 0.0001 0.1 1.0 100000.0 1e+06 1e+10";
    let got: Vec<String> = [-10, -9, -5, -4, -1, 0, 5, 6, 10]
        .iter()
        .map(|e| canon(10f64.powi(*e)))
        .collect();
    assert_eq!(got.join(" "), powers);
    // Every value from 0 to 10 in steps of 0.001: the shortest digits, a point always.
    for i in 0..=10_000 {
        let v = i as f64 / 1000.0;
        let shortest = v.to_string();
        let want = if shortest.contains('.') {
            shortest
        } else {
            format!("{shortest}.0")
        };
        assert_eq!(canon(v), want);
    }
    assert_eq!(canon(f64::INFINITY), "+Inf");
    assert_eq!(canon(f64::NEG_INFINITY), "-Inf");
    assert_eq!(canon(f64::NAN), "NaN");
    assert_eq!(canon(-0.25), "-0.25");
    assert_eq!(canon(123456.5), "123456.5");
    assert_eq!(canon(1234567.0), "1.234567e+06");
    assert_eq!(canon(1.5e-7), "1.5e-07");
    assert_eq!(canon(2.5e300), "2.5e+300");
    assert_eq!(canon(3600.0), "3600.0");
    // Values: whole numbers stay integers as in the 0.0.4 format; the rest canonical.
    let val = |v: f64| {
        let mut s = String::new();
        value(&mut s, v);
        s
    };
    assert_eq!(
        [
            val(17.0),
            val(-3.0),
            val(0.5),
            val(1795668658.4567676),
            val(0.0001),
            val(0.00009),
            val(1e21),
            val(f64::NAN),
            val(f64::INFINITY)
        ],
        [
            "17",
            "-3",
            "0.5",
            "1795668658.4567676",
            "0.0001",
            "9e-05",
            "1e+21",
            "NaN",
            "+Inf"
        ]
    );
}

fn pair(name: &str, value: &str) -> LabelPair {
    let mut p = LabelPair::default();
    p.set_name(name.to_string());
    p.set_value(value.to_string());
    p
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(name.to_string());
    mf.set_help(help.to_string());
    mf.set_field_type(kind);
    mf.set_metric(metrics);
    mf
}

/// Families of every type, gathered from a real `prometheus` registry where the crate can
/// make them, built by hand where it cannot (untyped, summary, a timestamp).
fn families() -> Vec<MetricFamily> {
    let r = prometheus::Registry::new();
    let events = IntCounterVec::new(
        Opts::new(
            "demo_events_total",
            "Events with \"quotes\", a \\ backslash\nand a line feed.",
        ),
        &["ns", "op"],
    )
    .unwrap();
    events.with_label_values(&["a\"b\\c\nd", "release"]).inc_by(3);
    events.with_label_values(&["plain", "renew"]).inc();
    let restarts = IntCounter::new("demo_restarts", "A counter whose name lacks the suffix.").unwrap();
    restarts.inc_by(2);
    let gauges = GaugeVec::new(Opts::new("demo_level", "Odd values."), &["v"]).unwrap();
    for (label, v) in [
        ("nan", f64::NAN),
        ("inf", f64::INFINITY),
        ("neg_inf", f64::NEG_INFINITY),
        ("big", 1e21),
        ("tiny", 1.5e-7),
        ("half", 0.5),
    ] {
        gauges.with_label_values(&[label]).set(v);
    }
    let waits = HistogramVec::new(
        HistogramOpts::new("demo_wait_seconds", "Waits.").buckets(vec![0.005, 0.5, 1.0, 100000.0, 1e6]),
        &["ns"],
    )
    .unwrap();
    for v in [0.00390625, 0.75, 2.0, 2e6] {
        waits.with_label_values(&["a"]).observe(v);
    }
    r.register(Box::new(events)).unwrap();
    r.register(Box::new(restarts)).unwrap();
    r.register(Box::new(gauges)).unwrap();
    r.register(Box::new(waits)).unwrap();
    let mut out = r.gather();

    let mut untyped = Metric::default();
    let mut u = Untyped::default();
    u.set_value(4.25);
    untyped.untyped = Some(u).into();
    untyped.set_label(vec![pair("k", "v")]);
    out.push(family("demo_untyped", "", MetricType::UNTYPED, vec![untyped]));

    let mut summary = Metric::default();
    let mut s = Summary::default();
    let quantiles = [(0.5, 0.2), (0.99, 1.5)].map(|(q, v)| {
        let mut x = Quantile::default();
        x.set_quantile(q);
        x.set_value(v);
        x
    });
    s.set_quantile(quantiles.to_vec());
    s.set_sample_count(7);
    s.set_sample_sum(3.5);
    summary.set_summary(s);
    out.push(family(
        "demo_latency_seconds",
        "Latency.",
        MetricType::SUMMARY,
        vec![summary],
    ));

    let mut stamped = Metric::default();
    let mut g = GaugeValue::default();
    g.set_value(1.0);
    stamped.set_gauge(g);
    stamped.set_timestamp_ms(1_520_879_607_789);
    out.push(family("demo_stamped", "Stamped.", MetricType::GAUGE, vec![stamped]));
    out
}

const EXPECTED: &str = r#"# TYPE demo_events counter
# HELP demo_events Events with \"quotes\", a \\ backslash\nand a line feed.
demo_events_total{ns="a\"b\\c\nd",op="release"} 3 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736",span_id="00f067aa0ba902b7"} 1 1732600000.123
demo_events_total{ns="plain",op="renew"} 1 # {trace_id="1234567890123456789"} 1
# TYPE demo_level gauge
# HELP demo_level Odd values.
demo_level{v="big"} 1e+21
demo_level{v="half"} 0.5
demo_level{v="inf"} +Inf
demo_level{v="nan"} NaN
demo_level{v="neg_inf"} -Inf
demo_level{v="tiny"} 1.5e-07
# TYPE demo_restarts unknown
# HELP demo_restarts A counter whose name lacks the suffix.
demo_restarts 2
# TYPE demo_wait_seconds histogram
# UNIT demo_wait_seconds seconds
# HELP demo_wait_seconds Waits.
demo_wait_seconds_bucket{ns="a",le="0.005"} 1
demo_wait_seconds_bucket{ns="a",le="0.5"} 1
demo_wait_seconds_bucket{ns="a",le="1.0"} 2
demo_wait_seconds_bucket{ns="a",le="100000.0"} 3
demo_wait_seconds_bucket{ns="a",le="1e+06"} 3
demo_wait_seconds_bucket{ns="a",le="+Inf"} 4
demo_wait_seconds_count{ns="a"} 4
demo_wait_seconds_sum{ns="a"} 2000002.75390625
# TYPE demo_untyped unknown
demo_untyped{k="v"} 4.25
# TYPE demo_latency_seconds summary
# UNIT demo_latency_seconds seconds
# HELP demo_latency_seconds Latency.
demo_latency_seconds{quantile="0.5"} 0.2
demo_latency_seconds{quantile="0.99"} 1.5
demo_latency_seconds_sum 3.5
demo_latency_seconds_count 7
# TYPE demo_stamped gauge
# HELP demo_stamped Stamped.
demo_stamped 1 1520879607.789
# EOF
"#;

fn exemplar(trace: &str, span: Option<&str>, at: SystemTime) -> Exemplar {
    Exemplar {
        trace: TraceContext {
            trace_id: trace.to_string(),
            span_id: span.map(str::to_string),
        },
        value: 1.0,
        at,
    }
}

#[test]
fn every_type_is_encoded_as_the_spec_says_with_exemplars_on_counters() {
    let store = Exemplars::default();
    let at = UNIX_EPOCH + Duration::from_millis(1_732_600_000_123);
    // Labels in any order find their series.
    store.record(
        "demo_events_total",
        &[("op", "release"), ("ns", "a\"b\\c\nd")],
        exemplar("4bf92f3577b34da6a3ce929d0e0e4736", Some("00f067aa0ba902b7"), at),
    );
    // Before the epoch: no timestamp, the exemplar still shown.
    store.record(
        "demo_events_total",
        &[("ns", "plain"), ("op", "renew")],
        exemplar("1234567890123456789", None, UNIX_EPOCH - Duration::from_secs(1)),
    );
    // Never shown: a gauge's, a histogram's, a series that does not exist, the family
    // name without `_total`.
    store.record("demo_level", &[("v", "half")], exemplar("aaaa", None, at));
    store.record("demo_wait_seconds", &[("ns", "a")], exemplar("aaaa", None, at));
    store.record(
        "demo_events_total",
        &[("ns", "other"), ("op", "renew")],
        exemplar("aaaa", None, at),
    );
    store.record(
        "demo_events",
        &[("ns", "plain"), ("op", "renew")],
        exemplar("bbbb", None, at),
    );
    store.record("demo_restarts", &[], exemplar("cccc", None, at));
    let text = encode(&families(), &store);
    assert_eq!(text, EXPECTED, "got:\n{text}");
}

#[test]
fn an_exemplar_over_the_label_limit_is_dropped_and_the_sample_kept() {
    let families = families();
    let store = Exemplars::default();
    let at = UNIX_EPOCH + Duration::from_secs(1);
    let series = [("ns", "plain"), ("op", "renew")];
    // Exemplars made without `TraceContext::new`, which would refuse the long ones.
    let with = |e: Exemplar| {
        store.record("demo_events_total", &series, e);
        encode(&families, &store)
    };
    // 8 + 64 + 7 + 49 = 128 characters: the limit itself is fine.
    let (trace, span) = ("a".repeat(64), "b".repeat(49));
    let text = with(exemplar(&trace, Some(&span), at));
    let shown = format!(
        "demo_events_total{{ns=\"plain\",op=\"renew\"}} 1 # {{trace_id=\"{trace}\",span_id=\"{span}\"}} 1 1.000\n"
    );
    assert!(text.contains(&shown), "{text}");
    // One more character, an empty trace id, a value not finite: the sample alone.
    let bare = "demo_events_total{ns=\"plain\",op=\"renew\"} 1\n";
    let text = with(exemplar(&trace, Some(&"b".repeat(50)), at));
    assert!(text.contains(bare), "{text}");
    assert!(with(exemplar("", None, at)).contains(bare));
    let mut nan = exemplar("abc", None, at);
    nan.value = f64::NAN;
    assert!(with(nan).contains(bare));
}

#[test]
fn an_empty_registry_is_just_eof_and_units_need_the_suffix() {
    assert_eq!(encode(&[], &Exemplars::default()), "# EOF\n");
    assert_eq!(unit_of("lockwatch_lock_hold_duration_seconds"), Some("seconds"));
    assert_eq!(unit_of("process_cpu_seconds"), Some("seconds"));
    assert_eq!(unit_of("process_resident_memory_bytes"), Some("bytes"));
    assert_eq!(unit_of("lockwatch_locks_held"), None);
    assert_eq!(unit_of("seconds"), None);
    assert_eq!(unit_of("_seconds"), None);
    assert_eq!(unit_of("lockwatch_fooseconds"), None);
}

#[test]
fn histograms_with_negative_buckets_or_sums_have_no_sum() {
    let r = prometheus::Registry::new();
    let h = prometheus::Histogram::with_opts(
        HistogramOpts::new("demo_skew_seconds", "Skew.").buckets(vec![-1.0, 0.0, 1.0]),
    )
    .unwrap();
    h.observe(0.5);
    r.register(Box::new(h)).unwrap();
    let text = encode(&r.gather(), &Exemplars::default());
    assert!(text.contains("demo_skew_seconds_bucket{le=\"-1.0\"} 0\n"), "{text}");
    assert!(text.contains("demo_skew_seconds_bucket{le=\"0.0\"} 0\n"), "{text}");
    assert!(text.contains("demo_skew_seconds_count 1\n"), "{text}");
    assert!(!text.contains("_sum"), "{text}");
}
