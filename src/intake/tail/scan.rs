//! A source's files found and opened: the glob rescanned and matched to the followed files by
//! identity (a followed file no longer found is rotated); a new file opened at its saved
//! offset, per `start_at`, or at 0; on the first scan, the saved files the glob no longer
//! matches found again where rotated files go (`search`) and finished; and the copy of a file
//! found truncated or rewritten (`copytruncate`) read from the offset its original was read to.

use std::path::{Path, PathBuf};

use super::file::{self, FileId, Fingerprint, Held, Rotated, Tracked};
use super::search::{self, Candidate};
use super::{MAX_FILES, SavedFile, Tailer};
use crate::config::StartAt;

impl Tailer {
    /// Match the glob's files against the followed ones: new identities are opened, followed
    /// files no longer found are marked rotated.
    pub(super) fn rescan(&mut self) {
        let found = self.scan();
        for t in &mut self.files {
            match found.iter().find(|(_, id)| *id == t.id) {
                Some((path, _)) => {
                    t.path.clone_from(path);
                    t.rotated = None;
                }
                None if t.rotated.is_none() => {
                    t.rotated = Some(Rotated::new(&t.path, false));
                    tracing::info!(source = %self.source.name, file = %t.path.display(),
                        "file renamed away or deleted: following it while it grows");
                }
                None => {}
            }
        }
        // A file found truncated may have a copy the glob matches: it is read from the offset
        // once the truncation is seen, so files new since the last scan wait for the next.
        let (known, new): (Vec<_>, Vec<_>) = found
            .into_iter()
            .filter(|(_, id)| !self.files.iter().any(|t| t.id == *id))
            .partition(|(_, id)| self.saved.iter().any(|s| s.dev == id.dev && s.ino == id.ino));
        let truncating = !new.is_empty() && self.files.iter().any(Tracked::truncated);
        for (path, is_new) in known
            .into_iter()
            .map(|(p, _)| (p, false))
            .chain(new.into_iter().map(|(p, _)| (p, true)))
        {
            // (At the first scan, a saved file found rewritten just now is held.)
            if is_new && (truncating || !self.held.is_empty()) {
                continue;
            }
            if self.files.iter().filter(|t| t.rotated.is_none()).count() >= MAX_FILES {
                self.warn_once(
                    &path,
                    format_args!("more than {MAX_FILES} files match; this one is not read"),
                );
                continue;
            }
            match self.open_new(&path) {
                Ok(t) => {
                    self.warned.remove(&path);
                    self.files.push(t);
                    self.dirty = true;
                }
                Err(e) => self.warn_once(&path, format_args!("cannot open: {e}")),
            }
        }
        if self.first_scan {
            self.first_scan = false;
            self.finish_saved();
        }
    }

    /// The regular files the glob matches now, one path per identity.
    fn scan(&mut self) -> Vec<(PathBuf, FileId)> {
        let mut found: Vec<(PathBuf, FileId)> = Vec::new();
        let paths = match glob::glob(&self.source.path) {
            Ok(p) => p,
            Err(e) => {
                // The config checked the pattern; this cannot happen for a loaded config.
                tracing::error!(source = %self.source.name, error = %e, "bad glob");
                return found;
            }
        };
        for entry in paths {
            let Ok(path) = entry else { continue };
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            let id = FileId::of(&meta);
            if meta.is_file() && !found.iter().any(|(_, i)| *i == id) {
                found.push((path, id));
            }
        }
        found
    }

    /// Open a file seen for the first time: at its saved offset when its identity was saved,
    /// else per `start_at` on a first start, else (new since the last run, or since start)
    /// from the beginning.
    fn open_new(&mut self, path: &Path) -> std::io::Result<Tracked> {
        let probe = std::fs::File::open(path)?;
        let meta = probe.metadata()?;
        let id = FileId::of(&meta);
        let saved = self.take_saved(id, &probe, meta.len())?;
        let (offset, skipping) = match &saved {
            Some(s) => (Some(s.offset), s.skipping),
            None if self.first_scan && !self.resumed && self.source.start_at == StartAt::End => (None, false),
            None => (Some(0), false),
        };
        let mut t = Tracked::open(path, offset, self.records(skipping))?;
        if saved.as_ref().is_some_and(|s| s.copied) {
            t.set_copied()?;
        }
        tracing::debug!(source = %self.source.name, file = %path.display(), offset = t.offset, "following");
        Ok(t)
    }

    /// The saved entry of the file `id`, if its first bytes and the bytes before its offset
    /// still match; else what it held is looked for in a copy, and the file is read from 0.
    fn take_saved(&mut self, id: FileId, file: &std::fs::File, size: u64) -> std::io::Result<Option<SavedFile>> {
        let Some(i) = self.saved.iter().position(|s| s.dev == id.dev && s.ino == id.ino) else {
            return Ok(None);
        };
        let s = self.saved.swap_remove(i);
        if !fingerprint_of(&s).matches(file, size)? {
            tracing::info!(source = %self.source.name, file = %s.path.display(),
                "the saved inode now holds another file (its first bytes differ): reading it from the start");
        } else if !file::matches_before(&before_of(&s), file, s.offset, size)? {
            tracing::info!(source = %self.source.name, file = %s.path.display(), offset = s.offset,
                "the file was rewritten while lockwatch was stopped (the bytes before its saved offset differ): reading it from the start");
        } else {
            return Ok(Some(s));
        }
        self.held.extend(held_of(&s));
        Ok(None)
    }

