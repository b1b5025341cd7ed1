//! Redis glob patterns, with the semantics of `SCAN MATCH` (`stringmatchlen` in Redis):
//! `*`, `?`, `[abc]`, `[^a-z]`, and `\` escapes.
//!
//! Besides matching, this module answers the config's question "can one key match two
//! namespace patterns?" by searching the product of the two patterns, and returns an
//! example key when they do. It knows nothing of namespaces or keys in Redis.

use std::collections::VecDeque;
use std::fmt;

/// A set of bytes, one bit each.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ByteSet([u64; 4]);

impl ByteSet {
    const EMPTY: ByteSet = ByteSet([0; 4]);
    const ALL: ByteSet = ByteSet([u64::MAX; 4]);

    fn single(b: u8) -> Self {
        let mut s = Self::EMPTY;
        s.insert(b);
        s
    }
    fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }
    fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }
    fn intersect(&self, other: &Self) -> Self {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }
    fn complement(&self) -> Self {
        ByteSet(std::array::from_fn(|i| !self.0[i]))
    }
    /// A member, preferring something readable for example keys.
    fn pick(&self) -> Option<u8> {
        (b'a'..=b'z')
            .chain(b'0'..=b'9')
            .chain(32u8..127)
            .chain(0u8..=255)
            .find(|b| self.contains(*b))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes, empty included.
    Star,
    /// One byte out of a set (a literal, `?`, or a bracket class).
    One(ByteSet),
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("empty pattern")]
    Empty,
    #[error("unterminated `[` at byte {0}")]
    UnterminatedClass(usize),
    #[error("pattern ends with a lone `\\`")]
    TrailingEscape,
    #[error(
        "`-]` at byte {0}: Redis reads it as a range up to `]` that swallows the rest of the pattern; write `\\-` for a dash"
    )]
    DashBeforeClose(usize),
}

