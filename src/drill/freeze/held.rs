//! Which locks were the frozen worker's: held at the freeze and then expired unreleased
//! while it was frozen, or renewed on a cadence before and not once during it; and what
//! the witness says of who acquired and renewed them before the freeze.

use super::seen::{Command, KeySeen, Sender, Transition, WallMs, Window};

/// How late the exporter may see an expiry that happened while the worker was frozen.
pub const LATE_MS: WallMs = 500;

/// How far apart a command `MONITOR` saw and the transition it made may be.
pub const MATCH_MS: WallMs = 150;

/// Which lock the frozen worker held: the owner at the freeze and why it is its.
pub struct Held {
    pub owner: Option<String>,
    pub why: String,
    pub last_renewal_ms: Option<WallMs>,
    pub expired_ms: Option<WallMs>,
}

/// The frozen worker's lock, or why it is not (`Err`: another holder's, said in the notes;
/// `Ok(None)`: nothing to say).
pub fn held_by_worker(k: &KeySeen, witness: &[Command], w: &Window) -> Result<Option<Held>, String> {
    let Some(held) = attribute(k, w) else {
        return Ok(None);
    };
    match by_witness(k, &held, witness, w) {
        Witnessed::Other(why) => Err(format!("{}: {why}", k.key)),
        Witnessed::Worker(why) => Ok(Some(Held {
            why: format!("{why}; {}", held.why),
            ..held
        })),
        Witnessed::Unknown => Ok(Some(held)),
    }
}

/// What the witness says of who held a lock before the freeze.
enum Witnessed {
    Worker(String),
    Other(String),
    Unknown,
}

/// Commands that write a lock (and so make an acquisition or a renewal).
pub fn writes(name: &str) -> bool {
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

pub fn secs(ms: WallMs) -> String {
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
