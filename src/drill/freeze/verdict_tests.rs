use super::*;
use crate::drill::freeze::seen::{EventOrigin, Sender};

const W: Window = Window {
    frozen_ms: 10_000,
    thawed_ms: 18_000,
    end_ms: 30_000,
};

/// The worker's pid, as its log lines carry it.
const WORKER: u32 = 42;
/// Another holder's.
const OTHER: u32 = 77;
/// Renewal period: a third of a 3 s TTL.
const PERIOD: WallMs = 1_000;

fn t(at_ms: WallMs, kind: &str, owner: &str, takeover: bool) -> Transition {
    Transition {
        at_ms,
        kind: kind.into(),
        owner: Some(owner.into()),
        takeover,
    }
}

fn event(at_ms: WallMs, op: &str, outcome: &str, pid: Option<u32>) -> KeyEvent {
    KeyEvent {
        at_ms,
        op: op.into(),
        outcome: outcome.into(),
        source: "app".into(),
        origin: EventOrigin {
            pid,
            ..EventOrigin::default()
        },
    }
}

/// A refusal logged by the worker (its pid on the line).
fn refusal(at_ms: WallMs, op: &str) -> KeyEvent {
    event(at_ms, op, "not_owned", Some(WORKER))
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
        script: name.starts_with("EVAL").then_some(1),
    }
}

/// A witness that ran and saw `commands`.
fn saw(commands: Vec<Command>) -> Witnessed {
    Witnessed {
        ran: true,
        commands,
        ..Witnessed::default()
    }
}

fn judged(keys: &[KeySeen], counted: &[CountedRefusal], witness: &Witnessed) -> Judged {
    judge(&Evidence {
        keys,
        counted,
        witness,
        worker: &Identity::with_pids(&[WORKER]),
        window: W,
        period_ms: PERIOD,
    })
}

