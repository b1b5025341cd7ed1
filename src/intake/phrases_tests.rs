//! The phrasebook: whole words, outcomes by strength, `may_say` against an automaton over
//! the normalised text, `normalize` against the char-at-a-time reading it replaced.
#![allow(clippy::unwrap_used)]

use super::*;

fn normal_bytes(text: &str) -> Vec<u8> {
    text.bytes().map(normal_byte).collect()
}

fn said(t: &str) -> Option<(Said, &'static str)> {
    Phrasebook::new().unwrap().find(&normalize(t), t).said
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

/// Every outcome phrase of `book`.
fn outcome_phrases(book: &Phrasebook) -> Vec<&'static str> {
    book.meaning
        .iter()
        .filter(|m| m.said.is_some())
        .map(|m| m.phrase)
        .collect()
}

#[test]
fn may_say_is_true_wherever_an_outcome_phrase_is_in_the_normalised_text() {
    let book = Phrasebook::new().unwrap();
    let phrases = outcome_phrases(&book);
    let automaton = aho_corasick::AhoCorasick::new(&phrases).unwrap();
    // `may_say` is a search for the factors, over the normalised text.
    let by_factors = aho_corasick::AhoCorasick::new(factors(phrases.iter().copied(), &common_words())).unwrap();
    let mut said = 0;
    let mut rng = crate::intake::test_rng::Xorshift(0x0005_eed0_f0a7_c0e5);
    let filler = ["lock ", "x", "=", "\t", "\r", "-", " ", "é", "0", "{\"msg\":"];
    for _ in 0..6000 {
        let mut t = String::new();
        let len = [20, 250, 260, 330, 600][rng.below(5)];
        while t.len() < len {
            match rng.below(12) {
                0 => {
                    // A phrase, in any case, its spaces read as `-`, tabs or CRs.
                    let p = phrases[rng.below(phrases.len())];
                    let cut = rng.below(5) == 0;
                    for (i, c) in p.chars().enumerate() {
                        if cut && i + 1 == p.len() {
                            break;
                        }
                        t.push(match (c, rng.below(4)) {
                            (' ', 0) => '-',
                            (' ', 1) => '\t',
                            (' ', 2) => '\r',
                            (c, 3) => c.to_ascii_uppercase(),
                            (c, _) => c,
                        });
                    }
                }
                _ => t.push_str(filler[rng.below(filler.len())]),
            }
        }
        let normal = normalize(&t);
        let may = book.may_say(&t);
        assert_eq!(may, by_factors.is_match(&normal), "{t:?}");
        if automaton.is_match(&normal) {
            assert!(may, "{t:?}");
            said += 1;
        }
    }
    assert!(said > 1000, "{said}");
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
    assert!(book.find(&normalize("Lock(lock:payout:1)"), "Lock(lock:payout:1)").noun);
    assert!(
        !book
            .find(
                &normalize("user account locked; clock skew; _lock_renewer"),
                "user account locked; clock skew; _lock_renewer"
            )
            .noun
    );
}

#[test]
fn an_outcome_phrase_names_its_signal() {
    let book = Phrasebook::new().unwrap();
    let outcomes = outcome_phrases(&book);
    assert!(outcomes.len() > 50);
    for p in outcomes {
        assert_eq!(book.signal(p), format!("built-in: \"{p}\""));
    }
    assert_eq!(book.signal("no such phrase"), "built-in: \"no such phrase\"");
}

#[test]
fn each_phrase_holds_a_factor_away_from_the_words_records_are_full_of() {
    let book = Phrasebook::new().unwrap();
    let phrases = outcome_phrases(&book);
    let common = common_words();
    let found = factors(phrases.iter().copied(), &common);
    for p in &phrases {
        assert!(
            found.iter().any(|f| p.contains(f)),
            "{p:?} holds no factor of {found:?}"
        );
    }
    let one = |p: &'static str| factors(std::iter::once(p), &common)[0];
    assert!(found.len() < phrases.len(), "{found:?}");
    // A factor whose phrases all hold another is dropped: none holds another, and `lock
    // was lost`, `lost lock` and `lost the lock` are found by `lost` alone.
    for f in &found {
        assert!(!found.iter().any(|g| g != f && f.contains(g)), "{f:?} in {found:?}");
    }
    assert!(found.contains(&"lost"), "{found:?}");
    for p in ["lock was lost", "lost lock", "lost the lock"] {
        assert!(!found.contains(&one(p)), "{p:?}: {found:?}");
    }
    // Past the lock word and the operation; a factor starts no common word.
    assert_eq!(one("lock lost"), "lost");
    assert_eq!(one("it's locked"), "it's loc");
    assert_eq!(one("notacquired"), "notacqui");
    assert_eq!(one("timed out"), "imed out");
    // Covered by common words: the whole phrase.
    assert_eq!(one("not owned"), "not owned");
    assert_eq!(one("releaseunlockedlock"), "releaseunlockedlock");
    // Records with a lock word and an operation but no outcome are not let through.
    for t in [
        "run lock acquired",
        "user account locked",
        "Lock released",
        "lease renewed for 30s",
    ] {
        assert!(!book.may_say(t), "{t:?}");
    }
}

#[test]
fn the_walk_reports_what_an_overlapping_search_of_the_phrases_reports() {
    let book = Phrasebook::new().unwrap();
    let phrases: Vec<&str> = book.meaning.iter().map(|m| m.phrase).collect();
    let automaton = aho_corasick::AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .build(&phrases)
        .unwrap();
    let mut rng = crate::intake::test_rng::Xorshift(0x0000_da7a_b1e5_0dd5);
    let filler = [" ", "x", ":", "'", "_", "^", "`", "z", "0", "é", "\u{0}", "\u{ff}"];
    let mut long = 0;
    for _ in 0..3000 {
        let mut t = String::new();
        let len = [10, 90, 400][rng.below(3)];
        while t.len() < len {
            match rng.below(3) {
                // Phrases back to back and overlapping, many more than a batch of hits.
                0 | 1 => t.push_str(phrases[rng.below(phrases.len())]),
                _ => t.push_str(filler[rng.below(filler.len())]),
            }
        }
        let mut walked = Vec::new();
        book.walk(t.as_bytes(), |start, end, m| walked.push((start, end, m.phrase)));
        let searched: Vec<(usize, usize, &str)> = automaton
            .find_overlapping_iter(&t)
            .map(|m| (m.start(), m.end(), phrases[m.pattern().as_usize()]))
            .collect();
        assert_eq!(walked, searched, "{t:?}");
        long += usize::from(searched.len() > 16);
    }
    assert!(long > 100, "{long}");
}
