//! `lockwatch classify [FILE|-]`: per record (a line, or a line with its traceback), the
//! lock event it maps to or why it was ignored — for writing `[[rule]]`s and checking them
//! against real logs; with `--summary`, only the event counts. Both read the way a tailed
//! file is read: 1 MiB chunks, lines joined into records.

use std::io::{Read, Write};

use super::count::Tally;
use super::records::{End, Piece, RecordSplitter};
use super::skim::Skim;
use super::{Classifier, MAX_LINE, Verdict};
use crate::config::{LogFormat, Multiline};

/// Totals of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) lines: u64,
    pub(crate) records: u64,
    pub(crate) events: u64,
    pub(crate) ignored: u64,
    pub(crate) malformed: u64,
}

/// Hand every piece of `input` to `on` with its first line number (1-based), in 1 MiB
/// reads as the file tailer does, skimming by `skim` when given.
fn each_piece(
    mut input: impl Read,
    multiline: Multiline,
    skim: Option<&Skim>,
    mut on: impl FnMut(u64, &Piece<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut splitter = RecordSplitter::new(multiline);
    let mut buf = vec![0u8; 1024 * 1024];
    let (mut filled, mut line) = (0, 1u64);
    loop {
        let n = input.read(&mut buf[filled..])?;
        filled += n;
        let end = if n == 0 { End::Eof } else { End::More };
        let mut failed = Ok(());
        let used = splitter.feed_skimming(&buf[..filled], MAX_LINE, end, skim, |piece| {
            if failed.is_ok() {
                failed = on(line, &piece);
            }
            line += u64::from(piece.lines());
        });
        failed?;
        buf.copy_within(used..filled, 0);
        filled -= used;
        if n == 0 {
            return Ok(());
        }
    }
}

/// Classify every record of `input`, writing
/// `first<TAB>last<TAB>namespace<TAB>op<TAB>outcome<TAB>why` (the record's first and last
/// line; `-` for namespace and op, and `ignored` / `malformed` as the outcome, when no event).
pub(crate) fn run(
    classifier: &Classifier,
    input: impl Read,
    format: LogFormat,
    multiline: Multiline,
    out: &mut impl Write,
) -> std::io::Result<Totals> {
    let mut t = Totals::default();
    each_piece(input, multiline, None, |first, piece| {
        let last = first + u64::from(piece.lines()) - 1;
        t.lines += u64::from(piece.lines());
        t.records += 1;
        match classifier.classify_piece(piece, format) {
            Verdict::Event {
                namespace,
                op,
                outcome,
                by,
                ..
            } => {
                t.events += 1;
                writeln!(
                    out,
                    "{first}\t{last}\t{}\t{}\t{}\t{by}",
                    classifier.namespace_name(namespace),
                    op.as_str(),
                    outcome.as_str()
                )
            }
            Verdict::Ignored(why) => {
                t.ignored += 1;
                writeln!(out, "{first}\t{last}\t-\t-\tignored\t{why}")
            }
            Verdict::Malformed(why) => {
                t.malformed += 1;
                writeln!(out, "{first}\t{last}\t-\t-\tmalformed\t{why}")
            }
        }
    })?;
    Ok(t)
}

/// Classify all of `input` and count.
pub(crate) fn tally(
    classifier: &Classifier,
    input: impl Read,
    format: LogFormat,
    multiline: Multiline,
) -> std::io::Result<Tally> {
    let mut tally = Tally::new(classifier.namespace_count());
    each_piece(input, multiline, classifier.skim(format), |_, piece| {
        tally.piece(classifier, piece, format);
        Ok(())
    })?;
    Ok(tally)
}

/// Write a tally as `namespace<TAB>op<TAB>outcome<TAB>count`, one row per event kind seen.
pub(crate) fn summary(classifier: &Classifier, tally: &Tally, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "namespace\top\toutcome\tcount")?;
    for (ns, op, outcome, n) in tally.events() {
        writeln!(out, "{}\t{op}\t{outcome}\t{n}", classifier.namespace_name(ns))?;
    }
    Ok(())
}
