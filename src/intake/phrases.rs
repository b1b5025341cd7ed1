//! The phrasebook of lock failures (and of contention, a lock `busy` or timed out when
//! acquiring, which `vocab::EventClass` tells apart): the words that make a record about a
//! lock, the words of each outcome and of each operation, and the names real libraries give
//! their failures (exception classes, error types), each matched as whole words only.
//!
//! Nouns and outcomes are found in one Aho-Corasick pass over the record's text, lowercased
//! with `-`, tabs and line breaks read as spaces (so "already-expired" is "already
//! expired"); a match counts only between word boundaries, where a word is letters, digits
//! and `_` (so `socket_timeout=5` holds no "timeout"). The operation a record names is
//! `ops`'s.

use std::collections::HashMap;

use foldhash::fast::FixedState;

use super::classify::LOCK_WORDS;
use super::factors::factors;
use super::literals::{Literals, LiteralsError};
use super::ops;
use super::table::{Table, TableError};
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

/// What the phrasebook found in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) noun: bool,
    /// The strongest outcome phrase, and the phrase.
    pub(crate) said: Option<(Said, &'static str)>,
    /// The operation named earliest (`ops::is_read_as_word`), and where.
    pub(crate) op: Option<(usize, Op)>,
}

/// What one of the automaton's patterns means: a noun, an outcome, an operation (a
/// pattern can be more than one).
#[derive(Debug, Clone, Copy)]
struct Meaning {
    phrase: &'static str,
    noun: bool,
    said: Option<Said>,
    op: Option<Op>,
}

