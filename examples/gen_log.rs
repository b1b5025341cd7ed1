//! Writes the log `make bench` feeds to lockwatch and to mtail: LINES lines (default
//! 5,000,000) in mixed formats (JSON, logfmt, plain text), 1% lock events of four shapes
//! taken from real libraries, 2% lines that mention locks without a failure, and the rest
//! ordinary traffic. Deterministic: the same arguments give the same file.
//!
//! Usage: cargo run --release --example gen_log -- OUT [LINES]

use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: gen_log OUT [LINES]");
        std::process::exit(2);
    };
    let lines: u64 = match args.next().map(|s| s.parse()) {
        None => 5_000_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("gen_log: LINES: {e}");
            std::process::exit(2);
        }
    };
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out)?);
    for i in 0..lines {
        let (s, ms) = (i / 1000 % 60, i % 1000);
        let ts = format!("2026-11-21T10:{:02}:{s:02}.{ms:03}Z", i / 60_000 % 60);
        match i % 100 {
            // 1%: lock events, four shapes in turn.
            0 => match i / 100 % 4 {
                0 => writeln!(
                    w,
                    "time={ts} level=WARN msg=\"run lock renewal failed\" run_id=run-{i} error=\"lock not owned\""
                )?,
                1 => writeln!(
                    w,
                    "{{\"time\":\"{ts}\",\"level\":\"WARN\",\"msg\":\"approval lock release failed\",\"job_id\":\"job-{i}\",\"error\":\"lock not owned\"}}"
                )?,
                2 => writeln!(
                    w,
                    "2026-11-21 10:05:31,877 ERROR worker.payout payout lock release failed: redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned"
                )?,
                _ => writeln!(
                    w,
                    "2026-11-21 10:06:38.000 ERROR 4121 --- [redisson-timer-4-1] o.r.RedissonBaseLock : Can't update lock payout:batch:lock:{i} expiration"
                )?,
            },
            // 2%: lock words, no failure.
            1 => writeln!(
                w,
                "{{\"time\":\"{ts}\",\"level\":\"INFO\",\"msg\":\"run lock acquired\",\"run_id\":\"run-{i}\"}}"
            )?,
            2 => writeln!(
                w,
                "time={ts} level=INFO msg=\"user account locked\" user=u{i} attempts=5"
            )?,
            // 97%: ordinary traffic.
            n if n % 3 == 0 => writeln!(
                w,
                "{{\"time\":\"{ts}\",\"level\":\"INFO\",\"msg\":\"http request\",\"method\":\"GET\",\"path\":\"/api/v1/items/{i}\",\"status\":200,\"duration_ms\":{}}}",
                i % 97
            )?,
            n if n % 3 == 1 => writeln!(
                w,
                "time={ts} level=INFO msg=\"job step done\" job_id=job-{i} step=transform rows={} duration=12ms",
                i % 1013
            )?,
            _ => writeln!(
                w,
                "2026-11-21 10:05:00,101 INFO worker.http served GET /api/v1/items/{i} in {}ms (200)",
                i % 89
            )?,
        }
    }
    w.flush()
}
