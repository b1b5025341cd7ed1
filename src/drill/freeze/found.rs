//! What a freeze command stopped, found in `/proc`: the processes stopped (state `T`) or in
//! a frozen cgroup (v2 `cgroup.events` `frozen 1`, v1 `freezer.state` `FROZEN`) after the
//! command that were not before it. So a drill by `--freeze-cmd` (`docker pause`,
//! `systemctl freeze`, `kill -STOP`) still knows the worker's processes on this host, and
//! ties its connections and log lines as a drill by pid does.

use std::collections::{BTreeMap, BTreeSet};

/// The processes stopped or frozen now.
pub fn frozen_now() -> BTreeSet<i32> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let v2 = mount(&mounts, "cgroup2", None);
    let v1 = mount(&mounts, "cgroup", Some("freezer"));
    let mut cache: BTreeMap<String, bool> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if state == Some('T') {
            out.insert(pid);
            continue;
        }
        let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        for line in groups.lines() {
            let mut f = line.splitn(3, ':');
            let (id, controllers, path) = (f.next(), f.next(), f.next());
            let (Some(id), Some(controllers), Some(path)) = (id, controllers, path) else {
                continue;
            };
            let file = match (id, controllers.split(',').any(|c| c == "freezer"), &v2, &v1) {
                ("0", _, Some(root), _) if controllers.is_empty() => format!("{root}{path}/cgroup.events"),
                (_, true, _, Some(root)) => format!("{root}{path}/freezer.state"),
                _ => continue,
            };
            let frozen = *cache.entry(file.clone()).or_insert_with(|| {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                text.lines().any(|l| l.trim() == "frozen 1" || l.trim() == "FROZEN")
            });
            if frozen {
                out.insert(pid);
            }
        }
    }
    out
}

/// The mount point of the hierarchy of `fstype` (with `option`), without a trailing `/`.
fn mount(mounts: &str, fstype: &str, option: Option<&str>) -> Option<String> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let ok = f.len() >= 4 && f[2] == fstype && option.is_none_or(|o| f[3].split(',').any(|x| x == o));
        ok.then(|| f[1].trim_end_matches('/').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_is_found_and_a_running_one_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let pid = child.id() as i32;
        let before = frozen_now();
        assert!(!before.contains(&pid));
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGSTOP);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let after = frozen_now();
        let _ = child.kill();
        let _ = child.wait();
        assert!(after.contains(&pid), "{after:?}");
    }
}
