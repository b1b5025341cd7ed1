//! Classification of real-world log shapes: every line of the sample fixtures as
//! `expected.tsv` says, bad input counted and never a panic, namespace labels bounded,
//! and `lockwatch classify` (the binary) on a file and on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use lockwatch::config::{Config, LogFormat, Overrides};
use lockwatch::intake::lines::{Line, Lines};
use lockwatch::intake::{Classifier, Verdict};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn config(extra: &str) -> Config {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join("lockwatch.toml")).unwrap() + extra;
    Config::from_toml(&text, "lockwatch.toml", Path::new(FIXTURES), &Overrides::default()).unwrap()
}

/// (namespace, op, outcome) as the TSV writes them.
fn described(c: &Classifier, v: &Verdict) -> (String, String, String) {
    match v {
        Verdict::Event {
            namespace, op, outcome, ..
        } => (
            c.namespace_name(*namespace).to_string(),
            op.as_str().to_string(),
            outcome.as_str().to_string(),
        ),
        Verdict::Ignored(_) => ("-".into(), "-".into(), "ignored".into()),
        Verdict::Malformed(_) => ("-".into(), "-".into(), "malformed".into()),
    }
}

#[test]
fn every_sample_line_classifies_as_expected() {
    let c = Classifier::new(&config("")).unwrap();
    let dir = Path::new(FIXTURES).join("samples");
    let expected = std::fs::read_to_string(dir.join("expected.tsv")).unwrap();
    let mut checked = 0;
    for row in expected.lines().skip(1) {
        let f: Vec<&str> = row.split('\t').collect();
        let (file, line_no) = (f[0], f[1].parse::<usize>().unwrap());
        let text = std::fs::read_to_string(dir.join("logs").join(file)).unwrap();
        let line = text.lines().nth(line_no - 1).unwrap();
        let v = c.classify(line.as_bytes(), LogFormat::Auto);
        let got = described(&c, &v);
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str()),
            (f[2], f[3], f[4]),
            "{file}:{line_no}: {line}\n{v:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 21);
    // The truncated slog object is text in auto format, malformed when JSON is forced.
    let slog = std::fs::read_to_string(dir.join("logs/go-slog.log")).unwrap();
    let cut = slog.lines().nth(7).unwrap();
    assert_eq!(
        c.classify(cut.as_bytes(), LogFormat::Json),
        Verdict::Malformed("not a JSON object")
    );
}

