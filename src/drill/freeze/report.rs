//! The freeze drill's record: what was frozen and how, each lock the frozen worker held
//! with its verdict, consequence and fix, the application's timeline (freeze, last
//! renewals, expiries, takeovers, thaw, refusals and deletions), the witness and alerts.
//! JSON is its serde (`verdict`, `locks`); `record` makes it a document.

use serde::Serialize;

use crate::document;

use super::seen::{CountedRefusal, WallMs, Window};
use super::verdict::{LockVerdict, Verdict};

/// Who a moment of the timeline belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    Drill,
    Worker,
    NewOwner,
    Redis,
    Lockwatch,
}

impl Actor {
    /// Top to bottom, as the timeline draws them.
    pub const ALL: [Actor; 5] = [
        Actor::Drill,
        Actor::Worker,
        Actor::NewOwner,
        Actor::Redis,
        Actor::Lockwatch,
    ];
}

impl document::Lane for Actor {
    fn id(self) -> &'static str {
        match self {
            Actor::Drill => "drill",
            Actor::Worker => "worker",
            Actor::NewOwner => "new_owner",
            Actor::Redis => "redis",
            Actor::Lockwatch => "lockwatch",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Actor::Drill => "drill",
            Actor::Worker => "frozen worker",
            Actor::NewOwner => "new owner",
            Actor::Redis => "Redis",
            Actor::Lockwatch => "lockwatch",
        }
    }
}

