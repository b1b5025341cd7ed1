//! A rotated file written over with a copy of the live file's lines, at every moment a poll
//! can see it: each line counted once.
#![allow(clippy::unwrap_used)]
use std::path::Path;
use std::sync::Arc;

use super::super::{Tailer, file::FileId};
use crate::config::Config;
use crate::intake::records::End;
use crate::intake::{Classifier, IntakeMetrics};

fn tailer(dir: &Path) -> Tailer {
    tailer_of(dir, "app.log", "")
}

/// A tailer of `glob` in `dir`, `extra` keys of its source.
fn tailer_of(dir: &Path, glob: &str, extra: &str) -> Tailer {
    let text = format!(
        "[[target]]\nname = \"m\"\nurl = \"redis://127.0.0.1:1/0\"\n\
         [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n\
         [[logs]]\nname = \"app\"\npath = \"{}/{glob}\"\nstart_at = \"beginning\"\nmultiline = \"off\"\n{extra}",
        dir.display()
    );
    let config = Config::from_toml(&text, "t.toml", dir, &Default::default()).unwrap();
    let metrics = IntakeMetrics::register(&crate::metrics::Registry::new().unwrap(), &config).unwrap();
    let classifier = Arc::new(Classifier::new(&config).unwrap());
    Tailer::new(&config.logs[0], classifier, &metrics, &["wf".to_string()], None, true)
}

fn append(path: &Path, from: u64, to: u64) {
    use std::io::Write;
    let text: String = (from..to)
        .map(|i| format!("ts=1.0 level=error msg=\"lock not owned\" key=wf:lock:{i}\n"))
        .collect();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn polled(t: &mut Tailer) -> u64 {
    for _ in 0..4 {
        t.poll();
    }
    t.totals.lines
}

fn index(t: &Tailer, path: &Path) -> usize {
    let meta = std::fs::metadata(path).unwrap();
    let id = FileId::of(&meta);
    t.files.iter().position(|f| f.id == id).unwrap()
}

/// The rotated file `app.log.1` followed, the live `app.log` read to line `upto`.
fn rotated(dir: &Path, upto: u64) -> Tailer {
    let (live, old) = (dir.join("app.log"), dir.join("app.log.1"));
    append(&live, 0, 10);
    let mut t = tailer(dir);
    assert_eq!(polled(&mut t), 10);
    std::fs::rename(&live, &old).unwrap();
    append(&live, 10, upto);
    assert_eq!(polled(&mut t), upto);
    assert!(t.files[index(&t, &old)].rotated.is_some());
    t
}

#[test]
fn copied_over_and_truncated_between_two_polls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = rotated(d, 50);
    append(&d.join("app.log"), 50, 80); // not read before the copy
    std::fs::copy(d.join("app.log"), d.join("app.log.1")).unwrap();
    std::fs::write(d.join("app.log"), "").unwrap();
    append(&d.join("app.log"), 80, 90);
    assert_eq!(polled(&mut t), 90);
}

#[test]
fn copied_over_while_the_live_file_goes_on_then_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = rotated(d, 50);
    append(&d.join("app.log"), 50, 80);
    std::fs::copy(d.join("app.log"), d.join("app.log.1")).unwrap();
    append(&d.join("app.log"), 80, 85);
    assert_eq!(
        polled(&mut t),
        85,
        "a copy not truncated after: its lines are the live file's"
    );
    append(&d.join("app.log"), 85, 95); // after the copy: in the live file alone
    std::fs::write(d.join("app.log"), "").unwrap();
    append(&d.join("app.log"), 95, 100);
    assert_eq!(
        polled(&mut t),
        100 - 10,
        "the 10 lines after the copy, truncated unread, are lost"
    );
}

