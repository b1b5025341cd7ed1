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
    /// Taken over; the worker noticed in time, but the witness cannot confirm it stopped.
    Unconfirmed,
    /// Taken over; a write of the woken worker's with its stale fencing token was refused.
    Fenced,
    /// Taken over; the woken worker noticed and stopped within one renewal period.
    Stopped,
    /// Taken over; the woken worker noticed, but only after working on without the lock.
    NoticedLate,
    /// Taken over; nothing from the woken worker.
    CarriedOnSilently,
    /// Taken over; the new owner's lock was deleted after the thaw before it released it.
    DeletedNewOwnersLock,
}

impl Finding {
    pub fn verdict(self) -> Verdict {
        match self {
            Finding::OutlastedFreeze | Finding::NotTakenOver | Finding::Unconfirmed => Verdict::NotExercised,
            Finding::Fenced | Finding::Stopped => Verdict::Safe,
            Finding::NoticedLate | Finding::CarriedOnSilently | Finding::DeletedNewOwnersLock => Verdict::Unsafe,
        }
    }

    /// The verdict in words, as the report's heading says it.
    pub fn words(self) -> &'static str {
        match self {
            Finding::OutlastedFreeze => "not exercised: the lock outlasted the freeze",
            Finding::NotTakenOver => "not exercised: expired, but nobody took it over",
            Finding::Unconfirmed => "not exercised: it noticed, but the witness could not confirm it stopped",
            Finding::Fenced => "safe: fenced, its stale writes were refused",
            Finding::Stopped => "safe: noticed and stopped at once",
            Finding::NoticedLate => "unsafe: noticed late, after working on without the lock",
            Finding::CarriedOnSilently => "unsafe: carried on silently",
            Finding::DeletedNewOwnersLock => "unsafe: deleted the new owner's lock",
        }
    }

    /// Its consequence, in one sentence; `exposure_ms`: how long the woken worker acted
    /// under the lost lock (`open`: at least that long).
    pub fn consequence(self, exposure_ms: Option<i64>, open: bool) -> String {
        let least = if open { "at least " } else { "" };
        let ran = exposure_ms.map_or_else(String::new, |ms| format!(" for {least}{:.1} s", ms as f64 / 1000.0));
        match self {
            Finding::OutlastedFreeze => {
                "The lock never expired, so this freeze says nothing about what the worker does when it loses a lock.".into()
            }
            Finding::NotTakenOver => {
                "No other worker took the lock while this one was frozen, so nothing could be done twice this time.".into()
            }
            Finding::Unconfirmed => {
                "The worker's own refusal reached lockwatch in time, but what it sent to Redis afterwards could not all be seen, so the drill cannot say it stopped.".into()
            }
            Finding::Fenced => format!(
                "The woken worker went on{ran}, but its writes with the stale fencing token were refused: nothing stale landed, and the refusals show."
            ),
            Finding::Stopped => {
                "The woken worker's own refusal reached lockwatch within one renewal period of the thaw and it did nothing more under the lost lock: the job stopped short of a second payout.".into()
            }
            Finding::NoticedLate => format!(
                "The job ran{ran} without the lock before the refusal: the batch most likely ran twice (a double payout); the refusal in the log is the incident, not the safety."
            ),
            Finding::CarriedOnSilently => format!(
                "Another worker held the lock while this one went on{ran} without a word: the job most likely ran twice (a double payout), and nothing alerts."
            ),
            Finding::DeletedNewOwnersLock => {
                "The woken worker deleted the lock another worker held, so a third worker can take it while the second still works: more double work, and the refusals that follow are the new owner's, not evidence of safety.".into()
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
            Finding::Unconfirmed => {
                "Let the drill's Redis user run MONITOR (ACL +monitor), run it without --no-monitor, and give the worker's log lines its pid; or fence the writes."
            }
            Finding::Fenced => {
                "Keep the fencing; also stop the job when the renewal fails, so the refused writes are few."
            }
            Finding::Stopped => {
                "Keep it: stop on the lost-lock error; add fencing tokens so a write that slips through before the check is refused too."
            }
            Finding::NoticedLate => {
                "Check the lock (or the renewal's failure) before each side effect and stop at once, and fence the writes with a token the resource checks."
            }
            Finding::CarriedOnSilently => {
                "Handle the lost-lock error of the renewal and the release (stop the job, log it with the key), check ownership before each side effect, and fence the writes with a token the resource checks."
            }
            Finding::DeletedNewOwnersLock => {
                "Release with compare-and-delete (a script that deletes only if the value is still your token, or DELIFEQ / DELEX IFEQ), never a plain DEL; then handle the lost-lock error and fence the writes."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Finding; 8] = [
        Finding::OutlastedFreeze,
        Finding::NotTakenOver,
        Finding::Unconfirmed,
        Finding::Fenced,
        Finding::Stopped,
        Finding::NoticedLate,
        Finding::CarriedOnSilently,
        Finding::DeletedNewOwnersLock,
    ];

    #[test]
    fn the_docs_verdict_table_says_what_the_code_decides() {
        let doc = include_str!("../../../docs/drill.md");
        for f in ALL {
            let label = match f {
                Finding::OutlastedFreeze => "outlasted the freeze".to_string(),
                Finding::DeletedNewOwnersLock => "deleted the new owner's lock".to_string(),
                other => serde_json::to_string(&other)
                    .unwrap_or_default()
                    .trim_matches('"')
                    .replace('_', " "),
            };
            let verdict = f.verdict().as_str().replace('_', " ");
            let row = doc
                .lines()
                .find(|l| l.starts_with("| **") && l.contains(&format!("**{label}**")))
                .unwrap_or_else(|| panic!("docs/drill.md's verdict table has no row for `{label}`"));
            assert!(
                row.contains(&format!("({verdict})")),
                "{label} is {verdict}, the docs say: {row}"
            );
            assert!(f.words().starts_with(&verdict), "{}", f.words());
        }
    }
}
