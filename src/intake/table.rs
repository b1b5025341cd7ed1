//! The phrasebook's automaton as a flat table of its own: `aho_corasick`'s automaton built
//! once, then read state by state into `u16` rows of one column per byte code, the states
//! that end a pattern numbered first. A walk is then a load per byte (no byte-class lookup,
//! no state-kind test but one compare), in a table half the size of `aho_corasick`'s DFA,
//! which keeps the rows near the start state in the L1 cache.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::noncontiguous::NFA;
use aho_corasick::{Anchored, MatchKind};

/// Why the table cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Automaton(#[from] aho_corasick::BuildError),
    #[error(transparent)]
    Start(#[from] aho_corasick::MatchError),
    #[error("the phrasebook's automaton has {0} states; its table holds at most 65,536 cells")]
    TooLarge(usize),
    /// An empty pattern, one holding code 0 (which must reset the walk, so a half can
    /// start after it), or more patterns or longer ones than a `u16` numbers.
    #[error(
        "pattern {0} cannot be walked: empty, longer than 65,535 codes, one of more than 65,536, or holding code 0"
    )]
    Pattern(usize),
}

/// Every pattern of a set, found overlapping, a byte code at a time.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// Per byte, its column: the code its patterns were written in (0 for every byte none
    /// holds).
    column: [u8; 256],
    /// Columns per row: the codes, rounded up to a power of two, as a shift.
    shift: u32,
    /// Per state (its row's first cell) and column, the next state's row.
    next: Vec<u16>,
    /// Rows below this end at least one pattern.
    matching: usize,
    /// Per matching state (its row / `stride`), the range of `ends` it ends.
    ends_at: Vec<(u32, u32)>,
    /// The patterns a state ends, as `(length, pattern)`, in the automaton's order.
    ends: Vec<(u16, u16)>,
}

impl Table {
    /// The table of `patterns`, written in `column`'s codes (every byte a column).
    pub(crate) fn new(column: [u8; 256], patterns: &[Vec<u8>]) -> Result<Self, TableError> {
        let unfit = |(i, p): &(usize, &Vec<u8>)| {
            p.is_empty() || p.len() > usize::from(u16::MAX) || *i > usize::from(u16::MAX) || p.contains(&0)
        };
        if let Some((i, _)) = patterns.iter().enumerate().find(unfit) {
            return Err(TableError::Pattern(i));
        }
        let nfa = NFA::builder().match_kind(MatchKind::Standard).build(patterns)?;
        let columns = usize::from(column.iter().copied().max().unwrap_or(0)) + 1;
        let stride = columns.next_power_of_two();
        // Every state the walk can reach, from the start, in breadth-first order.
        let start = nfa.start_state(Anchored::No)?;
        let (mut order, mut seen) = (vec![start], Vec::new());
        first_time(&mut seen, start);
        let mut i = 0;
        while let Some(&s) = order.get(i) {
            for c in 0..columns {
                let n = nfa.next_state(Anchored::No, s, c as u8);
                if first_time(&mut seen, n) {
                    order.push(n);
                }
            }
            i += 1;
        }
        // Matching states first, each group in breadth-first order.
        let (mut states, rest): (Vec<StateID>, Vec<StateID>) = order.iter().partition(|&&s| nfa.is_match(s));
        let matching = states.len();
        states.extend(rest);
        if states.len() * stride > usize::from(u16::MAX) + 1 {
            return Err(TableError::TooLarge(states.len()));
        }
        let mut row = vec![0u16; seen.len()];
        for (i, &s) in states.iter().enumerate() {
            row[s.as_usize()] = (i * stride) as u16;
        }
        let mut next = vec![0u16; states.len() * stride];
        for (i, &s) in states.iter().enumerate() {
            for c in 0..columns {
                next[i * stride + c] = row[nfa.next_state(Anchored::No, s, c as u8).as_usize()];
            }
        }
        let (mut ends_at, mut ends) = (Vec::with_capacity(matching), Vec::new());
        for &s in &states[..matching] {
            let from = ends.len() as u32;
            for k in 0..nfa.match_len(s) {
                let p = nfa.match_pattern(s, k);
                ends.push((nfa.pattern_len(p) as u16, p.as_usize() as u16));
            }
            ends_at.push((from, ends.len() as u32));
        }
        Ok(Table {
            column,
            shift: stride.trailing_zeros(),
            next,
            matching: matching * stride,
            ends_at,
            ends,
        })
    }

