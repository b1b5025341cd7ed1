//! Judging a freeze drill by what the woken worker's work did. For each lock that was the
//! frozen worker's (`held`) and was taken over while it was frozen: did it delete the new
//! owner's lock; were its writes fenced; how long did it go on acting under the lock it no
//! longer held (its exposure: its last command on the key, or its last lock event naming
//! the key, after the thaw); and did it notice (a refusal of its own, never another
//! holder's, reached lockwatch) in time. The worst lock decides.

use serde::Serialize;

use super::deletion::{credit_after_deletion, deletion};
pub use super::finding::{Finding, Verdict};
use super::held::{self, Held, LATE_MS, MATCH_MS, secs};
use super::identity::{Identity, Tie};
use super::on_key::OnKey;
use super::seen::{Command, CountedRefusal, KeyEvent, KeySeen, Transition, WallMs, Window, Witnessed};

/// How long after the worker writes a log line lockwatch may count it: a poll of the file
/// and the count's save, or a shipper's batch.
pub const LOG_DELAY_MS: WallMs = 2_000;

/// Everything the judgement reads.
pub struct Evidence<'a> {
    pub keys: &'a [KeySeen],
    /// The namespace's refusals counted without a key (an exporter without keyed events).
    pub counted: &'a [CountedRefusal],
    pub witness: &'a Witnessed,
    pub worker: &'a Identity,
    pub window: Window,
    /// The namespace's renewal period (`renew_every`, else a third of the TTL).
    pub period_ms: WallMs,
}

/// One lock the frozen worker held, judged.
#[derive(Debug, Clone, Serialize)]
pub struct LockVerdict {
    pub key: String,
    pub verdict: Verdict,
    pub finding: Finding,
    /// How the lock was attributed to the frozen worker.
    pub attributed_by: String,
    pub owner: Option<String>,
    pub last_renewal_ms: Option<WallMs>,
    pub expired_ms: Option<WallMs>,
    pub taken_over_ms: Option<WallMs>,
    pub new_owner: Option<String>,
    /// The new owner's lock deleted (or replaced) after the thaw, and how that was told.
    pub deleted_ms: Option<WallMs>,
    pub deleted_how: Option<String>,
    /// From the thaw, how long the woken worker went on acting under the lock it no longer
    /// held (taken over only): its last command on the key or lock event naming it.
    pub exposure_ms: Option<WallMs>,
    /// That last act, in words.
    pub last_act: Option<String>,
    /// The worker had not tried to take the lock again by the end of the observation: it
    /// may have gone on longer than `exposure_ms`, unseen.
    pub exposure_open: bool,
    /// The woken worker's commands on the key after the thaw, as the witness saw them (the
    /// first [`MAX_SHOWN`]), and how many there were in all.
    pub commands: Vec<Shown>,
    pub commands_seen: usize,
    /// The refusals counted as the woken worker's, and how each was tied to it.
    pub refusals: Vec<Refusal>,
    /// Refusals naming the key after the thaw that are not the woken worker's, or cannot be
    /// tied to it, and why.
    pub not_credited: Vec<Refusal>,
    pub consequence: String,
    pub fix: &'static str,
    /// What else is worth saying (a caveat of the attribution, the woken worker's commands).
    pub notes: Vec<String>,
}

/// At most this many of the woken worker's commands are listed per lock.
pub const MAX_SHOWN: usize = 100;

/// One of the woken worker's commands on the key: when, what, and what it was taken for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub at_ms: WallMs,
    pub name: String,
    pub by: String,
    /// `acting` (under the lock), `acquiring` (an attempt to take it again), `reading`.
    pub taken_as: &'static str,
}

/// A refusal naming the key: when lockwatch counted it, what it was, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub at_ms: WallMs,
    pub what: String,
    pub whose: String,
}

impl LockVerdict {
    /// The refusals in one line.
    pub fn refusal_words(&self) -> String {
        words(&self.refusals)
    }

