//! The event intake end to end: `[[logs]]` files through rotation, truncation and
//! re-creation; multi-line records (tracebacks, stack traces) through rotation and a restart
//! that cuts one in half; restarts (graceful and SIGKILL) with saved offsets; bad input;
//! stdin; and `POST /api/v1/events`. Counts are exact wherever the contract promises
//! exactness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Metrics, Served};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const WAIT: Duration = Duration::from_secs(10);

const NAMESPACES: &str = r#"
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
fn event(i: usize) -> String {
    format!("ts=2026-11-21T10:00:00Z level=error msg=\"lock not owned\" key=wf:lock:{i}\n")
}

/// A line with no lock event.
fn ordinary(i: usize) -> String {
    format!("2026-11-21T10:00:00Z INFO request {i} served in 3ms\n")
}

fn append(path: &Path, text: &str) {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

fn lines_of(m: &Metrics, source: &str) -> (f64, f64, f64) {
    let v = |r| m.val("lockwatch_log_lines_total", &[("source", source), ("result", r)]);
    (v("matched"), v("ignored"), v("malformed"))
}

fn not_owned(m: &Metrics, ns: &str) -> f64 {
    m.val(
        "lockwatch_lock_events_total",
        &[("namespace", ns), ("op", "release"), ("outcome", "not_owned")],
    )
}

async fn expect_lines(s: &Served, what: &str, want: (f64, f64, f64)) {
    s.wait_for(WAIT, what, |m| lines_of(m, "app") == want).await;
    // …and nothing more arrives later (nothing counted twice).
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(lines_of(&s.metrics().await, "app"), want, "{what}: counts moved on");
}

fn logs_config(r: &lockwatch::access::child::RedisChild, glob: &Path, extra: &str) -> lockwatch::config::Config {
    common::config(
        r,
        &format!(
            "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n{NAMESPACES}\n\
             [[logs]]\nname = \"app\"\npath = \"{}\"\nstart_at = \"beginning\"\n{extra}",
            glob.display()
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_followed_through_rotation_truncation_and_recreation() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, &(event(1) + &ordinary(2) + &event(3) + &ordinary(4) + &event(5)));
    let s = Served::start(logs_config(&r, &dir.path().join("*.log"), "")).await;
    expect_lines(&s, "the first lines", (3.0, 2.0, 0.0)).await;

    // A line split across two writes waits for its newline.
    let line = event(6);
    let (a, b) = line.split_at(20);
    append(&log, a);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        lines_of(&s.metrics().await, "app"),
        (3.0, 2.0, 0.0),
        "half a line was counted"
    );
    append(&log, b);
    expect_lines(&s, "the completed line", (4.0, 2.0, 0.0)).await;

    // Rename rotation: the writer keeps writing to the old file for a moment, then the
    // new file appears; both are read whole.
    let mut old = OpenOptions::new().append(true).open(&log).unwrap();
    old.write_all(event(7).as_bytes()).unwrap();
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    old.write_all((event(8) + &ordinary(9)).as_bytes()).unwrap();
    append(&log, &(event(10) + &event(11)));
    old.write_all(event(12).as_bytes()).unwrap();
    drop(old);
    expect_lines(&s, "rename rotation", (9.0, 3.0, 0.0)).await;

    // copytruncate: the copy does not match the glob; the original starts again at 0.
    std::fs::copy(&log, dir.path().join("app.log.2")).unwrap();
    OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    append(&log, &event(13));
    expect_lines(&s, "copytruncate", (10.0, 3.0, 0.0)).await;

    // Truncated and rewritten longer before lockwatch looks: its first bytes differ.
    let mut f = File::create(&log).unwrap();
    f.write_all((ordinary(14) + &ordinary(15) + &event(16) + &event(17)).as_bytes())
        .unwrap();
    drop(f);
    expect_lines(&s, "truncate and rewrite", (12.0, 5.0, 0.0)).await;

    // Deleted and created again.
    std::fs::remove_file(&log).unwrap();
    append(&log, &(event(18) + &ordinary(19)));
    expect_lines(&s, "delete and re-create", (13.0, 6.0, 0.0)).await;

    // A new file matching the glob.
    append(&dir.path().join("other.log"), &event(20));
    expect_lines(&s, "a new file", (14.0, 6.0, 0.0)).await;

    let m = s.metrics().await;
    assert_eq!(not_owned(&m, "workflow"), 14.0);
    assert_eq!(not_owned(&m, "payout"), 0.0);
    // Rotated files are closed once quiet: app.log and other.log are left.
    s.wait_for(Duration::from_secs(15), "rotated files closed", |m| {
        m.val("lockwatch_log_files", &[("source", "app")]) == 2.0
    })
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_counted_as_malformed_and_labels_stay_bounded() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut f = File::create(&log).unwrap();
    // Binary garbage with NULs, invalid UTF-8, truncated JSON (read as text under `auto`),
    // a 10 MB line.
    f.write_all(b"\x00\x01\x02garbage\xff\n").unwrap();
    f.write_all(b"lock not owned \xc3\x28 broken utf-8\n").unwrap();
    f.write_all(b"{\"msg\":\"lock not owned\",\"key\":\"wf:lo\n").unwrap();
    f.write_all(&vec![b'x'; 10 * 1024 * 1024]).unwrap();
    f.write_all(b"\n").unwrap();
    // 10,000 distinct namespace values: all `unknown`.
    for i in 0..10_000 {
        writeln!(f, "{{\"msg\":\"lock not owned\",\"namespace\":\"ns-{i}\"}}").unwrap();
    }
    f.write_all(event(1).as_bytes()).unwrap();
    drop(f);
    let s = Served::start(logs_config(&r, &log, "format = \"auto\"\n")).await;
    s.wait_for(WAIT, "all lines", |m| {
        let (a, b, c) = lines_of(m, "app");
        a + b + c == 10_005.0
    })
    .await;
    let m = s.metrics().await;
    // NUL line, invalid UTF-8, the 10 MB line: malformed. The truncated JSON line still
    // says "lock not owned" as text: an event of no known namespace.
    assert_eq!(lines_of(&m, "app"), (10_002.0, 0.0, 3.0));
    assert_eq!(not_owned(&m, "unknown"), 10_001.0);
    assert_eq!(not_owned(&m, "workflow"), 1.0);
    let series =
        m.0.lines()
            .filter(|l| l.starts_with("lockwatch_lock_events_total{"))
            .count();
    // (2 namespaces + unknown) × 4 ops × 6 outcomes, pre-exported; nothing added.
    assert_eq!(series, 3 * 4 * 6, "{}", m.0);
    s.stop().await;
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// Push `body` as `ctype`; (status, body).
async fn post(s: &Served, ctype: Option<&str>, token: Option<&str>, body: &[u8]) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut req = client
        .post(format!("http://{}/api/v1/events", s.addr))
        .body(body.to_vec());
    if let Some(c) = ctype {
        req = req.header("content-type", c);
    }
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_push_takes_ndjson_and_text_and_refuses_bad_bodies() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    let cfg = common::config(
        &r,
        &format!(
            "[server]\npush_token_file = \"{}\"\n[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n{NAMESPACES}",
            dir.path().join("token").display()
        ),
    );
    let s = Served::start(cfg).await;
    let ndjson = "application/x-ndjson";
    let tok = Some("s3cret");

    let events = concat!(
        r#"{"namespace":"payout","op":"renew","outcome":"error","ts":1763719200.5}"#,
        "\n\n",
        r#"{"op":"release","outcome":"not_owned","key":"wf:lock:7","extra":"ignored"}"#,
        "\r\n",
        r#"{"namespace":"typo","op":"write","outcome":"stale_fence"}"#,
        "\n"
    );
    let (status, body) = post(&s, Some(ndjson), tok, events.as_bytes()).await;
    assert_eq!(
        (status, json(&body)),
        (200, serde_json::json!({"accepted": 3, "unknown_namespace": 1}))
    );
    let (status, body) = post(
        &s,
        Some("text/plain; charset=utf-8"),
        tok,
        b"ERROR payout lock release skipped: token mismatch\nINFO all good\n\xff\xfe\n",
    )
    .await;
    assert_eq!(
        (status, json(&body)),
        (
            200,
            serde_json::json!({"lines": 3, "matched": 1, "ignored": 1, "malformed": 1})
        )
    );

    // A bad line anywhere rejects the whole batch, naming the line.
    let bad = format!(
        "{}\n{}\n",
        r#"{"op":"renew","outcome":"ok"}"#, r#"{"op":"steal","outcome":"ok"}"#
    );
    let (status, body) = post(&s, Some(ndjson), tok, bad.as_bytes()).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("line 2: field `op`: `steal` is not one of acquire, release, renew, write"),
        "{body}"
    );
    let (status, body) = post(
        &s,
        Some(ndjson),
        tok,
        b"{\"op\":\"renew\",\"outcome\":\"ok\"}\n{\"op\":",
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.starts_with("line 2: not valid JSON at column 6"), "{body}");
    for (body, want) in [
        (&b"[1,2]"[..], "line 1: not a JSON object"),
        (b"{\"outcome\":\"ok\"}", "line 1: missing field `op`"),
        (
            b"{\"op\":\"renew\",\"outcome\":3}",
            "line 1: field `outcome` must be a string",
        ),
        (
            b"{\"op\":\"renew\",\"outcome\":\"ok\",\"ts\":[]}",
            "line 1: field `ts` must be a number or a string",
        ),
    ] {
        let (status, got) = post(&s, Some(ndjson), tok, body).await;
        assert_eq!(status, 400);
        assert!(got.starts_with(want), "{got}");
    }
    // Token missing or wrong: 401, nothing read.
    assert_eq!(post(&s, Some(ndjson), None, events.as_bytes()).await.0, 401);
    assert_eq!(post(&s, Some(ndjson), Some("guess"), events.as_bytes()).await.0, 401);
    // Over the limit: 413, with or without a declared length.
    let big = vec![b'\n'; 1024 * 1024 + 1];
    let (status, body) = post(&s, Some("text/plain"), tok, &big).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("over 1024 KiB"), "{body}");
    assert_eq!(post_chunked(s.addr, 17, 64 * 1024).await, 413);
    assert_eq!(post_chunked(s.addr, 2, 64 * 1024).await, 200);
    // Content type neither NDJSON nor text.
    let (status, body) = post(&s, Some("application/xml"), tok, b"<x/>").await;
    assert_eq!(status, 415);
    assert!(body.contains("application/x-ndjson"), "{body}");

    // Only the two accepted bodies were counted.
    let m = s.metrics().await;
    let ev = |ns, op, outcome| {
        m.val(
            "lockwatch_lock_events_total",
            &[("namespace", ns), ("op", op), ("outcome", outcome)],
        )
    };
    assert_eq!(ev("payout", "renew", "error"), 1.0);
    assert_eq!(ev("workflow", "release", "not_owned"), 1.0);
    assert_eq!(ev("unknown", "write", "stale_fence"), 1.0);
    assert_eq!(ev("payout", "release", "not_owned"), 1.0);
    assert_eq!(ev("workflow", "renew", "ok"), 0.0);
    // Ignored: one text line, and the 2 × 64 Ki empty lines of the accepted chunked body.
    assert_eq!(lines_of(&m, "push"), (4.0, 1.0 + 2.0 * 65536.0, 1.0));
    s.stop().await;
}

