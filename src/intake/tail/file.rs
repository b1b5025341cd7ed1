//! One file being tailed: its identity (device and inode, plus a fingerprint of its first
//! bytes), the offset up to which its lines were counted, and reading what was appended.
//!
//! The offset always sits at a record boundary — just after the newline that ends a record —
//! or inside an over-long line being skipped, so saving it can never split a line or a
//! record between two runs. A file truncated or rewritten under its offset says what it held
//! (`Held`), so its copy can be looked for; where to look is `search`'s business. Every read
//! takes the bytes before the offset with the new ones, in one `pread`, and checks them, so a
//! file truncated and written past its offset again between two reads is told even with the
//! same first bytes. What it holds then may be a copy of another file's lines (`is_copy_of`,
//! judged by `reuse`). logrotate may truncate a file at any moment, during a read too: checks
//! read what is there (a file shorter than they need does not match) and are never an error.

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::fingerprint::read_up_to;
pub(crate) use super::fingerprint::{FINGERPRINT_MAX, Fingerprint, before, matches_before};
use super::search;
use crate::intake::MAX_LINE;
use crate::intake::lines::Splitter;
use crate::intake::records::{End, Piece, RecordSplitter};
use crate::intake::skim::Skim;

/// Device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileId {
    pub(crate) fn of(meta: &Metadata) -> Self {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// What a file held up to its offset when it was found truncated or rewritten: a copy that
/// begins with the same bytes and holds the same bytes before `offset` has the lines that
/// were not read yet after it (logrotate's `copytruncate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) id: FileId,
    pub(crate) path: PathBuf,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) offset: u64,
    pub(crate) before: Fingerprint,
    /// Inside an over-long line at the offset.
    pub(crate) skipping: bool,
}

/// What `Tracked::read` found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ReadReport {
    /// Bytes consumed (counted lines, or skipped bytes of an over-long line).
    pub(crate) consumed: u64,
    /// The budget ran out before the end of the file.
    pub(crate) more: bool,
    /// The file was truncated or rewritten in place: reading started again at 0.
    pub(crate) restarted: Option<&'static str>,
    /// With `restarted`, what the file held before, when anything of it had been read.
    pub(crate) held: Option<Held>,
}

/// A file no longer at a path the glob matches: renamed away or deleted, or a copy read for
/// the lines its original lost to a truncation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rotated {
    /// When the rotation was noticed.
    pub(crate) at: Instant,
    /// The path it was followed at before: where the application should write now.
    pub(crate) from: PathBuf,
    /// A copy (`copytruncate`): it does not grow, and is closed once read to its end.
    pub(crate) copy: bool,
    /// Since when (wall-clock ms) it is said to be written while the file at `from` is not.
    pub(crate) not_reopened: Option<i64>,
    /// When it had last grown at the last judgment of that.
    pub(crate) judged_growth: Option<Instant>,
}

impl Rotated {
    pub(crate) fn new(from: &Path, copy: bool) -> Self {
        Rotated {
            at: Instant::now(),
            from: from.to_path_buf(),
            copy,
            not_reopened: None,
            judged_growth: None,
        }
    }
}

/// A file being read.
pub(crate) struct Tracked {
    file: File,
    /// Where the file was last seen.
    pub(crate) path: PathBuf,
    pub(crate) id: FileId,
    pub(crate) fingerprint: Fingerprint,
    /// Bytes up to here are counted.
    pub(crate) offset: u64,
    pub(crate) records: RecordSplitter,
    /// The check of the bytes before `offset`, kept as the offset moves.
    before: Fingerprint,
    /// Set when the file stopped being at a path the glob matches (renamed away or deleted):
    /// it is followed while it grows, then closed once it has not grown for a while.
    pub(crate) rotated: Option<Rotated>,
    last_growth: Instant,
    seen: (u64, Option<SystemTime>),
    /// The size at which the records held back were last flushed for quiet.
    flushed_at: u64,
    /// Found truncated or rewritten (or a copy that grew), and what it holds now not judged
    /// yet (`Tailer::settle`): not read meanwhile.
    pub(crate) unsettled: bool,
    /// What it holds is a copy of another followed file's lines: not read (`set_copied`).
    copied: bool,
    /// The followed file whose first and last bytes it held at the last judgment (a copy
    /// under way, or of lines read already).
    pub(crate) prefix_of: Option<FileId>,
}

