//! The event intake's test harness: a config's namespaces, log lines of each kind (logfmt
//! events, ordinary lines, Python tracebacks, Java stack traces), a `lockwatch serve`
//! process with saved offsets, and a writer appending at a steady rate.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Metrics;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
pub const WAIT: Duration = Duration::from_secs(10);

pub const NAMESPACES: &str = r#"
[[namespace]]
name = "workflow"
pattern = "wf:lock:*"
ttl = "30s"
[[namespace]]
name = "payout"
pattern = "payout:lock:*"
ttl = "30s"
log_phrases = ["payout lock"]
"#;

/// A not-owned release in `workflow`, as a logfmt line.
pub fn event(i: usize) -> String {
    format!("ts=2026-11-21T10:00:00Z level=error msg=\"lock not owned\" key=wf:lock:{i}\n")
}

/// A line with no lock event.
pub fn ordinary(i: usize) -> String {
    format!("2026-11-21T10:00:00Z INFO request {i} served in 3ms\n")
}

pub fn append(path: &Path, text: &str) {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

pub fn lines_of(m: &Metrics, source: &str) -> (f64, f64, f64) {
    let v = |r| m.val("lockwatch_log_lines_total", &[("source", source), ("result", r)]);
    (v("matched"), v("ignored"), v("malformed"))
}

pub fn not_owned(m: &Metrics, ns: &str) -> f64 {
    m.val(
        "lockwatch_lock_events_total",
        &[("namespace", ns), ("op", "release"), ("outcome", "not_owned")],
    )
}

/// A `lockwatch serve` process with a `[[logs]]` source, JSON logs to a file.
pub struct Proc {
    pub child: Child,
    pub port: u16,
    pub log: std::path::PathBuf,
}

pub fn spawn_serve(config: &Path, log: &Path, port: u16, stdin: Stdio) -> Proc {
    spawn_serve_with(Path::new(BIN), config, log, port, stdin)
}

/// `spawn_serve` of the binary `bin` (another build's, to measure it).
pub fn spawn_serve_with(bin: &Path, config: &Path, log: &Path, port: u16, stdin: Stdio) -> Proc {
    let child = Command::new(bin)
        .args(["serve", "-c", config.to_str().unwrap(), "--log-format", "json"])
        .stdin(stdin)
        .stderr(File::create(log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < WAIT, "serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Proc {
        child,
        port,
        log: log.to_path_buf(),
    }
}

/// A test that fails leaves no process behind (it would hold the test's stdout open).
impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Proc {
    pub async fn metrics(&self) -> Metrics {
        let (status, _, body) = super::http_get(([127, 0, 0, 1], self.port).into(), "/metrics").await;
        assert_eq!(status, 200);
        Metrics(body)
    }

    pub async fn lines(&self) -> u64 {
        let (a, b, c) = lines_of(&self.metrics().await, "app");
        (a + b + c) as u64
    }

    pub fn signal(&mut self, sig: &str) {
        assert!(
            Command::new("kill")
                .args([sig, &self.child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.wait().unwrap();
        if sig == "-TERM" {
            assert_eq!(
                status.code(),
                Some(0),
                "{}",
                std::fs::read_to_string(&self.log).unwrap()
            );
        }
    }

    /// The totals logged by the tailer when it stopped: (lines, matched).
    pub fn stopped_totals(&self) -> (u64, u64) {
        let text = std::fs::read_to_string(&self.log).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let f = &v;
            if f["message"] == "stopped reading logs" {
                return (f["lines"].as_u64().unwrap(), f["matched"].as_u64().unwrap());
            }
        }
        panic!("no `stopped reading logs` in:\n{text}");
    }
}

/// A thread appending lines to a log at a steady rate.
pub struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<()>,
}

impl Writer {
    pub fn start(path: std::path::PathBuf, lines_per_sec: u64) -> Self {
        let (stop, written) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (s, w) = (stop.clone(), written.clone());
        let handle = std::thread::spawn(move || writer(path, lines_per_sec, s, w));
        Writer { stop, written, handle }
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Stop; the number of lines written.
    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap();
        self.written.load(Ordering::SeqCst)
    }
}

/// Appends `lines_per_sec` lines (every 10th an event) until stopped.
pub fn writer(path: std::path::PathBuf, lines_per_sec: u64, stop: Arc<AtomicBool>, written: Arc<AtomicU64>) {
    let mut f = OpenOptions::new().create(true).append(true).open(path).unwrap();
    let tick = Duration::from_millis(10);
    let per_tick = lines_per_sec / 100;
    while !stop.load(Ordering::SeqCst) {
        let mut chunk = String::new();
        let base = written.load(Ordering::SeqCst) as usize;
        for i in base..base + per_tick as usize {
            chunk.push_str(&if i % 10 == 0 { event(i) } else { ordinary(i) });
        }
        f.write_all(chunk.as_bytes()).unwrap();
        written.fetch_add(per_tick, Ordering::SeqCst);
        std::thread::sleep(tick);
    }
}

pub fn restart_config(dir: &Path, redis_url: &str, port: u16) -> std::path::PathBuf {
    let path = dir.join("lockwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{redis_url}\"\nnotifications = \"off\"\n{NAMESPACES}\n\
             [[logs]]\nname = \"app\"\npath = \"{}\"\nstart_at = \"beginning\"\n[state]\ndir = \"{}\"\n",
            dir.join("app.log").display(),
            dir.join("state").display()
        ),
    )
    .unwrap();
    path
}

/// A redis-server, a directory, a port and a config with saved offsets, for restart tests.
pub fn restartable() -> (
    lockwatch::access::child::RedisChild,
    tempfile::TempDir,
    u16,
    std::path::PathBuf,
) {
    let r = super::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let config = restart_config(dir.path(), &r.url(), port);
    (r, dir, port, config)
}

pub async fn settle(p: &Proc, want: u64) {
    let started = Instant::now();
    while p.lines().await < want {
        assert!(started.elapsed() < WAIT, "stuck at {} of {want} lines", p.lines().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A not-owned release in `workflow` logged with its Python traceback: 5 lines.
pub fn traceback(i: usize) -> String {
    format!(
        "2026-11-21 10:00:00,000 ERROR worker lock release failed for wf:lock:{i}\n\
         Traceback (most recent call last):\n  File \"worker.py\", line 9, in run\n    lock.release()\n\
         redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned\n"
    )
}

/// A not-owned renewal in `workflow` logged by logback with its stack trace: 4 lines.
pub fn stack_trace(i: usize) -> String {
    format!(
        "2026-11-21 10:00:00.000 ERROR 7 --- [main] c.e.Job : lock extend failed for wf:lock:{i}\n\
         java.lang.IllegalStateException: Lock was released in the store due to expiration.\n\
         \tat o.s.i.r.u.RedisLockRegistry$RedisLock.renew(RedisLockRegistry.java:276)\n\
         \tat c.e.Job.run(Job.java:12)\n"
    )
}

pub fn workflow_events(m: &Metrics) -> (f64, f64) {
    let v = |op| {
        m.val(
            "lockwatch_lock_events_total",
            &[("namespace", "workflow"), ("op", op), ("outcome", "not_owned")],
        )
    };
    (v("release"), v("renew"))
}