    /// The exposure in words: how long, the last act, and whether it may have gone on.
    pub fn exposure_words(&self) -> Option<String> {
        let e = self.exposure_ms?;
        let last = self
            .last_act
            .as_ref()
            .map_or_else(String::new, |a| format!(" (last: {a})"));
        let open = match self.exposure_open && self.verdict != Verdict::Safe {
            true => {
                "; it had not tried to take the lock again when the observation ended, so it may have gone on longer unseen: watch longer (--observe)"
            }
            false => "",
        };
        Some(format!(
            "{}{:.1} s after the thaw under the lost lock{last}{open}",
            if self.exposure_open { "at least " } else { "" },
            e as f64 / 1000.0
        ))
    }

    /// The refusals not credited, in one line.
    pub fn not_credited_words(&self) -> String {
        words(&self.not_credited)
    }
}

fn words(r: &[Refusal]) -> String {
    let words: Vec<String> = r.iter().map(|r| format!("{} ({})", r.what, r.whose)).collect();
    words.join("; ")
}

/// The judgement: the frozen worker's locks, and the keys that changed while it was frozen
/// but are shown to be another holder's (said, never judged).
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub locks: Vec<LockVerdict>,
    pub others: Vec<String>,
}

/// The locks the frozen worker held, judged; keys not attributed to it are left out.
pub fn judge(ev: &Evidence<'_>) -> Judged {
    let mut out = Judged::default();
    for k in ev.keys {
        match held::held_by_worker(k, &ev.witness.commands, &ev.window) {
            Ok(None) => {}
            Ok(Some(h)) => out.locks.push(judge_one(k, h, ev)),
            Err(other) => out.others.push(other),
        }
    }
    out
}

/// The overall verdict: the worst lock's, or not exercised without any.
pub fn overall(locks: &[LockVerdict]) -> Verdict {
    locks.iter().map(|l| l.verdict).max().unwrap_or(Verdict::NotExercised)
}

fn judge_one(k: &KeySeen, held: Held, ev: &Evidence<'_>) -> LockVerdict {
    let mut v = LockVerdict {
        key: k.key.clone(),
        verdict: Verdict::NotExercised,
        finding: Finding::OutlastedFreeze,
        attributed_by: held.why,
        owner: held.owner.clone(),
        last_renewal_ms: held.last_renewal_ms,
        expired_ms: held.expired_ms,
        taken_over_ms: None,
        new_owner: None,
        deleted_ms: None,
        deleted_how: None,
        exposure_ms: None,
        last_act: None,
        exposure_open: false,
        commands: vec![],
        commands_seen: 0,
        refusals: vec![],
        not_credited: vec![],
        consequence: String::new(),
        fix: "",
        notes: vec![],
    };
    let finding = match held.expired_ms {
        None => Finding::OutlastedFreeze,
        Some(expired) => after_expiry(k, &mut v, expired, ev),
    };
    v.finding = finding;
    v.verdict = finding.verdict();
    v.consequence = finding.consequence(v.exposure_ms, v.exposure_open);
    v.fix = finding.fix();
    v
}

