use super::*;
use crate::drill::freeze::seen::Sender;

const W: Window = Window {
    frozen_ms: 10_000,
    thawed_ms: 18_000,
    end_ms: 26_000,
};

fn t(at_ms: WallMs, kind: &str, owner: &str, takeover: bool) -> Transition {
    Transition {
        at_ms,
        kind: kind.into(),
        owner: Some(owner.into()),
        takeover,
    }
}

fn refusal(at_ms: WallMs, op: &str) -> KeyEvent {
    KeyEvent {
        at_ms,
        op: op.into(),
        outcome: "not_owned".into(),
        source: "app".into(),
    }
}

/// Held by `a`, renewed every second until the freeze, expired at 12 s, taken over by `b`
/// at 12.4 s (while frozen); then `more`.
fn lock(more: Vec<Transition>, events: Vec<KeyEvent>) -> KeySeen {
    let mut transitions = vec![t(7_000, "acquired", "a", false)];
    transitions.extend((8..=9).map(|s| t(s * 1000, "renewed", "a", false)));
    transitions.push(t(12_000, "expired", "a", false));
    transitions.push(t(12_400, "acquired", "b", true));
    transitions.push(t(13_000, "renewed", "b", false));
    transitions.extend(more);
    KeySeen {
        key: "lock:payout:7".into(),
        held_at_freeze: Some("a".into()),
        transitions,
        events: Some(events),
    }
}

