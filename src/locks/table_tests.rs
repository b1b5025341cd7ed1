//! The lock table's unit tests: cycles, handoffs, fences, and the events-mode census and repairs.

use super::*;
use crate::config::ValueKind;
use crate::glob::Glob;
use crate::locks::events::{Found, NOT_A_WRITE, Need, Write};
use std::time::Duration;

fn ns() -> NamespaceConfig {
    NamespaceConfig {
        name: "wf".into(),
        pattern: Glob::new("wf:*").unwrap(),
        ttl: Duration::from_secs(30),
        renew_every: Some(Duration::from_secs(10)),
        renew_grace: Duration::from_secs(5),
        max_hold: Some(Duration::from_secs(60)),
        value: ValueKind::Token,
        fence_pattern: None,
        log_phrases: vec![],
        alerts: Default::default(),
    }
}

#[test]
fn tallies_held_no_ttl_overdue_and_age() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 29_000, 100_000);
    t.observe_lock(&ns, b"wf:2", b"b", -1, 100_000);
    let o = t.observe_lock(&ns, b"wf:3", b"c", 4_000, 100_000);
    assert_eq!(o.ttl_remaining_s, Some(4.0));
    let tally = t.complete();
    assert_eq!(
        (tally.held, tally.without_ttl, tally.overdue, tally.too_long),
        (3, 1, 1, 0)
    );
    assert_eq!(tally.max_age_ms, 26_000, "wf:3 was set at least 26 s ago");
}

#[test]
fn handoff_counts_owner_change_and_resets_age() {
    let (ns, mut t) = (ns(), NamespaceTable::new(true));
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 30_000, 0);
    t.complete();
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 30_000, 70_000);
    let tally = t.complete();
    assert_eq!(
        (t.take_counts().handoffs, tally.too_long, tally.max_age_ms),
        (0, 1, 70_000)
    );
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"b", 30_000, 80_000);
    let tally = t.complete();
    assert_eq!((t.take_counts().handoffs, tally.too_long, tally.max_age_ms), (1, 0, 0));
    assert_eq!(t.token(b"wf:1"), Some(&b"b"[..]));
}

#[test]
fn tokens_are_kept_only_when_shown_and_dropped_with_the_lock() {
    let ns = ns();
    let mut hidden = NamespaceTable::new(false);
    hidden.begin();
    hidden.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
    hidden.complete();
    assert_eq!(hidden.token(b"wf:1"), None);
    let mut shown = NamespaceTable::new(true);
    shown.begin();
    shown.observe_lock(&ns, b"wf:1", b"secret", 20_000, 0);
    shown.complete();
    assert_eq!(shown.token(b"wf:1"), Some(&b"secret"[..]));
    shown.begin();
    shown.complete();
    assert_eq!(shown.token(b"wf:1"), None);
}

#[test]
fn entry_stays_small() {
    // owner (8); since and expiry (40 bits each), pass (24), event count (16), flags (8).
    assert_eq!(std::mem::size_of::<LockEntry>(), 24);
}

#[test]
fn duplicate_scan_results_count_once_per_cycle() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
    t.suspend(WalkPosition {
        node: 0,
        phase: Phase::Locks,
        cursor: 7,
    });
    assert_eq!(
        t.begin(),
        WalkPosition {
            node: 0,
            phase: Phase::Locks,
            cursor: 7
        },
        "the walk resumes"
    );
    let again = t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
    assert_eq!(again.ttl_remaining_s, None);
    assert_eq!(t.complete().held, 1);
}

#[test]
fn a_cycle_over_several_passes_drops_only_what_it_did_not_see() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
    t.observe_lock(&ns, b"wf:2", b"a", 20_000, 0);
    t.complete();
    // Next cycle, cut after wf:1; the gauges keep the last complete cycle's values.
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
    t.suspend(WalkPosition {
        node: 0,
        phase: Phase::Locks,
        cursor: 3,
    });
    assert_eq!((t.len(), t.last().held), (2, 2));
    // It ends in the next pass without meeting wf:2, which is then gone.
    t.begin();
    t.observe_lock(&ns, b"wf:3", b"a", 20_000, 0);
    let tally = t.complete();
    assert_eq!(tally.held, 2);
    assert!(t.lock(b"wf:2").is_none() && t.lock(b"wf:1").is_some());
    assert_eq!(t.begin(), WalkPosition::START);
}

