//! One file being tailed: its identity (device and inode, plus a fingerprint of its first
//! bytes), the offset up to which its lines were counted, and reading what was appended.
//!
//! The offset always sits at a record boundary — just after the newline that ends a record —
//! or inside an over-long line being skipped, so saving it can never split a line or a
//! record between two runs. A file truncated or rewritten under its offset says what it held
//! (`Held`), so its copy can be looked for; where to look is `search`'s business. logrotate
//! may truncate a file at any moment, during a read too: checks read what is there (a file
//! shorter than they need does not match) and are never an error for it.

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::intake::MAX_LINE;
use crate::intake::lines::Splitter;
use crate::intake::records::{End, Piece, RecordSplitter};

/// Bytes at the start of a file that identify it beside its inode.
pub(crate) const FINGERPRINT_MAX: u32 = 1024;

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

/// CRC-32 of the first `len` bytes (at most `FINGERPRINT_MAX`): tells a reused inode, or a
/// file rewritten in place, from the file whose offset was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

impl Fingerprint {
    /// The fingerprint of `file`, `size` bytes long: of fewer bytes when it is shorter now (a
    /// truncation between the size asked and the read).
    pub(crate) fn read(file: &File, size: u64) -> io::Result<Self> {
        let mut buf = vec![0u8; size.min(u64::from(FINGERPRINT_MAX)) as usize];
        let n = read_up_to(file, &mut buf, 0)?;
        Ok(Fingerprint::of(&buf[..n]))
    }

    fn of(bytes: &[u8]) -> Self {
        Fingerprint {
            len: bytes.len() as u32,
            crc: crc32fast::hash(bytes),
        }
    }

    /// Whether `file` (now `size` bytes) still begins with the fingerprinted bytes; not when
    /// it is shorter, or shrank while read.
    pub(crate) fn matches(&self, file: &File, size: u64) -> io::Result<bool> {
        if size < u64::from(self.len) {
            return Ok(false);
        }
        crc_at(file, 0, self.len).map(|c| c == Some(self.crc))
    }

    /// This fingerprint taken of more bytes (up to `FINGERPRINT_MAX`, `size`) if `file` still
    /// begins with the ones it was taken of; else unchanged (the next read finds the file
    /// rewritten).
    fn extended(self, file: &File, size: u64) -> io::Result<Self> {
        let mut buf = vec![0u8; size.min(u64::from(FINGERPRINT_MAX)) as usize];
        let n = read_up_to(file, &mut buf, 0)?;
        let head = buf.get(..self.len as usize).map(crc32fast::hash);
        Ok(if head == Some(self.crc) {
            Fingerprint::of(&buf[..n])
        } else {
            self
        })
    }
}

