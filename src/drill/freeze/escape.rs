//! The watchdog leaves what kills or freezes the drill as a whole: its session and process
//! group (`setsid`), and its cgroup in each hierarchy through which a group is killed or
//! frozen (the v2 one: `cgroup.kill`, `cgroup.freeze`; the v1 `freezer` and `name=systemd`
//! ones), for `lockwatch-drill-watchdog` at the root of each hierarchy it can see. Where it
//! may not (no write access, a hierarchy it cannot see the root of, a container's cgroup or
//! PID namespace), it says so.

use std::path::{Path, PathBuf};

/// The cgroup the watchdog moves into, below the root of each hierarchy.
pub const CGROUP: &str = "lockwatch-drill-watchdog";

/// The inode numbers of the initial cgroup and PID namespaces (`include/linux/proc_ns.h`).
const INIT_CGROUP_NS: u32 = 0xEFFF_FFFB;
const INIT_PID_NS: u32 = 0xEFFF_FFFC;

/// Where the watchdog went, and what it could not leave.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Escaped {
    /// The cgroups it moved into.
    pub moved: Vec<String>,
    /// What it could not leave, each with why.
    pub stayed: Vec<String>,
}

/// A new session (and process group), then a cgroup of its own in each hierarchy.
pub fn escape() -> Escaped {
    let mut out = Escaped::default();
    if let Err(e) = nix::unistd::setsid() {
        out.stayed
            .push(format!("the drill's session and process group (setsid: {e})"));
    }
    // In a container the roots seen here are the container's: what kills it kills this too.
    for (ns, init, why) in [
        (
            "cgroup",
            INIT_CGROUP_NS,
            "a cgroup namespace (a container's): the cgroup roots seen here are its own, so a kill or freeze of the container reaches the watchdog too",
        ),
        (
            "pid",
            INIT_PID_NS,
            "a PID namespace (a container's): when its PID 1 dies (`docker kill`, `kubectl delete pod`) the kernel kills every process in it, the watchdog too",
        ),
    ] {
        let link = std::fs::read_link(format!("/proc/self/ns/{ns}")).map(|l| l.display().to_string());
        if let Ok(l) = link
            && l != format!("{ns}:[{init}]")
        {
            out.stayed.push(why.into());
        }
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for m in hierarchies(&mounts) {
        let Some(own) = own_path(&cgroups, &m) else {
            continue;
        };
        let Some(rel) = own.strip_prefix(&m.root) else {
            out.stayed.push(format!(
                "the {} cgroup {own} (not below the hierarchy's root seen here)",
                m.name
            ));
            continue;
        };
        if rel.trim_matches('/').is_empty() || rel.trim_matches('/') == CGROUP {
            continue;
        }
        let dir = m.mount.join(CGROUP);
        match std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()))
        {
            Ok(()) => out.moved.push(dir.display().to_string()),
            Err(e) => out
                .stayed
                .push(format!("the {} cgroup {own} ({}: {e})", m.name, dir.display())),
        }
    }
    out
}

/// One mounted hierarchy that can kill or freeze a group.
#[derive(Debug, PartialEq, Eq)]
struct Hierarchy {
    /// `v2`, `freezer` or `name=systemd`, as `/proc/self/cgroup` names it.
    name: String,
    /// The cgroup path mounted there (`/` unless a namespace or a bind mount narrows it).
    root: String,
    mount: PathBuf,
}

/// The v2 mount and the v1 `freezer` and `name=systemd` mounts, once each.
fn hierarchies(mountinfo: &str) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount), Some(fs), Some(opts)) = (l.get(3), l.get(4), r.first(), r.get(2)) else {
            continue;
        };
        let name = match *fs {
            "cgroup2" => "v2",
            "cgroup" if opts.split(',').any(|o| o == "freezer") => "freezer",
            "cgroup" if opts.split(',').any(|o| o == "name=systemd") => "name=systemd",
            _ => continue,
        };
        if out.iter().any(|h| h.name == name) {
            continue;
        }
        out.push(Hierarchy {
            name: name.into(),
            root: root.to_string(),
            mount: Path::new(mount).to_path_buf(),
        });
    }
    out
}

/// This process's cgroup in `h`, from `/proc/self/cgroup`.
fn own_path(cgroups: &str, h: &Hierarchy) -> Option<String> {
    cgroups.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match h.name.as_str() {
            "v2" => id == "0" && controllers.is_empty(),
            name => controllers.split(',').any(|c| c == name),
        };
        hit.then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
33 30 0:29 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
34 30 0:30 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
40 30 0:36 / /sys/fs/cgroup/freezer rw,nosuid - cgroup cgroup rw,freezer
41 30 0:37 /docker/abc /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory";

    #[test]
    fn the_hierarchies_that_kill_or_freeze_a_group_are_found_with_this_process_in_each() {
        let h = hierarchies(MOUNTINFO);
        let names: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["v2", "name=systemd", "freezer"]);
        let cgroups = "12:freezer:/ci/job-7\n1:name=systemd:/system.slice/ci.service\n0::/system.slice/ci.service\n";
        assert_eq!(own_path(cgroups, &h[0]).as_deref(), Some("/system.slice/ci.service"));
        assert_eq!(own_path(cgroups, &h[2]).as_deref(), Some("/ci/job-7"));
    }
}
