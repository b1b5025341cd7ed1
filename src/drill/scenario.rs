//! The stale-holder scenario as data: each step's title, the explanation it is gated on in
//! interactive mode, what should happen, what a deviation means, how to see it yourself,
//! and the action to perform; and which scenario a run rehearses (`Scenario`; the
//! network-delay tables are `delays`'). `cycle` interprets the table; nothing here talks to
//! Redis.

/// Which incident a drill rehearses (`--scenario`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Scenario {
    /// Worker A frozen (SIGSTOP) past the TTL; it wakes and carries on.
    #[default]
    StaleHolder,
    /// A's renewal held in the network past the TTL: it reaches Redis after B took the lock.
    NetworkDelay,
    /// Both: A frozen with its renewal in flight, and its late renewal, release and write
    /// arriving late.
    PauseAndDelay,
}

impl Scenario {
    /// The name `--scenario` takes.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::StaleHolder => "stale-holder",
            Scenario::NetworkDelay => "network-delay",
            Scenario::PauseAndDelay => "pause-and-delay",
        }
    }

    /// The steps of one cycle.
    pub(crate) fn steps(self) -> &'static [StepSpec] {
        match self {
            Scenario::StaleHolder => &STALE_HOLDER,
            Scenario::NetworkDelay => &super::delays::NETWORK_DELAY,
            Scenario::PauseAndDelay => &super::delays::PAUSE_AND_DELAY,
        }
    }

    /// Whether worker A talks to Redis through the drill's proxy.
    pub(crate) fn proxied(self) -> bool {
        self != Scenario::StaleHolder
    }

    /// The plan, as the intro tells it.
    pub(crate) fn plan(self) -> &'static str {
        match self {
            Scenario::StaleHolder => PLAN,
            Scenario::NetworkDelay => super::delays::NETWORK_DELAY_PLAN,
            Scenario::PauseAndDelay => super::delays::PAUSE_AND_DELAY_PLAN,
        }
    }
}

const PLAN: &str = "  1. worker A (a child process) acquires with a fencing token
  2. B's acquire is refused while A holds
  3. A is frozen with SIGSTOP past the TTL; the key expires
  4. B acquires with a higher token   5. B writes to the fenced resource
  6-8. A is resumed (SIGCONT) and tries to renew, release and write with its old token: all must be refused
  9. B's lock and write are intact";

/// What a step does; `cycle::perform` carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Worker A takes a fencing token (`INCR`) and the lock (`SET NX PX`).
    AAcquires,
    /// B's `SET NX PX` while A holds the lock.
    BTriesWhileAHolds,
    /// SIGSTOP worker A, wait out the TTL, then watch Redis expire the key.
    APausedPastTtl,
    /// B takes a new fencing token and the expired lock.
    BAcquires,
    /// B's compare-token write to the fenced resource.
    BWrites,
    /// SIGCONT worker A; it renews with its old token.
    AWakesAndRenews,
    /// Worker A releases with its old token.
    AReleases,
    /// Worker A writes to the resource with its old fencing token.
    AWritesStale,
    /// Read the lock and the resource: still B's.
    BIsIntact,
    /// A renews; the network holds the request past the TTL; Redis expires the key.
    ARenewalHeldPastTtl,
    /// The held renewal is let through: it reaches Redis after B took the lock.
    ADelayedRenewalArrives,
    /// A renews, the network holds the request, and A is frozen past the TTL.
    APausedWithRenewalHeld,
    /// The held renewal reaches Redis while A is frozen; then A is continued and reads it.
    ADelayedRenewalArrivesWhileFrozen,
    /// A releases with its old token; the network delays the request.
    AReleasesLate,
    /// A writes with its old fencing token; the network delays the request.
    AWritesStaleLate,
}

/// One step of the scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepSpec {
    pub(crate) title: &'static str,
    /// Said before the step runs; the interactive narrator waits for Enter.
    pub(crate) gate: Option<&'static str>,
    pub(crate) action: Action,
    /// What should happen. `{fence_a}` and `{fence_b}` are filled in.
    pub(crate) expected: &'static str,
    /// What the step's deviation means, for steps whose deviation has one meaning.
    pub(crate) consequence: Option<&'static str>,
    /// Arguments of `redis-cli` to see it yourself. `{lock}`, `{fence}`, `{resource}` are
    /// filled in.
    pub(crate) check: &'static [&'static str],
}

