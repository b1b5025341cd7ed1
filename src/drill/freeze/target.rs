//! What `--freeze` stops, checked before anything is touched: `pid:N` (SIGSTOP/SIGCONT),
//! `cgroup:PATH` (the v2 `cgroup.freeze` or v1 `freezer.state` of a cgroup), or a pair of
//! commands. Refused here: PID 1, lockwatch itself and its ancestors, a process that does
//! not exist or may not be signalled, a path that is not a freezable cgroup, or one that
//! holds PID 1 or lockwatch.

use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// Where cgroup paths given relative are looked up (the v2 mount of a systemd host).
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// How many processes of a cgroup's tree are looked at for the checks, at most.
const MAX_PROCS: usize = 100_000;

/// The cgroup freezer interface a path offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// `cgroup.freeze` (`1`/`0`), `cgroup.events` says `frozen 1` once done.
    V2,
    /// `freezer.state` (`FROZEN`/`THAWED`), `FREEZING` until done.
    V1,
}

/// What the drill freezes, as checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frozen {
    Pid(i32),
    Cgroup {
        path: PathBuf,
        version: CgroupVersion,
    },
    /// Run with `sh -c`; each must exit 0.
    Commands {
        freeze: String,
        thaw: String,
    },
}

/// Why a target is refused (exit 2): one sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl Frozen {
    /// `pid:N` or `cgroup:PATH` as a drill named it, not checked again (the watchdog, and
    /// `--thaw` for what a drill left): a cgroup's version from its files, `None` when it
    /// has neither.
    pub fn named(spec: &str) -> Option<Frozen> {
        if let Some(p) = spec.strip_prefix("pid:") {
            return p.trim().parse().ok().map(Frozen::Pid);
        }
        let path = Path::new(CGROUP_ROOT).join(spec.strip_prefix("cgroup:")?.trim());
        let version = match (
            path.join("cgroup.freeze").is_file(),
            path.join("freezer.state").is_file(),
        ) {
            (true, _) => CgroupVersion::V2,
            (false, true) => CgroupVersion::V1,
            _ => return None,
        };
        Some(Frozen::Cgroup { path, version })
    }

    /// `pid:N` or `cgroup:PATH` (absolute, or relative to `/sys/fs/cgroup`), checked.
    pub fn parse(spec: &str) -> Result<Frozen, Refused> {
        if let Some(n) = spec.strip_prefix("pid:") {
            let pid: i32 = n
                .trim()
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| Refused(format!("--freeze `{spec}`: a PID is a positive number, as in pid:4242")))?;
            check_pid(pid)?;
            return Ok(Frozen::Pid(pid));
        }
        if let Some(p) = spec.strip_prefix("cgroup:") {
            let path = Path::new(CGROUP_ROOT).join(p.trim());
            let version = check_cgroup(&path)?;
            return Ok(Frozen::Cgroup { path, version });
        }
        Err(Refused(format!(
            "--freeze `{spec}`: say what to freeze as pid:N (one process, SIGSTOP) or cgroup:PATH (a container or systemd unit, the cgroup freezer); for anything else use --freeze-cmd and --thaw-cmd"
        )))
    }

    /// The spec as given back on a command line (`pid:N`, `cgroup:PATH`, `cmd`).
    pub fn spec(&self) -> String {
        match self {
            Frozen::Pid(p) => format!("pid:{p}"),
            Frozen::Cgroup { path, .. } => format!("cgroup:{}", path.display()),
            Frozen::Commands { .. } => "cmd".into(),
        }
    }

    /// What it is, for the question before freezing and the report: the command line of a
    /// PID, the number of processes of a cgroup, the commands.
    pub fn describe(&self) -> String {
        match self {
            Frozen::Pid(p) => format!("process {p} ({})", cmdline(*p)),
            Frozen::Cgroup { path, version } => {
                let n = procs_below(path).len();
                let v = match version {
                    CgroupVersion::V2 => "v2",
                    CgroupVersion::V1 => "v1",
                };
                format!("cgroup {} ({v} freezer, {n} process(es))", path.display())
            }
            Frozen::Commands { freeze, thaw } => format!("what `{freeze}` freezes (thawed by `{thaw}`)"),
        }
    }

    /// The processes it holds, where that is known (not for commands).
    pub fn pids(&self) -> Vec<i32> {
        match self {
            Frozen::Pid(p) => vec![*p],
            Frozen::Cgroup { path, .. } => procs_below(path),
            Frozen::Commands { .. } => vec![],
        }
    }
}

/// A process's command line, arguments joined by spaces, cut to 200 characters.
pub fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: String = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    if s.is_empty() {
        s = std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or_else(|_| "?".into(), |c| c.trim().to_string());
    }
    if s.chars().count() > 200 {
        s = s.chars().take(199).collect::<String>() + "…";
    }
    s
}

/// This process and its ancestors up to PID 1 (never frozen: the drill would stop itself).
pub fn self_and_ancestors() -> Vec<i32> {
    let mut out = vec![];
    let mut pid = std::process::id() as i32;
    while pid > 0 && !out.contains(&pid) && out.len() < 4096 {
        out.push(pid);
        pid = parent_of(pid).unwrap_or(0);
    }
    out
}

