//! The tracker's unit tests: notice sequences in, transitions, holds and takeovers out.

use super::*;

#[derive(Default)]
struct Rec {
    transitions: Vec<(Transition, Option<u64>)>,
    holds: Vec<(HoldEnd, i64)>,
    takeovers: Vec<(u64, u64, i64)>,
    reads: Vec<(Vec<u8>, u32)>,
    headroom: Vec<(HeadroomAt, Headroom)>,
    intervals: Vec<i64>,
    /// What `expiry` answers: the last read of the key, as the lock table would know it.
    expiry: Option<Expiry>,
}

impl Observer for Rec {
    fn transition(&mut self, _: usize, _: &[u8], kind: Transition, owner: Option<u64>) {
        self.transitions.push((kind, owner));
    }
    fn hold(&mut self, _: usize, end: HoldEnd, ms: i64) {
        self.holds.push((end, ms));
    }
    fn takeover(&mut self, _: usize, _: &[u8], previous: u64, owner: u64, gap_ms: i64) {
        self.takeovers.push((previous, owner, gap_ms));
    }
    fn read_owner(&mut self, _: usize, key: &[u8], generation: u32) {
        self.reads.push((key.to_vec(), generation));
    }
    fn owner_learnt(&mut self, _: usize, _: &[u8], _: u64) {}
    fn headroom(&mut self, _: usize, at: HeadroomAt, h: Headroom) {
        self.headroom.push((at, h));
    }
    fn renewal_interval(&mut self, _: usize, ms: i64) {
        self.intervals.push(ms);
    }
    fn expiry(&mut self, _: usize, _: &[u8]) -> Expiry {
        self.expiry.unwrap_or(Expiry::Unknown)
    }
}

impl Rec {
    fn kinds(&self) -> Vec<Transition> {
        self.transitions.iter().map(|t| t.0).collect()
    }
    /// Answer the latest read with `owner`.
    fn answer(&mut self, t: &mut Tracker, owner: Option<u64>) {
        let (key, generation) = self.reads.pop().expect("a read was asked for");
        t.owner_read(&key, generation, owner, self);
    }
}

fn tracker() -> Tracker {
    Tracker::new(&[(1000, false)], 100)
}

fn n(t: &mut Tracker, o: &mut Rec, notice: Notice, at: i64) {
    t.notice(0, b"k", notice, at, || None, o);
}

#[test]
fn set_nx_px_then_renew_then_release() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    n(&mut t, &mut o, Notice::Expire, 0);
    o.answer(&mut t, Some(7));
    n(&mut t, &mut o, Notice::Expire, 300);
    n(&mut t, &mut o, Notice::Del, 500);
    assert_eq!(
        o.kinds(),
        [Transition::Acquired, Transition::Renewed, Transition::Released]
    );
    assert_eq!(o.holds, [(HoldEnd::Released, 500)]);
    assert_eq!(t.len(), 0, "a released lock leaves nothing behind");
}

#[test]
fn takeover_needs_a_different_known_owner_within_the_ttl() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    o.answer(&mut t, Some(7));
    n(&mut t, &mut o, Notice::Expired, 1000);
    assert_eq!(o.holds, [(HoldEnd::Expired, 1000)]);
    n(&mut t, &mut o, Notice::Set, 1200);
    o.answer(&mut t, Some(8));
    assert_eq!(o.takeovers, [(7, 8, 200)]);
    // Same owner again after an expiry: none.
    n(&mut t, &mut o, Notice::Expired, 2000);
    n(&mut t, &mut o, Notice::Set, 2100);
    o.answer(&mut t, Some(8));
    // Another owner, but after the window: none.
    n(&mut t, &mut o, Notice::Expired, 3000);
    t.sweep(4001);
    assert_eq!(t.len(), 0, "the tombstone went with its window");
    n(&mut t, &mut o, Notice::Set, 4001);
    o.answer(&mut t, Some(9));
    // Unknown new owner (released before the read): none.
    n(&mut t, &mut o, Notice::Expired, 5000);
    n(&mut t, &mut o, Notice::Set, 5100);
    o.answer(&mut t, None);
    assert_eq!(o.takeovers.len(), 1);
}