/// Why the phrasebook cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum PhrasebookError {
    #[error(transparent)]
    Automaton(#[from] TableError),
    #[error(transparent)]
    Literals(#[from] LiteralsError),
}

/// The nouns, outcome phrases and operation words, built once.
pub(crate) struct Phrasebook {
    /// Every pattern, overlapping, walked by `find` in the codes `codes` gives: per byte,
    /// the patterns' bytes numbered from 1 in order, every other byte 0. Patterns of few
    /// and contiguous bytes make a table of few columns.
    automaton: Table,
    /// The outcome phrases' factors (`factors`), for `may_say`.
    outcomes: Literals,
    /// Per pattern of `automaton`.
    meaning: Vec<Meaning>,
    /// Per outcome phrase, the signal an event it decides names (`built-in: "phrase"`).
    signals: HashMap<&'static str, String, FixedState>,
}

impl Phrasebook {
    pub(crate) fn new() -> Result<Self, PhrasebookError> {
        let said: [(Said, &[&'static str]); 7] = [
            (Said::StaleFence, STALE_FENCE),
            (Said::NotOwned, NOT_OWNED),
            (Said::Quorum, QUORUM),
            (Said::Held, HELD),
            (Said::Timeout, TIMEOUT),
            (Said::Busy, BUSY),
            (Said::Error, ERROR),
        ];
        let mut meaning: Vec<Meaning> = Vec::new();
        for n in NOUNS {
            entry(&mut meaning, n).noun = true;
        }
        for (s, phrases) in said {
            for p in phrases {
                // Listed strongest first: a phrase keeps its first outcome.
                let m = entry(&mut meaning, p);
                m.said = m.said.or(Some(s));
            }
        }
        for (op, words) in ops::OP_WORDS {
            for w in *words {
                entry(&mut meaning, w).op = Some(*op);
            }
        }
        // A table of about a thousand states, walked over every record that may say an
        // outcome.
        let codes = codes(meaning.iter().map(|m| m.phrase));
        let coded: Vec<Vec<u8>> = (meaning.iter())
            .map(|m| m.phrase.bytes().map(|b| codes[usize::from(b)]).collect())
            .collect();
        let automaton = Table::new(codes, &coded)?;
        let outcomes = meaning.iter().filter(|m| m.said.is_some()).map(|m| m.phrase);
        let outcomes = Literals::new(&factors(outcomes, &common_words()))?;
        let signals = meaning
            .iter()
            .filter(|m| m.said.is_some())
            .map(|m| (m.phrase, format!("built-in: \"{}\"", m.phrase)))
            .collect();
        Ok(Phrasebook {
            automaton,
            outcomes,
            meaning,
            signals,
        })
    }

    /// The signal an event decided by the outcome `phrase` names (`Verdict::Event::by`).
    pub(crate) fn signal(&self, phrase: &str) -> String {
        match self.signals.get(phrase) {
            Some(s) => s.clone(),
            None => format!("built-in: \"{phrase}\""),
        }
    }

    /// Whether `text` may hold an outcome phrase: `false` only when no text read from it
    /// without unescaping (a line's message and error, as substrings of it) can. A search
    /// for each phrase's rarest factor (`factors`): `true` also for some texts that hold
    /// none, which the rules then read whole.
    pub(crate) fn may_say(&self, text: &str) -> bool {
        self.outcomes.is_match_mapped(text.as_bytes(), normal_byte)
    }

    /// Nouns, the strongest outcome and the first operation in `text`, in one pass over
    /// `lowered`, `text` made by `normalize` (the same length: `text` tells camelCase parts).
    pub(crate) fn find(&self, lowered: &str, text: &str) -> Found {
        let b = lowered.as_bytes();
        let mut found = Found {
            noun: false,
            said: None,
            op: None,
        };
        // The operation word found earliest, and its end: of two at one offset (a whole
        // run, `tryLock`, and its first part) the longer is read first.
        let mut op: Option<(usize, usize, Op)> = None;
        self.walk(b, |start, end, meaning| {
            if let Some(o) = meaning.op
                && op.is_none_or(|(at, e, _)| (start, e) < (at, end))
                && ops::is_read_as_word(text.as_bytes(), start, end)
            {
                op = Some((start, end, o));
            }
            if !(meaning.noun || meaning.said.is_some())
                || !is_boundary(b, start)
                || !is_boundary(b, end)
                || is_zero_count(&b[end..])
            {
                return;
            }
            found.noun |= meaning.noun;
            if let Some(s) = meaning.said
                && found.said.is_none_or(|(best, _)| s < best)
            {
                found.said = Some((s, meaning.phrase));
            }
        });
        found.op = op.map(|(at, _, o)| (at, o));
        found
    }

    /// Every pattern in `b`, overlapping, with its start, end and meaning: by end, and at
    /// one end in the automaton's order, as `find_overlapping_iter` reports them.
    fn walk(&self, b: &[u8], mut each: impl FnMut(usize, usize, Meaning)) {
        self.automaton
            .walk(b, |start, end, p| each(start, end, self.meaning[p]));
    }
}

/// Words records often hold beside a lock word and no outcome (`lock acquired`): the lock
/// words, the short nouns, the operations; not the names of exceptions.
fn common_words() -> Vec<&'static str> {
    (LOCK_WORDS.iter())
        .chain(NOUNS.iter().filter(|n| n.len() <= 7 && !n.contains(' ')))
        .chain(ops::OP_WORDS.iter().flat_map(|(_, words)| words.iter()))
        .copied()
        .collect()
}

/// `codes` for `patterns`: each byte they hold numbered from 1 in order, every other 0.
fn codes<'p>(patterns: impl Iterator<Item = &'p str>) -> [u8; 256] {
    let mut used = [false; 256];
    for p in patterns {
        for b in p.bytes() {
            used[usize::from(b)] = true;
        }
    }
    let mut codes = [0u8; 256];
    let mut next = 0u8;
    for (code, _) in codes.iter_mut().zip(used).filter(|(_, u)| *u) {
        next = next.saturating_add(1);
        *code = next;
    }
    codes
}

/// The meaning of `phrase` in `meaning`, added (meaning nothing yet) where it is not there.
fn entry<'m>(meaning: &'m mut Vec<Meaning>, phrase: &'static str) -> &'m mut Meaning {
    let i = match meaning.iter().position(|m| m.phrase == phrase) {
        Some(i) => i,
        None => {
            meaning.push(Meaning {
                phrase,
                noun: false,
                said: None,
                op: None,
            });
            meaning.len() - 1
        }
    };
    &mut meaning[i]
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
/// length, so offsets carry over. Made a byte at a time (`normal_byte`, a loop the compiler
/// vectorises); only ASCII bytes change, into ASCII bytes, so the bytes stay UTF-8.
pub(crate) fn normalize(text: &str) -> String {
    String::from_utf8(text.bytes().map(normal_byte).collect())
        .unwrap_or_else(|_| text.to_ascii_lowercase().replace(['-', '\t', '\r', '\n'], " "))
}

/// `normalize`, a byte at a time: for a search that needs no `str`.
fn normal_byte(b: u8) -> u8 {
    match b {
        b'-' | b'\t' | b'\r' | b'\n' => b' ',
        b => b.to_ascii_lowercase(),
    }
}

#[cfg(test)]
#[path = "phrases_tests.rs"]
mod tests;
