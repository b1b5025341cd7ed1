//! Whatever happens to `lockwatch drill --freeze`, the target is thawed: the drill SIGKILLed,
//! every process of its cgroup killed (`cgroup.kill`), its process group or session killed
//! (each at once: the watchdog, outside all of them, sees its pipe close), the drill
//! SIGSTOPped or its cgroup frozen (v2 and v1; by `--for` + 2 s after the freeze landed), or
//! the watchdog alone SIGKILLed (a process at once: the kernel ends the watchdog's ptrace stop;
//! a cgroup at `--for`, by the drill itself, which says so). Each case for a threaded process
//! and a cgroup v2, some for a pair of commands; a freeze command slower than `--for` undone
//! when it lands; a thaw command that fails (exit 3, then `--thaw`). Judged by the target's
//! real state: `/proc/PID/stat` and `cgroup.events`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::drill::{served, text};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const HOLD: Duration = Duration::from_secs(3);
/// What the docs promise for a death that kills the drill.
const AT_ONCE: Duration = Duration::from_secs(1);
/// The watchdog's grace after `--for`, and a margin for a loaded host.
const GRACE: Duration = Duration::from_secs(2);
const SLACK: Duration = Duration::from_millis(1500);

fn mount_of(fs: &str, opt: &str) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&fs) && (opt.is_empty() || f[3].split(',').any(|o| o == opt))).then(|| PathBuf::from(f[1]))
    })
}

fn v2_root() -> PathBuf {
    mount_of("cgroup2", "").expect("no cgroup2 mount: these tests run as root with cgroup v2")
}

fn v1_freezer() -> PathBuf {
    mount_of("cgroup", "freezer").expect("no cgroup v1 freezer mount: these tests run as root on a host with one")
}

fn state(pid: i32) -> char {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 2..].chars().next())
        .unwrap_or('X')
}

