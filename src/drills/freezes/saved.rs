//! `<state dir>/drill-freezes.json`: the live freezes and the latest thaws, replaced whole on
//! every change (`durable::replace`) and read at start, so a restart, a SIGKILL or a reload
//! keeps what the drills reported.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Freeze;

/// The file's name inside `[state] dir`.
pub const FILE: &str = "drill-freezes.json";
/// The format's version; a file of another version is set aside.
const VERSION: u32 = 1;

/// What the file holds.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Saved {
    pub(super) version: u32,
    pub(super) live: Vec<Freeze>,
    /// Recent thaws, `(id, at_ms)`: a late `frozen` of a thawed freeze is told from a new one.
    pub(super) thawed: Vec<(String, u64)>,
}

#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is unreadable ({reason})")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot save the drills' freezes to {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The saved freezes in `dir`; empty when none were saved.
pub(super) fn load(dir: &Path) -> Result<Saved, SavedError> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Saved::default()),
        Err(source) => return Err(SavedError::Read { path, source }),
    };
    let saved: Saved = serde_json::from_slice(&bytes).map_err(|e| SavedError::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if saved.version != VERSION {
        let reason = format!("version {} where {VERSION} is expected", saved.version);
        return Err(SavedError::Corrupt { path, reason });
    }
    Ok(saved)
}

/// Move an unreadable file aside (kept for a look), so the next save starts clean.
pub(super) fn set_aside(dir: &Path) -> std::io::Result<PathBuf> {
    let aside = dir.join(format!("{FILE}.unreadable"));
    std::fs::rename(dir.join(FILE), &aside)?;
    Ok(aside)
}

/// Replace the file in `dir` with `live` and `thawed`.
pub(super) fn save<'a>(
    dir: &Path,
    live: impl Iterator<Item = &'a Freeze>,
    thawed: impl Iterator<Item = (&'a String, &'a u64)>,
) -> Result<(), SavedError> {
    let path = dir.join(FILE);
    let saved = Saved {
        version: VERSION,
        live: live.cloned().collect(),
        thawed: thawed.map(|(id, at)| (id.clone(), *at)).collect(),
    };
    let write = |source| SavedError::Write {
        path: path.clone(),
        source,
    };
    let body = serde_json::to_vec_pretty(&saved).map_err(|e| write(std::io::Error::other(e)))?;
    crate::durable::replace(&path, &body).map_err(write)
}
