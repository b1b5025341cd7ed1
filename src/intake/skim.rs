//! Skimming a chunk of log lines for the few that may be lock events. The lock words (the
//! classifier's prefilter words), NUL bytes and invalid UTF-8 are *marks*;
//! `RecordSplitter::feed_skimming` counts the records between the neighbourhoods of two
//! marks as ignored lines (`Piece::Quiet`) without splitting, decoding or lower-casing
//! them, from one line that starts a record whatever came before it to another, so the
//! records around a mark come out as if every line had been read. Not for `[[rule]]`s
//! (regexes on whole records) nor `format = "json"` (every record's shape is checked): the
//! classifier gives no skim then.
//!
//! The words are searched case-blind over a copy of the chunk with bit 5 of every byte
//! set (`A` reads `a`), 16 KiB at a time, for their lowercase spellings alone: a handful of
//! literals a SIMD (Teddy) search finds at memory speed, where their case variants would be
//! hundreds.
//! Only two bytes fold onto a word's byte that is not their own letter in another case —
//! NUL onto the space — and a NUL is a mark anyway.

use memchr::memchr;

use super::literals::{LONGEST, Literals, LiteralsError};

/// Bytes folded and searched at a time, in a buffer allocated at a chunk's first fold.
const WINDOW: usize = 16 * 1024;
/// Bytes folded past a window's end, so that a word starting in it is found whole: the
/// longest word `Literals` takes.
const OVERLAP: usize = LONGEST;

/// What marks a line as worth reading: the classifier's lock words.
#[derive(Debug, Clone)]
pub struct Skim {
    /// The words, lowercase.
    words: Literals,
}

/// A word `Skim::new` cannot search for.
#[derive(Debug, thiserror::Error)]
pub enum SkimError {
    /// A byte without bit 5 (`_`, `@`, `[`): no folded byte can match it.
    #[error("lock word {0:?} holds a byte the case fold cannot match")]
    Unfoldable(String),
    /// `-` or `*`, which `\r` and `\n` fold onto: a word could then run past its line,
    /// which a record marked by it (`Piece::Record::marked`) would not hold.
    #[error("lock word {0:?} holds a byte a line end folds onto")]
    LineEnd(String),
    #[error(transparent)]
    Literals(#[from] LiteralsError),
}

impl Skim {
    /// A skim by `words` (letters and spaces), ASCII case ignored.
    pub(crate) fn new(words: &[&str]) -> Result<Self, SkimError> {
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        if let Some(w) = lower.iter().find(|w| w.bytes().any(|b| b | 0x20 != b)) {
            return Err(SkimError::Unfoldable(w.clone()));
        }
        if let Some(w) = lower
            .iter()
            .find(|w| w.bytes().any(|b| b == (b'\r' | 0x20) || b == (b'\n' | 0x20)))
        {
            return Err(SkimError::LineEnd(w.clone()));
        }
        Ok(Skim {
            words: Literals::new(&lower)?,
        })
    }

    /// The marks of `data`, searched as asked.
    pub(crate) fn marks<'a>(&'a self, data: &'a [u8]) -> Marks<'a> {
        Marks {
            skim: self,
            data,
            folded: Folded::new(),
            word: None,
            nul: None,
            utf8: None,
        }
    }

    /// Whether `text`, which holds no NUL, holds a word. Without a NUL the fold is exact:
    /// a folded byte equals a word's (a lowercase letter or the space) only where the byte
    /// is that letter in either case, or the space.
    pub(crate) fn is_match(&self, text: &[u8]) -> bool {
        self.words.is_match_mapped(text, |b| b | 0x20)
    }

    /// Where the first word in `folded` starts.
    fn find(&self, folded: &[u8]) -> Option<usize> {
        self.words.find(folded)
    }
}

/// `data` folded (every byte's bit 5 set) a window at a time, the last window kept. The
/// same loop notes whether a window holds a NUL or a byte over 0x7F, so the searches for
/// those run only where one of them may be.
struct Folded {
    /// Empty until the first fold, then `WINDOW + OVERLAP` bytes.
    buf: Vec<u8>,
    /// Where the window kept starts in `data`, its length, and whether it is odd (holds a
    /// NUL or a non-ASCII byte); `None` before the first.
    at: Option<(usize, usize, bool)>,
}

impl Folded {
    fn new() -> Self {
        Folded {
            buf: Vec::new(),
            at: None,
        }
    }

