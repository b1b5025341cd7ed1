//! The phrasebook of lock failures (and of contention, a lock `busy` or timed out when
//! acquiring, which `vocab::EventClass` tells apart): the words that make a record about a
//! lock, the words of each outcome and of each operation, and the names real libraries give
//! their failures (exception classes, error types), each matched as whole words only.
//!
//! Nouns and outcomes are found in one Aho-Corasick pass over the record's text, lowercased
//! with `-`, tabs and line breaks read as spaces (so "already-expired" is "already
//! expired"); a match counts only between word boundaries, where a word is letters, digits
//! and `_` (so `socket_timeout=5` holds no "timeout"). Operations are also read inside
//! identifiers — `_processRefresh`, `do_release`, `unlockAsync` — whose camelCase and
//! snake_case parts are words of their own.

use std::collections::HashMap;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use foldhash::fast::FixedState;

use crate::vocab::{Op, Outcome};

/// What an outcome phrase says. Strongest first: the strongest found wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Said {
    StaleFence,
    NotOwned,
    /// A quorum of holders refused (redlock's `ExecutionError`): `busy` when acquiring,
    /// `not_owned` when renewing or releasing, and a release when no operation is named
    /// (a failed acquire names itself in its stack; a failed release may not).
    Quorum,
    /// Another holder has the lock (`ErrTaken`, `ErrNotObtained`, `Conflicted`): `busy`
    /// when acquiring or when no operation is named, `not_owned` when renewing or releasing.
    Held,
    Timeout,
    Busy,
    Error,
}

impl Said {
    /// The event for the operation `named` in the record (if any), or `None` when the
    /// failure names no operation and none can be assumed.
    pub(crate) fn resolve(self, named: Option<Op>) -> Option<(Op, Outcome)> {
        let other_holder = |unnamed: Op| match named.unwrap_or(unnamed) {
            Op::Acquire => (Op::Acquire, Outcome::Busy),
            op => (op, Outcome::NotOwned),
        };
        Some(match self {
            Said::StaleFence => (named.unwrap_or(Op::Write), Outcome::StaleFence),
            Said::NotOwned => (named.unwrap_or(Op::Release), Outcome::NotOwned),
            Said::Quorum => other_holder(Op::Release),
            Said::Held => other_holder(Op::Acquire),
            Said::Timeout => (named?, Outcome::Timeout),
            Said::Busy => (named.unwrap_or(Op::Acquire), Outcome::Busy),
            Said::Error => (named?, Outcome::Error),
        })
    }
}

/// Words that make a record about a lock: the nouns, and libraries' names for lock failures
/// (each holds one of the classifier's prefilter words).
pub(crate) const NOUNS: &[&str] = &[
    "lock",
    "locks",
    "unlock",
    "lease",
    "mutex",
    "redlock",
    "fencing token",
    "token mismatch",
    // Exception and error names of lock libraries (see tests/fixtures/libraries).
    "locknotownederror",
    "lockerror",
    "lockacquiringerror",
    "extendunlockedlock",
    "releaseunlockedlock",
    "illegalmonitorstateexception",
    "locktimeoutexception",
    "lockreleaseexception",
    "lockconflictexception",
    "errlocknotheld",
    "lockconflictedexception",
    "redlock::lockerror",
    "cannotacquirelockexception",
    // ShedLock's line for a run another node holds: "Not executing 'x'. It's locked."
    "it's locked",
];

const STALE_FENCE: &[&str] = &[
    "stale fence",
    "stale fencing",
    "stale token",
    "fencing token rejected",
    "fence token rejected",
    "older fencing token",
    "lower fencing token",
];

const NOT_OWNED: &[&str] = &[
    "not owned",
    "no longer owned",
    "locknotownederror",
    "token mismatch",
    "owner mismatch",
    "not locked by current thread",
    "lock was lost",
    "lock lost",
    "lost lock",
    "lost the lock",
    "lost mutex",
    "lost semaphore",
    "stolen",
    "not held",
    "already expired",
    "not the owner",
    "does not own",
    "doesn't own",
    "notacquired",
    "extendunlockedlock",
    "releaseunlockedlock",
    "errlocknotheld",
    "lockreleaseexception",
    "do not own",
    "could not renew mutex",
    "released in the store due to expiration",
];

const QUORUM: &[&str] = &["unable to achieve a quorum", "resourcelockederror"];

