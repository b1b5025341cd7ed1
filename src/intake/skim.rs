//! Skimming a chunk of log lines for the few that may be lock events. The lock words (the
//! classifier's prefilter, searched over the whole chunk with its SIMD literal search), NUL
//! bytes and invalid UTF-8 are *marks*; `RecordSplitter::feed_skimming` counts the records
//! between the neighbourhoods of two marks as ignored lines (`Piece::Quiet`) without
//! splitting, decoding or lower-casing them, from one line that starts a record whatever
//! came before it to another, so the records around a mark come out as if every line had
//! been read. Not for `[[rule]]`s (regexes on whole records) nor `format = "json"` (every
//! record's shape is checked): the classifier gives no skim then.

use memchr::memchr;

/// What marks a line as worth reading: the classifier's lock words.
#[derive(Debug, Clone)]
pub struct Skim {
    words: regex::bytes::Regex,
}

impl Skim {
    pub(crate) fn new(words: regex::bytes::Regex) -> Self {
        Skim { words }
    }

    /// The marks of `data`, searched as asked.
    pub(crate) fn marks<'a>(&'a self, data: &'a [u8]) -> Marks<'a> {
        Marks {
            skim: self,
            data,
            word: None,
            nul: None,
            utf8: None,
        }
    }
}

/// The next mark of each kind at or after the last position asked, each searched again
/// only once it is passed: every byte is searched once per kind.
pub(crate) struct Marks<'a> {
    skim: &'a Skim,
    data: &'a [u8],
    word: Option<usize>,
    nul: Option<usize>,
    utf8: Option<usize>,
}

impl Marks<'_> {
    /// Where the first mark at or after `pos` is (a line start, as every `pos` asked), or
    /// the data's length.
    pub(crate) fn next(&mut self, pos: usize) -> usize {
        let (data, len) = (self.data, self.data.len());
        let rest = &data[pos.min(len)..];
        if self.word.is_none_or(|w| w < pos) {
            self.word = Some(self.skim.words.find_at(data, pos).map_or(len, |m| m.start()));
        }
        if self.nul.is_none_or(|n| n < pos) {
            self.nul = Some(memchr(0, rest).map_or(len, |i| pos + i));
        }
        if self.utf8.is_none_or(|u| u < pos) {
            self.utf8 = Some(match std::str::from_utf8(rest) {
                Ok(_) => len,
                Err(e) => pos + e.valid_up_to(),
            });
        }
        [self.word, self.nul, self.utf8]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(len)
    }
}

/// Complete lines in `data[from..to]` (both line starts), up to the first over `max_line`
/// bytes: `(lines, where they end)`; at most `u32::MAX` lines.
pub(crate) fn quiet_lines(data: &[u8], from: usize, to: usize, max_line: usize) -> (u32, usize) {
    let (mut lines, mut start) = (0u32, from);
    for nl in memchr::memchr_iter(b'\n', &data[from..to]).map(|i| from + i) {
        if nl - start > max_line || lines == u32::MAX {
            break;
        }
        lines += 1;
        start = nl + 1;
    }
    (lines, start)
}

#[cfg(test)]
#[path = "skim_tests.rs"]
mod tests;
