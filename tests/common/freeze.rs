//! The application side of the freeze tests: two real payout workers contending for
//! `lock:payout:batch-7` on a real lock library (`tests/workers/`), and the cgroups (v1 freezer,
//! v2) a worker is frozen through. The workers run from `target/test-tools` (`scripts/setup.sh
//! test`); without them the test fails saying so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The lock key both libraries' workers use.
pub const KEY: &str = "lock:payout:batch-7";
/// The list each paid job is pushed to, as `NAME:<job#>`.
pub const PAYOUTS: &str = "payouts:done";
/// The list each paid item is pushed to (`--items`, `fenced`).
pub const ITEMS: &str = "payouts:items";

/// The lock library a worker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// PyPI python-redis-lock 4.0.1, with its renewal thread.
    PythonRedisLock,
    /// PyPI redis 8.1.0's `Lock`, with an extend thread of the worker's.
    RedisPy,
    /// npm redlock 5.0.0-beta.2 on ioredis 6.0.0, `using` with automatic extension.
    NodeRedlock,
}

impl Lib {
    pub fn name(self) -> &'static str {
        match self {
            Lib::PythonRedisLock => "python-redis-lock",
            Lib::RedisPy => "redis-py",
            Lib::NodeRedlock => "redlock",
        }
    }
}

fn tools() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-tools")
}

fn workers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/workers")
}

const INSTALL: &str = "run `scripts/setup.sh test` (or `make test`), which installs them";

/// The command that runs a worker of `lib`, or fail the test saying how to install what it needs.
fn program(lib: Lib) -> Command {
    match lib {
        Lib::PythonRedisLock | Lib::RedisPy => {
            let python = tools().join("venv/bin/python");
            let ok = Command::new(&python)
                .args(["-c", "import redis, redis_lock, pythonjsonlogger"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "PyPI redis, python-redis-lock and python-json-logger are not in {}: {INSTALL}",
                tools().join("venv").display()
            );
            let mut c = Command::new(python);
            c.arg(workers_dir().join("payout_worker.py"))
                .args(["--library", lib.name()]);
            c
        }
        Lib::NodeRedlock => {
            let node = super::require_binary("node", "nodejs");
            let modules = tools().join("node/node_modules");
            assert!(
                modules.join("redlock").is_dir() && modules.join("ioredis").is_dir(),
                "npm redlock and ioredis are not in {}: {INSTALL}",
                modules.display()
            );
            let mut c = Command::new(node);
            c.arg(workers_dir().join("payout_worker.js")).env("NODE_PATH", modules);
            c
        }
    }
}

/// One line a worker printed: `acquired` (with the token it wrote), `released` or `lost`.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: String,
    pub token: Option<String>,
    /// When the test read it, ms since the Unix epoch (the clock the exporter's history uses).
    pub at_ms: i64,
    pub at: Instant,
}

struct Worker {
    name: String,
    child: Child,
    events: Arc<Mutex<Vec<Event>>>,
    stderr: PathBuf,
    log: PathBuf,
}

/// Two payout workers, `w1` and `w2`, contending for [`KEY`]; killed when dropped.
pub struct Workers {
    lib: Lib,
    workers: Vec<Worker>,
    conn: Mutex<redis::Connection>,
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One worker process, its stdout read into events as it prints them.
#[allow(clippy::too_many_arguments)]
fn spawn(
    program: Lib,
    name: &str,
    behavior: &str,
    extra: &[&str],
    redis_url: &str,
    dir: &Path,
    ttl_s: f64,
    job_s: f64,
) -> Worker {
    let log = dir.join(format!("{name}.log"));
    let stderr = dir.join(format!("{name}.stderr"));
    let mut child = self::program(program)
        .args(["--behavior", behavior, "--url", redis_url, "--name", name])
        .args(["--ttl", &ttl_s.to_string(), "--job", &job_s.to_string()])
        .args(extra)
        .arg("--log")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{} worker: {e}: {INSTALL}", program.name()));
    let events = Arc::new(Mutex::new(Vec::new()));
    let (out, seen) = (child.stdout.take().unwrap(), events.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let mut words = line.split_whitespace();
            let kind = words.next().unwrap_or_default().to_string();
            let token = words.nth(1).map(str::to_string);
            let (at_ms, at) = (now_ms(), Instant::now());
            seen.lock().unwrap().push(Event { kind, token, at_ms, at });
        }
    });
    Worker {
        name: name.to_string(),
        child,
        events,
        stderr,
        log,
    }
}

impl Workers {
    /// Start two workers of `program` with `behavior` (`raise`, `swallow`, `plain-del`) on the
    /// Redis at `redis_url`, each logging JSON to `dir/<name>.log` (stderr to
    /// `dir/<name>.stderr`), with a lock TTL of `ttl_s` and jobs of `job_s` seconds.
    pub fn start(program: Lib, behavior: &str, redis_url: &str, dir: &Path, ttl_s: f64, job_s: f64) -> Workers {
        let conn = redis::Client::open(redis_url).unwrap().get_connection().unwrap();
        let workers = ["w1", "w2"]
            .iter()
            .map(|name| spawn(program, name, behavior, &[], redis_url, dir, ttl_s, job_s))
            .collect();
        Workers {
            lib: program,
            workers,
            conn: Mutex::new(conn),
        }
    }

