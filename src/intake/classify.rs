//! Classifying one log line into a lock event `{namespace, op, outcome}`, or saying why not.
//!
//! Order: configured `[[rule]]`s (regexes on the raw line) first; then a prefilter (one
//! case-insensitive Aho-Corasick pass for lock words) so a line with none costs about a
//! memory scan; then the line's fields are read and the built-in rules look for a lock
//! noun, an outcome and an operation. Namespace: an explicit field, else a lock key (a
//! field, or a word of the text) matched against the patterns, else `log_phrases`, else
//! unknown. Label values only ever come from the config.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::fields::{self, Fields};
use crate::config::{Config, LogFormat};
use crate::glob::Glob;
use crate::vocab::{Op, Outcome};

/// What a line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A lock event. `namespace` indexes the config's namespaces; `None` is `unknown`.
    Event {
        namespace: Option<usize>,
        op: Op,
        outcome: Outcome,
        /// Which rule decided: `rule[N]` or the built-in signal that matched.
        by: String,
    },
    Ignored(&'static str),
    Malformed(&'static str),
}

/// Words that make a line worth reading: any lock failure mentions one of them.
const LOCK_WORDS: &[&str] = &[
    "lock",
    "lease",
    "mutex",
    "illegalmonitorstate",
    "not owned",
    "no longer owned",
    "token mismatch",
    "fenc",
];

/// Signals, strongest first; the first outcome with a matching phrase wins.
const OUTCOMES: &[(Outcome, &[&str])] = &[
    (
        Outcome::StaleFence,
        &[
            "stale fenc",
            "stale token",
            "fencing token rejected",
            "fence token rejected",
            "older fencing token",
            "lower fencing token",
        ],
    ),
    (
        Outcome::NotOwned,
        &[
            "not owned",
            "no longer owned",
            "locknotowned",
            "token mismatch",
            "owner mismatch",
            "not locked by current thread",
            "lock was lost",
            "lock lost",
            "stolen",
            "not held",
            "already expired",
            "not the owner",
            "does not own",
            "doesn't own",
        ],
    ),
    (Outcome::Timeout, &["deadline exceeded", "timed out", "timeout"]),
    (
        Outcome::Busy,
        &[
            "busy",
            "could not acquire",
            "couldn't acquire",
            "unable to acquire",
            "failed to acquire",
            "not obtained",
            "already locked",
            "held by another",
            "holds it",
            "is locked by",
            "already taken",
        ],
    ),
    (
        Outcome::Error,
        &[
            "fail",
            "error",
            "exception",
            "can't",
            "cannot",
            "could not",
            "unable",
            "refused",
            "denied",
            "abort",
        ],
    ),
];

const OPS: &[(Op, &[&str])] = &[
    (Op::Release, &["releas", "unlock"]),
    (
        Op::Renew,
        &[
            "renew",
            "extend",
            "refresh",
            "expiration",
            "keepalive",
            "keep-alive",
            "watchdog",
            "touch",
            "prolong",
        ],
    ),
    (Op::Acquire, &["acquir", "obtain", "trylock", "try_lock", "try lock"]),
    (Op::Write, &["write", "fenced", "commit"]),
];

struct Namespace {
    name: String,
    pattern: Glob,
    phrases: Vec<String>,
}

struct Rule {
    regex: regex::bytes::Regex,
    op: Op,
    outcome: Outcome,
    namespace: Option<usize>,
}

/// The rules of one config, built once; `classify` is then allocation-free for most lines.
pub struct Classifier {
    rules: Vec<Rule>,
    rule_set: regex::bytes::RegexSet,
    prefilter: AhoCorasick,
    namespaces: Vec<Namespace>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    #[error("rule[{index}]: {source}")]
    Rule { index: usize, source: regex::Error },
    #[error("cannot build the lock-word prefilter: {0}")]
    Prefilter(#[from] aho_corasick::BuildError),
}

impl Classifier {
    pub fn new(config: &Config) -> Result<Self, ClassifierError> {
        let rules = config
            .rules
            .iter()
            .enumerate()
            .map(|(index, r)| {
                Ok(Rule {
                    regex: regex::bytes::Regex::new(r.pattern.as_str())
                        .map_err(|source| ClassifierError::Rule { index, source })?,
                    op: r.op,
                    outcome: r.outcome,
                    namespace: r
                        .namespace
                        .as_ref()
                        .and_then(|n| config.namespaces.iter().position(|c| &c.name == n)),
                })
            })
            .collect::<Result<Vec<_>, ClassifierError>>()?;
        let rule_set = regex::bytes::RegexSet::new(rules.iter().map(|r| r.regex.as_str()))
            .map_err(|source| ClassifierError::Rule { index: 0, source })?;
        let prefilter = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(LOCK_WORDS)?;
        Ok(Classifier {
            rules,
            rule_set,
            prefilter,
            namespaces: config
                .namespaces
                .iter()
                .map(|n| Namespace {
                    name: n.name.clone(),
                    pattern: n.pattern.clone(),
                    phrases: n.log_phrases.clone(),
                })
                .collect(),
        })
    }

    /// How many namespaces are configured.
    pub fn namespace_count(&self) -> usize {
        self.namespaces.len()
    }

    /// The configured namespace of this name.
    pub fn namespace_index(&self, name: &str) -> Option<usize> {
        self.namespaces.iter().position(|n| n.name == name)
    }

    /// The namespace whose pattern matches the lock key `key`.
    pub fn namespace_of_key(&self, key: &str) -> Option<usize> {
        self.namespaces.iter().position(|n| n.pattern.matches(key.as_bytes()))
    }

    /// The namespace name of an event (`unknown` for `None`).
    pub fn namespace_name(&self, ns: Option<usize>) -> &str {
        ns.and_then(|i| self.namespaces.get(i))
            .map(|n| n.name.as_str())
            .unwrap_or(crate::vocab::UNKNOWN_NAMESPACE)
    }

    /// Classify one line (without its newline) read as `format`.
    pub fn classify(&self, line: &[u8], format: LogFormat) -> Verdict {
        if memchr::memchr(0, line).is_some() {
            return Verdict::Malformed("binary data (NUL bytes)");
        }
        let Ok(text) = std::str::from_utf8(line) else {
            return Verdict::Malformed("invalid UTF-8");
        };
        let rule = if self.rules.is_empty() {
            None
        } else {
            self.rule_set.matches(line).iter().next()
        };
        if rule.is_none() && !self.prefilter.is_match(line) {
            return match format {
                LogFormat::Json if !fields::looks_like_json(text) => Verdict::Malformed("not a JSON object"),
                _ => Verdict::Ignored("no lock word"),
            };
        }
        let f = match fields::read(text, format) {
            Ok(f) => f,
            Err(m) => return Verdict::Malformed(m.as_str()),
        };
        if let Some(i) = rule {
            let r = &self.rules[i];
            return Verdict::Event {
                namespace: r.namespace.or_else(|| self.namespace_of(&f, &lower(&f))),
                op: r.op,
                outcome: r.outcome,
                by: format!("rule[{i}]"),
            };
        }
        self.builtin(&f)
    }

    fn builtin(&self, f: &Fields<'_>) -> Verdict {
        let t = lower(f);
        if !has_lock_noun(&t) {
            return Verdict::Ignored("lock words only as an adjective (locked, unlocked): not about a lock");
        }
        let Some((outcome, signal)) = OUTCOMES
            .iter()
            .find_map(|(o, words)| words.iter().find(|w| t.contains(*w)).map(|w| (*o, *w)))
        else {
            return Verdict::Ignored("about a lock, but no failure in it");
        };
        // `t` begins with the message, lowercased (ASCII lowercasing keeps byte offsets).
        let op = first_op(&t[..f.message.len()])
            .or_else(|| first_op(&t))
            .or(match outcome {
                Outcome::NotOwned => Some(Op::Release),
                Outcome::Busy => Some(Op::Acquire),
                Outcome::StaleFence => Some(Op::Write),
                _ => None,
            });
        let Some(op) = op else {
            return Verdict::Ignored("a lock failure that names no operation (acquire, release, renew, write)");
        };
        Verdict::Event {
            namespace: self.namespace_of(f, &t),
            op,
            outcome,
            by: format!("built-in: \"{signal}\""),
        }
    }

    /// Explicit field, else a lock key (field or word) by pattern, else a phrase, else unknown.
    fn namespace_of(&self, f: &Fields<'_>, lowered: &str) -> Option<usize> {
        if let Some(ns) = &f.namespace {
            // Only configured names become labels; anything else is `unknown`.
            return self.namespace_index(ns);
        }
        let by_key = |k: &str| self.namespace_of_key(k);
        if let Some(i) = f.key.as_deref().and_then(by_key) {
            return Some(i);
        }
        let words = f
            .message
            .split(is_separator)
            .chain(f.error.as_deref().unwrap_or("").split(is_separator));
        for w in words {
            let w = w.trim_matches(|c: char| matches!(c, ':' | '.' | ',' | ';' | '\'' | '"'));
            if w.len() > 2
                && w.contains(':')
                && let Some(i) = by_key(w)
            {
                return Some(i);
            }
        }
        self.namespaces
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.phrases
                    .iter()
                    .filter_map(|p| lowered.find(p.as_str()))
                    .min()
                    .map(|at| (at, i))
            })
            .min()
            .map(|(_, i)| i)
    }
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '=' | '"' | '`')
}

