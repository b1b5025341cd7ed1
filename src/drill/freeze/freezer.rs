//! Freezing and thawing what `--freeze` names, synchronously (the drill, its panic hook and
//! the watchdog all call these): SIGSTOP / SIGCONT, the cgroup v2 `cgroup.freeze` and v1
//! `freezer.state` files (each waited on until the kernel says it is done), or the user's
//! commands (each must exit 0).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::target::{CgroupVersion, Frozen, state_of};

/// How long the kernel gets to finish a freeze or a thaw.
const SETTLE: Duration = Duration::from_secs(5);

/// How long a freeze or thaw command may run.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum FreezerError {
    #[error("cannot signal process {pid}: {source}")]
    Signal { pid: i32, source: nix::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{what} did not take effect within {secs} s")]
    Unsettled { what: String, secs: u64 },
    #[error("`{cmd}` {how}")]
    Command { cmd: String, how: String },
}

/// Stop it, and wait until it is stopped.
pub fn freeze(f: &Frozen) -> Result<(), FreezerError> {
    match f {
        Frozen::Pid(pid) => {
            signal(*pid, Signal::SIGSTOP)?;
            settle(&format!("SIGSTOP of process {pid}"), || {
                matches!(state_of(*pid), Some('T' | 't') | None)
            })
        }
        Frozen::Cgroup { path, version } => {
            write_state(path, *version, true)?;
            settle(&format!("the freeze of {}", path.display()), || {
                cgroup_frozen(path, *version) == Some(true)
            })
        }
        Frozen::Commands { freeze, .. } => run(freeze),
    }
}

/// Let it run again, and wait until it does.
pub fn thaw(f: &Frozen) -> Result<(), FreezerError> {
    match f {
        Frozen::Pid(pid) => {
            match kill(Pid::from_raw(*pid), Signal::SIGCONT) {
                // Gone: nothing is left frozen.
                Err(nix::errno::Errno::ESRCH) => return Ok(()),
                Err(source) => return Err(FreezerError::Signal { pid: *pid, source }),
                Ok(()) => {}
            }
            settle(&format!("SIGCONT of process {pid}"), || {
                !matches!(state_of(*pid), Some('T' | 't'))
            })
        }
        Frozen::Cgroup { path, version } => {
            if !path.is_dir() {
                return Ok(());
            }
            write_state(path, *version, false)?;
            settle(&format!("the thaw of {}", path.display()), || {
                cgroup_frozen(path, *version) != Some(true)
            })
        }
        Frozen::Commands { thaw, .. } => run(thaw),
    }
}

/// Whether it is frozen now; `None` when that cannot be read (commands, a gone process).
#[cfg(test)]
fn is_frozen(f: &Frozen) -> Option<bool> {
    match f {
        Frozen::Pid(pid) => state_of(*pid).map(|s| matches!(s, 'T' | 't')),
        Frozen::Cgroup { path, version } => cgroup_frozen(path, *version),
        Frozen::Commands { .. } => None,
    }
}

fn signal(pid: i32, sig: Signal) -> Result<(), FreezerError> {
    kill(Pid::from_raw(pid), sig).map_err(|source| FreezerError::Signal { pid, source })
}

fn write_state(path: &Path, version: CgroupVersion, frozen: bool) -> Result<(), FreezerError> {
    let (file, value) = match (version, frozen) {
        (CgroupVersion::V2, true) => ("cgroup.freeze", "1"),
        (CgroupVersion::V2, false) => ("cgroup.freeze", "0"),
        (CgroupVersion::V1, true) => ("freezer.state", "FROZEN"),
        (CgroupVersion::V1, false) => ("freezer.state", "THAWED"),
    };
    let p = path.join(file);
    std::fs::write(&p, value).map_err(|source| FreezerError::Write {
        path: p.display().to_string(),
        source,
    })
}

/// v2: `frozen 1` in `cgroup.events`; v1: `freezer.state` is `FROZEN` (not `FREEZING`).
pub(super) fn cgroup_frozen(path: &Path, version: CgroupVersion) -> Option<bool> {
    match version {
        CgroupVersion::V2 => {
            let events = std::fs::read_to_string(path.join("cgroup.events")).ok()?;
            events
                .lines()
                .find_map(|l| l.strip_prefix("frozen "))
                .map(|v| v.trim() == "1")
        }
        CgroupVersion::V1 => {
            let state = std::fs::read_to_string(path.join("freezer.state")).ok()?;
            Some(state.trim() == "FROZEN")
        }
    }
}

fn settle(what: &str, done: impl Fn() -> bool) -> Result<(), FreezerError> {
    let deadline = Instant::now() + SETTLE;
    while !done() {
        if Instant::now() > deadline {
            return Err(FreezerError::Unsettled {
                what: what.into(),
                secs: SETTLE.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// `sh -c cmd`, which must exit 0 within [`COMMAND_LIMIT`]; its stderr says why not.
fn run(cmd: &str) -> Result<(), FreezerError> {
    let fail = |how: String| FreezerError::Command { cmd: cmd.into(), how };
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("could not be started: {e}")))?;
    let deadline = Instant::now() + COMMAND_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let err = err.trim();
                let said = if err.is_empty() {
                    String::new()
                } else {
                    format!(": {err}")
                };
                return Err(fail(format!("failed ({status}){said}")));
            }
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!("did not finish within {} s", COMMAND_LIMIT.as_secs())));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(fail(format!("could not be waited for: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_stopped_and_continued() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let f = Frozen::Pid(child.id() as i32);
        freeze(&f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(is_frozen(&f), Some(true));
        thaw(&f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(is_frozen(&f), Some(false));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn commands_must_exit_zero_and_say_why_not() {
        let ok = Frozen::Commands {
            freeze: "true".into(),
            thaw: "echo nope >&2; exit 3".into(),
        };
        assert!(freeze(&ok).is_ok());
        let e = thaw(&ok).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("exit status: 3") && e.contains("nope"), "{e}");
    }
}
