//! The payout workers of `tests/workers/` on their real lock libraries, frozen past their
//! lock's TTL while the other worker takes the lock, then thawed: what the exporter (tailing
//! their JSON logs, watching the key) and Redis show for each behaviour. No drill: the freeze
//! is done here by hand, with SIGSTOP or through a cgroup (v2 `cgroup.freeze`, v1
//! `freezer.state`), which also proves `common::freeze::Cgroup`.
//!
//! - raise (python-redis-lock, redis-py, redlock): one refused renewal and one refused release
//!   counted as `not_owned`, the lost job not paid, the new owner's hold ends with its own release.
//! - swallow (python-redis-lock): nothing counted, the lost job paid beside the new owner's.
//! - plain-del (python-redis-lock): the woken worker's DEL ends the new owner's hold in the key's
//!   history, and another acquisition follows.
//!
//! The workers come from `scripts/setup.sh test` (target/test-tools); without them the test
//! fails saying so. Runs as root (cgroups).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::freeze::{Cgroup, Event, KEY, Lib, Workers, now_ms};
use common::{Metrics, Served};
use lockwatch::access::child::RedisChild;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::task::block_in_place;

const TTL: f64 = 2.0;
const JOB: f64 = 3.0;
const WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freeze {
    Sigstop,
    CgroupV2,
    CgroupV1,
}

/// A worker frozen and thawed, and what is needed to judge what followed.
struct Thawed {
    _r: RedisChild,
    _dir: tempfile::TempDir,
    conn: redis::Connection,
    s: Served,
    workers: Workers,
    victim: i32,
    other: i32,
    /// The victim's job that lost its lock.
    lost_job: usize,
    /// The other worker's job that took the lock over.
    taking_job: usize,
    /// Just before the thaw, ms since the Unix epoch.
    thawed_ms: i64,
}

fn config_text(dir: &Path) -> String {
    format!(
        "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nsample_interval = \"250ms\"\n\
         [[namespace]]\nname = \"payout\"\npattern = \"lock:payout:*\"\nttl = \"2s\"\n\
         [[logs]]\nname = \"payout\"\npath = \"{}/*.log\"\nstart_at = \"beginning\"\n",
        dir.display()
    )
}

fn not_owned(m: &Metrics, op: &str) -> f64 {
    m.get(
        "lockwatch_lock_events_total",
        &[("namespace", "payout"), ("op", op), ("outcome", "not_owned")],
    )
    .unwrap_or(0.0)
}

fn lines_read(m: &Metrics) -> f64 {
    ["matched", "ignored", "malformed"]
        .iter()
        .map(|r| {
            m.get("lockwatch_log_lines_total", &[("source", "payout"), ("result", r)])
                .unwrap_or(0.0)
        })
        .sum()
}

fn lines_in(paths: &[std::path::PathBuf]) -> usize {
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default().lines().count())
        .sum()
}

