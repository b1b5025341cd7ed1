//! Rotated files being followed: at most `MAX_ROTATED` per source (past it the one idle the
//! longest is finished first), and what their growth says — a rotated file written more than
//! `REOPEN_WAIT` after its rotation while the file now at its path is empty means the
//! application did not reopen its log (`not_reopened`, pure). Said in the log, the gauge
//! `lockwatch_log_files_not_reopened` and the status page's notes, and cleared when the file
//! at the path gets written or the rotated file is closed.

use std::path::Path;
use std::time::Duration;

use super::file::Tracked;
use super::{MAX_ROTATED, REOPEN_WAIT, Tailer};
use crate::intake::reopen::NotReopened;
use crate::locks::recent::wall_ms;

/// The file now at a rotated file's former path, as the tailer follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Successor {
    /// Nothing there (logrotate's `nocreate`, or not created yet).
    Absent,
    /// Its size when last read; `None` before its first read.
    Size(Option<u64>),
}

/// Whether a rotated file says its application did not reopen its log, from what it said
/// at the last judgment (`was`): it grew since then, `late` after the rotation was noticed
/// (later than `wait`, the time an application told to reopen takes), while the file at its
/// path is absent or still empty; said until the file at the path gets written.
pub(crate) fn not_reopened(was: bool, late: Option<Duration>, wait: Duration, successor: Successor) -> bool {
    match successor {
        Successor::Absent | Successor::Size(Some(0)) => was || late.is_some_and(|l| l > wait),
        Successor::Size(None) => was,
        Successor::Size(Some(_)) => false,
    }
}

impl Tailer {
    /// Past `MAX_ROTATED` rotated files, read the one idle the longest to its end and close it.
    pub(super) fn bound_rotated(&mut self) {
        while self.files.iter().filter(|t| t.rotated.is_some()).count() > MAX_ROTATED {
            let oldest = self
                .files
                .iter()
                .enumerate()
                .filter(|(_, t)| t.rotated.is_some())
                .min_by_key(|(_, t)| t.last_active())
                .map(|(i, _)| i);
            let Some(i) = oldest else { return };
            tracing::warn!(source = %self.source.name, file = %self.files[i].path.display(),
                "more than {MAX_ROTATED} rotated files followed: the one idle the longest is closed before its grace ends");
            self.close(i);
        }
    }

    /// Judge every rotated file (copies aside), say what changed, and publish the notes.
    pub(super) fn judge_reopen(&mut self) {
        let wait = REOPEN_WAIT.min(self.source.rotated_grace);
        let now = wall_ms();
        let mut notes = Vec::new();
        for i in 0..self.files.len() {
            let Some(r) = self.files[i].rotated.as_ref().filter(|r| !r.copy) else {
                continue;
            };
            let successor = successor(&self.files, &r.from);
            let grown = self.files[i].last_growth();
            // Growth since the last judgment, how long after the rotation.
            let late = (r.judged_growth != Some(grown))
                .then(|| grown.checked_duration_since(r.at))
                .flatten();
            let on = not_reopened(r.not_reopened.is_some(), late, wait, successor);
            let t = &self.files[i];
            match (on, r.not_reopened) {
                (true, None) => {
                    tracing::warn!(source = %self.source.name, file = %t.current_path().display(), path = %r.from.display(),
                    "the application did not reopen its log after rotation: it still writes into the rotated file, and nothing at its path; \
                     its lines are counted while the rotated file is followed (rotated_grace after its last write). \
                     Fix the rotation: logrotate's `copytruncate`, or a `postrotate` script that signals the application to reopen its log")
                }
                (false, Some(_)) => {
                    tracing::info!(source = %self.source.name, file = %t.current_path().display(), path = %r.from.display(),
                    "the file at the path is written now: the application reopened its log")
                }
                _ => {}
            }
            let since = match (on, r.not_reopened) {
                (true, Some(since)) => Some(since),
                (true, None) => Some(now),
                (false, _) => None,
            };
            if let Some(since_ms) = since {
                notes.push(NotReopened {
                    source: self.source.name.clone(),
                    rotated: t.current_path(),
                    path: r.from.clone(),
                    since_ms,
                });
            }
            if let Some(r) = self.files[i].rotated.as_mut() {
                r.not_reopened = since;
                r.judged_growth = Some(grown);
            }
        }
        self.not_reopened_gauge.set(notes.len() as i64);
        self.reopen.set(&self.source.name, notes);
    }

    /// A file no longer followed: a rotated file said not reopened stops being said.
    pub(super) fn closed(&self, t: &Tracked) {
        if let Some(r) = t.rotated.as_ref().filter(|r| r.not_reopened.is_some()) {
            tracing::info!(source = %self.source.name, file = %t.path.display(), path = %r.from.display(),
                "the rotated file the application kept writing is closed: no longer said not reopened");
        }
    }
}

/// The file followed at `path` that is not rotated.
fn successor(files: &[Tracked], path: &Path) -> Successor {
    match files.iter().find(|t| t.rotated.is_none() && t.path == path) {
        Some(t) => Successor::Size(t.size()),
        None => Successor::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_writes_with_nothing_written_at_the_path_say_not_reopened() {
        let wait = Duration::from_secs(5);
        let s = |n| Some(Duration::from_secs(n));
        // Written within the wait after the rotation: an application about to reopen.
        assert!(!not_reopened(false, s(2), wait, Successor::Size(Some(0))));
        // Written later, the new file still empty, or absent (`nocreate`).
        assert!(not_reopened(false, s(7), wait, Successor::Size(Some(0))));
        assert!(not_reopened(false, s(7), wait, Successor::Absent));
        // Said until the file at the path is written, grown since or not.
        assert!(not_reopened(true, None, wait, Successor::Size(Some(0))));
        assert!(!not_reopened(true, None, wait, Successor::Size(Some(120))));
        // The new file is written: the application reopened it (another process writes the
        // rotated one).
        assert!(!not_reopened(false, s(7), wait, Successor::Size(Some(120))));
        // The new file not read yet: what was said stands.
        assert!(!not_reopened(false, s(7), wait, Successor::Size(None)));
        assert!(not_reopened(true, None, wait, Successor::Size(None)));
        // Not grown since the last judgment.
        assert!(!not_reopened(false, None, wait, Successor::Absent));
    }
}