fn one_with(k: KeySeen, counted: &[CountedRefusal], witness: &Witnessed) -> LockVerdict {
    let mut v = judged(&[k], counted, witness).locks;
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

fn one(k: KeySeen) -> LockVerdict {
    one_with(k, &[], &saw(vec![]))
}

#[test]
fn refused_at_once_and_nothing_more_is_stopped() {
    let k = lock(
        vec![t(24_000, "released", "b", false)],
        vec![refusal(18_300, "renew"), refusal(18_700, "release")],
    );
    let v = one(k);
    assert_eq!((v.verdict, v.finding), (Verdict::Safe, Finding::Stopped), "{v:?}");
    assert_eq!((v.expired_ms, v.taken_over_ms), (Some(12_000), Some(12_400)));
    assert_eq!(v.new_owner.as_deref(), Some("b"));
    assert_eq!(v.refusals.len(), 2);
    assert!(v.refusals[0].whose.contains("pid 42"), "{:?}", v.refusals);
    assert_eq!(v.exposure_ms, Some(700));
    assert!(v.attributed_by.contains("renewed 2 time(s)"), "{}", v.attributed_by);
}

#[test]
fn a_refusal_after_the_work_is_noticed_late_with_its_exposure() {
    // The renewal failed unnoticed; the batch ran on, and only its release was refused, 9 s on.
    let k = lock(
        vec![t(28_000, "released", "b", false)],
        vec![refusal(27_000, "release")],
    );
    let v = one(k);
    assert_eq!((v.verdict, v.finding), (Verdict::Unsafe, Finding::NoticedLate), "{v:?}");
    assert_eq!(v.exposure_ms, Some(9_000));
    assert!(
        v.consequence.contains("9.0 s") && v.consequence.contains("ran twice"),
        "{}",
        v.consequence
    );
    // It never tried to take the lock again while watched: it may have gone on longer.
    assert!(v.exposure_open && v.exposure_words().unwrap_or_default().starts_with("at least 9.0 s"));
    // The last command the witness saw counts as much as a log line: a refused release at
    // +6 s sent by the worker's connection, its refusal logged at once.
    let k = lock(vec![], vec![refusal(18_200, "renew")]);
    let late = saw(vec![cmd(24_000, "EVALSHA", true, "127.0.0.1:5000")]);
    let v = one_with(k, &[], &late);
    assert_eq!((v.finding, v.exposure_ms), (Finding::NoticedLate, Some(6_000)), "{v:?}");
    assert!(
        v.last_act.as_deref().unwrap_or("").contains("EVALSHA"),
        "{:?}",
        v.last_act
    );
    // Within one renewal period and the log's delay is still stopped.
    let k = lock(vec![], vec![refusal(18_000 + PERIOD + LOG_DELAY_MS, "release")]);
    assert_eq!(one(k).finding, Finding::Stopped);
}

#[test]
fn a_stale_fence_refused_is_fenced_however_long_it_ran() {
    let k = lock(
        vec![],
        vec![
            event(18_500, "write", "stale_fence", Some(WORKER)),
            event(26_000, "write", "stale_fence", Some(WORKER)),
        ],
    );
    let v = one(k);
    assert_eq!((v.verdict, v.finding), (Verdict::Safe, Finding::Fenced), "{v:?}");
    assert_eq!(v.exposure_ms, Some(8_000));
}

#[test]
fn stopped_needs_a_witness_that_saw_everything() {
    let k = || lock(vec![], vec![refusal(18_300, "renew")]);
    let off = Witnessed::default();
    let v = one_with(k(), &[], &off);
    assert_eq!(
        (v.verdict, v.finding),
        (Verdict::NotExercised, Finding::Unconfirmed),
        "{v:?}"
    );
    assert!(v.notes.iter().any(|n| n.contains("--no-monitor")), "{:?}", v.notes);
    let unsure = Witnessed {
        unsure: vec!["1 client(s) … were gone".into()],
        ..saw(vec![])
    };
    assert_eq!(one_with(k(), &[], &unsure).finding, Finding::Unconfirmed);
    // Late or fenced does not rest on the witness's word.
    let late = lock(vec![], vec![refusal(27_000, "release")]);
    assert_eq!(one_with(late, &[], &off).finding, Finding::NoticedLate);
}

#[test]
fn nothing_from_the_woken_holder_is_carrying_on_silently() {
    let v = one(lock(vec![t(24_000, "released", "b", false)], vec![]));
    assert_eq!((v.verdict, v.finding), (Verdict::Unsafe, Finding::CarriedOnSilently));
    // Refusals before the thaw are not the woken worker's.
    let early = lock(vec![], vec![refusal(11_000, "renew")]);
    assert_eq!(one(early).finding, Finding::CarriedOnSilently);
}

#[test]
fn another_process_s_refusal_of_the_same_key_is_never_the_worker_s() {
    // Another pid; and one with no origin at all, with no command of the worker's before it.
    let k = lock(
        vec![],
        vec![
            event(18_300, "release", "not_owned", Some(OTHER)),
            event(19_000, "renew", "not_owned", None),
        ],
    );
    let v = one(k);
    assert_eq!(v.finding, Finding::CarriedOnSilently, "{v:?}");
    assert!(v.refusals.is_empty());
    assert_eq!(v.not_credited.len(), 2);
    assert!(
        v.not_credited[0].whose.contains("pid 77, not the worker's"),
        "{:?}",
        v.not_credited
    );
    assert!(v.not_credited[1].whose.contains("not tied"), "{:?}", v.not_credited);
}

#[test]
fn a_refusal_with_no_origin_is_tied_by_the_refused_command_just_before_it() {
    // The worker's refused renewal (no transition) at 18.1 s; the line counted at 18.4 s.
    let k = lock(vec![], vec![event(18_400, "renew", "not_owned", None)]);
    let v = one_with(
        k.clone(),
        &[],
        &saw(vec![cmd(18_100, "EVALSHA", true, "127.0.0.1:5000")]),
    );
    assert_eq!(v.finding, Finding::Stopped, "{v:?}");
    assert!(v.refusals[0].whose.contains("127.0.0.1:5000"), "{:?}", v.refusals);
    // Another connection's refused command in the same moments: not tied either way.
    let both = saw(vec![
        cmd(18_100, "EVALSHA", true, "127.0.0.1:5000"),
        cmd(18_200, "EVALSHA", false, "127.0.0.1:6000"),
    ]);
    assert_eq!(one_with(k, &[], &both).finding, Finding::CarriedOnSilently);
}

#[test]
fn a_del_of_the_new_owners_lock_from_the_worker_s_connection_is_unsafe() {
    let k = lock(
        vec![t(20_000, "released", "b", false), t(20_500, "acquired", "c", false)],
        // Refusals that follow are the new owner's: not evidence of safety.
        vec![
            event(21_000, "renew", "not_owned", Some(OTHER)),
            event(22_000, "release", "not_owned", Some(OTHER)),
        ],
    );
    let v = one_with(k, &[], &saw(vec![cmd(20_000, "DEL", true, "127.0.0.1:5000")]));
    assert_eq!((v.verdict, v.finding), (Verdict::Unsafe, Finding::DeletedNewOwnersLock));
    assert_eq!(v.deleted_ms, Some(20_000));
    assert!(v.deleted_how.as_deref().unwrap_or("").contains("127.0.0.1:5000"));
    assert!(v.refusals.is_empty(), "{:?}", v.refusals);
    assert!(
        v.notes.iter().any(|n| n.contains("deletion's consequence")),
        "{:?}",
        v.notes
    );
}

#[test]
fn without_the_witness_a_deletion_followed_by_others_refusals_is_the_woken_worker_s() {
    let off = Witnessed::default();
    let k = lock(
        vec![t(20_000, "released", "b", false)],
        vec![event(21_000, "renew", "not_owned", Some(OTHER))],
    );
    let v = one_with(k, &[], &off);
    assert_eq!(v.finding, Finding::DeletedNewOwnersLock, "{v:?}");
    // With a witness that saw everything and no deletion of the worker's: the new owner's
    // own release.
    let k = lock(
        vec![t(20_000, "released", "b", false)],
        vec![
            refusal(18_200, "renew"),
            event(21_000, "release", "not_owned", Some(OTHER)),
        ],
    );
    let own = cmd(20_000, "EVALSHA>del", false, "127.0.0.1:6000");
    assert_eq!(one_with(k, &[], &saw(vec![own])).finding, Finding::Stopped);
}

#[test]
fn a_replaced_token_after_the_thaw_is_a_deletion() {
    let k = lock(vec![t(19_000, "acquired", "a2", false)], vec![refusal(18_500, "renew")]);
    assert_eq!(
        one_with(k, &[], &Witnessed::default()).finding,
        Finding::DeletedNewOwnersLock
    );
}

#[test]
fn an_exporter_without_events_per_key_ties_no_refusal() {
    let counted = vec![CountedRefusal {
        at_ms: 18_500,
        op: "release".into(),
        outcome: "not_owned".into(),
        by: 1,
    }];
    let mut k = lock(vec![], vec![]);
    k.events = None;
    let v = one_with(k, &counted, &saw(vec![]));
    assert_eq!(v.finding, Finding::CarriedOnSilently);
    assert!(v.notes.iter().any(|n| n.contains("older lockwatch")), "{:?}", v.notes);
}

#[test]
fn acquisition_attempts_and_the_next_hold_are_not_exposure() {
    // Refused at once and stopped; then it tries to take the lock again (SET NX, busy) and
    // takes it at 25 s, renewing it with the same script as before: its own hold.
    let k = lock(
        vec![
            t(24_900, "released", "b", false),
            t(25_000, "acquired", "a3", false),
            t(26_000, "renewed", "a3", false),
        ],
        vec![refusal(18_300, "renew"), event(25_100, "acquire", "ok", Some(WORKER))],
    );
    let witness = saw(vec![
        cmd(18_100, "EVALSHA", true, "127.0.0.1:5000"),
        cmd(20_000, "SET NX", true, "127.0.0.1:5000"),
        cmd(25_000, "SET NX", true, "127.0.0.1:5000"),
        cmd(26_000, "EVALSHA", true, "127.0.0.1:5000"),
        cmd(24_900, "EVALSHA>del", false, "127.0.0.1:6000"),
    ]);
    let v = one_with(k, &[], &witness);
    assert_eq!((v.finding, v.exposure_ms), (Finding::Stopped, Some(300)), "{v:?}");
    assert!(!v.exposure_open, "it went back to taking the lock at 25 s");
}

#[test]
fn not_taken_over_and_outlasting_locks_are_not_exercised() {
    let mut k = lock(vec![], vec![]);
    k.transitions.retain(|t| t.owner.as_deref() == Some("a"));
    let v = one(k);
    assert_eq!((v.finding, v.exposure_ms), (Finding::NotTakenOver, None));
    // Renewed every second, then nothing for the 8 s freeze, and still held.
    let k = KeySeen {
        key: "lock:long".into(),
        held_at_freeze: Some("a".into()),
        transitions: (5..=9).map(|s| t(s * 1000, "renewed", "a", false)).collect(),
        events: Some(vec![]),
    };
    let v = one(k);
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
        judged(&[renewed, released, later, just_after], &[], &saw(vec![]))
            .locks
            .is_empty()
    );
}