    /// Start `w1` with `behaviors[0]`, and once it holds the lock `w2` with `behaviors[1]`,
    /// both with the worker arguments `extra` (`--items`, `--step S`): `w1` is the holder.
    pub fn start_mixed(
        program: Lib,
        behaviors: [&str; 2],
        extra: &[&str],
        redis_url: &str,
        dir: &Path,
        ttl_s: f64,
        job_s: f64,
    ) -> Workers {
        let conn = redis::Client::open(redis_url).unwrap().get_connection().unwrap();
        let first = spawn(program, "w1", behaviors[0], extra, redis_url, dir, ttl_s, job_s);
        let mut workers = Workers {
            lib: program,
            workers: vec![first],
            conn: Mutex::new(conn),
        };
        let w1 = workers.pids()[0];
        workers.wait(Duration::from_secs(20), "w1 holding the lock", || {
            (workers.holder_now() == Some(w1)).then_some(())
        });
        let second = spawn(program, "w2", behaviors[1], extra, redis_url, dir, ttl_s, job_s);
        workers.workers.push(second);
        workers
    }

    fn worker(&self, pid: i32) -> &Worker {
        self.workers
            .iter()
            .find(|w| w.child.id() as i32 == pid)
            .unwrap_or_else(|| panic!("no worker with pid {pid}"))
    }

    pub fn pids(&self) -> Vec<i32> {
        self.workers.iter().map(|w| w.child.id() as i32).collect()
    }

    /// The worker's name (`w1`, `w2`).
    pub fn name(&self, pid: i32) -> &str {
        &self.worker(pid).name
    }

    /// The other worker's pid.
    pub fn other(&self, pid: i32) -> i32 {
        self.pids()
            .into_iter()
            .find(|&p| p != pid)
            .unwrap_or_else(|| panic!("no worker besides {pid}"))
    }

    /// Every line the worker printed so far.
    pub fn events(&self, pid: i32) -> Vec<Event> {
        self.worker(pid).events.lock().unwrap().clone()
    }

    /// Its acquisitions so far: the number of its current (or last) job.
    pub fn jobs(&self, pid: i32) -> usize {
        self.events(pid).iter().filter(|e| e.kind == "acquired").count()
    }

    /// The paths of the workers' logs.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.workers.iter().map(|w| w.log.clone()).collect()
    }

    /// The value of [`KEY`] now.
    pub fn value(&self) -> Option<String> {
        redis::cmd("GET")
            .arg(KEY)
            .query(&mut *self.conn.lock().unwrap())
            .unwrap()
    }

    /// The pid of the worker whose last acquisition wrote the value [`KEY`] holds now.
    pub fn holder_now(&self) -> Option<i32> {
        let value = self.value()?;
        self.workers.iter().find_map(|w| {
            let events = w.events.lock().unwrap();
            let last = events.iter().rev().find(|e| e.kind == "acquired")?;
            (last.token.as_deref() == Some(value.as_str())).then_some(w.child.id() as i32)
        })
    }

    /// The pid of the worker holding the lock, waiting until one does.
    pub fn holder(&self, timeout: Duration) -> i32 {
        self.wait(timeout, "a worker holding the lock", || self.holder_now())
    }

    /// The next worker to acquire the lock from now on, once the key holds its token: its pid
    /// and when it printed `acquired`.
    pub fn next_holder(&self, timeout: Duration) -> (i32, Instant) {
        let before: Vec<usize> = self.pids().iter().map(|&p| self.jobs(p)).collect();
        self.wait(timeout, "the next acquisition", || {
            let pid = self.holder_now()?;
            let i = self.pids().iter().position(|&p| p == pid)?;
            let events = self.events(pid);
            let last = events.iter().rev().find(|e| e.kind == "acquired")?;
            (self.jobs(pid) > before[i]).then_some((pid, last.at))
        })
    }

    /// Wait until `f` gives a value, polling every 20 ms, or fail with what the workers did.
    pub fn wait<T>(&self, timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out after {timeout:?} waiting for {what}\n{}",
                self.report()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `payouts:done` list, oldest first.
    pub fn payouts(&self, conn: &mut redis::Connection) -> Vec<String> {
        redis::cmd("LRANGE").arg(PAYOUTS).arg(0).arg(-1).query(conn).unwrap()
    }

    /// The `payouts:items` list (`NAME:<job#>:<step#>[:<token>]`), oldest first.
    pub fn items(&self, conn: &mut redis::Connection) -> Vec<String> {
        redis::cmd("LRANGE").arg(ITEMS).arg(0).arg(-1).query(conn).unwrap()
    }

    /// What each worker printed, logged and wrote on stderr, for failure messages.
    pub fn report(&self) -> String {
        let mut out = format!("{} workers; {KEY} = {:?}\n", self.lib.name(), self.value());
        for w in &self.workers {
            let events = w.events.lock().unwrap();
            out += &format!("{} (pid {}):\n", w.name, w.child.id());
            for e in events.iter() {
                out += &format!("  {} {} {}\n", e.at_ms, e.kind, e.token.as_deref().unwrap_or(""));
            }
            out += &format!(
                "  log:\n{}  stderr:\n{}",
                std::fs::read_to_string(&w.log).unwrap_or_default(),
                std::fs::read_to_string(&w.stderr).unwrap_or_default()
            );
        }
        out
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let pid = w.child.id() as i32;
            let _ = w.child.kill();
            // A task frozen by a v1 freezer does not die before it is thawed.
            thaw_test_cgroups_of(pid);
            let _ = w.child.wait();
        }
    }
}

