//! A set of literals searched for by SIMD (Teddy) where the CPU has it, else by an
//! Aho-Corasick automaton: `may_say`'s outcome phrases over normalised text.
//! `is_match_mapped` searches a text through a byte map (the normalisation) a few hundred
//! bytes at a time on the stack, without a copy of the whole text.

use aho_corasick::{AhoCorasick, MatchKind, packed};

/// Bytes mapped and searched at a time by `is_match_mapped`.
const STEP: usize = 256;
/// Bytes mapped past a step's end, so a literal that starts in it is found whole: the
/// longest literal `Literals::new` takes.
const LONGEST: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct Literals {
    /// Teddy, where the CPU has it (SSSE3 or AVX2).
    packed: Option<packed::Searcher>,
    automaton: AhoCorasick,
}

#[derive(Debug, thiserror::Error)]
pub enum LiteralsError {
    #[error("literal {0:?} is longer than {LONGEST} bytes")]
    TooLong(String),
    #[error(transparent)]
    Build(#[from] aho_corasick::BuildError),
}

impl Literals {
    /// A search for any of `literals` (at most `LONGEST` bytes each), as they are.
    pub(crate) fn new<S: AsRef<[u8]>>(literals: &[S]) -> Result<Self, LiteralsError> {
        if let Some(l) = literals.iter().find(|l| l.as_ref().len() > LONGEST) {
            return Err(LiteralsError::TooLong(String::from_utf8_lossy(l.as_ref()).into_owned()));
        }
        // Teddy is not chosen by default over 64 literals; the callers' are fewer (the
        // outcome phrases' factors), but a set that grows past them stays on Teddy.
        let packed = packed::Config::new()
            .match_kind(packed::MatchKind::LeftmostFirst)
            .heuristic_pattern_limits(false)
            .builder()
            .extend(literals)
            .build();
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(literals)?;
        Ok(Literals { packed, automaton })
    }

    /// Where the first literal in `text` starts.
    pub(crate) fn find(&self, text: &[u8]) -> Option<usize> {
        match &self.packed {
            Some(p) => p.find(text).map(|m| m.start()),
            None => self.automaton.find(text).map(|m| m.start()),
        }
    }

    /// Whether `text`, each byte mapped by `map`, holds a literal.
    pub(crate) fn is_match_mapped(&self, text: &[u8], map: impl Fn(u8) -> u8) -> bool {
        let mut buf = [0u8; STEP + LONGEST];
        let mut at = 0;
        while at < text.len() {
            let piece = &text[at..(at + STEP + LONGEST).min(text.len())];
            for (m, &b) in buf.iter_mut().zip(piece) {
                *m = map(b);
            }
            if self.find(&buf[..piece.len()]).is_some() {
                return true;
            }
            at += STEP;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_literal_is_found_across_every_step_edge_and_only_whole() {
        let words = ["not owned", "busy", &"x".repeat(LONGEST)];
        let lits = Literals::new(&words).unwrap();
        for w in words {
            for at in [0, 1, STEP - w.len(), STEP - 1, STEP, STEP + 1, 2 * STEP - 3, 3 * STEP] {
                let mut t = vec![b'.'; at + w.len() + 5];
                t[at..at + w.len()].copy_from_slice(w.as_bytes());
                assert!(lits.is_match_mapped(&t, |b| b), "{w} at {at}");
                // Cut by one byte, it is not found.
                t[at + w.len() - 1] = b'.';
                assert!(!lits.is_match_mapped(&t, |b| b), "{w} cut at {at}");
            }
        }
        assert!(lits.is_match_mapped(b"BUSY", |b| b.to_ascii_lowercase()));
        assert!(!lits.is_match_mapped(b"", |b| b));
        assert!(matches!(
            Literals::new(&["y".repeat(LONGEST + 1)]),
            Err(LiteralsError::TooLong(_))
        ));
    }
}