    /// Where the first word at or after `from` in `data` starts, or `data.len()`, and
    /// whether a window from `from`'s to the word's is odd. A word found starting past its
    /// window is looked for again in the next, which holds it whole.
    fn first_word(&mut self, skim: &Skim, data: &[u8], from: usize) -> (usize, bool) {
        let (mut from, mut odd) = (from, false);
        while from < data.len() {
            let (at, n, o) = match self.at {
                Some((at, n, o)) if (at..at + WINDOW).contains(&from) => (at, n, o),
                _ => self.fold(data, from),
            };
            odd |= o;
            match skim.find(&self.buf[from - at..n]) {
                Some(i) if from - at + i < WINDOW || at + n == data.len() => return (from + i, odd),
                _ => from = at + WINDOW,
            }
        }
        (data.len(), odd)
    }

    /// Fold the window of `data` that starts at `at`: its start, length and oddness.
    fn fold(&mut self, data: &[u8], at: usize) -> (usize, usize, bool) {
        let end = (at + WINDOW + OVERLAP).min(data.len());
        if self.buf.is_empty() {
            self.buf.resize(WINDOW + OVERLAP, 0);
        }
        let (mut low, mut high) = (u8::MAX, 0u8);
        for (f, &b) in self.buf.iter_mut().zip(&data[at..end]) {
            *f = b | 0x20;
            low = low.min(b);
            high = high.max(b);
        }
        let window = (at, end - at, low == 0 || high > 0x7f);
        self.at = Some(window);
        window
    }
}

/// The next mark of each kind at or after the last position asked, each searched again
/// only once it is passed: every byte is searched once per kind, and for a NUL or invalid
/// UTF-8 only once a window before the next word is odd.
pub(crate) struct Marks<'a> {
    skim: &'a Skim,
    data: &'a [u8],
    folded: Folded,
    /// The next word, and whether a window up to it is odd.
    word: Option<(usize, bool)>,
    nul: Option<usize>,
    utf8: Option<usize>,
}

impl Marks<'_> {
    /// Where the next word found starts, if one has been looked for: at or after the last
    /// position asked, or the data's length when there is none.
    pub(crate) fn word(&self) -> Option<usize> {
        self.word.map(|(w, _)| w)
    }

    /// Where the first mark at or after `pos` is (a line start, as every `pos` asked), or
    /// the data's length.
    pub(crate) fn next(&mut self, pos: usize) -> usize {
        let (data, len) = (self.data, self.data.len());
        let (word, odd) = match self.word {
            Some((w, odd)) if w >= pos => (w, odd),
            _ => *self.word.insert(self.folded.first_word(self.skim, data, pos)),
        };
        if !odd {
            return word; // no NUL and no byte over 0x7F before it
        }
        let rest = &data[pos.min(len)..];
        if self.nul.is_none_or(|n| n < pos) {
            self.nul = Some(memchr(0, rest).map_or(len, |i| pos + i));
        }
        if self.utf8.is_none_or(|u| u < pos) {
            self.utf8 = Some(match std::str::from_utf8(rest) {
                Ok(_) => len,
                Err(e) => pos + e.valid_up_to(),
            });
        }
        [Some(word), self.nul, self.utf8]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(len)
    }
}

/// Complete lines in `data[from..to]` (both line starts), up to the first over `max_line`
/// bytes: `(lines, where they end)`; at most `u32::MAX` lines. Newlines are counted a
/// window of `max_line / 2` bytes at a time (`memchr`'s SIMD count); only a
/// window's first and last newline are looked for, since no line inside a window that
/// holds two newlines can be over the bound.
pub(crate) fn quiet_lines(data: &[u8], from: usize, to: usize, max_line: usize) -> (u32, usize) {
    let window = (max_line / 2).max(1);
    let (mut lines, mut start) = (0u32, from);
    let mut at = from;
    while at < to {
        let end = (at + window).min(to);
        let piece = &data[at..end];
        let Some(first) = memchr(b'\n', piece) else {
            at = end; // the line from `start` goes on
            continue;
        };
        let n = memchr::memchr_iter(b'\n', piece).count();
        let Ok(n) = u32::try_from(n) else { break };
        if at + first - start > max_line || lines.checked_add(n).is_none() {
            break;
        }
        lines += n;
        start = at + memchr::memrchr(b'\n', piece).map_or(0, |i| i + 1);
        at = end;
    }
    (lines, start)
}

#[cfg(test)]
#[path = "skim_tests.rs"]
mod tests;