    /// Every pattern in `b`, overlapping, as `(start, end, pattern)`: by end, and at one
    /// end in the automaton's order, as `find_overlapping_iter` reports them.
    ///
    /// Each next state waits on the last one's load, so `b` is walked as two halves side by
    /// side: the second starts after a byte no pattern holds, past the middle, where the
    /// automaton is back at its start whatever came before, so each half finds exactly its
    /// own matches. The ends each half passes are noted (at most `HELD`) and reported after
    /// both; when a half passes more, the whole text is walked again, alone.
    pub(crate) fn walk(&self, b: &[u8], mut each: impl FnMut(usize, usize, usize)) {
        let mid = b.len() / 2;
        let split = (b[mid..].iter().position(|&x| self.column[usize::from(x)] == 0)).map_or(b.len(), |i| mid + i + 1);
        let (first, second) = b.split_at(split);
        // The states are locals, so that they stay in registers: the ends go to memory.
        let (mut x, mut y) = (Ends::new(), Ends::new());
        let (mut s, mut t) = (self.matching, self.matching);
        for (i, (&u, &v)) in first.iter().zip(second).enumerate() {
            s = self.step(s, u, i + 1, &mut x);
            t = self.step(t, v, split + i + 1, &mut y);
        }
        let common = first.len().min(second.len());
        for (i, &u) in first.iter().enumerate().skip(common) {
            s = self.step(s, u, i + 1, &mut x);
        }
        for (i, &v) in second.iter().enumerate().skip(common) {
            t = self.step(t, v, split + i + 1, &mut y);
        }
        if x.n > HELD || y.n > HELD {
            return self.walk_alone(b, each);
        }
        for e in [&x, &y] {
            self.report(&e.held[..e.n], &mut each);
        }
    }

    /// `walk`, one state after the other, the ends reported every sixteen bytes.
    fn walk_alone(&self, b: &[u8], mut each: impl FnMut(usize, usize, usize)) {
        let mut s = self.matching;
        for (c, chunk) in b.chunks(HELD).enumerate() {
            let mut e = Ends::new();
            for (i, &u) in chunk.iter().enumerate() {
                s = self.step(s, u, c * HELD + i + 1, &mut e);
            }
            self.report(&e.held[..e.n], &mut each);
        }
    }

    /// The state after `state` reads `byte`, which ends at `end`: noted in `ends` when it
    /// ends a pattern.
    #[inline(always)]
    fn step(&self, state: usize, byte: u8, end: usize, ends: &mut Ends) -> usize {
        let next = usize::from(self.next[state + usize::from(self.column[usize::from(byte)])]);
        if next < self.matching {
            ends.note(end, next);
        }
        next
    }

    /// The patterns that end at each of `ends` (`(end, state)`), in order.
    fn report(&self, ends: &[(usize, usize)], each: &mut impl FnMut(usize, usize, usize)) {
        for &(end, s) in ends {
            let (from, to) = self.ends_at[s >> self.shift];
            for &(len, p) in &self.ends[from as usize..to as usize] {
                each(end - usize::from(len), end, usize::from(p));
            }
        }
    }
}

/// Ends noted at most per half (and per chunk of a walk alone).
const HELD: usize = 16;

/// The matching states a walk passed, with where each ends (`n` counts past `HELD`; only
/// the first `HELD` are kept).
struct Ends {
    held: [(usize, usize); HELD],
    n: usize,
}

impl Ends {
    fn new() -> Self {
        Ends {
            held: [(0, 0); HELD],
            n: 0,
        }
    }

    /// Note that `state`, a matching one, was reached with the byte that ends at `end`.
    #[inline(always)]
    fn note(&mut self, end: usize, state: usize) {
        if let Some(h) = self.held.get_mut(self.n) {
            *h = (end, state);
        }
        self.n += 1;
    }
}