#[test]
fn counts_survive_an_abandoned_pass() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"a", 20_000, 0);
    t.complete();
    t.begin();
    t.observe_lock(&ns, b"wf:1", b"b", 20_000, 0);
    t.abandon();
    assert_eq!(
        t.take_counts().handoffs,
        1,
        "the handoff is published even though the pass failed"
    );
    assert_eq!(t.len(), 1, "an abandoned walk drops nothing");
    assert_eq!(t.begin(), WalkPosition::START);
    t.observe_lock(&ns, b"wf:1", b"b", 20_000, 0);
    t.complete();
    assert_eq!(t.take_counts().handoffs, 0, "and is not counted twice");
}

#[test]
fn fence_regressions_backwards_and_vanished() {
    let mut t = NamespaceTable::new(false);
    t.begin();
    t.observe_fence(b"f:1", 10);
    t.observe_fence(b"f:2", 5);
    let tally = t.complete();
    assert_eq!((tally.fence_max, t.take_counts().fence_regressions), (Some(10), 0));
    t.begin();
    t.observe_fence(b"f:1", 7);
    t.observe_fence(b"f:2", 6);
    let tally = t.complete();
    assert_eq!((tally.fence_max, t.take_counts().fence_regressions), (Some(7), 1));
    t.begin();
    t.observe_fence(b"f:2", 6);
    t.complete();
    assert_eq!(t.take_counts().fence_regressions, 1, "f:1 vanished");
    t.begin();
    t.suspend(WalkPosition {
        node: 0,
        phase: Phase::Fences,
        cursor: 9,
    });
    assert_eq!(
        t.take_counts().fence_regressions,
        0,
        "an unfinished walk proves nothing vanished"
    );
}

#[test]
fn a_read_answered_after_the_key_was_forgotten_does_not_bring_it_back() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    // `set` announced, its read in flight; the `del` is handled before the read answers
    // with what it saw before the delete.
    let seq = full(t.announce(b"wf:1", Write::Value, 100_000));
    t.forget(b"wf:1");
    let before_del = crate::locks::events::Found::Lock {
        owner: b"a",
        pttl_ms: 29_000,
    };
    t.event_read(&ns, b"wf:1", seq, before_del, 100_000, 100_005, 100_005);
    assert_eq!(t.census_at(&ns, 100_010).held, 0);
    // A read that answers while its key is still there is applied.
    let seq = full(t.announce(b"wf:2", Write::Value, 100_000));
    t.event_read(&ns, b"wf:2", seq, before_del, 100_000, 100_005, 100_005);
    assert_eq!(t.census_at(&ns, 100_010).held, 1);
}

/// `key` announced by an event and read held by `owner`.
fn read_held(t: &mut NamespaceTable, n: &NamespaceConfig, key: &[u8], owner: &[u8]) {
    let seq = full(t.announce(key, Write::Value, 1_000));
    let found = crate::locks::events::Found::Lock { owner, pttl_ms: 30_000 };
    t.event_read(n, key, seq, found, 1_000, 1_000, 1_000);
}

/// The event count of a read of owner and TTL.
fn full(need: Need) -> u16 {
    match need {
        Need::Full(seq) => seq,
        other => panic!("owner and TTL to read, not {other:?}"),
    }
}