#[test]
fn the_worst_lock_decides() {
    let safe = one(lock(vec![], vec![refusal(18_300, "renew")]));
    let silent = one(lock(vec![], vec![]));
    assert_eq!(overall(&[]), Verdict::NotExercised);
    assert_eq!(overall(std::slice::from_ref(&safe)), Verdict::Safe);
    assert_eq!(overall(&[safe, silent]), Verdict::Unsafe);
}

#[test]
fn the_witness_tells_the_worker_s_locks_from_another_holder_s() {
    let silent = lock(vec![], vec![]);
    // Its renewal at 9 s came from the frozen worker's connection: attributed by MONITOR.
    let mine = saw(vec![
        cmd(9_020, "EVALSHA", true, "127.0.0.1:5000"),
        cmd(9_030, "GET", false, "127.0.0.1:7000"),
    ]);
    let j = judged(std::slice::from_ref(&silent), &[], &mine);
    assert_eq!(j.locks.len(), 1);
    assert!(
        j.locks[0]
            .attributed_by
            .starts_with("MONITOR saw the frozen worker's connection 127.0.0.1:5000 renew"),
        "{}",
        j.locks[0].attributed_by
    );
    // Renewed from another client while the worker's connections are known: not its lock.
    let mut theirs = vec![
        cmd(9_010, "EVALSHA>pexpire", false, "127.0.0.1:6000"),
        cmd(11_000, "GET", true, "127.0.0.1:5000"),
    ];
    theirs[1].key = "lock:elsewhere".into();
    let j = judged(std::slice::from_ref(&silent), &[], &saw(theirs));
    assert!(j.locks.is_empty(), "{:?}", j.locks);
    assert!(
        j.others[0].contains("127.0.0.1:6000") && j.others[0].contains("another holder's"),
        "{:?}",
        j.others
    );
    // Nothing seen near its writes, and the worker's connections never touched it: not its.
    let unseen = vec![
        cmd(1_000, "SET NX", false, "127.0.0.1:6000"),
        cmd(500, "GET", true, "127.0.0.1:5000"),
    ];
    let mut elsewhere = unseen.clone();
    elsewhere[1].key = "lock:elsewhere".into();
    let j = judged(std::slice::from_ref(&silent), &[], &saw(elsewhere));
    assert!(
        j.locks.is_empty() && j.others[0].contains("never sent a command"),
        "{:?}",
        j.others
    );
    // …but touched by it (a read before the lead window's writes): the heuristic stands.
    let j = judged(std::slice::from_ref(&silent), &[], &saw(unseen));
    assert_eq!(j.locks.len(), 1);
    // Without the witness's knowledge of the worker's connections: the heuristic stands.
    let j = judged(
        &[silent],
        &[],
        &saw(vec![cmd(1_000, "SET NX", false, "127.0.0.1:6000")]),
    );
    assert_eq!(j.locks.len(), 1);
}