/// One moment, in milliseconds from the freeze (negative: before it); a span when it has an
/// end (the freeze itself, the woken worker's exposure).
pub type Moment = document::Moment<Actor>;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Witness {
    pub ran: bool,
    pub unavailable: Option<String>,
    /// Why it cannot vouch it saw everything the worker sent, if so.
    pub unsure: Vec<String>,
    /// The frozen worker's connections as Redis saw them, and how they were known.
    pub worker_connections: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FreezeReport {
    /// `safe`, `unsafe` or `not_exercised`: the worst lock's.
    pub verdict: Verdict,
    /// One sentence.
    pub result: String,
    pub started_at: String,
    pub target: String,
    pub namespace: String,
    /// `pid:N`, `cgroup:PATH` or `cmd`.
    pub frozen: String,
    /// What that is (a command line, a cgroup's processes).
    pub what: String,
    /// A ptrace stop, SIGSTOP/SIGCONT, the cgroup v2 or v1 freezer, the commands.
    pub method: String,
    /// How the freeze ended: by whom, after how long (measured), whether the thaw failed.
    pub thaw: super::span::Thaw,
    pub for_ms: u64,
    pub observe_ms: u64,
    pub window: Option<Window>,
    /// What `/proc` told of the frozen worker (its pids, the files it writes).
    pub worker: String,
    /// Locks of the namespace held when the worker froze.
    pub held_at_freeze: usize,
    pub locks: Vec<LockVerdict>,
    /// Refusals counted for the namespace during the window, by scrape.
    pub counted: Vec<CountedRefusal>,
    pub witness: Witness,
    pub timeline: Vec<Moment>,
    pub alerts: Vec<(String, String)>,
    pub notes: Vec<String>,
    pub interrupted: bool,
}

/// At most this many of the woken worker's commands per lock are moments of the timeline.
const MOMENTS_SHOWN: usize = 20;

impl FreezeReport {
    /// How long it was frozen: measured from the landing to the thaw (`--for` until then).
    pub fn frozen_ms(&self) -> u64 {
        match self.thaw.frozen_ms {
            0 => self.for_ms,
            ms => ms,
        }
    }

    /// The frozen time as said: measured, with `--for` beside it when they differ by more
    /// than half a second (the drill or its watchdog was stopped, the watchdog died).
    pub(super) fn frozen_for(&self) -> String {
        if self.thaw.failed.is_some() {
            return format!(
                "{:.1} s, and it may still be frozen: the thaw failed",
                self.for_ms as f64 / 1000.0
            );
        }
        let measured = self.frozen_ms();
        match measured.abs_diff(self.for_ms) > 500 {
            true => format!(
                "{:.1} s (--for {:.1} s)",
                measured as f64 / 1000.0,
                self.for_ms as f64 / 1000.0
            ),
            false => format!("{:.1} s", measured as f64 / 1000.0),
        }
    }

    /// The timeline, from the window and the judged locks.
    pub fn build_timeline(&mut self) {
        let Some(w) = self.window else {
            return;
        };
        let rel = |at: WallMs| at - w.frozen_ms;
        let mut m = vec![
            Moment::span(
                0,
                rel(w.thawed_ms),
                Actor::Worker,
                format!("frozen ({})", self.method),
                true,
            ),
            Moment::at(0, Actor::Drill, format!("froze {}", self.frozen), true),
            Moment::at(rel(w.thawed_ms), Actor::Drill, format!("thawed {}", self.frozen), true),
            Moment::at(rel(w.end_ms), Actor::Drill, "observation ended", true),
        ];
        for l in &self.locks {
            let k = &l.key;
            let mut add = |at: Option<WallMs>, actor, what: String, ok| {
                if let Some(at) = at {
                    m.push(Moment::at(rel(at), actor, what, ok));
                }
            };
            add(l.last_renewal_ms, Actor::Worker, format!("last renewal of {k}"), true);
            add(l.expired_ms, Actor::Redis, format!("{k} expired, unreleased"), false);
            add(l.taken_over_ms, Actor::NewOwner, format!("took {k} over"), false);
            add(
                l.deleted_ms,
                Actor::Worker,
                format!("the new owner's {k} deleted"),
                false,
            );
            if let Some(e) = l.exposure_ms.filter(|e| *e > 0) {
                m.push(Moment::span(
                    rel(w.thawed_ms),
                    rel(w.thawed_ms) + e,
                    Actor::Worker,
                    format!("acted {:.1} s under {k}, no longer its", e as f64 / 1000.0),
                    l.verdict != Verdict::Unsafe,
                ));
            }
            // The woken worker's commands on the key, as the witness saw them.
            // (a script's own calls are in the JSON report only)
            let shown: Vec<_> = l
                .commands
                .iter()
                .filter(|c| !c.name.contains('>') || c.taken_as == "acting")
                .collect();
            for c in shown.iter().take(MOMENTS_SHOWN) {
                m.push(Moment::at(
                    rel(c.at_ms),
                    Actor::Worker,
                    format!("{} on {k} ({}, from {})", c.name, c.taken_as, c.by),
                    c.taken_as != "acting",
                ));
            }
            if shown.len() > MOMENTS_SHOWN
                && let Some(c) = shown.get(MOMENTS_SHOWN)
            {
                let more = l.commands_seen.saturating_sub(MOMENTS_SHOWN);
                m.push(Moment::at(
                    rel(c.at_ms),
                    Actor::Worker,
                    format!("and {more} more commands on {k} (in the JSON report's `commands`)"),
                    true,
                ));
            }
            for r in &l.refusals {
                m.push(Moment::at(
                    rel(r.at_ms),
                    Actor::Lockwatch,
                    format!("the worker's refusal of {k} counted: {}", r.what),
                    true,
                ));
            }
            for r in &l.not_credited {
                m.push(Moment::at(
                    rel(r.at_ms),
                    Actor::Lockwatch,
                    format!("a refusal of {k} counted, not the worker's: {}", r.what),
                    true,
                ));
            }
            m.push(Moment::at(
                rel(w.end_ms),
                Actor::Drill,
                format!("{k}: {}", l.finding.words()),
                l.verdict != Verdict::Unsafe,
            ));
        }
        m.sort_by_key(|x| x.at_ms);
        self.timeline = m;
    }

    pub fn witness_words(&self) -> String {
        let w = &self.witness;
        let conns = if w.worker_connections.is_empty() {
            "none of the frozen worker's connections was told apart".to_string()
        } else {
            let list: Vec<String> = w
                .worker_connections
                .iter()
                .map(|(a, how)| format!("{a} ({how})"))
                .collect();
            format!("the frozen worker's connections: {}", list.join(", "))
        };
        let unsure = match w.unsure.is_empty() {
            true => String::new(),
            false => format!(
                "; it cannot vouch it saw everything the worker sent ({}), so no lock is judged safe on its word",
                w.unsure.join("; ")
            ),
        };
        match (&w.unavailable, w.ran) {
            (Some(why), _) => format!(
                "MONITOR not available ({why}): a deletion of the new owner's lock is told from the refusals that follow it, and no lock is judged stopped on its word"
            ),
            (None, true) => format!("MONITOR ran; {conns}{unsure}"),
            (None, false) => {
                "not run (--no-monitor): a deletion of the new owner's lock is told from the refusals that follow it, and no lock is judged stopped on its word"
                    .into()
            }
        }
    }
}

/// The verdict as the report's first line says it.
pub fn headline(v: Verdict, interrupted: bool) -> &'static str {
    match (v, interrupted) {
        (_, true) => "INTERRUPTED (thawed at once)",
        (Verdict::Safe, _) => "SAFE",
        (Verdict::Unsafe, _) => "UNSAFE",
        (Verdict::NotExercised, _) => "NOT EXERCISED",
    }
}
