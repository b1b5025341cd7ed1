#![allow(clippy::unwrap_used)]
use std::path::Path;

use super::*;
use crate::config::Overrides;

fn classifier() -> Classifier {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let text = std::fs::read_to_string(dir.join("lockwatch.toml")).unwrap();
    Classifier::new(&Config::from_toml(&text, "lockwatch.toml", &dir, &Overrides::default()).unwrap()).unwrap()
}

fn event(c: &Classifier, record: &str) -> Option<(Op, Outcome)> {
    match c.classify(record.as_bytes(), LogFormat::Auto) {
        Verdict::Event { op, outcome, .. } => Some((op, outcome)),
        _ => None,
    }
}

#[test]
fn every_lock_noun_passes_the_prefilter() {
    let c = classifier();
    for noun in phrases::NOUNS {
        assert!(c.skim.is_match(noun.as_bytes()), "{noun}");
        assert!(c.skim.is_match(noun.to_ascii_uppercase().as_bytes()), "{noun}");
    }
}

#[test]
fn lock_as_a_noun_only() {
    let c = classifier();
    assert_eq!(event(&c, "run lock renewal failed"), Some((Op::Renew, Outcome::Error)));
    assert_eq!(
        event(&c, "attempt to unlock lock failed"),
        Some((Op::Release, Outcome::Error))
    );
    assert_eq!(event(&c, "user account locked after failed logins"), None);
    assert_eq!(event(&c, "cache unlocked for rebuild: error"), None);
    assert_eq!(event(&c, "non-blocking io failed"), None);
    assert_eq!(event(&c, "clock skew error"), None);
}

#[test]
fn the_operation_named_earliest_wins_and_outcomes_are_whole_words() {
    let c = classifier();
    assert_eq!(
        event(&c, "lock acquire: approval lock busy"),
        Some((Op::Acquire, Outcome::Busy))
    );
    assert_eq!(
        event(&c, "can't update lock x expiration"),
        Some((Op::Renew, Outcome::Error))
    );
    // `socket_timeout=5` in a client's repr is no timeout.
    assert_eq!(
        event(
            &c,
            "lock extend failed: ExtendUnlockedLock(masters=Redis<socket_timeout=5>)"
        ),
        Some((Op::Renew, Outcome::NotOwned))
    );
    assert_eq!(
        event(&c, "lock release failed (socket_timeout=5)"),
        Some((Op::Release, Outcome::Error))
    );
    // Another holder: busy when acquiring, not owned otherwise.
    let quorum = "ExecutionError: The operation was unable to achieve a quorum during its retry window.\n    at Redlock._execute (x.js:1)";
    assert_eq!(event(&c, quorum), Some((Op::Release, Outcome::NotOwned)));
    assert_eq!(
        event(&c, &format!("failed to acquire lock {quorum}")),
        Some((Op::Acquire, Outcome::Busy))
    );
}

#[test]
fn the_lines_after_the_first_are_read_as_the_error() {
    let c = classifier();
    let record = "2026-06-28 10:05:31,877 ERROR worker payout batch aborted\nTraceback (most recent call last):\n  File \"w.py\", line 3, in run\n    lock.release()\nredis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned";
    let v = c.classify(record.as_bytes(), LogFormat::Auto);
    assert!(
        matches!(
            &v,
            Verdict::Event {
                namespace: Some(3),
                op: Op::Release,
                outcome: Outcome::NotOwned,
                ..
            }
        ),
        "{v:?}"
    );
    // A pretty-printed JSON object is read whole.
    let pretty = "{\n  \"msg\": \"approval lock release failed\",\n  \"error\": \"lock not owned\"\n}";
    let v = c.classify(pretty.as_bytes(), LogFormat::Auto);
    assert!(
        matches!(
            &v,
            Verdict::Event {
                namespace: Some(1),
                op: Op::Release,
                outcome: Outcome::NotOwned,
                ..
            }
        ),
        "{v:?}"
    );
}

#[test]
fn stacks_inside_fields_keep_working() {
    let c = classifier();
    // logfmt with the stack in an escaped field, winston JSON with `stack` beside `message`,
    // pino's `err` object.
    let logfmt = r#"level=error msg="payout lock release failed" stack_trace="redis.exceptions.LockNotOwnedError: Cannot release a lock that's no longer owned\n  File \"w.py\", line 3""#;
    assert_eq!(event(&c, logfmt), Some((Op::Release, Outcome::NotOwned)));
    let winston = r#"{"level":"error","message":"payout lock lost","stack":"Error: Lost mutex for key payout:lock:1\n    at Lock._processRefresh (Lock.js:68:43)"}"#;
    assert_eq!(event(&c, winston), Some((Op::Renew, Outcome::NotOwned)));
    let pino = r#"{"level":50,"msg":"lock extend failed","err":{"type":"ExecutionError","message":"Cannot extend an already-expired lock.","stack":"ExecutionError: Cannot extend an already-expired lock.\n    at Redlock.extend (index.js:191:19)"}}"#;
    assert_eq!(event(&c, pino), Some((Op::Renew, Outcome::NotOwned)));
}