#[test]
fn a_script_that_took_the_lock_acquires_and_a_release_just_before_it_does_not() {
    let script = |at_ms: WallMs, name: &str, worker: bool, id: u64| Command {
        script: Some(id),
        ..cmd(
            at_ms,
            name,
            worker,
            if worker { "127.0.0.1:5000" } else { "127.0.0.1:6000" },
        )
    };
    // Taken over at 12.4 s by another client's script 7 (its own `set`), right after a
    // release by script 9 (its own `del`).
    let k = lock(vec![], vec![refusal(18_300, "renew")]);
    let witness = saw(vec![
        script(12_350, "EVALSHA", false, 9),
        script(12_350, "EVALSHA>del", false, 9),
        script(12_400, "EVALSHA", false, 7),
        script(12_400, "EVALSHA>set", false, 7),
        // The woken worker: a refused renewal (script 8), then attempts with script 7, each
        // followed by its library's clean-up with script 9: not acting under the lost lock.
        script(18_100, "EVALSHA", true, 8),
        script(18_500, "EVALSHA", true, 7),
        script(18_510, "EVALSHA", true, 9),
        script(20_000, "EVALSHA", true, 7),
        script(20_010, "EVALSHA", true, 9),
    ]);
    let v = one_with(k, &[], &witness);
    assert_eq!((v.finding, v.exposure_ms), (Finding::Stopped, Some(300)), "{v:?}");
    let taken: Vec<&str> = v.commands.iter().map(|c| c.taken_as).collect();
    assert_eq!(
        taken,
        ["acting", "acquiring", "retrying", "acquiring", "retrying"],
        "acting until its first attempt: {:?}",
        v.commands
    );
}

