//! The operation words (acquire, release, renew, write), and where they are read as words:
//! also inside identifiers — `_processRefresh`, `do_release`, `unlockAsync` — whose
//! camelCase and snake_case parts are words of their own. The phrasebook finds them in its
//! one pass over a record (`Phrasebook::find`); the earliest read as a word is the
//! operation the record names.

use crate::vocab::Op;

/// Operation words, as whole words or as parts of identifiers.
pub(crate) const OP_WORDS: &[(Op, &[&str])] = &[
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

/// Whether `text[start..end]` (an operation word's place, found in the text lowercased) is
/// read as a word: a whole run of ASCII letters and digits, or one of its camelCase parts
/// (a part ends where a lowercase letter is followed by an uppercase one), in a run of at
/// most 32 bytes. `_` and any other byte end a run, so `do_release` holds `release`.
pub(crate) fn is_read_as_word(text: &[u8], start: usize, end: usize) -> bool {
    let alnum = |i: usize| text[i].is_ascii_alphanumeric();
    let run_start = start
        - text[..start]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
    let run_end = end + text[end..].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
    if run_end - run_start > 32 || !(start..end).all(alnum) {
        return false;
    }
    if (start, end) == (run_start, run_end) {
        return true;
    }
    let cut =
        |j: usize| j == run_start || j == run_end || (text[j].is_ascii_uppercase() && text[j - 1].is_ascii_lowercase());
    cut(start) && cut(end) && !(start + 1..end).any(cut)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;
    use std::sync::LazyLock;

    use super::*;
    use crate::intake::phrases::{Phrasebook, normalize};

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
        static OPS: LazyLock<HashMap<&'static str, Op>> = LazyLock::new(|| {
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

    /// The operation `Phrasebook::find` reads first in `text`.
    fn first_op(text: &str) -> Option<(usize, Op)> {
        static BOOK: LazyLock<Phrasebook> = LazyLock::new(|| Phrasebook::new().unwrap());
        BOOK.find(&normalize(text), text).op
    }

    /// The reading `Phrasebook::find` replaced: a walk over the runs, each looked up whole,
    /// then by its camelCase parts.
    fn first_op_walking(text: &str) -> Option<(usize, Op)> {
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
    fn operations_inside_identifiers() {
        assert_eq!(first_op("at Lock._processRefresh (Lock.js:68)"), Some((16, Op::Renew)));
        assert_eq!(first_op("in do_release"), Some((6, Op::Release)));
        assert_eq!(first_op("RedissonBaseLock.unlockAsync0"), Some((17, Op::Release)));
        assert_eq!(first_op("tryLock(10, SECONDS)"), Some((0, Op::Acquire)));
        assert_eq!(first_op("run lock renewal failed"), Some((9, Op::Renew)));
        assert_eq!(first_op("payout batch aborted; rewrite later"), None);
    }

    #[test]
    fn the_first_operation_is_the_one_a_walk_over_the_runs_finds() {
        let mut rng = crate::intake::test_rng::Xorshift(0x0df0_a11c_e5ee_d123);
        let mut pieces: Vec<String> = OP_WORDS
            .iter()
            .flat_map(|(_, w)| w.iter().map(|w| w.to_string()))
            .collect();
        for w in [
            "Release", "RELEASE", "reNew", "Lock", "try", "do", "x", "9", "lock", "Async", "aX", "Ü",
        ] {
            pieces.push(w.to_string());
        }
        let glue = ["", "", " ", "_", ".", "-", "(", "\n", "é", "X", "a", "7", " | "];
        for _ in 0..20_000 {
            let mut t = String::new();
            for _ in 0..rng.below(7) {
                let mut w = pieces[rng.below(pieces.len())].clone();
                if rng.below(4) == 0 {
                    let i = rng.below(w.len());
                    if w.is_char_boundary(i) && w.is_char_boundary(i + 1) {
                        w.replace_range(i..i + 1, &w[i..i + 1].to_ascii_uppercase());
                    }
                }
                t.push_str(&w);
                t.push_str(glue[rng.below(glue.len())]);
            }
            assert_eq!(first_op(&t), first_op_walking(&t), "{t:?}");
        }
        // Runs over 32 bytes name nothing, even in their parts.
        let long = format!("x{}Release", "a".repeat(24));
        assert_eq!(long.len(), 32);
        assert_eq!(first_op(&long), Some((25, Op::Release)));
        assert_eq!(first_op(&format!("{long}Z")), None);
    }
}