/// Write `value` to the cgroup's `file` and wait until `state` reads `want`.
fn set_and_wait(cg: &Cgroup, file: &str, value: &str, state: &str, want: &str) {
    std::fs::write(cg.path().join(file), value).unwrap();
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(cg.path().join(state)).unwrap();
        if text.lines().any(|l| l.trim() == want) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{state} never read `{want}`: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn freeze(how: Freeze, pid: i32) -> Option<Cgroup> {
    match how {
        Freeze::Sigstop => {
            kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
            None
        }
        Freeze::CgroupV2 => {
            let cg = Cgroup::v2(pid);
            assert_eq!(cg.procs(), [pid]);
            set_and_wait(&cg, "cgroup.freeze", "1", "cgroup.events", "frozen 1");
            Some(cg)
        }
        Freeze::CgroupV1 => {
            let cg = Cgroup::v1(pid);
            assert_eq!(cg.procs(), [pid]);
            set_and_wait(&cg, "freezer.state", "FROZEN", "freezer.state", "FROZEN");
            Some(cg)
        }
    }
}

fn thaw(pid: i32, cg: Option<&Cgroup>) {
    match cg {
        None => kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap(),
        Some(cg) if cg.is_v2() => set_and_wait(cg, "cgroup.freeze", "0", "cgroup.events", "frozen 0"),
        Some(cg) => set_and_wait(cg, "freezer.state", "THAWED", "freezer.state", "THAWED"),
    }
}

/// Two workers of `lib` with `behavior`, the exporter tailing their logs; the next worker to
/// take the lock frozen halfway through its job until the other has held the lock for 0.5 s
/// (and a TTL at least), then thawed; returned once the frozen worker has taken the lock again (its lost job is over)
/// and the exporter has read every line logged by then. The cgroup, if any, is checked and
/// removed after the thaw.
async fn freeze_and_thaw(lib: Lib, behavior: &str, how: Freeze) -> Thawed {
    let r = common::redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let s = Served::start(common::config(&r, &config_text(dir.path()))).await;
    s.wait_for(Duration::from_secs(5), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[]) == Some(1.0)
    })
    .await;
    let workers = Workers::start(lib, behavior, &r.url(), dir.path(), TTL, JOB);
    let (victim, acquired) = block_in_place(|| workers.next_holder(WAIT));
    let other = workers.other(victim);
    // Halfway through the job: the woken worker has half a job of work left.
    tokio::time::sleep((acquired + Duration::from_secs_f64(JOB / 2.0)).saturating_duration_since(Instant::now())).await;
    assert_eq!(workers.holder_now(), Some(victim), "{}", workers.report());
    let cg = freeze(how, victim);
    let frozen = Instant::now();
    let (lost_job, printed) = (workers.jobs(victim), workers.events(victim).len());
    block_in_place(|| {
        workers.wait(WAIT, "the other worker taking the lock over", || {
            (workers.holder_now() == Some(other)).then_some(())
        })
    });
    // Frozen for a TTL at least, and until the new owner has held the lock for 0.5 s.
    let until = (Instant::now() + Duration::from_millis(500)).max(frozen + Duration::from_secs_f64(TTL));
    tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
    assert_eq!(
        workers.events(victim).len(),
        printed,
        "the frozen worker ran\n{}",
        workers.report()
    );
    let taking_job = workers.jobs(other);
    // Taken before: the woken worker may print before a cgroup reads thawed.
    let thawed_ms = now_ms();
    thaw(victim, cg.as_ref());
    if let Some(cg) = cg {
        let path = cg.path().to_path_buf();
        assert_eq!(cg.procs(), [victim]);
        drop(cg);
        assert!(!path.exists(), "{} left behind", path.display());
    }
    block_in_place(|| {
        workers.wait(WAIT, "the woken worker's next job", || {
            (workers.jobs(victim) > lost_job).then_some(())
        })
    });
    let written = lines_in(&workers.logs()) as f64;
    s.wait_for(Duration::from_secs(10), "every line logged read", |m| {
        lines_read(m) >= written
    })
    .await;
    Thawed {
        conn: common::conn(&r),
        _r: r,
        _dir: dir,
        s,
        workers,
        victim,
        other,
        lost_job,
        taking_job,
        thawed_ms,
    }
}

impl Thawed {
    fn paid(&mut self, pid: i32, job: usize) -> bool {
        let entry = format!("{}:{job}", self.workers.name(pid));
        self.workers.payouts(&mut self.conn).contains(&entry)
    }

