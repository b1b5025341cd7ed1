//! One sample pass over N lock keys in one namespace on a local redis-server.
//!
//! Sizes come from `LOCKWATCH_BENCH_SIZES` (default `100000,1000000`); each size lives in
//! its own Redis database so a pass scans only its keys. With `LOCKWATCH_BENCH_REDIS_URL`
//! set, that server is used (`scripts/bench` shares one server with the peer exporter);
//! otherwise a private redis-server is started. Keys are loaded once when a database does
//! not already hold exactly N of them.
//!
//! Beside each pass, `scan_only_<N>_keys` walks the same keys with the same `SCAN MATCH …
//! COUNT` pages on the same kind of connection and reads nothing: the floor a pass is
//! measured against (`scripts/bench` gives pass ÷ SCAN-only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockwatch::access::child::RedisChild;
use lockwatch::config::{Config, Overrides};
use lockwatch::locks::TargetLocks;
use lockwatch::metrics::Registry;
use lockwatch::sampler::{Sampler, SamplerMetrics};
use lockwatch::topology::Nodes;

fn sizes() -> Vec<u64> {
    std::env::var("LOCKWATCH_BENCH_SIZES")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("LOCKWATCH_BENCH_SIZES: comma-separated numbers")
        })
        .collect()
}

/// Database `db` of `base` holds exactly `n` keys `bench:lock:<i>` (value `owner-<i>`, 1 h TTL).
fn load(base: &str, db: usize, n: u64) -> String {
    let url = format!(
        "{}/{db}",
        base.trim_end_matches('/').rsplit_once('/').map_or(base, |(b, _)| b)
    );
    let mut c = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let have: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    if have != n {
        let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
        let t = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(20_000) {
            let mut p = redis::pipe();
            for i in chunk {
                p.cmd("SET")
                    .arg(format!("bench:lock:{i}"))
                    .arg(format!("owner-{i}"))
                    .arg("PX")
                    .arg(3_600_000)
                    .ignore();
            }
            let _: () = p.query(&mut c).unwrap();
        }
        eprintln!("loaded {n} keys into db {db} in {:?}", t.elapsed());
    }
    url
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_runtime = rt.enter();
    let (base, _child) = match std::env::var("LOCKWATCH_BENCH_REDIS_URL") {
        Ok(u) => (u, None),
        Err(_) => {
            let r = RedisChild::start(None, &[]).unwrap_or_else(|e| panic!("{e}"));
            (r.url(), Some(r))
        }
    };
    for (i, n) in sizes().into_iter().enumerate() {
        let url = load(&base, i + 1, n);
        let text = format!(
            "[[target]]\nname = \"bench\"\nurl = \"{url}\"\nsample_interval = \"60s\"\nsample_budget = \"60s\"\nscan_count = 1000\n\
             [[namespace]]\nname = \"bench\"\npattern = \"bench:lock:*\"\nttl = \"3600s\"\nrenew_every = \"1200s\"\n"
        );
        let cfg = Config::from_toml(&text, "bench", Path::new("."), &Overrides::default()).unwrap();
        let registry = Registry::new().unwrap();
        let metrics = SamplerMetrics::register(&registry, &cfg).unwrap();
        let locks = Arc::new(TargetLocks::new(&cfg.targets[0], &cfg.namespaces, false));
        let mut sampler = Sampler::new(
            &cfg.targets[0],
            locks.clone(),
            metrics,
            Nodes::standalone(&cfg.targets[0]).unwrap(),
        )
        .unwrap();
        // The first pass fills the lock table; later passes are the steady state measured.
        let first = rt.block_on(sampler.pass());
        assert_eq!(first.error, None);
        assert_eq!(locks.namespaces[0].table().len() as u64, n, "every key tracked");
        // One of each first, with the server's CPU it took: where the time of a pass goes.
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut scan = rt.block_on(redis::aio::ConnectionManager::new(client)).unwrap();
        let mut info = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        let (t, cpu) = (Instant::now(), redis_cpu(&mut info));
        let r = rt.block_on(sampler.pass());
        let (pass_wall, pass_cpu) = (t.elapsed(), redis_cpu(&mut info) - cpu);
        assert!(r.error.is_none());
        let (t, cpu) = (Instant::now(), redis_cpu(&mut info));
        rt.block_on(scan_only(&mut scan, "bench:lock:*", 1000));
        let (scan_wall, scan_cpu) = (t.elapsed(), redis_cpu(&mut info) - cpu);
        eprintln!(
            "{n} keys: one pass {pass_wall:.2?} (redis-server CPU {pass_cpu:.2} s), one SCAN-only walk {scan_wall:.2?} (redis-server CPU {scan_cpu:.2} s)"
        );
        let mut group = c.benchmark_group("sample_pass");
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(if n > 200_000 { 30 } else { 10 }));
        group.throughput(Throughput::Elements(n));
        group.bench_function(format!("{n}_keys"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let r = rt.block_on(sampler.pass());
                    assert!(r.error.is_none() && !r.truncated, "{r:?}");
                    total += r.duration;
                }
                total
            })
        });
        group.bench_function(format!("scan_only_{n}_keys"), |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    let seen = rt.block_on(scan_only(&mut scan, "bench:lock:*", 1000));
                    assert!(seen >= n, "the walk saw every key");
                }
                t.elapsed()
            })
        });
        group.finish();
    }
}

/// The server's CPU so far (`used_cpu_user + used_cpu_sys`), in seconds.
fn redis_cpu(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(c).unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .sum()
}

/// A walk of `pattern` that only pages: SCAN from cursor 0 back to 0. Returns the keys seen.
async fn scan_only(conn: &mut redis::aio::ConnectionManager, pattern: &str, count: usize) -> u64 {
    let mut cursor = 0u64;
    let mut seen = 0u64;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count)
            .query_async(conn)
            .await
            .unwrap();
        seen += keys.len() as u64;
        cursor = next;
        if cursor == 0 {
            return seen;
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
