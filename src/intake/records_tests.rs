#![allow(clippy::unwrap_used)]
use super::*;

/// The records of `data` fed whole as `end` says: (text, lines, orphan) and the bytes consumed.
fn records(data: &str, end: End) -> (Vec<(String, u32, bool)>, usize) {
    let mut out = Vec::new();
    let used = RecordSplitter::new(Multiline::Auto).feed(data.as_bytes(), 80, end, |p| match p {
        Piece::Record {
            bytes, lines, orphan, ..
        } => out.push((String::from_utf8_lossy(bytes).into_owned(), lines, orphan)),
        Piece::TooLong(n) => out.push((format!("<{n}>"), 1, false)),
        Piece::Quiet { lines } => out.push((format!("<quiet {lines}>"), lines, false)),
    });
    (out, used)
}

fn texts(data: &str) -> Vec<String> {
    records(data, End::Eof).0.into_iter().map(|r| r.0).collect()
}

#[test]
fn python_tracebacks_and_their_chains_are_one_record() {
    let log = "E msg\nTraceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nredis.exceptions.LockNotOwnedError: no\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"b\"\nValueError: x\nI next\n";
    assert_eq!(
        texts(log),
        [
            "E msg\nTraceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nredis.exceptions.LockNotOwnedError: no\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"b\"\nValueError: x",
            "I next"
        ]
    );
}

#[test]
fn java_stack_traces_join_the_message_line_that_announced_them() {
    let log = "10:06 ERROR c.e.Job : unlock failed\njava.lang.IllegalMonitorStateException: attempt to unlock\n\tat a.B.c(B.java:1)\nCaused by: x.Y: z\n\t... 5 more\n10:07 INFO next\n";
    assert_eq!(
        texts(log),
        [
            "10:06 ERROR c.e.Job : unlock failed\njava.lang.IllegalMonitorStateException: attempt to unlock\n\tat a.B.c(B.java:1)\nCaused by: x.Y: z\n\t... 5 more",
            "10:07 INFO next"
        ]
    );
    // An exception printed after a line that is no error is a record of its own (Node's
    // console.error(err) after an unrelated line).
    let log = "lock acquired\nExecutionError: quorum\n    at Redlock._execute (x.js:1)\n    at y {\n  attempts: []\n}\nnext\n";
    assert_eq!(
        texts(log),
        [
            "lock acquired",
            "ExecutionError: quorum\n    at Redlock._execute (x.js:1)\n    at y {\n  attempts: []\n}",
            "next"
        ]
    );
}

#[test]
fn go_panics_and_goroutine_dumps_are_one_record() {
    let log = "panic: redsync: failed to extend lock\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:42 +0x1d\nexit status 2\n2026/11/21 10:00:00 restarted (pid 7)\n";
    assert_eq!(
        texts(log),
        [
            "panic: redsync: failed to extend lock\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:42 +0x1d\nexit status 2",
            "2026/11/21 10:00:00 restarted (pid 7)"
        ]
    );
}

#[test]
fn held_records_are_not_consumed_until_their_end_is_known() {
    // The last record may still grow: it is left for the next read.
    let (got, used) = records("a\nb\n  more\n", End::More);
    assert_eq!(got, [("a".to_string(), 1, false)]);
    assert_eq!(used, 2);
    // Quiet: it ends with the last complete line; an unfinished line still waits.
    let (got, used) = records("b\n  more\npart", End::Quiet);
    assert_eq!(got, [("b\n  more".to_string(), 2, false)]);
    assert_eq!(used, 9);
    // Lines continuing a record read before are an orphan record.
    let (got, _) = records("  at x\n}\nnext\n", End::Eof);
    assert_eq!(
        got,
        [("  at x\n}".to_string(), 2, true), ("next".to_string(), 1, false)]
    );
}

#[test]
fn records_are_bounded_and_long_lines_end_them() {
    let mut log = String::from("start\n");
    for _ in 0..MAX_RECORD_LINES + 5 {
        log.push_str(" x\n");
    }
    let got = records(&log, End::Eof).0;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, MAX_RECORD_LINES);
    assert!(got[1].2, "the rest is an orphan");
    let long = "y".repeat(100);
    let got = texts(&format!("a\n  b\n{long}\n  c\n"));
    assert_eq!(got, ["a\n  b", "<100>", "  c"]);
}

#[test]
fn blank_lines_join_the_record_before_them() {
    // Spring Boot writes a blank line between the message and the exception.
    let log = "10:06 ERROR Job : failed\n\njava.lang.IllegalStateException: x\n\tat a.B(B.java:1)\n\n10:07 INFO next\n\nlast\n";
    assert_eq!(
        texts(log),
        [
            "10:06 ERROR Job : failed\n\njava.lang.IllegalStateException: x\n\tat a.B(B.java:1)\n",
            "10:07 INFO next\n",
            "last"
        ]
    );
    assert_eq!(texts("\n\nfirst\n"), ["\n", "first"]);
}

