//! Who the frozen worker is, as `/proc` tells: its processes' ids (with the ids they have
//! in their own pid namespaces, as their logs print them), the files they hold open for
//! writing (device and inode: a log file is known however it is renamed or mounted), and
//! what their environment says of their host and OpenTelemetry instance. A lock event from
//! logs or pushes is the worker's when its origin matches, another's when its origin says
//! otherwise, and unknown when it says nothing the drill can check.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;

use super::seen::EventOrigin;

/// What is known of the frozen worker.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// Its pids as this host sees them.
    pids: BTreeSet<u32>,
    /// Its pids as its own (nested) pid namespaces number them: every container's first
    /// process is 1, so these tie only beside its host or file.
    ns_pids: BTreeSet<u32>,
    /// The files it writes: `(device, inode)` → path.
    files: BTreeMap<(u64, u64), String>,
    /// Those also written by a process that is not the worker's.
    shared: BTreeSet<(u64, u64)>,
    hosts: BTreeSet<String>,
    instances: BTreeSet<String>,
}

/// Whose a lock event is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tie {
    /// The worker's, and how that is known.
    Worker(String),
    /// Another process's, and how that is known.
    Other(String),
    /// Its origin says nothing the drill can check.
    Unknown,
}

impl Identity {
    /// Read what `/proc` says of `pids` (more of it on each call: files opened later).
    pub fn learn(&mut self, pids: &[i32]) {
        for &pid in pids {
            let Ok(p) = u32::try_from(pid) else { continue };
            self.pids.insert(p);
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            if let Some(ns) = status.lines().find_map(|l| l.strip_prefix("NSpid:")) {
                self.ns_pids
                    .extend(ns.split_whitespace().skip(1).filter_map(|n| n.parse::<u32>().ok()));
            }
            self.files.extend(written_files(pid));
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            for var in env.split(|b| *b == 0).map(String::from_utf8_lossy) {
                if let Some(h) = var.strip_prefix("HOSTNAME=").filter(|h| !h.is_empty()) {
                    self.hosts.insert(h.to_string());
                }
                if let Some(attrs) = var.strip_prefix("OTEL_RESOURCE_ATTRIBUTES=") {
                    self.instances.extend(
                        attrs
                            .split(',')
                            .filter_map(|a| a.trim().strip_prefix("service.instance.id="))
                            .map(str::to_string),
                    );
                }
            }
            if let Some(h) = hostname_of(pid) {
                self.hosts.insert(h);
            }
        }
    }

    /// Mark the worker's files that a process outside `pids` also writes: a line without a
    /// pid read from one of them may be that process's.
    pub fn find_shared(&mut self, pids: &[i32]) {
        let mine: BTreeSet<i32> = pids.iter().copied().collect();
        let Ok(procs) = std::fs::read_dir("/proc") else { return };
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if mine.contains(&pid) || pid == std::process::id() as i32 {
                continue;
            }
            for (id, _) in written_files(pid) {
                if self.files.contains_key(&id) {
                    self.shared.insert(id);
                }
            }
        }
    }

    /// Known only by these pids (the verdict's tests).
    #[cfg(test)]
    pub fn with_pids(pids: &[u32]) -> Identity {
        Identity {
            pids: pids.iter().copied().collect(),
            ..Identity::default()
        }
    }

    /// What is known, in a few words (for the report).
    pub fn describe(&self) -> String {
        let files: Vec<&str> = self.files.values().map(String::as_str).take(4).collect();
        format!(
            "pids {}; {} file(s) written{}{}",
            self.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            self.files.len(),
            if files.is_empty() {
                String::new()
            } else {
                format!(" ({})", files.join(", "))
            },
            match self.shared.len() {
                0 => String::new(),
                n => format!(", {n} of them also written by other processes"),
            }
        )
    }

    /// Whose an event of `origin` is. Anything that says it is another's wins: a pid not
    /// the worker's, a host not its host (unless the line came from a file only the worker
    /// writes), an instance not its instance.
    pub fn whose(&self, o: &EventOrigin) -> Tie {
        let file = o
            .file_id
            .filter(|id| self.files.contains_key(id) && !self.shared.contains(id))
            .map(|_| o.file.as_deref().unwrap_or("its log file"));
        let host = match &o.host {
            Some(h) if !self.hosts.is_empty() => Some((h.as_str(), self.hosts.contains(h))),
            _ => None,
        };
        if let Some((h, false)) = host
            && file.is_none()
        {
            return Tie::Other(format!("host {h}, not the worker's"));
        }
        let mut yes = Vec::new();
        if let Some(pid) = o.pid {
            let beside = file.is_some() || host.is_some_and(|(_, same)| same);
            let ns = self.ns_pids.contains(&pid);
            if self.pids.contains(&pid) || (ns && beside) {
                yes.push(format!("its pid {pid}"));
            } else if !self.pids.is_empty() && !ns {
                return Tie::Other(format!("pid {pid}, not the worker's"));
            }
        }
        if let Some(i) = &o.instance
            && !self.instances.is_empty()
        {
            match self.instances.contains(i) {
                true => yes.push(format!("its service.instance.id {i}")),
                false => return Tie::Other(format!("service.instance.id {i}, not the worker's")),
            }
        }
        if let Some(f) = file {
            yes.push(format!("read from {f}, a file only the worker writes"));
        }
        match yes.is_empty() {
            true => Tie::Unknown,
            false => Tie::Worker(yes.join("; ")),
        }
    }
}

