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

#[cfg(test)]
mod tests {
    use super::*;

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