fn one(k: KeySeen, counted: &[CountedRefusal], witness: &[Command]) -> LockVerdict {
    let mut v = judge(&[k], counted, witness, &W).locks;
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

#[test]
fn refused_after_the_thaw_with_the_new_owner_intact_is_safe() {
    let k = lock(
        vec![t(24_000, "released", "b", false)],
        vec![refusal(18_300, "renew"), refusal(18_700, "release")],
    );
    let v = one(k, &[], &[]);
    assert_eq!((v.verdict, v.finding), (Verdict::Safe, Finding::Refused), "{v:?}");
    assert_eq!((v.expired_ms, v.taken_over_ms), (Some(12_000), Some(12_400)));
    assert_eq!(v.new_owner.as_deref(), Some("b"));
    assert_eq!(v.refusals.len(), 2);
    assert!(v.attributed_by.contains("renewed 2 time(s)"), "{}", v.attributed_by);
}

#[test]
fn nothing_from_the_woken_holder_is_carrying_on_silently() {
    let v = one(lock(vec![t(24_000, "released", "b", false)], vec![]), &[], &[]);
    assert_eq!((v.verdict, v.finding), (Verdict::Unsafe, Finding::CarriedOnSilently));
    // Refusals before the thaw are not the woken worker's.
    let early = lock(vec![], vec![refusal(11_000, "renew")]);
    assert_eq!(one(early, &[], &[]).finding, Finding::CarriedOnSilently);
}

#[test]
fn a_del_of_the_new_owners_lock_seen_from_the_worker_s_connection_is_unsafe() {
    let k = lock(
        vec![t(20_000, "released", "b", false), t(20_500, "acquired", "c", false)],
        // Refusals that follow are the new owner's: not evidence of safety.
        vec![refusal(21_000, "renew"), refusal(22_000, "release")],
    );
    let del = Command {
        at_ms: 20_000,
        key: "lock:payout:7".into(),
        name: "DEL".into(),
        by: Sender::FrozenWorker {
            addr: "127.0.0.1:5000".into(),
            how: "a socket of process 42".into(),
        },
    };
    let v = one(k, &[], &[del]);
    assert_eq!((v.verdict, v.finding), (Verdict::Unsafe, Finding::DeletedNewOwnersLock));
    assert_eq!(v.deleted_ms, Some(20_000));
    assert!(v.deleted_how.as_deref().unwrap_or("").contains("127.0.0.1:5000"));
}

#[test]
fn without_the_witness_a_deletion_followed_by_refusals_is_the_woken_worker_s() {
    let k = lock(vec![t(20_000, "released", "b", false)], vec![refusal(21_000, "renew")]);
    let v = one(k, &[], &[]);
    assert_eq!(v.finding, Finding::DeletedNewOwnersLock, "{v:?}");
    // The new owner's own release, seen from another connection, is not a deletion.
    let k = lock(
        vec![t(20_000, "released", "b", false)],
        vec![refusal(18_200, "renew"), refusal(21_000, "release")],
    );
    let own = Command {
        at_ms: 20_000,
        key: "lock:payout:7".into(),
        name: "EVALSHA>del".into(),
        by: Sender::Other {
            addr: "127.0.0.1:6000".into(),
        },
    };
    assert_eq!(one(k, &[], &[own]).finding, Finding::Refused);
}

#[test]
fn a_replaced_token_after_the_thaw_is_a_deletion() {
    let k = lock(vec![t(19_000, "acquired", "a2", false)], vec![refusal(18_500, "renew")]);
    assert_eq!(one(k, &[], &[]).finding, Finding::DeletedNewOwnersLock);
}

#[test]
fn namespace_counts_stand_in_only_where_the_exporter_keeps_no_events_per_key() {
    let counted = vec![CountedRefusal {
        at_ms: 18_500,
        op: "release".into(),
        outcome: "not_owned".into(),
        by: 1,
    }];
    // An exporter with per-key events: the namespace's refusals are no evidence for this key.
    assert_eq!(
        one(lock(vec![], vec![]), &counted, &[]).finding,
        Finding::CarriedOnSilently
    );
    let mut k = lock(vec![], vec![]);
    k.events = None;
    let v = one(k, &counted, &[]);
    assert_eq!(v.finding, Finding::Refused);
    assert!(
        v.refusals[0].what.contains("counted for the namespace"),
        "{:?}",
        v.refusals
    );
}

#[test]
fn not_taken_over_and_outlasting_locks_are_not_exercised() {
    let mut k = lock(vec![], vec![]);
    k.transitions.retain(|t| t.owner.as_deref() == Some("a"));
    assert_eq!(one(k, &[], &[]).finding, Finding::NotTakenOver);
    // Renewed every second, then nothing for the 8 s freeze, and still held.
    let k = KeySeen {
        key: "lock:long".into(),
        held_at_freeze: Some("a".into()),
        transitions: (5..=9).map(|s| t(s * 1000, "renewed", "a", false)).collect(),
        events: Some(vec![]),
    };
    let v = one(k, &[], &[]);
    assert_eq!(
        (v.verdict, v.finding),
        (Verdict::NotExercised, Finding::OutlastedFreeze)
    );
    assert!(v.attributed_by.contains("renewals stopped"), "{}", v.attributed_by);
}

#[test]
fn locks_renewed_released_or_not_held_during_the_freeze_are_someone_else_s() {
    let renewed = KeySeen {
        key: "lock:other".into(),
        held_at_freeze: Some("x".into()),
        transitions: vec![t(9_000, "acquired", "x", false), t(12_000, "renewed", "x", false)],
        events: None,
    };
    let released = KeySeen {
        key: "lock:done".into(),
        held_at_freeze: Some("y".into()),
        transitions: vec![t(9_000, "acquired", "y", false), t(11_000, "released", "y", false)],
        events: None,
    };
    let later = KeySeen {
        key: "lock:later".into(),
        held_at_freeze: None,
        transitions: vec![t(15_000, "acquired", "z", false), t(17_000, "expired", "z", false)],
        events: None,
    };
    // Listed as held just after the freeze, but acquired after it began.
    let just_after = KeySeen {
        key: "lock:just-after".into(),
        held_at_freeze: Some("n".into()),
        transitions: vec![t(10_100, "acquired", "n", false), t(11_300, "expired", "n", false)],
        events: None,
    };
    assert!(
        judge(&[renewed, released, later, just_after], &[], &[], &W)
            .locks
            .is_empty()
    );
}

#[test]
fn the_worst_lock_decides() {
    let safe = one(lock(vec![], vec![refusal(18_300, "renew")]), &[], &[]);
    let silent = one(lock(vec![], vec![]), &[], &[]);
    assert_eq!(overall(&[]), Verdict::NotExercised);
    assert_eq!(overall(std::slice::from_ref(&safe)), Verdict::Safe);
    assert_eq!(overall(&[safe, silent]), Verdict::Unsafe);
}

fn cmd(at_ms: WallMs, name: &str, worker: bool, addr: &str) -> Command {
    Command {
        at_ms,
        key: "lock:payout:7".into(),
        name: name.into(),
        by: match worker {
            true => Sender::FrozenWorker {
                addr: addr.into(),
                how: "from /proc".into(),
            },
            false => Sender::Other { addr: addr.into() },
        },
    }
}

#[test]
fn the_witness_tells_the_worker_s_locks_from_another_holder_s() {
    let silent = lock(vec![], vec![]);
    // Its renewal at 9 s came from the frozen worker's connection: attributed by MONITOR.
    let mine = [
        cmd(9_020, "EVALSHA", true, "127.0.0.1:5000"),
        cmd(9_030, "GET", false, "127.0.0.1:7000"),
    ];
    let j = judge(std::slice::from_ref(&silent), &[], &mine, &W);
    assert_eq!(j.locks.len(), 1);
    assert!(
        j.locks[0]
            .attributed_by
            .starts_with("MONITOR saw the frozen worker's connection 127.0.0.1:5000 renew"),
        "{}",
        j.locks[0].attributed_by
    );
    // Renewed from another client while the worker's connections are known: not its lock.
    let mut theirs = [
        cmd(9_010, "EVALSHA>pexpire", false, "127.0.0.1:6000"),
        cmd(11_000, "GET", true, "127.0.0.1:5000"),
    ];
    theirs[1].key = "lock:elsewhere".into();
    let j = judge(std::slice::from_ref(&silent), &[], &theirs, &W);
    assert!(j.locks.is_empty(), "{:?}", j.locks);
    assert!(
        j.others[0].contains("127.0.0.1:6000") && j.others[0].contains("another holder's"),
        "{:?}",
        j.others
    );
    // Nothing seen near its writes, and the worker's connections never touched it: not its.
    let unseen = [
        cmd(1_000, "SET NX", false, "127.0.0.1:6000"),
        cmd(500, "GET", true, "127.0.0.1:5000"),
    ];
    let mut elsewhere = unseen.clone();
    elsewhere[1].key = "lock:elsewhere".into();
    let j = judge(std::slice::from_ref(&silent), &[], &elsewhere, &W);
    assert!(
        j.locks.is_empty() && j.others[0].contains("never sent a command"),
        "{:?}",
        j.others
    );
    // …but touched by it (a read before the lead window's writes): the heuristic stands.
    let j = judge(std::slice::from_ref(&silent), &[], &unseen, &W);
    assert_eq!(j.locks.len(), 1);
    // Without the witness's knowledge of the worker's connections: the heuristic stands.
    let j = judge(&[silent], &[], &[cmd(1_000, "SET NX", false, "127.0.0.1:6000")], &W);
    assert_eq!(j.locks.len(), 1);
}