const HELD: &[&str] = &[
    "already taken",
    "errtaken",
    "not obtained",
    "errnotobtained",
    "conflicted",
    "someone else acquired",
    "someone else already acquired",
    "lockacquiringerror",
    "lockconflictexception",
    "lockconflictedexception",
    "redlock::lockerror",
];

const TIMEOUT: &[&str] = &[
    "deadline exceeded",
    "timed out",
    "timeout",
    "timeouterror",
    "timeoutexception",
    "locktimeoutexception",
];

const BUSY: &[&str] = &[
    "busy",
    "could not acquire",
    "couldn't acquire",
    "unable to acquire",
    "failed to acquire",
    "not acquired",
    "already locked",
    "held by another",
    "holds it",
    "is locked by",
    "it's locked",
    "errfailed",
];

const ERROR: &[&str] = &[
    "fail",
    "fails",
    "failed",
    "failure",
    "error",
    "errors",
    "exception",
    "can't",
    "cannot",
    "can not",
    "could not",
    "unable",
    "refused",
    "denied",
    "abort",
    "aborted",
    "errextendfailed",
];

/// Operation words, as whole words or as parts of identifiers.
const OP_WORDS: &[(Op, &[&str])] = &[
    (
        Op::Release,
        &[
            "release",
            "released",
            "releases",
            "releasing",
            "unlock",
            "unlocked",
            "unlocking",
            "unlocks",
            "unset",
        ],
    ),
    (
        Op::Renew,
        &[
            "renew",
            "renewal",
            "renewed",
            "renewing",
            "renews",
            "renewer",
            "extend",
            "extended",
            "extending",
            "extends",
            "extension",
            "refresh",
            "refreshed",
            "refreshing",
            "refreshes",
            "expiration",
            "keepalive",
            "watchdog",
            "touch",
            "prolong",
            "prolonged",
            "reacquire",
            "heartbeat",
        ],
    ),
    (
        Op::Acquire,
        &[
            "acquire",
            "acquired",
            "acquires",
            "acquiring",
            "acquisition",
            "obtain",
            "obtained",
            "obtaining",
            "trylock",
            "tryacquire",
            // Library failures that only one operation raises.
            "locktimeoutexception",
        ],
    ),
    (
        Op::Write,
        &["write", "writes", "writing", "fenced", "commit", "committed"],
    ),
];

/// The shortest and the longest operation word: a word of another length is none.
const OP_LENGTHS: (usize, usize) = {
    let (mut min, mut max, mut i) = (usize::MAX, 0, 0);
    while i < OP_WORDS.len() {
        let mut j = 0;
        while j < OP_WORDS[i].1.len() {
            let n = OP_WORDS[i].1[j].len();
            min = if n < min { n } else { min };
            max = if n > max { n } else { max };
            j += 1;
        }
        i += 1;
    }
    (min, max)
};

/// The operation `word` (lowercase) names.
fn op_of(word: &str) -> Option<Op> {
    static OPS: LazyLock<HashMap<&'static str, Op, FixedState>> = LazyLock::new(|| {
        OP_WORDS
            .iter()
            .flat_map(|(op, words)| words.iter().map(move |w| (*w, *op)))
            .collect()
    });
    if !(OP_LENGTHS.0..=OP_LENGTHS.1).contains(&word.len()) {
        return None;
    }
    OPS.get(word).copied()
}

/// What the phrasebook found in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) noun: bool,
    /// The strongest outcome phrase, and the phrase.
    pub(crate) said: Option<(Said, &'static str)>,
}

