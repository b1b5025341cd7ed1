//! Load benchmark of the lifecycle watcher: a generator runs acquire (SET NX PX) → renew
//! (Lua compare-and-pexpire) → release (Lua compare-and-delete) cycles against a private
//! redis-server, at rising rates, while `lockwatch serve` (the release binary, a child
//! process) watches. Per rate it reports the transitions the generator caused and the
//! watcher counted, the lag during and after the step, and the CPU each process used.
//! Then it holds many locks at once and reports the watcher's memory per tracked lock.
//!
//! `cargo bench --bench lifecycle_load`; rates (transitions/s) from
//! `LOCKWATCH_LOAD_RATES=10000,50000` (`none`: memory only, cold), seconds per step from
//! `LOCKWATCH_LOAD_SECS`, locks held for the memory figure from `LOCKWATCH_LOAD_LOCKS`, the
//! exporter binary from `LOCKWATCH_BENCH_BIN` (`scripts/bench` runs a base revision's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lockwatch::access::child::RedisChild;

const RENEW: &str =
    r#"if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end"#;
const RELEASE: &str =
    r#"if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end"#;
const GENERATORS: u64 = 4;
const TICK: Duration = Duration::from_millis(10);

struct Exporter {
    child: Child,
    url: String,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_exporter(redis_url: &str, dir: &std::path::Path) -> Exporter {
    let port = lockwatch::access::child::free_port().unwrap();
    let cfg = dir.join("bench.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
[[target]]
name = "bench"
url = "{redis_url}"
sample_interval = "1h"
notifications = "require"
[[namespace]]
name = "bench"
pattern = "bench:lock:*"
ttl = "30s"
renew_every = "10s"
"#
        ),
    )
    .unwrap();
    let bin = std::env::var("LOCKWATCH_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_lockwatch").to_string());
    let child = Command::new(bin)
        .args(["serve", "-c", cfg.to_str().unwrap(), "--log-level", "warn"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Exporter {
        child,
        url: format!("http://127.0.0.1:{port}/metrics"),
    }
}

/// (transitions counted, notifications received, connected)
async fn scrape(http: &reqwest::Client, url: &str) -> Option<(u64, u64, bool)> {
    let body = http.get(url).send().await.ok()?.text().await.ok()?;
    let mut transitions = 0.0;
    let mut received = 0.0;
    let mut connected = false;
    for line in body.lines() {
        let value = || {
            line.rsplit_once(' ')
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        if line.starts_with("lockwatch_lock_transitions_total{") {
            transitions += value();
        } else if line.starts_with("lockwatch_notifications_received_total{") {
            received += value();
        } else if line.starts_with("lockwatch_notifications_connected{") {
            connected = value() == 1.0;
        }
    }
    Some((transitions as u64, received as u64, connected))
}

fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds (user + system) of a process so far.
fn cpu_secs(pid: u32, tck: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat are the 12th and 13th after the command name.
    (n(11) + n(12)) / tck
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn redis_pid(r: &RedisChild) -> u32 {
    let mut c = redis::Client::open(r.url()).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// One generator: `cycles_per_tick` acquire → renew → release cycles every tick, each
/// stage one pipeline. Counts the transitions it caused.
async fn generate(
    mut conn: redis::aio::MultiplexedConnection,
    id: u64,
    cycles_per_tick: f64,
    until: Instant,
    caused: Arc<AtomicU64>,
    shas: (String, String),
) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut owed = 0.0;
    let mut seq = 0u64;
    while Instant::now() < until {
        tick.tick().await;
        owed += cycles_per_tick;
        let n = owed as u64;
        owed -= n as f64;
        if n == 0 {
            continue;
        }
        let items: Vec<(String, String)> = (0..n)
            .map(|_| {
                seq += 1;
                (format!("bench:lock:{id}:{}", seq % 5000), format!("g{id}-{seq}"))
            })
            .collect();
        let mut acquire = redis::pipe();
        for (k, t) in &items {
            acquire.cmd("SET").arg(k).arg(t).arg("NX").arg("PX").arg(30_000);
        }
        let got: Vec<Option<String>> = acquire.query_async(&mut conn).await.unwrap();
        let held: Vec<&(String, String)> = items
            .iter()
            .zip(&got)
            .filter(|(_, g)| g.is_some())
            .map(|(i, _)| i)
            .collect();
        let mut renew = redis::pipe();
        for (k, t) in &held {
            renew.cmd("EVALSHA").arg(&shas.0).arg(1).arg(k).arg(t).arg(30_000);
        }
        let renewed: Vec<i64> = renew.query_async(&mut conn).await.unwrap();
        let mut release = redis::pipe();
        for (k, t) in &held {
            release.cmd("EVALSHA").arg(&shas.1).arg(1).arg(k).arg(t);
        }
        let released: Vec<i64> = release.query_async(&mut conn).await.unwrap();
        let ok = held.len() as u64
            + renewed.iter().filter(|&&r| r == 1).count() as u64
            + released.iter().filter(|&&r| r == 1).count() as u64;
        caused.fetch_add(ok, Ordering::Relaxed);
    }
}

struct Step {
    target: u64,
    caused_rate: f64,
    counted_rate: f64,
    max_lag: u64,
    lag_at_end: u64,
    drained_ms: Option<u128>,
    lockwatch_cores: f64,
    redis_cores: f64,
    connected: bool,
}

async fn run_step(
    client: &redis::Client,
    exporter: &Exporter,
    http: &reqwest::Client,
    redis_pid: u32,
    rate: u64,
    secs: u64,
    shas: &(String, String),
) -> Step {
    let tck = clk_tck();
    let (base, _, _) = scrape(http, &exporter.url).await.unwrap();
    let caused = Arc::new(AtomicU64::new(0));
    let cycles_per_tick = rate as f64 / 3.0 / GENERATORS as f64 * TICK.as_secs_f64();
    let lw_pid = exporter.child.id();
    let (lw0, rd0) = (cpu_secs(lw_pid, tck), cpu_secs(redis_pid, tck));
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for id in 0..GENERATORS {
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        tasks.spawn(generate(conn, id, cycles_per_tick, until, caused.clone(), shas.clone()));
    }
    let mut max_lag = 0;
    let mut connected = true;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = caused.load(Ordering::Relaxed);
        if let Some((t, _, up)) = scrape(http, &exporter.url).await {
            max_lag = max_lag.max(c.saturating_sub(t - base));
            connected &= up;
        }
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    let (lw1, rd1) = (cpu_secs(lw_pid, tck), cpu_secs(redis_pid, tck));
    let caused = caused.load(Ordering::Relaxed);
    let (at_end, _, _) = scrape(http, &exporter.url).await.unwrap();
    let lag_at_end = caused.saturating_sub(at_end - base);
    let drain_start = Instant::now();
    let mut drained_ms = None;
    while drain_start.elapsed() < Duration::from_secs(5) {
        let (t, _, up) = scrape(http, &exporter.url).await.unwrap();
        connected &= up;
        if t - base >= caused {
            drained_ms = Some(drain_start.elapsed().as_millis());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (final_count, _, _) = scrape(http, &exporter.url).await.unwrap();
    if final_count - base != caused && drained_ms.is_some() {
        drained_ms = None; // counted more than caused: not "kept up", something is off
    }
    Step {
        target: rate,
        caused_rate: caused as f64 / elapsed,
        counted_rate: (at_end - base) as f64 / elapsed,
        max_lag,
        lag_at_end,
        drained_ms,
        lockwatch_cores: (lw1 - lw0) / elapsed,
        redis_cores: (rd1 - rd0) / elapsed,
        connected,
    }
}

/// Hold `n` locks at once and report the exporter's RSS growth per tracked lock.
async fn memory_per_lock(
    client: &redis::Client,
    exporter: &Exporter,
    http: &reqwest::Client,
    n: u64,
) -> (u64, u64, f64) {
    let pid = exporter.child.id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let (base, _, _) = scrape(http, &exporter.url).await.unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET")
                .arg(format!("bench:lock:mem:{i:08}"))
                .arg(format!("owner-{i:08}-0123456789abcdef"))
                .arg("NX")
                .arg("PX")
                .arg(600_000)
                .ignore();
        }
        let _: () = p.query_async(&mut conn).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let (t, _, _) = scrape(http, &exporter.url).await.unwrap();
        if t - base >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    (before, after, (after.saturating_sub(before) * 1024) as f64 / n as f64)
}

fn main() {
    let rates: Vec<u64> = std::env::var("LOCKWATCH_LOAD_RATES")
        .unwrap_or_else(|_| "10000,25000,50000,100000,200000,300000,400000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let secs: u64 = std::env::var("LOCKWATCH_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let r = RedisChild::start(None, &["--notify-keyspace-events", "Kg$xe"]).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redis::Client::open(r.url()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let renew: String = redis::cmd("SCRIPT").arg("LOAD").arg(RENEW).query_async(&mut c).await.unwrap();
        let release: String = redis::cmd("SCRIPT").arg("LOAD").arg(RELEASE).query_async(&mut c).await.unwrap();
        let shas = (renew, release);
        let exporter = start_exporter(&r.url(), r.dir());
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(scrape(&http, &exporter.url).await, Some((_, _, true))) {
            assert!(Instant::now() < deadline, "exporter did not subscribe");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rpid = redis_pid(&r);
        println!("lifecycle watcher load: {secs}s per step, {GENERATORS} generator connections, cycles of acquire → renew → release (3 transitions, 4 notifications)\n");
        println!("| target transitions/s | caused/s | counted/s (during) | max lag | lag at end | drained after | lockwatch CPU (cores) | redis CPU (cores) | subscribed throughout |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|:---:|");
        for rate in rates {
            let s = run_step(&client, &exporter, &http, rpid, rate, secs, &shas).await;
            println!(
                "| {} | {:.0} | {:.0} | {} | {} | {} | {:.2} | {:.2} | {} |",
                s.target,
                s.caused_rate,
                s.counted_rate,
                s.max_lag,
                s.lag_at_end,
                s.drained_ms.map_or("never (lost)".to_string(), |ms| format!("{ms} ms")),
                s.lockwatch_cores,
                s.redis_cores,
                if s.connected { "yes" } else { "NO" }
            );
        }
        let n = std::env::var("LOCKWATCH_LOAD_LOCKS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000);
        let (before, after, per) = memory_per_lock(&client, &exporter, &http, n).await;
        println!(
            "\nmemory: {n} locks held at once: exporter RSS {before} KiB → {after} KiB, {per:.0} bytes per tracked lock (keys of 23 bytes; includes the capped history)"
        );
    });
}