fn make_group(root: &Path, tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let g = root.join(format!("lockwatch-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir(&g).unwrap();
    g
}

/// Empty a cgroup (thawed, its processes killed) and remove it.
fn remove_group(g: &Path) {
    let _ = std::fs::write(g.join("cgroup.freeze"), "0");
    let _ = std::fs::write(g.join("freezer.state"), "THAWED");
    let started = Instant::now();
    while std::fs::remove_dir(g).is_err() && started.elapsed() < Duration::from_secs(5) {
        for p in std::fs::read_to_string(g.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
        {
            if let Ok(p) = p.trim().parse::<i32>() {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the drill freezes: a process of four threads, alone or in a cgroup v2 of its own.
enum Worker {
    Process(Child),
    Cgroup(Child, PathBuf),
}

impl Worker {
    fn start(in_cgroup: bool) -> Worker {
        let child = Command::new("python3")
            .args([
                "-c",
                "import threading,time\nfor _ in range(3): threading.Thread(target=time.sleep,args=(300,),daemon=True).start()\ntime.sleep(300)",
            ])
            .spawn()
            .expect("python3 runs the worker");
        match in_cgroup {
            false => Worker::Process(child),
            true => {
                let g = make_group(&v2_root(), "worker");
                std::fs::write(g.join("cgroup.procs"), child.id().to_string()).unwrap();
                Worker::Cgroup(child, g)
            }
        }
    }

    fn spec(&self) -> String {
        match self {
            Worker::Process(c) => format!("pid:{}", c.id()),
            Worker::Cgroup(_, g) => format!("cgroup:{}", g.display()),
        }
    }

    fn frozen(&self) -> bool {
        match self {
            Worker::Process(c) => matches!(state(c.id() as i32), 'T' | 't'),
            Worker::Cgroup(_, g) => std::fs::read_to_string(g.join("cgroup.events"))
                .unwrap_or_default()
                .contains("frozen 1"),
        }
    }

    /// How long until `frozen()` is `want`, failing past `limit`.
    fn wait(&self, want: bool, limit: Duration, what: &str) -> Duration {
        let started = Instant::now();
        while self.frozen() != want {
            assert!(
                started.elapsed() < limit,
                "{what}: {} still {} after {limit:?}",
                self.spec(),
                if want { "running" } else { "frozen" }
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        match self {
            Worker::Process(c) => {
                let _ = c.kill();
                let _ = c.wait();
            }
            Worker::Cgroup(c, g) => {
                let _ = c.kill();
                let _ = c.wait();
                remove_group(g);
            }
        }
    }
}

/// A drill in a session of its own, in a cgroup v2 and a v1 freezer cgroup of its own.
struct Drill {
    child: Option<Child>,
    v2: PathBuf,
    v1: PathBuf,
}

impl Drill {
    fn start(config: &Path, exporter: &str, args: &[&str]) -> Drill {
        let v2 = make_group(&v2_root(), "drill");
        let v1 = make_group(&v1_freezer(), "drill");
        let line = format!(
            "echo $$ > {}/cgroup.procs && echo $$ > {}/cgroup.procs && exec \"$@\"",
            v2.display(),
            v1.display()
        );
        let child = Command::new("setsid")
            .args(["sh", "-c", &line, "sh", BIN, "drill", "-c"])
            .arg(config)
            .args(["--exporter", exporter, "--yes", "--observe", "1s", "--format", "json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("setsid (util-linux) starts the drill");
        Drill {
            child: Some(child),
            v2,
            v1,
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Its watchdog: the child running `drill-watchdog`.
    fn watchdog(&self) -> i32 {
        let started = Instant::now();
        loop {
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().nth(1)?.parse::<i32>().ok());
                if ppid == Some(self.pid()) && text(&cmd).contains("drill-watchdog") {
                    return pid;
                }
            }
            assert!(started.elapsed() < Duration::from_secs(5), "no watchdog");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Let it go on (after a stop or a freeze), and its output and exit code.
    fn finish(&mut self) -> (serde_json::Value, String, Option<i32>) {
        let _ = std::fs::write(self.v2.join("cgroup.freeze"), "0");
        let _ = std::fs::write(self.v1.join("freezer.state"), "THAWED");
        let _ = kill(Pid::from_raw(self.pid()), Signal::SIGCONT);
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (report, text(&out.stderr), out.status.code())
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = std::fs::write(self.v2.join("cgroup.freeze"), "0");
            let _ = c.kill();
            let _ = c.wait();
        }
        remove_group(&self.v2);
        remove_group(&self.v1);
    }
}

#[derive(Debug, Clone, Copy)]
enum Death {
    Sigkill,
    CgroupKill,
    GroupKill,
    SessionKill,
    Sigstop,
    CgroupFrozenV2,
    CgroupFrozenV1,
    WatchdogKilled,
}

impl Death {
    fn strike(self, d: &Drill) {
        let pid = Pid::from_raw(d.pid());
        match self {
            Death::Sigkill => kill(pid, Signal::SIGKILL).unwrap(),
            Death::CgroupKill => std::fs::write(d.v2.join("cgroup.kill"), "1").unwrap(),
            Death::GroupKill => killpg(pid, Signal::SIGKILL).unwrap(),
            Death::SessionKill => {
                for e in std::fs::read_dir("/proc").unwrap().flatten() {
                    let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                        continue;
                    };
                    let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                    let sid = stat
                        .rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().nth(3)?.parse::<i32>().ok());
                    if sid == Some(d.pid()) {
                        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                    }
                }
            }
            Death::Sigstop => kill(pid, Signal::SIGSTOP).unwrap(),
            Death::CgroupFrozenV2 => std::fs::write(d.v2.join("cgroup.freeze"), "1").unwrap(),
            Death::CgroupFrozenV1 => std::fs::write(d.v1.join("freezer.state"), "FROZEN").unwrap(),
            Death::WatchdogKilled => kill(Pid::from_raw(d.watchdog()), Signal::SIGKILL).unwrap(),
        }
    }

    fn kills_the_drill(self) -> bool {
        matches!(
            self,
            Death::Sigkill | Death::CgroupKill | Death::GroupKill | Death::SessionKill
        )
    }
}

const DEATHS: [Death; 8] = [
    Death::Sigkill,
    Death::CgroupKill,
    Death::GroupKill,
    Death::SessionKill,
    Death::Sigstop,
    Death::CgroupFrozenV2,
    Death::CgroupFrozenV1,
    Death::WatchdogKilled,
];

/// Each death for a fresh worker: thawed within the bound the docs promise.
async fn each_death_thaws(in_cgroup: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let hold = format!("{}s", HOLD.as_secs());
    for death in DEATHS {
        let worker = Worker::start(in_cgroup);
        let spec = worker.spec();
        let mut drill = Drill::start(&config, &url, &["--freeze", &spec, "--for", &hold]);
        worker.wait(true, Duration::from_secs(15), "the freeze");
        let seen_frozen = Instant::now();
        if let Death::WatchdogKilled = death {
            // Past its word that the freeze landed (killed before it, the drill thaws at once
            // and says the freeze failed).
            std::thread::sleep(Duration::from_millis(300));
        }
        death.strike(&drill);
        let struck = Instant::now();
        let what = format!("{death:?} of the drill freezing {spec}");
        if death.kills_the_drill() {
            let after = worker.wait(false, Duration::from_secs(10), &what);
            eprintln!("{what}: thawed {after:?} after");
            assert!(after < AT_ONCE, "{what}: thawed {after:?} after, not at once");
            continue;
        }
        let ptrace_released = matches!((death, &worker), (Death::WatchdogKilled, Worker::Process(_)));
        let limit = match ptrace_released {
            true => AT_ONCE,
            false => HOLD + GRACE + SLACK,
        };
        worker.wait(false, limit + Duration::from_secs(5), &what);
        let thawed = seen_frozen.elapsed();
        eprintln!(
            "{what}: thawed {:?} after, {thawed:?} after the freeze was seen",
            struck.elapsed()
        );
        if ptrace_released {
            assert!(
                struck.elapsed() < AT_ONCE,
                "{what}: thawed {:?} after",
                struck.elapsed()
            );
        } else {
            assert!(
                thawed >= HOLD - Duration::from_millis(300) && thawed < limit,
                "{what}: thawed {thawed:?} after the freeze"
            );
        }
        let (report, err, code) = drill.finish();
        match death {
            Death::WatchdogKilled => {
                assert_eq!(report["thaw"]["watchdog_died"], true, "{what}: {report}\n{err}");
                let by = if ptrace_released { "kernel" } else { "drill" };
                assert_eq!(report["thaw"]["by"], by, "{what}: {report}");
                assert!(
                    report["notes"].to_string().contains("the watchdog died"),
                    "{what}: {report}"
                );
            }
            _ => {
                assert!(err.contains("--for and its grace have passed"), "{what}: {err}");
                assert_eq!(report["thaw"]["by"], "watchdog", "{what}: {report}\n{err}");
            }
        }
        let frozen_ms = report["thaw"]["frozen_ms"].as_u64().unwrap_or(0);
        assert!(
            frozen_ms > 0 && frozen_ms < (limit + Duration::from_secs(1)).as_millis() as u64,
            "{what}: {report}"
        );
        assert_eq!(code, Some(1), "{what}: not exercised, exit 1: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_is_thawed_whatever_happens_to_the_drill() {
    each_death_thaws(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cgroup_is_thawed_whatever_happens_to_the_drill() {
    each_death_thaws(true).await;
}

/// A process stopped and continued by the commands `kill -STOP` / `kill -CONT`: each death
/// that kills the drill, and its stop, ends with the thaw command run by the watchdog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_thaw_whatever_happens_to_the_drill() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let hold = format!("{}s", HOLD.as_secs());
    for death in [Death::Sigkill, Death::CgroupKill, Death::SessionKill, Death::Sigstop] {
        let worker = Worker::start(false);
        let Worker::Process(c) = &worker else { unreachable!() };
        let (freeze, thaw) = (format!("kill -STOP {}", c.id()), format!("kill -CONT {}", c.id()));
        let mut drill = Drill::start(
            &config,
            &url,
            &["--freeze-cmd", &freeze, "--thaw-cmd", &thaw, "--for", &hold],
        );
        worker.wait(true, Duration::from_secs(15), "the freeze");
        let seen = Instant::now();
        death.strike(&drill);
        let what = format!("{death:?} of the drill running `{freeze}`");
        match death.kills_the_drill() {
            true => {
                let after = worker.wait(false, Duration::from_secs(10), &what);
                eprintln!("{what}: thawed {after:?} after");
                assert!(after < AT_ONCE, "{what}: thawed {after:?} after");
            }
            false => {
                worker.wait(false, HOLD + GRACE + SLACK, &what);
                assert!(
                    seen.elapsed() >= HOLD - Duration::from_millis(300),
                    "{what}: {:?}",
                    seen.elapsed()
                );
                let (report, err, _) = drill.finish();
                assert_eq!(report["thaw"]["by"], "watchdog", "{what}: {report}\n{err}");
            }
        }
    }
}

/// A freeze command slower than `--for`, the drill SIGKILLed while it runs: the stop that
/// lands after is undone at once (seen by `waitpid` as a stop and a continue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_that_lands_after_the_drill_died_is_undone_at_once() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let worker = Worker::start(false);
    let Worker::Process(c) = &worker else { unreachable!() };
    let pid = Pid::from_raw(c.id() as i32);
    let freeze = format!("sleep 3; kill -STOP {pid}");
    let thaw = format!("kill -CONT {pid}");
    let drill = Drill::start(
        &config,
        &url,
        &["--freeze-cmd", &freeze, "--thaw-cmd", &thaw, "--for", "1s"],
    );
    // The watchdog runs the freeze command (after the witness's 1 s lead): the drill dies
    // while it sleeps.
    let started = Instant::now();
    while !running(&freeze) {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the freeze command never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Instant::now();
    kill(Pid::from_raw(drill.pid()), Signal::SIGKILL).unwrap();
    let wait_for = |flag: WaitPidFlag| {
        let started = Instant::now();
        loop {
            match waitpid(pid, Some(flag | WaitPidFlag::WNOHANG)).unwrap() {
                WaitStatus::StillAlive => {}
                s => return (s, Instant::now()),
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no {flag:?} within 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let (stop, stopped) = wait_for(WaitPidFlag::WUNTRACED);
    let (cont, continued) = wait_for(WaitPidFlag::WCONTINUED);
    let frozen_for = continued - stopped;
    assert!(matches!(stop, WaitStatus::Stopped(_, Signal::SIGSTOP)), "{stop:?}");
    assert_eq!(cont, WaitStatus::Continued(pid));
    assert!(
        stopped > killed,
        "the freeze landed before the drill died: the test did not test"
    );
    eprintln!("the freeze that landed after the drill died lasted {frozen_for:?}");
    assert!(frozen_for < AT_ONCE, "the late freeze lasted {frozen_for:?}");
}

/// Whether a process runs `sh -c line`.
fn running(line: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = text(&cmd);
        let args: Vec<&str> = cmd.split('\0').collect();
        args.len() >= 3 && args[0] == "sh" && args[1] == "-c" && args[2] == line
    })
}

/// A thaw command that fails: exit 3, the target and how to thaw it on stderr and in the
/// report, the worker really still stopped; `lockwatch drill --thaw pid:N` thaws it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_thaw_exits_3_and_thaw_then_thaws_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let worker = Worker::start(false);
    let Worker::Process(c) = &worker else { unreachable!() };
    let pid = c.id();
    let freeze = format!("kill -STOP {pid}");
    let mut drill = Drill::start(
        &config,
        &url,
        &[
            "--freeze-cmd",
            &freeze,
            "--thaw-cmd",
            "echo no such container >&2; exit 7",
            "--for",
            "1s",
        ],
    );
    let (report, err, code) = drill.finish();
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("THE THAW FAILED") && err.contains("no such container"),
        "{err}"
    );
    assert!(err.contains("thaw it by hand: echo no such container"), "{err}");
    assert!(
        report["thaw"]["failed"]
            .as_str()
            .unwrap_or("")
            .contains("exit status: 7"),
        "{report}"
    );
    assert_eq!(report["thaw"]["by"], "nobody", "{report}");
    assert_eq!(
        state(pid as i32),
        'T',
        "the worker is no longer stopped: the test did not test"
    );
    let out = Command::new(BIN)
        .args(["drill", "--thaw", &format!("pid:{pid}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    worker.wait(false, Duration::from_secs(1), "--thaw");
    // Nothing to thaw as asked: exit 2 for a spec, 3 for a cgroup that is not one.
    let out = Command::new(BIN)
        .args(["drill", "--thaw", "docker:x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = Command::new(BIN)
        .args(["drill", "--thaw", "cgroup:/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}

/// A watchdog that is itself stuck (stopped, as the drill is) holds its ptrace stop:
/// `--thaw pid:N` kills it, and the kernel resumes the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thaw_ends_the_ptrace_stop_of_a_stuck_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let worker = Worker::start(false);
    let spec = worker.spec();
    let drill = Drill::start(&config, &url, &["--freeze", &spec, "--for", "60s"]);
    worker.wait(true, Duration::from_secs(15), "the freeze");
    let watchdog = drill.watchdog();
    kill(Pid::from_raw(drill.pid()), Signal::SIGSTOP).unwrap();
    kill(Pid::from_raw(watchdog), Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(worker.frozen(), "still held");
    let out = Command::new(BIN).args(["drill", "--thaw", &spec]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("killed the drill watchdog {watchdog}")),
        "{}",
        text(&out.stderr)
    );
    worker.wait(false, Duration::from_secs(1), "--thaw");
}

/// The exporter knows while a drill holds something frozen: `lockwatch_drill_frozen` is 1
/// and the status page names it; when the drill and its watchdog die together over a cgroup
/// (nothing the kernel undoes), the freeze stays listed and goes overdue past `--for`, until
/// `lockwatch drill --thaw` thaws it and tells the exporter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_knows_while_a_drill_holds_a_freeze() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, s, url) = served(dir.path()).await;
    let labels = [("target", "staging"), ("namespace", "drill")];
    let frozen_is = |v: f64| move |m: &common::Metrics| m.get("lockwatch_drill_frozen", &labels) == Some(v);
    let status = || async {
        reqwest::get(format!("{url}/api/v1/status"))
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    };
    // A drill that ends as it should: 1 while frozen, 0 after. A process whose command line
    // holds a newline (the exporter refuses control characters: the drill sends spaces).
    let worker = Worker::start(false);
    let spec = worker.spec();
    let mut drill = Drill::start(&config, &url, &["--freeze", &spec, "--for", "2s"]);
    worker.wait(true, Duration::from_secs(15), "the freeze");
    s.wait_for(Duration::from_secs(2), "frozen 1", frozen_is(1.0)).await;
    let page = reqwest::get(format!("{url}/")).await.unwrap().text().await.unwrap();
    let path = spec.split_once(':').unwrap().1;
    assert!(page.contains("a drill froze") && page.contains(path), "{page}");
    drill.finish();
    s.wait_for(Duration::from_secs(2), "frozen 0", frozen_is(0.0)).await;
    drop(worker);

    // The drill and its watchdog killed together: the cgroup stays frozen, and listed.
    let worker = Worker::start(true);
    let spec = worker.spec();
    let drill = Drill::start(&config, &url, &["--freeze", &spec, "--for", "1s"]);
    worker.wait(true, Duration::from_secs(15), "the freeze");
    s.wait_for(Duration::from_secs(2), "frozen 1", frozen_is(1.0)).await;
    let watchdog = drill.watchdog();
    kill(Pid::from_raw(watchdog), Signal::SIGKILL).unwrap();
    kill(Pid::from_raw(drill.pid()), Signal::SIGKILL).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(worker.frozen(), "thawed: the test did not test");
    let st = status().await;
    let listed = &st["drill_freezes"][0];
    assert_eq!(listed["frozen"], spec.as_str(), "{st}");
    assert!(listed["overdue_s"].as_f64().unwrap_or(0.0) >= 1.0, "{st}");
    assert_eq!(listed["thaw_by_hand"], format!("lockwatch drill --thaw {spec}"), "{st}");
    let m = common::Metrics(
        reqwest::get(format!("{url}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    let due = m.get("lockwatch_drill_thaw_due_timestamp_seconds", &labels).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(now - due >= 1.0, "due {due}, now {now}");
    // Thawed by hand, and the exporter told.
    let out = Command::new(BIN)
        .args(["drill", "--thaw", &spec, "--exporter", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("1 freeze(s)"), "{}", text(&out.stderr));
    worker.wait(false, Duration::from_secs(1), "--thaw");
    s.wait_for(Duration::from_secs(2), "frozen 0", frozen_is(0.0)).await;
}

/// The exporter is told aside: one that takes the connection and never answers holds back
/// neither the thaw when the drill dies nor the watchdog's word (the watchdog run directly).
#[test]
fn an_exporter_that_never_answers_does_not_hold_the_thaw_back() {
    use std::io::{BufRead, BufReader, Write};
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || silent.incoming().take(8).flatten().collect::<Vec<_>>());
    let worker = Worker::start(false);
    let spec = worker.spec();
    let notice = serde_json::json!({
        "exporter": format!("http://127.0.0.1:{port}"), "id": "t-1", "target": "staging",
        "namespace": "drill", "frozen": spec, "what": "a worker", "for_ms": 60000,
        "thaw_by_hand": format!("lockwatch drill --thaw {spec}"),
    });
    let mut w = Command::new(BIN)
        .args([
            "drill-watchdog",
            "--hold-ms",
            "60000",
            "--thaw",
            &spec,
            "--notice",
            &notice.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(w.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("ready"));
    let mut stdin = w.stdin.take().unwrap();
    stdin.write_all(b"freeze\n").unwrap();
    let frozen = lines.next().unwrap().unwrap();
    assert!(frozen.contains("\"frozen\""), "{frozen}");
    assert!(worker.frozen());
    std::thread::sleep(Duration::from_millis(100));
    drop(stdin);
    let after = worker.wait(false, Duration::from_secs(10), "the drill's pipe closed");
    eprintln!("thawed {after:?} after the pipe closed, the exporter silent");
    assert!(after < AT_ONCE, "thawed {after:?} after the pipe closed");
    let _ = w.kill();
    let _ = w.wait();
    drop(held);
}
