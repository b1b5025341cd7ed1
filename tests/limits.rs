//! The exporter's HTTP limits against a client that holds connections: more idle, slow-head
//! and slow-body connections than `max_connections`, and `/metrics` still answers within a
//! second while no request in progress is cut; slow heads, slow bodies and idle kept-alive
//! connections closed after their configured time; out of file descriptors (a low
//! `ulimit -n`), accepts recover by closing idle connections, without a busy loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Metrics, Served};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

fn config(r: &lockwatch::access::child::RedisChild, server: &str) -> lockwatch::config::Config {
    common::config(
        r,
        &format!(
            "[server]\n{server}\n[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nnotifications = \"off\"\n\
             [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
        ),
    )
}

/// `/metrics` on a fresh connection: it answers 200 within a second.
async fn scrape_within_a_second(addr: SocketAddr) -> Metrics {
    let started = Instant::now();
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(1), common::http_get(addr, "/metrics"))
        .await
        .unwrap_or_else(|_| panic!("/metrics did not answer within 1 s"));
    assert_eq!(status, 200, "{body}");
    eprintln!("/metrics answered in {:?}", started.elapsed());
    Metrics(body)
}

/// Whether the server closed `s` (end of stream or reset); false while it is open.
async fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_millis(10), s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {} // an answer (a 408): read on to the end
        }
    }
}