/// Whether `s` is seen for the first time (and now noted in `seen`, by state id).
fn first_time(seen: &mut Vec<bool>, s: StateID) -> bool {
    if seen.len() <= s.as_usize() {
        seen.resize(s.as_usize() + 1, false);
    }
    !std::mem::replace(&mut seen[s.as_usize()], true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Patterns over `a`..`d`, coded 1..4.
    fn coded(patterns: &[&str]) -> (Table, Vec<Vec<u8>>) {
        let mut column = [0u8; 256];
        for (i, b) in (b'a'..=b'd').enumerate() {
            column[usize::from(b)] = i as u8 + 1;
        }
        let coded: Vec<Vec<u8>> = (patterns.iter())
            .map(|p| p.bytes().map(|b| column[usize::from(b)]).collect())
            .collect();
        (Table::new(column, &coded).unwrap(), coded)
    }

    #[test]
    fn a_walk_finds_what_an_overlapping_search_finds_in_any_text() {
        let patterns = ["ab", "abcab", "b", "bca", "cabd", "dd", "ddd", "abcd"];
        let (table, coded) = coded(&patterns);
        assert_eq!(table.shift, 3, "five columns, rounded up to eight");
        let search = aho_corasick::AhoCorasick::new(&coded).unwrap();
        let mut rng = crate::intake::test_rng::Xorshift(0x7ab1_e5ee_d00d_2026);
        let mut long_runs = 0;
        for _ in 0..3000 {
            let len = rng.below(80);
            let text: Vec<u8> = (0..len).map(|_| b"abcdx\0"[rng.below(6)]).collect();
            let mut walked = Vec::new();
            table.walk(&text, |start, end, p| walked.push((start, end, p)));
            let codes: Vec<u8> = text.iter().map(|&b| table.column[usize::from(b)]).collect();
            let searched: Vec<(usize, usize, usize)> = (search.find_overlapping_iter(&codes))
                .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
                .collect();
            assert_eq!(walked, searched, "{:?}", String::from_utf8_lossy(&text));
            long_runs += usize::from(walked.len() > 16);
        }
        assert!(long_runs > 50, "texts with more ends than a chunk's bytes: {long_runs}");
    }

    #[test]
    fn a_half_with_more_ends_than_it_notes_is_walked_again_whole() {
        let (table, coded) = coded(&["ab", "b", "bab"]);
        let search = aho_corasick::AhoCorasick::new(&coded).unwrap();
        for (left, right) in [(20, 20), (2, 20), (20, 2), (8, 8), (9, 0)] {
            let text = format!("{}x{}", "ab".repeat(left), "ab".repeat(right));
            let mut walked = Vec::new();
            table.walk(text.as_bytes(), |start, end, p| walked.push((start, end, p)));
            let codes: Vec<u8> = text.bytes().map(|b| table.column[usize::from(b)]).collect();
            let searched: Vec<(usize, usize, usize)> = (search.find_overlapping_iter(&codes))
                .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
                .collect();
            assert_eq!(walked, searched, "{text}");
        }
    }

    #[test]
    fn a_pattern_the_walk_cannot_take_is_refused() {
        let column = [1u8; 256];
        for patterns in [vec![vec![], vec![1, 1]], vec![vec![1, 0, 1]]] {
            assert!(matches!(Table::new(column, &patterns), Err(TableError::Pattern(_))));
        }
        assert!(Table::new(column, &[vec![1, 1]]).is_ok());
    }

    #[test]
    fn a_set_too_large_for_the_cells_is_refused() {
        let mut column = [0u8; 256];
        for b in 0..=255u8 {
            column[usize::from(b)] = b;
        }
        let patterns: Vec<Vec<u8>> = (0..300u16)
            .map(|i| vec![(i % 250) as u8 + 1, (i / 250) as u8 + 1, 7, 9])
            .collect();
        assert!(matches!(Table::new(column, &patterns), Err(TableError::TooLarge(_))));
    }
}