/// Message and error, lowercased, as the built-in rules read them.
fn lower(f: &Fields<'_>) -> String {
    let mut t = String::with_capacity(f.message.len() + f.error.as_ref().map_or(0, |e| e.len() + 3));
    t.push_str(&f.message);
    if let Some(e) = &f.error {
        t.push_str(" | ");
        t.push_str(e);
    }
    t.make_ascii_lowercase();
    t
}

/// `lock` / `unlock` as a word (not `locked`, `unlocked`, `blocking`), or a library's name
/// for a lock failure.
fn has_lock_noun(t: &str) -> bool {
    const NAMED: &[&str] = &[
        "locknotowned",
        "illegalmonitorstate",
        "lease",
        "mutex",
        "token mismatch",
        "fencing token",
    ];
    if NAMED.iter().any(|w| t.contains(w)) {
        return true;
    }
    let b = t.as_bytes();
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&b[from..], b"lock") {
        let start = from + at;
        let end = start + 4;
        let before = start.checked_sub(1).map(|i| b[i]);
        let before_ok = match before {
            None => true,
            Some(c) if !c.is_ascii_alphanumeric() => true,
            // `unlock`, itself a word
            Some(b'n') => start >= 2 && b[start - 2] == b'u' && (start < 3 || !b[start - 3].is_ascii_alphanumeric()),
            _ => false,
        };
        let after_ok = b.get(end).is_none_or(|c| !c.is_ascii_alphabetic());
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

/// The operation named earliest in `t`.
fn first_op(t: &str) -> Option<Op> {
    OPS.iter()
        .filter_map(|(op, words)| words.iter().filter_map(|w| t.find(w)).min().map(|at| (at, *op)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, op)| op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_as_a_noun_only() {
        assert!(has_lock_noun("run lock renewal failed"));
        assert!(has_lock_noun("attempt to unlock lock"));
        assert!(has_lock_noun("lock: busy"));
        assert!(has_lock_noun("redis.exceptions.locknotownederror"));
        assert!(!has_lock_noun("user account locked after failed logins"));
        assert!(!has_lock_noun("cache unlocked for rebuild"));
        assert!(!has_lock_noun("non-blocking io"));
        assert!(!has_lock_noun("clock skew"));
    }

    #[test]
    fn earliest_operation_wins() {
        assert_eq!(first_op("lock acquire: approval lock busy"), Some(Op::Acquire));
        assert_eq!(first_op("payout unlock failed"), Some(Op::Release));
        assert_eq!(first_op("run lock renewal failed"), Some(Op::Renew));
        assert_eq!(first_op("can't update lock x expiration"), Some(Op::Renew));
        assert_eq!(first_op("payout batch aborted"), None);
    }
}