/// A cgroup made for one test, `lockwatch-test-<unique>` in a v2 hierarchy or the v1 freezer
/// hierarchy, holding the processes moved into it (all their threads) and those they start
/// after. Dropped: thawed, its processes moved back where the first one came from, removed.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    v2: bool,
    /// Where the first process moved in was before.
    home: PathBuf,
}

static CGROUPS: AtomicU32 = AtomicU32::new(0);

/// The mount point of the hierarchy with `fstype` (`cgroup2`, or `cgroup` with `option`).
fn mount_of(fstype: &str, option: Option<&str>) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let ok = f.len() >= 4 && f[2] == fstype && option.is_none_or(|o| f[3].split(',').any(|x| x == o));
        ok.then(|| PathBuf::from(f[1]))
    })
}

/// The path, relative to its hierarchy, of `pid`'s cgroup in the v2 hierarchy (`0::/…`) or
/// the v1 hierarchy with `controller`.
fn cgroup_of(pid: i32, controller: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let ok = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        ok.then(|| path.to_string())
    })
}

/// Thaw every test cgroup `pid` is in (v2 `cgroup.freeze`, v1 `freezer.state`).
fn thaw_test_cgroups_of(pid: i32) {
    for (mount, controller, file, thawed) in [
        (mount_of("cgroup2", None), None, "cgroup.freeze", "0"),
        (
            mount_of("cgroup", Some("freezer")),
            Some("freezer"),
            "freezer.state",
            "THAWED",
        ),
    ] {
        if let (Some(mount), Some(rel)) = (mount, cgroup_of(pid, controller))
            && rel.contains("lockwatch-test-")
        {
            let _ = std::fs::write(mount.join(rel.trim_start_matches('/')).join(file), thawed);
        }
    }
}

impl Cgroup {
    /// A new cgroup in the v2 hierarchy (the `cgroup2` mount), with `pid` moved into it.
    pub fn v2(pid: i32) -> Cgroup {
        let mount = mount_of("cgroup2", None)
            .unwrap_or_else(|| panic!("no cgroup v2 hierarchy: /proc/mounts has no `cgroup2` mount"));
        Cgroup::make(mount, true, pid)
    }

    /// A new cgroup in the v1 freezer hierarchy (the `cgroup` mount with `freezer`), with `pid`
    /// moved into it.
    pub fn v1(pid: i32) -> Cgroup {
        let mount = mount_of("cgroup", Some("freezer")).unwrap_or_else(|| {
            panic!("no cgroup v1 freezer hierarchy: /proc/mounts has no `cgroup` mount with `freezer`")
        });
        Cgroup::make(mount, false, pid)
    }

    fn make(mount: PathBuf, v2: bool, pid: i32) -> Cgroup {
        let rel = cgroup_of(pid, if v2 { None } else { Some("freezer") })
            .unwrap_or_else(|| panic!("no such process {pid}, or it is in no cgroup of {}", mount.display()));
        let home = mount.join(rel.trim_start_matches('/'));
        let name = format!(
            "lockwatch-test-{}-{}-{}",
            std::process::id(),
            CGROUPS.fetch_add(1, Ordering::SeqCst),
            now_ms()
        );
        let path = mount.join(name);
        std::fs::create_dir(&path)
            .unwrap_or_else(|e| panic!("mkdir {}: {e} (the freeze tests run as root)", path.display()));
        let cg = Cgroup { path, v2, home };
        cg.add(pid);
        cg
    }

    /// Move `pid`, all its threads, into this cgroup.
    pub fn add(&self, pid: i32) {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.path.display()));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// The processes in it now.
    pub fn procs(&self) -> Vec<i32> {
        procs_in(&self.path)
    }
}

fn procs_in(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let (file, thawed) = if self.v2 {
            ("cgroup.freeze", "0")
        } else {
            ("freezer.state", "THAWED")
        };
        let _ = std::fs::write(self.path.join(file), thawed);
        let home = if self.home.is_dir() {
            self.home.clone()
        } else {
            self.path.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let started = Instant::now();
        loop {
            for pid in procs_in(&self.path) {
                let _ = std::fs::write(home.join("cgroup.procs"), pid.to_string());
            }
            if std::fs::remove_dir(&self.path).is_ok() || started.elapsed() > Duration::from_secs(5) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
