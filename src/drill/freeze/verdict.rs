//! Judging a freeze drill, purely from what was seen: which locks the frozen worker held
//! (and how that was told), when each expired and was taken over, and what the woken
//! worker did after the thaw — refused and it shows (safe), nothing (carried on
//! silently), or the new owner's lock deleted (a plain `DEL`). The worst lock decides.

use serde::Serialize;

pub use super::finding::{Finding, Verdict};
use super::seen::{Command, CountedRefusal, KeyEvent, KeySeen, Sender, Transition, WallMs, Window};

/// How late the exporter may see an expiry that happened while the worker was frozen.
const LATE_MS: WallMs = 500;

/// How far apart a command `MONITOR` saw and the transition it made may be.
const MATCH_MS: WallMs = 150;

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
    /// The refusals counted as the woken worker's, and where they came from.
    pub refusals: Vec<Refusal>,
    pub consequence: &'static str,
    pub fix: &'static str,
    /// What else is worth saying (a caveat of the attribution, the woken worker's commands).
    pub notes: Vec<String>,
}

/// A refusal taken as the woken worker's: when lockwatch counted it, and what it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub at_ms: WallMs,
    pub what: String,
}

impl LockVerdict {
    /// The refusals in one line.
    pub fn refusal_words(&self) -> String {
        let words: Vec<&str> = self.refusals.iter().map(|r| r.what.as_str()).collect();
        words.join("; ")
    }
}

/// Which lock the frozen worker held: the owner at the freeze and why it is its.
struct Held {
    owner: Option<String>,
    why: String,
    last_renewal_ms: Option<WallMs>,
    expired_ms: Option<WallMs>,
}

/// The judgement: the frozen worker's locks, and the keys that changed while it was frozen
/// but are shown to be another holder's (said, never judged).
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub locks: Vec<LockVerdict>,
    pub others: Vec<String>,
}

/// The locks the frozen worker held, judged; keys not attributed to it are left out.
pub fn judge(keys: &[KeySeen], counted: &[CountedRefusal], witness: &[Command], w: &Window) -> Judged {
    let mut out = Judged::default();
    for k in keys {
        match attribute(k, w) {
            None => {}
            Some(held) => match by_witness(k, &held, witness, w) {
                Witnessed::Other(why) => out.others.push(format!("{}: {why}", k.key)),
                Witnessed::Worker(why) => {
                    let held = Held {
                        why: format!("{why}; {}", held.why),
                        ..held
                    };
                    out.locks.push(judge_one(k, held, counted, witness, w));
                }
                Witnessed::Unknown => out.locks.push(judge_one(k, held, counted, witness, w)),
            },
        }
    }
    out
}

/// What the witness says of who held a lock before the freeze.
enum Witnessed {
    Worker(String),
    Other(String),
    Unknown,
}

/// Commands that write a lock (and so make an acquisition or a renewal).
fn writes(name: &str) -> bool {
    const WRITES: [&str; 9] = [
        "SET", "EVAL", "FCALL", "PEXPIRE", "EXPIRE", "HSET", "HINCRBY", "GETSET", "GETEX",
    ];
    let first = name.split('>').next().unwrap_or("");
    WRITES.iter().any(|w| first.starts_with(w)) && !first.starts_with("SETRANGE")
}

/// The commands that made the held owner's acquisitions and renewals before the freeze
/// (within [`MATCH_MS`] of each): sent by the frozen worker's connection, or only by others
/// while the worker's connections are known.
fn by_witness(k: &KeySeen, held: &Held, witness: &[Command], w: &Window) -> Witnessed {
    let known = witness.iter().any(|c| matches!(c.by, Sender::FrozenWorker { .. }));
    let made: Vec<&Transition> = k
        .transitions
        .iter()
        .filter(|t| {
            t.at_ms <= w.frozen_ms && t.owner == held.owner && matches!(t.kind.as_str(), "acquired" | "renewed")
        })
        .collect();
    let mut others = Vec::new();
    for t in made.iter().rev() {
        let near: Vec<&Command> = witness
            .iter()
            .filter(|c| c.key == k.key && writes(&c.name) && (c.at_ms - t.at_ms).abs() <= MATCH_MS)
            .collect();
        if let Some(c) = near.iter().find(|c| matches!(c.by, Sender::FrozenWorker { .. })) {
            let addr = match &c.by {
                Sender::FrozenWorker { addr, .. } | Sender::Other { addr } => addr,
            };
            return Witnessed::Worker(format!(
                "MONITOR saw the frozen worker's connection {addr} {} it ({})",
                if t.kind == "acquired" { "acquire" } else { "renew" },
                c.name
            ));
        }
        others.extend(near.iter().map(|c| match &c.by {
            Sender::FrozenWorker { addr, .. } | Sender::Other { addr } => addr.clone(),
        }));
    }
    let touched = witness
        .iter()
        .any(|c| c.key == k.key && matches!(c.by, Sender::FrozenWorker { .. }));
    match (known, others.is_empty(), touched) {
        (true, false, false) => {
            others.sort();
            others.dedup();
            Witnessed::Other(format!(
                "expired or stopped renewing while the worker was frozen, but MONITOR saw it acquired or renewed from {} — not the frozen worker's connections: another holder's",
                others.join(", ")
            ))
        }
        (true, true, false) => Witnessed::Other(
            "expired or stopped renewing while the worker was frozen, but the frozen worker's connections never sent a command on it (MONITOR, from before the freeze to the end): not attributed to it".into(),
        ),
        _ => Witnessed::Unknown,
    }
}

