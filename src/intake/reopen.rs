//! Rotated log files still written to while the file now at their path is not — the
//! application did not reopen its log after the rotation — as each file source last judged
//! them (`tail::rotated`), for the status page. The tailers fill it; `http` reads it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// One rotated file its application still writes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReopened {
    /// The `[[logs]]` source.
    pub source: String,
    /// Where the rotated file is now (as the kernel names the open file).
    pub rotated: PathBuf,
    /// The path it was rotated from, where the application should write.
    pub path: PathBuf,
    /// Since when it is said (wall-clock ms).
    pub since_ms: i64,
}

/// Shared by the file sources and read by the status page.
#[derive(Clone, Default)]
pub struct ReopenNotes(Arc<Mutex<Vec<NotReopened>>>);

impl ReopenNotes {
    /// Replace what `source` said with `notes`.
    pub(crate) fn set(&self, source: &str, notes: Vec<NotReopened>) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|n| n.source != source);
        all.extend(notes);
    }

    /// Every source's, in the order they were said.
    pub fn all(&self) -> Vec<NotReopened> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        all.sort_by_key(|n| n.since_ms);
        all
    }
}
