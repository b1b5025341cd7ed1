//! A followed file found truncated or rewritten, judged before what it holds now is read,
//! at the end of the poll (every file's truncation in it known): a copy of another followed
//! file's lines — `cp app.log app.log.1` over a rotated file still followed — is not read
//! (those lines are counted from the file they were copied from, or from the copy, from
//! where that file was read to, once it is found truncated: `adopt_copies`); new lines are
//! read from the start (a copy that grew: from its end); an empty file, or one holding only
//! the first and last bytes of another (a copy under way, or a banner), waits for more.

use std::io;

use super::Tailer;
use super::file::FileId;

/// What a file found truncated or rewritten holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Judged {
    /// A copy of the lines of the file named.
    Copy(std::path::PathBuf),
    New,
    /// Empty, or the same bytes as the start of the file of this identity: judged again.
    Undecided(Option<FileId>),
}

impl Tailer {
    /// Judge every unsettled file; read the ones holding new lines. Returns whether one has
    /// more to read; files that cannot be read go to `failed`.
    pub(super) fn settle_all(&mut self, failed: &mut Vec<usize>) -> bool {
        let mut more = false;
        for i in 0..self.files.len() {
            if !self.files[i].unsettled || failed.contains(&i) {
                continue;
            }
            match self.judge(i).and_then(|j| self.settled(i, j)) {
                Ok(true) => match self.read(i, super::End::More) {
                    Ok(m) => more |= m,
                    Err(()) => failed.push(i),
                },
                Ok(false) => {}
                Err(e) => {
                    let _ = self.unreadable(i, &e);
                    failed.push(i);
                }
            }
        }
        more
    }

    fn judge(&self, i: usize) -> io::Result<Judged> {
        let t = &self.files[i];
        let size = t.len()?;
        if size == 0 {
            return Ok(Judged::Undecided(None));
        }
        let mut prefix = None;
        for o in self.files.iter().filter(|o| o.id != t.id && !o.stale().unwrap_or(true)) {
            if t.holds(&o.held())? {
                return Ok(Judged::Copy(o.current_path()));
            }
            if prefix.is_none() && t.same_bytes_as(o)? {
                prefix = Some(o.id);
            }
        }
        // Files found truncated in this poll: what they held.
        for h in self.held.iter().filter(|h| h.id != t.id) {
            let read_part = size <= h.offset && (t.prefix_of == Some(h.id) || t.begins_with(&h.fingerprint)?);
            if t.holds(h)? || read_part {
                return Ok(Judged::Copy(h.path.clone()));
            }
        }
        Ok(match prefix {
            Some(id) => Judged::Undecided(Some(id)),
            None => Judged::New,
        })
    }

    /// Act on the judgment of file `i`; whether it is to be read now.
    fn settled(&mut self, i: usize, judged: Judged) -> io::Result<bool> {
        let source = &self.source.name;
        let t = &mut self.files[i];
        let file = t.current_path();
        match judged {
            Judged::Copy(of) => {
                tracing::info!(source = %source, file = %file.display(), copy_of = %of.display(),
                    "holds a copy of another followed file's lines: not read (counted from that file, \
                     or from this copy from where that file was read to once it is found truncated)");
                t.set_copied()?;
                Ok(false)
            }
            Judged::New => {
                tracing::debug!(source = %source, file = %file.display(), offset = t.offset, "holds new lines: reading them");
                t.set_new();
                self.dirty = true;
                Ok(true)
            }
            Judged::Undecided(of) => {
                t.prefix_of = of;
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
#[path = "reuse_tests.rs"]
mod tests;