/// A client that starts a push and sends its body one byte at a time.
async fn slow_push(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = "POST /api/v1/events HTTP/1.1\r\nHost: lockwatch\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1000\r\n\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answers_while_more_connections_than_the_limit_are_held() {
    let r = common::redis(&[]);
    let s = Served::start(config(
        &r,
        "max_connections = 64\nheader_timeout = \"60s\"\nbody_timeout = \"60s\"",
    ))
    .await;
    scrape_within_a_second(s.addr).await;
    // Kept-alive connections, then silent ones, heads that never end, bodies that never end:
    // 125 connections for 64 slots, all held open by the client.
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut k = TcpStream::connect(s.addr).await.unwrap();
        k.write_all(b"GET /healthz HTTP/1.1\r\nHost: lockwatch\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        assert!(k.read(&mut buf).await.unwrap() > 0);
        held.push(k);
    }
    for _ in 0..100 {
        held.push(TcpStream::connect(s.addr).await.unwrap());
    }
    for _ in 0..10 {
        let mut h = TcpStream::connect(s.addr).await.unwrap();
        h.write_all(b"GET /metrics HTTP/1.1\r\nHost: lock").await.unwrap();
        held.push(h);
    }
    let mut pushes = Vec::new();
    for _ in 0..10 {
        pushes.push(slow_push(s.addr).await);
    }
    for _ in 0..5 {
        for p in &mut pushes {
            p.write_all(b" ").await.unwrap();
        }
        let m = scrape_within_a_second(s.addr).await;
        assert!(m.val("lockwatch_http_connections", &[]) <= 64.0, "{}", m.0);
    }
    let m = scrape_within_a_second(s.addr).await;
    assert!(
        m.val("lockwatch_http_connections_closed_total", &[("reason", "evicted")]) >= 60.0,
        "{}",
        m.0
    );
    // Idle connections gave way; the pushes in progress did not.
    for (i, p) in pushes.iter_mut().enumerate() {
        assert!(!closed(p).await, "push {i} was cut while its body was arriving");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_slow_bodies_and_idle_connections_are_closed_after_their_time() {
    let r = common::redis(&[]);
    let s = Served::start(config(
        &r,
        "header_timeout = \"1s\"\nbody_timeout = \"1s\"\nidle_timeout = \"1500ms\"",
    ))
    .await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    let mut head = TcpStream::connect(s.addr).await.unwrap();
    let mut body = slow_push(s.addr).await;
    let mut kept = TcpStream::connect(s.addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: lockwatch\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    assert!(kept.read(&mut buf).await.unwrap() > 0);
    let answered = Instant::now();
    // The head and the body trickle in, a byte every 100 ms; each connection is watched.
    let mut ends: [Option<Duration>; 4] = [None; 4];
    let mut answer = Vec::new();
    while started.elapsed() < Duration::from_secs(4) && ends.iter().any(Option::is_none) {
        for (i, c) in [&mut silent, &mut head, &mut body, &mut kept].into_iter().enumerate() {
            if ends[i].is_some() {
                continue;
            }
            if i == 1 || i == 2 {
                let _ = c.write_all(b"x").await;
            }
            if i == 2 {
                let mut chunk = [0u8; 512];
                if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(5), c.read(&mut chunk)).await {
                    answer.extend_from_slice(&chunk[..n]);
                    if n == 0 {
                        ends[i] = Some(started.elapsed());
                    }
                }
            } else if closed(c).await {
                ends[i] = Some(if i == 3 { answered.elapsed() } else { started.elapsed() });
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let [silent_end, head_end, body_end, kept_end] = ends.map(|e| e.unwrap_or(Duration::MAX));
    for (what, end, limit) in [
        ("a silent connection", silent_end, 1_000),
        ("a head arriving byte by byte", head_end, 1_000),
        ("a body arriving byte by byte", body_end, 1_000),
        ("a kept-alive connection with no request", kept_end, 1_500),
    ] {
        let limit = Duration::from_millis(limit);
        assert!(
            end >= limit && end < limit + Duration::from_millis(800),
            "{what}: closed after {end:?}, configured {limit:?}"
        );
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.to_ascii_lowercase().contains("retry-after: 1")
            && answer.contains("server.body_timeout (1s)"),
        "{answer}"
    );
    // A request that arrives whole is answered as before.
    let m = scrape_within_a_second(s.addr).await;
    let closed_for = |reason| m.val("lockwatch_http_connections_closed_total", &[("reason", reason)]);
    assert_eq!(
        (closed_for("header_timeout"), closed_for("idle_timeout")),
        (2.0, 1.0),
        "{}",
        m.0
    );
    assert_eq!(closed_for("evicted"), 0.0);
    assert_eq!(
        m.val(
            "lockwatch_log_pushes_refused_total",
            &[("source", "push"), ("reason", "timeout")]
        ),
        1.0,
        "the late body counted as refused for its time: {}",
        m.0
    );
    s.stop().await;
}

/// CPU seconds (user + system) a process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_idle_connections_give_way_without_a_busy_loop() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = lockwatch::access::child::free_port().unwrap();
    let cfg = dir.path().join("lockwatch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\nmax_connections = 1000\nheader_timeout = \"60s\"\n\
             [[target]]\nname = \"main\"\nurl = \"{}\"\nnotifications = \"off\"\n",
            r.url()
        ),
    )
    .unwrap();
    // 100 file descriptors for lockwatch: far fewer than max_connections.
    let mut child = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -n 100 && exec {BIN} serve -c {}", cfg.display())])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let started = Instant::now();
    while TcpStream::connect(addr).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "lockwatch serve did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut held = Vec::new();
    for _ in 0..150 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    for _ in 0..3 {
        scrape_within_a_second(addr).await;
    }
    // Settled, with the client still holding its connections: the server waits, it does
    // not spin on failing accepts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = cpu_seconds(child.id());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_seconds(child.id()) - cpu;
    let m = scrape_within_a_second(addr).await;
    assert!(
        used < 0.5,
        "lockwatch used {used:.2} s of CPU in 2 s while its accepts failed"
    );
    assert!(m.val("lockwatch_http_accept_errors_total", &[]) > 0.0, "{}", m.0);
    assert!(m.val("lockwatch_http_connections_closed_total", &[("reason", "evicted")]) > 0.0);
    drop(held);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(status.success(), "{log}");
    assert!(log.contains("does not fit the file-descriptor limit"), "{log}");
    assert!(log.contains("accepting an HTTP connection failed"), "{log}");
}