impl Tracked {
    /// Open `path` at `offset` (`None`: after its last complete line, for `start_at = end`),
    /// reading records as `records` says.
    pub(crate) fn open(path: &Path, offset: Option<u64>, records: RecordSplitter) -> io::Result<Self> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        let size = meta.len();
        let (offset, splitter) = match offset {
            Some(o) if o <= size => (o, records.splitter),
            Some(_) => (0, Splitter::default()),
            None => end_of_last_line(&file, size)?,
        };
        Ok(Tracked {
            fingerprint: Fingerprint::read(&file, size)?,
            // Truncated since the size was asked: the next read finds it so.
            before: match before(&file, offset) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Fingerprint::of(&[]),
                other => other?,
            },
            path: path.to_path_buf(),
            id: FileId::of(&meta),
            offset,
            records: RecordSplitter { splitter, ..records },
            rotated: None,
            last_growth: Instant::now(),
            seen: (u64::MAX, None),
            flushed_at: u64::MAX,
            unsettled: false,
            copied: false,
            prefix_of: None,
            file,
        })
    }

    /// Whether a rotated file is done: read up to its end (an unfinished last line aside)
    /// and, unless it is a copy, neither grown nor rotated for `grace`. The caller reads it
    /// once more with `End::Eof` and closes it.
    pub(crate) fn finished(&self, grace: Duration) -> bool {
        let read = self.seen.0 != u64::MAX;
        match &self.rotated {
            Some(r) if r.copy => read,
            Some(_) => read && self.last_active().elapsed() >= grace,
            None => false,
        }
    }

    /// Whether the file is shorter now than the offset read to (truncated).
    pub(crate) fn truncated(&self) -> bool {
        self.file.metadata().is_ok_and(|m| m.len() < self.offset)
    }

    /// When the file last grew or was rotated, whichever is later.
    pub(crate) fn last_active(&self) -> Instant {
        self.rotated
            .as_ref()
            .map_or(self.last_growth, |r| self.last_growth.max(r.at))
    }

    /// When the file last grew (or was opened).
    pub(crate) fn last_growth(&self) -> Instant {
        self.last_growth
    }

    /// Its size when last read whole; `None` before that.
    pub(crate) fn size(&self) -> Option<u64> {
        (self.seen.0 != u64::MAX).then_some(self.seen.0)
    }

    /// Where the open file is now (a rotated file's new name), as the kernel tells it.
    pub(crate) fn current_path(&self) -> PathBuf {
        std::fs::read_link(format!("/proc/self/fd/{}", self.file.as_raw_fd())).unwrap_or_else(|_| self.path.clone())
    }

    /// Whether records are held back (their next line has not arrived) and the file has
    /// not grown for `quiet` since they were last looked at: then they are read with
    /// `End::Quiet`, so the last record is never held forever.
    pub(crate) fn quiet(&self, quiet: std::time::Duration) -> bool {
        let size = self.seen.0;
        size != u64::MAX && self.offset < size && self.flushed_at != size && self.last_growth.elapsed() >= quiet
    }

    /// The check of the bytes before the offset, to save with it.
    pub(crate) fn check_before(&self) -> Fingerprint {
        self.before
    }

    /// Read what was appended since the last call, at most about `budget` bytes, into `buf`,
    /// handing each record to `on`. `End::Quiet` ends the records held back at the last
    /// complete line; `End::Eof` (a rotated file being closed) counts an unfinished last
    /// line too. A file found truncated or rewritten starts again at 0 and the call ends
    /// there (`restarted`): what it holds now is for the caller to judge (`unsettled`).
    ///
    /// Each read takes the bytes just before the offset with the new ones, in one `pread`,
    /// and checks them against the ones consumed: a file truncated and written past its
    /// offset again between two reads, with the same first bytes, is told so, never read
    /// from an offset that now falls in other lines.
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        budget: u64,
        end: End,
        skim: Option<&Skim>,
        mut on: impl FnMut(Piece<'_>),
    ) -> io::Result<ReadReport> {
        let meta = self.file.metadata()?;
        let size = meta.len();
        let mtime = meta.modified().ok();
        let mut report = ReadReport::default();
        if (size, mtime) == self.seen && end == End::More {
            return Ok(report);
        }
        if end == End::Quiet {
            self.flushed_at = size;
        }
        if size > self.seen.0 || self.seen.0 == u64::MAX {
            self.last_growth = Instant::now();
        }
        if size < self.offset {
            return self.restart("truncated", report);
        } else if self.offset > 0 && !self.fingerprint.matches(&self.file, size)? {
            return self.restart("rewritten (its first bytes changed)", report);
        }
        if self.offset > 0 && self.before.len != self.offset.min(FINGERPRINT_MAX.into()) as u32 {
            // Its check before the offset could not be taken (shorter than the offset then).
            return self.restart("truncated", report);
        }
        if self.copied {
            // A copy, not read; grown since it was judged one: judged again.
            self.unsettled = size > self.offset;
            self.seen = (size, mtime);
            return Ok(report);
        }
        let fp = FINGERPRINT_MAX as usize;
        while self.offset < size {
            if report.consumed >= budget {
                report.more = true;
                break;
            }
            let lead = self.offset.min(FINGERPRINT_MAX.into()) as usize;
            let want = (size - self.offset).min((buf.len() - fp) as u64) as usize;
            let got = read_up_to(&self.file, &mut buf[..lead + want], self.offset - lead as u64)?;
            if got < lead {
                return self.restart("truncated", report);
            }
            if crc32fast::hash(&buf[..lead]) != self.before.crc {
                return self.restart("rewritten (the bytes before its offset changed)", report);
            }
            let n = got - lead;
            if n == 0 {
                break;
            }
            let whole = self.offset + n as u64 >= size;
            let chunk_end = if whole { end } else { End::More };
            let used = self
                .records
                .feed_skimming(&buf[lead..got], MAX_LINE, chunk_end, skim, &mut on);
            if used == 0 {
                break; // an unfinished last line or record: wait for what follows it
            }
            self.offset += used as u64;
            report.consumed += used as u64;
            // The check before the new offset, of the bytes just consumed (and the lead).
            let k = self.offset.min(FINGERPRINT_MAX.into()) as usize;
            self.before = Fingerprint::of(&buf[lead + used - k..lead + used]);
        }
        // Only fully read states are remembered, so a budget cut is resumed next time.
        self.seen = if report.more { (u64::MAX, None) } else { (size, mtime) };
        if self.fingerprint.len < FINGERPRINT_MAX && size > u64::from(self.fingerprint.len) {
            self.fingerprint = self.fingerprint.extended(&self.file, size)?;
        }
        Ok(report)
    }

    /// Start again at 0, saying what the file held (its copy is looked for); what it holds
    /// now is not read before the caller has judged it.
    fn restart(&mut self, why: &'static str, mut report: ReadReport) -> io::Result<ReadReport> {
        report.restarted = Some(why);
        report.held = (self.offset > 0).then(|| self.held());
        self.offset = 0;
        self.before = Fingerprint { len: 0, crc: 0 };
        self.records.splitter = Splitter::default();
        self.fingerprint = Fingerprint::read(&self.file, self.file.metadata()?.len())?;
        self.seen = (u64::MAX, None);
        self.copied = false;
        self.unsettled = true;
        Ok(report)
    }

    /// What the file holds up to its offset, as a file found truncated says it.
    pub(crate) fn held(&self) -> Held {
        Held {
            id: self.id,
            path: self.path.clone(),
            fingerprint: self.fingerprint,
            offset: self.offset,
            before: self.before,
            skipping: self.records.splitter.skipping,
        }
    }

    /// Its size now.
    pub(crate) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Mark the file a copy of another's lines: not read, its offset kept at its end.
    pub(crate) fn set_copied(&mut self) -> io::Result<()> {
        self.copied = true;
        self.unsettled = false;
        self.prefix_of = None;
        let size = self.len()?;
        self.fingerprint = Fingerprint::read(&self.file, size)?;
        self.skip_to(size)
    }

    /// Judged to hold new lines: read on from the offset (0 after a restart; a copy's end
    /// for a copy that grew).
    pub(crate) fn set_new(&mut self) {
        self.copied = false;
        self.unsettled = false;
        self.prefix_of = None;
        self.seen = (u64::MAX, None);
    }

    /// Note its size, unread (while unsettled), so a rotated file is still closed after its
    /// grace and an empty one counts as read to its end.
    pub(crate) fn mark_seen(&mut self) -> io::Result<()> {
        let meta = self.file.metadata()?;
        if meta.len() > self.seen.0 || self.seen.0 == u64::MAX {
            self.last_growth = Instant::now();
        }
        self.seen = (meta.len(), meta.modified().ok());
        Ok(())
    }

    /// Whether it is marked a copy of another file's lines.
    pub(crate) fn copied(&self) -> bool {
        self.copied
    }

    /// A copy read from now on for the lines its truncated original lost, from where the
    /// original was read to (the caller checked the file holds what `held` held).
    pub(crate) fn resume_copy(&mut self, held: &Held) {
        self.fingerprint = held.fingerprint;
        self.offset = held.offset;
        self.before = held.before;
        self.records.splitter = Splitter {
            skipping: held.skipping,
        };
        self.copied = false;
        self.unsettled = false;
        self.prefix_of = None;
        self.seen = (u64::MAX, None);
    }

    fn skip_to(&mut self, size: u64) -> io::Result<()> {
        if self.offset != size {
            self.offset = size;
            self.records.splitter = Splitter::default();
            self.before = match before(&self.file, size) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Fingerprint::of(&[]),
                other => other?,
            };
        }
        Ok(())
    }

    /// Whether this file (not empty) holds `other`'s bytes at its start and at its end, at
    /// the same places: a copy of `other` under way, or of lines of it read already.
    pub(crate) fn same_bytes_as(&self, other: &Tracked) -> io::Result<bool> {
        let size = self.len()?;
        if size == 0 || other.id == self.id {
            return Ok(false);
        }
        let n = size.min(FINGERPRINT_MAX.into());
        Ok(same_bytes(&self.file, &other.file, 0, n)? && same_bytes(&self.file, &other.file, size - n, n)?)
    }

    /// Whether it begins with the bytes `fingerprint` was taken of (not when shorter).
    pub(crate) fn begins_with(&self, fingerprint: &Fingerprint) -> io::Result<bool> {
        Ok(fingerprint.len > 0 && fingerprint.matches(&self.file, self.len()?)?)
    }

    /// Whether the file no longer holds what was read of it (truncated, or rewritten), though
    /// not read since: its next read starts again.
    pub(crate) fn stale(&self) -> io::Result<bool> {
        let size = self.len()?;
        Ok(self.unsettled
            || size < self.offset
            || (self.offset > 0 && !search::holds(&self.file, size, &self.fingerprint, &self.before, self.offset)?))
    }

    /// Whether this file now holds what `held` held (a copy of a file just truncated).
    pub(crate) fn holds(&self, held: &Held) -> io::Result<bool> {
        Ok(held.id != self.id
            && held.offset > 0
            && search::holds(&self.file, self.len()?, &held.fingerprint, &held.before, held.offset)?)
    }
}

/// Whether `a` and `b` hold the same `n` bytes at `at` (not when either is shorter).
fn same_bytes(a: &File, b: &File, at: u64, n: u64) -> io::Result<bool> {
    let mut x = vec![0u8; n as usize];
    let mut y = vec![0u8; n as usize];
    Ok(read_up_to(a, &mut x, at)? == x.len() && read_up_to(b, &mut y, at)? == y.len() && x == y)
}

/// For `start_at = end`: the offset just after the last newline, so reading starts with the
/// next whole line. Without a newline in the last `MAX_LINE` bytes: the one line being
/// written (start at 0), or, in a longer file, the middle of an over-long line (skip it).
fn end_of_last_line(file: &File, size: u64) -> io::Result<(u64, Splitter)> {
    let window = size.min(MAX_LINE as u64 + 1);
    let mut buf = vec![0u8; window as usize];
    file.read_exact_at(&mut buf, size - window)?;
    Ok(match memchr::memrchr(b'\n', &buf) {
        Some(i) => (size - window + i as u64 + 1, Splitter::default()),
        None if size == window && size <= MAX_LINE as u64 => (0, Splitter::default()),
        None => (size, Splitter { skipping: true }),
    })
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