/// The overall verdict: the worst lock's, or not exercised without any.
pub fn overall(locks: &[LockVerdict]) -> Verdict {
    locks.iter().map(|l| l.verdict).max().unwrap_or(Verdict::NotExercised)
}

fn secs(ms: WallMs) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Held at the freeze and then: expired while frozen with nobody renewing or releasing it,
/// or renewed before the freeze and never during it while the freeze outlasted its cadence.
fn attribute(k: &KeySeen, w: &Window) -> Option<Held> {
    let before: Vec<&Transition> = k.transitions.iter().filter(|t| t.at_ms <= w.frozen_ms).collect();
    let last = before.last();
    let holding = last.is_some_and(|t| matches!(t.kind.as_str(), "acquired" | "renewed"));
    if !holding && k.held_at_freeze.is_none() {
        return None;
    }
    let owner = last
        .filter(|_| holding)
        .and_then(|t| t.owner.clone())
        .or_else(|| k.held_at_freeze.clone());
    // Taken after the worker froze (the table was read just after): not the frozen worker's.
    let taken_later = k
        .transitions
        .iter()
        .any(|t| t.at_ms > w.frozen_ms && t.kind == "acquired" && t.owner == owner);
    if !holding && taken_later {
        return None;
    }
    let during = |t: &&Transition| t.at_ms > w.frozen_ms && t.at_ms <= w.thawed_ms + LATE_MS;
    let first_end = k
        .transitions
        .iter()
        .filter(during)
        .find(|t| t.kind != "renewed" || t.owner == owner);
    let renewals: Vec<WallMs> = before
        .iter()
        .filter(|t| t.kind == "renewed" && t.owner == owner)
        .map(|t| t.at_ms)
        .collect();
    let last_renewal_ms = renewals.last().copied();
    match first_end {
        Some(t) if matches!(t.kind.as_str(), "expired" | "evicted") => {
            let why = match renewals.len() {
                0 => "held when the worker froze and expired unreleased while it was frozen (it was not renewed before the freeze either: it may be another holder's that lets its locks expire)".to_string(),
                n => format!("held when the worker froze, renewed {n} time(s) before, then no renewal and expired unreleased while it was frozen"),
            };
            Some(Held {
                owner,
                why,
                last_renewal_ms,
                expired_ms: Some(t.at_ms),
            })
        }
        // Released, renewed or replaced while the worker was frozen: someone else's.
        Some(_) => None,
        None => {
            let cadence = median_gap(&renewals)?;
            let frozen_for = w.thawed_ms - w.frozen_ms;
            (frozen_for * 2 > cadence * 3).then(|| Held {
                owner,
                why: format!(
                    "renewed every {} before the freeze, then not once in its {}: the renewals stopped",
                    secs(cadence),
                    secs(frozen_for)
                ),
                last_renewal_ms,
                expired_ms: None,
            })
        }
    }
}

fn median_gap(at: &[WallMs]) -> Option<WallMs> {
    let mut gaps: Vec<WallMs> = at.windows(2).map(|p| p[1] - p[0]).collect();
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

fn judge_one(k: &KeySeen, held: Held, counted: &[CountedRefusal], witness: &[Command], w: &Window) -> LockVerdict {
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
        refusals: vec![],
        consequence: "",
        fix: "",
        notes: vec![],
    };
    let finding = match held.expired_ms {
        None => Finding::OutlastedFreeze,
        Some(expired) => after_expiry(k, &mut v, expired, counted, witness, w),
    };
    v.finding = finding;
    v.verdict = finding.verdict();
    v.consequence = finding.consequence();
    v.fix = finding.fix();
    v
}

