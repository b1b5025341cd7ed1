//! Criterion: `/metrics` of a demo-sized exporter — `lockwatch serve` in-process on the
//! demo's shape (one target with keyspace notifications, three namespaces, a fence pattern,
//! one log source) over a private redis-server — in the 0.0.4 text format and in
//! OpenMetrics, without exemplars and with one on every lock-event series. Measured twice:
//! the whole encoding a scrape runs (hooks, gather, encode) and the encoders alone on the
//! same gathered families. Before and after criterion's figures, the same pairs run taking
//! turns in one loop (`paired:` lines on stderr: minimum and median of each), which a
//! shared machine's load disturbs less.
//!
//! `cargo bench --bench exposition` (`python3 scripts/bench exposition` gives the ratios).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use lockwatch::access::child::RedisChild;
use lockwatch::config::{Config, Overrides};
use lockwatch::metrics::{Exemplar, Exemplars, Registry, TraceContext, openmetrics};
use lockwatch::vocab::{Op, Outcome, metric};
use prometheus::Encoder;

const CONFIG: &str = r#"
[[target]]
name = "demo"
url = "{url}"
sample_interval = "1s"
notifications = "auto"

[[namespace]]
name = "workflow"
pattern = "demo:wf:run:lock:*"
ttl = "6s"
renew_every = "2s"
max_hold = "20s"
fence_pattern = "demo:wf:run:fence:*"

[[namespace]]
name = "approval"
pattern = "demo:approval:lock:*"
ttl = "3s"

[[namespace]]
name = "reconciler"
pattern = "demo:reconciler:lock:*"
ttl = "9s"
renew_every = "3s"
max_hold = "60s"

[[logs]]
name = "workers"
path = "{dir}/app.log"
"#;

/// An exemplar on every `lockwatch_lock_events_total` series (4 namespaces with `unknown`,
/// every op and outcome), recorded in `store`.
fn trace_every_event_series(store: &Exemplars) -> usize {
    let trace = TraceContext::new("4bf92f3577b34da6a3ce929d0e0e4736", Some("00f067aa0ba902b7")).unwrap();
    let mut n = 0;
    for ns in ["workflow", "approval", "reconciler", "unknown"] {
        for op in Op::ALL {
            for outcome in Outcome::ALL {
                let labels = [("namespace", ns), ("op", op.as_str()), ("outcome", outcome.as_str())];
                let exemplar = Exemplar {
                    trace: trace.clone(),
                    value: 1.0,
                    at: SystemTime::now(),
                };
                store.record(metric::LOCK_EVENTS_TOTAL, &labels, exemplar);
                n += 1;
            }
        }
    }
    n
}

/// `a` and `b` run `rounds` times each, taking turns so both meet the same load; their
/// minimum and median in µs, and b ÷ a of each, as one line. On a shared machine the
/// minimum is the cost without interference.
fn paired(what: &str, rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> String {
    let (mut ta, mut tb) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        a();
        ta.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        b();
        tb.push(t.elapsed().as_secs_f64() * 1e6);
    }
    ta.sort_by(f64::total_cmp);
    tb.sort_by(f64::total_cmp);
    let (min_a, min_b, med_a, med_b) = (ta[0], tb[0], ta[rounds / 2], tb[rounds / 2]);
    format!(
        "paired: {what}: minimum {min_a:.0} / {min_b:.0} µs ({:.2}×), median {med_a:.0} / {med_b:.0} µs ({:.2}×), {rounds} rounds each",
        min_b / min_a,
        med_b / med_a
    )
}

/// The whole encoding of a scrape, in the 0.0.4 format and in OpenMetrics, taking turns.
fn paired_scrape(what: &str, registry: &Registry) -> String {
    let text = || {
        std::hint::black_box(registry.encode().unwrap());
    };
    let om = || {
        std::hint::black_box(registry.encode_openmetrics());
    };
    paired(what, 1000, text, om)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis = RedisChild::start(None, &["--notify-keyspace-events", "KEA"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = CONFIG
        .replace("{url}", &redis.url())
        .replace("{dir}", &dir.path().display().to_string());
    let config = Config::from_toml(&text, "bench.toml", dir.path(), &Overrides::default()).unwrap();
    let registry = Registry::new().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let served = {
        let (registry, shutdown) = (registry.clone(), shutdown.clone());
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            lockwatch::serve::run_in(listener, config, Default::default(), registry, shutdown)
                .await
                .unwrap();
        })
    };
    let started = Instant::now();
    while lockwatch::exposition::value(&registry.encode().unwrap(), metric::SAMPLE_PASSES_TOTAL, &[]).unwrap_or(0.0)
        < 1.0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no sample pass within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let families = registry.gather();
    let plain = Exemplars::default();
    let traced = Exemplars::default();
    let exemplars = trace_every_event_series(&traced);
    let samples = lockwatch::exposition::samples(&registry.encode().unwrap()).count();
    eprintln!(
        "exposition: {} families, {samples} samples; 0.0.4 {} bytes, OpenMetrics {} bytes, with {exemplars} exemplars {} bytes",
        families.len(),
        registry.encode().unwrap().len(),
        openmetrics::encode(&families, &plain).len(),
        openmetrics::encode(&families, &traced).len(),
    );

    let text_encoder = || {
        let mut buf = Vec::with_capacity(16 * 1024);
        prometheus::TextEncoder::new().encode(&families, &mut buf).unwrap();
        std::hint::black_box(buf);
    };
    let om_encoder = |exemplars: &Exemplars| {
        std::hint::black_box(openmetrics::encode(&families, exemplars));
    };
    eprintln!(
        "{}",
        paired("encoder, 0.0.4 / OpenMetrics", 2000, text_encoder, || om_encoder(
            &plain
        ))
    );
    eprintln!(
        "{}",
        paired(
            "encoder, 0.0.4 / OpenMetrics with 96 exemplars",
            2000,
            text_encoder,
            || { om_encoder(&traced) }
        )
    );
    eprintln!("{}", paired_scrape("scrape, 0.0.4 / OpenMetrics", &registry));

    let mut g = c.benchmark_group("exposition");
    g.bench_function("encoder_text", |b| {
        b.iter(|| {
            let mut buf = Vec::with_capacity(16 * 1024);
            prometheus::TextEncoder::new().encode(&families, &mut buf).unwrap();
            buf
        })
    });
    g.bench_function("encoder_openmetrics", |b| {
        b.iter(|| openmetrics::encode(&families, &plain))
    });
    g.bench_function("encoder_openmetrics_exemplars", |b| {
        b.iter(|| openmetrics::encode(&families, &traced))
    });
    g.bench_function("scrape_text", |b| b.iter(|| registry.encode().unwrap()));
    g.bench_function("scrape_openmetrics", |b| b.iter(|| registry.encode_openmetrics()));
    trace_every_event_series(registry.exemplars());
    g.bench_function("scrape_openmetrics_exemplars", |b| {
        b.iter(|| registry.encode_openmetrics())
    });
    g.finish();
    eprintln!(
        "{}",
        paired_scrape("scrape, 0.0.4 / OpenMetrics with 96 exemplars", &registry)
    );

    shutdown.cancel();
    rt.block_on(served).unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
