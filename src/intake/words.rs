//! Words in a record's text as the classifier reads a key: the runs between separators
//! (whitespace, brackets, `=`, quotes), found around an offset by chars, or by bytes where
//! the text is ASCII.

/// Whether `c` ends a word.
pub(crate) fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '=' | '"' | '`')
}

/// The word (between `is_separator`s) around offset `at` of `text`: its start and end.
pub(crate) fn word_around(text: &str, at: usize) -> (usize, usize) {
    let start = text[..at]
        .char_indices()
        .rev()
        .find(|(_, c)| is_separator(*c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let end = text[at..].find(is_separator).map_or(text.len(), |i| at + i);
    (start, end)
}

/// `word_around` for an ASCII text, a byte at a time: its separators are ASCII's.
pub(crate) fn word_around_ascii(text: &[u8], at: usize) -> (usize, usize) {
    // `is_separator` for an ASCII byte: `char::is_whitespace` is `\t` to `\r` and the space.
    let sep = |b: &u8| {
        matches!(
            b,
            b'\t'..=b'\r' | b' ' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>' | b'=' | b'"' | b'`'
        )
    };
    let start = text[..at].iter().rposition(sep).map_or(0, |i| i + 1);
    let end = text[at..].iter().position(sep).map_or(text.len(), |i| at + i);
    (start, end)
}
