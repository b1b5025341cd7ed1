//! Where a followed file's rotated versions are looked for, and how one is recognised: by
//! identity (device + inode, its first bytes and the bytes before the offset still the ones
//! read) for a file renamed or moved while lockwatch was stopped; by content alone for a copy
//! (`copytruncate`, or a move to another device). Looked in: the file's directory, the
//! directories one level below it (logrotate's `olddir`, typically `old/`), and the files
//! the source's `rotated` glob matches — at most `SEARCH_MAX` entries per search.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::file::{self, FileId, Fingerprint, Held};

/// Directory entries and glob matches looked at per search, at most.
pub(crate) const SEARCH_MAX: usize = 10_000;

/// A regular file found where rotated files may be.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) path: PathBuf,
    pub(crate) id: FileId,
    pub(crate) len: u64,
    pub(crate) modified: Option<SystemTime>,
}

/// The regular files where the rotated versions of the file that was at `near` may be: its
/// directory, the directories one level below it, and what `rotated` (a glob) matches. One
/// entry per identity, the first path found kept.
pub(crate) fn candidates(near: &Path, rotated: Option<&str>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut budget = SEARCH_MAX;
    let mut below = Vec::new();
    if let Some(dir) = near.parent() {
        list(dir, &mut budget, &mut out, Some(&mut below));
        for sub in below {
            list(&sub, &mut budget, &mut out, None);
        }
    }
    if let Some(paths) = rotated.and_then(|g| glob::glob(g).ok()) {
        for path in paths.flatten() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            push(path, &mut out);
        }
    }
    out
}

/// The files of `dir` into `out`, and its directories into `dirs` when asked.
fn list(dir: &Path, budget: &mut usize, out: &mut Vec<Candidate>, mut dirs: Option<&mut Vec<PathBuf>>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let path = entry.path();
        match (entry.file_type(), dirs.as_deref_mut()) {
            (Ok(t), Some(d)) if t.is_dir() => d.push(path),
            _ => push(path, out),
        }
    }
}

fn push(path: PathBuf, out: &mut Vec<Candidate>) {
    let Ok(meta) = std::fs::metadata(&path) else { return };
    let id = FileId::of(&meta);
    if meta.is_file() && !out.iter().any(|c| c.id == id) {
        out.push(Candidate {
            path,
            id,
            len: meta.len(),
            modified: meta.modified().ok(),
        });
    }
}

/// Whether `file` (now `len` bytes) still begins with `fingerprint` and holds, just before
/// `offset`, the bytes `before` was taken of.
pub(crate) fn holds(
    file: &File,
    len: u64,
    fingerprint: &Fingerprint,
    before: &Fingerprint,
    offset: u64,
) -> io::Result<bool> {
    Ok(fingerprint.matches(file, len)? && file::matches_before(before, file, offset, len)?)
}

/// The candidate with identity `id`.
pub(crate) fn by_id(found: &[Candidate], id: FileId) -> Option<&Candidate> {
    found.iter().find(|c| c.id == id)
}

/// The copy of what `held` held: another file that reaches the offset, begins with its first
/// bytes and holds its bytes before the offset; of several, the one modified last (an older
/// rotation's copy that happens to match — lines with neither time nor number, repeated —
/// loses to the fresh one). Not required to be as long as the file was last seen: a record
/// held back at the end may have been read after logrotate's copy, before its truncation.
pub(crate) fn copy_of<'a>(found: &'a [Candidate], held: &Held) -> Option<&'a Candidate> {
    if held.offset == 0 || held.fingerprint.len == 0 {
        return None; // nothing was read: nothing can be missing
    }
    let mut matching: Vec<&Candidate> = found
        .iter()
        .filter(|c| c.id != held.id && c.len >= held.offset)
        .filter(|c| {
            File::open(&c.path)
                .and_then(|f| holds(&f, c.len, &held.fingerprint, &held.before, held.offset))
                .unwrap_or(false)
        })
        .collect();
    matching.sort_by_key(|c| std::cmp::Reverse(c.modified));
    matching.first().copied()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn held_of(path: &Path, offset: u64) -> Held {
        let f = File::open(path).unwrap();
        let meta = f.metadata().unwrap();
        Held {
            id: FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            path: path.to_path_buf(),
            fingerprint: Fingerprint::read(&f, meta.len()).unwrap(),
            offset,
            before: file::before(&f, offset).unwrap(),
            skipping: false,
        }
    }

    #[test]
    fn the_directory_the_ones_below_and_the_rotated_glob_are_searched() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["old", "old/deeper", "archive/2026"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for (i, f) in [
            "app.log",
            "app.log.1",
            "old/app.log.2",
            "old/deeper/app.log.3",
            "archive/2026/app.log.4",
        ]
        .iter()
        .enumerate()
        {
            std::fs::write(d.join(f), format!("file {i}\n")).unwrap();
        }
        let names = |found: Vec<Candidate>| {
            let mut n: Vec<String> = found
                .iter()
                .map(|c| c.path.strip_prefix(d).unwrap().display().to_string())
                .collect();
            n.sort();
            n
        };
        let near = d.join("app.log");
        assert_eq!(
            names(candidates(&near, None)),
            ["app.log", "app.log.1", "old/app.log.2"]
        );
        let glob = format!("{}/archive/*/app.log*", d.display());
        assert_eq!(
            names(candidates(&near, Some(&glob))),
            ["app.log", "app.log.1", "archive/2026/app.log.4", "old/app.log.2"]
        );
    }

    #[test]
    fn a_copy_is_told_by_its_first_bytes_and_the_bytes_before_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("old")).unwrap();
        let lines: String = (0..200).map(|i| format!("line {i} of the log\n")).collect();
        let log = d.join("app.log");
        std::fs::write(&log, &lines[..3000]).unwrap();
        let held = held_of(&log, 2000);
        // Another rotation's file with the same first bytes but other lines before the offset.
        let mut other = lines[..1500].to_string();
        other.push_str(&"x".repeat(2000));
        std::fs::write(d.join("app.log.2"), other).unwrap();
        // Too short: it does not reach the offset.
        std::fs::write(d.join("app.log.3"), &lines[..1999]).unwrap();
        assert!(copy_of(&candidates(&log, None), &held).is_none());
        // The copy (in `olddir`); shorter than the file was, longer than what was read.
        std::fs::write(d.join("old/app.log.1"), &lines[..2500]).unwrap();
        // An older copy that also matches loses to it.
        std::fs::write(d.join("app.log.4"), &lines[..3500]).unwrap();
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(d.join("app.log.4"))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        std::fs::write(&log, "").unwrap(); // truncated
        let found = candidates(&log, None);
        assert_eq!(copy_of(&found, &held).unwrap().path, d.join("old/app.log.1"));
        // Nothing read, nothing to look for.
        assert!(copy_of(&found, &Held { offset: 0, ..held }).is_none());
    }
}
