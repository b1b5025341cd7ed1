//! Where each step of the scenario tables shows on the report's timeline: its lane and a
//! few words, as expected or deviating. The moments inside a step (SIGSTOP, SIGCONT, a
//! request held in the proxy) are marked by `cycle` and `late` where they happen.

use super::report::Lane;
use super::scenario::Action;

/// The lane and the words of the moment a step ends, `ok` or deviating.
pub(super) fn of(action: Action, ok: bool) -> (Lane, &'static str) {
    use Action as A;
    let (lane, fine, bad) = match action {
        A::AAcquires => (Lane::WorkerA, "A acquires", "A's acquire refused"),
        A::BTriesWhileAHolds => (Lane::WorkerB, "B refused", "B acquired too"),
        A::APausedPastTtl | A::ARenewalHeldPastTtl | A::APausedWithRenewalHeld => {
            (Lane::Redis, "key expired", "key still there")
        }
        A::BAcquires => (Lane::WorkerB, "B takes over", "B's takeover failed"),
        A::BWrites => (Lane::WorkerB, "B's fenced write", "B's write refused"),
        A::AWakesAndRenews => (Lane::WorkerA, "renew refused", "renew ACCEPTED"),
        A::ADelayedRenewalArrives | A::ADelayedRenewalArrivesWhileFrozen => {
            (Lane::WorkerA, "late renew refused", "late renew ACCEPTED")
        }
        A::AReleases => (Lane::WorkerA, "release refused", "release ACCEPTED"),
        A::AReleasesLate => (Lane::WorkerA, "late release refused", "late release ACCEPTED"),
        A::AWritesStale => (Lane::WorkerA, "stale write refused", "stale write ACCEPTED"),
        A::AWritesStaleLate => (Lane::WorkerA, "late write refused", "late write ACCEPTED"),
        A::BIsIntact => (Lane::Redis, "B's lock intact", "B's lock damaged"),
    };
    (lane, if ok { fine } else { bad })
}
