//! Skimming a chunk of log lines for the few that may be lock events. The lock words (the
//! classifier's prefilter words), NUL bytes and invalid UTF-8 are *marks*;
//! `RecordSplitter::feed_skimming` counts the records between the neighbourhoods of two
//! marks as ignored lines (`Piece::Quiet`) without splitting, decoding or lower-casing
//! them, from one line that starts a record whatever came before it to another, so the
//! records around a mark come out as if every line had been read. Not for `[[rule]]`s
//! (regexes on whole records) nor `format = "json"` (every record's shape is checked): the
//! classifier gives no skim then.
//!
//! The words are searched case-blind in the chunk as read, by their first three bytes in
//! every ASCII case: a SIMD (Teddy) search whose buckets take a prefix's case variants
//! together (a letter's two cases differ in bit 5 alone, so their low nibbles are one),
//! so a hit is the prefix in some ASCII case and nothing else (the fold this replaced let
//! a NUL read as a space), with no fold. A hit is
//! checked against the whole words that start so. Three bytes rather than four: Teddy
//! shuffles once per byte of its fingerprint, and a fourth cost more than the few hits a
//! three-byte prefix adds. A pass of its own over the bytes up to the next word notes
//! whether any is a NUL or over 0x7F; only then are NUL and invalid UTF-8 looked for.

use aho_corasick::{AhoCorasick, MatchKind, packed};
use memchr::memchr;

/// Bytes of a word searched for by Teddy; the rest are checked at each hit.
const PREFIX: usize = 3;

/// What marks a line as worth reading: the classifier's lock words.
#[derive(Debug, Clone)]
pub struct Skim {
    /// The words, lowercase, in the order given.
    words: Vec<Box<[u8]>>,
    search: Search,
}

/// How the words' prefixes are found.
#[derive(Debug, Clone)]
enum Search {
    /// Teddy, where the CPU has it (SSSE3 or AVX2): every case variant of each prefix.
    Teddy(packed::Searcher),
    /// Else an automaton for the whole words, ASCII case ignored.
    Automaton(AhoCorasick),
}

/// A word `Skim::new` cannot search for.
#[derive(Debug, thiserror::Error)]
pub enum SkimError {
    /// Shorter than the prefix the search takes.
    #[error("lock word {0:?} is shorter than {PREFIX} bytes")]
    TooShort(String),
    /// A word holding `\r` or `\n` could run past its line, which a record marked by it
    /// (`Piece::Record::marked`) would not hold.
    #[error("lock word {0:?} holds a line end")]
    LineEnd(String),
    #[error(transparent)]
    Build(#[from] aho_corasick::BuildError),
}

impl Skim {
    /// A skim by `words`, ASCII case ignored.
    pub(crate) fn new(words: &[&str]) -> Result<Self, SkimError> {
        Self::build(words, true)
    }

    /// A skim by `words`, by Teddy where `teddy` is asked for and the CPU has it.
    fn build(words: &[&str], teddy: bool) -> Result<Self, SkimError> {
        let lower: Vec<Box<[u8]>> = words
            .iter()
            .map(|w| w.to_ascii_lowercase().into_bytes().into())
            .collect();
        for w in words {
            if w.len() < PREFIX {
                return Err(SkimError::TooShort(w.to_string()));
            }
            if w.contains(['\r', '\n']) {
                return Err(SkimError::LineEnd(w.to_string()));
            }
        }
        let packed = teddy.then(|| teddy_for(&lower)).flatten();
        let search = match packed {
            Some(p) => Search::Teddy(p),
            None => Search::Automaton(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(&lower)?,
            ),
        };
        Ok(Skim { words: lower, search })
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

    /// Whether `text` holds a word.
    pub(crate) fn is_match(&self, text: &[u8]) -> bool {
        self.find(text, 0) < text.len()
    }

    /// Where the first word at or after `from` in `data` starts, or `data.len()`.
    fn find(&self, data: &[u8], mut from: usize) -> usize {
        match &self.search {
            Search::Teddy(t) => {
                while let Some(m) = data.get(from..).and_then(|rest| t.find(rest)) {
                    let at = from + m.start();
                    if self
                        .words
                        .iter()
                        .any(|w| data.get(at..at + w.len()).is_some_and(|s| s.eq_ignore_ascii_case(w)))
                    {
                        return at;
                    }
                    from = at + 1;
                }
                data.len()
            }
            Search::Automaton(a) => data
                .get(from..)
                .and_then(|rest| a.find(rest))
                .map_or(data.len(), |m| from + m.start()),
        }
    }
}

/// Teddy for every ASCII case variant of the words' prefixes, `None` where the CPU lacks it.
/// Each prefix's lowercase spelling comes first, so that each starts a bucket of its own
/// (Teddy gives a new low-nibble prefix the bucket its pattern number picks), and its
/// variants join it.
fn teddy_for(words: &[Box<[u8]>]) -> Option<packed::Searcher> {
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    for w in words {
        if !prefixes.iter().any(|p| p[..] == w[..PREFIX]) {
            prefixes.push(w[..PREFIX].to_vec());
        }
    }
    let mut patterns = prefixes.clone();
    for p in &prefixes {
        for v in case_variants(p) {
            if !patterns.contains(&v) {
                patterns.push(v);
            }
        }
    }
    packed::Config::new()
        .match_kind(packed::MatchKind::LeftmostFirst)
        .heuristic_pattern_limits(false)
        .only_teddy_fat(Some(false))
        .builder()
        .extend(&patterns)
        .build()
}

/// `bytes` in every ASCII case.
fn case_variants(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::with_capacity(bytes.len())];
    for &b in bytes {
        let (lower, upper) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
        let mut more = Vec::new();
        for v in &mut out {
            if lower != upper {
                let mut u = v.clone();
                u.push(upper);
                more.push(u);
            }
            v.push(lower);
        }
        out.extend(more);
    }
    out
}

/// Whether `bytes` holds a NUL or a byte over 0x7F (a loop the compiler makes SIMD).
fn odd(bytes: &[u8]) -> bool {
    let (mut low, mut high) = (u8::MAX, 0u8);
    for &b in bytes {
        low = low.min(b);
        high = high.max(b);
    }
    low == 0 || high > 0x7f
}

/// The next mark of each kind at or after the last position asked, each searched again
/// only once it is passed: every byte is searched about once for a word (a hit that
/// starts none is searched on from its next byte), and for a NUL or
/// invalid UTF-8 only once the bytes before the next word are odd.
pub(crate) struct Marks<'a> {
    skim: &'a Skim,
    data: &'a [u8],
    /// The next word, and whether the bytes up to it from where it was looked for are odd.
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
        let pos = pos.min(len);
        let (word, odd) = match self.word {
            Some((w, odd)) if w >= pos => (w, odd),
            _ => {
                let w = self.skim.find(data, pos);
                *self.word.insert((w, odd(&data[pos..w])))
            }
        };
        if !odd {
            return word; // no NUL and no byte over 0x7F before it
        }
        let rest = &data[pos..];
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
/// window of `max_line / 2` bytes at a time (`bytecount`'s SIMD count, chosen at run time:
/// a third cheaper than `memchr`'s on the bench file); only a
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
        let n = bytecount::count(piece, b'\n');
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