fn key_of(c: &Classifier, record: &str) -> Option<(Option<usize>, Option<String>)> {
    match c.classify(record.as_bytes(), LogFormat::Auto) {
        Verdict::Event { namespace, key, .. } => Some((namespace, key.map(String::from))),
        _ => None,
    }
}

#[test]
fn an_event_carries_the_key_it_named_and_nothing_else_does() {
    let c = classifier();
    let k = |s: &str| Some(s.to_string());
    // A key field, in JSON and in logfmt.
    let json = r#"{"msg":"lock release failed: not owned","key":"payout:batch:lock:7"}"#;
    assert_eq!(key_of(&c, json), Some((Some(3), k("payout:batch:lock:7"))));
    let logfmt = r#"level=error msg="lock renew failed: lock not owned" lock_key=cordum:approval:lock:9"#;
    assert_eq!(key_of(&c, logfmt), Some((Some(1), k("cordum:approval:lock:9"))));
    // A word of the text.
    let text = "ERROR release of lock 'payout:batch:lock:42' failed: lock not owned";
    assert_eq!(key_of(&c, text), Some((Some(3), k("payout:batch:lock:42"))));
    // An explicit namespace keeps its say; the key named is still carried.
    let both = r#"{"msg":"lock release failed: not owned","namespace":"approval","key":"payout:batch:lock:1"}"#;
    assert_eq!(key_of(&c, both), Some((Some(1), k("payout:batch:lock:1"))));
    // A key field matching no pattern is no key; a word that does is.
    let other = r#"{"msg":"lock release of payout:batch:lock:5 failed: not owned","key":"cache:x"}"#;
    assert_eq!(key_of(&c, other), Some((Some(3), k("payout:batch:lock:5"))));
    // No key named: none carried.
    assert_eq!(key_of(&c, "lock release failed: lock not owned"), Some((None, None)));
    // An ordinary line is no event at all.
    assert_eq!(key_of(&c, "GET /payout:batch:lock:1 200"), None);
    // Keys are cut to 256 bytes.
    let long = format!("payout:batch:lock:{}", "x".repeat(400));
    let v = key_of(&c, &format!("lock release failed: lock not owned key={long}"));
    assert_eq!(v, Some((Some(3), k(&long[..256]))));
}

#[test]
fn the_key_named_is_the_first_word_with_a_colon_that_a_pattern_matches() {
    let c = classifier();
    // What `named_key` reads, written the plain way: every word, in order.
    let by_words = |text: &str| {
        text.split(crate::intake::words::is_separator).find_map(|w| {
            let w = w.trim_matches(|c: char| matches!(c, ':' | '.' | ',' | ';' | '\'' | '"'));
            (w.len() > 2 && w.contains(':'))
                .then(|| c.namespace_of_key(w).map(|i| (i, w.to_string())))
                .flatten()
        })
    };
    let keys = ["cordum:wf:run:lock:r1", "payout:batch:lock:7", "cordum:approval:lock:a"];
    let glue = [
        " ", ": ", "\u{2003}", "(", ")", "[", "=", "\"", "'", ".", ",", ":", "é", "`", "<", "x",
    ];
    let mut rng = crate::intake::test_rng::Xorshift(0x2545_f491_4f6c_dd1d);
    for _ in 0..3000 {
        let mut text = String::from(glue[rng.below(glue.len())]);
        for _ in 0..8 {
            let pick = rng.below(97);
            text.push_str(match pick % 4 {
                0 => keys[pick % keys.len()],
                1 => "lock:",
                2 => "x:y",
                _ => "word",
            });
            text.push_str(glue[pick % glue.len()]);
        }
        let f = Fields {
            message: text.as_str().into(),
            ..Fields::default()
        };
        let t = Text::of(&f, "");
        let got = c.named_key(&f, &t).map(|(i, w)| (i, w.to_string()));
        assert_eq!(got, by_words(&t.text), "{text:?}");
    }
}

#[test]
fn a_word_around_a_colon_is_the_same_read_by_bytes_in_ascii() {
    let mut rng = crate::intake::test_rng::Xorshift(0x00c0_1071_eb07_e5a1);
    let alphabet = b"ab:: \t\n\x0b\x0c\r\x1c()[]{}<>=\"`'.,;_x";
    for _ in 0..20_000 {
        let t: String = (0..rng.below(30))
            .map(|_| char::from(alphabet[rng.below(alphabet.len())]))
            .collect();
        for (at, _) in t.match_indices(':') {
            assert_eq!(
                crate::intake::words::word_around_ascii(t.as_bytes(), at),
                crate::intake::words::word_around(&t, at),
                "{t:?} at {at}"
            );
        }
    }
}
