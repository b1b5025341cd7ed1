//! `lockwatch classify [FILE|-]`: per line, the lock event it maps to or why it was
//! ignored — for writing `[[rule]]`s and checking them against real logs.

use std::io::{BufRead, Write};

use super::lines::{Line, Lines};
use super::{Classifier, MAX_LINE, Verdict};
use crate::config::LogFormat;

/// Totals of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub lines: u64,
    pub events: u64,
    pub ignored: u64,
    pub malformed: u64,
}

/// Classify every line of `input`, writing `line<TAB>namespace<TAB>op<TAB>outcome<TAB>why`
/// (`-` for namespace and op, and `ignored` / `malformed` as the outcome, when no event).
pub fn run(
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
