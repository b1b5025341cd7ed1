//! Skimming changes no count: every corpus the intake's tests use, and a generated mix of
//! every record shape (tracebacks whose lock word is in a frame, Go dumps, held lines an
//! exception joins, JSON, CRLF, blank lines, invalid UTF-8, NUL, over-long lines), fed
//! whole and in pieces of many sizes, gives the same line counts and events, skimmed or not.
#![allow(clippy::unwrap_used)]
use std::path::Path;

use crate::config::{Config, LogFormat, Multiline, Overrides};
use crate::intake::records::{End, RecordSplitter};
use crate::intake::{Classifier, MAX_LINE, Tally};

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn classifier() -> Classifier {
    let dir = fixtures();
    let text = std::fs::read_to_string(dir.join("lockwatch.toml")).unwrap();
    Classifier::new(&Config::from_toml(&text, "lockwatch.toml", &dir, &Overrides::default()).unwrap()).unwrap()
}

/// What a tally counted: lines by result, events by kind.
type Counted = (
    [u64; 3],
    Vec<(Option<usize>, crate::vocab::Op, crate::vocab::Outcome, u64)>,
);

/// Feed `data` in pieces of `chunk` bytes (what is not consumed fed again with the next),
/// as stdin is read, as `format`: skimmed and counted as the intake counts, or every
/// record classified in full (`classify_piece`, as `classify` shows each).
fn counted(c: &Classifier, data: &[u8], chunk: usize, multiline: Multiline, format: LogFormat, skim: bool) -> Counted {
    let mut tally = Tally::new(c.namespace_count());
    let mut splitter = RecordSplitter::new(multiline);
    let skim_by = if skim { c.skim(format) } else { None };
    let mut buf: Vec<u8> = Vec::new();
    let mut pieces = data.chunks(chunk.max(1)).peekable();
    loop {
        let end = match pieces.next() {
            Some(p) => {
                buf.extend_from_slice(p);
                if pieces.peek().is_some() { End::More } else { End::Quiet }
            }
            None => End::Eof,
        };
        let used = splitter.feed_skimming(&buf, MAX_LINE, end, skim_by, |p| match skim {
            true => tally.piece(c, &p, format),
            false => tally.record(&c.classify_piece(&p, format), u64::from(p.lines())),
        });
        buf.drain(..used);
        if end == End::Eof {
            break;
        }
    }
    (tally.lines, tally.events().collect())
}

fn same_skimmed_or_not(c: &Classifier, name: &str, data: &[u8], chunks: &[usize]) -> Counted {
    let whole = counted(c, data, data.len(), Multiline::Auto, LogFormat::Auto, false);
    for &chunk in chunks {
        for multiline in [Multiline::Auto, Multiline::Off] {
            for format in [LogFormat::Auto, LogFormat::Text, LogFormat::Logfmt] {
                let want = counted(c, data, chunk, multiline, format, false);
                assert_eq!(
                    counted(c, data, chunk, multiline, format, true),
                    want,
                    "{name}: pieces of {chunk}, {multiline:?}, {format:?}"
                );
            }
        }
    }
    whole
}

