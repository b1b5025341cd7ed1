//! The event intake end to end, in-process: `[[logs]]` files through rotation, truncation
//! and re-creation; split lines; the bound on rotated files followed; bad input and label
//! bounds; and `POST /api/v1/events`.
//! Counts are exact wherever the contract promises exactness. Restarts, crashes and stdin,
//! which need `lockwatch serve` as a process, are in `restarts.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::Served;
use common::logs::{NAMESPACES, WAIT, append, event, lines_of, not_owned, ordinary};

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
    // Rotated files are followed 2 s after their last write here (5 minutes by default).
    let s = Served::start(logs_config(&r, &dir.path().join("*.log"), "rotated_grace = \"2s\"\n")).await;
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

    // copytruncate: the copy does not match the glob; the original starts again at 0 (every
    // line of the copy was read already).
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
async fn rotated_files_followed_at_once_are_bounded_the_idle_closed_first() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("old")).unwrap();
    for i in 0..70 {
        append(&dir.path().join(format!("app{i}.log")), &event(i));
    }
    let s = Served::start(logs_config(&r, &dir.path().join("*.log"), "")).await;
    expect_lines(&s, "every file", (70.0, 0.0, 0.0)).await;
    // 62 rotated away (5 minutes' grace each); two of them written again; then 8 more
    // rotated: 70, and 64 are followed at most.
    let mut written: Vec<File> = (60..62)
        .map(|i| {
            OpenOptions::new()
                .append(true)
                .open(dir.path().join(format!("app{i}.log")))
                .unwrap()
        })
        .collect();
    let rotate = |range: std::ops::Range<usize>| {
        for i in range {
            let to = dir.path().join(format!("old/app{i}.log.1"));
            std::fs::rename(dir.path().join(format!("app{i}.log")), to).unwrap();
        }
    };
    rotate(0..62);
    tokio::time::sleep(Duration::from_millis(600)).await;
    for (f, i) in written.iter_mut().zip(100..) {
        f.write_all(event(i).as_bytes()).unwrap();
    }
    expect_lines(&s, "the late lines", (72.0, 0.0, 0.0)).await;
    rotate(62..70);
    // The 6 idle the longest (rotated first, not written since) are closed; the two
    // written ones are still followed.
    s.wait_for(WAIT, "64 followed", |m| {
        m.val("lockwatch_log_files", &[("source", "app")]) == 64.0
    })
    .await;
    for (f, i) in written.iter_mut().zip(200..) {
        f.write_all(event(i).as_bytes()).unwrap();
    }
    expect_lines(&s, "later still", (74.0, 0.0, 0.0)).await;
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