/// The takeover, the new owner's hold, and the woken worker's traces after the thaw.
fn after_expiry(
    k: &KeySeen,
    v: &mut LockVerdict,
    expired: WallMs,
    counted: &[CountedRefusal],
    witness: &[Command],
    w: &Window,
) -> Finding {
    let takeover = k.transitions.iter().find(|t| {
        t.at_ms >= expired
            && t.kind == "acquired"
            && (t.takeover || (t.at_ms <= w.thawed_ms + LATE_MS && t.owner != v.owner))
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
    let ended_at = end.map(|t| t.at_ms);
    let mine = |c: &&Command| matches!(c.by, Sender::FrozenWorker { .. }) && c.key == k.key;
    let woken: Vec<&Command> = witness.iter().filter(mine).filter(|c| c.at_ms >= w.thawed_ms).collect();
    let written: Vec<String> = woken
        .iter()
        .filter(|c| writes(&c.name) || c.deletes())
        .filter(|c| !c.name.contains('>') || c.deletes())
        .map(|c| format!("{} at +{}", c.name, secs(c.at_ms - w.thawed_ms)))
        .collect();
    if !written.is_empty() {
        let more = match written.len() {
            n if n > 6 => format!(" and {} more", n - 6),
            _ => String::new(),
        };
        v.notes.push(format!(
            "the woken worker's writes on this key (MONITOR): {}{more}",
            written[..written.len().min(6)].join(", ")
        ));
    }
    // A deletion of the new owner's lock after the thaw, by the woken worker's connection.
    let by_worker = woken
        .iter()
        .find(|c| c.deletes() && c.at_ms > takeover.at_ms && ended_at.is_none_or(|e| c.at_ms <= e + LATE_MS));
    let keyed: Option<Vec<&KeyEvent>> = k.events.as_ref().map(|e| {
        e.iter()
            .filter(|e| e.is_refusal() && e.at_ms >= w.thawed_ms && e.at_ms <= w.end_ms)
            .collect()
    });
    if let Some(c) = by_worker {
        v.deleted_ms = Some(c.at_ms);
        let (addr, how) = match &c.by {
            Sender::FrozenWorker { addr, how } => (addr.as_str(), how.as_str()),
            Sender::Other { addr } => (addr.as_str(), ""),
        };
        v.deleted_how = Some(format!(
            "{} sent by the woken worker's connection {addr} ({how}), seen by MONITOR",
            c.name
        ));
        return Finding::DeletedNewOwnersLock;
    }
    let witnessed_other = end.and_then(|e| {
        witness
            .iter()
            .filter(|c| c.key == k.key && c.deletes() && (c.at_ms - e.at_ms).abs() <= LATE_MS)
            .find(|c| matches!(c.by, Sender::Other { .. }))
    });
    if let Some(e) = end.filter(|e| e.at_ms >= w.thawed_ms && e.kind != "expired" && e.kind != "evicted")
        && witnessed_other.is_none()
    {
        // Without the witness: the new owner's refusals after the deletion say it was not its release.
        let after: Vec<String> = match &keyed {
            Some(ev) => ev
                .iter()
                .filter(|x| x.at_ms > e.at_ms)
                .map(|x| format!("{} {} (key named, {})", x.op, x.outcome, x.source))
                .collect(),
            None => counted
                .iter()
                .filter(|x| x.at_ms > e.at_ms && x.at_ms <= w.end_ms)
                .map(|x| format!("{} {} ×{} (counted for the namespace)", x.op, x.outcome, x.by))
                .collect(),
        };
        let replaced = e.kind == "acquired";
        if replaced || !after.is_empty() {
            v.deleted_ms = Some(e.at_ms);
            v.deleted_how = Some(if replaced {
                "the new owner's token was replaced without a release after the thaw (a SET without NX)".into()
            } else {
                format!(
                    "the new owner's lock was deleted {} after the thaw, and refusals followed ({}): the new owner found its lock gone, so the deletion was not its release",
                    secs(e.at_ms - w.thawed_ms),
                    after.join(", ")
                )
            });
            return Finding::DeletedNewOwnersLock;
        }
    }
    // The woken worker's refusals: before any deletion, after the thaw.
    let until = v.deleted_ms.unwrap_or(w.end_ms);
    // Where the exporter keeps lock events per key, only those naming this key count: the
    // namespace's other refusals may be other holders'.
    v.refusals = match &keyed {
        Some(ev) => ev
            .iter()
            .filter(|x| x.at_ms <= until)
            .map(|x| Refusal {
                at_ms: x.at_ms,
                what: format!("{} {} (the key named, from {})", x.op, x.outcome, x.source),
            })
            .collect(),
        None => counted
            .iter()
            .filter(|x| x.at_ms >= w.thawed_ms && x.at_ms <= until)
            .map(|x| Refusal {
                at_ms: x.at_ms,
                what: format!(
                    "{} {} ×{} (counted for the namespace: the log lines name no key)",
                    x.op, x.outcome, x.by
                ),
            })
            .collect(),
    };
    if v.refusals.is_empty() {
        Finding::CarriedOnSilently
    } else {
        Finding::Refused
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
