//! What a freeze command stopped, found in `/proc`: the processes stopped (state `T`) or in
//! a frozen cgroup (v2 `cgroup.events` `frozen 1`, v1 `freezer.state` `FROZEN`) after the
//! command that were not before it. So a drill by `--freeze-cmd` (`docker pause`,
//! `systemctl freeze`, `kill -STOP`) still knows the worker's processes on this host, and
//! ties its connections and log lines as a drill by pid does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::freezer::cgroup_frozen;
use super::target::{CgroupVersion, state_of};

/// The processes stopped or frozen now.
pub fn frozen_now() -> BTreeSet<i32> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let v2 = mount(&mounts, "cgroup2", None);
    let v1 = mount(&mounts, "cgroup", Some("freezer"));
    let mut cache: BTreeMap<PathBuf, bool> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if state_of(pid) == Some('T') {
            out.insert(pid);
            continue;
        }
        let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        for line in groups.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let (root, version) = match (id, controllers.split(',').any(|c| c == "freezer"), &v2, &v1) {
                ("0", _, Some(root), _) if controllers.is_empty() => (root, CgroupVersion::V2),
                (_, true, _, Some(root)) => (root, CgroupVersion::V1),
                _ => continue,
            };
            let dir = PathBuf::from(format!("{root}{path}"));
            let frozen = *cache
                .entry(dir.clone())
                .or_insert_with(|| cgroup_frozen(&dir, version).unwrap_or(false));
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
