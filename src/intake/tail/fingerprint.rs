//! Telling a file by its bytes: a fingerprint of its first bytes (a reused inode, or a file
//! rewritten in place) and a check of the bytes just before an offset (a file rewritten in
//! place with the same first bytes). logrotate may truncate a file at any moment: a check
//! reads what is there, and a file shorter than it needs does not match.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Bytes at the start of a file that identify it beside its inode.
pub(crate) const FINGERPRINT_MAX: u32 = 1024;

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

    pub(crate) fn of(bytes: &[u8]) -> Self {
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
    pub(crate) fn extended(self, file: &File, size: u64) -> io::Result<Self> {
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
pub(crate) fn read_up_to(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
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
