//! The tailed file: reading on from an offset, truncations and rewrites told, copies told
//! from new lines.
#![allow(clippy::unwrap_used)]
use std::io::Write;

use super::*;

fn lines(t: &mut Tracked, eof: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let end = if eof { End::Eof } else { End::Quiet };
    t.read(&mut buf, u64::MAX, end, None, |p| {
        if let Piece::Record { bytes, .. } = p {
            out.push(String::from_utf8_lossy(bytes).into_owned());
        }
    })
    .unwrap();
    out
}

fn off() -> RecordSplitter {
    RecordSplitter::new(crate::config::Multiline::Off)
}

#[test]
fn start_at_end_skips_to_the_last_newline_and_partial_lines_wait() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    let mut f = File::create(&p).unwrap();
    f.write_all(b"old 1\nold 2\nhalf").unwrap();
    let mut t = Tracked::open(&p, None, off()).unwrap();
    assert_eq!(t.offset, 12);
    assert_eq!(lines(&mut t, false), Vec::<String>::new());
    f.write_all(b" done\nnew\npart").unwrap();
    assert_eq!(lines(&mut t, false), vec!["half done", "new"]);
    f.write_all(b"ial").unwrap();
    assert_eq!(lines(&mut t, true), vec!["partial"]);
}

#[test]
fn a_file_truncated_between_its_size_and_the_read_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    std::fs::write(&p, "0123456789").unwrap();
    let f = File::open(&p).unwrap();
    // Sizes asked before logrotate truncated the file to 10 bytes.
    assert_eq!(Fingerprint::read(&f, 5000).unwrap().len, 10);
    let fp = Fingerprint { len: 20, crc: 7 };
    assert!(!fp.matches(&f, 5000).unwrap());
    assert!(!matches_before(&fp, &f, 4000, 5000).unwrap());
    assert_eq!(before(&f, 4000).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    // A fingerprint is extended only over the bytes it was taken of.
    let head = Fingerprint::read(&f, 4).unwrap();
    assert_eq!(head.extended(&f, 10).unwrap(), Fingerprint::read(&f, 10).unwrap());
    std::fs::write(&p, "abcdefghijkl").unwrap();
    assert_eq!(head.extended(&f, 12).unwrap(), head);
}

/// Read; a restart ends the read, as the tailer then judges the file: say why, read on.
fn restarted(t: &mut Tracked) -> (Option<&'static str>, Vec<String>) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::new();
    let r = t
        .read(&mut buf, u64::MAX, End::Quiet, None, |p| {
            if let Piece::Record { bytes, .. } = p {
                out.push(String::from_utf8_lossy(bytes).into_owned());
            }
        })
        .unwrap();
    assert!(t.unsettled || r.restarted.is_none());
    t.unsettled = false;
    out.extend(lines(t, false));
    (r.restarted, out)
}

#[test]
fn truncation_and_rewrites_start_again_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    std::fs::write(&p, "one\ntwo\n").unwrap();
    let mut t = Tracked::open(&p, Some(0), off()).unwrap();
    assert_eq!(lines(&mut t, false), vec!["one", "two"]);
    std::fs::write(&p, "x\n").unwrap(); // shorter: truncated
    assert_eq!(restarted(&mut t), (Some("truncated"), vec!["x".to_string()]));
    std::fs::write(&p, "different\nand longer\n").unwrap(); // longer, other first bytes
    assert_eq!(
        restarted(&mut t),
        (
            Some("rewritten (its first bytes changed)"),
            vec!["different".to_string(), "and longer".to_string()]
        )
    );
}

#[test]
fn a_rewrite_past_the_offset_with_the_same_first_bytes_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    let banner = format!("{}\n", "=".repeat(1500)); // longer than the fingerprint
    std::fs::write(&p, format!("{banner}old 1\nold 2\n")).unwrap();
    let mut t = Tracked::open(&p, Some(0), off()).unwrap();
    assert_eq!(lines(&mut t, false).len(), 3);
    // Truncated and written again, past the offset, between two reads.
    std::fs::write(&p, format!("{banner}new 1\nnew 2\nnew 3\n")).unwrap();
    let (why, read) = restarted(&mut t);
    assert_eq!(why, Some("rewritten (the bytes before its offset changed)"));
    assert_eq!(read[1..], ["new 1", "new 2", "new 3"]);
    // Appended with the same bytes before the offset: read on, no restart.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"new 4\n")
        .unwrap();
    assert_eq!(restarted(&mut t), (None, vec!["new 4".to_string()]));
    // Chunks of a read past the buffer each check the bytes before them.
    let long: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&p, &long).unwrap();
    let (why, read) = restarted(&mut t);
    assert_eq!((why.is_some(), read.len()), (true, 40_000));
}

#[test]
fn a_copy_of_another_file_is_told_from_new_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (live, rotated) = (dir.path().join("app.log"), dir.path().join("app.log.1"));
    let lines_of = |from: u32, to: u32| -> String { (from..to).map(|i| format!("ts={i} lock not owned\n")).collect() };
    std::fs::write(&live, lines_of(0, 100)).unwrap();
    std::fs::write(&rotated, lines_of(500, 600)).unwrap();
    let mut l = Tracked::open(&live, Some(0), off()).unwrap();
    let mut r = Tracked::open(&rotated, Some(0), off()).unwrap();
    lines(&mut l, false);
    lines(&mut r, false);
    // Copied over in place: holds what the live file was read to.
    std::fs::copy(&live, &rotated).unwrap();
    assert!(r.holds(&l.held()).unwrap());
    // Shorter than what was read (a copy under way): the same first and last bytes.
    std::fs::write(&rotated, &lines_of(0, 100)[..1500]).unwrap();
    assert!(!r.holds(&l.held()).unwrap());
    assert!(r.same_bytes_as(&l).unwrap());
    // New lines are neither, nor is a file of the same first bytes and other lines.
    std::fs::write(&rotated, lines_of(700, 800)).unwrap();
    assert!(!r.holds(&l.held()).unwrap() && !r.same_bytes_as(&l).unwrap());
    std::fs::write(&rotated, format!("{}{}", lines_of(0, 50), lines_of(900, 1000))).unwrap();
    assert!(!r.holds(&l.held()).unwrap() && !r.same_bytes_as(&l).unwrap());
    // What a file found truncated held; its copy marked, then read from its offset.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&live)
        .unwrap()
        .write_all(lines_of(100, 110).as_bytes())
        .unwrap();
    let held = l.held();
    std::fs::write(&rotated, lines_of(0, 110)).unwrap();
    std::fs::write(&live, "").unwrap();
    assert!(r.holds(&held).unwrap());
    r.set_copied().unwrap();
    assert_eq!(lines(&mut r, false), Vec::<String>::new());
    r.resume_copy(&held);
    let want: Vec<String> = (100..110).map(|i| format!("ts={i} lock not owned")).collect();
    assert_eq!(lines(&mut r, false), want);
}
