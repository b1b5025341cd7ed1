//! The console narrators' words, for a staged and a freeze drill.

use super::*;

fn step(ok: bool) -> Step {
    Step {
        n: 7,
        title: "A tries to release".into(),
        at_ms: 0,
        happened: if ok { "refused" } else { "A's release was ACCEPTED" }.into(),
        expected: "refused: compare-and-delete sees B's token".into(),
        ok,
        check: vec!["redis-cli -u 'redis://x' GET k".into()],
        consequence: (!ok).then(|| "a plain DEL".into()),
    }
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn plain_says_each_step_and_the_pause_once() {
    let mut n = Plain::new(Vec::new());
    n.say(Said::Step(&step(true)));
    n.say(Said::Step(&step(false)));
    n.progress(Progress::PauseStarted {
        pid: 42,
        ttl: Duration::from_secs(1),
    });
    n.progress(Progress::Paused {
        pid: 42,
        left: Duration::from_millis(500),
    });
    n.progress(Progress::PauseOver);
    n.say(Said::Interrupted);
    n.say(Said::RolledBack(&["worker A (pid 42) continued and ended".into()]));
    assert_eq!(
        text(n.into_inner()),
        "✓ step 7: A tries to release\n    happened: refused\n    expected: refused: compare-and-delete sees B's token\n    see it yourself: redis-cli -u 'redis://x' GET k\n\
         ✗ step 7: A tries to release\n    happened: A's release was ACCEPTED\n    expected: refused: compare-and-delete sees B's token\n    DEVIATION: a plain DEL\n    see it yourself: redis-cli -u 'redis://x' GET k\n\
         \x20   A paused (pid 42): the lock expires in 1.0s\n\
         \ninterrupted: rolling back\nrollback: worker A (pid 42) continued and ended\n"
    );
}

#[test]
fn a_terminal_redraws_the_countdown() {
    let mut n = Terminal::new(Vec::new());
    n.progress(Progress::PauseStarted {
        pid: 42,
        ttl: Duration::from_secs(1),
    });
    for ms in [1000, 900] {
        n.progress(Progress::Paused {
            pid: 42,
            left: Duration::from_millis(ms),
        });
    }
    n.progress(Progress::PauseOver);
    assert_eq!(
        text(n.into_inner()),
        "\r    A paused (pid 42): the lock expires in   1.0s \r    A paused (pid 42): the lock expires in   0.9s \n"
    );
}

#[tokio::test]
async fn interactive_explains_and_waits_for_each_line() {
    let mut n = Interactive::new(Vec::new(), &b"\n\n"[..], false);
    n.gate("A is frozen").await;
    n.gate("B takes over").await;
    // No more input: the gate does not hang.
    n.gate("A wakes").await;
    let t = text(n.into_inner());
    assert_eq!(t.matches("press Enter to run it… ").count(), 3);
    assert!(t.starts_with("\nnext: A is frozen\npress Enter to run it… "), "{t}");
}

#[test]
fn a_freeze_drill_is_told_in_its_own_words() {
    let mut n = Plain::new(Vec::new());
    let secs = Duration::from_secs;
    n.say(Said::Note("the watchdog could not leave /sys/fs/cgroup/x"));
    n.say(Said::Witnessing { lead: secs(2) });
    n.say(Said::Freezing {
        spec: "pid:42",
        hold: secs(30),
    });
    n.say(Said::Frozen {
        method: "ptrace",
        held: 1,
        namespace: "payouts",
        hold: secs(30),
    });
    n.say(Said::Waiting {
        left: Duration::from_millis(24_900),
        until: "thaw",
    });
    n.say(Said::Thawed {
        spec: "pid:42",
        by: "drill",
        why: None,
    });
    n.say(Said::Thawed {
        spec: "pid:42",
        by: "watchdog",
        why: Some("the drill died"),
    });
    n.say(Said::ThawFailed {
        spec: "pid:42",
        error: "no such process",
        by_hand: "kill -CONT 42",
    });
    n.say(Said::Observing { observe: secs(10) });
    assert_eq!(
        text(n.into_inner()),
        "the watchdog could not leave /sys/fs/cgroup/x\n\
         watching the namespace's commands for 2s before the freeze\n\
         freezing pid:42 for 30s\n\
         frozen (ptrace); 1 lock(s) of namespace payouts held; thawing in 30s\n\
         24 s to thaw\n\
         thawed pid:42\n\
         thawed pid:42 by the watchdog: the drill died\n\
         THE THAW FAILED: pid:42 may still be frozen (no such process); thaw it by hand: kill -CONT 42\n\
         watching the woken worker for 10s\n"
    );
}
