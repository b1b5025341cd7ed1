//! `lockwatch drill --thaw TARGET`: thaw what a drill left frozen, and confirm it. `pid:N`:
//! a ptrace stop held by a stuck `drill-watchdog` ends when that watchdog is killed (the
//! kernel resumes its tracees), then SIGCONT ends a SIGSTOP; a process traced by anything
//! else is left to its tracer. `cgroup:PATH`: the v2 or v1 freezer set to thawed.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::freezer;
use super::target::{Frozen, cmdline};

/// Why it is not thawed.
#[derive(Debug, thiserror::Error)]
pub enum LeftoverError {
    /// Exit 2: not a target.
    #[error("--thaw `{0}`: say what to thaw as pid:N or cgroup:PATH")]
    Spec(String),
    /// Exit 3: it may still be frozen.
    #[error("{0}")]
    Still(String),
}

/// Thaw `spec`; what was done, in one sentence.
pub fn thaw(spec: &str) -> Result<String, LeftoverError> {
    if let Some(n) = spec.strip_prefix("pid:") {
        let pid: i32 = n.trim().parse().map_err(|_| LeftoverError::Spec(spec.into()))?;
        return thaw_pid(pid);
    }
    if !spec.starts_with("cgroup:") {
        return Err(LeftoverError::Spec(spec.into()));
    }
    let named = spec_of(spec);
    let f = Frozen::named(spec).ok_or_else(|| {
        LeftoverError::Still(format!(
            "{} is no freezable cgroup (no cgroup.freeze nor freezer.state)",
            named.trim_start_matches("cgroup:")
        ))
    })?;
    freezer::thaw(&f).map_err(|e| LeftoverError::Still(e.to_string()))?;
    Ok(format!("thawed cgroup {}", named.trim_start_matches("cgroup:")))
}

/// The spec as a drill names it (a cgroup's path made absolute), to find its freezes.
pub fn spec_of(spec: &str) -> String {
    match spec.strip_prefix("cgroup:") {
        Some(p) => format!("cgroup:{}", Path::new("/sys/fs/cgroup").join(p.trim()).display()),
        None => spec.trim().to_string(),
    }
}

fn thaw_pid(pid: i32) -> Result<String, LeftoverError> {
    let mut done = Vec::new();
    if let Some(tracer) = tracer_of(pid) {
        let cmd = cmdline(tracer);
        if !cmd.contains("drill-watchdog") {
            return Err(LeftoverError::Still(format!(
                "process {pid} is traced by process {tracer} ({cmd}), not by a lockwatch drill watchdog: detach that tracer first"
            )));
        }
        let _ = kill(Pid::from_raw(tracer), Signal::SIGKILL);
        let started = Instant::now();
        while tracer_of(pid).is_some() {
            if started.elapsed() > Duration::from_secs(5) {
                return Err(LeftoverError::Still(format!(
                    "process {pid} is still traced 5 s after its watchdog {tracer} was killed"
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done.push(format!(
            "killed the drill watchdog {tracer} that held it in a ptrace stop"
        ));
    }
    freezer::thaw(&Frozen::Pid(pid)).map_err(|e| LeftoverError::Still(e.to_string()))?;
    done.push(format!("process {pid} runs (SIGCONT)"));
    Ok(done.join("; "))
}

/// The process tracing `pid`, if any: `TracerPid` names the tracer's thread, whose `Tgid`
/// is its process.
fn tracer_of(pid: i32) -> Option<i32> {
    let field = |task: i32, name: &str| -> Option<i32> {
        let status = std::fs::read_to_string(format!("/proc/{task}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let thread = field(pid, "TracerPid:").filter(|t| *t != 0)?;
    Some(field(thread, "Tgid:").unwrap_or(thread))
}
