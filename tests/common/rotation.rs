//! The rotation tests' harness: an application writing its log as a separate process
//! (`tests/clients/log_writer.py`: one handle kept open, lock failures numbered, SIGHUP to
//! reopen), logrotate itself run on a config the test writes, the records the files still
//! hold, and a `lockwatch serve` process on a config of the test's.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::logs::{NAMESPACES, Proc, not_owned, spawn_serve_with};

/// The writing application: a Python process with its log file open.
pub struct AppWriter {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl AppWriter {
    pub fn start(log: &Path) -> Self {
        let python = super::require_binary("python3", "python3");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/log_writer.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut w = AppWriter { child, stdin, stdout };
        w.ask("write 0"); // the file is open
        w
    }

    /// Send a command; the records written so far.
    fn ask(&mut self, command: &str) -> u64 {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("the writer answered {line:?} to {command}"))
    }

    /// Write `n` records now; the records written so far.
    pub fn write(&mut self, n: u64) -> u64 {
        self.ask(&format!("write {n}"))
    }

    /// Write `per_second` records a second until `pause`.
    pub fn rate(&mut self, per_second: u64) {
        self.ask(&format!("rate {per_second}"));
    }

    /// Stop writing at a rate; the records written so far.
    pub fn pause(&mut self) -> u64 {
        self.ask("pause")
    }

    /// SIGHUP: the application reopens the file at its path, as a `postrotate` script asks.
    pub fn hup(&mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
        self.write(0); // the signal is handled before the next command is answered
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for AppWriter {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// logrotate on one log, with the directives the test gives (`create`, `copytruncate`,
/// `olddir old`…), forced on every run, with a state file of its own.
pub struct Logrotate {
    conf: PathBuf,
    state: PathBuf,
}

impl Logrotate {
    pub fn new(dir: &Path, name: &str, log: &Path, directives: &str) -> Self {
        let conf = dir.join(format!("{name}.logrotate.conf"));
        std::fs::write(
            &conf,
            format!(
                "{} {{\n    rotate 99\n    missingok\n    ifempty\n{directives}\n}}\n",
                log.display()
            ),
        )
        .unwrap();
        Logrotate {
            conf,
            state: dir.join(format!("{name}.logrotate.state")),
        }
    }

    /// `logrotate -f -s STATE CONF`; fails the test with logrotate's words if it fails.
    pub fn run(&self) {
        let bin = super::require_binary("logrotate", "logrotate");
        let out = Command::new(bin)
            .arg("-f")
            .arg("-s")
            .arg(&self.state)
            .arg(&self.conf)
            .output()
            .unwrap();
        assert!(out.status.success(), "logrotate failed: {}", super::output_text(&out));
    }
}

/// The record numbers the log files below `dir` (`app*`: every rotation, `olddir`s
/// included) hold, each once: what an exact tailer can count after logrotate did its part.
pub fn records_held(dir: &Path) -> BTreeSet<u64> {
    let mut held = BTreeSet::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && name != "state" {
                dirs.push(path);
            } else if name.starts_with("app") {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                for line in text.lines() {
                    if let Some(n) = line.rsplit_once("key=wf:lock:").and_then(|(_, n)| n.parse().ok()) {
                        held.insert(n);
                    }
                }
            }
        }
    }
    held
}

/// A directory with a `lockwatch serve` config whose `[[logs]]` source `app` reads
/// `app.log` from its beginning with saved offsets, plus `extra` keys of the source.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    pub config: PathBuf,
    pub port: u16,
    runs: u32,
}

impl Setup {
    pub fn new(redis_url: &str, extra: &str) -> Self {
        Setup::reading(redis_url, "app.log", extra)
    }

    /// The same, the source reading `glob` (relative to the directory).
    pub fn reading(redis_url: &str, glob: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = lockwatch::access::child::free_port().unwrap();
        let log = dir.path().join("app.log");
        let config = dir.path().join("lockwatch.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:{port}\"\n[[target]]\nname = \"main\"\nurl = \"{redis_url}\"\nnotifications = \"off\"\n{NAMESPACES}\n\
                 [[logs]]\nname = \"app\"\npath = \"{glob}\"\nstart_at = \"beginning\"\n{extra}\n[state]\ndir = \"state\"\n"
            ),
        )
        .unwrap();
        Setup {
            dir,
            log,
            config,
            port,
            runs: 0,
        }
    }

    /// Start `lockwatch serve` (`bin`, or this build's), its log in `runN.log`.
    pub fn serve(&mut self, bin: Option<&Path>) -> Proc {
        self.runs += 1;
        let log = self.dir.path().join(format!("run{}.log", self.runs));
        let bin = bin.map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_lockwatch")), Path::to_path_buf);
        spawn_serve_with(&bin, &self.config, &log, self.port, Stdio::null())
    }

    /// Every run's log, for what lockwatch said.
    pub fn said(&self) -> String {
        (1..=self.runs)
            .map(|i| std::fs::read_to_string(self.dir.path().join(format!("run{i}.log"))).unwrap_or_default())
            .collect()
    }
}

/// `workflow`'s not-owned releases: the writer's records counted.
pub async fn counted(p: &Proc) -> u64 {
    not_owned(&p.metrics().await, "workflow") as u64
}

/// Wait until `want` records are counted, then a while more to see nothing else is; what
/// was counted in the end. Gives up after 20 s, or 5 s without a change (a build that
/// loses records never gets there).
pub async fn settle_counted(p: &Proc, want: u64) -> u64 {
    let started = Instant::now();
    let (mut last, mut since) = (u64::MAX, Instant::now());
    loop {
        let now = counted(p).await;
        if now != last {
            (last, since) = (now, Instant::now());
        }
        if now >= want || since.elapsed() > Duration::from_secs(5) || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    counted(p).await
}

/// `lockwatch_log_files_not_reopened` of source `app`.
pub async fn not_reopened(p: &Proc) -> f64 {
    p.metrics()
        .await
        .val("lockwatch_log_files_not_reopened", &[("source", "app")])
}

/// Wait until `pred` holds of `p`'s metrics, or fail saying `what`.
pub async fn wait_until(p: &Proc, limit: Duration, what: &str, pred: impl Fn(&super::Metrics) -> bool) {
    let started = Instant::now();
    loop {
        let m = p.metrics().await;
        if pred(&m) {
            return;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `GET /api/v1/status` as JSON.
pub async fn status(p: &Proc) -> serde_json::Value {
    let (code, _, body) = super::http_get(([127, 0, 0, 1], p.port).into(), "/api/v1/status").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}
