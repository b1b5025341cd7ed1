//! The factors `Phrasebook::may_say` searches for: of each outcome phrase, a few bytes that
//! records seldom hold unless they hold the phrase, then only those some phrase needs.
//! Every text that holds a phrase holds a factor, so the search lets through every record
//! that may say an outcome, and few others; the rules then read those whole.

/// Bytes that `factors` choose by: Teddy's fingerprint is a literal's first four bytes.
const FACTOR: usize = 4;

/// For a search that finds every text holding one of `phrases` (and a few more): of each
/// phrase, the `2 * FACTOR` bytes (or fewer, to its end) from where its first `FACTOR`
/// overlap fewest of the `common` words in it (every record `may_say` reads holds a lock
/// word, many an operation), start as few of them as can, and are made of the letters least used in
/// English (`commonness`); the whole phrase where those words cover it; without repeats.
/// A factor whose every phrase holds another factor is then dropped.
/// `lock lost` and `timed out` would make every record a candidate for Teddy to check,
/// `lost` and `imed out` few; the longer factor lets few through.
pub(super) fn factors(phrases: impl Iterator<Item = &'static str>, common: &[&str]) -> Vec<&'static str> {
    let phrases: Vec<&'static str> = phrases.collect();
    // Only the phrases that hold no other: where one holds another, the other is found.
    let least: Vec<&'static str> = (phrases.iter().copied())
        .filter(|p| !phrases.iter().any(|q| q != p && p.contains(q)))
        .collect();
    let mut factors: Vec<&'static str> = Vec::new();
    for &p in &least {
        let n = FACTOR.min(p.len());
        // Per byte of `p`: whether a common word holds it, and whether one starts there.
        let (mut in_common, mut starts) = (vec![false; p.len()], vec![false; p.len()]);
        for c in common {
            for (at, _) in p.match_indices(c) {
                in_common[at..at + c.len()].fill(true);
                starts[at] = true;
            }
        }
        let cost = |i: usize| {
            let overlaps = in_common[i..i + n].iter().filter(|c| **c).count() as u32;
            let letters: u32 = p.as_bytes()[i..i + n].iter().map(|b| commonness(*b)).sum();
            overlaps * 1000 + u32::from(starts[i]) * 500 + letters
        };
        let rarest = (0..=p.len() - n)
            .filter(|&i| p.is_char_boundary(i) && p.is_char_boundary(i + n))
            .min_by_key(|&i| cost(i))
            // Where common words cover the whole phrase, none of it is rare: the phrase,
            // whose candidates are checked and seldom let through.
            .filter(|&i| in_common[i..i + n].contains(&false))
            .and_then(|i| p.get(i..(i + 2 * FACTOR).min(p.len())))
            .unwrap_or(p);
        if !factors.contains(&rarest) {
            factors.push(rarest);
        }
    }
    // A factor whose every phrase holds another factor is dropped, the longest first
    // (`lost loc` and ` was los` beside `lost`): the search then lets through fewer texts,
    // none a phrase holds, and with 32 factors or fewer Teddy reads 32 bytes at a time.
    let mut by_length = factors.clone();
    by_length.sort_by_key(|f| std::cmp::Reverse(f.len()));
    for f in by_length {
        let elsewhere = |p: &str| factors.iter().any(|g| *g != f && p.contains(g));
        if least.iter().all(|p| !p.contains(f) || elsewhere(p)) {
            factors.retain(|g| *g != f);
        }
    }
    factors
}

/// The letters by how often English writes them, the space first.
const BY_USE: &[u8] = b" etaoinshrdlcumwfgypbvkjxqz";

/// How often `b` is written in English text: the letters by rank, 27 for the space down
/// to 1 for `z`; any other byte (`'`, `:`) as a letter in the middle.
fn commonness(b: u8) -> u32 {
    let rank = BY_USE.iter().position(|l| *l == b).unwrap_or(BY_USE.len() / 2);
    (BY_USE.len() - rank) as u32
}