/// Push `chunks` chunks of `size` newlines with no declared length; the status.
async fn post_chunked(addr: std::net::SocketAddr, chunks: usize, size: usize) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
                Authorization: Bearer s3cret\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    c.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'\n'; size];
    for _ in 0..chunks {
        // The server may answer 413 and close before everything is sent.
        if c.write_all(format!("{size:x}\r\n").as_bytes()).await.is_err()
            || c.write_all(&chunk).await.is_err()
            || c.write_all(b"\r\n").await.is_err()
        {
            break;
        }
    }
    let _ = c.write_all(b"0\r\n\r\n").await;
    let mut resp = Vec::new();
    let _ = c.read_to_end(&mut resp).await;
    let text = String::from_utf8_lossy(&resp);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A `lockwatch serve` process with a `[[logs]]` source, JSON logs to a file.
struct Proc {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

fn spawn_serve(config: &Path, log: &Path, port: u16, stdin: Stdio) -> Proc {
    let child = Command::new(BIN)
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

impl Proc {
    async fn metrics(&self) -> Metrics {
        let (status, _, body) = common::http_get(([127, 0, 0, 1], self.port).into(), "/metrics").await;
        assert_eq!(status, 200);
        Metrics(body)
    }

    async fn lines(&self) -> u64 {
        let (a, b, c) = lines_of(&self.metrics().await, "app");
        (a + b + c) as u64
    }

    fn signal(&mut self, sig: &str) {
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
    fn stopped_totals(&self) -> (u64, u64) {
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
struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<()>,
}

impl Writer {
    fn start(path: std::path::PathBuf, lines_per_sec: u64) -> Self {
        let (stop, written) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (s, w) = (stop.clone(), written.clone());
        let handle = std::thread::spawn(move || writer(path, lines_per_sec, s, w));
        Writer { stop, written, handle }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Stop; the number of lines written.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap();
        self.written.load(Ordering::SeqCst)
    }
}

/// Appends `lines_per_sec` lines (every 10th an event) until stopped.
fn writer(path: std::path::PathBuf, lines_per_sec: u64, stop: Arc<AtomicBool>, written: Arc<AtomicU64>) {
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

fn restart_config(dir: &Path, redis_url: &str, port: u16) -> std::path::PathBuf {
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
fn restartable() -> (
    lockwatch::access::child::RedisChild,
    tempfile::TempDir,
    u16,
    std::path::PathBuf,
) {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let config = restart_config(dir.path(), &r.url(), port);
    (r, dir, port, config)
}

async fn settle(p: &Proc, want: u64) {
    let started = Instant::now();
    while p.lines().await < want {
        assert!(started.elapsed() < WAIT, "stuck at {} of {want} lines", p.lines().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_neither_loses_nor_repeats_a_line() {
    let (_r, dir, port, config) = restartable();
    let w = Writer::start(dir.path().join("app.log"), 2000);
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    first.signal("-TERM");
    let (lines1, matched1) = first.stopped_totals();
    assert!(lines1 > 0, "the first run read nothing");
    tokio::time::sleep(Duration::from_millis(800)).await; // more is appended while stopped
    let total = w.finish();
    assert!(total > lines1, "nothing was written after the stop");

    let second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    settle(&second, total - lines1).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let m = second.metrics().await;
    let (matched2, ignored2, malformed2) = lines_of(&m, "app");
    assert_eq!(
        lines1 + (matched2 + ignored2 + malformed2) as u64,
        total,
        "lines lost or counted twice"
    );
    assert_eq!(
        matched1 + matched2 as u64,
        total.div_ceil(10),
        "events lost or counted twice"
    );
    assert_eq!(malformed2, 0.0);
    let mut second = second;
    second.signal("-TERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_replay_stays_within_the_save_period() {
    let (_r, dir, port, config) = restartable();
    let rate = 2000;
    let w = Writer::start(dir.path().join("app.log"), rate);
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let written_at_kill = w.written();
    first.signal("-KILL");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let total = w.finish();

    let mut second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    // Everything written after the kill is read (nothing lost)…
    settle(&second, total - written_at_kill).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let counted = second.lines().await;
    // …and what is read again is at most the lines of one save period plus a poll or two.
    let replayed = counted - (total - written_at_kill);
    let bound = rate * (1000 + 2 * 250) / 1000;
    eprintln!("after SIGKILL: {replayed} lines read again (bound {bound}), {total} written");
    assert!(replayed <= bound, "replayed {replayed} lines, more than {bound}");
    second.signal("-TERM");
    // The saved offset reached the end of the file.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("state/logs-app.offsets.json")).unwrap()).unwrap();
    let size = std::fs::metadata(dir.path().join("app.log")).unwrap().len();
    assert_eq!(saved["files"][0]["offset"].as_u64(), Some(size));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_source_is_counted() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{}\"\nnotifications = \"off\"\n{NAMESPACES}\n[[logs]]\nname = \"app\"\npath = \"-\"\n",
            r.url()
        ),
    )
    .unwrap();
    let mut p = spawn_serve(&config, &dir.path().join("run.log"), port, Stdio::piped());
    let mut stdin = p.child.stdin.take().unwrap();
    stdin
        .write_all((event(1) + &ordinary(2) + &event(3)).as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    settle(&p, 3).await;
    drop(stdin); // EOF: the source ends, the exporter keeps serving
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = p.metrics().await;
    assert_eq!(lines_of(&m, "app"), (2.0, 1.0, 0.0));
    assert_eq!(not_owned(&m, "workflow"), 2.0);
    p.signal("-TERM");
}

/// A not-owned release in `workflow` logged with its Python traceback: 5 lines.
fn traceback(i: usize) -> String {
    format!(
        "2026-11-21 10:00:00,000 ERROR worker lock release failed for wf:lock:{i}\n\
         Traceback (most recent call last):\n  File \"worker.py\", line 9, in run\n    lock.release()\n\
         redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned\n"
    )
}

/// A not-owned renewal in `workflow` logged by logback with its stack trace: 4 lines.
fn stack_trace(i: usize) -> String {
    format!(
        "2026-11-21 10:00:00.000 ERROR 7 --- [main] c.e.Job : lock extend failed for wf:lock:{i}\n\
         java.lang.IllegalStateException: Lock was released in the store due to expiration.\n\
         \tat o.s.i.r.u.RedisLockRegistry$RedisLock.renew(RedisLockRegistry.java:276)\n\
         \tat c.e.Job.run(Job.java:12)\n"
    )
}

fn workflow_events(m: &Metrics) -> (f64, f64) {
    let v = |op| {
        m.val(
            "lockwatch_lock_events_total",
            &[("namespace", "workflow"), ("op", op), ("outcome", "not_owned")],
        )
    };
    (v("release"), v("renew"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_line_records_are_counted_once_through_rotation_and_restart() {
    let (_r, dir, port, config) = restartable();
    let log = dir.path().join("app.log");
    append(&log, &(ordinary(0) + &traceback(1) + &ordinary(2) + &stack_trace(3)));
    let mut first = spawn_serve(&config, &dir.path().join("run1.log"), port, Stdio::null());
    // The stack trace at the end is counted once the file has been quiet for a second.
    settle(&first, 11).await;

    // A traceback written in two pieces is one record.
    let tb = traceback(4);
    let (head, tail) = tb.split_at(tb.find("  File").unwrap());
    append(&log, head);
    tokio::time::sleep(Duration::from_millis(400)).await;
    append(&log, &(tail.to_string() + &ordinary(5)));
    settle(&first, 17).await;

    // Rename rotation, the writer still writing records to the renamed file.
    let mut old = OpenOptions::new().append(true).open(&log).unwrap();
    old.write_all(traceback(6).as_bytes()).unwrap();
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    old.write_all(stack_trace(7).as_bytes()).unwrap();
    append(&log, &(ordinary(8) + &traceback(9)));
    old.write_all(ordinary(10).as_bytes()).unwrap();
    drop(old);
    settle(&first, 33).await;

    // copytruncate: the copy is not read, the file starts again at 0.
    std::fs::copy(&log, dir.path().join("app.log.2")).unwrap();
    OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    append(&log, &(stack_trace(11) + &ordinary(12)));
    settle(&first, 38).await;
    let m = first.metrics().await;
    assert_eq!(workflow_events(&m), (4.0, 3.0), "events counted twice or lost");
    assert_eq!(lines_of(&m, "app"), (32.0, 6.0, 0.0));

    // Half a record when lockwatch stops: not counted, and the offset stays before it.
    let st = stack_trace(13);
    let (head, tail) = st.split_at(st.find("\tat").unwrap());
    append(&log, head);
    tokio::time::sleep(Duration::from_millis(400)).await;
    first.signal("-TERM");
    assert_eq!(first.stopped_totals(), (38, 32));
    append(&log, &(tail.to_string() + &traceback(14) + &ordinary(15)));

    let mut second = spawn_serve(&config, &dir.path().join("run2.log"), port, Stdio::null());
    settle(&second, 10).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m = second.metrics().await;
    assert_eq!(lines_of(&m, "app"), (9.0, 1.0, 0.0), "lines lost or counted twice");
    assert_eq!(
        workflow_events(&m),
        (1.0, 1.0),
        "the record cut by the stop is one event"
    );
    second.signal("-TERM");
}