/// The takeover, the new owner's hold, and what the woken worker did after the thaw.
fn after_expiry(k: &KeySeen, v: &mut LockVerdict, expired: WallMs, ev: &Evidence<'_>) -> Finding {
    let w = &ev.window;
    let on = OnKey::new(k, &ev.witness.commands);
    // The woken worker's own acquisition right after the thaw is no takeover.
    let own_acquisition = |t: &Transition| {
        t.at_ms >= w.thawed_ms
            && on
                .commands
                .iter()
                .any(|c| c.by_worker() && on.acquires(c) && (c.at_ms - t.at_ms).abs() <= MATCH_MS)
    };
    let takeover = k.transitions.iter().find(|t| {
        t.at_ms >= expired
            && t.kind == "acquired"
            && (t.takeover || (t.at_ms <= w.thawed_ms + LATE_MS && t.owner != v.owner))
            && !own_acquisition(t)
    });
    let Some(takeover) = takeover else {
        return Finding::NotTakenOver;
    };
    v.taken_over_ms = Some(takeover.at_ms);
    v.new_owner = takeover.owner.clone();
    if takeover.at_ms > w.thawed_ms + LATE_MS {
        v.notes.push(format!(
            "taken over {} after the thaw: the woken worker may have seen the key free first",
            secs(takeover.at_ms - w.thawed_ms)
        ));
    }
    // The new owner's hold ends at the first transition after the takeover that is not its renewal.
    let end = k
        .transitions
        .iter()
        .filter(|t| t.at_ms > takeover.at_ms)
        .find(|t| !(t.kind == "renewed" && t.owner == takeover.owner));
    // The woken worker holds the lock again from its own next acquisition.
    let again = k
        .transitions
        .iter()
        .filter(|t| t.at_ms > takeover.at_ms && t.kind == "acquired")
        .find(|t| {
            on.commands
                .iter()
                .any(|c| c.by_worker() && on.acquires(c) && (c.at_ms - t.at_ms).abs() <= MATCH_MS)
        })
        .map(|t| t.at_ms);
    // Once it tries to take the lock again, what its library sends for the failed attempt (a
    // clean-up release) is no act under the lost lock; a deletion or a log line of its own
    // still is, until it holds the lock again.
    let retry = on
        .commands
        .iter()
        .find(|c| c.by_worker() && c.at_ms >= w.thawed_ms && on.acquires(c))
        .map(|c| c.at_ms);
    let until = again.unwrap_or(WallMs::MAX);
    let retried = retry.unwrap_or(WallMs::MAX);
    v.exposure_open = again.is_none() && retry.is_none();
    let woken: Vec<&Command> = on
        .commands
        .iter()
        .copied()
        .filter(|c| c.by_worker() && c.at_ms >= w.thawed_ms && c.at_ms <= until)
        .collect();
    say_commands(v, &woken, w);
    v.commands_seen = woken.len();
    v.commands = woken
        .iter()
        .take(MAX_SHOWN)
        .map(|c| Shown {
            at_ms: c.at_ms,
            name: c.name.clone(),
            by: c.addr().to_string(),
            taken_as: match (c.reads(), on.acquires(c)) {
                (true, _) => "reading",
                (_, true) => "acquiring",
                _ if c.at_ms > retried && !c.deletes() => "retrying",
                _ => "acting",
            },
        })
        .collect();
    let events = tie_events(k, v, ev, &on, until);
    let acting: Vec<&Command> = woken
        .iter()
        .copied()
        .filter(|c| c.deletes() || (!c.reads() && !on.acquires(c) && c.at_ms <= retried))
        .collect();
    if let Some(f) = deletion(k, v, takeover, end, &woken, ev) {
        exposure(v, &acting, &events, w);
        credit_after_deletion(v);
        return f;
    }
    exposure(v, &acting, &events, w);
    let fenced = events.iter().any(|e| e.is_fenced());
    let noticed = !v.refusals.is_empty();
    let exposure = v.exposure_ms.unwrap_or(0);
    match (fenced, noticed) {
        (true, _) => Finding::Fenced,
        (false, true) if exposure <= ev.period_ms + LOG_DELAY_MS => match witness_unsure(ev.witness) {
            None => Finding::Stopped,
            Some(why) => {
                v.notes.push(format!(
                    "it noticed within {}, but the witness cannot confirm nothing followed: {why}",
                    secs(exposure)
                ));
                Finding::Unconfirmed
            }
        },
        (false, true) => Finding::NoticedLate,
        (false, false) => Finding::CarriedOnSilently,
    }
}

/// Why the witness cannot vouch that it saw every command the worker sent, if so.
pub fn witness_unsure(w: &Witnessed) -> Option<String> {
    if !w.ran {
        return Some(match &w.unavailable {
            Some(why) => format!("MONITOR was not available ({why})"),
            None => "MONITOR was not run (--no-monitor)".into(),
        });
    }
    if let Some(why) = &w.unavailable {
        return Some(why.clone());
    }
    (!w.unsure.is_empty()).then(|| w.unsure.join("; "))
}