#[test]
fn a_set_on_a_held_key_is_a_renewal_only_when_the_owner_is_the_same() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    o.answer(&mut t, Some(7));
    // SET k v XX PX: set + expire, the owner read decides.
    n(&mut t, &mut o, Notice::Set, 100);
    n(&mut t, &mut o, Notice::Expire, 100);
    o.answer(&mut t, Some(7));
    assert_eq!(o.kinds(), [Transition::Acquired, Transition::Renewed]);
    n(&mut t, &mut o, Notice::Set, 200);
    o.answer(&mut t, Some(9));
    assert_eq!(
        o.kinds(),
        [Transition::Acquired, Transition::Renewed, Transition::Acquired]
    );
    // A set whose read never came before the hold ended: nothing says the holder
    // changed, so a renewal (acquired − released still follows the keys).
    n(&mut t, &mut o, Notice::Set, 300);
    n(&mut t, &mut o, Notice::Del, 400);
    assert_eq!(o.kinds()[3..], [Transition::Renewed, Transition::Released]);
    // A set whose read finds the key gone (deleted before the read ran, its `del` not yet
    // here): a renewal too, and the `del` then releases it once.
    n(&mut t, &mut o, Notice::Set, 500);
    o.answer(&mut t, Some(4));
    n(&mut t, &mut o, Notice::Set, 600);
    o.answer(&mut t, None);
    n(&mut t, &mut o, Notice::Del, 700);
    assert_eq!(
        o.kinds()[5..],
        [Transition::Acquired, Transition::Renewed, Transition::Released]
    );
    assert_eq!(
        o.transitions.last().map(|t| t.1),
        Some(Some(4)),
        "released under the owner read before"
    );
    // Three `set`s before their read answers: three renewals once it does.
    n(&mut t, &mut o, Notice::Set, 800);
    o.answer(&mut t, Some(4));
    for at in [900, 910, 920] {
        n(&mut t, &mut o, Notice::Set, at);
    }
    o.answer(&mut t, Some(4));
    assert_eq!(
        o.kinds()[8..],
        [
            Transition::Acquired,
            Transition::Renewed,
            Transition::Renewed,
            Transition::Renewed
        ]
    );
    // A `set` on a lock whose acquisition's read has not answered: one read names the
    // holder of both, a renewal.
    n(&mut t, &mut o, Notice::Del, 1000);
    n(&mut t, &mut o, Notice::Set, 1100);
    n(&mut t, &mut o, Notice::Set, 1150);
    o.answer(&mut t, Some(5));
    assert_eq!(
        o.kinds()[12..],
        [Transition::Released, Transition::Acquired, Transition::Renewed]
    );
    assert_eq!(o.transitions.last().map(|t| t.1), Some(Some(5)));
}

#[test]
fn a_stale_read_is_ignored() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    let stale = o.reads.pop().expect("read");
    n(&mut t, &mut o, Notice::Del, 10);
    n(&mut t, &mut o, Notice::Set, 20);
    t.owner_read(&stale.0, stale.1, Some(5), &mut o);
    o.answer(&mut t, Some(6));
    n(&mut t, &mut o, Notice::Expired, 1000);
    n(&mut t, &mut o, Notice::Set, 1100);
    o.answer(&mut t, Some(5));
    assert_eq!(o.takeovers, [(6, 5, 100)], "the hold's owner is 6, not the stale 5");
}