    /// The other worker's events from its taking acquisition on.
    fn taking_hold(&self) -> Vec<Event> {
        let events = self.workers.events(self.other);
        let at = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == "acquired")
            .nth(self.taking_job - 1)
            .map(|(i, _)| i)
            .unwrap();
        events[at..].to_vec()
    }

    /// Safe: the woken holder's renewal and release refused and counted, its job unpaid, the
    /// new owner's hold ended by its own release.
    async fn assert_refused_and_counted(&mut self) {
        self.s
            .wait_for(Duration::from_secs(5), "a refused renewal and release", |m| {
                not_owned(m, "renew") >= 1.0 && not_owned(m, "release") >= 1.0
            })
            .await;
        let m = self.s.metrics().await;
        let report = self.workers.report();
        assert_eq!(not_owned(&m, "renew"), 1.0, "{report}");
        assert_eq!(not_owned(&m, "release"), 1.0, "{report}");
        assert_eq!(not_owned(&m, "acquire"), 0.0, "{report}");
        assert!(
            !self.paid(self.victim, self.lost_job),
            "the lost job was paid\n{report}"
        );
        assert!(self.paid(self.other, self.taking_job), "{report}");
        let hold: Vec<String> = self.taking_hold().iter().take(2).map(|e| e.kind.clone()).collect();
        assert_eq!(hold, ["acquired", "released"], "the new owner's hold\n{report}");
        let woken: Vec<Event> = self.workers.events(self.victim);
        let after: Vec<&str> = woken
            .iter()
            .filter(|e| e.at_ms >= self.thawed_ms)
            .map(|e| e.kind.as_str())
            .collect();
        assert_eq!(after.first(), Some(&"lost"), "{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_redis_lock_raise_is_refused_and_counted() {
    let mut t = freeze_and_thaw(Lib::PythonRedisLock, "raise", Freeze::Sigstop).await;
    t.assert_refused_and_counted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_raise_is_refused_and_counted() {
    let mut t = freeze_and_thaw(Lib::RedisPy, "raise", Freeze::Sigstop).await;
    t.assert_refused_and_counted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_raise_is_refused_and_counted() {
    let mut t = freeze_and_thaw(Lib::NodeRedlock, "raise", Freeze::Sigstop).await;
    t.assert_refused_and_counted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_through_cgroup_v2_python_redis_lock_raise() {
    let mut t = freeze_and_thaw(Lib::PythonRedisLock, "raise", Freeze::CgroupV2).await;
    t.assert_refused_and_counted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_through_cgroup_v1_redlock_raise() {
    let mut t = freeze_and_thaw(Lib::NodeRedlock, "raise", Freeze::CgroupV1).await;
    t.assert_refused_and_counted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_redis_lock_swallow_carries_on_silently_and_pays_twice() {
    let mut t = freeze_and_thaw(Lib::PythonRedisLock, "swallow", Freeze::Sigstop).await;
    let m = t.s.metrics().await;
    let report = t.workers.report();
    for op in ["acquire", "renew", "release"] {
        assert_eq!(not_owned(&m, op), 0.0, "{op}\n{report}");
    }
    assert!(t.paid(t.victim, t.lost_job), "the lost job was not paid\n{report}");
    assert!(t.paid(t.other, t.taking_job), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_redis_lock_plain_del_deletes_the_new_owners_lock() {
    let mut t = freeze_and_thaw(Lib::PythonRedisLock, "plain-del", Freeze::Sigstop).await;
    let report = t.workers.report();
    // The woken worker's DEL, and the other's hold it fell into.
    let del = t
        .workers
        .events(t.victim)
        .into_iter()
        .find(|e| e.at_ms >= t.thawed_ms && e.kind == "released")
        .unwrap_or_else(|| panic!("no release after the thaw\n{report}"));
    let other = t.workers.events(t.other);
    let held = other
        .iter()
        .rev()
        .find(|e| e.at_ms <= del.at_ms)
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(
        held.kind, "acquired",
        "the other did not hold the lock at the DEL\n{report}"
    );

    let (status, _, body) = t.s.get(&format!("/api/v1/locks/history?key={KEY}")).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let tr = v["transitions"].as_array().unwrap();
    let near = |e: &Event, t: &serde_json::Value| (t["at_ms"].as_i64().unwrap() - e.at_ms).abs() <= 500;
    let i = tr
        .iter()
        .position(|x| x["kind"] == "released" && near(&del, x))
        .unwrap_or_else(|| panic!("no release at the DEL ({}) in {body}\n{report}", del.at_ms));
    let acquired = tr[..i]
        .iter()
        .rev()
        .find(|x| x["kind"] != "renewed")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(acquired["kind"], "acquired", "{body}");
    assert_eq!(acquired["owner_hash"], tr[i]["owner_hash"], "{body}");
    assert!(
        near(held, acquired),
        "the release ended another hold than the other worker's: {body}\n{report}"
    );
    assert!(
        tr[i + 1..].iter().any(|x| x["kind"] == "acquired"),
        "no acquisition after the DEL: {body}"
    );
    let m = t.s.metrics().await;
    for op in ["renew", "release"] {
        assert_eq!(not_owned(&m, op), 0.0, "{op}\n{report}");
    }
    assert!(t.paid(t.victim, t.lost_job), "{report}");
}

/// The Cgroup helper: a process moved in, a child it starts afterwards lands in the cgroup
/// too, and dropping it moves both back and removes the cgroup (v2 and v1 freezer).
#[test]
fn cgroups_take_later_children_and_clean_up() {
    for v2 in [true, false] {
        let mut sh = Command::new("sh")
            .args(["-c", "read x; sleep 30 & echo $!; wait"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = sh.id() as i32;
        let home = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let cg = if v2 { Cgroup::v2(pid) } else { Cgroup::v1(pid) };
        assert_eq!(cg.procs(), [pid]);
        use std::io::{BufRead, Write};
        writeln!(sh.stdin.as_mut().unwrap()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(sh.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let child: i32 = line.trim().parse().unwrap();
        let mut procs = cg.procs();
        procs.sort_unstable();
        assert_eq!(procs, [pid, child], "v2: {v2}");
        let path = cg.path().to_path_buf();
        drop(cg);
        assert!(!path.exists(), "{} left behind", path.display());
        assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(), home);
        assert_eq!(std::fs::read_to_string(format!("/proc/{child}/cgroup")).unwrap(), home);
        let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
        let _ = sh.kill();
        let _ = sh.wait();
    }
}
