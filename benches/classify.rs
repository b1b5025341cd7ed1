//! Criterion: classification throughput on a mix like real logs — 99% ordinary lines in
//! JSON, logfmt and text, 1% lock events — and on each kind alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockwatch::config::{Config, LogFormat, Overrides};
use lockwatch::intake::Classifier;

const ORDINARY: &[&str] = &[
    r#"{"time":"2026-06-28T10:02:14.001Z","level":"INFO","msg":"scheduler tick","jobs":12,"queue":"default","took_ms":3}"#,
    r#"time=2026-06-28T10:04:00.000Z level=INFO msg="http request" method=GET path=/api/v1/jobs/123 status=200 took=2ms"#,
    "2026-06-28 10:06:00.000  INFO 4121 --- [main] c.e.PayoutJob : processed 200 payouts for batch 2026-06-28 in 31ms",
];
const EVENTS: &[&str] = &[
    r#"{"time":"2026-06-28T10:02:58.002Z","level":"WARN","msg":"run lock renewal failed","run_id":"run-42","error":"lock not owned"}"#,
    r#"time=2026-06-28T10:04:03.000Z level=WARN msg="lock release skipped: token mismatch" key=cordum:reconciler:default"#,
    "2026-06-28 10:05:31,877 ERROR worker.payout payout lock release failed: redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned",
];

fn mix(n: usize) -> Vec<&'static str> {
    (0..n)
        .map(|i| {
            if i % 100 == 0 {
                EVENTS[(i / 100) % 3]
            } else {
                ORDINARY[i % 3]
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let text = std::fs::read_to_string(dir.join("lockwatch.toml")).unwrap();
    let config = Config::from_toml(&text, "lockwatch.toml", &dir, &Overrides::default()).unwrap();
    let classifier = Classifier::new(&config).unwrap();
    let mut g = c.benchmark_group("classify");
    for (name, lines) in [
        ("mix_1pct_events", mix(10_000)),
        ("ordinary_only", ORDINARY.iter().cycle().take(10_000).copied().collect()),
        ("events_only", EVENTS.iter().cycle().take(10_000).copied().collect()),
    ] {
        g.throughput(Throughput::Elements(lines.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut events = 0u32;
                for l in &lines {
                    if let lockwatch::intake::Verdict::Event { .. } = classifier.classify(l.as_bytes(), LogFormat::Auto)
                    {
                        events += 1;
                    }
                }
                events
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
