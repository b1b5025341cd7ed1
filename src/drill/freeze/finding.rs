//! The words of a freeze drill's judgement: the overall [`Verdict`] and each lock's
//! [`Finding`], with what it means in one sentence and the fix behind it.

use serde::Serialize;

/// The answer to "would our worker, frozen this long, have double-paid?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    NotExercised,
    Safe,
    Unsafe,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotExercised => "not_exercised",
            Verdict::Safe => "safe",
            Verdict::Unsafe => "unsafe",
        }
    }
}

/// What happened to one lock, in order of gravity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Its TTL outlasted the freeze: it never expired.
    OutlastedFreeze,
    /// It expired, but nobody took it over while the worker was frozen.
    NotTakenOver,
    /// Taken over; the woken worker was refused, and that reached lockwatch.
    Refused,
    /// Taken over; nothing from the woken worker.
    CarriedOnSilently,
    /// Taken over; the new owner's lock was deleted after the thaw before it released it.
    DeletedNewOwnersLock,
}

impl Finding {
    pub fn verdict(self) -> Verdict {
        match self {
            Finding::OutlastedFreeze | Finding::NotTakenOver => Verdict::NotExercised,
            Finding::Refused => Verdict::Safe,
            Finding::CarriedOnSilently | Finding::DeletedNewOwnersLock => Verdict::Unsafe,
        }
    }

    /// The verdict in words, as the report's heading says it.
    pub fn words(self) -> &'static str {
        match self {
            Finding::OutlastedFreeze => "not exercised: the lock outlasted the freeze",
            Finding::NotTakenOver => "not exercised: expired, but nobody took it over",
            Finding::Refused => "safe: the woken holder was refused, and it shows",
            Finding::CarriedOnSilently => "unsafe: carried on silently",
            Finding::DeletedNewOwnersLock => "unsafe: deleted the new owner's lock",
        }
    }

    /// Its consequence, in one sentence.
    pub fn consequence(self) -> &'static str {
        match self {
            Finding::OutlastedFreeze => {
                "The lock never expired, so this freeze says nothing about what the worker does when it loses a lock."
            }
            Finding::NotTakenOver => {
                "No other worker took the lock while this one was frozen, so nothing could be done twice this time."
            }
            Finding::Refused => {
                "Redis refused the stale holder and the refusal reached the logs lockwatch reads: the job stopped short of a second payout, and on-call can see it."
            }
            Finding::CarriedOnSilently => {
                "Another worker held the lock while this one finished its job without a word: the job most likely ran twice (a double payout), and nothing alerts."
            }
            Finding::DeletedNewOwnersLock => {
                "The woken worker deleted the lock another worker held, so a third worker can take it while the second still works: more double work, and the refusals that follow are the new owner's, not evidence of safety."
            }
        }
    }

    /// How to fix the code behind it (or retry the drill).
    pub fn fix(self) -> &'static str {
        match self {
            Finding::OutlastedFreeze => {
                "Retry with a longer --for (past the lock's TTL and the time another worker needs to take it over)."
            }
            Finding::NotTakenOver => {
                "Retry at a busier moment (another worker waiting for the lock) or with a longer --for."
            }
            Finding::Refused => {
                "Keep it: handle the lost-lock error by stopping the job; add fencing tokens so a write that slips through is refused too."
            }
            Finding::CarriedOnSilently => {
                "Handle the lost-lock error of the renewal and the release (stop the job, log it), check ownership before each side effect, and fence the writes with a token the resource checks."
            }
            Finding::DeletedNewOwnersLock => {
                "Release with compare-and-delete (a script that deletes only if the value is still your token, or DELIFEQ / DELEX IFEQ), never a plain DEL; then handle the lost-lock error and fence the writes."
            }
        }
    }
}