#[test]
fn the_fixture_logs_count_the_same_skimmed() {
    let c = classifier();
    let mut seen = 0;
    for dir in ["samples/logs", "libraries"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap().flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                let data = std::fs::read(entry.path()).unwrap();
                let (lines, events) = same_skimmed_or_not(
                    &c,
                    &entry.path().display().to_string(),
                    &data,
                    &[data.len(), 4096, 997, 61, 7],
                );
                assert!(
                    lines.iter().sum::<u64>() > 0 && !events.is_empty(),
                    "{}",
                    entry.path().display()
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 10, "{seen} fixture logs");
}

/// A deterministic mix of every record shape, `n` records.
fn mixed(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let shape = x % 40;
        let ts = format!("2026-11-29T07:{:02}:{:02}.{:03}Z", i % 60, (i / 60) % 60, i % 1000);
        let rec: Vec<u8> = match shape {
            0 => format!("{ts} level=error msg=\"lock not owned\" key=payout:batch:lock:{i}\n").into_bytes(),
            1 => format!("{{\"time\":\"{ts}\",\"level\":\"error\",\"msg\":\"failed to release lock\",\"key\":\"cordum:wf:run:lock:{i}\"}}\n").into_bytes(),
            2 => format!("{ts} ERROR worker failed\nTraceback (most recent call last):\n  File \"w.py\", line 3, in run\n    lock.release()\nredis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned\n").into_bytes(),
            3 => format!("{ts} ERROR payout unlock failed\njava.lang.IllegalMonitorStateException: attempt to unlock lock, not locked by current thread\n\tat org.redisson.RedissonLock.unlock(RedissonLock.java:1)\n\tat com.example.Payout.run(Payout.java:9)\nCaused by: java.lang.RuntimeException: x\n\t... 3 more\n").into_bytes(),
            4 => b"panic: runtime error\n\ngoroutine 1 [running]:\nmain.release(0x1)\n\t/src/lock.go:12 +0x1d\nexit status 2\n".to_vec(),
            5 => format!("{ts} WARN Lease on approval lock cordum:approval:lock:{i} EXPIRED before renewal\r\n").into_bytes(),
            6 => b"\n   \n".to_vec(),
            7 => [format!("{ts} INFO bad bytes ").as_bytes(), b"\xff\xfe in a line about a lock\nplain \xc3\x28 line\n"].concat(),
            8 => format!("{ts} INFO a NUL \0 here\n").into_bytes(),
            9 if i % 7 == 0 => format!("{ts} INFO {}\n", "x".repeat(MAX_LINE + 10)).into_bytes(),
            10 => format!("{ts} INFO something\n    indented detail about the mutex\n").into_bytes(),
            11 => format!("{ts} ERROR failed\n{{\"nested\": true}}\n]\n").into_bytes(),
            12 => b"ERROR\nsingleword\nanother(x)\n".to_vec(),
            13 => format!("{ts} ERROR reconciler lock renewal failed: token mismatch\n").into_bytes(),
            // Lock words without a failure, a failure only an escape or a hyphen spells,
            // odd case, a tally of zero, a failure in another field than the lock word.
            14 => format!("{{\"time\":\"{ts}\",\"msg\":\"run lock acquired\",\"run_id\":\"run-{i}\"}}\n").into_bytes(),
            15 => format!("{{\"msg\":\"lock renew: \\u006eot owned\",\"key\":\"payout:batch:lock:{i}\"}}\n").into_bytes(),
            16 => format!("{ts} WARN LoCk ReNeWaL: ALREADY-EXPIRED\tkey=cordum:approval:lock:{i}\n").into_bytes(),
            17 => format!("{ts} INFO lock sweep done: Error: 0, failed=0\n").into_bytes(),
            18 => format!("level=warn msg=\"renewing\" lock=payout:batch:lock:{i} err=\"not held\"\n").into_bytes(),
            19 => format!("{ts} INFO user account locked user=u{i}\n").into_bytes(),
            // A traceback's frames take a closing bracket in and stay open after it.
            20 => format!("{ts} x y timed out\nTraceback (most recent call last):\n)\nlock renewal\n").into_bytes(),
            21 => format!("{ts} ERROR boom\nTraceback (most recent call last):\n]\n}}\nbad \0 lock line\n").into_bytes(),
            _ => format!("{ts} INFO payout batch {i} processed in {} ms by worker-{}\n", x % 1000, x % 7).into_bytes(),
        };
        out.extend_from_slice(&rec);
    }
    out
}

#[test]
fn a_generated_mix_of_every_shape_counts_the_same_skimmed() {
    let c = classifier();
    let data = mixed(6000);
    let (lines, events) = same_skimmed_or_not(&c, "mixed", &data, &[data.len(), 1 << 20, 65_537, 4093, 997]);
    assert!(lines.iter().all(|n| *n > 0), "every result seen: {lines:?}");
    assert!(events.len() >= 4, "{events:?}");
    // Mostly quiet lines, some marked: the skim did skip.
    let mut quiet = 0u64;
    RecordSplitter::new(Multiline::Auto).feed_skimming(&data, MAX_LINE, End::Eof, c.skim(LogFormat::Auto), |p| {
        if let crate::intake::records::Piece::Quiet { lines } = p {
            quiet += u64::from(lines);
        }
    });
    assert!(quiet > lines[1] / 2, "{quiet} of {} ignored lines skimmed", lines[1]);
}

