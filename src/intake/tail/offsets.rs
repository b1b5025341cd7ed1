//! Saved read offsets of one log source in `state.dir`, with the counts they cover, so a
//! restart resumes where the last run stopped and its counters continue from there. Written
//! atomically (`durable::replace`): a temporary file, fsync, rename, fsync of the directory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::counts::SavedCounts;

/// The file format's version; a file of another version is not read.
const VERSION: u32 = 1;

/// A source's saved state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Saved {
    pub(crate) version: u32,
    pub(crate) source: String,
    pub(crate) files: Vec<SavedFile>,
    /// What the source counted up to these offsets (absent in files of earlier versions).
    #[serde(default)]
    pub(crate) counts: Option<SavedCounts>,
}

/// One file's identity and offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedFile {
    pub(crate) path: PathBuf,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) fingerprint_len: u32,
    pub fingerprint_crc32: u32,
    pub(crate) offset: u64,
    /// CRC-32 of the `before_len` bytes just before `offset` (at most 1 KiB): a file
    /// rewritten in place with the same first bytes is told from the one read.
    #[serde(default)]
    pub(crate) before_len: u32,
    #[serde(default)]
    pub(crate) before_crc32: u32,
    /// Inside an over-long line: skip to its newline first.
    #[serde(default)]
    pub(crate) skipping: bool,
    /// A copy being read for the lines its truncated original lost (`copytruncate`): closed
    /// once read to its end. `path` is then the original's, as for a rotated file.
    #[serde(default)]
    pub(crate) copy: bool,
    /// Written over with a copy of another followed file's lines: not read, its offset kept
    /// at its end, until that file is found truncated (then read from where it was read to).
    #[serde(default)]
    pub(crate) copied: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum OffsetsError {
    #[error("cannot read saved offsets {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("saved offsets {path} are unreadable ({reason})")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot save offsets to {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Where a source's offsets live.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    path: PathBuf,
}

impl Store {
    /// The store of `source` in `dir`: `dir/logs-<source>.offsets.json`.
    pub(crate) fn new(dir: &Path, source: &str) -> Self {
        Store {
            path: dir.join(format!("logs-{source}.offsets.json")),
        }
    }

    /// The saved state; `None` when nothing was saved yet.
    pub(crate) fn load(&self) -> Result<Option<Saved>, OffsetsError> {
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(OffsetsError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let corrupt = |reason: String| OffsetsError::Corrupt {
            path: self.path.clone(),
            reason,
        };
        let saved: Saved = serde_json::from_slice(&text).map_err(|e| corrupt(e.to_string()))?;
        if saved.version != VERSION {
            return Err(corrupt(format!(
                "version {} where {VERSION} is expected",
                saved.version
            )));
        }
        Ok(Some(saved))
    }

    /// Move an unreadable file aside (kept for a look) so the next save starts clean.
    pub(crate) fn set_aside(&self) -> std::io::Result<PathBuf> {
        let aside = self.path.with_extension("json.unreadable");
        std::fs::rename(&self.path, &aside)?;
        Ok(aside)
    }

    /// Replace the saved state atomically: the offsets and the counts they cover, together.
    pub(crate) fn save(&self, source: &str, files: Vec<SavedFile>, counts: SavedCounts) -> Result<(), OffsetsError> {
        let saved = Saved {
            version: VERSION,
            source: source.to_string(),
            files,
            counts: Some(counts),
        };
        let err = |source| OffsetsError::Write {
            path: self.path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(&saved).map_err(|e| err(std::io::Error::other(e)))?;
        crate::durable::replace(&self.path, &body).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_and_unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "app");
        assert_eq!(store.load().unwrap(), None);
        let file = SavedFile {
            path: "/var/log/a.log".into(),
            dev: 1,
            ino: 2,
            fingerprint_len: 3,
            fingerprint_crc32: 4,
            offset: 5,
            before_len: 5,
            before_crc32: 6,
            skipping: false,
            copy: true,
            copied: false,
        };
        let counts = SavedCounts::default();
        store.save("app", vec![file.clone()], counts.clone()).unwrap();
        let loaded = store.load().unwrap().unwrap();
        assert_eq!(loaded.files, vec![file]);
        assert_eq!(loaded.counts, Some(counts));
        // A file of the earlier shape (no counts, no check before the offset) still loads.
        std::fs::write(
            &store.path,
            br#"{"version":1,"source":"app","files":[{"path":"/a","dev":1,"ino":2,"fingerprint_len":3,"fingerprint_crc32":4,"offset":5}]}"#,
        )
        .unwrap();
        let old = store.load().unwrap().unwrap();
        assert_eq!(
            (
                old.counts,
                old.files[0].before_len,
                old.files[0].copy,
                old.files[0].copied
            ),
            (None, 0, false, false)
        );
        std::fs::write(&store.path, b"{\"version\":1,").unwrap();
        assert!(matches!(store.load(), Err(OffsetsError::Corrupt { .. })));
        let aside = store.set_aside().unwrap();
        assert!(aside.exists());
        assert_eq!(store.load().unwrap(), None);
    }
}
