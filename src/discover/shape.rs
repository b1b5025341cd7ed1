//! Shapes, never values: what a sampled value looks like (a UUID, hex, `host:pid:thread`,
//! an integer, JSON…) and the template of a key (`orders:lock:*`: the segments that vary
//! replaced by `*`). Pure; `families` groups keys by template and judges them.

use serde::Serialize;

use crate::access::survey::{HEAD, Kind};

/// What a value looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    Uuid,
    /// Hex digits, 16 or more.
    Hex,
    /// `host:pid:thread` and its kin: a name and a number joined by colons.
    HostPid,
    /// A word of 8–64 letters and digits (both), `-`, `_`, `+`, `/`, `=`: `wf-2-7-9c4c3537`.
    Token,
    Integer,
    Json,
    /// Printable text that is none of the above.
    Text,
    Binary,
    /// A hash whose fields are `<uuid>:<threadId>` with integer counts: Redisson's lock.
    RedissonHash,
    Hash,
    Other,
}

impl Shape {
    /// Whether a lock's owner token could look like this.
    pub fn token_like(self) -> bool {
        matches!(self, Shape::Uuid | Shape::Hex | Shape::HostPid | Shape::Token)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Shape::Uuid => "UUID",
            Shape::Hex => "hex",
            Shape::HostPid => "host:pid:thread",
            Shape::Token => "random token",
            Shape::Integer => "integer",
            Shape::Json => "JSON",
            Shape::Text => "text",
            Shape::Binary => "binary",
            Shape::RedissonHash => "Redisson hash (uuid:threadId → count)",
            Shape::Hash => "hash",
            Shape::Other => "other type",
        }
    }
}

/// The shape of a sampled value.
pub fn of(kind: &Kind) -> Shape {
    match kind {
        Kind::String { len, head } => string_shape(*len, head),
        Kind::Hash { len, fields } => {
            let redisson =
                *len <= 16 && !fields.is_empty() && fields.iter().all(|(f, v)| redisson_field(f) && integer(v));
            if redisson { Shape::RedissonHash } else { Shape::Hash }
        }
        Kind::Other(_) => Shape::Other,
    }
}

fn string_shape(len: usize, head: &[u8]) -> Shape {
    let whole = len <= HEAD;
    let Ok(text) = std::str::from_utf8(head) else {
        return Shape::Binary;
    };
    if text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Shape::Binary;
    }
    let t = text.trim();
    if !whole || t.is_empty() {
        return if t.starts_with('{') || t.starts_with('[') {
            Shape::Json
        } else {
            Shape::Text
        };
    }
    if integer(t.as_bytes()) {
        Shape::Integer
    } else if uuid(t) {
        Shape::Uuid
    } else if t.len() >= 16 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Shape::Hex
    } else if host_pid(t) {
        Shape::HostPid
    } else if (t.starts_with('{') && t.ends_with('}')) || (t.starts_with('[') && t.ends_with(']')) {
        Shape::Json
    } else if (8..=64).contains(&t.len())
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_+/=".contains(&b))
        && t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes().any(|b| b.is_ascii_alphabetic())
    {
        Shape::Token
    } else {
        Shape::Text
    }
}

fn integer(v: &[u8]) -> bool {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    !digits.is_empty() && digits.len() <= 20 && digits.iter().all(u8::is_ascii_digit)
}