/// The stale holder: A holds, freezes past the TTL, B takes over; A wakes and every one of
/// its stale operations must be refused.
pub(crate) const STALE_HOLDER: [StepSpec; 9] = [
    StepSpec {
        title: "worker A acquires",
        gate: Some("worker A takes the lock with SET NX PX and a fencing token from INCR"),
        action: Action::AAcquires,
        expected: "SET NX PX succeeds: the lock was free",
        consequence: None,
        check: &["GET {lock}", "PTTL {lock}"],
    },
    StepSpec {
        title: "B is refused while A holds",
        gate: Some("B tries the same SET NX while A holds the lock"),
        action: Action::BTriesWhileAHolds,
        expected: "nil: mutual exclusion holds",
        consequence: Some("two holders at once without any stall: the lock is not exclusive"),
        check: &[],
    },
    StepSpec {
        title: "A is paused past the TTL; the key expires",
        gate: Some("A is frozen with SIGSTOP, as by a long GC pause, and stays frozen past the TTL"),
        action: Action::APausedPastTtl,
        expected: "PTTL -2 (no key)",
        consequence: Some("the lock outlived its TTL: something renewed it, or it has no expiry"),
        check: &["PTTL {lock}"],
    },
    StepSpec {
        title: "B acquires with a higher token",
        gate: Some("B takes the expired lock with a new fencing token"),
        action: Action::BAcquires,
        expected: "B holds the lock with a higher token",
        consequence: None,
        check: &["GET {lock}", "GET {fence}"],
    },
    StepSpec {
        title: "B writes to the fenced resource",
        gate: None,
        action: Action::BWrites,
        expected: "accepted",
        consequence: None,
        check: &["HGETALL {resource}"],
    },
    StepSpec {
        title: "A wakes and tries to renew",
        gate: Some("A is resumed with SIGCONT; it still believes it holds the lock and tries to renew it"),
        action: Action::AWakesAndRenews,
        expected: "refused: A no longer owns the lock",
        consequence: Some(
            "the renew script extends a lock it does not own (a PEXPIRE without an owner check): B's lock now expires on A's schedule, and A goes on believing it holds it",
        ),
        check: &[],
    },
    StepSpec {
        title: "A tries to release",
        gate: None,
        action: Action::AReleases,
        expected: "refused: compare-and-delete sees B's token",
        consequence: Some(
            "the release script deletes a lock it does not own (a plain DEL, no token comparison): B's lock is gone while B works, and a third worker can take it",
        ),
        check: &[],
    },
    StepSpec {
        title: "A writes with its old token",
        gate: None,
        action: Action::AWritesStale,
        expected: "refused: the resource has seen token {fence_b} > {fence_a}",
        consequence: Some("the resource accepted a stale token: fencing is not enforced"),
        check: &[],
    },
    StepSpec {
        title: "B's lock and write are intact",
        gate: None,
        action: Action::BIsIntact,
        expected: "B holds the lock with time left, and the resource has B's write",
        consequence: Some("the stale holder damaged the new holder's lock or data"),
        check: &["GET {lock}", "HGETALL {resource}"],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_runbook_s_scenario() {
        let gated: Vec<&str> = STALE_HOLDER
            .iter()
            .filter(|s| s.gate.is_some())
            .map(|s| s.title)
            .collect();
        assert_eq!(gated.len(), 5, "{gated:?}");
        // Every stale operation of A says what its acceptance would mean.
        for s in STALE_HOLDER.iter().filter(|s| s.title.starts_with("A ")) {
            assert!(s.consequence.is_some(), "{}", s.title);
        }
        let mut actions: Vec<Action> = STALE_HOLDER.iter().map(|s| s.action).collect();
        actions.dedup();
        assert_eq!(actions.len(), STALE_HOLDER.len(), "each action once");
    }
}
