//! Whether a subscription is verified, so that events mode and
//! `lockwatch_notifications_connected` mean notifications arrive. Proof comes from the canary
//! (active, every interval), else from the flags `CONFIG GET` reads, else from lock
//! notifications that reads agreed with (passive); flags found lacking, a canary round short
//! of events, or silence (repairs and not one notification) unverify. Pure: the session feeds
//! it what it saw and acts on the verdict.

use crate::access::{canary, notify};
pub(crate) use crate::vocab::{Method, Verification as State};

/// What the flags read by `CONFIG GET` say, over every primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Flags {
    /// Not readable (CONFIG renamed away or denied) on some primary.
    Unknown,
    Complete,
    /// Lacking flags lockwatch needs: the gap in words.
    Missing(String),
}

/// The outcome of one primary's last canary round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Round {
    /// No round has finished yet.
    Running,
    /// All three events arrived.
    Proven,
    /// Some did not: the events that did (`canary::Seen` bits).
    Short(u8),
    /// The write (or the canary channel's PSUBSCRIBE) was refused: why.
    Refused(String),
}

/// Passive evidence: flags shown by notifications of lock keys (a `set` only once a read found
/// the lock it announced).
pub(super) const SET_AGREED: u8 = 1;
pub(super) const GENERIC: u8 = 2;
pub(super) const EXPIRED: u8 = 4;
pub(super) const HASH: u8 = 8;

/// A verdict: the state, how lockwatch verifies here, and, unless verified plainly, words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) state: State,
    pub(crate) method: Method,
    pub(crate) words: Option<String>,
}

#[derive(Debug)]
pub(super) struct Verify {
    /// Flags needed (`notify::needed_flags`).
    needed: String,
    pub(super) flags: Flags,
    /// One per primary, with its address.
    rounds: Vec<(String, Round)>,
    passive: u8,
    silent: Option<u64>,
    /// Repairs seen in an interval that also had notifications: silent unless one arrives
    /// by the next check.
    suspect: Option<u64>,
    received_mark: u64,
    repaired_mark: u64,
}

impl Verify {
    /// At subscription: the primaries' addresses, the counters as they stand.
    pub(super) fn new(needed: &str, flags: Flags, primaries: &[String], received: u64, repaired: u64) -> Self {
        Verify {
            needed: needed.to_string(),
            flags,
            rounds: primaries.iter().map(|p| (p.clone(), Round::Running)).collect(),
            passive: 0,
            silent: None,
            suspect: None,
            received_mark: received,
            repaired_mark: repaired,
        }
    }

    /// Primary `i`'s canary round ended so.
    pub(super) fn round(&mut self, i: usize, r: Round) {
        if let Some(slot) = self.rounds.get_mut(i) {
            slot.1 = r;
        }
    }

    /// Passive evidence seen (`SET_AGREED`, `GENERIC`, …).
    pub(super) fn evidence(&mut self, bits: u8) {
        self.passive |= bits;
    }

    /// A check interval ended with these counters: repairs and not one lock notification is
    /// silence; repairs beside notifications are silence if none arrives by the next check
    /// (the notifications may all have come before the changes they missed). A notification
    /// ends it.
    pub(super) fn check(&mut self, received: u64, repaired: u64) {
        let repairs = repaired.saturating_sub(self.repaired_mark);
        if received > self.received_mark {
            self.silent = None;
            self.suspect = (repairs > 0).then_some(repairs);
        } else if repairs > 0 || self.suspect.is_some() {
            self.silent = Some(repairs + self.suspect.take().unwrap_or(0));
        }
        self.received_mark = received;
        self.repaired_mark = repaired;
    }

    /// A lock notification arrived: not silent, and no repair seen so far is suspect.
    pub(super) fn received(&mut self) {
        self.silent = None;
        self.suspect = None;
    }

