//! A real systemd service manager for a test: `systemd --user`, run as root in a mount
//! namespace of its own (`unshare --mount`), with its units, runtime directory and state
//! under a directory of the test. It runs the shipped units as systemd runs them — timers,
//! `%i` and `%S`, `EnvironmentFile=`, the sandboxing — and `systemctl --user` talks to it.
//!
//! Two things of this host are stood in for, only inside that namespace: systemd refuses to
//! start a user manager unless `/run/systemd/system` exists (a host booted with systemd), so
//! a private tmpfs on `/run/systemd` holds that directory; and the manager logs to
//! `/dev/console`, so a file of the test is bind-mounted there. The manager starts in a
//! cgroup of its own below the test's, in each hierarchy, so that its slices do not mix with
//! anything else on the host, and the cgroups are removed when it is dropped. No journald
//! runs: a unit's output goes to a file through a drop-in ([`UserManager::capture_output`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The systemd binary (not on `PATH`), or fail saying how to install it.
fn systemd_binary() -> PathBuf {
    ["/lib/systemd/systemd", "/usr/lib/systemd/systemd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("systemd not found: install it with `sudo apt-get install systemd`"))
}

/// A `systemd --user` manager of this test; stopped, and its cgroups removed, on drop.
pub struct UserManager {
    dir: PathBuf,
    child: Child,
    cgroups: Vec<PathBuf>,
    systemctl: PathBuf,
}

impl UserManager {
    /// Start the manager with `dir` as its home (a directory outside `/tmp`: units with
    /// `PrivateTmp=` see another `/tmp`), and wait until it answers.
    pub fn start(dir: &Path) -> UserManager {
        let systemd = systemd_binary();
        let unshare = super::require_binary("unshare", "util-linux");
        let systemctl = super::require_binary("systemctl", "systemd");
        assert_eq!(
            // /proc/self belongs to the process's effective user.
            std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()),
            0,
            "a systemd manager with namespaces and cgroups of its own needs root"
        );
        for d in ["run", "config/systemd/user", "cache", "state"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::set_permissions(dir.join("run"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let console = dir.join("manager.log");
        std::fs::write(&console, "").unwrap();

        // A cgroup of its own below the test's, in each hierarchy systemd uses (not cpuset,
        // which it leaves alone and which takes no process before its cpus are set).
        let name = format!("lockwatch-test-systemd-{}", std::process::id());
        let mut cgroups = Vec::new();
        for line in std::fs::read_to_string("/proc/self/cgroup").unwrap().lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if controllers.split(',').any(|c| c == "cpuset") {
                continue;
            }
            let mount = match controllers {
                "" if Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() => {
                    PathBuf::from("/sys/fs/cgroup/unified")
                }
                "" => PathBuf::from("/sys/fs/cgroup"),
                c => PathBuf::from("/sys/fs/cgroup").join(c.strip_prefix("name=").unwrap_or(c)),
            };
            let own = mount.join(path.trim_start_matches('/')).join(&name);
            if mount.join("cgroup.procs").exists() && std::fs::create_dir_all(&own).is_ok() {
                cgroups.push(own);
            }
        }
        assert!(
            !cgroups.is_empty(),
            "no cgroup hierarchy to start systemd in (is /sys/fs/cgroup mounted?)"
        );

        let script = r#"set -e
console="$1"; shift
for procs in "$@"; do echo $$ > "$procs"; done
mkdir -p /run/systemd
mount -t tmpfs -o mode=0755 lockwatch-test /run/systemd
mkdir /run/systemd/system
if [ -e /dev/console ]; then mount --bind "$console" /dev/console; fi
exec env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
  HOME="$HOME_DIR" XDG_RUNTIME_DIR="$HOME_DIR/run" XDG_CONFIG_HOME="$HOME_DIR/config" \
  XDG_CACHE_HOME="$HOME_DIR/cache" XDG_STATE_HOME="$HOME_DIR/state" \
  "$SYSTEMD" --user --log-target=console --log-level=info
"#;
        let log = std::fs::OpenOptions::new().append(true).open(&console).unwrap();
        let child = Command::new(unshare)
            .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(&console)
            .args(cgroups.iter().map(|c| c.join("cgroup.procs")))
            .env("HOME_DIR", dir)
            .env("SYSTEMD", &systemd)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run unshare: {e}"));
        let mut m = UserManager {
            dir: dir.to_path_buf(),
            child,
            cgroups,
            systemctl,
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!("systemd --user exited ({status}):\n{}", m.log());
            }
            // (`systemctl is-system-running` answers "offline" outside the namespace: it
            // looks for /run/systemd/system itself; `show` asks the manager.)
            if m.dir.join("run/systemd/private").exists() {
                let out = m.systemctl(&["show", "-p", "SystemState", "--value"]);
                let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if state == "running" || state == "degraded" {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "systemd --user did not come up within 30s:\n{}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        m
    }

    /// Where unit files go (`$XDG_CONFIG_HOME/systemd/user`).
    pub fn unit_dir(&self) -> PathBuf {
        self.dir.join("config/systemd/user")
    }

    /// What `%S` and `StateDirectory=` resolve to for this manager (`/var/lib` for the
    /// system manager; `$XDG_CONFIG_HOME` for a user manager of systemd 252, the state home
    /// from later versions on).
    pub fn state_dirs(&self) -> [PathBuf; 2] {
        [self.dir.join("config"), self.dir.join("state")]
    }

    /// Install `text` as unit `name`.
    pub fn install(&self, name: &str, text: &str) {
        std::fs::write(self.unit_dir().join(name), text).unwrap();
    }

    /// A drop-in `file` for unit `name` (`name.d/file`).
    pub fn drop_in(&self, name: &str, file: &str, text: &str) {
        let d = self.unit_dir().join(format!("{name}.d"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(file), text).unwrap();
    }

    /// A drop-in sending unit `name`'s stdout and stderr to files (no journald runs here);
    /// their paths.
    pub fn capture_output(&self, name: &str) -> (PathBuf, PathBuf) {
        let (out, err) = (
            self.dir.join(format!("{name}.stdout")),
            self.dir.join(format!("{name}.stderr")),
        );
        self.drop_in(
            name,
            "test-output.conf",
            &format!(
                "[Service]\nStandardOutput=append:{}\nStandardError=append:{}\n",
                out.display(),
                err.display()
            ),
        );
        (out, err)
    }

    /// `systemctl --user ARGS…` against this manager.
    pub fn systemctl(&self, args: &[&str]) -> Output {
        Command::new(&self.systemctl)
            .args(["--user", "--no-pager"])
            .args(args)
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `systemctl --user ARGS…`, failing the test unless it exits 0.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.systemctl(args);
        assert!(
            out.status.success(),
            "systemctl --user {args:?}: {}\nmanager log:\n{}",
            super::output_text(&out),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `systemctl --user show -p P1,P2… unit`, as a map.
    pub fn show(&self, unit: &str, props: &[&str]) -> BTreeMap<String, String> {
        self.ok(&["show", "-p", &props.join(","), unit])
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Wait until the oneshot `service` has run to its end (its main process exited and
    /// the unit is no longer activating), for up to `limit`: its `Result` and
    /// `ExecMainStatus` and what else `show` gives.
    pub fn wait_ran(&self, service: &str, limit: Duration) -> BTreeMap<String, String> {
        let props = [
            "ActiveState",
            "SubState",
            "Result",
            "ExecMainStatus",
            "ExecMainCode",
            "ExecMainExitTimestampMonotonic",
        ];
        let started = Instant::now();
        loop {
            let s = self.show(service, &props);
            let exited = s.get("ExecMainExitTimestampMonotonic").is_some_and(|t| t != "0");
            let settled = matches!(s.get("ActiveState").map(String::as_str), Some("inactive" | "failed"));
            if exited && settled {
                return s;
            }
            assert!(
                started.elapsed() < limit,
                "{service} did not run to its end within {limit:?}: {s:?}\nmanager log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The manager's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("manager.log")).unwrap_or_default()
    }
}

impl Drop for UserManager {
    fn drop(&mut self) {
        // SIGTERM: the manager stops its units and exits; SIGKILL after 10 s.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Whatever is left in its cgroups is killed, then the cgroups go, deepest first.
        for root in &self.cgroups {
            let mut dirs = vec![root.clone()];
            let mut i = 0;
            while i < dirs.len() {
                if let Ok(entries) = std::fs::read_dir(&dirs[i]) {
                    dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
                }
                i += 1;
            }
            for d in dirs.iter().rev() {
                for p in std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                {
                    if let Ok(p) = p.trim().parse::<i32>() {
                        let _ =
                            nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::Signal::SIGKILL);
                    }
                }
                for _ in 0..50 {
                    if std::fs::remove_dir(d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// The values of `key=` lines of a unit file.
pub fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// `systemd-analyze verify --man=no` of `units`, from `dir`: whether it passed and what it
/// said (a unit that passes makes it say nothing).
pub fn verify(units: &[&Path], dir: &Path) -> (bool, String) {
    let analyze = super::require_binary("systemd-analyze", "systemd");
    let out = Command::new(analyze)
        .args(["verify", "--man=no"])
        .args(units)
        .current_dir(dir)
        .output()
        .unwrap();
    (out.status.success(), super::output_text(&out))
}