fn uuid(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `<uuid>:<threadId>` (Redisson's `RLock` field).
fn redisson_field(f: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(f) else { return false };
    match s.rsplit_once(':') {
        Some((id, thread)) => uuid(id) && integer(thread.as_bytes()),
        None => false,
    }
}

/// `host:pid`, `host:pid:thread`: 2–4 colon-separated words, one of them a number, the first a
/// host name (for two parts it must look like one: with a digit, `-` or `.`).
fn host_pid(t: &str) -> bool {
    let parts: Vec<&str> = t.split(':').collect();
    let word = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    let hostish = parts
        .first()
        .is_some_and(|h| parts.len() > 2 || h.bytes().any(|b| b.is_ascii_digit() || b == b'-' || b == b'.'));
    (2..=4).contains(&parts.len())
        && parts.iter().all(word)
        && parts[1..].iter().any(|p| integer(p.as_bytes()))
        && hostish
}

/// The template of a key: each segment (between `:` or `/`) that looks like an id becomes
/// `*`, and a segment ending in an id after `-` or `_` keeps its head (`order-*`). Glob
/// special characters of the literal parts are escaped.
pub fn template(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let mut out = String::with_capacity(key.len());
    let mut segment = String::new();
    for c in key.chars() {
        if c == ':' || c == '/' {
            out.push_str(&generalise(&segment));
            out.push(c);
            segment.clear();
        } else {
            segment.push(c);
        }
    }
    out.push_str(&generalise(&segment));
    out
}

fn generalise(segment: &str) -> String {
    // A hash tag's braces stay: `{order:42}` → `{order:*}`.
    let open = segment.starts_with('{');
    let close = segment.ends_with('}') && segment.len() > usize::from(open);
    let inner = &segment[usize::from(open)..segment.len() - usize::from(close)];
    let split = inner.rfind(['-', '_', '.']).filter(|at| *at > 0);
    let body = if let Some(at) = split
        && !inner[..at].bytes().any(|b| b.is_ascii_digit())
        && id_like(&inner[at + 1..])
    {
        format!("{}*", escape(&inner[..=at]))
    } else if id_like(inner) {
        "*".to_string()
    } else {
        escape(inner)
    };
    format!("{}{body}{}", if open { "{" } else { "" }, if close { "}" } else { "" })
}

/// A segment that names one thing among many: a number, a UUID, hex, a word with digits.
fn id_like(s: &str) -> bool {
    if s.is_empty() {
        return false;
    }
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    integer(s.as_bytes())
        || uuid(s)
        || (s.len() >= 8 && s.bytes().all(|b| b.is_ascii_hexdigit()) && digits > 0)
        || (digits > 0 && s.len() >= 4)
        || s.contains('@')
        || s.len() > 24
}

fn escape(s: &str) -> String {
    String::from_utf8_lossy(&crate::glob::escape(s.as_bytes())).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Shape {
        of(&Kind::String {
            len: v.len(),
            head: v.as_bytes().to_vec(),
        })
    }

    #[test]
    fn value_shapes() {
        assert_eq!(s("7f1c6a2e-3b4d-4c5e-8f90-a1b2c3d4e5f6"), Shape::Uuid);
        assert_eq!(s("0123456789abcdef0123456789abcdef"), Shape::Hex);
        assert_eq!(s("web-1:4312:main"), Shape::HostPid);
        assert_eq!(s("worker-3:1234"), Shape::HostPid);
        assert_eq!(s("value:12"), Shape::Text);
        assert_eq!(s("42"), Shape::Integer);
        assert_eq!(s(r#"{"user": 1}"#), Shape::Json);
        assert_eq!(s("hello world"), Shape::Text);
        assert_eq!(s("aZ3_kq9XbT0pLm2Ws8"), Shape::Token);
        assert_eq!(s("wf-2-7-9c4c3537"), Shape::Token);
        assert_eq!(s("12345678-"), Shape::Text);
        assert_eq!(s("\u{1}\u{2}"), Shape::Binary);
        let long = Kind::String {
            len: HEAD + 1,
            head: vec![b'a'; HEAD],
        };
        assert_eq!(of(&long), Shape::Text);
        let redisson = Kind::Hash {
            len: 1,
            fields: vec![(b"7f1c6a2e-3b4d-4c5e-8f90-a1b2c3d4e5f6:57".to_vec(), b"1".to_vec())],
        };
        assert_eq!(of(&redisson), Shape::RedissonHash);
        let profile = Kind::Hash {
            len: 2,
            fields: vec![(b"name".to_vec(), b"x".to_vec())],
        };
        assert_eq!(of(&profile), Shape::Hash);
    }

    #[test]
    fn templates() {
        assert_eq!(template(b"orders:lock:12345"), "orders:lock:*");
        assert_eq!(template(b"lock:7f1c6a2e-3b4d-4c5e-8f90-a1b2c3d4e5f6"), "lock:*");
        assert_eq!(template(b"lock:nightly-report"), "lock:nightly-report");
        assert_eq!(template(b"lock:order-42"), "lock:order-*");
        assert_eq!(template(b"job:{user42}:lock"), "job:{*}:lock");
        assert_eq!(template(b"cache/v2/item/99"), "cache/v2/item/*");
        assert_eq!(template(b"a*b:1"), "a\\*b:*");
    }
}
