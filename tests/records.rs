//! Joining lines into records under hostile input: random mixes of start lines, every kind
//! of continuation line, blank lines, binary bytes, over-long lines and 10 MB records, fed
//! through a fixed 1 MiB buffer in random pieces the way the tailer reads a file. Nothing
//! panics, every line lands in exactly one record, records keep their bounds, the buffer
//! always makes progress, and `lockwatch classify` reading such input keeps a small,
//! bounded memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use lockwatch::config::{Config, LogFormat, Multiline, Overrides};
use lockwatch::intake::records::{End, MAX_RECORD_BYTES, MAX_RECORD_LINES, Piece, RecordSplitter};
use lockwatch::intake::{Classifier, MAX_LINE};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// xorshift64*: deterministic, so a failure can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
}

const LINES: &[&str] = &[
    "2026-11-21 10:00:00,000 ERROR worker payout lock release failed",
    "{\"msg\":\"run lock renewal failed\",\"error\":\"lock not owned\"}",
    "ts=1 level=warn msg=\"lock extend failed\" error=\"redislock: not obtained\"",
    "Traceback (most recent call last):",
    "  File \"w.py\", line 3, in run",
    "    lock.release()",
    "redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned",
    "During handling of the above exception, another exception occurred:",
    "java.lang.IllegalMonitorStateException: attempt to unlock lock, not locked by current thread",
    "\tat org.redisson.RedissonBaseLock.unlock(RedissonBaseLock.java:1)",
    "Caused by: x.Y: z",
    "\t... 12 more",
    "panic: redsync: failed to extend lock",
    "goroutine 1 [running]:",
    "main.main()",
    "created by main.run in goroutine 1",
    "ExecutionError: The operation was unable to achieve a quorum during its retry window.",
    "    at Redlock._execute (index.js:296:23)",
    "  attempts: [",
    "}",
    "[stacktrace]",
    "#0 /app/Lock.php(12): Lock->block()",
    "\"} ",
    "",
    "   ",
    "\r",
];

/// A random log of about `size` bytes: known lines, binary bytes, long lines, and now and
/// then a record of `giant` bytes (continuation lines after a start line).
fn random_log(rng: &mut Rng, size: usize, giant: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + giant);
    while out.len() < size {
        match rng.below(100) {
            0 => {
                let n = rng.below(300);
                out.extend((0..n).map(|_| rng.next() as u8));
            }
            1 => out.extend(std::iter::repeat_n(b'x', MAX_LINE + rng.below(1000))),
            2 if giant > 0 => {
                out.extend_from_slice(b"2026-11-21 ERROR payout lock release failed\n");
                let frame = b"\tat com.example.Deep.call(Deep.java:1)\n";
                while out.len() < size.min(out.len() + giant) {
                    out.extend_from_slice(frame);
                }
                out.extend_from_slice(b"   a continuation line much longer than the rest, over and over\n");
            }
            _ => out.extend_from_slice(LINES[rng.below(LINES.len() as u64)].as_bytes()),
        }
        out.push(b'\n');
    }
    out
}

/// Read `log` through a fixed buffer of `cap` bytes in random pieces, as the tailer does;
/// classify every piece. Returns the physical lines seen.
fn tail(rng: &mut Rng, c: &Classifier, log: &[u8], cap: usize) -> u64 {
    let mut splitter = RecordSplitter::new(Multiline::Auto);
    let mut buf = vec![0u8; cap];
    let (mut offset, mut lines) = (0usize, 0u64);
    while offset < log.len() {
        let want = (1 + rng.below(cap as u64)).min(log.len() - offset);
        buf[..want].copy_from_slice(&log[offset..offset + want]);
        let last = offset + want == log.len();
        let end = match (last, rng.below(4)) {
            (true, _) => End::Eof,
            (false, 0) => End::Quiet,
            _ => End::More,
        };
        let used = splitter.feed(&buf[..want], MAX_LINE, end, |p: Piece<'_>| {
            if let Piece::Record { bytes, lines: n, .. } = p {
                assert!(n <= MAX_RECORD_LINES, "{n} lines");
                assert!(bytes.len() <= MAX_RECORD_BYTES, "{} bytes", bytes.len());
                assert_eq!(bytes.iter().filter(|b| **b == b'\n').count() as u32, n - 1);
            }
            lines += u64::from(p.lines());
            let _ = c.classify_piece(&p, LogFormat::Auto);
        });
        // A full buffer always yields something: no record outgrows it.
        assert!(used > 0 || want < cap, "no progress with a full buffer at {offset}");
        offset += used;
    }
    lines
}

