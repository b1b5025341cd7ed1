//! A followed file found truncated or rewritten, judged before what it holds now is read:
//! a copy of another followed file's lines — `cp app.log app.log.1` over a rotated file
//! still followed, before `app.log` is truncated — is not read (those lines are counted from
//! the file they were copied from, or from the copy, from where that file was read to, once
//! it is found truncated: `adopt_copies`); anything else is new lines, read from the start.

use super::Tailer;

impl Tailer {
    /// Judge file `i`, found truncated or rewritten: `Ok(false)` while it is empty (a copy
    /// may be under way), else it is marked a copy or left to be read from its start.
    pub(super) fn settle(&mut self, i: usize) -> std::io::Result<bool> {
        let t = &self.files[i];
        if t.len()? == 0 {
            return Ok(false);
        }
        let mut of = None;
        for o in self.files.iter().filter(|o| o.id != t.id) {
            if t.is_copy_of(o)? {
                of = Some(o.path.clone());
                break;
            }
        }
        // A file found truncated earlier in this poll: what it held, as its copy would.
        if of.is_none() {
            for h in &self.held {
                if t.holds(h)? {
                    of = Some(h.path.clone());
                    break;
                }
            }
        }
        let t = &mut self.files[i];
        match of {
            Some(of) => {
                tracing::info!(source = %self.source.name, file = %t.current_path().display(), copy_of = %of.display(),
                    "written over with a copy of another followed file's lines: not read (counted from that file, \
                     or from this copy from where that file was read to should it be found truncated)");
                t.set_copied()?;
            }
            None => {
                tracing::info!(source = %self.source.name, file = %t.current_path().display(),
                    "truncated or rewritten with new lines: reading it from its start");
                t.unsettled = false;
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
#[path = "reuse_tests.rs"]
mod tests;