#[test]
fn untracked_keys_are_counted_and_learnt() {
    let (mut t, mut o) = (tracker(), Rec::default());
    // A renewal of a lock acquired before the watcher started: counted, owner read.
    n(&mut t, &mut o, Notice::Expire, 0);
    assert_eq!(o.reads.len(), 1);
    o.answer(&mut t, Some(3));
    n(&mut t, &mut o, Notice::Expired, 500);
    assert!(o.holds.is_empty(), "no duration for a hold whose start was not seen");
    n(&mut t, &mut o, Notice::Set, 600);
    o.answer(&mut t, Some(4));
    assert_eq!(o.takeovers, [(3, 4, 100)]);
    // An expiry of a key never seen: the fallback owner (the sampler's) stands in.
    t.notice(0, b"j", Notice::Expired, 0, || Some(11), &mut o);
    t.notice(0, b"j", Notice::Set, 10, || None, &mut o);
    o.answer(&mut t, Some(12));
    assert_eq!(o.takeovers.len(), 2);
    // Without one, no takeover can be claimed.
    t.notice(0, b"i", Notice::Expired, 0, || None, &mut o);
    t.notice(0, b"i", Notice::Set, 10, || None, &mut o);
    o.answer(&mut t, Some(12));
    assert_eq!(o.takeovers.len(), 2);
}

#[test]
fn the_table_is_bounded_and_reset_forgets() {
    let mut t = Tracker::new(&[(1000, false)], 2);
    let mut o = Rec::default();
    for k in [b"a", b"b", b"c"] {
        t.notice(0, k, Notice::Set, 0, || None, &mut o);
    }
    assert_eq!(t.len(), 2);
    assert_eq!(t.untracked, 1);
    assert_eq!(o.kinds(), [Transition::Acquired; 3], "untracked keys are still counted");
    t.reset();
    assert_eq!(t.len(), 0);
}

fn h(left_ms: i64, ttl_ms: i64) -> Headroom {
    Headroom { left_ms, ttl_ms }
}

#[test]
fn renewals_and_releases_measure_headroom_and_intervals() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    n(&mut t, &mut o, Notice::Expire, 0);
    o.answer(&mut t, Some(7));
    // No read to go by: the namespace's 1 s, counted from the acquisition.
    n(&mut t, &mut o, Notice::Expire, 300);
    n(&mut t, &mut o, Notice::Expire, 1150);
    // The last read says 80 ms are left: a lock given 930 ms at the last renewal.
    o.expiry = Some(Expiry::Left(80));
    n(&mut t, &mut o, Notice::Expire, 2000);
    o.expiry = Some(Expiry::Left(600));
    n(&mut t, &mut o, Notice::Del, 2400);
    assert_eq!(
        o.headroom,
        [
            (HeadroomAt::Renewal, h(700, 1000)),
            (HeadroomAt::Renewal, h(150, 1000)),
            (HeadroomAt::Renewal, h(80, 930)),
            (HeadroomAt::Release, h(600, 1000)),
        ]
    );
    assert_eq!(
        o.intervals,
        [300, 850, 850],
        "acquisition to the first renewal included"
    );
}

#[test]
fn a_set_xx_renewal_measures_at_the_set_and_counts_once_the_owner_is_known() {
    let (mut t, mut o) = (tracker(), Rec::default());
    n(&mut t, &mut o, Notice::Set, 0);
    n(&mut t, &mut o, Notice::Expire, 0);
    o.answer(&mut t, Some(7));
    o.expiry = Some(Expiry::Left(400));
    n(&mut t, &mut o, Notice::Set, 600);
    n(&mut t, &mut o, Notice::Expire, 600);
    // By the time the owner read answers, the read says the new TTL: not what counts.
    o.expiry = Some(Expiry::Left(1000));
    assert!(o.headroom.is_empty(), "undecided until the owner is read");
    o.answer(&mut t, Some(7));
    assert_eq!(o.headroom, [(HeadroomAt::Renewal, h(400, 1000))]);
    assert_eq!(o.intervals, [600]);
    // Another owner's set is an acquisition: no renewal, no headroom.
    n(&mut t, &mut o, Notice::Set, 900);
    o.answer(&mut t, Some(8));
    assert_eq!(o.headroom.len(), 1);
    assert_eq!(o.intervals.len(), 1);
}