fn classifier() -> Classifier {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join("lockwatch.toml")).unwrap();
    Classifier::new(&Config::from_toml(&text, "lockwatch.toml", Path::new(FIXTURES), &Overrides::default()).unwrap())
        .unwrap()
}

/// Lines as a reader counts them: newlines, plus a last line without one.
fn line_count(log: &[u8]) -> u64 {
    let n = log.iter().filter(|b| **b == b'\n').count() as u64;
    n + u64::from(log.last().is_some_and(|b| *b != b'\n'))
}

#[test]
fn random_records_never_panic_and_every_line_is_counted_once() {
    let c = classifier();
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let log = random_log(&mut rng, 200_000, 0);
        assert_eq!(tail(&mut rng, &c, &log, 1024 * 1024), line_count(&log), "seed {seed}");
    }
}

#[test]
fn ten_megabyte_records_pass_through_a_one_megabyte_buffer() {
    let c = classifier();
    let mut rng = Rng(7);
    let log = random_log(&mut rng, 30 * 1024 * 1024, 10 * 1024 * 1024);
    assert!(log.len() > 30 * 1024 * 1024);
    assert_eq!(tail(&mut rng, &c, &log, 1024 * 1024), line_count(&log));
}

/// Peak resident memory of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `classify --summary -` fed `input` in chunks: its peak resident memory in KiB, the line
/// count written, and its stderr, once it exited successfully.
fn classify_peak(mut input: impl FnMut(&mut dyn Write) -> u64) -> (u64, u64, String) {
    let cfg = Path::new(FIXTURES).join("lockwatch.toml");
    let mut child = Command::new(BIN)
        .args(["classify", "-c", cfg.to_str().unwrap(), "--summary", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = input(&mut stdin);
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let peak = peak_rss_kib(child.id());
    drop(stdin);
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{stderr}");
    (peak, lines, stderr)
}

#[test]
fn classify_keeps_its_memory_bounded_on_giant_records_and_binary_input() {
    // What the process costs with next to no input: the baseline the input must not grow.
    let (baseline, _, _) = classify_peak(&mut |w: &mut dyn Write| {
        w.write_all(b"lock not owned\n").unwrap();
        1
    });
    let mut rng = Rng(11);
    let mut written = 0u64;
    // 100 MB: giant records, 10 MB of one, binary noise, over-long lines.
    let (peak, lines, stderr) = classify_peak(&mut |w: &mut dyn Write| {
        let mut lines = 0;
        while written < 100 * 1024 * 1024 {
            let chunk = random_log(&mut rng, 10 * 1024 * 1024, 10 * 1024 * 1024);
            lines += line_count(&chunk);
            w.write_all(&chunk).unwrap();
            written += chunk.len() as u64;
        }
        lines
    });
    assert!(
        stderr.starts_with(&format!("{lines} lines:")),
        "{lines} lines written; {stderr}"
    );
    eprintln!("classify --summary over {written} bytes: peak RSS {peak} KiB, {baseline} KiB with one line");
    // The bounds: a 1 MiB read buffer, 64 KiB chunks in flight, a record of at most 256 KiB.
    assert!(
        peak.saturating_sub(baseline) < 16 * 1024,
        "peak RSS {peak} KiB for {written} bytes of input, {baseline} KiB for one line"
    );
}
