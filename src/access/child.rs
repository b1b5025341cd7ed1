//! A private `redis-server` child process on a free loopback port, in a temporary
//! directory that goes away with it. Used by `lockwatch demo` and by the tests.
//!
//! It is killed when dropped; `stop` and `restart` (same port) let fault tests take Redis
//! away under a running exporter.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get `redis-server` on Debian and Ubuntu.
pub const INSTALL_HINT: &str = "install it with `sudo apt-get install redis-server` (Debian/Ubuntu), or run `make test` / `make demo`, which install it";

#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("redis-server not found (looked for {looked}): {INSTALL_HINT}")]
    NotFound { looked: String },
    #[error("cannot start {path}: {source}")]
    Spawn { path: PathBuf, source: std::io::Error },
    #[error("{} did not answer PING on port {port} within {secs} s; its log: {log}", binary.display())]
    NotReady {
        binary: PathBuf,
        port: u16,
        secs: u64,
        log: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub struct RedisChild {
    binary: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

/// Find `redis-server`: an explicit path, `LOCKWATCH_REDIS_SERVER`, PATH, then where Debian puts it.
pub fn find_redis_server(explicit: Option<&Path>) -> Result<PathBuf, ChildError> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(ChildError::NotFound {
                looked: p.display().to_string(),
            })
        };
    }
    if let Some(p) = std::env::var_os("LOCKWATCH_REDIS_SERVER") {
        return find_redis_server(Some(Path::new(&p)));
    }
    let mut looked = Vec::new();
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    for dir in path_dirs.iter().map(PathBuf::as_path).chain([
        Path::new("/usr/bin"),
        Path::new("/usr/sbin"),
        Path::new("/usr/local/bin"),
    ]) {
        let candidate = dir.join("redis-server");
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    looked.dedup();
    Err(ChildError::NotFound {
        looked: looked.join(", "),
    })
}

/// A port nobody listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl RedisChild {
    /// Start redis-server with persistence off plus `extra` arguments (e.g.
    /// `["--notify-keyspace-events", "KEA"]`), and wait until it answers PING.
    pub fn start(binary: Option<&Path>, extra: &[&str]) -> Result<Self, ChildError> {
        let binary = find_redis_server(binary)?;
        let dir = tempfile::Builder::new().prefix("lockwatch-redis-").tempdir()?;
        let mut child = RedisChild {
            binary,
            dir,
            port: free_port()?,
            args: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        // Another server may take the port between `free_port` and the bind (tests start
        // many at once): then ours exits, and it starts again on another port.
        for attempt in 1.. {
            match child.spawn() {
                Ok(()) => break,
                Err(ChildError::NotReady { .. }) if attempt < 5 => child.port = free_port()?,
                Err(e) => return Err(e),
            }
        }
        Ok(child)
    }

    fn spawn(&mut self) -> Result<(), ChildError> {
        let log = self.dir.path().join("redis.log");
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .args(&self.args)
            .stdin(Stdio::null());
        // What it says before its log file is open (a refused option) goes to a file too.
        let early = std::fs::File::create(self.dir.path().join("output.log"))?;
        cmd.stdout(early.try_clone()?).stderr(early);
        let child = cmd.spawn().map_err(|source| ChildError::Spawn {
            path: self.binary.clone(),
            source,
        })?;
        self.child = Some(child);
        let limit = Duration::from_secs(10);
        let started = Instant::now();
        while started.elapsed() < limit {
            // Our child must still be running, or a PONG could come from someone else's server.
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                break;
            }
            if ping(self.port) {
                if self.answering_is_ours() {
                    return Ok(());
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let last = |name: &Path| {
            let text = std::fs::read_to_string(name).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            lines[lines.len().saturating_sub(3)..].join(" / ")
        };
        let mut said = last(&log);
        if said.is_empty() {
            said = last(&self.dir.path().join("output.log"));
        }
        self.stop();
        Err(ChildError::NotReady {
            binary: self.binary.clone(),
            port: self.port,
            secs: limit.as_secs(),
            log: said,
        })
    }

    /// Whether the server that answered on our port is our child, not another process's
    /// server that had the port first (ours then fails to bind and exits within moments).
    fn answering_is_ours(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(100));
        let Some(child) = self.child.as_mut() else { return false };
        if !matches!(child.try_wait(), Ok(None)) {
            return false;
        }
        server_pid(self.port).is_none_or(|pid| pid == child.id())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id while it runs (to pause it with SIGSTOP in tests).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kill the server (SIGKILL: as abrupt as a crash) and wait for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port, empty.
    pub fn restart(&mut self) -> Result<(), ChildError> {
        self.stop();
        self.spawn()
    }

    /// Start it again on the same port, empty, with `extra` arguments in place of the
    /// first ones (a server restarted with another setting, as after an upgrade).
    pub fn restart_with(&mut self, extra: &[&str]) -> Result<(), ChildError> {
        self.args = extra.iter().map(|s| s.to_string()).collect();
        self.restart()
    }
}

impl Drop for RedisChild {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `process_id` that `INFO server` on `port` reports; `None` when it cannot be asked
/// (a password) or did not say.
fn server_pid(port: u16) -> Option<u32> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.windows(11).any(|w| w == b"process_id:") || !reply.ends_with(b"\r\n") {
        let n = s.read(&mut buf).ok()?;
        reply.extend_from_slice(&buf[..n]);
        if n == 0 || reply.len() > 64 * 1024 || reply.first() == Some(&b'-') {
            return None;
        }
    }
    let text = String::from_utf8_lossy(&reply);
    let line = text.lines().find_map(|l| l.strip_prefix("process_id:"))?;
    line.trim().parse().ok()
}

/// Does a Redis on `port` answer `PING`? `+PONG`, or `-NOAUTH` from one with a password.
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && (&buf == b"+PONG\r\n" || &buf == b"-NOAUTH")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_server_already_on_the_port_is_not_taken_for_ours() {
        let first = RedisChild::start(None, &[]).unwrap();
        assert_eq!(server_pid(first.port()), first.pid());
        // A second server told to use the same port fails to bind and exits; the PONG of
        // the first must not make it look started.
        let mut second = RedisChild {
            binary: first.binary.clone(),
            dir: tempfile::tempdir().unwrap(),
            port: first.port(),
            args: Vec::new(),
            child: None,
        };
        assert!(matches!(second.spawn(), Err(ChildError::NotReady { .. })));
        // `start` picks another port then.
        let third = RedisChild::start(None, &[]).unwrap();
        assert_ne!(third.port(), first.port());
        assert_eq!(server_pid(third.port()), third.pid());
    }
}