#[test]
fn a_record_comes_out_marked_only_when_it_holds_a_lock_word() {
    let c = classifier();
    let skim = c.skim(LogFormat::Auto).unwrap();
    let data = mixed(6000);
    for chunk in [data.len(), 4093, 997] {
        let (mut marked, mut unmarked_with_word) = (0, 0);
        let mut buf: Vec<u8> = Vec::new();
        let mut pieces = data.chunks(chunk).peekable();
        while let Some(p) = pieces.next() {
            buf.extend_from_slice(p);
            let end = if pieces.peek().is_some() { End::More } else { End::Eof };
            let used = RecordSplitter::new(Multiline::Auto).feed_skimming(&buf, MAX_LINE, end, Some(skim), |p| {
                if let crate::intake::records::Piece::Record { bytes, marked: m, .. } = p {
                    let word = skim.is_match(bytes);
                    assert!(!m || word, "{:?}", String::from_utf8_lossy(bytes));
                    marked += usize::from(m);
                    unmarked_with_word += usize::from(!m && word);
                }
            });
            buf.drain(..used);
        }
        // Most records with a word are known by their mark.
        assert!(
            marked > 4 * unmarked_with_word,
            "{marked} marked, {unmarked_with_word} not"
        );
    }
}

#[test]
fn no_skim_for_rules_or_json() {
    let dir = fixtures();
    let text = std::fs::read_to_string(dir.join("lockwatch.toml")).unwrap();
    let c = classifier();
    assert!(c.skim(LogFormat::Auto).is_some() && c.skim(LogFormat::Logfmt).is_some());
    assert!(c.skim(LogFormat::Json).is_none());
    let ruled = format!("{text}\n[[rule]]\nmatch = \"boom\"\nop = \"release\"\noutcome = \"not_owned\"\n");
    let c =
        Classifier::new(&Config::from_toml(&ruled, "lockwatch.toml", &dir, &Overrides::default()).unwrap()).unwrap();
    assert!(c.skim(LogFormat::Auto).is_none());
}

#[test]
fn a_word_is_found_where_it_starts_past_prefixes_that_start_none() {
    for teddy in [true, false] {
        let skim = super::Skim::build(&["lock", "illegalmonitorstate", "not owned"], teddy).unwrap();
        for at in [0, 1, 15, 16, 17, 31, 32, 33, 100, 16 * 1024 - 3] {
            // Prefixes that start no word (`ILLegal…` cut, `not ` then another word, `loc`
            // at the end of a run), then the words in mixed case.
            let mut data = vec![b'x'; at];
            data.extend_from_slice(b"ILLEGALMONITORSTAT NOT OWNER lOc IllegalMonitorState then NoT OwNeD, LOCK\n");
            let first = at + 33;
            assert_eq!(skim.find(&data, 0), first, "teddy {teddy}, at {at}");
            assert_eq!(skim.find(&data, first + 1), at + 58, "teddy {teddy}, at {at}");
            assert_eq!(skim.find(&data, at + 59), at + 69, "teddy {teddy}, at {at}");
            assert_eq!(skim.find(&data, at + 70), data.len(), "teddy {teddy}, at {at}");
            // Cut at the data's end, a word is none.
            assert_eq!(skim.find(&data[..at + 72], at + 59), at + 72, "teddy {teddy}, at {at}");
        }
        assert_eq!(skim.find(b"no words here", 0), 13);
        assert_eq!(skim.find(b"lock", 5), 4, "from past the end");
    }
    assert!(matches!(super::Skim::new(&["lo"]), Err(super::SkimError::TooShort(_))));
    for w in ["lock\n", "\rlock"] {
        assert!(
            matches!(super::Skim::new(&[w]), Err(super::SkimError::LineEnd(_))),
            "{w:?}"
        );
    }
    // Words that share their prefix are each checked at a hit, in their order.
    for teddy in [true, false] {
        let skim = super::Skim::build(&["locksmith", "lockout"], teddy).unwrap();
        assert_eq!(skim.find(b"a LOCKSMIT, a LockOut", 0), 14, "teddy {teddy}");
        assert_eq!(skim.find(b"a locksmith", 0), 2, "teddy {teddy}");
        assert_eq!(skim.find(b"a lockou", 0), 8, "teddy {teddy}");
    }
    // A word with bytes that are no letter is searched for as it is.
    let skim = super::Skim::new(&["lock_key"]).unwrap();
    assert!(skim.is_match(b"a LOCK_KEY here") && !skim.is_match(b"a LOCK KEY here") && !skim.is_match(b"lock\x7fkey"));
}