    fn refused(&self) -> Option<&str> {
        self.rounds.iter().find_map(|(_, r)| match r {
            Round::Refused(why) => Some(why.as_str()),
            _ => None,
        })
    }

    /// The verdict now.
    pub(super) fn verdict(&self) -> Verdict {
        let method = match (self.refused(), &self.flags) {
            (None, _) => Method::Canary,
            (Some(_), Flags::Unknown) => Method::Passive,
            (Some(_), _) => Method::Flags,
        };
        let v = |state, words: Option<String>| Verdict { state, method, words };
        if let Flags::Missing(words) = &self.flags {
            return v(State::FlagsMissing, Some(words.clone()));
        }
        if let Some(n) = self.silent {
            return v(
                State::Silent,
                Some(format!(
                    "silent: {n} lock changes found by reads and the reconciling SCAN that no notification announced, and not one notification in {} s",
                    super::FLAGS_CHECK_EVERY.as_secs()
                )),
            );
        }
        // `h` (Redisson) and `e` are beyond the canary: `h` needs the flags or a hash event
        // seen; `e` only the flags can show.
        let redisson = self.needed.contains('h');
        let flags_known = self.flags == Flags::Complete;
        match method {
            Method::Canary => {
                let several = self.rounds.len() > 1;
                let mut short = Vec::new();
                let mut running = false;
                for (addr, r) in &self.rounds {
                    match r {
                        Round::Short(seen) => {
                            let gap = canary::gap(*seen).unwrap_or_default();
                            short.push(if several { format!("{addr}: {gap}") } else { gap });
                        }
                        Round::Running => running = true,
                        Round::Proven | Round::Refused(_) => {}
                    }
                }
                if !short.is_empty() {
                    let fix = notify::where_to_set(&notify::merge_flags("", &self.needed));
                    return v(State::EventsMissing, Some(format!("{}; {fix}", short.join("; "))));
                }
                if running {
                    return v(State::Pending, Some("the canary's first round is under way".into()));
                }
                if redisson && !flags_known && self.passive & HASH == 0 {
                    return v(
                        State::Pending,
                        Some("the canary proved `K$gx`; waiting for a hash event of a Redisson lock to prove `h` (CONFIG GET is not available to show it)".into()),
                    );
                }
                let words = (!flags_known)
                    .then(|| "by the canary (`K$gx`); `e` (evictions) cannot be shown without CONFIG GET".to_string());
                v(State::Verified, words)
            }
            Method::Flags => v(
                State::Verified,
                Some(format!(
                    "by the flags CONFIG GET reads; the canary cannot run ({})",
                    self.refused().unwrap_or_default()
                )),
            ),
            Method::Passive => {
                let need = SET_AGREED | GENERIC | if redisson { HASH } else { 0 };
                if self.passive & need != need {
                    return v(
                        State::Pending,
                        Some(format!(
                            "waiting for lock notifications that reads agree with (`set` and `del`/`expire`{}): the canary cannot run ({}) and CONFIG GET is refused",
                            if redisson { ", a Redisson hash write" } else { "" },
                            self.refused().unwrap_or_default()
                        )),
                    );
                }
                let x = if self.passive & EXPIRED == 0 {
                    "; no `expired` seen yet, so `x` (expiries, takeovers) is unproven"
                } else {
                    ""
                };
                v(
                    State::Verified,
                    Some(format!(
                        "passively: lock notifications arrived and reads agreed{x}; a subscription that stops delivering is found by repairs within reconcile_interval"
                    )),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::canary::{ALL, Seen};

    fn verify(needed: &str, flags: Flags, n: usize) -> Verify {
        let primaries: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        Verify::new(needed, flags, &primaries, 0, 0)
    }

    #[test]
    fn the_canary_verifies_once_every_primary_saw_all_three_events() {
        let mut v = verify("Kg$xe", Flags::Unknown, 2);
        assert_eq!(v.verdict().state, State::Pending);
        v.round(0, Round::Proven);
        assert_eq!(v.verdict().state, State::Pending, "one primary still running");
        v.round(1, Round::Proven);
        let d = v.verdict();
        assert_eq!((d.state, d.method), (State::Verified, Method::Canary));
        assert!(
            d.words.unwrap().contains("`e`"),
            "evictions unprovable without CONFIG GET"
        );
        v.round(1, Round::Short(Seen::Set as u8 | Seen::Expire as u8));
        let d = v.verdict();
        assert_eq!(d.state, State::EventsMissing);
        let w = d.words.unwrap();
        assert!(
            w.starts_with("p1: ") && w.contains("`x`") && w.contains("'Kg$xe'"),
            "{w}"
        );
        v.round(1, Round::Proven);
        assert_eq!(v.verdict().state, State::Verified);
    }

    #[test]
    fn flags_found_lacking_unverify_whatever_the_canary_says() {
        let mut v = verify("Kg$xe", Flags::Missing("lacks x".into()), 1);
        v.round(0, Round::Proven);
        assert_eq!(v.verdict().state, State::FlagsMissing);
        v.flags = Flags::Complete;
        let d = v.verdict();
        assert_eq!((d.state, d.words), (State::Verified, None));
    }

    #[test]
    fn a_refused_canary_falls_back_to_the_flags_then_to_passive_evidence() {
        let mut v = verify("Kg$xe", Flags::Complete, 1);
        v.round(0, Round::Refused("NOPERM".into()));
        let d = v.verdict();
        assert_eq!((d.state, d.method), (State::Verified, Method::Flags));
        v.flags = Flags::Unknown;
        let d = v.verdict();
        assert_eq!((d.state, d.method), (State::Pending, Method::Passive));
        v.evidence(GENERIC);
        assert_eq!(
            v.verdict().state,
            State::Pending,
            "a set that a read agreed with is needed too"
        );
        v.evidence(SET_AGREED);
        let d = v.verdict();
        assert_eq!(d.state, State::Verified);
        assert!(d.words.unwrap().contains("`x`"), "expiries not proven yet");
        v.evidence(EXPIRED);
        assert!(!v.verdict().words.unwrap().contains("unproven"));
    }

    #[test]
    fn redisson_needs_h_shown_by_the_flags_or_a_hash_event() {
        let mut v = verify("Kg$xeh", Flags::Unknown, 1);
        v.round(0, Round::Proven);
        assert_eq!(v.verdict().state, State::Pending);
        v.evidence(HASH);
        assert_eq!(v.verdict().state, State::Verified);
        let mut v = verify("Kg$xeh", Flags::Complete, 1);
        v.round(0, Round::Proven);
        assert_eq!(v.verdict().state, State::Verified);
    }

    #[test]
    fn silence_unverifies_until_a_notification() {
        let mut v = verify("Kg$xe", Flags::Complete, 1);
        v.round(0, Round::Short(ALL & !(Seen::Expired as u8)));
        v.round(0, Round::Proven);
        v.check(5, 0);
        assert_eq!(v.verdict().state, State::Verified);
        v.check(5, 0);
        assert_eq!(v.verdict().state, State::Verified, "quiet is not silent");
        v.check(5, 3);
        assert_eq!(v.verdict().state, State::Silent);
        v.check(5, 3);
        assert_eq!(v.verdict().state, State::Silent, "stays until a notification");
        v.received();
        assert_eq!(v.verdict().state, State::Verified);
        // Repairs beside notifications: silent only if no notification follows by the next check.
        v.check(9, 5);
        assert_eq!(v.verdict().state, State::Verified);
        v.check(9, 5);
        assert_eq!(v.verdict().state, State::Silent);
        v.received();
        v.check(12, 7);
        v.received();
        v.check(12, 7);
        assert_eq!(
            v.verdict().state,
            State::Verified,
            "a notification after the repairs clears them"
        );
    }
}