/// CRC-32 of the bytes just before an offset (at most `FINGERPRINT_MAX`): saved with the
/// offset, so a file rewritten in place while lockwatch was stopped — same first bytes,
/// other lines — is read from its start instead of from an offset that means nothing now.
/// `UnexpectedEof` when the file is shorter than the offset.
pub(crate) fn before(file: &File, offset: u64) -> io::Result<Fingerprint> {
    let len = offset.min(u64::from(FINGERPRINT_MAX)) as u32;
    match crc_at(file, offset - u64::from(len), len)? {
        Some(crc) => Ok(Fingerprint { len, crc }),
        None => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// Whether `file` (now `size` bytes) still holds, just before `offset`, the bytes `check`
/// was taken of; not when it is shorter, or shrank while read.
pub(crate) fn matches_before(check: &Fingerprint, file: &File, offset: u64, size: u64) -> io::Result<bool> {
    if size < offset || offset < u64::from(check.len) {
        return Ok(false);
    }
    crc_at(file, offset - u64::from(check.len), check.len).map(|c| c == Some(check.crc))
}

/// CRC-32 of the `len` bytes at `at`; `None` when the file ends before them (it may be
/// truncated by logrotate at any moment).
fn crc_at(file: &File, at: u64, len: u32) -> io::Result<Option<u32>> {
    let mut buf = vec![0u8; len as usize];
    let n = read_up_to(file, &mut buf, at)?;
    Ok((n == buf.len()).then(|| crc32fast::hash(&buf)))
}

/// Read into `buf` from `at` until it is full or the file ends; how much was read.
fn read_up_to(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
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
    /// line too.
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        budget: u64,
        end: End,
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
            report.restarted = Some("truncated");
        } else if self.offset > 0 && !self.fingerprint.matches(&self.file, size)? {
            report.restarted = Some("rewritten (its first bytes changed)");
        }
        if report.restarted.is_some() {
            report.held = (self.offset > 0).then(|| Held {
                id: self.id,
                path: self.path.clone(),
                fingerprint: self.fingerprint,
                offset: self.offset,
                before: self.before,
                skipping: self.records.splitter.skipping,
            });
            self.offset = 0;
            self.before = Fingerprint { len: 0, crc: 0 };
            self.records.splitter = Splitter::default();
            self.fingerprint = Fingerprint::read(&self.file, size)?;
        }
        // The bytes consumed last (up to `FINGERPRINT_MAX`): the check before the offset is
        // taken of them, not read again from a file logrotate may truncate meanwhile.
        let mut last: Vec<u8> = Vec::new();
        while self.offset < size {
            if report.consumed >= budget {
                report.more = true;
                break;
            }
            let want = (size - self.offset).min(buf.len() as u64) as usize;
            let n = self.file.read_at(&mut buf[..want], self.offset)?;
            if n == 0 {
                break;
            }
            let whole = self.offset + n as u64 >= size;
            let chunk_end = if whole { end } else { End::More };
            let used = self.records.feed(&buf[..n], MAX_LINE, chunk_end, &mut on);
            let fp = FINGERPRINT_MAX as usize;
            last.extend_from_slice(&buf[used.saturating_sub(fp)..used]);
            last.drain(..last.len().saturating_sub(fp));
            let used = used as u64;
            self.offset += used;
            report.consumed += used;
            if used == 0 {
                break; // an unfinished last line or record: wait for what follows it
            }
        }
        if report.consumed > 0 {
            let want = self.offset.min(u64::from(FINGERPRINT_MAX)) as usize;
            self.before = match last.len() >= want {
                true => Fingerprint::of(&last[last.len() - want..]),
                // Less consumed than the check covers: the rest read again; truncated since,
                // the check is of what was consumed alone (shorter, still the bytes before).
                false => match before(&self.file, self.offset) {
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Fingerprint::of(&last),
                    other => other?,
                },
            };
        }
        // Only fully read states are remembered, so a budget cut is resumed next time.
        self.seen = if report.more { (u64::MAX, None) } else { (size, mtime) };
        if self.fingerprint.len < FINGERPRINT_MAX && size > u64::from(self.fingerprint.len) {
            self.fingerprint = self.fingerprint.extended(&self.file, size)?;
        }
        Ok(report)
    }
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::Write;

    use super::*;

    fn lines(t: &mut Tracked, eof: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 256 * 1024];
        let end = if eof { End::Eof } else { End::Quiet };
        t.read(&mut buf, u64::MAX, end, |p| {
            if let Piece::Record { bytes, .. } = p {
                out.push(String::from_utf8_lossy(bytes).into_owned());
            }
        })
        .unwrap();
        out
    }

    fn off() -> RecordSplitter {
        RecordSplitter::new(crate::config::Multiline::Off)
    }

    #[test]
    fn start_at_end_skips_to_the_last_newline_and_partial_lines_wait() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        let mut f = File::create(&p).unwrap();
        f.write_all(b"old 1\nold 2\nhalf").unwrap();
        let mut t = Tracked::open(&p, None, off()).unwrap();
        assert_eq!(t.offset, 12);
        assert_eq!(lines(&mut t, false), Vec::<String>::new());
        f.write_all(b" done\nnew\npart").unwrap();
        assert_eq!(lines(&mut t, false), vec!["half done", "new"]);
        f.write_all(b"ial").unwrap();
        assert_eq!(lines(&mut t, true), vec!["partial"]);
    }

    #[test]
    fn a_file_truncated_between_its_size_and_the_read_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        std::fs::write(&p, "0123456789").unwrap();
        let f = File::open(&p).unwrap();
        // Sizes asked before logrotate truncated the file to 10 bytes.
        assert_eq!(Fingerprint::read(&f, 5000).unwrap().len, 10);
        let fp = Fingerprint { len: 20, crc: 7 };
        assert!(!fp.matches(&f, 5000).unwrap());
        assert!(!matches_before(&fp, &f, 4000, 5000).unwrap());
        assert_eq!(before(&f, 4000).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        // A fingerprint is extended only over the bytes it was taken of.
        let head = Fingerprint::read(&f, 4).unwrap();
        assert_eq!(head.extended(&f, 10).unwrap(), Fingerprint::read(&f, 10).unwrap());
        std::fs::write(&p, "abcdefghijkl").unwrap();
        assert_eq!(head.extended(&f, 12).unwrap(), head);
    }

    #[test]
    fn truncation_and_rewrites_start_again_at_zero() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        let mut t = Tracked::open(&p, Some(0), off()).unwrap();
        assert_eq!(lines(&mut t, false), vec!["one", "two"]);
        std::fs::write(&p, "x\n").unwrap(); // shorter: truncated
        assert_eq!(lines(&mut t, false), vec!["x"]);
        std::fs::write(&p, "different\nand longer\n").unwrap(); // longer, other first bytes
        assert_eq!(lines(&mut t, false), vec!["different", "and longer"]);
    }
}