#[test]
fn a_nul_or_bad_utf8_is_a_mark_anywhere_before_the_next_word() {
    let skim = super::Skim::new(&["lock"]).unwrap();
    let w = 16 * 1024;
    for odd in [&b"\0"[..], b"\xff", b"\xc3"] {
        for at in [0, 5, w - 1, w, w + 1, 2 * w + 3, 3 * w - 2] {
            let mut data = vec![b'x'; 4 * w];
            data[at..at + odd.len()].copy_from_slice(odd);
            data.extend_from_slice(b"\nLOCK\n");
            let word = 4 * w + 1;
            let mut marks = skim.marks(&data);
            assert_eq!(marks.next(0), at, "{odd:?} at {at}");
            assert_eq!(marks.next(at + 1), word, "{odd:?} at {at}");
            // Asked first from a line start after the data's start, the same mark.
            let mut marks = skim.marks(&data);
            assert_eq!(marks.next(at / 2), at, "{odd:?} at {at}, from {}", at / 2);
        }
    }
    // Valid UTF-8 beyond ASCII is no mark; the bytes after it are still looked through.
    let mut data = "é".repeat(w).into_bytes();
    data.extend_from_slice(b"\nLOCK\n");
    assert_eq!(skim.marks(&data).next(0), 2 * w + 1);
}

#[test]
fn find_agrees_with_a_case_blind_regex_on_any_text() {
    let words = ["lock", "not owned", "illegalmonitorstate", "fenc"];
    let (skim, automaton) = (
        super::Skim::new(&words).unwrap(),
        super::Skim::build(&words, false).unwrap(),
    );
    let re = regex::bytes::Regex::new(&format!("(?i-u){}", words.join("|"))).unwrap();
    // Bytes one bit from a letter (`@`, `[`, `` ` ``, `{`), NUL and other controls,
    // bytes over 0x7F, and the words' own letters in both cases.
    let alphabet = b"lLoOcCkKnNtT wWeEdDfF@[`{\0\x01\x0c\x2c\x8c\xcc\xec";
    let mut rng = crate::intake::test_rng::Xorshift(0x9e37_79b9_7f4a_7c15);
    for len in [0, 3, 4, 9, 60, 255, 256, 257, 320, 321, 700] {
        for _ in 0..300 {
            let text: Vec<u8> = (0..len).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            let want = re.find(&text).map_or(text.len(), |m| m.start());
            for s in [&skim, &automaton] {
                assert_eq!(s.find(&text, 0), want, "{:?}", String::from_utf8_lossy(&text));
            }
        }
    }
    for at in [0, 250, 253, 255, 256, 300, 316, 317, 600] {
        let mut text = vec![b'x'; 640];
        text[at..at + 9].copy_from_slice(b"NoT OwNeD");
        assert!(skim.is_match(&text), "at {at}");
    }
}

#[test]
fn marks_found_after_a_clean_call_and_past_a_kept_word() {
    let skim = super::Skim::new(&["lock"]).unwrap();
    let w = 16 * 1024;
    // A word, then (far after it) a NUL, then a word: asked from each line start.
    let mut data = vec![b'x'; 3 * w];
    data[10..14].copy_from_slice(b"LOCK");
    data[20] = b'\n';
    data[2 * w + 7] = 0;
    data[2 * w + 20..2 * w + 24].copy_from_slice(b"lock");
    data.push(b'\n');
    let mut marks = skim.marks(&data);
    assert_eq!(marks.next(0), 10, "the word, the NUL after it no mark yet");
    assert_eq!(marks.next(21), 2 * w + 7, "the NUL, found on a later call");
    assert_eq!(marks.next(2 * w + 8), 2 * w + 20);
    // A kept word whose bytes before it were clean, asked again from a later line start.
    let mut data = vec![b'y'; 2 * w];
    data[5] = b'\n';
    data[w + 3..w + 7].copy_from_slice(b"Lock");
    let mut marks = skim.marks(&data);
    assert_eq!(marks.next(0), w + 3);
    assert_eq!(marks.next(6), w + 3);
    // A character cut at the data's end is a mark; a whole one is none.
    let mut data = b"caf\xc3\xa9\n".repeat(10);
    assert_eq!(skim.marks(&data).next(0), data.len());
    data.push(0xc3);
    assert_eq!(skim.marks(&data).next(0), data.len() - 1);
}

#[test]
fn is_match_finds_the_real_words_and_a_long_one_wherever_they_start() {
    let longest = "q".repeat(200);
    let mut words: Vec<&str> = crate::intake::classify::LOCK_WORDS.to_vec();
    words.push(&longest);
    let skim = super::Skim::new(&words).unwrap();
    for word in &words {
        for at in 240..=300 {
            let mut text = vec![b'x'; 520];
            text[at..at + word.len()].copy_from_slice(word.to_ascii_uppercase().as_bytes());
            assert!(skim.is_match(&text), "{word} at {at}");
            text[at] = b'-';
            assert!(!skim.is_match(&text), "{word} cut at {at}");
        }
    }
}
