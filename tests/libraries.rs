//! The phrasebook against real lock libraries: every fixture under
//! `tests/fixtures/libraries/` (captured from libraries run against redis-server, or
//! composed from the sources of those that cannot run here) is read into records and
//! classified, and each record must be exactly what its `.expected` table says — its first
//! and last line, namespace, op and outcome — while every record the table does not list
//! is no event. Read whole and in small chunks, as a tailed file is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use lockwatch::config::{Config, LogFormat, Multiline, Overrides};
use lockwatch::intake::records::{End, Piece, RecordSplitter};
use lockwatch::intake::{Classifier, MAX_LINE, Verdict};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/libraries");

fn classifier() -> Classifier {
    let text = std::fs::read_to_string(Path::new(DIR).join("lockwatch.toml")).unwrap();
    Classifier::new(&Config::from_toml(&text, "lockwatch.toml", Path::new(DIR), &Overrides::default()).unwrap())
        .unwrap()
}

/// One classified record: first and last line, and "namespace op outcome" or "ignored".
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    first: usize,
    last: usize,
    what: String,
}

fn described(c: &Classifier, v: &Verdict) -> String {
    match v {
        Verdict::Event {
            namespace, op, outcome, ..
        } => format!("{} {op} {outcome}", c.namespace_name(*namespace)),
        Verdict::Ignored(_) => "ignored".into(),
        Verdict::Malformed(_) => "malformed".into(),
    }
}

/// The records of `log`, fed `chunk` bytes at a time the way the tailer feeds a file that
/// grows: what is not consumed is fed again with the next bytes.
fn records(c: &Classifier, log: &[u8], chunk: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut splitter = RecordSplitter::new(Multiline::Auto);
    let (mut start, mut line) = (0, 1);
    let mut upto = 0;
    loop {
        upto = (upto + chunk).min(log.len());
        let end = if upto == log.len() { End::Eof } else { End::More };
        let used = splitter.feed(&log[start..upto], MAX_LINE, end, |p: Piece<'_>| {
            let n = p.lines() as usize;
            rows.push(Row {
                first: line,
                last: line + n - 1,
                what: described(c, &c.classify_piece(&p, LogFormat::Auto)),
            });
            line += n;
        });
        start += used;
        if end == End::Eof {
            return rows;
        }
    }
}

/// The fixtures: (name, log path, expected rows, whether composed from sources).
fn fixtures() -> Vec<(String, PathBuf, Vec<Row>, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(DIR).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("expected") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let composed = text.starts_with("# composed from sources");
        assert!(
            composed || text.starts_with("# captured by scripts/library-fixtures.sh"),
            "{}: the first line says where the fixture comes from",
            path.display()
        );
        let rows = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert!(f.len() >= 5, "{}: {l}", path.display());
                let what = if f[4] == "ignored" {
                    "ignored".to_string()
                } else {
                    format!("{} {} {}", f[2], f[3], f[4])
                };
                Row {
                    first: f[0].parse().unwrap(),
                    last: f[1].parse().unwrap(),
                    what,
                }
            })
            .collect();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        out.push((name, path.with_extension("log"), rows, composed));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_library_record_is_classified_exactly_once_as_expected() {
    let c = classifier();
    let fixtures = fixtures();
    let (captured, composed) = fixtures
        .iter()
        .fold((0, 0), |(a, b), f| if f.3 { (a, b + 1) } else { (a + 1, b) });
    assert!(
        captured >= 7 && composed >= 10,
        "{captured} captured, {composed} composed"
    );
    let mut events = 0;
    for (name, log, expected, _) in &fixtures {
        let log = std::fs::read(log).unwrap();
        let whole = records(&c, &log, log.len().max(1));
        for want in expected {
            let got = whole.iter().find(|r| r.first == want.first);
            assert_eq!(
                got,
                Some(want),
                "{name}: the record at line {}\nall: {whole:#?}",
                want.first
            );
        }
        for r in &whole {
            if !expected.iter().any(|e| e.first == r.first) {
                assert_eq!(
                    r.what, "ignored",
                    "{name}: a record the table does not list is an event: {r:?}"
                );
            }
        }
        // Each lost lock on renew and release and each refused acquire is there, once.
        let kinds: Vec<&str> = expected
            .iter()
            .filter(|e| e.what != "ignored")
            .map(|e| e.what.as_str())
            .collect();
        assert!(expected.iter().any(|e| e.what == "ignored"), "{name}: no success line");
        assert!(
            kinds.iter().any(|k| k.contains(" acquire ")),
            "{name}: no acquire failure"
        );
        events += kinds.len();
        // Fed in small pieces, the records and verdicts are the same.
        for chunk in [1, 7, 64, 333] {
            assert_eq!(records(&c, &log, chunk), whole, "{name}: read {chunk} bytes at a time");
        }
    }
    assert!(events >= 50, "{events} events");
}

#[test]
fn the_docs_list_every_library() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/log-intake.md")).unwrap();
    let notes = std::fs::read_to_string(Path::new(DIR).join("README.md")).unwrap();
    for (name, ..) in fixtures() {
        let file = format!("`{name}.log`");
        assert!(readme.contains(&file), "docs/log-intake.md does not list {file}");
        assert!(
            notes.contains(&file),
            "tests/fixtures/libraries/README.md does not list {file}"
        );
    }
}
