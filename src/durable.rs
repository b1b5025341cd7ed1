//! Files that survive a crash: `replace` writes a file whole or not at all (a temporary
//! file beside it, fsync, rename, fsync of the directory), for the state lockwatch keeps in
//! `[state] dir`. What the files hold is their owners' business.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Replace `path` with `bytes` atomically: a reader (or a restart after SIGKILL or a power
/// cut) sees the old content or the new, never a mix. The temporary file is
/// `<path>.tmp`.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        super::replace(&path, b"one").unwrap();
        super::replace(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }
}