/// The woken worker's writes on the key, said in a note.
fn say_commands(v: &mut LockVerdict, woken: &[&Command], w: &Window) {
    let written: Vec<String> = woken
        .iter()
        .filter(|c| (held::writes(&c.name) && !c.name.contains('>')) || c.deletes())
        .map(|c| format!("{} at +{}", c.name, secs(c.at_ms - w.thawed_ms)))
        .collect();
    if written.is_empty() {
        return;
    }
    let more = match written.len() {
        n if n > 6 => format!(" and {} more", n - 6),
        _ => String::new(),
    };
    v.notes.push(format!(
        "the woken worker's writes on this key (MONITOR): {}{more}",
        written[..written.len().min(6)].join(", ")
    ));
}

/// The lock events naming the key after the thaw, each tied to the woken worker or not:
/// its refusals go to `v.refusals`, others' to `v.not_credited`; the worker's own events
/// (any outcome but an acquisition's) are returned for its exposure.
fn tie_events<'a>(
    k: &'a KeySeen,
    v: &mut LockVerdict,
    ev: &Evidence<'_>,
    on: &OnKey<'_>,
    until: WallMs,
) -> Vec<&'a KeyEvent> {
    let w = &ev.window;
    let Some(events) = &k.events else {
        v.notes.push(
            "the exporter keeps no lock events per key (an older lockwatch): no refusal can be tied to the worker"
                .into(),
        );
        return vec![];
    };
    let mut own = Vec::new();
    for e in events.iter().filter(|e| e.at_ms >= w.thawed_ms && e.at_ms <= w.end_ms) {
        let tie = match ev.worker.whose(&e.origin) {
            Tie::Unknown if e.is_refusal() => on.by_command(e),
            tie => tie,
        };
        let what = format!("{} {} from {}", e.op, e.outcome, e.source);
        match tie {
            Tie::Worker(how) => {
                if e.op != "acquire" && e.at_ms <= until.saturating_add(LOG_DELAY_MS) {
                    own.push(e);
                }
                if e.is_refusal() {
                    v.refusals.push(Refusal {
                        at_ms: e.at_ms,
                        what,
                        whose: format!("the worker's: {how}"),
                    });
                }
            }
            Tie::Other(why) if e.is_refusal() => v.not_credited.push(Refusal {
                at_ms: e.at_ms,
                what,
                whose: format!("another's: {why}"),
            }),
            Tie::Unknown if e.is_refusal() => v.not_credited.push(Refusal {
                at_ms: e.at_ms,
                what,
                whose:
                    "not tied to the worker: no pid, host, instance or file of its own, and the witness could not tell"
                        .into(),
            }),
            _ => {}
        }
    }
    own
}

/// How long the woken worker acted under the lost lock: its last command on the key that
/// is not a read or an acquisition attempt, or its last own lock event, after the thaw.
fn exposure(v: &mut LockVerdict, acting: &[&Command], own: &[&KeyEvent], w: &Window) {
    let act = acting.iter().max_by_key(|c| c.at_ms);
    let event = own.iter().max_by_key(|e| e.at_ms);
    let (at, what) = match (act, event) {
        (Some(c), Some(e)) if e.at_ms > c.at_ms => (e.at_ms, format!("its {} {} event, logged", e.op, e.outcome)),
        (Some(c), _) => (
            c.at_ms,
            format!("{} on the key from its connection {} (MONITOR)", c.name, c.addr()),
        ),
        (None, Some(e)) => (e.at_ms, format!("its {} {} event, logged", e.op, e.outcome)),
        (None, None) => {
            v.exposure_ms = Some(0);
            return;
        }
    };
    v.exposure_ms = Some((at - w.thawed_ms).max(0));
    v.last_act = Some(format!("{what}, {} after the thaw", secs(at - w.thawed_ms)));
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
