//! The network-delay scenarios as data, built from the stale-holder steps they share: in
//! `network-delay` worker A stays awake but its renewal is held in the network (the drill's
//! proxy) past the TTL and reaches Redis after B took the lock; in `pause-and-delay` A is
//! also frozen while its renewal is in flight, and its release and write arrive late too.
//! Every stale operation must still be refused, and B's lock stay intact.

use super::scenario::{Action, STALE_HOLDER, StepSpec};

const A_ACQUIRES: StepSpec = STALE_HOLDER[0];
const B_REFUSED: StepSpec = STALE_HOLDER[1];
const B_ACQUIRES: StepSpec = STALE_HOLDER[3];
const B_WRITES: StepSpec = STALE_HOLDER[4];
const A_RENEWS: StepSpec = STALE_HOLDER[5];
const A_RELEASES: StepSpec = STALE_HOLDER[6];
const A_WRITES: StepSpec = STALE_HOLDER[7];
const B_INTACT: StepSpec = STALE_HOLDER[8];

const EXPIRED_IN_FLIGHT: &str = "PTTL -2 (no key) while A's renewal is still in flight";

/// A awake, its renewal delayed in the network past the TTL.
pub(crate) const NETWORK_DELAY: [StepSpec; 9] = [
    A_ACQUIRES,
    B_REFUSED,
    StepSpec {
        title: "A's renewal is held in the network past the TTL; the key expires",
        gate: Some(
            "worker A renews its lock, and the network between A and Redis holds the request past the TTL, as a congested or partitioned link would",
        ),
        action: Action::ARenewalHeldPastTtl,
        expected: EXPIRED_IN_FLIGHT,
        ..STALE_HOLDER[2]
    },
    B_ACQUIRES,
    B_WRITES,
    StepSpec {
        title: "A's delayed renewal reaches Redis",
        gate: Some("the network lets A's renewal through: it reaches Redis after B took the lock"),
        action: Action::ADelayedRenewalArrives,
        ..A_RENEWS
    },
    A_RELEASES,
    A_WRITES,
    B_INTACT,
];

/// A frozen with its renewal in flight; everything it sends afterwards arrives late.
pub(crate) const PAUSE_AND_DELAY: [StepSpec; 9] = [
    A_ACQUIRES,
    B_REFUSED,
    StepSpec {
        title: "A is paused past the TTL with its renewal in flight; the key expires",
        gate: Some(
            "worker A renews its lock, the network holds the request, and A is frozen with SIGSTOP past the TTL",
        ),
        action: Action::APausedWithRenewalHeld,
        expected: EXPIRED_IN_FLIGHT,
        ..STALE_HOLDER[2]
    },
    B_ACQUIRES,
    B_WRITES,
    StepSpec {
        title: "A's delayed renewal reaches Redis while A is frozen",
        gate: Some(
            "the network lets A's renewal through while A is still frozen; then A is resumed with SIGCONT and reads the answer",
        ),
        action: Action::ADelayedRenewalArrivesWhileFrozen,
        ..A_RENEWS
    },
    StepSpec {
        title: "A's release arrives late",
        gate: Some("A, awake and still believing it holds the lock, releases it; the network delays the request"),
        action: Action::AReleasesLate,
        ..A_RELEASES
    },
    StepSpec {
        title: "A's write with its old token arrives late",
        action: Action::AWritesStaleLate,
        ..A_WRITES
    },
    B_INTACT,
];

pub(crate) const NETWORK_DELAY_PLAN: &str =
    "  1. worker A (a child process, talking to Redis through the drill's network proxy) acquires with a fencing token
  2. B's acquire is refused while A holds
  3. A renews; the proxy holds the request past the TTL; the key expires
  4. B acquires with a higher token   5. B writes to the fenced resource
  6. the proxy lets A's renewal through: it reaches Redis after B took the lock and must be refused
  7-8. A tries to release and write with its old token: both must be refused
  9. B's lock and write are intact";

pub(crate) const PAUSE_AND_DELAY_PLAN: &str =
    "  1. worker A (a child process, talking to Redis through the drill's network proxy) acquires with a fencing token
  2. B's acquire is refused while A holds
  3. A renews, the proxy holds the request, and A is frozen with SIGSTOP past the TTL; the key expires
  4. B acquires with a higher token   5. B writes to the fenced resource
  6. the proxy lets A's renewal through while A is frozen: it must be refused; A is resumed (SIGCONT)
  7-8. A's release and its write with the old token, each delayed by the proxy, arrive late: both must be refused
  9. B's lock and write are intact";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stale_operation_says_what_its_acceptance_means() {
        for table in [&NETWORK_DELAY, &PAUSE_AND_DELAY] {
            for s in table.iter().filter(|s| s.title.starts_with("A")) {
                assert!(s.consequence.is_some(), "{}", s.title);
            }
            let mut actions: Vec<Action> = table.iter().map(|s| s.action).collect();
            actions.dedup();
            assert_eq!(actions.len(), table.len(), "each action once");
            assert!(!table.iter().any(|s| s.action == Action::AWakesAndRenews));
        }
    }
}
