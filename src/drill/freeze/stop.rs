//! How the watchdog holds the target stopped. A process: a ptrace stop of each of its threads
//! (the kernel resumes them if the watchdog dies), or SIGSTOP where ptrace is refused (a
//! process already traced, Yama's `ptrace_scope`, no `CAP_SYS_PTRACE`). A cgroup or a pair of
//! commands: the freezer's. The thaw is confirmed before it counts, and retried.

use std::time::Duration;

use super::freezer;
use super::ptrace::{self, PtraceError};
use super::target::Frozen;

/// A thaw's attempts: at once, then after each pause.
const RETRIES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(2)];

/// The target as held stopped.
pub enum Held {
    Traced { stop: ptrace::Stop, target: Frozen },
    Frozen(Frozen),
}

impl Held {
    /// Stop `f`; the method as the report says it, and a note where ptrace was refused. On
    /// an error, whatever may have been stopped is thawed again: the error, and whether that
    /// failed too (it may be left frozen).
    pub fn stop(f: &Frozen) -> Result<(Held, String, Option<String>), (String, bool)> {
        if let Frozen::Pid(pid) = f {
            match ptrace::Stop::new(*pid) {
                Ok(stop) => {
                    return Ok((
                        Held::Traced {
                            stop,
                            target: f.clone(),
                        },
                        PTRACE.into(),
                        None,
                    ));
                }
                Err(e @ PtraceError::Refused { .. }) => {
                    return match freezer::freeze(f) {
                        Ok(()) => Ok((
                            Held::Frozen(f.clone()),
                            "SIGSTOP/SIGCONT".into(),
                            Some(format!(
                                "{e}: stopped with SIGSTOP instead, which the kernel does not undo if the watchdog dies"
                            )),
                        )),
                        Err(e) => Err(undo(f, e.to_string())),
                    };
                }
                Err(e) => return Err((e.to_string(), false)),
            }
        }
        match freezer::freeze(f) {
            Ok(()) => Ok((Held::Frozen(f.clone()), method(f).into(), None)),
            Err(e) => Err(undo(f, e.to_string())),
        }
    }

    /// Thaw it and confirm, retrying a freezer's thaw; the last error if it never worked.
    pub fn thaw(self) -> Result<(), String> {
        match self {
            Held::Traced { stop, target } => stop.release().or_else(|e| {
                // The tracer is gone either way: a SIGSTOP someone else sent may remain.
                freezer::thaw(&target).map_err(|e2| format!("{e}; then {e2}"))
            }),
            Held::Frozen(f) => {
                let mut last = match freezer::thaw(&f) {
                    Ok(()) => return Ok(()),
                    Err(e) => e.to_string(),
                };
                for pause in RETRIES {
                    std::thread::sleep(pause);
                    match freezer::thaw(&f) {
                        Ok(()) => return Ok(()),
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(last)
            }
        }
    }
}

/// The method's name for a ptrace stop.
pub const PTRACE: &str = "a ptrace stop";

/// The method's name for what the freezer does.
pub fn method(f: &Frozen) -> &'static str {
    use super::target::CgroupVersion;
    match f {
        Frozen::Pid(_) => "SIGSTOP/SIGCONT",
        Frozen::Cgroup {
            version: CgroupVersion::V2,
            ..
        } => "the cgroup v2 freezer",
        Frozen::Cgroup {
            version: CgroupVersion::V1,
            ..
        } => "the cgroup v1 freezer",
        Frozen::Commands { .. } => "the freeze and thaw commands",
    }
}

/// A failed freeze thawed again: the error, and whether that thaw failed too.
fn undo(f: &Frozen, error: String) -> (String, bool) {
    match freezer::thaw(f) {
        Ok(()) => (format!("{error} (thawed)"), false),
        Err(e) => (format!("{error}; the thaw after it failed too: {e}"), true),
    }
}

/// The exact command that thaws `f` by hand.
pub fn by_hand(f: &Frozen) -> String {
    match f {
        Frozen::Pid(p) => format!("lockwatch drill --thaw pid:{p}"),
        Frozen::Cgroup { path, .. } => format!("lockwatch drill --thaw cgroup:{}", path.display()),
        Frozen::Commands { thaw, .. } => thaw.clone(),
    }
}