/// A compiled Redis glob.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    tokens: Vec<Token>,
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.source)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Glob {
    /// Compile a pattern. Unlike Redis, which matches a malformed pattern in some lenient
    /// way, a malformed pattern is refused: in a config it is almost always a typo.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        let p = pattern.as_bytes();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                b'*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                    i += 1;
                }
                b'?' => {
                    tokens.push(Token::One(ByteSet::ALL));
                    i += 1;
                }
                b'\\' => {
                    let b = *p.get(i + 1).ok_or(GlobError::TrailingEscape)?;
                    tokens.push(Token::One(ByteSet::single(b)));
                    i += 2;
                }
                b'[' => {
                    let (set, next) = parse_class(p, i)?;
                    tokens.push(Token::One(set));
                    i = next;
                }
                b => {
                    tokens.push(Token::One(ByteSet::single(b)));
                    i += 1;
                }
            }
        }
        Ok(Glob {
            source: pattern.to_string(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Does `key` match, as `SCAN MATCH` would decide?
    pub fn matches(&self, key: &[u8]) -> bool {
        // Greedy two-pointer match with backtracking to the last star: O(n·m) worst case.
        let (mut t, mut k) = (0usize, 0usize);
        let mut backtrack: Option<(usize, usize)> = None;
        while k < key.len() {
            match self.tokens.get(t) {
                Some(Token::Star) => {
                    backtrack = Some((t, k));
                    t += 1;
                }
                Some(Token::One(set)) if set.contains(key[k]) => {
                    t += 1;
                    k += 1;
                }
                _ => match backtrack {
                    Some((bt, bk)) => {
                        t = bt + 1;
                        k = bk + 1;
                        backtrack = Some((bt, bk + 1));
                    }
                    None => return false,
                },
            }
        }
        self.tokens[t..].iter().all(|tok| *tok == Token::Star)
    }

    /// When the pattern is `prefix*suffix` with literal prefix and suffix (the usual shape
    /// of lock patterns), return them; the part a key has in place of `*` is its id.
    pub fn single_wildcard(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let star = self.tokens.iter().position(|t| *t == Token::Star)?;
        let literal = |toks: &[Token]| -> Option<Vec<u8>> {
            toks.iter()
                .map(|t| match t {
                    Token::One(set) => {
                        let b = set.pick()?;
                        (*set == ByteSet::single(b)).then_some(b)
                    }
                    Token::Star => None,
                })
                .collect()
        };
        Some((literal(&self.tokens[..star])?, literal(&self.tokens[star + 1..])?))
    }

    /// A key that both patterns match, or `None` when no key can match both.
    pub fn overlap(&self, other: &Glob) -> Option<Vec<u8>> {
        let (a, b) = (&self.tokens, &other.tokens);
        let width = b.len() + 1;
        let idx = |i: usize, j: usize| i * width + j;
        // parent[state] = (previous state, byte consumed or None for a star skip)
        let mut parent: Vec<Option<(usize, Option<u8>)>> = vec![None; (a.len() + 1) * width];
        let mut seen = vec![false; (a.len() + 1) * width];
        let mut queue = VecDeque::from([(0usize, 0usize)]);
        seen[0] = true;
        while let Some((i, j)) = queue.pop_front() {
            if i == a.len() && j == b.len() {
                let mut key = Vec::new();
                let mut at = idx(i, j);
                while let Some((prev, byte)) = parent[at] {
                    key.extend(byte);
                    at = prev;
                }
                key.reverse();
                return Some(key);
            }
            let mut next: Vec<((usize, usize), Option<u8>)> = Vec::with_capacity(3);
            if a.get(i) == Some(&Token::Star) {
                next.push(((i + 1, j), None));
            }
            if b.get(j) == Some(&Token::Star) {
                next.push(((i, j + 1), None));
            }
            if let (Some(ta), Some(tb)) = (a.get(i), b.get(j)) {
                let set = |t: &Token| match t {
                    Token::Star => ByteSet::ALL,
                    Token::One(s) => *s,
                };
                let step = |t: &Token, pos: usize| if *t == Token::Star { pos } else { pos + 1 };
                let both_stars = *ta == Token::Star && *tb == Token::Star;
                if !both_stars && let Some(byte) = set(ta).intersect(&set(tb)).pick() {
                    next.push(((step(ta, i), step(tb, j)), Some(byte)));
                }
            }
            for ((ni, nj), byte) in next {
                if !seen[idx(ni, nj)] {
                    seen[idx(ni, nj)] = true;
                    parent[idx(ni, nj)] = Some((idx(i, j), byte));
                    queue.push_back((ni, nj));
                }
            }
        }
        None
    }
}

/// Parse `[...]` starting at `p[start] == b'['`; return the set and the index after `]`.
fn parse_class(p: &[u8], start: usize) -> Result<(ByteSet, usize), GlobError> {
    let mut i = start + 1;
    let negate = p.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut set = ByteSet::EMPTY;
    loop {
        let Some(&b) = p.get(i) else {
            return Err(GlobError::UnterminatedClass(start));
        };
        match b {
            b']' => break,
            b'\\' => {
                let e = *p.get(i + 1).ok_or(GlobError::UnterminatedClass(start))?;
                set.insert(e);
                i += 2;
            }
            // Redis takes `x-]` as the range x..']' and reads on past the `]`; refuse it.
            _ if p.get(i + 1) == Some(&b'-') && p.get(i + 2) == Some(&b']') => {
                return Err(GlobError::DashBeforeClose(i + 1));
            }
            _ if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some() => {
                let (mut lo, mut hi) = (b, p[i + 2]);
                if lo > hi {
                    std::mem::swap(&mut lo, &mut hi); // Redis accepts reversed ranges
                }
                for c in lo..=hi {
                    set.insert(c);
                }
                i += 3;
            }
            _ => {
                set.insert(b);
                i += 1;
            }
        }
    }
    Ok((if negate { set.complement() } else { set }, i + 1))
}

/// `literal` as a glob that matches exactly it: `*`, `?`, `[`, `]` and `\` escaped with a
/// backslash (for a `SCAN MATCH` built around literal parts of a pattern).
pub fn escape(literal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(literal.len());
    for &b in literal {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, k: &str) -> bool {
        Glob::new(p).unwrap().matches(k.as_bytes())
    }

    #[test]
    fn matches_like_redis() {
        assert!(m("cordum:wf:run:lock:*", "cordum:wf:run:lock:42"));
        assert!(m("cordum:wf:run:lock:*", "cordum:wf:run:lock:"));
        assert!(!m("cordum:wf:run:lock:*", "cordum:wf:run:fence:42"));
        assert!(m("h?llo", "hello") && m("h?llo", "hallo") && !m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hello") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"), "reversed range, as Redis accepts");
        assert!(m("a\\*b", "a*b") && !m("a\\*b", "axb"));
        assert!(m("[\\]]", "]"));
        assert!(m("*a*b*", "xxaxxbxx") && !m("*a*b*", "xxbxxaxx"));
        assert!(m("*", "") && !m("?", ""));
        assert!(m("a**b", "ab"));
        assert!(m("x[-a]", "x-"), "a leading dash is literal");
    }

    #[test]
    fn refuses_malformed_patterns() {
        assert_eq!(Glob::new(""), Err(GlobError::Empty));
        assert_eq!(Glob::new("x[a-]y"), Err(GlobError::DashBeforeClose(3)));
        assert_eq!(Glob::new("lock:[ab"), Err(GlobError::UnterminatedClass(5)));
        assert_eq!(Glob::new("lock:\\"), Err(GlobError::TrailingEscape));
        assert_eq!(Glob::new("x[a-]y"), Err(GlobError::DashBeforeClose(3)));
    }

    #[test]
    fn overlap_finds_a_witness_or_proves_disjoint() {
        let g = |p: &str| Glob::new(p).unwrap();
        let w = g("lock:*").overlap(&g("lock:wf:*")).unwrap();
        assert!(g("lock:*").matches(&w) && g("lock:wf:*").matches(&w));
        assert_eq!(g("cordum:wf:run:lock:*").overlap(&g("cordum:approval:lock:*")), None);
        assert_eq!(g("a:[0-4]*").overlap(&g("a:[5-9]*")), None);
        let w = g("*:lock").overlap(&g("job:*")).unwrap();
        assert!(g("*:lock").matches(&w) && g("job:*").matches(&w));
        assert_eq!(g("a?").overlap(&g("a")), None);
    }

    #[test]
    fn single_wildcard_splits_literal_prefix_and_suffix() {
        let g = Glob::new("payout:batch:lock:*").unwrap();
        assert_eq!(g.single_wildcard(), Some((b"payout:batch:lock:".to_vec(), vec![])));
        let g = Glob::new("a:*:lock").unwrap();
        assert_eq!(g.single_wildcard(), Some((b"a:".to_vec(), b":lock".to_vec())));
        assert_eq!(Glob::new("a:?:*").unwrap().single_wildcard(), None);
        assert_eq!(Glob::new("a:*:*").unwrap().single_wildcard(), None);
        assert_eq!(Glob::new("a:b").unwrap().single_wildcard(), None);
    }

    #[test]
    fn an_escaped_literal_matches_only_itself() {
        let literal = b"a*b?[c]\\d";
        let g = Glob::new(std::str::from_utf8(&escape(literal)).unwrap()).unwrap();
        assert!(g.matches(literal));
        assert!(!g.matches(b"aXb?[c]\\d") && !g.matches(b"a*bX[c]\\d") && !g.matches(b"a*b?c\\d"));
    }
}