/// The nouns and outcome phrases, built once.
pub(crate) struct Phrasebook {
    automaton: AhoCorasick,
    /// The outcome phrases alone, for `may_say`.
    outcomes: AhoCorasick,
    /// Per pattern: is it a noun, and what outcome it says (a phrase can be both).
    meaning: Vec<(bool, Option<Said>, &'static str)>,
}

impl Phrasebook {
    pub(crate) fn new() -> Result<Self, aho_corasick::BuildError> {
        let said: [(Said, &[&'static str]); 7] = [
            (Said::StaleFence, STALE_FENCE),
            (Said::NotOwned, NOT_OWNED),
            (Said::Quorum, QUORUM),
            (Said::Held, HELD),
            (Said::Timeout, TIMEOUT),
            (Said::Busy, BUSY),
            (Said::Error, ERROR),
        ];
        let mut meaning: Vec<(bool, Option<Said>, &'static str)> = NOUNS.iter().map(|n| (true, None, *n)).collect();
        for (s, phrases) in said {
            for p in phrases {
                match meaning.iter_mut().find(|m| m.2 == *p) {
                    Some(m) if m.1.is_none() => m.1 = Some(s),
                    Some(_) => {}
                    None => meaning.push((false, Some(s), p)),
                }
            }
        }
        // DFAs: a few hundred states, walked over every record with a lock word.
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(meaning.iter().map(|m| m.2))?;
        let outcomes = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(meaning.iter().filter(|m| m.1.is_some()).map(|m| m.2))?;
        Ok(Phrasebook {
            automaton,
            outcomes,
            meaning,
        })
    }

    /// Whether `text` may hold an outcome phrase: `false` only when no text read from it
    /// without unescaping (a line's message and error, as substrings of it) can.
    pub(crate) fn may_say(&self, text: &str) -> bool {
        self.outcomes.is_match(&normal_bytes(text))
    }

    /// Nouns and the strongest outcome in `t`, a text made by `normalize`.
    pub(crate) fn find(&self, t: &str) -> Found {
        let b = t.as_bytes();
        let mut found = Found {
            noun: false,
            said: None,
        };
        for m in self.automaton.find_overlapping_iter(t) {
            if !is_boundary(b, m.start()) || !is_boundary(b, m.end()) || is_zero_count(&b[m.end()..]) {
                continue;
            }
            let (noun, said, phrase) = self.meaning[m.pattern().as_usize()];
            found.noun |= noun;
            if let Some(s) = said
                && found.said.is_none_or(|(best, _)| s < best)
            {
                found.said = Some((s, phrase));
            }
        }
        found
    }
}

/// Whether a phrase is followed by a count of zero (`Error: 0`, `failed=0`): a tally, not
/// a failure.
fn is_zero_count(after: &[u8]) -> bool {
    let after = after.trim_ascii_start();
    let Some(rest) = after.strip_prefix(b":").or_else(|| after.strip_prefix(b"=")) else {
        return false;
    };
    let rest = rest.trim_ascii_start();
    rest.first() == Some(&b'0') && !rest.get(1).is_some_and(u8::is_ascii_alphanumeric)
}

/// Whether offset `i` of `b` is a word boundary: a word is ASCII letters, digits and `_`.
fn is_boundary(b: &[u8], i: usize) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let before = i.checked_sub(1).and_then(|j| b.get(j)).is_some_and(|c| word(*c));
    let after = b.get(i).is_some_and(|c| word(*c));
    !(before && after)
}

/// `text` lowercased, with `-`, tabs, carriage returns and line breaks as spaces: the same
/// length, so offsets carry over. Only ASCII bytes change, so it is `normal_bytes(text)`.
pub(crate) fn normalize(text: &str) -> String {
    let lowered = text.to_ascii_lowercase();
    match lowered.bytes().any(|b| normal_byte(b) != b) {
        true => lowered.replace(['-', '\t', '\r', '\n'], " "),
        false => lowered,
    }
}

/// `normalize`'s bytes, made a byte at a time (a loop the compiler vectorises): for a
/// search that needs no `str`.
pub(crate) fn normal_bytes(text: &str) -> Vec<u8> {
    text.bytes().map(normal_byte).collect()
}

fn normal_byte(b: u8) -> u8 {
    match b {
        b'-' | b'\t' | b'\r' | b'\n' => b' ',
        b => b.to_ascii_lowercase(),
    }
}

/// The operation named earliest in `text` (original case): (offset, op).
pub(crate) fn first_op(text: &str) -> Option<(usize, Op)> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut lowered = String::new();
    while i < b.len() {
        if !b[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        // The whole run (`tryLock`), then its camelCase parts (`process` `Refresh`).
        let run = &text[start..i];
        if run.len() > 32 || run.len() < OP_LENGTHS.0 {
            continue; // nor is any part of it an operation word
        }
        lowered.clear();
        lowered.push_str(run);
        lowered.make_ascii_lowercase();
        if let Some(op) = op_of(&lowered) {
            return Some((start, op));
        }
        let mut part = start;
        for j in start + 1..=i {
            if j == i || (b[j].is_ascii_uppercase() && b[j - 1].is_ascii_lowercase()) {
                if (part, j) != (start, i)
                    && let Some(op) = op_of(&lowered[part - start..j - start])
                {
                    return Some((part, op));
                }
                part = j;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn said(t: &str) -> Option<(Said, &'static str)> {
        Phrasebook::new().unwrap().find(&normalize(t)).said
    }

    #[test]
    fn every_operation_word_names_its_operation_once() {
        let mut seen = std::collections::HashSet::new();
        for (op, words) in OP_WORDS {
            for w in *words {
                assert!(seen.insert(*w), "{w} twice");
                assert_eq!(op_of(w), Some(*op), "{w}");
                assert_eq!(w.to_ascii_lowercase(), *w);
            }
        }
        assert_eq!(OP_LENGTHS, (5, 20));
        assert_eq!(first_op("lock RELEASE failed"), Some((5, Op::Release)));
        assert_eq!(first_op("a tryLock b"), Some((2, Op::Acquire)));
        assert_eq!(first_op("processRefresh"), Some((7, Op::Renew)));
        assert_eq!(first_op("x unlockX y"), Some((2, Op::Release)));
        assert_eq!(first_op("x unlockingly y"), None);
        assert_eq!(first_op("set get put"), None);
    }

    #[test]
    fn normalize_and_normal_bytes_agree() {
        for t in ["Lock NOT-owned\tÄrger\r\nüber", "", "plain", "—-\u{2028}Ǆ", "A\u{0}B"] {
            let n = normalize(t);
            assert_eq!(n.as_bytes(), normal_bytes(t), "{t:?}");
            assert_eq!(n.len(), t.len());
        }
        assert_eq!(normalize("Not-Owned\tX"), "not owned x");
        // The reading it replaced, a char at a time.
        let by_chars = |t: &str| -> String {
            t.chars()
                .map(|c| match c {
                    '-' | '\t' | '\r' | '\n' => ' ',
                    c => c.to_ascii_lowercase(),
                })
                .collect()
        };
        let mut rng = crate::intake::test_rng::Xorshift(0x0bad_cafe_f00d_1234);
        let alphabet = [
            "A", "z", "-", "\t", "\r", "\n", " ", "É", "ß", "—", "\u{0}", "K", "\u{212a}", "_",
        ];
        for _ in 0..2000 {
            let t: String = (0..rng.below(40))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            assert_eq!(normalize(&t), by_chars(&t), "{t:?}");
            assert_eq!(normal_bytes(&t), by_chars(&t).into_bytes(), "{t:?}");
        }
    }

    #[test]
    fn outcome_words_are_whole_words() {
        assert_eq!(said("masters=(socket_timeout=5, orig_socket_timeout=5)"), None);
        assert_eq!(said("read timeout after 5s"), Some((Said::Timeout, "timeout")));
        assert_eq!(
            said("Cannot extend an already-expired lock."),
            Some((Said::NotOwned, "already expired"))
        );
        assert_eq!(said("failover done"), None);
        assert_eq!(said("Acquired: 1, Conflicted: 0, Error: 0, failed=0"), None);
        assert_eq!(said("Conflicted: 1, Error: 0"), Some((Said::Held, "conflicted")));
        assert_eq!(said("LockNotOwnedErrors"), None);
        assert_eq!(
            said("redis.exceptions.LockNotOwnedError: Cannot release"),
            Some((Said::NotOwned, "locknotownederror"))
        );
        let book = Phrasebook::new().unwrap();
        assert!(book.find(&normalize("Lock(lock:payout:1)")).noun);
        assert!(
            !book
                .find(&normalize("user account locked; clock skew; _lock_renewer"))
                .noun
        );
    }

    #[test]
    fn operations_inside_identifiers() {
        assert_eq!(first_op("at Lock._processRefresh (Lock.js:68)"), Some((16, Op::Renew)));
        assert_eq!(first_op("in do_release"), Some((6, Op::Release)));
        assert_eq!(first_op("RedissonBaseLock.unlockAsync0"), Some((17, Op::Release)));
        assert_eq!(first_op("tryLock(10, SECONDS)"), Some((0, Op::Acquire)));
        assert_eq!(first_op("run lock renewal failed"), Some((9, Op::Renew)));
        assert_eq!(first_op("payout batch aborted; rewrite later"), None);
    }
}
