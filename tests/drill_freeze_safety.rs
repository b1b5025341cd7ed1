//! `lockwatch drill --freeze` keeps the team's worker safe: every refusal (PID 1, the drill
//! itself and its parents, a process that does not exist or may not be signalled, a path
//! that is no freezable cgroup, a cgroup holding the drill, a production target, missing
//! flags, no terminal to confirm at) exits 2 and leaves the target untouched (never
//! stopped), and so does each that applies to a pair of commands; the target is thawed at
//! once on SIGINT, and the drill thaws a cgroup it froze (every other way the drill can end
//! is `drill_freeze_deaths`). The
//! target here is a `sleep` child of the test, so a stop or continue shows in `waitpid`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::drill::{exited, served, text};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

/// A process to freeze: `sleep`, a child of the test.
fn sleeper() -> Child {
    Command::new("sleep").arg("300").spawn().unwrap()
}

/// The sleeper was never stopped nor continued (`waitpid` has nothing to report).
fn untouched(c: &Child) {
    let pid = Pid::from_raw(c.id() as i32);
    let flags = WaitPidFlag::WUNTRACED | WaitPidFlag::WCONTINUED | WaitPidFlag::WNOHANG;
    assert_eq!(
        waitpid(pid, Some(flags)).unwrap(),
        WaitStatus::StillAlive,
        "the target was touched"
    );
}

fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