/// The parent PID from `/proc/N/stat` (the field after the command's closing parenthesis).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A process's state letter from `/proc/N/stat` (`T` stopped, `Z` zombie…); `None` if gone.
pub fn state_of(pid: i32) -> Option<char> {
    state_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The state of thread `tid` of process `pid`, as [`state_of`].
pub fn thread_state(pid: i32, tid: i32) -> Option<char> {
    state_in(&std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?)
}

/// The state letter of a `stat` line (after the command name, which may hold `)`).
fn state_in(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

fn check_pid(pid: i32) -> Result<(), Refused> {
    if pid == 1 {
        return Err(Refused(
            "refusing to freeze PID 1: it is the init of this system or container; freeze the worker's own PID or its cgroup".into(),
        ));
    }
    if self_and_ancestors().contains(&pid) {
        return Err(Refused(format!(
            "refusing to freeze PID {pid}: it is lockwatch itself or one of its parents (the shell that runs it), and the drill would stop itself"
        )));
    }
    match kill(Pid::from_raw(pid), None) {
        Ok(()) => {}
        Err(Errno::ESRCH) => return Err(Refused(format!("refusing --freeze pid:{pid}: no process has that PID"))),
        Err(Errno::EPERM) => {
            return Err(Refused(format!(
                "refusing --freeze pid:{pid}: lockwatch may not signal that process (run the drill as its user, or as root)"
            )));
        }
        Err(e) => return Err(Refused(format!("refusing --freeze pid:{pid}: {e}"))),
    }
    if state_of(pid) == Some('Z') {
        return Err(Refused(format!(
            "refusing --freeze pid:{pid}: the process has exited (a zombie)"
        )));
    }
    Ok(())
}

/// The freezer a cgroup directory offers, or why it cannot be frozen.
fn check_cgroup(path: &Path) -> Result<CgroupVersion, Refused> {
    let shown = path.display();
    if !path.is_dir() {
        return Err(Refused(format!(
            "refusing --freeze cgroup:{shown}: no such cgroup directory"
        )));
    }
    let version = if path.join("cgroup.freeze").is_file() {
        CgroupVersion::V2
    } else if path.join("freezer.state").is_file() {
        CgroupVersion::V1
    } else {
        return Err(Refused(format!(
            "refusing --freeze cgroup:{shown}: not a freezable cgroup (no cgroup.freeze, as cgroup v2 has below the root, nor freezer.state of the v1 freezer hierarchy)"
        )));
    };
    let writable = match version {
        CgroupVersion::V2 => path.join("cgroup.freeze"),
        CgroupVersion::V1 => path.join("freezer.state"),
    };
    if std::fs::OpenOptions::new().write(true).open(&writable).is_err() {
        return Err(Refused(format!(
            "refusing --freeze cgroup:{shown}: lockwatch may not write {} (run the drill as root, or as the owner of a delegated cgroup)",
            writable.display()
        )));
    }
    let procs = procs_below(path);
    if procs.is_empty() {
        return Err(Refused(format!(
            "refusing --freeze cgroup:{shown}: it holds no process, so there is no worker to freeze"
        )));
    }
    let own = self_and_ancestors();
    if let Some(p) = procs.iter().find(|p| **p == 1 || own.contains(p)) {
        let who = if *p == 1 {
            "PID 1".to_string()
        } else {
            format!("lockwatch or its parent {p}")
        };
        return Err(Refused(format!(
            "refusing --freeze cgroup:{shown}: it holds {who}, and freezing it would stop the system or the drill itself"
        )));
    }
    Ok(version)
}

/// The processes of a cgroup and of every cgroup below it (a freeze stops them all).
pub fn procs_below(path: &Path) -> Vec<i32> {
    let mut out = vec![];
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        if out.len() > MAX_PROCS {
            break;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(spec: &str) -> String {
        match Frozen::parse(spec) {
            Err(Refused(m)) => m,
            Ok(f) => panic!("{spec} accepted as {f:?}"),
        }
    }

    #[test]
    fn pid_one_self_ancestors_and_absent_processes_are_refused() {
        assert!(refused("pid:1").contains("PID 1"));
        assert!(refused(&format!("pid:{}", std::process::id())).contains("lockwatch itself"));
        let parent = parent_of(std::process::id() as i32).unwrap_or(1);
        if parent > 1 {
            assert!(refused(&format!("pid:{parent}")).contains("parents"));
        }
        assert!(refused("pid:0").contains("positive"));
        assert!(refused("pid:abc").contains("positive"));
        // PIDs above pid_max never exist.
        assert!(refused("pid:2147483647").contains("no process"));
        assert!(refused("proc:12").contains("pid:N"));
    }

    #[test]
    fn a_directory_that_is_no_freezable_cgroup_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let m = refused(&format!("cgroup:{}", dir.path().display()));
        assert!(m.contains("not a freezable cgroup"), "{m}");
        assert!(refused("cgroup:/nonexistent/lockwatch").contains("no such cgroup"));
    }

    #[test]
    fn ancestors_end_at_init_and_cmdlines_are_read() {
        let own = self_and_ancestors();
        assert_eq!(own[0], std::process::id() as i32);
        assert!(cmdline(own[0]).len() > 1);
        assert!(state_of(own[0]).is_some_and(|s| s != 'T' && s != 'Z'));
    }
}