#[test]
fn common_library_shapes() {
    let c = Classifier::new(&config("")).unwrap();
    let cases = [
        // go-redsync
        (
            r#"level=error msg="redsync: failed to unlock, lock was already expired" key=payout:batch:lock:1"#,
            "payout release not_owned",
        ),
        (
            r#"{"level":"warn","msg":"redsync: lock already taken, locked nodes: [0]","key":"cordum:approval:lock:9"}"#,
            "approval acquire busy",
        ),
        // bsm/redislock
        (
            "E1121 payout lock refresh: redislock: lock not held",
            "payout renew not_owned",
        ),
        (
            "W1121 redislock: not obtained (run lock cordum:wf:run:lock:7)",
            "workflow acquire busy",
        ),
        // a fenced write refused
        (
            r#"{"msg":"stale fencing token rejected on write","key":"payout:batch:lock:3","error":"stale fence 41 < 42"}"#,
            "payout write stale_fence",
        ),
        // lines about other kinds of locks, or no failure
        ("INFO run lock acquired run=7", "ignored"),
        (r#"{"msg":"account locked","user":"u1"}"#, "ignored"),
        ("mutexes are fine", "ignored"),
    ];
    for (line, want) in cases {
        let v = c.classify(line.as_bytes(), LogFormat::Auto);
        let (ns, op, outcome) = described(&c, &v);
        let got = if outcome == "ignored" {
            outcome
        } else {
            format!("{ns} {op} {outcome}")
        };
        assert_eq!(got, want, "{line}\n{v:?}");
    }
}

#[test]
fn configured_rules_come_first_and_name_their_namespace() {
    let c = Classifier::new(&config(
        "\n[[rule]]\nmatch = \"(?i)payout lock .* stolen\"\nop = \"renew\"\noutcome = \"not_owned\"\nnamespace = \"approval\"\n",
    ))
    .unwrap();
    let v = c.classify(b"payout lock 7 was stolen by node-2", LogFormat::Auto);
    assert!(matches!(&v, Verdict::Event { by, .. } if by == "rule[0]"), "{v:?}");
    assert_eq!(
        described(&c, &v),
        ("approval".into(), "renew".into(), "not_owned".into())
    );
}

#[test]
fn bad_input_is_counted_never_a_panic_and_namespaces_stay_bounded() {
    let c = Classifier::new(&config("")).unwrap();
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for chunk in garbage.chunks(97) {
        let _ = c.classify(chunk, LogFormat::Auto);
        let _ = c.classify(chunk, LogFormat::Json);
        let _ = c.classify(chunk, LogFormat::Logfmt);
    }
    assert_eq!(
        c.classify(b"lock \xff\xfe not owned", LogFormat::Auto),
        Verdict::Malformed("invalid UTF-8")
    );
    assert_eq!(
        c.classify(b"lock\0not owned", LogFormat::Auto),
        Verdict::Malformed("binary data (NUL bytes)")
    );
    assert_eq!(
        c.classify(
            br#"{"msg":"run lock renewal failed","error":"lock not ow"#,
            LogFormat::Json
        ),
        Verdict::Malformed("not a JSON object")
    );
    // A 10 MB line is skipped whole, and the next line is read as usual.
    let mut big = vec![b'x'; 10 * 1024 * 1024];
    big.extend_from_slice(b"\nnext\n");
    let mut lines = Lines::new(std::io::BufReader::new(&big[..]), lockwatch::intake::MAX_LINE);
    assert_eq!(lines.next_line().unwrap(), Some(Line::TooLong(10 * 1024 * 1024)));
    assert_eq!(lines.next_line().unwrap(), Some(Line::Text(b"next")));
    // Whatever namespace a line claims, only configured names (or unknown) come out.
    let mut names = std::collections::BTreeSet::new();
    for i in 0..10_000 {
        let line = format!(r#"{{"msg":"lock release failed","error":"lock not owned","namespace":"tenant-{i}"}}"#);
        if let Verdict::Event { namespace, .. } = c.classify(line.as_bytes(), LogFormat::Auto) {
            names.insert(c.namespace_name(namespace).to_string());
        }
    }
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["unknown"]);
}

#[test]
fn the_classify_command_on_a_file_and_on_stdin() {
    let cfg = Path::new(FIXTURES).join("lockwatch.toml");
    let log = Path::new(FIXTURES).join("samples/logs/python.log");
    let out = Command::new(BIN)
        .args(["classify", "-c", cfg.to_str().unwrap(), log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("2\t2\tpayout\trelease\tnot_owned\tbuilt-in: \"locknotownederror\""),
        "{stdout}"
    );
    assert!(stdout.contains("1\t1\t-\t-\tignored\tno lock word"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("4 lines, 4 records: 3 lock events, 1 ignored, 0 malformed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = Command::new(BIN)
        .args(["classify", "-c", cfg.to_str().unwrap(), "--as", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"msg\":\"approval lock busy\"}\nnot json at all\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        "1\t1\tapproval\tacquire\tbusy\tbuilt-in: \"busy\"\n2\t2\t-\t-\tmalformed\tnot a JSON object\n"
    );
    let out = Command::new(BIN)
        .args(["classify", "-c", cfg.to_str().unwrap(), "--as", "yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_classify_command_shows_each_records_first_and_last_line() {
    let cfg = Path::new(FIXTURES).join("libraries/lockwatch.toml");
    let log = Path::new(FIXTURES).join("libraries/redis-py.log");
    let run = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["classify", "-c", cfg.to_str().unwrap(), log.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let events: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("\t-\t-\t"))
            .map(|l| l.split('\t').take(5).collect::<Vec<_>>().join(" "))
            .collect();
        (events, String::from_utf8(out.stderr).unwrap())
    };
    let (events, stderr) = run(&[]);
    assert_eq!(
        events,
        [
            "2 11 payout renew not_owned",
            "12 20 payout release not_owned",
            "21 21 unknown release not_owned",
            "22 28 payout acquire busy"
        ]
    );
    assert!(
        stderr.contains("28 lines, 5 records: 4 lock events, 1 ignored, 0 malformed"),
        "{stderr}"
    );
    // Line by line, the same four failures are seven events, most in the wrong bucket: the
    // traceback's `raise` line and its exception line count again, without the message.
    let (events, _) = run(&["--multiline", "off"]);
    assert_eq!(
        events,
        [
            "2 2 payout renew error",
            "10 10 unknown release not_owned",
            "11 11 unknown renew not_owned",
            "19 19 unknown release not_owned",
            "20 20 unknown release not_owned",
            "21 21 unknown release not_owned",
            "28 28 unknown acquire busy"
        ]
    );
}
