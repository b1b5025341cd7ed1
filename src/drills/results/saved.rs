//! `<state dir>/drills/`: one file per recorded drill (`TARGET~NAMESPACE~NAME.json`: `~` is
//! in no name), its latest record, recent runs and totals, replaced whole on every record
//! (`durable::replace`) and read at start, so a restart, a SIGKILL or a reload keeps them.
//! An unreadable file is set aside (`.unreadable`) and said.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Kept;

/// The directory's name inside `[state] dir`.
pub const DIR: &str = "drills";
/// The format's version; a file of another version is set aside.
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Saved {
    version: u32,
    drill: Kept,
}

#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot save the drill's result to {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot remove {path}: {source}")]
    Remove { path: PathBuf, source: std::io::Error },
}

/// The file of a drill.
pub(super) fn path(dir: &Path, key: &(String, String, String)) -> PathBuf {
    dir.join(DIR).join(format!("{}~{}~{}.json", key.0, key.1, key.2))
}

/// Every drill saved in `dir`; each unreadable file set aside, and said.
pub(super) fn load(dir: &Path) -> Result<Vec<Kept>, SavedError> {
    let at = dir.join(DIR);
    let entries = match std::fs::read_dir(&at) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SavedError::Read { path: at, source }),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let read = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Saved>(&b).map_err(|e| e.to_string()))
            .and_then(|s| match s.version {
                VERSION => Ok(s.drill),
                v => Err(format!("version {v} where {VERSION} is expected")),
            });
        match read {
            Ok(kept) => out.push(kept),
            Err(reason) => {
                let mut aside = path.clone().into_os_string();
                aside.push(".unreadable");
                let moved = std::fs::rename(&path, &aside);
                tracing::warn!(path = %path.display(), reason, set_aside = moved.is_ok(), "a drill's saved result not restored");
            }
        }
    }
    Ok(out)
}

/// Replace the file of `kept` in `dir`.
pub(super) fn save(dir: &Path, kept: &Kept) -> Result<(), SavedError> {
    let path = path(dir, &kept.latest.key());
    let write = |source| SavedError::Write {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write)?;
    }
    let saved = Saved {
        version: VERSION,
        drill: kept.clone(),
    };
    let body = serde_json::to_vec(&saved).map_err(|e| write(std::io::Error::other(e)))?;
    crate::durable::replace(&path, &body).map_err(write)
}

/// Remove the file of the drill `key` from `dir` (none is fine).
pub(super) fn remove(dir: &Path, key: &(String, String, String)) -> Result<(), SavedError> {
    let path = path(dir, key);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(SavedError::Remove { path, source: e }),
        _ => Ok(()),
    }
}