#[test]
fn an_early_attempt_to_take_the_lock_again_hides_no_later_harm() {
    // Its renewal gives way to a SET NX (busy) at +0.3 s, yet the job goes on: a refused
    // release logged at +9 s, or a plain DEL of the new owner's key at +9 s.
    let k = lock(vec![], vec![refusal(27_000, "release")]);
    let attempt = cmd(18_300, "SET NX", true, "127.0.0.1:5000");
    let v = one_with(k, &[], &saw(vec![attempt.clone()]));
    assert_eq!((v.finding, v.exposure_ms), (Finding::NoticedLate, Some(9_000)), "{v:?}");
    let k = lock(vec![t(27_000, "released", "b", false)], vec![]);
    let del = cmd(27_000, "DEL", true, "127.0.0.1:5000");
    let v = one_with(k, &[], &saw(vec![attempt, del]));
    assert_eq!(v.finding, Finding::DeletedNewOwnersLock, "{v:?}");
}

#[test]
fn a_deletion_nobody_was_seen_to_send_is_judged_by_what_followed() {
    // The witness ran and saw no release of the new owner's near its hold's end, and the
    // new owner's refusals followed: not its release.
    let k = || {
        lock(
            vec![t(20_000, "released", "b", false)],
            vec![event(21_000, "renew", "not_owned", Some(OTHER))],
        )
    };
    assert_eq!(one(k()).finding, Finding::DeletedNewOwnersLock);
    // A compare-and-delete by another client is its release.
    let own = cmd(20_000, "DELIFEQ", false, "127.0.0.1:6000");
    assert_eq!(one_with(k(), &[], &saw(vec![own])).finding, Finding::CarriedOnSilently);
}

#[test]
fn the_worker_taking_its_expired_lock_again_at_the_thaw_is_no_takeover() {
    // Expired while frozen, nobody waiting; at the thaw the worker sets a new token.
    let mut k = lock(vec![], vec![]);
    k.transitions.retain(|t| t.owner.as_deref() == Some("a"));
    k.transitions.push(t(18_100, "acquired", "a2", false));
    let v = one_with(k, &[], &saw(vec![cmd(18_100, "SET NX", true, "127.0.0.1:5000")]));
    assert_eq!(v.finding, Finding::NotTakenOver, "{v:?}");
}