#[test]
fn a_lock_set_aside_leaves_the_census_and_comes_back_as_it_was_when_moved() {
    let n = ns();
    let mut t = NamespaceTable::new(true);
    read_held(&mut t, &n, b"k", b"A");
    let since = t.lock(b"k").map(|e| e.since_ms());
    t.set_aside(b"k");
    assert_eq!(
        t.census_at(&n, 2_000).held,
        0,
        "out of the census while its del is checked"
    );
    assert!(t.aside(b"k").is_some() && t.lock(b"k").is_none());
    t.settle_aside(b"k", true);
    assert_eq!(t.census_at(&n, 2_000).held, 1, "a move: back");
    assert_eq!(t.lock(b"k").map(|e| e.since_ms()), since, "its age kept");
    assert_eq!(t.token(b"k"), Some(&b"A"[..]));
    t.set_aside(b"k");
    t.settle_aside(b"k", false);
    assert!(
        t.lock(b"k").is_none() && t.aside(b"k").is_none() && t.token(b"k").is_none(),
        "gone"
    );
    // Back to scan mode, what is aside returns (the next cycle drops it if gone).
    read_held(&mut t, &n, b"j", b"B");
    t.set_aside(b"j");
    t.enter_scan_mode();
    assert!(t.lock(b"j").is_some());
}

#[test]
fn reads_after_events_ask_only_what_is_not_known() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    let k: &[u8] = b"wf:1";
    // An acquisition: `set`, then the `expire` of its PX, share one read of owner and TTL.
    assert_eq!(t.announce(k, Write::Value, 1_000), Need::Full(0));
    assert_eq!(t.announce(k, Write::Ttl, 1_000), Need::Full(1), "the read is still out");
    let found = Found::Lock {
        owner: b"a",
        pttl_ms: 29_990,
    };
    t.event_read(&ns, k, 0, found, 1_000, 1_010, 1_010);
    assert_eq!(
        t.announce(k, Write::Ttl, 1_020),
        Need::Full(2),
        "an answer for an older event teaches nothing"
    );
    t.event_read(&ns, k, 2, found, 1_020, 1_030, 1_030);
    // Renewals are read until reads after them agree on its TTL (the acquisition's read
    // teaches none).
    for (seq, at) in [(3, 2_000), (4, 3_000), (5, 4_000), (6, 5_000)] {
        assert_eq!(t.announce(k, Write::Ttl, at), Need::Full(seq));
        t.event_read(&ns, k, seq, found, at, at + 10, at + 10);
    }
    // Known now: its TTL class (29,990 left 10 ms after the write) is learnt, and a
    // renewal's `expire` sets it again without a read.
    // A pass's read out before the renewal answers after it: dropped, not taken over the
    // renewal's TTL.
    let pass_seq = t.lock(k).map(|e| e.seq()).unwrap();
    assert_eq!(t.announce(k, Write::Ttl, 11_000), Need::Nothing);
    assert_eq!(t.lock(k).map(|e| e.pttl_at(11_000)), Some(30_000));
    let before = Found::Lock {
        owner: b"a",
        pttl_ms: 1_000,
    };
    t.refresh_read(&ns, k, pass_seq, before, 11_010);
    assert_eq!(t.lock(k).map(|e| e.pttl_at(11_010)), Some(29_990));
    // `SET … PX` on it: the `set` asks for its owner alone, the `expire` takes the TTL, and
    // the owner read answers after it: a new owner is a handoff, the TTL stays.
    assert_eq!(t.announce(k, Write::Value, 12_000), Need::Owner(8));
    assert_eq!(t.announce(k, Write::Ttl, 12_000), Need::Nothing);
    assert_eq!(
        t.event_read(&ns, k, 8, Found::Owner(b"b"), 12_000, 12_001, 12_005),
        None
    );
    assert_eq!(t.take_counts().handoffs, 1);
    assert_eq!(t.lock(k).map(|e| e.pttl_at(12_005)), Some(29_995));
    // A `SET` without `PX`: no `expire` before its owner read answers, so its TTL is read.
    assert_eq!(t.announce(k, Write::Value, 13_000), Need::Owner(10));
    let ttl_seq = t.event_read(&ns, k, 10, Found::Owner(b"b"), 13_000, 13_001, 13_005);
    assert_eq!(ttl_seq, Some(11));
    let no_ttl = Found::Lock {
        owner: b"b",
        pttl_ms: -1,
    };
    t.event_read(&ns, k, 11, no_ttl, NOT_A_WRITE, 13_006, 13_010);
    assert_eq!(t.census_at(&ns, 13_010).without_ttl, 1);
    // A lock set with a longer TTL: its renewals are read until reads after them agree on
    // its own class; wf:1's renewals keep taking wf:1's own TTL.
    let long: &[u8] = b"wf:2";
    let seq = full(t.announce(long, Write::Value, 20_000));
    t.event_read(
        &ns,
        long,
        seq,
        Found::Lock {
            owner: b"c",
            pttl_ms: 300_000,
        },
        20_000,
        20_000,
        20_000,
    );
    assert!(matches!(t.announce(long, Write::Ttl, 21_000), Need::Full(_)));
    assert_eq!(t.announce(k, Write::Ttl, 22_000), Need::Nothing);
    assert_eq!(t.lock(k).map(|e| e.pttl_at(22_000)), Some(30_000));
    // A failed read is asked again by the next event.
    let seq = full(t.announce(b"wf:3", Write::Value, 30_000));
    t.event_read_failed(b"wf:3", seq);
    assert!(matches!(t.announce(b"wf:3", Write::Ttl, 30_001), Need::Full(_)));
}

