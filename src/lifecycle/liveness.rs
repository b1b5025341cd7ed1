//! Whether a subscription is verified, so that `lockwatch_notifications_connected` means
//! notifications arrive, not merely that a pub/sub connection is up: the server's flags are
//! complete (where `CONFIG GET` answers), and the subscription is not silent — silent being
//! a check interval in which the lock tables repaired changes that no notification
//! announced while none arrived at all (what catches flags that cannot be read). Pure: the
//! session feeds it counts and acts on what it says.

/// Why a subscription is not receiving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Blind {
    /// `notify-keyspace-events` lacks flags lockwatch needs (read by `CONFIG GET`).
    Flags,
    /// Repairs in the last check interval, and not one notification: this many repairs.
    Silent(u64),
}

/// The verdict, kept between checks.
#[derive(Debug)]
pub(super) struct Liveness {
    flags_complete: bool,
    silent: Option<u64>,
    received_mark: u64,
    repaired_mark: u64,
}

impl Liveness {
    /// At subscription: the flags as found, the counters as they stand.
    pub(super) fn new(flags_complete: bool, received: u64, repaired: u64) -> Self {
        Liveness {
            flags_complete,
            silent: None,
            received_mark: received,
            repaired_mark: repaired,
        }
    }

    /// The flags as last found (complete when they could not be read).
    pub(super) fn flags_complete(&self) -> bool {
        self.flags_complete
    }

    /// `None` while notifications are known (or, flags unreadable, presumed) to arrive.
    pub(super) fn blind(&self) -> Option<Blind> {
        match (self.flags_complete, self.silent) {
            (false, _) => Some(Blind::Flags),
            (true, Some(n)) => Some(Blind::Silent(n)),
            (true, None) => None,
        }
    }

    /// A check interval ended: the flags as found now (`None`: not read this time), and
    /// the counters now. A notification clears silence; repairs without one are silence.
    pub(super) fn check(&mut self, flags_complete: Option<bool>, received: u64, repaired: u64) {
        if let Some(complete) = flags_complete {
            self.flags_complete = complete;
        }
        let got = received > self.received_mark;
        let missed = repaired.saturating_sub(self.repaired_mark);
        if got {
            self.silent = None;
        } else if missed > 0 {
            self.silent = Some(missed);
        }
        self.received_mark = received;
        self.repaired_mark = repaired;
    }

    /// A notification arrived: not silent.
    pub(super) fn received(&mut self) {
        self.silent = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_silence_decide_and_a_notification_ends_silence() {
        let mut l = Liveness::new(true, 10, 3);
        assert_eq!(l.blind(), None);
        // Notifications and repairs together: an event lost here and there, not silence.
        l.check(Some(true), 15, 4);
        assert_eq!(l.blind(), None);
        // Nothing at all: quiet, not silent.
        l.check(None, 15, 4);
        assert_eq!(l.blind(), None);
        // Repairs and not one notification.
        l.check(None, 15, 6);
        assert_eq!(l.blind(), Some(Blind::Silent(2)));
        l.check(None, 15, 6);
        assert_eq!(l.blind(), Some(Blind::Silent(2)), "stays until a notification");
        l.received();
        assert_eq!(l.blind(), None);
        l.check(Some(false), 16, 6);
        assert_eq!(l.blind(), Some(Blind::Flags));
        l.check(Some(true), 16, 6);
        assert_eq!(l.blind(), None);
    }
}
