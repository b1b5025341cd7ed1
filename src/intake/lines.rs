//! Splitting a byte stream into lines with a length bound: a line over the bound is
//! reported as too long and skipped up to its newline, never buffered whole.

use std::io::BufRead;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line without its newline (and without a `\r` before it).
    Text(&'a [u8]),
    /// A line longer than the bound, skipped: its length in bytes.
    TooLong(usize),
}

pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    max: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, max: usize) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
            max,
        }
    }

    /// The next line; `None` at the end. A last line without a newline counts as a line.
    pub fn next_line(&mut self) -> std::io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut skipped: Option<usize> = None;
        loop {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            match &mut skipped {
                Some(n) => *n += take,
                None if self.buf.len() + take > self.max => skipped = Some(self.buf.len() + take),
                None => self.buf.extend_from_slice(&chunk[..take]),
            }
            self.reader.consume(take + usize::from(done));
            if done {
                return Ok(Some(self.finish(skipped)));
            }
        }
        if self.buf.is_empty() && skipped.is_none() {
            return Ok(None);
        }
        Ok(Some(self.finish(skipped)))
    }

    fn finish(&mut self, skipped: Option<usize>) -> Line<'_> {
        if let Some(n) = skipped {
            self.buf.clear();
            return Line::TooLong(n);
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Line::Text(&self.buf)
    }
}

/// Splits chunks of a stream into lines for readers that hold their own buffer (the file
/// tailer reads at an offset; a push body arrives whole). Remembers only whether it is
/// skipping the rest of an over-long line, so its state fits in a saved offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Splitter {
    /// Inside a line already counted as too long: drop bytes up to its newline.
    pub skipping: bool,
}

impl Splitter {
    /// Call `on_line` for each complete line of `data` (lines longer than `max` as
    /// `TooLong`) and return how many bytes were consumed. An unfinished last line is left
    /// for the next call, unless `eof` says no more will come or it is already over `max`.
    pub fn feed(&mut self, data: &[u8], max: usize, eof: bool, mut on_line: impl FnMut(Line<'_>)) -> usize {
        let mut pos = 0;
        if self.skipping {
            match memchr::memchr(b'\n', data) {
                Some(nl) => {
                    self.skipping = false;
                    pos = nl + 1;
                }
                None => return data.len(),
            }
        }
        let start = pos;
        for nl in memchr::memchr_iter(b'\n', &data[start..]).map(|i| start + i) {
            on_line(bounded(&data[pos..nl], max));
            pos = nl + 1;
        }
        let rest = &data[pos..];
        if rest.len() > max {
            on_line(Line::TooLong(rest.len()));
            self.skipping = !eof;
            return data.len();
        }
        if eof && !rest.is_empty() {
            on_line(bounded(rest, max));
            return data.len();
        }
        pos
    }
}

fn bounded(line: &[u8], max: usize) -> Line<'_> {
    if line.len() > max {
        return Line::TooLong(line.len());
    }
    Line::Text(line.strip_suffix(b"\r").unwrap_or(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &mut Splitter, data: &[u8], eof: bool) -> (usize, Vec<String>) {
        let mut out = Vec::new();
        let n = s.feed(data, 8, eof, |l| {
            out.push(match l {
                Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
                Line::TooLong(n) => format!("<{n}>"),
            })
        });
        (n, out)
    }

    #[test]
    fn splitter_waits_for_newlines_and_skips_long_lines() {
        let mut s = Splitter::default();
        assert_eq!(
            split(&mut s, b"a\r\nbb\npart", false),
            (6, vec!["a".into(), "bb".into()])
        );
        assert_eq!(split(&mut s, b"partial\n", false), (8, vec!["partial".into()]));
        // 9 bytes without a newline: over the bound, counted once, then skipped to its end.
        assert_eq!(split(&mut s, b"123456789", false), (9, vec!["<9>".into()]));
        assert!(s.skipping);
        assert_eq!(split(&mut s, b"more", false), (4, vec![]));
        assert_eq!(split(&mut s, b"tail\nok\n", false), (8, vec!["ok".into()]));
        assert!(!s.skipping);
        assert_eq!(
            split(&mut s, b"0123456789\nx", true),
            (12, vec!["<10>".into(), "x".into()])
        );
    }

    #[test]
    fn bounded_lines() {
        let input = b"short\r\n0123456789abcdef\nok\nlast";
        let mut l = Lines::new(std::io::BufReader::with_capacity(4, &input[..]), 8);
        assert_eq!(l.next_line().unwrap(), Some(Line::Text(b"short")));
        assert_eq!(l.next_line().unwrap(), Some(Line::TooLong(16)));
        assert_eq!(l.next_line().unwrap(), Some(Line::Text(b"ok")));
        assert_eq!(l.next_line().unwrap(), Some(Line::Text(b"last")));
        assert_eq!(l.next_line().unwrap(), None);
    }
}
