//! What a freeze drill saw, as plain data: the window (frozen, thawed, end), each candidate
//! key's transitions and the lock events that named it (from the exporter's history), the
//! namespace's refusals counted without a key, and what the `MONITOR` witness attributed.
//! Filled by `observe` and `witness`, judged by `verdict`.

use serde::Serialize;

/// Wall-clock milliseconds since the Unix epoch, as the exporter's history gives them.
pub type WallMs = i64;

/// The drill's three moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub frozen_ms: WallMs,
    pub thawed_ms: WallMs,
    /// The observation after the thaw ended.
    pub end_ms: WallMs,
}

/// One transition of a key, from `/api/v1/locks/history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    pub at_ms: WallMs,
    /// `acquired`, `renewed`, `released`, `expired`, `evicted`.
    pub kind: String,
    pub owner: Option<String>,
    pub takeover: bool,
}

/// A lock event from logs or pushes that named the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyEvent {
    pub at_ms: WallMs,
    pub op: String,
    pub outcome: String,
    pub source: String,
    /// Who wrote it, as far as the exporter was told.
    #[serde(skip_serializing_if = "EventOrigin::is_empty")]
    pub origin: EventOrigin,
}

/// Who wrote a lock event: the file it was read from, the process id, host and
/// `service.instance.id` it carried (`/api/v1/locks/history`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventOrigin {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `(device, inode)` of that file.
    #[serde(skip)]
    pub file_id: Option<(u64, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

impl EventOrigin {
    pub fn is_empty(&self) -> bool {
        *self == EventOrigin::default()
    }
}

impl KeyEvent {
    /// A refusal: the lock was no longer the sender's (`not_owned`), or its fencing token
    /// was stale.
    pub fn is_refusal(&self) -> bool {
        matches!(self.outcome.as_str(), "not_owned" | "stale_fence")
    }

    /// A write refused for its stale fencing token.
    pub fn is_fenced(&self) -> bool {
        self.outcome == "stale_fence"
    }
}

/// Who sent a command the witness saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    /// A connection of the frozen worker (how it was known: its sockets, or its silence).
    FrozenWorker {
        addr: String,
        how: String,
    },
    Other {
        addr: String,
    },
}

/// A command on a candidate key that the witness (`MONITOR`) saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    pub at_ms: WallMs,
    pub key: String,
    /// Upper case as sent: `DEL`, `UNLINK`, `SET`, `EVALSHA`…; a `SET` that is not `NX`
    /// (it replaces any value) as `SET (no NX)`; a script's own call as `EVALSHA>del`.
    pub name: String,
    pub by: Sender,
    /// Which script or function it ran (or was run by), as a hash of its body, SHA or
    /// function name: the same script is the same number.
    #[serde(skip)]
    pub script: Option<u64>,
}

/// Commands that only read a key: no action of a holder.
const READS: [&str; 16] = [
    "GET",
    "PTTL",
    "TTL",
    "EXISTS",
    "TYPE",
    "HGET",
    "HGETALL",
    "HEXISTS",
    "HLEN",
    "STRLEN",
    "PEXPIRETIME",
    "EXPIRETIME",
    "OBJECT",
    "DUMP",
    "GETRANGE",
    "MGET",
];

impl Command {
    /// The command itself, or a script's own call (`EVALSHA>get` is `GET`).
    fn last(&self) -> String {
        self.name.rsplit('>').next().unwrap_or("").to_ascii_uppercase()
    }

    /// It only reads the key.
    pub fn reads(&self) -> bool {
        READS.contains(&self.last().as_str())
    }

    /// It was sent by the frozen worker's connection.
    pub fn by_worker(&self) -> bool {
        matches!(self.by, Sender::FrozenWorker { .. })
    }

    /// The client address that sent it.
    pub fn addr(&self) -> &str {
        match &self.by {
            Sender::FrozenWorker { addr, .. } | Sender::Other { addr } => addr,
        }
    }

    /// It removes or replaces the key whatever its value: `DEL`, `UNLINK`, `GETDEL`, a
    /// `SET` without `NX`, or a script's own `del` (compare-and-delete commands such as
    /// `DELIFEQ` cannot remove another owner's lock, and are not counted).
    pub fn deletes(&self) -> bool {
        matches!(self.last().as_str(), "DEL" | "UNLINK" | "GETDEL" | "SET (NO NX)")
    }

    /// It may end a hold: a deletion, or a compare-and-delete (`DELIFEQ`, `DELEX`).
    pub fn releases(&self) -> bool {
        self.deletes() || matches!(self.last().as_str(), "DELIFEQ" | "DELEX")
    }
}

/// Everything seen of one candidate key.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KeySeen {
    pub key: String,
    /// The owner hash the exporter showed holding it when the worker froze.
    pub held_at_freeze: Option<String>,
    pub transitions: Vec<Transition>,
    /// `None`: the exporter keeps no per-key lock events (an older lockwatch).
    pub events: Option<Vec<KeyEvent>>,
}

/// A refusal counted for the namespace (`lockwatch_lock_events_total`), with no key: the
/// first scrape that showed the counter moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CountedRefusal {
    pub at_ms: WallMs,
    pub op: String,
    pub outcome: String,
    pub by: u64,
}

/// What the witness saw, when it ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Witnessed {
    /// It watched every primary from before the freeze to the end.
    pub ran: bool,
    /// Why it did not run, if so.
    pub unavailable: Option<String>,
    /// Why it cannot be sure it saw everything the worker sent on the namespace's keys
    /// (a connection it could not tie to a process, commands not kept), if so.
    pub unsure: Vec<String>,
    /// The frozen worker's connections as Redis sees them (`ip:port`), and how they were known.
    pub worker_addrs: Vec<(String, String)>,
    pub commands: Vec<Command>,
}

impl KeySeen {
    /// Merge a later reading of the history into this one (the exporter keeps a key's last
    /// records only: a reading at the thaw keeps what a busy key pushes out later).
    pub fn merge(&mut self, transitions: Vec<Transition>, events: Option<Vec<KeyEvent>>) {
        for t in transitions {
            if !self.transitions.contains(&t) {
                self.transitions.push(t);
            }
        }
        self.transitions.sort_by_key(|t| t.at_ms);
        match (&mut self.events, events) {
            (Some(mine), Some(new)) => {
                for e in new {
                    if !mine.contains(&e) {
                        mine.push(e);
                    }
                }
                mine.sort_by_key(|e| e.at_ms);
            }
            (None, Some(new)) => self.events = Some(new),
            (_, None) => {}
        }
    }
}
