//! What one key's commands, as the witness saw them, say to the judgement: which scripts
//! acquire the lock (calling one is an attempt to take it, not acting under it), which
//! commands Redis refused, and whose a refusal event with no origin is by the refused
//! command just before it.

use super::held::{MATCH_MS, secs};
use super::identity::Tie;
use super::seen::{Command, KeyEvent, KeySeen};
use super::verdict::LOG_DELAY_MS;

/// What one key's commands say: which scripts acquire it, and whether a command changed it.
pub struct OnKey<'a> {
    k: &'a KeySeen,
    pub commands: Vec<&'a Command>,
    acquiring: Vec<u64>,
}

impl<'a> OnKey<'a> {
    pub fn new(k: &'a KeySeen, witness: &'a [Command]) -> Self {
        let commands: Vec<&Command> = witness.iter().filter(|c| c.key == k.key).collect();
        // A script that made an acquisition acquires: calling it is trying to take the lock,
        // not acting under one. It made it when no `SET` did, it is the nearest script call
        // whose own calls wrote the key (not a `del`: the previous holder's release).
        let mut acquiring = Vec::new();
        for t in k.transitions.iter().filter(|t| t.kind == "acquired") {
            let near = |c: &&&Command| (c.at_ms - t.at_ms).abs() <= MATCH_MS;
            if commands.iter().filter(near).any(|c| c.name.starts_with("SET")) {
                continue;
            }
            let writes_key = |outer: &Command| {
                commands.iter().any(|c| {
                    c.script == outer.script
                        && c.addr() == outer.addr()
                        && c.name.starts_with(&format!("{}>", outer.name))
                        && (c.at_ms - outer.at_ms).abs() <= MATCH_MS
                        && !c.reads()
                        && !c.deletes()
                })
            };
            let made = commands
                .iter()
                .filter(near)
                .filter(|c| !c.name.contains('>') && c.script.is_some() && writes_key(c))
                .min_by_key(|c| (c.at_ms - t.at_ms).abs());
            if let Some(script) = made.and_then(|c| c.script)
                && !acquiring.contains(&script)
            {
                acquiring.push(script);
            }
        }
        OnKey { k, commands, acquiring }
    }

    /// An attempt to take the lock: a `SET … NX`, or a script that acquires it.
    pub fn acquires(&self, c: &Command) -> bool {
        matches!(c.name.as_str(), "SET NX" | "SETNX") || c.script.is_some_and(|s| self.acquiring.contains(&s))
    }

    /// It changed the key: a transition within [`MATCH_MS`].
    fn changed(&self, c: &Command) -> bool {
        self.k.transitions.iter().any(|t| (t.at_ms - c.at_ms).abs() <= MATCH_MS)
    }

    /// A holder's command that Redis refused: a renewal or release (not a read, not an
    /// acquisition attempt, not a deletion) from the woken worker (the key is another's), or
    /// from another client when it changed nothing.
    fn refused(&self, c: &Command) -> bool {
        let holder = !c.name.contains('>') && !c.reads() && !self.acquires(c) && !c.deletes();
        holder && (c.by_worker() || !self.changed(c))
    }

    /// Whose a refusal event with no origin to tell is, by the commands just before it: the
    /// worker's when only its connections sent a refused command on the key in the
    /// [`LOG_DELAY_MS`] before lockwatch counted it, another's when only others did.
    pub fn by_command(&self, e: &KeyEvent) -> Tie {
        let before = |c: &&&Command| c.at_ms <= e.at_ms && c.at_ms >= e.at_ms - LOG_DELAY_MS && self.refused(c);
        let (mut worker, mut other) = (None, None);
        for c in self.commands.iter().filter(before) {
            match c.by_worker() {
                true => worker = Some(*c),
                false => other = Some(*c),
            }
        }
        match (worker, other) {
            (Some(c), None) => Tie::Worker(format!(
                "no pid, file or instance to tie it by; the witness saw the worker's connection {} send a refused {} on the key {} before, and no one else's",
                c.addr(),
                c.name,
                secs(e.at_ms - c.at_ms)
            )),
            (None, Some(c)) => Tie::Other(format!(
                "the witness saw another connection, {}, send a refused {} on the key just before, and none of the worker's",
                c.addr(),
                c.name
            )),
            (Some(_), Some(_)) => Tie::Unknown,
            (None, None) => Tie::Unknown,
        }
    }
}
