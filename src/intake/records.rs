//! Joining lines into log records: a line that starts a record and the lines that continue
//! it — Python tracebacks, Java and Kotlin stack traces (`at`, `Caused by:`, `... N more`),
//! Go panics and goroutine dumps, Node error stacks, indented lines in general — are handed
//! on as one record, so one failure is classified once. Knows nothing of classification.
//!
//! A record is a contiguous byte range of the input, so nothing is copied: the records of a
//! chunk are handed out while it is read, and one not known to be complete yet (its next
//! line has not arrived) is left unconsumed, to be read again with the following bytes. The
//! consumed offset therefore always sits at a record boundary.

use crate::config::Multiline;
use crate::intake::lines::Splitter;
use crate::intake::skim::{Marks, Skim, quiet_lines};

#[path = "assembler.rs"]
mod assembler;
use assembler::{Assembler, PY_TRACEBACK, closed};

/// A record is cut after this many lines; the lines after it start records of their own.
pub const MAX_RECORD_LINES: u32 = 1000;
/// A record is cut before it grows past this many bytes.
pub const MAX_RECORD_BYTES: usize = 256 * 1024;
/// Pieces of a skimmed chunk handed on together (`RecordSplitter::feed_skimming`).
const BATCH: usize = 256;

/// What the input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// One record: its lines joined by their newlines (the last one's left out).
    Record {
        bytes: &'a [u8],
        /// Physical lines in the record.
        lines: u32,
        /// It begins with a continuation line: the rest of a record whose start was read
        /// before (cut at a bound, or flushed when the writer paused mid-record).
        orphan: bool,
        /// The skim found a lock word in it (`feed_skimming`), so the classifier does not
        /// look for one again: `false` says nothing. A caller that builds a record itself
        /// leaves it `false`.
        marked: bool,
    },
    /// A line over the line bound, skipped: its length in bytes. A record boundary.
    TooLong(usize),
    /// Records with no lock word and nothing malformed, skimmed over (`feed_skimming`):
    /// their lines, counted as ignored.
    Quiet { lines: u32 },
}

impl Piece<'_> {
    /// Physical lines in the piece.
    pub fn lines(&self) -> u32 {
        match self {
            Piece::Record { lines, .. } | Piece::Quiet { lines } => *lines,
            Piece::TooLong(_) => 1,
        }
    }
}

/// How far the input is known to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// More may follow: a record whose next line has not arrived is kept back.
    More,
    /// The writer paused: records end with the last complete line (an unfinished line waits).
    Quiet,
    /// Nothing more will come: an unfinished last line counts too.
    Eof,
}

/// Splits chunks of a stream into records. Its only state between chunks is the line
/// splitter's (inside an over-long line), so it fits in a saved offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordSplitter {
    pub splitter: Splitter,
    pub multiline: Multiline,
}

impl RecordSplitter {
    pub fn new(multiline: Multiline) -> Self {
        RecordSplitter {
            splitter: Splitter::default(),
            multiline,
        }
    }