    /// Saved files the glob no longer matches were rotated while lockwatch was stopped: look
    /// for them by identity where rotated files go, else for a copy of what they held (moved
    /// to another device), and finish them.
    fn finish_saved(&mut self) {
        for s in std::mem::take(&mut self.saved) {
            let found = search::candidates(&s.path, self.source.rotated.as_deref());
            let id = FileId { dev: s.dev, ino: s.ino };
            let (path, copy) = match search::by_id(&found, id) {
                Some(c) if still_holds(c, &s) => (c.path.clone(), s.copy),
                Some(c) => {
                    tracing::info!(source = %self.source.name, file = %c.path.display(), was = %s.path.display(),
                        "a file rotated while lockwatch was stopped was rewritten since: not read");
                    continue;
                }
                None => match held_of(&s).and_then(|h| search::copy_of(&found, &h).cloned()) {
                    Some(c) if !self.files.iter().any(|t| t.id == c.id) => (c.path, true),
                    _ => continue,
                },
            };
            match Tracked::open(&path, Some(s.offset), self.records(s.skipping)) {
                Ok(mut t) => {
                    tracing::info!(source = %self.source.name, file = %path.display(), was = %s.path.display(),
                        offset = s.offset, "finishing a file rotated while lockwatch was stopped");
                    if s.copied && !copy {
                        let _ = t.set_copied(); // on failure, read as it is: its next read fails too
                    }
                    t.rotated = Some(Rotated::new(&s.path, copy));
                    self.files.push(t);
                }
                Err(e) => {
                    tracing::warn!(source = %self.source.name, file = %path.display(), error = %e, "cannot open a rotated file")
                }
            }
        }
    }

    /// For each file found truncated or rewritten: the copy of what it held, read from the
    /// offset it was read to, as a rotated file closed at its end. Returns whether one was
    /// found (it is read right away).
    pub(super) fn adopt_copies(&mut self) -> bool {
        let mut adopted = false;
        for held in std::mem::take(&mut self.held) {
            let found = search::candidates(&held.path, self.source.rotated.as_deref());
            let Some(c) = search::copy_of(&found, &held) else {
                // A rotated file written over (a copy of the live file's lines over it) is no
                // news: what it held was read as it was written.
                if self.files.iter().any(|t| t.id == held.id && t.rotated.is_some()) {
                    tracing::debug!(source = %self.source.name, file = %held.path.display(), "no copy of a rotated file written over");
                } else {
                    tracing::info!(source = %self.source.name, file = %held.path.display(), offset = held.offset,
                        "no copy of the truncated file found beside it: lines written between the last read and the truncation, if any, are not counted");
                }
                continue;
            };
            if let Some(t) = self.files.iter_mut().find(|t| t.id == c.id) {
                // Followed already: the glob matches it, or it was written over with this
                // copy while followed — judged so, or not read since (`cp` and the truncation
                // between its read and the original's) — and is read from the offset now.
                if t.copied() || t.stale().unwrap_or(false) {
                    tracing::info!(source = %self.source.name, file = %held.path.display(), copy = %c.path.display(),
                        offset = held.offset, "truncated: reading its copy from where the file was read to");
                    t.resume_copy(&held);
                    if let Some(r) = t.rotated.as_mut() {
                        r.copy = true;
                    }
                    self.dirty = true;
                    adopted = true;
                }
                continue;
            }
            match Tracked::open(&c.path, Some(held.offset), self.records(held.skipping)) {
                Ok(mut t) => {
                    tracing::info!(source = %self.source.name, file = %held.path.display(), copy = %c.path.display(),
                        offset = held.offset, "truncated: reading its copy from where the file was read to");
                    t.rotated = Some(Rotated::new(&held.path, true));
                    self.files.push(t);
                    self.dirty = true;
                    adopted = true;
                }
                Err(e) => {
                    tracing::warn!(source = %self.source.name, copy = %c.path.display(), error = %e, "cannot open the copy of a truncated file")
                }
            }
        }
        adopted
    }
}

/// Whether candidate `c` still holds what saved entry `s` says was read of it.
fn still_holds(c: &Candidate, s: &SavedFile) -> bool {
    std::fs::File::open(&c.path)
        .and_then(|f| search::holds(&f, c.len, &fingerprint_of(s), &before_of(s), s.offset))
        .unwrap_or(false)
}

/// What a saved entry says its file held, to find its copy; `None` when nothing was read
/// or the entry, of an earlier version, has no check of the bytes before its offset.
fn held_of(s: &SavedFile) -> Option<Held> {
    (s.offset > 0 && s.before_len > 0).then(|| Held {
        id: FileId { dev: s.dev, ino: s.ino },
        path: s.path.clone(),
        fingerprint: fingerprint_of(s),
        offset: s.offset,
        before: before_of(s),
        skipping: s.skipping,
    })
}

fn fingerprint_of(s: &SavedFile) -> Fingerprint {
    Fingerprint {
        len: s.fingerprint_len,
        crc: s.fingerprint_crc32,
    }
}

/// The check of the bytes before a saved offset (none in files of earlier versions).
fn before_of(s: &SavedFile) -> Fingerprint {
    Fingerprint {
        len: s.before_len,
        crc: s.before_crc32,
    }
}
