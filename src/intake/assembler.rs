//! Putting a chunk's lines together into records (`Assembler`): a line that continues a
//! record by its context (a traceback's frames, a Go panic's goroutines, a held line an
//! exception joins) is added to it; a record comes out once the line after it starts
//! another, or the chunk ends.

use super::{
    MAX_RECORD_BYTES, MAX_RECORD_LINES, Piece, announces_error, is_exception_header, is_frame, is_go_line,
    is_php_trace_line,
};
use crate::config::Multiline;

/// What a record being built has shown so far, which decides what may continue it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    /// A start line, perhaps with indented lines.
    Plain,
    /// Java, Kotlin or Node frames (`at …`) seen.
    Stack,
    /// Inside a Python traceback's frames; the next unindented line is the exception.
    PyFrames,
    /// After a Python exception line: chained tracebacks may follow.
    PyDone,
    /// After "During handling of the above exception…" or "The above exception was…".
    PyChain,
    /// A Go panic or goroutine dump.
    Go,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Rec {
    start: usize,
    /// End of its last line (before the newline).
    end: usize,
    lines: u32,
    /// Lines that are not blank.
    content: u32,
    context: Context,
    /// A line of it holds the lock word the skim found (`Assembler::word`).
    marked: bool,
}

impl Rec {
    fn new(start: usize, end: usize, line: &[u8], marked: bool) -> Self {
        let context = match line.first() {
            Some(b'p' | b'f') if line.starts_with(b"panic: ") || line.starts_with(b"fatal error: ") => Context::Go,
            Some(b'T') if line.starts_with(PY_TRACEBACK) => Context::PyFrames,
            _ => Context::Plain,
        };
        Rec {
            start,
            end,
            lines: 1,
            content: u32::from(!line.trim_ascii().is_empty()),
            context,
            marked,
        }
    }

    fn extend(&mut self, end: usize, blank: bool, marked: bool) {
        self.end = end;
        self.marked |= marked;
        self.lines += 1;
        self.content += u32::from(!blank);
    }
}

pub(super) const PY_TRACEBACK: &[u8] = b"Traceback (most recent call last):";

/// The records of one chunk being put together. `held` is a single-line record kept back
/// one line longer: a Java or Node exception line that follows it with frames after it
/// belongs to it (logback writes the message, then the exception, then `at` frames).
pub(super) struct Assembler {
    auto: bool,
    held: Option<Rec>,
    pub(super) cur: Option<Rec>,
    /// Where a lock word the skim found starts, if one is known: the record whose line
    /// holds it comes out marked. A word lies within the line it starts in: no word holds
    /// a line end (`Skim::new` refuses one).
    pub(super) word: Option<usize>,
}

impl Assembler {
    pub(super) fn new(multiline: Multiline) -> Self {
        Assembler {
            auto: multiline == Multiline::Auto,
            held: None,
            cur: None,
            word: None,
        }
    }

    pub(super) fn push<'a>(&mut self, data: &'a [u8], start: usize, end: usize, on: &mut impl FnMut(Piece<'a>)) {
        let line = &data[start..end];
        let marked = self.word.is_some_and(|w| (start..end).contains(&w));
        if !self.auto {
            on(record(data, Rec::new(start, end, line, marked), false));
            return;
        }
        let Some(mut cur) = self.cur else {
            self.cur = Some(Rec::new(start, end, line, marked));
            return;
        };
        let within = cur.lines < MAX_RECORD_LINES && end - cur.start <= MAX_RECORD_BYTES;
        let blank = line.trim_ascii().is_empty();
        let closed = closed(data, &cur);
        if within && blank && !closed {
            // Blank lines belong to the record before them (Spring Boot's line before a
            // stack trace, chained Python tracebacks, a Go panic's goroutines).
            cur.extend(end, true, marked);
            self.cur = Some(cur);
            return;
        }
        let continued = if cur.content == 0 || closed {
            None
        } else {
            continues(cur.context, line)
        };
        match continued.filter(|_| within) {
            Some(mut context) => {
                if let Some(held) = self.held.take() {
                    let head = &data[cur.start..cur.end];
                    let first = &head[..memchr::memchr(b'\n', head).unwrap_or(head.len())];
                    let joins = if cur.content != 1 || !announces_error(&data[held.start..held.end]) {
                        None
                    } else if is_frame(line) && is_exception_header(first) {
                        Some(context)
                    } else if line.starts_with(b"\t") && is_go_line(first) {
                        // zap's and Go's stack traces: `pkg.Func(…)` then `\t/path/file.go:N`.
                        Some(Context::Go)
                    } else {
                        None
                    };
                    match joins {
                        Some(c) => {
                            cur.start = held.start;
                            cur.lines += held.lines;
                            cur.content += held.content;
                            cur.marked |= held.marked;
                            context = c;
                        }
                        None => on(record(data, held, self.auto)),
                    }
                }
                cur.extend(end, false, marked);
                cur.context = context;
                self.cur = Some(cur);
            }
            None => {
                if let Some(held) = self.held.take() {
                    on(record(data, held, self.auto));
                }
                if cur.content == 1 && !closed {
                    self.held = Some(cur);
                } else {
                    on(record(data, cur, self.auto));
                }
                self.cur = Some(Rec::new(start, end, line, marked));
            }
        }
    }

    pub(super) fn flush<'a>(&mut self, data: &'a [u8], on: &mut impl FnMut(Piece<'a>)) {
        for r in [self.held.take(), self.cur.take()].into_iter().flatten() {
            on(record(data, r, self.auto));
        }
    }

    pub(super) fn pending_start(&self) -> Option<usize> {
        self.held.or(self.cur).map(|r| r.start)
    }
}

/// Whether `r` is complete by its format: one line holding a JSON object (`{` … `}`), as
/// JSON loggers write a record. Nothing continues it, not even a blank line, and no exception
/// line joins it: the next line begins a record. O(1): the line is not parsed.
pub(super) fn closed(data: &[u8], r: &Rec) -> bool {
    r.lines == 1
        && data.get(r.start) == Some(&b'{')
        && data.get(r.start..r.end).and_then(|l| l.trim_ascii_end().last()) == Some(&b'}')
}

fn record(data: &[u8], r: Rec, auto: bool) -> Piece<'_> {
    let bytes = &data[r.start..r.end];
    Piece::Record {
        bytes,
        lines: r.lines,
        orphan: auto && matches!(bytes.first(), Some(b' ' | b'\t' | b'}' | b']' | b')')),
        marked: r.marked,
    }
}

/// Whether `line` (not blank) continues a record in `context`, and the context after it.
fn continues(context: Context, line: &[u8]) -> Option<Context> {
    use Context::*;
    // Dispatched on the first byte: most lines start a record and cost one comparison.
    match line.first()? {
        b' ' | b'\t' => Some(match context {
            Plain if is_frame(line) => Stack,
            c => c,
        }),
        b'}' | b']' | b')' => Some(context),
        b'T' if line.starts_with(PY_TRACEBACK) => Some(PyFrames),
        b'[' | b'#' | b'"' if is_php_trace_line(line) => Some(Stack),
        _ if context == Plain && line.first() != Some(&b'C') => None,
        _ => match context {
            Plain | Stack if line.starts_with(b"Caused by: ") => Some(Stack),
            PyFrames => Some(PyDone),
            PyDone
                if line.starts_with(b"During handling of the above exception")
                    || line.starts_with(b"The above exception was the direct cause") =>
            {
                Some(PyChain)
            }
            Go if is_go_line(line) => Some(Go),
            _ => None,
        },
    }
}