#[test]
fn copied_over_and_truncated_between_the_reads_of_one_poll() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = rotated(d, 50);
    append(&d.join("app.log"), 50, 80);
    // The rotated file is read first (unchanged), then `cp` and the truncation, then the
    // live file is read: found truncated, its copy the rotated file not read since.
    let old = index(&t, &d.join("app.log.1"));
    t.read(old, End::More).unwrap();
    std::fs::copy(d.join("app.log"), d.join("app.log.1")).unwrap();
    std::fs::write(d.join("app.log"), "").unwrap();
    append(&d.join("app.log"), 80, 90);
    let live = index(&t, &d.join("app.log"));
    t.read(live, End::More).unwrap();
    t.adopt_copies();
    assert_eq!(polled(&mut t), 90);
}

#[test]
fn a_rotated_file_truncated_and_written_anew_is_read_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = rotated(d, 50);
    std::fs::write(d.join("app.log.1"), "").unwrap();
    assert_eq!(polled(&mut t), 50, "empty: judged once it holds something");
    append(&d.join("app.log.1"), 1000, 1007);
    append(&d.join("app.log"), 50, 60);
    assert_eq!(polled(&mut t), 67);
}

#[test]
fn a_copy_seen_empty_then_landing_shorter_than_what_was_read_is_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = rotated(d, 50);
    // `cp`'s truncation seen, its bytes not yet; the live file read on past what it copies.
    std::fs::write(d.join("app.log.1"), "").unwrap();
    let copied = std::fs::read(d.join("app.log")).unwrap();
    append(&d.join("app.log"), 50, 60);
    assert_eq!(polled(&mut t), 60);
    // The copy lands (lines 10 to 50, all read), the live file is truncated.
    std::fs::write(d.join("app.log.1"), &copied).unwrap();
    std::fs::write(d.join("app.log"), "").unwrap();
    append(&d.join("app.log"), 60, 70);
    assert_eq!(polled(&mut t), 70);
}

#[test]
fn a_file_restarted_with_only_another_files_banner_is_read_once_it_has_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let banner = format!("# payout-worker 4.2.1 {}\n", "=".repeat(1200));
    std::fs::write(d.join("a.log"), &banner).unwrap();
    append(&d.join("a.log"), 0, 20);
    std::fs::write(d.join("b.log"), &banner).unwrap();
    append(&d.join("b.log"), 100, 110);
    let mut t = tailer_of(d, "*.log", "");
    let mut lines = 2 + 30;
    assert_eq!(polled(&mut t), lines);
    // b restarts: its banner alone, like a's start; then its own lines.
    std::fs::write(d.join("b.log"), &banner).unwrap();
    lines += 1;
    assert_eq!(polled(&mut t), lines - 1, "the banner waits: a copy under way, or new");
    append(&d.join("b.log"), 200, 230);
    lines += 30;
    assert_eq!(polled(&mut t), lines);
    // Again, and a is truncated while b holds only the banner: judged a copy of what a
    // held, until its own lines come.
    std::fs::write(d.join("b.log"), &banner).unwrap();
    std::fs::write(d.join("a.log"), "").unwrap();
    append(&d.join("a.log"), 20, 25);
    lines += 5;
    assert_eq!(polled(&mut t), lines);
    append(&d.join("b.log"), 300, 340);
    lines += 40;
    assert_eq!(polled(&mut t), lines);
}

#[test]
fn a_rotated_file_truncated_to_empty_is_still_closed_after_its_grace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    append(&d.join("app.log"), 0, 10);
    let mut t = tailer_of(d, "app.log", "rotated_grace = \"1s\"\n");
    assert_eq!(polled(&mut t), 10);
    std::fs::rename(d.join("app.log"), d.join("app.log.1")).unwrap();
    append(&d.join("app.log"), 10, 20);
    assert_eq!(polled(&mut t), 20);
    std::fs::write(d.join("app.log.1"), "").unwrap();
    polled(&mut t);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(polled(&mut t), 20);
    assert_eq!(t.files.len(), 1, "the empty rotated file is closed");
}