/// The regular files `pid` holds open for writing: `(device, inode)` → path.
fn written_files(pid: i32) -> Vec<((u64, u64), String)> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return vec![];
    };
    let mut out = Vec::new();
    for fd in fds.flatten() {
        let Ok(meta) = std::fs::metadata(fd.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()))
            .unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .unwrap_or(0);
        // O_WRONLY or O_RDWR.
        if flags & 0o3 == 0 {
            continue;
        }
        let path = std::fs::read_link(fd.path()).map_or_else(|_| String::new(), |p| p.display().to_string());
        out.push(((meta.dev(), meta.ino()), path));
    }
    out
}

/// The host name `pid` sees: this host's when it shares our UTS namespace, else its root's
/// `/etc/hostname` (a container's).
fn hostname_of(pid: i32) -> Option<String> {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/uts")).ok();
    if ns(&pid.to_string()).is_some() && ns(&pid.to_string()) == ns("self") {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
        return Some(name.trim().to_string()).filter(|n| !n.is_empty());
    }
    let name = std::fs::read_to_string(format!("/proc/{pid}/root/etc/hostname")).ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(pid: Option<u32>, host: Option<&str>, file: Option<(u64, u64)>) -> EventOrigin {
        EventOrigin {
            pid,
            host: host.map(str::to_string),
            file_id: file,
            file: file.map(|_| "/var/log/w.log".to_string()),
            ..EventOrigin::default()
        }
    }

    #[test]
    fn this_process_is_known_by_its_pid_its_file_and_its_host() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("w.log");
        let f = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let meta = f.metadata().unwrap_or_else(|e| panic!("{e}"));
        let me = std::process::id();
        let mut id = Identity::default();
        id.learn(&[me as i32]);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_string();
        let file = Some((meta.dev(), meta.ino()));
        assert!(matches!(id.whose(&origin(Some(me), None, None)), Tie::Worker(_)));
        assert!(matches!(id.whose(&origin(Some(me), Some(&host), None)), Tie::Worker(_)));
        assert!(
            matches!(id.whose(&origin(Some(999_999), None, file)), Tie::Other(_)),
            "another pid wins over a file"
        );
        assert!(matches!(
            id.whose(&origin(Some(me), Some("elsewhere"), None)),
            Tie::Other(_)
        ));
        assert!(matches!(id.whose(&origin(None, None, file)), Tie::Worker(_)));
        assert_eq!(id.whose(&origin(None, None, Some((1, 2)))), Tie::Unknown);
        assert_eq!(id.whose(&EventOrigin::default()), Tie::Unknown);
        // Written by another process too: a line without a pid may be that one's.
        let other = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>>{} ; sleep 5", path.display()))
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(300));
        id.find_shared(&[me as i32]);
        let mut other = other;
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(id.whose(&origin(None, None, file)), Tie::Unknown);
        assert!(
            id.describe().contains("also written by other processes"),
            "{}",
            id.describe()
        );
        // A pid as a container numbers it ties only beside the worker's host or file.
        let mut ns = Identity::with_pids(&[4242]);
        ns.ns_pids.insert(1);
        assert_eq!(ns.whose(&origin(Some(1), None, None)), Tie::Unknown);
        ns.hosts.insert("w-1".into());
        assert!(matches!(ns.whose(&origin(Some(1), Some("w-1"), None)), Tie::Worker(_)));
        assert!(matches!(ns.whose(&origin(Some(1), Some("w-2"), None)), Tie::Other(_)));
        // Nothing known (a freeze by commands): nothing can be told.
        assert_eq!(Identity::default().whose(&origin(Some(me), None, file)), Tie::Unknown);
        drop(f);
    }
}