#[test]
fn a_set_whose_owner_was_not_read_makes_the_next_read_of_another_owner_a_handoff() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    read_held(&mut t, &ns, b"wf:1", b"a");
    read_held(&mut t, &ns, b"wf:2", b"a");
    // `set` of each; wf:1's owner read is skipped (the budget spent), wf:2's was not asked.
    let Need::Owner(seq) = t.announce(b"wf:1", Write::Value, 2_000) else {
        panic!("an owner read");
    };
    t.event_read_failed(b"wf:1", seq);
    let _ = t.take_counts();
    // A pass re-reads both and finds another owner: wf:1's is a handoff at once; wf:2's a
    // discrepancy no event explains (a suspect, a repair once confirmed).
    let b = Found::Lock {
        owner: b"b",
        pttl_ms: 20_000,
    };
    let seq1 = t.lock(b"wf:1").map(|e| e.seq()).unwrap();
    let seq2 = t.lock(b"wf:2").map(|e| e.seq()).unwrap();
    t.refresh_read(&ns, b"wf:1", seq1, b, 3_000);
    let counts = t.take_counts();
    assert_eq!(
        (counts.handoffs, counts.repairs),
        (1, [0; 3]),
        "wf:1's new owner, no repair"
    );
    t.refresh_read(&ns, b"wf:2", seq2, b, 3_000);
    t.refresh_read(&ns, b"wf:2", seq2, b, 4_500);
    assert_eq!(t.take_counts().repairs.iter().sum::<u64>(), 1, "wf:2's, confirmed");
}

#[test]
fn the_inventory_takes_a_lock_in_only_once_a_second_read_finds_it_and_counts_nothing() {
    let (ns, mut t) = (ns(), NamespaceTable::new(false));
    let found = Found::Lock {
        owner: b"a",
        pttl_ms: 20_000,
    };
    // wf:1 was read by the walk before its `del`, which was handled first: the second read
    // finds it gone, and it never comes back as a lock.
    t.walk_found(&ns, b"wf:1", found, 1_000, false);
    t.walk_found(&ns, b"wf:2", found, 1_000, false);
    assert_eq!(t.census_at(&ns, 1_000).held, 0);
    t.walk_found(&ns, b"wf:1", Found::Gone, 2_100, true);
    t.walk_found(&ns, b"wf:2", found, 2_100, true);
    assert_eq!(t.census_at(&ns, 2_100).held, 1, "wf:2 alone");
    assert_eq!(t.take_counts().repairs, [0; 3], "an inventory repairs nothing");
}

#[test]
fn a_lock_not_read_for_longer_than_the_pass_window_is_re_read_whatever_the_freshness() {
    let n = ns();
    let mut t = NamespaceTable::new(false);
    t.next_pass();
    read_held(&mut t, &n, b"wf:1", b"a");
    let stale = |t: &mut NamespaceTable| t.to_refresh(u32::MAX, 2_000, None, |_| {}).len();
    assert_eq!(stale(&mut t), 0, "read this pass");
    // 2^24 passes on (say a second each, 194 days) its stored 24 bits would alias this pass;
    // pinned at the window, it reads as old, and is re-read even with no limit set.
    for _ in 0..(1u32 << 24) {
        t.next_pass();
    }
    assert_eq!(stale(&mut t), 1);
    assert_eq!(t.owner_seen_after(b"wf:1", t.pass_number().wrapping_sub(10)), None);
}