#[test]
fn holds_not_seen_from_the_start_measure_only_what_a_read_says() {
    let (mut t, mut o) = (tracker(), Rec::default());
    // A renewal of a lock acquired before the watcher started: no interval; no read, no headroom.
    n(&mut t, &mut o, Notice::Expire, 0);
    o.answer(&mut t, Some(3));
    assert!(o.headroom.is_empty() && o.intervals.is_empty());
    // The next renewal has an interval from the one seen.
    n(&mut t, &mut o, Notice::Expire, 400);
    assert_eq!(o.intervals, [400]);
    assert_eq!(o.headroom, [(HeadroomAt::Renewal, h(600, 1000))]);
    // A key without expiry has no headroom.
    o.expiry = Some(Expiry::Never);
    n(&mut t, &mut o, Notice::Del, 500);
    assert_eq!(o.headroom.len(), 1);
    // A release of an untracked key: nothing to measure from.
    o.expiry = None;
    t.notice(0, b"u", Notice::Del, 600, || None, &mut o);
    assert_eq!(o.headroom.len(), 1);
}

#[test]
fn entries_stay_small() {
    assert_eq!(std::mem::size_of::<Entry>(), 24, "README: what one tracked lock costs");
}

#[test]
fn a_reload_keeps_the_unchanged_namespaces_keys_renumbered_and_forgets_the_others() {
    let mut t = Tracker::new(&[(1000, false), (2000, false)], 100);
    let mut o = Rec::default();
    t.notice(0, b"a", Notice::Set, 10, || None, &mut o);
    o.answer(&mut t, Some(7));
    t.notice(1, b"b", Notice::Set, 20, || None, &mut o);
    o.answer(&mut t, Some(8));
    assert_eq!(t.len(), 2);
    // Namespace 0 changed; namespace 1 is now the first.
    t.renamespace(&[None, Some(0)], &[(2000, false)]);
    assert_eq!(t.len(), 1, "the changed namespace's key is forgotten");
    t.notice(0, b"b", Notice::Del, 520, || None, &mut o);
    assert_eq!(
        o.holds,
        vec![(HoldEnd::Released, 500)],
        "b's hold went on across the reload"
    );
    t.notice(0, b"a", Notice::Del, 530, || None, &mut o);
    assert_eq!(o.holds.len(), 1, "a was forgotten: its release has no hold to end");
}

#[test]
fn holds_and_renewals_are_timed_across_the_entries_epoch_moving_on() {
    const DAY: i64 = 86_400_000;
    let mut t = tracker();
    let mut o = Rec::default();
    // A hold of a day, renewed, released: to the millisecond.
    n(&mut t, &mut o, Notice::Set, 500);
    o.answer(&mut t, Some(7));
    n(&mut t, &mut o, Notice::Expire, 501);
    n(&mut t, &mut o, Notice::Expire, DAY);
    n(&mut t, &mut o, Notice::Del, DAY + 250);
    assert_eq!(o.holds, vec![(HoldEnd::Released, DAY - 250)]);
    assert_eq!(o.intervals, vec![DAY - 500]);
    // Far past the first window (49 days): held from day 60, renewed a minute later,
    // released ten minutes after that, every figure still exact.
    let start = 60 * DAY;
    n(&mut t, &mut o, Notice::Set, start);
    o.answer(&mut t, Some(8));
    n(&mut t, &mut o, Notice::Expire, start + 1);
    t.sweep(start + 30_000);
    n(&mut t, &mut o, Notice::Expire, start + 60_000);
    n(&mut t, &mut o, Notice::Del, start + 660_000);
    assert_eq!(o.holds.last(), Some(&(HoldEnd::Released, 660_000)));
    assert_eq!(o.intervals.last(), Some(&60_000));
    // A hold that outlives the window behind the epoch is shown shorter, never under 24 days.
    n(&mut t, &mut o, Notice::Set, start + DAY);
    o.answer(&mut t, Some(9));
    n(&mut t, &mut o, Notice::Expire, start + DAY + 1);
    let end = start + 100 * DAY;
    t.sweep(end - 1);
    n(&mut t, &mut o, Notice::Del, end);
    let held = o.holds.last().map(|h| h.1).unwrap_or(0);
    assert!((1 << 31..=99 * DAY).contains(&held), "held {held} ms");
}
