//! HTML escaping for the pages lockwatch writes (the drill's HTML report, the status page
//! and the key page): text from outside — keys, owners, run data — never becomes markup.

/// `s` safe in HTML text and in a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            super::esc("<a href=\"x\">&'é"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;é"
        );
    }
}