    /// Call `on` for each record of `data` (and each line over `max_line`), in order, and
    /// return how many bytes were consumed: up to the last record handed out.
    pub fn feed(&mut self, data: &[u8], max_line: usize, end: End, on: impl FnMut(Piece<'_>)) -> usize {
        self.feed_skimming(data, max_line, end, None, on)
    }

    /// [`feed`](Self::feed), with the records between the marks of `skim` handed out as
    /// `Piece::Quiet`: the same lines, the same records around every mark, the same bytes
    /// consumed or fewer left for the next call.
    ///
    /// A skimmed chunk's pieces are handed on `BATCH` at a time, after the skim has passed
    /// over their bytes: the classifier then reads one marked record after another with its
    /// tables still in the cache, instead of after the skim's pass over the bytes between
    /// them has pushed them out (2–4 % less time on the bench file, release builds side by side).
    pub fn feed_skimming(
        &mut self,
        data: &[u8],
        max_line: usize,
        end: End,
        skim: Option<&Skim>,
        mut on: impl FnMut(Piece<'_>),
    ) -> usize {
        if skim.is_none() {
            return self.split(data, max_line, end, None, on);
        }
        let mut batch = Vec::with_capacity(BATCH);
        let used = self.split(data, max_line, end, skim, |piece| {
            batch.push(piece);
            if batch.len() == BATCH {
                batch.drain(..).for_each(&mut on);
            }
        });
        batch.into_iter().for_each(on);
        used
    }

    /// `feed_skimming`, each piece handed on as it is found.
    fn split<'a>(
        &mut self,
        data: &'a [u8],
        max_line: usize,
        end: End,
        skim: Option<&Skim>,
        mut on: impl FnMut(Piece<'a>),
    ) -> usize {
        let mut asm = Assembler::new(self.multiline);
        let mut pos = 0;
        if self.splitter.skipping {
            match memchr::memchr(b'\n', data) {
                Some(nl) => {
                    self.splitter.skipping = false;
                    pos = nl + 1;
                }
                None => return data.len(),
            }
        }
        let mut marks = skim.map(|s| s.marks(data));
        let last = marks.as_ref().and_then(|_| last_line_start(data, pos));
        let mut prev = None;
        // A line start that `quiet` found to start a record alone, not asked again.
        let mut alone_at = None;
        while let Some(nl) = memchr::memchr(b'\n', &data[pos..]).map(|i| pos + i) {
            if let (Some(m), Some(last)) = (marks.as_mut(), last)
                && let Some((to, lines, alone)) =
                    self.quiet(data, prev, pos, nl, last, m, max_line, alone_at == Some(pos))
            {
                asm.flush(data, &mut on);
                on(Piece::Quiet { lines });
                prev = Some(line_before(data, to));
                pos = to;
                alone_at = alone.then_some(to);
                continue;
            }
            // The last word `quiet` found: this line's, or one before it, which marks nothing.
            asm.word = marks.as_ref().and_then(Marks::word);
            if nl - pos > max_line {
                asm.flush(data, &mut on);
                on(Piece::TooLong(nl - pos));
            } else {
                asm.push(data, pos, strip_cr(data, pos, nl), &mut on);
            }
            prev = Some((pos, strip_cr(data, pos, nl)));
            pos = nl + 1;
        }
        let rest = data.len() - pos;
        if rest > max_line {
            asm.flush(data, &mut on);
            on(Piece::TooLong(rest));
            self.splitter.skipping = end != End::Eof;
            return data.len();
        }
        if end == End::Eof && rest > 0 {
            asm.push(data, pos, strip_cr(data, pos, data.len()), &mut on);
            asm.flush(data, &mut on);
            return data.len();
        }
        // A JSON object line ends its record and the one held before it: count them now.
        if end != End::More || asm.cur.is_some_and(|r| closed(data, &r)) {
            asm.flush(data, &mut on);
            return pos;
        }
        asm.pending_start().unwrap_or(pos)
    }
}

impl RecordSplitter {
    /// From the line `data[pos..nl]`, when it starts a record whatever came before it
    /// (`prev`, the line before it, if in `data`): the quiet records up to the last such
    /// line before the next mark (or before `last`, the last complete line) — where to go
    /// on, their lines, and whether where to go on is known to start a record alone.
    /// `None` when there are none. `alone`: the line at `pos` is known to start one.
    #[allow(clippy::too_many_arguments)]
    fn quiet(
        &self,
        data: &[u8],
        prev: Option<(usize, usize)>,
        pos: usize,
        nl: usize,
        last: usize,
        marks: &mut Marks<'_>,
        max_line: usize,
        alone: bool,
    ) -> Option<(usize, u32, bool)> {
        let line = |(a, b): (usize, usize)| &data[a..b];
        if !alone && !self.starts_alone(prev.map(line), line((pos, strip_cr(data, pos, nl)))) {
            return None;
        }
        let mark = marks.next(pos);
        if mark <= nl {
            return None; // this line is marked
        }
        let mut to = match mark >= last {
            true => last,
            false => memchr::memrchr(b'\n', &data[..mark]).map_or(0, |i| i + 1),
        };
        while to > pos {
            let end = memchr::memchr(b'\n', &data[to..]).map_or(data.len(), |i| to + i);
            let before = line_before(data, to);
            if self.starts_alone(Some(line(before)), line((to, strip_cr(data, to, end)))) {
                break;
            }
            to = before.0;
        }
        if to <= pos {
            return None;
        }
        // `to` starts a record alone (asked above), unless a long line stops the count first.
        let (lines, end) = quiet_lines(data, pos, to, max_line);
        (lines > 0).then_some((end, lines, end == to))
    }

    /// Whether `line` starts a record whatever came before it, and no record before it can
    /// take it in (`prev`: the line before it; `None` at the start of the data, where
    /// nothing is held): no line it could continue in any context, it is no exception
    /// header a held line could join, and the line before it leaves no Python traceback
    /// open (neither blank, indented, the traceback's first line nor a closing bracket's,
    /// which a traceback's frames take in and stay open after).
    fn starts_alone(&self, prev: Option<&[u8]>, line: &[u8]) -> bool {
        if !matches!(self.multiline, Multiline::Auto) {
            return true;
        }
        let opens = |l: &[u8]| {
            l.trim_ascii().is_empty() || matches!(l.first(), Some(b' ' | b'\t')) || l.starts_with(PY_TRACEBACK)
        };
        !opens(line)
            && !matches!(line.first(), Some(b'}' | b']' | b')'))
            && !line.starts_with(b"Caused by: ")
            && !line.starts_with(b"During handling of the above exception")
            && !line.starts_with(b"The above exception was the direct cause")
            && !is_php_trace_line(line)
            && !is_go_line(line)
            && !is_exception_header(line)
            && prev.is_none_or(|p| !opens(p) && !matches!(p.first(), Some(b'}' | b']' | b')')))
    }
}

/// The start of the last complete line of `data[from..]`, if it has one.
fn last_line_start(data: &[u8], from: usize) -> Option<usize> {
    let nl = from + memchr::memrchr(b'\n', &data[from..])?;
    Some(memchr::memrchr(b'\n', &data[from..nl]).map_or(from, |i| from + i + 1))
}

/// The line before the one starting at `start` (> 0): its start and end (its `\r` left out).
fn line_before(data: &[u8], start: usize) -> (usize, usize) {
    let nl = start - 1;
    let from = memchr::memrchr(b'\n', &data[..nl]).map_or(0, |i| i + 1);
    (from, strip_cr(data, from, nl))
}

fn strip_cr(data: &[u8], start: usize, end: usize) -> usize {
    if end > start && data[end - 1] == b'\r' {
        end - 1
    } else {
        end
    }
}

/// Monolog's stack trace lines: `[stacktrace]`, `[previous exception] …`, `#3 /path(12): …`,
/// and the `"}` that closes the exception's JSON.
fn is_php_trace_line(line: &[u8]) -> bool {
    if line.starts_with(b"[stacktrace]") || line.starts_with(b"[previous exception]") || line.starts_with(b"\"}") {
        return true;
    }
    let digits = line.iter().skip(1).take_while(|b| b.is_ascii_digit()).count();
    line.first() == Some(&b'#') && digits > 0 && line.get(1 + digits) == Some(&b' ')
}

/// A frame line: `at …` after indentation (Java, Kotlin, Node).
fn is_frame(line: &[u8]) -> bool {
    let t = line.trim_ascii_start();
    t.len() < line.len() && t.starts_with(b"at ")
}

/// A Go stack's own lines: goroutine headers, function lines (`pkg.(*T).Method(…)` with no
/// space before the first parenthesis, or zap's bare `pkg.Func`), `created by …`,
/// `[signal …]`, `exit status N`.
fn is_go_line(line: &[u8]) -> bool {
    if line.starts_with(b"goroutine ")
        || line.starts_with(b"created by ")
        || line.starts_with(b"[signal ")
        || line.starts_with(b"exit status ")
    {
        return true;
    }
    // A function: no space before its arguments, or (zap) a bare symbol. Read up to the
    // first `(` or ASCII space (`\t \n \x0c \r`, searched apart), whichever comes first.
    let stop = memchr::memchr3(b'(', b' ', b'\t', line).unwrap_or(line.len());
    let stop = memchr::memchr3(b'\n', b'\x0c', b'\r', &line[..stop]).unwrap_or(stop);
    match line.get(stop) {
        Some(b) => *b == b'(' && stop > 0,
        None => !line.is_empty(),
    }
}

/// An exception line: a (dotted) class name ending the way exception classes end, or
/// holding a package path, then `: message` or nothing (`java.lang.IllegalStateException:
/// …`, `ExecutionError: …`, `Error: …`).
fn is_exception_header(line: &[u8]) -> bool {
    let name = match memchr::memchr(b':', line) {
        Some(i) => &line[..i],
        None => line,
    };
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'$'))
        && (name.contains(&b'.')
            || name.ends_with(b"Error")
            || name.ends_with(b"Exception")
            || name.ends_with(b"Throwable"))
}

/// Whether a log line reads as an error or warning (its level or words), so an exception
/// printed after it is its own. Asked only when an exception line with frames follows.
fn announces_error(line: &[u8]) -> bool {
    const WORDS: &[&[u8]] = &[b"err", b"warn", b"fatal", b"severe", b"crit", b"exception", b"fail"];
    WORDS
        .iter()
        .any(|w| line.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