/// `lockwatch drill -c config args…` to its end (the exporter runs in this process meanwhile).
async fn drill(config: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(BIN)
        .arg("drill")
        .arg("-c")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// Exit 2, saying `words`, and the sleeper untouched.
fn refused(out: &Output, words: &str, c: &Child) {
    exited(out, 2, words);
    let err = text(&out.stderr);
    assert!(err.contains(words), "expected `{words}` in: {err}");
    untouched(c);
}

/// The drill on `spec`, in the background, with `--for`.
fn spawn_drill(config: &Path, exporter: &str, spec: &str, hold: &str) -> Child {
    Command::new(BIN)
        .args(["drill", "-c"])
        .arg(config)
        .args([
            "--freeze",
            spec,
            "--exporter",
            exporter,
            "--yes",
            "--for",
            hold,
            "--observe",
            "1s",
            "--format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_state(pid: u32, want: impl Fn(char) -> bool, limit: Duration) -> Duration {
    let started = Instant::now();
    while !want(state(pid)) {
        assert!(started.elapsed() < limit, "state {} after {limit:?}", state(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

fn stopped(s: char) -> bool {
    s == 'T' || s == 't'
}

/// The v2 hierarchy (a `cgroup2` mount) on this machine.
fn v2_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .expect("no cgroup2 mount: tests run as root on a machine with cgroup v2")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_exits_2_and_leaves_the_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let mut c = sleeper();
    let own = std::process::id().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--freeze".into(), "pid:1".into()], "refusing to freeze PID 1"),
        (
            vec!["--freeze".into(), format!("pid:{own}")],
            "lockwatch itself or one of its parents",
        ),
        (
            vec!["--freeze".into(), "pid:2147483647".into()],
            "no process has that PID",
        ),
        (
            vec!["--freeze".into(), format!("cgroup:{}", dir.path().display())],
            "not a freezable cgroup",
        ),
        (
            vec!["--freeze".into(), format!("cgroup:{}", v2_root().display())],
            "not a freezable cgroup",
        ),
        (vec!["--freeze".into(), "docker:abc".into()], "pid:N"),
        (
            vec![
                "--freeze".into(),
                format!("pid:{}", c.id()),
                "--for".into(),
                "2h".into(),
            ],
            "between 1s and 1h",
        ),
        (
            vec![
                "--freeze".into(),
                format!("pid:{}", c.id()),
                "--namespace".into(),
                "nope".into(),
            ],
            "no namespace `nope`",
        ),
    ];
    for (args, words) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--exporter", &url, "--yes"]);
        refused(&drill(&config, &all).await, words, &c);
    }
    // Usage errors of the flags themselves.
    let pid = format!("pid:{}", c.id());
    let out = drill(&config, &["--freeze", &pid, "--yes"]).await;
    refused(&out, "--exporter", &c);
    let out = drill(&config, &["--freeze-cmd", "true", "--exporter", &url, "--yes"]).await;
    refused(&out, "--thaw-cmd", &c);
    // No terminal to ask at, and no --yes.
    let out = drill(&config, &["--freeze", &pid, "--exporter", &url]).await;
    refused(&out, "pass --yes", &c);
    // An exporter that does not follow the target's notifications cannot judge.
    let out = drill(
        &config,
        &["--freeze", &pid, "--exporter", "http://127.0.0.1:9", "--yes"],
    )
    .await;
    refused(&out, "refusing to freeze", &c);
    // A production target.
    let body = std::fs::read_to_string(&config).unwrap();
    let prod = dir.path().join("prod.toml");
    std::fs::write(
        &prod,
        body.replace("sample_interval", "environment = \"production\"\nsample_interval"),
    )
    .unwrap();
    let out = drill(&prod, &["--freeze", &pid, "--exporter", &url, "--yes"]).await;
    refused(&out, "--allow-production", &c);
    // The refusals that apply to a pair of commands too: a production target, and an
    // exporter that does not know the namespace.
    let (stop, cont) = (format!("kill -STOP {}", c.id()), format!("kill -CONT {}", c.id()));
    let cmds = [
        "--freeze-cmd",
        stop.as_str(),
        "--thaw-cmd",
        cont.as_str(),
        "--exporter",
        url.as_str(),
        "--yes",
    ];
    refused(&drill(&prod, &cmds).await, "--allow-production", &c);
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        format!("{body}\n[[namespace]]\nname = \"other\"\npattern = \"other:*\"\nttl = \"1s\"\n"),
    )
    .unwrap();
    let mut with_ns = cmds.to_vec();
    with_ns.extend(["--namespace", "other"]);
    refused(&drill(&other, &with_ns).await, "refusing to freeze", &c);
    // A process it may not signal: the drill run as nobody against root's sleeper.
    use std::os::unix::fs::PermissionsExt;
    for p in [dir.path(), config.as_path()] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN, "drill", "-c"])
        .arg(&config)
        .args(["--freeze", &pid, "--exporter", &url, "--yes"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("setpriv (util-linux) runs the drill as another user");
    refused(&out, "may not signal", &c);
    c.kill().unwrap();
    c.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cgroup_holding_the_drill_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let c = sleeper();
    // The drill moves itself into a cgroup of its own (a shell that joins it, then execs the
    // drill), and is asked to freeze that cgroup; nothing else is in it.
    let root = v2_root();
    let group = root.join(format!("lockwatch-self-{}", std::process::id()));
    std::fs::create_dir(&group).unwrap();
    let line = format!(
        "echo $$ > {g}/cgroup.procs && exec {BIN} drill -c {c} --freeze cgroup:{g} --exporter {url} --yes",
        g = group.display(),
        c = config.display()
    );
    let out = tokio::process::Command::new("sh")
        .args(["-c", &line])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    std::fs::remove_dir(&group).unwrap();
    refused(&out, "freezing it would stop the system or the drill itself", &c);
    let mut c = c;
    c.kill().unwrap();
    c.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_thaws_at_once_and_the_report_says_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let mut c = sleeper();
    let d = spawn_drill(&config, &url, &format!("pid:{}", c.id()), "30s");
    wait_state(c.id(), stopped, Duration::from_secs(10));
    kill(Pid::from_raw(d.id() as i32), Signal::SIGINT).unwrap();
    let thawed = wait_state(c.id(), |s| !stopped(s), Duration::from_secs(5));
    assert!(thawed < Duration::from_secs(2), "thawed {thawed:?} after SIGINT");
    let out = d.wait_with_output().unwrap();
    exited(&out, 1, "interrupted");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["interrupted"], true, "{report}");
    assert_eq!(report["verdict"], "not_exercised", "{report}");
    c.kill().unwrap();
    c.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cgroup_is_frozen_as_a_whole_and_thawed() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let mut c = sleeper();
    let group = v2_root().join(format!("lockwatch-freeze-{}", std::process::id()));
    std::fs::create_dir(&group).unwrap();
    std::fs::write(group.join("cgroup.procs"), c.id().to_string()).unwrap();
    let spec = format!("cgroup:{}", group.display());
    let d = spawn_drill(&config, &url, &spec, "2s");
    let frozen = || {
        std::fs::read_to_string(group.join("cgroup.events"))
            .unwrap()
            .contains("frozen 1")
    };
    let started = Instant::now();
    while !frozen() {
        assert!(started.elapsed() < Duration::from_secs(10), "never frozen");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = d.wait_with_output().unwrap();
    assert!(!frozen(), "still frozen after the drill");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["method"], "the cgroup v2 freezer", "{report}");
    assert_eq!(report["verdict"], "not_exercised", "{report}");
    assert!(report["what"].as_str().unwrap().contains("1 process"), "{report}");
    exited(&out, 1, "not exercised");
    c.kill().unwrap();
    c.wait().unwrap();
    let _ = std::fs::remove_dir(&group);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_yes_it_names_the_process_and_asks_first() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, url) = served(dir.path()).await;
    let mut c = sleeper();
    // At a terminal (`script` gives the drill one), answered "n".
    let line = format!(
        "{BIN} drill -c {} --namespace drill --freeze pid:{} --exporter {url}",
        config.display(),
        c.id()
    );
    let mut s = tokio::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script (bsdutils) gives the drill a terminal");
    let mut stdin = s.stdin.take().unwrap();
    stdin.write_all(b"n\n").await.unwrap();
    let mut stdout = s.stdout.take().unwrap();
    let reading = tokio::spawn(async move {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out).await;
        out
    });
    let status = tokio::time::timeout(Duration::from_secs(30), s.wait())
        .await
        .unwrap()
        .unwrap();
    drop(stdin);
    let said = reading.await.unwrap();
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("freeze process {} (sleep 300) for 3s", c.id())) && said.contains("[y/N]"),
        "{said}"
    );
    assert!(said.contains("not run: the drill was not confirmed"), "{said}");
    untouched(&c);
    c.kill().unwrap();
    c.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_the_drill_reads_is_never_frozen() {
    let dir = tempfile::tempdir().unwrap();
    let (_r, config, _s, _url) = served(dir.path()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serve = Command::new(BIN)
        .args(["serve", "-c"])
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "serve did not listen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exporter = format!("http://127.0.0.1:{port}");
    let pid = format!("pid:{}", serve.id());
    let out = drill(&config, &["--freeze", &pid, "--exporter", &exporter, "--yes"]).await;
    refused(&out, "it serves the exporter", &serve);
    let mut serve = serve;
    serve.kill().unwrap();
    serve.wait().unwrap();
}