/// `key` acquired at `at` (its `set` and the `expire` of its PX) and read `ttl_ms` after
/// the write, 1 ms later.
fn acquire(t: &mut NamespaceTable, n: &NamespaceConfig, key: &[u8], owner: &[u8], ttl_ms: i64, at: i64) {
    assert_eq!(t.announce(key, Write::Value, at), Need::Full(0));
    let seq = full(t.announce(key, Write::Ttl, at));
    let found = Found::Lock {
        owner,
        pttl_ms: ttl_ms - 1,
    };
    t.event_read(n, key, seq, found, at, at + 1, at + 1);
}

/// A renewal of `key` at `at`, read when the table asks, `ttl_ms` set again.
fn renew(t: &mut NamespaceTable, n: &NamespaceConfig, key: &[u8], ttl_ms: i64, at: i64) -> Need {
    let need = t.announce(key, Write::Ttl, at);
    if let Need::Full(seq) = need {
        let found = Found::Lock {
            owner: b"holder",
            pttl_ms: ttl_ms - 1,
        };
        t.event_read(n, key, seq, found, at, at + 1, at + 1);
    }
    need
}

/// Renewals of `key` with `ttl_ms` every second from `at` on, until one is taken without a
/// read: when that one came, and how many were read before it.
fn renew_until_trusted(
    t: &mut NamespaceTable,
    n: &NamespaceConfig,
    key: &[u8],
    ttl_ms: i64,
    mut at: i64,
) -> (i64, u32) {
    let mut read = 0;
    loop {
        at += 1_000;
        if !matches!(renew(t, n, key, ttl_ms, at), Need::Full(_)) {
            return (at, read);
        }
        read += 1;
        assert!(read < 10, "renewals never trusted");
    }
}

#[test]
fn a_renewal_takes_its_own_locks_ttl_whatever_other_locks_are_set_with() {
    let (n, mut t) = (ns(), NamespaceTable::new(false));
    let k: &[u8] = b"wf:holder";
    acquire(&mut t, &n, k, b"holder", 30_000, 1_000);
    // Its renewals are read until reads agree on its TTL; then taken, not read.
    let (mut at, _) = renew_until_trusted(&mut t, &n, k, 30_000, 1_000);
    // Beside it, other locks taken and released all the time with a TTL of an hour (then
    // of two seconds): reads after their writes agree on it, run after run. The holder
    // renews after each run: its expiry is its own 30 s, never theirs.
    for other_ttl in [3_600_000, 2_000] {
        for i in 0..100 {
            at += 100;
            let other = format!("wf:other:{}", i % 3);
            acquire(&mut t, &n, other.as_bytes(), b"o", other_ttl, at);
            renew(&mut t, &n, other.as_bytes(), other_ttl, at + 10);
            t.forget(other.as_bytes());
        }
        at += 100;
        assert_eq!(renew(&mut t, &n, k, 30_000, at), Need::Nothing, "a trusted class");
        assert_eq!(t.lock(k).map(|e| e.pttl_at(at)), Some(30_000));
    }
    // It stalls after that renewal: overdue (below 15 s) 15 s later.
    assert_eq!(t.census_at(&n, at + 14_990).overdue, 0);
    assert_eq!(t.census_at(&n, at + 15_010).overdue, 1);
}

