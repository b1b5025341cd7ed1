//! `lockwatch classify [FILE|-]`: per line, the lock event it maps to or why it was
//! ignored — for writing `[[rule]]`s and checking them against real logs; with
//! `--summary`, only the event counts, read the way a tailed file is read.

use std::io::{BufRead, Read, Write};

use super::count::Tally;
use super::lines::{Line, Lines, Splitter};
use super::{Classifier, MAX_LINE, Verdict};
use crate::config::LogFormat;

/// Totals of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) lines: u64,
    pub(crate) events: u64,
    pub(crate) ignored: u64,
    pub(crate) malformed: u64,
}

/// Classify every line of `input`, writing `line<TAB>namespace<TAB>op<TAB>outcome<TAB>why`
/// (`-` for namespace and op, and `ignored` / `malformed` as the outcome, when no event).
pub(crate) fn run(
    classifier: &Classifier,
    input: impl BufRead,
    format: LogFormat,
    out: &mut impl Write,
) -> std::io::Result<Totals> {
    let mut lines = Lines::new(input, MAX_LINE);
    let mut t = Totals::default();
    while let Some(line) = lines.next_line()? {
        t.lines += 1;
        let verdict = match line {
            Line::Text(bytes) => classifier.classify(bytes, format),
            Line::TooLong(_) => Verdict::Malformed("line longer than 64 KiB"),
        };
        match verdict {
            Verdict::Event {
                namespace,
                op,
                outcome,
                by,
            } => {
                t.events += 1;
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{by}",
                    t.lines,
                    classifier.namespace_name(namespace),
                    op.as_str(),
                    outcome.as_str()
                )?;
            }
            Verdict::Ignored(why) => {
                t.ignored += 1;
                writeln!(out, "{}\t-\t-\tignored\t{why}", t.lines)?;
            }
            Verdict::Malformed(why) => {
                t.malformed += 1;
                writeln!(out, "{}\t-\t-\tmalformed\t{why}", t.lines)?;
            }
        }
    }
    Ok(t)
}

/// Classify all of `input` in 1 MiB reads, as the file tailer does, and count.
pub(crate) fn tally(classifier: &Classifier, mut input: impl Read, format: LogFormat) -> std::io::Result<Tally> {
    let mut tally = Tally::new(classifier.namespace_count());
    let mut splitter = Splitter::default();
    let mut buf = vec![0u8; 1024 * 1024];
    let mut filled = 0;
    loop {
        let n = input.read(&mut buf[filled..])?;
        filled += n;
        let used = splitter.feed(&buf[..filled], MAX_LINE, n == 0, |line| match line {
            Line::Text(b) => tally.line(&classifier.classify(b, format)),
            Line::TooLong(_) => tally.too_long(),
        });
        buf.copy_within(used..filled, 0);
        filled -= used;
        if n == 0 {
            return Ok(tally);
        }
    }
}

/// Write a tally as `namespace<TAB>op<TAB>outcome<TAB>count`, one row per event kind seen.
pub(crate) fn summary(classifier: &Classifier, tally: &Tally, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "namespace\top\toutcome\tcount")?;
    for (ns, op, outcome, n) in tally.events() {
        writeln!(out, "{}\t{op}\t{outcome}\t{n}", classifier.namespace_name(ns))?;
    }
    Ok(())
}