#[test]
fn zap_and_monolog_stack_traces_are_one_record() {
    let zap = "10:00\tERROR\tw.go:88\tlock extend failed\nmain.(*w).renew\n\t/app/w.go:88\nmain.main\n\t/app/main.go:35\n10:01\tINFO\tnext\n";
    assert_eq!(
        texts(zap),
        [
            "10:00\tERROR\tw.go:88\tlock extend failed\nmain.(*w).renew\n\t/app/w.go:88\nmain.main\n\t/app/main.go:35",
            "10:01\tINFO\tnext"
        ]
    );
    let monolog = "[10:00] production.ERROR:  {\"exception\":\"[object] (X(code: 0): at /a.php:1)\n[stacktrace]\n#0 /a.php(3): f()\n#1 {main}\n\"} \n[10:01] production.INFO: next\n";
    assert_eq!(texts(monolog).len(), 2);
}

#[test]
fn off_makes_every_line_a_record() {
    let mut out = Vec::new();
    let used = RecordSplitter::new(Multiline::Off).feed(b"a\n  b\nc", 64, End::More, |p| {
        if let Piece::Record { bytes, orphan, .. } = p {
            out.push((String::from_utf8_lossy(bytes).into_owned(), orphan));
        }
    });
    assert_eq!(out, [("a".to_string(), false), ("  b".to_string(), false)]);
    assert_eq!(used, 6);
}

#[test]
fn a_json_object_line_is_complete_at_once() {
    // The last line of what has arrived: handed out now, with the line held before it.
    let (got, used) = records(
        "plain line\n{\"level\":\"error\",\"msg\":\"unlock failed\"}\n",
        End::More,
    );
    let got: Vec<&str> = got.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(got, ["plain line", "{\"level\":\"error\",\"msg\":\"unlock failed\"}"]);
    assert_eq!(used, 51);
    // Nothing joins it, whenever the next lines come: they begin records of their own.
    assert_eq!(
        texts("{\"msg\":\"a\"}\n\n  at x\njava.lang.X: y\n\tat a.B(B.java:1)\n"),
        ["{\"msg\":\"a\"}", "", "  at x", "java.lang.X: y\n\tat a.B(B.java:1)"]
    );
    // A line that only opens an object (pretty-printed JSON) waits as before.
    let (got, used) = records("{\n", End::More);
    assert!(got.is_empty());
    assert_eq!(used, 0);
}

#[test]
fn a_go_function_line_is_read_up_to_its_first_parenthesis_or_space() {
    // The reading it replaced: the text before the first `(`, non-empty and without space.
    let before_paren = |line: &[u8]| {
        let head = &line[..memchr::memchr(b'(', line).unwrap_or(line.len())];
        !head.is_empty() && !head.iter().any(u8::is_ascii_whitespace)
    };
    let long = [b'x'; 40];
    let parts: [&[u8]; 12] = [
        b"main.(*T).Run",
        b"(",
        b")",
        b" ",
        b"\t",
        b"pkg.Func",
        b"0x1f",
        b"\x0b",
        b"\x0c",
        b"\r",
        b"\n",
        &long,
    ];
    let mut rng = crate::intake::test_rng::Xorshift(0x1234_5678_9abc_def1);
    for _ in 0..20_000 {
        let mut line = Vec::new();
        for _ in 0..rng.below(7) {
            line.extend_from_slice(parts[rng.below(parts.len())]);
        }
        assert_eq!(
            is_go_line(&line),
            before_paren(&line),
            "{:?}",
            String::from_utf8_lossy(&line)
        );
    }
    assert!(is_go_line(b"main.main()") && is_go_line(b"go.uber.org/zap.Sugar") && !is_go_line(b"(x)"));
}

#[test]
fn a_skimmed_chunk_hands_on_every_piece_in_order_past_a_batch() {
    // Marked lines, tracebacks and quiet runs, enough for several batches, with an
    // unfinished record at the end that `End::More` keeps back.
    let mut log = String::new();
    for i in 0..400 {
        log.push_str(&format!("INFO step {i}\nINFO more {i}\nWARN lock {i} not owned\n"));
        if i % 7 == 0 {
            log.push_str("Traceback (most recent call last):\n  File \"a.py\"\nValueError: lock\n");
        }
    }
    log.push_str("ERROR lock lost\n  at the end");
    let skim = crate::intake::skim::Skim::new(&["lock"]).unwrap();
    for end in [End::More, End::Eof] {
        let (mut batched, mut one_by_one) = (Vec::new(), Vec::new());
        let used = RecordSplitter::new(Multiline::Auto)
            .feed_skimming(log.as_bytes(), 80, end, Some(&skim), |p| batched.push(format!("{p:?}")));
        let alone = RecordSplitter::new(Multiline::Auto).split(log.as_bytes(), 80, end, Some(&skim), |p| {
            one_by_one.push(format!("{p:?}"))
        });
        assert!(batched.len() > 2 * BATCH, "{} pieces", batched.len());
        assert_eq!((batched, used), (one_by_one, alone), "{end:?}");
    }
}