#[test]
fn an_estimated_ttl_is_read_before_it_could_make_a_lock_overdue() {
    let (n, mut t) = (ns(), NamespaceTable::new(false));
    let k: &[u8] = b"wf:1";
    acquire(&mut t, &n, k, b"holder", 30_000, 1_000);
    let (at, _) = renew_until_trusted(&mut t, &n, k, 30_000, 1_000);
    t.next_pass();
    // Fresh for a pass of 5 s while its estimate is above the mark (15 s) plus 5.5 s …
    let verify = Some(20_500);
    assert!(t.to_refresh(u32::MAX, at + 9_000, verify, |_| {}).is_empty());
    // … read once it is below it.
    let stale = t.to_refresh(u32::MAX, at + 9_600, verify, |_| {});
    assert_eq!(stale.len(), 1);
    // The holder had renewed with a TTL of a minute: the read says so, and it is not
    // overdue when the estimate would have made it.
    let found = Found::Lock {
        owner: b"holder",
        pttl_ms: 50_400,
    };
    t.refresh_read(&n, k, stale[0].seq, found, at + 9_600);
    assert!(
        t.to_refresh(u32::MAX, at + 9_700, verify, |_| {}).is_empty(),
        "read, not estimated"
    );
    assert_eq!(t.census_at(&n, at + 15_000).overdue, 0);
    // Its next renewal is read (its TTL disagreed with its class) and teaches it anew.
    assert!(matches!(renew(&mut t, &n, k, 60_000, at + 20_000), Need::Full(_)));
    assert_eq!(t.lock(k).map(|e| e.pttl_at(at + 20_001)), Some(59_999));
}

#[test]
fn ttl_classes_no_lock_holds_are_freed_when_all_are_taken() {
    let (n, mut t) = (ns(), NamespaceTable::new(false));
    let class = |t: &NamespaceTable, k: &[u8]| t.lock(k).map(|e| e.ttl_class());
    // Seven TTLs, a lock each, renewed once (a renewal's read teaches its class); the first
    // is set aside (its `del` checked), the others go.
    for i in 0..7i64 {
        let key = format!("wf:{i}");
        let ttl = 1_000 * (2 + 2 * i);
        acquire(&mut t, &n, key.as_bytes(), b"o", ttl, 1_000);
        assert!(matches!(renew(&mut t, &n, key.as_bytes(), ttl, 1_100), Need::Full(_)));
    }
    assert_eq!(class(&t, b"wf:0"), Some(1));
    t.set_aside(b"wf:0");
    for i in 1..7 {
        t.forget(format!("wf:{i}").as_bytes());
    }
    // An eighth TTL finds no class: its lock's renewals are read.
    acquire(&mut t, &n, b"wf:new", b"o", 500_000, 2_000);
    assert_eq!(class(&t, b"wf:new"), Some(0), "an acquisition teaches no class");
    renew(&mut t, &n, b"wf:new", 500_000, 2_100);
    assert_eq!(class(&t, b"wf:new"), Some(0), "none free");
    // A pass frees the six no lock holds (the lock aside holds the first); the next read
    // after a renewal finds one of them.
    t.next_pass();
    t.to_refresh(u32::MAX, 3_000, None, |_| {});
    assert!(matches!(renew(&mut t, &n, b"wf:new", 500_000, 4_000), Need::Full(_)));
    assert!(
        !matches!(class(&t, b"wf:new"), Some(0) | Some(1)),
        "{:?}",
        class(&t, b"wf:new")
    );
    t.settle_aside(b"wf:0", true);
    assert_eq!(class(&t, b"wf:0"), Some(1), "back with its class, still its own");
}

#[test]
fn a_holder_that_renews_with_a_shorter_ttl_than_it_acquired_with_is_estimated_with_its_renewals() {
    let (n, mut t) = (ns(), NamespaceTable::new(false));
    // Other locks acquired and renewed with an hour: that class is learnt.
    for i in 0..6 {
        let other = format!("wf:other:{i}");
        acquire(&mut t, &n, other.as_bytes(), b"o", 3_600_000, 1_000 + i);
        renew(&mut t, &n, other.as_bytes(), 3_600_000, 1_100 + i);
    }
    // The holder acquires with an hour too, and renews with 30 s: its renewals are read
    // until its own class is learnt, then estimated with 30 s, not an hour.
    let k: &[u8] = b"wf:holder";
    acquire(&mut t, &n, k, b"holder", 3_600_000, 2_000);
    let (at, read) = renew_until_trusted(&mut t, &n, k, 30_000, 2_000);
    assert!(read >= 1, "its first renewal is read");
    assert_eq!(t.lock(k).map(|e| e.pttl_at(at)), Some(30_000));
    assert_eq!(t.census_at(&n, at + 15_010).overdue, 1, "stalled: overdue 15 s on");
}
